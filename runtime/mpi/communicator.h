// Communicator: an MPI communicator for the CPU runtime, with errors returned (never MPI's
// default abort) and every blocking wait bounded by a timeout, so a dead peer or a broken
// link ends the job with a message naming the rank and the operation instead of a hang.
// ProcessGroups splits the world into the layout's TP, CP, DP and PP groups (MPI_Comm_split
// with the placement of src/layout/placement.h).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

#include "runtime/backend/backend.h"
#include "src/layout/layout.h"
#include "src/layout/placement.h"
#include "src/util/status.h"

namespace shardsim::runtime {

class Communicator {
 public:
  Communicator() = default;
  // MPI_COMM_WORLD with MPI_ERRORS_RETURN; MPI must be initialized.
  static StatusOr<Communicator> World(double timeout_s);
  // Ranks with the same `color` form one communicator, ordered by `key`.
  StatusOr<Communicator> Split(int color, int key, const std::string& name) const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }

  // Data of `type` (kFp32: float, kBf16: Bf16), `n` elements. fp32 sums are MPI_SUM on
  // MPI_FLOAT; bf16 data travels as MPI_UINT16_T and sums with a user-defined MPI_Op that adds
  // each pair in float and rounds the result to bf16 (ToBf16), as NCCL's bf16 sum does.
  //
  // Sum over the group, in place.
  Status AllReduceSum(void* data, size_t n, DType type) const;
  Status AllReduceSum(float* data, size_t n) const { return AllReduceSum(data, n, DType::kFp32); }
  Status AllReduceSum(double* data, size_t n) const;
  Status AllReduceMax(double* data, size_t n) const;
  // `in` holds size() blocks of `n`; block i summed over the group lands in rank i's `out`.
  Status ReduceScatterSum(const void* in, void* out, size_t n, DType type) const;
  Status ReduceScatterSum(const float* in, float* out, size_t n) const {
    return ReduceScatterSum(in, out, n, DType::kFp32);
  }
  // Each rank's `n` elements, concatenated in rank order into `out` (size() x n).
  Status AllGather(const void* in, void* out, size_t n, DType type) const;
  Status AllGather(const float* in, float* out, size_t n) const {
    return AllGather(in, out, n, DType::kFp32);
  }
  Status AllGather(const double* in, double* out, size_t n) const;
  // Blocks of send[p] elements to each rank p, recv[p] from each, in rank order (MPI_Alltoallv).
  Status AllToAllV(const void* in, const int* send, void* out, const int* recv, DType type) const;
  Status Send(const void* data, size_t n, DType type, int to, int tag) const;
  Status Send(const float* data, size_t n, int to, int tag) const {
    return Send(data, n, DType::kFp32, to, tag);
  }
  Status Recv(void* data, size_t n, DType type, int from, int tag) const;
  Status Recv(float* data, size_t n, int from, int tag) const {
    return Recv(data, n, DType::kFp32, from, tag);
  }
  Status Barrier() const;

  // A non-blocking send of `n` elements to `to`: `data` must stay unchanged until WaitRequest
  // on the returned request succeeds.
  StatusOr<MPI_Request> Isend(const void* data, size_t n, DType type, int to, int tag) const;
  // A non-blocking in-place sum of n elements of `type` over the group (MPI_Iallreduce; bf16
  // with the bf16 sum op); complete it with WaitRequest or TestRequest, leaving `data`
  // untouched until then.
  StatusOr<MPI_Request> IallReduceSum(void* data, size_t n, DType type) const;
  // MPI_Ireduce_scatter_block of `type`: size() blocks of n in `in`, this rank's sum into `out`.
  StatusOr<MPI_Request> IreduceScatterSum(const void* in, void* out, size_t n, DType type) const;
  // MPI_Iallgather of n elements of `type` from every rank.
  StatusOr<MPI_Request> IallGather(const void* in, void* out, size_t n, DType type) const;
  // Waits for `request` until the timeout; the error names the rank, this group and `op`.
  Status WaitRequest(MPI_Request* request, const char* op) const { return Wait(request, op); }
  // MPI_Test: *done set when the request completed (and was freed by MPI).
  Status TestRequest(MPI_Request* request, int* done, const char* op) const;

 private:
  // The MPI datatype of `type`'s elements, and the MPI_Op that sums them.
  struct MpiType {
    MPI_Datatype datatype;
    MPI_Op sum;
  };
  StatusOr<MpiType> TypeOf(DType type) const;
  // Waits for `request` until the timeout; the error names the operation and the ranks.
  Status Wait(MPI_Request* request, const char* op) const;
  Status Error(int code, const char* op) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  int world_rank_ = 0;
  double timeout_s_ = 60;
  std::string name_ = "world";
};

// The communicators one rank uses under a layout.
struct ProcessGroups {
  Communicator world, tp, cp, dp, pp, ep, edp, etp;  // dp: DP x CP (backend.h's Group::kDp)
  RankCoord coord;
  const Communicator& Of(Group g) const;
  // The world size must equal the layout's tp x pp x dp x cp (checked before any split).
  static StatusOr<ProcessGroups> Create(const Layout& l, double timeout_s);
};

}  // namespace shardsim::runtime
