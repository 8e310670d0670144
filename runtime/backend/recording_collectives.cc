#include "runtime/backend/recording_collectives.h"

#include <utility>

#include "src/util/check.h"

namespace shardsim::runtime {

const char* CallKindName(CallKind k) {
  switch (k) {
    case CallKind::kAllReduce: return "all-reduce";
    case CallKind::kReduceScatter: return "reduce-scatter";
    case CallKind::kAllGather: return "all-gather";
    case CallKind::kSend: return "send";
    case CallKind::kAllToAll: return "all-to-all";
  }
  return "?";
}

RecordingCollectives::RecordingCollectives(std::unique_ptr<Collectives> inner)
    : inner_(std::move(inner)) {
  CHECK(inner_ != nullptr);
}

void RecordingCollectives::Count(CallKind kind, Group g, int64_t elements, DType type) {
  ++calls_[CallKey{kind, g, elements * ElementBytes(type)}];
}

Status RecordingCollectives::AllReduce(Group g, void* data, int64_t n, DType type) {
  Count(CallKind::kAllReduce, g, n, type);
  return inner_->AllReduce(g, data, n, type);
}

Status RecordingCollectives::ReduceScatter(Group g, const void* in, void* out, int64_t n,
                                           DType type) {
  Count(CallKind::kReduceScatter, g, n * size(g), type);
  return inner_->ReduceScatter(g, in, out, n, type);
}

Status RecordingCollectives::AllGatherOf(Group g, const void* in, void* out, int64_t n,
                                         DType type) {
  Count(CallKind::kAllGather, g, n * size(g), type);
  return inner_->AllGatherOf(g, in, out, n, type);
}

Status RecordingCollectives::AllToAllV(Group g, const void* in, const int64_t* send, void* out, const int64_t* recv,
                                       DType type) {
  int64_t sent = 0;  // the cost model's all-to-all bytes: what this rank sends, its own block included
  for (int p = 0; p < size(g); ++p) sent += send[p];
  Count(CallKind::kAllToAll, g, sent, type);
  return inner_->AllToAllV(g, in, send, out, recv, type);
}

StatusOr<int64_t> RecordingCollectives::Send(Group g, const void* data, int64_t n, DType type,
                                             int peer, int tag) {
  Count(CallKind::kSend, g, n, type);
  return inner_->Send(g, data, n, type, peer, tag);
}

StatusOr<int64_t> RecordingCollectives::IallReduce(Group g, void* data, int64_t n, DType type) {
  Count(CallKind::kAllReduce, g, n, type);
  return inner_->IallReduce(g, data, n, type);
}

StatusOr<int64_t> RecordingCollectives::IreduceScatter(Group g, const void* in, void* out,
                                                       int64_t n, DType type) {
  Count(CallKind::kReduceScatter, g, n * size(g), type);
  return inner_->IreduceScatter(g, in, out, n, type);
}

StatusOr<int64_t> RecordingCollectives::IallGatherOf(Group g, const void* in, void* out,
                                                     int64_t n, DType type) {
  Count(CallKind::kAllGather, g, n * size(g), type);
  return inner_->IallGatherOf(g, in, out, n, type);
}

}  // namespace shardsim::runtime
