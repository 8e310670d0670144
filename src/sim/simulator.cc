// See simulator.h.
#include "src/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <sstream>
#include <unordered_map>

#include "src/cost/estimate.h"
#include "src/cost/ops.h"
#include "src/cost/sm_contention.h"
#include "src/layout/placement.h"
#include "src/sim/engine.h"
#include "src/sim/flow_network.h"
#include "src/util/atomic_file.h"
#include "src/util/check.h"
#include "src/util/units.h"

namespace shardsim {
namespace {

enum EventKind : uint32_t { kTaskDone, kLatencyDone, kFlowDone };

constexpr int kGroupKinds = kGroupKindCount;

// The experts' TP group exists apart from the TP group only where the layout sets etp.
bool GroupUsed(const Layout& l, GroupKind g) { return g != GroupKind::kEtp || l.own_expert_tp(); }

constexpr SimTime kNever = -1;

// What the runner keeps per task of each simulated rank, in 16 bytes (a full simulation keeps
// some 60 M of them): when it finished, and before it starts the count of its unfinished
// dependencies, then its start time (a task starts only once the count is 0, and nothing
// counts down after that).
struct TaskState {
  SimTime finished = kNever;
  SimTime start_or_wait = -2;  // -2 - unfinished dependencies, then the start time (>= 0)

  int32_t waiting() const { return start_or_wait >= 0 ? 0 : static_cast<int32_t>(-2 - start_or_wait); }
  SimTime started() const { return start_or_wait >= 0 ? start_or_wait : kNever; }
  void set_waiting(int32_t n) { start_or_wait = -2 - static_cast<SimTime>(n); }
  void set_started(SimTime t) { start_or_wait = t; }
  // One dependency finished; returns how many remain.
  int32_t DependencyDone() { return static_cast<int32_t>(-2 - ++start_or_wait); }
};

struct RankState {
  int64_t rank = 0;
  int32_t stage = 0;
  // Its task states in Runner::task_states_, which holds each stage's ranks task-major: task
  // t of every rank of the stage, then task t + 1. The ranks of a stage run the same task at
  // about the same time, so they touch the same cache lines (a full simulation keeps some
  // 60 M task states, far more than the caches).
  TaskState* task = nullptr;  // its task 0
  size_t stride = 1;          // the stage's simulated ranks
  TaskState& At(int32_t t) { return task[static_cast<size_t>(t) * stride]; }
  const TaskState& At(int32_t t) const { return task[static_cast<size_t>(t) * stride]; }
  int32_t next[kStreamCount] = {};  // position in the stage's stream order
  bool busy[kStreamCount] = {};
  SimTime compute_free = 0;  // when the compute stream last went idle
  // When the compute stream's current task was issued: its start, or for a collective run on
  // the compute stream (HardwareSpec: overlaps_communication false) its arrival, so the wait
  // for the group's other members is charged to the collective too.
  SimTime compute_issued = 0;
  double activations = 0, peak_activations = 0;
  double breakdown[kCategoryCount] = {};
  // NCCL's kernels beside the compute stream (src/cost/sm_contention.h): the SMs they hold now,
  // and the compute task running (-1 none) with its work left at full rate as of
  // `compute_since`; its completion event carries `compute_version` and an older one is stale.
  int64_t comm_sms = 0;
  int32_t compute_task = -1;
  SimTime compute_since = 0;
  double compute_left_s = 0;
  uint32_t compute_version = 0;
  double contention_s = 0;  // compute time added by NCCL's SMs
  SimTime last_end = 0;
  int32_t last_task = -1;  // the task that ended last
  int64_t group_seq[kGroupKinds] = {};
  int64_t group_leader[kGroupKinds] = {};
  int32_t group_needed[kGroupKinds] = {};  // simulated members of each group
  std::vector<int64_t> group_members[kGroupKinds];
  std::vector<int32_t> plan_of_class;  // the plan of each of its stage's transfer classes
  // As a group's leader: its collectives waiting for members, (sequence number, transfer).
  std::vector<std::pair<int64_t, int32_t>> pending[kGroupKinds];
};

// The transfers of one stage's program, by what their plan depends on: a send by its
// destination stage and bytes, a collective by its kind, group and bytes. Each rank prices
// every class once (PlanAll); a task finds its plan through its class.
struct TransferClass {
  TaskKind kind = TaskKind::kSend;
  Collective collective = Collective::kSendRecv;
  GroupKind group = GroupKind::kTp;
  int32_t peer_stage = -1;
  double bytes = 0;
  bool operator<(const TransferClass& o) const {
    return std::tie(kind, collective, group, peer_stage, bytes) <
           std::tie(o.kind, o.collective, o.group, o.peer_stage, o.bytes);
  }
};
struct StageClasses {
  std::vector<TransferClass> classes;  // in order of first use in the program
  std::vector<int32_t> of_task;        // per task: its class, -1 for no transfer
  std::vector<int8_t> streams;         // the streams the program uses
};

// A collective or send in flight: its participants, then latency, then the coflow.
struct Transfer {
  std::vector<std::pair<int32_t, int32_t>> parts;  // (state index, task)
  int32_t plan = -1;
  int32_t coflow = -1;
};

struct CachedPlan {
  double latency_s = 0;
  double volume = 0;
  std::vector<FlowNetwork::Usage> usage;
  int64_t sms = 0;  // the SMs its NCCL kernel holds while it runs (sm_contention.h)
};

// A link no other plan loads binds only this plan's transfers, and all of them alike (each
// instance loads it with the same weight), so of a plan's private links only the tightest
// matters: they are replaced by one link of capacity min(capacity / weight) at weight 1. The
// max-min fair rates are unchanged, with far fewer links to share.
struct UsageLess {
  bool operator()(const std::vector<FlowNetwork::Usage>& a, const std::vector<FlowNetwork::Usage>& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [](const FlowNetwork::Usage& x, const FlowNetwork::Usage& y) {
                                          return x.link != y.link ? x.link < y.link : x.weight < y.weight;
                                        });
  }
};

class Runner {
 public:
  Runner(const ModelSpec& m, const Cluster& cluster, const Layout& l,
         const IterationProgram& program, const SimOptions& options)
      : m_(m), cluster_(cluster), l_(l), prog_(program), options_(options), own_comm_(cluster),
        comm_(options.collectives ? *options.collectives : own_comm_),
        network_({}) {}

  StatusOr<SimResult> Run();

 private:
  void InitRanks();
  // Each stage's transfer classes and used streams (StageClasses).
  void ClassifyStages();
  // Prices every transfer the simulated ranks will run, then reduces each plan's links to those
  // another plan also loads plus one link standing for the rest (PrivateBound).
  void PlanAll();
  // Symmetric mode on nodes whose GPUs share NICs: adds to each plan the load its unsimulated
  // lockstep copies put on its links.
  void AddLockstepCopies();
  int32_t LinkIndex(const ClusterLink* link);
  // Starts the first task of each stream in `streams` (a bit per stream) that is free and
  // whose dependencies are done, in stream order.
  void TryStart(int32_t s, uint32_t streams = ~0u);
  void Start(int32_t s, int32_t task);
  void Arrive(int32_t s, int32_t task);
  void Launch(int32_t transfer_id);
  void Complete(int32_t s, int32_t task);
  // NCCL's kernels on rank `s` start (delta > 0) or end holding `delta` SMs: the running
  // compute task's rate changes and its completion moves.
  void HoldSms(int32_t s, int64_t delta);
  void ScheduleCompute(int32_t s);
  // The SMs task `task` of rank r holds while it runs: its plan's (PlanAll).
  int64_t SmsOf(const RankState& r, int32_t task) const {
    return plans_[r.plan_of_class[stage_classes_[r.stage].of_task[task]]].sms;
  }
  struct Binding {
    int32_t task = -1;
    bool remote = false;
    SimTime finished = kNever;
    SimTime send_started = kNever;
  };
  Binding BindingOf(const RankState& r, int32_t task) const;
  void ChargeWaiting(RankState& r, int32_t task, SimTime from, SimTime to, int depth);
  void ChargeRunning(RankState& r, int32_t task, SimTime from, SimTime to, int depth);
  // Plans are cached by (kind: 0 send / 1 collective, group kind, collective, first rank,
  // second rank, bytes): a send by its two ranks, a collective by its group's leader.
  using PlanKey = std::tuple<int, int, int, int64_t, int64_t, double>;
  int32_t PlanFor(Collective c, const std::vector<int64_t>& gpus, double bytes, const PlanKey& key);
  int32_t NewTransfer();
  Status Deadlock() const;
  int64_t RankAtStage(int64_t rank, int32_t stage) const {
    RankCoord c = CoordOf(l_, rank);
    c.pp = stage;
    return RankOf(l_, c);
  }
  int64_t RankAtStage(const RankState& r, int32_t stage) const { return RankAtStage(r.rank, stage); }

  const ModelSpec& m_;
  const Cluster& cluster_;
  const Layout& l_;
  const IterationProgram& prog_;
  SimOptions options_;
  CollectiveModel own_comm_;
  const CollectiveModel& comm_;
  std::unordered_map<const ClusterLink*, int32_t> link_index_;
  std::vector<double> network_capacity_;  // per cluster link index: its bandwidth
  bool planned_ = false;
  FlowNetwork network_;
  Engine engine_;
  std::vector<RankState> states_;
  std::vector<TaskState> task_states_;  // every simulated rank's, rank after rank
  std::vector<StageClasses> stage_classes_;
  std::vector<int32_t> state_of_rank_;  // -1 when not simulated
  std::vector<char> traced_;            // per state: its spans and memory samples are kept
  std::vector<Transfer> transfers_;
  std::vector<int32_t> free_transfers_;
  std::vector<int32_t> transfer_of_coflow_;
  std::vector<std::pair<int32_t, int32_t>> parts_;  // a finished transfer's participants
  std::vector<int32_t> changed_;  // coflows whose finish time moved (FlowNetwork::TakeChanged)  // per FlowNetwork coflow id
  // Collectives waiting for members of a group whose leader is not simulated: (group kind,
  // leader) -> (sequence number, transfer); RankState::pending for the others.
  std::map<std::pair<int, int64_t>, std::vector<std::pair<int64_t, int32_t>>> unsimulated_pending_;
  std::map<PlanKey, int32_t> plan_cache_;
  std::vector<CachedPlan> plans_;
  SimResult result_;
  size_t executed_ = 0;
  size_t total_tasks_ = 0;  // of the simulated ranks: what executed_ reaches
  // Full mode's TP peers in lockstep (TpPeersInLockstep): only TP index 0 is run.
  const bool lockstep_ = TpPeersInLockstep(cluster_.hardware(), l_, options_);
  const bool sm_contention_ = PricesSmContention(cluster_.hardware());
};

void Runner::ClassifyStages() {
  stage_classes_.resize(prog_.stages.size());
  for (size_t st = 0; st < prog_.stages.size(); ++st) {
    const StageProgram& p = prog_.stages[st];
    StageClasses& sc = stage_classes_[st];
    std::map<TransferClass, int32_t> index;
    sc.of_task.assign(p.tasks.size(), -1);
    for (size_t i = 0; i < p.tasks.size(); ++i) {
      const TaskSpec& t = p.tasks[i];
      TransferClass c;
      if (t.kind == TaskKind::kSend) {
        c.peer_stage = t.peer_stage;
      } else if (t.kind == TaskKind::kCollective) {
        c.collective = t.collective;
        c.group = t.group;
      } else {
        continue;
      }
      c.kind = t.kind;
      c.bytes = t.bytes;
      auto [it, fresh] = index.emplace(c, static_cast<int32_t>(sc.classes.size()));
      if (fresh) sc.classes.push_back(c);
      sc.of_task[i] = it->second;
    }
    for (int s = 0; s < kStreamCount; ++s) {
      if (!p.stream_order[s].empty()) sc.streams.push_back(static_cast<int8_t>(s));
    }
  }
}

void Runner::InitRanks() {
  const int64_t world = l_.world();
  state_of_rank_.assign(world, -1);
  std::vector<int64_t> ranks;
  if (options_.full) {
    // TP is the innermost dimension: a rank of TP index 0 every l.tp ranks.
    const int64_t step = lockstep_ ? l_.tp : 1;
    for (int64_t r = 0; r < world; r += step) ranks.push_back(r);
  } else {
    for (int32_t s = 0; s < l_.pp; ++s) ranks.push_back(RankOf(l_, RankCoord{0, 0, 0, s}));
  }
  for (size_t i = 0; i < ranks.size(); ++i) state_of_rank_[ranks[i]] = static_cast<int32_t>(i);
  traced_.assign(ranks.size(), options_.trace && options_.trace_ranks.empty() ? 1 : 0);
  for (int64_t r : options_.trace_ranks) {
    CHECK(r >= 0 && r < world && state_of_rank_[r] >= 0) << "traced rank " << r << " is not simulated";
    traced_[state_of_rank_[r]] = 1;
  }
  states_.resize(ranks.size());
  size_t total_tasks = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    states_[i].rank = ranks[i];
    states_[i].stage = static_cast<int32_t>(CoordOf(l_, ranks[i]).pp);
    total_tasks += prog_.stages[states_[i].stage].tasks.size();
  }
  task_states_.assign(total_tasks, TaskState{});
  total_tasks_ = total_tasks;
  std::vector<size_t> stage_ranks(prog_.stages.size(), 0), lane(states_.size());
  for (size_t i = 0; i < states_.size(); ++i) lane[i] = stage_ranks[states_[i].stage]++;
  std::vector<size_t> stage_offset(prog_.stages.size(), 0);
  for (size_t st = 1; st < prog_.stages.size(); ++st) {
    stage_offset[st] = stage_offset[st - 1] + stage_ranks[st - 1] * prog_.stages[st - 1].tasks.size();
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankState& r = states_[i];
    const StageProgram& p = prog_.stages[r.stage];
    r.task = task_states_.data() + stage_offset[r.stage] + lane[i];
    r.stride = stage_ranks[r.stage];
    for (size_t t = 0; t < p.tasks.size(); ++t) {
      r.At(static_cast<int32_t>(t)).set_waiting(p.tasks[t].dep_end - p.tasks[t].dep_begin + (p.tasks[t].remote_task >= 0 ? 1 : 0));
    }
    // Groups: the layout's, the expert-data-parallel and the embedding group (task.h).
    for (int g = 0; g < kGroupKinds; ++g) {
      if (!GroupUsed(l_, static_cast<GroupKind>(g))) continue;
      std::vector<int64_t> members = GroupMembers(l_, r.rank, static_cast<GroupKind>(g));
      r.group_leader[g] = *std::min_element(members.begin(), members.end());
      for (int64_t mbr : members) r.group_needed[g] += state_of_rank_[mbr] >= 0 ? 1 : 0;
      r.group_members[g] = std::move(members);
    }
  }
}

int32_t Runner::NewTransfer() {
  if (!free_transfers_.empty()) {
    const int32_t id = free_transfers_.back();
    free_transfers_.pop_back();
    return id;
  }
  transfers_.emplace_back();
  return static_cast<int32_t>(transfers_.size() - 1);
}

int32_t Runner::LinkIndex(const ClusterLink* link) {
  auto it = link_index_.find(link);
  if (it != link_index_.end()) return it->second;
  const int32_t i = network_.AddLink(link->bandwidth);
  return link_index_[link] = i;
}

void Runner::PlanAll() {
  // Every plan first, so that each link knows which plans load it (in the order the stage's
  // program first uses them).
  for (RankState& r : states_) {
    const std::vector<TransferClass>& classes = stage_classes_[r.stage].classes;
    r.plan_of_class.resize(classes.size());
    for (size_t i = 0; i < classes.size(); ++i) {
      const TransferClass& c = classes[i];
      TaskSpec t;  // what NcclKernelSms reads of the class's tasks
      t.kind = c.kind;
      t.group = c.group;
      t.bytes = c.bytes;
      bool crosses = false;
      if (c.kind == TaskKind::kSend) {
        const int64_t dst = RankAtStage(r, c.peer_stage);
        r.plan_of_class[i] = PlanFor(Collective::kSendRecv, {r.rank, dst}, c.bytes, PlanKey{0, 0, 0, r.rank, dst, c.bytes});
        crosses = cluster_.NodeOf(dst) != cluster_.NodeOf(r.rank);
      } else {
        const int g = static_cast<int>(c.group);
        r.plan_of_class[i] = PlanFor(c.collective, r.group_members[g], c.bytes,
                                     PlanKey{1, g, static_cast<int>(c.collective), r.group_leader[g], 0, c.bytes});
      }
      if (sm_contention_) plans_[r.plan_of_class[i]].sms = NcclKernelSms(cluster_.hardware(), l_, t, crosses);
    }
  }
  if (!options_.full) AddLockstepCopies();
  // Plans that load the same links with the same weights (a group's collectives of any size
  // and kind over one ring) are one load set: what one of them leaves private, they share.
  std::map<std::vector<FlowNetwork::Usage>, int32_t, UsageLess> sets;
  std::vector<int32_t> set_of(plans_.size());
  std::vector<const std::vector<FlowNetwork::Usage>*> set_usage;
  for (size_t i = 0; i < plans_.size(); ++i) {
    auto [it, fresh] = sets.emplace(plans_[i].usage, static_cast<int32_t>(sets.size()));
    set_of[i] = it->second;
    if (fresh) set_usage.push_back(&it->first);
  }
  std::vector<int32_t> sets_on_link(network_capacity_.size(), 0);
  for (const std::vector<FlowNetwork::Usage>* u : set_usage) {
    for (const FlowNetwork::Usage& x : *u) ++sets_on_link[x.link];
  }
  std::vector<int32_t> private_link(set_usage.size(), -2);  // -2: not made yet, -1: none
  for (size_t i = 0; i < plans_.size(); ++i) {
    CachedPlan& p = plans_[i];
    const int32_t set = set_of[i];
    std::vector<FlowNetwork::Usage> shared;
    double bound = std::numeric_limits<double>::infinity();
    for (const FlowNetwork::Usage& u : p.usage) {
      if (sets_on_link[u.link] > 1) {
        shared.push_back(u);
      } else if (u.weight > 0) {
        bound = std::min(bound, network_capacity_[u.link] / u.weight);
      }
    }
    if (private_link[set] == -2) private_link[set] = std::isfinite(bound) ? network_.AddLink(bound) : -1;
    if (private_link[set] >= 0) shared.push_back({private_link[set], 1.0});
    p.usage = std::move(shared);
  }
  planned_ = true;
}

void Runner::AddLockstepCopies() {
  const HardwareSpec& hw = cluster_.hardware();
  const int64_t per_node = hw.node.gpus;
  if (!hw.network || hw.network->nics >= per_node || l_.world() <= per_node) return;
  // Symmetric mode simulates one rank per stage; the other ranks of its node at the same stage
  // run the same transfers at the same time (a homogeneous cluster), and where GPUs share a
  // NIC their copies load the simulated transfer's NIC links too. Each plan's weight on a link
  // becomes its own plus its copies' (the copies' loads on links it does not use are left out:
  // they bind only the copies, which symmetry makes as fast as the simulated one).
  std::vector<char> done(plans_.size(), 0);
  for (RankState& r : states_) {
    const std::vector<TransferClass>& classes = stage_classes_[r.stage].classes;
    const int64_t node = r.rank / per_node;
    for (size_t i = 0; i < classes.size(); ++i) {
      const int32_t id = r.plan_of_class[i];
      if (done[static_cast<size_t>(id)]) continue;
      done[static_cast<size_t>(id)] = 1;
      const TransferClass& c = classes[i];
      std::map<int32_t, double> extra;  // link -> the copies' weight on it
      std::set<int64_t> leaders = {c.kind == TaskKind::kSend ? -1 : r.group_leader[static_cast<int>(c.group)]};
      for (int64_t other = node * per_node; other < (node + 1) * per_node && other < l_.world(); ++other) {
        if (other == r.rank || CoordOf(l_, other).pp != r.stage) continue;
        CollectivePlan copy;
        if (c.kind == TaskKind::kSend) {
          copy = comm_.Plan(Collective::kSendRecv, {other, RankAtStage(other, c.peer_stage)}, c.bytes);
        } else {
          const std::vector<int64_t> members = GroupMembers(l_, other, c.group);
          if (!leaders.insert(*std::min_element(members.begin(), members.end())).second) continue;
          copy = comm_.Plan(c.collective, members, c.bytes);
        }
        for (const auto& [link, load] : copy.loads) {
          auto it = link_index_.find(link);
          if (it != link_index_.end()) extra[it->second] += load;
        }
      }
      if (extra.empty()) continue;
      for (FlowNetwork::Usage& u : plans_[static_cast<size_t>(id)].usage) {
        auto it = extra.find(u.link);
        if (it != extra.end()) u.weight += it->second;
      }
    }
  }
}

int32_t Runner::PlanFor(Collective c, const std::vector<int64_t>& gpus, double bytes, const PlanKey& key) {
  auto it = plan_cache_.find(key);
  if (it != plan_cache_.end()) return it->second;
  CHECK(!planned_) << "a transfer no task announced";
  const CollectivePlan plan = comm_.Plan(c, gpus, bytes);
  CachedPlan cp;
  cp.latency_s = plan.cost.latency_s;
  cp.volume = plan.volume;
  for (const auto& [link, load] : plan.loads) {
    const int32_t i = LinkIndex(link);
    if (network_capacity_.size() <= static_cast<size_t>(i)) network_capacity_.resize(i + 1);
    network_capacity_[i] = link->bandwidth;
    cp.usage.push_back({i, load});
  }
  plans_.push_back(std::move(cp));
  const int32_t id = static_cast<int32_t>(plans_.size() - 1);
  plan_cache_[key] = id;
  return id;
}

void Runner::TryStart(int32_t s, uint32_t streams) {
  RankState& r = states_[s];
  const StageProgram& p = prog_.stages[r.stage];
  for (const int8_t st : stage_classes_[r.stage].streams) {
    if (!(streams >> st & 1u)) continue;
    const std::vector<int32_t>& order = p.stream_order[st];
    if (r.busy[st] || r.next[st] >= static_cast<int32_t>(order.size())) continue;
    const int32_t task = order[r.next[st]];
    if (r.At(task).waiting() == 0) Start(s, task);
  }
}

Runner::Binding Runner::BindingOf(const RankState& r, int32_t task) const {
  // The dependency that finished last: a local dependency, the stream predecessor, or the
  // remote send this task receives.
  const StageProgram& p = prog_.stages[r.stage];
  const TaskSpec& t = p.tasks[task];
  Binding b;
  for (int32_t d = t.dep_begin; d < t.dep_end; ++d) {
    if (r.At(p.deps[d]).finished > b.finished) b = {p.deps[d], false, r.At(p.deps[d]).finished, kNever};
  }
  const std::vector<int32_t>& order = p.stream_order[static_cast<int>(t.stream)];
  const auto pos = std::lower_bound(order.begin(), order.end(), task);
  if (pos != order.begin() && *pos == task) {
    const int32_t prev = *(pos - 1);
    if (r.At(prev).finished > b.finished) b = {prev, false, r.At(prev).finished, kNever};
  }
  if (t.remote_task >= 0) {
    const int32_t sender = state_of_rank_[RankAtStage(r, t.remote_stage)];
    if (sender >= 0 && states_[sender].At(t.remote_task).finished > b.finished) {
      b = {t.remote_task, true, states_[sender].At(t.remote_task).finished,
           states_[sender].At(t.remote_task).started()};
    }
  }
  return b;
}

void Runner::ChargeWaiting(RankState& r, int32_t task, SimTime from, SimTime to, int depth) {
  // [from, to): the compute stream idle while `task` (or the task that waited for it) could
  // not start. Charged along the chain of latest-finishing dependencies.
  if (to <= from) return;
  const Binding b = BindingOf(r, task);
  auto charge = [&](Category c, SimTime a, SimTime z) {
    if (z > a) r.breakdown[static_cast<int>(c)] += ToSeconds(z - a);
  };
  if (b.task < 0 || depth > 32) return charge(Category::kBubble, from, to);
  const SimTime end = std::min(to, std::max(from, b.finished));
  charge(Category::kBubble, end, to);  // after the binding finished: nothing was waited for
  if (b.remote) {
    // Only the time the send was in flight is pipeline communication; before that the
    // previous stage was still computing: bubble.
    const SimTime start = std::min(end, std::max(from, b.send_started));
    charge(Category::kPp, start, end);
    return charge(Category::kBubble, from, start);
  }
  ChargeRunning(r, b.task, from, end, depth + 1);
}

void Runner::ChargeRunning(RankState& r, int32_t task, SimTime from, SimTime to, int depth) {
  // [from, to) ends with `task` running (a transfer, a host step, a collective): its own run
  // is charged to its category, the wait before it to what it waited for.
  if (to <= from) return;
  const TaskSpec& t = prog_.stages[r.stage].tasks[task];
  const SimTime start = std::min(to, std::max(from, r.At(task).started()));
  const Category c = t.stream == Stream::kCompute ? Category::kBubble : t.category;
  r.breakdown[static_cast<int>(c)] += ToSeconds(to - start);
  ChargeWaiting(r, task, from, start, depth + 1);
}

void Runner::Start(int32_t s, int32_t task) {
  RankState& r = states_[s];
  const TaskSpec& t = prog_.stages[r.stage].tasks[task];
  const int st = static_cast<int>(t.stream);
  r.busy[st] = true;
  if (t.stream == Stream::kCompute) {
    if (engine_.now() > r.compute_free) ChargeWaiting(r, task, r.compute_free, engine_.now(), 0);
    r.compute_issued = engine_.now();
  }
  switch (t.kind) {
    case TaskKind::kCompute:
      if (sm_contention_) {
        r.At(task).set_started(engine_.now());
        r.compute_task = task;
        r.compute_left_s = t.duration_s;
        r.compute_since = engine_.now();
        ScheduleCompute(s);
        break;
      }
      [[fallthrough]];
    case TaskKind::kHostCompute:
      r.At(task).set_started(engine_.now());
      engine_.Schedule(engine_.now() + ToSimTime(t.duration_s), kTaskDone, static_cast<uint32_t>(s),
                       static_cast<uint64_t>(task));
      break;
    case TaskKind::kHostTransfer: {
      r.At(task).set_started(engine_.now());
      const Route route = cluster_.RouteToHost(r.rank);
      const double seconds = route.latency_s + t.bytes / route.bottleneck_bandwidth;
      engine_.Schedule(engine_.now() + ToSimTime(seconds), kTaskDone, static_cast<uint32_t>(s),
                       static_cast<uint64_t>(task));
      break;
    }
    case TaskKind::kSend: {
      r.At(task).set_started(engine_.now());
      if (sm_contention_ && t.stream != Stream::kCompute) HoldSms(s, SmsOf(r, task));
      const int32_t id = NewTransfer();
      Transfer& x = transfers_[id];
      x.parts = {{s, task}};
      x.plan = r.plan_of_class[stage_classes_[r.stage].of_task[task]];
      Launch(id);
      break;
    }
    case TaskKind::kCollective:
      if (sm_contention_ && t.stream != Stream::kCompute) HoldSms(s, SmsOf(r, task));
      Arrive(s, task);
      break;
  }
}

void Runner::ScheduleCompute(int32_t s) {
  RankState& r = states_[s];
  const double rate = ComputeRateBesideNccl(cluster_.hardware().gpu, r.comm_sms);
  engine_.Schedule(engine_.now() + ToSimTime(r.compute_left_s / rate), kTaskDone, static_cast<uint32_t>(s),
                   static_cast<uint64_t>(r.compute_version) << 32 | static_cast<uint32_t>(r.compute_task));
}

void Runner::HoldSms(int32_t s, int64_t delta) {
  if (delta == 0) return;
  RankState& r = states_[s];
  const SimTime now = engine_.now();
  if (r.compute_task >= 0) {
    const double rate = ComputeRateBesideNccl(cluster_.hardware().gpu, r.comm_sms);
    r.compute_left_s = std::max(0.0, r.compute_left_s - ToSeconds(now - r.compute_since) * rate);
    r.compute_since = now;
  }
  r.comm_sms += delta;
  CHECK(r.comm_sms >= 0) << "rank " << r.rank << " released SMs it did not hold";
  if (r.compute_task >= 0) {
    ++r.compute_version;
    ScheduleCompute(s);
  }
}

void Runner::Arrive(int32_t s, int32_t task) {
  RankState& r = states_[s];
  const int g = static_cast<int>(prog_.stages[r.stage].tasks[task].group);
  const int64_t seq = r.group_seq[g]++;
  // The group's collectives waiting for members, kept by its leader (simulated in both modes:
  // the lowest rank of a group has the simulated ranks' zero coordinates).
  const int32_t leader = state_of_rank_[r.group_leader[g]];
  std::vector<std::pair<int64_t, int32_t>>& pending =
      leader >= 0 ? states_[leader].pending[g] : unsimulated_pending_[{g, r.group_leader[g]}];
  auto it = std::find_if(pending.begin(), pending.end(), [&](const auto& p) { return p.first == seq; });
  int32_t id;
  if (it == pending.end()) {
    id = NewTransfer();
    Transfer& x = transfers_[id];
    x.parts.clear();
    x.coflow = -1;
    x.plan = r.plan_of_class[stage_classes_[r.stage].of_task[task]];
    pending.emplace_back(seq, id);
    it = pending.end() - 1;
  } else {
    id = it->second;
  }
  Transfer& x = transfers_[id];
  x.parts.emplace_back(s, task);
  if (static_cast<int32_t>(x.parts.size()) == r.group_needed[g]) {
    pending.erase(it);
    for (const auto& [ps, pt] : x.parts) states_[ps].At(pt).set_started(engine_.now());
    Launch(id);
  }
}

void Runner::Launch(int32_t id) {
  Transfer& x = transfers_[id];
  x.coflow = -1;
  engine_.Schedule(engine_.now() + ToSimTime(plans_[x.plan].latency_s), kLatencyDone,
                   static_cast<uint32_t>(id));
}

void Runner::Complete(int32_t s, int32_t task) {
  RankState& r = states_[s];
  const StageProgram& p = prog_.stages[r.stage];
  const TaskSpec& t = p.tasks[task];
  const SimTime now = engine_.now();
  r.At(task).finished = now;
  ++executed_;
  const int st = static_cast<int>(t.stream);
  r.busy[st] = false;
  ++r.next[st];
  if (t.stream == Stream::kCompute) {
    r.breakdown[static_cast<int>(t.category)] += ToSeconds(now - r.compute_issued);
    r.compute_free = now;
  }
  if (sm_contention_) {
    if (task == r.compute_task) {
      r.contention_s += std::max(0.0, ToSeconds(now - r.At(task).started()) - t.duration_s);
      r.compute_task = -1;
    } else if ((t.kind == TaskKind::kSend || t.kind == TaskKind::kCollective) && t.stream != Stream::kCompute) {
      HoldSms(s, -SmsOf(r, task));
    }
  }
  if (now >= r.last_end) {
    r.last_end = now;
    r.last_task = task;
  }
  if (t.memory_delta != 0) {
    r.activations += t.memory_delta;
    CHECK(r.activations > -1.0) << "activations went negative on rank " << r.rank;
    r.peak_activations = std::max(r.peak_activations, r.activations);
    if (traced_[s]) result_.memory_trace.push_back({static_cast<int32_t>(r.rank), now, r.activations});
  }
  if (traced_[s]) {
    TraceSpan span;
    span.rank = static_cast<int32_t>(r.rank);
    span.stage = r.stage;
    span.name = t.name;
    span.microbatch = t.microbatch;
    span.layer = t.layer;
    span.stream = t.stream;
    span.start = r.At(task).started();
    span.end = now;
    span.bytes = t.bytes;
    span.flops = t.flops;
    result_.trace.push_back(span);
  }
  // Only a stream whose first task may have become ready can start one: this task's (its
  // next task is first now) and those of the dependents left with nothing to wait for.
  uint32_t ready = 1u << st;
  for (int32_t dep : p.DependentsOf(task)) {
    if (r.At(dep).DependencyDone() == 0) ready |= 1u << p.stream_of[dep];
  }
  for (const auto& [stage, other] : prog_.remote_dependents[r.stage][task]) {
    const int32_t o = state_of_rank_[RankAtStage(r, stage)];
    if (o < 0) continue;
    if (states_[o].At(other).DependencyDone() == 0) {
      TryStart(o, 1u << static_cast<int>(prog_.stages[stage].tasks[other].stream));
    }
  }
  TryStart(s, ready);
}

Status Runner::Deadlock() const {
  std::ostringstream out;
  int shown = 0;
  for (const RankState& r : states_) {
    const StageProgram& p = prog_.stages[r.stage];
    for (int st = 0; st < kStreamCount && shown < 8; ++st) {
      const std::vector<int32_t>& order = p.stream_order[st];
      if (r.next[st] >= static_cast<int32_t>(order.size())) continue;
      const int32_t task = order[r.next[st]];
      const TaskSpec& t = p.tasks[task];
      out << "\n  rank " << r.rank << " stream " << StreamName(t.stream) << ": '" << p.names[t.name]
          << "' (micro-batch " << t.microbatch << ", layer " << t.layer << ") ";
      if (r.busy[st]) {
        out << "waits for the other members of its " << (t.kind == TaskKind::kCollective ? "group" : "transfer");
      } else {
        out << "waits for " << r.At(task).waiting() << " unfinished dependencies";
      }
      ++shown;
    }
  }
  return Status::Error("simulation deadlock: tasks that can never run remain:" + out.str());
}

StatusOr<SimResult> Runner::Run() {
  ClassifyStages();
  InitRanks();
  PlanAll();
  for (size_t s = 0; s < states_.size(); ++s) TryStart(static_cast<int32_t>(s));
  Event ev;
  const bool progress = static_cast<bool>(options_.progress);  // tested once, not per event
  while (engine_.Next(&ev)) {
    if (progress && (engine_.events_processed() & 0xffff) == 0) {
      options_.progress(static_cast<double>(executed_) / static_cast<double>(std::max<size_t>(total_tasks_, 1)));
    }
    switch (ev.kind) {
      case kTaskDone: {
        // A compute task's event carries its version above the task index: one its rate
        // change superseded is stale.
        const int32_t s = static_cast<int32_t>(ev.target);
        const int32_t task = static_cast<int32_t>(ev.tag & 0xffffffffu);
        if (sm_contention_ && prog_.stages[states_[s].stage].tasks[task].kind == TaskKind::kCompute &&
            (task != states_[s].compute_task || static_cast<uint32_t>(ev.tag >> 32) != states_[s].compute_version)) {
          break;
        }
        Complete(s, task);
        break;
      }
      case kLatencyDone: {
        Transfer& x = transfers_[ev.target];
        const CachedPlan& plan = plans_[x.plan];
        if (plan.usage.empty() || plan.volume <= 0) {
          engine_.Schedule(engine_.now(), kFlowDone, ev.target, ~0ull);
        } else {
          x.coflow = network_.Add(plan.usage, plan.volume, engine_.now());
          if (transfer_of_coflow_.size() <= static_cast<size_t>(x.coflow)) transfer_of_coflow_.resize(x.coflow + 1, -1);
          transfer_of_coflow_[x.coflow] = static_cast<int32_t>(ev.target);
          network_.TakeChanged(&changed_);
          for (int32_t c : changed_) {
            engine_.Schedule(network_.FinishTime(c), kFlowDone, static_cast<uint32_t>(c), network_.Version(c));
          }
        }
        break;
      }
      case kFlowDone: {
        int32_t id;
        if (ev.tag == ~0ull) {
          id = static_cast<int32_t>(ev.target);  // a transfer with nothing to move
        } else {
          const int32_t c = static_cast<int32_t>(ev.target);
          if (!network_.Active(c) || network_.Version(c) != ev.tag) break;  // stale
          id = transfer_of_coflow_[c];
          transfer_of_coflow_[c] = -1;
          network_.Remove(c, engine_.now());
          network_.TakeChanged(&changed_);
          for (int32_t o : changed_) {
            engine_.Schedule(network_.FinishTime(o), kFlowDone, static_cast<uint32_t>(o), network_.Version(o));
          }
        }
        Transfer& x = transfers_[id];
        // The participants move out (the transfer is free for reuse by what they start next);
        // the two buffers trade places to keep their capacity.
        std::vector<std::pair<int32_t, int32_t>>& parts = parts_;
        parts.clear();
        parts.swap(x.parts);
        free_transfers_.push_back(id);
        for (const auto& [s, task] : parts) Complete(s, task);
        break;
      }
    }
  }
  for (const RankState& r : states_) {
    for (int st = 0; st < kStreamCount; ++st) {
      if (r.next[st] < static_cast<int32_t>(prog_.stages[r.stage].stream_order[st].size())) return Deadlock();
    }
  }

  if (options_.progress) options_.progress(1.0);
  // Results.
  SimResult& res = result_;
  res.layout = l_;
  res.full = options_.full;
  SimTime end = 0;
  for (const RankState& r : states_) end = std::max(end, r.last_end);
  res.iteration_time_s = ToSeconds(end);
  res.events = engine_.events_processed();
  const int64_t peers = lockstep_ ? l_.tp : 1;
  res.tasks = executed_ * static_cast<size_t>(peers);
  res.simulated_ranks = static_cast<int64_t>(states_.size());
  const HardwareSpec& hw = cluster_.hardware();
  res.memory_capacity_bytes = hw.gpu.memory_bytes;
  res.usable_memory_bytes = hw.gpu.UsableMemoryBytes();
  double best_busy = -1;
  for (size_t i = 0; i < states_.size(); ++i) {
    const RankState& r = states_[i];
    RankResult rr;
    rr.rank = r.rank;
    rr.stage = r.stage;
    for (int c = 0; c < kCategoryCount; ++c) rr.breakdown_s[c] = r.breakdown[c];
    // After its last compute the rank waits for its last transfers (e.g. the ZeRO parameter
    // all-gather, offloaded optimizer steps), charged along their chain; then for the
    // slowest rank.
    RankState& w = states_[i];
    if (r.last_task >= 0 && r.last_end > r.compute_free) ChargeRunning(w, r.last_task, r.compute_free, r.last_end, 0);
    for (int c = 0; c < kCategoryCount; ++c) rr.breakdown_s[c] = w.breakdown[c];
    rr.breakdown_s[static_cast<int>(Category::kBubble)] += ToSeconds(end - std::max(r.last_end, r.compute_free));
    rr.peak_activations = r.peak_activations;
    rr.sm_contention_s = r.contention_s;
    rr.peak_memory = prog_.stages[r.stage].static_memory;
    rr.peak_memory.activations = r.peak_activations;
    const double busy = rr.breakdown_s[0] + rr.breakdown_s[1] + rr.breakdown_s[static_cast<int>(Category::kOptimizer)];
    if (busy > best_busy + 1e-12) {
      best_busy = busy;
      res.critical = res.ranks.size();
    }
    if (rr.peak_memory.total() > res.peak_memory_bytes) {
      res.peak_memory_bytes = rr.peak_memory.total();
      res.peak_rank = res.ranks.size();
    }
    // The rank, then its TP peers in lockstep (ranks rank + 1 ... rank + tp - 1): the same.
    for (int64_t k = 0; k < peers; ++k) {
      res.ranks.push_back(rr);
      res.ranks.back().rank = r.rank + k;
    }
  }
  // As the estimate's verdict (MemoryFits): within the usable memory, offloaded states within
  // the node's host memory.
  res.fits = MemoryFits(hw, res.ranks[res.peak_rank].peak_memory);
  for (const RankResult& rr : res.ranks) res.fits = res.fits && MemoryFits(hw, rr.peak_memory);
  res.tokens_per_s = static_cast<double>(l_.gbs * m_.seq_len) / res.iteration_time_s;
  res.model_flops = IterationFlops(m_, l_, false);
  res.hardware_flops = IterationFlops(m_, l_, true);
  const double gpus = static_cast<double>(l_.world());
  res.model_tflops_per_gpu = res.model_flops / (res.iteration_time_s * gpus) / 1e12;
  res.hardware_tflops_per_gpu = res.hardware_flops / (res.iteration_time_s * gpus) / 1e12;
  const double peak = hw.gpu.Peak(l_.dtype).value_or(0);
  res.mfu = peak > 0 ? res.model_flops / (res.iteration_time_s * gpus * peak) : 0;
  for (const StageProgram& p : prog_.stages) res.names.push_back(p.names);
  return res;
}

}  // namespace

bool TpPeersInLockstep(const HardwareSpec& hw, const Layout& l, const SimOptions& options) {
  bool traced_tp0 = true;  // every traced rank of TP index 0 (the ones lockstep runs)
  for (int64_t r : options.trace_ranks) traced_tp0 = traced_tp0 && r % l.tp == 0;
  // Experts split otherwise than over TP (etp set) put TP peers in different EP groups.
  return options.full && options.tp_lockstep && (!options.trace || (!options.trace_ranks.empty() && traced_tp0)) && l.tp > 1 && !l.own_expert_tp() && l.tp == hw.node.gpus && hw.network &&
         hw.network->nics == hw.node.gpus && hw.network->topology == NetworkTopology::kRailOptimized;
}

StatusOr<SimResult> RunProgram(const ModelSpec& m, const Cluster& cluster, const Layout& l,
                               const IterationProgram& program, const SimOptions& options) {
  Runner runner(m, cluster, l, program, options);
  return runner.Run();
}

SimulationSize SizeOfSimulation(const IterationProgram& program, const Layout& l, const SimOptions& options,
                                const HardwareSpec* hw) {
  SimulationSize z;
  // Symmetric mode runs one rank per stage; full mode world / pp ranks of every stage, or
  // one per TP group where TP peers run in lockstep.
  const double peers = hw && TpPeersInLockstep(*hw, l, options) ? static_cast<double>(l.tp) : 1.0;
  const double per_stage = options.full ? static_cast<double>(l.world()) / static_cast<double>(l.pp) / peers : 1.0;
  double stage_tasks = 0;
  for (const StageProgram& p : program.stages) stage_tasks += static_cast<double>(p.tasks.size());
  z.ranks = per_stage * static_cast<double>(program.stages.size());
  z.tasks = per_stage * stage_tasks;
  // Each simulated rank keeps the members of each of its groups (InitRanks).
  double group_entries = 0;
  for (int g = 0; g < kGroupKinds; ++g) {
    if (!GroupUsed(l, static_cast<GroupKind>(g))) continue;  // as InitRanks
    group_entries += static_cast<double>(GroupMembers(l, 0, static_cast<GroupKind>(g)).size());
  }
  // The traced ranks' tasks: every simulated rank's, or those of the ranks listed (a rank
  // of stage s runs stage s's program).
  if (options.trace) {
    if (options.trace_ranks.empty()) {
      z.traced_tasks = z.tasks;
    } else {
      for (int64_t r : options.trace_ranks) {
        const int64_t s = CoordOf(l, r).pp;
        if (s >= 0 && s < static_cast<int64_t>(program.stages.size())) {
          z.traced_tasks += static_cast<double>(program.stages[static_cast<size_t>(s)].tasks.size());
        }
      }
    }
  }
  z.bytes = (z.tasks - z.traced_tasks) * kSimBytesPerTask + z.traced_tasks * kSimBytesPerTracedTask +
            z.ranks * group_entries * static_cast<double>(sizeof(int64_t));
  z.trace_bytes = z.traced_tasks * kTraceBytesPerTask;
  return z;
}

StatusOr<SimResult> Simulate(const ModelSpec& m, const Cluster& cluster, const Layout& l,
                             const SimOptions& options) {
  if (l.world() > cluster.gpu_count()) {
    const int64_t total = cluster.hardware().total_gpus();
    return Status::Error("layout needs " + std::to_string(l.world()) + " GPUs but the cluster '" +
                         cluster.hardware().name + "' has " + std::to_string(total) +
                         (cluster.gpu_count() < total ? " (" + std::to_string(cluster.gpu_count()) + " of them built)" : ""));
  }
  for (int64_t r : options.trace_ranks) {
    if (!options.full) return Status::Error("traced ranks are chosen in full mode only (symmetric mode runs one rank per stage, and traces each)");
    if (r < 0 || r >= l.world()) {
      return Status::Error("traced rank " + std::to_string(r) + " is outside the job's " + std::to_string(l.world()) + " ranks");
    }
  }
  const IterationProgram program = BuildIteration(m, cluster.hardware(), l);
  // What was asked costs what it costs before any of it is allocated: a full simulation of
  // 800k GPUs used to end in bad_alloc after 6.4 GB, and a full trace of 1,024 GPUs is 8.7 GB.
  const SimulationSize size = SizeOfSimulation(program, l, options, &cluster.hardware());
  if (std::getenv("SHARDSIM_PROFILE")) {  // the figures behind kSimBytesPerTask (docs/performance.md)
    std::fprintf(stderr, "simulation size: %.0f ranks, %.0f tasks, about %.3f GiB, trace about %.3f GiB\n", size.ranks,
                 size.tasks, size.bytes / kGiB, size.trace_bytes / kGiB);
  }
  if (size.bytes > kMaxSimulationBytes) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "simulating %.0f ranks of %.3g tasks in all%s would hold about %.1f GiB, more than the %.0f GiB "
                  "bound; %s",
                  size.ranks, size.tasks, options.trace ? ", with their trace," : "", size.bytes / kGiB,
                  kMaxSimulationBytes / kGiB,
                  options.full ? (options.trace ? "trace fewer ranks (--trace-ranks; stages, one per pipeline stage, by "
                                                  "default), or without --full the simulator runs one rank per pipeline "
                                                  "stage, which gives the same iteration time for this symmetric layout"
                                                : "without --full the simulator runs one rank per pipeline stage, which gives the "
                                                  "same iteration time for this symmetric layout")
                               : "the layout is too large to simulate");
    return Status::Error(msg);
  }
  if (size.trace_bytes > kMaxTraceBytes) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "the trace of %.0f ranks would be about %.1f GiB, more than the %.0f GiB a trace may be (shardsim "
                  "reads none larger, and Perfetto's UI opens about 2 GB); trace fewer ranks (--trace-ranks), "
                  "without --full (one rank per stage), or a smaller layout",
                  options.trace_ranks.empty() ? size.ranks : static_cast<double>(options.trace_ranks.size()),
                  size.trace_bytes / kGiB, static_cast<double>(kMaxTraceBytes) / kGiB);
    return Status::Error(msg);
  }
  if (options.check_acyclic) SHARDSIM_RETURN_IF_ERROR(CheckAcyclic(program));
  SHARDSIM_ASSIGN_OR_RETURN(SimResult result, RunProgram(m, cluster, l, program, options));
  if (options.critical_path) result.critical_path = FindCriticalPath(program, cluster, l);
  return result;
}

}  // namespace shardsim
