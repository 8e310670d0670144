// See cuda_graph_scope.h.
#include "src/io/cuda_graph_scope.h"

#include <algorithm>

#include "src/util/strings.h"

namespace shardsim {

StatusOr<CudaGraphScopes> ReadCudaGraphScopes(const std::vector<std::string>& values) {
  static const std::vector<std::string> kModules = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"};
  static const std::vector<std::string> kAccepted = {"full",       "attn",           "mlp",   "moe",
                                                     "moe_router", "moe_preprocess", "mamba", "full_iteration",
                                                     "full_iteration_inference"};
  CudaGraphScopes out;
  std::vector<std::string> deprecated;
  for (const std::string& v : values) {
    if (std::find(kAccepted.begin(), kAccepted.end(), v) == kAccepted.end()) {
      return Status::Error("'" + v + "' is not a CUDA graph scope (expected one or more of " + Join(kAccepted, ", ") +
                           ")" + DidYouMean(v, kAccepted));
    }
    if (v == "full" && values.size() != 1) {
      return Status::Error("'full' cannot be used with other scopes (normalize_cuda_graph_modules)");
    }
    if (v == "full_iteration" || v == "full_iteration_inference") {
      if (!deprecated.empty() && deprecated.front() != v) {
        return Status::Error("'" + deprecated.front() + "' and '" + v +
                             "' together: at most one deprecated scope "
                             "(validate_deprecated_cuda_graph_modules_migration_inputs)");
      }
      deprecated.push_back(v);
      (v == "full_iteration" ? out.full_iteration : out.inference_only) = true;
    }
    if (std::find(kModules.begin(), kModules.end(), v) != kModules.end()) out.modules.push_back(v);
  }
  return out;
}

}  // namespace shardsim
