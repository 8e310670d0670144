// HardwareSpec: one cluster's description (GPU, node, network) as read from hardware/*.yaml.
// Quantities are SI base units (bytes, bytes/s, FLOP/s, seconds); see docs/hardware.md.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/util/status.h"

namespace shardsim {

enum class DType { kFp64, kFp32, kTf32, kFp16, kBf16, kFp8 };
std::string DTypeName(DType d);
// Bytes per element when stored (tf32 is stored as fp32).
double DTypeBytes(DType d);

class GemmTable;  // src/cost/gemm_table.h

struct GpuEfficiency {
  double matmul = 1.0;        // fraction of peak reached by large GEMMs
  // Fraction of the fp8 peak reached by large fp8 GEMMs; 0 (absent): `matmul`. Hopper's fp8
  // GEMMs reach a lower fraction of their (doubled) peak than bf16 ones (REFERENCES 4.1).
  double matmul_fp8 = 0;
  double attention = 1.0;     // fraction of peak reached by fused attention
  // The fused attention kernel's measured forward + backward rate by sequence length, as
  // (sequence length, fraction of the 16-bit peak) in ascending length (efficiency.
  // attention_seq_lens and attention_tflops): when set, a kernel over sequences of s keys runs
  // at the interpolation in log2(s) (held at the ends) instead of `attention`. Empty (absent):
  // `attention` at every length.
  std::vector<std::pair<int64_t, double>> attention_by_seq;
  // The fused attention kernel's fraction of the 16-bit peak for sequences of `seq` keys.
  double AttentionAt(int64_t seq) const;
  // FlashAttention (v1)'s measured rate at the same lengths (efficiency.attention_v1_tflops,
  // priced for attention=flash1); empty (absent): the description has none, and
  // attention=flash1 is refused on it (src/layout/validate.cc).
  std::vector<std::pair<int64_t, double>> attention_v1_by_seq;
  double AttentionV1At(int64_t seq) const;
  // cuDNN's fused flash attention at the same lengths (efficiency.attention_cudnn_tflops,
  // priced for attention=cudnn); empty (absent): refused likewise.
  std::vector<std::pair<int64_t, double>> attention_cudnn_by_seq;
  double AttentionCudnnAt(int64_t seq) const;
  // The kernels' rate tables beside attention_by_seq with their YAML fields, at the same
  // attention_seq_lens: what the reader fills and a plan file writes back.
  using RateTable = std::vector<std::pair<int64_t, double>> GpuEfficiency::*;
  static constexpr std::pair<const char*, RateTable> kOtherAttentionTables[] = {
      {"attention_v1_tflops", &GpuEfficiency::attention_v1_by_seq},
      {"attention_cudnn_tflops", &GpuEfficiency::attention_cudnn_by_seq}};
  double memory = 1.0;        // fraction of HBM bandwidth reached by streaming kernels
  double kernel_latency_s = 0;  // fixed cost per kernel
  int64_t tile_m = 128, tile_n = 128;  // GEMM output tile, for wave quantization
  // The head sizes the fused attention kernel is compiled for, ascending (FlashAttention-2's
  // HEADDIM_SWITCH: 32, 64, 96, ..., 256): a head size runs the kernel of the smallest not
  // below it, its loads padded and its MMAs over the whole size, so attention executes
  // FLOPs in that ratio (a head of 80 at 96: 1.2x). Empty (absent): as given.
  std::vector<int64_t> attention_head_dims;
  // Measured bf16 GEMM rates by shape (efficiency.matmul_table): when set, 16-bit GEMMs are
  // priced by interpolation in it instead of peak x matmul x wave (src/cost/gemm_table.h),
  // and fp8 GEMMs take its shape factor. Null (absent): the scalar model. Loaded once and
  // shared by every copy of the description.
  std::shared_ptr<const GemmTable> matmul_table;
  // The table's path as a description written back (a plan file) should name it: as written
  // when the bundled hardware/ folder holds it (gemm/sm90-bf16.yaml), else absolute; empty
  // when there is no table.
  std::string matmul_table_path;
  // The fraction of the kernel benchmarks' math rate (GEMMs and attention) that a training run
  // sustains: the one global parameter fitted to published runs, per GPU, by `validate
  // --published --fits-out` (docs/validation/compute-fits.yaml, src/report/compute_fit.h),
  // which the commands apply unless --unfitted. It stands for what the structural model leaves
  // out (clocks under a whole node's power limit, kernels between the modelled ones), not for
  // one measured effect. Absent: 1, the structural model; a description that sets it keeps it.
  std::optional<double> sustained_compute;
  double sustained() const { return sustained_compute.value_or(1.0); }
  // Where sustained_compute came from, for the report (src/report/compute_fit.h): empty, the
  // description; "fit", the published-run fit; "unfitted", --unfitted; "no-fit", no fit for
  // this GPU.
  std::string sustained_compute_origin;
};

// ASSUMPTION: 10 %. GMLake (Guo et al., ASPLOS 2024, arXiv:2401.08156) measured PyTorch's
// caching allocator on A100-80GB over eight LLM training workloads with ZeRO, recomputation and
// offload: their stitching recovered 15 % of the memory on average (up to 33 %, 9.2 GB average,
// 25 GB most), so at least that much was fragmented there; pre-training with fixed shapes
// allocates more regularly, so less is lost. Calibrate with torch.cuda.memory_stats
// (reserved_bytes.all.peak against allocated_bytes.all.peak).
inline constexpr double kDefaultMemoryFragmentation = 0.10;

struct GpuSpec {
  std::string name;
  // The GPU architecture as CUDA names it (sm80, sm90); optional. GPUs of one architecture
  // share the fitted sustained_compute (src/report/compute_fit.h). Empty: the name stands in.
  std::string architecture;
  const std::string& FitKey() const { return architecture.empty() ? name : architecture; }
  std::map<DType, double> peak_flops;  // dense FLOP/s per dtype; absent = unsupported
  double memory_bytes = 0;
  double memory_bandwidth = 0;  // bytes/s
  // exp/tanh evaluations per second in element-wise kernels, added to their memory time;
  // 0 (absent) where they hide under memory traffic (GPUs' special-function units).
  double transcendental_rate = 0;
  int64_t sm_count = 1;
  double reserved_memory_bytes = 0;
  // The channels an NCCL communicator opens on this GPU (gpu.nccl_channels; 0, absent: no NCCL,
  // and no NCCL buffers priced). Each channel holds a set of protocol buffers per peer it
  // receives from (src/cost/memory.cc NcclBufferBytes), and while a call runs, one SM beside
  // the compute (src/cost/sm_contention.h).
  int64_t nccl_channels = 0;
  // Fraction of the allocator's memory (capacity minus reserved) lost to fragmentation: what
  // a caching allocator holds but cannot hand out. Default kDefaultMemoryFragmentation.
  double memory_fragmentation = kDefaultMemoryFragmentation;
  // The largest per-rank total (reserved memory included) that fits: reserved + (capacity -
  // reserved) x (1 - fragmentation). Every "fits" verdict compares with this.
  double UsableMemoryBytes() const {
    return reserved_memory_bytes + (memory_bytes - reserved_memory_bytes) * (1 - memory_fragmentation);
  }
  // What the device shows in use (nvidia-smi) when the busiest rank's peak, reserved memory
  // included, is `peak_bytes`: the reserved memory plus the allocator's holding of the rest,
  // peak / (1 - fragmentation). A peak fits exactly when this is at most memory_bytes.
  double DeviceMemoryInUse(double peak_bytes) const {
    return reserved_memory_bytes + (peak_bytes - reserved_memory_bytes) / (1 - memory_fragmentation);
  }
  // What the framework's caching allocator holds at that peak (PyTorch's
  // torch.cuda.max_memory_reserved, what torchtitan logs as memory): the peak less what is
  // allocated outside it (reserved_memory's context, NCCL's own buffers), with its
  // fragmentation share.
  double AllocatorReserved(double peak_bytes, double nccl_buffer_bytes) const {
    return (peak_bytes - reserved_memory_bytes - nccl_buffer_bytes) / (1 - memory_fragmentation);
  }
  GpuEfficiency efficiency;
  // Whether the device's collectives and pipeline sends run beside its compute (true: GPUs,
  // whose NCCL kernels and copy engines run next to compute kernels) or on the same engine,
  // serialised with it (false: a CPU core whose MPI progresses only inside its own MPI calls).
  // When false the simulator runs communication on the compute stream and the estimate hides
  // none of it; the overlap switches then change no time. Default true.
  bool overlaps_communication = true;
  // Peak for a dtype's matmuls, or nullopt if the device has none.
  std::optional<double> Peak(DType d) const;
  // The 16-bit matmul peak (bf16, else fp16) that efficiency.attention_tflops is a share of,
  // or nullopt if the device has neither.
  std::optional<double> Peak16() const;
};

enum class FabricKind { kNvSwitch, kNvLink, kPcie, kSharedMemory };

struct FabricSpec {
  FabricKind kind = FabricKind::kNvSwitch;
  double bandwidth = 0;   // per GPU, per direction, line rate, bytes/s
  double efficiency = 1;  // achievable fraction
  double latency_s = 0;   // one GPU-to-GPU step
  double effective_bandwidth() const { return bandwidth * efficiency; }
};

struct HostSpec {
  double memory_bytes = 0;
  double memory_bandwidth = 0;
  double link_bandwidth = 0;  // per GPU, per direction
  double link_latency_s = 0;
  // Host CPU time to launch one kernel through the framework (`launch_overhead`): PyTorch's
  // dispatch of one eager op and its cudaLaunchKernel. The host issues a pass's kernels no
  // faster than that (layer_plan.cc HostFloor); 0 where the description does not say.
  double launch_s = 0;
};

struct NodeSpec {
  int64_t gpus = 1;
  FabricSpec fabric;
  HostSpec host;
};

enum class NetworkTopology { kFatTree, kRailOptimized };

struct NetworkSpec {
  int64_t nics = 1;
  double nic_bandwidth = 0;  // per NIC, per direction, line rate
  double nic_efficiency = 1;
  double latency_s = 0;         // NIC to NIC through one switch
  double switch_latency_s = 0;  // each extra switch hop
  NetworkTopology topology = NetworkTopology::kFatTree;
  int64_t nodes_per_switch = 1;
  double oversubscription = 1;
  double effective_nic_bandwidth() const { return nic_bandwidth * nic_efficiency; }
};

// One of NCCL's low-latency protocols beside Simple (the protocol every other latency and
// bandwidth of the description is of): LL (8-byte stores of 4 data bytes and a flag) or LL128
// (128-byte lines of 120 data bytes), which the collective model offers the ring algorithm
// as NCCL's tuner does, cheapest per size (src/cost/collective.h; NCCL src/graph/tuning.cc,
// REFERENCES.md 2.2-2.4).
enum class CollectiveProtocol { kSimple, kLl, kLl128 };
const char* ProtocolName(CollectiveProtocol p);
// A protocol's figures on NCCL's double binary tree (an all-reduce across nodes).
struct TreeProtocolSpec {
  double base_latency_s = 0;    // per call (NCCL baseLat[Tree][p])
  double fabric_latency_s = 0;  // per step of the intra-node chain (hwLat[NVLINK][Tree][p])
  double bandwidth_factor = 1;  // of the Simple tree's bus bandwidth (LL 1/3.8, LL128 120/128)
  // Cap per channel (x gpu.nccl_channels) by the nodes the group spans, 0 where none (NCCL
  // perChMaxTreeLL128Bws).
  double max_channel_busbw_two_nodes = 0, max_channel_busbw_more_nodes = 0;
};

struct ProtocolSpec {
  CollectiveProtocol protocol = CollectiveProtocol::kLl;
  double base_latency_s = 0;    // per call, in place of collective_base_latency_s (NCCL baseLat[Ring][p])
  double fabric_latency_s = 0;  // per step of a ring inside a node, in place of the fabric's latency (hwLat[NVLINK][Ring][p])
  double bandwidth_factor = 1;  // of the Simple ring's bus bandwidth (LL 0.5, LL128 0.92)
  // Caps on the bus bandwidth, 0 where none: by the nodes the group spans (1, 2, 3 or more;
  // NCCL llMaxBws), and per channel (x gpu.nccl_channels; NCCL perChMaxRingLL128Bws).
  double max_busbw_one_node = 0, max_busbw_two_nodes = 0, max_busbw_more_nodes = 0;
  double max_channel_busbw = 0;
  // The tree under this protocol (`tree:`); none: the tree is not priced under it.
  std::optional<TreeProtocolSpec> tree;
};

struct HardwareSpec {
  std::string name;
  std::string source;
  int64_t nodes = 1;
  GpuSpec gpu;
  NodeSpec node;
  std::optional<NetworkSpec> network;
  double collective_base_latency_s = 0;  // fixed cost per collective call
  std::vector<ProtocolSpec> collective_protocols;  // beside Simple; none: Simple only
  std::optional<double> price_per_gpu_hour;
  int64_t total_gpus() const { return nodes * node.gpus; }
};

// Strict loader for hardware/*.yaml; a bare name is looked up in the bundled hardware/ folder.
StatusOr<HardwareSpec> LoadHardware(const std::string& path_or_name);
StatusOr<HardwareSpec> ParseHardwareYaml(const std::string& text, const std::string& name);

// The what-if `--nodes N` on a loaded cluster: at least 1, at most kMaxGpus GPUs in all
// (src/util/limits.h), and more than one only with a network section to join them.
Status SetNodes(HardwareSpec& hw, int64_t nodes);

}  // namespace shardsim
