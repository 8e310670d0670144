// EmulatedCollectives: the collectives of one rank of a larger layout, run alone (`run
// --emulate-rank R`; issue 6's "one GPU checks a 1024-GPU plan"). Every group has the layout's
// size and rank R's place in it, so the executor builds exactly rank R's shard, schedule and
// buffers. Each collective is replaced by a device copy of the bytes it delivers to this rank
// (all-reduce: n elements; reduce-scatter: n; all-gather: size x n; send and receive: n, of
// ElementBytes(type) bytes each), so the
// memory traffic is real and the timeline times it as communication, apart from compute.
// Values that would come from other ranks are whatever the scratch holds: losses and
// parameters of an emulated run mean nothing; its time and memory are the point. Host
// reductions leave this rank's value as it is (an all-gather repeats it).
// The scratch that stands in for the other ranks is left out of the memory accounting.
#pragma once

#include <cstdint>

#include "runtime/backend/backend.h"
#include "src/layout/layout.h"
#include "src/layout/placement.h"

namespace shardsim::runtime {

class EmulatedCollectives : public Collectives {
 public:
  // `memory` (the backend's) makes the copies and holds the scratch; it must outlive this.
  EmulatedCollectives(const Layout& l, int64_t world_rank, Memory* memory);

  int rank(Group g) const override;
  int size(Group g) const override;

  Status AllReduce(Group g, void* data, int64_t n, DType type) override;
  Status ReduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                   DType type) override;
  Status AllReduceSumHost(Group g, double* host, int64_t n) override;
  Status AllReduceMaxHost(Group g, double* host, int64_t n) override;
  Status AllGatherHost(Group g, const double* in, double* out, int64_t n) override;
  StatusOr<int64_t> Send(Group g, const void* data, int64_t n, DType type, int peer,
                         int tag) override;
  Status Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) override;
  StatusOr<int64_t> IallReduce(Group g, void* data, int64_t n, DType type) override;
  StatusOr<int64_t> IreduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  StatusOr<int64_t> IallGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status Wait(int64_t handle) override;  // every handle is complete when issued
  StatusOr<bool> Test(int64_t handle) override;
  Status Barrier(Group g) override;

 private:
  // A scratch buffer of at least `bytes` (grown as needed, zero-filled when grown).
  StatusOr<void*> Scratch(int64_t bytes);
  // The scratch's first `bytes` copied into `data`: what the other ranks send arrives.
  Status Arrive(void* data, int64_t bytes);

  Layout layout_;
  int64_t world_rank_;
  RankCoord coord_;
  Memory* memory_;
  DeviceBuffer scratch_;
  int64_t issued_ = 0;
};

}  // namespace shardsim::runtime
