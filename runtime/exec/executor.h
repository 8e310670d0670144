// Executor: trains one rank's share of a model under a layout, on any Backend: data
// parallelism with ZeRO 0-3, Megatron tensor parallelism with optional sequence parallelism,
// pipeline parallelism with the simulator's schedules (GPipe, 1F1B, interleaved; the order
// comes from src/layout/pipeline.h), gradient accumulation, and activation recomputation (none,
// selective, full). Every rank of the layout's world runs one Executor; together they compute
// what the single-process runtime/cpu Transformer computes, up to floating-point order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cpu/adamw.h"
#include "runtime/cpu/token_source.h"
#include "runtime/exec/reshard.h"
#include "runtime/exec/shard.h"
#include "runtime/exec/timeline.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim::runtime {

// Why the executor cannot run `l` (empty when it can): features it does not implement are
// rejected, never ignored.
std::vector<std::string> UnsupportedLayout(const ModelSpec& m, const Layout& l);

// Whether step `step`'s loss can be trained on: an error once it is NaN or infinite (the
// parameters are then no longer numbers, and every later step would report the same), saying
// what usually causes it. Every rank holds the same global loss, so every rank stops alike.
Status CheckLoss(int64_t step, double loss);

class Executor {
 public:
  // `backend` and `timeline` (may be null) must outlive the executor. The backend's groups
  // must be the layout's. Allocates and initializes this rank's parameters and optimizer.
  // The layout's dtype picks the precision: fp32, or bf16 mixed precision (Megatron-LM's bf16
  // mode: bf16 working weights and activations, fp32 gradients, fp32 master weights and AdamW
  // states; executor_impl.h).
  static StatusOr<std::unique_ptr<Executor>> Create(const ModelSpec& m, const Layout& l,
                                                    Backend* backend, const AdamWConfig& opt,
                                                    uint64_t seed, Timeline* timeline);
  virtual ~Executor() = default;

  // One iteration on global sequences [step * gbs, (step + 1) * gbs) of `data`: every
  // micro-batch forward and backward in the schedule's order, the gradient reductions, the
  // clipped AdamW update. Returns the global batch's mean loss (nats per token, every rank).
  virtual StatusOr<double> Step(const TokenSource& data, int64_t step) = 0;

  // This rank's training state between steps, as bytes: the AdamW step count, then the working
  // weights, the fp32 master copy (mixed precision), and both AdamW moments, each as this rank
  // holds it (whole, or its ZeRO share), then under compress=R PowerSGD's error feedback and Q. Gradients are zeroed at each step's start, data is a
  // function of the step and nothing draws random numbers, so this is all a resumed run needs
  // to continue bitwise. LoadState puts it back; it fails, saying so, when the sizes are not
  // this rank's (a checkpoint of another layout).
  virtual StatusOr<std::string> SaveState() = 0;
  virtual Status LoadState(const std::string& bytes) = 0;
  // Where SaveState's fp32 master weights and moments sit in the single-process model: the
  // elements this rank alone counts, as runs, encoded as a map file (reshard.h).
  virtual std::string SaveStateMap() = 0;
  // This rank's share of a whole-model state from a checkpoint of any layout (reshard.h): the
  // master weights and moments cut as Create cuts the initial parameters, the working weights
  // cast from them, the AdamW step count set. A collective (ZeRO's gathers): every rank calls
  // it. PowerSGD's state stays as Create made it.
  virtual Status LoadFullState(const FullState& full) = 0;

  // The AdamW learning rate of the following steps (a schedule's, runtime/cpu/lr_schedule.h).
  virtual void SetLearningRate(double lr) = 0;

  // The whole model's parameters (the fp32 master copy under mixed precision) in the
  // single-process layout, assembled from every rank (a collective: every rank must call it).
  virtual StatusOr<std::vector<float>> FullParams() = 0;

  // Host memory the offloaded optimizer (layout offload=optimizer) has held at its most: the
  // fp32 master copy, both AdamW moments, the gradient shard and the transfers' staging; 0
  // without offload. Device memory is the backend's (Memory::peak_bytes).
  virtual int64_t host_peak_bytes() const = 0;

  virtual const RankShard& shard() const = 0;
  virtual const Layout& layout() const = 0;
  // The phase the last error came from ("forward", "backward", "optimizer", ...).
  virtual const char* phase() const = 0;
};

}  // namespace shardsim::runtime
