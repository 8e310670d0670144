// See communicator.h.
#include "runtime/mpi/communicator.h"

#include <chrono>
#include <cstring>
#include <thread>

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
      return Status::Error("rank " + std::to_string(world_rank_) + ": MPI " + op + " on the " + name_ +
                           " group did not complete within " + std::to_string(timeout_s_) +
                           " s (a peer died or is stuck)");
    }
    // Poll (yielding the core) for the first 2 ms, the range of a collective between ranks
    // that arrive together; then sleep between polls so a long wait does not burn the core.
    if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
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
  auto split = [&](ParallelDim d, const std::string& name) -> StatusOr<Communicator> {
    const std::vector<int64_t> members = GroupOf(l, me, d);
    int position = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == me) position = static_cast<int>(i);
    }
    return g.world.Split(static_cast<int>(members.front()), position, name);
  };
  SHARDSIM_ASSIGN_OR_RETURN(g.tp, split(ParallelDim::kTp, "tp"));
  SHARDSIM_ASSIGN_OR_RETURN(g.cp, split(ParallelDim::kCp, "cp"));
  SHARDSIM_ASSIGN_OR_RETURN(g.dp, split(ParallelDim::kDp, "dp"));
  SHARDSIM_ASSIGN_OR_RETURN(g.pp, split(ParallelDim::kPp, "pp"));
  return g;
}

}  // namespace shardsim::runtime
