// See task_graph.h.
#include "src/sim/task_graph.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>

#include "src/layout/placement.h"

namespace shardsim {
namespace {

using TaskDag = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// Vertex ids: stage offsets into one numbering.
std::vector<size_t> Offsets(const IterationProgram& p) {
  std::vector<size_t> off(p.stages.size() + 1, 0);
  for (size_t s = 0; s < p.stages.size(); ++s) off[s + 1] = off[s] + p.stages[s].tasks.size();
  return off;
}

TaskDag BuildDag(const IterationProgram& p, const std::vector<size_t>& off) {
  TaskDag g(off.back());
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const StageProgram& sp = p.stages[s];
    for (size_t t = 0; t < sp.tasks.size(); ++t) {
      const TaskSpec& task = sp.tasks[t];
      for (int32_t d = task.dep_begin; d < task.dep_end; ++d) {
        boost::add_edge(off[s] + sp.deps[d], off[s] + t, g);
      }
      if (task.remote_task >= 0) boost::add_edge(off[task.remote_stage] + task.remote_task, off[s] + t, g);
    }
    for (const std::vector<int32_t>& order : sp.stream_order) {
      for (size_t i = 1; i < order.size(); ++i) boost::add_edge(off[s] + order[i - 1], off[s] + order[i], g);
    }
  }
  // A collective of the embedding group (first and last stage) starts when both reach it: each
  // stage's copy also waits for what the other's waits for (its dependencies and its stream
  // predecessor). The k-th of one stage meets the k-th of the other.
  const size_t last = p.stages.size() - 1;
  if (last > 0) {
    auto meetings = [&](size_t s) {
      std::vector<int32_t> out;
      const std::vector<TaskSpec>& tasks = p.stages[s].tasks;
      for (size_t t = 0; t < tasks.size(); ++t) {
        if (tasks[t].kind == TaskKind::kCollective && tasks[t].group == GroupKind::kEmbedding) {
          out.push_back(static_cast<int32_t>(t));
        }
      }
      return out;
    };
    auto before = [&](size_t s, int32_t t) {
      std::vector<size_t> out;
      const StageProgram& sp = p.stages[s];
      const TaskSpec& task = sp.tasks[t];
      for (int32_t d = task.dep_begin; d < task.dep_end; ++d) out.push_back(off[s] + sp.deps[d]);
      const std::vector<int32_t>& order = sp.stream_order[static_cast<int>(task.stream)];
      const auto pos = std::lower_bound(order.begin(), order.end(), t);
      if (pos != order.begin() && pos != order.end() && *pos == t) out.push_back(off[s] + *(pos - 1));
      return out;
    };
    const std::vector<int32_t> a = meetings(0), b = meetings(last);
    for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
      for (size_t v : before(0, a[k])) boost::add_edge(v, off[last] + b[k], g);
      for (size_t v : before(last, b[k])) boost::add_edge(v, off[0] + a[k], g);
    }
  }
  return g;
}

}  // namespace

Status CheckAcyclic(const IterationProgram& program) {
  const std::vector<size_t> off = Offsets(program);
  const TaskDag g = BuildDag(program, off);
  std::vector<size_t> order;
  try {
    boost::topological_sort(g, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    // Name a task that is on (or behind) a cycle: one that never becomes ready in Kahn's order.
    std::vector<int> indegree(off.back(), 0);
    for (auto [it, end] = boost::edges(g); it != end; ++it) ++indegree[boost::target(*it, g)];
    std::vector<size_t> ready;
    for (size_t v = 0; v < indegree.size(); ++v) {
      if (indegree[v] == 0) ready.push_back(v);
    }
    while (!ready.empty()) {
      const size_t v = ready.back();
      ready.pop_back();
      for (auto [it, end] = boost::out_edges(v, g); it != end; ++it) {
        if (--indegree[boost::target(*it, g)] == 0) ready.push_back(boost::target(*it, g));
      }
    }
    for (size_t s = 0; s < program.stages.size(); ++s) {
      for (size_t t = 0; t < program.stages[s].tasks.size(); ++t) {
        if (indegree[off[s] + t] > 0) {
          const StageProgram& sp = program.stages[s];
          return Status::Error("the iteration's task graph has a cycle through stage " +
                               std::to_string(s) + " task '" + sp.names[sp.tasks[t].name] + "'");
        }
      }
    }
    return Status::Error("the iteration's task graph has a cycle");
  }
  return Status::Ok();
}

CriticalPath FindCriticalPath(const IterationProgram& program, const Cluster& cluster,
                              const Layout& l) {
  const std::vector<size_t> off = Offsets(program);
  const TaskDag g = BuildDag(program, off);
  std::vector<size_t> order;
  boost::topological_sort(g, std::back_inserter(order));  // reverse topological order
  const CollectiveModel comm(cluster);
  std::map<std::tuple<int, int, int64_t, double>, double> cache;
  auto duration = [&](size_t s, const TaskSpec& t) -> double {
    if (t.kind == TaskKind::kCompute || t.kind == TaskKind::kHostCompute) return t.duration_s;
    const int64_t rank = RankOf(l, RankCoord{0, 0, 0, static_cast<int64_t>(s)});
    if (t.kind == TaskKind::kHostTransfer) {
      const Route r = cluster.RouteToHost(rank);
      return r.latency_s + t.bytes / r.bottleneck_bandwidth;
    }
    std::vector<int64_t> gpus;
    Collective c = t.collective;
    if (t.kind == TaskKind::kSend) {
      gpus = {rank, RankOf(l, RankCoord{0, 0, 0, t.peer_stage})};
      c = Collective::kSendRecv;
    } else {
      gpus = GroupMembers(l, rank, t.group);
    }
    const auto key = std::make_tuple(static_cast<int>(c), static_cast<int>(t.group), gpus.front() * 100000 + gpus.back(), t.bytes);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    return cache[key] = comm.Estimate(c, gpus, t.bytes).time_s;
  };
  // Longest path: finish(v) = duration(v) + max over predecessors; walk in topological order.
  std::vector<double> finish(off.back(), 0);
  std::vector<size_t> pred(off.back(), SIZE_MAX);
  auto locate = [&](size_t v) {
    size_t s = 0;
    while (off[s + 1] <= v) ++s;
    return std::make_pair(s, v - off[s]);
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const size_t v = *it;
    const auto [s, t] = locate(v);
    finish[v] += duration(s, program.stages[s].tasks[t]);
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const size_t w = boost::target(*e, g);
      if (finish[v] > finish[w]) {
        finish[w] = finish[v];
        pred[w] = v;
      }
    }
  }
  CriticalPath cp;
  size_t v = 0;
  for (size_t i = 0; i < finish.size(); ++i) {
    if (finish[i] > finish[v]) v = i;
  }
  cp.length_s = finish.empty() ? 0 : finish[v];
  while (v != SIZE_MAX && !finish.empty()) {
    const auto [s, t] = locate(v);
    const TaskSpec& task = program.stages[s].tasks[t];
    cp.by_category_s[static_cast<int>(task.category)] += duration(s, task);
    ++cp.tasks;
    v = pred[v];
  }
  return cp;
}

}  // namespace shardsim
