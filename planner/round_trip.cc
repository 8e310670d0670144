// See round_trip.h.
#include "planner/round_trip.h"

#include <map>

#include "planner/planner.h"
#include "src/sim/simulator.h"
#include "src/io/deepspeed_config.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"
#include "src/io/torchtitan_config.h"
#include "src/io/torchtitan_model.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim::planner {
namespace {

std::map<std::string, std::string> Keys(const Layout& l) {
  std::map<std::string, std::string> out;
  for (const std::string& kv : Split(FormatLayout(l), ',')) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

// The planned layout with every key a DeepSpeed config holds back at its default.
Layout WithoutDeepSpeedKeys(const Layout& planned) {
  const Layout defaults;
  Layout l = planned;
  l.mbs = defaults.mbs;
  l.gbs = 0;
  l.dp = 0;
  l.zero = defaults.zero;
  l.overlap_dp = defaults.overlap_dp;
  l.offload = defaults.offload;
  l.bucket_params = defaults.bucket_params;
  l.prefetch = defaults.prefetch;
  l.live_params = defaults.live_params;
  if (l.dtype != DType::kFp8) {  // fp8 is the model code's (emit.h): the config says bf16
    l.dtype = defaults.dtype;
    l.dtype_given = false;
  }
  return l;
}

}  // namespace

std::string RoundTrip::Summary() const {
  std::string s = "round trip (" + format + ", shardsim's reader): ";
  if (!differences.empty()) return s + "FAILED: " + Join(differences, "; ");
  s += "read back as planned";
  if (!unexpressed.empty()) s += " (" + Join(unexpressed, ", ") + " from the plan: not config keys)";
  s += "; " + Fmt("%.1f GiB", memory_bytes / kGiB) + " of " + Fmt("%.1f GiB", memory_limit_bytes / kGiB);
  if (!fits()) s += ": DOES NOT FIT";
  return s;
}

RoundTrip CheckRoundTrip(const std::string& format, const std::string& config, const ModelSpec& m,
                         const Cluster& cluster, int64_t gpus, const Layout& planned,
                         double memory_limit_bytes) {
  const HardwareSpec& hw = cluster.hardware();
  RoundTrip rt;
  rt.format = format;
  rt.memory_limit_bytes = memory_limit_bytes;
  const std::string name = "the emitted " + format + " configuration";
  Layout read;
  if (format == "megatron" || format == "nemo") {
    StatusOr<MegatronRead> r = format == "nemo" ? ParseNemoOverrides(config, name) : ParseMegatronArgs(config, name);
    if (!r.ok()) {
      rt.differences.push_back(r.status().message());
      return rt;
    }
    for (const std::string& d : ModelMismatches(m, r->model)) rt.differences.push_back(d);
    read = r->layout;
  } else if (format == "torchtitan") {
    StatusOr<TorchtitanRead> r = ParseTorchtitanToml(config, name);
    if (!r.ok()) {
      rt.differences.push_back(r.status().message());
      return rt;
    }
    for (const std::string& d : Llama3Mismatches(m, r->model)) rt.differences.push_back(d);
    read = r->layout;
  } else {
    StatusOr<DeepSpeedRead> r = ParseDeepSpeedConfig(config, name, WithoutDeepSpeedKeys(planned));
    if (!r.ok()) {
      rt.differences.push_back(r.status().message());
      return rt;
    }
    read = r->layout;
    for (const char* k : {"tp", "pp", "cp", "ep", "vpp", "sp", "schedule", "recompute"}) {
      const std::optional<std::string> v = LayoutValue(planned, k);
      const bool is_default = !v || *v == "1" || *v == "off" || *v == "none" ||
                              (std::string(k) == "schedule" && planned.pp == 1);
      if (!is_default) rt.unexpressed.push_back(std::string(k) + "=" + *v);
    }
  }
  // The router's load imbalance is the data's, not a setting no configuration holds; DeepSpeed's
  // and torchtitan's configurations hold no capacity factor either (model code sets it).
  if (planned.moe_imbalance != 1) {
    rt.unexpressed.push_back("moe_imbalance=" + *LayoutValue(planned, "moe_imbalance"));
    read.moe_imbalance = planned.moe_imbalance;
  }
  if (planned.moe_capacity > 0 && format != "megatron" && format != "nemo") {
    rt.unexpressed.push_back("moe_capacity=" + *LayoutValue(planned, "moe_capacity"));
    read.moe_capacity = planned.moe_capacity;
  }
  StatusOr<Layout> resolved = ResolveLayoutFor(read, gpus, hw);
  if (!resolved.ok()) {
    rt.differences.push_back(resolved.status().message());
    return rt;
  }
  rt.read_back = FormatLayout(*resolved);
  const std::map<std::string, std::string> want = Keys(planned), got = Keys(*resolved);
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    const std::string g = it == got.end() ? "(absent)" : it->second;
    if (g != v) rt.differences.push_back(k + ": planned " + v + ", read back " + g);
  }
  for (const auto& [k, v] : got) {
    if (!want.count(k)) rt.differences.push_back(k + ": not planned, read back " + v);
  }
  SimOptions so;  // as the planner simulates a candidate (planner.cc)
  so.critical_path = false;
  StatusOr<SimResult> sim = Simulate(m, cluster, *resolved, so);
  if (!sim.ok()) {
    rt.differences.push_back("simulating the layout read back: " + sim.status().message());
    return rt;
  }
  rt.memory_bytes = sim->peak_memory_bytes;
  return rt;
}

}  // namespace shardsim::planner
