#include "src/cost/stage_calls.h"

#include <map>
#include <tuple>

namespace shardsim {

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
  const std::vector<int32_t> last_mb = LastGradientMicrobatch(l, stage.order);
  for (const PipelineStep& s : stage.order) {
    const PassPlan& p = plan.PassFor(stage, s, s.mb == last_mb[s.chunk]);
    for (const TaskSpec& t : p.tasks) count(p, t);
    for (const auto& [t, producer] : p.deferred) count(p, t);
  }
  for (const TaskSpec& t : stage.tail.tasks) count(stage.tail, t);
  return out;
}

}  // namespace shardsim
