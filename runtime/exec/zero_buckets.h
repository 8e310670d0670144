// ZeroBuckets: where one rank's parameters and gradients live under ZeRO, and ZeRO-2/3's
// per-bucket transients (Rajbhandari et al. 2020, Sec. 5.2 P_g and 5.3 P_p).
//
// A bucket is a contiguous range of the rank's flat parameter buffer (ParamLayout order) that
// moves as one unit: the embeddings, one transformer layer, or the final norm + LM head (a tied
// table held on two stages is a bucket of its own on both, the positions another).
// Each bucket is sharded evenly over DP (as FSDP shards a unit): padded to dp x chunk floats,
// rank r owns the r-th chunk; the rank's sharded state is its chunks, bucket after bucket.
//   ZeRO-2 (P_os+g): the persistent gradients are this rank's chunks. A bucket's backward
//     writes into a transient (dp x chunk) buffer (OpenGrads); ReduceGrads sums SP's partial
//     tensors over TP, reduce-scatters the bucket over DP, adds this rank's chunk into its
//     state and frees the bucket. With overlap_dp (DeepSpeed's overlap_comm, FSDP's
//     reduce-scatter on its own stream) the reduce-scatter is issued non-blocking and the
//     bucket stays open until the next bucket's ReduceGrads (or WaitReductions, at the end of
//     the micro-batch's backward on this stage) completes it: one bucket in flight behind the
//     next bucket's backward, the sums and their order unchanged. After the step,
//     AllGatherParams all-gathers each bucket.
//   ZeRO-3 (P_os+g+p): the persistent parameters are also only the chunks; Gather all-gathers
//     a bucket's parameters into a transient buffer for a pass, and Release frees it.
//   ZeRO-1 (P_os): the gradients stay whole; at the step each bucket is reduce-scattered over
//     DP (FinishReductions), so this rank holds the sum of its chunks, as Megatron-LM's
//     distributed optimizer does bucket by bucket. With overlap_dp the last micro-batch's
//     backward issues each bucket's reduce-scatter, non-blocking, as soon as the bucket is
//     done (ReduceGrads), and the step only waits for them.
// Memory kinds, matched by src/cost/memory.cc StageMemory: gradient buckets are counted as
// kGradients (they are gradients, only short-lived), gathered parameters as kOther (the
// simulator's "ZeRO-3 gathered parameters", next to the other transient buffers).
// T is the storage type of the working parameters (float, or Bf16 under mixed precision, where
// the fp32 master copy is the executor's, sharded as the optimizer states); gradients are fp32.
// Under ZeRO 0 (or dp = 1) nothing is bucketed: the accessors point into the whole buffers
// and the bucket operations do nothing, so the executor calls them unconditionally.
// An MoE model's experts (the flat buffer's last range, param_layout.h): with replicas
// (Layout::edp > 1) each MoE layer's local experts are a bucket of their own, sharded, reduced
// and gathered over Group::kEdp as the other buckets are over Group::kDp (Megatron-Core's
// distributed optimizer keeps experts in a buffer over the expert-data-parallel group; FSDP
// with EP shards them over it). Without replicas they are in no bucket: this rank owns its
// experts whole, their state after the buckets', never gathered or reduced here.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/cpu/param_layout.h"
#include "runtime/cpu/transformer_block.h"
#include "runtime/exec/exec_context.h"
#include "runtime/exec/shard.h"
#include "src/util/status.h"

namespace shardsim::runtime {

template <typename T>
class ZeroBuckets {
 public:
  // `params` (T) and `grads` (fp32): the executor's persistent buffers, each either the whole
  // padded flat buffer or, where this stage shards it, the StateSize() elements of this rank's
  // chunks. All pointers must outlive this object.
  // `overlap`: the layout's overlap_dp (ZeRO-1's reductions issued during the backward pass).
  // dp: the dense weights' replicas (DP x CP); edp: an expert's (Layout::edp).
  ZeroBuckets(ExecContext* ctx, const RankShard* shard, int zero, int64_t dp, bool overlap, int64_t edp = 1);
  // The persistent buffers, once allocated (StateSize() floats where sharded).
  void Bind(T* params, float* grads) {
    params_ = params;
    grads_ = grads;
  }

  // ZeRO-2/3 with offload (ZeRO-Offload, Ren et al. 2021, Sec. 4.2): the gradient shard is in
  // host memory, `host_grads` (StateSize() floats of `host`); each reduced chunk is copied
  // there as soon as its reduction completes and added with the host's kernels, every
  // micro-batch (DeepSpeed's stage_1_and_2.py async_accumulate_grad_in_cpu_via_gpu, stage3.py
  // partition_grads). The device then holds only the open buckets. Call after Bind.
  void OffloadGradients(Memory* host, Kernels* host_kernels, float* host_grads) {
    host_ = host;
    host_kernels_ = host_kernels;
    host_grads_ = host_grads;
  }

  // ZeRO-3 with offload=optimizer+params (ZeRO-Infinity's offload_param): the persistent
  // parameter shard (Bind's `params`) is in host memory; Gather copies this rank's part of a
  // bucket to the device before all-gathering it. Call after Bind.
  void OffloadParams() { params_on_host_ = true; }

  // ZeRO 1-3 shard each bucket evenly over DP (FSDP's and DeepSpeed's per-unit partition,
  // Megatron's distributed optimizer per bucket): a bucket of n floats is padded to
  // dp x ceil(n / dp), rank r owns the r-th ceil(n / dp), so its reduction is a reduce-scatter
  // and its gather an all-gather. These are the ranges this rank's optimizer updates (the
  // whole buffer without ZeRO).
  std::vector<std::pair<int64_t, int64_t>> OwnedRanges() const;
  // Elements of the sharded state (ZeRO >= 1: the sum of the buckets' chunks).
  int64_t StateSize() const { return state_size_; }
  // Where element `offset` (in an owned range) lives in the sharded state buffers.
  int64_t StateIndex(int64_t offset) const;

  bool bucketed() const { return bucketed_; }            // ZeRO >= 1 with dp > 1 or edp > 1
  bool shards_experts() const { return shards_experts_; }  // ... and experts with replicas
  bool shards_grads() const { return shards_grads_; }    // ZeRO >= 2 with dp > 1
  bool shards_params() const { return shards_params_; }  // ZeRO 3 with dp > 1

  // Bucket indices; -1 when this rank holds no such tensors.
  int embedding() const { return embedding_; }
  int head() const { return head_; }
  // The learned positions' own bucket where the word embeddings have one (a tied table on two
  // stages, first stage); else -1 (they are in embedding()'s).
  int positions() const { return positions_; }
  int layer(int64_t global_layer) const;
  int experts(int64_t global_layer) const;  // an MoE layer's experts' bucket (shards_experts)
  int BucketOf(int64_t offset) const;  // the bucket holding flat-buffer element `offset`

  // Pointers to element `offset` of the rank's flat buffer: the whole buffer, or the bucket's
  // gathered parameters / open gradients (CHECK-fails when not gathered / open).
  const T* Param(int64_t offset) const;
  float* Grad(int64_t offset) const;
  BlockWeights<T> LayerParams(int64_t global_layer) const;
  BlockWeights<float> LayerGrads(int64_t global_layer) const;
  // Element `offset` (in an owned range) of the persistent, possibly sharded, buffers.
  T* ParamState(int64_t offset) const;
  float* GradState(int64_t offset) const;

  // ZeRO-3: bucket b's parameters, and bucket `also`'s (the next layer when prefetching, the
  // tied embedding table for the head), gathered over DP; -1 skips, a gathered one is kept.
  Status Gather(int b, int also = -1);
  void Release(int b);  // frees the gathered parameters, if any

  // ZeRO-2/3: bucket b's transient gradients, zeroed (kept if already open).
  Status OpenGrads(int b);
  // Bucket b's backward is done (for this micro-batch). ZeRO-2/3: sums its gradients over TP
  // (tensors SP leaves partial, in one coalesced all-reduce) and DP, adds this rank's part into the gradient shard, and
  // frees the bucket; with overlap the DP reduce-scatter is issued non-blocking and the bucket
  // issued before it is completed instead. ZeRO-1 with overlap, on the last micro-batch: the
  // DP reduce-scatter issued non-blocking (SP's TP sums follow the DP ones, in the executor's
  // ReduceGradients). Otherwise nothing.
  Status ReduceGrads(int b, bool last_microbatch);
  // ZeRO-2/3 with overlap: completes the bucket still in flight (if any), as at the end of a
  // micro-batch's backward pass on this stage, so none outlives it. Otherwise nothing.
  Status WaitReductions();
  // ZeRO-1, before the optimizer: every bucket's reduce-scatter (those not issued yet, now),
  // waited for, and this rank's summed chunks written over its ranges of the gradients.
  Status FinishReductions();

  // ZeRO-1/2, after the optimizer: every DP rank's updated share of each bucket all-gathered
  // into the whole parameter buffer, a bucket at a time (scratch: one bucket).
  Status AllGatherParams();

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;   // range of the rank's flat buffer
    ParamLayout layout;           // its tensors, offsets from `begin`
    std::vector<size_t> tensors;  // their indices in the rank's layout
    DeviceBuffer params;          // gathered dp x chunk of T, kOther; ZeRO-3
    DeviceBuffer grads;           // open dp x chunk floats, kGradients; ZeRO-2/3
    int64_t chunk = 0;            // ceil(size / dp): each rank's share
    int64_t own_begin = 0, own_end = 0;  // this rank's share (may be empty at the end)
    int64_t base = 0;             // its first float in the sharded state
    DeviceBuffer reduced;         // ZeRO-1, or 2/3 with overlap: this rank's chunk of the DP
                                  // sum, kOther
    int64_t pending = -1;         // the reduce-scatter's handle while in flight
    Group group = Group::kDp;     // its replicas: kDp (DP x CP), or kEdp for a layer's experts
    int64_t replicas = 1;         // that group's size
    int64_t size() const { return end - begin; }
  };
  // The names the simulator gives bucket k's gradient reduce-scatter and parameter all-gather
  // (src/cost/layer_plan.cc): by ZeRO stage, a layer's experts apart.
  SpanLabel GradientLabel(const Bucket& k) const;
  SpanLabel GatherLabel(const Bucket& k) const;
  // ZeRO-1: bucket b's TP sum and DP reduce-scatter, non-blocking or not.
  Status IssueReduction(int b, bool blocking);
  // ZeRO-2/3 with overlap: waits for bucket b's reduce-scatter, adds this rank's chunk into the
  // gradient shard and frees the bucket.
  Status CompleteReduction(int b);
  // SP: the tensors of bucket k that SP leaves partial (at `bucket_grads`, the bucket's first
  // gradient) summed over the TP group.
  Status SumPartialOverTp(const Bucket& k, float* bucket_grads);

  ExecContext* ctx_;
  const RankShard* shard_;
  bool bucketed_ = false, shards_grads_ = false, shards_params_ = false, overlap_ = false;
  bool shards_experts_ = false;
  int64_t dp_ = 1;
  int64_t state_size_ = 0;
  int64_t experts_begin_ = 0;  // the experts' range [experts_begin_, total): whole, unbucketed
  int64_t experts_base_ = 0;   // its first float in the sharded state
  T* params_ = nullptr;
  float* grads_ = nullptr;
  Memory* host_ = nullptr;             // offload: where host_grads_ lives
  Kernels* host_kernels_ = nullptr;    // offload: the host's kernels
  float* host_grads_ = nullptr;        // offload: the gradient shard, in host memory
  bool params_on_host_ = false;        // offload=optimizer+params: params_ is host memory
  std::vector<Bucket> buckets_;    // in flat-buffer order
  std::vector<int64_t> layer_of_;  // per bucket: its id (zero_buckets.cc BucketId)
  int embedding_ = -1, head_ = -1, positions_ = -1;
  int in_flight_ = -1;  // ZeRO-2/3 with overlap: the bucket whose reduce-scatter is in flight
};

}  // namespace shardsim::runtime
