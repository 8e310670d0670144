// See cpu_threads.h.
#include "runtime/cpu/cpu_threads.h"

#include <cstdlib>

#include "runtime/cpu/dnnl_gemm.h"
#include "runtime/cpu/parallel.h"
#include "src/util/check.h"

#if SHARDSIM_HAVE_OPENBLAS
extern "C" {
// OpenBLAS's own entry points (openblas_config.h / cblas.h of libopenblas-dev).
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}
#endif

namespace shardsim::runtime {

int SetCpuThreads(int threads) {
  CHECK(threads >= 1 && threads <= 256) << "CPU threads " << threads << " outside 1..256";
  SetBf16GemmThreads(threads);
  SetParallelThreads(threads);
#if SHARDSIM_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
  return openblas_get_num_threads();
#else
  return 1;
#endif
}

int CpuThreads() { return ParallelThreads(); }

bool CpuProductsUseBlas() {
#if SHARDSIM_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

bool SetDefaultCpuThreads() {
#if SHARDSIM_HAVE_OPENBLAS
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
#endif
  if (std::getenv("OMP_NUM_THREADS") == nullptr) SetBf16GemmThreads(1);
  return true;
}

}  // namespace shardsim::runtime
