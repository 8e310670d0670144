// `shardsim plan`: searches the layout space and prints the best layouts, ranked, with why
// the winner wins; `--out` writes the winner as a plan file; `--emit` prints framework
// arguments for it. Registers itself with the CLI (src/ never includes planner/).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "planner/emit.h"
#include "planner/round_trip.h"
#include "src/util/strings.h"
#include "src/io/bundled.h"
#include "planner/plan_html.h"
#include "planner/plan_report.h"
#include "planner/planner.h"
#include "src/cli/args.h"
#include "src/cli/inputs.h"
#include "src/cli/commands.h"
#include "src/io/plan_file.h"
#include "src/cli/graphs_advice.h"
#include "src/report/compute_fit.h"
#include "src/report/error_band.h"
#include "src/util/atomic_file.h"
#include "src/util/progress_line.h"

namespace shardsim::planner {
namespace {

using cli::Args;
using cli::Fail;
using cli::FlagSpec;

// "1024" -> {1024}; "64..1024" -> 64, 128, ..., 1024 (doubling, and the upper end).
StatusOr<std::vector<int64_t>> GpuCounts(const std::string& text) {
  auto parse = [](const std::string& s) -> StatusOr<int64_t> {
    std::istringstream in(s);
    int64_t v = 0;
    in >> v;
    if (in.fail() || !in.eof()) return Status::Error("--gpus: expected N or A..B, found '" + s + "'");
    if (v < 1) return Status::Error("--gpus must be at least 1, found " + s);
    return v;
  };
  const size_t dots = text.find("..");
  if (dots == std::string::npos) {
    SHARDSIM_ASSIGN_OR_RETURN(int64_t n, parse(text));
    return std::vector<int64_t>{n};
  }
  SHARDSIM_ASSIGN_OR_RETURN(int64_t lo, parse(text.substr(0, dots)));
  SHARDSIM_ASSIGN_OR_RETURN(int64_t hi, parse(text.substr(dots + 2)));
  if (hi < lo) return Status::Error("--gpus " + text + ": the range is empty");
  std::vector<int64_t> out;
  for (int64_t n = lo; n <= hi; n *= 2) out.push_back(n);
  if (out.back() != hi) out.push_back(hi);
  return out;
}

StatusOr<double> Number(const Args& a, const std::string& flag, double fallback) {
  const std::optional<std::string> v = a.Get(flag);
  if (!v) return fallback;
  std::istringstream in(*v);
  double x = 0;
  in >> x;
  if (in.fail() || !in.eof()) return Status::Error("--" + flag + ": expected a number, found '" + *v + "'");
  return x;
}

int RunPlan(int argc, char** argv) {
  std::vector<FlagSpec> flags = {
      {"model", "M", "model: bundled name, a YAML file, or a HF config.json", "gpt3-175b"},
      {"hardware", "H", "cluster: bundled name or a YAML file", "dgx-a100-80gb"},
      {"nodes", "N", "what-if: override the cluster's node count", ""},
      {"seq-len", "T", "what-if: override the model's training sequence length", ""},
      {"gpus", "N|A..B", "GPUs to plan for, or a range (doubling from A to B)", ""},
      {"global-batch", "B", "global batch in sequences (required)", ""},
      {"objective", "O", "throughput | time-to-train | cost", "throughput"},
      {"tokens", "T", "tokens to train (time-to-train and cost)", ""},
      {"max-memory-fraction", "F", "fraction of GPU memory a plan may use", "1"},
      {"fix", "SPEC", "layout keys to hold fixed, e.g. tp=8,sp=on", ""},
      {"forbid", "SPEC", "layout values to exclude, e.g. zero=3,offload=optimizer", ""},
      {"stack", "S", "software stack (stacks/S.yaml or a file): search only what it can run; none: every layout",
       kDefaultPlanStack},
      {"unfitted", "", "the structural model: no fitted sustained_compute (docs/validation/compute-fits.yaml)", ""},
      {"top", "K", "layouts to simulate and show", "10"},
      {"tie-tolerance", "F", "layouts within this fraction of the best are ties, the most robust wins (default: the published suite's ranking tolerance; 0: the fastest wins)", ""},
      {"threads", "N", "worker threads (default: all cores)", ""},
      {"emit", "FMT", "also print the winner as megatron arguments, a deepspeed config, nemo recipe overrides or a torchtitan TOML job config", ""},
      {"emit-out", "FILE", "write the --emit configuration alone to FILE (atomically; works with --json)", ""},
      {"out", "FILE", "write the winner as a plan file (simulate --plan FILE runs it)", ""},
      {"html", "FILE", "also write the plan as an HTML page: ranked tables, time-memory scatters, the winner's timeline, scaling over a GPU range", ""},
      {"json", "", "print JSON instead of text", ""},
      {"progress", "", "progress lines on stderr even when it is not a terminal (one per stage)", ""},
      {"help", "", "show this help", ""},
  };
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("plan", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim plan --global-batch B [flags]\n\n"
                 "Searches every layout of the model on the GPUs: prunes what cannot fit, ranks\n"
                 "the rest analytically, simulates the best K and ranks them by simulated time.\n\n"
              << cli::FlagHelp(flags);
    return 0;
  }
  std::vector<std::string> warnings;
  StatusOr<ModelSpec> model = cli::LoadModelFlags(*args, &warnings);
  if (!model.ok()) return Fail("plan", model.status().message(), model.status().message().rfind("--seq-len", 0) == 0 ? 2 : 1);
  StatusOr<HardwareSpec> hw = LoadHardware(*args->Get("hardware"));
  if (!hw.ok()) return Fail("plan", hw.status().message(), 1);
  ApplyComputeFit(&hw.value(), args->Has("unfitted"));
  if (args->Get("nodes")) {
    StatusOr<int64_t> nodes = args->GetInt("nodes");
    if (!nodes.ok() || *nodes < 1) return Fail("plan", "--nodes must be a positive integer", 2);
    if (Status set = SetNodes(hw.value(), *nodes); !set.ok()) return Fail("plan", set.message(), 1);
  }
  PlanOptions o;
  StatusOr<std::vector<int64_t>> counts = GpuCounts(args->Get("gpus").value_or(std::to_string(hw->total_gpus())));
  if (!counts.ok()) return Fail("plan", counts.status().message(), 1);
  if (!args->Get("global-batch")) {
    return Fail("plan", "--global-batch is required (sequences per iteration, e.g. 1536 for GPT-3 175B)", 1);
  }
  StatusOr<int64_t> gbs = args->GetInt("global-batch");
  if (!gbs.ok()) return Fail("plan", gbs.status().message(), 1);
  o.global_batch = *gbs;
  const std::string objective = *args->Get("objective");
  if (objective == "throughput") {
    o.objective = Objective::kThroughput;
  } else if (objective == "time-to-train") {
    o.objective = Objective::kTimeToTrain;
  } else if (objective == "cost") {
    o.objective = Objective::kCost;
  } else {
    return Fail("plan", "--objective: expected throughput, time-to-train or cost, found '" + objective + "'", 1);
  }
  StatusOr<double> tokens = Number(*args, "tokens", 0);
  StatusOr<double> fraction = Number(*args, "max-memory-fraction", 1);
  if (!tokens.ok()) return Fail("plan", tokens.status().message(), 1);
  if (!fraction.ok()) return Fail("plan", fraction.status().message(), 1);
  o.tokens = *tokens;
  o.max_memory_fraction = *fraction;
  StatusOr<std::map<std::string, std::string>> fixed = ParseFixed(args->Get("fix").value_or(""));
  if (!fixed.ok()) return Fail("plan", "--fix: " + fixed.status().message(), 1);
  o.fixed = *fixed;
  if (auto g = o.fixed.find("cuda_graphs"); g != o.fixed.end()) {
    StatusOr<Layout> fixed_graphs = ParseLayout("cuda_graphs=" + g->second);  // ParseFixed checked it
    if (fixed_graphs.ok() && fixed_graphs->cuda_graphs != CudaGraphs::kOff) {
      warnings.push_back(CudaGraphsCaveat(fixed_graphs->cuda_graphs) + ", so every memory figure below is a lower bound");
    }
  }
  StatusOr<std::map<std::string, std::set<std::string>>> forbidden = ParseForbidden(args->Get("forbid").value_or(""));
  if (!forbidden.ok()) return Fail("plan", forbidden.status().message(), 1);
  o.forbidden = *forbidden;
  if (const std::optional<std::string> stack = args->Get("stack"); stack && !stack->empty() && *stack != "none") {
    StatusOr<StackSpec> s = LoadStack(*stack);
    if (!s.ok()) return Fail("plan", s.status().message(), 1);
    o.stack = *s;
    o.stack_is_default = !args->Has("stack");
  }
  if (args->Get("tie-tolerance")) {
    StatusOr<double> tol = Number(*args, "tie-tolerance", 0);
    if (!tol.ok() || !(*tol >= 0 && *tol <= 0.5)) return Fail("plan", "--tie-tolerance: expected a fraction in [0, 0.5]", 2);
    o.tie_tolerance = *tol;
  } else {
    std::string why;
    o.tie_tolerance = BundledRankingTolerance(&why).value_or(0);  // no bands file: the fastest wins
  }
  StatusOr<int64_t> top = args->GetInt("top");
  if (!top.ok() || *top < 1) return Fail("plan", "--top must be a positive integer", 1);
  o.top_k = static_cast<int>(*top);
  if (args->Get("threads")) {
    StatusOr<int64_t> threads = args->GetInt("threads");
    if (!threads.ok() || *threads < 1) return Fail("plan", "--threads must be a positive integer", 1);
    o.threads = static_cast<int>(*threads);
  }
  const std::optional<std::string> emit = args->Get("emit");
  if (emit && *emit != "megatron" && *emit != "deepspeed" && *emit != "nemo" && *emit != "torchtitan") {
    return Fail("plan", "--emit: expected megatron, deepspeed, nemo or torchtitan, found '" + *emit + "'" +
                            DidYouMean(*emit, {"megatron", "deepspeed", "nemo", "torchtitan"}), 1);
  }
  // torchtitan builds its models from its own model code: say before planning when it cannot
  // build this one.
  if (emit && *emit == "torchtitan") {
    Status can = TorchtitanCanBuild(*model);
    if (!can.ok()) return Fail("plan", "--emit torchtitan: " + can.message(), 2);
  }
  // An export only for a plan of a stack that runs it (issue 15, item 3a): a Megatron-Core plan
  // written as a DeepSpeed config would hold layouts DeepSpeed refuses, and the reverse.
  if (emit && (!o.stack || !StackEmits(*o.stack, *emit))) {
    std::vector<std::string> runs;
    for (const std::string& name : BundledNames("stacks")) {
      StatusOr<StackSpec> s = LoadStack(name);
      if (s.ok() && StackEmits(*s, *emit)) runs.push_back(s->name);
    }
    const std::string searched = o.stack ? "stack '" + o.stack->name + "'" + (o.stack->emit.empty() ? " (no emitter)" : " (--emit " + Join(Split(o.stack->emit, ','), " or ") + ")") : "every layout (--stack none)";
    return Fail("plan", "--emit " + *emit + ": the plan searches " + searched + ", not what " + *emit +
                            " runs; add --stack " + Join(runs, " or --stack "), 2);
  }
  const bool json = args->Has("json");
  const std::optional<std::string> emit_out = args->Get("emit-out");
  if (emit_out && !emit) return Fail("plan", "--emit-out FILE needs --emit megatron|deepspeed|nemo|torchtitan", 2);
  if (emit && json && !emit_out) {
    return Fail("plan", "--emit with --json: the JSON report has no place for the configuration; add --emit-out FILE to write it there", 2);
  }
  // Progress on stderr (src/util/progress_line.h): the stage, the GPU count of a range, a bar.
  std::string count_prefix;
  const bool tty = !json && ::isatty(2);
  ProgressLine line("plan", tty, "simulate");
  if (tty || args->Has("progress")) {
    o.progress = [&](const std::string& stage, double f) { line.Update(count_prefix, stage, f); };
  }

  // The nodes the largest GPU count uses (a plan places its ranks on the first GPUs).
  const Cluster cluster(*hw, *std::max_element(counts->begin(), counts->end()));
  std::vector<PlanResult> results;
  for (int64_t n : *counts) {
    o.gpus = n;
    count_prefix = counts->size() > 1 ? std::to_string(n) + " GPUs (" + std::to_string(results.size() + 1) + "/" +
                                            std::to_string(counts->size()) + "): "
                                      : "";
    line.Restart();
    StatusOr<PlanResult> r = Plan(*model, cluster, o);
    if (!r.ok()) return Fail("plan", r.status().message(), 1);
    results.push_back(std::move(r).value());
  }
  // The overall winner: the best objective across GPU counts.
  const PlanResult* best = nullptr;
  for (const PlanResult& r : results) {
    if (r.ranked.empty()) continue;
    if (!best || Score(r.ranked.front(), *model, *hw, o) < Score(best->ranked.front(), *model, *hw, o)) best = &r;
  }
  if (best) {
    if (std::optional<std::string> advice = cli::CudaGraphsAdvice(*model, cluster, best->ranked.front().layout, o.stack)) {
      warnings.push_back("the winner is " + *advice);
    }
  }
  if (json) {
    std::cout << PlanJson(*model, *hw, o, results, warnings);
  } else {
    for (const PlanResult& r : results) {
      o.gpus = r.gpus;
      std::cout << PlanText(*model, *hw, o, r, warnings) << (results.size() > 1 ? "\n" : "");
    }
    if (results.size() > 1) std::cout << ParetoText(*model, results);
  }
  if (!best) return 1;  // nothing fits anywhere: the report said what would help
  const Candidate& win = best->ranked.front();
  if (emit) {
    StatusOr<std::string> emitted = EmitFor(*emit, *model, win.layout);
    if (!emitted.ok()) return Fail("plan", "--emit " + *emit + ": " + emitted.status().message(), 1);
    const std::string& config = *emitted;
    // Read back by shardsim's own reader: the export must give the plan and fit (round_trip.h).
    const RoundTrip rt = CheckRoundTrip(*emit, config, *model, cluster, best->gpus, win.layout, best->memory_limit_bytes);
    if (!rt.ok()) return Fail("plan", "--emit " + *emit + ": " + rt.Summary(), 1);
    if (emit_out) {
      Status st = WriteFileAtomically(*emit_out, config);
      if (!st.ok()) return Fail("plan", st.message(), 1);
    } else {
      std::cout << "\n" << config;
    }
    // The check's line goes with the text report, or to stderr beside --json.
    (json ? std::cerr : std::cout) << (json || emit_out ? "" : "\n") << rt.Summary() << "\n";
  }
  if (std::optional<std::string> html = args->Get("html")) {
    // The winner simulated again with its trace, for the timeline.
    SimOptions so;
    so.trace = true;
    so.critical_path = false;
    std::vector<TimelineSpan> spans;
    std::string note;
    StatusOr<SimResult> traced = Simulate(*model, cluster, win.layout, so);
    if (traced.ok()) {
      spans = WinnerTimeline(*traced, 4, 15000, &note);
    } else {
      note = "not drawn: " + traced.status().message();
    }
    o.gpus = best->gpus;
    Status st = WriteFileAtomically(*html, PlanHtml(*model, *hw, o, results, spans, note, warnings));
    if (!st.ok()) return Fail("plan", st.message(), 1);
  }
  if (std::optional<std::string> out = args->Get("out")) {
    Status st = WriteFileAtomically(*out, FormatPlanFile(WinnerPlanFile(*model, *hw, *best, objective)));
    if (!st.ok()) return Fail("plan", st.message(), 1);
  }
  return 0;
}

const cli::CommandRegistrar kRegister(
    {"plan", "search the layout space; rank, simulate the best, explain the winner", RunPlan, 5});

}  // namespace
}  // namespace shardsim::planner
