// An ideal two-GPU node for the simulator's overlap tests (tp_overlap_test.cc,
// overlaps_communication_test.cc): 1 node x 2 GPUs at 100 TFLOP/s bf16, HBM and host links
// fast enough never to bind, every latency 0, so a test's expected times follow from the
// compute FLOPs and the fabric's bandwidth alone.
#pragma once

#include <string>

#include "src/hardware/hardware_spec.h"
#include "src/util/check.h"

namespace shardsim::testing {

// The YAML, with `gpu_extra` (indented lines) appended to the gpu section.
inline std::string TwoGpuNodeYaml(const std::string& fabric_bandwidth,
                                  const std::string& gpu_extra = "") {
  return R"(name: two
source: test
nodes: 1
gpu:
  name: test
  peak: {bf16: "100 TFLOP/s"}
  memory: "80 GiB"
  memory_bandwidth: "1000000 TB/s"
  sm_count: 100
  efficiency: {matmul: 1.0, attention: 1.0, memory: 1.0, kernel_latency: "0 us"}
)" + gpu_extra +
         R"(node:
  gpus: 2
  fabric: {kind: nvswitch, bandwidth: ")" +
         fabric_bandwidth + R"(", efficiency: 1.0, latency: "0 us"}
  host: {memory: "1 TiB", memory_bandwidth: "1000000 TB/s", link_bandwidth: "1000000 TB/s", link_latency: "0 us"}
)";
}

inline HardwareSpec TwoGpuNode(const std::string& fabric_bandwidth,
                               const std::string& gpu_extra = "") {
  StatusOr<HardwareSpec> hw =
      ParseHardwareYaml(TwoGpuNodeYaml(fabric_bandwidth, gpu_extra), "two");
  CHECK(hw.ok()) << hw.status().message();
  return *hw;
}

}  // namespace shardsim::testing
