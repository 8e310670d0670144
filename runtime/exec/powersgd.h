// PowerSgd: the layout's compress=R as the runtime runs it, PowerSGD with error feedback and
// warm start (Vogels et al. 2019; PyTorch's DDP powerSGD_hook), on the flat fp32 gradient
// buffer, with the backend's kernels and memory (src/cost/grad_compression.h has the rules and
// the prices; the ranks come from PowerSgdRank there, so what runs is what is priced).
//
// The tensors are split into groups, each reduced by two all-reduces the caller issues: a
// layer, the embeddings or the head each under overlap_dp (DpOverlap's parts), else all of a
// rank's tensors at once. For a group's compressed matrices M (n x m, rank r):
//   Compress:   M += error; Q orthonormalized (its columns); P = M Q; the group's tensors sent
//               whole and its Ps packed into first() -> the caller sums first() over DP;
//   Project:    the whole tensors unpacked; P orthonormalized; Q = M^T P into second() -> the
//               caller sums second() over DP;
//   Decompress: error = M - P Q^T / replicas; M = P Q^T.
// Summed over the replicas, M_i + e_i - P Q^T / replicas leaves sum(e_i) = sum(M_i + e_i) -
// P Q^T, the error a single process with the summed gradient would keep; and P, Q are the sums'
// (P = sum(M_i + e_i) Q, Q = sum(M_i + e_i)^T P): so a run over replicas computes what one
// process computes on the summed gradient (tests/mpi/exec_equivalence_main.cc holds it to that).
// Q starts as Gaussian noise from a seed per tensor (the same on every replica, and on every
// TP rank for a tensor TP does not split), then carries over from step to step (warm start).
// Orthonormalization is modified Gram-Schmidt in double on the host (PyTorch's
// _orthogonalize_gram_schmidt; a column of zeros stays zero instead of dividing by zero).
// Every buffer is persistent, counted as gradients (grad_compression.h CompressionStateBytes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "src/util/status.h"

namespace shardsim::runtime {

// A tensor of the flat gradient buffer: sent whole, or compressed (a matrix, `seed` for its Q).
struct CompressedTensor {
  int64_t offset = 0, rows = 0, cols = 0;
  bool compress = false;
  uint64_t seed = 0;
};

class PowerSgd {
 public:
  // `groups` of tensors; `ratio`: the layout's compress; `replicas`: the DP group's size.
  static StatusOr<PowerSgd> Create(Memory* mem, Kernels* k,
                                   const std::vector<std::vector<CompressedTensor>>& groups, double ratio,
                                   int64_t replicas);

  int groups() const { return static_cast<int>(groups_.size()); }
  void Compress(int g, float* grads);
  void Project(int g, float* grads);
  void Decompress(int g, float* grads);
  float* first(int g) const { return groups_[g].first.f(); }
  int64_t first_size(int g) const { return groups_[g].whole + groups_[g].p; }
  float* second(int g) const { return groups_[g].q_buffer.f(); }
  int64_t second_size(int g) const { return groups_[g].q; }
  // What carries over from one step to the next, in a fixed order: every matrix's error
  // feedback, then every part's Q (warm start). A checkpoint holds these to resume bitwise.
  std::vector<std::pair<float*, int64_t>> PersistentState() const;

 private:
  struct Matrix {
    int64_t offset = 0, rows = 0, cols = 0, rank = 0;
    int64_t p_at = 0, q_at = 0;  // where its P (rows x r) and Q^T (r x cols) start in the buffers
    DeviceBuffer error;          // rows x cols
  };
  struct Group {
    std::vector<std::pair<int64_t, int64_t>> whole_tensors;  // offset, elements
    std::vector<Matrix> matrices;
    int64_t whole = 0, p = 0, q = 0;
    DeviceBuffer first;     // [whole ++ P]
    DeviceBuffer q_buffer;  // the Q^T factors, each r x cols
  };
  // Orthonormalizes the columns of the rows x r matrix at `device` (row-major), or, with
  // `transposed`, the rows of an r x cols one (Q^T's rows are Q's columns).
  void Orthonormalize(float* device, int64_t rows, int64_t cols, bool transposed);

  Memory* mem_ = nullptr;
  Kernels* k_ = nullptr;
  int64_t replicas_ = 1;
  std::vector<Group> groups_;
};

}  // namespace shardsim::runtime
