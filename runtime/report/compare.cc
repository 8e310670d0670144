// See compare.h. Both inputs are JSON, read with yaml-cpp (JSON is YAML's flow subset).
#include "runtime/report/compare.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "src/util/json_writer.h"

namespace shardsim::runtime {
namespace {

const char* kCategories[] = {"compute", "recompute", "tp_comm", "cp_comm", "ep_comm",
                             "pp_comm", "dp_comm",   "bubble",  "optimizer", "offload"};
const char* kMemoryKinds[] = {"weights", "gradients", "optimizer", "activations", "other"};

StatusOr<YAML::Node> Parse(const std::string& text, const std::string& name) {
  try {
    YAML::Node n = YAML::Load(text);
    if (!n.IsMap()) return Status::Error(name + ": expected a JSON object");
    return n;
  } catch (const YAML::Exception& e) {
    return Status::Error(name + ": not valid JSON: " + e.what());
  }
}

// The accessors look into maps only: subscripting a scalar (a run file whose `ranks` holds
// strings) throws YAML::BadSubscript, which once aborted `compare`.
StatusOr<double> Number(const YAML::Node& n, const std::string& key, const std::string& name) {
  if (!n.IsMap()) return Status::Error(name + ": missing number '" + key + "' (not a map)");
  const YAML::Node v = n[key];
  if (!v || !v.IsScalar()) return Status::Error(name + ": missing number '" + key + "'");
  try {
    return v.as<double>();
  } catch (const YAML::Exception&) {
    return Status::Error(name + ": '" + key + "' is not a number");
  }
}

double NumberOr(const YAML::Node& n, const std::string& key, double fallback) {
  if (!n.IsMap()) return fallback;
  const YAML::Node v = n[key];
  if (!v || !v.IsScalar()) return fallback;
  try {
    return v.as<double>();
  } catch (const YAML::Exception&) {
    return fallback;
  }
}

std::string StringOr(const YAML::Node& n, const std::string& key) {
  if (!n.IsMap()) return "";
  const YAML::Node v = n[key];
  return v && v.IsScalar() ? v.as<std::string>() : "";
}

std::string Fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char text[256];
  std::snprintf(text, sizeof(text), format, a, b, c, d);
  return text;
}

// Seconds or bytes in a readable unit.
std::string Value(const std::string& name, double v) {
  if (name.find("bytes") != std::string::npos || name.rfind("memory ", 0) == 0) {
    return Fmt("%.3f MiB", v / 1048576.0);
  }
  if (name == "tokens_per_s") return Fmt("%.0f", v);
  return Fmt("%.3f ms", v * 1e3);
}

}  // namespace

StatusOr<Comparison> Compare(const std::string& sim_json, const std::string& run_json,
                             const std::string& sim_name, const std::string& run_name) {
  SHARDSIM_ASSIGN_OR_RETURN(YAML::Node sim, Parse(sim_json, sim_name));
  SHARDSIM_ASSIGN_OR_RETURN(YAML::Node run, Parse(run_json, run_name));
  Comparison c;
  c.model = StringOr(run, "model");
  c.hardware = StringOr(run, "hardware");
  c.layout = StringOr(run, "layout");
  c.backend = StringOr(run, "backend");
  if (StringOr(sim, "layout") != c.layout) {
    c.notes.push_back("the layouts differ: simulated " + StringOr(sim, "layout") + ", run " + c.layout);
  }
  SHARDSIM_ASSIGN_OR_RETURN(c.step.predicted, Number(sim, "iteration_time_s", sim_name));
  SHARDSIM_ASSIGN_OR_RETURN(c.step.measured, Number(run, "iteration_time_s", run_name));
  c.step.name = "iteration_time_s";
  c.tokens_per_s = {"tokens_per_s", NumberOr(sim, "tokens_per_s", 0), NumberOr(run, "tokens_per_s", 0)};
  const YAML::Node sim_time = sim["time_breakdown"];
  YAML::Node run_time = run["time_breakdown"];
  if (!sim_time || !run_time) return Status::Error("time_breakdown missing in " + sim_name + " or " + run_name);
  // The simulator reports one rank's breakdown (time_breakdown_rank); compare it with a
  // measured rank of the same pipeline stage, not the per-category maxima over the ranks.
  int64_t stage = -1;
  for (const YAML::Node& r : sim["ranks"]) {
    if (NumberOr(r, "rank", -1) == NumberOr(sim, "time_breakdown_rank", -2)) stage = static_cast<int64_t>(NumberOr(r, "stage", 0));
  }
  for (const YAML::Node& r : run["ranks"]) {
    if (static_cast<int64_t>(NumberOr(r, "stage", -1)) == stage && r.IsMap() && r["time_breakdown"]) {
      run_time = r["time_breakdown"];
      c.notes.push_back("phases: the simulator's rank " + StringOr(sim, "time_breakdown_rank") +
                        " against measured rank " + StringOr(r, "rank") + " (stage " + std::to_string(stage) + ")");
      break;
    }
  }
  for (const char* k : kCategories) {
    c.phases.push_back({k, NumberOr(sim_time, k, 0), NumberOr(run_time, k, 0)});
  }
  // Peak memory per measured rank against the simulated rank of the same pipeline stage.
  std::map<int64_t, double> stage_peak;
  for (const YAML::Node& r : sim["ranks"]) {
    stage_peak[static_cast<int64_t>(NumberOr(r, "stage", 0))] = NumberOr(r, "peak_memory_bytes", 0);
  }
  for (const YAML::Node& r : run["ranks"]) {
    const int64_t stage = static_cast<int64_t>(NumberOr(r, "stage", 0));
    const int64_t rank = static_cast<int64_t>(NumberOr(r, "rank", 0));
    auto it = stage_peak.find(stage);
    c.rank_memory.push_back({"rank " + std::to_string(rank) + " (stage " + std::to_string(stage) + ")",
                             it == stage_peak.end() ? 0 : it->second, NumberOr(r, "peak_memory_bytes", 0)});
  }
  if (run["emulated_rank"]) c.notes.push_back("measured: one emulated rank (--emulate-rank); its step has no real communication");
  c.peak_memory = {"peak_memory_bytes", NumberOr(sim, "peak_memory_bytes", 0), NumberOr(run, "peak_memory_bytes", 0)};
  for (const char* k : kMemoryKinds) {
    c.memory_breakdown.push_back({std::string("memory ") + k, NumberOr(sim["memory_breakdown"], k, 0),
                                  NumberOr(run["memory_breakdown"], k, 0)});
  }
  return c;
}

std::string ComparisonMarkdown(const Comparison& c) {
  std::ostringstream o;
  o << "`" << c.model << "` on `" << c.hardware << "` (" << c.backend << "), `" << c.layout << "`\n\n";
  o << "| figure | predicted | measured | error |\n|---|---:|---:|---:|\n";
  auto row = [&](const ComparedValue& v) {
    o << "| " << v.name << " | " << Value(v.name, v.predicted) << " | " << Value(v.name, v.measured) << " | "
      << (v.measured != 0 ? Fmt("%+.1f %%", 100 * v.error()) : std::string("")) << " |\n";
  };
  row(c.step);
  row(c.tokens_per_s);
  for (const ComparedValue& v : c.phases) {
    if (v.predicted != 0 || v.measured != 0) row(v);
  }
  row(c.peak_memory);
  for (const ComparedValue& v : c.memory_breakdown) row(v);
  for (ComparedValue v : c.rank_memory) {
    v.name += " peak_memory_bytes";
    row(v);
  }
  for (const std::string& n : c.notes) o << "\nNote: " << n << "\n";
  return o.str();
}

std::string ComparisonJson(const Comparison& c) {
  JsonWriter w;
  auto value = [&](const ComparedValue& v) {
    w.BeginObject().Field("name", v.name).Field("predicted", v.predicted).Field("measured", v.measured);
    w.Field("error", v.error()).EndObject();
  };
  w.BeginObject().Field("model", c.model).Field("hardware", c.hardware).Field("layout", c.layout);
  w.Field("backend", c.backend);
  w.Key("step");
  value(c.step);
  w.Key("tokens_per_s");
  value(c.tokens_per_s);
  w.Key("peak_memory");
  value(c.peak_memory);
  for (const auto& [key, list] : {std::pair<const char*, const std::vector<ComparedValue>*>{"phases", &c.phases},
                                  {"memory_breakdown", &c.memory_breakdown}, {"rank_memory", &c.rank_memory}}) {
    w.Key(key).BeginArray();
    for (const ComparedValue& v : *list) value(v);
    w.EndArray();
  }
  w.Key("notes").BeginArray();
  for (const std::string& n : c.notes) w.Value(n);
  w.EndArray().EndObject();
  return w.str();
}

StatusOr<std::vector<TraceSpan>> ReadTrace(const std::string& trace_json, const std::string& name) {
  SHARDSIM_ASSIGN_OR_RETURN(YAML::Node doc, Parse(trace_json, name));
  const YAML::Node events = doc["traceEvents"];
  if (!events || !events.IsSequence()) return Status::Error(name + ": no traceEvents list");
  std::map<std::pair<int, int>, std::string> threads;
  std::vector<TraceSpan> spans;
  for (const YAML::Node& e : events) {
    const std::string ph = StringOr(e, "ph");
    const int pid = static_cast<int>(NumberOr(e, "pid", 0)), tid = static_cast<int>(NumberOr(e, "tid", 0));
    if (ph == "M" && StringOr(e, "name") == "thread_name") {
      threads[{pid, tid}] = e["args"] ? StringOr(e["args"], "name") : "";
    } else if (ph == "X") {
      TraceSpan s;
      s.pid = pid;
      s.thread = std::to_string(tid);
      s.category = StringOr(e, "cat");
      s.thread = std::to_string(tid);
      if (s.category.empty()) s.category = "?" + StringOr(e, "name");  // resolved below
      s.name = StringOr(e, "name");
      s.start_us = NumberOr(e, "ts", 0);
      s.duration_us = NumberOr(e, "dur", 0);
      if (e["args"] && e["args"].IsMap()) {
        s.layer = static_cast<int64_t>(NumberOr(e["args"], "layer", -1));
        s.microbatch = static_cast<int64_t>(NumberOr(e["args"], "microbatch", -1));
      }
      spans.push_back(s);
    }
  }
  for (TraceSpan& s : spans) {
    auto it = threads.find({s.pid, std::stoi(s.thread)});
    if (it != threads.end()) s.thread = it->second;
    if (s.category.rfind("?", 0) == 0) s.category = CategoryOfSpan(s.thread, s.category.substr(1));
  }
  return spans;
}

namespace {

// Paired horizontal bars, predicted (hatched lighter) above measured, one pair per value.
std::string BarsSvg(const std::string& id, const std::vector<ComparedValue>& values, bool bytes) {
  double top = 0;
  for (const ComparedValue& v : values) top = std::max({top, v.predicted, v.measured});
  if (top <= 0) top = 1;
  const double left = 130, width = 600, pair_h = 30;
  std::ostringstream o;
  o << "<svg id=\"" << id << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 160
    << "\" height=\"" << pair_h * static_cast<double>(values.size()) + 10 << "\">\n";
  for (size_t i = 0; i < values.size(); ++i) {
    const ComparedValue& v = values[i];
    const double y = pair_h * static_cast<double>(i) + 4;
    o << "<text x=\"4\" y=\"" << y + 16 << "\" font-size=\"12\">" << HtmlEscape(v.name) << "</text>\n";
    o << "<rect class=\"predicted\" x=\"" << left << "\" y=\"" << y << "\" width=\"" << Fmt("%.2f", width * v.predicted / top)
      << "\" height=\"11\" fill=\"" << CategoryColor(v.name) << "\" fill-opacity=\"0.45\"><title>predicted</title></rect>\n";
    o << "<rect class=\"measured\" x=\"" << left << "\" y=\"" << y + 12 << "\" width=\"" << Fmt("%.2f", width * v.measured / top)
      << "\" height=\"11\" fill=\"" << CategoryColor(v.name) << "\"><title>measured</title></rect>\n";
    const std::string label = bytes ? Fmt("%.2f / %.2f MiB", v.predicted / 1048576.0, v.measured / 1048576.0)
                                    : Fmt("%.2f / %.2f ms", v.predicted * 1e3, v.measured * 1e3);
    o << "<text x=\"" << left + width + 6 << "\" y=\"" << y + 16 << "\" font-size=\"11\">" << label << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace

std::string ComparisonHtml(const Comparison& c, const std::vector<TraceSpan>& predicted,
                           const std::vector<TraceSpan>& measured) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>shardsim: predicted vs measured</title>\n"
    << "<style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child{text-align:left}"
       "code{word-break:break-all}</style>\n"
    << "</head><body>\n<h1>Predicted vs measured</h1>\n";
  o << "<p>model <b>" << HtmlEscape(c.model) << "</b>, hardware <b>" << HtmlEscape(c.hardware) << "</b>, backend <b>"
    << HtmlEscape(c.backend) << "</b><br>layout <code>" << HtmlEscape(c.layout) << "</code></p>\n";
  o << "<table id=\"summary\"><tr><th>figure</th><th>predicted</th><th>measured</th><th>error</th></tr>\n";
  for (const ComparedValue* v : {&c.step, &c.tokens_per_s, &c.peak_memory}) {
    o << "<tr><td>" << v->name << "</td><td>" << Value(v->name, v->predicted) << "</td><td>"
      << Value(v->name, v->measured) << "</td><td>" << Fmt("%+.1f %%", 100 * v->error()) << "</td></tr>\n";
  }
  o << "</table>\n";
  for (const std::string& n : c.notes) o << "<p><i>" << HtmlEscape(n) << "</i></p>\n";
  // Both timelines on one time scale: the longer of the two steps.
  const double span_us = TimelineExtent({&predicted, &measured});
  o << "<h2>One step: predicted (above) and measured (below), on one time scale</h2>\n";
  if (predicted.empty() && measured.empty()) {
    o << "<p>No traces were given (simulate --trace and run --trace).</p>\n";
  } else {
    o << TimelineLegend({&predicted, &measured},
                        "The simulator draws a pipeline bubble as a gap on the compute row; the runtime "
                        "measures it as a <code>bubble</code> span (a blocked receive).");
    o << "<h3>Predicted</h3>\n" << TimelineSvg("timeline-predicted", predicted, span_us);
    o << "<h3>Measured</h3>\n" << TimelineSvg("timeline-measured", measured, span_us);
  }
  std::vector<ComparedValue> phases;
  for (const ComparedValue& v : c.phases) {
    if (v.predicted != 0 || v.measured != 0) phases.push_back(v);
  }
  o << "<h2>Time per phase (lighter: predicted; darker: measured)</h2>\n" << BarsSvg("phases", phases, false);
  o << "<h2>Memory of the most loaded rank</h2>\n" << BarsSvg("memory", c.memory_breakdown, true);
  if (!c.rank_memory.empty()) o << "<h2>Peak memory per rank</h2>\n" << BarsSvg("rank-memory", c.rank_memory, true);
  o << "</body></html>\n";
  return o.str();
}

}  // namespace shardsim::runtime
