// The tensor-parallel model (see tensor_parallel_model.h): sharding of the full layout, the
// local Transformer run with the TP all-reduce as its partial-sum hook, and the gradient norm
// and parameter gather across the TP group.
#include "runtime/mpi/tensor_parallel_model.h"

#include <algorithm>
#include <string>

#include "runtime/cpu/transformer.h"
#include "runtime/mpi/tensor_parallel_block.h"
#include "src/util/check.h"

namespace shardsim::runtime {

TensorParallelModel::TensorParallelModel(ModelSpec spec, Transformer<float> local_model,
                                         ParamLayout full, const Communicator* tp)
    : spec_(std::move(spec)),
      model_(std::move(local_model)),
      full_layout_(std::move(full)),
      tp_{.comm = tp} {
  // A tensor is split along whichever dimension the local model shrank: rows for the
  // column-parallel weights (out, in), columns for the row-parallel ones and for the
  // column-parallel biases (1, out).
  for (const ParamTensor& t : layout().tensors()) {
    const ParamTensor& f = full_layout_.Get(t.name);
    splits_.push_back(t.rows < f.rows   ? Split::kRows
                      : t.cols < f.cols ? Split::kCols
                                        : Split::kReplicated);
  }
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
  SHARDSIM_ASSIGN_OR_RETURN(Transformer<float> local_model, Transformer<float>::Create(local));
  return TensorParallelModel(spec, std::move(local_model), std::move(full), tp);
}

void TensorParallelModel::Init(uint64_t seed) {
  Transformer<float> whole = *Transformer<float>::Create(spec_);  // Create succeeded for spec_
  whole.Init(seed);
  const int64_t r = tp_.comm->rank();
  const std::vector<ParamTensor>& tensors = layout().tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& t = tensors[i];
    const ParamTensor& f = full_layout_.Get(t.name);
    const float* src = whole.params().data() + f.offset;
    float* dst = model_.params().data() + t.offset;
    // Rank r's block of rows [r rows, (r+1) rows) or of columns [r cols, (r+1) cols).
    const int64_t row0 = splits_[i] == Split::kRows ? r * t.rows : 0;
    const int64_t col0 = splits_[i] == Split::kCols ? r * t.cols : 0;
    for (int64_t row = 0; row < t.rows; ++row) {
      std::copy_n(src + (row0 + row) * f.cols + col0, t.cols, dst + row * t.cols);
    }
  }
  ZeroGrad();
}

void TensorParallelModel::ZeroGrad() { model_.ZeroGrad(); }

StatusOr<float> TensorParallelModel::Forward(const TokenBatch& batch) {
  return model_.ForwardWith(batch, Reduce());
}

Status TensorParallelModel::Backward(float loss_scale) {
  return model_.BackwardWith(loss_scale, Reduce());
}

StatusOr<double> TensorParallelModel::GradSquaredNorm() {
  double sharded = 0, replicated = 0;
  const std::vector<ParamTensor>& tensors = layout().tensors();
  const std::span<const float> grads = model_.grads();
  for (size_t i = 0; i < tensors.size(); ++i) {
    double sum = 0;
    for (int64_t j = tensors[i].offset; j < tensors[i].offset + tensors[i].size(); ++j) {
      sum += static_cast<double>(grads[j]) * static_cast<double>(grads[j]);
    }
    (splits_[i] == Split::kReplicated ? replicated : sharded) += sum;
  }
  SHARDSIM_RETURN_IF_ERROR(tp_.comm->AllReduceSum(&sharded, 1));
  return sharded + replicated;
}

StatusOr<std::vector<float>> TensorParallelModel::Gather(std::span<const float> buffer) {
  std::vector<float> full(full_layout_.total_size(), 0.0f);
  const int64_t ranks = tp_.comm->size();
  std::vector<float> gathered;
  const std::vector<ParamTensor>& tensors = layout().tensors();
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
