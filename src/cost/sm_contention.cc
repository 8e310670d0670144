// See sm_contention.h.
#include "src/cost/sm_contention.h"

#include <algorithm>
#include <cmath>

namespace shardsim {
namespace {

// NCCL_SIMPLE_MAX_NTHREADS x NCCL_SIMPLE_THREAD_THRESHOLD (src/include/device.h, comm.h):
// a ring or tree call keeps a channel per this many bytes of its message.
constexpr double kBytesPerChannel = 512.0 * 64.0;
// NCCL_P2P_PER_CHANNEL_NET_BW's default, GB/s (src/graph/paths.cc).
constexpr double kP2pNetBytesPerChannel = 14e9;

int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

bool PricesSmContention(const HardwareSpec& hw) {
  return hw.gpu.overlaps_communication && hw.gpu.sm_count > 1 && hw.gpu.nccl_channels > 0;
}

int64_t NcclKernelSms(const HardwareSpec& hw, const Layout& l, const TaskSpec& t, bool crosses_nodes) {
  const int64_t channels = hw.gpu.nccl_channels;
  if (channels <= 0) return 0;
  if (t.kind == TaskKind::kCollective) {
    // Transformer Engine's userbuffers run overlap_tp=on's TP collectives on the SMs the
    // row-parallel GEMMs already leave them.
    if (t.group == GroupKind::kTp && l.overlap_tp == TpOverlap::kOn) return 0;
    const double by_size = std::floor(std::max(0.0, t.bytes) / kBytesPerChannel);
    return std::clamp<int64_t>(static_cast<int64_t>(std::min(by_size, static_cast<double>(channels))), 1, channels);
  }
  if (t.kind == TaskKind::kSend) {
    if (!crosses_nodes || !hw.network) return channels;
    const int64_t nic = static_cast<int64_t>(std::ceil(hw.network->nic_bandwidth / kP2pNetBytesPerChannel));
    return std::min(channels, PowerOfTwoAtLeast(std::max<int64_t>(1, nic)));
  }
  return 0;
}

double ComputeRateBesideNccl(const GpuSpec& gpu, int64_t held_sms) {
  if (held_sms <= 0 || gpu.sm_count <= 1) return 1;
  const int64_t free_sms = std::max<int64_t>(1, gpu.sm_count - held_sms);
  return static_cast<double>(free_sms) / static_cast<double>(gpu.sm_count);
}

}  // namespace shardsim
