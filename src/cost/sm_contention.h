// NCCL's kernels run on the SMs: while a collective or a send is in flight on a rank's
// communication streams, its kernel holds one thread block per channel, and each block an SM
// that the compute stream's kernels cannot use. NCCL launches a grid of nChannels blocks
// (src/enqueue.cc: `dim3 grid = {(unsigned)nChannels, 1, 1}`) of up to 640 threads
// (NCCL_MAX_NTHREADS, src/include/device.h) built with launch bounds for one block per SM; a
// bf16/fp8 GEMM's block on sm80/sm90 takes most of an SM's registers and shared memory, so the
// two do not share an SM, and a GEMM launched beside an all-gather of 24 blocks on an H100
// ran its 132 tiles in two waves (NVIDIA developer forum, "Compute-Communication Overlap
// Causes Severe GEMM Performance Degradation because of Tail Effect", 2025). The compute
// stream therefore runs at (SMs - held) / SMs of its rate while NCCL's blocks are resident
// (from the kernel's launch, when the rank reaches the collective, to its end). The event
// simulator applies it (src/sim/simulator.cc); the estimate's critical path leaves it out, so
// it stays a lower bound (docs/simulator.md, "NCCL's SMs").
//
// Blocks per call (NCCL 2.2x, src/enqueue.cc topoGetAlgoInfo and src/graph/paths.cc, @ the
// NVIDIA/nccl master of 2026-11):
//   - a ring or tree collective opens the communicator's channels (gpu.nccl_channels) and
//     drops one while the message is under channels x threads x threadThreshold: Simple's 512
//     threads x 64 bytes (NCCL_SIMPLE_MAX_NTHREADS, NCCL_SIMPLE_THREAD_THRESHOLD), 32 KiB per
//     channel; ASSUMPTION: Simple's threshold for every message (LL's and LL128's are lower,
//     8 bytes a thread, and LL's scales with the ranks), so small messages may hold more;
//   - a send to a GPU of the same node over NVLink: 2 x (path bandwidth / one link's) channels,
//     at least the communicator's channels on an NVSwitch node (ncclTopoGetNchannels); to
//     another node: max(NICs, NIC bandwidth / 14 GB/s, P2P_PER_CHANNEL_NET_BW) per peer,
//     rounded up to a power of two (ncclTopoComputeP2pChannels); one NIC per GPU assumed.
// Not priced: the HBM bandwidth NCCL's copies take from memory-bound kernels; the receiving
// side's kernel of a send; Transformer Engine's userbuffers (overlap_tp=on), whose SMs the
// row-parallel GEMMs already give up (src/cost/layer_plan.cc RowParallelOverlapFactor).
#pragma once

#include <cstdint>

#include "src/cost/task.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"

namespace shardsim {

// Whether the simulator prices compute beside NCCL's kernels: a GPU that overlaps
// communication, with SMs and NCCL channels in its description.
bool PricesSmContention(const HardwareSpec& hw);

// The SMs task `t` (a collective or a send; 0 for anything else) holds while it runs.
// `crosses_nodes`: for a send, whether its peer is on another node.
int64_t NcclKernelSms(const HardwareSpec& hw, const Layout& l, const TaskSpec& t, bool crosses_nodes);

// The compute stream's rate, as a share of its rate alone, while NCCL's kernels hold
// `held_sms` SMs: (SMs - held) / SMs, at least one SM's share.
double ComputeRateBesideNccl(const GpuSpec& gpu, int64_t held_sms);

}  // namespace shardsim
