// Megatron-Core's CUDA graph capture scopes as the framework readers meet them: Megatron-LM's
// --cuda-graph-modules and its deprecated spelling --cuda-graph-scope (nargs '+'), NeMo's
// model.config.cuda_graph_scope. The values and their rules are Megatron-LM's at
// NVIDIA/Megatron-LM d98e8a64dd (megatron/training/arguments.py _parse_cuda_graph_modules_arg,
// megatron/core/transformer/cuda_graph_config.py normalize_cuda_graph_modules and
// validate_deprecated_cuda_graph_modules_migration_inputs, enums.py CudaGraphModule):
//   full                      the whole layer (deprecated spelling of an empty list); alone
//   attn mlp moe moe_router moe_preprocess mamba
//                             part of each layer (CudaGraphModule)
//   full_iteration            deprecated: sets --cuda-graph-impl full_iteration (the step)
//   full_iteration_inference  deprecated: inference graphs; nothing for training
// with at most one distinct deprecated value. Anything else Megatron-LM refuses (argparse,
// CudaGraphModule[name]), and so does this reader.
#pragma once

#include <string>
#include <vector>

#include "src/util/status.h"

namespace shardsim {

struct CudaGraphScopes {
  bool full_iteration = false;            // "full_iteration" given: the whole step
  bool inference_only = false;            // "full_iteration_inference" given
  std::vector<std::string> modules;       // the CudaGraphModule names given (part of a layer)
};

// Reads the scope values in the order given. The error names the value, what Megatron-LM
// accepts and the nearest accepted name; the caller adds where it stands.
StatusOr<CudaGraphScopes> ReadCudaGraphScopes(const std::vector<std::string>& values);

}  // namespace shardsim
