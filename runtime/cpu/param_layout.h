// ParamLayout: every parameter tensor of a decoder-only transformer, by name, with its shape,
// offset into one flat buffer, initialization rule and weight-decay flag.
// One flat buffer makes the optimizer, gradient clipping and (later) sharding loops over
// ranges; the names are the contract that lets a sharded run find the same tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim::runtime {

enum class ParamInit { kNormal, kOnes, kZeros };

struct ParamTensor {
  std::string name;    // e.g. "blocks.0.attn.q.weight"
  int64_t offset = 0;  // first element in the flat buffer
  int64_t rows = 0;    // shape (rows, cols), row-major; vectors are (1, cols)
  int64_t cols = 0;
  ParamInit init = ParamInit::kNormal;
  double init_std = 0;  // for kNormal
  // AdamW decay: on for matrices and embeddings, off for norm gains and biases (as GPT-2 /
  // nanoGPT, which decay exactly the parameters with two or more dimensions).
  bool weight_decay = false;

  int64_t size() const { return rows * cols; }
};

// Standard deviations from GPT-2 (Radford et al. 2019, sec. 2.3) as nanoGPT implements them:
// 0.02 for every matrix and embedding; residual output projections (attention output, MLP
// down) scaled by 1/sqrt(2 * layers) because each layer adds two of them to the residual.
inline constexpr double kInitStd = 0.02;

class ParamLayout {
 public:
  // The layout of a model, dense or MoE (a router in each MoE layer, its experts' MLPs after
  // every other tensor: ExpertParamName). Dropout, shared experts, MLA and the other features
  // the runtime does not train are rejected with a message rather than silently ignored.
  static StatusOr<ParamLayout> ForModel(const ModelSpec& spec);

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  int64_t total_size() const { return total_size_; }

  // nullptr when the model has no such tensor (e.g. biases in a bias-free model).
  const ParamTensor* Find(std::string_view name) const;
  // CHECK-fails when absent: for names the caller knows the model has.
  const ParamTensor& Get(std::string_view name) const;
  // The offset of `name`, or -1 when absent.
  int64_t OffsetOf(std::string_view name) const;

  // The tensors `keep` accepts, in the same order, packed into a new flat buffer (a pipeline
  // stage's share of the model).
  ParamLayout Select(const std::function<bool(const ParamTensor&)>& keep) const;

 private:
  void Add(std::string name, int64_t rows, int64_t cols, ParamInit init, double std, bool decay);

  std::vector<ParamTensor> tensors_;
  int64_t total_size_ = 0;
};

// Tensor names, shared by the layout and the code that reads it.
std::string BlockParamName(int64_t layer, std::string_view suffix);  // "blocks.<l>.<suffix>"
// "experts.<l>.<e>.<suffix>": expert e of MoE layer l. The experts come last in the flat buffer,
// in (layer, expert) order, so that a rank's experts are one range apart from the tensors the
// DP group shares (expert parallelism shards them over EP, runtime/exec/shard.h).
std::string ExpertParamName(int64_t layer, int64_t expert, std::string_view suffix);
bool IsExpertParam(std::string_view name);
// The expert index of an expert tensor's name, -1 for other tensors.
int64_t ExpertOf(std::string_view name);

}  // namespace shardsim::runtime
