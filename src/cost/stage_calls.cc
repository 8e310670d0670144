#include "src/cost/stage_calls.h"

#include <map>
#include <tuple>

namespace shardsim {

namespace {

// Every task one iteration of `stage` issues, in the schedule's order: each pass's (for the
// micro-batch it runs), its deferred buckets, then the tail's.
template <typename Fn>
void ForEachStageTask(const Layout& l, const IterationPlan& plan, const StagePlan& stage, Fn&& fn) {
  const std::vector<int32_t> last_mb = LastGradientMicrobatch(l, stage.order);
  for (const PipelineStep& s : stage.order) {
    const PassPlan& p = plan.PassFor(stage, s, s.mb == last_mb[s.chunk]);
    for (const TaskSpec& t : p.tasks) fn(p, t);
    for (const auto& [t, producer] : p.deferred) fn(p, t);
  }
  for (const TaskSpec& t : stage.tail.tasks) fn(stage.tail, t);
}

}  // namespace

double StageHostTransferBytes(const Layout& l, const IterationPlan& plan, const StagePlan& stage) {
  double bytes = 0;
  ForEachStageTask(l, plan, stage, [&](const PassPlan&, const TaskSpec& t) {
    if (t.kind == TaskKind::kHostTransfer) bytes += t.bytes;
  });
  return bytes;
}

std::vector<StageCall> StageCalls(const Layout& l, const IterationPlan& plan, const StagePlan& stage) {
  using Key = std::tuple<std::string, int, int, int, double, int32_t>;
  std::map<Key, size_t> index;
  std::vector<StageCall> out;
  auto count = [&](const PassPlan& p, const TaskSpec& t) {
    if (t.kind != TaskKind::kCollective && t.kind != TaskKind::kSend) return;
    const bool send = t.kind == TaskKind::kSend;
    StageCall c{p.names[t.name], t.kind, send ? Collective::kSendRecv : t.collective, t.group,
                t.bytes, send ? SendPeer(l, stage.stage, p) : -1, 0};
    const Key k{c.name, static_cast<int>(c.kind), static_cast<int>(c.collective),
                static_cast<int>(c.group), c.bytes, c.peer_stage};
    auto [it, fresh] = index.emplace(k, out.size());
    if (fresh) out.push_back(std::move(c));
    ++out[it->second].count;
  };
  ForEachStageTask(l, plan, stage, count);
  return out;
}

}  // namespace shardsim
