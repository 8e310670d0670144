// `shardsim validate`: the runtime against the simulator over a list of layouts (issue 7).
// Each layout is trained (`mpirun -np NP shardsim run`) and simulated (`shardsim simulate`) as
// subprocesses of this binary, then compared (runtime/report/compare.h): one Markdown table
// with the step time and peak memory errors and their MAPE, optionally an HTML report per
// layout. Subprocesses keep MPI out of this process: mpirun launches fresh ranks.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/report/compare.h"
#include "src/cli/args.h"
#include "src/cli/commands.h"
#include "src/layout/layout.h"
#include "src/report/published_suite.h"
#include "src/util/atomic_file.h"
#include "src/util/json_writer.h"
#include "src/util/strings.h"

namespace shardsim::runtime {
namespace {

namespace fs = std::filesystem;

// One line of the layouts file: `NP LAYOUT-SPEC`.
struct LayoutLine {
  int64_t ranks = 0;
  std::string spec;
  std::string where;  // "FILE:LINE", for messages
};

// One compared layout: the table's row.
struct Row {
  LayoutLine layout;
  Comparison comparison;
};

std::string Ranks(int64_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

// A layout of `ranks` ranks: the spec must parse and its parallel degrees fill the ranks.
StatusOr<LayoutLine> CheckedLine(int64_t ranks, const std::string& spec, const std::string& where) {
  StatusOr<Layout> parsed = ParseLayout(spec);
  if (!parsed.ok()) return Status::Error(where + ": " + parsed.status().message());
  StatusOr<Layout> l = ResolveLayout(*parsed, ranks);
  if (!l.ok()) return Status::Error(where + ": " + l.status().message());
  if (const int64_t product = l->tp * l->pp * l->dp * l->cp; product != ranks) {
    return Status::Error(where + ": tp x pp x dp x cp = " + std::to_string(product) +
                         " ranks, but NP is " + std::to_string(ranks));
  }
  return LayoutLine{ranks, spec, where};
}

// Errors name FILE:LINE: a missing or non-positive rank count, no spec, a spec with spaces, a
// spec ParseLayout rejects, or one whose parallel degrees do not fit NP ranks.
StatusOr<std::vector<LayoutLine>> ReadLayouts(const std::string& path) {
  StatusOr<std::string> text = ReadWholeFile(path, "layouts file");
  if (!text.ok()) return Status::Error("cannot read the layouts file: " + text.status().message());
  std::istringstream in(*text);
  std::vector<LayoutLine> out;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    const std::string text = Trim(line.substr(0, line.find('#')));
    if (text.empty()) continue;
    const size_t space = text.find_first_of(" \t");
    const std::string np = text.substr(0, space);
    const std::string spec = space == std::string::npos ? "" : Trim(text.substr(space));
    char* end = nullptr;
    const long long ranks = std::strtoll(np.c_str(), &end, 10);
    if (end != np.c_str() + np.size() || ranks < 1) {
      return Status::Error(
          where + ": expected `NP LAYOUT-SPEC` with NP a rank count >= 1, found '" + text + "'");
    }
    if (spec.empty() || spec.find_first_of(" \t") != std::string::npos) {
      return Status::Error(where +
                           ": expected one layout spec (no spaces) after the rank count, found '" +
                           text + "'");
    }
    SHARDSIM_ASSIGN_OR_RETURN(LayoutLine one, CheckedLine(ranks, spec, where));
    out.push_back(one);
  }
  if (out.empty()) return Status::Error("the layouts file '" + path + "' names no layout");
  return out;
}

// One word for /bin/sh: as it is when it has only safe characters, else single-quoted with
// each ' written as '\''.
std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_./=,:+-") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + ShellQuote(w);
  return out;
}

// The file that `name` runs from on PATH, or "" when there is none.
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (const std::string& dir : Split(path ? path : "", ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The last `lines` lines of a file, each indented, for an error message.
std::string Tail(const fs::path& path, size_t lines) {
  StatusOr<std::string> text = ReadWholeFile(path.string());
  std::vector<std::string> all = Split(text.ok() ? *text : std::string(), '\n');
  while (!all.empty() && all.back().empty()) all.pop_back();
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    out += "\n    " + all[i];
  return out;
}

// Runs `words` with stdout and stderr into `log`. Errors name the layout, the command, how it
// ended and the end of its output.
Status RunLogged(const std::vector<std::string>& words, const fs::path& log,
                 const LayoutLine& layout) {
  const std::string command = ShellJoin(words);
  const int status =
      std::system((command + " >" + ShellQuote(log.string()) + " 2>&1 </dev/null").c_str());
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  std::string how = status == -1        ? "could not be started"
                    : WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                    : WIFSIGNALED(status)
                        ? "was killed by signal " + std::to_string(WTERMSIG(status))
                        : "ended abnormally";
  return Status::Error("layout '" + layout.spec + "' (" + layout.where + ", " +
                       Ranks(layout.ranks) + "): `" + command + "` " + how + "; its output (" +
                       log.string() + ") ends:" + Tail(log, 15));
}

double Percent(const ComparedValue& v) { return 100 * v.error(); }

// Mean absolute percentage error of one figure over the rows.
double Mape(const std::vector<Row>& rows, const ComparedValue Comparison::*field) {
  double sum = 0;
  for (const Row& r : rows) sum += std::fabs(Percent(r.comparison.*field));
  return rows.empty() ? 0 : sum / static_cast<double>(rows.size());
}

std::string Markdown(const std::vector<Row>& rows, const std::string& model,
                     const std::string& hardware, const std::string& backend, int64_t steps) {
  std::ostringstream md;
  md << "# Runtime vs simulator: `" << model << "` on `" << hardware << "`\n\n"
     << "Each layout trained for " << steps << " steps with `shardsim run --backend " << backend
     << "` and simulated with `shardsim simulate` (`shardsim validate`).\n"
        "Step: the median step time of the slowest rank. Peak memory: the most loaded rank's.\n\n"
     << "| layout | ranks | measured step | predicted step | error | measured peak memory | "
        "predicted | error |\n"
     << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Row& r : rows) {
    const Comparison& c = r.comparison;
    md << "| `" << r.layout.spec << "` | " << r.layout.ranks << " | "
       << Fmt("%.2f ms", 1e3 * c.step.measured) << " | " << Fmt("%.2f ms", 1e3 * c.step.predicted)
       << " | " << Fmt("%+.1f %%", Percent(c.step)) << " | "
       << Fmt("%.2f MiB", c.peak_memory.measured / (1 << 20)) << " | "
       << Fmt("%.2f MiB", c.peak_memory.predicted / (1 << 20)) << " | "
       << Fmt("%+.1f %%", Percent(c.peak_memory)) << " |\n";
  }
  md << "\nMAPE over " << rows.size() << " layouts: step time "
     << Fmt("%.1f %%", Mape(rows, &Comparison::step)) << ", peak memory "
     << Fmt("%.1f %%", Mape(rows, &Comparison::peak_memory)) << ".\n";
  bool header = false;
  for (const Row& r : rows) {
    for (const std::string& note : r.comparison.notes) {
      if (!header) md << "\nNotes:\n";
      header = true;
      md << "- `" << r.layout.spec << "`: " << note << "\n";
    }
  }
  return md.str();
}

std::string Json(const std::vector<Row>& rows, const std::string& model,
                 const std::string& hardware, const std::string& backend, int64_t steps,
                 const std::vector<std::string>& html) {
  JsonWriter w;
  w.BeginObject()
      .Field("model", model)
      .Field("hardware", hardware)
      .Field("backend", backend)
      .Field("steps", steps);
  w.Key("layouts").BeginArray();
  for (size_t i = 0; i < rows.size(); ++i) {
    const Comparison& c = rows[i].comparison;
    w.BeginObject().Field("layout", rows[i].layout.spec).Field("ranks", rows[i].layout.ranks);
    w.Field("measured_iteration_time_s", c.step.measured)
        .Field("predicted_iteration_time_s", c.step.predicted);
    w.Field("iteration_time_error_percent", Percent(c.step));
    w.Field("measured_peak_memory_bytes", c.peak_memory.measured);
    w.Field("predicted_peak_memory_bytes", c.peak_memory.predicted);
    w.Field("peak_memory_error_percent", Percent(c.peak_memory));
    if (!html.empty()) w.Field("html", html[i]);
    w.Key("notes").BeginArray();
    for (const std::string& note : c.notes) w.Value(note);
    w.EndArray().EndObject();
  }
  w.EndArray();
  w.Field("iteration_time_mape_percent", Mape(rows, &Comparison::step));
  w.Field("peak_memory_mape_percent", Mape(rows, &Comparison::peak_memory));
  w.EndObject();
  return w.str();
}

// --published FILE: the published runs replayed (src/report/published_suite.h).
int ValidatePublished(const std::string& file, const cli::Args& args) {
  StatusOr<PublishedSuite> suite = LoadPublishedSuite(file);
  if (!suite.ok()) return cli::Fail("validate", suite.status().message(), 1);
  // Progress on stderr (it takes tens of seconds): on a terminal one line redrawn per run; with
  // --progress, also when stderr is not a terminal, one line as each pass begins, for logs.
  const bool tty = !args.Has("json") && ::isatty(2);
  PublishedProgress progress;
  if (tty || args.Has("progress")) {
    progress = [tty](const std::string& pass, size_t run, size_t runs, const std::string& id) {
      if (tty) {
        std::fprintf(stderr, "\rvalidate: %-10s %3zu/%zu %-60.60s", pass.c_str(), run + 1, runs, id.c_str());
        if (pass == "fitted" && run + 1 == runs) std::fprintf(stderr, "\n");
      } else if (run == 0) {
        std::fprintf(stderr, "validate: %s replay of %zu runs\n", pass.c_str(), runs);
      }
    };
  }
  const PublishedReport report = EvaluatePublishedSuite(*suite, progress);
  const std::string markdown = PublishedReportMarkdown(
      *suite, report, "shardsim validate --published " + file + " --out FILE (scripts/validate-published.sh)");
  if (std::optional<std::string> out = args.Get("out")) {
    Status st = WriteFileAtomically(*out, markdown);
    if (!st.ok()) return cli::Fail("validate", st.message(), 1);
  }
  if (std::optional<std::string> bands = args.Get("bands-out")) {
    Status st = WriteFileAtomically(
        *bands, ErrorBandsYaml(ErrorBandsOf(report), RankingToleranceOf(report), MemoryBandOf(report),
                               "shardsim validate --published " + file + " --bands-out FILE"));
    if (!st.ok()) return cli::Fail("validate", st.message(), 1);
  }
  if (std::optional<std::string> fits = args.Get("fits-out")) {
    Status st = WriteFileAtomically(
        *fits, ComputeFitsYaml(ComputeFitsOf(report), "shardsim validate --published " + file + " --fits-out FILE"));
    if (!st.ok()) return cli::Fail("validate", st.message(), 1);
  }
  std::cout << (args.Has("json") ? PublishedReportJson(report) : markdown);
  return 0;
}

int Validate(int argc, char** argv) {
  const std::vector<cli::FlagSpec> flags = {
      {"model", "M", "model name (models/) or YAML / HF config.json file", "tiny"},
      {"seq-len", "T", "the model's training sequence length (run and simulate take it)", ""},
      {"hardware", "H", "hardware name (hardware/) or YAML file", "cpu-host"},
      {"gpus", "N", "with --layout: validate that one layout on N ranks instead of a --layouts file", ""},
      {"layout", "SPEC", "with --gpus: the one layout to validate", ""},
      {"layouts", "FILE", "one layout per line: `NP LAYOUT-SPEC` (NP ranks; # comments) (required without --published or --gpus/--layout)",
       ""},
      {"published", "FILE", "instead: replay published runs (docs/validation/published-runs.yaml) through estimate and simulate", ""},
      {"bands-out", "FILE", "with --published: also write the error bands (docs/validation/error-bands.yaml)", ""},
      {"fits-out", "FILE", "with --published: also write the fitted sustained_compute per GPU (docs/validation/compute-fits.yaml)", ""},
      {"progress", "", "with --published: progress lines on stderr even when it is not a terminal (one per pass)", ""},
      {"backend", "B", "cpu or cuda", "cpu"},
      {"steps", "N", "training steps per layout", "20"},
      {"out", "FILE", "also write the Markdown table to FILE (whole or not at all)", ""},
      {"html-dir", "DIR", "write an HTML report per layout: DIR/layout_1.html, ...", ""},
      {"json", "", "print the rows and the MAPEs as JSON instead of the table", ""},
      {"help", "", "show this help", ""},
  };
  StatusOr<cli::Args> args = cli::Args::Parse(argc, argv, 2, flags);
  if (!args.ok()) return cli::Fail("validate", args.status().message(), 2);
  if (args->Has("help")) {
    std::cout
        << "Usage: shardsim validate --layouts FILE [--model M] [--hardware H] [flags]\n"
           "       shardsim validate --gpus N --layout SPEC [--model M] [--hardware H] [flags]\n"
           "       shardsim validate --published FILE [--out FILE] [--json]\n\n"
           "For each line `NP SPEC` of FILE, trains the layout for real and simulates it:\n"
           "  mpirun -np NP shardsim run --backend B --model M --hardware H --layout SPEC --steps "
           "N\n"
           "  shardsim simulate --model M --hardware H --gpus NP --layout SPEC\n"
           "then prints the measured and predicted step time and peak memory, their errors and\n"
           "the MAPE over the layouts (docs/cli.md). Progress goes to stderr.\n"
           "With --published, replays each published run of FILE (its model, cluster, GPUs\n"
           "and layout) through the estimate and the symmetric simulation, and prints the\n"
           "errors against the published figure per run, per source and overall.\n\n"
        << cli::FlagHelp(flags);
    return 0;
  }
  if (const std::optional<std::string> published = args->Get("published")) {
    if (args->Get("layouts")) return cli::Fail("validate", "--published and --layouts exclude each other", 2);
    return ValidatePublished(*published, *args);
  }
  if (args->Get("bands-out")) return cli::Fail("validate", "--bands-out needs --published FILE", 2);
  if (args->Get("fits-out")) return cli::Fail("validate", "--fits-out needs --published FILE", 2);
  const std::optional<std::string> layouts_path = args->Get("layouts");
  const bool one = args->Has("gpus") || args->Has("layout");
  if (one && layouts_path) return cli::Fail("validate", "--gpus/--layout and --layouts exclude each other", 2);
  if (one && !(args->Has("gpus") && args->Has("layout"))) {
    return cli::Fail("validate", "--gpus N and --layout SPEC go together (one layout on N ranks)", 2);
  }
  if (!layouts_path && !one) {
    return cli::Fail("validate", "--layouts FILE, --gpus N --layout SPEC, or --published FILE is required", 2);
  }
  StatusOr<int64_t> steps = args->GetInt("steps");
  if (!steps.ok() || *steps < 1)
    return cli::Fail("validate", "--steps: expected a positive integer", 2);
  const std::string model = *args->Get("model"), hardware = *args->Get("hardware"),
                    backend = *args->Get("backend");
  if (backend != "cpu" && backend != "cuda") {
    return cli::Fail("validate", "--backend: expected cpu or cuda, found '" + backend + "'", 2);
  }
  std::vector<std::string> seq_len;  // passed on to run and simulate
  if (args->Get("seq-len")) {
    StatusOr<int64_t> t = args->GetInt("seq-len");
    if (!t.ok() || *t < 1) return cli::Fail("validate", "--seq-len must be a positive integer", 2);
    seq_len = {"--seq-len", std::to_string(*t)};
  }
  StatusOr<std::vector<LayoutLine>> layouts = Status::Error("no layouts");
  if (one) {
    StatusOr<int64_t> gpus = args->GetInt("gpus");
    if (!gpus.ok() || *gpus < 1) return cli::Fail("validate", "--gpus: expected a positive integer", 2);
    StatusOr<LayoutLine> line = CheckedLine(*gpus, *args->Get("layout"), "--layout");
    if (!line.ok()) return cli::Fail("validate", line.status().message(), 1);
    layouts = std::vector<LayoutLine>{*line};
  } else {
    layouts = ReadLayouts(*layouts_path);
  }
  if (!layouts.ok()) return cli::Fail("validate", layouts.status().message(), 1);

  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    return cli::Fail("validate", "cannot find this binary (/proc/self/exe): " + ec.message(), 1);
  const std::string mpirun = FindOnPath("mpirun");
  for (const LayoutLine& l : *layouts) {
    if (mpirun.empty() && l.ranks > 1) {
      return cli::Fail("validate",
                       l.where + ": " + Ranks(l.ranks) +
                           " need mpirun, which is not on PATH (apt-get install openmpi-bin)",
                       1);
    }
  }
  const std::optional<std::string> html_dir = args->Get("html-dir");
  if (html_dir) {
    fs::create_directories(*html_dir, ec);
    if (ec)
      return cli::Fail("validate", "--html-dir: cannot create '" + *html_dir + "': " + ec.message(),
                       1);
  }
  std::string tmp_template = (fs::temp_directory_path() / "shardsim-validate-XXXXXX").string();
  if (::mkdtemp(tmp_template.data()) == nullptr) {
    return cli::Fail(
        "validate", "cannot create a temporary directory: " + std::string(std::strerror(errno)), 1);
  }
  const fs::path tmp = tmp_template;

  std::vector<Row> rows;
  std::vector<std::string> html_files;
  const size_t n = layouts->size();
  for (size_t i = 0; i < n; ++i) {
    const LayoutLine& l = (*layouts)[i];
    const std::string tag = std::to_string(i + 1);
    const fs::path run_json = tmp / ("run_" + tag + ".json"),
                   run_trace = tmp / ("run_" + tag + ".trace.json");
    const fs::path sim_json = tmp / ("sim_" + tag + ".json"),
                   sim_trace = tmp / ("sim_" + tag + ".trace.json");
    std::cerr << "validate: [" << i + 1 << "/" << n << "] " << Ranks(l.ranks) << ": " << l.spec
              << ": run\n";
    std::vector<std::string> run;
    if (!mpirun.empty()) {
      run = {mpirun, "-np", std::to_string(l.ranks), "--oversubscribe"};
      if (::geteuid() == 0) run.push_back("--allow-run-as-root");
    }
    run.insert(run.end(),
               {self.string(), "run", "--backend", backend, "--model", model, "--hardware",
                hardware, "--layout", l.spec, "--steps", std::to_string(*steps), "--out",
                run_json.string(), "--trace", run_trace.string()});
    run.insert(run.end(), seq_len.begin(), seq_len.end());
    if (Status st = RunLogged(run, tmp / ("run_" + tag + ".log"), l); !st.ok()) {
      return cli::Fail("validate", st.message(), 1);
    }
    std::cerr << "validate: [" << i + 1 << "/" << n << "] " << Ranks(l.ranks) << ": " << l.spec
              << ": simulate\n";
    std::vector<std::string> simulate = {
        self.string(),     "simulate", "--model",         model,
        "--hardware",      hardware,   "--gpus",          std::to_string(l.ranks),
        "--layout",        l.spec,     "--json",          "--out",
        sim_json.string(), "--trace",  sim_trace.string()};
    simulate.insert(simulate.end(), seq_len.begin(), seq_len.end());
    if (Status st = RunLogged(simulate, tmp / ("sim_" + tag + ".log"), l); !st.ok()) {
      return cli::Fail("validate", st.message(), 1);
    }
    StatusOr<std::string> sim_text = ReadWholeFile(sim_json.string());
    StatusOr<std::string> run_text = ReadWholeFile(run_json.string());
    if (!sim_text.ok()) return cli::Fail("validate", sim_text.status().message(), 1);
    if (!run_text.ok()) return cli::Fail("validate", run_text.status().message(), 1);
    StatusOr<Comparison> c = Compare(*sim_text, *run_text, sim_json.string(), run_json.string());
    if (!c.ok())
      return cli::Fail("validate",
                       "layout '" + l.spec + "' (" + l.where + "): " + c.status().message(), 1);
    if (html_dir) {
      StatusOr<std::string> sim_trace_text = ReadWholeFile(sim_trace.string(), "trace", kMaxTraceBytes);
      StatusOr<std::string> run_trace_text = ReadWholeFile(run_trace.string(), "trace", kMaxTraceBytes);
      if (!sim_trace_text.ok()) return cli::Fail("validate", sim_trace_text.status().message(), 1);
      if (!run_trace_text.ok()) return cli::Fail("validate", run_trace_text.status().message(), 1);
      StatusOr<std::vector<TraceSpan>> predicted = ReadTrace(*sim_trace_text, sim_trace.string());
      StatusOr<std::vector<TraceSpan>> measured = ReadTrace(*run_trace_text, run_trace.string());
      if (!predicted.ok()) return cli::Fail("validate", predicted.status().message(), 1);
      if (!measured.ok()) return cli::Fail("validate", measured.status().message(), 1);
      const std::string file = (fs::path(*html_dir) / ("layout_" + tag + ".html")).string();
      if (Status st = WriteFileAtomically(file, ComparisonHtml(*c, *predicted, *measured));
          !st.ok()) {
        return cli::Fail("validate", st.message(), 1);
      }
      html_files.push_back(file);
      std::cerr << "validate: wrote " << file << "\n";
    }
    std::cerr << "validate: [" << i + 1 << "/" << n << "] step "
              << Fmt("%+.1f %%", Percent(c->step)) << ", peak memory "
              << Fmt("%+.1f %%", Percent(c->peak_memory)) << "\n";
    rows.push_back({l, *c});
  }
  fs::remove_all(tmp, ec);  // kept on failure: the logs and JSON are named in the error

  const std::string md = Markdown(rows, model, hardware, backend, *steps);
  if (const std::optional<std::string> out = args->Get("out")) {
    if (Status st = WriteFileAtomically(*out, md); !st.ok())
      return cli::Fail("validate", st.message(), 1);
    std::cerr << "validate: wrote " << *out << "\n";
  }
  std::cout << (args->Has("json") ? Json(rows, model, hardware, backend, *steps, html_files) : md);
  return 0;
}

const cli::CommandRegistrar kRegister(
    {"validate", "run and simulate a list of layouts and tabulate the prediction errors (MAPE)",
     Validate, 38});

}  // namespace
}  // namespace shardsim::runtime
