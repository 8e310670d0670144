// The threads one process's CPU matrix products use: OpenBLAS's (CMakeLists.txt, SHARDSIM_BLAS)
// for fp32 and oneDNN's OpenMP threads for bf16 (SHARDSIM_DNNL, dnnl_gemm.h), 1 by default (one
// MPI rank a core, as `shardsim run` is launched) unless the environment sets
// OPENBLAS_NUM_THREADS or OMP_NUM_THREADS; `run --threads N` gives each rank N of both, and N to
// the element-wise kernels (parallel.h). A build without OpenBLAS runs Eigen's own fp32 products
// on one thread whatever is asked.
#pragma once

namespace shardsim::runtime {

// Sets the threads (1..256; CHECK-fails outside) of all three: OpenBLAS's, oneDNN's and the
// element-wise kernels' (parallel.h). Returns what OpenBLAS will use (1 without it).
int SetCpuThreads(int threads);
// The threads SetCpuThreads set (1 until it is called).
int CpuThreads();
// Whether products go through OpenBLAS (the build found it).
bool CpuProductsUseBlas();
// 1 thread unless OPENBLAS_NUM_THREADS (OMP_NUM_THREADS for oneDNN) is set: OpenBLAS and OpenMP
// would otherwise take every core in every process, and two ranks on two cores would each start two. Run at load by linear.cc, whose
// products every CPU training path calls.
bool SetDefaultCpuThreads();

}  // namespace shardsim::runtime
