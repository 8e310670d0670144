// torch_reference_dump MODEL OUT_DIR GBS STEPS SEED LR: trains MODEL with the single-process
// reference (runtime/cpu Transformer<float>, the run that every sharded layout of `shardsim run`
// is held to by the mpi.Equivalence tests) on the data `shardsim run --seed SEED` draws, and
// writes a ReferenceDump with step 0's logits and gradient (tests/torch/reference.py compares
// them with PyTorch's). One micro-batch per step, so the logits are the whole batch's.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/cpu/adamw.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/cpu/train_step.h"
#include "runtime/cpu/transformer.h"
#include "runtime/exec/reference_dump.h"
#include "src/model/model_spec.h"

using namespace shardsim;
using namespace shardsim::runtime;

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s MODEL OUT_DIR GBS STEPS SEED LR\n", argv[0]);
    return 2;
  }
  StatusOr<ModelSpec> spec = LoadModel(argv[1]);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().message().c_str());
    return 1;
  }
  StatusOr<Transformer<float>> created = Transformer<float>::Create(*spec);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().message().c_str());
    return 1;
  }
  Transformer<float> model = std::move(created).value();
  ReferenceDump d;
  d.model = *spec;
  d.source = "single-process reference (runtime/cpu Transformer<float>)";
  d.layout = "tp=1,pp=1,dp=1,dtype=fp32";
  d.dtype = "fp32";
  d.gbs = std::atoll(argv[3]);
  d.mbs = d.gbs;
  const int64_t steps = std::atoll(argv[4]);
  d.seed = std::strtoull(argv[5], nullptr, 10);
  d.adamw.lr = std::atof(argv[6]);
  if (d.gbs < 1 || steps < 1 || !(d.adamw.lr > 0)) {
    std::fprintf(stderr, "GBS and STEPS must be positive integers, LR positive\n");
    return 2;
  }
  d.schedule.max_lr = d.adamw.lr;  // constant
  d.schedule.decay_steps = steps;
  model.Init(d.seed);
  AdamW<float> optimizer(model.layout(), d.adamw);
  const MarkovStream data({.vocab = spec->vocab, .seed = d.seed});  // as `shardsim run`
  d.params_initial.assign(model.params().begin(), model.params().end());
  for (int64_t s = 0; s < steps; ++s) {
    const TokenBatch batch = data.Batch(s * d.gbs, d.gbs, spec->seq_len);
    d.AddBatch(batch);
    d.losses.push_back(AccumulateGradients(model, batch, d.gbs));
    if (s == 0) {
      d.logits.assign(model.logits().begin(), model.logits().end());
      d.grads.assign(model.grads().begin(), model.grads().end());
    }
    optimizer.Step(model.params(), model.grads());
  }
  d.params_final.assign(model.params().begin(), model.params().end());
  if (Status st = WriteReferenceDump(argv[2], d); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  std::printf("wrote %s: %lld steps, loss %.6f -> %.6f\n", argv[2], static_cast<long long>(steps),
              d.losses.front(), d.losses.back());
  return 0;
}
