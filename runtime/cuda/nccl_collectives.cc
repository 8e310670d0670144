// See nccl_collectives.h.
#include "runtime/cuda/nccl_collectives.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/nccl_check.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// ncclUniqueId is 128 opaque bytes; Communicator exchanges doubles, so the id travels as 16 of
// them, bytes copied in and out (MPI moves them without arithmetic).
constexpr int kIdDoubles = sizeof(ncclUniqueId) / sizeof(double);
static_assert(sizeof(ncclUniqueId) % sizeof(double) == 0);

// Each member of `comm` gets the id made by its rank 0 (an all-gather of one id per rank of
// which all but rank 0's are zero: Communicator offers no broadcast).
StatusOr<ncclUniqueId> ShareId(const Communicator& comm) {
  std::vector<double> mine(kIdDoubles, 0.0), all(static_cast<size_t>(kIdDoubles) * comm.size());
  if (comm.rank() == 0) {
    ncclUniqueId id;
    SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    std::memcpy(mine.data(), &id, sizeof(id));
  }
  SHARDSIM_RETURN_IF_ERROR(comm.AllGather(mine.data(), all.data(), kIdDoubles));
  ncclUniqueId id;
  std::memcpy(&id, all.data(), sizeof(id));
  return id;
}

// NCCL's element type for a runtime storage type; the runtime stores only fp32 and bf16.
ncclDataType_t NcclType(DType type) {
  CHECK(type == DType::kFp32 || type == DType::kBf16)
      << "NCCL collectives carry fp32 or bf16, not " << DTypeName(type);
  return type == DType::kFp32 ? ncclFloat32 : ncclBfloat16;
}

StatusOr<cudaStream_t> NewStream() {
  cudaStream_t s = nullptr;
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<NcclCollectives>> NcclCollectives::Create(ProcessGroups groups,
                                                                   cudaStream_t compute,
                                                                   double timeout_s) {
  std::unique_ptr<NcclCollectives> c(new NcclCollectives(std::move(groups), compute, timeout_s));
  SHARDSIM_RETURN_IF_ERROR(c->Init());
  return c;
}

Status NcclCollectives::Init() {
  for (int g = 0; g < kGroupCount; ++g) {
    const Communicator& comm = mpi(static_cast<Group>(g));
    SHARDSIM_ASSIGN_OR_RETURN(ncclUniqueId id, ShareId(comm));
    Channel& ch = groups_nccl_[g];
    SHARDSIM_ASSIGN_OR_RETURN(ch.stream, NewStream());
    SHARDSIM_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&ch.comm, comm.size(), id, comm.rank()));
  }
  // Pipeline pairs: rank a makes the ids of its outgoing pairs, (a -> next) in slot 0 and
  // (a -> prev) in slot 1, one per message class (kClasses), and the pp group all-gathers them.
  const Communicator& pp = groups_.pp;
  const int p = pp.size(), me = pp.rank();
  if (p == 1) return Status::Ok();
  auto next = [p](int a) { return (a + 1) % p; };
  auto prev = [p](int a) { return (a + p - 1) % p; };
  constexpr int kIds = 2 * kClasses;  // per rank
  std::vector<double> mine(kIds * kIdDoubles, 0.0), all(static_cast<size_t>(kIds * kIdDoubles) * p);
  for (int i = 0; i < kIds; ++i) {
    ncclUniqueId id;
    SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    std::memcpy(mine.data() + i * kIdDoubles, &id, sizeof(id));
  }
  SHARDSIM_RETURN_IF_ERROR(pp.AllGather(mine.data(), all.data(), kIds * kIdDoubles));
  // Directed pairs in lexicographic order (a, b), classes in order within a pair: every rank
  // initializes its own pairs in that order, so the smallest pair not yet built is always the
  // next one for both its members and the blocking inits cannot deadlock. In a pair, the
  // sender is rank 0.
  for (int a = 0; a < p; ++a) {
    std::vector<std::pair<int, int>> outgoing = {{next(a), 0}};  // (b, slot)
    if (prev(a) != next(a)) outgoing.push_back({prev(a), 1});
    if (outgoing.size() == 2 && outgoing[1].first < outgoing[0].first) {
      std::swap(outgoing[0], outgoing[1]);
    }
    for (const auto& [b, slot] : outgoing) {
      if (me != a && me != b) continue;
      for (int kind = 0; kind < kClasses; ++kind) {
        ncclUniqueId id;
        const size_t at = static_cast<size_t>(a) * kIds + slot * kClasses + kind;
        std::memcpy(&id, all.data() + at * kIdDoubles, sizeof(id));
        Channel ch;
        SHARDSIM_ASSIGN_OR_RETURN(ch.stream, NewStream());
        SHARDSIM_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&ch.comm, 2, id, me == a ? 0 : 1));
        (me == a ? send_to_[{b, kind}] : recv_from_[{a, kind}]) = ch;
      }
    }
  }
  return Status::Ok();
}

NcclCollectives::~NcclCollectives() {
  // Unwaited sends, or a communicator already aborted, mean the caller is ending on an error:
  // abort rather than block on operations a failed peer will never complete.
  const bool abort = aborted_ || !pending_.empty();
  for (auto& [handle, send] : pending_) (void)cudaEventDestroy(send.done);
  auto close = [abort](Channel& ch) {
    if (ch.comm != nullptr) (void)(abort ? ncclCommAbort(ch.comm) : ncclCommDestroy(ch.comm));
    if (ch.stream != nullptr) (void)cudaStreamDestroy(ch.stream);
  };
  for (auto& [peer, ch] : send_to_) close(ch);
  for (auto& [peer, ch] : recv_from_) close(ch);
  for (Channel& ch : groups_nccl_) close(ch);
}

const Communicator& NcclCollectives::mpi(Group g) const {
  return groups_.Of(g);
}

Status NcclCollectives::Error(Group g, const char* op, int64_t n, DType type,
                              const std::string& what) const {
  return Status::Error("rank " + std::to_string(groups_.world.rank()) + " (rank " +
                       std::to_string(mpi(g).rank()) + " of the " + GroupName(g) +
                       " group): NCCL " + op + " of " + std::to_string(n) + " " +
                       DTypeName(type) + " elements " + what);
}

Status NcclCollectives::After(const Channel& ch) {
  cudaEvent_t ready;
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready, compute_));
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(ch.stream, ready, 0));
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaEventDestroy(ready));  // released once the wait is done
  return Status::Ok();
}

void NcclCollectives::Abort(ncclComm_t comm) {
  if (comm == nullptr) return;
  (void)ncclCommAbort(comm);
  aborted_ = true;
  auto forget = [comm](Channel& ch) {
    if (ch.comm == comm) ch.comm = nullptr;
  };
  for (auto& [key, ch] : send_to_) forget(ch);
  for (auto& [key, ch] : recv_from_) forget(ch);
  for (Channel& ch : groups_nccl_) forget(ch);
  for (auto& [handle, p] : pending_) {
    if (p.comm == comm) p.comm = nullptr;
  }
}

Status NcclCollectives::WaitEvent(cudaEvent_t event, ncclComm_t comm, Group g, const char* op,
                                  int64_t n, DType type) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (true) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) {
      return Error(g, op, n, type, std::string("failed on the device: ") + cudaGetErrorString(e));
    }
    if (comm == nullptr) {
      return Error(g, op, n, type, "failed: its communicator was aborted earlier");
    }
    ncclResult_t async = ncclSuccess;
    SHARDSIM_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      Abort(comm);
      return Error(g, op, n, type, std::string("failed: ") + ncclGetErrorString(async));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      Abort(comm);  // frees the stuck kernel; the job is ending with this error
      return Error(
          g, op, n, type,
          "did not complete within " + std::to_string(timeout_s_) + " s (a peer died or is stuck)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status NcclCollectives::Finish(const Channel& ch, Group g, const char* op, int64_t n, DType type,
                               bool wait, cudaEvent_t* done_out) {
  cudaEvent_t done;
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(done, ch.stream));
  if (done_out != nullptr) {
    *done_out = done;
    return Status::Ok();
  }
  Status st = cudaStreamWaitEvent(compute_, done, 0) == cudaSuccess
                  ? Status::Ok()
                  : Error(g, op, n, type, "could not be ordered before the compute stream");
  if (st.ok() && wait) st = WaitEvent(done, ch.comm, g, op, n, type);
  (void)cudaEventDestroy(done);
  return st;
}

Status NcclCollectives::AllReduce(Group g, void* data, int64_t n, DType type) {
  const ncclDataType_t nccl_type = NcclType(type);
  if (n == 0) return Status::Ok();
  const Channel& ch = groups_nccl_[static_cast<int>(g)];
  SHARDSIM_RETURN_IF_ERROR(After(ch));
  SHARDSIM_NCCL_RETURN_IF_ERROR(
      ncclAllReduce(data, data, static_cast<size_t>(n), nccl_type, ncclSum, ch.comm, ch.stream));
  return Finish(ch, g, "all-reduce", n, type, /*wait=*/true);
}

Status NcclCollectives::ReduceScatter(Group g, const void* in, void* out, int64_t n, DType type) {
  const ncclDataType_t nccl_type = NcclType(type);
  if (n == 0) return Status::Ok();
  const Channel& ch = groups_nccl_[static_cast<int>(g)];
  SHARDSIM_RETURN_IF_ERROR(After(ch));
  SHARDSIM_NCCL_RETURN_IF_ERROR(
      ncclReduceScatter(in, out, static_cast<size_t>(n), nccl_type, ncclSum, ch.comm, ch.stream));
  return Finish(ch, g, "reduce-scatter", n, type, /*wait=*/true);
}

Status NcclCollectives::AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) {
  const ncclDataType_t nccl_type = NcclType(type);
  if (n == 0) return Status::Ok();
  const Channel& ch = groups_nccl_[static_cast<int>(g)];
  SHARDSIM_RETURN_IF_ERROR(After(ch));
  SHARDSIM_NCCL_RETURN_IF_ERROR(
      ncclAllGather(in, out, static_cast<size_t>(n), nccl_type, ch.comm, ch.stream));
  return Finish(ch, g, "all-gather", n, type, /*wait=*/true);
}

// ncclSend / ncclRecv to and from every member in one group call (NCCL's all-to-all idiom).
Status NcclCollectives::AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                                  DType type) {
  const ncclDataType_t nccl_type = NcclType(type);
  const Channel& ch = groups_nccl_[static_cast<int>(g)];
  const int members = size(g);
  const size_t e = static_cast<size_t>(ElementBytes(type));
  int64_t total = 0;
  SHARDSIM_RETURN_IF_ERROR(After(ch));
  SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  size_t at_send = 0, at_recv = 0;
  for (int p = 0; p < members; ++p) {
    if (send[p] > 0) {
      SHARDSIM_NCCL_RETURN_IF_ERROR(ncclSend(static_cast<const char*>(in) + at_send * e, static_cast<size_t>(send[p]),
                                             nccl_type, p, ch.comm, ch.stream));
    }
    if (recv[p] > 0) {
      SHARDSIM_NCCL_RETURN_IF_ERROR(ncclRecv(static_cast<char*>(out) + at_recv * e, static_cast<size_t>(recv[p]),
                                             nccl_type, p, ch.comm, ch.stream));
    }
    at_send += static_cast<size_t>(send[p]);
    at_recv += static_cast<size_t>(recv[p]);
    total += send[p];
  }
  SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGroupEnd());
  return Finish(ch, g, "all-to-all", total, type, /*wait=*/true);
}

Status NcclCollectives::AllReduceSumHost(Group g, double* host, int64_t n) {
  return mpi(g).AllReduceSum(host, static_cast<size_t>(n));
}

Status NcclCollectives::AllReduceMaxHost(Group g, double* host, int64_t n) {
  return mpi(g).AllReduceMax(host, static_cast<size_t>(n));
}

Status NcclCollectives::AllGatherHost(Group g, const double* in, double* out, int64_t n) {
  return mpi(g).AllGather(in, out, static_cast<size_t>(n));
}

StatusOr<int64_t> NcclCollectives::Send(Group g, const void* data, int64_t n, DType type, int peer,
                                        int tag) {
  const ncclDataType_t nccl_type = NcclType(type);
  auto it = send_to_.find({peer, tag % kClasses});
  if (g != Group::kPp || it == send_to_.end()) {
    return Error(
        g, "send", n, type,
        "to rank " + std::to_string(peer) + ": the CUDA backend sends only to pp-ring neighbours");
  }
  const Channel& ch = it->second;
  SHARDSIM_RETURN_IF_ERROR(After(ch));
  SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  SHARDSIM_NCCL_RETURN_IF_ERROR(
      ncclSend(data, static_cast<size_t>(n), nccl_type, /*peer=*/1, ch.comm, ch.stream));
  SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGroupEnd());
  cudaEvent_t done = nullptr;
  SHARDSIM_RETURN_IF_ERROR(Finish(ch, g, "send", n, type, /*wait=*/false, &done));
  const int64_t handle = next_handle_++;
  pending_.emplace(handle, Pending{done, ch.comm, Group::kPp, "send", n, type});
  return handle;
}

StatusOr<int64_t> NcclCollectives::Issue(Group g, const char* op, int64_t n, DType type,
                                         const std::function<ncclResult_t(const Channel&)>& call) {
  const Channel& ch = groups_nccl_[static_cast<int>(g)];
  SHARDSIM_RETURN_IF_ERROR(After(ch));
  SHARDSIM_NCCL_RETURN_IF_ERROR(call(ch));
  cudaEvent_t done = nullptr;
  SHARDSIM_RETURN_IF_ERROR(Finish(ch, g, op, n, type, /*wait=*/false, &done));
  const int64_t handle = next_handle_++;
  pending_.emplace(handle, Pending{done, ch.comm, g, op, n, type});
  return handle;
}

StatusOr<int64_t> NcclCollectives::IallReduce(Group g, void* data, int64_t n, DType type) {
  const ncclDataType_t nccl_type = NcclType(type);
  return Issue(g, "all-reduce", n, type, [&](const Channel& ch) {
    return ncclAllReduce(data, data, static_cast<size_t>(n), nccl_type, ncclSum, ch.comm, ch.stream);
  });
}

StatusOr<int64_t> NcclCollectives::IreduceScatter(Group g, const void* in, void* out, int64_t n,
                                                 DType type) {
  const ncclDataType_t nccl_type = NcclType(type);
  return Issue(g, "reduce-scatter", n, type, [&](const Channel& ch) {
    return ncclReduceScatter(in, out, static_cast<size_t>(n), nccl_type, ncclSum, ch.comm, ch.stream);
  });
}

StatusOr<int64_t> NcclCollectives::IallGatherOf(Group g, const void* in, void* out, int64_t n,
                                                DType type) {
  const ncclDataType_t nccl_type = NcclType(type);
  return Issue(g, "all-gather", n, type, [&](const Channel& ch) {
    return ncclAllGather(in, out, static_cast<size_t>(n), nccl_type, ch.comm, ch.stream);
  });
}

Status NcclCollectives::Wait(int64_t handle) {
  auto it = pending_.find(handle);
  CHECK(it != pending_.end()) << "Wait(" << handle << "): no pending request with this handle";
  const Pending p = it->second;
  pending_.erase(it);
  Status st = WaitEvent(p.done, p.comm, p.group, p.op, p.n, p.type);
  (void)cudaEventDestroy(p.done);
  return st;
}

StatusOr<bool> NcclCollectives::Test(int64_t handle) {
  auto it = pending_.find(handle);
  CHECK(it != pending_.end()) << "Test(" << handle << "): no pending request with this handle";
  const cudaError_t e = cudaEventQuery(it->second.done);
  if (e == cudaErrorNotReady) {
    // Not done: a failed peer shows as an asynchronous NCCL error, which Wait would report;
    // report it here too rather than testing a stuck request forever.
    ncclResult_t async = ncclSuccess;
    if (it->second.comm == nullptr) {
      const Pending p = it->second;
      pending_.erase(it);
      (void)cudaEventDestroy(p.done);
      return Error(p.group, p.op, p.n, p.type, "failed: its communicator was aborted earlier");
    }
    if (ncclCommGetAsyncError(it->second.comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      const Pending p = it->second;
      pending_.erase(it);
      (void)cudaEventDestroy(p.done);
      Abort(p.comm);
      return Error(p.group, p.op, p.n, p.type,
                   std::string("failed: ") + ncclGetErrorString(async));
    }
    return false;
  }
  const Pending p = it->second;
  pending_.erase(it);
  (void)cudaEventDestroy(p.done);
  if (e != cudaSuccess) {
    return Error(p.group, p.op, p.n, p.type,
                 std::string("failed on the device: ") + cudaGetErrorString(e));
  }
  return true;
}

Status NcclCollectives::Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) {
  const ncclDataType_t nccl_type = NcclType(type);
  auto it = recv_from_.find({peer, tag % kClasses});
  if (g != Group::kPp || it == recv_from_.end()) {
    return Error(g, "recv", n, type,
                 "from rank " + std::to_string(peer) +
                     ": the CUDA backend receives only from pp-ring neighbours");
  }
  const Channel& ch = it->second;
  SHARDSIM_RETURN_IF_ERROR(After(ch));
  SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  SHARDSIM_NCCL_RETURN_IF_ERROR(
      ncclRecv(data, static_cast<size_t>(n), nccl_type, /*peer=*/0, ch.comm, ch.stream));
  SHARDSIM_NCCL_RETURN_IF_ERROR(ncclGroupEnd());
  return Finish(ch, g, "recv", n, type, /*wait=*/true);
}

Status NcclCollectives::Barrier(Group g) {
  SHARDSIM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_));
  return mpi(g).Barrier();
}

}  // namespace shardsim::runtime
