// See megatron_args.h. Defaults and derivations are megatron/training/arguments.py's at
// NVIDIA/Megatron-LM 000c4ac24f61 (line numbers of that file in brackets).
#include "src/io/megatron_args.h"
#include "src/io/cuda_graph_scope.h"
#include "src/io/mcore_settings.h"
#include "src/io/mla_keys.h"
#include "src/io/moe_layer_freq.h"

#include <map>
#include <optional>

#include "src/io/located_values.h"
#include "src/util/strings.h"

namespace shardsim {
namespace {

struct Word {
  std::string text;
  int line = 1, col = 1;
};

// Shell words: whitespace separates, '#' at a word's start comments to the line's end,
// backslash-newline continues, '...' is literal, "..." takes \" and \\, a backslash outside
// quotes escapes the next character.
StatusOr<std::vector<Word>> ShellWords(const std::string& text, const std::string& name) {
  std::vector<Word> words;
  int line = 1, col = 1;
  size_t i = 0;
  auto advance = [&]() {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    ++i;
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') advance();
      continue;
    }
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      advance();
      advance();
      continue;
    }
    Word w;
    w.line = line;
    w.col = col;
    while (i < text.size()) {
      const char d = text[i];
      if (d == ' ' || d == '\t' || d == '\n' || d == '\r') break;
      if (d == '\\') {
        advance();
        if (i < text.size() && text[i] != '\n') w.text += text[i];
        if (i < text.size()) advance();
        continue;
      }
      if (d == '\'' || d == '"') {
        const int qline = line, qcol = col;
        advance();
        while (i < text.size() && text[i] != d) {
          if (d == '"' && text[i] == '\\' && i + 1 < text.size() &&
              (text[i + 1] == '"' || text[i + 1] == '\\')) {
            advance();
          }
          w.text += text[i];
          advance();
        }
        if (i >= text.size()) {
          return Status::Error(name + ":" + std::to_string(qline) + ":" + std::to_string(qcol) +
                               ": unterminated " + (d == '"' ? "double" : "single") + " quote");
        }
        advance();
        continue;
      }
      w.text += d;
      advance();
    }
    words.push_back(std::move(w));
  }
  return words;
}

// kList: nargs '+'; kOptionalList: nargs '*' (given without values: the empty list).
enum class Kind { kSwitch, kInt, kNumber, kText, kList, kOptionalList };

// The arguments read here and what each takes.
const std::map<std::string, Kind>& Known() {
  static const auto* kKnown = new std::map<std::string, Kind>{
      {"--num-layers", Kind::kInt},
      {"--hidden-size", Kind::kInt},
      {"--num-attention-heads", Kind::kInt},
      {"--kv-channels", Kind::kInt},
      {"--group-query-attention", Kind::kSwitch},
      {"--num-query-groups", Kind::kInt},
      {"--ffn-hidden-size", Kind::kInt},
      {"--seq-length", Kind::kInt},
      {"--max-position-embeddings", Kind::kInt},
      {"--swiglu", Kind::kSwitch},
      {"--normalization", Kind::kText},
      {"--position-embedding-type", Kind::kText},
      {"--use-rotary-position-embeddings", Kind::kSwitch},
      {"--rotary-base", Kind::kInt},
      {"--untie-embeddings-and-output-weights", Kind::kSwitch},
      {"--disable-bias-linear", Kind::kSwitch},
      {"--add-qkv-bias", Kind::kSwitch},
      {"--qk-layernorm", Kind::kSwitch},
      {"--multi-latent-attention", Kind::kSwitch},
      {"--q-lora-rank", Kind::kInt},
      {"--kv-lora-rank", Kind::kInt},
      {"--qk-head-dim", Kind::kInt},
      {"--qk-pos-emb-head-dim", Kind::kInt},
      {"--v-head-dim", Kind::kInt},
      {"--attention-dropout", Kind::kNumber},
      {"--hidden-dropout", Kind::kNumber},
      {"--num-experts", Kind::kInt},
      {"--moe-router-topk", Kind::kInt},
      {"--moe-ffn-hidden-size", Kind::kInt},
      {"--moe-layer-freq", Kind::kText},
      {"--moe-shared-expert-intermediate-size", Kind::kInt},
      {"--mtp-num-layers", Kind::kInt},
      {"--tensor-model-parallel-size", Kind::kInt},
      {"--pipeline-model-parallel-size", Kind::kInt},
      {"--context-parallel-size", Kind::kInt},
      {"--expert-model-parallel-size", Kind::kInt},
      {"--expert-tensor-parallel-size", Kind::kInt},
      {"--moe-extended-tp", Kind::kSwitch},
      {"--moe-token-dispatcher-type", Kind::kText},
      {"--moe-grouped-gemm", Kind::kSwitch},
      // Read to refuse what shardsim does not model (ReadLayout, "not modelled").
      {"--recompute-modules", Kind::kOptionalList},  // nargs='*' (arguments.py @ core_v0.13.0)
      {"--use-torch-fsdp2", Kind::kSwitch},
      {"--use-megatron-fsdp", Kind::kSwitch},
      {"--cp-comm-type", Kind::kList},
      {"--num-distributed-optimizer-instances", Kind::kInt},
      {"--pipeline-model-parallel-layout", Kind::kText},
      {"--microbatch-group-size-per-virtual-pipeline-stage", Kind::kInt},
      {"--first-last-layers-bf16", Kind::kSwitch},
      {"--fp4-format", Kind::kText},
      {"--fp8-recipe", Kind::kText},
      // Read to say they are not modelled (priced without them: the step is an upper bound).
      {"--overlap-moe-expert-parallel-comm", Kind::kSwitch},
      {"--delay-wgrad-compute", Kind::kSwitch},
      {"--sequence-parallel", Kind::kSwitch},
      {"--moe-expert-capacity-factor", Kind::kNumber},
      {"--num-layers-per-virtual-pipeline-stage", Kind::kInt},
      {"--num-virtual-stages-per-pipeline-rank", Kind::kInt},
      {"--decoder-first-pipeline-num-layers", Kind::kInt},
      {"--decoder-last-pipeline-num-layers", Kind::kInt},
      {"--account-for-embedding-in-pipeline-split", Kind::kSwitch},
      {"--account-for-loss-in-pipeline-split", Kind::kSwitch},
      {"--no-overlap-p2p-communication", Kind::kSwitch},
      {"--micro-batch-size", Kind::kInt},
      {"--global-batch-size", Kind::kInt},
      {"--recompute-activations", Kind::kSwitch},
      {"--recompute-granularity", Kind::kText},
      {"--recompute-method", Kind::kText},
      {"--recompute-num-layers", Kind::kInt},
      {"--use-distributed-optimizer", Kind::kSwitch},
      {"--ddp-bucket-size", Kind::kInt},
      {"--overlap-grad-reduce", Kind::kSwitch},
      {"--overlap-param-gather", Kind::kSwitch},
      {"--tp-comm-overlap", Kind::kSwitch},
      {"--cuda-graph-impl", Kind::kText},
      {"--enable-cuda-graph", Kind::kSwitch},
      {"--external-cuda-graph", Kind::kSwitch},
      {"--cuda-graph-scope", Kind::kList},
      {"--cuda-graph-modules", Kind::kList},
      {"--no-check-for-nan-in-loss-and-grad", Kind::kSwitch},  // full_iteration's requirement; nothing to price
      {"--optimizer-cpu-offload", Kind::kSwitch},
      {"--use-precision-aware-optimizer", Kind::kSwitch},
      {"--bf16", Kind::kSwitch},
      {"--fp16", Kind::kSwitch},
      {"--fp8-format", Kind::kText},
      {"--fp8-param-gather", Kind::kSwitch},
      {"--grad-reduce-in-bf16", Kind::kSwitch},
      {"--accumulate-allreduce-grads-in-fp32", Kind::kSwitch},
      {"--use-flash-attn", Kind::kSwitch},
      {"--attention-backend", Kind::kText},
  };
  return *kKnown;
}

// The model the arguments build [validate_args: ffn 828-837, kv-channels, GQA; MoE 1028].
ModelSpec ReadModel(LocatedValues& r, MegatronRead& out) {
  ModelSpec m;
  m.layers = r.Int("--num-layers", 0);
  m.hidden = r.Int("--hidden-size", 0);
  m.heads = r.Int("--num-attention-heads", 0);
  for (const char* required : {"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length"}) {
    if (!r.Has(required)) r.Error(required, std::string(required) + ": missing (Megatron-LM needs it)");
  }
  if (!r.status().ok()) return m;
  if (!r.Has("--kv-channels") && m.hidden % m.heads != 0) {
    r.Error("--num-attention-heads", "--hidden-size " + std::to_string(m.hidden) +
                                         " is not divisible by --num-attention-heads " +
                                         std::to_string(m.heads) + "; give --kv-channels");
  }
  m.head_dim = r.Int("--kv-channels", m.heads > 0 ? m.hidden / m.heads : 0);
  m.kv_heads = m.heads;
  if (r.Has("--group-query-attention")) {
    m.kv_heads = r.Int("--num-query-groups", 1);
  } else if (r.Has("--num-query-groups")) {
    out.warnings.push_back("--num-query-groups without --group-query-attention: Megatron-LM ignores it (every head has its own K/V)");
  }
  m.activation = r.Has("--swiglu") ? Activation::kSwiglu : Activation::kGelu;
  const int64_t default_ffn =
      m.activation == Activation::kSwiglu ? (4 * m.hidden * 2 / 3) / 64 * 64 : 4 * m.hidden;
  m.ffn_hidden = r.Int("--ffn-hidden-size", default_ffn);
  m.seq_len = r.Int("--seq-length", 0);
  m.norm = r.Choice("--normalization", "LayerNorm", {"LayerNorm", "RMSNorm"}) == "RMSNorm" ? Norm::kRmsNorm
                                                                                          : Norm::kLayerNorm;
  const std::string pos = r.Choice("--position-embedding-type",
                                   r.Has("--use-rotary-position-embeddings") ? "rope" : "learned_absolute",
                                   {"learned_absolute", "rope"});
  m.position = pos == "rope" ? Position::kRope : Position::kLearned;
  if (m.position == Position::kRope) m.rotary_base = static_cast<double>(r.Int("--rotary-base", 10000));
  if (m.position == Position::kLearned && r.Has("--max-position-embeddings") &&
      r.Int("--max-position-embeddings", 0) < m.seq_len) {
    r.Error("--max-position-embeddings", "--max-position-embeddings is below --seq-length " + std::to_string(m.seq_len));
  }
  m.tied_embeddings = !r.Has("--untie-embeddings-and-output-weights");
  m.bias = !r.Has("--disable-bias-linear");
  m.qkv_bias = !m.bias && r.Has("--add-qkv-bias");
  m.qk_norm = r.Has("--qk-layernorm");
  if (r.Has("--multi-latent-attention")) {
    // _add_mla_args: --q-lora-rank (None: no query rank), --kv-lora-rank 32, --qk-head-dim 128,
    // --qk-pos-emb-head-dim 64, --v-head-dim 128.
    ReadMla(r, {"--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim", 0, 32}, m);
  }
  m.dropout = r.Number("--attention-dropout", 0.1, 0, 1) > 0 || r.Number("--hidden-dropout", 0.1, 0, 1) > 0;
  if (r.Has("--num-experts")) {
    MoeSpec s;
    s.experts = r.Int("--num-experts", 0, 2);
    s.top_k = r.Int("--moe-router-topk", 2);
    s.ffn_hidden = r.Int("--moe-ffn-hidden-size", m.ffn_hidden);
    ReadMoeLayerFreq(r, "--moe-layer-freq", m.layers, s);  // an integer N or a list expression
    s.shared_ffn_hidden = r.Int("--moe-shared-expert-intermediate-size", 0, 0);
    m.moe = s;
  }
  m.mtp_layers = r.Int("--mtp-num-layers", 0, 0);  // _add_mtp_args: None, no MTP
  return m;
}

Layout ReadLayout(LocatedValues& r, const ModelSpec& m, MegatronRead& out) {
  Layout l;
  l.tp = r.Int("--tensor-model-parallel-size", 1);
  l.pp = r.Int("--pipeline-model-parallel-size", 1);
  l.cp = r.Int("--context-parallel-size", 1);
  l.ep = r.Int("--expert-model-parallel-size", 1);
  for (const char* overlap : {"--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"}) {
    if (r.Has(overlap)) {
      out.warnings.push_back(r.Where(overlap) + ": " + overlap +
                             " is not modelled: priced without it, so the step time is an upper bound");
    }
  }
  if (r.Has("--sequence-parallel") && l.tp == 1) {
    out.warnings.push_back("--sequence-parallel with tensor-parallel size 1: Megatron-LM turns it off (validate_args)");
  }
  l.sp = r.Has("--sequence-parallel") && l.tp > 1;
  l.moe_capacity = r.Number("--moe-expert-capacity-factor", 0, 0, 64);
  l.first_stage_layers = r.Int("--decoder-first-pipeline-num-layers", 0);
  l.last_stage_layers = r.Int("--decoder-last-pipeline-num-layers", 0);
  l.embedding_in_split = r.Has("--account-for-embedding-in-pipeline-split");
  l.loss_in_split = r.Has("--account-for-loss-in-pipeline-split");
  // [533-582] at most one way to give virtual stages; per-stage layers need an even split.
  if (r.Has("--num-layers-per-virtual-pipeline-stage") && r.Has("--num-virtual-stages-per-pipeline-rank")) {
    r.Error("--num-virtual-stages-per-pipeline-rank",
            "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank both given; Megatron-LM takes one");
  } else if (r.Has("--num-layers-per-virtual-pipeline-stage")) {
    if (l.first_stage_layers > 0 || l.last_stage_layers > 0) {
      r.Error("--num-layers-per-virtual-pipeline-stage",
              "--num-layers-per-virtual-pipeline-stage with an uneven first/last stage: Megatron-LM needs "
              "--num-virtual-stages-per-pipeline-rank then");
    }
    const int64_t per_chunk = r.Int("--num-layers-per-virtual-pipeline-stage", 1);
    const int64_t counted = m.layers + (l.embedding_in_split ? 1 : 0) + (l.loss_in_split ? 1 : 0);
    if (counted % l.pp != 0 || (counted / l.pp) % per_chunk != 0) {
      r.Error("--num-layers-per-virtual-pipeline-stage",
              "--num-layers-per-virtual-pipeline-stage " + std::to_string(per_chunk) + ": " +
                  std::to_string(counted) + " layers over " + std::to_string(l.pp) +
                  " stages do not split into chunks of that size");
    } else {
      l.vpp = counted / l.pp / per_chunk;
    }
  } else {
    l.vpp = r.Int("--num-virtual-stages-per-pipeline-rank", 1);
  }
  const bool interleaved = l.vpp > 1;
  l.schedule = interleaved ? Schedule::kInterleaved : Schedule::k1F1B;
  l.schedule_given = true;
  // P2P overlap is on by default in the interleaved schedule only.
  l.overlap_pp = interleaved && !r.Has("--no-overlap-p2p-communication");

  l.mbs = r.Int("--micro-batch-size", 1);
  l.gbs = r.Int("--global-batch-size", 0);
  const std::string granularity = r.Choice("--recompute-granularity", "", {"full", "selective"});
  if (r.Has("--recompute-activations") && granularity == "full") {
    r.Error("--recompute-granularity", "--recompute-activations (selective) and --recompute-granularity full both given");
  }
  if (r.Has("--recompute-activations") || granularity == "selective") {
    l.recompute = Recompute::kSelective;
  } else if (granularity == "full") {
    l.recompute = Recompute::kFull;
    const std::string method = r.Choice("--recompute-method", "uniform", {"uniform", "block"});
    const int64_t n = r.Int("--recompute-num-layers", 1);
    if (method != "uniform" || n != 1) {
      out.warnings.push_back("--recompute-method " + method + " --recompute-num-layers " + std::to_string(n) +
                             ": read as recompute=full of every layer from its own input (shardsim's full "
                             "recompute; uniform groups of several layers or block-wise recompute store other checkpoints)");
    }
  }

  l.zero = r.Has("--use-distributed-optimizer") ? 1 : 0;
  l.bucket_params = r.Int("--ddp-bucket-size", 0);
  l.overlap_dp = r.Has("--overlap-grad-reduce");
  if (l.tp > 1) l.overlap_tp = r.Has("--tp-comm-overlap") ? TpOverlap::kOn : TpOverlap::kBackward;
  if (r.Has("--tp-comm-overlap") && !l.sp) {
    r.Error("--tp-comm-overlap", "--tp-comm-overlap needs --sequence-parallel (validate_args)");
  }
  if (r.Has("--optimizer-cpu-offload")) l.offload = Offload::kOptimizer;
  // CUDA graphs: --cuda-graph-impl local or transformer_engine graphs each layer
  // (cuda_graphs=layers), full_iteration the whole step; the deprecated --enable-cuda-graph is
  // local and --external-cuda-graph transformer_engine. --cuda-graph-modules' values (and those
  // of its deprecated spelling --cuda-graph-scope) as src/io/cuda_graph_scope.h reads them,
  // with NVIDIA/Megatron-LM d98e8a64dd's rules (validate_args): "full_iteration"
  // moves the impl to full_iteration, from none or local only, which then takes no module
  // scope. At 000c4ac24f61 the scope took one value and, without an impl, captured nothing.
  std::string impl = r.Choice("--cuda-graph-impl", "none", {"none", "local", "transformer_engine", "full_iteration"});
  if ((r.Has("--enable-cuda-graph") || r.Has("--external-cuda-graph")) && r.Has("--cuda-graph-impl")) {
    r.Error("--cuda-graph-impl", "--enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl (validate_args refuses)");
  }
  if (r.Has("--enable-cuda-graph")) impl = "local";
  if (r.Has("--external-cuda-graph")) impl = "transformer_engine";
  if (r.Has("--cuda-graph-scope") && r.Has("--cuda-graph-modules")) {
    r.Error("--cuda-graph-modules", "--cuda-graph-scope and --cuda-graph-modules cannot be used together (validate_args)");
  }
  const std::string flag = r.Has("--cuda-graph-modules") ? "--cuda-graph-modules" : "--cuda-graph-scope";
  StatusOr<CudaGraphScopes> scopes = ReadCudaGraphScopes(SplitValueList(r.Text(flag, "")));
  if (!scopes.ok()) {
    r.Error(flag, flag + ": " + scopes.status().message());
  } else {
    if (scopes->full_iteration && impl == "transformer_engine") {
      r.Error(flag, flag + " full_iteration cannot be combined with cuda_graph_impl 'transformer_engine'");
    }
    if (scopes->inference_only && impl != "none" && impl != "local") {
      r.Error(flag, flag + " full_iteration_inference cannot be combined with cuda_graph_impl '" + impl + "'");
    }
    if (scopes->full_iteration && impl == "none") {
      out.warnings.push_back(r.Where(flag) + ": " + flag +
                             " full_iteration without --cuda-graph-impl: read as the whole step graphed "
                             "(Megatron-LM d98e8a64dd); Megatron-LM before that (000c4ac24f61) graphs nothing");
    }
    if (scopes->full_iteration) impl = "full_iteration";
    if (impl == "full_iteration" && !scopes->modules.empty()) {
      r.Error(flag, flag + " must hold no module scope with --cuda-graph-impl=full_iteration (validate_args)");
    }
    if (impl != "none" && impl != "full_iteration" && !scopes->modules.empty()) {
      out.warnings.push_back(r.Where(flag) + ": " + flag + " " + Join(scopes->modules, " ") +
                             " graphs part of each layer; shardsim prices the whole layer graphed, so the "
                             "host's launch time is a lower bound");
    }
  }
  if (impl == "full_iteration") {
    l.cuda_graphs = CudaGraphs::kStep;
  } else if (impl != "none") {
    l.cuda_graphs = CudaGraphs::kLayers;
  }

  if (r.Has("--bf16") && r.Has("--fp16")) r.Error("--fp16", "--bf16 and --fp16 both given");
  l.dtype = r.Has("--bf16") ? DType::kBf16 : r.Has("--fp16") ? DType::kFp16 : DType::kFp32;
  // Transformer Engine's per-tensor recipes (delayed, the default, and tensorwise current
  // scaling) are what shardsim prices; MXFP8's and the blockwise recipe's scaling and GEMMs are not.
  const std::string fp8_recipe = r.Choice("--fp8-recipe", "delayed", {"tensorwise", "delayed", "mxfp8", "blockwise", "custom"});
  if (r.Has("--fp8-format") && fp8_recipe != "delayed" && fp8_recipe != "tensorwise") {
    r.Error("--fp8-recipe", "--fp8-recipe " + fp8_recipe + ": fp8 other than per-tensor scaling (delayed, tensorwise) is not modelled");
  }
  if (r.Has("--fp8-format")) {
    r.Choice("--fp8-format", "hybrid", {"e4m3", "hybrid"});
    l.dtype = DType::kFp8;
    l.fp8_params = r.Has("--fp8-param-gather");
  }
  l.dtype_given = true;
  // Gradients: fp32 under bf16 unless --grad-reduce-in-bf16 (validate_args: it clears
  // accumulate_allreduce_grads_in_fp32, which --bf16 otherwise sets; arguments.py, NVIDIA/Megatron-LM
  // d98e8a64dd); only the bf16 branch reads it, as fp8 runs over --bf16.
  l.grad_bf16 = r.Has("--grad-reduce-in-bf16") && (l.dtype == DType::kBf16 || l.dtype == DType::kFp8);
  CheckMcoreSettings(r, MegatronArgumentKeys(), m, l, &out.warnings);
  // AttnBackend (megatron/core/transformer/enums.py): flash is FlashAttention, fused Transformer
  // Engine's FusedAttention (cuDNN), unfused and local the unfused path; auto leaves it to TE.
  // --use-flash-attn only steers the legacy and local models' attention, so under auto it is TE's
  // choice too (MegatronRead::attention_auto).
  const std::string backend = r.Choice("--attention-backend", "auto", {"flash", "fused", "unfused", "local", "auto"});
  l.attention = (backend == "unfused" || backend == "local") && !r.Has("--use-flash-attn") ? AttentionImpl::kUnfused
                : backend == "fused"                                                     ? AttentionImpl::kCudnn
                                                                                         : AttentionImpl::kFlash;
  out.attention_auto = backend == "auto";
  return l;
}

}  // namespace

StatusOr<MegatronRead> ParseMegatronArgs(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(std::vector<Word> words, ShellWords(text, name));
  size_t start = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i].text;
    if (w.size() > 3 && w.compare(w.size() - 3, 3, ".py") == 0) start = i + 1;
  }
  MegatronRead out;
  std::vector<std::string> known_names;
  for (const auto& [flag, kind] : Known()) known_names.push_back(flag);
  LocatedValues given(name);
  auto where = [&](const Word& w) { return name + ":" + std::to_string(w.line) + ":" + std::to_string(w.col); };
  for (size_t i = start; i < words.size(); ++i) {
    const Word& w = words[i];
    if (w.text.rfind("--", 0) != 0) {
      return Status::Error(where(w) + ": '" + w.text + "' is not an argument (expected --name or a value after one)");
    }
    std::string flag = w.text;
    std::optional<std::string> inline_value;
    if (const size_t eq = flag.find('='); eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto known = Known().find(flag);
    if (known == Known().end()) {
      // Not modelled: skip its value words too.
      while (!inline_value && i + 1 < words.size() && words[i + 1].text.rfind("--", 0) != 0) ++i;
      const std::string near = ClosestMatch(flag, known_names);
      if (!near.empty()) {
        out.warnings.push_back(where(w) + ": " + flag + " is not an argument shardsim reads (did you mean " + near + "?)");
      }
      out.ignored.push_back(flag);
      continue;
    }
    std::string value;
    Word value_at = w;
    if (known->second == Kind::kSwitch) {
      if (inline_value) return Status::Error(where(w) + ": " + flag + " is a switch and takes no value");
    } else if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < words.size() && words[i + 1].text.rfind("--", 0) != 0) {
      value_at = words[++i];
      value = value_at.text;
      // nargs '+' or '*': every word up to the next argument, joined by spaces.
      const bool list = known->second == Kind::kList || known->second == Kind::kOptionalList;
      while (list && i + 1 < words.size() && words[i + 1].text.rfind("--", 0) != 0) {
        value += " " + words[++i].text;
      }
    } else if (known->second == Kind::kOptionalList) {
      value.clear();  // nargs '*' without values: the empty list
    } else {
      return Status::Error(where(w) + ": " + flag + ": missing its value");
    }
    if (given.Has(flag)) {
      return Status::Error(where(w) + ": " + flag + " given twice (first at " + given.Where(flag) + ")");
    }
    given.Set(flag, value, {w.line, w.col}, {value_at.line, value_at.col});
  }
  LocatedValues& r = given;
  out.model = ReadModel(r, out);
  SHARDSIM_RETURN_IF_ERROR(r.status());
  out.layout = ReadLayout(r, out.model, out);
  SHARDSIM_RETURN_IF_ERROR(r.status());
  return out;
}

std::vector<std::string> MegatronArgumentNames() {
  std::vector<std::string> names;
  for (const auto& [flag, kind] : Known()) names.push_back(flag);
  return names;
}

std::vector<std::string> ModelMismatches(const ModelSpec& m, const ModelSpec& a) {
  std::vector<std::string> out;
  auto cmp = [&](const std::string& what, const std::string& args_value, const std::string& model_value) {
    if (args_value != model_value) out.push_back(what + " " + args_value + ", the model has " + model_value);
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  cmp("--num-layers", num(a.layers), num(m.layers));
  cmp("--hidden-size", num(a.hidden), num(m.hidden));
  cmp("--num-attention-heads", num(a.heads), num(m.heads));
  cmp("query groups (--num-query-groups)", num(a.kv_heads), num(m.kv_heads));
  cmp("head size (--kv-channels)", num(a.head_dim), num(m.head_dim));
  cmp("--ffn-hidden-size", num(a.ffn_hidden), num(m.ffn_hidden));
  cmp("--seq-length", num(a.seq_len), num(m.seq_len));
  auto act = [](Activation x) { return std::string(x == Activation::kSwiglu ? "swiglu" : "gelu"); };
  cmp("MLP (--swiglu)", act(a.activation), act(m.activation));
  auto norm = [](Norm x) { return std::string(x == Norm::kRmsNorm ? "RMSNorm" : "LayerNorm"); };
  cmp("--normalization", norm(a.norm), norm(m.norm));
  auto pos = [](Position x) { return std::string(x == Position::kRope ? "rope" : "learned_absolute"); };
  cmp("--position-embedding-type", pos(a.position), pos(m.position));
  auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  cmp("tied embeddings (--untie-embeddings-and-output-weights absent)", yes(a.tied_embeddings), yes(m.tied_embeddings));
  cmp("linear biases (--disable-bias-linear absent)", yes(a.bias), yes(m.bias));
  cmp("Q/K/V biases (--add-qkv-bias)", yes(a.HasQkvBias()), yes(m.HasQkvBias()));
  cmp("Q/K norms (--qk-layernorm)", yes(a.qk_norm), yes(m.qk_norm));
  cmp("multi-latent attention (--multi-latent-attention)", yes(a.mla.has_value()), yes(m.mla.has_value()));
  if (a.mla && m.mla) {
    cmp("--q-lora-rank", num(a.mla->q_lora_rank), num(m.mla->q_lora_rank));
    cmp("--kv-lora-rank", num(a.mla->kv_lora_rank), num(m.mla->kv_lora_rank));
    cmp("--qk-pos-emb-head-dim", num(a.mla->rope_head_dim), num(m.mla->rope_head_dim));
    cmp("--v-head-dim", num(a.mla->v_head_dim), num(m.mla->v_head_dim));
  }
  cmp("dropout (--attention-dropout, --hidden-dropout)", yes(a.dropout), yes(m.dropout));
  if (m.position == Position::kRope && a.position == Position::kRope && m.rotary_base > 0) {
    cmp("--rotary-base", Fmt("%.0f", a.rotary_base), Fmt("%.0f", m.rotary_base));
  }
  cmp("experts (--num-experts)", num(a.moe ? a.moe->experts : 0), num(m.moe ? m.moe->experts : 0));
  if (a.moe && m.moe) {
    cmp("--moe-router-topk", num(a.moe->top_k), num(m.moe->top_k));
    cmp("--moe-ffn-hidden-size", num(a.moe->ffn_hidden), num(m.moe->ffn_hidden));
    cmp("--moe-layer-freq", MoeLayerFreqText(*a.moe, a.layers), MoeLayerFreqText(*m.moe, m.layers));
    cmp("--moe-shared-expert-intermediate-size", num(a.moe->shared_ffn_hidden), num(m.moe->shared_ffn_hidden));
  }
  cmp("multi-token prediction depths (--mtp-num-layers)", num(a.mtp_layers), num(m.mtp_layers));
  return out;
}

}  // namespace shardsim
