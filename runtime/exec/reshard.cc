// See reshard.h.
#include "runtime/exec/reshard.h"

#include <cstring>

#include "runtime/exec/checkpoint.h"

namespace shardsim::runtime {
namespace {

constexpr char kMapMagic[] = "shardsim state map 1\n";
constexpr size_t kMagicBytes = sizeof(kMapMagic) - 1;
constexpr int64_t kFieldsPerRun = 5;

// Reads int64s from `bytes` from `at`, false past the end.
bool TakeInt(const std::string& bytes, size_t* at, int64_t* v) {
  if (*at + sizeof *v > bytes.size()) return false;
  std::memcpy(v, bytes.data() + *at, sizeof *v);
  *at += sizeof *v;
  return true;
}

// A rank state file's sections (Executor::SaveState): the Adam step, then the working weights,
// the master copy and both moments, each an int64 byte count and its bytes; later sections
// (PowerSGD's) are not needed here.
struct RankSections {
  int64_t adam_step = 0;
  const char* data[4] = {};
  int64_t bytes[4] = {};
};

StatusOr<RankSections> ParseRankState(const std::string& state, const std::string& file) {
  RankSections out;
  size_t at = 0;
  if (!TakeInt(state, &at, &out.adam_step) || out.adam_step < 0) return Status::Error(file + ": truncated");
  for (int i = 0; i < 4; ++i) {
    if (!TakeInt(state, &at, &out.bytes[i]) || out.bytes[i] < 0 ||
        static_cast<uint64_t>(out.bytes[i]) > state.size() - at) {
      return Status::Error(file + ": truncated");
    }
    out.data[i] = state.data() + at;
    at += static_cast<size_t>(out.bytes[i]);
  }
  return out;
}

// Copies `count` floats from element `at` of a section into `dst`, bounds checked.
bool CopyFloats(const RankSections& s, int section, int64_t at, int64_t count, float* dst) {
  const int64_t floats = s.bytes[section] / static_cast<int64_t>(sizeof(float));
  if (at < 0 || count < 0 || at > floats || count > floats - at) return false;
  std::memcpy(dst, s.data[section] + at * static_cast<int64_t>(sizeof(float)),
              static_cast<size_t>(count) * sizeof(float));
  return true;
}

}  // namespace

std::string EncodeStateMap(int64_t full_elements, int64_t weight_bytes, const std::vector<StateRun>& runs) {
  std::string out(kMapMagic, kMagicBytes);
  auto put = [&](int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(full_elements);
  put(weight_bytes);
  put(static_cast<int64_t>(runs.size()));
  for (const StateRun& r : runs) {
    put(r.full);
    put(r.count);
    put(r.master_at);
    put(r.moment_at);
    put(r.master_in_weights ? 1 : 0);
  }
  return out;
}

Status AddRankState(const std::string& map, const std::string& state, const std::string& map_file,
                    const std::string& state_file, bool first, FullState* full, std::vector<uint8_t>* counted) {
  const int64_t full_elements = static_cast<int64_t>(counted->size());
  SHARDSIM_ASSIGN_OR_RETURN(const RankSections sections, ParseRankState(state, state_file));
  if (first) full->adam_step = sections.adam_step;
  if (sections.adam_step != full->adam_step) {
    return Status::Error(state_file + ": AdamW step " + std::to_string(sections.adam_step) + ", rank 0's " +
                         std::to_string(full->adam_step));
  }
  if (map.compare(0, kMagicBytes, kMapMagic) != 0) {
    return Status::Error(map_file + ": not a shardsim state map (expected '" + std::string(kMapMagic, kMagicBytes - 1) +
                         "')");
  }
  size_t at = kMagicBytes;
  int64_t elements = 0, weight_bytes = 0, runs = 0;
  if (!TakeInt(map, &at, &elements) || !TakeInt(map, &at, &weight_bytes) || !TakeInt(map, &at, &runs) || runs < 0 ||
      static_cast<uint64_t>(runs) > (map.size() - at) / (kFieldsPerRun * sizeof(int64_t))) {
    return Status::Error(map_file + ": truncated");
  }
  if (elements != full_elements) {
    return Status::Error(map_file + ": a model of " + std::to_string(elements) + " parameters, this run's has " +
                         std::to_string(full_elements));
  }
  for (int64_t i = 0; i < runs; ++i) {
    int64_t f[kFieldsPerRun];
    for (int64_t& v : f) TakeInt(map, &at, &v);  // in bounds: runs was checked against the size
    const StateRun r{.full = f[0], .count = f[1], .master_at = f[2], .moment_at = f[3], .master_in_weights = f[4] != 0};
    const std::string where = map_file + ", run " + std::to_string(i);
    if (r.full < 0 || r.count <= 0 || r.full > full_elements || r.count > full_elements - r.full) {
      return Status::Error(where + ": elements [" + std::to_string(r.full) + ", +" + std::to_string(r.count) +
                           ") outside the model's " + std::to_string(full_elements));
    }
    if (r.master_in_weights && weight_bytes != static_cast<int64_t>(sizeof(float))) {
      return Status::Error(where + ": fp32 weights named as the master copy of " + std::to_string(weight_bytes) +
                           "-byte working weights");
    }
    const size_t from = static_cast<size_t>(r.full);
    if (!CopyFloats(sections, r.master_in_weights ? 0 : 1, r.master_at, r.count, &full->master[from]) ||
        !CopyFloats(sections, 2, r.moment_at, r.count, &full->moment1[from]) ||
        !CopyFloats(sections, 3, r.moment_at, r.count, &full->moment2[from])) {
      return Status::Error(where + ": past the end of " + state_file + "'s sections");
    }
    for (int64_t e = 0; e < r.count; ++e) {
      if ((*counted)[from + static_cast<size_t>(e)]++ != 0) {
        return Status::Error(where + ": element " + std::to_string(r.full + e) + " is also another rank's");
      }
    }
  }
  return Status::Ok();
}

StatusOr<FullState> AssembleFullState(const std::string& root, int64_t step, int64_t world,
                                      int64_t full_elements) {
  FullState full;
  full.master.assign(static_cast<size_t>(full_elements), 0.0f);
  full.moment1.assign(static_cast<size_t>(full_elements), 0.0f);
  full.moment2.assign(static_cast<size_t>(full_elements), 0.0f);
  std::vector<uint8_t> counted(static_cast<size_t>(full_elements), 0);
  for (int rank = 0; rank < world; ++rank) {
    SHARDSIM_ASSIGN_OR_RETURN(const std::string map, ReadRankMap(root, step, rank));
    SHARDSIM_ASSIGN_OR_RETURN(const std::string state, ReadRankState(root, step, rank));
    SHARDSIM_RETURN_IF_ERROR(AddRankState(map, state, RankFile(root, step, rank, ".map"), RankFile(root, step, rank),
                                          rank == 0, &full, &counted));
  }
  for (size_t e = 0; e < counted.size(); ++e) {
    if (counted[e] == 0) {
      return Status::Error(CheckpointDir(root, step) + ": element " + std::to_string(e) + " of the model is in no rank's map");
    }
  }
  return full;
}

}  // namespace shardsim::runtime
