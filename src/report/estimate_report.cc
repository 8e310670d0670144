// See estimate_report.h.
#include "src/report/estimate_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "src/cost/op_time.h"
#include "src/report/compute_fit.h"
#include "src/report/error_band.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace shardsim {
namespace {

std::string Bytes(double b) { return FormatQuantity(b, Dimension::kBytes); }
std::string Secs(double s) { return FormatQuantity(s, Dimension::kTime); }

void BreakdownJson(JsonWriter& w, const MemoryBreakdown& mem) {
  w.BeginObject()
      .Field("weights", mem.weights)
      .Field("gradients", mem.gradients)
      .Field("optimizer", mem.optimizer)
      .Field("activations", mem.activations)
      .Field("other", mem.other)
      .Field("nccl_buffers", mem.nccl_buffers)
      .EndObject();
}

// The host's side of one micro-batch on the reported stage (docs/cost-model.md, "Kernel
// launches and the host"): the kernels its ops launch, forward and backward, the device's time
// for them and the host's at the description's launch_overhead. Launch-bound where the host's
// exceeds the device's in either pass (the layer plan's HostFloor then stretches the passes;
// it decides per layer, which for alike layers is the same). Under CUDA graphs
// (Layout::cuda_graphs) the host launches one graph a layer pass (layers; the embedding's and
// the head's kernels stay its own) or one a step (step: no launch a micro-batch is priced).
struct HostLaunches {
  double forward = 0, backward = 0;              // kernels
  double host_forward = 0, host_backward = 0;    // what the host launches: kernels or graphs
  double device_forward_s = 0, device_backward_s = 0;
  double host_forward_s = 0, host_backward_s = 0;
  bool bound() const { return host_forward_s > device_forward_s || host_backward_s > device_backward_s; }
};

HostLaunches LaunchesOf(const std::vector<OpTiming>& ops, double launch_s, CudaGraphs graphs) {
  HostLaunches h;
  double layers = 0;  // layer instances on the stage: a graph each, forward and backward
  for (const OpTiming& t : ops) {
    const double n = static_cast<double>(t.count);
    h.forward += n * OpForwardKernels(t.op);
    h.backward += n * OpBackwardKernels(t.op);
    h.device_forward_s += n * t.forward_s;
    h.device_backward_s += n * t.backward_s;
    if (t.op.in_layer) {
      layers = std::max(layers, n);
    } else if (graphs != CudaGraphs::kStep) {
      h.host_forward += n * OpForwardKernels(t.op);
      h.host_backward += n * OpBackwardKernels(t.op);
    }
  }
  if (graphs == CudaGraphs::kOff) {
    h.host_forward = h.forward;
    h.host_backward = h.backward;
  } else if (graphs == CudaGraphs::kLayers) {
    h.host_forward += layers;
    h.host_backward += layers;
  } else {
    h.host_forward = h.host_backward = 0;
  }
  h.host_forward_s = h.host_forward * launch_s;
  h.host_backward_s = h.host_backward * launch_s;
  return h;
}

}  // namespace

std::string EstimateText(const ModelSpec& m, const HardwareSpec& hw, const Estimate& e) {
  std::ostringstream out;
  const Layout& l = e.layout;
  out << "shardsim estimate: " << m.name << " (" << Fmt("%.2f", e.parameters / 1e9)
      << "B parameters"
      << (m.mtp_layers > 0 ? ", " + Fmt("%.2f", static_cast<double>(m.MtpParams()) / 1e9) +
                                 "B of them multi-token prediction"
                           : std::string())
      << ") on " << l.world() << " x " << hw.gpu.name << " (" << hw.name << ")\n";
  out << "layout: " << FormatLayout(l) << "\n";
  out << "sequence length: " << m.seq_len << " tokens; micro-batches per iteration: " << l.microbatches() << "\n";
  for (const std::string& w : e.warnings) out << "warning: " << w << "\n";

  out << "\nmemory per GPU (stage " << e.peak_stage << ", the largest of " << l.pp << "):\n";
  const MemoryBreakdown& mem = e.peak_memory();
  out << "  weights      " << Bytes(mem.weights) << "\n"
      << "  gradients    " << Bytes(mem.gradients) << "\n"
      << "  optimizer    " << Bytes(mem.optimizer) << "\n"
      << "  activations  " << Bytes(mem.activations) << "\n"
      << "  other        " << Bytes(mem.other)
      << (mem.nccl_buffers > 0 ? " (NCCL buffers " + Bytes(mem.nccl_buffers) + ")" : std::string()) << "\n"
      << "  total        " << Bytes(mem.total()) << " of " << Bytes(hw.gpu.UsableMemoryBytes())
      << " usable (" << Bytes(hw.gpu.memory_bytes) << " less "
      << Fmt("%.0f %%", 100 * hw.gpu.memory_fragmentation) << " fragmentation of what is not reserved)"
      << (e.fits ? " (fits)" : " (DOES NOT FIT)") << "\n";
  if (e.fits) {
    out << "  in use       " << Bytes(hw.gpu.DeviceMemoryInUse(mem.total()))
        << " as the device would show it (nvidia-smi: the allocator's holding included)\n";
  }
  out << "  " << MemoryBandText(hw, mem.total()) << "\n";
  if (mem.host > 0) out << "  offloaded to host: " << Bytes(mem.host) << " per GPU\n";

  out << "\ncompute per micro-batch on stage " << e.reported_stage << ", the busiest (per instance):\n";
  out << "  op                 count   fwd time    bwd time    fwd GFLOP\n";
  for (const OpTiming& t : e.ops) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-18s %5lld  %10s  %10s  %10.2f\n", t.op.name.c_str(),
                  static_cast<long long>(t.count), Secs(t.forward_s).c_str(),
                  Secs(t.backward_s).c_str(), t.op.flops / 1e9);
    out << line;
  }
  const double launch_s = hw.node.host.launch_s;
  const HostLaunches h = LaunchesOf(e.ops, launch_s, l.cuda_graphs);
  out << "  kernel launches per micro-batch: " << Fmt("%.0f", h.forward) << " forward, "
      << Fmt("%.0f", h.backward) << " backward";
  if (l.cuda_graphs == CudaGraphs::kLayers) {
    out << ", replayed from CUDA graphs (cuda_graphs=layers): the host launches " << Fmt("%.0f", h.host_forward)
        << " and " << Fmt("%.0f", h.host_backward) << ", a graph a layer pass and the embedding's and head's kernels";
  } else if (l.cuda_graphs == CudaGraphs::kStep) {
    out << ", replayed from one CUDA graph a step (cuda_graphs=step)";
  }
  if (launch_s > 0) {
    out << "; at " << Secs(launch_s) << " each the host needs " << Secs(h.host_forward_s + h.host_backward_s)
        << " against " << Secs(h.device_forward_s + h.device_backward_s) << " of kernels: "
        << (h.bound() ? "LAUNCH-BOUND, the passes take the host's time" : "the device sets the pace") << "\n";
  } else {
    out << " (the description gives no host launch_overhead: the host is not priced)\n";
  }

  out << "\ncommunication (one call; count per iteration):\n";
  out << "  purpose                        group  ranks  size        algorithm     time        busbw        count\n";
  for (const CollectiveTiming& c : e.collectives) {
    char line[220];
    std::snprintf(line, sizeof line, "  %-30s %-5s %6lld  %-10s  %-12s  %-10s  %-11s %6lld\n",
                  c.purpose.c_str(), c.group.c_str(), static_cast<long long>(c.cost.ranks),
                  Bytes(c.cost.bytes).c_str(), AlgorithmLabel(c.cost).c_str(),
                  Secs(c.cost.time_s).c_str(), FormatQuantity(c.cost.busbw, Dimension::kBandwidth).c_str(),
                  static_cast<long long>(c.count));
    out << line;
  }

  const TimeBreakdown& t = e.time;
  const double total = e.iteration_time_s;
  auto row = [&](const char* name, double s) {
    out << "  " << name << Fmt("%10.4f s", s) << Fmt("  %5.1f %%", 100 * s / total) << "\n";
  };
  out << "\niteration time breakdown (stage " << e.reported_stage
      << ", the busiest; each pass's transfers sharing links):\n";
  row("compute         ", t.compute);
  row("recompute       ", t.recompute);
  row("tp comm exposed ", t.tp_comm);
  row("cp comm exposed ", t.cp_comm);
  row("ep comm exposed ", t.ep_comm);
  row("pp comm exposed ", t.pp_comm);
  row("dp comm exposed ", t.dp_comm);
  row("pipeline bubble ", t.bubble);
  row("optimizer       ", t.optimizer);
  row("offload         ", t.offload);
  out << "  total           " << Fmt("%10.4f s", total) << "\n";
  if (e.sm_contention_s > 0) {
    out << "  (of compute and recompute, " << Fmt("%.4f s", e.sm_contention_s)
        << " is NCCL's kernels holding SMs beside it: docs/simulator.md, \"NCCL's SMs\")\n";
  }
  out << "\nestimated iteration time: " << Fmt("%.3f s", total) << " (without contention, a lower bound: "
      << Fmt("%.3f s", e.critical_path_s) << ")\n"
      << "throughput: " << Fmt("%.0f tokens/s", e.tokens_per_s) << ", "
      << Fmt("%.1f", e.model_tflops_per_gpu) << " model TFLOP/s per GPU ("
      << Fmt("%.1f", e.hardware_tflops_per_gpu) << " with recompute), MFU "
      << Fmt("%.1f %%", 100 * e.mfu) << "\n";
  out << ComputeFitText(hw) << "\n" << ErrorBandText(hw, e.layout.dtype, e.iteration_time_s) << "\n";
  return out.str();
}

std::string EstimateJson(const ModelSpec& m, const HardwareSpec& hw, const Estimate& e) {
  JsonWriter w;
  w.BeginObject();
  w.Field("model", m.name).Field("hardware", hw.name).Field("gpus", e.layout.world());
  w.Field("seq_len", m.seq_len);
  w.Field("layout", FormatLayout(e.layout));
  w.Field("parameters", e.parameters);
  if (m.mtp_layers > 0) w.Field("mtp_parameters", m.MtpParams());  // of `parameters`
  w.Field("peak_memory_bytes", e.peak_memory().total());
  w.Key("memory_breakdown");
  BreakdownJson(w, e.peak_memory());
  w.Field("peak_stage", e.peak_stage);
  w.Field("host_memory_bytes", e.peak_memory().host);
  w.Field("usable_memory_bytes", hw.gpu.UsableMemoryBytes());
  w.Field("device_memory_in_use_bytes", hw.gpu.DeviceMemoryInUse(e.peak_memory().total()));
  w.Field("fits", e.fits);
  MemoryBandJson(w, hw, e.peak_memory().total());
  w.Field("estimated_iteration_time_s", e.iteration_time_s);
  w.Field("critical_path_s", e.critical_path_s);
  ComputeFitJson(w, hw);
  ErrorBandJson(w, hw, e.layout.dtype, e.iteration_time_s);
  w.Key("time_breakdown").BeginObject();
  const TimeBreakdown& t = e.time;
  w.Field("compute", t.compute).Field("recompute", t.recompute).Field("tp_comm", t.tp_comm);
  w.Field("cp_comm", t.cp_comm).Field("ep_comm", t.ep_comm).Field("pp_comm", t.pp_comm);
  w.Field("dp_comm", t.dp_comm).Field("bubble", t.bubble).Field("optimizer", t.optimizer);
  w.Field("offload", t.offload);
  w.EndObject();
  w.Field("sm_contention_s", e.sm_contention_s);
  w.Field("tokens_per_s", e.tokens_per_s);
  w.Field("model_tflops_per_gpu", e.model_tflops_per_gpu);
  w.Field("hardware_tflops_per_gpu", e.hardware_tflops_per_gpu);
  w.Field("mfu", e.mfu);
  w.Key("stage_memory").BeginArray();
  for (const MemoryBreakdown& mem : e.stage_memory) BreakdownJson(w, mem);
  w.EndArray();
  w.Key("ops").BeginArray();
  for (const OpTiming& op : e.ops) {
    w.BeginObject().Field("name", op.op.name).Field("count", op.count);
    w.Field("forward_s", op.forward_s).Field("backward_s", op.backward_s);
    w.Field("forward_flops", op.op.flops).Field("forward_bytes", op.op.bytes).EndObject();
  }
  w.EndArray();
  const HostLaunches h = LaunchesOf(e.ops, hw.node.host.launch_s, e.layout.cuda_graphs);
  w.Key("kernel_launches").BeginObject();
  w.Field("forward", h.forward).Field("backward", h.backward);
  w.Field("launch_overhead_s", hw.node.host.launch_s);
  w.Field("cuda_graphs", CudaGraphsName(e.layout.cuda_graphs));
  w.Field("host_forward", h.host_forward).Field("host_backward", h.host_backward);
  w.Field("host_s", h.host_forward_s + h.host_backward_s);
  w.Field("device_s", h.device_forward_s + h.device_backward_s);
  w.Field("launch_bound", h.bound());
  w.EndObject();
  w.Key("collectives").BeginArray();
  for (const CollectiveTiming& c : e.collectives) {
    w.BeginObject().Field("purpose", c.purpose).Field("group", c.group);
    w.Field("collective", CollectiveName(c.cost.collective));
    w.Field("algorithm", AlgorithmName(c.cost.algorithm)).Field("protocol", ProtocolName(c.cost.protocol));
    w.Field("ranks", c.cost.ranks);
    w.Field("bytes", c.cost.bytes).Field("time_s", c.cost.time_s).Field("algbw", c.cost.algbw);
    w.Field("busbw", c.cost.busbw).Field("count", c.count).EndObject();
  }
  w.EndArray();
  w.Key("warnings").BeginArray();
  for (const std::string& s : e.warnings) w.Value(s);
  w.EndArray();
  w.EndObject();
  return w.str();
}

}  // namespace shardsim
