// MpiCollectives: the Collectives of backend.h over the layout's MPI process groups, for
// host-memory backends (the CPU backend): every data pointer is a host pointer handed to MPI.
// fp32 and bf16 data as Communicator carries them (bf16 sums round each partial sum to bf16).
// Each wait is bounded by the communicators' timeout; errors name the rank, group and operation.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <unordered_map>

#include "runtime/backend/backend.h"
#include "runtime/mpi/communicator.h"

namespace shardsim::runtime {

class MpiCollectives : public Collectives {
 public:
  explicit MpiCollectives(ProcessGroups groups) : groups_(std::move(groups)) {}
  MpiCollectives(const MpiCollectives&) = delete;
  MpiCollectives& operator=(const MpiCollectives&) = delete;
  // Requests never waited for are released to complete on their own (MPI_Request_free): the
  // caller is ending on an error; their buffers must outlive the MPI job.
  ~MpiCollectives() override;

  const ProcessGroups& groups() const { return groups_; }
  int rank(Group g) const override { return comm(g).rank(); }
  int size(Group g) const override { return comm(g).size(); }

  Status AllReduce(Group g, void* data, int64_t n, DType type) override;
  Status ReduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                   DType type) override;
  Status AllReduceSumHost(Group g, double* host, int64_t n) override;
  Status AllReduceMaxHost(Group g, double* host, int64_t n) override;
  Status AllGatherHost(Group g, const double* in, double* out, int64_t n) override;

  // Handles are 1, 2, 3, ... in issue order; each completes once (an unknown handle is a
  // caller bug and CHECK-fails).
  StatusOr<int64_t> Send(Group g, const void* data, int64_t n, DType type, int peer,
                         int tag) override;
  Status Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) override;
  StatusOr<int64_t> IallReduce(Group g, void* data, int64_t n, DType type) override;  // MPI_Iallreduce
  StatusOr<int64_t> IreduceScatter(Group g, const void* in, void* out, int64_t n,
                                   DType type) override;  // MPI_Ireduce_scatter_block  // MPI_Ireduce_scatter_block
  StatusOr<int64_t> IallGatherOf(Group g, const void* in, void* out, int64_t n,
                                 DType type) override;  // MPI_Iallgather
  Status Wait(int64_t handle) override;
  StatusOr<bool> Test(int64_t handle) override;
  Status Barrier(Group g) override;

 private:
  const Communicator& comm(Group g) const;

  struct PendingSend {
    MPI_Request request;
    Group group;
    const char* op;  // "send", "all-reduce": for errors
  };

  ProcessGroups groups_;
  std::unordered_map<int64_t, PendingSend> pending_;
  // Keeps `request` (of op `op` on group g) pending under a new handle, which it returns.
  int64_t Track(MPI_Request request, Group g, const char* op);
  int64_t next_handle_ = 1;
};

}  // namespace shardsim::runtime
