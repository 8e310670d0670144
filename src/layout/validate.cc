// See validate.h. Each rule says which constraint fails with the numbers involved.
#include "src/layout/validate.h"

#include "src/util/strings.h"

namespace shardsim {

Status LayoutCheck::ToStatus() const {
  if (ok()) return Status::Ok();
  return Status::Error("invalid layout: " + Join(errors, "; "));
}

namespace {

std::string S(int64_t v) { return std::to_string(v); }

bool Divides(int64_t d, int64_t n) { return d > 0 && n % d == 0; }

}  // namespace

LayoutCheck CheckLayout(const Layout& l, const ModelSpec& m, const HardwareSpec& hw,
                        int64_t gpus) {
  LayoutCheck c;
  auto err = [&](std::string e) { c.errors.push_back(std::move(e)); };
  auto warn = [&](std::string w) { c.warnings.push_back(std::move(w)); };
  const int64_t per_node = hw.node.gpus;

  // World size and cluster size.
  if (l.world() != gpus) {
    err("tp x pp x dp x cp = " + S(l.tp) + "x" + S(l.pp) + "x" + S(l.dp) + "x" + S(l.cp) + " = " +
        S(l.world()) + " but " + S(gpus) + " GPUs");
  }
  if (gpus > hw.total_gpus()) {
    err(S(gpus) + " GPUs requested but " + hw.name + " has " + S(hw.total_gpus()) + " (" +
        S(hw.nodes) + " nodes x " + S(per_node) + ")");
  }

  if (l.fp8_params && l.dtype != DType::kFp8) {
    err("fp8_params=on stores Transformer Engine's weights in fp8: it needs dtype=fp8, found dtype=" +
        std::string(DTypeName(l.dtype)));
  }

  // Tensor parallel splits heads, KV heads, the MLP and the vocabulary.
  if (!Divides(l.tp, m.heads)) err("tp=" + S(l.tp) + " does not divide heads=" + S(m.heads));
  if (!Divides(l.tp, m.kv_heads) && !Divides(m.kv_heads, l.tp)) {
    err("tp=" + S(l.tp) + " and kv_heads=" + S(m.kv_heads) + ": neither divides the other");
  } else if (l.tp > m.kv_heads) {
    warn("tp=" + S(l.tp) + " > kv_heads=" + S(m.kv_heads) + ": KV heads are replicated " +
         S(l.tp / m.kv_heads) + "x");
  }
  if (!m.moe || m.MoeLayerCount() < m.layers) {
    if (!Divides(l.tp, m.ffn_hidden)) {
      err("tp=" + S(l.tp) + " does not divide ffn_hidden=" + S(m.ffn_hidden));
    }
  }
  if (m.moe && !Divides(l.tp, m.moe->ffn_hidden)) {
    err("tp=" + S(l.tp) + " does not divide moe.ffn_hidden=" + S(m.moe->ffn_hidden));
  }
  if (l.tp > per_node) {
    warn("tp=" + S(l.tp) + " crosses nodes (" + S(per_node) +
         " GPUs per node): TP collectives go over the network");
  } else if (!Divides(l.tp, per_node)) {
    warn("tp=" + S(l.tp) + " does not divide the " + S(per_node) +
         " GPUs per node: some TP groups straddle two nodes");
  }

  // Sequence parallel and context parallel split the sequence.
  if (l.sp && l.tp == 1) warn("sp=on has no effect with tp=1");
  if (l.cp > 1 && !Divides(2 * l.cp, m.seq_len)) {
    err("cp=" + S(l.cp) + ": seq_len=" + S(m.seq_len) + " is not divisible by 2 x cp = " +
        S(2 * l.cp) + " (load-balanced causal split)");
  }
  if (l.sp && l.tp > 1 && !Divides(l.tp, m.seq_len / l.cp)) {
    err("sp=on: the sequence per CP rank (" + S(m.seq_len / l.cp) + ") is not divisible by tp=" +
        S(l.tp));
  }

  // Pipeline: stages, virtual stages, schedule.
  if (!Divides(l.pp * l.vpp, m.layers)) {
    err("layers=" + S(m.layers) + " is not divisible by pp x vpp = " + S(l.pp) + "x" + S(l.vpp) +
        " = " + S(l.pp * l.vpp));
  }
  if (l.vpp > 1 && l.schedule != Schedule::kInterleaved && l.schedule != Schedule::kZeroBubbleV) {
    err("vpp=" + S(l.vpp) + " needs schedule=interleaved (found " + ScheduleName(l.schedule) + ")");
  }
  if (l.schedule == Schedule::kInterleaved) {
    if (l.vpp < 2) err("schedule=interleaved needs vpp >= 2");
    if (l.pp < 2) err("schedule=interleaved needs pp >= 2");
  }
  if (l.pp == 1 && (l.schedule == Schedule::kGpipe || l.schedule == Schedule::kZeroBubble)) {
    warn("schedule=" + ScheduleName(l.schedule) + " has no effect with pp=1");
  }

  // Batch: gbs = dp x mbs x micro-batches.
  if (!Divides(l.dp * l.mbs, l.gbs)) {
    err("gbs=" + S(l.gbs) + " is not divisible by dp x mbs = " + S(l.dp) + "x" + S(l.mbs) + " = " +
        S(l.dp * l.mbs));
  } else {
    const int64_t mb = l.microbatches();
    if (l.schedule == Schedule::kInterleaved && l.pp > 1 && !Divides(l.pp, mb)) {
      err("schedule=interleaved: micro-batches per iteration (" + S(mb) +
          ") must be a multiple of pp=" + S(l.pp));
    }
    if (l.pp > 1 && mb < l.pp) {
      warn(S(mb) + " micro-batches for pp=" + S(l.pp) + " stages: the pipeline never fills");
    }
  }

  // Expert parallel.
  if (l.ep > 1) {
    if (!m.moe) {
      err("ep=" + S(l.ep) + " but model " + m.name + " has no experts");
    } else if (!Divides(l.ep, m.moe->experts)) {
      err("ep=" + S(l.ep) + " does not divide experts=" + S(m.moe->experts));
    }
    if (!Divides(l.ep, l.dp)) err("ep=" + S(l.ep) + " does not divide dp=" + S(l.dp));
  }

  // ZeRO, offload, precision.
  if (l.zero > 0 && l.dp_cp() == 1) warn("zero=" + S(l.zero) + " has no effect with dp x cp = 1");
  if (l.offload == Offload::kOptimizer && l.zero == 0) {
    err("offload=optimizer needs zero >= 1 (as in DeepSpeed ZeRO-Offload)");
  }
  if (l.offload == Offload::kOptimizerAndParams && l.zero != 3) {
    err("offload=optimizer+params needs zero=3 (parameter offload is a ZeRO-3 feature)");
  }
  if (!hw.gpu.Peak(l.dtype)) {
    err("dtype=" + DTypeName(l.dtype) + " is not supported by " + hw.gpu.name +
        " (no peak rate for it in " + hw.name + ")");
  }
  if (l.grad_compression > 1 && l.dp_cp() == 1) warn("compress has no effect with dp x cp = 1");
  if (l.schedule == Schedule::kZeroBubbleV && (l.vpp != 2 || l.pp < 2)) {
    err("schedule=zb-v places two chunks per stage in a V: it needs vpp=2 and pp >= 2 (found vpp=" +
        S(l.vpp) + ", pp=" + S(l.pp) + ")");
  }
  if (l.schedule == Schedule::kZeroBubble && l.vpp > 1) {
    err("schedule=zero-bubble is modelled for vpp=1 only");
  }
  return c;
}

}  // namespace shardsim
