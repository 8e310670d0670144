// SwiGLU gating (Shazeer 2020, "GLU Variants Improve Transformer", eq. 6): the Llama MLP's
// nonlinearity, silu(x W_gate) * (x W_up), with silu(z) = z sigmoid(z) (Swish, beta = 1).
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// gate, up, y (N):  y = silu(gate) * up.
template <typename S>
void SwigluForward(const S* gate, const S* up, S* y, int64_t n);

// With s = sigmoid(gate):  dgate += dy * up * s (1 + gate (1 - s)),  dup += dy * silu(gate).
template <typename S>
void SwigluBackward(const S* dy, const S* gate, const S* up, S* dgate, S* dup, int64_t n);

}  // namespace shardsim::runtime
