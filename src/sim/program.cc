// Builds the per-stage task programs; see program.h. The order of passes follows the
// schedules of Narayanan et al. 2021 (GPipe, 1F1B, interleaved with Megatron-LM's warm-up
// count) and Qi et al. 2023 (the B/W split of zero-bubble pipelines).
#include "src/sim/program.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "src/cost/op_time.h"
#include "src/cost/ops.h"
#include "src/util/check.h"

namespace shardsim {

const char* StreamName(Stream s) {
  static const char* kNames[] = {"compute", "tp", "cp", "ep", "pp-forward", "pp-backward",
                                 "dp", "offload"};
  return kNames[static_cast<int>(s)];
}

const char* CategoryName(Category c) {
  static const char* kNames[] = {"compute", "recompute", "tp_comm", "cp_comm", "ep_comm",
                                 "pp_comm", "dp_comm", "bubble", "optimizer", "offload"};
  return kNames[static_cast<int>(c)];
}

size_t IterationProgram::task_count() const {
  size_t n = 0;
  for (const StageProgram& s : stages) n += s.tasks.size();
  return n;
}

namespace {

// Time and FLOPs of a run of consecutive ops of a layer.
struct Block {
  double fwd = 0, bwd = 0, wgrad = 0, selective = 0, flops = 0;
  // The column-parallel projections' (Op::column_parallel) weight-gradient GEMMs, part of
  // `wgrad`, and their forward FLOPs (a weight gradient costs as many as the forward).
  double col_wgrad = 0, col_flops = 0;
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
    if (op.recomputed_selective) b.selective += f;
    b.flops += op.flops;
  }
  return b;
}

// A layer split where communication goes between its parts.
struct LayerCost {
  Block attn;      // norm1 .. residual1
  Block mlp_pre;   // norm2 (+ router)
  Block mlp;       // the MLP or the experts
  Block mlp_post;  // residual2
  bool moe = false;
  double params = 0, expert_params = 0;  // on this rank
  double act = 0, full_act = 0;          // activation bytes stored, and without recompute
};

LayerCost CostLayer(const ModelSpec& m, const GpuSpec& gpu, const Layout& l, bool moe) {
  LayerCost c;
  c.moe = moe && m.moe.has_value();
  std::vector<Op> ops = LayerOps(m, l, moe);
  std::vector<Op> attn, pre, mlp, post;
  bool after_attn = false;
  for (const Op& op : ops) {
    if (!after_attn) {
      attn.push_back(op);
      after_attn = op.name == "residual1";
    } else if (op.name == "norm2" || op.name == "router") {
      pre.push_back(op);
    } else if (op.name == "residual2") {
      post.push_back(op);
    } else {
      mlp.push_back(op);
    }
  }
  c.attn = SumOps(gpu, l.dtype, attn);
  c.mlp_pre = SumOps(gpu, l.dtype, pre);
  c.mlp = SumOps(gpu, l.dtype, mlp);
  c.mlp_post = SumOps(gpu, l.dtype, post);
  const double t = static_cast<double>(l.tp);
  c.params = static_cast<double>(m.AttentionParams()) / t + 2.0 * m.NormParams();
  if (c.moe) {
    c.params += static_cast<double>(m.hidden * m.moe->experts);
    c.expert_params = static_cast<double>(m.moe->experts / l.ep) * m.MlpParams(m.moe->ffn_hidden) / t;
  } else {
    c.params += static_cast<double>(m.MlpParams(m.ffn_hidden)) / t;
  }
  c.act = LayerActivationBytes(m, l, moe);
  Layout none = l;
  none.recompute = Recompute::kNone;
  c.full_act = LayerActivationBytes(m, none, moe);
  return c;
}

class StageBuilder {
 public:
  StageBuilder(const ModelSpec& m, const HardwareSpec& hw, const Layout& l, int32_t stage,
               StageProgram* prog)
      : m_(m), hw_(hw), l_(l), stage_(stage), prog_(prog) {
    const int64_t chunk_layers = m.layers / (l.pp * l.vpp);
    for (int32_t c = 0; c < l.vpp; ++c) {
      std::vector<LayerCost> layers;
      const int64_t first = (c * l.pp + stage) * chunk_layers;
      for (int64_t i = first; i < first + chunk_layers; ++i) {
        layers.push_back(CostLayer(m, hw.gpu, l, m.IsMoeLayer(i)));
        layer_index_.push_back(i);
      }
      chunks_.push_back(std::move(layers));
    }
    const double e = l.dtype == DType::kFp32 ? 4 : 2;
    tokens_ = static_cast<double>(TokensPerRank(m, l));
    tp_bytes_ = tokens_ * static_cast<double>(m.hidden) * e;
    pp_bytes_ = tp_bytes_ / (l.sp ? static_cast<double>(l.tp) : 1.0);
    cp_bytes_ = static_cast<double>(l.cp) * tokens_ * 2.0 *
                std::max<double>(m.kv_dim(), static_cast<double>(l.tp * m.head_dim)) /
                static_cast<double>(l.tp) * e;
    ep_bytes_ = m.moe ? tokens_ * static_cast<double>(m.moe->top_k * m.hidden) * e : 0;
    state_ = StateBytesPerParam(l.dtype);
    embedding_ = SumOps(hw.gpu, l.dtype, EmbeddingOps(m, l));
    head_ = SumOps(hw.gpu, l.dtype, HeadOps(m, l));
  }

  // Emits the whole iteration; returns, per (pass, mb, receiving position), the send tasks
  // created and the first tasks needing one.
  void Build(std::map<std::tuple<int, int, int>, int32_t>* sends,
             std::map<std::tuple<int, int, int>, int32_t>* receives) {
    sends_ = sends;
    receives_ = receives;
    const std::vector<PipelineStep> order = ScheduleOrder(l_, stage_);
    // The micro-batch whose backward (W for zero-bubble) ends each chunk's gradients.
    std::vector<int32_t> last_mb(l_.vpp, -1);
    const Pass grad_pass = l_.schedule == Schedule::kZeroBubble ? Pass::kWeightGrad : Pass::kBackward;
    for (const PipelineStep& s : order) {
      if (s.pass == grad_pass) last_mb[s.chunk] = s.mb;
    }
    for (const PipelineStep& s : order) {
      const bool last = s.mb == last_mb[s.chunk];
      if (s.pass == Pass::kForward) Forward(s.mb, s.chunk);
      if (s.pass == Pass::kBackward) Backward(s.mb, s.chunk, last && grad_pass == Pass::kBackward);
      if (s.pass == Pass::kWeightGrad) WeightGrad(s.mb, s.chunk, last);
    }
    FinishIteration();
  }

 private:
  int32_t Name(const std::string& n) {
    auto it = name_ids_.find(n);
    if (it != name_ids_.end()) return it->second;
    prog_->names.push_back(n);
    return name_ids_[n] = static_cast<int32_t>(prog_->names.size() - 1);
  }

  int32_t Add(TaskSpec t, const std::string& name, std::vector<int32_t> deps) {
    t.name = Name(name);
    t.dep_begin = static_cast<int32_t>(prog_->deps.size());
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int32_t d : deps) {
      if (d >= 0) prog_->deps.push_back(d);
    }
    t.dep_end = static_cast<int32_t>(prog_->deps.size());
    prog_->tasks.push_back(t);
    return static_cast<int32_t>(prog_->tasks.size() - 1);
  }

  int32_t Compute(const std::string& name, double seconds, double flops, Category cat, Pass pass,
                  int32_t mb, int32_t chunk, int32_t layer, std::vector<int32_t> deps) {
    TaskSpec t;
    t.kind = TaskKind::kCompute;
    t.stream = Stream::kCompute;
    t.category = cat;
    t.pass = pass;
    t.microbatch = mb;
    t.chunk = chunk;
    t.layer = layer;
    t.duration_s = seconds;
    t.flops = flops;
    return Add(t, name, std::move(deps));
  }

  int32_t Coll(const std::string& name, Collective c, GroupKind g, double bytes, Stream stream,
               Category cat, Pass pass, int32_t mb, int32_t layer, std::vector<int32_t> deps) {
    TaskSpec t;
    t.kind = TaskKind::kCollective;
    t.stream = stream;
    t.category = cat;
    t.pass = pass;
    t.collective = c;
    t.group = g;
    t.bytes = bytes;
    t.microbatch = mb;
    t.layer = layer;
    return Add(t, name, std::move(deps));
  }

  // TP exchange after (or before, for an SP all-gather) a block. Returns the task the next
  // compute must wait for: the collective, or with overlap_tp=on the producing compute (the
  // collective is then joined only at the pass's end, TakePassJoins). overlap_tp=backward
  // leaves these blocking; it splits the backward branches instead (ColumnParallelBackward).
  int32_t TpAfter(int32_t producer, Pass pass, int32_t mb, int32_t layer) {
    if (l_.tp == 1) return producer;
    return Tp(TpReduction(producer, pass, mb, layer), producer);
  }
  int32_t TpBefore(int32_t prev, Pass pass, int32_t mb, int32_t layer) {
    if (l_.tp == 1 || !l_.sp) return prev;
    return Tp(TpGather({prev}, pass, mb, layer), prev);
  }
  int32_t Tp(int32_t coll, int32_t producer) {
    if (l_.overlap_tp != TpOverlap::kOn) return coll;
    tp_joins_.push_back(coll);
    return producer;
  }
  // f's backward / g's forward: all-reduce, or reduce-scatter with SP.
  int32_t TpReduction(int32_t producer, Pass pass, int32_t mb, int32_t layer) {
    return Coll(l_.sp ? "tp reduce-scatter" : "tp all-reduce",
                l_.sp ? Collective::kReduceScatter : Collective::kAllReduce, GroupKind::kTp,
                tp_bytes_, Stream::kTp, Category::kTp, pass, mb, layer, {producer});
  }
  int32_t TpGather(std::vector<int32_t> deps, Pass pass, int32_t mb, int32_t layer) {
    return Coll("tp all-gather", Collective::kAllGather, GroupKind::kTp, tp_bytes_, Stream::kTp,
                Category::kTp, pass, mb, layer, std::move(deps));
  }
  // The dependencies of the next compute: `t` and the joins pending (blocking sends, an
  // overlap_tp=backward reduction).
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
  std::pair<std::vector<int32_t>, int32_t> BackwardBranchStart(int32_t t, int32_t mb,
                                                               int32_t layer) {
    std::vector<int32_t> start = TakeJoins(t);
    if (!l_.sp) return {start, -1};
    const int32_t dout = TpGather(start, Pass::kBackward, mb, layer);
    const int32_t regather = TpGather(start, Pass::kBackward, mb, layer);
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
                                 double seconds, double flops, int32_t mb, int32_t chunk,
                                 int32_t layer) {
    const int32_t reduction = Coll(l_.sp ? "tp reduce-scatter" : "tp all-reduce",
                                   l_.sp ? Collective::kReduceScatter : Collective::kAllReduce,
                                   GroupKind::kTp, tp_bytes_, Stream::kTp, Category::kTp,
                                   Pass::kBackward, mb, layer, {dgrad, regather});
    const int32_t wgrad = Compute(branch + " weight gradients", seconds, flops, Category::kCompute,
                                  Pass::kBackward, mb, chunk, layer, {dgrad, regather});
    joins_.push_back(reduction);
    return wgrad;
  }

  // One layer's forward (or its recomputation). Returns the last task.
  int32_t LayerForward(const LayerCost& c, int32_t prev, int32_t mb, int32_t chunk, int32_t layer,
                       bool recompute) {
    const Category cat = recompute ? Category::kRecompute : Category::kCompute;
    const Pass pass = recompute ? Pass::kRecompute : Pass::kForward;
    const std::string tag = recompute ? " recompute" : " forward";
    std::vector<int32_t> gather;
    if (l_.zero == 3 && l_.dp > 1) {
      gather.push_back(Coll("zero-3 parameter all-gather", Collective::kAllGather, GroupKind::kDp,
                            c.params * state_.weights, Stream::kDp, Category::kDp, pass, mb, layer,
                            l_.prefetch ? std::vector<int32_t>{} : std::vector<int32_t>{prev}));
    }
    int32_t t = TpBefore(prev, pass, mb, layer);
    std::vector<int32_t> deps = TakeJoins(t);
    deps.insert(deps.end(), gather.begin(), gather.end());
    const int32_t attn = Compute("attention" + tag, c.attn.fwd, c.attn.flops, cat, pass, mb, chunk, layer, deps);
    int32_t cp = -1;
    if (l_.cp > 1) {
      // Ring attention: K/V pass around the CP group while attention computes.
      cp = Coll("cp k/v exchange", Collective::kAllGather, GroupKind::kCp, cp_bytes_, Stream::kCp,
                Category::kCp, pass, mb, layer, {prev});
    }
    t = TpAfter(attn, pass, mb, layer);
    t = TpBefore(t, pass, mb, layer);
    deps = TakeJoins(t);
    deps.push_back(cp);
    if (c.moe && l_.ep > 1) {
      t = Compute("router" + tag, c.mlp_pre.fwd, c.mlp_pre.flops, cat, pass, mb, chunk, layer, deps);
      t = Coll("ep all-to-all dispatch", Collective::kAllToAll, GroupKind::kEp, ep_bytes_, Stream::kEp,
               Category::kEp, pass, mb, layer, {t});
      t = Compute("experts" + tag, c.mlp.fwd, c.mlp.flops, cat, pass, mb, chunk, layer, {t});
      t = Coll("ep all-to-all combine", Collective::kAllToAll, GroupKind::kEp, ep_bytes_, Stream::kEp,
               Category::kEp, pass, mb, layer, {t});
      t = Compute("mlp residual" + tag, c.mlp_post.fwd, 0, cat, pass, mb, chunk, layer, {t});
    } else {
      t = Compute("mlp" + tag, c.mlp_pre.fwd + c.mlp.fwd + c.mlp_post.fwd,
                  c.mlp_pre.flops + c.mlp.flops, cat, pass, mb, chunk, layer, deps);
    }
    return TpAfter(t, pass, mb, layer);
  }

  int32_t Position(int32_t chunk) const { return chunk * static_cast<int32_t>(l_.pp) + stage_; }
  int32_t Positions() const { return static_cast<int32_t>(l_.pp * l_.vpp); }

  void Forward(int32_t mb, int32_t chunk) {
    const int32_t pos = Position(chunk);
    int32_t t = -1;
    bool needs_input = pos > 0;
    if (pos == 0) {
      t = Compute("embedding forward", embedding_.fwd, 0, Category::kCompute, Pass::kForward, mb,
                  chunk, -1, TakeJoins(-1));
    }
    if (needs_input) t = ReceiveMarker(Pass::kForward, mb, chunk, pos);
    const std::vector<LayerCost>& layers = chunks_[chunk];
    for (size_t i = 0; i < layers.size(); ++i) {
      const int32_t layer = LayerIndex(chunk, i);
      t = LayerForward(layers[i], t, mb, chunk, layer, false);
      prog_->tasks[LastCompute()].memory_delta += layers[i].act;
    }
    if (pos == Positions() - 1) {
      t = Compute("lm head + loss forward", head_.fwd, head_.flops, Category::kCompute,
                  Pass::kForward, mb, chunk, -1, TakePassJoins(t));
    } else {
      TaskSpec s;
      s.kind = TaskKind::kSend;
      s.stream = Stream::kPpForward;
      s.category = Category::kPp;
      s.pass = Pass::kForward;
      s.microbatch = mb;
      s.chunk = chunk;
      s.bytes = pp_bytes_;
      s.peer_stage = (pos + 1) % static_cast<int32_t>(l_.pp);
      const int32_t send = Add(s, "pp send activations", TakePassJoins(t));
      (*sends_)[{static_cast<int>(Pass::kForward), mb, pos + 1}] = send;
      if (!l_.overlap_pp) joins_.push_back(send);  // the sender's next compute waits for it
    }
  }

  void Backward(int32_t mb, int32_t chunk, bool last_mb) {
    const int32_t pos = Position(chunk);
    int32_t t = -1;
    bool needs_input = pos < Positions() - 1;
    if (!needs_input) {
      t = Compute("lm head + loss backward", head_.bwd, 2 * head_.flops, Category::kCompute,
                  Pass::kBackward, mb, chunk, -1, TakeJoins(-1));
    }
    const bool zb = l_.schedule == Schedule::kZeroBubble;
    if (needs_input) t = ReceiveMarker(Pass::kBackward, mb, chunk, pos);
    const std::vector<LayerCost>& layers = chunks_[chunk];
    for (size_t k = layers.size(); k-- > 0;) {
      const LayerCost& c = layers[k];
      const int32_t layer = LayerIndex(chunk, k);
      if (l_.recompute == Recompute::kFull) {
        t = LayerForward(c, t, mb, chunk, layer, true);
        prog_->tasks[LastCompute()].memory_delta += c.full_act;
      }
      std::vector<int32_t> gather;
      if (l_.zero == 3 && l_.dp > 1) {
        gather.push_back(Coll("zero-3 parameter all-gather", Collective::kAllGather, GroupKind::kDp,
                              c.params * state_.weights, Stream::kDp, Category::kDp, Pass::kBackward,
                              mb, layer, l_.prefetch ? std::vector<int32_t>{} : std::vector<int32_t>{t}));
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
      const double mlp_w = split ? c.mlp_pre.col_wgrad + c.mlp.col_wgrad : 0;
      const double mlp_w_flops = split ? c.mlp_pre.col_flops + c.mlp.col_flops : 0;
      const double attn_w = split ? c.attn.col_wgrad : 0;
      const double attn_w_flops = split ? c.attn.col_flops : 0;
      // SP keeps only this rank's rows of the norm output, so the MLP's (and below the
      // attention's) weight gradient needs it all-gathered again (Megatron-LM's
      // LinearWithGradAccumulationAndAsyncCommunication.backward): blocking after the output
      // gradient's all-gather with overlap_tp off, joined at the pass's end with on, under the
      // input-gradient GEMMs with backward (BackwardBranchStart).
      int32_t regather = -1;
      std::vector<int32_t> deps;
      if (split) {
        std::tie(deps, regather) = BackwardBranchStart(t, mb, layer);
      } else {
        t = TpBefore(t, Pass::kBackward, mb, layer);
        t = TpBefore(t, Pass::kBackward, mb, layer);
        deps = TakeJoins(t);
      }
      deps.insert(deps.end(), gather.begin(), gather.end());
      if (c.moe && l_.ep > 1) {
        t = Coll("ep all-to-all dispatch", Collective::kAllToAll, GroupKind::kEp, ep_bytes_, Stream::kEp,
                 Category::kEp, Pass::kBackward, mb, layer, deps);
        deps = {t};
      }
      t = Compute("mlp backward", mlp_b - mlp_w, 2 * (c.mlp_pre.flops + c.mlp.flops) - mlp_w_flops,
                  Category::kCompute, Pass::kBackward, mb, chunk, layer, deps);
      if (c.moe && l_.ep > 1) {
        t = Coll("ep all-to-all combine", Collective::kAllToAll, GroupKind::kEp, ep_bytes_, Stream::kEp,
                 Category::kEp, Pass::kBackward, mb, layer, {t});
      }
      if (split) {
        t = ColumnParallelBackward("mlp", t, regather, mlp_w, mlp_w_flops, mb, chunk, layer);
        std::tie(deps, regather) = BackwardBranchStart(t, mb, layer);
      } else {
        t = TpAfter(t, Pass::kBackward, mb, layer);
        t = TpBefore(t, Pass::kBackward, mb, layer);
        t = TpBefore(t, Pass::kBackward, mb, layer);  // the norm output re-gathered, as above
        deps = TakeJoins(t);
      }
      if (l_.recompute == Recompute::kSelective) {
        t = Compute("attention core recompute", c.attn.selective, 0, Category::kRecompute,
                    Pass::kRecompute, mb, chunk, layer, deps);
        deps = {t};
      }
      if (l_.cp > 1) {
        deps.push_back(Coll("cp k/v exchange", Collective::kAllGather, GroupKind::kCp, cp_bytes_,
                            Stream::kCp, Category::kCp, Pass::kBackward, mb, layer, {t}));
        deps.push_back(Coll("cp dk/dv reduce-scatter", Collective::kReduceScatter, GroupKind::kCp,
                            cp_bytes_, Stream::kCp, Category::kCp, Pass::kBackward, mb, layer, {t}));
      }
      t = Compute("attention backward", attn_b - attn_w, 2 * c.attn.flops - attn_w_flops,
                  Category::kCompute, Pass::kBackward, mb, chunk, layer, deps);
      int32_t bwd_end = t;
      if (split) {
        t = bwd_end = ColumnParallelBackward("attention", t, regather, attn_w, attn_w_flops, mb,
                                             chunk, layer);
      } else {
        t = TpAfter(t, Pass::kBackward, mb, layer);
      }
      if (!zb) {
        prog_->tasks[bwd_end].memory_delta -= c.act + (l_.recompute == Recompute::kFull ? c.full_act : 0);
        Gradients(c, bwd_end, mb, layer, last_mb);
      }
    }
    if (pos == 0) {
      t = Compute("embedding backward", embedding_.bwd, 0, Category::kCompute, Pass::kBackward, mb,
                  chunk, -1, TakePassJoins(t));
    } else {
      TaskSpec s;
      s.kind = TaskKind::kSend;
      s.stream = Stream::kPpBackward;
      s.category = Category::kPp;
      s.pass = Pass::kBackward;
      s.microbatch = mb;
      s.chunk = chunk;
      s.bytes = pp_bytes_;
      s.peer_stage = (pos - 1) % static_cast<int32_t>(l_.pp);
      const int32_t send = Add(s, "pp send gradients", TakePassJoins(t));
      (*sends_)[{static_cast<int>(Pass::kBackward), mb, pos - 1}] = send;
      if (!l_.overlap_pp) joins_.push_back(send);
    }
  }

  void WeightGrad(int32_t mb, int32_t chunk, bool last_mb) {
    const std::vector<LayerCost>& layers = chunks_[chunk];
    for (size_t k = layers.size(); k-- > 0;) {
      const LayerCost& c = layers[k];
      const int32_t layer = LayerIndex(chunk, k);
      const double w = c.attn.wgrad + c.mlp_pre.wgrad + c.mlp.wgrad + c.mlp_post.wgrad;
      const int32_t t = Compute("weight gradients", w, 0, Category::kCompute, Pass::kWeightGrad, mb,
                                chunk, layer, TakeJoins(-1));
      prog_->tasks[t].memory_delta -= c.act + (l_.recompute == Recompute::kFull ? c.full_act : 0);
      Gradients(c, t, mb, layer, last_mb);
    }
  }

  // Gradient communication of one layer after its last backward (ZeRO-3: every micro-batch).
  void Gradients(const LayerCost& c, int32_t producer, int32_t mb, int32_t layer, bool last_mb) {
    if (l_.dp == 1) return;
    const double grads = c.params * state_.gradients / l_.grad_compression;
    if (l_.zero == 3) {
      grad_tasks_.push_back(Coll("zero-3 gradient reduce-scatter", Collective::kReduceScatter,
                                 GroupKind::kDp, grads, Stream::kDp, Category::kDp, Pass::kBackward,
                                 mb, layer, {producer}));
    } else if (last_mb) {
      pending_buckets_.push_back({producer, layer, grads});
      if (l_.overlap_dp) FlushBuckets();
    }
    if (last_mb && c.expert_params > 0 && l_.dp / l_.ep > 1) {
      grad_tasks_.push_back(Coll("expert gradient all-reduce", Collective::kAllReduce, GroupKind::kEdp,
                                 c.expert_params * state_.gradients / l_.grad_compression, Stream::kDp,
                                 Category::kDp, Pass::kBackward, mb, layer, {producer}));
    }
  }

  struct Bucket {
    int32_t producer, layer;
    double bytes;
  };
  void FlushBuckets(int32_t after = -1) {
    for (const Bucket& b : pending_buckets_) {
      const bool rs = l_.zero >= 1;
      grad_tasks_.push_back(Coll(rs ? "dp gradient reduce-scatter" : "dp gradient all-reduce",
                                 rs ? Collective::kReduceScatter : Collective::kAllReduce,
                                 GroupKind::kDp, b.bytes, Stream::kDp, Category::kDp, Pass::kBackward,
                                 -1, b.layer, {b.producer, after}));
    }
    pending_buckets_.clear();
  }

  void FinishIteration() {
    const int32_t last = LastCompute();
    if (!l_.overlap_dp) FlushBuckets(last);
    std::vector<int32_t> deps = grad_tasks_;
    deps.push_back(last);
    for (int32_t j : TakePassJoins(-1)) deps.push_back(j);
    // Embedding and head gradients are small; they ride with the optimizer step.
    const StageParams params = ParamsOnStage(m_, l_, stage_);
    const double shard = l_.zero >= 1 ? params.dense / static_cast<double>(l_.dp) +
                                            params.expert / static_cast<double>(std::max<int64_t>(1, l_.dp / l_.ep))
                                      : params.total();
    const double opt_bytes = shard * (state_.gradients + 2 * state_.optimizer + state_.weights);
    int32_t step;
    if (l_.offload == Offload::kNone) {
      step = Compute("optimizer step", MemoryTime(hw_.gpu, opt_bytes) + hw_.gpu.efficiency.kernel_latency_s,
                     0, Category::kOptimizer, Pass::kStep, -1, -1, -1, deps);
    } else {
      // ZeRO-Offload: gradients to host, CPU Adam over the host memory the node's GPUs share,
      // updated weights back.
      TaskSpec down;
      down.kind = TaskKind::kHostTransfer;
      down.stream = Stream::kOffload;
      down.category = Category::kOffload;
      down.pass = Pass::kStep;
      down.bytes = shard * state_.gradients;
      const int32_t d = Add(down, "gradients to host", deps);
      TaskSpec adam;
      adam.kind = TaskKind::kHostCompute;
      adam.stream = Stream::kOffload;
      adam.category = Category::kOptimizer;
      adam.pass = Pass::kStep;
      adam.duration_s = opt_bytes / (hw_.node.host.memory_bandwidth / static_cast<double>(hw_.node.gpus));
      const int32_t a = Add(adam, "cpu adam", {d});
      TaskSpec up = down;
      up.bytes = shard * state_.weights;
      step = Add(up, "weights to device", {a});
    }
    if (l_.dp > 1 && (l_.zero == 1 || l_.zero == 2)) {
      Coll("dp parameter all-gather", Collective::kAllGather, GroupKind::kDp, params.dense * state_.weights,
           Stream::kDp, Category::kDp, Pass::kStep, -1, -1, {step});
    }
  }

  int32_t LastCompute() const {
    for (int32_t i = static_cast<int32_t>(prog_->tasks.size()) - 1; i >= 0; --i) {
      if (prog_->tasks[i].stream == Stream::kCompute) return i;
    }
    return -1;
  }
  // A zero-time task on the compute stream that waits for the previous pipeline position's
  // send; every task of the pass that needs the input depends on it (directly or through
  // the compute stream's order).
  int32_t ReceiveMarker(Pass pass, int32_t mb, int32_t chunk, int32_t pos) {
    const int32_t t = Compute(pass == Pass::kForward ? "receive activations" : "receive gradients", 0,
                              0, Category::kCompute, pass, mb, chunk, -1, TakeJoins(-1));
    (*receives_)[{static_cast<int>(pass), mb, pos}] = t;
    return t;
  }
  int32_t LayerIndex(int32_t chunk, size_t i) const {
    return static_cast<int32_t>(layer_index_[chunk * chunks_[0].size() + i]);
  }

  const ModelSpec& m_;
  const HardwareSpec& hw_;
  const Layout& l_;
  int32_t stage_;
  StageProgram* prog_;
  std::map<std::string, int32_t> name_ids_;
  std::vector<std::vector<LayerCost>> chunks_;
  std::vector<int64_t> layer_index_;
  Block embedding_, head_;
  StateBytes state_{};
  double tokens_ = 0, tp_bytes_ = 0, pp_bytes_ = 0, cp_bytes_ = 0, ep_bytes_ = 0;
  std::vector<int32_t> joins_;     // joined by the next compute
  std::vector<int32_t> tp_joins_;  // overlap_tp=on's collectives, joined at the pass's end
  std::vector<int32_t> grad_tasks_;
  std::vector<Bucket> pending_buckets_;
  std::map<std::tuple<int, int, int>, int32_t>* sends_ = nullptr;
  std::map<std::tuple<int, int, int>, int32_t>* receives_ = nullptr;
};

}  // namespace

IterationProgram BuildIteration(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  IterationProgram it;
  it.stages.resize(l.pp);
  // Per stage: sends keyed by (pass, mb, receiving position) and the tasks receiving them.
  std::vector<std::map<std::tuple<int, int, int>, int32_t>> sends(l.pp), receives(l.pp);
  for (int32_t s = 0; s < l.pp; ++s) {
    StageBuilder b(m, hw, l, s, &it.stages[s]);
    b.Build(&sends[s], &receives[s]);
    MemoryBreakdown mem = StageMemory(m, hw, l, s);
    mem.activations = 0;
    it.stages[s].static_memory = mem;
  }
  // Resolve cross-stage dependencies: position q runs on stage q % pp.
  it.remote_dependents.resize(l.pp);
  for (int32_t s = 0; s < l.pp; ++s) it.remote_dependents[s].resize(it.stages[s].tasks.size());
  for (int32_t s = 0; s < l.pp; ++s) {
    for (const auto& [key, task] : receives[s]) {
      const int32_t sender = [&] {
        for (int32_t o = 0; o < l.pp; ++o) {
          if (sends[o].count(key)) return o;
        }
        return -1;
      }();
      CHECK(sender >= 0) << "no send for a receive on stage " << s;
      const int32_t send = sends[sender].at(key);
      it.stages[s].tasks[task].remote_stage = sender;
      it.stages[s].tasks[task].remote_task = send;
      it.remote_dependents[sender][send].emplace_back(s, task);
    }
  }
  for (StageProgram& p : it.stages) {
    p.dependents.assign(p.tasks.size(), {});
    p.stream_order.assign(kStreamCount, {});
    for (int32_t i = 0; i < static_cast<int32_t>(p.tasks.size()); ++i) {
      TaskSpec& t = p.tasks[i];
      // A device that cannot overlap communication with computation (a CPU core that drives
      // MPI inside its own calls) runs each collective and send on its compute stream, in
      // issue order: serialised with its compute, whatever the layout's overlap switches say.
      if (!hw.gpu.overlaps_communication &&
          (t.kind == TaskKind::kCollective || t.kind == TaskKind::kSend)) {
        t.stream = Stream::kCompute;
      }
      for (int32_t d = t.dep_begin; d < t.dep_end; ++d) p.dependents[p.deps[d]].push_back(i);
      p.stream_order[static_cast<int>(t.stream)].push_back(i);
    }
  }
  return it;
}

}  // namespace shardsim
