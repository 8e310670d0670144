// Parsing and formatting of layout specs; see layout.h.
#include "src/layout/layout.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <vector>

#include "src/io/yaml_reader.h"
#include "src/util/limits.h"
#include "src/util/strings.h"

namespace shardsim {

std::string ScheduleName(Schedule s) {
  switch (s) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::k1F1B: return "1f1b";
    case Schedule::kInterleaved: return "interleaved";
    case Schedule::kZeroBubble: return "zero-bubble";
    case Schedule::kZeroBubbleV: return "zb-v";
  }
  return "?";
}

std::string RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kOp: return "op";
    case Recompute::kFull: return "full";
  }
  return "?";
}

std::string OffloadName(Offload o) {
  switch (o) {
    case Offload::kNone: return "none";
    case Offload::kOptimizer: return "optimizer";
    case Offload::kOptimizerAndParams: return "optimizer+params";
  }
  return "?";
}

std::string AttentionName(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::kFlash: return "flash";
    case AttentionImpl::kUnfused: return "unfused";
    case AttentionImpl::kFlash1: return "flash1";
    case AttentionImpl::kCudnn: return "cudnn";
  }
  return "?";
}

std::string KernelsName(Kernels k) {
  switch (k) {
    case Kernels::kFused: return "fused";
    case Kernels::kEager: return "eager";
    case Kernels::kCompiled: return "compiled";
    case Kernels::kCompiledModel: return "compiled-model";
    case Kernels::kCompiledLoss: return "compiled-loss";
  }
  return "?";
}

std::string CudaGraphsName(CudaGraphs g) {
  switch (g) {
    case CudaGraphs::kOff: return "off";
    case CudaGraphs::kLayers: return "layers";
    case CudaGraphs::kStep: return "step";
  }
  return "?";
}

std::string CudaGraphsCaveat(CudaGraphs g) {
  return "cuda_graphs=" + CudaGraphsName(g) +
         " prices the host's launches only: the graphs' static buffers and memory pool are not priced";
}

std::string TpOverlapName(TpOverlap o) {
  switch (o) {
    case TpOverlap::kOff: return "off";
    case TpOverlap::kBackward: return "backward";
    case TpOverlap::kOn: return "on";
  }
  return "?";
}

namespace {

const std::vector<std::string> kKeys = {
    "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "mbs", "gbs", "zero", "sp", "recompute", "schedule",
    "dtype", "offload", "compress", "overlap_dp", "overlap_tp", "overlap_pp", "prefetch", "attention",
    "bucket_params", "live_params", "fp8_params", "grad_bf16", "first_stage_layers", "last_stage_layers",
    "embedding_in_split", "loss_in_split", "moe_capacity", "moe_imbalance", "kernels", "cuda_graphs"};

Status BadValue(const std::string& key, const std::string& value, const std::string& expected,
                const std::vector<std::string>& choices = {}) {
  return Status::Error("layout key '" + key + "': expected " + expected + ", found '" + value +
                       "'" + DidYouMean(value, choices));
}

// A parallel degree or micro-batch (at most kMaxGpus), or the global batch (kMaxGlobalBatch).
StatusOr<int64_t> PositiveInt(const std::string& key, const std::string& value) {
  const int64_t most = key == "gbs" ? kMaxGlobalBatch : kMaxGpus;
  std::istringstream in(value);
  int64_t v = 0;
  in >> v;
  if (in.fail() || !in.eof() || v < 1 || v > most) {
    return BadValue(key, value, "a positive integer up to " + std::to_string(most));
  }
  return v;
}

// Counts bounded so that products of them stay far from int64 overflow.
constexpr int64_t kMaxCount = int64_t{1} << 40;

StatusOr<int64_t> NonNegativeInt(const std::string& key, const std::string& value) {
  std::istringstream in(value);
  int64_t v = -1;
  in >> v;
  if (in.fail() || !in.eof() || v < 0 || v > kMaxCount) {
    return BadValue(key, value, "an integer from 0 to " + std::to_string(kMaxCount));
  }
  return v;
}

StatusOr<bool> OnOff(const std::string& key, const std::string& value) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  return BadValue(key, value, "on or off", {"on", "off"});
}

// Sets one key of the layout from its text value.
Status SetField(Layout& l, const std::string& key, const std::string& value) {
  auto choose = [&](const std::vector<std::string>& choices) -> StatusOr<size_t> {
    for (size_t i = 0; i < choices.size(); ++i) {
      if (choices[i] == value) return i;
    }
    return BadValue(key, value, "one of " + Join(choices, ", "), choices);
  };
  if (key == "tp" || key == "pp" || key == "dp" || key == "cp" || key == "ep" || key == "etp" ||
      key == "vpp" || key == "mbs" || key == "gbs") {
    SHARDSIM_ASSIGN_OR_RETURN(int64_t v, PositiveInt(key, value));
    int64_t* field = key == "tp" ? &l.tp : key == "pp" ? &l.pp : key == "dp" ? &l.dp
                   : key == "cp" ? &l.cp : key == "ep" ? &l.ep : key == "etp" ? &l.etp : key == "vpp" ? &l.vpp
                   : key == "mbs" ? &l.mbs : &l.gbs;
    *field = v;
  } else if (key == "zero") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"0", "1", "2", "3"}));
    l.zero = static_cast<int>(i);
  } else if (key == "overlap_tp") {
    // on/off (and their boolean spellings, as for the other switches) or backward.
    if (value == "backward") {
      l.overlap_tp = TpOverlap::kBackward;
    } else if (value == "on" || value == "true" || value == "1") {
      l.overlap_tp = TpOverlap::kOn;
    } else if (value == "off" || value == "false" || value == "0") {
      l.overlap_tp = TpOverlap::kOff;
    } else {
      return BadValue(key, value, "one of off, backward, on", {"off", "backward", "on"});
    }
  } else if (key == "first_stage_layers" || key == "last_stage_layers") {
    std::istringstream in(value);
    int64_t v = 0;
    in >> v;
    if (in.fail() || !in.eof() || v < 0 || v > kMaxCount) {
      return BadValue(key, value, "a number of layers, 0 for not set (e.g. " + key + "=7)");
    }
    (key == "first_stage_layers" ? l.first_stage_layers : l.last_stage_layers) = v;
  } else if (key == "sp" || key == "overlap_dp" || key == "overlap_pp" || key == "prefetch" ||
             key == "fp8_params" || key == "grad_bf16" || key == "embedding_in_split" || key == "loss_in_split") {
    SHARDSIM_ASSIGN_OR_RETURN(bool v, OnOff(key, value));
    (key == "sp" ? l.sp : key == "overlap_dp" ? l.overlap_dp
     : key == "overlap_pp" ? l.overlap_pp : key == "prefetch" ? l.prefetch
     : key == "fp8_params" ? l.fp8_params : key == "grad_bf16" ? l.grad_bf16
     : key == "embedding_in_split" ? l.embedding_in_split
                           : l.loss_in_split) = v;
  } else if (key == "recompute") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"none", "selective", "op", "full"}));
    l.recompute = static_cast<Recompute>(i);
  } else if (key == "schedule") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"gpipe", "1f1b", "interleaved", "zero-bubble", "zb-v"}));
    l.schedule = static_cast<Schedule>(i);
    l.schedule_given = true;
  } else if (key == "dtype") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"fp32", "fp16", "bf16", "fp8"}));
    const DType types[] = {DType::kFp32, DType::kFp16, DType::kBf16, DType::kFp8};
    l.dtype = types[i];
    l.dtype_given = true;
  } else if (key == "offload") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"none", "optimizer", "optimizer+params"}));
    l.offload = static_cast<Offload>(i);
  } else if (key == "attention") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"flash", "unfused", "flash1", "cudnn"}));
    l.attention = static_cast<AttentionImpl>(i);
  } else if (key == "kernels") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"fused", "eager", "compiled", "compiled-model", "compiled-loss"}));
    l.kernels = static_cast<Kernels>(i);
  } else if (key == "cuda_graphs") {
    SHARDSIM_ASSIGN_OR_RETURN(size_t i, choose({"off", "layers", "step"}));
    l.cuda_graphs = static_cast<CudaGraphs>(i);
  } else if (key == "bucket_params") {
    SHARDSIM_ASSIGN_OR_RETURN(l.bucket_params, NonNegativeInt(key, value));
  } else if (key == "live_params") {
    SHARDSIM_ASSIGN_OR_RETURN(int64_t v, NonNegativeInt(key, value));
    if (v < 1) return BadValue(key, value, "a positive number of parameters (e.g. live_params=1000000000)");
    l.live_params = v;
  } else if (key == "moe_capacity" || key == "moe_imbalance") {
    // A capacity factor of 0 (none) or in (0, 64]; an imbalance in [1, 64].
    std::istringstream in(value);
    double v = -1;
    in >> v;
    const bool capacity = key == "moe_capacity";
    if (in.fail() || !in.eof() || !std::isfinite(v) || v > 64 || (capacity ? v < 0 : v < 1)) {
      return BadValue(key, value, capacity ? "a capacity factor from 0 (none) to 64 (e.g. moe_capacity=1.25)"
                                           : "the busiest rank's load over the balanced one, 1 to 64 (e.g. moe_imbalance=1.2)");
    }
    (capacity ? l.moe_capacity : l.moe_imbalance) = v;
  } else if (key == "compress") {
    std::istringstream in(value);
    double v = 0;
    in >> v;
    if (in.fail() || !in.eof() || !std::isfinite(v) || v < 1) {
      return BadValue(key, value, "a compression ratio >= 1 (e.g. compress=4)");
    }
    l.grad_compression = v;
  } else {
    return Status::Error("layout: unknown key '" + key + "'" + DidYouMean(key, kKeys) +
                         "; known keys: " + Join(kKeys, ", "));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Layout> ParseLayout(const std::string& spec) {
  Layout l;
  std::vector<std::string> seen;
  if (spec.empty()) return Status::Error("layout: empty spec; expected e.g. 'tp=8,pp=8,mbs=1'");
  for (const std::string& item : Split(spec, ',')) {
    const size_t eq = item.find('=');
    if (item.empty() || eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return Status::Error("layout: '" + item + "' is not 'key=value' (in '" + spec + "')");
    }
    const std::string key = item.substr(0, eq);
    for (const std::string& s : seen) {
      if (s == key) return Status::Error("layout: key '" + key + "' given twice");
    }
    seen.push_back(key);
    SHARDSIM_RETURN_IF_ERROR(SetField(l, key, item.substr(eq + 1)));
  }
  return l;
}

StatusOr<Layout> ParseLayoutYaml(const std::string& text, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile file, YamlFile::Parse(text, name));
  YamlMap r = file.Root();
  Layout l;
  for (const std::string& key : kKeys) {
    if (std::optional<std::string> v = r.OptionalString(key)) {
      Status st = SetField(l, key, *v);
      if (!st.ok()) r.Error(key, st.message());
    }
  }
  r.Finish();
  SHARDSIM_RETURN_IF_ERROR(file.status());
  return l;
}

StatusOr<Layout> ResolveLayout(Layout l, int64_t gpus) {
  if (gpus < 1) return Status::Error("--gpus must be at least 1, found " + std::to_string(gpus));
  if (gpus > kMaxGpus) {
    return Status::Error(std::to_string(gpus) + " GPUs: more than the " + std::to_string(kMaxGpus) + " a job may use");
  }
  // Each degree is at most kMaxGpus (ParseLayout), so their products fit in int64 until the
  // third factor: checked, and bounded like the GPU count.
  for (const int64_t degree : {l.tp, l.pp, l.cp, l.dp, l.ep, l.etp, l.vpp, l.mbs}) {
    if (degree < 0 || degree > kMaxGpus) {
      return Status::Error("a parallel degree of " + std::to_string(degree) + ": more than " + std::to_string(kMaxGpus));
    }
  }
  const std::optional<int64_t> mp = CheckedMul(l.tp * l.pp, l.cp);
  if (!mp || *mp > kMaxGpus) {
    return Status::Error("tp x pp x cp = " + std::to_string(l.tp) + " x " + std::to_string(l.pp) + " x " +
                         std::to_string(l.cp) + ": more than the " + std::to_string(kMaxGpus) + " GPUs a job may use");
  }
  if (l.gbs < 0 || l.gbs > kMaxGlobalBatch) {
    return Status::Error("gbs=" + std::to_string(l.gbs) + ": more than " + std::to_string(kMaxGlobalBatch) + " sequences");
  }
  // When tp x pp x cp does not divide the GPU count, dp is rounded down and CheckLayout
  // reports the mismatch together with every other reason.
  if (l.dp == 0) l.dp = std::max<int64_t>(1, gpus / l.model_parallel());
  if (l.etp == l.tp) l.etp = 0;  // the experts split as the dense layers: not written
  if (l.gbs == 0) l.gbs = l.dp * l.mbs;
  if (!l.schedule_given) {
    l.schedule = l.vpp > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
    l.schedule_given = true;  // decided now: FormatLayout writes it
  }
  return l;
}

StatusOr<Layout> ResolveLayoutFor(Layout layout, int64_t gpus, const HardwareSpec& hw) {
  SHARDSIM_ASSIGN_OR_RETURN(Layout l, ResolveLayout(layout, gpus));
  if (!l.dtype_given) {
    l.dtype = hw.gpu.Peak(DType::kBf16) ? DType::kBf16 : DType::kFp32;
    l.dtype_given = true;
  }
  return l;
}

std::string FormatLayout(const Layout& l) {
  // Built by appending (no ostringstream: the planner formats tens of thousands of layouts
  // on several threads, and a stream's locale is one shared, reference-counted object).
  std::string out;
  out.reserve(256);
  auto field = [&out](const char* key, int64_t v) {
    char buf[24];
    out += key;
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  };
  auto on = [](bool b) { return b ? "on" : "off"; };
  // Fields still to be derived by ResolveLayout (dp 0, gbs 0, no schedule given) are left
  // out, so that the text parses again (dp=0 would not) and resolves to the same layout.
  char compress[32];
  // Shortest text that reads back as the same double.
  *std::to_chars(compress, compress + sizeof compress - 1, l.grad_compression).ptr = '\0';
  field("tp=", l.tp);
  field(",pp=", l.pp);
  if (l.dp > 0) field(",dp=", l.dp);
  field(",cp=", l.cp);
  field(",ep=", l.ep);
  if (l.etp > 0) field(",etp=", l.etp);  // only when set, as the experts' TP defaults to tp
  field(",vpp=", l.vpp);
  field(",mbs=", l.mbs);
  if (l.gbs > 0) field(",gbs=", l.gbs);
  field(",zero=", l.zero);
  out += std::string(",sp=") + on(l.sp) + ",recompute=" + RecomputeName(l.recompute);
  if (l.schedule_given) out += std::string(",schedule=") + ScheduleName(l.schedule);
  if (l.dtype_given) out += ",dtype=" + std::string(DTypeName(l.dtype));
  out += std::string(",offload=") + OffloadName(l.offload) + ",compress=" + compress + ",overlap_dp=" +
         on(l.overlap_dp) + ",overlap_tp=" + TpOverlapName(l.overlap_tp) + ",overlap_pp=" + on(l.overlap_pp) +
         ",prefetch=" + on(l.prefetch) + ",attention=" + AttentionName(l.attention);
  field(",bucket_params=", l.bucket_params);
  field(",live_params=", l.live_params);
  if (l.fp8_params) out += ",fp8_params=on";  // written only when on, as its default is off
  if (l.grad_bf16) out += ",grad_bf16=on";    // likewise
  // The uneven split's keys likewise only when set (the even split writes none of them).
  if (l.first_stage_layers > 0) field(",first_stage_layers=", l.first_stage_layers);
  if (l.last_stage_layers > 0) field(",last_stage_layers=", l.last_stage_layers);
  if (l.embedding_in_split) out += ",embedding_in_split=on";
  if (l.loss_in_split) out += ",loss_in_split=on";
  // MoE routing likewise only when set.
  auto real = [](double v) {
    char buf[32];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  };
  if (l.moe_capacity > 0) out += ",moe_capacity=" + real(l.moe_capacity);
  if (l.moe_imbalance != 1) out += ",moe_imbalance=" + real(l.moe_imbalance);
  if (l.kernels != Kernels::kFused) out += ",kernels=" + KernelsName(l.kernels);  // likewise
  if (l.cuda_graphs != CudaGraphs::kOff) out += ",cuda_graphs=" + CudaGraphsName(l.cuda_graphs);  // likewise
  return out;
}

std::optional<std::string> LayoutValue(const Layout& l, std::string_view key) {
  auto num = [](auto v) {
    char buf[32];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  };
  auto on = [](bool b) { return std::string(b ? "on" : "off"); };
  if (key == "tp") return num(l.tp);
  if (key == "pp") return num(l.pp);
  if (key == "dp") return num(l.dp);
  if (key == "cp") return num(l.cp);
  if (key == "ep") return num(l.ep);
  if (key == "etp") return num(l.expert_tp());
  if (key == "vpp") return num(l.vpp);
  if (key == "mbs") return num(l.mbs);
  if (key == "gbs") return num(l.gbs);
  if (key == "zero") return num(l.zero);
  if (key == "sp") return on(l.sp);
  if (key == "recompute") return RecomputeName(l.recompute);
  if (key == "schedule") return ScheduleName(l.schedule);
  if (key == "dtype") return std::string(DTypeName(l.dtype));
  if (key == "offload") return OffloadName(l.offload);
  if (key == "compress") return num(l.grad_compression);
  if (key == "overlap_dp") return on(l.overlap_dp);
  if (key == "overlap_tp") return TpOverlapName(l.overlap_tp);
  if (key == "overlap_pp") return on(l.overlap_pp);
  if (key == "prefetch") return on(l.prefetch);
  if (key == "attention") return AttentionName(l.attention);
  if (key == "bucket_params") return num(l.bucket_params);
  if (key == "live_params") return num(l.live_params);
  if (key == "fp8_params") return on(l.fp8_params);
  if (key == "grad_bf16") return on(l.grad_bf16);
  if (key == "first_stage_layers") return num(l.first_stage_layers);
  if (key == "last_stage_layers") return num(l.last_stage_layers);
  if (key == "embedding_in_split") return on(l.embedding_in_split);
  if (key == "loss_in_split") return on(l.loss_in_split);
  if (key == "moe_capacity") return num(l.moe_capacity);
  if (key == "moe_imbalance") return num(l.moe_imbalance);
  if (key == "kernels") return KernelsName(l.kernels);
  if (key == "cuda_graphs") return CudaGraphsName(l.cuda_graphs);
  return std::nullopt;
}

}  // namespace shardsim
