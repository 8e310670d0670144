// See estimate.h.
#include "src/cost/estimate.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "src/cost/layer_plan.h"
#include "src/cost/op_time.h"
#include "src/cost/plan_eval.h"
#include "src/cost/stage_calls.h"
#include "src/layout/placement.h"

namespace shardsim {
namespace {

// Per-stage memory: the plan's static states with the evaluated activation peak.
std::vector<MemoryBreakdown> StageMemories(const IterationPlan& plan, const PlanEval& ev) {
  std::vector<MemoryBreakdown> out;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    MemoryBreakdown mem = plan.stages[s].static_memory;
    mem.activations = ev.stages[s].peak_activations;
    out.push_back(mem);
  }
  return out;
}

int64_t Largest(const std::vector<MemoryBreakdown>& mems) {
  int64_t peak = 0;
  for (size_t s = 1; s < mems.size(); ++s) {
    if (mems[s].total() > mems[peak].total()) peak = static_cast<int64_t>(s);
  }
  return peak;
}

// The ops one micro-batch runs on `stage`: each layer kind's ops times its layers there, the
// embedding's on the first position and the head's on the last.
std::vector<OpTiming> StageOps(const ModelSpec& m, const GpuSpec& gpu, const Layout& l,
                               const IterationPlan& plan, const StagePlan& stage) {
  std::vector<OpTiming> out;
  auto add = [&](const std::vector<Op>& ops, int64_t count) {
    if (count == 0) return;
    for (const Op& op : ops) {
      auto it = std::find_if(out.begin(), out.end(), [&](const OpTiming& t) { return t.op.name == op.name; });
      if (it != out.end()) {
        it->count += count;
      } else {
        out.push_back(OpTiming{op, count, OpForwardTime(gpu, l.dtype, op), OpBackwardTime(gpu, l.dtype, op)});
      }
    }
  };
  int64_t dense = 0, moe = 0;
  bool embedding = false, head = false;
  for (const ModelChunk& c : stage.chunks) {
    const int64_t n_moe = m.MoeLayersIn(c.first_layer, c.first_layer + c.layers);
    moe += n_moe;
    dense += c.layers - n_moe;
    embedding = embedding || c.has_embedding;
    head = head || c.has_head;
  }
  if (embedding) add(EmbeddingOps(m, l), 1);
  add(plan.dense.ops, dense);
  add(plan.moe.ops, moe);
  if (head) add(HeadOps(m, l), 1);
  return out;
}

// Every collective and send `stage` issues in one iteration (stage_calls.h), priced.
std::vector<CollectiveTiming> StageCollectives(const CollectiveModel& comm, const Layout& l,
                                               const IterationPlan& plan, const StagePlan& stage) {
  const int64_t rank = RankOf(l, RankCoord{0, 0, 0, stage.stage});
  std::vector<CollectiveTiming> out;
  for (const StageCall& call : StageCalls(l, plan, stage)) {
    CollectiveTiming c;
    c.purpose = call.name;
    c.count = call.count;
    if (call.kind == TaskKind::kSend) {
      c.group = "pp";
      c.cost = comm.Estimate(Collective::kSendRecv,
                             {rank, RankOf(l, RankCoord{0, 0, 0, call.peer_stage})}, call.bytes);
    } else {
      c.group = GroupKindName(call.group);
      c.cost = comm.Estimate(call.collective, GroupMembers(l, rank, call.group), call.bytes);
    }
    out.push_back(c);
  }
  return out;
}

TimeBreakdown ToBreakdown(const double (&b)[kCategoryCount]) {
  auto at = [&](Category c) { return b[static_cast<int>(c)]; };
  TimeBreakdown t;
  t.compute = at(Category::kCompute);
  t.recompute = at(Category::kRecompute);
  t.tp_comm = at(Category::kTp);
  t.cp_comm = at(Category::kCp);
  t.ep_comm = at(Category::kEp);
  t.pp_comm = at(Category::kPp);
  t.dp_comm = at(Category::kDp);
  t.bubble = at(Category::kBubble);
  t.optimizer = at(Category::kOptimizer);
  t.offload = at(Category::kOffload);
  return t;
}

}  // namespace

bool MemoryFits(const HardwareSpec& hw, const MemoryBreakdown& mem) {
  return mem.total() <= hw.gpu.UsableMemoryBytes() && mem.host * hw.node.gpus <= hw.node.host.memory_bytes;
}

Estimate EstimateIteration(const ModelSpec& m, const Cluster& cluster, const Layout& l) {
  const CollectiveModel comm(cluster);
  return EstimateIteration(m, comm, l);
}

Estimate EstimateIteration(const ModelSpec& m, const CollectiveModel& comm, const Layout& l) {
  const HardwareSpec& hw = comm.cluster().hardware();
  const IterationPlan plan = BuildIterationPlan(m, hw, l);
  const PlanEval ev = EvaluatePlan(plan, comm, l, EvalDetail::kBreakdown, Contention::kWithinPass);
  Estimate est;
  est.critical_path_s = EvaluatePlan(plan, comm, l, EvalDetail::kTime).iteration_time_s;
  est.layout = l;
  est.parameters = m.TotalParams();
  est.stage_memory = StageMemories(plan, ev);
  est.peak_stage = Largest(est.stage_memory);
  est.fits = MemoryFits(hw, est.peak_memory());
  // The busiest stage (compute, recompute and optimizer time), as the simulator reports.
  double busiest = -1;
  for (size_t s = 0; s < ev.stages.size(); ++s) {
    const double* b = ev.stages[s].breakdown_s;
    const double busy = b[static_cast<int>(Category::kCompute)] + b[static_cast<int>(Category::kRecompute)] +
                        b[static_cast<int>(Category::kOptimizer)];
    if (busy > busiest + 1e-12) {
      busiest = busy;
      est.reported_stage = static_cast<int64_t>(s);
    }
  }
  const StagePlan& reported = plan.stages[est.reported_stage];
  est.ops = StageOps(m, hw.gpu, l, plan, reported);
  est.collectives = StageCollectives(comm, l, plan, reported);
  est.time = ToBreakdown(ev.stages[est.reported_stage].breakdown_s);
  est.sm_contention_s = ev.stages[est.reported_stage].sm_contention_s;
  est.iteration_time_s = ev.iteration_time_s;
  const int64_t gpus = l.world();
  est.tokens_per_s = static_cast<double>(l.gbs * m.seq_len) / est.iteration_time_s;
  est.model_flops = IterationFlops(m, l, false);
  est.hardware_flops = IterationFlops(m, l, true);
  est.model_tflops_per_gpu = est.model_flops / (est.iteration_time_s * gpus) / 1e12;
  est.hardware_tflops_per_gpu = est.hardware_flops / (est.iteration_time_s * gpus) / 1e12;
  const double peak_rate = hw.gpu.Peak(l.dtype).value_or(0);
  est.mfu = peak_rate > 0 ? est.model_flops / (est.iteration_time_s * gpus * peak_rate) : 0;
  return est;
}

QuickEstimate EstimateTime(const ModelSpec& m, const CollectiveModel& comm, const Layout& l) {
  const HardwareSpec& hw = comm.cluster().hardware();
  const IterationPlan plan = BuildIterationPlan(m, hw, l);
  const PlanEval ev = EvaluatePlan(plan, comm, l, EvalDetail::kTime);
  const std::vector<MemoryBreakdown> mems = StageMemories(plan, ev);
  QuickEstimate q;
  q.iteration_time_s = ev.iteration_time_s;
  const MemoryBreakdown& peak = mems[Largest(mems)];
  q.peak_memory_bytes = peak.total();
  q.fits = MemoryFits(hw, peak);
  return q;
}

QuickEstimate EstimateBound(const ModelSpec& m, const CollectiveModel& comm, const Layout& l) {
  const HardwareSpec& hw = comm.cluster().hardware();
  const IterationPlan plan = BuildIterationPlan(m, hw, l);
  const PlanBound b = BoundPlan(plan, comm, l);
  PlanEval ev;
  for (double a : b.peak_activations) ev.stages.push_back(StageEval{0, a, {}});
  const std::vector<MemoryBreakdown> mems = StageMemories(plan, ev);
  QuickEstimate q;
  q.iteration_time_s = b.time_s;
  const MemoryBreakdown& peak = mems[Largest(mems)];
  q.peak_memory_bytes = peak.total();
  q.fits = MemoryFits(hw, peak);
  return q;
}

}  // namespace shardsim
