// `shardsim memory`: the one-call memory answer (issue 16, item 5), no layout needed: the
// model's size per dtype, training memory per GPU over ZeRO 0-3 and offload at a few GPU
// counts (data parallelism only, micro-batch 1, full recompute: the least a data-parallel run
// needs), beside DeepSpeed's and Accelerate's estimates where those tools make one, and the
// fewest GPUs on which the planner finds a layout that fits.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <iostream>
#include <sstream>

#include "planner/planner.h"
#include "src/cli/args.h"
#include "src/cli/commands.h"
#include "src/cli/inputs.h"
#include "src/cost/memory.h"
#include "src/layout/validate.h"
#include "src/report/compute_fit.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim::planner {
namespace {

using cli::Args;
using cli::Fail;
using cli::FlagSpec;

// DeepSpeed's `largest_layer_params` (estimate_zero3_model_states_mem_needs_all_live: the
// largest module's own parameters, recurse=False), for the modules Hugging Face builds: the
// token embedding and LM head (vocab x h), each Q/K/V/O projection and each MLP projection
// (gate_proj, up_proj, down_proj, transformers' LlamaMLP; an expert's the same at its size),
// the router (h x experts).
double LargestModuleParams(const ModelSpec& m, std::string* which) {
  struct Candidate {
    double params;
    const char* name;
  };
  const double h = static_cast<double>(m.hidden);
  std::vector<Candidate> c = {
      {static_cast<double>(m.vocab) * h, "the token embedding"},
      {h * static_cast<double>(m.o_dim()), "an attention projection"},
  };
  if (m.mla) {  // DeepseekV3Attention's q_b_proj (or q_proj) and kv_b_proj; the down-projections are smaller
    const MlaSpec& a = *m.mla;
    c.push_back({static_cast<double>(a.q_lora_rank > 0 ? a.q_lora_rank : m.hidden) * m.q_dim(), "an attention projection"});
    c.push_back({static_cast<double>(a.kv_lora_rank) * m.heads * (m.head_dim - a.rope_head_dim + a.v_head_dim),
                 "an attention projection"});
  } else {
    c.push_back({h * static_cast<double>(m.q_dim()), "an attention projection"});
  }
  if (!m.moe || m.moe->interval > 1 || m.moe->first_dense > 0) c.push_back({h * m.ffn_hidden, "an MLP projection"});
  if (m.moe) {
    c.push_back({static_cast<double>(m.hidden) * m.moe->ffn_hidden, "an expert's projection"});
    c.push_back({static_cast<double>(m.hidden) * m.moe->experts, "the router"});
  }
  const auto it = std::max_element(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.params < b.params; });
  *which = it->name;
  return it->params;
}

// DeepSpeed's GPU model-state estimate for one rank (deepspeedai/DeepSpeed edaa72212:
// stage_1_and_2.py estimate_zero2_model_states_mem_needs, stage3.py
// estimate_zero3_model_states_mem_needs with zero_init): ZeRO-2 2 psi + 18 psi / N (2 psi with
// CPU offload); ZeRO-3 4 L + 18 psi / N, 4 L + 2 psi / N with the optimizer offloaded, 4 L with
// the parameters too (L the largest module's parameters). None for ZeRO 0 and 1.
std::optional<double> DeepSpeedEstimate(int zero, Offload off, double psi, double largest, int64_t n) {
  const double N = static_cast<double>(n);
  if (zero == 2) return off == Offload::kNone ? 2 * psi + std::floor(18 * psi / N) : 2 * psi;
  if (zero == 3) {
    if (off == Offload::kNone) return 4 * largest + std::floor(18 * psi / N);
    if (off == Offload::kOptimizer) return 4 * largest + std::floor(2 * psi / N);
    return 4 * largest;
  }
  return std::nullopt;
}

struct Row {
  int64_t gpus = 0;
  int zero = 0;
  Offload offload = Offload::kNone;
  MemoryBreakdown memory;
  bool fits = false;
  std::optional<double> deepspeed;
};

// "1,8,64" or "8"; default: 1, a node, 8 nodes and the cluster, as far as it goes.
StatusOr<std::vector<int64_t>> Counts(const Args& args, const HardwareSpec& hw) {
  std::vector<int64_t> out;
  if (std::optional<std::string> g = args.Get("gpus")) {
    for (const std::string& part : Split(*g, ',')) {
      std::istringstream in(Trim(part));
      int64_t v = 0;
      in >> v;
      if (in.fail() || !in.eof() || v < 1 || v > hw.total_gpus()) {
        return Status::Error("--gpus: expected GPU counts from 1 to the cluster's " + std::to_string(hw.total_gpus()) +
                             ", comma-separated, found '" + part + "'");
      }
      out.push_back(v);
    }
  } else {
    for (int64_t v : {int64_t{1}, hw.node.gpus, 8 * hw.node.gpus, hw.total_gpus()}) {
      if (v <= hw.total_gpus()) out.push_back(v);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string GiB(double bytes) { return Fmt("%.2f", bytes / kGiB); }

int RunMemory(int argc, char** argv) {
  const std::vector<FlagSpec> flags = {
      {"model", "M", "model: bundled name, a YAML file, a HF config.json or its folder", "gpt3-175b"},
      {"hardware", "H", "cluster: bundled name or a YAML file", "dgx-a100-80gb"},
      {"nodes", "N", "what-if: override the cluster's node count", ""},
      {"seq-len", "T", "the model's training sequence length", ""},
      {"gpus", "N|N,N,...", "GPU counts of the training table (default: 1, a node, 8 nodes, the cluster)", ""},
      {"dtype", "D", "training precision: bf16, fp16, fp32, fp8 (default: bf16 where the GPU has a bf16 rate)", ""},
      {"global-batch", "B", "the smallest-fit search's global batch (default: 8 sequences per GPU)", ""},
      {"stack", "S", "software stack the smallest-fit search plans for (none: every layout)", kDefaultPlanStack},
      {"unfitted", "", "the structural model: no fitted sustained_compute", ""},
      {"json", "", "print JSON instead of text", ""},
      {"help", "", "show this help", ""},
  };
  StatusOr<Args> args = Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return Fail("memory", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim memory [flags]\n\n"
                 "How much memory training the model takes, with no layout to give: its size per\n"
                 "dtype, memory per GPU over ZeRO stages and offload at a few GPU counts (with\n"
                 "DeepSpeed's and Accelerate's estimates beside), and the fewest GPUs of the\n"
                 "cluster on which a layout fits.\n\n"
              << cli::FlagHelp(flags);
    return 0;
  }
  std::vector<std::string> warnings;
  StatusOr<ModelSpec> model = cli::LoadModelFlags(*args, &warnings);
  if (!model.ok()) return Fail("memory", model.status().message(), model.status().message().rfind("--seq-len", 0) == 0 ? 2 : 1);
  const ModelSpec& m = *model;
  StatusOr<HardwareSpec> loaded = LoadHardware(*args->Get("hardware"));
  if (!loaded.ok()) return Fail("memory", loaded.status().message(), 1);
  HardwareSpec hw = *loaded;
  ApplyComputeFit(&hw, args->Has("unfitted"));
  if (args->Get("nodes")) {
    StatusOr<int64_t> nodes = args->GetInt("nodes");
    if (!nodes.ok() || *nodes < 1) return Fail("memory", "--nodes must be a positive integer", 2);
    if (Status set = SetNodes(hw, *nodes); !set.ok()) return Fail("memory", set.message(), 1);
  }
  StatusOr<std::vector<int64_t>> counts = Counts(*args, hw);
  if (!counts.ok()) return Fail("memory", counts.status().message(), 2);
  Layout base;
  base.mbs = 1;
  base.recompute = Recompute::kFull;
  if (std::optional<std::string> d = args->Get("dtype")) {
    StatusOr<Layout> one = ParseLayout("dtype=" + *d);
    if (!one.ok()) return Fail("memory", "--dtype: " + one.status().message(), 2);
    base.dtype = one->dtype;
    base.dtype_given = true;
  }

  // Sizes per dtype, and Accelerate's "Training using Adam" (huggingface/accelerate 16cb6eb8,
  // src/accelerate/commands/estimate.py estimate_training_usage): the largest of its model,
  // gradient, optimizer and step figures for the fp32 size S = 4 psi: fp32 4 S = 16 psi;
  // float16 (and bf16) the optimizer's 2 S = 8 psi; none for int8 and int4.
  const double psi = static_cast<double>(m.TotalParams());
  std::string largest_name;
  const double largest = LargestModuleParams(m, &largest_name);
  struct Size {
    const char* dtype;
    double bytes_per_param;
    std::optional<double> accelerate;
  };
  const std::vector<Size> sizes = {{"fp32", 4, 16 * psi}, {"bf16/fp16", 2, 8 * psi}, {"fp8/int8", 1, std::nullopt}, {"int4", 0.5, std::nullopt}};

  // Training memory: data parallelism only, each ZeRO stage and the offloads it takes.
  const std::vector<std::pair<int, Offload>> modes = {
      {0, Offload::kNone},      {1, Offload::kNone}, {1, Offload::kOptimizer}, {2, Offload::kNone},
      {2, Offload::kOptimizer}, {3, Offload::kNone}, {3, Offload::kOptimizer}, {3, Offload::kOptimizerAndParams}};
  std::vector<Row> rows;
  Layout resolved_dtype;
  for (int64_t n : *counts) {
    for (const auto& [zero, off] : modes) {
      if (n == 1 && zero > 0 && off == Offload::kNone) continue;  // nothing to shard over
      Layout l = base;
      l.dp = n;
      l.gbs = n;
      l.zero = zero;
      l.offload = off;
      StatusOr<Layout> r = ResolveLayoutFor(l, n, hw);
      if (!r.ok() || !CheckLayout(*r, m, hw, n).ok()) continue;
      resolved_dtype = *r;
      Row row;
      row.gpus = n;
      row.zero = zero;
      row.offload = off;
      row.memory = StageMemory(m, hw, *r, 0);
      row.fits = row.memory.total() <= hw.gpu.UsableMemoryBytes();
      row.deepspeed = DeepSpeedEstimate(zero, off, psi, largest, n);
      rows.push_back(row);
    }
  }

  // The fewest GPUs (doubling up to the cluster) on which the planner finds a layout that fits.
  PlanOptions o;
  if (const std::optional<std::string> s = args->Get("stack"); s && !s->empty() && *s != "none") {
    StatusOr<StackSpec> stack = LoadStack(*s);
    if (!stack.ok()) return Fail("memory", stack.status().message(), 1);
    o.stack = *stack;
  }
  // In the table's precision (--dtype, or the hardware's default): the answer to "will it fit"
  // must not switch to fp8 behind a bf16 table.
  const bool any_row = !rows.empty();
  if (base.dtype_given || any_row) o.fixed["dtype"] = DTypeName(any_row ? resolved_dtype.dtype : base.dtype);
  std::optional<int64_t> batch;
  if (args->Get("global-batch")) {
    StatusOr<int64_t> b = args->GetInt("global-batch");
    if (!b.ok() || *b < 1) return Fail("memory", "--global-batch must be a positive integer", 2);
    batch = *b;
  }
  o.top_k = 1;
  std::optional<Candidate> smallest;
  int64_t smallest_gpus = 0;
  std::string why_none;
  for (int64_t n = 1; n <= hw.total_gpus() && !smallest; n *= 2) {
    o.gpus = n;
    o.global_batch = batch.value_or(8 * n);
    if (o.global_batch % n != 0 && !batch) continue;
    const Cluster cluster(hw, n);
    StatusOr<PlanResult> r = Plan(m, cluster, o);
    if (!r.ok()) {
      why_none = r.status().message();
      continue;
    }
    if (!r->ranked.empty()) {
      smallest = r->ranked.front();
      smallest_gpus = n;
    }
  }

  if (args->Has("json")) {
    JsonWriter w;
    w.BeginObject().Field("model", m.name).Field("seq_len", m.seq_len).Field("parameters", psi);
    w.Field("active_parameters", static_cast<double>(m.ActiveParams()));
    w.Field("largest_module_parameters", largest).Field("largest_module", largest_name);
    w.Field("hardware", hw.name).Field("gpu_memory_bytes", hw.gpu.memory_bytes);
    w.Field("usable_memory_bytes", hw.gpu.UsableMemoryBytes());
    w.Key("sizes").BeginArray();
    for (const Size& s : sizes) {
      w.BeginObject().Field("dtype", s.dtype).Field("bytes", s.bytes_per_param * psi);
      w.Field("largest_module_bytes", s.bytes_per_param * largest);
      if (s.accelerate) w.Field("accelerate_training_bytes", *s.accelerate);
      w.EndObject();
    }
    w.EndArray().Field("training_dtype", DTypeName(resolved_dtype.dtype));
    w.Key("training").BeginArray();
    for (const Row& r : rows) {
      w.BeginObject().Field("gpus", r.gpus).Field("zero", static_cast<int64_t>(r.zero)).Field("offload", OffloadName(r.offload));
      w.Field("weights", r.memory.weights).Field("gradients", r.memory.gradients).Field("optimizer", r.memory.optimizer);
      w.Field("activations", r.memory.activations).Field("other", r.memory.other).Field("total", r.memory.total());
      w.Field("host", r.memory.host).Field("fits", r.fits);
      if (r.deepspeed) w.Field("deepspeed_estimator_gpu_bytes", *r.deepspeed);
      w.EndObject();
    }
    w.EndArray();
    w.Key("smallest_fit");
    if (smallest) {
      w.BeginObject().Field("gpus", smallest_gpus).Field("layout", FormatLayout(smallest->layout));
      w.Field("peak_memory_bytes", smallest->sim.peak_memory_bytes).Field("iteration_time_s", smallest->sim.iteration_time_s);
      w.EndObject();
    } else {
      w.BeginObject().Field("gpus", int64_t{0}).Field("why", why_none.empty() ? "no layout fits on the whole cluster" : why_none).EndObject();
    }
    w.Key("warnings").BeginArray();
    for (const std::string& s : warnings) w.Value(s);
    w.EndArray().EndObject();
    std::cout << w.str();
    return smallest ? 0 : 1;
  }

  std::ostringstream out;
  out << "shardsim memory: " << m.name << " (" << Fmt("%.2f", psi / 1e9) << "B parameters, "
      << Fmt("%.2f", static_cast<double>(m.ActiveParams()) / 1e9) << "B active; largest module "
      << Fmt("%.1f", largest / 1e6) << "M parameters, " << largest_name << "), sequence length " << m.seq_len << " tokens\n";
  out << "hardware: " << hw.name << ", " << hw.gpu.name << ": " << GiB(hw.gpu.memory_bytes) << " GiB, usable "
      << GiB(hw.gpu.UsableMemoryBytes()) << " GiB per GPU\n";
  for (const std::string& w : warnings) out << "warning: " << w << "\n";
  out << "\nmodel size (GiB)      total  largest module  Accelerate's \"Training using Adam\"\n";
  for (const Size& s : sizes) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-14s %11.2f %15.2f %14s\n", s.dtype, s.bytes_per_param * psi / kGiB,
                  s.bytes_per_param * largest / kGiB, s.accelerate ? Fmt("%.2f", *s.accelerate / kGiB).c_str() : "n/a");
    out << line;
  }
  out << "  (Accelerate prints the largest of its model, gradient, optimizer and step figures, not their sum: 16 bytes\n"
         "  a parameter in fp32, 8 in fp16/bf16, Adam's two states alone; shardsim sums weights, gradients and states.)\n";
  out << "\ntraining memory per GPU (GiB): data parallelism only, micro-batch 1, full recompute, "
      << DTypeName(resolved_dtype.dtype) << "; usable " << GiB(hw.gpu.UsableMemoryBytes()) << "\n";
  // Columns wide enough for a 1T-parameter model's unsharded states (9,999,999.99 GiB).
  out << "  GPUs ZeRO offload                 weights      grads      optim    activ    other       total  fits"
         "        host  DeepSpeed's estimate\n";
  for (const Row& r : rows) {
    const std::string off = OffloadName(r.offload);
    out << Fmt("  %4.0f", static_cast<double>(r.gpus)) << Fmt("  %3.0f", r.zero) << "  " << off
        << std::string(off.size() < 17 ? 17 - off.size() : 1, ' ') << Fmt("%13.2f", r.memory.weights / kGiB)
        << Fmt("%11.2f", r.memory.gradients / kGiB) << Fmt("%11.2f", r.memory.optimizer / kGiB)
        << Fmt("%9.2f", r.memory.activations / kGiB) << Fmt("%9.2f", r.memory.other / kGiB)
        << Fmt("%12.2f", r.memory.total() / kGiB) << (r.fits ? "  yes " : "  no  ") << Fmt("%11.1f", r.memory.host / kGiB)
        << (r.deepspeed ? Fmt("  %11.2f (model states)", *r.deepspeed / kGiB) : std::string("  -")) << "\n";
  }
  out << "  (DeepSpeed's estimate_zero2/3_model_states_mem_needs count model states only, 2 bytes a parameter for\n"
         "  16-bit gradients more than shardsim under ZeRO-2, and ZeRO-3's gathered layer as 4 bytes a parameter of\n"
         "  the largest module; shardsim adds activations and its other buffers.)\n";
  out << "\nsmallest layout that fits on " << hw.name << " (" << (o.stack ? o.stack->name : std::string("every layout"))
      << ", " << (o.fixed.count("dtype") ? o.fixed.at("dtype") + ", " : std::string())
      << "global batch " << (batch ? std::to_string(*batch) : std::string("8 sequences a GPU")) << "): ";
  if (smallest) {
    out << smallest_gpus << " GPU" << (smallest_gpus > 1 ? "s" : "") << ", " << FormatLayout(smallest->layout) << "\n  peak "
        << GiB(smallest->sim.peak_memory_bytes) << " GiB, " << Fmt("%.3f", smallest->sim.iteration_time_s) << " s per iteration\n";
  } else {
    out << "none up to " << hw.total_gpus() << " GPUs" << (why_none.empty() ? "" : " (" + why_none + ")") << "\n";
  }
  std::cout << out.str();
  return smallest ? 0 : 1;
}

const cli::CommandRegistrar kRegister(
    {"memory", "how much memory training a model takes: sizes, ZeRO x offload per GPU count, the smallest fit", RunMemory, 6});

}  // namespace
}  // namespace shardsim::planner
