// See compute_fit.h.
#include "src/report/compute_fit.h"

#include <cmath>
#include <sstream>

#include "src/io/bundled.h"
#include "src/io/yaml_reader.h"
#include "src/util/strings.h"

namespace shardsim {

StatusOr<std::vector<ComputeFit>> LoadComputeFits(const std::string& file) {
  SHARDSIM_ASSIGN_OR_RETURN(YamlFile f, YamlFile::Load(file));
  YamlMap root = f.Root();
  std::vector<ComputeFit> out;
  for (YamlMap& m : root.MapList("fits")) {
    ComputeFit fit;
    fit.architecture = m.String("architecture");
    fit.gpus = m.String("gpus");
    // The bounds of the hardware file's efficiency.sustained_compute.
    fit.sustained_compute = m.Number("sustained_compute", 0.05, 2);
    fit.runs = m.Int("runs", 1);
    fit.sources = m.Int("sources", 2);  // a fit needs a second source for its out-of-source error
    fit.structural_mape = m.Number("structural_mape", 0, 100);
    fit.fitted_mape = m.Number("fitted_mape", 0, 100);
    fit.loso_mape = m.Number("loso_mape", 0, 100);
    fit.structural_median = m.Number("structural_median_signed", -1, 100);
    fit.fitted_median = m.Number("fitted_median_signed", -1, 100);
    fit.loso_median = m.Number("loso_median_signed", -1, 100);
    m.Finish();
    for (const ComputeFit& other : out) {
      if (f.status().ok() && other.architecture == fit.architecture) {
        m.Error("architecture", "'" + fit.architecture + "' has two fits");
      }
    }
    out.push_back(fit);
  }
  root.Finish();
  if (!f.status().ok()) return f.status();
  return out;
}

std::string ComputeFitsYaml(const std::vector<ComputeFit>& fits, const std::string& command) {
  std::ostringstream out;
  out << "# The fitted global parameter (DEVELOPERS.md accuracy rules; issue 14): per GPU architecture, the share\n"
      << "# of the kernel benchmarks' GEMM and attention rates (efficiency.sustained_compute) that\n"
      << "# the published runs of docs/validation/published-runs.yaml sustained: the value that would\n"
      << "# make each run exact, its median over each source's runs, and the median over sources.\n"
      << "# Errors are of the simulated step time (fractions; positive is optimistic): structural\n"
      << "# (1), with the fit, and with each source predicted by the fit made without it (leave one\n"
      << "# source out). Written by\n"
      << "# `" << command << "`;\n"
      << "# read by estimate, simulate and plan (src/report/compute_fit.h) unless --unfitted.\n"
      << "fits:\n";
  for (const ComputeFit& f : fits) {
    out << "  - architecture: " << YamlQuoted(f.architecture) << "\n"
        << "    gpus: " << YamlQuoted(f.gpus) << "\n"
        << "    sustained_compute: " << Fmt("%.4f", f.sustained_compute) << "\n"
        << "    runs: " << f.runs << "\n"
        << "    sources: " << f.sources << "\n"
        << "    structural_mape: " << Fmt("%.4f", f.structural_mape) << "\n"
        << "    fitted_mape: " << Fmt("%.4f", f.fitted_mape) << "\n"
        << "    loso_mape: " << Fmt("%.4f", f.loso_mape) << "\n"
        << "    structural_median_signed: " << Fmt("%.4f", f.structural_median) << "\n"
        << "    fitted_median_signed: " << Fmt("%.4f", f.fitted_median) << "\n"
        << "    loso_median_signed: " << Fmt("%.4f", f.loso_median) << "\n";
  }
  return out.str();
}

namespace {

const BundledData<std::vector<ComputeFit>>& BundledFits() {
  static const BundledData<std::vector<ComputeFit>> bundled =
      ReadBundledData<std::vector<ComputeFit>>("compute-fits", "docs/validation", LoadComputeFits);
  return bundled;
}

const ComputeFit* FitFor(const GpuSpec& gpu) {
  for (const ComputeFit& f : BundledFits().value) {
    if (f.architecture == gpu.FitKey()) return &f;
  }
  return nullptr;
}

}  // namespace

void ApplyComputeFit(HardwareSpec* hw, bool unfitted) {
  GpuEfficiency& e = hw->gpu.efficiency;
  if (e.sustained_compute) return;  // the description's own value
  if (unfitted) {
    e.sustained_compute_origin = "unfitted";
    return;
  }
  const ComputeFit* fit = FitFor(hw->gpu);
  if (!fit) {
    e.sustained_compute_origin = "no-fit";
    return;
  }
  e.sustained_compute = fit->sustained_compute;
  e.sustained_compute_origin = "fit";
}

std::string ComputeFitText(const HardwareSpec& hw) {
  const GpuEfficiency& e = hw.gpu.efficiency;
  const std::string rate = Fmt("%.3f", e.sustained()) + " x the kernel benchmarks' GEMM and attention rates";
  if (e.sustained_compute_origin == "fit") {
    if (const ComputeFit* f = FitFor(hw.gpu)) {
      return "compute: sustained " + rate + ", fitted on " + std::to_string(f->runs) + " published runs on " +
             f->architecture + " (" + f->gpus + ") from " + std::to_string(f->sources) + " sources (MAPE " + Fmt("%.1f", 100 * f->structural_mape) + " % structural, " +
             Fmt("%.1f", 100 * f->fitted_mape) + " % fitted, " + Fmt("%.1f", 100 * f->loso_mape) +
             " % leave-one-source-out; docs/validation/compute-fits.yaml); --unfitted for the structural model";
    }
  }
  if (e.sustained_compute_origin == "unfitted") return "compute: structural, " + rate + " (--unfitted)";
  if (e.sustained_compute_origin == "no-fit") {
    const BundledData<std::vector<ComputeFit>>& b = BundledFits();
    return "compute: structural, " + rate + " (no fit: " +
           (b.error.empty() ? "no published run on " + hw.gpu.FitKey() + " is in the validation suite" : b.error) + ")";
  }
  if (!e.sustained_compute) return "compute: structural, " + rate + " (the description sets no sustained_compute)";
  return "compute: " + rate + ", as the hardware description sets it (efficiency.sustained_compute)";
}

void ComputeFitJson(JsonWriter& j, const HardwareSpec& hw) {
  const GpuEfficiency& e = hw.gpu.efficiency;
  j.Key("compute_fit").BeginObject();
  j.Field("sustained_compute", e.sustained());
  j.Field("origin", e.sustained_compute_origin.empty() ? std::string("description") : e.sustained_compute_origin);
  if (e.sustained_compute_origin == "fit") {
    if (const ComputeFit* f = FitFor(hw.gpu)) {
      j.Field("architecture", f->architecture).Field("runs", f->runs).Field("sources", f->sources);
      j.Field("structural_mape", f->structural_mape).Field("fitted_mape", f->fitted_mape);
      j.Field("leave_one_source_out_mape", f->loso_mape);
    }
  }
  j.EndObject();
}

}  // namespace shardsim
