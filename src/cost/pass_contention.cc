// See pass_contention.h. A small event loop over one pass list, with the simulator's two
// primitives: the Engine's (integer time, sequence) order and FlowNetwork's max-min sharing.
#include "src/cost/pass_contention.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "src/cost/sm_contention.h"
#include "src/layout/placement.h"
#include "src/sim/engine.h"
#include "src/sim/flow_network.h"
#include "src/util/check.h"

namespace shardsim {
namespace {

bool IsTransfer(const TaskSpec& t) { return t.kind == TaskKind::kSend || t.kind == TaskKind::kCollective; }

// A transfer as the simulator moves it: a latency, then `volume` bytes of progress over links.
struct Flow {
  double latency_s = 0, volume = 0;
  double alone_rate = 0;  // its rate with its links to itself
  std::vector<FlowNetwork::Usage> usage;
};

class PassRun {
 public:
  PassRun(const std::vector<const PassPlan*>& window, size_t target, bool tail, int32_t stage,
          const CollectiveModel& comm, const Layout& l, const std::vector<const std::vector<double>*>& isolated)
      : hw_(comm.cluster().hardware()), sm_contention_(PricesSmContention(hw_)), net_({}) {
    const int64_t rank = RankOf(l, RankCoord{0, 0, 0, stage});
    std::vector<int32_t> carry;  // the previous pass's, in the window's numbering
    int32_t sent = -1;           // the previous pass's pipeline send, in the window's numbering
    for (size_t w = 0; w < window.size(); ++w) {
      const PassPlan& p = *window[w];
      const int32_t base = static_cast<int32_t>(tasks_.size());
      if (w == target) {
        first_ = base;
        end_ = base + static_cast<int32_t>(p.tasks.size());
      }
      for (size_t k = 0; k < p.tasks.size(); ++k) {
        const TaskSpec& t = p.tasks[k];
        const int32_t i = base + static_cast<int32_t>(k);
        tasks_.push_back(&t);
        duration_.push_back((*isolated[w])[k]);
        waiting_.push_back(0);
        dependents_.emplace_back();
        order_[static_cast<int>(t.stream)].push_back(i);
        for (int32_t d = t.dep_begin; d < t.dep_end; ++d) {
          if (p.deps[d] != kEntryDep) {
            Depend(i, base + p.deps[d]);
          } else {
            for (int32_t j : carry) Depend(i, j);  // what the previous pass left blocking (none before the first)
          }
        }
        // The tail's collective over the embedding group meets the other end of the pipeline,
        // which ends only after this stage's last gradient send has arrived there.
        if (tail && w + 1 == window.size() && sent >= 0 && t.kind == TaskKind::kCollective &&
            t.group == GroupKind::kEmbedding) {
          Depend(i, sent);
        }
        Flow f;
        int64_t sms = 0;
        if (t.kind == TaskKind::kSend) {
          const int64_t to = RankOf(l, RankCoord{0, 0, 0, SendPeer(l, stage, p)});
          f = MakeFlow(comm.Plan(Collective::kSendRecv, {rank, to}, t.bytes));
          sms = NcclKernelSms(hw_, l, t, comm.cluster().NodeOf(to) != comm.cluster().NodeOf(rank));
        } else if (t.kind == TaskKind::kCollective) {
          f = MakeFlow(comm.Plan(t.collective, GroupMembers(l, rank, t.group), t.bytes));
          sms = NcclKernelSms(hw_, l, t, false);
        }
        flow_.push_back(std::move(f));
        sms_.push_back(sm_contention_ && t.stream != Stream::kCompute ? sms : 0);
      }
      carry.clear();
      for (int32_t j : p.carry) carry.push_back(base + j);
      sent = p.send >= 0 ? base + p.send : -1;
      if (tail && w + 2 == window.size()) {
        // The tail's entry is also the last compute and every gradient reduction.
        for (int32_t j : p.step_deps) carry.push_back(base + j);
        for (int32_t j = static_cast<int32_t>(p.tasks.size()) - 1; j >= 0; --j) {
          if (p.tasks[j].kind == TaskKind::kCompute) {
            carry.push_back(base + j);
            break;
          }
        }
      }
    }
    n_ = tasks_.size();
    start_.assign(n_, 0);
    finish_.assign(n_, 0);
    shared_.assign(n_, 0);
  }

  // Task i waits for task j.
  void Depend(int32_t i, int32_t j) {
    ++waiting_[i];
    dependents_[j].push_back(i);
  }

  Flow MakeFlow(const CollectivePlan& plan) {
    Flow f;
    f.latency_s = plan.cost.latency_s;
    f.volume = plan.volume;
    f.alone_rate = std::numeric_limits<double>::infinity();
    for (const auto& [link, load] : plan.loads) {
      if (load <= 0) continue;
      auto [it, fresh] = link_.emplace(link, 0);
      if (fresh) it->second = net_.AddLink(link->bandwidth);
      f.usage.push_back({it->second, load});
      f.alone_rate = std::min(f.alone_rate, link->bandwidth / load);
    }
    return f;
  }

  std::vector<double> Run() {
    for (int st = 0; st < kStreamCount; ++st) TryStart(st);
    Event ev;
    std::vector<int32_t> changed;
    while (engine_.Next(&ev)) {
      const int32_t i = static_cast<int32_t>(ev.target);
      switch (ev.kind) {
        case kDone:
          // A compute task whose rate NCCL's SMs changed since this event was scheduled.
          if (sm_contention_ && tasks_[i]->kind == TaskKind::kCompute) {
            if (i != compute_ || ev.tag != compute_version_) break;
            compute_ = -1;
          }
          Complete(i);
          break;
        case kLatency: {
          const Flow& f = flow_[i];
          if (f.usage.empty() || f.volume <= 0) {
            Complete(i);
            break;
          }
          AddCoflow(f, i);
          Reschedule(&changed);
          break;
        }
        case kFlow: {
          const int32_t c = static_cast<int32_t>(ev.tag >> 32);
          if (!net_.Active(c) || (net_.Version(c) & 0xffffffffu) != (ev.tag & 0xffffffffu)) break;
          const int32_t owner = task_of_coflow_[c];
          net_.Remove(c, engine_.now());
          Reschedule(&changed);
          Complete(owner);
          break;
        }
      }
    }
    CHECK(done_.size() == n_) << "a pass list's tasks never all ran";
    std::vector<double> out(duration_.begin() + first_, duration_.begin() + end_);
    for (int32_t i = first_; i < end_; ++i) {
      if (shared_[i]) out[i - first_] = std::max(duration_[i], ToSeconds(finish_[i] - start_[i]));
    }
    return out;
  }

 private:
  enum Kind : uint32_t { kDone, kLatency, kFlow };

  void TryStart(int st) {
    const std::vector<int32_t>& order = order_[st];
    if (busy_[st] || next_[st] >= order.size()) return;
    const int32_t i = order[next_[st]];
    if (waiting_[i] > 0) return;
    busy_[st] = true;
    start_[i] = engine_.now();
    if (IsTransfer(*tasks_[i])) {
      Hold(sms_[i]);
      engine_.Schedule(engine_.now() + ToSimTime(flow_[i].latency_s), kLatency, static_cast<uint32_t>(i));
    } else if (sm_contention_ && tasks_[i]->kind == TaskKind::kCompute) {
      compute_ = i;
      compute_left_s_ = duration_[i];
      compute_since_ = engine_.now();
      ScheduleCompute();
    } else {
      engine_.Schedule(engine_.now() + ToSimTime(duration_[i]), kDone, static_cast<uint32_t>(i));
    }
  }

  // The compute task's end at its rate beside NCCL's kernels (sm_contention.h).
  void ScheduleCompute() {
    const double rate = ComputeRateBesideNccl(hw_.gpu, held_sms_);
    if (rate < 1) shared_[compute_] = 1;
    engine_.Schedule(engine_.now() + ToSimTime(compute_left_s_ / rate), kDone, static_cast<uint32_t>(compute_),
                     ++compute_version_);
  }

  // NCCL's kernels take (delta > 0) or give back SMs: the running compute task's rate changes.
  void Hold(int64_t delta) {
    if (delta == 0) return;
    const SimTime now = engine_.now();
    if (compute_ >= 0) {
      compute_left_s_ = std::max(0.0, compute_left_s_ - ToSeconds(now - compute_since_) * ComputeRateBesideNccl(hw_.gpu, held_sms_));
      compute_since_ = now;
      shared_[compute_] = 1;
    }
    held_sms_ += delta;
    if (compute_ >= 0) ScheduleCompute();
  }

  void Complete(int32_t i) {
    finish_[i] = engine_.now();
    done_.push_back(i);
    if (IsTransfer(*tasks_[i])) Hold(-sms_[i]);
    const int st = static_cast<int>(tasks_[i]->stream);
    busy_[st] = false;
    ++next_[st];
    uint32_t streams = 1u << st;
    for (int32_t d : dependents_[i]) {
      if (--waiting_[d] == 0) streams |= 1u << static_cast<int>(tasks_[d]->stream);
    }
    for (int s = 0; s < kStreamCount; ++s) {
      if (streams >> s & 1u) TryStart(s);
    }
  }

  // Task i's coflow.
  void AddCoflow(const Flow& f, int32_t i) {
    const int32_t c = net_.Add(f.usage, f.volume, engine_.now());
    task_of_coflow_.resize(std::max<size_t>(task_of_coflow_.size(), c + 1), -1);
    task_of_coflow_[c] = i;
  }

  // New finish events for the coflows whose rate changed; a task's coflow slowed below its
  // rate alone marks it as sharing.
  void Reschedule(std::vector<int32_t>* changed) {
    net_.TakeChanged(changed);
    for (int32_t c : *changed) {
      const int32_t i = task_of_coflow_[c];
      if (net_.Rate(c) < flow_[i].alone_rate * (1 - 1e-12)) shared_[i] = 1;
      const uint64_t tag = static_cast<uint64_t>(c) << 32 | (net_.Version(c) & 0xffffffffu);
      engine_.Schedule(net_.FinishTime(c), kFlow, 0, tag);
    }
  }

  const HardwareSpec& hw_;
  const bool sm_contention_;
  std::vector<int64_t> sms_;  // per task: the SMs its NCCL kernel holds while it runs
  int64_t held_sms_ = 0;
  int32_t compute_ = -1;  // the compute task running, its work left at full rate since when
  double compute_left_s_ = 0;
  SimTime compute_since_ = 0;
  uint64_t compute_version_ = 0;
  std::vector<const TaskSpec*> tasks_;
  std::vector<double> duration_;  // alone
  size_t n_ = 0;
  int32_t first_ = 0, end_ = 0;  // the target pass's tasks
  Engine engine_;
  FlowNetwork net_;
  std::map<const ClusterLink*, int32_t> link_;
  std::vector<Flow> flow_;
  std::vector<int32_t> task_of_coflow_;
  std::vector<int32_t> waiting_;
  std::vector<std::vector<int32_t>> dependents_;
  std::array<std::vector<int32_t>, kStreamCount> order_;
  std::array<size_t, kStreamCount> next_{};
  std::array<bool, kStreamCount> busy_{};
  std::vector<SimTime> start_, finish_;
  std::vector<char> shared_;
  std::vector<int32_t> done_;
};

}  // namespace

std::vector<double> ContendedDurations(const std::vector<const PassPlan*>& window, size_t target, bool tail,
                                       int32_t stage, const CollectiveModel& comm, const Layout& l,
                                       const std::vector<const std::vector<double>*>& isolated) {
  CHECK(target < window.size() && window.size() == isolated.size()) << "a window of passes and their durations";
  // Transfers on one stream run one at a time: no contention without two streams' transfers,
  // or, where NCCL's SMs are priced, without one beside the compute stream.
  uint32_t streams = 0;
  for (const PassPlan* p : window) {
    for (const TaskSpec& t : p->tasks) {
      if (IsTransfer(t)) streams |= 1u << static_cast<int>(t.stream);
    }
  }
  const uint32_t beside_compute = streams & ~(1u << static_cast<int>(Stream::kCompute));
  const bool sms = beside_compute != 0 && PricesSmContention(comm.cluster().hardware());
  if ((streams & (streams - 1)) == 0 && !sms) return *isolated[target];
  return PassRun(window, target, tail, stage, comm, l, isolated).Run();
}

}  // namespace shardsim
