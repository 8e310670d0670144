// Strict loader for hardware/*.yaml (schema: docs/hardware.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/cost/gemm_table.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/bundled.h"
#include "src/io/yaml_reader.h"
#include "src/util/atomic_file.h"
#include "src/util/limits.h"

namespace shardsim {

std::string DTypeName(DType d) {
  switch (d) {
    case DType::kFp64: return "fp64";
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
  }
  return "?";
}

const char* ProtocolName(CollectiveProtocol p) {
  switch (p) {
    case CollectiveProtocol::kSimple: return "simple";
    case CollectiveProtocol::kLl: return "ll";
    case CollectiveProtocol::kLl128: return "ll128";
  }
  return "?";
}

double DTypeBytes(DType d) {
  switch (d) {
    case DType::kFp64: return 8;
    case DType::kFp32:
    case DType::kTf32: return 4;
    case DType::kFp16:
    case DType::kBf16: return 2;
    case DType::kFp8: return 1;
  }
  return 0;
}

namespace {

// A measured rate by sequence length at `seq`: held at the ends, and between two measured
// lengths linear in log2 of the length (the benchmarks double it).
double RateAt(const std::vector<std::pair<int64_t, double>>& table, int64_t seq) {
  if (seq <= table.front().first) return table.front().second;
  if (seq >= table.back().first) return table.back().second;
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& [s1, e1] = table[i];
    if (seq > s1) continue;
    const auto& [s0, e0] = table[i - 1];
    const double x = std::log2(static_cast<double>(seq) / static_cast<double>(s0)) /
                     std::log2(static_cast<double>(s1) / static_cast<double>(s0));
    return e0 + (e1 - e0) * x;
  }
  return table.back().second;
}

}  // namespace

double GpuEfficiency::AttentionAt(int64_t seq) const {
  return attention_by_seq.empty() ? attention : RateAt(attention_by_seq, seq);
}

double GpuEfficiency::AttentionV1At(int64_t seq) const {
  return attention_v1_by_seq.empty() ? 0 : RateAt(attention_v1_by_seq, seq);
}

double GpuEfficiency::AttentionCudnnAt(int64_t seq) const {
  return attention_cudnn_by_seq.empty() ? 0 : RateAt(attention_cudnn_by_seq, seq);
}

std::optional<double> GpuSpec::Peak(DType d) const {
  auto it = peak_flops.find(d);
  if (it == peak_flops.end()) return std::nullopt;
  return it->second;
}

std::optional<double> GpuSpec::Peak16() const {
  const std::optional<double> bf16 = Peak(DType::kBf16);
  return bf16 ? bf16 : Peak(DType::kFp16);
}

namespace {

namespace fs = std::filesystem;

// efficiency.matmul_table's file: an absolute path as is; a relative one next to the
// description (`description` is its file name), else in the bundled hardware/ folder, so
// descriptions read from a string or embedded in a plan file find the bundled tables
// (BundledFolder). `portable` is what a description written back (a plan file) should name: the
// path as written when it is found in the bundled folder, else the absolute path found.
struct TablePath {
  std::string path, portable;
};
TablePath ResolveTablePath(const std::string& written, const std::string& description) {
  const fs::path p(written);
  if (p.is_absolute()) return {written, written};
  std::error_code ec;
  const fs::path bundled = fs::path(BundledFolder("hardware")) / p;
  const bool in_bundled = fs::exists(bundled, ec);
  const fs::path beside = fs::path(description).parent_path() / p;
  if (fs::exists(beside, ec)) {
    const bool same = in_bundled && fs::equivalent(beside, bundled, ec);
    return {beside.string(), same ? written : fs::absolute(beside, ec).string()};
  }
  if (in_bundled) return {bundled.string(), written};
  return {beside.string(), written};  // missing: GemmTable::Load reports it
}

void ReadMatmulTable(YamlMap& e, const std::string& description, GpuEfficiency& eff) {
  std::optional<std::string> written = e.OptionalString("matmul_table");
  if (!written) return;
  const TablePath path = ResolveTablePath(*written, description);
  StatusOr<std::shared_ptr<const GemmTable>> table = GemmTable::Load(path.path);
  if (!table.ok()) {
    e.Error("matmul_table", "cannot load the GEMM table '" + *written + "': " + table.status().message());
    return;
  }
  eff.matmul_table = *table;
  eff.matmul_table_path = path.portable;
}

GpuSpec ReadGpu(YamlMap g, const std::string& description) {
  GpuSpec gpu;
  gpu.name = g.String("name");
  gpu.architecture = g.OptionalString("architecture").value_or("");
  YamlMap peak = g.Map("peak");
  for (DType d : {DType::kFp64, DType::kFp32, DType::kTf32, DType::kFp16, DType::kBf16,
                  DType::kFp8}) {
    if (auto v = peak.OptionalQuantity(DTypeName(d), Dimension::kFlopRate)) {
      gpu.peak_flops[d] = *v;
    }
  }
  peak.Finish();
  gpu.memory_bytes = g.Quantity("memory", Dimension::kBytes);
  gpu.memory_bandwidth = g.Quantity("memory_bandwidth", Dimension::kBandwidth);
  gpu.transcendental_rate = g.OptionalQuantity("transcendental_rate", Dimension::kFlopRate).value_or(0);
  gpu.sm_count = g.Int("sm_count");
  gpu.reserved_memory_bytes = g.OptionalQuantity("reserved_memory", Dimension::kBytes).value_or(0);
  // NCCL's channel count is at most MAXCHANNELS, 64 (src/include/device.h, NCCL 2.2x).
  if (std::optional<long long> c = g.OptionalInt("nccl_channels", 0)) {
    if (*c > 64) {
      g.Error("nccl_channels", "expected at most 64 (NCCL's MAXCHANNELS), found " + std::to_string(*c));
    } else {
      gpu.nccl_channels = *c;
    }
  }
  if (std::optional<double> f = g.OptionalNumber("memory_fragmentation", 0, 0.9)) gpu.memory_fragmentation = *f;
  YamlMap e = g.Map("efficiency");
  gpu.efficiency.matmul = e.Number("matmul", 1e-3, 1);
  gpu.efficiency.matmul_fp8 = e.OptionalNumber("matmul_fp8", 1e-3, 1).value_or(0);
  if (gpu.efficiency.matmul_fp8 > 0 && !gpu.Peak(DType::kFp8)) {
    e.Error("matmul_fp8", "given, but gpu.peak has no fp8 rate");
  }
  gpu.efficiency.attention = e.Number("attention", 1e-3, 1);
  gpu.efficiency.memory = e.Number("memory", 1e-3, 1);
  gpu.efficiency.kernel_latency_s = e.Quantity("kernel_latency", Dimension::kTime);
  gpu.efficiency.sustained_compute = e.OptionalNumber("sustained_compute", 0.05, 2);
  ReadMatmulTable(e, description, gpu.efficiency);
  if (auto tile = e.OptionalIntList("matmul_tile", 1)) {
    if (tile->size() == 2) {
      gpu.efficiency.tile_m = (*tile)[0];
      gpu.efficiency.tile_n = (*tile)[1];
    } else {
      e.Error("matmul_tile", "expected a list of two integers [m, n]");
    }
  }
  // The kernel's measured rate by sequence length: two lists of one length, the lengths
  // ascending, the rates in TFLOP/s of the 16-bit peak (the benchmark figures' labels).
  {
    const auto lens = e.OptionalIntList("attention_seq_lens", 1);
    const auto rates = e.OptionalIntList("attention_tflops", 1);
    const std::optional<double> peak = gpu.Peak16();
    // `field`'s rates, one a length, as fractions of the 16-bit peak into `out`.
    auto fractions = [&](const char* field, const std::vector<long long>& tflops,
                         std::vector<std::pair<int64_t, double>>& out) {
      for (size_t i = 0; i < lens->size(); ++i) {
        const double fraction = static_cast<double>(tflops[i]) * 1e12 / *peak;
        if (fraction > 1) {
          e.Error(field, std::to_string(tflops[i]) + " TFLOP/s is above the 16-bit peak");
          return;
        }
        out.emplace_back((*lens)[i], fraction);
      }
    };
    if (lens.has_value() != rates.has_value()) {
      e.Error(lens ? "attention_seq_lens" : "attention_tflops",
              "attention_seq_lens and attention_tflops go together: give both or neither");
    } else if (lens) {
      if (lens->size() != rates->size() || lens->size() < 2 || !std::is_sorted(lens->begin(), lens->end()) ||
          std::adjacent_find(lens->begin(), lens->end()) != lens->end() || lens->back() > kMaxSeqLen) {
        e.Error("attention_seq_lens", "expected two or more ascending sequence lengths, each at most " +
                                          std::to_string(kMaxSeqLen) + ", one for each of attention_tflops");
      } else if (!peak) {
        e.Error("attention_tflops", "given, but gpu.peak has no bf16 or fp16 rate to divide it by");
      } else {
        fractions("attention_tflops", *rates, gpu.efficiency.attention_by_seq);
      }
    }
    // Other kernels' rates at the same lengths: FlashAttention (v1)'s (attention=flash1) and
    // cuDNN's (attention=cudnn).
    for (const auto& [field, table] : GpuEfficiency::kOtherAttentionTables) {
      const auto other = e.OptionalIntList(field, 1);
      if (!other) continue;
      if (!lens || other->size() != lens->size()) {
        e.Error(field, "expected one rate for each of attention_seq_lens");
      } else if (peak && !gpu.efficiency.attention_by_seq.empty()) {
        fractions(field, *other, gpu.efficiency.*table);
      }
    }
  }
  if (auto dims = e.OptionalIntList("attention_head_dims", 1)) {
    if (dims->empty() || !std::is_sorted(dims->begin(), dims->end()) ||
        std::adjacent_find(dims->begin(), dims->end()) != dims->end() || dims->back() > kMaxWidth) {
      e.Error("attention_head_dims", "expected head sizes in ascending order, each at most " + std::to_string(kMaxWidth));
    } else {
      gpu.efficiency.attention_head_dims.assign(dims->begin(), dims->end());
    }
  }
  e.Finish();
  gpu.overlaps_communication = g.OptionalBool("overlaps_communication").value_or(true);
  g.Finish();
  if (gpu.peak_flops.empty()) g.Error("peak", "give at least one dtype's peak rate");
  if (gpu.reserved_memory_bytes >= gpu.memory_bytes) {
    g.Error("reserved_memory", "must be below gpu.memory");
  }
  return gpu;
}

NodeSpec ReadNode(YamlMap n) {
  NodeSpec node;
  node.gpus = n.Int("gpus");
  YamlMap f = n.Map("fabric");
  const std::string kind = f.Choice("kind", {"nvswitch", "nvlink", "pcie", "shared-memory"});
  node.fabric.kind = kind == "nvswitch" ? FabricKind::kNvSwitch
                     : kind == "nvlink" ? FabricKind::kNvLink
                     : kind == "pcie"   ? FabricKind::kPcie
                                        : FabricKind::kSharedMemory;
  node.fabric.bandwidth = f.Quantity("bandwidth", Dimension::kBandwidth);
  node.fabric.efficiency = f.Number("efficiency", 1e-3, 1);
  node.fabric.latency_s = f.Quantity("latency", Dimension::kTime);
  f.Finish();
  YamlMap h = n.Map("host");
  node.host.memory_bytes = h.Quantity("memory", Dimension::kBytes);
  node.host.memory_bandwidth = h.Quantity("memory_bandwidth", Dimension::kBandwidth);
  node.host.link_bandwidth = h.Quantity("link_bandwidth", Dimension::kBandwidth);
  node.host.link_latency_s = h.Quantity("link_latency", Dimension::kTime);
  node.host.launch_s = h.OptionalQuantity("launch_overhead", Dimension::kTime).value_or(0);
  // A kernel launch that costs the host a millisecond is no CPU's: bounded to catch a unit slip.
  if (node.host.launch_s > 1e-3) {
    h.Error("launch_overhead", "expected at most 1 ms per kernel launch (a few us on a server CPU)");
  }
  h.Finish();
  n.Finish();
  return node;
}

NetworkSpec ReadNetwork(YamlMap n) {
  NetworkSpec net;
  net.nics = n.Int("nics");
  net.nic_bandwidth = n.Quantity("nic_bandwidth", Dimension::kBandwidth);
  net.nic_efficiency = n.Number("nic_efficiency", 1e-3, 1);
  net.latency_s = n.Quantity("latency", Dimension::kTime);
  net.switch_latency_s = n.OptionalQuantity("switch_latency", Dimension::kTime).value_or(0);
  net.topology = n.Choice("topology", {"fat-tree", "rail-optimized"}) == "rail-optimized"
                     ? NetworkTopology::kRailOptimized
                     : NetworkTopology::kFatTree;
  net.nodes_per_switch = n.Int("nodes_per_switch");
  net.oversubscription = n.Number("oversubscription", 1, 1e6);
  n.Finish();
  return net;
}

}  // namespace

StatusOr<HardwareSpec> ParseHardwareYaml(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, name));
  YamlMap r = file.Root();
  HardwareSpec hw;
  hw.name = r.String("name");
  hw.source = r.String("source");
  hw.nodes = r.Int("nodes");
  hw.gpu = ReadGpu(r.Map("gpu"), name);
  hw.node = ReadNode(r.Map("node"));
  if (std::optional<YamlMap> net = r.OptionalMap("network")) hw.network = ReadNetwork(*net);
  if (std::optional<YamlMap> c = r.OptionalMap("collectives")) {
    hw.collective_base_latency_s = c->OptionalQuantity("base_latency", Dimension::kTime).value_or(0);
    if (c->Has("protocols")) {
      for (YamlMap& p : c->MapList("protocols")) {
        ProtocolSpec spec;
        spec.protocol = p.Choice("name", {"ll", "ll128"}) == "ll128" ? CollectiveProtocol::kLl128 : CollectiveProtocol::kLl;
        spec.base_latency_s = p.Quantity("base_latency", Dimension::kTime);
        spec.fabric_latency_s = p.Quantity("fabric_latency", Dimension::kTime);
        spec.bandwidth_factor = p.Number("bandwidth_factor", 0.01, 1);
        if (std::optional<YamlMap> caps = p.OptionalMap("max_busbw")) {
          spec.max_busbw_one_node = caps->Quantity("one_node", Dimension::kBandwidth);
          spec.max_busbw_two_nodes = caps->Quantity("two_nodes", Dimension::kBandwidth);
          spec.max_busbw_more_nodes = caps->Quantity("more_nodes", Dimension::kBandwidth);
          caps->Finish();
        }
        spec.max_channel_busbw = p.OptionalQuantity("max_channel_busbw", Dimension::kBandwidth).value_or(0);
        if (std::optional<YamlMap> t = p.OptionalMap("tree")) {
          TreeProtocolSpec tree;
          tree.base_latency_s = t->Quantity("base_latency", Dimension::kTime);
          tree.fabric_latency_s = t->Quantity("fabric_latency", Dimension::kTime);
          tree.bandwidth_factor = t->Number("bandwidth_factor", 0.01, 1);
          if (std::optional<YamlMap> caps = t->OptionalMap("max_channel_busbw")) {
            tree.max_channel_busbw_two_nodes = caps->Quantity("two_nodes", Dimension::kBandwidth);
            tree.max_channel_busbw_more_nodes = caps->Quantity("more_nodes", Dimension::kBandwidth);
            caps->Finish();
          }
          t->Finish();
          spec.tree = tree;
        }
        for (const ProtocolSpec& seen : hw.collective_protocols) {
          if (seen.protocol == spec.protocol) p.Error("name", std::string("expected each protocol once; ") + ProtocolName(spec.protocol) + " is listed twice");
        }
        p.Finish();
        hw.collective_protocols.push_back(spec);
      }
    }
    c->Finish();
  }
  hw.price_per_gpu_hour = r.OptionalNumber("price_per_gpu_hour", 0, 1e6);
  r.Finish();
  if (hw.nodes > 1 && !hw.network) {
    r.Error("nodes", "nodes=" + std::to_string(hw.nodes) +
                         " needs a 'network' section: network is required when nodes > 1");
  }
  const std::optional<int64_t> gpus = CheckedMul(hw.nodes, hw.node.gpus);
  if (!gpus || *gpus > kMaxGpus) {
    r.Error("nodes", "nodes=" + std::to_string(hw.nodes) + " of " + std::to_string(hw.node.gpus) +
                         " GPUs: more than the " + std::to_string(kMaxGpus) + " GPUs a cluster may hold");
  }
  SHARDSIM_RETURN_IF_ERROR(file.status());
  return hw;
}

Status SetNodes(HardwareSpec& hw, int64_t nodes) {
  if (nodes < 1) return Status::Error("--nodes must be at least 1, found " + std::to_string(nodes));
  const std::optional<int64_t> gpus = CheckedMul(nodes, hw.node.gpus);
  if (!gpus || *gpus > kMaxGpus) {
    return Status::Error("--nodes " + std::to_string(nodes) + " of " + std::to_string(hw.node.gpus) +
                         " GPUs: more than the " + std::to_string(kMaxGpus) + " GPUs a cluster may hold");
  }
  if (nodes > 1 && !hw.network) {
    return Status::Error("--nodes " + std::to_string(nodes) + ": " + hw.name + " has no network section to join nodes with");
  }
  hw.nodes = nodes;
  return Status::Ok();
}

StatusOr<HardwareSpec> LoadHardware(const std::string& path_or_name) {
  SHARDSIM_ASSIGN_OR_RETURN(std::string path, ResolveBundled(path_or_name, "hardware"));
  SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return ParseHardwareYaml(text, path);
}

}  // namespace shardsim
