// Stamps the layer plan's pass lists into per-stage programs; see program.h.
#include "src/sim/program.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>
#include <utility>

#include "src/util/check.h"

namespace shardsim {

void StageProgram::Index() {
  const int32_t n = static_cast<int32_t>(tasks.size());
  dependents_begin.assign(static_cast<size_t>(n) + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t d = tasks[i].dep_begin; d < tasks[i].dep_end; ++d) ++dependents_begin[deps[d] + 1];
  }
  for (int32_t i = 0; i < n; ++i) dependents_begin[i + 1] += dependents_begin[i];
  dependents.assign(static_cast<size_t>(dependents_begin[n]), 0);
  std::vector<int32_t> fill(dependents_begin.begin(), dependents_begin.end() - 1);
  stream_of.assign(static_cast<size_t>(n), 0);
  stream_order.assign(kStreamCount, {});
  for (int32_t i = 0; i < n; ++i) {
    const TaskSpec& t = tasks[i];
    for (int32_t d = t.dep_begin; d < t.dep_end; ++d) dependents[fill[deps[d]]++] = i;  // in task order
    stream_of[i] = static_cast<uint8_t>(t.stream);
    stream_order[static_cast<int>(t.stream)].push_back(i);
  }
}

size_t IterationProgram::task_count() const {
  size_t n = 0;
  for (const StageProgram& s : stages) n += s.tasks.size();
  return n;
}

namespace {

// Appends pass lists to one stage's program, resolving their local dependencies and entry.
class Stamper {
 public:
  explicit Stamper(StageProgram* prog) : prog_(prog) {}

  // Appends `p` for micro-batch `mb` of chunk `chunk` (layers from `first_layer`). Returns the
  // program index of p's task 0.
  int32_t Stamp(const PassPlan& p, int32_t mb, int32_t chunk, int64_t first_layer) {
    const int32_t base = static_cast<int32_t>(prog_->tasks.size());
    const std::vector<int32_t>& names = NamesOf(p);
    for (const TaskSpec& src : p.tasks) {
      TaskSpec t = src;
      t.name = names[src.name];
      if (t.microbatch >= 0) t.microbatch = mb;
      if (t.chunk >= 0) t.chunk = chunk;
      if (t.layer >= 0) t.layer = static_cast<int32_t>(first_layer + t.layer);
      std::vector<int32_t>& deps = scratch_;
      deps.clear();
      for (int32_t d = src.dep_begin; d < src.dep_end; ++d) {
        const int32_t dep = p.deps[d];
        if (dep == kEntryDep) {
          deps.insert(deps.end(), entry_.begin(), entry_.end());
        } else {
          deps.push_back(base + dep);
        }
      }
      Add(t, deps);
    }
    entry_.clear();
    for (int32_t c : p.carry) entry_.push_back(base + c);
    for (int32_t d : p.step_deps) step_deps_.push_back(base + d);
    for (const auto& [task, producer] : p.deferred) {
      TaskSpec t = task;
      t.name = Name(p.names[task.name]);
      if (t.layer >= 0) t.layer = static_cast<int32_t>(first_layer + t.layer);
      deferred_.emplace_back(t, base + producer);
    }
    for (int32_t i = static_cast<int32_t>(p.tasks.size()) - 1; i >= 0; --i) {
      if (p.tasks[i].kind == TaskKind::kCompute) {
        last_compute_ = base + i;
        break;
      }
    }
    return base;
  }

  // The tail: first the deferred buckets (after their producer and the last compute), then
  // the tail's list, whose entry is every gradient reduction, the last compute and what the
  // last pass left pending.
  void StampTail(const PassPlan& tail) {
    for (const auto& [t, producer] : deferred_) {
      std::vector<int32_t> deps = {producer, last_compute_};
      step_deps_.push_back(Add(t, deps));
    }
    entry_.insert(entry_.end(), step_deps_.begin(), step_deps_.end());
    entry_.push_back(last_compute_);
    Stamp(tail, -1, -1, 0);
  }

 private:
  int32_t Name(const std::string& n) {
    auto it = name_ids_.find(n);
    if (it != name_ids_.end()) return it->second;
    prog_->names.push_back(n);
    return name_ids_[n] = static_cast<int32_t>(prog_->names.size() - 1);
  }
  // The program's name index of each of p's names (looked up once per pass list).
  const std::vector<int32_t>& NamesOf(const PassPlan& p) {
    for (const auto& [q, ids] : pass_names_) {
      if (q == &p) return ids;
    }
    std::vector<int32_t> ids(p.names.size());
    for (size_t i = 0; i < p.names.size(); ++i) ids[i] = Name(p.names[i]);
    pass_names_.emplace_back(&p, std::move(ids));
    return pass_names_.back().second;
  }
  // Sorts and dedups `deps` in place.
  int32_t Add(TaskSpec t, std::vector<int32_t>& deps) {
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    t.dep_begin = static_cast<int32_t>(prog_->deps.size());
    for (int32_t d : deps) {
      if (d >= 0) prog_->deps.push_back(d);
    }
    t.dep_end = static_cast<int32_t>(prog_->deps.size());
    prog_->tasks.push_back(t);
    return static_cast<int32_t>(prog_->tasks.size() - 1);
  }

  StageProgram* prog_;
  std::map<std::string, int32_t> name_ids_;
  std::vector<int32_t> entry_;
  std::vector<int32_t> step_deps_;
  std::vector<std::pair<TaskSpec, int32_t>> deferred_;
  int32_t last_compute_ = -1;
  std::deque<std::pair<const PassPlan*, std::vector<int32_t>>> pass_names_;
  std::vector<int32_t> scratch_;  // one task's dependencies
};

}  // namespace

IterationProgram BuildIteration(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  return BuildIteration(BuildIterationPlan(m, hw, l), l);
}

IterationProgram BuildIteration(const IterationPlan& plan, const Layout& l) {
  IterationProgram it;
  it.stages.resize(l.pp);
  // Sends keyed by (pass, micro-batch, receiving position) -> (stage, task), and the tasks
  // receiving them.
  std::map<std::tuple<int, int, int>, std::pair<int32_t, int32_t>> sends;
  std::vector<std::pair<std::tuple<int, int, int>, std::pair<int32_t, int32_t>>> receives;
  for (int32_t s = 0; s < l.pp; ++s) {
    const StagePlan& sp = plan.stages[s];
    Stamper stamper(&it.stages[s]);
    const std::vector<int32_t> last_mb = LastGradientMicrobatch(l, sp.order);
    for (const PipelineStep& step : sp.order) {
      const ModelChunk& chunk = sp.chunks[step.chunk];
      const PassPlan& p = plan.PassFor(sp, step, step.mb == last_mb[step.chunk]);
      const int32_t base = stamper.Stamp(p, step.mb, step.chunk, chunk.first_layer);
      if (p.send >= 0) it.stages[s].tasks[base + p.send].peer_stage = SendPeer(l, s, p);
      const int pass = static_cast<int>(step.pass);
      if (p.send >= 0) {
        const int to = step.pass == Pass::kForward ? chunk.position + 1 : chunk.position - 1;
        sends[{pass, step.mb, to}] = {s, base + p.send};
      }
      if (p.receive >= 0) receives.push_back({{pass, step.mb, chunk.position}, {s, base + p.receive}});
    }
    stamper.StampTail(sp.tail);
    it.stages[s].static_memory = sp.static_memory;
  }
  // Cross-stage dependencies.
  it.remote_dependents.resize(l.pp);
  for (int32_t s = 0; s < l.pp; ++s) it.remote_dependents[s].resize(it.stages[s].tasks.size());
  for (const auto& [key, receiver] : receives) {
    auto send = sends.find(key);
    CHECK(send != sends.end()) << "no send for a receive on stage " << receiver.first;
    const auto [stage, task] = send->second;
    TaskSpec& t = it.stages[receiver.first].tasks[receiver.second];
    t.remote_stage = stage;
    t.remote_task = task;
    it.remote_dependents[stage][task].emplace_back(receiver.first, receiver.second);
  }
  for (StageProgram& p : it.stages) p.Index();
  return it;
}

}  // namespace shardsim
