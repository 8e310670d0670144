// `shardsim describe`: the derived figures of the inputs (parameter counts, cluster graph,
// normalized layout with its groups and warnings), to check a description before using it.
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "src/cli/commands.h"
#include "src/cli/inputs.h"
#include "src/layout/placement.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim::cli {
namespace {

std::string Group(const std::vector<int64_t>& g) {
  std::vector<std::string> s;
  for (int64_t r : g) s.push_back(std::to_string(r));
  if (s.size() > 12) {
    s.resize(12);
    s.push_back("...");
  }
  return "[" + Join(s, ", ") + "]";
}

// Rank 0's groups: the layout's TP, CP, DP and PP, and for an MoE model its EP group, its
// experts' TP group where it is not TP's (etp set), and the ranks holding the same experts
// (expert DP), all in the experts' folded grid (placement.h ExpertCoordOf).
std::vector<std::pair<std::string, std::vector<int64_t>>> RankZeroGroups(const ModelSpec& m, const Layout& l) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (ParallelDim d : {ParallelDim::kTp, ParallelDim::kCp, ParallelDim::kDp, ParallelDim::kPp}) {
    out.emplace_back(ParallelDimName(d), GroupOf(l, 0, d));
  }
  if (l.ep > 1) out.emplace_back(ParallelDimName(ParallelDim::kEp), GroupOf(l, 0, ParallelDim::kEp));
  if (l.own_expert_tp()) out.emplace_back(ParallelDimName(ParallelDim::kEtp), GroupOf(l, 0, ParallelDim::kEtp));
  if (m.moe && (l.ep > 1 || l.own_expert_tp())) out.emplace_back("edp", EdpGroupOf(l, 0));
  return out;
}

}  // namespace

int RunDescribe(int argc, char** argv) {
  std::vector<FlagSpec> flags = InputFlags();
  flags.push_back({"json", "", "print JSON instead of text", ""});
  flags.push_back({"help", "", "show this help", ""});
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("describe", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim describe [flags]\n\n"
                 "Prints the model's parameter counts, the cluster graph and the layout's\n"
                 "rank groups and warnings.\n\n"
              << FlagHelp(flags);
    return 0;
  }
  StatusOr<Inputs> in = LoadInputs(*args);
  if (!in.ok()) return Fail("describe", in.status().message(), 1);
  const ModelSpec& m = in->model;
  const HardwareSpec& hw = in->hardware;
  if (args->Has("json")) {
    const Cluster cluster(hw);
    const Layout& l = in->layout;
    JsonWriter w;
    w.BeginObject().Field("model", m.name).Field("parameters", m.TotalParams()).Field("seq_len", m.seq_len);
    w.Field("active_parameters", m.ActiveParams()).Field("dense_layer_parameters", m.DenseLayerParams());
    w.Field("hardware", hw.name).Field("nodes", hw.nodes).Field("gpus_per_node", hw.node.gpus);
    w.Field("gpu_memory_bytes", hw.gpu.memory_bytes).Field("graph", cluster.Describe());
    w.Field("layout", FormatLayout(l)).Field("microbatches", l.microbatches());
    w.Key("rank0_groups").BeginObject();
    for (const auto& [name, group] : RankZeroGroups(m, l)) {
      w.Key(name).BeginArray();
      for (int64_t r : group) w.Value(r);
      w.EndArray();
    }
    w.EndObject().Key("warnings").BeginArray();
    for (const std::string& warning : in->warnings) w.Value(warning);
    w.EndArray().EndObject();
    std::cout << w.str();
    return 0;
  }
  std::cout << "model " << m.name << ": " << m.layers << " layers, hidden " << m.hidden << ", "
            << m.heads << " heads (" << m.kv_heads << " kv), head_dim " << m.head_dim << ", ffn "
            << m.ffn_hidden << ", vocab " << m.vocab << ", seq " << m.seq_len << "\n"
            << "  parameters: " << m.TotalParams() << " total, " << m.ActiveParams()
            << " active per token, " << m.DenseLayerParams() << " per dense layer"
            << (m.mtp_layers > 0
                    ? ", " + std::to_string(m.MtpParams()) + " in " + std::to_string(m.mtp_layers) +
                          " multi-token prediction depth(s)"
                    : std::string())
            << "\n"
            << "  source: " << m.source << "\n";
  const Cluster cluster(hw);
  std::cout << "hardware " << hw.name << ": " << hw.nodes << " nodes x " << hw.node.gpus << " "
            << hw.gpu.name << ", " << FormatQuantity(hw.gpu.memory_bytes, Dimension::kBytes)
            << " each\n  graph: " << cluster.Describe() << "\n";
  if (!hw.gpu.overlaps_communication) {
    std::cout << "  communication serialised with compute (gpu.overlaps_communication: false)\n";
  }
  const Layout& l = in->layout;
  std::cout << "layout " << FormatLayout(l) << "\n  micro-batches per iteration: "
            << l.microbatches() << "\n";
  for (const auto& [name, group] : RankZeroGroups(m, l)) {
    std::cout << "  rank 0's " << name << " group: " << Group(group) << "\n";
  }
  for (const std::string& w : in->warnings) std::cout << "warning: " << w << "\n";
  return 0;
}

}  // namespace shardsim::cli
