// See powersgd.h.
#include "runtime/exec/powersgd.h"

#include <cmath>
#include <utility>

#include "runtime/cpu/splitmix64.h"
#include "src/cost/grad_compression.h"
#include "src/util/check.h"

namespace shardsim::runtime {

namespace {
constexpr int64_t kF = sizeof(float);
}  // namespace

StatusOr<PowerSgd> PowerSgd::Create(Memory* mem, Kernels* k,
                                    const std::vector<std::vector<CompressedTensor>>& groups, double ratio,
                                    int64_t replicas) {
  PowerSgd out;
  out.mem_ = mem;
  out.k_ = k;
  out.replicas_ = replicas;
  for (const std::vector<CompressedTensor>& tensors : groups) {
    Group g;
    std::vector<std::pair<const CompressedTensor*, int64_t>> compressed;  // tensor, rank
    for (const CompressedTensor& t : tensors) {
      const int64_t r = t.compress ? PowerSgdRank(t.rows, t.cols, ratio) : 0;
      if (r == 0) {
        g.whole_tensors.emplace_back(t.offset, t.rows * t.cols);
        g.whole += t.rows * t.cols;
      } else {
        compressed.emplace_back(&t, r);
      }
    }
    for (const auto& [t, r] : compressed) {
      Matrix x;
      x.offset = t->offset;
      x.rows = t->rows;
      x.cols = t->cols;
      x.rank = r;
      x.p_at = g.whole + g.p;
      x.q_at = g.q;
      g.p += t->rows * r;
      g.q += t->cols * r;
      SHARDSIM_ASSIGN_OR_RETURN(x.error, mem->AllocateFloats(MemoryKind::kGradients, t->rows * t->cols,
                                                             "PowerSGD error feedback"));
      mem->Zero(x.error.data(), x.error.bytes());
      g.matrices.push_back(std::move(x));
    }
    SHARDSIM_ASSIGN_OR_RETURN(g.first, mem->AllocateFloats(MemoryKind::kGradients, std::max<int64_t>(1, g.whole + g.p),
                                                           "PowerSGD first all-reduce (whole tensors and P)"));
    SHARDSIM_ASSIGN_OR_RETURN(g.q_buffer,
                              mem->AllocateFloats(MemoryKind::kGradients, std::max<int64_t>(1, g.q), "PowerSGD Q"));
    // Q's first value: Gaussian noise from the tensor's seed (then warm-started step to step).
    for (size_t i = 0; i < g.matrices.size(); ++i) {
      const Matrix& x = g.matrices[i];
      std::vector<float> q(static_cast<size_t>(x.rank * x.cols));
      SplitMix64Stream rng(compressed[i].first->seed);
      for (float& v : q) v = static_cast<float>(BoxMuller(rng.Next(), rng.Next()));
      mem->CopyToDevice(g.q_buffer.f() + x.q_at, q.data(), static_cast<int64_t>(q.size()) * kF);
    }
    out.groups_.push_back(std::move(g));
  }
  return out;
}

std::vector<std::pair<float*, int64_t>> PowerSgd::PersistentState() const {
  std::vector<std::pair<float*, int64_t>> out;
  for (const Group& g : groups_) {
    for (const Matrix& x : g.matrices) out.emplace_back(x.error.f(), x.rows * x.cols);
  }
  for (const Group& g : groups_) out.emplace_back(g.q_buffer.f(), g.q);
  return out;
}

void PowerSgd::Orthonormalize(float* device, int64_t rows, int64_t cols, bool transposed) {
  // Vectors v_j (j < r) of length len: column j of a rows x r matrix, or row j of an r x cols one.
  const int64_t r = transposed ? rows : cols, len = transposed ? cols : rows;
  std::vector<float> host(static_cast<size_t>(rows * cols));
  mem_->CopyToHost(host.data(), device, rows * cols * kF);
  auto at = [&](int64_t j, int64_t i) -> float& {
    return host[static_cast<size_t>(transposed ? j * cols + i : i * cols + j)];
  };
  for (int64_t j = 0; j < r; ++j) {
    double norm2 = 0;
    for (int64_t i = 0; i < len; ++i) norm2 += static_cast<double>(at(j, i)) * at(j, i);
    const double inv = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0;
    for (int64_t i = 0; i < len; ++i) at(j, i) = static_cast<float>(at(j, i) * inv);
    for (int64_t k = j + 1; k < r; ++k) {  // the later vectors lose their component along v_j
      double dot = 0;
      for (int64_t i = 0; i < len; ++i) dot += static_cast<double>(at(j, i)) * at(k, i);
      for (int64_t i = 0; i < len; ++i) at(k, i) = static_cast<float>(at(k, i) - dot * at(j, i));
    }
  }
  mem_->CopyToDevice(device, host.data(), rows * cols * kF);
}

void PowerSgd::Compress(int gi, float* grads) {
  Group& g = groups_[gi];
  for (Matrix& x : g.matrices) {
    float* m = grads + x.offset;
    float* q = g.q_buffer.f() + x.q_at;  // Q^T, r x cols
    k_->f32().Add(m, x.error.f(), x.rows * x.cols);
    Orthonormalize(q, x.rank, x.cols, /*transposed=*/true);
    // P (rows x r) = M Q = M (Q^T)^T: a linear layer's forward with weight Q^T.
    k_->f32().LinearForward(m, q, nullptr, g.first.f() + x.p_at, x.rows, x.cols, x.rank);
  }
  int64_t at = 0;
  for (const auto& [offset, n] : g.whole_tensors) {
    mem_->Copy(g.first.f() + at, grads + offset, n * kF);
    at += n;
  }
}

void PowerSgd::Project(int gi, float* grads) {
  Group& g = groups_[gi];
  int64_t at = 0;
  for (const auto& [offset, n] : g.whole_tensors) {
    mem_->Copy(grads + offset, g.first.f() + at, n * kF);
    at += n;
  }
  for (Matrix& x : g.matrices) {
    float* p = g.first.f() + x.p_at;
    float* q = g.q_buffer.f() + x.q_at;
    Orthonormalize(p, x.rows, x.rank, /*transposed=*/false);
    // Q^T (r x cols) = P^T M: a linear layer's weight gradient with output gradient P, input M.
    mem_->Zero(q, x.rank * x.cols * kF);
    k_->f32().LinearBackward(p, grads + x.offset, nullptr, nullptr, q, nullptr, x.rows, x.cols, x.rank);
  }
}

void PowerSgd::Decompress(int gi, float* grads) {
  Group& g = groups_[gi];
  const float inv = 1.0f / static_cast<float>(replicas_);
  for (Matrix& x : g.matrices) {
    float* m = grads + x.offset;
    const float* p = g.first.f() + x.p_at;
    float* q = g.q_buffer.f() + x.q_at;
    const int64_t n = x.rows * x.cols;
    // error = M - P Q^T / replicas: M copied, then P (-Q^T / replicas) added (a linear layer's
    // input gradient with output gradient P and weight Q^T: din += P Q^T).
    mem_->Copy(x.error.data(), m, n * kF);
    k_->Scale(q, -inv, x.rank * x.cols);
    k_->f32().LinearBackward(p, nullptr, q, x.error.f(), nullptr, nullptr, x.rows, x.cols, x.rank);
    k_->Scale(q, -static_cast<float>(replicas_), x.rank * x.cols);  // back (exact for a power of 2)
    // M = P Q^T, the compressed sum.
    mem_->Zero(m, n * kF);
    k_->f32().LinearBackward(p, nullptr, q, m, nullptr, nullptr, x.rows, x.cols, x.rank);
  }
}

}  // namespace shardsim::runtime
