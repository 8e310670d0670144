// The iteration's task DAG as a Boost.Graph graph: one vertex per (stage, task) of the
// per-stage programs, edges for dependencies (local and cross-stage) and for stream order.
// Used to reject a cyclic program before simulating it, and for the critical path: the
// longest dependency chain with every task at its isolated duration (no contention), which
// says what bounds the iteration when nothing competes for links.
#pragma once

#include <string>

#include "src/hardware/cluster.h"
#include "src/sim/program.h"
#include "src/util/status.h"

namespace shardsim {

struct CriticalPath {
  double length_s = 0;
  double by_category_s[kCategoryCount] = {};  // time on the path by kind of task
  size_t tasks = 0;                           // tasks on the path
};

// Error naming a task on a cycle, if the program has one.
Status CheckAcyclic(const IterationProgram& program);

// Longest path through the DAG of the representative ranks (one per stage, tp = cp = dp = 0),
// collectives and sends at their isolated cost on `cluster`.
CriticalPath FindCriticalPath(const IterationProgram& program, const Cluster& cluster,
                              const Layout& l);

}  // namespace shardsim
