// See executor.h. One iteration: the schedule's passes in order (forward: receive or embed,
// blocks, send or loss; backward: the reverse), then the optimizer: SP's replicated-gradient
// all-reduce, the DP all-reduce (ZeRO 0) or reduce-scatter (ZeRO 1), the global gradient
// norm, AdamW on this rank's range, and (ZeRO 1, 2) the parameter all-gather.
// ZeRO-2/3 (zero_buckets.h) instead reduce each bucket's gradients as its backward ends, and
// ZeRO-3 gathers each bucket's parameters around the passes that use them.
#include "runtime/exec/executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "runtime/cpu/param_layout.h"
#include "runtime/exec/context_parallel.h"
#include "runtime/exec/executor_impl.h"
#include "src/cost/grad_compression.h"
#include "src/cost/ops.h"
#include "src/cost/memory.h"
#include "src/layout/pipeline.h"

namespace shardsim::runtime {

Status CheckLoss(int64_t step, double loss) {
  if (std::isfinite(loss)) return Status::Ok();
  return Status::Error("step " + std::to_string(step) + ": the loss is " + (std::isnan(loss) ? "NaN" : "infinite") +
                       ", so the parameters are no longer finite; stopped. A learning rate too high for the "
                       "model, or bf16 overflow, usually causes it: lower --lr, or try dtype=fp32");
}
namespace {

constexpr MemoryKind kAct = MemoryKind::kActivations;
constexpr MemoryKind kWork = MemoryKind::kOther;

}  // namespace

std::vector<std::string> UnsupportedLayout(const ModelSpec& m, const Layout& l) {
  std::vector<std::string> why;
  auto no = [&](bool bad, const std::string& what) {
    if (bad) why.push_back(what);
  };
  if (m.moe) {  // moe_block.h runs MoE layers outside the B/W split
    // ZeroBuckets shards gradients and weights over DP x CP, and the experts' with them: experts
    // whose replicas come from TP alone (etp=1 without DP) get only ZeRO-1's sharded states.
    no(l.zero >= 2 && l.dp_cp() == 1 && l.edp() > 1,
       "zero=" + std::to_string(l.zero) + " with the experts' replicas over TP alone (etp=" + std::to_string(l.etp) +
           ", dp x cp = 1: the runtime shards gradients and weights over DP x CP; use zero=1, or dp >= 2)");
    no(l.cp > 1 && l.moe_capacity > 0, "cp=" + std::to_string(l.cp) +
                                           " with moe_capacity (an expert's capacity is counted over the whole sequence; "
                                           "the runtime routes each CP rank's tokens: use moe_capacity=0)");
    no(MoeInputSplitOverTp(l) && l.moe_capacity > 0,
       "tp=" + std::to_string(l.tp) + ",sp=on,ep=" + std::to_string(l.ep) +
           (l.own_expert_tp() ? ",etp=" + std::to_string(l.etp) : std::string()) +
           " with moe_capacity (an expert's capacity is counted over the whole sequence; under SP the dispatcher "
           "routes each TP rank's tokens: use moe_capacity=0)");
  }
  no(l.dtype != DType::kFp32 && l.dtype != DType::kBf16 && l.dtype != DType::kFp8,
     "dtype=" + DTypeName(l.dtype) + " (the runtime trains in fp32, bf16 mixed precision or bf16 with fp8 GEMMs)");
  no(l.dtype == DType::kFp8 && l.sp && l.tp > 1 && m.hidden % 2 != 0,
     "dtype=fp8 with sp=on and an odd hidden size (" + std::to_string(m.hidden) +
         "): the runtime gathers the saved fp8 codes two bytes an element");
  no(l.grad_bf16, "grad_bf16=on (the runtime accumulates and reduces gradients in fp32: grad_bf16=off)");
  no(l.fp8_params, "fp8_params=on (the runtime keeps bf16 weights and quantizes them for each GEMM: fp8_params=off)");
  no(l.recompute == Recompute::kOp,
     "recompute=op (torchtitan's per-op checkpointing; the runtime recomputes the attention core or whole layers: "
     "recompute=selective or full)");
  no(l.attention == shardsim::AttentionImpl::kFlash1 || l.attention == shardsim::AttentionImpl::kCudnn,
     "attention=" + shardsim::AttentionName(l.attention) +
         " (prices another library's kernel; the runtime runs its own: attention=flash or unfused; plan "
         "--fix attention=flash, as megatron-core-2024 plans cuDNN's attention on Hopper)");
  no(l.kernels != shardsim::Kernels::kFused,
     "kernels=" + shardsim::KernelsName(l.kernels) +
         " (prices torchtitan's PyTorch kernels, eager or compiled in part or whole; the runtime runs its own fused "
         "ones: kernels=fused)");
  no(l.cuda_graphs != shardsim::CudaGraphs::kOff,
     "cuda_graphs=" + shardsim::CudaGraphsName(l.cuda_graphs) +
         " (prices the host's launches replayed from CUDA graphs; the runtime launches each kernel: cuda_graphs=off)");
  no(l.bucket_params != 0, "bucket_params=" + std::to_string(l.bucket_params) +
                               " (the runtime reduces one bucket per layer, the embeddings and the head: bucket_params=0)");
  no(l.zero == 3 && static_cast<double>(l.live_params) < DenseLayerParamsOnRank(m, l),
     "live_params=" + std::to_string(l.live_params) +
         " below one layer's parameters (the runtime gathers whole layers)");
  // What RankShard::Create and ParamLayout::ForModel refuse, asked here too so that every rank
  // refuses before any work, with one message, instead of each failing its own setup.
  if (StatusOr<ParamLayout> params = ParamLayout::ForModel(m); !params.ok()) why.push_back(params.status().message());
  for (const auto& [count, name] : {std::pair<int64_t, const char*>{m.heads, "heads"}, {m.kv_heads, "kv_heads"},
                                    {m.ffn_hidden, "ffn_hidden"}, {m.vocab, "vocab"},
                                    {m.moe ? m.moe->ffn_hidden : l.tp, "moe.ffn_hidden"}}) {
    no(l.tp > 0 && count % l.tp != 0, "tp=" + std::to_string(l.tp) + " does not divide the model's " + name + " (" +
                                          std::to_string(count) + ")");
  }
  return why;
}

template <typename T>
TypedExecutor<T>::TypedExecutor(const ModelSpec& m, const Layout& l, Backend* backend,
                                RankShard shard, const AdamWConfig& opt, Timeline* timeline)
    : model_(m),
      layout_(l),
      backend_(backend),
      shard_(std::move(shard)),
      opt_(opt),
      ctx_(backend, l.tp, l.sp && l.tp > 1, timeline, l.overlap_tp != TpOverlap::kOff) {
  ctx_.set_fp8(l.dtype == DType::kFp8);
  dims_.m = &shard_.local_model();
  dims_.b = l.mbs;
  dims_.t = m.seq_len / l.cp;  // this rank's tokens of each sequence (context_parallel.h)
  dims_.n = l.mbs * dims_.t;
  dims_.n_local = ctx_.sp() ? dims_.n / l.tp : dims_.n;
  dims_.flash = l.attention == AttentionImpl::kFlash;
  dims_.cp = CpSplit{.cp = l.cp, .rank = backend->comm().rank(Group::kCp), .seq = m.seq_len};
}

StatusOr<std::unique_ptr<Executor>> Executor::Create(const ModelSpec& m, const Layout& l,
                                                     Backend* backend, const AdamWConfig& opt,
                                                     uint64_t seed, Timeline* timeline) {
  const std::vector<std::string> why = UnsupportedLayout(m, l);
  if (!why.empty()) {
    std::string msg = "the runtime cannot run this layout:";
    for (const std::string& w : why) msg += "\n  - " + w;
    return Status::Error(msg);
  }
  Collectives& comm = backend->comm();
  if (comm.size(Group::kTp) != l.tp || comm.size(Group::kPp) != l.pp || comm.size(Group::kCp) != l.cp ||
      comm.size(Group::kDp) != l.dp_cp() || comm.size(Group::kEp) != l.ep) {
    return Status::Error("the backend's process groups (tp " + std::to_string(comm.size(Group::kTp)) +
                         ", pp " + std::to_string(comm.size(Group::kPp)) + ", cp " +
                         std::to_string(comm.size(Group::kCp)) + ", dp x cp " +
                         std::to_string(comm.size(Group::kDp)) + ") are not the layout's");
  }
  if (l.sp && l.tp > 1 && (l.mbs * m.seq_len / l.cp) % l.tp != 0) {
    return Status::Error("sequence parallelism needs tp=" + std::to_string(l.tp) +
                         " to divide the micro-batch's mbs x seq_len / cp = " +
                         std::to_string(l.mbs * m.seq_len / l.cp) + " tokens per rank");
  }
  if (l.cp > 1 && m.seq_len % (2 * l.cp) != 0) {
    return Status::Error("cp=" + std::to_string(l.cp) + " needs 2 x cp to divide seq_len " +
                         std::to_string(m.seq_len) + " (the load-balanced causal split)");
  }
  SHARDSIM_ASSIGN_OR_RETURN(RankShard shard,
                            RankShard::Create(m, l, comm.rank(Group::kTp), comm.rank(Group::kPp),
                                              comm.rank(Group::kEp), comm.rank(Group::kEtp)));
  if (l.dtype == DType::kFp8 && backend->kernels().fp8() == nullptr) {
    return Status::Error("dtype=fp8: the " + std::string(backend->name()) +
                         " backend has no fp8 GEMMs yet (the CPU backend has: runtime/cpu/cpu_fp8_kernels.h)");
  }
  if (l.dtype == DType::kBf16 || l.dtype == DType::kFp8) {  // fp8: bf16 storage, fp8 GEMMs (te_gemm.h)
    auto e = std::make_unique<TypedExecutor<Bf16>>(m, l, backend, std::move(shard), opt, timeline);
    SHARDSIM_RETURN_IF_ERROR(e->Allocate(seed));
    return std::unique_ptr<Executor>(std::move(e));
  }
  auto e = std::make_unique<TypedExecutor<float>>(m, l, backend, std::move(shard), opt, timeline);
  SHARDSIM_RETURN_IF_ERROR(e->Allocate(seed));
  return std::unique_ptr<Executor>(std::move(e));
}

template <typename T>
Status TypedExecutor<T>::Allocate(uint64_t seed) {
  Memory& mem = backend_->memory();
  total_ = shard_.layout().total_size();
  experts_begin_ = total_;
  for (const ParamTensor& t : shard_.layout().tensors()) {
    if (!IsExpertParam(t.name)) continue;
    experts_begin_ = std::min(experts_begin_, t.offset);
    const int64_t layer = std::stoll(t.name.substr(8, t.name.find('.', 8) - 8));  // experts.<layer>.
    auto [it, added] = expert_ranges_.try_emplace(layer, t.offset, t.offset + t.size());
    if (!added) it->second.second = t.offset + t.size();  // a layer's experts are contiguous
  }
  const int64_t dp = layout_.dp_cp();  // the replicas ZeRO shards over (backend.h's Group::kDp)
  padded_ = (total_ + dp - 1) / dp * dp;
  const bool shard_grads = layout_.zero >= 2 && dp > 1;  // ZeRO-2's P_g
  const bool shard_params = layout_.zero >= 3 && dp > 1;  // ZeRO-3's P_p
  const bool off = offloaded();  // ZeRO >= 1 with dp x cp > 1 (CheckLayout)
  zero_ = std::make_unique<ZeroBuckets<T>>(&ctx_, &shard_, layout_.zero, dp,
                                           layout_.overlap_dp && layout_.zero >= 1, layout_.edp());
  const int64_t states = zero_->StateSize();
  // ZeRO-1 reduce-scatters each bucket's replicas x chunk floats from its first, up to
  // replicas - 1 past the last bucket's end (the experts' buckets, last, over edp replicas,
  // which may outnumber dp x cp under etp): that many floats of slack (zeroed with the
  // gradients). Offloaded, ZeRO-2/3 keep no gradient shard on the device (it is in host_grads_).
  const int64_t slack = zero_->bucketed() ? std::max(dp, layout_.edp()) : 0;
  const int64_t grad_floats = shard_grads ? (off ? 0 : states) : padded_ + slack;
  // offload=optimizer+params (ZeRO-3 only, CheckLayout): the parameter shard in host memory.
  Memory& param_mem = ParamMemory();
  SHARDSIM_ASSIGN_OR_RETURN(params_, param_mem.AllocateOf<T>(MemoryKind::kWeights,
                                                             shard_params ? states : padded_, "parameters"));
  // The optimizer's states where the step runs: the device, or the host under offload.
  Memory& state_mem = StateMemory();
  if (kMixed || off) {  // the fp32 master copy, sharded as the moments (an optimizer state)
    SHARDSIM_ASSIGN_OR_RETURN(master_, state_mem.AllocateFloats(MemoryKind::kOptimizer, states, "fp32 master weights"));
  }
  SHARDSIM_ASSIGN_OR_RETURN(grads_, mem.AllocateFloats(MemoryKind::kGradients, grad_floats, "gradients"));
  SHARDSIM_ASSIGN_OR_RETURN(moment1_, state_mem.AllocateFloats(MemoryKind::kOptimizer, states, "AdamW first moment"));
  SHARDSIM_ASSIGN_OR_RETURN(moment2_, state_mem.AllocateFloats(MemoryKind::kOptimizer, states, "AdamW second moment"));
  if (off) {
    SHARDSIM_ASSIGN_OR_RETURN(host_grads_, host_.AllocateFloats(MemoryKind::kGradients, states, "gradients (host)"));
    host_.Zero(host_grads_.data(), host_grads_.bytes());
  }
  param_mem.Zero(params_.data(), params_.bytes());
  mem.Zero(grads_.data(), grads_.bytes());
  for (DeviceBuffer* b : {&master_, &moment1_, &moment2_}) state_mem.Zero(b->data(), b->bytes());
  zero_->Bind(params_.template as<T>(), grads_.f());
  if (off && shard_grads) zero_->OffloadGradients(&host_, &host_k_, host_grads_.f());
  if (params_offloaded()) zero_->OffloadParams();
  // Initial values into this rank's owned ranges of the fp32 parameters (the master under
  // mixed precision, cast to the working copy), or the whole buffer where it is not sharded.
  SHARDSIM_RETURN_IF_ERROR(SetMasterWeights(shard_.InitialParams(seed)));
  SHARDSIM_ASSIGN_OR_RETURN(overlap_, DpOverlap::Create(&ctx_, shard_, grads_.f(),
                                                        layout_.overlap_dp && layout_.zero == 0 && dp > 1,
                                                        CompressesGradients(layout_) ? layout_.grad_compression : 1,
                                                        dp));
  ctx_.Flush();  // setup's collectives belong to no step
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::SetMasterWeights(const std::vector<float>& local) {
  // Into this rank's owned ranges of the fp32 parameters (the master under mixed precision or
  // offload, cast to the working copy), or the whole buffer where it is not sharded.
  const bool off = offloaded();
  const auto owned = kMixed || off || zero_->shards_params() ? zero_->OwnedRanges()
                                                             : std::vector<std::pair<int64_t, int64_t>>{{0, total_}};
  for (const auto& [from, to] : owned) {
    StateMemory().CopyToDevice(Master(from), local.data() + from, (to - from) * static_cast<int64_t>(sizeof(float)));
  }
  if (kMixed || off) {
    // The working copy everywhere this rank holds one: from its own range of the master, then
    // the others' ranges gathered as after every step (ZeRO 1/2); ZeRO 0 owns everything.
    for (const auto& [from, to] : owned) SHARDSIM_RETURN_IF_ERROR(UpdateWorkingWeights(from, to));
    SHARDSIM_RETURN_IF_ERROR(GatherWorkingWeights());
  }
  return Status::Ok();
}

template <typename T>
bool TypedExecutor<T>::PrefetchesZero3() const {
  // As the simulator (src/cost/memory.h): the next layer's parameters, when live_params holds
  // two layers.
  return ZeroPrefetchDepth(layout_, DenseLayerParamsOnRank(model_, layout_)) > 0;
}

template <typename T>
float* TypedExecutor<T>::Master(int64_t offset) {
  if constexpr (kMixed) {
    return master_.f() + zero_->StateIndex(offset);
  } else {
    return offloaded() ? master_.f() + zero_->StateIndex(offset) : zero_->ParamState(offset);
  }
}

template <typename T>
float* TypedExecutor<T>::StepGrad(int64_t offset) {
  return offloaded() ? host_grads_.f() + zero_->StateIndex(offset) : zero_->GradState(offset);
}

template <typename T>
Status TypedExecutor<T>::GradientsToHost() {
  if (!offloaded() || zero_->shards_grads()) return Status::Ok();  // ZeRO-2/3: already there
  const int64_t start = ctx_.Mark();
  double bytes = 0;
  for (const auto& [from, to] : zero_->OwnedRanges()) {
    const int64_t n = (to - from) * static_cast<int64_t>(sizeof(float));
    backend_->memory().CopyToHost(StepGrad(from), zero_->GradState(from), n);
    bytes += static_cast<double>(n);
  }
  ctx_.Record(Phase::kOffload, start, bytes, SpanLabel::kGradientsToHost);
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::UpdateWorkingWeights(int64_t from, int64_t to) {
  const int64_t n = to - from;
  if (!offloaded()) {
    if constexpr (kMixed) ctx_.k().CastToBf16(Master(from), zero_->ParamState(from), n);
    return Status::Ok();
  }
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  const int64_t start = ctx_.Mark();
  if (params_offloaded()) {  // the shard is in host memory: updated there (the host's cast)
    if constexpr (kMixed) {
      host_k_.CastToBf16(Master(from), zero_->ParamState(from), n);
    } else {
      host_.Copy(zero_->ParamState(from), Master(from), bytes);
    }
    ctx_.Record(Phase::kHostOptimizer, start);
    return Status::Ok();
  }
  // ZeRO-Offload's last step: the updated weights, in the working precision, to the device.
  if constexpr (kMixed) {
    SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer cast, host_.AllocateOf<T>(MemoryKind::kOther, n, "bf16 weights (host)"));
    host_k_.CastToBf16(Master(from), cast.template as<T>(), n);
    backend_->memory().CopyToDevice(zero_->ParamState(from), cast.data(), bytes);
  } else {
    backend_->memory().CopyToDevice(zero_->ParamState(from), Master(from), bytes);
  }
  ctx_.Record(Phase::kOffload, start, static_cast<double>(bytes), SpanLabel::kWeightsToDevice);
  return Status::Ok();
}

template <typename T>
const T* TypedExecutor<T>::Param(const char* name) const {
  const int64_t at = shard_.layout().OffsetOf(name);
  return at < 0 ? nullptr : zero_->Param(at);
}

template <typename T>
float* TypedExecutor<T>::Grad(const char* name) {
  const int64_t at = shard_.layout().OffsetOf(name);
  return at < 0 ? nullptr : zero_->Grad(at);
}

template <typename T>
int64_t TypedExecutor<T>::SequenceIndex(int64_t step, int32_t mb) const {
  // DP rank d takes rows [d gbs/dp, (d+1) gbs/dp) of the global batch, in micro-batches; its
  // CP ranks take chunks of the same sequences (Group::kDp is DP x CP, cp fastest).
  const int64_t d = backend_->comm().rank(Group::kDp) / layout_.cp;
  return step * layout_.gbs + d * (layout_.gbs / layout_.dp) + mb * layout_.mbs;
}

template <typename T>
void TypedExecutor<T>::ForEachEmbeddingRun(const std::function<void(int64_t row, int64_t rows, int64_t position)>& fn) const {
  if (!dims_.cp.active() || model_.position != Position::kLearned) {
    fn(0, dims_.n, 0);  // the rows are whole sequences (or positions do not matter)
    return;
  }
  ForEachChunk(dims_.cp, dims_.b, [&](int64_t local, int64_t position) { fn(local, dims_.cp.chunk(), position); });
}

template <typename T>
int TypedExecutor<T>::Tag(int32_t mb, int64_t model_chunk, bool backward) const {
  // Unique within an iteration: the receiving model chunk, the micro-batch, the direction.
  return static_cast<int>(((mb * layout_.pp * layout_.vpp) + model_chunk) * 2 + (backward ? 1 : 0));
}

template <typename T>
StatusOr<double> TypedExecutor<T>::Step(const TokenSource& data, int64_t step) {
  phase_ = "forward";
  // Zeroing the gradients is the optimizer's zero_grad (Megatron-LM's train_step does it before
  // the forward passes): timed as optimizer, so the step's phases cover all of it.
  ctx_.SetMicrobatch(-1, -1);  // the step's, not a micro-batch's
  const int64_t zero_start = ctx_.Mark();
  backend_->memory().Zero(grads_.data(), grads_.bytes());
  if (offloaded()) host_.Zero(host_grads_.data(), host_grads_.bytes());
  ctx_.Record(Phase::kOptimizer, zero_start);
  loss_sum_ = 0;
  ctx_.fp8_weights().NewStep();  // the weights changed: each TE module quantizes them again
  const int32_t stage = backend_->comm().rank(Group::kPp);
  for (const PipelineStep& s : ScheduleOrder(layout_, stage)) {
    if (s.pass == Pass::kForward) {
      phase_ = "forward";
      SHARDSIM_RETURN_IF_ERROR(Forward(data, step, s.mb, s.chunk));
    } else if (s.pass == Pass::kWeightGrad) {
      phase_ = "weight gradients";
      SHARDSIM_RETURN_IF_ERROR(WeightGrad(s.mb, s.chunk));
    } else {
      phase_ = "backward";
      SHARDSIM_RETURN_IF_ERROR(Backward(s.mb, s.chunk));
    }
    SHARDSIM_RETURN_IF_ERROR(ReleaseCompletedSends());  // their buffers are free to go
  }
  phase_ = "pipeline send";
  SHARDSIM_RETURN_IF_ERROR(WaitSends());
  phase_ = "optimizer";
  ctx_.SetMicrobatch(-1, -1);
  SHARDSIM_RETURN_IF_ERROR(OptimizerStep());
  // The loss: the head stage's TP rank 0 of every DP rank holds its rows' sum.
  phase_ = "loss";
  double loss = shard_.chunks().back().has_head && shard_.tp_rank() == 0 ? loss_sum_ : 0.0;
  SHARDSIM_RETURN_IF_ERROR(backend_->comm().AllReduceSumHost(Group::kWorld, &loss, 1));
  ctx_.Flush();  // the step's timeline, complete when Step returns
  return loss / static_cast<double>(layout_.gbs * model_.seq_len);
}

template <typename T>
Status TypedExecutor<T>::ReleaseCompletedSends() {
  for (size_t i = 0; i < sends_.size();) {
    SHARDSIM_ASSIGN_OR_RETURN(const bool done, backend_->comm().Test(sends_[i].first));
    if (done) {
      sends_.erase(sends_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::WaitSends() {
  for (auto& [handle, buffer] : sends_) {
    SHARDSIM_RETURN_IF_ERROR(backend_->comm().Wait(handle));
  }
  sends_.clear();
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::Forward(const TokenSource& data, int64_t step, int32_t mb, int32_t chunk) {
  const ChunkInfo& info = shard_.chunks()[chunk];
  ChunkState& s = live_[{chunk, mb}];
  const int64_t n = dims_.n, nl = dims_.n_local, c = model_.hidden;
  Collectives& comm = backend_->comm();
  Memory& mem = backend_->memory();
  s.residual.resize(info.layers + 1);
  s.saved.resize(info.layers);
  if (info.has_embedding || info.has_head) {
    TokenBatch batch = data.Batch(SequenceIndex(step, mb), layout_.mbs, model_.seq_len);
    if (dims_.cp.active()) {  // this rank's chunks of each sequence, half-major
      batch.inputs = LocalRows(batch.inputs, layout_.mbs, dims_.cp);
      batch.targets = LocalRows(batch.targets, layout_.mbs, dims_.cp);
    }
    const int64_t bytes = n * static_cast<int64_t>(sizeof(int32_t));
    DeviceBuffer& ids = info.has_embedding ? s.tokens : s.targets;
    SHARDSIM_ASSIGN_OR_RETURN(ids, mem.Allocate(kWork, bytes, "token ids"));
    mem.CopyToDevice(ids.data(), info.has_embedding ? batch.inputs.data() : batch.targets.data(), bytes);
    if (info.has_embedding && info.has_head) {
      SHARDSIM_ASSIGN_OR_RETURN(s.targets, mem.Allocate(kWork, bytes, "target ids"));
      mem.CopyToDevice(s.targets.data(), batch.targets.data(), bytes);
    }
  }
  SHARDSIM_ASSIGN_OR_RETURN(s.residual[0], ctx_.Alloc<T>(kAct, nl * c, "layer input"));
  if (info.has_embedding) {
    ctx_.SetPass(Phase::kForward, mb, chunk, SpanLabel::kEmbedding);
    // Vocab-parallel embedding: this rank's rows of the table, zero elsewhere, summed over TP
    // (Megatron's VocabParallelEmbedding); positions added once, by TP rank 0.
    DeviceBuffer tmp;
    SHARDSIM_RETURN_IF_ERROR(zero_->Gather(zero_->embedding(), zero_->positions()));
    SHARDSIM_ASSIGN_OR_RETURN(T* partial, ctx_.PartialTarget(s.residual[0].template as<T>(), tmp, nl, c));
    const T* wpe = shard_.tp_rank() == 0 ? Param("embed.positions") : nullptr;
    ForEachEmbeddingRun([&](int64_t row, int64_t rows, int64_t position) {
      ctx_.kt<T>().EmbeddingForward(s.tokens.i32() + row, Param("embed.tokens"), shard_.vocab_begin(),
                                    shard_.local_model().vocab, wpe, partial + row * c, rows, position,
                                    model_.seq_len, c);
    });
    zero_->Release(zero_->embedding());
    zero_->Release(zero_->positions());
    SHARDSIM_RETURN_IF_ERROR(ctx_.Reduce(partial, s.residual[0].template as<T>(), nl, c));
  } else {
    const int peer = StageOfPosition(layout_, static_cast<int32_t>(info.model_chunk - 1));
    ctx_.SetMicrobatch(mb, chunk);
    const int64_t start = ctx_.Mark();
    SHARDSIM_RETURN_IF_ERROR(comm.Recv(Group::kPp, s.residual[0].template as<T>(), nl * c, peer,
                                       Tag(mb, info.model_chunk, false)));
    ctx_.Record(Phase::kPpWait, start, static_cast<double>(nl * c) * sizeof(T), SpanLabel::kReceiveActivations);
    ctx_.SetPass(Phase::kForward, mb, chunk, info.layers > 0 ? SpanLabel::kAttention : SpanLabel::kHead,
                 info.layers > 0 ? static_cast<int32_t>(info.first_layer) : -1);
  }
  const bool full = layout_.recompute == Recompute::kFull;
  for (int64_t i = 0; i < info.layers; ++i) {
    const int64_t layer = info.first_layer + i;
    ctx_.SetLayer(static_cast<int32_t>(layer), SpanLabel::kAttention);
    const bool prefetch = PrefetchesZero3() && i + 1 < info.layers;  // the chunk's next layer
    SHARDSIM_RETURN_IF_ERROR(
        zero_->Gather(zero_->layer(layer), prefetch ? zero_->layer(layer + 1) : -1));
    SHARDSIM_RETURN_IF_ERROR(zero_->Gather(zero_->experts(layer)));  // ZeRO-3, experts with replicas
    SHARDSIM_ASSIGN_OR_RETURN(s.residual[i + 1], ctx_.Alloc<T>(kAct, nl * c, "layer input"));
    const std::optional<MoeArgs<T>> moe = MoeOf(layer, /*grads=*/false);
    SHARDSIM_RETURN_IF_ERROR(BlockForward(ctx_, dims_, zero_->LayerParams(layer), s.residual[i].template as<T>(),
                                          s.residual[i + 1].template as<T>(), s.saved[i],
                                          layout_.recompute != Recompute::kSelective, moe ? &*moe : nullptr));
    zero_->Release(zero_->layer(layer));
    zero_->Release(zero_->experts(layer));
    if (full) s.saved[i].Clear();  // only the layer's input is kept
  }
  if (info.has_head) {
    double loss = 0;
    SHARDSIM_RETURN_IF_ERROR(HeadForward(s, info, &loss));
    loss_sum_ += loss;
    ctx_.EndPass();
    return Status::Ok();
  }
  ctx_.EndPass();
  // The chunk's output goes to the next model chunk's stage; its buffer lives until sent.
  const int peer = StageOfPosition(layout_, static_cast<int32_t>(info.model_chunk + 1));
  const int64_t start = ctx_.Mark();
  DeviceBuffer out = std::move(s.residual[info.layers]);
  SHARDSIM_ASSIGN_OR_RETURN(int64_t handle, comm.Isend(Group::kPp, out.template as<T>(), nl * c, peer,
                                                       Tag(mb, info.model_chunk + 1, false)));
  ctx_.Record(Phase::kPpSendForward, start, static_cast<double>(nl * c) * sizeof(T));
  sends_.emplace_back(handle, std::move(out));
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::HeadForward(ChunkState& s, const ChunkInfo& info, double* loss_sum) {
  ctx_.SetLayer(-1, SpanLabel::kHead);
  const int64_t n = dims_.n, nl = dims_.n_local, c = model_.hidden;
  const int64_t v = shard_.local_model().vocab;
  TypedKernels<T>& k = ctx_.kt<T>();
  SHARDSIM_ASSIGN_OR_RETURN(s.final_out, ctx_.Alloc<T>(kAct, nl * c, "final norm output"));
  SHARDSIM_ASSIGN_OR_RETURN(s.final_rstd, ctx_.Alloc(kAct, nl, "final norm statistics"));
  if (model_.norm == Norm::kLayerNorm) {
    SHARDSIM_ASSIGN_OR_RETURN(s.final_mean, ctx_.Alloc(kAct, nl, "final norm statistics"));
  }
  // The head's weight: lm_head, or with tied embeddings the embedding bucket's table.
  const char* head = model_.tied_embeddings ? "embed.tokens" : "lm_head.weight";
  const int head_bucket = zero_->BucketOf(shard_.layout().OffsetOf(head));
  SHARDSIM_RETURN_IF_ERROR(zero_->Gather(zero_->head(), head_bucket));
  k.NormForward(model_.norm, s.residual[info.layers].template as<T>(), Param("final_norm.gain"),
                Param("final_norm.bias"), s.final_out.template as<T>(), s.final_mean.f(), s.final_rstd.f(), nl, c);
  DeviceBuffer gathered;
  SHARDSIM_ASSIGN_OR_RETURN(const T* in, ctx_.Gather(s.final_out.template as<T>(), gathered, nl, c));
  // The simulator counts the logits under "other" (src/cost/memory.cc); so does this.
  SHARDSIM_ASSIGN_OR_RETURN(s.logits, ctx_.Alloc<T>(kWork, n * v, "logits"));
  k.LinearForward(in, Param(head), nullptr, s.logits.template as<T>(), n, c, v);
  zero_->Release(zero_->head());
  zero_->Release(head_bucket);
  if (ctx_.tp() == 1) {
    *loss_sum = k.SoftmaxCrossEntropy(s.logits.template as<T>(), s.targets.i32(), s.logits.template as<T>(), n, v);
    return Status::Ok();
  }
  // Vocab-parallel cross-entropy (Megatron's vocab_parallel_cross_entropy): each rank's
  // (max, sum of exp, target logit) per row, all-gathered, combined into log-sum-exp.
  DeviceBuffer stats, all, lse;
  SHARDSIM_ASSIGN_OR_RETURN(stats, ctx_.Alloc(kWork, n * 3, "softmax statistics"));
  SHARDSIM_ASSIGN_OR_RETURN(all, ctx_.Alloc(kWork, ctx_.tp() * n * 3, "softmax statistics"));
  SHARDSIM_ASSIGN_OR_RETURN(lse, ctx_.Alloc(kWork, n, "log-sum-exp"));
  k.VocabParallelStats(s.logits.template as<T>(), s.targets.i32(), shard_.vocab_begin(), stats.f(), n, v);
  SHARDSIM_RETURN_IF_ERROR(ctx_.Comm(Phase::kTpComm, static_cast<double>(ctx_.tp() * n * 3) * sizeof(float), [&] {
    return backend_->comm().AllGather(Group::kTp, stats.f(), all.f(), n * 3);
  }, SpanLabel::kTpAllGather));
  *loss_sum = ctx_.k().VocabParallelLogSumExp(all.f(), ctx_.tp(), lse.f(), n);
  k.SoftmaxFromLogSumExp(s.logits.template as<T>(), lse.f(), n, v);
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::HeadBackward(ChunkState& s, T* dres, bool last_mb) {
  ctx_.SetLayer(-1, SpanLabel::kHead);
  const int64_t n = dims_.n, nl = dims_.n_local, c = model_.hidden;
  const int64_t v = shard_.local_model().vocab;
  const int64_t last = static_cast<int64_t>(s.residual.size()) - 1;
  TypedKernels<T>& k = ctx_.kt<T>();
  // d(mean loss over the global batch's tokens) / d(logits), in place of the probabilities.
  k.CrossEntropyBackward(s.logits.template as<T>(), s.targets.i32(), 1.0f, layout_.gbs * model_.seq_len,
                         s.logits.template as<T>(), n, v, shard_.vocab_begin());
  DeviceBuffer gathered, dfull, dlocal;
  SHARDSIM_ASSIGN_OR_RETURN(const T* in, ctx_.Gather(s.final_out.template as<T>(), gathered, nl, c));
  SHARDSIM_ASSIGN_OR_RETURN(dfull, ctx_.Zeros<T>(kWork, n * c, "final norm gradient"));
  const char* head = model_.tied_embeddings ? "embed.tokens" : "lm_head.weight";
  // ZeRO-2/3: the head's gradients go to its bucket; with tied embeddings the table's go to
  // the embedding bucket, which stays open until the embedding's backward adds its part.
  const int head_bucket = zero_->BucketOf(shard_.layout().OffsetOf(head));
  SHARDSIM_RETURN_IF_ERROR(zero_->Gather(zero_->head(), head_bucket));
  SHARDSIM_RETURN_IF_ERROR(zero_->OpenGrads(zero_->head()));
  SHARDSIM_RETURN_IF_ERROR(zero_->OpenGrads(head_bucket));
  k.LinearBackward(s.logits.template as<T>(), in, Param(head), dfull.template as<T>(), Grad(head), nullptr, n, c, v);
  s.logits.Reset();
  gathered.Reset();
  T* dn = dfull.template as<T>();
  if (ctx_.sp()) {
    SHARDSIM_ASSIGN_OR_RETURN(dlocal, ctx_.Alloc<T>(kWork, nl * c, "final norm gradient rows"));
    dn = dlocal.template as<T>();
  }
  SHARDSIM_RETURN_IF_ERROR(ctx_.Reduce(dfull.template as<T>(), dn, nl, c));
  k.NormBackward(model_.norm, dn, s.residual[last].template as<T>(), Param("final_norm.gain"), s.final_mean.f(),
                 s.final_rstd.f(), dres, Grad("final_norm.gain"), Grad("final_norm.bias"), nl, c);
  zero_->Release(zero_->head());
  zero_->Release(head_bucket);
  SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(zero_->head(), last_mb));
  // The head's copy of a tied table: its part of the gradient is complete here (the embedding
  // stage's part is added at the step, SumTiedTableGrads).
  if (shard_.holds_table_copy()) SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(head_bucket, last_mb));
  s.final_out.Reset();
  s.final_mean.Reset();
  s.final_rstd.Reset();
  s.residual[last].Reset();
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::Backward(int32_t mb, int32_t chunk) {
  const ChunkInfo& info = shard_.chunks()[chunk];
  auto it = live_.find({chunk, mb});
  if (it == live_.end()) {
    return Status::Error("backward of micro-batch " + std::to_string(mb) + " chunk " +
                         std::to_string(chunk) + " before its forward");
  }
  ChunkState& s = it->second;
  const int64_t nl = dims_.n_local, c = model_.hidden;
  Collectives& comm = backend_->comm();
  // The chunk's last micro-batch: its gradients are final part by part (overlap_dp).
  const bool last_mb = mb == layout_.microbatches() - 1;
  const bool zb = SplitsWeightGradients(layout_);  // the layers' weight gradients in W
  if (zb) s.stash.resize(info.layers);
  SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer dres, ctx_.Zeros<T>(kWork, nl * c, "residual gradient"));
  if (info.has_head) {
    ctx_.SetPass(Phase::kBackward, mb, chunk, SpanLabel::kHead);
    SHARDSIM_RETURN_IF_ERROR(HeadBackward(s, dres.template as<T>(), last_mb));
    if (last_mb) SHARDSIM_RETURN_IF_ERROR(overlap_->Issue(DpOverlap::kHead));
    if (last_mb && shard_.holds_table_copy()) SHARDSIM_RETURN_IF_ERROR(overlap_->Issue(DpOverlap::kEmbedding));
  } else {
    const int peer = StageOfPosition(layout_, static_cast<int32_t>(info.model_chunk + 1));
    ctx_.SetMicrobatch(mb, chunk);
    const int64_t start = ctx_.Mark();
    SHARDSIM_RETURN_IF_ERROR(comm.Recv(Group::kPp, dres.template as<T>(), nl * c, peer,
                                       Tag(mb, info.model_chunk, true)));
    ctx_.Record(Phase::kPpWait, start, static_cast<double>(nl * c) * sizeof(T), SpanLabel::kReceiveGradients);
    ctx_.SetPass(Phase::kBackward, mb, chunk, info.layers > 0 ? SpanLabel::kMlp : SpanLabel::kEmbedding,
                 info.layers > 0 ? static_cast<int32_t>(info.first_layer + info.layers - 1) : -1);
  }
  for (int64_t i = info.layers - 1; i >= 0; --i) {
    const int64_t layer = info.first_layer + i;
    ctx_.SetLayer(static_cast<int32_t>(layer), SpanLabel::kMlp);
    // ZeRO-3: one gather serves the recomputed forward and the backward.
    const bool prefetch = PrefetchesZero3() && i > 0;  // the next layer backward: layer - 1
    SHARDSIM_RETURN_IF_ERROR(
        zero_->Gather(zero_->layer(layer), prefetch ? zero_->layer(layer - 1) : -1));
    SHARDSIM_RETURN_IF_ERROR(zero_->Gather(zero_->experts(layer)));
    if (!zb) SHARDSIM_RETURN_IF_ERROR(zero_->OpenGrads(zero_->layer(layer)));
    // The experts' bucket (ZeRO-2/3 with replicas) opens here even under zero-bubble: the B pass
    // hands its deferred GEMMs the experts' gradient pointers; it is reduced after W.
    if (zero_->experts(layer) >= 0) SHARDSIM_RETURN_IF_ERROR(zero_->OpenGrads(zero_->experts(layer)));
    const BlockWeights<T> w = zero_->LayerParams(layer);
    const std::optional<MoeArgs<T>> moe = MoeOf(layer, /*grads=*/true);
    if (layout_.recompute == Recompute::kFull) {
      // Re-run the layer's forward from its saved input (its TP and EP collectives included).
      ctx_.SwitchCompute(Phase::kRecompute);
      SHARDSIM_ASSIGN_OR_RETURN(DeviceBuffer out, ctx_.Alloc<T>(kWork, nl * c, "recomputed layer output"));
      SHARDSIM_RETURN_IF_ERROR(BlockForward(ctx_, dims_, w, s.residual[i].template as<T>(), out.template as<T>(),
                                            s.saved[i], true, moe ? &*moe : nullptr));
      ctx_.SwitchCompute(Phase::kBackward);
    }
    if (zb) {  // the input gradient only; the weight gradients wait in the stash for W
      // The norms' and row-parallel biases' gradients straight into the layer's when they are
      // there (not sharded; under ZeRO-2/3 the bucket opens in W and they wait in the stash).
      const BlockWeights<float> small = zero_->shards_grads() ? BlockWeights<float>{} : zero_->LayerGrads(layer);
      SHARDSIM_RETURN_IF_ERROR(BlockBackward(ctx_, dims_, w, small, s.residual[i].template as<T>(),
                                             s.saved[i], dres.template as<T>(), &s.stash[i], moe ? &*moe : nullptr));
      zero_->Release(zero_->layer(layer));
      zero_->Release(zero_->experts(layer));
    } else {
      SHARDSIM_RETURN_IF_ERROR(BlockBackward(ctx_, dims_, w, zero_->LayerGrads(layer),
                                             s.residual[i].template as<T>(), s.saved[i], dres.template as<T>(),
                                             nullptr, moe ? &*moe : nullptr));
      zero_->Release(zero_->layer(layer));
      zero_->Release(zero_->experts(layer));
      SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(zero_->layer(layer), last_mb));
      if (zero_->experts(layer) >= 0) SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(zero_->experts(layer), last_mb));
      if (last_mb) SHARDSIM_RETURN_IF_ERROR(overlap_->Issue(layer));
      if (last_mb && moe) SHARDSIM_RETURN_IF_ERROR(IssueExpertReduction(layer));
    }
    s.residual[i + 1].Reset();
  }
  if (info.has_embedding) {
    ctx_.SetLayer(-1, SpanLabel::kEmbedding);
    DeviceBuffer gathered;
    SHARDSIM_ASSIGN_OR_RETURN(const T* dfull, ctx_.Gather(dres.template as<T>(), gathered, nl, c));
    SHARDSIM_RETURN_IF_ERROR(zero_->OpenGrads(zero_->embedding()));
    if (zero_->positions() >= 0) SHARDSIM_RETURN_IF_ERROR(zero_->OpenGrads(zero_->positions()));
    ForEachEmbeddingRun([&](int64_t row, int64_t rows, int64_t position) {
      ctx_.kt<T>().EmbeddingBackward(dfull + row * c, s.tokens.i32() + row, Grad("embed.tokens"), shard_.vocab_begin(),
                                     shard_.local_model().vocab, Grad("embed.positions"), rows, position,
                                     model_.seq_len, c);
    });
    SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(zero_->embedding(), last_mb));
    if (zero_->positions() >= 0) SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(zero_->positions(), last_mb));
    if (last_mb) SHARDSIM_RETURN_IF_ERROR(overlap_->Issue(DpOverlap::kEmbedding));
    SHARDSIM_RETURN_IF_ERROR(zero_->WaitReductions());  // ZeRO-2/3 overlap: none outlives the pass
    ctx_.EndPass();
    if (!zb) live_.erase(it);  // zero-bubble: the stash lives until W
    return Status::Ok();
  }
  SHARDSIM_RETURN_IF_ERROR(zero_->WaitReductions());
  ctx_.EndPass();
  if (!zb) live_.erase(it);
  const int peer = StageOfPosition(layout_, static_cast<int32_t>(info.model_chunk - 1));
  const int64_t start = ctx_.Mark();
  SHARDSIM_ASSIGN_OR_RETURN(int64_t handle, comm.Isend(Group::kPp, dres.template as<T>(), nl * c, peer,
                                                       Tag(mb, info.model_chunk - 1, true)));
  ctx_.Record(Phase::kPpSendBackward, start, static_cast<double>(nl * c) * sizeof(T));
  sends_.emplace_back(handle, std::move(dres));
  return Status::Ok();
}

template <typename T>
Status TypedExecutor<T>::WeightGrad(int32_t mb, int32_t chunk) {
  const ChunkInfo& info = shard_.chunks()[chunk];
  auto it = live_.find({chunk, mb});
  if (it == live_.end() || it->second.stash.size() != static_cast<size_t>(info.layers)) {
    return Status::Error("weight gradients of micro-batch " + std::to_string(mb) + " chunk " +
                         std::to_string(chunk) + " before its input gradients");
  }
  ChunkState& s = it->second;
  const bool last_mb = mb == layout_.microbatches() - 1;
  ctx_.SetPass(Phase::kBackward, mb, chunk, SpanLabel::kWeightGradients,
               static_cast<int32_t>(info.first_layer + info.layers - 1));
  for (int64_t i = info.layers - 1; i >= 0; --i) {  // as the B pass left them: top layer first
    const int64_t layer = info.first_layer + i;
    ctx_.SetLayer(static_cast<int32_t>(layer), SpanLabel::kWeightGradients);
    SHARDSIM_RETURN_IF_ERROR(zero_->OpenGrads(zero_->layer(layer)));
    SHARDSIM_RETURN_IF_ERROR(BlockWeightGrad<T>(ctx_, dims_, s.stash[i], zero_->LayerGrads(layer)));
    SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(zero_->layer(layer), last_mb));
    if (zero_->experts(layer) >= 0) SHARDSIM_RETURN_IF_ERROR(zero_->ReduceGrads(zero_->experts(layer), last_mb));
    if (last_mb) SHARDSIM_RETURN_IF_ERROR(overlap_->Issue(layer));
    if (last_mb && model_.IsMoeLayer(layer)) SHARDSIM_RETURN_IF_ERROR(IssueExpertReduction(layer));
  }
  SHARDSIM_RETURN_IF_ERROR(zero_->WaitReductions());
  ctx_.EndPass();
  live_.erase(it);
  return Status::Ok();
}

template <typename T>
std::optional<MoeArgs<T>> TypedExecutor<T>::MoeOf(int64_t layer, bool grads) {
  if (!model_.IsMoeLayer(layer)) return std::nullopt;
  MoeArgs<T> a;
  const Group expert_tp_group = layout_.own_expert_tp() ? Group::kEtp : Group::kTp;  // the experts' TP group
  a.rank = MoeRank{.ep = layout_.ep,
                   .rank = backend_->comm().rank(Group::kEp),
                   .capacity_factor = layout_.moe_capacity,
                   .tp = layout_.tp,
                   .tp_rank = backend_->comm().rank(Group::kTp),
                   .expert_tp = layout_.expert_tp(),
                   .expert_tp_group = expert_tp_group,
                   .expert_tp_rank = backend_->comm().rank(expert_tp_group),
                   .sp = ctx_.sp(),
                   .cp = layout_.cp,
                   .input_split = MoeInputSplitOverTp(layout_),
                   .gathers = MoeGathersOverExpertTp(layout_)};
  a.aux_scale = static_cast<double>(layout_.mbs) / static_cast<double>(layout_.gbs);  // the cross-entropy's share
  const bool swiglu = model_.activation == Activation::kSwiglu;
  const int64_t local = a.rank.LocalExperts(model_), first = a.rank.rank * local;
  for (int64_t e = first; e < first + local; ++e) {
    auto at = [&](const char* suffix) { return shard_.layout().OffsetOf(ExpertParamName(layer, e, suffix)); };
    const int64_t in = at(swiglu ? "gate.weight" : "fc.weight"), up = swiglu ? at("up.weight") : -1,
                  out = at(swiglu ? "down.weight" : "proj.weight");
    CHECK(in >= 0 && out >= 0 && (!swiglu || up >= 0)) << "rank lacks expert " << e << " of layer " << layer;
    a.experts.push_back({const_cast<T*>(zero_->Param(in)), up >= 0 ? const_cast<T*>(zero_->Param(up)) : nullptr,
                         const_cast<T*>(zero_->Param(out))});
    if (grads) a.grads.push_back({zero_->Grad(in), up >= 0 ? zero_->Grad(up) : nullptr, zero_->Grad(out)});
  }
  return a;
}

template <typename T>
Status TypedExecutor<T>::IssueExpertReduction(int64_t layer) {
  if (layout_.edp() == 1 || layout_.zero >= 1) return Status::Ok();  // no replicas, or the experts' bucket
  const auto it = expert_ranges_.find(layer);
  CHECK(it != expert_ranges_.end()) << "layer " << layer << " has no experts on this rank";
  const int64_t begin = it->second.first, end = it->second.second;
  return ctx_.Comm(Phase::kDpComm, static_cast<double>(end - begin) * sizeof(float), [&]() -> Status {
    SHARDSIM_ASSIGN_OR_RETURN(const int64_t handle,
                              backend_->comm().IallReduceSum(Group::kEdp, zero_->Grad(begin), end - begin));
    expert_pending_.push_back(handle);
    return Status::Ok();
  }, SpanLabel::kExpertGradientAllReduce);
}

template <typename T>
bool TypedExecutor<T>::CountsOnce(int64_t offset) const {
  Collectives& comm = backend_->comm();
  if (offset >= experts_begin_) return layout_.zero >= 1 || comm.rank(Group::kEdp) == 0;
  return layout_.zero >= 1 || comm.rank(Group::kDp) == 0;
}

template <typename T>
Status TypedExecutor<T>::ReduceGradients() {
  if (zero_->shards_grads()) return Status::Ok();  // ZeRO-2/3: reduced bucket by bucket
  Collectives& comm = backend_->comm();
  if (zero_->bucketed()) {
    // ZeRO-1: each bucket's DP reduce-scatter, issued already under overlap_dp.
    SHARDSIM_RETURN_IF_ERROR(zero_->FinishReductions());
  } else {
    // overlap_dp: the DP sums were issued during the backward pass; they finish first.
    SHARDSIM_RETURN_IF_ERROR(overlap_->WaitAll());
    // The dense tensors (the experts, last, are their replicas' business).
    if (overlap_->compresses() && !overlap_->active()) {
      SHARDSIM_RETURN_IF_ERROR(overlap_->ReduceAll());  // PowerSGD, every tensor at once
    } else if (layout_.dp_cp() > 1 && !overlap_->active()) {
      SHARDSIM_RETURN_IF_ERROR(ctx_.Comm(Phase::kDpComm, static_cast<double>(experts_begin_) * sizeof(float),
                                         [&] { return comm.AllReduceSum(Group::kDp, grads_.f(), experts_begin_); },
                                         SpanLabel::kDpGradientAllReduce));
    }
  }
  if (!expert_pending_.empty()) {
    SHARDSIM_RETURN_IF_ERROR(ctx_.Comm(Phase::kDpComm, 0, [&]() -> Status {
      for (const int64_t handle : expert_pending_) SHARDSIM_RETURN_IF_ERROR(comm.Wait(handle));
      expert_pending_.clear();
      return Status::Ok();
    }, SpanLabel::kExpertGradientAllReduce));
  }
  // SP: replicated tensors saw only this rank's rows; summed over the TP group after the DP
  // reduction, in one coalesced all-reduce (Megatron-LM's finalize_model_grads: the grad sync,
  // then _allreduce_layernorm_grads). Under ZeRO-1 only this rank's chunks are the DP sums, and
  // TP ranks own the same chunks, so those come out right.
  const std::vector<ParamTensor>& tensors = shard_.layout().tensors();
  std::vector<std::pair<float*, int64_t>> pieces;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (shard_.PartialOverTp(i)) pieces.emplace_back(grads_.f() + tensors[i].offset, tensors[i].size());
  }
  SHARDSIM_RETURN_IF_ERROR(ctx_.AllReduceCoalescedOverTp(pieces));
  return GradientsToHost();  // offload under ZeRO-1: the reduced ranges, down
}

template <typename T>
std::pair<int64_t, int64_t> TypedExecutor<T>::TableCopy() const {
  if (!shard_.holds_table_copy()) return {0, 0};
  const ParamTensor& t = shard_.layout().Get("embed.tokens");
  return {t.offset, t.offset + t.size()};
}

template <typename T>
Status TypedExecutor<T>::SumTiedTableGrads() {
  const bool first = shard_.chunks().front().has_embedding;
  if (!shard_.table_on_two_stages() || !(first || shard_.holds_table_copy())) return Status::Ok();  // no table here
  Collectives& comm = backend_->comm();
  Memory& mem = backend_->memory();
  const int peer = first ? HeadStage(layout_) : 0;
  // Both stages shard the table alike (its own bucket, zero_buckets.h), so the chunk this rank
  // owns is its peer's (the same TP and DP ranks): only those are exchanged, where Megatron-LM
  // all-reduces the whole table (the simulator prices that). fp32 addition is commutative, so
  // both copies get the same bits.
  const ParamTensor& table = shard_.layout().Get("embed.tokens");
  const int tag = Tag(layout_.microbatches(), 0, false);  // past every pipeline message's
  for (const auto& [begin, end] : zero_->OwnedRanges()) {
    const int64_t from = std::max(begin, table.offset), to = std::min(end, table.offset + table.size());
    if (from >= to) continue;
    const int64_t n = to - from, bytes = n * static_cast<int64_t>(sizeof(float));
    float* grads = StepGrad(from);  // host memory under offload
    DeviceBuffer mine, theirs, host_theirs;
    const float* send = grads;
    if (offloaded()) {  // collectives move device memory: this rank's chunk up first
      SHARDSIM_ASSIGN_OR_RETURN(mine, mem.AllocateFloats(kWork, n, "tied table gradient"));
      mem.CopyToDevice(mine.data(), grads, bytes);
      send = mine.f();
    }
    SHARDSIM_ASSIGN_OR_RETURN(theirs, mem.AllocateFloats(kWork, n, "tied table gradient (other copy)"));
    // The lower stage sends first, the higher receives first: no deadlock where a send blocks.
    SHARDSIM_RETURN_IF_ERROR(ctx_.Comm(Phase::kDpComm, static_cast<double>(bytes), [&]() -> Status {
      StatusOr<int64_t> handle = Status::Error("not sent");
      if (first) handle = comm.Isend(Group::kPp, send, n, peer, tag);
      if (first && !handle.ok()) return handle.status();
      SHARDSIM_RETURN_IF_ERROR(comm.Recv(Group::kPp, theirs.f(), n, peer, tag));
      if (!first) handle = comm.Isend(Group::kPp, send, n, peer, tag);
      if (!handle.ok()) return handle.status();
      return comm.Wait(*handle);
    }, SpanLabel::kEmbeddingGradientAllReduce));
    const int64_t start = ctx_.Mark();
    if (offloaded()) {
      SHARDSIM_ASSIGN_OR_RETURN(host_theirs, host_.AllocateFloats(kWork, n, "tied table gradient (host)"));
      mem.CopyToHost(host_theirs.data(), theirs.data(), bytes);
      host_k_.f32().Add(grads, host_theirs.f(), n);
    } else {
      ctx_.k().f32().Add(grads, theirs.f(), n);
    }
    ctx_.Record(offloaded() ? Phase::kHostOptimizer : Phase::kOptimizer, start);
  }
  return Status::Ok();
}

template <typename T>
StatusOr<double> TypedExecutor<T>::GradSquaredNorm() {
  // Each parameter counted once in the world: a replicated tensor by TP rank 0 only, and
  // without ZeRO (every DP rank holds the same sums) by DP rank 0 only.
  Collectives& comm = backend_->comm();
  double sum = 0;
  const int64_t start = ctx_.Mark();  // the local sum is part of the optimizer step (clipping)
  const std::vector<ParamTensor>& tensors = shard_.layout().tensors();
  const auto [copy_begin, copy_end] = TableCopy();  // a tied table's second copy: the first stage counts it
  for (const auto& [begin, end] : zero_->OwnedRanges()) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!CountsOnce(tensors[i].offset)) continue;
      if (copy_end > copy_begin && tensors[i].offset == copy_begin) continue;
      if (shard_.split(i) == TensorSplit::kReplicated && shard_.tp_rank() != 0) continue;
      const int64_t from = std::max(begin, tensors[i].offset);
      const int64_t to = std::min(end, tensors[i].offset + tensors[i].size());
      if (from < to) sum += StateKernels().SumSquares(StepGrad(from), to - from);
    }
  }
  ctx_.Record(offloaded() ? Phase::kHostOptimizer : Phase::kOptimizer, start);
  // A world-wide sync point. Its time is mostly the wait for the slowest rank: with pipeline
  // stages, the idle time of a stage that finished early (a bubble, as the simulator counts
  // it); otherwise data-parallel communication.
  SHARDSIM_RETURN_IF_ERROR(ctx_.Comm(layout_.pp > 1 ? Phase::kPpWait : Phase::kDpComm, sizeof(double),
                                     [&] { return comm.AllReduceSumHost(Group::kWorld, &sum, 1); },
                                     SpanLabel::kGradNormAllReduce));
  return sum;
}

template <typename T>
Status TypedExecutor<T>::OptimizerStep() {
  SHARDSIM_RETURN_IF_ERROR(ReduceGradients());
  SHARDSIM_RETURN_IF_ERROR(SumTiedTableGrads());
  SHARDSIM_ASSIGN_OR_RETURN(const double sq, GradSquaredNorm());
  const int64_t start = ctx_.Mark();
  const double norm = std::sqrt(sq);
  // As runtime/cpu/adamw.cc: clip by max_norm / norm (in fp32) when the norm exceeds it.
  const float clip = opt_.max_grad_norm > 0 && norm > opt_.max_grad_norm
                         ? static_cast<float>(opt_.max_grad_norm / norm)
                         : 1.0f;
  ++adam_step_;
  AdamWArgs a;
  a.lr = static_cast<float>(opt_.lr);
  a.beta1 = static_cast<float>(opt_.beta1);
  a.beta2 = static_cast<float>(opt_.beta2);
  a.eps = static_cast<float>(opt_.eps);
  a.bias_correction1 = static_cast<float>(1.0 / (1.0 - std::pow(opt_.beta1, adam_step_)));
  a.bias_correction2 = static_cast<float>(1.0 / (1.0 - std::pow(opt_.beta2, adam_step_)));
  for (const auto& [begin, end] : zero_->OwnedRanges()) {
    for (const ParamTensor& t : shard_.layout().tensors()) {
      const int64_t from = std::max(begin, t.offset);
      const int64_t to = std::min(end, t.offset + t.size());
      if (from >= to) continue;
      a.weight_decay = t.weight_decay ? static_cast<float>(opt_.weight_decay) : 0.0f;
      const int64_t at = zero_->StateIndex(from);  // the moments are sharded as the state
      StateKernels().AdamW(Master(from), StepGrad(from), moment1_.f() + at, moment2_.f() + at, to - from, clip, a);
      if (!offloaded()) SHARDSIM_RETURN_IF_ERROR(UpdateWorkingWeights(from, to));
    }
  }
  ctx_.Record(offloaded() ? Phase::kHostOptimizer : Phase::kOptimizer, start);
  if (offloaded()) {  // the updated weights to the device, range by range (timed as offload)
    for (const auto& [from, to] : zero_->OwnedRanges()) SHARDSIM_RETURN_IF_ERROR(UpdateWorkingWeights(from, to));
  }
  return GatherWorkingWeights();
}

template <typename T>
Status TypedExecutor<T>::GatherWorkingWeights() {
  // ZeRO-3 keeps only its updated range; the next pass gathers what it needs.
  if (!zero_->bucketed() || zero_->shards_params()) return Status::Ok();
  return zero_->AllGatherParams();  // ZeRO-1/2: bucket by bucket
}

template class TypedExecutor<float>;
template class TypedExecutor<Bf16>;

}  // namespace shardsim::runtime
