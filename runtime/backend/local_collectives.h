// LocalCollectives: the Collectives of a single process, where every group is this one rank.
// Lets a backend run the executor without MPI or NCCL: sums over one rank are the identity,
// gathers and scatters are copies of device memory, and there is no peer to send to.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

class LocalCollectives : public Collectives {
 public:
  // Copies `bytes` between two device buffers (the backend's Memory::Copy).
  using DeviceCopy = std::function<void(void* dst, const void* src, int64_t bytes)>;
  // Without `copy`, device memory is host memory and copies are std::memcpy.
  explicit LocalCollectives(DeviceCopy copy = nullptr);

  int rank(Group) const override { return 0; }
  int size(Group) const override { return 1; }

  // Data of either type: the all-reduce is a no-op; the reduce-scatter and all-gather copy
  // n * ElementBytes(type) bytes (one block in, the same block out).
  Status AllReduce(Group g, void* data, int64_t n, DType type) override;
  Status ReduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                   DType type) override;
  Status AllReduceSumHost(Group g, double* host, int64_t n) override;                // no-op
  Status AllReduceMaxHost(Group g, double* host, int64_t n) override;                // no-op
  Status AllGatherHost(Group g, const double* in, double* out, int64_t n) override;  // copy

  // Errors: a one-rank group has no peer. Wait and Test accept only the non-blocking collectives' handles and
  // CHECK-fail on others.
  StatusOr<int64_t> Send(Group g, const void* data, int64_t n, DType type, int peer,
                         int tag) override;
  Status Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) override;
  // A one-rank all-reduce is done when issued: its handle completes at once.
  StatusOr<int64_t> IallReduce(Group g, void* data, int64_t n, DType type) override;
  // A copy, done when issued (as ReduceScatter over one rank).
  StatusOr<int64_t> IreduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  StatusOr<int64_t> IallGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status Wait(int64_t handle) override;
  StatusOr<bool> Test(int64_t handle) override;
  Status Barrier(Group g) override;  // ok

 private:
  DeviceCopy copy_;
  int64_t issued_ = 0;  // IallReduce / IreduceScatter / IallGatherOf handles are 1..issued_
};

}  // namespace shardsim::runtime
