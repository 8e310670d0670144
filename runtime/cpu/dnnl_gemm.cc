// See dnnl_gemm.h.
#include "runtime/cpu/dnnl_gemm.h"

#include "src/util/check.h"

#include <algorithm>

#if SHARDSIM_HAVE_DNNL
#include <map>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

extern "C" void omp_set_num_threads(int num_threads);  // libgomp, oneDNN's OpenMP runtime
#endif

namespace shardsim::runtime {

#if SHARDSIM_HAVE_DNNL

namespace {

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // One matmul primitive per shape (oneDNN compiles a kernel for each: about 0.5 ms to create).
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, bool>, dnnl::matmul> primitives;
};

Context& Ctx() {
  thread_local Context c;
  return c;
}

dnnl::memory::desc Desc(int64_t rows, int64_t cols, bool transposed, dnnl::memory::data_type type) {
  // A rows x cols operand; stored transposed it is a cols x rows row-major array.
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
  return dnnl::memory::desc(dnnl::memory::dims{rows, cols}, type, strides);
}

}  // namespace

bool HaveBf16Gemm() { return true; }

void Bf16Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Bf16* a, const Bf16* b,
              float* c, bool accumulate) {
  CHECK(m >= 0 && n >= 0 && k >= 0) << "bf16 GEMM of " << m << " x " << n << " x " << k;
  if (m == 0 || n == 0) return;  // no output (an expert no token was routed to)
  if (k == 0) {                  // an empty sum
    if (!accumulate) std::fill(c, c + m * n, 0.0f);
    return;
  }
  using dt = dnnl::memory::data_type;
  Context& x = Ctx();
  const auto key = std::make_tuple(trans_a, trans_b, m, n, k, accumulate);
  const dnnl::memory::desc ad = Desc(m, k, trans_a, dt::bf16), bd = Desc(k, n, trans_b, dt::bf16),
                           cd = Desc(m, n, false, dt::f32);
  auto it = x.primitives.find(key);
  if (it == x.primitives.end()) {
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, x.engine);
    it = x.primitives.emplace(key, dnnl::matmul(pd)).first;
  }
  dnnl::memory am(ad, x.engine, const_cast<Bf16*>(a)), bm(bd, x.engine, const_cast<Bf16*>(b)), cm(cd, x.engine, c);
  it->second.execute(x.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  x.stream.wait();
}

void SetBf16GemmThreads(int threads) { omp_set_num_threads(threads); }

#else

bool HaveBf16Gemm() { return false; }

void Bf16Gemm(bool, bool, int64_t, int64_t, int64_t, const Bf16*, const Bf16*, float*, bool) {
  CHECK(false) << "Bf16Gemm: this build has no oneDNN (HaveBf16Gemm() is false)";
}

void SetBf16GemmThreads(int) {}

#endif

}  // namespace shardsim::runtime
