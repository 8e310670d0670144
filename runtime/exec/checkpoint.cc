// See checkpoint.h.
#include "runtime/exec/checkpoint.h"

#include <cctype>
#include <filesystem>
#include <system_error>

#include "src/io/yaml_reader.h"
#include "src/util/atomic_file.h"
#include "src/util/strings.h"  // YamlQuoted

namespace shardsim::runtime {
namespace {

// A rank's state is as large as its share of the model and optimizer: 16 bytes a parameter.
constexpr long long kMaxRankStateBytes = 1LL << 40;

}  // namespace

std::string RankFile(const std::string& root, int64_t step, int rank, const char* ext) {
  return CheckpointDir(root, step) + "/rank-" + std::to_string(rank) + ext;
}

std::string CheckpointDir(const std::string& root, int64_t step) { return root + "/step-" + std::to_string(step); }

Status WriteRankState(const std::string& root, int64_t step, int rank, const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(CheckpointDir(root, step), ec);
  if (ec) return Status::Error(CheckpointDir(root, step) + ": cannot create the checkpoint directory: " + ec.message());
  return WriteFileAtomically(RankFile(root, step, rank), bytes);
}

StatusOr<std::string> ReadRankState(const std::string& root, int64_t step, int rank) {
  return ReadWholeFile(RankFile(root, step, rank), "checkpoint rank file", kMaxRankStateBytes);
}

Status WriteRankMap(const std::string& root, int64_t step, int rank, const std::string& bytes) {
  return WriteFileAtomically(RankFile(root, step, rank, ".map"), bytes);
}

StatusOr<std::string> ReadRankMap(const std::string& root, int64_t step, int rank) {
  return ReadWholeFile(RankFile(root, step, rank, ".map"), "checkpoint rank map", kMaxRankStateBytes);
}

Status CommitCheckpoint(const std::string& root, const CheckpointInfo& info) {
  const std::string manifest = "format: shardsim checkpoint 1\nstep: " + std::to_string(info.step) +
                               "\nworld: " + std::to_string(info.world) + "\nseed: " + std::to_string(info.seed) +
                               "\nmodel: " + YamlQuoted(info.model) + "\nlayout: " + YamlQuoted(info.layout) +
                               "\ndata: " + YamlQuoted(info.data) + "\n";
  SHARDSIM_RETURN_IF_ERROR(WriteFileAtomically(CheckpointDir(root, info.step) + "/manifest.yaml", manifest));
  return WriteFileAtomically(root + "/latest", "step-" + std::to_string(info.step) + "\n");
}

StatusOr<CheckpointInfo> ReadLatestCheckpoint(const std::string& root) {
  SHARDSIM_ASSIGN_OR_RETURN(const std::string latest, ReadWholeFile(root + "/latest", "checkpoint index"));
  std::string name = latest;
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  if (name.rfind("step-", 0) != 0 || name.find('/') != std::string::npos) {
    return Status::Error(root + "/latest: expected 'step-K', found '" + name + "'");
  }
  const std::string path = root + "/" + name + "/manifest.yaml";
  SHARDSIM_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path, "checkpoint manifest"));
  SHARDSIM_ASSIGN_OR_RETURN(const CheckpointInfo info, ParseCheckpointManifest(text, path));
  if ("step-" + std::to_string(info.step) != name) {
    return Status::Error(path + ": step " + std::to_string(info.step) + " in a folder named " + name);
  }
  return info;
}

StatusOr<CheckpointInfo> ParseCheckpointManifest(const std::string& text, const std::string& path) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, path));
  YamlMap map = file.Root();
  CheckpointInfo info;
  if (map.String("format") != "shardsim checkpoint 1") map.Error("format", "expected 'shardsim checkpoint 1'");
  info.step = map.Int("step", 1);
  info.world = map.Int("world", 1);
  info.seed = map.Int("seed", 0);
  info.model = map.String("model");
  info.layout = map.String("layout");
  info.data = map.String("data");
  map.Finish();
  SHARDSIM_RETURN_IF_ERROR(file.status());
  return info;
}

std::string CheckpointMismatch(const CheckpointInfo& saved, const CheckpointInfo& now) {
  std::string why;
  auto differ = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) why += std::string(why.empty() ? "" : "; ") + what + " '" + a + "', now '" + b + "'";
  };
  differ("saved with model", saved.model, now.model);
  differ("saved with seed", std::to_string(saved.seed), std::to_string(now.seed));
  differ("saved with data", saved.data, now.data);
  return why;
}

bool NeedsReshard(const CheckpointInfo& saved, const CheckpointInfo& now) {
  return saved.layout != now.layout || saved.world != now.world;
}

}  // namespace shardsim::runtime
