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

  // Sum over the group, in place. `n` floats.
  Status AllReduceSum(float* data, size_t n) const;
  Status AllReduceSum(double* data, size_t n) const;
  Status AllReduceMax(double* data, size_t n) const;
  // `in` holds size() blocks of `n` floats; block i summed over the group lands in rank i's `out`.
  Status ReduceScatterSum(const float* in, float* out, size_t n) const;
  // Each rank's `n` floats, concatenated in rank order into `out` (size() x n).
  Status AllGather(const float* in, float* out, size_t n) const;
  Status AllGather(const double* in, double* out, size_t n) const;
  Status Send(const float* data, size_t n, int to, int tag) const;
  Status Recv(float* data, size_t n, int from, int tag) const;
  Status Barrier() const;

  // A non-blocking send of `n` floats to `to`: `data` must stay unchanged until WaitRequest
  // on the returned request succeeds.
  StatusOr<MPI_Request> Isend(const float* data, size_t n, int to, int tag) const;
  // A non-blocking in-place sum over the group (MPI_Iallreduce); complete it with WaitRequest
  // or TestRequest, leaving `data` untouched until then.
  StatusOr<MPI_Request> IallReduceSum(float* data, size_t n) const;
  // Waits for `request` until the timeout; the error names the rank, this group and `op`.
  Status WaitRequest(MPI_Request* request, const char* op) const { return Wait(request, op); }
  // MPI_Test: *done set when the request completed (and was freed by MPI).
  Status TestRequest(MPI_Request* request, int* done, const char* op) const;

 private:
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
  Communicator world, tp, cp, dp, pp;
  RankCoord coord;
  const Communicator& Of(Group g) const;
  // The world size must equal the layout's tp x pp x dp x cp (checked before any split).
  static StatusOr<ProcessGroups> Create(const Layout& l, double timeout_s);
};

}  // namespace shardsim::runtime
