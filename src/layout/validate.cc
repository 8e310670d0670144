// See validate.h. Each rule says which constraint fails with the numbers involved.
#include "src/layout/validate.h"

#include <algorithm>
#include <utility>

#include "src/util/limits.h"
#include "src/util/strings.h"

namespace shardsim {

Status LayoutCheck::ToStatus() const {
  if (ok()) return Status::Ok();
  return Status::Error("invalid layout: " + Join(errors, "; "));
}

namespace {

std::string S(int64_t v) { return std::to_string(v); }

bool Divides(int64_t d, int64_t n) { return d > 0 && n % d == 0; }

// The split of the layers over pp x vpp positions (src/layout/pipeline.h), with Megatron-Core's
// conditions (get_num_layers_to_build's asserts, megatron/core/transformer/transformer_block.py
// at NVIDIA/Megatron-LM d98e8a64dd).
template <typename Err>
void CheckPipelineSplit(const Layout& l, const ModelSpec& m, Err&& err) {
  const int64_t n = m.layers, p = l.pp, v = l.vpp, positions = l.pp * l.vpp;
  const bool first_last = l.first_stage_layers > 0 || l.last_stage_layers > 0;
  const bool account = l.embedding_in_split || l.loss_in_split;
  if (!l.uneven_split()) {
    if (Divides(positions, n)) return;
    std::string hint;
    if (p >= 2) {
      // The uneven split that would hold these layers, as a suggestion.
      const std::pair<int, const char*> ways[] = {{2, "embedding_in_split=on,loss_in_split=on"},
                                                  {1, "loss_in_split=on"}};
      for (const auto& [extra, keys] : ways) {
        if (hint.empty() && Divides(positions, n + extra) && (n + extra) / positions > 1) {
          hint = std::string("; an uneven split holds them: ") + keys + " (" + S(n) + " + " + S(extra) + " = " +
                 S(positions) + " x " + S((n + extra) / positions) + "), or first_stage_layers / last_stage_layers " +
                 "(docs/layout.md)";
        }
      }
      if (hint.empty()) hint = "; first_stage_layers / last_stage_layers split them unevenly (docs/layout.md)";
    }
    err("layers=" + S(n) + " is not divisible by pp x vpp = " + S(p) + "x" + S(v) + " = " + S(positions) + hint);
    return;
  }
  if (p < 2) {
    err("an uneven pipeline split (first_stage_layers, last_stage_layers, embedding_in_split, loss_in_split) "
        "needs pp >= 2, found pp=" + S(p));
    return;
  }
  if (first_last && account) {
    err("first_stage_layers / last_stage_layers and embedding_in_split / loss_in_split are two ways to split "
        "the layers: set one (Megatron-Core asserts the same)");
    return;
  }
  if (account) {
    const int64_t counted = n + (l.embedding_in_split ? 1 : 0) + (l.loss_in_split ? 1 : 0);
    if (!Divides(positions, counted)) {
      err("layers=" + S(n) + " plus the embedding and loss counted in the split = " + S(counted) +
          " is not divisible by pp x vpp = " + S(p) + "x" + S(v) + " = " + S(positions));
    }
    return;
  }
  const int64_t set = (l.first_stage_layers > 0 ? 1 : 0) + (l.last_stage_layers > 0 ? 1 : 0);
  const int64_t left = n - l.first_stage_layers - l.last_stage_layers;
  const std::string what = std::string(l.first_stage_layers > 0 ? "first_stage_layers=" + S(l.first_stage_layers) : "") +
                           (set == 2 ? " and " : "") +
                           (l.last_stage_layers > 0 ? "last_stage_layers=" + S(l.last_stage_layers) : "");
  if (p == set) {
    if (left != 0) err(what + " must add up to layers=" + S(n) + " with pp=" + S(p));
  } else if (left < p - set || left % (p - set) != 0) {
    err("with " + what + ", the " + S(left) + " layers left must split evenly over the other " + S(p - set) +
        " stages, each at least one");
    return;
  }
  const int64_t middle = p > set ? left / (p - set) : 0;
  for (int64_t layers : {l.first_stage_layers, l.last_stage_layers, p > set ? middle : 0}) {
    if (layers > 0 && layers % v != 0) {
      err("vpp=" + S(v) + " must divide every stage's layers (" + what + ", " + S(middle) +
          " on the others), found " + S(layers));
      return;
    }
  }
}

}  // namespace

LayoutCheck CheckLayout(const Layout& l, const ModelSpec& m, const HardwareSpec& hw,
                        int64_t gpus) {
  LayoutCheck c;
  auto err = [&](std::string e) { c.errors.push_back(std::move(e)); };
  auto warn = [&](std::string w) { c.warnings.push_back(std::move(w)); };
  const int64_t per_node = hw.node.gpus;

  // World size and cluster size.
  if (l.world() != gpus) {
    err("tp x pp x dp x cp = " + S(l.tp) + "x" + S(l.pp) + "x" + S(l.dp) + "x" + S(l.cp) + " = " +
        S(l.world()) + " but " + S(gpus) + " GPUs");
  }
  if (gpus > hw.total_gpus()) {
    err(S(gpus) + " GPUs requested but " + hw.name + " has " + S(hw.total_gpus()) + " (" +
        S(hw.nodes) + " nodes x " + S(per_node) + ")");
  }

  if (l.grad_bf16 && l.dtype != DType::kBf16 && l.dtype != DType::kFp8) {
    err("grad_bf16=on reduces the gradients of bf16 mixed precision in bf16: it needs dtype=bf16 or fp8, found dtype=" +
        std::string(DTypeName(l.dtype)));
  }
  if (l.fp8_params && l.dtype != DType::kFp8) {
    err("fp8_params=on stores Transformer Engine's weights in fp8: it needs dtype=fp8, found dtype=" +
        std::string(DTypeName(l.dtype)));
  }

  // Tensor parallel splits heads, KV heads, the MLP and the vocabulary.
  if (!Divides(l.tp, m.heads)) err("tp=" + S(l.tp) + " does not divide heads=" + S(m.heads));
  // Each TP rank holds whole KV heads: Megatron-Core divides the query groups over TP
  // (megatron/core/transformer/attention.py: divide(num_query_groups, tp), which asserts), and
  // torchtitan's ColwiseParallel wk / wv split the KV heads' rows; no stack shardsim plans for
  // replicates KV heads over TP ranks.
  if (!Divides(l.tp, m.kv_heads)) {
    err("tp=" + S(l.tp) + " does not divide kv_heads=" + S(m.kv_heads) +
        " (Megatron-Core splits the KV heads over TP ranks; none replicates them)");
  }
  if (!m.moe || m.MoeLayerCount() < m.layers) {
    if (!Divides(l.tp, m.ffn_hidden)) {
      err("tp=" + S(l.tp) + " does not divide ffn_hidden=" + S(m.ffn_hidden));
    }
  }
  if (!m.moe && (l.moe_capacity > 0 || l.moe_imbalance != 1)) {
    warn("moe_capacity and moe_imbalance price an MoE model's routing; " + m.name + " has no experts");
  }
  // The experts split over the experts' TP (Layout::expert_tp), the dense TP unless etp is set.
  if (m.moe && !Divides(l.expert_tp(), m.moe->ffn_hidden)) {
    err((l.own_expert_tp() ? "etp=" + S(l.etp) : "tp=" + S(l.tp)) + " does not divide moe.ffn_hidden=" + S(m.moe->ffn_hidden));
  }
  if (l.tp > per_node) {
    warn("tp=" + S(l.tp) + " crosses nodes (" + S(per_node) +
         " GPUs per node): TP collectives go over the network");
  } else if (!Divides(l.tp, per_node)) {
    warn("tp=" + S(l.tp) + " does not divide the " + S(per_node) +
         " GPUs per node: some TP groups straddle two nodes");
  }

  // Sequence parallel and context parallel split the sequence.
  if (l.sp && l.tp == 1) warn("sp=on has no effect with tp=1");
  if (l.cp > 1 && !Divides(2 * l.cp, m.seq_len)) {
    err("cp=" + S(l.cp) + ": seq_len=" + S(m.seq_len) + " is not divisible by 2 x cp = " +
        S(2 * l.cp) + " (load-balanced causal split)");
  }
  if (l.sp && l.tp > 1 && !Divides(l.tp, m.seq_len / l.cp)) {
    err("sp=on: the sequence per CP rank (" + S(m.seq_len / l.cp) + ") is not divisible by tp=" +
        S(l.tp));
  }

  // Pipeline: stages, virtual stages, schedule.
  CheckPipelineSplit(l, m, err);
  if (l.vpp > 1 && l.schedule != Schedule::kInterleaved && l.schedule != Schedule::kZeroBubbleV) {
    err("vpp=" + S(l.vpp) + " needs schedule=interleaved (found " + ScheduleName(l.schedule) + ")");
  }
  if (l.schedule == Schedule::kInterleaved) {
    if (l.vpp < 2) err("schedule=interleaved needs vpp >= 2");
    if (l.pp < 2) err("schedule=interleaved needs pp >= 2");
  }
  if (l.pp == 1 && (l.schedule == Schedule::kGpipe || l.schedule == Schedule::kZeroBubble)) {
    warn("schedule=" + ScheduleName(l.schedule) + " has no effect with pp=1");
  }

  // Batch: gbs = dp x mbs x micro-batches.
  if (!Divides(l.dp * l.mbs, l.gbs)) {
    err("gbs=" + S(l.gbs) + " is not divisible by dp x mbs = " + S(l.dp) + "x" + S(l.mbs) + " = " +
        S(l.dp * l.mbs));
  } else {
    const int64_t mb = l.microbatches();
    // The schedule holds a pass per micro-batch and chunk (src/layout/pipeline.h), counted in
    // int32: at most 2^20 of them, far above any run's gradient accumulation (thousands).
    if (mb > kMaxMicrobatchPasses / std::max<int64_t>(1, l.vpp)) {
      err(S(mb) + " micro-batches x vpp " + S(l.vpp) + ": more than the " + S(kMaxMicrobatchPasses) +
          " passes a pipeline schedule may hold (raise mbs or dp)");
    }
    if (l.schedule == Schedule::kInterleaved && l.pp > 1 && !Divides(l.pp, mb)) {
      err("schedule=interleaved: micro-batches per iteration (" + S(mb) +
          ") must be a multiple of pp=" + S(l.pp));
    }
    if (l.pp > 1 && mb < l.pp) {
      warn(S(mb) + " micro-batches for pp=" + S(l.pp) + " stages: the pipeline never fills");
    }
  }

  // Expert parallel.
  if (l.ep > 1) {
    if (!m.moe) {
      err("ep=" + S(l.ep) + " but model " + m.name + " has no experts");
    } else if (!Divides(l.ep, m.moe->experts)) {
      err("ep=" + S(l.ep) + " does not divide experts=" + S(m.moe->experts));
    }
  }
  // The experts' TP x EP x expert-DP grid is a refactoring of each pipeline stage's TP x CP x
  // DP ranks (Megatron-Core's MoE parallel folding, Layout::edp; parallel_state.py raises when
  // etp x ep x pp does not divide the world), with the experts' TP innermost.
  if (l.own_expert_tp() && !m.moe) err("etp=" + S(l.etp) + " but model " + m.name + " has no experts");
  const int64_t stage_ranks = l.tp * l.cp * l.dp;
  if ((l.ep > 1 || l.own_expert_tp()) && !Divides(l.ep * l.expert_tp(), stage_ranks)) {
    err("ep x etp = " + S(l.ep) + "x" + S(l.expert_tp()) + " does not divide tp x cp x dp = " + S(l.tp) + "x" +
        S(l.cp) + "x" + S(l.dp) + " = " + S(stage_ranks) +
        " (the ranks of a pipeline stage, which the experts' TP, EP and data-parallel groups split)");
  }
  // Experts split otherwise than the dense layers: the MoE layer's input must be each TP rank's
  // own tokens (SP), as Megatron-Core's alltoall dispatcher routes them (its gather over the
  // experts' TP group, token_dispatcher.py); without SP every TP rank would hold, and route,
  // the same tokens, which shardsim does not model.
  if (l.own_expert_tp() && l.tp > 1 && !l.sp) {
    err("etp=" + S(l.etp) + " with tp=" + S(l.tp) + " needs sp=on (the MoE layer's tokens are then split over TP)");
  }

  // ZeRO, offload, precision.
  // The experts' replicas fold over TP x CP x DP (Layout::edp): with etp below tp they have some
  // without DP, and ZeRO shards their states over them.
  const bool expert_replicas = m.moe && l.edp() > 1;
  if (l.zero > 0 && l.dp_cp() == 1 && !expert_replicas) warn("zero=" + S(l.zero) + " has no effect with dp x cp = 1");
  if (l.offload == Offload::kOptimizer && l.zero == 0) {
    err("offload=optimizer needs zero >= 1 (as in DeepSpeed ZeRO-Offload)");
  }
  if (l.offload == Offload::kOptimizerAndParams && l.zero != 3) {
    err("offload=optimizer+params needs zero=3 (parameter offload is a ZeRO-3 feature)");
  }
  if (!hw.gpu.Peak(l.dtype)) {
    err("dtype=" + DTypeName(l.dtype) + " is not supported by " + hw.gpu.name +
        " (no peak rate for it in " + hw.name + ")");
  }
  if (l.attention == AttentionImpl::kFlash1 && hw.gpu.efficiency.attention_v1_by_seq.empty()) {
    err("attention=flash1 prices FlashAttention (v1) at its measured rates, and " + hw.name +
        " gives none (efficiency.attention_v1_tflops); use attention=flash");
  }
  if (l.attention == AttentionImpl::kCudnn && hw.gpu.efficiency.attention_cudnn_by_seq.empty()) {
    err("attention=cudnn prices cuDNN's fused attention at its measured rates, and " + hw.name +
        " gives none (efficiency.attention_cudnn_tflops; Transformer Engine picks it on Hopper, "
        "FlashAttention elsewhere); use attention=flash");
  }
  if (l.grad_compression > 1 && l.dp_cp() == 1) warn("compress has no effect with dp x cp = 1");
  if (l.cuda_graphs != CudaGraphs::kOff) warn(CudaGraphsCaveat(l.cuda_graphs) + ", so the memory predicted is a lower bound");
  if (l.grad_compression > 1 && l.zero > 0) {
    err("compress=" + LayoutValue(l, "compress").value_or("?") + " with zero=" + S(l.zero) +
        ": gradient compression runs PowerSGD on all-reduced gradients (PyTorch DDP's powerSGD_hook); "
        "ZeRO 1-3 reduce-scatter them. Use zero=0, or compress=1");
  }
  if (l.schedule == Schedule::kZeroBubbleV && (l.vpp != 2 || l.pp < 2)) {
    err("schedule=zb-v places two chunks per stage in a V: it needs vpp=2 and pp >= 2 (found vpp=" +
        S(l.vpp) + ", pp=" + S(l.pp) + ")");
  }
  if (l.schedule == Schedule::kZeroBubble && l.vpp > 1) {
    err("schedule=zero-bubble is modelled for vpp=1 only");
  }
  return c;
}

}  // namespace shardsim
