// `shardsim calibrate`: measures this machine through a runtime backend and writes a hardware
// description whose efficiencies, latencies and fabric figures are fitted to the measurements
// (runtime/calibrate/calibrate.h). Under `mpirun -np N` it also fits the all-reduce over N
// ranks. Progress on stderr; the file is written whole or not at all (rank 0).
#include <cstdio>
#include <iostream>
#include <string>

#include "runtime/calibrate/calibrate.h"
#include "runtime/cli/run_backend.h"
#include "src/cli/args.h"
#include "src/cli/inputs.h"
#include "src/cli/commands.h"
#include "src/io/bundled.h"
#include "src/layout/layout.h"
#include "src/util/atomic_file.h"
#include "src/util/json_writer.h"

namespace shardsim::runtime {
namespace {

int Calibrate(int argc, char** argv) {
  const std::vector<cli::FlagSpec> flags = {
      {"backend", "B", "cpu or cuda", "cpu"},
      {"hardware", "H", "the description to start from (bundled name or file)", "cpu-host"},
      {"base", "H", "the old name of --hardware", ""},
      {"out", "FILE", "where to write the calibrated description (required)", ""},
      {"name", "NAME", "the description's name", "local"},
      {"model", "M", "fit on this model's op shapes (with --layout) instead of a generic grid", ""},
      {"layout", "SPEC", "the layout whose per-rank shapes --model uses, and whose dtype (fp32 or bf16; by default bf16 where the base has a bf16 rate) the kernels run in", "mbs=1"},
      {"seq-len", "T", "with --model: override its training sequence length", ""},
      {"min-sample", "SECONDS", "each case repeats until it runs this long", "0.002"},
      {"json", "", "print the fits as JSON", ""},
      {"help", "", "show this help", ""},
  };
  StatusOr<cli::Args> args = cli::Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return cli::Fail("calibrate", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout << "Usage: shardsim calibrate --out hardware/local.yaml [flags]   (mpirun -np N for "
                 "collectives)\n\nBenchmarks GEMMs, memory streams and (with several ranks) "
                 "all-reduce on this machine and fits the\ncost model's efficiencies and latencies "
                 "to them (docs/cli.md).\n\n"
              << cli::FlagHelp(flags);
    return 0;
  }
  const std::optional<std::string> out = args->Get("out");
  if (!out) return cli::Fail("calibrate", "--out FILE is required", 2);
  if (args->Has("base") && args->Has("hardware")) return cli::Fail("calibrate", "--base is the old name of --hardware: give one", 2);
  StatusOr<HardwareSpec> base = LoadHardware(*args->Get(args->Has("base") ? "base" : "hardware"));
  if (!base.ok()) return cli::Fail("calibrate", base.status().message(), 1);
  const RunProcess process = StartRunProcess(&argc, &argv);
  auto fail = [&](const std::string& message) {
    std::cerr << "shardsim calibrate: error: rank " << process.me << ": " << message << "\n";
    AbortRun(process, 1);
    return 1;
  };
  Layout layout;
  layout.dp = process.world;
  layout.gbs = process.world;
  StatusOr<std::unique_ptr<Backend>> backend =
      MakeRunBackend(*args->Get("backend"), layout, process, -1, 60);
  if (!backend.ok()) return fail(backend.status().message());
  CalibrationOptions options;
  // The kernels' dtype: the layout's, resolved against the base (bf16 where it has a bf16
  // rate, fp32 on a CPU host), as `run` would train it.
  StatusOr<Layout> parsed = ParseLayout(*args->Get("layout"));
  if (!parsed.ok()) return fail(parsed.status().message());
  StatusOr<Layout> resolved = ResolveLayoutFor(
      *parsed, parsed->tp * parsed->pp * parsed->cp * std::max<int64_t>(parsed->dp, 1), *base);
  if (!resolved.ok()) return fail(resolved.status().message());
  options.dtype = resolved->dtype;
  if (args->Get("model")) {
    std::vector<std::string> notices;
    StatusOr<ModelSpec> model = cli::LoadModelFlags(*args, &notices);
    if (!model.ok()) return fail(model.status().message());
    if (process.me == 0) {
      for (const std::string& n : notices) std::cerr << "shardsim calibrate: warning: " << n << "\n";
    }
    AddWorkloadCases(*model, *resolved, &options);
  }
  options.min_sample_s = std::atof(args->Get("min-sample")->c_str());
  if (!(options.min_sample_s > 0)) return fail("--min-sample must be a positive number of seconds");
  if (process.me == 0) options.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << "\n"; };
  StatusOr<CalibrationResult> r = runtime::Calibrate(**backend, *base, options);
  if (!r.ok()) return fail(r.status().message());
  int code = 0;
  if (process.me == 0) {
    const std::string yaml = CalibratedHardwareYaml(*r, *args->Get("name"), base->name);
    if (Status st = WriteFileAtomically(*out, yaml); !st.ok()) {
      std::cerr << "shardsim calibrate: error: " << st.message() << "\n";
      code = 1;
    }
    if (args->Has("json")) {
      JsonWriter w;
      w.BeginObject().Field("out", *out).Field("kernel_latency_s", r->compute.latency_s);
      w.Field("matmul_flops_per_s", r->compute.flop_rate).Field("memory_bytes_per_s", r->compute.byte_rate);
      w.Field("fit_r2", r->compute.r2).Field("max_sample_error", r->compute.max_rel_error);
      w.Field("matmul_efficiency", r->hardware.gpu.efficiency.matmul);
      w.Field("memory_efficiency", r->hardware.gpu.efficiency.memory);
      if (r->have_collectives) {
        w.Field("ranks", static_cast<int64_t>(r->collectives.ranks));
        w.Field("fabric_latency_s", r->collectives.latency_s).Field("fabric_bytes_per_s", r->collectives.bandwidth);
        w.Field("collective_max_sample_error", r->collectives.max_rel_error);
      }
      w.EndObject();
      std::cout << w.str();
    } else {
      // A rate of 0 was not needed by the fit: the base's figure stays.
      auto rate = [](double v, double unit, const char* name) {
        char text[64];
        if (v > 0) {
          std::snprintf(text, sizeof(text), "%.4g %s", v / unit, name);
        } else {
          std::snprintf(text, sizeof(text), "not fitted");
        }
        return std::string(text);
      };
      std::printf("wrote %s: kernel latency %.3g s, GEMM %s, memory %s, exp/tanh %s (R^2 %.4f, worst sample %.0f %%)\n",
                  out->c_str(), r->compute.latency_s, rate(r->compute.flop_rate, 1e9, "GFLOP/s").c_str(),
                  rate(r->compute.byte_rate, 1e9, "GB/s").c_str(),
                  rate(r->compute.transcendental_rate, 1e9, "G/s").c_str(), r->compute.r2,
                  100 * r->compute.max_rel_error);
    }
  }
  EndRunProcess();
  return code;
}

const cli::CommandRegistrar kRegister(
    {"calibrate", "measure this machine and fit a hardware description to it", Calibrate, 35});

}  // namespace
}  // namespace shardsim::runtime
