// TypedExecutor<T>: the Executor for one storage type T of activations and working weights:
// float (fp32 training), or Bf16 (mixed precision as Megatron-LM's bf16 mode: the forward and
// backward passes read bf16 weights and keep bf16 activations; weight gradients accumulate in
// fp32 (arguments.py: "bfloat16 requires gradient accumulation and all-reduce to be done in
// fp32"); AdamW updates an fp32 master copy, sharded as its moments, and the bf16 working copy
// is cast from it after each step). Memory kinds then match the simulator's 2 + 4 + 12 bytes
// per parameter (src/cost/memory.cc): working weights kWeights, gradients kGradients, master
// and moments kOptimizer. Private to runtime/exec: callers use Executor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/exec/block.h"
#include "runtime/exec/dp_overlap.h"
#include "runtime/exec/exec_context.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/zero_buckets.h"

namespace shardsim::runtime {

template <typename T>
class TypedExecutor final : public Executor {
 public:
  TypedExecutor(const ModelSpec& m, const Layout& l, Backend* backend, RankShard shard,
                const AdamWConfig& opt, Timeline* timeline);
  Status Allocate(uint64_t seed);

  StatusOr<double> Step(const TokenSource& data, int64_t step) override;
  void SetLearningRate(double lr) override { opt_.lr = lr; }
  StatusOr<std::string> SaveState() override;
  Status LoadState(const std::string& bytes) override;
  std::string SaveStateMap() override;
  Status LoadFullState(const FullState& full) override;
  StatusOr<std::vector<float>> FullParams() override;
  int64_t host_peak_bytes() const override { return host_.peak_bytes(); }
  const RankShard& shard() const override { return shard_; }
  const Layout& layout() const override { return layout_; }
  const char* phase() const override { return phase_; }

 private:
  static constexpr bool kMixed = !std::is_same_v<T, float>;

  // One micro-batch's state on one model chunk between its forward and backward passes.
  struct ChunkState {
    DeviceBuffer tokens, targets;          // (n) int32, embedding / head chunks
    std::vector<DeviceBuffer> residual;    // layers + 1 of (n_local, C) T: block inputs, output
    std::vector<BlockSaved> saved;         // one per layer
    DeviceBuffer final_out, final_mean, final_rstd;  // head chunk: final norm (T, fp32 stats)
    DeviceBuffer logits;                   // head chunk: (n, V / tp) T, probabilities after
    std::vector<WeightGradStash> stash;    // zero-bubble: per layer, from its B to its W pass
  };

  Status Forward(const TokenSource& data, int64_t step, int32_t mb, int32_t chunk);
  Status Backward(int32_t mb, int32_t chunk);
  // Zero-bubble's W pass (schedule=zero-bubble or zb-v): the chunk's layers' weight gradients
  // from the stash its B pass (Backward) left, top layer first, each layer's bucket reduced as
  // a 1F1B backward would reduce it.
  Status WeightGrad(int32_t mb, int32_t chunk);
  // The embedding's kernels over this rank's rows: fn(first row, rows, position of the first)
  // once, or under CP with learned positions once per run of a sequence's tokens.
  void ForEachEmbeddingRun(const std::function<void(int64_t row, int64_t rows, int64_t position)>& fn) const;
  Status HeadForward(ChunkState& s, const ChunkInfo& info, double* loss_sum);
  Status HeadBackward(ChunkState& s, T* dres, bool last_mb);
  Status OptimizerStep();
  // ZeRO 1/2 after the optimizer (and once at setup under mixed precision): every DP rank's
  // updated range of the working weights all-gathered into every rank's whole copy.
  Status GatherWorkingWeights();
  Status ReduceGradients();
  // A tied table held on two stages (RankShard::table_on_two_stages): after the DP reductions,
  // the first stage's and the head stage's reduced chunks of its gradient are summed, so both
  // copies take the same step (Megatron-LM's _allreduce_word_embedding_grads).
  Status SumTiedTableGrads();
  // The head stage's copy of such a table, [begin, end) of this rank's buffer; empty elsewhere.
  std::pair<int64_t, int64_t> TableCopy() const;
  // An MoE layer's local experts (and with `grads` their gradients and the load-balancing
  // loss's weight) for BlockForward / BlockBackward; nothing for a dense layer.
  std::optional<MoeArgs<T>> MoeOf(int64_t layer, bool grads);
  // The last micro-batch's backward of MoE layer `layer`: its experts' gradients all-reduced over
  // their replicas (Group::kEdp, dp / ep ranks), non-blocking; ReduceGradients waits.
  Status IssueExpertReduction(int64_t layer);
  // Whether this rank counts the tensor at offset for the world's norm and full parameters:
  // an expert's first replica (EDP rank 0), a dense tensor's DP rank 0 or ZeRO owner.
  bool CountsOnce(int64_t offset) const;
  StatusOr<double> GradSquaredNorm();  // over this rank's owned ranges, summed over the world
  Status WaitSends();
  Status ReleaseCompletedSends();
  const T* Param(const char* name) const;
  float* Grad(const char* name);
  // The fp32 parameters AdamW updates at element `offset` of an owned range: the master copy
  // under mixed precision or offload, else the parameters themselves.
  float* Master(int64_t offset);
  // Offload (ZeRO-Offload, Ren et al. 2021: layout offload=optimizer): the fp32 master copy,
  // both moments and the gradient shard live in host memory (host_), AdamW runs there with the
  // host's kernels (CpuKernels: the CPU Adam), and the updated working weights are copied back.
  bool offloaded() const { return layout_.offload != Offload::kNone; }
  Memory& StateMemory() { return offloaded() ? static_cast<Memory&>(host_) : backend_->memory(); }
  Kernels& StateKernels() { return offloaded() ? static_cast<Kernels&>(host_k_) : ctx_.k(); }
  // offload=optimizer+params (ZeRO-Infinity's offload_param, ZeRO-3): the parameter shard is in
  // host memory too, updated there, and each ZeRO-3 gather uploads this rank's part first.
  bool params_offloaded() const { return layout_.offload == Offload::kOptimizerAndParams; }
  Memory& ParamMemory() { return params_offloaded() ? static_cast<Memory&>(host_) : backend_->memory(); }
  // The fp32 gradient AdamW reads at element `offset` of an owned range.
  float* StepGrad(int64_t offset);
  // Offload under ZeRO-1: this rank's reduced ranges copied to the host gradient shard (ZeRO-2/3
  // copy each bucket's chunk as it is reduced, zero_buckets.h).
  Status GradientsToHost();
  // The working weights of owned range [from, to) from the master copy: cast on the device
  // (mixed precision), or, offloaded, on the host (bf16) and copied to the device.
  Status UpdateWorkingWeights(int64_t from, int64_t to);
  // The fp32 parameters from `local` (this rank's layout, total_ elements) into the master copy
  // where this rank updates it, and the working weights cast and gathered from it (Allocate's
  // initial values, LoadFullState's).
  Status SetMasterWeights(const std::vector<float>& local);
  // ZeRO-3 gathers the next layer with the running one (prefetch, live_params permitting).
  bool PrefetchesZero3() const;
  int64_t SequenceIndex(int64_t step, int32_t mb) const;
  int Tag(int32_t mb, int64_t model_chunk, bool backward) const;

  ModelSpec model_;
  Layout layout_;
  Backend* backend_;
  RankShard shard_;
  AdamWConfig opt_;
  ExecContext ctx_;
  BlockDims dims_;
  const char* phase_ = "setup";

  int64_t total_ = 0;   // this rank's parameter count
  int64_t padded_ = 0;  // rounded up to a multiple of dp (ZeRO shards)
  // Host memory and kernels for the offloaded optimizer (declared before the buffers it holds,
  // which must be freed first). Unused without offload.
  HostMemory host_;
  CpuKernels host_k_;
  // Persistent model states: whole (padded_ elements) or this rank's share (zero_buckets.h):
  // moments (and the mixed-precision master) under ZeRO >= 1, gradients >= 2, parameters 3.
  DeviceBuffer params_;                      // T: the working weights (host_ under optimizer+params)
  DeviceBuffer master_;                      // fp32, mixed precision or offload only
  DeviceBuffer grads_, moment1_, moment2_;   // fp32; moments in host_ under offload
  DeviceBuffer host_grads_;                  // fp32 gradient shard in host_, offload only
  std::unique_ptr<ZeroBuckets<T>> zero_;     // where parameters and gradients are
  std::unique_ptr<DpOverlap> overlap_;       // overlap_dp under ZeRO 0
  // MoE: the experts come last in the flat buffer (param_layout.h): from experts_begin_, layer
  // by layer (expert_ranges_), reduced over kEdp (expert_pending_, in flight).
  int64_t experts_begin_ = 0;
  std::map<int64_t, std::pair<int64_t, int64_t>> expert_ranges_;
  std::vector<int64_t> expert_pending_;
  int64_t adam_step_ = 0;

  std::map<std::pair<int32_t, int32_t>, ChunkState> live_;  // (chunk, micro-batch)
  std::vector<std::pair<int64_t, DeviceBuffer>> sends_;     // in flight
  double loss_sum_ = 0;
};

}  // namespace shardsim::runtime
