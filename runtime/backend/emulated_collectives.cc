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
    case Group::kDp: return static_cast<int>(coord_.dp);
    case Group::kPp: return static_cast<int>(coord_.pp);
  }
  return 0;
}

int EmulatedCollectives::size(Group g) const {
  switch (g) {
    case Group::kWorld: return static_cast<int>(layout_.world());
    case Group::kTp: return static_cast<int>(layout_.tp);
    case Group::kCp: return static_cast<int>(layout_.cp);
    case Group::kDp: return static_cast<int>(layout_.dp);
    case Group::kPp: return static_cast<int>(layout_.pp);
  }
  return 1;
}

StatusOr<float*> EmulatedCollectives::Scratch(int64_t n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
  if (scratch_.bytes() < bytes) {
    scratch_.Reset();
    SHARDSIM_ASSIGN_OR_RETURN(scratch_, memory_->AllocateUncounted(bytes, "emulated peers' data"));
    memory_->Zero(scratch_.data(), bytes);
  }
  return scratch_.f();
}

Status EmulatedCollectives::AllReduceSum(Group, float* data, int64_t n) {
  if (n == 0) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(float* peers, Scratch(n));
  memory_->Copy(data, peers, n * static_cast<int64_t>(sizeof(float)));  // the sum arrives
  return Status::Ok();
}

Status EmulatedCollectives::AllReduceSumHost(Group, double*, int64_t) { return Status::Ok(); }
Status EmulatedCollectives::AllReduceMaxHost(Group, double*, int64_t) { return Status::Ok(); }

Status EmulatedCollectives::ReduceScatterSum(Group, const float*, float* out, int64_t n) {
  return AllReduceSum(Group::kWorld, out, n);  // this rank's n summed floats arrive
}

Status EmulatedCollectives::AllGather(Group g, const float* in, float* out, int64_t n) {
  const int64_t ranks = size(g), me = rank(g);
  if (n == 0) return Status::Ok();
  SHARDSIM_ASSIGN_OR_RETURN(float* peers, Scratch(n));
  const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < ranks; ++r) memory_->Copy(out + r * n, r == me ? in : peers, bytes);
  return Status::Ok();
}

Status EmulatedCollectives::AllGatherHost(Group g, const double* in, double* out, int64_t n) {
  for (int64_t r = 0; r < size(g); ++r) std::copy(in, in + n, out + r * n);
  return Status::Ok();
}

StatusOr<int64_t> EmulatedCollectives::Isend(Group, const float* data, int64_t n, int, int) {
  if (n > 0) {
    SHARDSIM_ASSIGN_OR_RETURN(float* peers, Scratch(n));
    memory_->Copy(peers, data, n * static_cast<int64_t>(sizeof(float)));  // the message leaves
  }
  return ++issued_;
}

StatusOr<int64_t> EmulatedCollectives::IallReduceSum(Group g, float* data, int64_t n) {
  SHARDSIM_RETURN_IF_ERROR(AllReduceSum(g, data, n));
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

Status EmulatedCollectives::Recv(Group, float* data, int64_t n, int, int) {
  return AllReduceSum(Group::kWorld, data, n);  // n floats arrive
}

Status EmulatedCollectives::Barrier(Group) { return Status::Ok(); }

}  // namespace shardsim::runtime
