// See estimate.h. The closed-form step time:
//   per micro-batch on a stage: tau = compute + recompute + exposed TP/CP/EP communication
//   pipeline (Narayanan et al. 2021, Sec. 2.2): m * tau + bubble, bubble = (p-1) * tau for
//     GPipe and 1F1B, (p-1) * tau / v interleaved, (p-1) * (tau - t_wgrad) for the zero-bubble
//     B/W split (Qi et al. 2023; their ZB-H1 placement of W in the cool-down, which reaches
//     (p-1)(T_F + T_B - T_W), is not modelled)
//   + exposed pipeline sends, DP/ZeRO communication, optimizer step and offload transfers.
// On a device that does not overlap communication with computation
// (GpuSpec::overlaps_communication false) nothing is hidden: every collective and send is
// exposed in full, whatever the layout's overlap switches.
#include "src/cost/estimate.h"

#include <algorithm>
#include <cmath>

#include "src/cost/op_time.h"
#include "src/layout/placement.h"

namespace shardsim {
namespace {

struct StageCompute {
  double forward = 0, backward = 0, recompute = 0, wgrad = 0;
  double attention_forward = 0;
  std::vector<OpTiming> ops;
  // overlap_tp=backward's windows: per layer kind, one layer's column-parallel weight-gradient
  // time in the attention branch (qkv) and in the MLP branch (up or gate_up), and the number
  // of such layers on the stage.
  struct TpWindow {
    double attention_s = 0, mlp_s = 0;
    int64_t layers = 0;
  };
  std::vector<TpWindow> tp_windows;
};

// Adds `count` instances of `ops` to the stage.
void AddOps(StageCompute& s, const GpuSpec& gpu, const Layout& l, const std::vector<Op>& ops,
            bool recomputable, int64_t count) {
  if (count == 0) return;
  const double n = static_cast<double>(count);
  StageCompute::TpWindow window{0, 0, count};
  bool in_mlp = false;  // after the attention branch's residual1
  for (const Op& op : ops) {
    if (op.column_parallel) {  // the weight-gradient GEMM: half the backward
      (in_mlp ? window.mlp_s : window.attention_s) += OpBackwardTime(gpu, l.dtype, op) / 2;
    }
    in_mlp = in_mlp || op.name == "residual1";
    const double f = OpForwardTime(gpu, l.dtype, op);
    const double b = OpBackwardTime(gpu, l.dtype, op);
    s.forward += n * f;
    s.backward += n * b;
    if (op.kind == OpKind::kMatmul) s.wgrad += n * b / 2;  // weight-gradient GEMM: half the backward
    if (op.kind == OpKind::kAttention) s.attention_forward += n * f;
    if (recomputable && (l.recompute == Recompute::kFull ||
                         (l.recompute == Recompute::kSelective && op.recomputed_selective))) {
      s.recompute += n * f;
    }
    auto it = std::find_if(s.ops.begin(), s.ops.end(),
                           [&](const OpTiming& t) { return t.op.name == op.name; });
    if (it == s.ops.end()) {
      s.ops.push_back(OpTiming{op, count, f, b});
    } else {
      it->count += count;
    }
  }
  if (recomputable) s.tp_windows.push_back(window);
}

// The per-kind layer ops of a layout, built once and shared by every stage.
struct LayerKinds {
  std::vector<Op> dense, moe;
};

StageCompute ComputeStage(const ModelSpec& m, const GpuSpec& gpu, const Layout& l, int64_t stage,
                          const LayerKinds& kinds) {
  StageCompute s;
  const int64_t chunk = m.layers / (l.pp * l.vpp);
  if (stage == 0) AddOps(s, gpu, l, EmbeddingOps(m, l), false, 1);
  // Layers of one kind cost the same: price each kind once, times its count on the stage.
  int64_t counts[2] = {0, 0};
  for (int64_t v = 0; v < l.vpp; ++v) {
    const int64_t first = (v * l.pp + stage) * chunk;
    for (int64_t i = first; i < first + chunk; ++i) ++counts[m.IsMoeLayer(i) ? 1 : 0];
  }
  AddOps(s, gpu, l, kinds.dense, true, counts[0]);
  AddOps(s, gpu, l, kinds.moe, true, counts[1]);
  if (stage == l.pp - 1) AddOps(s, gpu, l, HeadOps(m, l), false, 1);
  return s;
}

}  // namespace

Estimate EstimateIteration(const ModelSpec& m, const Cluster& cluster, const Layout& l) {
  const CollectiveModel comm(cluster);
  return EstimateIteration(m, comm, l);
}

Estimate EstimateIteration(const ModelSpec& m, const CollectiveModel& comm, const Layout& l) {
  const Cluster& cluster = comm.cluster();
  const HardwareSpec& hw = cluster.hardware();
  const GpuSpec& gpu = hw.gpu;
  const bool overlaps = gpu.overlaps_communication;  // false: every "hidden" term below is 0
  Estimate est;
  est.layout = l;
  est.parameters = m.TotalParams();
  const double mb = static_cast<double>(l.microbatches());
  const double p = static_cast<double>(l.pp);
  const double v = static_cast<double>(l.vpp);
  const double e = l.dtype == DType::kFp32 ? 4 : 2;  // activation element bytes
  const double tokens = static_cast<double>(TokensPerRank(m, l));
  const int64_t layers_per_stage = m.layers / l.pp;
  int64_t moe_per_stage = 0;
  for (int64_t i = 0; i < layers_per_stage; ++i) moe_per_stage += m.IsMoeLayer(i) ? 1 : 0;

  // Memory per stage; the peak is the largest.
  for (int64_t s = 0; s < l.pp; ++s) est.stage_memory.push_back(StageMemory(m, hw, l, s));
  for (int64_t s = 1; s < l.pp; ++s) {
    if (est.stage_memory[s].total() > est.stage_memory[est.peak_stage].total()) est.peak_stage = s;
  }
  const MemoryBreakdown& peak = est.peak_memory();
  est.fits = peak.total() <= gpu.memory_bytes &&
             peak.host * hw.node.gpus <= hw.node.host.memory_bytes;

  // Compute per micro-batch: the slowest stage sets the pipeline's pace.
  StageCompute slow;
  int64_t slow_stage = 0;
  LayerKinds kinds;
  kinds.dense = LayerOps(m, l, false);
  if (m.moe) kinds.moe = LayerOps(m, l, true);
  for (int64_t s = 0; s < l.pp; ++s) {
    // Middle stages are alike (same layer kinds, no embedding or head): price one of them.
    if (s > 1 && s < l.pp - 1 && !m.moe) continue;
    StageCompute c = ComputeStage(m, gpu, l, s, kinds);
    if (s == 0 || c.forward + c.backward + c.recompute > slow.forward + slow.backward + slow.recompute) {
      slow = std::move(c);
      slow_stage = s;
    }
  }
  est.ops = slow.ops;
  const int64_t rank = RankOf(l, RankCoord{0, 0, 0, slow_stage});
  auto group = [&](ParallelDim d) { return GroupOf(l, rank, d); };
  // Records `count` calls per iteration of one collective; returns their total time.
  auto add = [&](std::string purpose, ParallelDim d, int64_t count, Collective c, double bytes) {
    CollectiveTiming t;
    t.purpose = std::move(purpose);
    t.group = d;
    t.count = count;
    t.cost = comm.Estimate(c, group(d), bytes);
    est.collectives.push_back(t);
    return static_cast<double>(count) * t.cost.time_s;
  };

  // Tensor parallel: per layer 2 all-reduces forward and 2 backward of the T x h activation;
  // with SP each becomes an all-gather + reduce-scatter pair (same bytes on the wire).
  // Full recompute repeats the forward ones.
  double tp_per_mb = 0;
  if (l.tp > 1) {
    const double act = tokens * static_cast<double>(m.hidden) * e;
    const int64_t passes = 2 + (l.recompute == Recompute::kFull ? 1 : 0);  // fwd, bwd, recompute
    const int64_t per_layer = 2 * passes;
    const int64_t count = per_layer * layers_per_stage * l.microbatches();
    if (l.sp) {
      tp_per_mb += add("tp all-gather (sp)", ParallelDim::kTp, count, Collective::kAllGather, act);
      tp_per_mb += add("tp reduce-scatter (sp)", ParallelDim::kTp, count, Collective::kReduceScatter, act);
    } else {
      tp_per_mb += add("tp all-reduce", ParallelDim::kTp, count, Collective::kAllReduce, act);
    }
    tp_per_mb /= mb;
    if (overlaps && l.overlap_tp == TpOverlap::kOn) {
      // Overlapped with the GEMMs they feed: exposed only beyond the matmul time.
      double matmul = 0;
      for (const OpTiming& t : slow.ops) {
        if (t.op.kind == OpKind::kMatmul) matmul += t.count * (t.forward_s + t.backward_s);
      }
      tp_per_mb = std::max(0.0, tp_per_mb - matmul);
    } else if (overlaps && l.overlap_tp == TpOverlap::kBackward &&
               l.schedule != Schedule::kZeroBubble) {
      // Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication.backward
      // (megatron/core/tensor_parallel/layers.py): in each backward branch the input gradient
      // of the column-parallel projections (qkv; up or gate_up) is reduced (all-reduce, SP:
      // reduce-scatter) while their weight-gradient GEMMs run, so per layer and branch
      //   hidden = min(t_reduction, t_wgrad(column-parallel))
      // and tp_per_mb drops by the sum over the stage's layers. Forward (and recompute) TP and
      // the output-gradient all-gathers stay exposed. (SP's backward re-gathers, which this
      // estimate does not count, would hide under the input-gradient GEMMs.) Zero-bubble
      // defers the weight gradients to the W pass: nothing to hide under.
      const Collective kind = l.sp ? Collective::kReduceScatter : Collective::kAllReduce;
      const double reduction = comm.Estimate(kind, group(ParallelDim::kTp), act).time_s;
      double hidden = 0;
      for (const StageCompute::TpWindow& w : slow.tp_windows) {
        hidden += static_cast<double>(w.layers) *
                  (std::min(reduction, w.attention_s) + std::min(reduction, w.mlp_s));
      }
      tp_per_mb = std::max(0.0, tp_per_mb - hidden);
    }
  }

  // Context parallel: ring attention passes K and V around the CP group (an all-gather of
  // K,V forward; all-gather + reduce-scatter of dK,dV backward), hidden under attention.
  double cp_per_mb = 0;
  if (l.cp > 1) {
    const double kv_bytes = static_cast<double>(l.cp) * tokens * 2.0 *
                            std::max<double>(m.kv_dim(), static_cast<double>(l.tp * m.head_dim)) /
                            static_cast<double>(l.tp) * e;
    const double ring = add("cp k/v exchange", ParallelDim::kCp,
                            3 * layers_per_stage * l.microbatches(), Collective::kAllGather,
                            kv_bytes) / mb;
    cp_per_mb = overlaps ? std::max(0.0, ring - 3.0 * slow.attention_forward) : ring;
  }

  // Expert parallel: all-to-all dispatch and combine, forward and backward.
  double ep_per_mb = 0;
  if (m.moe && moe_per_stage > 0) {
    const double bytes = tokens * static_cast<double>(m.moe->top_k * m.hidden) * e;
    if (l.ep > 1) {
      ep_per_mb = add("ep all-to-all", ParallelDim::kEp, 4 * moe_per_stage * l.microbatches(),
                      Collective::kAllToAll, bytes) / mb;
    }
  }

  const double tau = slow.forward + slow.backward + slow.recompute + tp_per_mb + cp_per_mb + ep_per_mb;
  est.time.compute = mb * (slow.forward + slow.backward);
  est.time.recompute = mb * slow.recompute;
  est.time.tp_comm = mb * tp_per_mb;
  est.time.cp_comm = mb * cp_per_mb;
  est.time.ep_comm = mb * ep_per_mb;
  switch (l.schedule) {
    case Schedule::kGpipe:
    case Schedule::k1F1B: est.time.bubble = (p - 1) * tau; break;
    case Schedule::kInterleaved: est.time.bubble = (p - 1) * tau / v; break;
    case Schedule::kZeroBubble: est.time.bubble = (p - 1) * std::max(0.0, tau - slow.wgrad); break;
  }

  // Pipeline sends: each micro-batch chunk crosses a stage boundary forward and backward;
  // fill and drain put 2(p-1) of them on the critical path, steady state one pair per step.
  if (l.pp > 1) {
    const double act = tokens * static_cast<double>(m.hidden) * e / (l.sp ? l.tp : 1);
    const int64_t next = RankOf(l, RankCoord{0, 0, 0, (slow_stage + 1) % l.pp});
    CollectiveTiming t;
    t.purpose = "pp send/recv";
    t.group = ParallelDim::kPp;
    // Blocking sends (the default) sit on the critical path every step; overlapped ones
    // only in the fill and drain.
    t.count = static_cast<int64_t>(l.overlap_pp && overlaps ? 2 * (p - 1) : 2 * (mb * v + p - 2));
    t.cost = comm.Estimate(Collective::kSendRecv, {rank, next}, act);
    est.collectives.push_back(t);
    est.time.pp_comm = static_cast<double>(t.count) * t.cost.time_s;
  }

  // Data parallel / ZeRO. Gradients of the stage's parameters (dense over dp, experts over
  // dp/ep), divided by the compression ratio.
  const StageParams params = ParamsOnStage(m, l, slow_stage);
  const StateBytes sb = StateBytesPerParam(l.dtype);
  double dp_time = 0;
  if (l.dp > 1) {
    const double grads = params.dense * sb.gradients / l.grad_compression;
    double grad_sync = 0, param_gather = 0;
    if (l.zero == 0) {
      grad_sync = add("dp gradient all-reduce", ParallelDim::kDp, 1, Collective::kAllReduce, grads);
    } else if (l.zero < 3) {
      grad_sync = add("dp gradient reduce-scatter", ParallelDim::kDp, 1, Collective::kReduceScatter, grads);
      param_gather = add("dp parameter all-gather", ParallelDim::kDp, 1, Collective::kAllGather,
                         params.dense * sb.weights);
    } else {
      // ZeRO-3: parameters gathered for forward and again for backward, gradients
      // reduce-scattered, every micro-batch; prefetch hides them under compute.
      const double gather = add("zero-3 parameter all-gather", ParallelDim::kDp,
                                static_cast<int64_t>(2 * mb), Collective::kAllGather,
                                params.dense * sb.weights);
      grad_sync = add("zero-3 gradient reduce-scatter", ParallelDim::kDp, static_cast<int64_t>(mb),
                      Collective::kReduceScatter, grads);
      const double per_mb = (gather + grad_sync) / mb;
      dp_time = l.prefetch && overlaps ? mb * std::max(0.0, per_mb - (slow.forward + slow.backward))
                                       : gather + grad_sync;
      grad_sync = 0;
    }
    if (l.ep > 1 && params.expert > 0 && l.dp / l.ep > 1) {
      // Expert gradients reduce over the expert-data-parallel group (dp/ep ranks).
      CollectiveTiming t;
      t.purpose = "expert gradient all-reduce";
      t.group = ParallelDim::kDp;
      t.count = 1;
      std::vector<int64_t> edp;
      const RankCoord me = CoordOf(l, rank);
      for (int64_t d = me.dp % l.ep; d < l.dp; d += l.ep) edp.push_back(RankOf(l, RankCoord{me.tp, me.cp, d, me.pp}));
      t.cost = comm.Estimate(Collective::kAllReduce, edp, params.expert * sb.gradients / l.grad_compression);
      est.collectives.push_back(t);
      grad_sync += t.cost.time_s;
    } else if (l.ep == 1 && params.expert > 0) {
      grad_sync += add("expert gradient all-reduce", ParallelDim::kDp, 1, Collective::kAllReduce,
                       params.expert * sb.gradients / l.grad_compression);
    }
    // Overlapped with the last micro-batch's backward (bucketed reduction).
    const double exposed_sync =
        l.overlap_dp && overlaps ? std::max(0.0, grad_sync - slow.backward) : grad_sync;
    dp_time += exposed_sync + param_gather;
  }
  est.time.dp_comm = dp_time;

  // Optimizer step (AdamW, memory-bound): read gradient and states, write states and weights.
  const double shard = l.zero >= 1 ? params.dense / l.dp + params.expert / std::max<int64_t>(1, l.dp / l.ep)
                                   : params.total();
  const double opt_bytes = shard * (sb.gradients + 2 * sb.optimizer + sb.weights);
  if (l.offload == Offload::kNone) {
    est.time.optimizer = MemoryTime(gpu, opt_bytes) + gpu.efficiency.kernel_latency_s;
  } else {
    // CPU Adam on the host, whose memory bandwidth the node's GPUs share; gradients go down
    // and updated weights come back over the host link.
    est.time.optimizer = opt_bytes / (hw.node.host.memory_bandwidth / static_cast<double>(hw.node.gpus));
    const Route host = cluster.RouteToHost(rank);
    est.time.offload = shard * (sb.gradients + sb.weights) / host.bottleneck_bandwidth + 2 * host.latency_s;
  }

  est.iteration_time_s = est.time.total();
  const int64_t gpus = l.world();
  est.tokens_per_s = static_cast<double>(l.gbs * m.seq_len) / est.iteration_time_s;
  est.model_flops = IterationFlops(m, l, false);
  est.hardware_flops = IterationFlops(m, l, true);
  est.model_tflops_per_gpu = est.model_flops / (est.iteration_time_s * gpus) / 1e12;
  est.hardware_tflops_per_gpu = est.hardware_flops / (est.iteration_time_s * gpus) / 1e12;
  const double peak_rate = gpu.Peak(l.dtype).value_or(0);
  est.mfu = peak_rate > 0 ? est.model_flops / (est.iteration_time_s * gpus * peak_rate) : 0;
  return est;
}

}  // namespace shardsim
