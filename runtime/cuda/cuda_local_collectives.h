// CudaLocalCollectives: the Collectives of one process on one GPU (every group is this rank),
// the device-memory twin of backend/local_collectives.h: sums over one rank are the identity,
// gathers and scatters are device copies on the compute stream. Lets the CUDA backend run
// without MPI or NCCL (one-GPU runs, the kernel tests).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

class CudaLocalCollectives : public Collectives {
 public:
  explicit CudaLocalCollectives(cudaStream_t stream) : stream_(stream) {}

  int rank(Group) const override { return 0; }
  int size(Group) const override { return 1; }

  Status AllReduceSum(Group g, float* data, int64_t n) override;                      // no-op
  Status AllReduceSumHost(Group g, double* host, int64_t n) override;                 // no-op
  Status AllReduceMaxHost(Group g, double* host, int64_t n) override;                 // no-op
  Status ReduceScatterSum(Group g, const float* in, float* out, int64_t n) override;  // copy
  Status AllGather(Group g, const float* in, float* out, int64_t n) override;         // copy
  Status AllGatherHost(Group g, const double* in, double* out, int64_t n) override;   // copy

  // Errors: a one-rank group has no peer (Wait and Test accept only IallReduceSum handles and
  // CHECK-fail).
  StatusOr<int64_t> Isend(Group g, const float* data, int64_t n, int peer, int tag) override;
  // A one-rank all-reduce is done when issued: its handle completes at once.
  StatusOr<int64_t> IallReduceSum(Group g, float* data, int64_t n) override;
  Status Wait(int64_t handle) override;
  StatusOr<bool> Test(int64_t handle) override;
  Status Recv(Group g, float* data, int64_t n, int peer, int tag) override;
  Status Barrier(Group g) override;  // waits for the stream

 private:
  Status DeviceCopy(float* out, const float* in, int64_t n);
  cudaStream_t stream_;

 private:
  int64_t issued_ = 0;  // IallReduceSum handles are 1..issued_
};

}  // namespace shardsim::runtime
