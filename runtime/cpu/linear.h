// Linear layer y = x W^T + b, forward and backward, over flat row-major buffers.
// Every matrix product of the transformer (Q, K, V, output, MLP, LM head) goes through here.
//
// Convention of every *Backward in runtime/cpu: gradients are ADDED (+=) into the output
// buffers, as in llm.c, so fan-in (residuals, Q/K/V sharing an input, tied embeddings,
// micro-batch accumulation) needs no extra buffers; callers zero them first.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// x (N, C), w (OC, C), b (OC) or nullptr, y (N, OC):  y = x w^T + b.
template <typename S>
void LinearForward(const S* x, const S* w, const S* b, S* y, int64_t n, int64_t c, int64_t oc);

// dy (N, OC). Adds dx (N, C) += dy w;  dw (OC, C) += dy^T x;  db (OC) += sum over rows of dy.
// dx, dw, db may each be nullptr (not needed / no bias), and are then skipped (x is unused
// without dw).
template <typename S>
void LinearBackward(const S* dy, const S* x, const S* w, S* dx, S* dw, S* db, int64_t n, int64_t c,
                    int64_t oc);

}  // namespace shardsim::runtime
