// A libFuzzer target over every text shardsim reads (issue 18): the first byte of an input
// picks the reader, the rest is the text. Each reader must answer with a value or a clear
// error: a crash, a leak, a hang or undefined behaviour (AddressSanitizer and
// UndefinedBehaviorSanitizer) is a finding. What a reader accepts is then used the way the
// commands use it (sizes and counts of a model, a layout resolved on a GPU count), so the
// arithmetic on accepted values runs under the sanitizers too.
// Built only by scripts/fuzz.sh (clang, -DSHARDSIM_FUZZ=ON); seeds: the bundled descriptions.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/exec/checkpoint.h"
#include "runtime/exec/reshard.h"
#include "src/cost/estimate.h"
#include "src/hardware/cluster.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/deepspeed_config.h"
#include "src/io/megatron_args.h"
#include "src/io/moe_layer_freq.h"
#include "src/io/nemo_overrides.h"
#include "src/io/plan_file.h"
#include "src/io/torchtitan_config.h"
#include "src/layout/layout.h"
#include "src/layout/stack.h"
#include "src/layout/validate.h"
#include "src/sim/program.h"
#include "src/sim/simulator.h"
#include "src/model/model_spec.h"
#include "src/util/units.h"

namespace shardsim {
namespace {

// The readers, in the order of the selector byte (modulo their count). scripts/fuzz.sh writes
// its seeds with the same numbers.
enum Reader : uint8_t {
  kModelYaml, kHfConfig, kHardwareYaml, kLayoutSpec, kLayoutYaml, kPlanFile, kStackYaml,
  kMegatronArgs, kNemoOverrides, kDeepSpeed, kTorchtitan, kQuantity, kMoeLayerFreq,
  kEstimate,  // "LAYOUT\nMODEL YAML": the model under the layout on 64 H100, through the cost model
  kSimulate,  // the same text, through the simulator (a symmetric run; traced when small)
  kCheckpointManifest,  // a checkpoint's manifest.yaml (runtime/exec/checkpoint.h)
  kStateMap,  // a rank's map and state file (runtime/exec/reshard.h): a 4-byte length of the map,
              // the map, then the state file, into a model of 64 parameters
  kReaderCount
};

const HardwareSpec& FuzzHardware() {
  static const HardwareSpec* hw = [] {
    StatusOr<HardwareSpec> h = LoadHardware("dgx-h100");
    if (!h.ok()) __builtin_trap();
    return new HardwareSpec(*h);
  }();
  return *hw;
}

const Cluster& FuzzCluster() {
  static const Cluster* cluster = new Cluster(FuzzHardware(), 64);
  return *cluster;
}

// "LAYOUT\nMODEL YAML", both accepted, the layout resolved and checked on 8 nodes of the
// bundled dgx-h100 as `estimate` and `simulate` check them; false where either is refused.
bool ModelAndLayout(const std::string& text, ModelSpec* m, Layout* l) {
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return false;
  StatusOr<Layout> layout = ParseLayout(text.substr(0, newline));
  if (!layout.ok()) return false;
  StatusOr<ModelSpec> model = ParseModelYaml(text.substr(newline + 1), "fuzz-model");
  if (!model.ok()) return false;
  StatusOr<Layout> resolved = ResolveLayoutFor(*layout, 64, FuzzHardware());
  if (!resolved.ok() || !CheckLayout(*resolved, *model, FuzzHardware(), 64).ok()) return false;
  *m = std::move(model).value();
  *l = *resolved;
  return true;
}

// The cost model on an accepted model and layout, as `estimate` runs it. Integer fields of any
// size reach the cost model's arithmetic here.
void EstimateFromText(const std::string& text) {
  ModelSpec m;
  Layout l;
  if (!ModelAndLayout(text, &m, &l)) return;
  volatile double sink = EstimateIteration(m, FuzzCluster(), l).iteration_time_s;
  (void)sink;
}

// The simulator on the same: the program built, sized (SizeOfSimulation, the guard `simulate`
// applies) and run symmetric, with the trace kept when it is small. Programs of more than
// kFuzzTasks tasks are only built and sized, so that an input takes milliseconds; their event
// loop is the same code on more tasks.
constexpr double kFuzzTasks = 2e5;
void SimulateFromText(const std::string& text) {
  ModelSpec m;
  Layout l;
  if (!ModelAndLayout(text, &m, &l)) return;
  const IterationProgram program = BuildIteration(m, FuzzHardware(), l);
  SimOptions options;
  const SimulationSize size = SizeOfSimulation(program, l, options);
  if (!(size.tasks <= kFuzzTasks)) return;
  options.trace = size.tasks <= kFuzzTasks / 10;
  StatusOr<SimResult> r = RunProgram(m, FuzzCluster(), l, program, options);
  if (r.ok()) {
    volatile double sink = r->iteration_time_s + r->peak_memory_bytes;
    (void)sink;
  }
}

// Uses an accepted model as the commands do: its counts and sizes.
void UseModel(const ModelSpec& m) {
  volatile double sink = static_cast<double>(m.TotalParams()) + static_cast<double>(m.ActiveParams());
  (void)sink;
}

void UseLayout(const Layout& l) {
  for (int64_t gpus : {1, 8, 1024}) {
    StatusOr<Layout> r = ResolveLayout(l, gpus);
    if (r.ok()) {
      volatile int64_t sink = r->world();
      (void)sink;
    }
  }
}

}  // namespace
}  // namespace shardsim

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardsim;
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string name = "fuzz-input";
  switch (data[0] % kReaderCount) {
    case kModelYaml:
      if (StatusOr<ModelSpec> m = ParseModelYaml(text, name); m.ok()) UseModel(*m);
      break;
    case kHfConfig:
      if (StatusOr<ModelSpec> m = ParseHfConfig(text, name); m.ok()) UseModel(*m);
      break;
    case kHardwareYaml:
      (void)ParseHardwareYaml(text, name);
      break;
    case kLayoutSpec:
      if (StatusOr<Layout> l = ParseLayout(text); l.ok()) UseLayout(*l);
      break;
    case kLayoutYaml:
      if (StatusOr<Layout> l = ParseLayoutYaml(text, name); l.ok()) UseLayout(*l);
      break;
    case kPlanFile:
      (void)ParsePlanFile(text, name);
      break;
    case kStackYaml:
      (void)ParseStackYaml(text, name);
      break;
    case kMegatronArgs:
      (void)ParseMegatronArgs(text, name);
      break;
    case kNemoOverrides:
      (void)ParseNemoOverrides(text, name);
      break;
    case kDeepSpeed:
      (void)ParseDeepSpeedConfig(text, name, Layout{});
      break;
    case kTorchtitan:
      (void)ParseTorchtitanToml(text, name);
      break;
    case kQuantity:
      (void)ParseQuantity(text, Dimension::kBytes);
      break;
    case kMoeLayerFreq:
      (void)ParseMoeLayerFreq(text, 61);
      break;
    case kEstimate:
      EstimateFromText(text);
      break;
    case kSimulate:
      SimulateFromText(text);
      break;
    case kCheckpointManifest:
      (void)runtime::ParseCheckpointManifest(text, name);
      break;
    case kStateMap: {
      if (text.size() < 4) break;
      const size_t map_bytes = std::min<size_t>(text.size() - 4, static_cast<uint8_t>(text[0]) |
                                                                     static_cast<uint8_t>(text[1]) << 8 |
                                                                     static_cast<uint8_t>(text[2]) << 16 |
                                                                     static_cast<size_t>(static_cast<uint8_t>(text[3])) << 24);
      runtime::FullState full;
      full.master.assign(64, 0.0f);
      full.moment1.assign(64, 0.0f);
      full.moment2.assign(64, 0.0f);
      std::vector<uint8_t> counted(64, 0);
      (void)runtime::AddRankState(text.substr(4, map_bytes), text.substr(4 + map_bytes), "map", "state", true, &full,
                                  &counted);
      break;
    }
  }
  return 0;
}
