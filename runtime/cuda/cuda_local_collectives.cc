// See cuda_local_collectives.h.
#include "runtime/cuda/cuda_local_collectives.h"

#include <algorithm>
#include <string>

#include "runtime/cuda/cuda_check.h"
#include "src/util/check.h"

namespace shardsim::runtime {

Status CudaLocalCollectives::DeviceCopy(float* out, const float* in, int64_t n) {
  if (n > 0 && out != in) {
    SHARDSIM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out, in, static_cast<size_t>(n) * sizeof(float),
                                                  cudaMemcpyDeviceToDevice, stream_));
  }
  return Status::Ok();
}

Status CudaLocalCollectives::AllReduceSum(Group, float*, int64_t) { return Status::Ok(); }
Status CudaLocalCollectives::AllReduceSumHost(Group, double*, int64_t) { return Status::Ok(); }
Status CudaLocalCollectives::AllReduceMaxHost(Group, double*, int64_t) { return Status::Ok(); }

Status CudaLocalCollectives::ReduceScatterSum(Group, const float* in, float* out, int64_t n) {
  return DeviceCopy(out, in, n);
}

Status CudaLocalCollectives::AllGather(Group, const float* in, float* out, int64_t n) {
  return DeviceCopy(out, in, n);
}

Status CudaLocalCollectives::AllGatherHost(Group, const double* in, double* out, int64_t n) {
  std::copy(in, in + n, out);
  return Status::Ok();
}

StatusOr<int64_t> CudaLocalCollectives::Isend(Group g, const float*, int64_t, int peer, int) {
  return Status::Error(std::string("send to rank ") + std::to_string(peer) + " of the " +
                       GroupName(g) + " group: a single-process run has no peer");
}

StatusOr<int64_t> CudaLocalCollectives::IallReduceSum(Group, float*, int64_t) { return ++issued_; }

Status CudaLocalCollectives::Wait(int64_t handle) {
  CHECK(handle >= 1 && handle <= issued_) << "Wait(" << handle << "): not an IallReduceSum handle";
  return Status::Ok();
}

StatusOr<bool> CudaLocalCollectives::Test(int64_t handle) {
  CHECK(handle >= 1 && handle <= issued_) << "Test(" << handle << "): not an IallReduceSum handle";
  return true;
}

Status CudaLocalCollectives::Recv(Group g, float*, int64_t, int peer, int) {
  return Status::Error(std::string("recv from rank ") + std::to_string(peer) + " of the " +
                       GroupName(g) + " group: a single-process run has no peer");
}

Status CudaLocalCollectives::Barrier(Group) {
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

}  // namespace shardsim::runtime
