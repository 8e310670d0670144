// The layer plan: the one description of a training iteration that every reader derives from.
// Built once per (model, layout, hardware): for each kind of layer its ops (role, shape, FLOPs,
// bytes, what it saves for backward, its recompute class) and its parameters; for each pipeline
// stage the task list of every pass it runs (a chunk's forward, backward, recomputation or
// weight-gradient pass, and the iteration's tail: gradient buckets, optimizer, parameter
// gathers), with every collective's kind, group and bytes, when it may start (its
// dependencies) and what waits for it. The simulator stamps these lists into its programs
// (src/sim/program.h); the estimate evaluates the same lists in closed form
// (estimate.h); the memory model reads the ops' saved bytes; calibrate times the ops by role.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/cost/task.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/layout/pipeline.h"
#include "src/model/model_spec.h"

namespace shardsim {

// A task dependency inside a pass's list: an earlier task's index, or the pass's entry: what the
// previous pass left for the next compute to wait for (a blocking pipeline send).
inline constexpr int32_t kEntryDep = -2;

// One pass of one model chunk (or the iteration's tail) as a list of tasks in issue order.
// Tasks' deps index this pass's `deps`; their names index `names`. A micro-batch index is
// filled in when the pass is stamped.
struct PassPlan {
  std::vector<TaskSpec> tasks;
  std::vector<int32_t> deps;
  std::vector<std::string> names;
  int32_t receive = -1;  // the task waiting for the previous position's send, if any
  int32_t send = -1;     // the pipeline send to the next position (forward) or previous (backward)
  int32_t send_stage_delta = 0;  // its peer's stage minus the sender's (SendPeer)
  // What the next pass's first compute waits for: a blocking send (overlap_pp off), a blocking
  // gradient reduction (ZeRO-2/3 without overlap_dp) at the pass's end.
  std::vector<int32_t> carry;
  std::vector<int32_t> step_deps;   // gradient reductions the optimizer step waits for
  // ZeRO 0/1 buckets without overlap_dp: reduced after the stage's last compute. Each is a
  // collective (not in `tasks`) and the task that produced its gradients.
  std::vector<std::pair<TaskSpec, int32_t>> deferred;
  // Activation bytes: net change over the pass, and the highest level reached above the
  // level at its start (running sum of the tasks' memory_delta in issue order).
  double memory_net = 0, memory_high = 0;
};

// One kind of layer (dense or MoE) on one rank of a layout.
struct LayerPlan {
  bool moe = false;
  std::vector<Op> ops;    // forward ops, in execution order (ops.h)
  double params = 0;      // parameters on this rank, sharded over DP by ZeRO
  double expert_params = 0;  // expert parameters on this rank, sharded over DP / EP
  // Of `params`, those every TP rank holds whole (norms, row-parallel biases, the router): with
  // SP each rank's gradient covers only its rows, so they are summed over TP.
  double replicated_params = 0;
  double saved_bytes = 0;    // activations kept for backward per micro-batch (memory.h)
  double full_saved_bytes = 0;  // the same without recomputation
};

// The plan of one pipeline stage.
struct StagePlan {
  int32_t stage = 0;
  std::vector<ModelChunk> chunks;
  std::vector<PipelineStep> order;  // ScheduleOrder
  // IterationPlan::passes index for (chunk, pass kind, last micro-batch of the chunk's
  // gradient pass); pass kinds: 0 forward, 1 backward, 2 weight gradient.
  std::vector<std::array<std::array<int32_t, 2>, 3>> pass_of;
  PassPlan tail;                    // after the last pass: optimizer, gathers, buckets
  MemoryBreakdown static_memory;    // weights, gradients, optimizer, other (activations 0)
  int32_t PassIndex(const PipelineStep& s, bool last_mb) const;
};

struct IterationPlan {
  LayerPlan dense, moe;
  // The distinct pass lists: chunks alike (same ends, same layer kinds) share theirs, on every
  // stage; a send's peer is the stage of the next (forward) or previous (backward) position,
  // SendPeer.
  std::vector<PassPlan> passes;
  std::vector<StagePlan> stages;
  const PassPlan& PassFor(const StagePlan& s, const PipelineStep& step, bool last_mb) const {
    return passes[s.PassIndex(step, last_mb)];
  }
};

// A lower bound of the iteration time from the compute and the blocking TP collectives alone,
// without building the plan: what the planner orders by first. Each stage's compute stream
// runs its passes' compute one after another, and inside a layer the TP collectives the next
// compute waits for (overlap_tp off: all of them; backward: the forward's and SP's output-
// gradient gathers; on: none) sit between its compute tasks; so the iteration lasts at least,
// for every stage s, the forward of micro-batch 0's first chunk on the stages before s (the
// fill) plus s's own work (every pass and the optimizer step); and, except under zero-bubble
// (whose W passes follow the last backward), the fill plus s's work before its optimizer plus
// the backward of the last micro-batch's first chunk on the stages before s (the drain) plus
// stage 0's optimizer (offloaded: the host chain). And since the DP and CP streams also run one
// task at a time, at least m times either stream's load per micro-batch (ZeRO-3's gathers,
// ZeRO-2/3's per-layer reduce-scatters, ring attention's exchanges).
// `shape`, when given, is PrepareLayerShape of a layout with the same LayerShapeKey (the
// planner prepares each layer shape once for all the layouts that share it); else it is built.
struct LayerShapeCosts;
double ComputeLowerBound(const ModelSpec& m, const CollectiveModel& comm, const Layout& l,
                         const LayerShapeCosts* shape = nullptr);
// The layout fields a layer's ops and costs depend on, as text: layouts with equal keys share
// one PrepareLayerShape.
std::string LayerShapeKey(const Layout& l);
std::shared_ptr<const LayerShapeCosts> PrepareLayerShape(const ModelSpec& m, const HardwareSpec& hw,
                                                         const Layout& l);

// The stage the pipeline send of pass list `p` goes to when `stage` runs it: pass lists leave
// the send's peer_stage -1.
int32_t SendPeer(const Layout& l, int32_t stage, const PassPlan& p);

// `l` must be resolved and valid (CheckLayout) for `m` on `hw`.
IterationPlan BuildIterationPlan(const ModelSpec& m, const HardwareSpec& hw, const Layout& l);

// The micro-batch whose gradient pass (backward, or W under zero-bubble) is the last of each
// chunk on the stage: that pass reduces the ZeRO 0/1 buckets.
std::vector<int32_t> LastGradientMicrobatch(const Layout& l, const std::vector<PipelineStep>& order);

}  // namespace shardsim
