// Benchmarks of the runtime (runtime/exec) on the CPU backend in one process: a whole training
// step of the tiny model, and the GEMM the calibration fits. Figures in docs/performance.md.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "runtime/backend/local_collectives.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/exec/executor.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/check.h"

namespace shardsim::runtime {
namespace {

// One training step of models/tiny.yaml, mbs 2, gbs 8 (4 micro-batches of 2 x 64 tokens), one
// rank, by argument: fp32 unfused attention with recompute none (0), selective (1), full (2);
// bf16 mixed precision (3: the CPU's bf16 widens and rounds around every fp32 kernel); fp32
// with attention=flash (4).
void BM_TinyTrainingStep(benchmark::State& state) {
  StatusOr<ModelSpec> model = LoadModel("tiny");
  CHECK(model.ok()) << model.status().message();
  const char* specs[] = {"mbs=2,gbs=8,dtype=fp32,attention=unfused",
                         "mbs=2,gbs=8,dtype=fp32,attention=unfused,recompute=selective",
                         "mbs=2,gbs=8,dtype=fp32,attention=unfused,recompute=full",
                         "mbs=2,gbs=8,dtype=bf16,attention=unfused",
                         "mbs=2,gbs=8,dtype=fp32,attention=flash"};
  StatusOr<Layout> layout = ParseLayout(specs[state.range(0)]);
  CHECK(layout.ok());
  StatusOr<Layout> resolved = ResolveLayout(*layout, 1);
  CHECK(resolved.ok());
  CpuBackend backend(std::make_unique<LocalCollectives>());
  StatusOr<std::unique_ptr<Executor>> exec =
      Executor::Create(*model, *resolved, &backend, AdamWConfig{}, 1234, nullptr);
  CHECK(exec.ok()) << exec.status().message();
  const MarkovStream data({.vocab = model->vocab, .seed = 7});
  int64_t step = 0;
  for (auto _ : state) {
    StatusOr<double> loss = (*exec)->Step(data, step++);
    benchmark::DoNotOptimize(loss);
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(8 * model->seq_len),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TinyTrainingStep)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

// out (n, n) = in (n, n) w^T through the CPU backend's kernel: the rate calibrate fits.
void BM_CpuGemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(n * n, 0.01f), w(n * n, 0.02f), out(n * n);
  CpuKernels k;
  for (auto _ : state) {
    k.LinearForward(a.data(), w.data(), nullptr, out.data(), n, n, n);
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CpuGemm)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shardsim::runtime
