// The durations of one pass list's tasks when its transfers share the cluster's links with the
// other transfers of the same rank: what the estimate prices a task at (estimate.h). A ZeRO
// gather or reduce-scatter on the DP stream and ring attention's exchange on the CP stream
// that cross one NIC at the same time each take longer than alone; so does a pipeline send
// still on its way when the next pass's transfers start, and a gradient reduce-scatter still
// running when the next pass sends (the reduce-scatter's own delay holds back the send that
// waits for it); and the compute beside NCCL's kernels, which hold SMs (sm_contention.h). The
// pass runs after the two passes the stage ran before it and before the one it runs after it
// (a window of up to four), on one rank of its stage, from time 0 with every stream
// free: each stream in issue order, each task once its dependencies are done, every transfer
// a latency and then its bytes as a coflow over the links its collective's algorithm loads,
// max-min fair with whatever else is moving (the simulator's Engine and FlowNetwork,
// src/sim/simulator.h, on the same CollectivePlan loads). Left out, which the simulation alone
// sees: the ranks of other stages (a send into this rank while it reduces gradients), the
// exact offsets between passes (a pass that waits for its input until every stream is free is
// taken to start fresh, and what ran before it to have ended; one that does not, to follow the
// last pass at once), and where GPUs share a NIC, the copies of the transfer
// on the node's other GPUs.
#pragma once

#include <cstdint>
#include <vector>

#include "src/cost/collective.h"
#include "src/cost/layer_plan.h"

namespace shardsim {

// Every task's duration (finish - start) in pass `window[target]` when the window's passes run
// one after another on `stage`: each pass's entry waits for the previous one's carry (for the
// stage's tail, `tail`, the window's last, also its last compute and gradient reductions), its
// received send already there. Compute and host tasks keep their own duration; a transfer that
// never shares a link keeps its isolated cost exactly. `isolated[w]`: each task's duration
// alone in pass w (the estimate's TaskDuration).
std::vector<double> ContendedDurations(const std::vector<const PassPlan*>& window, size_t target, bool tail,
                                       int32_t stage, const CollectiveModel& comm, const Layout& l,
                                       const std::vector<const std::vector<double>*>& isolated);

}  // namespace shardsim
