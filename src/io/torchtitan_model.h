// torchtitan's llama3 model arguments (pytorch/torchtitan v0.2.2, 73a0e6979): the flavors it
// ships, the FFN size it derives, and the model a flavor builds, so that `plan --emit
// torchtitan` can name the flavor of a model (or say what to register) and the TOML reader can
// read the model back (src/io/torchtitan_config.h).
//
// torchtitan builds a model from `[model] name` and `flavor`, a key of the model's args table
// (torchtitan/models/llama3/__init__.py llama3_args); a model that is no shipped flavor needs
// one more entry in that table. Its llama3 is a Llama-architecture decoder: RMSNorm, SwiGLU
// MLP, RoPE, no biases, untied embedding and output (torchtitan/models/llama3/model/model.py).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/model/model_spec.h"
#include "src/util/status.h"

namespace shardsim {

// torchtitan/models/llama3/model/args.py TransformerModelArgs, the fields that shape the model,
// with its defaults.
struct Llama3Args {
  int64_t dim = 4096;
  int64_t n_layers = 32;
  int64_t n_heads = 32;
  int64_t n_kv_heads = 0;  // 0: None, n_heads
  int64_t vocab_size = 128256;
  int64_t multiple_of = 256;
  std::optional<double> ffn_dim_multiplier;  // None
  double rope_theta = 10000;
};

// FeedForward.__init__ (model.py), with hidden_dim = 4 dim from TransformerBlock:
// int(2 * 4 dim / 3), times ffn_dim_multiplier (int()), rounded up to multiple_of.
int64_t Llama3FfnHidden(const Llama3Args& a);

// The shipped flavors of the llama3 table whose model shardsim prices (the flex and varlen
// variants change only the attention kernel and mask; the debug model is kept as well).
const std::map<std::string, Llama3Args>& Llama3Flavors();

// The model `a` builds, for sequences of `seq_len` (training.seq_len).
ModelSpec Llama3Model(const std::string& flavor, const Llama3Args& a, int64_t seq_len);

// The arguments that build `m` with torchtitan's llama3, or why none do (its norm, MLP,
// positions, biases, tied embeddings, experts, a head size other than dim / n_heads, or an FFN
// size no multiple_of / ffn_dim_multiplier gives). A description without a rotary base gets
// torchtitan's default, 10000.
StatusOr<Llama3Args> Llama3ArgsFor(const ModelSpec& m);

// The shipped flavor that builds `m` (Llama3Mismatches finds nothing), if any.
std::optional<std::string> Llama3FlavorOf(const ModelSpec& m);

// One line of Python for llama3_args: `"name": TransformerModelArgs(dim=..., ...),`.
std::string Llama3Registration(const std::string& flavor, const Llama3Args& a);
// Reads such a line back (the flavor and its arguments); errors name the field.
StatusOr<std::pair<std::string, Llama3Args>> ParseLlama3Registration(const std::string& line);

// Where `read` (what a torchtitan config builds) differs from `m`, one line per field in
// torchtitan's names ("n_layers 80, the model has 126"); empty when they agree. rope_theta is
// compared only when `m` states a rotary base.
std::vector<std::string> Llama3Mismatches(const ModelSpec& m, const ModelSpec& read);

}  // namespace shardsim
