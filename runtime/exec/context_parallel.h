// Context parallelism on one rank: the sequence split over the cp ranks of Group::kCp in the
// load-balanced causal order, and the keys' and values' all-gather that attention needs.
//
// Each sequence of T tokens is cut into 2 cp chunks of L = T / (2 cp); rank r holds chunks r and
// 2 cp - 1 - r, so every rank has as many causal query-key pairs (Megatron-LM's CP; Liu et al.
// 2023's striped ring attention balances the same way). A rank's rows are ordered half-major:
// row (h B + s) L + j is token j of its half h (h = 0: chunk r, 1: chunk 2 cp - 1 - r) of
// sequence s, so each half's queries are one (B, L) block for the attention kernels.
//
// Attention is Transformer Engine's all-gather form of CP (AttnFuncWithCPAndKVAllGather,
// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py; Megatron-LM's
// --cp-comm-type all_gather): the forward all-gathers every rank's roped K and V over kCp and
// each half attends to all T keys with its causal offset; the backward gathers them again,
// computes the whole sequence's dK and dV partial sums, and reduce-scatters them to their
// owners. The layer plan prices exactly these collectives (src/cost/layer_plan.cc, CpBytes):
// one all-gather of K and V forward, one all-gather and one reduce-scatter backward (a third
// all-gather under full recomputation), each of cp x (this rank's rows) x (K + V widths).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/exec/block.h"
#include "runtime/exec/cp_split.h"
#include "runtime/exec/exec_context.h"

namespace shardsim::runtime {

// Calls fn(local_row, position) for each run of L consecutive tokens of one sequence in this
// rank's half-major rows: its first row and that token's position in the sequence.
void ForEachChunk(const CpSplit& split, int64_t b, const std::function<void(int64_t local, int64_t position)>& fn);

// This rank's rows of whole (B, T) host arrays (token ids, targets), in its half-major order.
std::vector<int32_t> LocalRows(const std::vector<int32_t>& whole, int64_t b, const CpSplit& split);

// k, v (n, kvd): this rank's roped keys and values (n = B x 2L rows). k_all, v_all (B, T, kvd)
// receive every rank's, in sequence order: one all-gather over kCp of the packed [k | v].
template <typename T>
Status GatherKeysValues(ExecContext& ctx, const BlockDims& d, int64_t kvd, const T* k, const T* v,
                        DeviceBuffer& k_all, DeviceBuffer& v_all);

// dk_all, dv_all (B, T, kvd): this rank's partial gradients of every key and value; summed over
// kCp by one reduce-scatter, and this rank's rows added into dk, dv (n, kvd).
template <typename T>
Status ReduceScatterKeyValueGrads(ExecContext& ctx, const BlockDims& d, int64_t kvd, const T* dk_all,
                                  const T* dv_all, T* dk, T* dv);

}  // namespace shardsim::runtime
