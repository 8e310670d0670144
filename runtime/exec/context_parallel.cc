// See context_parallel.h. The gathered buffer is rank-major: rank q's [k (n, kvd) | v (n, kvd)];
// within each, rows in q's half-major order. Moving between it and (B, T, kvd) sequence order is
// one device copy per (rank, half, sequence) run of L rows.
#include "runtime/exec/context_parallel.h"

#include <functional>

#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// Calls fn(local_row, whole_row) for the first row of each run of L rows that rank q's half-major
// rows hold: local row (h B + s) L of q's, whole-sequence row s T + ChunkOf(q, h) L.
void ForEachRun(const CpSplit& split, int64_t b, int64_t q,
                const std::function<void(int64_t local, int64_t whole)>& fn) {
  const int64_t l = split.chunk();
  for (int h = 0; h < 2; ++h) {
    for (int64_t s = 0; s < b; ++s) fn((h * b + s) * l, s * split.seq + split.ChunkOf(q, h) * l);
  }
}

}  // namespace

void ForEachChunk(const CpSplit& split, int64_t b, const std::function<void(int64_t local, int64_t position)>& fn) {
  ForEachRun(split, b, split.rank, [&](int64_t local, int64_t whole) { fn(local, whole % split.seq); });
}

std::vector<int32_t> LocalRows(const std::vector<int32_t>& whole, int64_t b, const CpSplit& split) {
  CHECK(static_cast<int64_t>(whole.size()) == b * split.seq) << whole.size() << " ids for " << b << " x " << split.seq;
  const int64_t l = split.chunk();
  std::vector<int32_t> local(static_cast<size_t>(2 * b * l));
  ForEachRun(split, b, split.rank, [&](int64_t at, int64_t from) {
    std::copy_n(whole.begin() + from, l, local.begin() + at);
  });
  return local;
}

template <typename T>
Status GatherKeysValues(ExecContext& ctx, const BlockDims& d, int64_t kvd, const T* k, const T* v,
                        DeviceBuffer& k_all, DeviceBuffer& v_all) {
  const CpSplit& split = d.cp;
  const int64_t part = d.n * kvd;  // one of k, v on one rank
  const int64_t row = kvd * static_cast<int64_t>(sizeof(T));
  const int64_t run = split.chunk() * row;
  Memory& mem = ctx.mem();
  DeviceBuffer mine, all;
  SHARDSIM_ASSIGN_OR_RETURN(mine, ctx.Alloc<T>(MemoryKind::kOther, 2 * part, "cp keys and values"));
  mem.Copy(mine.as<T>(), k, part * static_cast<int64_t>(sizeof(T)));
  mem.Copy(mine.as<T>() + part, v, part * static_cast<int64_t>(sizeof(T)));
  SHARDSIM_ASSIGN_OR_RETURN(all, ctx.Alloc<T>(MemoryKind::kOther, split.cp * 2 * part, "cp gathered keys and values"));
  const double bytes = static_cast<double>(split.cp * 2 * part) * sizeof(T);
  SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kCpComm, bytes, [&] {
    return ctx.comm().AllGather(Group::kCp, mine.as<T>(), all.as<T>(), 2 * part);
  }, SpanLabel::kCpKvExchange));
  mine.Reset();
  SHARDSIM_ASSIGN_OR_RETURN(k_all, ctx.Alloc<T>(MemoryKind::kOther, d.b * split.seq * kvd, "cp all keys"));
  SHARDSIM_ASSIGN_OR_RETURN(v_all, ctx.Alloc<T>(MemoryKind::kOther, d.b * split.seq * kvd, "cp all values"));
  auto* kd = static_cast<char*>(k_all.data());
  auto* vd = static_cast<char*>(v_all.data());
  const auto* src = static_cast<const char*>(all.data());
  for (int64_t q = 0; q < split.cp; ++q) {
    const char* kq = src + q * 2 * part * static_cast<int64_t>(sizeof(T));
    const char* vq = kq + part * static_cast<int64_t>(sizeof(T));
    ForEachRun(split, d.b, q, [&](int64_t local, int64_t whole) {
      mem.Copy(kd + whole * row, kq + local * row, run);
      mem.Copy(vd + whole * row, vq + local * row, run);
    });
  }
  return Status::Ok();
}

template <typename T>
Status ReduceScatterKeyValueGrads(ExecContext& ctx, const BlockDims& d, int64_t kvd, const T* dk_all,
                                  const T* dv_all, T* dk, T* dv) {
  const CpSplit& split = d.cp;
  const int64_t part = d.n * kvd;
  const int64_t row = kvd * static_cast<int64_t>(sizeof(T));
  const int64_t run = split.chunk() * row;
  Memory& mem = ctx.mem();
  DeviceBuffer packed, mine;
  SHARDSIM_ASSIGN_OR_RETURN(packed, ctx.Alloc<T>(MemoryKind::kOther, split.cp * 2 * part, "cp key and value gradients"));
  auto* dst = static_cast<char*>(packed.data());
  const auto* kd = reinterpret_cast<const char*>(dk_all);
  const auto* vd = reinterpret_cast<const char*>(dv_all);
  for (int64_t q = 0; q < split.cp; ++q) {
    char* kq = dst + q * 2 * part * static_cast<int64_t>(sizeof(T));
    char* vq = kq + part * static_cast<int64_t>(sizeof(T));
    ForEachRun(split, d.b, q, [&](int64_t local, int64_t whole) {
      mem.Copy(kq + local * row, kd + whole * row, run);
      mem.Copy(vq + local * row, vd + whole * row, run);
    });
  }
  SHARDSIM_ASSIGN_OR_RETURN(mine, ctx.Alloc<T>(MemoryKind::kOther, 2 * part, "cp reduced key and value gradients"));
  const double bytes = static_cast<double>(split.cp * 2 * part) * sizeof(T);
  SHARDSIM_RETURN_IF_ERROR(ctx.Comm(Phase::kCpComm, bytes, [&] {
    return ctx.comm().ReduceScatterSum(Group::kCp, packed.as<T>(), mine.as<T>(), 2 * part);
  }, SpanLabel::kCpDkDvReduceScatter));
  packed.Reset();
  ctx.kt<T>().Add(dk, mine.as<T>(), part);
  ctx.kt<T>().Add(dv, mine.as<T>() + part, part);
  return Status::Ok();
}

#define SHARDSIM_INSTANTIATE_CP(T)                                                                     \
  template Status GatherKeysValues(ExecContext&, const BlockDims&, int64_t, const T*, const T*,         \
                                   DeviceBuffer&, DeviceBuffer&);                                       \
  template Status ReduceScatterKeyValueGrads(ExecContext&, const BlockDims&, int64_t, const T*, const T*, \
                                             T*, T*);
SHARDSIM_INSTANTIATE_CP(float)
SHARDSIM_INSTANTIATE_CP(Bf16)
#undef SHARDSIM_INSTANTIATE_CP

}  // namespace shardsim::runtime
