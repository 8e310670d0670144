// RecordingCollectives: a Collectives that forwards every call to another and counts the
// device-data ones by (kind, group, bytes), so a test can set what the executor really issued
// beside what the layer plan priced (tests/runtime_priced_collectives_test.cc). Bytes follow
// the cost model's convention (src/cost/collective.h, nccl-tests'): all-reduce the buffer,
// all-gather and reduce-scatter the whole group's data (size x n elements), a send its
// message, an all-to-all what this rank sends (its own block included). Receives are the other half of a send and are not counted; the host collectives
// (losses, gradient norms, timelines: a few doubles) are not device traffic and are not
// counted either.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "runtime/backend/backend.h"

namespace shardsim::runtime {

enum class CallKind : uint8_t { kAllReduce, kReduceScatter, kAllGather, kSend, kAllToAll };
const char* CallKindName(CallKind k);

// One kind of call: (kind, group, bytes); the recorder maps each to its count.
using CallKey = std::tuple<CallKind, Group, int64_t>;

class RecordingCollectives : public Collectives {
 public:
  explicit RecordingCollectives(std::unique_ptr<Collectives> inner);

  const std::map<CallKey, int64_t>& calls() const { return calls_; }
  void Clear() { calls_.clear(); }

  int rank(Group g) const override { return inner_->rank(g); }
  int size(Group g) const override { return inner_->size(g); }
  Status AllReduce(Group g, void* data, int64_t n, DType type) override;
  Status ReduceScatter(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllGatherOf(Group g, const void* in, void* out, int64_t n, DType type) override;
  Status AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                   DType type) override;
  StatusOr<int64_t> Send(Group g, const void* data, int64_t n, DType type, int peer,
                         int tag) override;
  Status Receive(Group g, void* data, int64_t n, DType type, int peer, int tag) override {
    return inner_->Receive(g, data, n, type, peer, tag);
  }
  Status AllReduceSumHost(Group g, double* host, int64_t n) override {
    return inner_->AllReduceSumHost(g, host, n);
  }
  Status AllReduceMaxHost(Group g, double* host, int64_t n) override {
    return inner_->AllReduceMaxHost(g, host, n);
  }
  Status AllGatherHost(Group g, const double* in, double* out, int64_t n) override {
    return inner_->AllGatherHost(g, in, out, n);
  }
  StatusOr<int64_t> IallReduce(Group g, void* data, int64_t n, DType type) override;
  StatusOr<int64_t> IreduceScatter(Group g, const void* in, void* out, int64_t n,
                                   DType type) override;
  StatusOr<int64_t> IallGatherOf(Group g, const void* in, void* out, int64_t n,
                                 DType type) override;
  Status Wait(int64_t handle) override { return inner_->Wait(handle); }
  StatusOr<bool> Test(int64_t handle) override { return inner_->Test(handle); }
  Status Barrier(Group g) override { return inner_->Barrier(g); }

 private:
  void Count(CallKind kind, Group g, int64_t elements, DType type);

  std::unique_ptr<Collectives> inner_;
  std::map<CallKey, int64_t> calls_;
};

}  // namespace shardsim::runtime
