// See local_collectives.h.
#include "runtime/backend/local_collectives.h"

#include <cstring>
#include <string>
#include <utility>

#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

void CopyBlock(void* out, const void* in, int64_t n, size_t element) {
  CHECK(n >= 0) << n;
  if (n > 0 && out != in) std::memcpy(out, in, static_cast<size_t>(n) * element);
}

Status NoPeer(const char* op, Group g, int peer) {
  return Status::Error(std::string(op) + " to/from rank " + std::to_string(peer) + " of the " +
                       GroupName(g) +
                       " group: no peer in a one-rank group (LocalCollectives is a single "
                       "process; run under mpirun with MPI collectives for more ranks)");
}

}  // namespace

LocalCollectives::LocalCollectives(DeviceCopy copy) : copy_(std::move(copy)) {
  if (!copy_) copy_ = [](void* dst, const void* src, int64_t bytes) { CopyBlock(dst, src, bytes, 1); };
}

Status LocalCollectives::AllReduce(Group, void*, int64_t, DType type) {
  (void)ElementBytes(type);  // CHECKs the type, as the other collectives do
  return Status::Ok();
}
Status LocalCollectives::AllReduceSumHost(Group, double*, int64_t) { return Status::Ok(); }
Status LocalCollectives::AllReduceMaxHost(Group, double*, int64_t) { return Status::Ok(); }

Status LocalCollectives::ReduceScatter(Group, const void* in, void* out, int64_t n, DType type) {
  CHECK(n >= 0) << n;
  if (n > 0 && out != in) copy_(out, in, n * ElementBytes(type));
  return Status::Ok();
}

Status LocalCollectives::AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) {
  return ReduceScatter(g, in, out, n, type);  // one block in, the same block out
}

Status LocalCollectives::AllToAllV(Group, const void* in, const int64_t* send, void* out, const int64_t* recv,
                                   DType type) {
  CHECK(send[0] == recv[0]) << "one rank sends itself " << send[0] << " elements but receives " << recv[0];
  if (send[0] > 0 && out != in) copy_(out, in, send[0] * ElementBytes(type));
  return Status::Ok();
}

Status LocalCollectives::AllGatherHost(Group, const double* in, double* out, int64_t n) {
  CopyBlock(out, in, n, sizeof(double));
  return Status::Ok();
}

StatusOr<int64_t> LocalCollectives::Send(Group g, const void*, int64_t, DType, int peer, int) {
  return NoPeer("send", g, peer);
}

StatusOr<int64_t> LocalCollectives::IallReduce(Group, void*, int64_t, DType) { return ++issued_; }

StatusOr<int64_t> LocalCollectives::IallGatherOf(Group g, const void* in, void* out, int64_t n,
                                                  DType type) {
  SHARDSIM_RETURN_IF_ERROR(AllGatherOf(g, in, out, n, type));
  return ++issued_;
}

StatusOr<int64_t> LocalCollectives::IreduceScatter(Group g, const void* in, void* out, int64_t n,
                                                    DType type) {
  SHARDSIM_RETURN_IF_ERROR(ReduceScatter(g, in, out, n, type));
  return ++issued_;
}

Status LocalCollectives::Wait(int64_t handle) {
  CHECK(handle >= 1 && handle <= issued_) << "Wait(" << handle << "): not a handle of a non-blocking collective";
  return Status::Ok();
}

StatusOr<bool> LocalCollectives::Test(int64_t handle) {
  CHECK(handle >= 1 && handle <= issued_) << "Test(" << handle << "): not a handle of a non-blocking collective";
  return true;
}

Status LocalCollectives::Receive(Group g, void*, int64_t, DType, int peer, int) {
  return NoPeer("recv", g, peer);
}

Status LocalCollectives::Barrier(Group) { return Status::Ok(); }

}  // namespace shardsim::runtime
