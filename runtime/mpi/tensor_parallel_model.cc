// The tensor-parallel model (see tensor_parallel_model.h): sharding of the full layout, the
// replicated embedding / final norm / LM head / loss around tensor-parallel blocks
// (tensor_parallel_block.cc), and the gradient norm and parameter gather across the TP group.
#include "runtime/mpi/tensor_parallel_model.h"

#include <algorithm>
#include <string>

#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/transformer.h"
#include "runtime/mpi/tensor_parallel_block.h"
#include "src/util/check.h"

namespace shardsim::runtime {

TensorParallelModel::TensorParallelModel(ModelSpec spec, ModelSpec local, ParamLayout layout,
                                         ParamLayout full, const Communicator* tp)
    : spec_(std::move(spec)),
      local_(std::move(local)),
      layout_(std::move(layout)),
      full_layout_(std::move(full)),
      tp_{.comm = tp},
      params_(layout_.total_size(), 0.0f),
      grads_(layout_.total_size(), 0.0f) {
  // A tensor is split along whichever dimension the local model shrank: rows for the
  // column-parallel weights (out, in), columns for the row-parallel ones and for the
  // column-parallel biases (1, out).
  for (const ParamTensor& t : layout_.tensors()) {
    const ParamTensor& f = full_layout_.Get(t.name);
    splits_.push_back(t.rows < f.rows   ? Split::kRows
                      : t.cols < f.cols ? Split::kCols
                                        : Split::kReplicated);
  }
  if (spec_.position == Position::kRope)
    rope_ = MakeRopeTable<float>(spec_.seq_len, spec_.head_dim);
}

StatusOr<TensorParallelModel> TensorParallelModel::Create(const ModelSpec& spec,
                                                          const Communicator* tp) {
  const int64_t n = tp->size();
  if (spec.heads % n != 0 || spec.kv_heads % n != 0 || spec.ffn_hidden % n != 0) {
    return Status::Error("tensor parallelism tp=" + std::to_string(n) + " must divide the model '" +
                         spec.name + "''s heads (" + std::to_string(spec.heads) + "), kv_heads (" +
                         std::to_string(spec.kv_heads) + ") and ffn_hidden (" +
                         std::to_string(spec.ffn_hidden) + ")");
  }
  SHARDSIM_ASSIGN_OR_RETURN(ParamLayout full, ParamLayout::ForModel(spec));
  ModelSpec local = spec;
  local.heads /= n;
  local.kv_heads /= n;
  local.ffn_hidden /= n;
  SHARDSIM_ASSIGN_OR_RETURN(ParamLayout layout, ParamLayout::ForModel(local));
  return TensorParallelModel(spec, std::move(local), std::move(layout), std::move(full), tp);
}

void TensorParallelModel::Init(uint64_t seed) {
  Transformer<float> whole = *Transformer<float>::Create(spec_);  // Create succeeded for spec_
  whole.Init(seed);
  const int64_t r = tp_.comm->rank();
  const std::vector<ParamTensor>& tensors = layout_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& t = tensors[i];
    const ParamTensor& f = full_layout_.Get(t.name);
    const float* src = whole.params().data() + f.offset;
    float* dst = params_.data() + t.offset;
    // Rank r's block of rows [r rows, (r+1) rows) or of columns [r cols, (r+1) cols).
    const int64_t row0 = splits_[i] == Split::kRows ? r * t.rows : 0;
    const int64_t col0 = splits_[i] == Split::kCols ? r * t.cols : 0;
    for (int64_t row = 0; row < t.rows; ++row) {
      std::copy_n(src + (row0 + row) * f.cols + col0, t.cols, dst + row * t.cols);
    }
  }
  ZeroGrad();
}

void TensorParallelModel::ZeroGrad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

float* TensorParallelModel::HeadWeight(std::vector<float>& buffer) {
  const char* name = spec_.tied_embeddings ? "embed.tokens" : "lm_head.weight";
  return buffer.data() + layout_.Get(name).offset;
}

void TensorParallelModel::Resize(int64_t b, int64_t t) {
  if (b == b_ && t == t_) return;
  b_ = b;
  t_ = t;
  const int64_t n = b * t, c = spec_.hidden, v = spec_.vocab;
  residual_.assign(spec_.layers + 1, std::vector<float>(n * c));
  blocks_.resize(spec_.layers);
  for (BlockActivations<float>& a : blocks_) a.Resize(local_, b, t);
  for (auto* buf : {&final_norm_, &dresidual_, &dfinal_}) buf->resize(n * c);
  for (auto* buf : {&final_mean_, &final_rstd_}) buf->resize(n);
  for (auto* buf : {&logits_, &probs_, &dlogits_}) buf->resize(n * v);
  scratch_.Resize(local_, b, t);
}

StatusOr<float> TensorParallelModel::Forward(const TokenBatch& batch) {
  CHECK(batch.batch > 0 && batch.seq > 0 && batch.seq <= spec_.seq_len)
      << "batch (" << batch.batch << ", " << batch.seq << ") vs seq_len " << spec_.seq_len;
  Resize(batch.batch, batch.seq);
  inputs_ = batch.inputs;
  targets_ = batch.targets;
  const int64_t n = b_ * t_, c = spec_.hidden, v = spec_.vocab;
  float* p = params_.data();
  const int64_t wpe = layout_.OffsetOf("embed.positions");
  EmbeddingForward(inputs_.data(), p + layout_.Get("embed.tokens").offset,
                   wpe < 0 ? nullptr : p + wpe, residual_[0].data(), b_, t_, c, v);
  for (int64_t l = 0; l < spec_.layers; ++l) {
    SHARDSIM_RETURN_IF_ERROR(TpBlockForward(local_, BlockWeightsAt(layout_, local_, l, p), rope_,
                                            tp_, residual_[l].data(), residual_[l + 1].data(),
                                            blocks_[l], b_, t_));
  }
  const int64_t bias = layout_.OffsetOf("final_norm.bias");
  NormForward(spec_.norm, residual_[spec_.layers].data(), p + layout_.Get("final_norm.gain").offset,
              bias < 0 ? nullptr : p + bias, final_norm_.data(), final_mean_.data(),
              final_rstd_.data(), n, c);
  LinearForward<float>(final_norm_.data(), HeadWeight(params_), nullptr, logits_.data(), n, c, v);
  return CrossEntropyForward(logits_.data(), targets_.data(), probs_.data(), n, v);
}

Status TensorParallelModel::Backward(float loss_scale) {
  CHECK(b_ > 0) << "Backward before Forward";
  const int64_t n = b_ * t_, c = spec_.hidden, v = spec_.vocab;
  float* p = params_.data();
  float* g = grads_.data();
  std::fill(dlogits_.begin(), dlogits_.end(), 0.0f);
  CrossEntropyBackward(probs_.data(), targets_.data(), loss_scale, dlogits_.data(), n, v);
  std::fill(dfinal_.begin(), dfinal_.end(), 0.0f);
  LinearBackward<float>(dlogits_.data(), final_norm_.data(), HeadWeight(params_), dfinal_.data(),
                        HeadWeight(grads_), nullptr, n, c, v);
  std::fill(dresidual_.begin(), dresidual_.end(), 0.0f);
  const int64_t gain = layout_.Get("final_norm.gain").offset;
  const int64_t bias = layout_.OffsetOf("final_norm.bias");
  NormBackward(spec_.norm, dfinal_.data(), residual_[spec_.layers].data(), p + gain,
               final_mean_.data(), final_rstd_.data(), dresidual_.data(), g + gain,
               bias < 0 ? nullptr : g + bias, n, c);
  for (int64_t l = spec_.layers - 1; l >= 0; --l) {
    SHARDSIM_RETURN_IF_ERROR(TpBlockBackward(
        local_, BlockWeightsAt(layout_, local_, l, p), BlockWeightsAt(layout_, local_, l, g), rope_,
        tp_, residual_[l].data(), blocks_[l], dresidual_.data(), scratch_, b_, t_));
  }
  const int64_t wpe = layout_.OffsetOf("embed.positions");
  EmbeddingBackward(dresidual_.data(), inputs_.data(), g + layout_.Get("embed.tokens").offset,
                    wpe < 0 ? nullptr : g + wpe, b_, t_, c, v);
  return Status::Ok();
}

int64_t TensorParallelModel::ActivationBytes() const {
  size_t elements =
      final_norm_.size() + final_mean_.size() + final_rstd_.size() + logits_.size() + probs_.size();
  for (const std::vector<float>& r : residual_) elements += r.size();
  for (const BlockActivations<float>& b : blocks_) elements += b.Elements();
  return static_cast<int64_t>(elements * sizeof(float) +
                              (inputs_.size() + targets_.size()) * sizeof(int32_t));
}

int64_t TensorParallelModel::WorkspaceBytes() const {
  const size_t elements =
      scratch_.Elements() + dresidual_.size() + dfinal_.size() + dlogits_.size();
  return static_cast<int64_t>(elements * sizeof(float));
}

StatusOr<double> TensorParallelModel::GradSquaredNorm() {
  double sharded = 0, replicated = 0;
  const std::vector<ParamTensor>& tensors = layout_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    double sum = 0;
    for (int64_t j = tensors[i].offset; j < tensors[i].offset + tensors[i].size(); ++j) {
      sum += static_cast<double>(grads_[j]) * static_cast<double>(grads_[j]);
    }
    (splits_[i] == Split::kReplicated ? replicated : sharded) += sum;
  }
  SHARDSIM_RETURN_IF_ERROR(tp_.comm->AllReduceSum(&sharded, 1));
  return sharded + replicated;
}

StatusOr<std::vector<float>> TensorParallelModel::Gather(const std::vector<float>& buffer) {
  std::vector<float> full(full_layout_.total_size(), 0.0f);
  const int64_t ranks = tp_.comm->size();
  std::vector<float> gathered;
  const std::vector<ParamTensor>& tensors = layout_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& t = tensors[i];
    const ParamTensor& f = full_layout_.Get(t.name);
    const float* local = buffer.data() + t.offset;
    float* out = full.data() + f.offset;
    if (splits_[i] == Split::kReplicated) {
      std::copy_n(local, t.size(), out);
      continue;
    }
    gathered.resize(ranks * t.size());
    SHARDSIM_RETURN_IF_ERROR(
        tp_.comm->AllGather(local, gathered.data(), static_cast<size_t>(t.size())));
    if (splits_[i] == Split::kRows) {  // rank blocks of rows, in order: already the full tensor
      std::copy(gathered.begin(), gathered.end(), out);
      continue;
    }
    for (int64_t r = 0; r < ranks; ++r) {  // rank r's (rows, cols) block -> columns r*cols..
      for (int64_t row = 0; row < t.rows; ++row) {
        std::copy_n(gathered.data() + r * t.size() + row * t.cols, t.cols,
                    out + row * f.cols + r * t.cols);
      }
    }
  }
  return full;
}

}  // namespace shardsim::runtime
