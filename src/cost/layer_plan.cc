// Builds the layer plan; see layer_plan.h. The order of passes follows the schedules of
// Narayanan et al. 2021 (GPipe, 1F1B, interleaved with Megatron-LM's warm-up count) and Qi et
// al. 2023 (the B/W split of zero-bubble pipelines); the collectives inside a layer follow
// Megatron-LM's tensor-parallel layers (megatron/core/tensor_parallel/layers.py, mappings.py).
#include "src/cost/layer_plan.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "src/cost/grad_compression.h"
#include "src/cost/op_time.h"
#include "src/cost/plan_eval.h"
#include "src/layout/placement.h"
#include "src/util/check.h"

namespace shardsim {

int32_t StagePlan::PassIndex(const PipelineStep& s, bool last_mb) const {
  const int kind = s.pass == Pass::kForward ? 0 : s.pass == Pass::kBackward ? 1 : 2;
  const int32_t i = pass_of[s.chunk][kind][last_mb ? 1 : 0];
  CHECK(i >= 0) << "no pass list for chunk " << s.chunk << " kind " << kind;
  return i;
}

int32_t SendPeer(const Layout& l, int32_t stage, const PassPlan& p) {
  const int32_t pp = static_cast<int32_t>(l.pp);
  return ((stage + p.send_stage_delta) % pp + pp) % pp;
}

std::vector<int32_t> LastGradientMicrobatch(const Layout& l, const std::vector<PipelineStep>& order) {
  std::vector<int32_t> last(l.vpp, -1);
  const Pass grad = SplitsWeightGradients(l) ? Pass::kWeightGrad : Pass::kBackward;
  for (const PipelineStep& s : order) {
    if (s.pass == grad) last[s.chunk] = s.mb;
  }
  return last;
}

namespace {

// Time and FLOPs of a run of consecutive ops of a layer.
struct Block {
  double fwd = 0, bwd = 0, wgrad = 0, selective = 0, flops = 0;
  // recompute=op: the forward time and FLOPs the backward recomputes (Op::op_recomputed).
  double op_recompute = 0, op_recompute_flops = 0;
  // The column-parallel projections' (Op::column_parallel) weight-gradient GEMMs, part of
  // `wgrad`, and their forward FLOPs (a weight gradient costs as many as the forward).
  double col_wgrad = 0, col_flops = 0;
  // The row-parallel projections' (attention output, MLP down) forward GEMMs, part of `fwd`:
  // the GEMMs whose output TP reduces (overlap_tp=on pipelines that reduction with them).
  double row_fwd = 0;
  // Kernels the forward and the backward launch (OpForwardKernels, OpBackwardKernels).
  double fwd_launches = 0, bwd_launches = 0;
};

Block SumOps(const GpuSpec& gpu, DType dtype, const std::vector<Op>& ops) {
  Block b;
  for (const Op& op : ops) {
    const double f = OpForwardTime(gpu, dtype, op);
    const double bw = OpBackwardTime(gpu, dtype, op);
    b.fwd += f;
    b.bwd += bw;
    if (op.kind == OpKind::kMatmul) b.wgrad += bw / 2;  // the weight-gradient GEMM
    if (op.column_parallel) {
      b.col_wgrad += bw / 2;
      b.col_flops += op.flops;
    }
    if (op.kind == OpKind::kMatmul && (op.role == OpRole::kProjection || op.role == OpRole::kMlpDown)) {
      b.row_fwd += f;
    }
    if (op.recomputed_selective) b.selective += f;
    b.op_recompute += f * op.op_recomputed;
    b.op_recompute_flops += op.flops * op.op_recomputed;
    b.flops += op.flops;
    b.fwd_launches += OpForwardKernels(op);
    b.bwd_launches += OpBackwardKernels(op);
  }
  return b;
}

// The host floor. A framework issues a pass's kernels from one CPU thread, each launch costing
// the host HostSpec::launch_s (PyTorch's dispatch of the op, then cudaLaunchKernel); the
// device runs them as they come, so a pass takes at least its launches x launch_s, however
// short its kernels (the launch-bound regime of small models, small micro-batches and wide
// TP). While the device is the slower of the two the host runs ahead and costs nothing.
// Priced per layer pass, the unit whose kernels repeat: when its host time exceeds the device
// time of its compute blocks, each block's forward (backward) stretches by host / device, so
// that the pass takes the host's time. Communication between the blocks is not counted on the
// device's side (the host issues through it too): a lower bound on the overlap, so a slight
// over-estimate of the floor where a pass's collectives are exposed. Host-side work that is
// not a kernel launch (Python module logic, autograd bookkeeping beyond its kernels, NCCL's
// calls) is not priced. Replayed from a CUDA graph (HostReplay, cuda_graphs=layers) a layer
// pass costs the host one launch, the graph's, whatever its kernels; under cuda_graphs=step
// the host launches one graph a step and no pass has a floor (the step's one launch is not
// priced).
enum class HostReplay {
  kKernels,     // each kernel launched by the host
  kLayerGraph,  // one graph launch a pass (cuda_graphs=layers, a layer's blocks)
  kStepGraph,   // one graph launch a step (cuda_graphs=step): no floor
};

// How the host issues a pass of the layer (`layer`) or of the embedding's or the head's ops.
HostReplay ReplayOf(const Layout& l, bool layer) {
  if (l.cuda_graphs == CudaGraphs::kStep) return HostReplay::kStepGraph;
  return layer && l.cuda_graphs == CudaGraphs::kLayers ? HostReplay::kLayerGraph : HostReplay::kKernels;
}

void HostFloor(std::initializer_list<Block*> blocks, double launch_s, HostReplay replay) {
  if (launch_s <= 0 || replay == HostReplay::kStepGraph) return;
  double fwd = 0, bwd = 0, fwd_host = 0, bwd_host = 0;
  for (const Block* b : blocks) {
    fwd += b->fwd;
    bwd += b->bwd;
    fwd_host += b->fwd_launches * launch_s;
    bwd_host += b->bwd_launches * launch_s;
  }
  if (replay == HostReplay::kLayerGraph) fwd_host = bwd_host = launch_s;
  const double rf = fwd > 0 && fwd_host > fwd ? fwd_host / fwd : 1;
  const double rb = bwd > 0 && bwd_host > bwd ? bwd_host / bwd : 1;
  for (Block* b : blocks) {
    b->fwd *= rf;
    b->row_fwd *= rf;
    b->selective *= rf;
    b->op_recompute *= rf;
    b->bwd *= rb;
    b->wgrad *= rb;
    b->col_wgrad *= rb;
  }
}

// A layer split where communication goes between its parts.
struct LayerCost {
  Block attn;      // norm1 .. residual1
  Block mlp_pre;   // norm2 (+ router)
  Block mlp;       // the MLP or the experts
  Block mlp_post;  // residual2
  const LayerPlan* plan = nullptr;
};

// recompute=op: what the backward of a layer reruns (OpCheckpoint, ops.h).
double OpRecomputeTime(const LayerCost& c) {
  return c.attn.op_recompute + c.mlp_pre.op_recompute + c.mlp.op_recompute + c.mlp_post.op_recompute;
}
double OpRecomputeFlops(const LayerCost& c) {
  return c.attn.op_recompute_flops + c.mlp_pre.op_recompute_flops + c.mlp.op_recompute_flops +
         c.mlp_post.op_recompute_flops;
}

// The activations a layer's backward rematerializes beside what it kept: the whole layer's
// under full recompute, under op what the checkpoint did not keep.
double RematerializedBytes(const LayerPlan& p, Recompute recompute) {
  switch (recompute) {
    case Recompute::kFull: return p.full_saved_bytes;
    case Recompute::kOp: return std::max(0.0, p.full_saved_bytes - p.saved_bytes);
    default: return 0;
  }
}

// overlap_tp=on is Transformer Engine's userbuffers overlap (Megatron-LM --tp-comm-overlap):
// the reduce-scatter after each row-parallel forward GEMM (proj_fprop, fc2_fprop) is
// pipelined with it in chunks by communication kernels that hold SMs for the whole GEMM, which
// runs on the rest (method "pipeline", set_sm_margin true). TE's default holds 16 SMs
// (transformer_engine/pytorch/module/base.py initialize_ub, get_default_config: num_sm 16 for
// pipeline, num_splits 4); NeMo's tuned H100 configurations hold 8 to 24, mean 17 (NeMo v2.2.1
// nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py, proj_fprop and fc2_fprop of
// the eight H100 configs). So those GEMMs take sm_count / (sm_count - 16) as long. Not modelled:
// the last chunk's reduce-scatter, which the next op waits for (1 / num_splits of one
// reduce-scatter, under 1 % of a layer's forward at GPT-3 175B, tp 4, on H100); the bulk
// overlaps of the backward, whose kernels run beside the GEMMs on 2 to 8 SMs in NeMo's tuned
// configurations (no margin), and the ring-exchange GEMMs of the column-parallel layers,
// split into tp pieces of M / tp rows each.
constexpr int64_t kTpOverlapPipelineSms = 16;

double RowParallelOverlapFactor(const GpuSpec& gpu, const Layout& l) {
  if (l.tp == 1 || l.overlap_tp != TpOverlap::kOn || !gpu.overlaps_communication ||
      gpu.sm_count <= 2 * kTpOverlapPipelineSms) {
    return 1;
  }
  return static_cast<double>(gpu.sm_count) / static_cast<double>(gpu.sm_count - kTpOverlapPipelineSms);
}

// The embedding's or the head's ops, one pass each, under the host floor.
Block CostUnit(const HardwareSpec& hw, const Layout& l, const std::vector<Op>& ops) {
  Block b = SumOps(hw.gpu, l.dtype, ops);
  HostFloor({&b}, hw.node.host.launch_s, ReplayOf(l, false));
  return b;
}

LayerCost CostLayer(const HardwareSpec& hw, const Layout& l, const LayerPlan& plan) {
  const GpuSpec& gpu = hw.gpu;
  std::vector<Op> attn, pre, mlp, post;
  for (const Op& op : plan.ops) {
    switch (op.part) {
      case LayerPart::kAttention: attn.push_back(op); break;
      case LayerPart::kMlpInput: pre.push_back(op); break;
      case LayerPart::kMlp: mlp.push_back(op); break;
      case LayerPart::kMlpOutput: post.push_back(op); break;
    }
  }
  LayerCost c;
  c.attn = SumOps(gpu, l.dtype, attn);
  c.mlp_pre = SumOps(gpu, l.dtype, pre);
  c.mlp = SumOps(gpu, l.dtype, mlp);
  c.mlp_post = SumOps(gpu, l.dtype, post);
  const double slow = RowParallelOverlapFactor(gpu, l) - 1;
  c.attn.fwd += c.attn.row_fwd * slow;
  // Expert GEMMs (grouped, not Transformer Engine's userbuffers layers) keep their rate.
  if (!plan.moe) c.mlp.fwd += c.mlp.row_fwd * slow;
  HostFloor({&c.attn, &c.mlp_pre, &c.mlp, &c.mlp_post}, hw.node.host.launch_s, ReplayOf(l, true));
  c.plan = &plan;
  return c;
}

LayerPlan PlanLayer(const ModelSpec& m, const Layout& l, bool moe) {
  LayerPlan p;
  p.moe = moe && m.moe.has_value();
  p.ops = LayerOps(m, l, p.moe);
  p.params = p.moe ? MoeLayerParamsOnRank(m, l) : DenseLayerParamsOnRank(m, l);
  if (p.moe) p.expert_params = ExpertParamsOnRank(m, l);
  // (The attention output's bias is among AttentionReplicatedParams; the MLP's second bias here.)
  p.replicated_params = static_cast<double>(m.LayerNormParams() + m.AttentionReplicatedParams()) + (m.bias ? static_cast<double>(m.hidden) : 0.0) +
                        (p.moe ? static_cast<double>(m.hidden * m.moe->experts) : 0.0) +
                        (p.moe && m.moe->shared_ffn_hidden > 0 && m.moe->shared_gate ? static_cast<double>(m.hidden) : 0.0);
  p.saved_bytes = LayerActivationBytes(m, l, p.moe);
  Layout none = l;
  none.recompute = Recompute::kNone;
  p.full_saved_bytes = LayerActivationBytes(m, none, p.moe);
  return p;
}

// The parameters whose optimizer state this rank updates: its DP shard under ZeRO >= 1 (expert
// parameters over the expert-data-parallel group).
double OptimizerShard(const StageParams& params, const Layout& l) {
  return l.zero >= 1 ? params.dense / static_cast<double>(l.dp_cp()) +
                           params.expert / static_cast<double>(std::max<int64_t>(1, l.edp()))
                     : params.total();
}

// ZeRO-Offload's step (Ren et al. 2021): the rank's `shard` of gradients to the host, CPU Adam
// over the host memory bandwidth the node's GPUs share, the updated weights back; one chain on
// the offload stream. Under ZeRO-2/3 with dp_cp > 1 the gradients have gone down bucket by
// bucket during the backward already (GradientsToHost), so the chain starts at CPU Adam.
std::vector<TaskSpec> OffloadStepTasks(const HardwareSpec& hw, const Layout& l, double shard, const StateBytes& sb) {
  TaskSpec down;
  down.kind = TaskKind::kHostTransfer;
  down.stream = Stream::kOffload;
  down.category = Category::kOffload;
  down.pass = Pass::kStep;
  down.bytes = shard * sb.gradients;
  TaskSpec adam;
  adam.kind = TaskKind::kHostCompute;
  adam.stream = Stream::kOffload;
  adam.category = Category::kOptimizer;
  adam.pass = Pass::kStep;
  adam.duration_s = shard * (sb.gradients + 2 * sb.optimizer + sb.weights) /
                    (hw.node.host.memory_bandwidth / static_cast<double>(hw.node.gpus));
  TaskSpec up = down;
  up.bytes = shard * sb.weights;
  // offload=optimizer+params (ZeRO-Infinity's offload_param, ZeRO-3): the weights' partition
  // is in host memory and updated there; each gather uploads it instead (GatherUnit).
  if (l.offload == Offload::kOptimizerAndParams && l.zero == 3 && l.dp_cp() > 1) return {adam};
  if (l.zero >= 2 && l.dp_cp() > 1) return {adam, up};
  return {down, adam, up};
}

// ZeRO-2/3 with offload: this rank's part of a reduce-scattered bucket of `bucket_params` (its
// 1 / dp_cp) copied to the host as soon as it is reduced, every micro-batch: DeepSpeed's
// stage_1_and_2.py accumulates offloaded gradients in host memory per micro-batch
// (async_accumulate_grad_in_cpu_via_gpu) and stage3.py moves each reduced partition to the host
// (partition_grads), so the transfer overlaps the rest of the backward (Ren et al. 2021, 4.2).
TaskSpec GradientsToHost(const Layout& l, double bucket_params, const StateBytes& sb) {
  TaskSpec t;
  t.kind = TaskKind::kHostTransfer;
  t.stream = Stream::kOffload;
  t.category = Category::kOffload;
  t.pass = Pass::kBackward;
  t.bytes = bucket_params / static_cast<double>(l.dp_cp()) * sb.gradients;
  return t;
}

// The K/V block ring attention passes per step, per rank (both K and V; the heads this rank
// holds, at least the KV heads: Megatron-LM's CP over the TP-split heads).
double CpBytes(const ModelSpec& m, const Layout& l) {
  const double e = l.dtype == DType::kFp32 ? 4 : 2;
  // K is kv_dim wide, V v_dim (MLA's values are v_head_dim per head), each at least one head a rank.
  const double t = static_cast<double>(l.tp);
  const double k = std::max<double>(m.kv_dim(), t * m.head_dim);
  const double v = std::max<double>(m.v_dim(), t * m.v_head_dim());
  return static_cast<double>(l.cp) * static_cast<double>(TokensPerRank(m, l)) * (k + v) / t * e;
}

// What every pass of one stage shares.
struct StageContext {
  const ModelSpec& m;
  const HardwareSpec& hw;
  const Layout& l;
  int32_t stage;
  LayerCost dense, moe;
  Block embedding, head;
  StateBytes state{};
  double tp_bytes = 0, pp_bytes = 0, cp_bytes = 0, ep_bytes = 0;
  // Under MoeGathersOverExpertTp, the experts' tokens gathered over the experts' TP group: every
  // member's received tokens, MoeExpertTokensPerRank rows at the busiest rank's load; ep_bytes
  // is this rank's own routed tokens' share.
  double ep_tp_bytes = 0;
  double ce_bytes = 0;  // the vocab-parallel cross-entropy's statistics, all TP ranks'
  // The embedding and head units on this rank (as ParamsOnStage): the embeddings (vocabulary
  // split over TP, positions whole); the final norm + LM head, whose table is the embedding's
  // when tied on one stage (gathered with it under ZeRO-3, its gradient the embedding's).
  double embedding_params = 0, head_params = 0;
  bool head_shares_table = false;  // tied embeddings on one stage: the head's table is the embedding's
  double embedding_table = 0;  // the table's share on this rank (vocab x hidden / tp)
  // Under gradient compression (CompressesGradients), what each unit's DP reduction sends
  // (grad_compression.h), once per stage; empty otherwise.
  CompressedGradients dense_sent{}, moe_sent{}, embedding_sent{}, head_sent{};
  const LayerCost& Layer(int64_t index) const { return m.IsMoeLayer(index) ? moe : dense; }
  const CompressedGradients& LayerSent(int64_t index) const { return m.IsMoeLayer(index) ? moe_sent : dense_sent; }
};

// One unit of gradients (a layer, the embeddings, the final norm + LM head) as its backward
// completes it: the parameters reduced over DP, those of them SP leaves partial over TP, and
// the expert parameters (reduced over the expert-data-parallel group, per layer).
// Under gradient compression (CompressesGradients), `sent` is what the unit's DP reduction
// sends (grad_compression.h); otherwise empty.
struct Unit {
  double params = 0, replicated = 0, expert = 0;
  CompressedGradients sent;
};

// The units whose gradients a pass of `chunk` completes, in order: its backward completes the
// head's, its layers' (top first) and the embeddings'; under zero-bubble the layers' complete in
// the W pass instead.
std::vector<Unit> UnitsOf(const StageContext& c, const ModelChunk& chunk, Pass pass) {
  const bool zb = SplitsWeightGradients(c.l);
  std::vector<Unit> out;
  if (pass == Pass::kBackward && chunk.has_head) {
    out.push_back({c.head_params, static_cast<double>(c.m.NormParams()), 0, c.head_sent});
  }
  if ((pass == Pass::kBackward) != zb) {
    for (int64_t k = chunk.layers; k-- > 0;) {
      const int64_t index = chunk.first_layer + k;
      const LayerPlan& p = *c.Layer(index).plan;
      out.push_back({p.params, p.replicated_params, p.expert_params, c.LayerSent(index)});
    }
  }
  if (pass == Pass::kBackward && chunk.has_embedding) out.push_back({c.embedding_params, 0, 0, c.embedding_sent});
  return out;
}

// Consecutive units fill a bucket until it holds bucket_params parameters (0: one unit each);
// a pass's last unit closes its bucket. Returns, per unit, whether its bucket closes after it.
std::vector<bool> BucketEnds(const Layout& l, const std::vector<Unit>& units) {
  std::vector<bool> ends(units.size(), false);
  double filled = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    filled += units[i].params;
    if (l.bucket_params == 0 || filled >= static_cast<double>(l.bucket_params) || i + 1 == units.size()) {
      ends[i] = true;
      filled = 0;
    }
  }
  return ends;
}


// Emits the tasks of one pass (or the tail) into a PassPlan. Inside a pass, `joins_` holds
// what the next compute must wait for: at the start the pass's entry (kEntryDep), later
// blocking sends and overlap_tp=backward's reductions; `tp_joins_` overlap_tp=on's
// collectives, joined at the pass's end.
class PassBuilder {
 public:
  PassBuilder(const StageContext& c, PassPlan* out) : c_(c), l_(c.l), out_(out) {}

  void Forward(const ModelChunk& chunk);
  // The stage delta of the pass's send: (stage of the next or previous position) - this stage.
  void SendsTo(int32_t delta) { out_->send_stage_delta = delta; }
  void Backward(const ModelChunk& chunk, bool last_mb);
  void WeightGrad(const ModelChunk& chunk, bool last_mb);
  void Tail();
  void Finish();

 private:
  int32_t Name(const std::string& n) {
    for (size_t i = 0; i < out_->names.size(); ++i) {
      if (out_->names[i] == n) return static_cast<int32_t>(i);
    }
    out_->names.push_back(n);
    return static_cast<int32_t>(out_->names.size() - 1);
  }

  // deps: earlier tasks of this pass, kEntryDep, or -1 (none).
  int32_t Add(TaskSpec t, const std::string& name, std::vector<int32_t> deps) {
    t.name = Name(name);
    t.dep_begin = static_cast<int32_t>(out_->deps.size());
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int32_t d : deps) {
      if (d >= 0 || d == kEntryDep) out_->deps.push_back(d);
    }
    t.dep_end = static_cast<int32_t>(out_->deps.size());
    out_->tasks.push_back(t);
    return static_cast<int32_t>(out_->tasks.size() - 1);
  }

  // In a pass's list, microbatch 0 and chunk 0 stand for the pass's own (filled in when
  // stamped); layer is relative to the chunk's first layer.
  int32_t Compute(const std::string& name, double seconds, double flops, Category cat, Pass pass,
                  int32_t layer, std::vector<int32_t> deps) {
    TaskSpec t;
    t.kind = TaskKind::kCompute;
    t.stream = Stream::kCompute;
    t.category = cat;
    t.pass = pass;
    t.microbatch = pass == Pass::kStep ? -1 : 0;
    t.chunk = pass == Pass::kStep ? -1 : 0;
    t.layer = layer;
    t.duration_s = seconds;
    t.flops = flops;
    return Add(t, name, std::move(deps));
  }

  TaskSpec CollTask(Collective c, GroupKind g, double bytes, Stream stream, Category cat, Pass pass,
                    bool per_microbatch, int32_t layer) const {
    TaskSpec t;
    t.kind = TaskKind::kCollective;
    t.stream = stream;
    t.category = cat;
    t.pass = pass;
    t.collective = c;
    t.group = g;
    t.bytes = bytes;
    t.microbatch = per_microbatch ? 0 : -1;
    t.layer = layer;
    return t;
  }
  int32_t Coll(const std::string& name, Collective c, GroupKind g, double bytes, Stream stream,
               Category cat, Pass pass, int32_t layer, std::vector<int32_t> deps) {
    return Add(CollTask(c, g, bytes, stream, cat, pass, true, layer), name, std::move(deps));
  }

  // TP exchange after (or before, for an SP all-gather) a block. Returns the task the next
  // compute must wait for: the collective, or with overlap_tp=on the producing compute (the
  // collective is then joined only at the pass's end, TakePassJoins). overlap_tp=backward
  // leaves these blocking; it splits the backward branches instead (ColumnParallelBackward).
  int32_t TpAfter(int32_t producer, Pass pass, int32_t layer) {
    if (l_.tp == 1) return producer;
    return Tp(TpReduction(producer, pass, layer), producer);
  }
  int32_t TpBefore(int32_t prev, Pass pass, int32_t layer) {
    if (l_.tp == 1 || !l_.sp) return prev;
    return Tp(TpGather({prev}, pass, layer), prev);
  }
  int32_t Tp(int32_t coll, int32_t producer) {
    if (l_.overlap_tp != TpOverlap::kOn) return coll;
    tp_joins_.push_back(coll);
    return producer;
  }
  // f's backward / g's forward: all-reduce, or reduce-scatter with SP.
  int32_t TpReduction(int32_t producer, Pass pass, int32_t layer) {
    return Coll(l_.sp ? "tp reduce-scatter" : "tp all-reduce",
                l_.sp ? Collective::kReduceScatter : Collective::kAllReduce, GroupKind::kTp,
                c_.tp_bytes, Stream::kTp, Category::kTp, pass, layer, {producer});
  }
  int32_t TpGather(std::vector<int32_t> deps, Pass pass, int32_t layer) {
    return Coll("tp all-gather", Collective::kAllGather, GroupKind::kTp, c_.tp_bytes, Stream::kTp,
                Category::kTp, pass, layer, std::move(deps));
  }
  // One multi-token-prediction depth's TP exchanges besides its transformer layer's, in order
  // after `after` (Megatron-Core's multi_token_prediction.py: _get_embeddings, _concat_embeddings,
  // then the shared head; its compute is in the head's task, c_.head, so they wait for it and
  // block, as the synchronous calls do). Forward: the shifted tokens' vocab-parallel embedding
  // summed (SP: reduce-scattered); SP: eh_proj's 2h-wide input rows gathered (a column-parallel
  // linear under SP); eh_proj's h / tp output columns gathered (gather_output=False, then
  // gather_from_tensor_model_parallel_region); SP: the final norm's rows gathered for the head;
  // the cross-entropy's statistics. Backward, in reverse: SP: the head's input rows re-gathered
  // for its weight gradient; the head's input gradient summed (SP: reduce-scattered); SP: the
  // backward of scatter_to_sequence_parallel_region, an all-gather (the column gather's backward
  // is a split); eh_proj's 2h-wide input gradient summed (SP: reduce-scattered); SP: the
  // embedding output's gradient gathered.
  int32_t MtpTpExchanges(Pass pass, int32_t after) {
    const double h = c_.tp_bytes;
    struct Call {
      const char* name;
      Collective c;
      double bytes;
    };
    const Call reduce{l_.sp ? "tp reduce-scatter" : "tp all-reduce",
                      l_.sp ? Collective::kReduceScatter : Collective::kAllReduce, h};
    const Call gather{"tp all-gather", Collective::kAllGather, h};
    std::vector<Call> calls;
    if (pass == Pass::kForward) {
      calls.push_back(reduce);
      if (l_.sp) calls.push_back({gather.name, gather.c, 2 * h});
      calls.push_back(gather);
      if (l_.sp) calls.push_back(gather);
      calls.push_back({gather.name, gather.c, c_.ce_bytes});
    } else {
      if (l_.sp) calls.push_back(gather);
      calls.push_back(reduce);
      if (l_.sp) calls.push_back(gather);
      calls.push_back({reduce.name, reduce.c, 2 * h});
      if (l_.sp) calls.push_back(gather);
    }
    int32_t t = after;
    for (const Call& k : calls) {
      t = Coll(k.name, k.c, GroupKind::kTp, k.bytes, Stream::kTp, Category::kTp, pass, -1, {t});
    }
    return t;
  }
  // The dependencies of the next compute: `t` and the joins pending.
  std::vector<int32_t> TakeJoins(int32_t t) {
    std::vector<int32_t> deps = joins_;
    deps.push_back(t);
    joins_.clear();
    return deps;
  }
  // At a pass's end (its pipeline send, LM head or embedding backward, the optimizer step):
  // also overlap_tp=on's collectives.
  std::vector<int32_t> TakePassJoins(int32_t t) {
    std::vector<int32_t> deps = TakeJoins(t);
    deps.insert(deps.end(), tp_joins_.begin(), tp_joins_.end());
    tp_joins_.clear();
    return deps;
  }

  // overlap_tp=backward, the start of a backward branch after `t`. With SP: the output
  // gradient's all-gather, blocking as with off, then the norm output's re-gather for the
  // weight gradients, which depends only on the branch's start (on the TP stream it queues
  // behind the first gather, as in Megatron-LM, where the column-parallel layer's backward
  // starts it). Returns the input-gradient part's dependencies and the re-gather (-1
  // without SP).
  std::pair<std::vector<int32_t>, int32_t> BackwardBranchStart(int32_t t, int32_t layer) {
    std::vector<int32_t> start = TakeJoins(t);
    if (!l_.sp) return {start, -1};
    const int32_t dout = TpGather(start, Pass::kBackward, layer);
    const int32_t regather = TpGather(start, Pass::kBackward, layer);
    start.push_back(dout);
    return {start, regather};
  }
  // overlap_tp=backward, the end of a backward branch whose input-gradient part ended at
  // `dgrad` (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication.backward, the
  // runtime's ColumnParallelBackwardOverlapped): the input gradient's reduction starts once it
  // and the re-gather are done and runs under the column-parallel weight-gradient GEMMs
  // (`seconds`), which need the re-gathered input too. The next compute waits for both.
  // Returns the weight-gradient task.
  int32_t ColumnParallelBackward(const std::string& branch, int32_t dgrad, int32_t regather,
                                 double seconds, double flops, int32_t layer) {
    const int32_t reduction = Coll(l_.sp ? "tp reduce-scatter" : "tp all-reduce",
                                   l_.sp ? Collective::kReduceScatter : Collective::kAllReduce,
                                   GroupKind::kTp, c_.tp_bytes, Stream::kTp, Category::kTp,
                                   Pass::kBackward, layer, {dgrad, regather});
    const int32_t wgrad = Compute(branch + " weight gradients", seconds, flops, Category::kCompute,
                                  Pass::kBackward, layer, {dgrad, regather});
    joins_.push_back(reduction);
    return wgrad;
  }

  bool Zero3() const { return l_.zero == 3 && l_.dp_cp() > 1; }
  // An MoE layer's experts are sharded over their replicas (ZeRO >= 1 with edp > 1): one bucket
  // of their own, reduced and gathered over GroupKind::kEdp as the layer's bucket is over kDp
  // (Megatron-Core's distributed optimizer keeps the experts in a buffer of their own over the
  // expert-data-parallel group; FSDP with EP shards them over it).
  bool ShardsExperts() const { return l_.zero >= 1 && l_.edp() > 1; }
  // An MoE layer whose input stays split over TP, its token dispatcher routing each TP rank's
  // own tokens (ops.h MoeInputSplitOverTp): no TP exchange at the MLP branch's ends.
  bool InputSplitOverTp(const LayerCost& c) const { return c.plan->moe && MoeInputSplitOverTp(l_); }
  // An MoE layer's path through the dispatcher: the all-to-alls over EP, the gathers over the
  // experts' TP, or both (else its MLP is one block, as a dense layer's).
  bool Dispatches(const LayerCost& c) const {
    return c.plan->moe && (l_.ep > 1 || MoeInputSplitOverTp(l_) || MoeGathersOverExpertTp(l_));
  }
  // The all-to-all over EP (ep > 1).
  int32_t ExpertAllToAll(bool dispatch, Pass pass, int32_t layer, std::vector<int32_t> after) {
    return Coll(dispatch ? "ep all-to-all dispatch" : "ep all-to-all combine", Collective::kAllToAll, GroupKind::kEp,
                c_.ep_bytes, Stream::kEp, Category::kEp, pass, layer, after);
  }
  // Its experts' tokens over the experts' TP group, where the dispatcher gathers over it
  // (MoeGathersOverExpertTp): gather_from_sequence_parallel_region after the dispatch
  // all-to-all (`gather`), or reduce_scatter_to_sequence_parallel_region before the combine.
  // On the TP stream, blocking, whatever overlap_tp (not Transformer Engine's layers).
  int32_t ExpertTokensOverTp(bool gather, Pass pass, int32_t layer, std::vector<int32_t> after) {
    const bool own_group = l_.own_expert_tp();  // the experts' TP group, not TP's (GroupKind::kEtp)
    const std::string what = gather ? " all-gather of expert tokens" : " reduce-scatter of expert tokens";
    return Coll((own_group ? "etp" : "tp") + what, gather ? Collective::kAllGather : Collective::kReduceScatter,
                own_group ? GroupKind::kEtp : GroupKind::kTp, c_.ep_tp_bytes, Stream::kTp, Category::kTp, pass,
                layer, std::move(after));
  }
  bool GathersExperts(const LayerCost& c) const {
    return l_.zero == 3 && l_.edp() > 1 && c.plan->expert_params > 0;
  }

  // One layer's forward (or its recomputation, with `gather` and `expert_gather` its ZeRO-3
  // gathers issued by the backward, -1 for none). Returns the last task.
  int32_t LayerForward(const LayerCost& c, int32_t prev, int32_t layer, bool recompute,
                       int32_t gather = -1, int32_t expert_gather = -1);
  // ZeRO-3's gather of a unit for a pass (over `group`: kDp, or kEdp for a layer's experts):
  // after the compute `window` back in the pass (the prefetch window), or after `prev` without
  // prefetch.
  int32_t GatherUnit(double params, Pass pass, int32_t layer, int32_t prev, GroupKind group = GroupKind::kDp);
  // ZeRO-3: the head's unit gathered for a pass, and with a tied table on this stage the
  // embedding's unit too; the gathers are appended to `deps`.
  void GatherHead(Pass pass, int32_t prev, std::vector<int32_t>& deps);
  // The gradient unit `u` is complete once `producer` ends: into the open bucket, which is
  // reduced when full (ZeRO 2/3: every micro-batch; ZeRO 0/1: on the last).
  void UnitDone(const Unit& u, bool closes, int32_t producer, int32_t layer, bool last_mb);
  // PowerSGD (grad_compression.h): the compressor's kernels after `after`, then [whole ++ P] and
  // Q all-reduced one after the other on the DP stream. Returns the last task.
  int32_t CompressedReduction(const CompressedGradients& sent, Pass pass, int32_t layer, int32_t after);

  // A zero-time task on the compute stream that waits for the previous pipeline position's
  // send; every task of the pass that needs the input depends on it (directly or through
  // the compute stream's order).
  int32_t ReceiveMarker(Pass pass) {
    const int32_t t = Compute(pass == Pass::kForward ? "receive activations" : "receive gradients", 0,
                              0, Category::kCompute, pass, -1, TakeJoins(-1));
    out_->receive = t;
    return t;
  }
  int32_t Send(Pass pass, int32_t t) {
    TaskSpec s;
    s.kind = TaskKind::kSend;
    s.stream = pass == Pass::kForward ? Stream::kPpForward : Stream::kPpBackward;
    s.category = Category::kPp;
    s.pass = pass;
    s.microbatch = 0;
    s.chunk = 0;
    s.bytes = c_.pp_bytes;
    const int32_t send = Add(s, pass == Pass::kForward ? "pp send activations" : "pp send gradients",
                             TakePassJoins(t));
    out_->send = send;
    if (!l_.overlap_pp) joins_.push_back(send);  // the sender's next compute waits for it
    return send;
  }
  int32_t LastCompute() const {
    for (int32_t i = static_cast<int32_t>(out_->tasks.size()) - 1; i >= 0; --i) {
      if (out_->tasks[i].kind == TaskKind::kCompute) return i;
    }
    return -1;
  }

  // Closes the pass: what the next pass waits for (joins left pending: a blocking send or
  // reduction).
  void EndPass() {
    for (int32_t j : joins_) {
      if (j >= 0) out_->carry.push_back(j);
    }
    joins_.clear();
  }

  const StageContext& c_;
  const Layout& l_;
  PassPlan* out_;
  std::vector<int32_t> joins_{kEntryDep};
  std::vector<int32_t> tp_joins_;
  Unit bucket_;                     // the gradients gathered into the open bucket
  std::vector<int32_t> done_;       // compute ends of the pass's layers, in pass order (ZeRO-3)
};

int32_t PassBuilder::GatherUnit(double params, Pass pass, int32_t layer, int32_t prev, GroupKind group) {
  const double replicas = static_cast<double>(group == GroupKind::kEdp ? l_.edp() : l_.dp_cp());
  // With prefetch the gather waits only for the compute `depth + 1` layers back to release its
  // buffer (or nothing, early in the pass: it may start during the previous pass).
  std::vector<int32_t> deps;
  const int64_t depth = ZeroPrefetchDepth(l_, DenseLayerParamsOnRank(c_.m, l_));
  if (depth == 0) {
    deps.push_back(prev);
  } else if (static_cast<int64_t>(done_.size()) > depth) {
    deps.push_back(done_[done_.size() - 1 - depth]);
  }
  if (l_.offload == Offload::kOptimizerAndParams) {
    // ZeRO-Infinity's offload_param: this rank's partition of the unit is in host memory and
    // goes up before each gather (stage3's partitioned parameters swapped in per fetch), on the
    // offload stream; the all-gather waits for it.
    TaskSpec up = CollTask(Collective::kAllGather, group, 0, Stream::kOffload, Category::kOffload,
                           pass, true, layer);
    up.kind = TaskKind::kHostTransfer;
    up.bytes = params / replicas * c_.state.weights;
    deps = {Add(up, "parameters to device", deps)};
  }
  return Coll(group == GroupKind::kEdp ? "zero-3 expert all-gather" : "zero-3 parameter all-gather",
              Collective::kAllGather, group, params * c_.state.weights, Stream::kDp, Category::kDp, pass, layer, deps);
}

void PassBuilder::GatherHead(Pass pass, int32_t prev, std::vector<int32_t>& deps) {
  // The head's unit (final norm, and the head's own table unless tied), and with a tied table
  // on this stage the embedding's unit too: each unit's parameters are one all-gather (the
  // runtime's buckets, FSDP's flat parameters), as memory.h holds them.
  deps.push_back(GatherUnit(c_.head_params, pass, -1, prev));
  if (c_.head_shares_table) deps.push_back(GatherUnit(c_.embedding_params, pass, -1, prev));
}

int32_t PassBuilder::LayerForward(const LayerCost& c, int32_t prev, int32_t layer, bool recompute,
                                  int32_t gather, int32_t expert_gather) {
  const Category cat = recompute ? Category::kRecompute : Category::kCompute;
  const Pass pass = recompute ? Pass::kRecompute : Pass::kForward;
  const std::string tag = recompute ? " recompute" : " forward";
  if (Zero3() && !recompute) gather = GatherUnit(c.plan->params, pass, layer, prev);
  if (GathersExperts(c) && !recompute) expert_gather = GatherUnit(c.plan->expert_params, pass, layer, prev, GroupKind::kEdp);
  int32_t t = TpBefore(prev, pass, layer);
  std::vector<int32_t> deps = TakeJoins(t);
  deps.push_back(gather);
  const int32_t attn = Compute("attention" + tag, c.attn.fwd, c.attn.flops, cat, pass, layer, deps);
  int32_t cp = -1;
  if (l_.cp > 1) {
    // Ring attention: K/V pass around the CP group while attention computes.
    cp = Coll("cp k/v exchange", Collective::kAllGather, GroupKind::kCp, c_.cp_bytes, Stream::kCp,
              Category::kCp, pass, layer, {prev});
  }
  t = TpAfter(attn, pass, layer);
  // The MoE layer's input stays split over TP when its dispatcher routes each TP rank's own
  // tokens (and gathers over the experts' TP itself).
  const bool dispatch_tp = InputSplitOverTp(c);
  if (!dispatch_tp) t = TpBefore(t, pass, layer);
  deps = TakeJoins(t);
  deps.push_back(cp);
  if (Dispatches(c)) {
    t = Compute("router" + tag, c.mlp_pre.fwd, c.mlp_pre.flops, cat, pass, layer, deps);
    const bool a2a = l_.ep > 1, etp = MoeGathersOverExpertTp(l_);
    if (a2a) t = ExpertAllToAll(true, pass, layer, {t});
    if (etp) t = ExpertTokensOverTp(true, pass, layer, {t});
    t = Compute("experts" + tag, c.mlp.fwd, c.mlp.flops, cat, pass, layer, {t, expert_gather});
    if (etp) t = ExpertTokensOverTp(false, pass, layer, {t});
    if (a2a) t = ExpertAllToAll(false, pass, layer, {t});
    t = Compute("mlp residual" + tag, c.mlp_post.fwd, 0, cat, pass, layer, {t});
  } else {
    deps.push_back(expert_gather);
    t = Compute("mlp" + tag, c.mlp_pre.fwd + c.mlp.fwd + c.mlp_post.fwd,
                c.mlp_pre.flops + c.mlp.flops, cat, pass, layer, deps);
  }
  if (!recompute) done_.push_back(t);
  return dispatch_tp ? t : TpAfter(t, pass, layer);
}

void PassBuilder::Forward(const ModelChunk& chunk) {
  int32_t t = -1;
  if (chunk.has_embedding) {
    std::vector<int32_t> deps = TakeJoins(-1);
    if (Zero3()) deps.push_back(GatherUnit(c_.embedding_params, Pass::kForward, -1, kEntryDep));
    t = Compute("embedding forward", c_.embedding.fwd, 0, Category::kCompute, Pass::kForward, -1, deps);
    // Vocab-parallel embedding: each TP rank looks up its rows of the table, the partial
    // outputs summed (Megatron-LM's VocabParallelEmbedding: all-reduce, SP: reduce-scatter).
    t = TpAfter(t, Pass::kForward, -1);
  } else {
    t = ReceiveMarker(Pass::kForward);
  }
  for (int64_t i = 0; i < chunk.layers; ++i) {
    const LayerCost& c = c_.Layer(chunk.first_layer + i);
    t = LayerForward(c, t, static_cast<int32_t>(i), false);
    out_->tasks[LastCompute()].memory_delta += c.plan->saved_bytes;
  }
  if (chunk.has_head) {
    // SP: the final norm's rows gathered for the vocab-parallel head.
    t = TpBefore(t, Pass::kForward, -1);
    std::vector<int32_t> deps = TakePassJoins(t);
    if (Zero3()) GatherHead(Pass::kForward, t, deps);
    t = Compute("lm head + loss forward", c_.head.fwd, c_.head.flops, Category::kCompute, Pass::kForward,
                -1, deps);
    if (l_.tp > 1) {
      // Vocab-parallel cross-entropy: each rank's per-row maximum, sum of exponentials and
      // target logit (3 floats) all-gathered over TP (the runtime's; Megatron-LM's
      // vocab_parallel_cross_entropy all-reduces the three instead).
      joins_.push_back(Coll("tp all-gather", Collective::kAllGather, GroupKind::kTp, c_.ce_bytes,
                            Stream::kTp, Category::kTp, Pass::kForward, -1, {t}));
      for (int64_t d = 0; d < c_.m.mtp_layers; ++d) joins_.push_back(MtpTpExchanges(Pass::kForward, t));
    }
  } else {
    Send(Pass::kForward, t);
  }
  EndPass();
}

void PassBuilder::Backward(const ModelChunk& chunk, bool last_mb) {
  const bool zb = SplitsWeightGradients(l_);
  const std::vector<Unit> units = UnitsOf(c_, chunk, Pass::kBackward);
  const std::vector<bool> ends = BucketEnds(l_, units);
  size_t unit = 0;  // the next unit to complete
  int32_t t = -1;
  if (chunk.has_head) {
    std::vector<int32_t> deps = TakeJoins(-1);
    // SP: the final norm's rows gathered again for the head's weight gradient.
    if (l_.tp > 1 && l_.sp) deps.push_back(Tp(TpGather(deps, Pass::kBackward, -1), -1));
    if (Zero3()) GatherHead(Pass::kBackward, kEntryDep, deps);
    t = Compute("lm head + loss backward", c_.head.bwd, 2 * c_.head.flops, Category::kCompute,
                Pass::kBackward, -1, deps);
    UnitDone(units[unit], ends[unit], t, -1, last_mb);
    ++unit;
    for (int64_t d = 0; d < c_.m.mtp_layers && l_.tp > 1; ++d) t = MtpTpExchanges(Pass::kBackward, t);
    // The head's input gradient summed over TP (SP: reduce-scattered to this rank's rows).
    t = TpAfter(t, Pass::kBackward, -1);
  } else {
    t = ReceiveMarker(Pass::kBackward);
  }
  for (int64_t k = chunk.layers; k-- > 0;) {
    const LayerCost& c = c_.Layer(chunk.first_layer + k);
    const int32_t layer = static_cast<int32_t>(k);
    // ZeRO-3: the layer's parameters, for its recomputation (if any) and its backward.
    const int32_t gather = Zero3() ? GatherUnit(c.plan->params, Pass::kBackward, layer, t) : -1;
    const int32_t expert_gather =
        GathersExperts(c) ? GatherUnit(c.plan->expert_params, Pass::kBackward, layer, t, GroupKind::kEdp) : -1;
    if (l_.recompute == Recompute::kFull) {
      t = LayerForward(c, t, layer, true, gather, expert_gather);
      out_->tasks[LastCompute()].memory_delta += c.plan->full_saved_bytes;
    } else if (l_.recompute == Recompute::kOp) {
      // torch.utils.checkpoint reruns the block's unsaved ops when its backward first unpacks
      // a saved tensor: at the start of the block's backward.
      t = Compute("op recompute", OpRecomputeTime(c), OpRecomputeFlops(c), Category::kRecompute,
                  Pass::kRecompute, layer, {t, gather, expert_gather});
      out_->tasks[t].memory_delta += RematerializedBytes(*c.plan, l_.recompute);
    }
    // Backward compute: zero-bubble leaves the weight-gradient half for the W pass.
    const double attn_b = zb ? c.attn.bwd - c.attn.wgrad : c.attn.bwd;
    const double mlp_b = zb ? (c.mlp_pre.bwd + c.mlp.bwd + c.mlp_post.bwd) -
                                  (c.mlp_pre.wgrad + c.mlp.wgrad + c.mlp_post.wgrad)
                            : c.mlp_pre.bwd + c.mlp.bwd + c.mlp_post.bwd;
    // overlap_tp=backward splits each branch into its input-gradient part and the
    // column-parallel weight gradients that hide its TP reduction. Under zero-bubble those
    // are deferred to the W pass, so there is nothing to hide under: the reductions block.
    const bool split = l_.overlap_tp == TpOverlap::kBackward && l_.tp > 1 && !zb;
    // An MoE layer whose input stays split over TP has no TP exchange at the MLP branch's
    // ends: its dispatcher's gather and reduce-scatter (over the experts' TP, if any) sit
    // inside, blocking (the experts' linears are not sequence-parallel, so Transformer Engine
    // overlaps nothing there).
    const bool dispatch_tp = InputSplitOverTp(c);
    const bool mlp_split = split && !dispatch_tp;
    const double mlp_w = mlp_split ? c.mlp_pre.col_wgrad + c.mlp.col_wgrad : 0;
    const double mlp_w_flops = mlp_split ? c.mlp_pre.col_flops + c.mlp.col_flops : 0;
    const double attn_w = split ? c.attn.col_wgrad : 0;
    const double attn_w_flops = split ? c.attn.col_flops : 0;
    // SP keeps only this rank's rows of the norm output, so the MLP's (and below the
    // attention's) weight gradient needs it all-gathered again (Megatron-LM's
    // LinearWithGradAccumulationAndAsyncCommunication.backward): blocking after the output
    // gradient's all-gather with overlap_tp off, joined at the pass's end with on, under the
    // input-gradient GEMMs with backward (BackwardBranchStart).
    int32_t regather = -1;
    std::vector<int32_t> deps;
    if (mlp_split) {
      std::tie(deps, regather) = BackwardBranchStart(t, layer);
    } else if (dispatch_tp) {
      deps = TakeJoins(t);
    } else {
      t = TpBefore(t, Pass::kBackward, layer);
      t = TpBefore(t, Pass::kBackward, layer);
      deps = TakeJoins(t);
    }
    deps.push_back(gather);
    const bool a2a = Dispatches(c) && l_.ep > 1, etp = Dispatches(c) && MoeGathersOverExpertTp(l_);
    if (a2a) deps = {ExpertAllToAll(true, Pass::kBackward, layer, deps)};
    // The backward of the experts' output reduce-scatter: their output gradient gathered.
    if (etp) deps = {ExpertTokensOverTp(true, Pass::kBackward, layer, deps)};
    deps.push_back(expert_gather);
    t = Compute("mlp backward", mlp_b - mlp_w, 2 * (c.mlp_pre.flops + c.mlp.flops) - mlp_w_flops,
                Category::kCompute, Pass::kBackward, layer, deps);
    // The backward of the experts' input all-gather: their input gradient reduce-scattered.
    if (etp) t = ExpertTokensOverTp(false, Pass::kBackward, layer, {t});
    if (a2a) t = ExpertAllToAll(false, Pass::kBackward, layer, {t});
    if (mlp_split) {
      t = ColumnParallelBackward("mlp", t, regather, mlp_w, mlp_w_flops, layer);
      std::tie(deps, regather) = BackwardBranchStart(t, layer);
    } else if (dispatch_tp) {
      // The attention branch starts from the MoE layer's split input gradient.
      if (split) {
        std::tie(deps, regather) = BackwardBranchStart(t, layer);
      } else {
        t = TpBefore(t, Pass::kBackward, layer);
        t = TpBefore(t, Pass::kBackward, layer);  // the norm output re-gathered, as above
        deps = TakeJoins(t);
      }
    } else {
      t = TpAfter(t, Pass::kBackward, layer);
      t = TpBefore(t, Pass::kBackward, layer);
      t = TpBefore(t, Pass::kBackward, layer);  // the norm output re-gathered, as above
      deps = TakeJoins(t);
    }
    if (l_.recompute == Recompute::kSelective) {
      t = Compute("attention core recompute", c.attn.selective, 0, Category::kRecompute,
                  Pass::kRecompute, layer, deps);
      deps = {t};
    }
    if (l_.cp > 1) {
      deps.push_back(Coll("cp k/v exchange", Collective::kAllGather, GroupKind::kCp, c_.cp_bytes,
                          Stream::kCp, Category::kCp, Pass::kBackward, layer, {t}));
      deps.push_back(Coll("cp dk/dv reduce-scatter", Collective::kReduceScatter, GroupKind::kCp,
                          c_.cp_bytes, Stream::kCp, Category::kCp, Pass::kBackward, layer, {t}));
    }
    t = Compute("attention backward", attn_b - attn_w, 2 * c.attn.flops - attn_w_flops,
                Category::kCompute, Pass::kBackward, layer, deps);
    int32_t bwd_end = t;
    if (split) {
      t = bwd_end = ColumnParallelBackward("attention", t, regather, attn_w, attn_w_flops, layer);
    } else {
      t = TpAfter(t, Pass::kBackward, layer);
    }
    done_.push_back(bwd_end);
    if (!zb) {
      out_->tasks[bwd_end].memory_delta -=
          c.plan->saved_bytes + RematerializedBytes(*c.plan, l_.recompute);
      UnitDone(units[unit], ends[unit], bwd_end, layer, last_mb);
      ++unit;
    }
  }
  if (chunk.has_embedding) {
    // SP: the embedding output's gradient gathered to every row (the backward of its forward
    // reduce-scatter) for the table's gradient.
    t = TpBefore(t, Pass::kBackward, -1);
    // ZeRO-3 gathers no table here: the embedding's backward reads no weights (a scatter-add
    // of the output gradient into the table's rows), as the runtime runs it (executor.cc).
    std::vector<int32_t> deps = TakePassJoins(t);
    t = Compute("embedding backward", c_.embedding.bwd, 0, Category::kCompute, Pass::kBackward, -1, deps);
    UnitDone(units[unit], ends[unit], t, -1, last_mb);
    ++unit;
  } else {
    Send(Pass::kBackward, t);
  }
  CHECK(unit == units.size()) << "backward completed " << unit << " of " << units.size() << " units";
  EndPass();
}

void PassBuilder::WeightGrad(const ModelChunk& chunk, bool last_mb) {
  const std::vector<Unit> units = UnitsOf(c_, chunk, Pass::kWeightGrad);
  const std::vector<bool> ends = BucketEnds(l_, units);
  size_t unit = 0;
  for (int64_t k = chunk.layers; k-- > 0;) {
    const LayerCost& c = c_.Layer(chunk.first_layer + k);
    const int32_t layer = static_cast<int32_t>(k);
    const double w = c.attn.wgrad + c.mlp_pre.wgrad + c.mlp.wgrad + c.mlp_post.wgrad;
    const int32_t t = Compute("weight gradients", w, 0, Category::kCompute, Pass::kWeightGrad, layer,
                              TakeJoins(-1));
    out_->tasks[t].memory_delta -=
        c.plan->saved_bytes + RematerializedBytes(*c.plan, l_.recompute);
    UnitDone(units[unit], ends[unit], t, layer, last_mb);
    ++unit;
  }
  EndPass();
}

void PassBuilder::UnitDone(const Unit& u, bool closes, int32_t producer, int32_t layer, bool last_mb) {
  const double gb = c_.state.gradients;
  // Expert gradients, each MoE layer's a bucket of their own over their replicas (kEdp), as the
  // layer's are over kDp: ZeRO-0 all-reduces them once; ZeRO-1 reduce-scatters them once,
  // during the last backward with overlap_dp and after it without; ZeRO-2/3 every micro-batch.
  // The replicas fold over TP x CP x DP, so an expert has them without DP where its TP is below
  // the dense TP (etp 1 under tp 2: the two TP ranks hold the same experts whole).
  if (u.expert > 0 && l_.edp() > 1 && (last_mb || l_.zero >= 2)) {
    const bool rs = l_.zero >= 1;
    TaskSpec e = CollTask(rs ? Collective::kReduceScatter : Collective::kAllReduce, GroupKind::kEdp, u.expert * gb,
                          Stream::kDp, Category::kDp, Pass::kBackward, false, layer);
    const std::string name = rs ? "expert gradient reduce-scatter" : "expert gradient all-reduce";
    if (l_.zero == 1 && !l_.overlap_dp) {
      e.name = Name(name);
      out_->deferred.emplace_back(e, producer);
    } else {
      const int32_t reduce = Add(e, name, {producer});
      out_->step_deps.push_back(reduce);
      if (l_.zero >= 2 && !l_.overlap_dp) joins_.push_back(reduce);
    }
  }
  if (l_.dp_cp() == 1) return;
  bucket_.params += u.params;
  bucket_.replicated += u.replicated;
  bucket_.sent += u.sent;
  if (!closes) return;
  const Unit b = bucket_;
  bucket_ = Unit{};
  if (l_.zero >= 2) {
    // ZeRO-2/3 (DeepSpeed; the runtime's ZeroBuckets): every micro-batch, the bucket's SP
    // partial tensors summed over TP, then its reduce-scatter over DP; overlapped with the rest
    // of the backward (overlap_comm) or waited for by the next compute.
    int32_t after = producer;
    if (l_.sp && l_.tp > 1 && b.replicated > 0) {
      after = Coll("sp gradient all-reduce", Collective::kAllReduce, GroupKind::kTp,
                   b.replicated * c_.state.gradients, Stream::kTp, Category::kTp, Pass::kBackward,
                   layer, {producer});
    }
    const int32_t rs = Coll(l_.zero == 3 ? "zero-3 gradient reduce-scatter" : "zero-2 gradient reduce-scatter",
                            Collective::kReduceScatter, GroupKind::kDp, b.params * gb, Stream::kDp,
                            Category::kDp, Pass::kBackward, layer, {after});
    out_->step_deps.push_back(rs);
    if (!l_.overlap_dp) joins_.push_back(rs);
    if (l_.offload != Offload::kNone) {
      out_->step_deps.push_back(Add(GradientsToHost(l_, b.params, c_.state), "gradients to host", {rs}));
    }
    return;
  }
  // ZeRO 0/1: the accumulated gradients reduced once, in the last micro-batch: during its
  // backward with overlap_dp (Megatron-LM's overlap_grad_reduce), else after it (ZeRO-0: one
  // all-reduce of everything, in the tail; ZeRO-1: bucket by bucket, deferred).
  if (!last_mb || (l_.zero == 0 && !l_.overlap_dp)) return;
  if (CompressesGradients(l_)) {  // overlapped with the rest of the backward
    out_->step_deps.push_back(CompressedReduction(b.sent, Pass::kBackward, layer, producer));
    return;
  }
  const bool rs = l_.zero == 1;
  const TaskSpec bucket = CollTask(rs ? Collective::kReduceScatter : Collective::kAllReduce,
                                   GroupKind::kDp, b.params * gb, Stream::kDp, Category::kDp,
                                   Pass::kBackward, false, layer);
  const std::string name = rs ? "dp gradient reduce-scatter" : "dp gradient all-reduce";
  if (l_.overlap_dp) {
    out_->step_deps.push_back(Add(bucket, name, {producer}));
  } else {
    TaskSpec deferred = bucket;
    deferred.name = Name(name);
    out_->deferred.emplace_back(deferred, producer);
  }
}

int32_t PassBuilder::CompressedReduction(const CompressedGradients& sent, Pass pass, int32_t layer, int32_t after) {
  const double gb = c_.state.gradients;
  const int32_t compress =
      Compute("gradient compression", CompressionTime(c_.hw.gpu, sent), 0, Category::kOptimizer, pass, layer, {after});
  int32_t last = Coll("dp gradient all-reduce", Collective::kAllReduce, GroupKind::kDp, sent.first() * gb, Stream::kDp,
                      Category::kDp, pass, layer, {compress});
  if (sent.second() > 0) {
    last = Coll("dp gradient all-reduce (q)", Collective::kAllReduce, GroupKind::kDp, sent.second() * gb, Stream::kDp,
                Category::kDp, pass, layer, {last});
  }
  return last;
}

void PassBuilder::Tail() {
  // Entry: the stage's last compute, every gradient reduction of the iteration and what the
  // last pass left pending; stamping and evaluation resolve kEntryDep to all of them.
  std::vector<int32_t> deps = TakePassJoins(-1);
  const StageParams params = ParamsOnStage(c_.m, l_, c_.stage);
  const double gb = c_.state.gradients;
  if (CompressesGradients(l_) && !l_.overlap_dp) {
    // PowerSGD without overlap: the stage's units compressed together, after the backward.
    CompressedGradients sent;
    for (const ModelChunk& ch : StageChunks(c_.m, l_, c_.stage)) {
      for (const Pass pass : {Pass::kBackward, Pass::kWeightGrad}) {
        for (const Unit& u : UnitsOf(c_, ch, pass)) sent += u.sent;
      }
    }
    deps.push_back(CompressedReduction(sent, Pass::kStep, -1, kEntryDep));
  } else if (l_.dp_cp() > 1 && l_.zero == 0 && !l_.overlap_dp) {
    // ZeRO-0 without overlap: one all-reduce of the stage's gradients (the runtime's, and
    // DDP's when nothing overlaps).
    deps.push_back(Coll("dp gradient all-reduce", Collective::kAllReduce, GroupKind::kDp,
                        params.dense * gb, Stream::kDp, Category::kDp, Pass::kStep, -1, {kEntryDep}));
  }
  if (l_.sp && l_.tp > 1 && l_.zero <= 1) {
    // SP: the stage's replicated tensors (norms, row-parallel biases) summed over TP, coalesced
    // (Megatron-LM's _allreduce_layernorm_grads in finalize_model_grads).
    double replicated = 0;
    for (const ModelChunk& ch : StageChunks(c_.m, l_, c_.stage)) {
      for (const Unit& u : UnitsOf(c_, ch, Pass::kBackward)) replicated += u.replicated;
      if (SplitsWeightGradients(l_)) {
        for (const Unit& u : UnitsOf(c_, ch, Pass::kWeightGrad)) replicated += u.replicated;
      }
    }
    deps.push_back(Coll("sp gradient all-reduce", Collective::kAllReduce, GroupKind::kTp,
                        replicated * c_.state.gradients, Stream::kTp, Category::kTp, Pass::kStep, -1,
                        {kEntryDep}));
  }
  if ((c_.m.tied_embeddings || c_.m.mtp_layers > 0) && HeadStage(l_) != 0 &&
      (c_.stage == 0 || c_.stage == HeadStage(l_))) {
    // The two copies of a tied table, or of the embedding table multi-token prediction looks up
    // on the head's stage (MtpHeadParamsOnRank), summed (Megatron-LM's
    // _allreduce_word_embedding_grads), after the DP reductions.
    deps.push_back(Coll("embedding gradient all-reduce", Collective::kAllReduce, GroupKind::kEmbedding,
                        c_.embedding_table * c_.state.gradients, Stream::kDp, Category::kDp, Pass::kStep,
                        -1, std::vector<int32_t>(deps.begin(), deps.end())));
  }
  const double shard = OptimizerShard(params, l_);
  const double opt_bytes = shard * (c_.state.gradients + 2 * c_.state.optimizer + c_.state.weights);
  int32_t step;
  if (l_.offload == Offload::kNone) {
    step = Compute("optimizer step", MemoryTime(c_.hw.gpu, opt_bytes) + c_.hw.gpu.efficiency.kernel_latency_s,
                   0, Category::kOptimizer, Pass::kStep, -1, deps);
  } else {
    const std::vector<TaskSpec> off = OffloadStepTasks(c_.hw, l_, shard, c_.state);
    int32_t prev = -1;
    bool adam_done = false;  // a transfer before CPU Adam takes gradients down, after it weights up
    for (size_t i = 0; i < off.size(); ++i) {
      const bool adam = off[i].kind == TaskKind::kHostCompute;
      const char* name = adam ? "cpu adam" : adam_done ? "weights to device" : "gradients to host";
      adam_done = adam_done || adam;
      prev = Add(off[i], name, i == 0 ? deps : std::vector<int32_t>{prev});
    }
    step = prev;
  }
  if ((l_.dp_cp() > 1 || ShardsExperts()) && (l_.zero == 1 || l_.zero == 2)) {
    // The updated parameters all-gathered bucket by bucket (the runtime's AllGatherParams,
    // Megatron-LM's distributed optimizer per bucket); the experts over their replicas, which
    // may exist without DP (UnitDone).
    for (const ModelChunk& ch : StageChunks(c_.m, l_, c_.stage)) {
      for (Pass pass : {Pass::kBackward, Pass::kWeightGrad}) {
        const std::vector<Unit> units = UnitsOf(c_, ch, pass);
        const std::vector<bool> ends = BucketEnds(l_, units);
        double bucket = 0;
        for (size_t i = 0; i < units.size() && l_.dp_cp() > 1; ++i) {
          bucket += units[i].params;
          if (!ends[i]) continue;
          Add(CollTask(Collective::kAllGather, GroupKind::kDp, bucket * c_.state.weights, Stream::kDp,
                       Category::kDp, Pass::kStep, false, -1),
              "dp parameter all-gather", {step});
          bucket = 0;
        }
        // Each MoE layer's experts, gathered over their replicas.
        for (const Unit& u : units) {
          if (u.expert <= 0 || !ShardsExperts()) continue;
          Add(CollTask(Collective::kAllGather, GroupKind::kEdp, u.expert * c_.state.weights, Stream::kDp,
                       Category::kDp, Pass::kStep, false, -1),
              "expert parameter all-gather", {step});
        }
      }
    }
  }
}

void PassBuilder::Finish() {
  // A device that cannot overlap communication with computation (a CPU core that drives MPI
  // inside its own calls) runs each collective and send on its compute stream, in issue
  // order: serialised with its compute, whatever the layout's overlap switches say.
  auto serialise = [&](TaskSpec& t) {
    if (!c_.hw.gpu.overlaps_communication &&
        (t.kind == TaskKind::kCollective || t.kind == TaskKind::kSend)) {
      t.stream = Stream::kCompute;
    }
  };
  for (TaskSpec& t : out_->tasks) serialise(t);
  for (auto& [t, producer] : out_->deferred) serialise(t);
  double level = 0;
  for (const TaskSpec& t : out_->tasks) {
    level += t.memory_delta;
    out_->memory_high = std::max(out_->memory_high, level);
  }
  out_->memory_net = level;
}

StageContext MakeContext(const ModelSpec& m, const HardwareSpec& hw, const Layout& l, int32_t stage,
                         const IterationPlan& plan) {
  StageContext c{m, hw, l, stage, CostLayer(hw, l, plan.dense),
                 CostLayer(hw, l, m.moe ? plan.moe : plan.dense), {}, {}, {}};
  const double e = l.dtype == DType::kFp32 ? 4 : 2;
  const double tokens = static_cast<double>(TokensPerRank(m, l));
  c.tp_bytes = tokens * static_cast<double>(m.hidden) * e;
  c.pp_bytes = c.tp_bytes / (l.sp ? static_cast<double>(l.tp) : 1.0);
  c.ce_bytes = static_cast<double>(l.tp) * 3.0 * tokens * 4.0;
  c.cp_bytes = CpBytes(m, l);
  // The all-to-all's pace is the busiest rank's: it receives MoeLoad() times the balanced share.
  const double routed = static_cast<double>(MoeRoutedTokensPerRank(m, l));
  c.ep_bytes = m.moe ? routed * static_cast<double>(m.moe->top_k * m.hidden) * e * l.MoeLoad() : 0;
  c.ep_tp_bytes = m.moe && MoeGathersOverExpertTp(l) ? c.ep_bytes * static_cast<double>(l.expert_tp()) : 0;
  c.state = StateBytesPerParam(l);
  c.embedding_table = static_cast<double>(m.vocab * m.hidden) / static_cast<double>(l.tp);
  c.embedding_params = c.embedding_table +
                       (m.position == Position::kLearned ? static_cast<double>(m.seq_len * m.hidden) : 0);
  const bool shares_table = m.tied_embeddings && HeadStage(l) == 0;  // one stage, or ZB-V's first
  c.head_params = static_cast<double>(m.NormParams()) + (shares_table ? 0 : c.embedding_table) +
                  MtpHeadParamsOnRank(m, l);
  c.head_shares_table = shares_table;
  c.embedding = CostUnit(hw, l, EmbeddingOps(m, l));
  c.head = CostUnit(hw, l, HeadOps(m, l));
  if (CompressesGradients(l)) {
    c.dense_sent = LayerGradients(m, l, false, plan.dense.params);
    if (m.moe) c.moe_sent = LayerGradients(m, l, true, plan.moe.params);
    c.embedding_sent = EmbeddingGradients(m, l, c.embedding_params);
    c.head_sent = HeadGradients(m, l, c.head_params);
  }
  return c;
}

// Chunks alike (same ends, same layer kinds) share their pass lists on every stage.
using PassKey = std::tuple<bool, bool, std::vector<bool>, int, bool, int32_t>;

StagePlan PlanStage(const ModelSpec& m, const HardwareSpec& hw, const Layout& l, int32_t stage,
                    IterationPlan& plan, std::map<PassKey, int32_t>& known) {
  const StageContext ctx = MakeContext(m, hw, l, stage, plan);
  StagePlan s;
  s.stage = stage;
  s.chunks = StageChunks(m, l, stage);
  s.order = ScheduleOrder(l, stage);
  s.pass_of.assign(s.chunks.size(), {});
  const bool zb = SplitsWeightGradients(l);
  for (size_t ci = 0; ci < s.chunks.size(); ++ci) {
    const ModelChunk& chunk = s.chunks[ci];
    std::vector<bool> kinds;
    for (int64_t i = 0; i < chunk.layers; ++i) kinds.push_back(m.IsMoeLayer(chunk.first_layer + i));
    for (int kind = 0; kind < 3; ++kind) {
      for (int last = 0; last < 2; ++last) {
        s.pass_of[ci][kind][last] = -1;
        if (kind == 2 && !zb) continue;
        // Where the pass sends to (forward: the next position, backward: the previous), as a
        // stage delta: chunks alike that send elsewhere do not share a list.
        int32_t delta = 0;
        if (kind == 0 && !chunk.has_head) delta = StageOfPosition(l, chunk.position + 1) - stage;
        if (kind == 1 && !chunk.has_embedding) delta = StageOfPosition(l, chunk.position - 1) - stage;
        const PassKey key{chunk.has_embedding, chunk.has_head, kinds, kind, kind > 0 && last == 1, delta};
        auto it = known.find(key);
        if (it != known.end()) {
          s.pass_of[ci][kind][last] = it->second;
          continue;
        }
        PassPlan p;
        PassBuilder b(ctx, &p);
        b.SendsTo(delta);
        if (kind == 0) b.Forward(chunk);
        if (kind == 1) b.Backward(chunk, last == 1);
        if (kind == 2) b.WeightGrad(chunk, last == 1);
        b.Finish();
        plan.passes.push_back(std::move(p));
        s.pass_of[ci][kind][last] = known[key] = static_cast<int32_t>(plan.passes.size() - 1);
      }
    }
  }
  PassBuilder tail(ctx, &s.tail);
  tail.Tail();
  tail.Finish();
  MemoryBreakdown mem = StageMemory(m, hw, l, stage);
  mem.activations = 0;
  s.static_memory = mem;
  return s;
}

// The optimizer step's time on `stage`, as Tail runs it: on the GPU, or offloaded (the chain
// of OffloadStepTasks).
double StepTime(const ModelSpec& m, const CollectiveModel& comm, const Layout& l, int32_t stage) {
  const HardwareSpec& hw = comm.cluster().hardware();
  const double shard = OptimizerShard(ParamsOnStage(m, l, stage), l);
  const StateBytes sb = StateBytesPerParam(l);
  if (l.offload == Offload::kNone) {
    return MemoryTime(hw.gpu, shard * (sb.gradients + 2 * sb.optimizer + sb.weights)) +
           hw.gpu.efficiency.kernel_latency_s;
  }
  double t = 0;
  for (const TaskSpec& task : OffloadStepTasks(hw, l, shard, sb)) t += TaskDuration(task, stage, comm, l);
  return t;
}

// The larger of stage `stage`'s DP and CP stream loads per micro-batch (ComputeLowerBound).
double StreamLoadPerMicrobatch(const ModelSpec& m, const CollectiveModel& comm, const Layout& l, int32_t stage,
                               const LayerCost (&costs)[2]) {
  const int64_t rank = RankOf(l, RankCoord{0, 0, 0, stage});
  double dp = 0, cp = 0;
  double layer_dp[2] = {0, 0}, layer_cp = 0;
  if (l.dp_cp() > 1 && l.zero >= 2) {
    const std::vector<int64_t> group = GroupMembers(l, rank, GroupKind::kDp);
    const StateBytes sb = StateBytesPerParam(l);
    for (int k = 0; k < (m.moe ? 2 : 1); ++k) {
      const double params = costs[k].plan->params;
      if (l.zero == 3) layer_dp[k] += 2 * comm.Estimate(Collective::kAllGather, group, params * sb.weights).time_s;
      if (l.bucket_params == 0) {
        layer_dp[k] += comm.Estimate(Collective::kReduceScatter, group, params * sb.gradients).time_s;
      }
    }
    if (!m.moe) layer_dp[1] = layer_dp[0];
  }
  if (l.cp > 1) {
    const std::vector<int64_t> group = GroupMembers(l, rank, GroupKind::kCp);
    const double bytes = CpBytes(m, l);
    layer_cp = (l.recompute == Recompute::kFull ? 3 : 2) * comm.Estimate(Collective::kAllGather, group, bytes).time_s +
               comm.Estimate(Collective::kReduceScatter, group, bytes).time_s;
  }
  for (int32_t ci = 0; ci < ChunksPerStage(l); ++ci) {
    const ModelChunk c = ChunkOf(m, l, stage, ci);
    const int64_t moe = m.MoeLayersIn(c.first_layer, c.first_layer + c.layers);
    dp += static_cast<double>(c.layers - moe) * layer_dp[0] + static_cast<double>(moe) * layer_dp[1];
    cp += static_cast<double>(c.layers) * layer_cp;
  }
  return std::max(dp, cp);
}

}  // namespace

struct LayerShapeCosts {
  LayerPlan dense, moe;  // LayerCost points into these: the struct is never copied
  LayerCost costs[2];
  Block embedding, head;
};

std::string LayerShapeKey(const Layout& l) {
  // What the layer's ops and their costs do not read (PlanLayer, CostLayer, EmbeddingOps,
  // HeadOps): the pipeline, the data-parallel side, the schedule and the overlap switches but
  // overlap_tp=on (CostLayer's row-parallel GEMMs give SMs to its reduce-scatters).
  // Everything else stays in the key, so a field they start reading joins it by default.
  Layout k = l;
  k.pp = k.dp = k.vpp = 1;
  k.gbs = 1;
  k.zero = 0;
  k.schedule = Schedule::k1F1B;
  k.schedule_given = false;
  k.offload = Offload::kNone;
  k.overlap_dp = k.overlap_pp = k.prefetch = false;
  if (k.overlap_tp != TpOverlap::kOn) k.overlap_tp = TpOverlap::kOff;
  k.bucket_params = k.live_params = 0;
  k.grad_compression = 1;
  k.first_stage_layers = k.last_stage_layers = 0;
  k.embedding_in_split = k.loss_in_split = false;
  return FormatLayout(k);
}

std::shared_ptr<const LayerShapeCosts> PrepareLayerShape(const ModelSpec& m, const HardwareSpec& hw,
                                                         const Layout& l) {
  auto p = std::make_shared<LayerShapeCosts>();
  p->dense = PlanLayer(m, l, false);
  if (m.moe) p->moe = PlanLayer(m, l, true);
  p->costs[0] = CostLayer(hw, l, p->dense);
  p->costs[1] = m.moe ? CostLayer(hw, l, p->moe) : p->costs[0];
  p->embedding = CostUnit(hw, l, EmbeddingOps(m, l));
  p->head = CostUnit(hw, l, HeadOps(m, l));
  return p;
}

double ComputeLowerBound(const ModelSpec& m, const CollectiveModel& comm, const Layout& l,
                         const LayerShapeCosts* shape) {
  const HardwareSpec& hw = comm.cluster().hardware();
  std::shared_ptr<const LayerShapeCosts> own;
  if (shape == nullptr) {
    own = PrepareLayerShape(m, hw, l);
    shape = own.get();
  }
  const LayerCost (&costs)[2] = shape->costs;
  const Block& embedding = shape->embedding;
  const Block& head = shape->head;
  // One micro-batch of one chunk: forward, and backward with its recomputation.
  auto chunk_compute = [&](const ModelChunk& c, double* fwd, double* bwd) {
    *fwd = *bwd = 0;
    const int64_t moe = m.MoeLayersIn(c.first_layer, c.first_layer + c.layers);
    for (const int kind : {0, 1}) {  // each kind's layers at once (counted, MoeLayersIn)
      const double n = static_cast<double>(kind == 1 ? moe : c.layers - moe);
      if (n == 0) continue;
      const LayerCost& k = costs[kind];
      const double f = k.attn.fwd + k.mlp_pre.fwd + k.mlp.fwd + k.mlp_post.fwd;
      *fwd += n * f;
      *bwd += n * (k.attn.bwd + k.mlp_pre.bwd + k.mlp.bwd + k.mlp_post.bwd +
                   (l.recompute == Recompute::kFull        ? f
                    : l.recompute == Recompute::kSelective ? k.attn.selective
                    : l.recompute == Recompute::kOp        ? OpRecomputeTime(k)
                                                           : 0));
    }
    if (c.has_embedding) {
      *fwd += embedding.fwd;
      *bwd += embedding.bwd;
    }
    if (c.has_head) {
      *fwd += head.fwd;
      *bwd += head.bwd;
    }
  };
  // The TP collectives per layer the next compute waits for, as PassBuilder chains them:
  // forward 2 reductions (SP: + 2 gathers); backward with off the same plus SP's 2 re-gathers,
  // with backward only SP's 2 output-gradient gathers; full recompute repeats the forward's.
  int64_t tp_fwd = 0, tp_bwd = 0;
  const bool tp_split = l.overlap_tp == TpOverlap::kBackward && !SplitsWeightGradients(l);
  if (l.tp > 1 && l.overlap_tp != TpOverlap::kOn) {
    tp_fwd = l.sp ? 4 : 2;
    tp_bwd = tp_split ? (l.sp ? 2 : 0) : (l.sp ? 6 : 2);
    if (l.recompute == Recompute::kFull) tp_bwd += tp_fwd;
  }
  const double e = l.dtype == DType::kFp32 ? 4 : 2;
  const double tp_bytes = static_cast<double>(TokensPerRank(m, l)) * static_cast<double>(m.hidden) * e;
  const double pp_bytes = tp_bytes / (l.sp ? static_cast<double>(l.tp) : 1.0);
  const double mb = static_cast<double>(l.microbatches());
  const int32_t pp = static_cast<int32_t>(l.pp);
  auto send_time = [&](int32_t from, int32_t to) {
    return comm.Estimate(Collective::kSendRecv, {RankOf(l, RankCoord{0, 0, 0, from}), RankOf(l, RankCoord{0, 0, 0, to})},
                         pp_bytes).time_s;
  };
  double bound = 0, fill = 0, drain = 0;
  const double opt0 = StepTime(m, comm, l, 0);
  for (int32_t s = 0; s < pp; ++s) {
    double tp_layer_fwd = 0, tp_layer_bwd = 0;
    if (tp_fwd + tp_bwd > 0) {
      const std::vector<int64_t> group = GroupMembers(l, RankOf(l, RankCoord{0, 0, 0, s}), GroupKind::kTp);
      const double reduce = comm.Estimate(l.sp ? Collective::kReduceScatter : Collective::kAllReduce, group, tp_bytes).time_s;
      const double gather = l.sp ? comm.Estimate(Collective::kAllGather, group, tp_bytes).time_s : reduce;
      const double c = std::min(reduce, gather);
      tp_layer_fwd = static_cast<double>(tp_fwd) * c;
      tp_layer_bwd = static_cast<double>(tp_bwd) * c;
    }
    // The sends of a pass: on the chain of the next pass when they block (overlap_pp off, on a
    // device that overlaps: PassBuilder::Send), and always on the fill's and drain's.
    // A chunk's peer is the stage of the next (previous) position, which under ZB-V may be the
    // stage itself (the V's turn on the last stage: no send) or the stage before (chunk 1).
    auto chunk_send = [&](const ModelChunk& c, int32_t step) {
      const int32_t peer = StageOfPosition(l, c.position + step);
      return peer == s ? 0.0 : send_time(s, peer);
    };
    const bool blocking = !l.overlap_pp || !hw.gpu.overlaps_communication;
    double busy = 0, first_fwd = 0, first_bwd = 0;
    for (int32_t ci = 0; ci < ChunksPerStage(l); ++ci) {
      const ModelChunk c = ChunkOf(m, l, s, ci);
      double f, b;
      chunk_compute(c, &f, &b);
      f += static_cast<double>(c.layers) * tp_layer_fwd;
      b += static_cast<double>(c.layers) * tp_layer_bwd;
      // An MoE layer whose dispatcher gathers over TP chains one TP collective fewer in its
      // backward without the split (its MLP branch's two inside, against a dense layer's three).
      // With the experts' TP set apart (etp), its MLP branch may have no TP-sized exchange at
      // all: none of its TP collectives is counted (a looser bound, still a bound).
      const double moe_layers = static_cast<double>(m.MoeLayersIn(c.first_layer, c.first_layer + c.layers));
      if (MoeInputSplitOverTp(l) && l.own_expert_tp()) {
        f -= moe_layers * tp_layer_fwd;
        b -= moe_layers * tp_layer_bwd;
      } else if (tp_bwd > 0 && !tp_split && MoeInputSplitOverTp(l)) {
        b -= moe_layers * tp_layer_bwd / static_cast<double>(tp_bwd);
      }
      // A pass that ends in a send the next pass does not wait for (overlap_pp) leaves its last
      // layer's output reduction to the send: not on this stage's compute chain.
      if (!blocking && tp_fwd > 0 && c.layers > 0) {
        if (!c.has_head) f -= tp_layer_fwd / static_cast<double>(tp_fwd);
        if (!c.has_embedding && l.overlap_tp == TpOverlap::kOff) b -= tp_layer_bwd / static_cast<double>(tp_bwd);
      }
      const double fs = c.has_head ? 0 : chunk_send(c, 1), bs = c.has_embedding ? 0 : chunk_send(c, -1);
      busy += mb * (f + b + (blocking ? fs + bs : 0));
      if (c.position == s) {
        first_fwd = f + fs;
        first_bwd = b + bs;
      }
    }
    const double opt = StepTime(m, comm, l, s);
    bound = std::max(bound, fill + busy + opt);
    // The DP and CP streams run their collectives one after another: each stream's load per
    // micro-batch, as PassBuilder issues it, bounds the iteration too. ZeRO-3 gathers every
    // layer's parameters for its forward and again for its backward; ZeRO-2/3 reduce-scatter its
    // gradients every micro-batch (counted per layer only with one unit per bucket, where the
    // buckets are the layers); ring attention passes K/V in each forward (again in a full
    // recompute) and K/V plus their gradients in each backward. Any one stage's load bounds
    // the iteration; the end stages' are taken (the others are alike, and the bound stays cheap).
    // (Under an uneven split the middle stages, alike among themselves, differ from the ends:
    // stage 1 is taken too.)
    if (s == 0 || s == pp - 1 || (s == 1 && l.uneven_split())) {
      bound = std::max(bound, mb * StreamLoadPerMicrobatch(m, comm, l, s, costs));
    }
    if (!SplitsWeightGradients(l)) bound = std::max(bound, fill + busy + drain + opt0);
    fill += first_fwd;
    drain += first_bwd;
  }
  return bound;
}

IterationPlan BuildIterationPlan(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  IterationPlan plan;
  plan.dense = PlanLayer(m, l, false);
  if (m.moe) plan.moe = PlanLayer(m, l, true);
  std::map<PassKey, int32_t> known;
  for (int32_t s = 0; s < l.pp; ++s) plan.stages.push_back(PlanStage(m, hw, l, s, plan, known));
  return plan;
}

}  // namespace shardsim
