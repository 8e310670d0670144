// MPI test program (ctest runs it under mpirun -np 2): data parallelism with ZeRO 0, 1, 2 and
// 3 reproduces the single-process run of the tiny model. For each stage, 10 steps of a global
// batch of 8 sequences x 32 tokens (micro-batches of 2 per rank): every step's loss and the
// final parameters must equal the single-process reference (same seed, same batches, computed
// in each process) within 1e-5 relative in fp32 (parameters: per tensor, relative L2). The reference sums the batch's gradients in
// one order, the DP run in another (two halves, then an MPI sum), so bit equality is not
// expected; 1e-5 is ~100 fp32 ulps, far above that summation noise after 10 Adam steps and
// far below any real error (a missing 1/dp scale changes the first update by 2x).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/cpu/markov_stream.h"
#include "runtime/cpu/train_step.h"
#include "runtime/mpi/data_parallel.h"

namespace {

using namespace shardsim;
using namespace shardsim::runtime;

int failures = 0;

void Expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
  }
}

double Relative(double a, double b) { return std::fabs(a - b) / std::max(1e-30, std::max(std::fabs(a), std::fabs(b))); }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const ModelSpec spec = *LoadModel("tiny");
  StatusOr<Layout> layout = ResolveLayout(*ParseLayout("dp=2,mbs=2,gbs=8"), 2);
  StatusOr<ProcessGroups> groups = ProcessGroups::Create(*layout, 60);
  if (!groups.ok()) {
    std::fprintf(stderr, "%s\n", groups.status().message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int me = groups->world.rank();
  const AdamWConfig config{.lr = 3e-3};
  const MarkovStream data({.vocab = spec.vocab, .seed = 7});
  constexpr int kSteps = 10;
  constexpr int64_t kBatch = 8, kSeq = 32, kMbs = 2;

  // The single-process reference: the whole batch, micro-batches of 2.
  Transformer<float> ref = *Transformer<float>::Create(spec);
  ref.Init(1234);
  AdamW<float> ref_opt(ref.layout(), config);
  std::vector<float> ref_loss;
  for (int s = 0; s < kSteps; ++s) ref_loss.push_back(TrainStep(ref, ref_opt, data.Batch(s * kBatch, kBatch, kSeq), kMbs));

  for (int zero = 0; zero <= 3; ++zero) {
    Transformer<float> model = *Transformer<float>::Create(spec);
    model.Init(1234);
    AdamW<float> opt(model.layout(), config);
    DataParallelTrainer trainer(&model, &opt, &groups->dp, zero, kMbs);
    double worst_loss = 0;
    for (int s = 0; s < kSteps; ++s) {
      StatusOr<float> loss = trainer.Step(data.Batch(s * kBatch, kBatch, kSeq));
      Expect(loss.ok(), "step", me);
      if (!loss.ok()) break;
      worst_loss = std::max(worst_loss, Relative(*loss, ref_loss[s]));
    }
    double worst_param = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < model.params().size(); ++i) {
      const double e = std::fabs(model.params()[i] - ref.params()[i]) /
                       std::max(1e-3, static_cast<double>(std::fabs(ref.params()[i])));
      if (e > worst_param) {
        worst_param = e;
        worst_i = i;
      }
    }
    double diff2 = 0, ref2 = 0, worst_tensor = 0;
    for (const ParamTensor& t : ref.layout().tensors()) {
      double d2 = 0, r2 = 0;
      for (int64_t i = t.offset; i < t.offset + t.size(); ++i) {
        const double d = model.params()[i] - ref.params()[i];
        d2 += d * d;
        r2 += static_cast<double>(ref.params()[i]) * ref.params()[i];
      }
      diff2 += d2;
      ref2 += r2;
      worst_tensor = std::max(worst_tensor, std::sqrt(d2 / std::max(r2, 1e-30)));
    }
    if (me == 0 && getenv("DEBUG_DP")) {
      for (const ParamTensor& t : ref.layout().tensors()) {
        if (static_cast<int64_t>(worst_i) >= t.offset && static_cast<int64_t>(worst_i) < t.offset + t.size()) {
          std::printf("worst at %s[%lld]: dp %.9g ref %.9g\n", t.name.c_str(), static_cast<long long>(worst_i - t.offset),
                      model.params()[worst_i], ref.params()[worst_i]);
        }
      }
    }
    Expect(worst_loss <= 1e-5, "zero=" + std::to_string(zero) + " loss within 1e-5 (" + std::to_string(worst_loss) + ")", me);
    // Parameters: relative L2 error of every tensor. Element-wise agreement is not a sound
    // criterion under Adam: an element whose gradient is at the level of fp32 summation noise
    // gets a full lr-sized step whose sign that noise decides (seen: one attention-output
    // weight of 1.4e-3 differs by 2e-6 while its tensor agrees to 3e-6 relative).
    Expect(worst_tensor <= 1e-5, "zero=" + std::to_string(zero) + " params within 1e-5 per tensor (" +
                                     std::to_string(worst_tensor) + ")", me);
    if (me == 0) {
      std::printf("dp=2 zero=%d: worst loss error %.2e; parameters: worst tensor relative L2 %.2e, "
                  "whole model %.2e, worst element %.2e, over %d steps\n",
                  zero, worst_loss, worst_tensor, std::sqrt(diff2 / ref2), worst_param, kSteps);
    }
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
