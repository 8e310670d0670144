// See memory.h.
#include "src/cost/memory.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "src/cost/grad_compression.h"
#include "src/cost/ops.h"
#include "src/layout/pipeline.h"

namespace shardsim {

StateBytes StateBytesPerParam(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
    case DType::kTf32:
    case DType::kFp64: return {4, 4, 8};
    case DType::kFp16: return {2, 2, 12};
    // bf16 accumulates and reduces gradients in fp32; fp8 keeps its weights in bf16
    // (Transformer Engine casts per GEMM) and does the same.
    case DType::kBf16:
    case DType::kFp8: return {2, 4, 12};
  }
  return {2, 4, 12};
}

StateBytes StateBytesPerParam(const Layout& l) {
  StateBytes b = StateBytesPerParam(l.dtype);
  if (l.grad_bf16 && (l.dtype == DType::kBf16 || l.dtype == DType::kFp8)) b = {2, 2, 16};
  return b;
}

std::pair<double, double> LayersOnStage(const ModelSpec& m, const Layout& l, int64_t stage) {
  const int64_t layers = StageLayers(m, l, static_cast<int32_t>(stage));
  int64_t moe_layers = 0;
  if (m.moe) {
    for (int32_t ci = 0; ci < ChunksPerStage(l); ++ci) {
      const ModelChunk c = ChunkOf(m, l, static_cast<int32_t>(stage), ci);
      moe_layers += m.MoeLayersIn(c.first_layer, c.first_layer + c.layers);
    }
  }
  return {static_cast<double>(layers), static_cast<double>(moe_layers)};
}

namespace {

// The most layers one chunk of `stage` holds (chunks differ under an uneven split).
int64_t LargestChunk(const ModelSpec& m, const Layout& l, int64_t stage) {
  int64_t most = 0;
  for (int32_t ci = 0; ci < ChunksPerStage(l); ++ci) {
    most = std::max(most, ChunkOf(m, l, static_cast<int32_t>(stage), ci).layers);
  }
  return most;
}

}  // namespace

double Fp8CachedWeightBytes(const ModelSpec& m, const Layout& l, int64_t stage) {
  // With fp8_params the fp8 weights and their transpose (1 + 1 bytes) take the place of the
  // bf16 weights the model states count (2 bytes): nothing extra.
  if (l.dtype != DType::kFp8 || l.fp8_params) return 0;
  // The cache is Transformer Engine's (kernels=fused; shardsim's runtime keeps one too, ZeRO-3
  // included). torchtitan's float8 is torchao's (kernels=eager or compiled), which casts in
  // each linear call and, under FSDP2 with float8 all-gather, each shard before the all-gather
  // (torchao/float8/fsdp_utils.py WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather): the
  // cast lives as long as the gathered unit, nothing cached across micro-batches.
  if (l.kernels != Kernels::kFused) return 0;
  const auto [n, n_moe] = LayersOnStage(m, l, stage);
  double gemm_params = n * AttentionParamsOnRank(m, l) +
                       (n - n_moe) * MlpParamsOnRank(m, l, m.ffn_hidden);
  if (n_moe > 0) {
    gemm_params += n_moe * ExpertParamsOnRank(m, l);
    if (m.moe->shared_ffn_hidden > 0) gemm_params += n_moe * MlpParamsOnRank(m, l, m.moe->shared_ffn_hidden);
  }
  return 2.0 * gemm_params;
}

StageParams ParamsOnStage(const ModelSpec& m, const Layout& l, int64_t stage) {
  StageParams p;
  // Megatron assigns layers in chunks: with vpp, stage s holds chunks s, s+pp, s+2pp, ...
  const double t = static_cast<double>(l.tp);
  // Attention and MLP weights are split over TP; norms (and the router) are replicated.
  // The stage's layers (StageLayers); only MoE needs to know which.
  const auto [n, n_moe] = LayersOnStage(m, l, stage);
  p.dense = n * (AttentionParamsOnRank(m, l) + static_cast<double>(m.LayerNormParams()));
  p.dense += (n - n_moe) * MlpParamsOnRank(m, l, m.ffn_hidden);
  if (n_moe > 0) {
    p.dense += n_moe * (static_cast<double>(m.hidden * m.moe->experts) + SharedExpertParamsOnRank(m, l));
    p.expert = n_moe * ExpertParamsOnRank(m, l);
  }
  // First stage: embeddings (vocabulary split over TP). The head's stage (the last; the first
  // under ZB-V, HeadStage): final norm and LM head; with tied embeddings on another stage than
  // the embedding's, Megatron keeps a copy of the embedding there.
  const double embed = static_cast<double>(m.vocab * m.hidden) / t;
  if (stage == 0) {
    p.dense += embed + (m.position == Position::kLearned ? static_cast<double>(m.seq_len * m.hidden) : 0);
  }
  if (stage == HeadStage(l)) {
    p.dense += m.NormParams() + MtpHeadParamsOnRank(m, l);
    if (!m.tied_embeddings || HeadStage(l) != 0) p.dense += embed;
  }
  return p;
}

namespace {

// The sizes both activation formulas start from, for one rank and micro-batch.
struct RankSizes {
  double e;   // bytes per activation element
  double sb;  // tokens per rank: mbs x seq_len / cp
  double h;   // hidden
  double t;   // tp
  double q;   // query width (heads x head_dim)
  double kv;  // K or V width per rank x t: max(kv_heads / t, 1) heads, replicated when t > kv_heads
};

// The experts' intermediates on a rank against the dense formula's top_k x sb tokens split
// over t: MoeExpertTokensPerRank rows, ffn / etp wide (1 where the experts' TP is the dense TP:
// the rows are then sb x top_k, with or without the dispatcher's gather).
double ExpertRowsScale(const ModelSpec& m, const Layout& l) {
  const double rows = static_cast<double>(MoeExpertTokensPerRank(m, l));
  const double dense_rows = static_cast<double>(TokensPerRank(m, l) * m.moe->top_k);
  return rows / dense_rows * static_cast<double>(l.tp) / static_cast<double>(l.expert_tp());
}

RankSizes PerRankSizes(const ModelSpec& m, const Layout& l) {
  const double t = static_cast<double>(l.tp);
  return {l.dtype == DType::kFp32 ? 4.0 : 2.0, static_cast<double>(l.mbs) * m.seq_len / l.cp,
          static_cast<double>(m.hidden), t, static_cast<double>(m.q_dim()),
          std::max(static_cast<double>(m.kv_dim()), t * m.head_dim)};
}

}  // namespace

double LayerActivationBytes(const ModelSpec& m, const Layout& l, bool moe_layer) {
  if (l.recompute == Recompute::kOp) return OpCheckpointSavedBytes(m, l, moe_layer);
  // Korthikanti et al. 2022, Sec. 4.1, generalised to GQA, SwiGLU, MoE and no dropout.
  // Per micro-batch of b sequences of s tokens (s/cp per rank), 16-bit activations (2 bytes),
  // 1-byte dropout masks. t-split tensors are divided by t; with SP so are the rest.
  const auto [e, sb, h, t, q, kv] = PerRankSizes(m, l);
  const double a = static_cast<double>(m.heads);
  const double mask = m.dropout ? 1 : 0;
  // Bytes per element of what a GEMM saves of its input for the weight gradient: under fp8 a
  // Transformer Engine GEMM keeps its quantized input, 1 byte (transformer_engine/pytorch/
  // module/linear.py and layernorm_linear.py save the fp8 input tensor for backward); the
  // tensors the attention, norms and activation functions keep stay 16-bit.
  const double g = l.dtype == DType::kFp8 ? 1 : e;
  // Replicated across TP unless SP: the two norm inputs, QKV input, MLP input, dropout masks.
  // Eager RMSNorm (ops.cc NormBytesPerElement) keeps, instead of its 16-bit input, the fp32 copy
  // x.float() (pow and the rsqrt multiply save it) and the normalized tensor before the weight
  // (the weight multiply saves it): 4 + e bytes an element where a fused norm keeps e.
  const double norm_kept = EagerRmsNorm(m, l) ? 4 + e : e;
  double replicated = sb * (static_cast<double>(m.norms_per_layer) * norm_kept * h  // norm inputs (2; Gemma's 4)
                            + g * h         // QKV input (norm output)
                            + g * h         // MLP input (norm output)
                            + 2 * mask * h);  // attention and MLP dropout masks
  // Split across TP: Q, K, V, the output-projection input, the MLP intermediates.
  // MLA: V and the projection input are v_head_dim wide (v_dim, o_dim).
  const double v = m.mla ? static_cast<double>(m.v_dim()) : kv, o = static_cast<double>(m.o_dim());
  double split = sb * (e * q + e * kv + e * v  // Q, K, V
                       + g * o);              // projection input
  if (m.qk_norm) split += sb * norm_kept * (q + kv);  // Q and K before their norms (Qwen3's q_norm, k_norm)
  // Under fp8 linear_proj keeps its fp8 input (g above) and a fused (flash) kernel its output O
  // at 16 bits for its own backward (FlashAttention-2 Alg. 2 reads O: D_i = rowsum(dO_i o O_i);
  // TE's FusedAttention saves out): two tensors, where bf16 shares one.
  if (l.dtype == DType::kFp8 && FusedAttention(l.attention)) split += sb * e * o;
  double ffn = static_cast<double>(m.ffn_hidden);
  double tokens_mlp = sb;
  double expert_input = 0;
  if (moe_layer && m.moe) {
    ffn = static_cast<double>(m.moe->ffn_hidden);
    // The busiest EP rank's routed tokens (Layout::MoeLoad).
    tokens_mlp = sb * m.moe->top_k * l.MoeLoad();
    // The experts' first GEMM keeps its input for its weight gradient: the rows this rank's
    // experts run (MoeExpertTokensPerRank: after the all-to-all, and gathered over the experts'
    // TP group where the dispatcher gathers; TEGroupedLinear saves the permuted tokens it is given,
    // not an SP shard to gather again), whatever SP does to the layer's other tensors.
    expert_input = static_cast<double>(MoeExpertTokensPerRank(m, l)) * l.MoeLoad() * g * h;
    tokens_mlp *= ExpertRowsScale(m, l);  // the experts' intermediates, as split over their TP
    // The shared experts' MLP on every token, as a dense MLP keeps its intermediates.
    const double fs = static_cast<double>(m.moe->shared_ffn_hidden);
    split += sb * (m.activation == Activation::kSwiglu ? 2 * e * fs + g * fs : e * fs + g * fs);
  }
  if (m.activation == Activation::kSwiglu) {
    split += tokens_mlp * (2 * e * ffn + g * ffn);  // gate and up outputs, SwiGLU output (fc2's input)
  } else {
    split += tokens_mlp * (e * ffn + g * ffn);  // GELU input, GELU output (fc2's input)
  }
  // Eager (ops.h, kernels=eager): SiLU keeps its input and the multiply both of its inputs,
  // SiLU's output one more f-wide tensor than the fused SwiGLU keeps.
  if (EagerElementwise(l.kernels) && m.activation == Activation::kSwiglu) split += tokens_mlp * e * ffn;
  // The s x s attention terms: softmax output (e), dropout mask (1), dropout output (e) per
  // head: a*s*s*b*(2e+1) = 5*a*s^2*b at e=2. Gone with selective recompute or a fused
  // (flash) kernel under selective, which keeps only O(s) statistics.
  const double s_kv = static_cast<double>(m.seq_len);
  // Without dropout only the softmax output is kept.
  double quadratic = sb * a * s_kv * (m.dropout ? e + mask + e : e);
  // A soft-cap on the scores keeps its tanh's output for the backward (ModelSpec::attn_logit_softcap).
  if (m.attn_logit_softcap > 0) quadratic += sb * a * s_kv * e;
  // A fused (flash) kernel never stores it; selective recompute drops it.
  if (l.recompute == Recompute::kSelective || FusedAttention(l.attention)) quadratic = 0;
  // What a flash kernel keeps instead: each query row's softmax log-sum-exp, fp32 per head
  // (FlashAttention, Dao et al. 2022, Alg. 1 line 13: L_i = m_i + log(l_i)).
  if (FusedAttention(l.attention)) quadratic = sb * a * 4;

  if (l.recompute == Recompute::kFull) {
    // Only the layer input is kept: 2sbh (Korthikanti Sec. 5), split by t under SP.
    return e * sb * h / (l.sp ? t : 1);
  }
  // With SP, Megatron-Core keeps a column-parallel GEMM's input sharded and gathers it again
  // in the backward (Transformer Engine's _Linear, ctx.backward_input_needs_gather). torchtitan's
  // DTensor TP (kernels other than fused) gathers the attention's and the feed-forward's input
  // to Replicate before wq/wk/wv and w1/w3 (PrepareModuleInput, desired_input_layouts
  // (Replicate(),); models/llama3/infra/parallelize.py apply_tp @ v0.2.2) and those linears
  // save that gathered tensor for their weight gradients: the QKV and MLP inputs stay whole.
  const double gathered = l.sp && SeparateLinears(l.kernels) ? sb * 2 * g * h : 0;
  const double rep = l.sp ? (replicated - gathered) / t + gathered : replicated;
  // MLA's latents, on every TP rank over all its tokens (the down-projections are duplicated):
  // the down-projections' outputs (their norms' inputs) and the normed latents the
  // up-projections keep, and the shared RoPE key.
  double latent = 0;
  if (m.mla) {
    const double r = static_cast<double>(m.mla->q_lora_rank + m.mla->kv_lora_rank);
    latent = sb * ((e + g) * r + e * static_cast<double>(m.mla->rope_head_dim));
  }
  return rep + split / t + quadratic / t + latent + expert_input;
}

double BackwardWorkspaceBytes(const ModelSpec& m, const Layout& l) {
  const auto [e, sb, h, t, q, kv] = PerRankSizes(m, l);
  double ffn = static_cast<double>(m.ffn_hidden);
  if (m.moe) {  // the routed experts' backward and the shared experts' run one after the other
    ffn = std::max(static_cast<double>(m.moe->ffn_hidden) * m.moe->top_k * l.MoeLoad() * ExpertRowsScale(m, l),
                   static_cast<double>(m.moe->shared_ffn_hidden));
  }
  // MLP branch: gradients of the activation, the first projection(s) (gate and up for SwiGLU).
  const double mlp = (m.activation == Activation::kSwiglu ? 3 : 2) * ffn / t;
  // Attention branch: gradients of the attention output, Q, K and V.
  const double attn = (2 * q + 2 * kv) / t;
  // Either branch also holds the gradient of the norm output (all rows, before f's
  // reduction), under SP the re-gathered norm output, and the residual stream's gradient.
  const double rows = h + (l.sp ? h : 0) + h / (l.sp ? t : 1);
  return e * sb * (std::max(mlp, attn) + rows);
}

int64_t ZeroBubbleVChunkInFlight(const Layout& l, int32_t stage, int32_t chunk) {
  // In the order of schedule_zbv.cc, at the first F B W triple's forward of chunk 1 (after its
  // F, before its B), stage r has run 2 (pp - r) - 1 + r forwards of chunk 0 and r + 1 of
  // chunk 1 and no backward: the most in flight (the steady state holds as many, 2 pp chunks,
  // pp whole-stage micro-batches: Qi et al. 2024's claim), each capped at the m micro-batches
  // that exist (the passes of micro-batches beyond m are dropped).
  const int64_t p = l.pp, m = l.microbatches();
  return std::min(chunk == 0 ? 2 * p - stage - 1 : stage + 1, m);
}

double InFlightMicrobatches(const Layout& l, int64_t stage) {
  const double m = static_cast<double>(l.microbatches());
  const double p = static_cast<double>(l.pp);
  switch (l.schedule) {
    case Schedule::kGpipe: return m;
    case Schedule::k1F1B:
    case Schedule::kZeroBubble: return std::min(p - static_cast<double>(stage), m);
    // ZB-V: the micro-batches of both chunks in flight (ZeroBubbleVChunkInFlight), in units
    // of the whole stage (each chunk is half of it).
    case Schedule::kZeroBubbleV: {
      const int32_t r = static_cast<int32_t>(stage);
      return static_cast<double>(ZeroBubbleVChunkInFlight(l, r, 0) + ZeroBubbleVChunkInFlight(l, r, 1)) / 2;
    }
    case Schedule::kInterleaved: {
      // Megatron's warm-up: (pp - stage - 1) * 2 + (vpp - 1) * pp chunks, +1 in steady state;
      // a chunk is 1/vpp of the stage's layers (Korthikanti: first stage L(1 + (p-1)/(p v))).
      const double v = static_cast<double>(l.vpp);
      const double chunks = (p - static_cast<double>(stage) - 1) * 2 + (v - 1) * p + 1;
      return std::min(chunks, m * v) / v;
    }
  }
  return m;
}

MemoryBreakdown ModelStateMemory(const StageParams& params, const Layout& l) {
  MemoryBreakdown mem;
  const StateBytes sb = StateBytesPerParam(l);
  const double dp = static_cast<double>(l.dp_cp());  // the dense weights' replicas (Layout::dp_cp)
  const double edp = static_cast<double>(l.edp());  // expert-data-parallel group (TP x CP x DP / (ETP x EP))
  auto shard = [&](double bytes_per_param, int min_stage) {
    if (l.zero < min_stage) return bytes_per_param * params.total();
    return bytes_per_param * (params.dense / dp + params.expert / edp);
  };
  // ZeRO stage 1 shards optimizer states, 2 adds gradients, 3 adds weights.
  mem.optimizer = shard(sb.optimizer, 1);
  mem.gradients = shard(sb.gradients, 2);
  mem.weights = shard(sb.weights, 3);
  // Offload (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity): the optimizer states on the host,
  // and under ZeRO-2/3 the gradient partition too (each bucket goes down as it is reduced; the
  // GPU keeps only the buckets, ZeroTransientBytes). Under ZeRO-1 the gradients accumulate whole
  // on the GPU until the step (DeepSpeed's stage 1 reduces at the accumulation boundary). So
  // ZeRO-2 with offload keeps the 16-bit weights alone, DeepSpeed's estimate_zero2_model_states_
  // mem_needs(cpu_offload=True) gpu_mem = 2 x params (tests/zero_memory_model_test.cc).
  // The host also holds the fp32 gradient partition AdamW reads (under ZeRO-1 too, copied down
  // at the step: stage_1_and_2.py sets each CPU fp32 partition's .grad to a CPU buffer,
  // single_grad_partition, whatever the stage), and, where the weights are fp32 and so are
  // their own master elsewhere, an fp32 master partition (single_partition_of_fp32_groups, a
  // CPU copy): 16 bytes per parameter of the shard in every dtype, as the runtime holds them
  // (runtime/exec/executor_impl.h, tests/mpi/memory_vs_model_main.cc).
  if (l.offload != Offload::kNone) {
    mem.host += mem.optimizer;
    mem.optimizer = 0;
    if (sb.weights == 4) mem.host += shard(4, 1);  // fp32: the host's master copy
    if (l.zero >= 2) {
      mem.host += mem.gradients;
      mem.gradients = 0;
    } else {
      mem.host += shard(sb.gradients, 1);
    }
  }
  if (l.offload == Offload::kOptimizerAndParams) {
    mem.host += mem.weights;
    mem.weights = 0;
  }
  return mem;
}

double SharedExpertParamsOnRank(const ModelSpec& m, const Layout& l) {
  if (!m.moe || m.moe->shared_ffn_hidden <= 0) return 0;
  return MlpParamsOnRank(m, l, m.moe->shared_ffn_hidden) + (m.moe->shared_gate ? static_cast<double>(m.hidden) : 0.0);
}

double AttentionParamsOnRank(const ModelSpec& m, const Layout& l) {
  const double replicated = static_cast<double>(m.AttentionReplicatedParams());
  return (static_cast<double>(m.AttentionParams()) - replicated) / static_cast<double>(l.tp) + replicated;
}

namespace {

double MlpParamsSplit(const ModelSpec& m, int64_t ffn, int64_t tp) {
  const double row_bias = m.bias ? static_cast<double>(m.hidden) : 0.0;
  return (static_cast<double>(m.MlpParams(ffn)) - row_bias) / static_cast<double>(tp) + row_bias;
}

}  // namespace

double MlpParamsOnRank(const ModelSpec& m, const Layout& l, int64_t ffn) { return MlpParamsSplit(m, ffn, l.tp); }

double ExpertParamsOnRank(const ModelSpec& m, const Layout& l) {
  return static_cast<double>(m.moe->experts / l.ep) * MlpParamsSplit(m, m.moe->ffn_hidden, l.expert_tp());
}

double DenseLayerParamsOnRank(const ModelSpec& m, const Layout& l) {
  return AttentionParamsOnRank(m, l) + static_cast<double>(m.LayerNormParams()) + MlpParamsOnRank(m, l, m.ffn_hidden);
}

double MoeLayerParamsOnRank(const ModelSpec& m, const Layout& l) {
  return AttentionParamsOnRank(m, l) + static_cast<double>(m.LayerNormParams()) +
         static_cast<double>(m.hidden * m.moe->experts) + SharedExpertParamsOnRank(m, l);
}

double MtpHeadParamsOnRank(const ModelSpec& m, const Layout& l) {
  if (m.mtp_layers == 0) return 0;
  const double h = static_cast<double>(m.hidden), t = static_cast<double>(l.tp);
  const double depth = 2 * h * h / t + 3 * static_cast<double>(m.NormParams());
  const double table =
      !m.tied_embeddings && HeadStage(l) != 0 ? static_cast<double>(m.vocab * m.hidden) / t : 0;
  return static_cast<double>(m.mtp_layers) * depth + table;
}

double LargestLayerTensorOnRank(const ModelSpec& m, const Layout& l) {
  const double h = static_cast<double>(m.hidden), t = static_cast<double>(l.tp);
  const double ffn = static_cast<double>(m.ffn_hidden) * (m.activation == Activation::kSwiglu ? 2 : 1);
  const double attn = static_cast<double>(m.AttentionParams() - m.AttentionReplicatedParams());
  const double qkv = m.mla ? attn - static_cast<double>(m.o_dim()) * h : h * static_cast<double>(m.q_dim() + 2 * m.kv_dim());
  const double proj = static_cast<double>(m.o_dim()) * h / t;
  return std::max({qkv / t, proj, h * ffn / t, static_cast<double>(m.ffn_hidden) * h / t});
}

int64_t ZeroPrefetchDepth(const Layout& l, double layer_params) {
  return l.prefetch && 2 * layer_params <= static_cast<double>(l.live_params) ? 1 : 0;
}

int64_t LayersPerBucket(const Layout& l, double layer_params, int64_t chunk_layers) {
  if (l.bucket_params == 0 || layer_params <= 0) return 1;
  const double n = std::ceil(static_cast<double>(l.bucket_params) / layer_params);
  return std::max<int64_t>(1, std::min<int64_t>(chunk_layers, static_cast<int64_t>(n)));
}

ZeroTransients ZeroTransientBytes(const ModelSpec& m, const Layout& l, int64_t stage) {
  ZeroTransients z;
  if (l.zero < 2 || (l.dp_cp() == 1 && l.offload == Offload::kNone)) return z;
  const StateBytes sb = StateBytesPerParam(l);
  const double t = static_cast<double>(l.tp);
  // One rank's share of a unit (as ParamsOnStage): a dense layer, the embeddings (vocabulary
  // split over TP, positions replicated), the final norm + LM head. An MoE layer's units are its
  // dense part (attention, norms, router, shared experts) and, where the experts have replicas
  // (edp > 1), its local experts' bucket, open and gathered with it (the runtime's ZeroBuckets;
  // Megatron-Core's expert buffers): `layer` is the largest a layer's backward holds, `next` the
  // largest the prefetch of the next layer's dense unit brings.
  double layer = DenseLayerParamsOnRank(m, l), next = layer;
  if (m.moe) {
    const double moe_dense = MoeLayerParamsOnRank(m, l);
    const double moe_experts =
        l.edp() > 1 ? ExpertParamsOnRank(m, l) : 0;
    const bool dense_layers = m.MoeLayerCount() < m.layers;
    layer = dense_layers ? std::max(layer, moe_dense + moe_experts) : moe_dense + moe_experts;
    next = dense_layers ? std::max(next, moe_dense) : moe_dense;
  }
  const double positions =
      m.position == Position::kLearned ? static_cast<double>(m.seq_len * m.hidden) : 0;
  const double embed = static_cast<double>(m.vocab * m.hidden) / t + positions;
  const bool tied = m.tied_embeddings && HeadStage(l) == 0;  // the head's table is the embedding's (one stage, or ZB-V's first)
  const double head = m.NormParams() + (tied ? 0 : static_cast<double>(m.vocab * m.hidden) / t) +
                      MtpHeadParamsOnRank(m, l);
  // Gradients: a unit's bucket lives from its backward to its reduction, so one at a time;
  // with tied embeddings the table's bucket stays open from the head's backward to the
  // embedding's, i.e. through every layer's.
  const double open_table = tied ? embed * sb.gradients : 0;
  const int64_t chunk_layers = LargestChunk(m, l, stage);
  // A bucket smaller than a layer (DeepSpeed's reduce_bucket_size, 5e8 elements by default, in
  // a layer of more): the gradients go into it tensor by tensor and it is reduced when full, so
  // it holds bucket_params, or one tensor when a tensor is larger (stage_1_and_2.py
  // reduce_independent_p_g_buckets_and_remove_grads; stage3.py's __reduce_and_partition_ipg_grads).
  const double largest_tensor = LargestLayerTensorOnRank(m, l);
  const double bucket = l.bucket_params > 0 && static_cast<double>(l.bucket_params) < layer
                            ? std::max(static_cast<double>(l.bucket_params), largest_tensor)
                            : static_cast<double>(LayersPerBucket(l, layer, chunk_layers)) * layer;
  z.open_table_grads = open_table;
  z.layer_grads = bucket * sb.gradients + open_table;
  z.head_grads = head * sb.gradients + open_table;
  // overlap_dp (DeepSpeed's overlap_comm, FSDP's reduce-scatter stream; the runtime's
  // ZeroBuckets): a bucket's reduce-scatter is issued when its backward ends and completed when
  // the next bucket's ends, so the previous bucket is still open during each backward, plus
  // this rank's chunk of its sum (1 / dp of it). A micro-batch's last one completes with its
  // pass. The tied table's bucket is open anyway (above).
  if (l.overlap_dp) {
    if (stage == HeadStage(l)) {
      z.head_in_flight_grads = head * sb.gradients;
      z.head_in_flight_other = z.head_in_flight_grads / static_cast<double>(l.dp_cp());
    }
    z.layer_in_flight_grads = bucket * sb.gradients;
    z.layer_in_flight_other = z.layer_in_flight_grads / static_cast<double>(l.dp_cp());
  }
  if (stage == 0) {
    z.embed_grads = embed * sb.gradients;
    // With the bucket: the residual stream's gradient (its rows) and, under SP, all rows
    // gathered for the table's gradient.
    const double e = l.dtype == DType::kFp32 ? 4 : 2;
    const double rows = static_cast<double>(l.mbs) * m.seq_len / l.cp * m.hidden * e;
    z.embed_other = rows / (l.sp ? t : 1) + (l.sp ? rows : 0);
  }
  if (l.zero < 3) return z;
  // ZeRO-3 parameters: the running layer's, plus with prefetch the next one's (the runtime
  // prefetches within a model chunk, so a one-layer chunk holds one); the head's weights
  // (with the tied table) around the head's passes.
  const bool prefetches = ZeroPrefetchDepth(l, layer) > 0 && chunk_layers >= 2;
  z.layer_params = (layer + (prefetches ? next : 0)) * sb.weights;
  // live_params below one layer: parameters are gathered module by module and released after
  // use, at most live_params of them (DeepSpeed's partitioned_param_coordinator.py with
  // stage3_max_live_parameters), but always the module running (its largest tensor).
  if (static_cast<double>(l.live_params) < layer) {
    z.layer_params = std::max(static_cast<double>(l.live_params), largest_tensor) * sb.weights;
  }
  z.head_params = (head + (tied ? embed : 0)) * sb.weights;
  if (stage == 0) z.embed_params = embed * sb.weights;
  return z;
}

// NCCL's buffers for one (peer, channel) connection: the three protocols' FIFOs of NCCL's
// src/init.cc, LL 8 lines x 512 threads x 8 steps x 16 B = 512 KiB, LL128 120 elements x 640
// threads x 8 steps x 8 B = 4.6875 MiB and Simple DEFAULT_BUFFSIZE 4 MiB, 9.1875 MiB, allocated
// in 2 MiB cuMem granules: 10 MiB on the receiving GPU and one 2 MiB granule beside it. NCCL's
// allocation log on 8 x H100 shows exactly those two sizes per peer and channel
// (NVIDIA/nccl #1685, NCCL_DEBUG_SUBSYS=ALLOC: 10485760 and 2097152 bytes).
constexpr double kNcclConnectionBytes = 12.0 * (1 << 20);

double NcclBufferBytes(const ModelSpec& m, const HardwareSpec& hw, const Layout& l, int64_t stage) {
  // Connections a rank's communicators open per channel: a collective group two (its ring's
  // receive side and its tree's, NCCL connecting both for the all-reduces every group runs:
  // TP's vocabulary-parallel loss, DP's loss average and gradient norm), a point-to-point group
  // one per peer. Checked against NVIDIA/nccl #964 (4 A100s, PyTorch, one all-reduce on a new
  // group: 544 MB for a group of 2, 688 MB for more; 24 channels x 2 x 12 MiB = 604 MB) and
  // #1685 (an all-to-all among 8 H100s: 1.06 -> 4.34 GB; 7 peers x 32 x 12 MiB = 2.82 GB).
  // Not counted: the world group frameworks barrier on, NVLS (NVLink SHARP) buffers, and the
  // smaller channel counts NCCL picks for inter-node groups.
  if (hw.gpu.nccl_channels <= 0) return 0;
  double connections = 0;
  if (l.tp > 1) connections += 2;
  if (l.dp_cp() > 1) connections += 2;
  // Expert gradients reduce over the expert-data-parallel group (the ranks with one EP index).
  if (m.moe && (l.ep > 1 || l.own_expert_tp()) && l.edp() > 1) connections += 2;
  // The dispatcher's gather and reduce-scatter over the experts' TP group, where it is not TP's.
  if (m.moe && l.own_expert_tp() && l.etp > 1) connections += 2;
  // Ring attention sends K and V to the next CP rank and receives from the previous.
  if (l.cp > 1) connections += l.cp == 2 ? 1 : 2;
  // The token dispatcher's all-to-all reaches every other EP rank.
  if (l.ep > 1) connections += static_cast<double>(l.ep - 1);
  if (l.pp > 1) {
    // Pipeline sends: the neighbouring stages (the interleaved schedule also wraps the last
    // stage's chunks round to the first); a tied embedding's first and last stages all-reduce.
    const bool end = stage == 0 || stage == l.pp - 1;
    connections += end && l.vpp == 1 ? 1 : 2;
    if (m.tied_embeddings && (stage == 0 || stage == HeadStage(l))) connections += 2;
  }
  return connections * static_cast<double>(hw.gpu.nccl_channels) * kNcclConnectionBytes;
}

MemoryBreakdown StageMemory(const ModelSpec& m, const HardwareSpec& hw, const Layout& l,
                            int64_t stage) {
  const StageParams params = ParamsOnStage(m, l, stage);
  MemoryBreakdown mem = ModelStateMemory(params, l);
  mem.gradients += CompressionStateBytes(m, l, stage);  // PowerSGD's error feedback and factors

  // Activations of the stage's layers for every micro-batch in flight.
  // (Chunk by chunk, ChunkOf: this runs for every layout the planner enumerates.)
  const int32_t s32 = static_cast<int32_t>(stage);
  const int64_t chunk = LargestChunk(m, l, stage);
  double per_microbatch = 0;
  double largest_layer = 0;
  Layout none = l;
  none.recompute = Recompute::kNone;
  const double stored_dense = LayerActivationBytes(m, l, false), full_dense = LayerActivationBytes(m, none, false);
  const double stored[2] = {stored_dense, m.moe ? LayerActivationBytes(m, l, true) : stored_dense};
  const double full[2] = {full_dense, m.moe ? LayerActivationBytes(m, none, true) : full_dense};
  double activations = 0;  // ZB-V: its two chunks' in-flight counts differ
  std::vector<double> chunk_activations;
  for (int32_t ci = 0; ci < ChunksPerStage(l); ++ci) {
    const ModelChunk c = ChunkOf(m, l, s32, ci);
    const int64_t moe_layers = m.MoeLayersIn(c.first_layer, c.first_layer + c.layers);
    const int64_t dense_layers = c.layers - moe_layers;
    const double chunk_bytes = static_cast<double>(dense_layers) * stored[0] + static_cast<double>(moe_layers) * stored[1];
    if (dense_layers > 0) largest_layer = std::max(largest_layer, full[0]);
    if (moe_layers > 0) largest_layer = std::max(largest_layer, full[1]);
    per_microbatch += chunk_bytes;
    chunk_activations.push_back(chunk_bytes);
    if (l.schedule == Schedule::kZeroBubbleV) {
      activations += chunk_bytes * static_cast<double>(ZeroBubbleVChunkInFlight(l, s32, ci));
    }
  }
  if (l.schedule == Schedule::kInterleaved && l.uneven_split()) {
    // Chunks differ: the forward units of Megatron's warm-up and the first steady one, all in
    // flight before the first backward (unit k runs chunk (k / pp) % vpp, ScheduleOrder), a
    // moment every run passes through (so the planner's bound stays below the walk's peak).
    const int64_t p = l.pp, v = l.vpp;
    const int64_t units = std::min((p - stage - 1) * 2 + (v - 1) * p + 1, l.microbatches() * v);
    for (int64_t k = 0; k < units; ++k) activations += chunk_activations[static_cast<size_t>((k / p) % v)];
    mem.activations = activations;
  } else {
    mem.activations = l.schedule == Schedule::kZeroBubbleV ? activations : per_microbatch * InFlightMicrobatches(l, stage);
  }
  // Full recompute rematerializes one layer's activations during its backward; op what the
  // checkpoint did not keep of it.
  if (l.recompute == Recompute::kFull) mem.activations += largest_layer;
  if (l.recompute == Recompute::kOp) mem.activations += std::max(0.0, largest_layer - std::min(stored[0], stored[1]));

  // Other: reserved (context, workspace), the last stage's fp32 logits for the loss, the
  // transient gradient buffers of the backward pass, and ZeRO-3's gathered parameters.
  mem.nccl_buffers = NcclBufferBytes(m, hw, l, stage);
  mem.other = hw.gpu.reserved_memory_bytes + mem.nccl_buffers + Fp8CachedWeightBytes(m, l, stage);
  const ZeroTransients z = ZeroTransientBytes(m, l, stage);
  // The transient peak is one of: a layer's backward (every stage), the head's (last stage),
  // the embedding's backward and ZeRO-3 forward (first stage, ZeRO >= 2); each adds its own
  // buffers to the activations, and the largest is taken, its gradient bucket counted under
  // gradients and the rest under other. Activations already freed at a moment (those of the
  // layers above, in this micro-batch's backward) are taken off the activations.
  struct Moment {
    double other, gradients, freed_activations = 0, loss_logit_copy = 0;
    double total() const { return other + gradients - freed_activations; }
  };
  const double layer_backward = BackwardWorkspaceBytes(m, l) + z.layer_params;
  const double one_layer = std::min(stored[0], stored[1]);
  std::vector<Moment> moments;
  // Zero-bubble under ZeRO-2/3: a layer's bucket opens in its W pass, after the B pass whose
  // workspace (and ZeRO-3 gathered parameters: W reads no weights) is gone, and every pass
  // waits for its reductions at its end (the runtime's WeightGrad and Backward). So B holds the
  // workspace with at most the head's bucket in flight, W the bucket with the one above in flight.
  const bool split_buckets = SplitsWeightGradients(l) && z.layer_grads > z.open_table_grads;
  if (split_buckets) {
    moments.push_back({layer_backward + z.head_in_flight_other, z.open_table_grads + z.head_in_flight_grads});
    moments.push_back({0, z.layer_grads});
  } else {
    moments.push_back({layer_backward + z.head_in_flight_other, z.layer_grads + z.head_in_flight_grads});
  }
  // overlap_dp, a lower layer's backward (W pass): the bucket above is in flight, and that
  // layer's activations of this micro-batch are freed by then (at least the smallest layer's).
  if (chunk >= 2 && z.layer_in_flight_grads > 0) {
    moments.push_back({(split_buckets ? 0 : layer_backward) + z.layer_in_flight_other,
                       z.layer_grads + z.layer_in_flight_grads, one_layer});
  }
  const size_t layer_moments = moments.size();
  if (stage == HeadStage(l)) {
    // The loss keeps each in-flight micro-batch's logits (as probabilities) for its backward
    // (Megatron's vocab-parallel cross-entropy saves them): every micro-batch under GPipe, one
    // under the 1F1B family. The head's backward adds the gradient of its input (all rows) and
    // of the residual stream; a layer's backward runs after the newest logits are freed.
    const double tokens = static_cast<double>(l.mbs) * m.seq_len / l.cp;
    // One set per cross-entropy: the main head's and each multi-token prediction depth's; with
    // a logit soft-cap, its tanh's fp32 output kept too (ModelSpec::final_logit_softcap).
    const double shard_logits =
        tokens * static_cast<double>((m.vocab + l.tp - 1) / l.tp) * static_cast<double>(1 + m.mtp_layers);
    // Compiled (kernels=compiled or compiled-loss, torchtitan): the loss keeps the 16-bit logits themselves
    // (the compiled graph's input) and recomputes the softmax in its backward.
    const double kept = CompiledLoss(l.kernels) && l.dtype != DType::kFp32 ? 2.0 : 4.0;
    const double logits = kept * shard_logits * (m.final_logit_softcap > 0 ? 2.0 : 1.0);
    const double k = l.schedule == Schedule::kGpipe ? static_cast<double>(l.microbatches()) : 1.0;
    const double e = l.dtype == DType::kFp32 ? 4 : 2;
    const double head = e * tokens * m.hidden * (1.0 + 1.0 / (l.sp ? l.tp : 1));
    // Under 16-bit training the loss runs on an fp32 copy of the output layer's 16-bit logits
    // (Megatron-Core's compute_language_model_loss: vocab_parallel_cross_entropy(logits.float(),
    // labels); torchtitan's cross_entropy_loss: pred.float()), so the current micro-batch's
    // logits are held twice at the head: in its forward the 16-bit output beside the fp32 copy,
    // in its backward the fp32 gradient (the probabilities, overwritten in place) beside its
    // 16-bit cast.
    // Eager (kernels=eager or compiled-model, torchtitan): log_softmax's fp32 output is what stays; beside it the
    // fp32 logits in the forward, and in the backward the NLL's dense fp32 gradient and
    // log_softmax's: 8 bytes a logit above the 4 counted.
    // Compiled: in the backward, the 16-bit gradient beside the kept 16-bit logits.
    const double copy = EagerLoss(l.kernels) ? 8.0 * shard_logits
                        : l.dtype == DType::kFp32   ? 0.0
                                                    : 2.0 * shard_logits;
    for (size_t i = 0; i < layer_moments; ++i) moments[i].other += (k - 1) * logits;
    moments.push_back({k * logits + copy + head + z.head_params, z.head_grads, 0, copy});
  }
  if (stage == 0 && z.embed_grads > 0) {  // overlap_dp: the first layer's bucket in flight (not zero-bubble's, reduced in W)
    const double in_flight = split_buckets ? 0 : z.layer_in_flight_grads;
    moments.push_back({z.embed_other + (split_buckets ? 0 : z.layer_in_flight_other), z.embed_grads + in_flight,
                       in_flight > 0 ? one_layer : 0});
  }
  if (stage == 0 && z.embed_params > 0) moments.push_back({z.embed_params, 0});  // its forward
  const Moment peak = *std::max_element(
      moments.begin(), moments.end(), [](const Moment& a, const Moment& b) { return a.total() < b.total(); });
  mem.other += peak.other;
  mem.loss_logit_copy = peak.loss_logit_copy;
  mem.gradients += peak.gradients;
  mem.activations -= peak.freed_activations;
  return mem;
}

}  // namespace shardsim
