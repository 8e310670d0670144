// See mpi_collectives.h. Each call checks that its count fits MPI's int, then forwards to
// the group's Communicator.
#include "runtime/mpi/mpi_collectives.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// MPI counts are ints: a larger message is an error the user can act on (a smaller shard).
Status CheckCount(const Communicator& c, int64_t n, const char* op) {
  CHECK(n >= 0) << op << " of " << n << " elements";
  if (n > INT_MAX) {
    return Status::Error("rank " + std::to_string(c.rank()) + " of the " + c.name() +
                         " group: " + op + " of " + std::to_string(n) +
                         " elements exceeds MPI's int count (2^31 - 1)");
  }
  return Status::Ok();
}

}  // namespace

MpiCollectives::~MpiCollectives() {
  for (auto& [handle, send] : pending_) MPI_Request_free(&send.request);
}

const Communicator& MpiCollectives::comm(Group g) const {
  return groups_.Of(g);
}

Status MpiCollectives::AllReduce(Group g, void* data, int64_t n, DType type) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "all-reduce"));
  return comm(g).AllReduceSum(data, static_cast<size_t>(n), type);
}

Status MpiCollectives::AllReduceSumHost(Group g, double* host, int64_t n) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "all-reduce"));
  return comm(g).AllReduceSum(host, static_cast<size_t>(n));
}

Status MpiCollectives::AllReduceMaxHost(Group g, double* host, int64_t n) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "all-reduce (max)"));
  return comm(g).AllReduceMax(host, static_cast<size_t>(n));
}

Status MpiCollectives::ReduceScatter(Group g, const void* in, void* out, int64_t n,
                                     DType type) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "reduce-scatter"));
  return comm(g).ReduceScatterSum(in, out, static_cast<size_t>(n), type);
}

Status MpiCollectives::AllGatherOf(Group g, const void* in, void* out, int64_t n,
                                   DType type) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "all-gather"));
  return comm(g).AllGather(in, out, static_cast<size_t>(n), type);
}

Status MpiCollectives::AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                                 DType type) {
  const Communicator& c = comm(g);
  std::vector<int> s(c.size()), r(c.size());
  int64_t total_send = 0, total_recv = 0;
  for (int p = 0; p < c.size(); ++p) {
    s[p] = static_cast<int>(send[p]);
    r[p] = static_cast<int>(recv[p]);
    total_send += send[p];
    total_recv += recv[p];
  }
  // The displacements are ints too: the whole of each side must fit.
  SHARDSIM_RETURN_IF_ERROR(CheckCount(c, std::max(total_send, total_recv), "all-to-all"));
  return c.AllToAllV(in, s.data(), out, r.data(), type);
}

Status MpiCollectives::AllGatherHost(Group g, const double* in, double* out, int64_t n) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "all-gather"));
  return comm(g).AllGather(in, out, static_cast<size_t>(n));
}

int64_t MpiCollectives::Track(MPI_Request request, Group g, const char* op) {
  const int64_t handle = next_handle_++;
  pending_.emplace(handle, PendingSend{request, g, op});
  return handle;
}

StatusOr<int64_t> MpiCollectives::Send(Group g, const void* data, int64_t n, DType type,
                                       int peer, int tag) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "send"));
  SHARDSIM_ASSIGN_OR_RETURN(MPI_Request request,
                            comm(g).Isend(data, static_cast<size_t>(n), type, peer, tag));
  return Track(request, g, "send");
}

StatusOr<int64_t> MpiCollectives::IallReduce(Group g, void* data, int64_t n, DType type) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "all-reduce"));
  SHARDSIM_ASSIGN_OR_RETURN(MPI_Request request, comm(g).IallReduceSum(data, static_cast<size_t>(n), type));
  return Track(request, g, "all-reduce");
}

StatusOr<int64_t> MpiCollectives::IreduceScatter(Group g, const void* in, void* out, int64_t n,
                                                 DType type) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "reduce-scatter"));
  SHARDSIM_ASSIGN_OR_RETURN(MPI_Request request,
                            comm(g).IreduceScatterSum(in, out, static_cast<size_t>(n), type));
  return Track(request, g, "reduce-scatter");
}

StatusOr<int64_t> MpiCollectives::IallGatherOf(Group g, const void* in, void* out, int64_t n,
                                               DType type) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "all-gather"));
  SHARDSIM_ASSIGN_OR_RETURN(MPI_Request request,
                            comm(g).IallGather(in, out, static_cast<size_t>(n), type));
  return Track(request, g, "all-gather");
}

Status MpiCollectives::Wait(int64_t handle) {
  auto it = pending_.find(handle);
  CHECK(it != pending_.end()) << "Wait(" << handle << "): no pending request with this handle";
  PendingSend send = it->second;
  pending_.erase(it);
  // On a timeout, Wait has already freed the request.
  return comm(send.group).WaitRequest(&send.request, send.op);
}

StatusOr<bool> MpiCollectives::Test(int64_t handle) {
  auto it = pending_.find(handle);
  CHECK(it != pending_.end()) << "Test(" << handle << "): no pending request with this handle";
  int done = 0;
  SHARDSIM_RETURN_IF_ERROR(
      comm(it->second.group).TestRequest(&it->second.request, &done, it->second.op));
  if (done) pending_.erase(it);
  return done != 0;
}

Status MpiCollectives::Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) {
  SHARDSIM_RETURN_IF_ERROR(CheckCount(comm(g), n, "recv"));
  return comm(g).Recv(data, static_cast<size_t>(n), type, peer, tag);
}

Status MpiCollectives::Barrier(Group g) { return comm(g).Barrier(); }

}  // namespace shardsim::runtime
