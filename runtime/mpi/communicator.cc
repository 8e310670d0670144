// See communicator.h.
#include "runtime/mpi/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/backend/bf16.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// The bf16 sum as an MPI user function: inout[i] = in[i] + inout[i], added in float and
// rounded once to bf16 (so every partial sum of a reduction is a bf16 value, as in NCCL).
void Bf16Sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const Bf16* a = static_cast<const Bf16*>(in);
  Bf16* b = static_cast<Bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = ToBf16(ToFloat(a[i]) + ToFloat(b[i]));
}

// The attribute delete callback that frees the bf16 sum: MPI_Finalize deletes MPI_COMM_SELF's
// attributes before anything else (MPI 3.1, sec. 8.7.1), so the op is freed while MPI is
// still up, whatever the order in which the Communicators holding it are destroyed.
int FreeBf16Sum(MPI_Comm, int, void* op, void*) {
  return MPI_Op_free(static_cast<MPI_Op*>(op));
}

// MPI_Op_create of Bf16Sum, once per process, with its release tied to MPI_Finalize; the MPI
// error code of a failure (then *op is MPI_OP_NULL).
int CreateBf16Sum(MPI_Op* op) {
  int rc = MPI_Op_create(&Bf16Sum, /*commute=*/1, op);
  if (rc != MPI_SUCCESS) return rc;
  int key = MPI_KEYVAL_INVALID;
  rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &FreeBf16Sum, &key, nullptr);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_attr(MPI_COMM_SELF, key, op);
  if (rc != MPI_SUCCESS) MPI_Op_free(op);
  return rc;
}

// Naming the stuck rank. Every rank that waits in Communicator::Wait answers pings on its own
// duplicate of MPI_COMM_WORLD; a rank whose wait times out pings the other members of the
// group it waited on and names those that do not answer within kPingWindow. A rank that is
// stopped, stuck in a loop or dead never answers; a live one answers from whatever wait it is
// in (one still computing after the window shows as not answering too, which the message says).
MPI_Comm g_liveness = MPI_COMM_NULL;
constexpr int kPingTag = 1, kPongTag = 2;
constexpr double kPingWindowS = 2.0;
char g_pong = 0;

// Answers every ping that has arrived.
void AnswerPings() {
  if (g_liveness == MPI_COMM_NULL) return;
  int flag = 0;
  MPI_Status st;
  while (MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, g_liveness, &flag, &st) == MPI_SUCCESS && flag) {
    char b = 0;
    MPI_Recv(&b, 1, MPI_CHAR, st.MPI_SOURCE, kPingTag, g_liveness, MPI_STATUS_IGNORE);
    MPI_Request r;
    if (MPI_Isend(&g_pong, 1, MPI_CHAR, st.MPI_SOURCE, kPongTag, g_liveness, &r) == MPI_SUCCESS) {
      MPI_Request_free(&r);
    }
  }
}

// The world ranks of `comm`'s members (other than `me`) that do not answer a ping within
// min(kPingWindowS, timeout_s).
std::vector<int> SilentMembers(MPI_Comm comm, int me, double timeout_s) {
  std::vector<int> silent;
  if (g_liveness == MPI_COMM_NULL) return silent;
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int n = 0;
  MPI_Group_size(group, &n);
  std::vector<int> local(n), members(n);
  for (int i = 0; i < n; ++i) local[i] = i;
  MPI_Group_translate_ranks(group, n, local.data(), world, members.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  static char ping = 0;
  std::vector<bool> answered(n, false);
  int waiting = 0;
  for (int i = 0; i < n; ++i) {
    if (members[i] == me || members[i] == MPI_UNDEFINED) {
      answered[i] = true;
      continue;
    }
    MPI_Request r;
    if (MPI_Isend(&ping, 1, MPI_CHAR, members[i], kPingTag, g_liveness, &r) == MPI_SUCCESS) MPI_Request_free(&r);
    ++waiting;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(std::min(kPingWindowS, timeout_s));
  while (waiting > 0 && std::chrono::steady_clock::now() < deadline) {
    AnswerPings();  // the others may be asking this rank at the same time
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kPongTag, g_liveness, &flag, &st) == MPI_SUCCESS && flag) {
      char b = 0;
      MPI_Recv(&b, 1, MPI_CHAR, st.MPI_SOURCE, kPongTag, g_liveness, MPI_STATUS_IGNORE);
      for (int i = 0; i < n; ++i) {
        if (members[i] == st.MPI_SOURCE && !answered[i]) {
          answered[i] = true;
          --waiting;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!answered[i]) silent.push_back(members[i]);
  }
  return silent;
}

}  // namespace

StatusOr<Communicator::MpiType> Communicator::TypeOf(DType type) const {
  CHECK(type == DType::kFp32 || type == DType::kBf16)
      << "MPI collectives carry fp32 or bf16, not " << DTypeName(type);
  if (type == DType::kFp32) return MpiType{MPI_FLOAT, MPI_SUM};
  static MPI_Op bf16_sum = MPI_OP_NULL;  // freed by FreeBf16Sum at MPI_Finalize
  static const int created = CreateBf16Sum(&bf16_sum);
  if (created != MPI_SUCCESS) return Error(created, "op_create (the bf16 sum)");
  return MpiType{MPI_UINT16_T, bf16_sum};
}

Status Communicator::Error(int code, const char* op) const {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Status::Error("rank " + std::to_string(world_rank_) + ": MPI " + op + " on the " + name_ +
                       " group failed: " + std::string(text, len));
}

Status Communicator::Wait(MPI_Request* request, const char* op) const {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s_);
  int done = 0;
  while (true) {
    MPI_Status st;
    const int rc = MPI_Test(request, &done, &st);
    if (rc != MPI_SUCCESS) return Error(rc, op);
    if (done) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline) {
      // Cancel what can be cancelled (a receive); the job is ending with this error.
      MPI_Cancel(request);
      MPI_Request_free(request);
      const std::vector<int> silent = SilentMembers(comm_, world_rank_, timeout_s_);
      std::string who;
      if (size_ == 1) {
        who = "this rank is the group's only member, so nothing can arrive";
      } else if (silent.empty()) {
        who = "every other member of the group answers, so none is stopped: they wait on something else (the "
              "ranks disagree on the schedule)";
      } else {
        who = silent.size() == 1 ? "rank " : "ranks ";
        for (size_t i = 0; i < silent.size(); ++i) who += (i ? ", " : "") + std::to_string(silent[i]);
        who += " of the group " + std::string(silent.size() == 1 ? "does" : "do") +
               " not answer: stopped, stuck in computation, or dead";
      }
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s_);
      return Status::Error("rank " + std::to_string(world_rank_) + ": MPI " + op + " on the " + name_ +
                           " group did not complete within " + seconds + " s; " + who);
    }
    // Poll (yielding the core) for the first 2 ms, the range of a collective between ranks
    // that arrive together; then sleep between polls so a long wait does not burn the core.
    if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      AnswerPings();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

StatusOr<Communicator> Communicator::World(double timeout_s) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return Status::Error("MPI is not initialized");
  Communicator c;
  c.comm_ = MPI_COMM_WORLD;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (g_liveness == MPI_COMM_NULL) {  // collective: every rank creates its world first, once
    const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_liveness);
    if (rc != MPI_SUCCESS) return c.Error(rc, "comm_dup (liveness)");
    MPI_Comm_set_errhandler(g_liveness, MPI_ERRORS_RETURN);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &c.rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &c.size_);
  c.world_rank_ = c.rank_;
  c.timeout_s_ = timeout_s;
  return c;
}

StatusOr<Communicator> Communicator::Split(int color, int key, const std::string& name) const {
  Communicator c;
  const int rc = MPI_Comm_split(comm_, color, key, &c.comm_);
  if (rc != MPI_SUCCESS) return Error(rc, "comm_split");
  MPI_Comm_set_errhandler(c.comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c.comm_, &c.rank_);
  MPI_Comm_size(c.comm_, &c.size_);
  c.world_rank_ = world_rank_;
  c.timeout_s_ = timeout_s_;
  c.name_ = name;
  return c;
}

Status Communicator::AllReduceSum(void* data, size_t n, DType type) const {
  if (size_ == 1) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  MPI_Request r;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), t.datatype, t.sum, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-reduce");
  return Wait(&r, "all-reduce");
}

Status Communicator::AllReduceSum(double* data, size_t n) const {
  if (size_ == 1) return Status::Ok();
  MPI_Request r;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-reduce");
  return Wait(&r, "all-reduce");
}

Status Communicator::AllReduceMax(double* data, size_t n) const {
  if (size_ == 1) return Status::Ok();
  MPI_Request r;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-reduce (max)");
  return Wait(&r, "all-reduce (max)");
}

Status Communicator::ReduceScatterSum(const void* in, void* out, size_t n, DType type) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  if (size_ == 1) {
    if (n > 0 && in != out) std::memcpy(out, in, n * static_cast<size_t>(ElementBytes(type)));
    return Status::Ok();
  }
  MPI_Request r;
  const int rc = MPI_Ireduce_scatter_block(in, out, static_cast<int>(n), t.datatype, t.sum, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "reduce-scatter");
  return Wait(&r, "reduce-scatter");
}

Status Communicator::AllGather(const void* in, void* out, size_t n, DType type) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  if (size_ == 1) {
    if (n > 0 && in != out) std::memcpy(out, in, n * static_cast<size_t>(ElementBytes(type)));
    return Status::Ok();
  }
  MPI_Request r;
  const int rc = MPI_Iallgather(in, static_cast<int>(n), t.datatype, out, static_cast<int>(n), t.datatype, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-gather");
  return Wait(&r, "all-gather");
}

Status Communicator::AllGather(const double* in, double* out, size_t n) const {
  if (size_ == 1) {
    std::copy(in, in + n, out);
    return Status::Ok();
  }
  MPI_Request r;
  const int rc = MPI_Iallgather(in, static_cast<int>(n), MPI_DOUBLE, out, static_cast<int>(n), MPI_DOUBLE, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-gather");
  return Wait(&r, "all-gather");
}

Status Communicator::AllToAllV(const void* in, const int* send, void* out, const int* recv, DType type) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  std::vector<int> send_at(size_, 0), recv_at(size_, 0);
  for (int p = 1; p < size_; ++p) {
    send_at[p] = send_at[p - 1] + send[p - 1];
    recv_at[p] = recv_at[p - 1] + recv[p - 1];
  }
  MPI_Request r;
  const int rc = MPI_Ialltoallv(in, send, send_at.data(), t.datatype, out, recv, recv_at.data(), t.datatype, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-to-all");
  return Wait(&r, "all-to-all");
}

StatusOr<MPI_Request> Communicator::Isend(const void* data, size_t n, DType type, int to,
                                          int tag) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  MPI_Request r;
  const int rc = MPI_Isend(data, static_cast<int>(n), t.datatype, to, tag, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "send");
  return r;
}

StatusOr<MPI_Request> Communicator::IallReduceSum(void* data, size_t n, DType type) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  MPI_Request r;
  const int rc =
      MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), t.datatype, t.sum, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-reduce");
  return r;
}

StatusOr<MPI_Request> Communicator::IreduceScatterSum(const void* in, void* out, size_t n,
                                                     DType type) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  MPI_Request r;
  const int rc = MPI_Ireduce_scatter_block(in, out, static_cast<int>(n), t.datatype, t.sum, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "reduce-scatter");
  return r;
}

StatusOr<MPI_Request> Communicator::IallGather(const void* in, void* out, size_t n, DType type) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  MPI_Request r;
  const int rc = MPI_Iallgather(in, static_cast<int>(n), t.datatype, out, static_cast<int>(n),
                                t.datatype, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "all-gather");
  return r;
}

Status Communicator::TestRequest(MPI_Request* request, int* done, const char* op) const {
  MPI_Status st;
  const int rc = MPI_Test(request, done, &st);
  return rc == MPI_SUCCESS ? Status::Ok() : Error(rc, op);
}

Status Communicator::Send(const void* data, size_t n, DType type, int to, int tag) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  MPI_Request r;
  const int rc = MPI_Isend(data, static_cast<int>(n), t.datatype, to, tag, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "send");
  return Wait(&r, "send");
}

Status Communicator::Recv(void* data, size_t n, DType type, int from, int tag) const {
  SHARDSIM_ASSIGN_OR_RETURN(const MpiType t, TypeOf(type));
  MPI_Request r;
  const int rc = MPI_Irecv(data, static_cast<int>(n), t.datatype, from, tag, comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "recv");
  return Wait(&r, "recv");
}

Status Communicator::Barrier() const {
  MPI_Request r;
  const int rc = MPI_Ibarrier(comm_, &r);
  if (rc != MPI_SUCCESS) return Error(rc, "barrier");
  return Wait(&r, "barrier");
}

const Communicator& ProcessGroups::Of(Group g) const {
  switch (g) {
    case Group::kWorld:
      return world;
    case Group::kTp:
      return tp;
    case Group::kCp:
      return cp;
    case Group::kDp:
      return dp;
    case Group::kPp:
      return pp;
    case Group::kEp:
      return ep;
    case Group::kEdp:
      return edp;
    case Group::kEtp:
      return etp;
  }
  CHECK(false) << "unknown Group " << static_cast<int>(g);
  return world;
}

StatusOr<ProcessGroups> ProcessGroups::Create(const Layout& l, double timeout_s) {
  ProcessGroups g;
  SHARDSIM_ASSIGN_OR_RETURN(g.world, Communicator::World(timeout_s));
  if (g.world.size() != l.world()) {
    return Status::Error("the layout needs tp x pp x dp x cp = " + std::to_string(l.world()) +
                         " ranks but mpirun started " + std::to_string(g.world.size()));
  }
  const int me = g.world.rank();
  g.coord = CoordOf(l, me);
  // Color: the group's first rank (placement.h); key: position in the group.
  auto split = [&](const std::vector<int64_t>& members, const std::string& name) -> StatusOr<Communicator> {
    int position = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == me) position = static_cast<int>(i);
    }
    return g.world.Split(static_cast<int>(members.front()), position, name);
  };
  SHARDSIM_ASSIGN_OR_RETURN(g.tp, split(GroupOf(l, me, ParallelDim::kTp), "tp"));
  SHARDSIM_ASSIGN_OR_RETURN(g.cp, split(GroupOf(l, me, ParallelDim::kCp), "cp"));
  // Group::kDp is DP x CP: the gradients' reductions and ZeRO's shards span it (backend.h).
  SHARDSIM_ASSIGN_OR_RETURN(g.dp, split(DpCpGroupOf(l, me), "dp"));
  SHARDSIM_ASSIGN_OR_RETURN(g.pp, split(GroupOf(l, me, ParallelDim::kPp), "pp"));
  SHARDSIM_ASSIGN_OR_RETURN(g.ep, split(GroupOf(l, me, ParallelDim::kEp), "ep"));
  SHARDSIM_ASSIGN_OR_RETURN(g.edp, split(EdpGroupOf(l, me), "edp"));
  // The experts' own TP group where etp is set apart from tp; else this rank alone (the
  // experts split over the TP group, Group::kTp).
  SHARDSIM_ASSIGN_OR_RETURN(g.etp, split(l.own_expert_tp() ? GroupOf(l, me, ParallelDim::kEtp) : std::vector<int64_t>{me}, "etp"));
  return g;
}

}  // namespace shardsim::runtime
