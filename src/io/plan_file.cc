// See plan_file.h.
#include "src/io/plan_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "src/io/yaml_reader.h"
#include "src/util/atomic_file.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

std::string Num(double v, const char* unit = "") {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return std::string(buf) + unit;
}
std::string Q(double v, const char* unit) { return "\"" + Num(v) + " " + unit + "\""; }

void Indent(std::ostringstream& out, const std::string& text, int spaces) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out << std::string(spaces, ' ') << line << "\n";
}

}  // namespace

std::string ModelYaml(const ModelSpec& m) {
  std::ostringstream o;
  o << "name: " << YamlQuoted(m.name) << "\nsource: " << YamlQuoted(m.source) << "\n";
  o << "layers: " << m.layers << "\nhidden: " << m.hidden << "\nheads: " << m.heads
    << "\nkv_heads: " << m.kv_heads << "\nhead_dim: " << m.head_dim << "\nffn_hidden: " << m.ffn_hidden
    << "\nvocab: " << m.vocab << "\nseq_len: " << m.seq_len << "\n";
  o << "activation: " << (m.activation == Activation::kSwiglu ? "swiglu" : "gelu") << "\n";
  o << "norm: " << (m.norm == Norm::kRmsNorm ? "rmsnorm" : "layernorm") << "\n";
  o << "position: " << (m.position == Position::kRope ? "rope" : "learned") << "\n";
  o << "tied_embeddings: " << (m.tied_embeddings ? "true" : "false") << "\nbias: "
    << (m.bias ? "true" : "false") << "\nqkv_bias: " << (m.qkv_bias ? "true" : "false")
    << "\ndropout: " << (m.dropout ? "true" : "false") << "\n";
  if (m.rotary_base > 0) o << "rotary_base: " << Num(m.rotary_base) << "\n";
  if (m.qk_norm) o << "qk_norm: true\n";
  if (m.sliding_window > 0) o << "sliding_window: " << m.sliding_window << "\n";
  if (m.norms_per_layer != 2) o << "norms_per_layer: " << m.norms_per_layer << "\n";
  if (m.qk_norm_full) o << "qk_norm_full: true\n";
  if (!m.norm_weights) o << "norm_weights: false\n";
  if (m.full_attention_layers > 0) o << "full_attention_layers: " << m.full_attention_layers << "\n";
  if (m.mtp_layers > 0) o << "mtp_layers: " << m.mtp_layers << "\n";
  if (m.final_logit_softcap > 0) o << "final_logit_softcap: " << Num(m.final_logit_softcap) << "\n";
  if (m.attn_logit_softcap > 0) o << "attn_logit_softcap: " << Num(m.attn_logit_softcap) << "\n";
  if (m.mla) {
    o << "mla:\n  q_lora_rank: " << m.mla->q_lora_rank << "\n  kv_lora_rank: " << m.mla->kv_lora_rank
      << "\n  rope_head_dim: " << m.mla->rope_head_dim << "\n  v_head_dim: " << m.mla->v_head_dim << "\n";
  }
  if (m.moe) {
    o << "moe:\n  experts: " << m.moe->experts << "\n  top_k: " << m.moe->top_k
      << "\n  ffn_hidden: " << m.moe->ffn_hidden << "\n  interval: " << m.moe->interval << "\n";
    if (m.moe->shared_ffn_hidden > 0) {
      o << "  shared_ffn_hidden: " << m.moe->shared_ffn_hidden << "\n  shared_gate: " << (m.moe->shared_gate ? "true" : "false") << "\n";
    }
    if (m.moe->first_dense > 0) o << "  first_dense: " << m.moe->first_dense << "\n";
    if (m.moe->aux_loss_coeff > 0) o << "  aux_loss_coeff: " << Num(m.moe->aux_loss_coeff) << "\n";
  }
  return o.str();
}

std::string HardwareYaml(const HardwareSpec& hw) {
  std::ostringstream o;
  o << "name: " << YamlQuoted(hw.name) << "\nsource: " << YamlQuoted(hw.source) << "\nnodes: " << hw.nodes << "\n";
  const GpuSpec& g = hw.gpu;
  o << "gpu:\n  name: " << YamlQuoted(g.name) << "\n";
  if (!g.architecture.empty()) o << "  architecture: " << YamlQuoted(g.architecture) << "\n";
  o << "  peak:\n";
  for (const auto& [d, rate] : g.peak_flops) o << "    " << DTypeName(d) << ": " << Q(rate, "FLOP/s") << "\n";
  o << "  memory: " << Q(g.memory_bytes, "B") << "\n  memory_bandwidth: " << Q(g.memory_bandwidth, "B/s")
    << "\n  sm_count: " << g.sm_count << "\n";
  if (g.transcendental_rate > 0) o << "  transcendental_rate: " << Q(g.transcendental_rate, "FLOP/s") << "\n";
  // Optional in hardware files and positive when given: absent means none reserved.
  if (g.reserved_memory_bytes > 0) o << "  reserved_memory: " << Q(g.reserved_memory_bytes, "B") << "\n";
  if (g.nccl_channels > 0) o << "  nccl_channels: " << g.nccl_channels << "\n";
  o << "  memory_fragmentation: " << Num(g.memory_fragmentation) << "\n";
  o << "  efficiency:\n    matmul: " << Num(g.efficiency.matmul) << "\n";
  if (g.efficiency.matmul_fp8 > 0) o << "    matmul_fp8: " << Num(g.efficiency.matmul_fp8) << "\n";
  o << "    attention: "
    << Num(g.efficiency.attention) << "\n    memory: " << Num(g.efficiency.memory)
    << "\n    kernel_latency: " << Q(g.efficiency.kernel_latency_s, "s") << "\n    matmul_tile: ["
    << g.efficiency.tile_m << ", " << g.efficiency.tile_n << "]\n";
  if (g.efficiency.matmul_table) o << "    matmul_table: " << YamlQuoted(g.efficiency.matmul_table_path) << "\n";
  if (!g.efficiency.attention_by_seq.empty()) {
    // As the description gave them: lengths, and whole TFLOP/s of the 16-bit peak.
    const double peak = g.Peak16().value_or(0);
    std::string lens, rates;
    for (const auto& [seq, fraction] : g.efficiency.attention_by_seq) {
      lens += (lens.empty() ? "" : ", ") + std::to_string(seq);
      rates += (rates.empty() ? "" : ", ") + std::to_string(std::llround(fraction * peak / 1e12));
    }
    o << "    attention_seq_lens: [" << lens << "]\n    attention_tflops: [" << rates << "]\n";
    for (const auto& [field, member] : GpuEfficiency::kOtherAttentionTables) {
      const std::vector<std::pair<int64_t, double>>& table = g.efficiency.*member;
      if (table.empty()) continue;
      std::string list;
      for (const auto& [seq, fraction] : table) {
        list += (list.empty() ? "" : ", ") + std::to_string(std::llround(fraction * peak / 1e12));
      }
      o << "    " << field << ": [" << list << "]\n";
    }
  }
  if (!g.efficiency.attention_head_dims.empty()) {
    o << "    attention_head_dims: [";
    for (size_t i = 0; i < g.efficiency.attention_head_dims.size(); ++i) {
      o << (i ? ", " : "") << g.efficiency.attention_head_dims[i];
    }
    o << "]\n";
  }
  // Written when set (by the description or the fit), so a plan read back is priced as planned.
  if (g.efficiency.sustained_compute) o << "    sustained_compute: " << Num(*g.efficiency.sustained_compute) << "\n";
  // Written only where it differs from the default, like transcendental_rate above.
  if (!g.overlaps_communication) o << "  overlaps_communication: false\n";
  const FabricSpec& f = hw.node.fabric;
  static const char* kKinds[] = {"nvswitch", "nvlink", "pcie", "shared-memory"};
  o << "node:\n  gpus: " << hw.node.gpus << "\n  fabric:\n    kind: " << kKinds[static_cast<int>(f.kind)]
    << "\n    bandwidth: " << Q(f.bandwidth, "B/s") << "\n    efficiency: " << Num(f.efficiency)
    << "\n    latency: " << Q(f.latency_s, "s") << "\n";
  const HostSpec& h = hw.node.host;
  o << "  host:\n    memory: " << Q(h.memory_bytes, "B") << "\n    memory_bandwidth: "
    << Q(h.memory_bandwidth, "B/s") << "\n    link_bandwidth: " << Q(h.link_bandwidth, "B/s")
    << "\n    link_latency: " << Q(h.link_latency_s, "s") << "\n";
  if (h.launch_s > 0) o << "    launch_overhead: " << Q(h.launch_s, "s") << "\n";
  if (hw.network) {
    const NetworkSpec& n = *hw.network;
    o << "network:\n  nics: " << n.nics << "\n  nic_bandwidth: " << Q(n.nic_bandwidth, "B/s")
      << "\n  nic_efficiency: " << Num(n.nic_efficiency) << "\n  latency: " << Q(n.latency_s, "s")
      << "\n  switch_latency: " << Q(n.switch_latency_s, "s") << "\n  topology: "
      << (n.topology == NetworkTopology::kRailOptimized ? "rail-optimized" : "fat-tree")
      << "\n  nodes_per_switch: " << n.nodes_per_switch << "\n  oversubscription: "
      << Num(n.oversubscription) << "\n";
  }
  o << "collectives:\n  base_latency: " << Q(hw.collective_base_latency_s, "s") << "\n";
  if (!hw.collective_protocols.empty()) o << "  protocols:\n";
  for (const ProtocolSpec& p : hw.collective_protocols) {
    o << "    - name: " << ProtocolName(p.protocol) << "\n      base_latency: " << Q(p.base_latency_s, "s")
      << "\n      fabric_latency: " << Q(p.fabric_latency_s, "s") << "\n      bandwidth_factor: " << Num(p.bandwidth_factor)
      << "\n";
    if (p.max_busbw_one_node > 0) {
      o << "      max_busbw:\n        one_node: " << Q(p.max_busbw_one_node, "B/s") << "\n        two_nodes: "
        << Q(p.max_busbw_two_nodes, "B/s") << "\n        more_nodes: " << Q(p.max_busbw_more_nodes, "B/s") << "\n";
    }
    if (p.max_channel_busbw > 0) o << "      max_channel_busbw: " << Q(p.max_channel_busbw, "B/s") << "\n";
    if (p.tree) {
      const TreeProtocolSpec& t = *p.tree;
      o << "      tree:\n        base_latency: " << Q(t.base_latency_s, "s") << "\n        fabric_latency: "
        << Q(t.fabric_latency_s, "s") << "\n        bandwidth_factor: " << Num(t.bandwidth_factor) << "\n";
      if (t.max_channel_busbw_two_nodes > 0 || t.max_channel_busbw_more_nodes > 0) {
        o << "        max_channel_busbw:\n          two_nodes: " << Q(t.max_channel_busbw_two_nodes, "B/s")
          << "\n          more_nodes: " << Q(t.max_channel_busbw_more_nodes, "B/s") << "\n";
      }
    }
  }
  if (hw.price_per_gpu_hour) o << "price_per_gpu_hour: " << Num(*hw.price_per_gpu_hour) << "\n";
  return o.str();
}

std::string FormatPlanFile(const PlanFile& p) {
  std::ostringstream o;
  o << "# shardsim plan: run it with `shardsim simulate --plan FILE` (or `run --plan FILE`).\n"
    << "# The model and hardware are embedded, so this file stands alone.\n";
  o << "gpus: " << p.gpus << "\nlayout: " << YamlQuoted(FormatLayout(p.layout)) << "\n";
  o << "objective: " << (p.objective.empty() ? "throughput" : p.objective) << "\n";
  o << "predicted:\n  iteration_time_s: " << Num(p.predicted.iteration_time_s)
    << "\n  tokens_per_s: " << Num(p.predicted.tokens_per_s) << "\n  model_tflops_per_gpu: "
    << Num(p.predicted.model_tflops_per_gpu) << "\n  hardware_tflops_per_gpu: "
    << Num(p.predicted.hardware_tflops_per_gpu) << "\n  mfu: " << Num(p.predicted.mfu)
    << "\n  peak_memory_bytes: " << Num(p.predicted.peak_memory_bytes)
    << "\n  fits: " << (p.predicted.fits ? "true" : "false") << "\n";
  o << "model:\n";
  Indent(o, ModelYaml(p.model), 2);
  o << "hardware:\n";
  Indent(o, HardwareYaml(p.hardware), 2);
  return o.str();
}

StatusOr<PlanFile> ParsePlanFile(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, name));
  YamlMap r = file.Root();
  PlanFile p;
  p.gpus = r.Int("gpus");
  const std::string layout = r.String("layout");
  p.objective = r.OptionalString("objective").value_or("throughput");
  if (std::optional<YamlMap> pr = r.OptionalMap("predicted")) {
    p.predicted.iteration_time_s = pr->Number("iteration_time_s", 0, 1e18);
    p.predicted.tokens_per_s = pr->Number("tokens_per_s", 0, 1e18);
    p.predicted.model_tflops_per_gpu = pr->Number("model_tflops_per_gpu", 0, 1e18);
    p.predicted.hardware_tflops_per_gpu = pr->Number("hardware_tflops_per_gpu", 0, 1e18);
    p.predicted.mfu = pr->Number("mfu", 0, 1e3);
    p.predicted.peak_memory_bytes = pr->Number("peak_memory_bytes", 0, 1e30);
    p.predicted.fits = pr->OptionalBool("fits").value_or(false);
    pr->Finish();
  }
  const bool has_model = r.Has("model"), has_hw = r.Has("hardware");
  r.Finish();
  SHARDSIM_RETURN_IF_ERROR(file.status());
  if (!has_model || !has_hw) {
    return Status::Error(name + ": a plan needs its 'model' and 'hardware' sections");
  }
  // The embedded descriptions go through the same strict loaders as the bundled files.
  const YAML::Node root = YAML::Load(text);
  SHARDSIM_ASSIGN_OR_RETURN(p.model, ParseModelYaml(YAML::Dump(root["model"]), name + " (model section)"));
  SHARDSIM_ASSIGN_OR_RETURN(p.hardware,
                            ParseHardwareYaml(YAML::Dump(root["hardware"]), name + " (hardware section)"));
  StatusOr<Layout> l = ParseLayout(layout);
  if (!l.ok()) return Status::Error(name + ": field 'layout': " + l.status().message());
  p.layout = *l;
  return p;
}

StatusOr<PlanFile> LoadPlanFile(const std::string& path) {
  SHARDSIM_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "plan file"));
  return ParsePlanFile(text, path);
}

}  // namespace shardsim
