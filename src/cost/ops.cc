// Per-op FLOPs and bytes; see ops.h. Shapes in comments are per rank:
// T = mbs * seq_len / cp tokens, t = tp, h = hidden, q = heads * head_dim, kv = kv_heads * head_dim.
#include "src/cost/ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace shardsim {

int64_t TokensPerRank(const ModelSpec& m, const Layout& l) { return l.mbs * m.seq_len / l.cp; }

bool MoeDispatchGathersOverTp(int64_t tp, bool sp, int64_t ep) { return tp > 1 && sp && ep > 1; }
bool MoeInputSplitOverTp(const Layout& l) {
  return MoeDispatchGathersOverTp(l.tp, l.sp, l.ep) || (l.tp > 1 && l.sp && l.own_expert_tp());
}
bool MoeGathersOverExpertTp(const Layout& l) { return l.expert_tp() > 1 && (MoeInputSplitOverTp(l) || l.own_expert_tp()); }

int64_t MoeExpertTokensPerRank(const ModelSpec& m, const Layout& l) {
  return MoeRoutedTokensPerRank(m, l) * m.moe->top_k * (MoeGathersOverExpertTp(l) ? l.expert_tp() : 1);
}

int64_t MoeRoutedTokensPerRank(const ModelSpec& m, const Layout& l) {
  const int64_t T = TokensPerRank(m, l);
  return MoeInputSplitOverTp(l) ? T / l.tp : T;
}

const char* OpRoleName(OpRole r) {
  static const char* kNames[] = {"norm", "qkv", "attention_scores", "softmax", "attention_dropout",
                                 "attention_context", "flash_attention", "projection", "residual",
                                 "router", "mlp_up", "mlp_activation", "mlp_down", "embedding",
                                 "lm_head", "cross_entropy", "moe_permute", "rope"};
  return kNames[static_cast<int>(r)];
}

namespace {

Op Matmul(std::string name, OpRole role, int64_t rows, int64_t cols, int64_t inner,
          double bytes_per) {
  Op op;
  op.name = std::move(name);
  op.role = role;
  op.kind = OpKind::kMatmul;
  op.m = rows;
  op.n = cols;
  op.k = inner;
  op.flops = 2.0 * static_cast<double>(rows) * cols * inner;
  op.executed_flops = op.flops;
  // Read A (m x k) and B (k x n), write C (m x n).
  op.bytes = bytes_per * (static_cast<double>(rows) * inner + static_cast<double>(inner) * cols +
                          static_cast<double>(rows) * cols);
  return op;
}

Op Memory(std::string name, OpRole role, double bytes, bool selective = false) {
  Op op;
  op.name = std::move(name);
  op.role = role;
  op.kind = OpKind::kMemory;
  op.bytes = bytes;
  op.recomputed_selective = selective;
  return op;
}

// Activation element size: 16-bit for bf16/fp16/fp8 runs (fp8 GEMM inputs are cast on the
// fly; Transformer Engine keeps activations in bf16), 4 bytes for fp32.
double ActBytes(const Layout& l) { return l.dtype == DType::kFp32 ? 4 : 2; }

// HBM bytes a norm moves per element of its input, forward. Fused (Megatron-Core's and
// Transformer Engine's, Apex's, Inductor's compiled kernel; LayerNorm in eager PyTorch is
// F.layer_norm, one kernel too): read the input, write the output, 2b. Eager RMSNorm is six
// kernels over the whole tensor: torchtitan's `self._norm(x.float()).type_as(x) * self.weight`
// with `_norm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)` (torchtitan/models/
// norms.py RMSNorm, pytorch/torchtitan @ 3faaa1a, norm_type "rmsnorm", its train configs'
// default), as Hugging Face's LlamaRMSNorm writes it (transformers 4.34): x.float() (read b,
// write 4), pow (read 4, write 4), mean (read 4), the multiply by the row's rsqrt (read 4, write
// 4), type_as (read 4, write b), the multiply by the weight (read b, write b): 4b + 28 bytes;
// at fp32 the casts are no-ops: 28. The launches (NormLaunches) count the two kernels on the
// row statistics too (+ eps, rsqrt), whose bytes are negligible.
double NormBytesPerElement(const ModelSpec& m, const Layout& l) {
  const double b = ActBytes(l);
  if (!EagerRmsNorm(m, l)) return 2 * b;
  return b == 4 ? 28 : 4 * b + 28;
}

// Kernels one norm launches: one fused (or eager F.layer_norm); eager RMSNorm's float, pow,
// mean, + eps, rsqrt, multiply, type_as and weight multiply, eight (six at fp32, whose casts
// launch nothing).
int32_t NormLaunches(const ModelSpec& m, const Layout& l) {
  if (!EagerRmsNorm(m, l)) return 1;
  return ActBytes(l) == 4 ? 6 : 8;
}

// `count` norms over `elements` input elements each.
Op NormOp(const ModelSpec& m, const Layout& l, std::string name, double elements, int32_t count = 1) {
  Op op = Memory(std::move(name), OpRole::kNorm, count * NormBytesPerElement(m, l) * elements);
  op.launches = count * NormLaunches(m, l);
  return op;
}

// Under fp8, the quantization kernels of a Transformer Engine GEMM (Op::fp8_cast_*_bytes): in
// forward its input (T x k), unless the norm before it writes fp8 itself (Megatron-Core's qkv
// and fc1 are TELayerNormColumnParallelLinear, whose fused norm quantizes its output); in
// backward its output gradient (T x n). 4 bytes per element: read 2, write 1 + 1 (the data and
// its transpose).
void Fp8Casts(Op& op, const Layout& l, bool input_quantized_by_norm) {
  if (l.dtype != DType::kFp8) return;
  constexpr double kCastBytesPerElement = 4;
  const double rows = static_cast<double>(op.m);
  op.fp8_cast_forward_bytes = input_quantized_by_norm ? 0 : kCastBytesPerElement * rows * static_cast<double>(op.k);
  op.fp8_cast_backward_bytes = kCastBytesPerElement * rows * static_cast<double>(op.n);
}

void AddMlp(std::vector<Op>& ops, const ModelSpec& m, const Layout& l, int64_t tokens,
            int64_t ffn, const std::string& prefix, bool input_quantized_by_norm, int64_t tp) {
  const double b = ActBytes(l);
  const int64_t f = ffn / tp;
  if (m.activation == Activation::kSwiglu) {
    if (SeparateLinears(l.kernels)) {
      // torchtitan's FeedForward, w2(F.silu(w1(x)) * w3(x)): w1 and w3 separate GEMMs (each
      // quantizing its own input under float8).
      for (const char* w : {"w1", "w3"}) {
        ops.push_back(Matmul(prefix + w, OpRole::kMlpUp, tokens, f, m.hidden, b));
        ops.back().column_parallel = true;
        Fp8Casts(ops.back(), l, false);
      }
    } else {
      // gate and up fused: (T x h) x (h x 2f/t); SiLU(gate) * up; down: (T x f/t) x (f/t x h).
      ops.push_back(Matmul(prefix + "gate_up", OpRole::kMlpUp, tokens, 2 * f, m.hidden, b));
      ops.back().column_parallel = true;
      Fp8Casts(ops.back(), l, input_quantized_by_norm);
    }
    // SiLU(gate) * up in one kernel (fused, and compiled: Inductor fuses the chain), reading two
    // and writing one, 3b per element; eager, two kernels: SiLU reads and writes f (2b), the
    // multiply reads two and writes one (3b), 5b. Eager's backward: the multiply's two gradients
    // (read the incoming gradient and the other operand, write: 3b each) and SiLU's (read the
    // gradient and its input, write: 3b), 9b, 1.8 x the forward.
    const bool eager = EagerElementwise(l.kernels);
    ops.push_back(Memory(prefix + "swiglu", OpRole::kMlpActivation, b * (eager ? 5.0 : 3.0) * tokens * f));
    if (eager) {
      ops.back().backward_factor = 9.0 / 5.0;
      ops.back().launches = 2;
    }
    ops.back().transcendentals = static_cast<double>(tokens) * f;  // exp in SiLU
  } else {
    ops.push_back(Matmul(prefix + "up", OpRole::kMlpUp, tokens, f, m.hidden, b));
    ops.back().column_parallel = true;
    Fp8Casts(ops.back(), l, input_quantized_by_norm);
    ops.push_back(Memory(prefix + "gelu", OpRole::kMlpActivation, b * 2.0 * tokens * f));
    ops.back().transcendentals = static_cast<double>(tokens) * f;  // tanh
  }
  ops.push_back(Matmul(prefix + "down", OpRole::kMlpDown, tokens, m.hidden, f, b));
  Fp8Casts(ops.back(), l, false);
}

}  // namespace

std::vector<Op> LayerOps(const ModelSpec& m, const Layout& l, bool moe_layer) {
  const double b = ActBytes(l);
  const int64_t T = TokensPerRank(m, l);
  const int64_t h = m.hidden;
  // With SP, norms, dropout and residuals run on T/t tokens; without, every TP rank repeats them.
  const double Tn = l.sp ? static_cast<double>(T) / l.tp : static_cast<double>(T);
  const int64_t heads = m.heads / l.tp;
  const int64_t kv_heads = std::max<int64_t>(1, m.kv_heads / l.tp);  // replicated when t > kv
  const int64_t q = heads * m.head_dim;
  const int64_t kv = kv_heads * m.head_dim;
  std::vector<Op> ops;

  // The values' and the output projection's widths on this rank (MLA's v_head_dim differs).
  const int64_t v_width = kv_heads * m.v_head_dim();
  const int64_t o_width = heads * m.v_head_dim();
  if (m.norms_per_layer > 0) ops.push_back(NormOp(m, l, "norm1", Tn * h));
  if (m.mla) {
    // Multi-head latent attention (model_spec.h MlaSpec): the down-projections to the query
    // and key-value latents (and the shared RoPE key) run on every TP rank over all T tokens
    // (Megatron-Core's MLASelfAttention: linear_q_down_proj, linear_kv_down_proj duplicated),
    // their RMSNorms, then the column-parallel up-projections to this rank's heads.
    const MlaSpec& a = *m.mla;
    ops.push_back(Matmul("qkv_down", OpRole::kQkv, T, a.q_lora_rank + a.kv_lora_rank + a.rope_head_dim, h, b));
    Fp8Casts(ops.back(), l, true);
    ops.push_back(NormOp(m, l, "latent_norm", static_cast<double>(T) * (a.q_lora_rank + a.kv_lora_rank)));
    if (a.q_lora_rank > 0) {
      ops.push_back(Matmul("q_up", OpRole::kQkv, T, q, a.q_lora_rank, b));
    } else {
      ops.push_back(Matmul("q", OpRole::kQkv, T, q, h, b));
    }
    ops.back().column_parallel = true;
    Fp8Casts(ops.back(), l, a.q_lora_rank == 0);
    ops.push_back(Matmul("kv_up", OpRole::kQkv, T, heads * (m.head_dim - a.rope_head_dim) + v_width, a.kv_lora_rank, b));
    ops.back().column_parallel = true;
    Fp8Casts(ops.back(), l, false);
  } else if (SeparateLinears(l.kernels)) {
    // torchtitan's Attention: wq, wk, wv are separate linears, each a GEMM of its own width
    // (and, under float8, each quantizing its input), compiled or not.
    const std::pair<const char*, int64_t> parts[] = {{"wq", q}, {"wk", kv}, {"wv", v_width}};
    for (const auto& [name, width] : parts) {
      ops.push_back(Matmul(name, OpRole::kQkv, T, width, h, b));
      ops.back().column_parallel = true;
      Fp8Casts(ops.back(), l, false);
    }
  } else {
    ops.push_back(Matmul("qkv", OpRole::kQkv, T, q + 2 * kv, h, b));
    ops.back().column_parallel = true;
    Fp8Casts(ops.back(), l, true);
  }
  if (m.qk_norm) {
    // RMSNorm over each head's queries and keys (Qwen3Attention.q_norm / k_norm in
    // transformers' models/qwen3/modeling_qwen3.py): read and write Q and K.
    ops.push_back(NormOp(m, l, "qk_norm", static_cast<double>(T) * (q + kv)));
  }
  if (m.position == Position::kRope) {
    // Rotary embedding of the queries and keys (MLA: each query head's and the shared key's
    // rope_head_dim part). Fused, one kernel reads and writes them (Megatron-Core's
    // apply_rope_fusion, Transformer Engine's fused_apply_rotary_pos_emb; the runtime's
    // RopeForward): 2b per element. Eager, torchtitan's apply_rotary_emb runs three kernels on
    // each: xq.float() (read b, write 4), the complex multiply by freqs_cis (read 4, write 4)
    // and type_as (read 4, write b): 2b + 16 per element (8 at fp32, where the casts are
    // no-ops). Backward applies the conjugate rotation the same way (backward_factor 1).
    const double rotated = m.mla ? static_cast<double>((heads + 1) * m.mla->rope_head_dim) : static_cast<double>(q + kv);
    const double per_element = !EagerElementwise(l.kernels) ? 2 * b : b == 4 ? 8 : 2 * b + 16;
    ops.push_back(Memory("rope", OpRole::kRope, per_element * static_cast<double>(T) * rotated));
    ops.back().backward_factor = 1;
    // Eager, those kernels for the queries and again for the keys (at fp32 the multiply alone).
    if (EagerElementwise(l.kernels)) ops.back().launches = b == 4 ? 2 : 6;
  }
  const double s_kv = static_cast<double>(m.seq_len);  // keys each query meets (all chunks)
  if (FusedAttention(l.attention)) {
    // Fused causal attention (flash-style). Scores QK^T and context PV, each 2*T*s*d per
    // head; with CP a rank's T = s/cp queries meet all s keys. Counted over the full matrix
    // (eq. 3); the kernel skips the masked half. Reads Q, K, V, writes O.
    Op attn;
    attn.name = "attention";
    attn.kind = OpKind::kAttention;
    attn.role = OpRole::kFlashAttention;
    // A sliding window (Mistral) leaves the kernel the window's pairs only (FlashAttention-2's
    // window_size skips the blocks outside it): AttentionSpan instead of s.
    // QK^T over head_dim, PV over the values' head size (MLA's v_head_dim; head_dim otherwise).
    const double v_head = static_cast<double>(m.v_head_dim());
    attn.flops = 2.0 * static_cast<double>(T) * m.AttentionSpan() * (static_cast<double>(m.head_dim) + v_head) * heads;
    attn.executed_flops = attn.flops / 2;
    // Dropout on the probabilities inside the kernel (Philox numbers drawn per score, the mask
    // regenerated in backward): +3.4 % of the kernel's forward + backward time, measured on an
    // H200 with cuDNN's fused attention through Transformer Engine 2.15, bf16, sbhd layout, 4096
    // tokens, 16 heads of 128, p = 0.1: 0.594 ms without, 0.614 ms with (NVIDIA/
    // TransformerEngine issue #3312); FlashAttention-2 on GB200 the same order (+4.7 %, 0.695
    // to 0.728 ms, #3313). Priced as that much more executed work.
    if (m.dropout) attn.executed_flops *= 0.614 / 0.594;
    // The backward recomputes QK^T and the probabilities: five matmuls against the forward's
    // two, 2.5 x its FLOPs, the convention of the measured fwd+bwd rates the hardware
    // descriptions hold (FlashAttention-2 paper, arXiv 2307.08691, Sec. 4.1: "we multiply the
    // forward pass FLOPs by 2.5 (since there are 2 matmuls in the forward pass and 5 matmuls
    // in the backward pass, due to recomputation)"; benchmarks/benchmark_flash_attention.py
    // flops(): fwd_bwd = 3.5 x fwd). So a pass takes its FLOPs at the one fwd+bwd rate and
    // the kernel's fwd+bwd time is the measured one; priced 1 + 2 it was 3/3.5 of it.
    attn.backward_factor = 2.5;
    attn.head_dim = m.head_dim;
    attn.v_head_dim = m.v_head_dim();
    attn.attention_seq = std::max<int64_t>(1, m.seq_len / l.cp);
    attn.attention_impl = l.attention;
    attn.bytes = b * static_cast<double>(T) * (static_cast<double>(q + o_width) + static_cast<double>(kv + v_width) * l.cp);
    attn.recomputed_selective = true;
    ops.push_back(attn);
  } else {
    // Unfused: batched score GEMM (T x s x d per head) writing the heads x T x s scores,
    // a fused scale-mask-softmax kernel (read, write), dropout (read, write, 1-byte mask),
    // batched context GEMM reading the probabilities. Nothing is skipped for causality.
    const double scores = static_cast<double>(heads) * T * s_kv;
    Op qk = Matmul("attn_scores", OpRole::kAttentionScores, T, m.seq_len, m.head_dim, b);
    qk.flops = qk.executed_flops = 2.0 * scores * m.head_dim;
    qk.bytes = b * (scores + static_cast<double>(T) * q + s_kv * kv);  // write S; read Q, K
    qk.n = m.seq_len * heads;  // all heads' tiles run in one batched launch
    qk.recomputed_selective = true;
    qk.bf16_under_fp8 = true;  // attention stays 16-bit under Transformer Engine's fp8 recipe
    ops.push_back(qk);
    if (m.attn_logit_softcap > 0) {
      // Gemma 2's cap * tanh(S / cap) as the eager models run it (ModelSpec::attn_logit_softcap):
      // divide, tanh, multiply, each reading and writing the scores; backward, the multiply's
      // and the divide's gradients (read, write) and the tanh's (read the gradient and the kept
      // output, write): 7 passes against the forward's 6.
      Op cap = Memory("score_softcap", OpRole::kSoftmax, 3 * 2.0 * b * scores, true);
      cap.backward_factor = 7.0 / 6.0;
      cap.transcendentals = scores;  // tanh per score
      ops.push_back(cap);
    }
    ops.push_back(Memory("softmax", OpRole::kSoftmax, 2.0 * b * scores, true));
    ops.back().transcendentals = scores;  // exp per score
    if (m.dropout) {
      ops.push_back(Memory("attn_dropout", OpRole::kAttentionDropout, (2.0 * b + 1.0) * scores, true));
    }
    const int64_t v_head = m.v_head_dim();
    Op pv = Matmul("attn_context", OpRole::kAttentionContext, T, v_head, m.seq_len, b);
    pv.flops = pv.executed_flops = 2.0 * scores * v_head;
    pv.bytes = b * (scores + s_kv * v_width + static_cast<double>(T) * o_width);  // read P, V; write O
    pv.m = T;
    pv.n = v_head * heads;  // all heads' tiles run in one batched launch
    pv.recomputed_selective = true;
    pv.bf16_under_fp8 = true;
    ops.push_back(pv);
  }
  ops.push_back(Matmul("proj", OpRole::kProjection, T, h, o_width, b));
  Fp8Casts(ops.back(), l, false);
  // Gemma 2 and 3 normalise each branch's output too (post_attention_layernorm,
  // post_feedforward_layernorm: norms_per_layer 4).
  if (m.norms_per_layer > 2) ops.push_back(NormOp(m, l, "post_attn_norm", Tn * h));
  ops.push_back(Memory("residual1", OpRole::kResidual, b * 3.0 * Tn * h + (m.dropout ? Tn * h : 0)));
  const size_t mlp_input = ops.size();
  // One norm a layer (Falcon-7B's parallel attention and MLP share it): no second one.
  if (m.norms_per_layer > 1) ops.push_back(NormOp(m, l, "norm2", Tn * h));
  if (moe_layer && m.moe) {
    // Router: (T x h) x (h x E), replicated over TP (on this rank's T / tp tokens when the
    // layer's input stays split over TP, MoeInputSplitOverTp); each token goes to top_k experts,
    // and an EP rank runs its E/ep experts on MoeExpertTokensPerRank tokens in total (balanced
    // routing), split over the experts' TP.
    ops.push_back(Matmul("router", OpRole::kRouter, MoeRoutedTokensPerRank(m, l), m.moe->experts, h, b));
    ops.back().bf16_under_fp8 = true;
    if (m.moe->shared_ffn_hidden > 0) {
      // Shared experts: a TP-split MLP on every token of the norm's output (Megatron-Core's
      // SharedExpertMLP; Qwen2-MoE's shared_expert), run before the dispatch, and Qwen2-MoE's
      // sigmoid gate on its output, (T x h) x (h x 1). Their own SP all-gather and
      // reduce-scatter are not priced: they are counted as sharing the routed path's (with etp
      // set, where the routed path has no TP exchange, that leaves them unpriced).
      AddMlp(ops, m, l, T, m.moe->shared_ffn_hidden, "shared_", true, l.tp);
      if (m.moe->shared_gate) {
        ops.push_back(Matmul("shared_gate", OpRole::kRouter, T, 1, h, b));
        ops.back().bf16_under_fp8 = true;
      }
    }
  }
  // Megatron-Core's alltoall token dispatcher permutes each token's top_k copies into expert
  // order before the dispatch all-to-all and unpermutes (and sums) them after the combine
  // (megatron/core/transformer/moe/token_dispatcher.py, moe_utils.py permute / unpermute;
  // NVIDIA/Megatron-LM d98e8a64dd): each reads and writes T x top_k rows of h 16-bit values, and
  // the backward pass does the reverse (backward_factor 1).
  // Under MoeInputSplitOverTp each TP rank permutes its own T / tp tokens.
  const bool experts = moe_layer && m.moe.has_value();
  const double permuted_rows = experts ? static_cast<double>(MoeRoutedTokensPerRank(m, l)) * m.moe->top_k : 0;
  if (experts) {
    ops.push_back(Memory("moe_permute", OpRole::kMoePermute, 2.0 * b * permuted_rows * h));
    ops.back().backward_factor = 1;
  }
  const size_t mlp = ops.size();
  if (experts) {
    // Experts' fc1 reads the dispatched tokens, not the norm's output: quantized on its own. The
    // busiest EP rank's experts take Layout::MoeLoad() times the balanced share.
    const double routed = std::round(static_cast<double>(MoeExpertTokensPerRank(m, l)) * l.MoeLoad());
    AddMlp(ops, m, l, static_cast<int64_t>(routed), m.moe->ffn_hidden, "expert_", false, l.expert_tp());
  } else {
    AddMlp(ops, m, l, T, m.ffn_hidden, "mlp_", true, l.tp);
  }
  const size_t mlp_output = ops.size();
  if (experts) {
    ops.push_back(Memory("moe_unpermute", OpRole::kMoePermute, 2.0 * b * permuted_rows * h));
    ops.back().backward_factor = 1;
  }
  if (m.norms_per_layer > 3) ops.push_back(NormOp(m, l, "post_mlp_norm", Tn * h));
  ops.push_back(Memory("residual2", OpRole::kResidual, b * 3.0 * Tn * h + (m.dropout ? Tn * h : 0)));
  for (size_t i = mlp_input; i < ops.size(); ++i) {
    ops[i].part = i < mlp ? LayerPart::kMlpInput : i < mlp_output ? LayerPart::kMlp : LayerPart::kMlpOutput;
  }
  if (l.recompute == Recompute::kOp) OpCheckpoint(m, l, ops);
  return ops;
}

namespace {

// The output widths of the separate linears a fused matmul op stands for (OpCheckpoint): the
// fused QKV projection is wq, wk, wv; SwiGLU's gate_up is w1 (gate) and w3 (up). An op that
// is one linear has one part; a batched attention GEMM (aten.bmm) has none.
std::vector<double> MmParts(const ModelSpec& m, const Layout& l, const Op& op) {
  if (op.kind != OpKind::kMatmul || op.role == OpRole::kAttentionScores || op.role == OpRole::kAttentionContext) {
    return {};
  }
  const double n = static_cast<double>(op.n);
  if (SeparateLinears(l.kernels)) return {n};  // the linears are separate ops already
  if (op.role == OpRole::kQkv && !m.mla) {
    const double kv = static_cast<double>(std::max<int64_t>(1, m.kv_heads / l.tp) * m.head_dim);
    return {n - 2 * kv, kv, kv};
  }
  if (op.role == OpRole::kMlpUp && m.activation == Activation::kSwiglu) return {n / 2, n / 2};
  return {n};
}

}  // namespace

void OpCheckpoint(const ModelSpec& m, const Layout& l, std::vector<Op>& ops) {
  int64_t mm = 0;  // the block's aten.mm calls so far
  for (Op& op : ops) {
    if (op.kind == OpKind::kAttention) {
      op.op_recomputed = 0;  // the SDPA kernel's outputs are saved
      continue;
    }
    const std::vector<double> parts = MmParts(m, l, op);
    if (parts.empty()) {
      op.op_recomputed = 1;  // not a saved op: recomputed whole
      continue;
    }
    double width = 0, recomputed = 0;
    for (double w : parts) {
      width += w;
      if (++mm % 2 == 0) recomputed += w;
    }
    op.op_recomputed = width > 0 ? recomputed / width : 0;
  }
}

double OpCheckpointSavedBytes(const ModelSpec& m, const Layout& l, bool moe_layer) {
  Layout checkpointed = l;
  checkpointed.recompute = Recompute::kOp;
  const double b = ActBytes(l);
  const double T = static_cast<double>(TokensPerRank(m, l));
  // The block's input, which the checkpoint keeps (split over TP under SP).
  double saved = b * (l.sp ? T / static_cast<double>(l.tp) : T) * static_cast<double>(m.hidden);
  for (const Op& o : LayerOps(m, checkpointed, moe_layer)) {
    if (o.kind == OpKind::kAttention) {
      // Its output O and the log-sum-exp per query row and head.
      saved += b * T * static_cast<double>((m.heads / l.tp) * m.v_head_dim()) + 4 * T * static_cast<double>(m.heads / l.tp);
      continue;
    }
    // A saved matmul's output (its parts' widths add up to its n), less the recomputed share.
    if (MmParts(m, checkpointed, o).empty()) continue;
    saved += b * static_cast<double>(o.m) * static_cast<double>(o.n) * (1 - o.op_recomputed);
  }
  return saved;
}

std::vector<Op> EmbeddingOps(const ModelSpec& m, const Layout& l) {
  const double b = ActBytes(l);
  const double Tn = l.sp ? static_cast<double>(TokensPerRank(m, l)) / l.tp
                         : static_cast<double>(TokensPerRank(m, l));
  // Gather T rows of the (V/t x h) table and write T x h (+ position embedding add).
  Op lookup = Memory("embedding", OpRole::kEmbedding, b * 2.0 * Tn * m.hidden * (m.position == Position::kLearned ? 1.5 : 1.0));
  lookup.in_layer = false;
  return {lookup};
}

std::vector<Op> HeadOps(const ModelSpec& m, const Layout& l) {
  const double b = ActBytes(l);
  const int64_t T = TokensPerRank(m, l);
  const double Tn = l.sp ? static_cast<double>(T) / l.tp : static_cast<double>(T);
  const int64_t v = (m.vocab + l.tp - 1) / l.tp;
  std::vector<Op> ops;
  const auto head = [&] {
    ops.push_back(NormOp(m, l, "final_norm", Tn * m.hidden));
    ops.push_back(Matmul("lm_head", OpRole::kLmHead, T, v, m.hidden, b));
    ops.back().bf16_under_fp8 = true;  // Megatron-Core's output layer is not a TE module
    // Softmax cross-entropy over the vocabulary shard in fp32: read logits, write grads.
    Op loss =
        Memory("cross_entropy", OpRole::kCrossEntropy, 4.0 * 2.0 * static_cast<double>(T) * v);
    loss.backward_factor = 0.5;  // the gradient is produced in the forward kernel's pass
    if (EagerLoss(l.kernels)) {
      // torchtitan: the output layer's logits cast to fp32 (.float(): read b, write 4; no kernel
      // at fp32), then F.cross_entropy: log_softmax (read 4, write 4) and the NLL gather.
      // Backward: the NLL's dense gradient (write 4), log_softmax's (read the gradient and its
      // output, write: 12) and the cast's (read 4, write b).
      const double cast = b == 4 ? 0 : b + 4;
      loss.bytes = (cast + 8) * static_cast<double>(T) * v;
      loss.backward_factor = (16 + cast) / (cast + 8);
      loss.launches = b == 4 ? 2 : 3;  // the cast, log_softmax, the NLL gather
    } else if (CompiledLoss(l.kernels)) {
      // torchtitan's loss compiled (components/loss.py: torch.compile(cross_entropy_loss)): the
      // forward reads the 16-bit logits once for their log-sum-exp; the backward reads them
      // again and writes the 16-bit gradient, the softmax recomputed in the kernel.
      loss.bytes = b * static_cast<double>(T) * v;
      loss.backward_factor = 2;
    }
    loss.transcendentals = static_cast<double>(T) * v;  // exp per logit
    if (m.final_logit_softcap > 0) {
      // Gemma 2's cap * tanh(logits / cap) (ModelSpec::final_logit_softcap), elementwise in fp32
      // over the shard as the eager model runs it: read the logits, write the capped ones;
      // backward reads the gradient and the kept tanh, writes the gradient (1.5x).
      Op cap =
          Memory("logit_softcap", OpRole::kCrossEntropy, 4.0 * 2.0 * static_cast<double>(T) * v);
      cap.backward_factor = 1.5;
      cap.transcendentals = static_cast<double>(T) * v;  // tanh per logit
      ops.push_back(cap);
    }
    ops.push_back(loss);
  };
  head();
  // Multi-token prediction (ModelSpec::mtp_layers; each depth's transformer layer is a layer of
  // the head's chunk, ChunkOf): per depth the shifted tokens' embedding lookup, hnorm and enorm,
  // eh_proj over their concatenation (2h -> h, Megatron-Core's column-parallel linear, so over
  // all T rows under SP), then the final norm, the shared head and the depth's own
  // cross-entropy (megatron/core/transformer/multi_token_prediction.py, models/gpt/gpt_model.py).
  // Their TP exchanges are the layer plan's (layer_plan.cc, MtpTpExchanges).
  for (int64_t d = 0; d < m.mtp_layers; ++d) {
    for (const Op& op : EmbeddingOps(m, l)) ops.push_back(op);
    ops.push_back(NormOp(m, l, "mtp_norms", Tn * m.hidden, 2));
    ops.push_back(Matmul("mtp_eh_proj", OpRole::kProjection, T, (m.hidden + l.tp - 1) / l.tp,
                         2 * m.hidden, b));
    head();
  }
  for (Op& op : ops) op.in_layer = false;
  return ops;
}

double IterationFlops(const ModelSpec& m, const Layout& l, bool with_recompute) {
  // Whole model, whole batch: build the ops with no partitioning and scale by sequences.
  Layout whole = l;
  whole.tp = whole.cp = whole.ep = 1;
  whole.sp = false;
  whole.mbs = 1;
  // Model FLOPs count every token's top_k experts once: no imbalance, nothing dropped.
  whole.moe_capacity = 0;
  whole.moe_imbalance = 1;
  double per_sequence = 0;
  for (int moe = 0; moe < 2; ++moe) {
    // The decoder's layers and the MTP depths' (ModelSpec::MoeLayersIn counts those too).
    const int64_t moe_count = m.MoeLayersIn(0, m.layers + m.mtp_layers);
    const int64_t count = moe ? moe_count : m.layers + m.mtp_layers - moe_count;
    if (count == 0) continue;
    double fwd = 0, selective = 0, op_recomputed = 0;
    for (const Op& op : LayerOps(m, whole, moe == 1)) {
      fwd += op.flops;
      if (op.recomputed_selective) selective += op.flops;
      op_recomputed += op.flops * op.op_recomputed;
    }
    double recompute = 0;
    if (with_recompute) {
      recompute = l.recompute == Recompute::kFull        ? fwd
                  : l.recompute == Recompute::kSelective ? selective
                  : l.recompute == Recompute::kOp        ? op_recomputed
                                                         : 0;
    }
    // forward + backward (2x) + recomputed forward, for every layer of this kind
    per_sequence += static_cast<double>(count) * (3 * fwd + recompute);
  }
  for (const Op& op : HeadOps(m, whole)) per_sequence += 3 * op.flops;  // never recomputed
  return per_sequence * static_cast<double>(l.gbs);
}

}  // namespace shardsim
