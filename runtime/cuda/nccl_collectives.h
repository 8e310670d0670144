// NcclCollectives: the Collectives of backend.h for the CUDA backend: device buffers reduced,
// gathered and sent with NCCL, one communicator per layout group, bootstrapped over the MPI
// ProcessGroups of runtime/mpi (which also carry the small host-double reductions).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include "runtime/backend/backend.h"
#include "runtime/mpi/communicator.h"

namespace shardsim::runtime {

// Ordering and waiting:
//  - Every operation is enqueued behind the work issued so far on the compute stream (an event
//    recorded there, waited on by the communication stream), and later compute waits for it.
//  - Collectives and Receive return once the operation has finished (as MpiCollectives' do), by
//    polling its completion event and ncclCommGetAsyncError; past `timeout_s` the communicator
//    is aborted and the error names the rank, group and operation. Overlap is future work.
//  - Sends go on the pp group only, to its ring neighbours (the executor's pipeline), each
//    directed pair (me -> peer) on a two-rank communicator and stream of its own, so a send
//    never queues behind a receive (MPI's Isend semantics; one NCCL stream would deadlock
//    1F1B). NCCL has no tags: messages are matched in issue order per channel, so each
//    directed pair has one channel per message class, tag % kClasses (the executor puts
//    activations on even tags and gradients on odd ones, and issues each class in the same
//    order on both sides; mixing the two on one FIFO could swap equal-sized messages under
//    the interleaved schedule).
class NcclCollectives : public Collectives {
 public:
  // Binds to the current CUDA device. Group communicators are created in a fixed order on all
  // ranks (world, tp, cp, dp, pp, ep, edp, then the pp pairs), each from a unique id made by the group's
  // rank 0 and shared over the group's MPI communicator. NCCL's own initialization is not
  // bounded by the timeout; the MPI exchange before it is.
  static StatusOr<std::unique_ptr<NcclCollectives>> Create(ProcessGroups groups,
                                                           cudaStream_t compute, double timeout_s);
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;
  ~NcclCollectives() override;

  int rank(Group g) const override { return mpi(g).rank(); }
  int size(Group g) const override { return mpi(g).size(); }

  // Device data as ncclFloat32 (kFp32) or ncclBfloat16 (kBf16); a bf16 sum is NCCL's (each
  // partial sum rounded to bf16).
  Status AllReduce(Group g, void* data, int64_t n, DType type) override;
  Status ReduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                   DType type) override;
  Status AllReduceSumHost(Group g, double* host, int64_t n) override;  // MPI
  Status AllReduceMaxHost(Group g, double* host, int64_t n) override;  // MPI
  Status AllGatherHost(Group g, const double* in, double* out, int64_t n) override;  // MPI

  StatusOr<int64_t> Send(Group g, const void* data, int64_t n, DType type, int peer,
                         int tag) override;
  // On the group's communication stream, not waited for: the overlap the layout asks for.
  StatusOr<int64_t> IallReduce(Group g, void* data, int64_t n, DType type) override;
  StatusOr<int64_t> IreduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  StatusOr<int64_t> IallGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status Wait(int64_t handle) override;
  StatusOr<bool> Test(int64_t handle) override;
  Status Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) override;
  // Finishes this rank's GPU work, then an MPI barrier.
  Status Barrier(Group g) override;

 private:
  struct Channel {  // one communicator and the stream its operations run on
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };
  static constexpr int kClasses = 2;  // message classes per directed pair (tag % kClasses)
  using ChannelKey = std::pair<int, int>;  // (pp peer, class)
  struct Pending {  // an issued Send or non-blocking collective
    cudaEvent_t done;
    ncclComm_t comm;  // polled for asynchronous errors
    Group group;
    const char* op;
    int64_t n;
    DType type;
  };

  NcclCollectives(ProcessGroups groups, cudaStream_t compute, double timeout_s)
      : groups_(std::move(groups)), compute_(compute), timeout_s_(timeout_s) {}
  Status Init();
  const Communicator& mpi(Group g) const;
  // Orders `channel`'s stream after the compute stream's work so far.
  Status After(const Channel& channel);
  // Records completion on `channel`, makes the compute stream wait for it, and (when `wait`)
  // polls it until done, an NCCL error, or the timeout. `done` receives the event if non-null
  // (then the caller owns it and `wait` is false).
  // A non-blocking collective on group g's channel: `call` enqueues it there (after the compute
  // stream's work so far); the handle completes with it.
  StatusOr<int64_t> Issue(Group g, const char* op, int64_t n, DType type,
                          const std::function<ncclResult_t(const Channel&)>& call);
  Status Finish(const Channel& channel, Group g, const char* op, int64_t n, DType type, bool wait,
                cudaEvent_t* done = nullptr);
  Status WaitEvent(cudaEvent_t event, ncclComm_t comm, Group g, const char* op, int64_t n,
                   DType type);
  // ncclCommAbort frees `comm`: every Channel and Pending holding it forgets it (nullptr), so
  // neither a later operation nor the destructor touches the freed communicator.
  void Abort(ncclComm_t comm);
  // "rank R (rank r of the G group): NCCL <op> of <n> <type> elements <what>".
  Status Error(Group g, const char* op, int64_t n, DType type, const std::string& what) const;

  ProcessGroups groups_;
  cudaStream_t compute_;
  double timeout_s_;
  std::array<Channel, kGroupCount> groups_nccl_{};  // by Group
  std::map<ChannelKey, Channel> send_to_;    // me-to-peer pair, per class
  std::map<ChannelKey, Channel> recv_from_;  // peer-to-me pair, per class
  std::unordered_map<int64_t, Pending> pending_;
  int64_t next_handle_ = 1;
  bool aborted_ = false;  // a communicator failed: the others are aborted too, not destroyed
};

}  // namespace shardsim::runtime
