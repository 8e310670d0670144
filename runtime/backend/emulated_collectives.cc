// See emulated_collectives.h.
#include "runtime/backend/emulated_collectives.h"

#include <algorithm>

#include "src/util/check.h"

namespace shardsim::runtime {

EmulatedCollectives::EmulatedCollectives(const Layout& l, int64_t world_rank, Memory* memory)
    : layout_(l), world_rank_(world_rank), coord_(CoordOf(l, world_rank)), memory_(memory) {
  CHECK(world_rank >= 0 && world_rank < l.world()) << "rank " << world_rank << " of " << l.world();
}

int EmulatedCollectives::rank(Group g) const {
  switch (g) {
    case Group::kWorld: return static_cast<int>(world_rank_);
    case Group::kTp: return static_cast<int>(coord_.tp);
    case Group::kCp: return static_cast<int>(coord_.cp);
    case Group::kDp: return static_cast<int>(coord_.dp * layout_.cp + coord_.cp);  // DP x CP
    case Group::kPp: return static_cast<int>(coord_.pp);
    // The experts' grid folds the stage's ranks (placement.h ExpertCoordOf), as GroupOf does.
    case Group::kEp: return static_cast<int>(ExpertCoordOf(layout_, world_rank_).ep);
    case Group::kEdp: return static_cast<int>(ExpertCoordOf(layout_, world_rank_).edp);
    case Group::kEtp: return layout_.own_expert_tp() ? static_cast<int>(ExpertCoordOf(layout_, world_rank_).etp) : 0;
  }
  return 0;
}

int EmulatedCollectives::size(Group g) const {
  switch (g) {
    case Group::kWorld: return static_cast<int>(layout_.world());
    case Group::kTp: return static_cast<int>(layout_.tp);
    case Group::kCp: return static_cast<int>(layout_.cp);
    case Group::kDp: return static_cast<int>(layout_.dp_cp());
    case Group::kPp: return static_cast<int>(layout_.pp);
    case Group::kEp: return static_cast<int>(layout_.ep);
    case Group::kEdp: return static_cast<int>(layout_.edp());
    case Group::kEtp: return layout_.own_expert_tp() ? static_cast<int>(layout_.expert_tp()) : 1;
  }
  return 1;
}

StatusOr<void*> EmulatedCollectives::Scratch(int64_t bytes) {
  if (scratch_.bytes() < bytes) {
    scratch_.Reset();
    SHARDSIM_ASSIGN_OR_RETURN(scratch_, memory_->AllocateUncounted(bytes, "emulated peers' data"));
    memory_->Zero(scratch_.data(), bytes);
  }
  return scratch_.data();
}

Status EmulatedCollectives::Arrive(void* data, int64_t bytes) {
  CHECK(bytes >= 0) << bytes;
  if (bytes == 0) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(void* peers, Scratch(bytes));
  memory_->Copy(data, peers, bytes);
  return Status::Ok();
}

Status EmulatedCollectives::AllReduce(Group, void* data, int64_t n, DType type) {
  return Arrive(data, n * ElementBytes(type));  // the sum arrives
}

Status EmulatedCollectives::AllReduceSumHost(Group, double*, int64_t) { return Status::Ok(); }
Status EmulatedCollectives::AllReduceMaxHost(Group, double*, int64_t) { return Status::Ok(); }

Status EmulatedCollectives::ReduceScatter(Group, const void*, void* out, int64_t n, DType type) {
  return Arrive(out, n * ElementBytes(type));  // this rank's n summed elements arrive
}

Status EmulatedCollectives::AllGatherOf(Group g, const void* in, void* out, int64_t n,
                                        DType type) {
  const int64_t ranks = size(g), me = rank(g), bytes = n * ElementBytes(type);
  if (n == 0) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(void* peers, Scratch(bytes));
  for (int64_t r = 0; r < ranks; ++r) {
    memory_->Copy(static_cast<char*>(out) + r * bytes, r == me ? in : peers, bytes);
  }
  return Status::Ok();
}

Status EmulatedCollectives::AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                                      DType type) {
  // This rank's own block moves; every other block arrives from the (emulated) peers.
  const int64_t ranks = size(g), me = rank(g), e = ElementBytes(type);
  int64_t own = 0, largest = 0;
  for (int64_t r = 0; r < me; ++r) own += send[r];
  for (int64_t r = 0; r < ranks; ++r) largest = std::max(largest, recv[r] * e);
  SHARDSIM_ASSIGN_OR_RETURN(void* peers, Scratch(std::max<int64_t>(largest, 1)));
  char* to = static_cast<char*>(out);
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t bytes = recv[r] * e;
    if (bytes > 0) memory_->Copy(to, r == me ? static_cast<const char*>(in) + own * e : peers, bytes);
    to += bytes;
  }
  return Status::Ok();
}

Status EmulatedCollectives::AllGatherHost(Group g, const double* in, double* out, int64_t n) {
  for (int64_t r = 0; r < size(g); ++r) std::copy(in, in + n, out + r * n);
  return Status::Ok();
}

StatusOr<int64_t> EmulatedCollectives::Send(Group, const void* data, int64_t n, DType type, int,
                                            int) {
  const int64_t bytes = n * ElementBytes(type);
  if (bytes > 0) {
    SHARDSIM_ASSIGN_OR_RETURN(void* peers, Scratch(bytes));
    memory_->Copy(peers, data, bytes);  // the message leaves
  }
  return ++issued_;
}

Status EmulatedCollectives::Receive(Group, void* data, int64_t n, DType type, int, int) {
  return Arrive(data, n * ElementBytes(type));  // n elements arrive
}

StatusOr<int64_t> EmulatedCollectives::IallReduce(Group g, void* data, int64_t n, DType type) {
  SHARDSIM_RETURN_IF_ERROR(AllReduce(g, data, n, type));
  return ++issued_;
}

StatusOr<int64_t> EmulatedCollectives::IallGatherOf(Group g, const void* in, void* out, int64_t n,
                                                    DType type) {
  SHARDSIM_RETURN_IF_ERROR(AllGatherOf(g, in, out, n, type));
  return ++issued_;
}

StatusOr<int64_t> EmulatedCollectives::IreduceScatter(Group g, const void* in, void* out,
                                                      int64_t n, DType type) {
  SHARDSIM_RETURN_IF_ERROR(ReduceScatter(g, in, out, n, type));
  return ++issued_;
}

Status EmulatedCollectives::Wait(int64_t handle) {
  CHECK(handle >= 1 && handle <= issued_) << "Wait(" << handle << "): never issued";
  return Status::Ok();
}

StatusOr<bool> EmulatedCollectives::Test(int64_t handle) {
  CHECK(handle >= 1 && handle <= issued_) << "Test(" << handle << "): never issued";
  return true;
}

Status EmulatedCollectives::Barrier(Group) { return Status::Ok(); }

}  // namespace shardsim::runtime
