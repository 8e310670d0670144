// See plan_eval.h. A pass's tasks form a max-plus linear system: each task starts at the latest
// of its stream's free time and its dependencies' finishes, and ends its duration later. So
// every finish is max_j (input_j + c_j) over the pass's inputs, and a pass list compiles once per
// stage into that map (PassMap), applied to each of its instances in O(inputs x outputs).
#include "src/cost/plan_eval.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "src/cost/pass_contention.h"
#include "src/layout/placement.h"
#include "src/util/check.h"

namespace shardsim {

double TaskDuration(const TaskSpec& t, int32_t stage, const CollectiveModel& comm, const Layout& l) {
  const int64_t rank = RankOf(l, RankCoord{0, 0, 0, stage});
  switch (t.kind) {
    case TaskKind::kCompute:
    case TaskKind::kHostCompute: return t.duration_s;
    case TaskKind::kHostTransfer: {
      const Route r = comm.cluster().RouteToHost(rank);
      return r.latency_s + t.bytes / r.bottleneck_bandwidth;
    }
    case TaskKind::kSend:
      return comm.Estimate(Collective::kSendRecv, {rank, RankOf(l, RankCoord{0, 0, 0, t.peer_stage})}, t.bytes)
          .time_s;
    case TaskKind::kCollective:
      return comm.Estimate(t.collective, GroupMembers(l, rank, t.group), t.bytes).time_s;
  }
  return 0;
}

namespace {

constexpr double kNone = -std::numeric_limits<double>::infinity();
// Inputs of a pass: each stream's free time, the previous pass's blocking send (the entry),
// the send its receive waits for.
constexpr int kCarryIn = kStreamCount, kRemoteIn = kStreamCount + 1, kInputs = kStreamCount + 2;
// Outputs: each stream's free time, the pass's send, its latest gradient reduction, its last
// compute, what the next pass waits for.
constexpr int kSendOut = kStreamCount, kStepOut = kStreamCount + 1, kComputeOut = kStreamCount + 2;
constexpr int kCarryOut = kStreamCount + 3;
constexpr int kOutputs = kStreamCount + 4;
constexpr int kCompute = static_cast<int>(Stream::kCompute);

using Vec = std::array<double, kInputs>;

Vec Unit(int j) {
  Vec v;
  v.fill(kNone);
  v[j] = 0;
  return v;
}
void MaxInto(Vec& a, const Vec& b) {
  for (int j = 0; j < kInputs; ++j) a[j] = std::max(a[j], b[j]);
}

// The passes a pass ran right after, whose transfers may still be running when it starts:
// the last one and the one before it (nullptr: none; both none when it starts fresh).
struct Before {
  const PassPlan* two = nullptr;
  const PassPlan* one = nullptr;
};

// Task durations on one stage, collective prices cached by what decides them; with
// contention, each pass list's transfers as they share links within the pass
// (pass_contention.h).
class Durations {
 public:
  Durations(const CollectiveModel& comm, const Layout& l, int32_t stage, Contention contention)
      : comm_(comm), l_(l), stage_(stage), contention_(contention) {}
  // Task t of pass list p (its send's peer is p's, SendPeer), alone.
  double Of(const PassPlan& p, const TaskSpec& t) {
    if (t.kind == TaskKind::kCompute || t.kind == TaskKind::kHostCompute) return t.duration_s;
    TaskSpec task = t;
    if (t.kind == TaskKind::kSend) task.peer_stage = SendPeer(l_, stage_, p);
    const Key key{static_cast<int>(t.kind), static_cast<int>(t.collective), static_cast<int>(t.group),
                  task.peer_stage, t.bytes};
    for (const auto& [k, v] : cache_) {
      if (k == key) return v;
    }
    const double d = TaskDuration(task, stage_, comm_, l_);
    cache_.emplace_back(key, d);
    return d;
  }
  // Every task of p, in order, alone.
  const std::vector<double>& Of(const PassPlan& p) {
    for (const auto& [q, v] : alone_) {
      if (q == &p) return v;
    }
    std::vector<double> d(p.tasks.size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = Of(p, p.tasks[i]);
    alone_.emplace_back(&p, std::move(d));
    return alone_.back().second;
  }
  // Every task of p, in order, when p follows `before` (the passes it ran after whose
  // transfers may still run; none: p starts fresh); `tail`: p is the stage's tail.
  const std::vector<double>& Of(const Before& before, const PassPlan& p, const PassPlan* next, bool tail = false) {
    if (contention_ == Contention::kNone) return Of(p);
    const std::array<const PassPlan*, 4> k = {before.two, before.one, &p, next};
    for (const auto& [q, v] : after_) {
      if (q == k) return v;
    }
    std::vector<const PassPlan*> window;
    std::vector<const std::vector<double>*> alone;
    for (const PassPlan* w : k) {
      if (!w) continue;
      window.push_back(w);
      alone.push_back(&Of(*w));
    }
    const size_t target = (before.two ? 1 : 0) + (before.one ? 1 : 0);
    after_.emplace_back(k, ContendedDurations(window, target, tail, stage_, comm_, l_, alone));
    return after_.back().second;
  }

 private:
  using Key = std::tuple<int, int, int, int32_t, double>;
  const CollectiveModel& comm_;
  const Layout& l_;
  int32_t stage_;
  Contention contention_;
  std::vector<std::pair<Key, double>> cache_;
  std::deque<std::pair<const PassPlan*, std::vector<double>>> alone_;
  std::deque<std::pair<std::array<const PassPlan*, 4>, std::vector<double>>> after_;
};

// A pass list compiled for one stage: out_k = max_j (in_j + m[k][j]), kept sparse: for each
// output the inputs it depends on (most depend on two or three of the ten).
struct PassMap {
  struct Term {
    uint8_t input;
    double offset;
  };
  std::array<std::vector<Term>, kOutputs> terms;
  std::array<bool, kOutputs> any{};  // an output the pass defines (else it keeps its input)
};

PassMap Sparse(const std::array<Vec, kOutputs>& m) {
  PassMap out;
  for (int k = 0; k < kOutputs; ++k) {
    for (int j = 0; j < kInputs; ++j) {
      if (m[k][j] > kNone) out.terms[k].push_back({static_cast<uint8_t>(j), m[k][j]});
    }
    out.any[k] = !out.terms[k].empty();
  }
  return out;
}

PassMap Compile(const Before& before, const PassPlan& p, const PassPlan* next, Durations& dur) {
  std::array<Vec, kStreamCount> free;
  for (int s = 0; s < kStreamCount; ++s) free[s] = Unit(s);
  std::vector<Vec> fin(p.tasks.size());
  const std::vector<double>& durations = dur.Of(before, p, next);
  struct {
    std::array<Vec, kOutputs> m;
  } out;
  for (Vec& v : out.m) v.fill(kNone);
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const TaskSpec& t = p.tasks[i];
    const int st = static_cast<int>(t.stream);
    Vec ready = free[st];
    for (int32_t d = t.dep_begin; d < t.dep_end; ++d) {
      MaxInto(ready, p.deps[d] == kEntryDep ? Unit(kCarryIn) : fin[p.deps[d]]);
    }
    if (static_cast<int32_t>(i) == p.receive) MaxInto(ready, Unit(kRemoteIn));
    const double d = durations[i];
    for (double& x : ready) x += d;
    fin[i] = ready;
    free[st] = ready;
    if (t.kind == TaskKind::kCompute) out.m[kComputeOut] = ready;
  }
  for (int s = 0; s < kStreamCount; ++s) out.m[s] = free[s];
  if (p.send >= 0) out.m[kSendOut] = fin[p.send];
  for (int32_t i : p.step_deps) MaxInto(out.m[kStepOut], fin[i]);
  for (int32_t i : p.carry) MaxInto(out.m[kCarryOut], fin[i]);
  return Sparse(out.m);
}

// The outputs of `map` for input `in`.
std::array<double, kOutputs> Apply(const PassMap& map, const Vec& in) {
  std::array<double, kOutputs> y;
  for (int k = 0; k < kOutputs; ++k) {
    double v = kNone;
    for (const PassMap::Term& t : map.terms[k]) v = std::max(v, in[t.input] + t.offset);
    y[k] = v;
  }
  return y;
}

// One stage's progress through the iteration.
struct Clock {
  std::array<double, kStreamCount> free{};
  double carry = kNone, carry_start = kNone;  // what the last pass left blocking (a send, ...)
  Category carry_category = Category::kPp;
  double step = kNone;                        // latest gradient reduction so far
  double last_compute = 0;                    // finish of the last compute task
  double act = 0, peak = 0;
  size_t next = 0;
  int32_t last_pass = -1;                     // IterationPlan::passes index of the last pass run
  int32_t kept_pass = -1;  // the pass before it, when the last one did not start fresh (-1: it did)
  std::vector<const TaskSpec*> deferred;      // ZeRO 0/1 buckets for the tail
  // kBreakdown: the last task of each stream (for the time after the last compute).
  std::array<Category, kStreamCount> last_category{};
  std::array<double, kStreamCount> last_start{};
  double breakdown[kCategoryCount] = {};
  double sm_contention = 0;  // kBreakdown: the compute time NCCL's SMs added
};

// What a task waited for last (as the simulator's BindingOf: its dependencies in order, then
// its stream predecessor, then the received send, the latest finish winning, earlier on ties):
// a task of its pass, the last task on its stream of an earlier pass, the pass's entry (the
// previous pass's blocking send) or the received send.
enum class From { kNone, kTask, kEarlier, kEntry, kRemote };

// Walks one pass (or the tail) task by task, charging the compute stream's time (kBreakdown).
class Walker {
 public:
  Walker(const Before& before, const PassPlan& p, const PassPlan* next, Durations& dur, Clock& c, bool breakdown,
         bool tail = false)
      : p_(p), durs_(dur.Of(before, p, next, tail)), c_(c), breakdown_(breakdown), start_(p.tasks.size()), fin_(p.tasks.size()),
        from_(p.tasks.size(), From::kNone), from_task_(p.tasks.size(), -1) {}

  // A collective of a group spanning stages (the embedding group) starts when every member
  // arrives: `meet(i, ready)` returns task i's start given its own ready time.
  void Meet(std::function<double(int32_t, double)> meet) { meet_ = std::move(meet); }

  // `entry`, `entry_start`: what kEntryDep stands for; `remote`, `remote_start`: the send the
  // receive waits for.
  void Run(double entry, double entry_start, Category entry_category, double remote, double remote_start) {
    entry_ = entry;
    entry_start_ = entry_start;
    entry_category_ = entry_category;
    remote_ = remote;
    remote_start_ = remote_start;
    earlier_start_ = c_.last_start;
    earlier_fin_ = c_.free;
    earlier_category_ = c_.last_category;
    std::array<int32_t, kStreamCount> prev;
    prev.fill(-1);
    for (size_t i = 0; i < p_.tasks.size(); ++i) {
      const TaskSpec& t = p_.tasks[i];
      const int st = static_cast<int>(t.stream);
      double ready = c_.free[st];
      double bound = kNone;  // the binding's finish
      auto bind = [&](double v, From f, int32_t task) {
        ready = std::max(ready, v);
        if (v > bound) {
          bound = v;
          from_[i] = f;
          from_task_[i] = task;
        }
      };
      for (int32_t d = t.dep_begin; d < t.dep_end; ++d) {
        const int32_t dep = p_.deps[d];
        if (dep == kEntryDep) {
          bind(entry, From::kEntry, -1);
        } else {
          bind(fin_[dep], From::kTask, dep);
        }
      }
      if (prev[st] >= 0) {
        bind(fin_[prev[st]], From::kTask, prev[st]);
      } else {
        bind(c_.free[st], From::kEarlier, st);
      }
      if (static_cast<int32_t>(i) == p_.receive) bind(remote, From::kRemote, -1);
      if (meet_ && t.kind == TaskKind::kCollective && t.group == GroupKind::kEmbedding) {
        const double met = meet_(static_cast<int32_t>(i), ready);
        if (met > ready) {
          ready = met;
          from_[i] = From::kNone;  // waited for the other stage: its bubble
        }
      }
      const double d = durs_[i];
      start_[i] = ready;
      fin_[i] = ready + d;
      prev[st] = static_cast<int32_t>(i);
      if (breakdown_ && st == kCompute) {
        Waiting(c_.free[kCompute], ready, static_cast<int32_t>(i), 0);
        c_.breakdown[static_cast<int>(t.category)] += d;
        if (t.kind == TaskKind::kCompute) c_.sm_contention += std::max(0.0, d - t.duration_s);
      }
      c_.free[st] = fin_[i];
      c_.last_category[st] = t.category;
      c_.last_start[st] = ready;
      if (t.kind == TaskKind::kCompute) c_.last_compute = fin_[i];
      if (t.memory_delta != 0) {
        c_.act += t.memory_delta;
        c_.peak = std::max(c_.peak, c_.act);
      }
    }
  }
  double start(int32_t i) const { return start_[i]; }
  double finish(int32_t i) const { return fin_[i]; }

  // [from, to): the compute stream idle while task i could not start, charged along the chain of
  // what it waited for (the simulator's ChargeWaiting): after the binding finished, bubble; a
  // received send's flight pp and the sender's work before it bubble; a task's own run to its
  // category (compute: bubble) and the wait before it to what it waited for.
  void Waiting(double from, double to, int32_t i, int depth) {
    if (to <= from) return;
    const From f = from_[i];
    if (f == From::kNone || depth > 32) return Charge(Category::kBubble, from, to);
    const double bound = f == From::kTask      ? fin_[from_task_[i]]
                         : f == From::kEarlier ? earlier_fin_[from_task_[i]]
                         : f == From::kEntry   ? entry_
                                               : remote_;
    const double end = std::min(to, std::max(from, bound));
    Charge(Category::kBubble, end, to);
    switch (f) {
      case From::kTask: return Running(from, end, from_task_[i], depth + 1);
      case From::kEarlier: {
        const int st = from_task_[i];
        const double s = std::min(end, std::max(from, earlier_start_[st]));
        Charge(st == kCompute ? Category::kBubble : earlier_category_[st], s, end);
        return Charge(Category::kBubble, from, s);
      }
      case From::kEntry:
      case From::kRemote: {
        const double s = std::min(end, std::max(from, f == From::kEntry ? entry_start_ : remote_start_));
        Charge(f == From::kEntry ? entry_category_ : Category::kPp, s, end);
        return Charge(Category::kBubble, from, s);
      }
      case From::kNone: return;
    }
  }
  void Running(double from, double to, int32_t d, int depth) {
    if (to <= from) return;
    const TaskSpec& t = p_.tasks[d];
    const double s = std::min(to, std::max(from, start_[d]));
    Charge(t.stream == Stream::kCompute ? Category::kBubble : t.category, s, to);
    Waiting(from, s, d, depth + 1);
  }

 private:
  void Charge(Category c, double a, double z) {
    if (z > a) c_.breakdown[static_cast<int>(c)] += z - a;
  }

  const PassPlan& p_;
  const std::vector<double>& durs_;
  Clock& c_;
  bool breakdown_;
  std::vector<double> start_, fin_;
  std::vector<From> from_;
  std::vector<int32_t> from_task_;
  double entry_ = kNone, entry_start_ = kNone, remote_ = kNone, remote_start_ = kNone;
  Category entry_category_ = Category::kPp;
  std::array<double, kStreamCount> earlier_start_{}, earlier_fin_{};
  std::array<Category, kStreamCount> earlier_category_{};
  std::function<double(int32_t, double)> meet_;
};

class Evaluator {
 public:
  Evaluator(const IterationPlan& plan, const CollectiveModel& comm, const Layout& l, EvalDetail detail,
            Contention contention)
      : plan_(plan), l_(l), breakdown_(detail == EvalDetail::kBreakdown), contention_(contention),
        m_(static_cast<int32_t>(l.microbatches())), positions_(PositionCount(l)),
        send_fin_(2 * static_cast<size_t>(m_) * positions_, std::nan("")),
        send_start_(breakdown_ ? send_fin_.size() : 0, kNone), clocks_(l.pp) {
    for (int32_t s = 0; s < l.pp; ++s) {
      durations_.emplace_back(comm, l, s, contention);
      // Without contention a pass list's map is the same whatever ran before it.
      maps_.emplace_back();
      last_mb_.push_back(LastGradientMicrobatch(l, plan.stages[s].order));
    }
  }

  PlanEval Run() {
    for (bool done = false; !done;) {
      bool progress = false;
      done = true;
      for (int32_t s = 0; s < l_.pp; ++s) {
        while (Advance(s)) progress = true;
        done = done && clocks_[s].next == plan_.stages[s].order.size();
      }
      CHECK(done || progress) << "the pipeline schedule deadlocks: no stage can run its next pass";
    }
    // The embedding group's all-reduce joins the first and the last stage's tails: first the
    // time each reaches it alone, then both tails with it started when both have.
    const int32_t last = static_cast<int32_t>(l_.pp) - 1;
    if (last > 0) {
      std::vector<double> ready;
      for (int32_t s : {0, last}) {
        Clock copy = clocks_[s];
        std::swap(copy, clocks_[s]);
        Tail(s, [&](int32_t, double r) {
          ready.push_back(r);
          return r;
        });
        std::swap(copy, clocks_[s]);
      }
      meet_ = ready.size() == 2 ? std::max(ready[0], ready[1]) : kNone;
    }
    PlanEval out;
    for (int32_t s = 0; s < l_.pp; ++s) {
      out.stages.push_back(Tail(s, [&](int32_t, double r) { return std::max(r, meet_); }));
    }
    for (const StageEval& e : out.stages) out.iteration_time_s = std::max(out.iteration_time_s, e.end_s);
    if (breakdown_) {
      for (StageEval& e : out.stages) e.breakdown_s[static_cast<int>(Category::kBubble)] += out.iteration_time_s - e.end_s;
    }
    return out;
  }

 private:
  size_t SendIndex(Pass pass, int32_t mb, int32_t position) const {
    return (static_cast<size_t>(pass == Pass::kForward ? 0 : 1) * m_ + mb) * positions_ + position;
  }

  // The pass list stage s ran last, unless the next pass waits for its input (`remote`, the
  // received send) until after every stream is free: then what the last one left running has
  // had that bubble to end in, and the next pass's transfers are counted as if it ran first.
  // (A transfer still running when the input arrives, a ZeRO-2 reduce-scatter longer than the
  // bubble, shares links with the next pass and holds SMs beside its compute.)
  Before Previous(const Clock& c, double remote = kNone) const {
    if (c.last_pass < 0) return {};
    double busy = c.free[kCompute];
    if (contention_ != Contention::kNone) {
      for (int st = 0; st < kStreamCount; ++st) busy = std::max(busy, c.free[st]);
    }
    // A transfer ending as the input arrives is a tie (both evaluations sum the same durations
    // in a different order): the last pass is kept.
    if (remote > busy + (busy > c.free[kCompute] ? 1e-9 * std::abs(busy) : 0)) return {};
    // The one before it too, unless the last pass started fresh: a transfer it left may still
    // run (a backlog of ZeRO-2 reduce-scatters longer than a pass).
    Before b;
    b.one = &plan_.passes[c.last_pass];
    if (contention_ != Contention::kNone && c.kept_pass >= 0) b.two = &plan_.passes[c.kept_pass];
    return b;
  }

  // The map of pass list `id` after `prev` with `next` following it (nullptr: none), compiled
  // once per stage.
  const PassMap& MapOf(int32_t s, const Before& before, int32_t id, const PassPlan* next) {
    const size_t n = plan_.passes.size();
    auto index = [&](const PassPlan* q) { return q ? static_cast<size_t>(q - plan_.passes.data()) + 1 : 0; };
    const size_t key =
        contention_ == Contention::kNone
            ? static_cast<size_t>(id)
            : ((index(before.two) * (n + 1) + index(before.one)) * (n + 1) + index(next)) * n + id;
    std::unique_ptr<PassMap>& slot = maps_[s][key];
    if (!slot) slot = std::make_unique<PassMap>(Compile(before, plan_.passes[id], next, durations_[s]));
    return *slot;
  }

  // The pass list stage s runs after pass list `id` (which follows `prev`, its received send
  // at `remote`), when it starts as soon as the stage is free: what `id` leaves running then
  // shares links with it. That is when it receives nothing, when its input has arrived by the
  // time the stage is free, and when the stage that sends it is not evaluated that far yet
  // (in the steady state of a schedule the input is on time). Else nullptr: the next pass
  // waits for the other stage, and what `id` left running has that bubble to end in. Only
  // with contention.
  const PassPlan* Following(int32_t s, const Before& prev, int32_t id, double remote) {
    if (contention_ == Contention::kNone) return nullptr;
    const StagePlan& sp = plan_.stages[s];
    const Clock& c = clocks_[s];
    const size_t i = c.next + 1;
    if (i >= sp.order.size()) return nullptr;
    const PipelineStep& step = sp.order[i];
    const bool last = step.mb == last_mb_[s][step.chunk];
    const int kind = step.pass == Pass::kForward ? 0 : step.pass == Pass::kBackward ? 1 : 2;
    const PassPlan& next = plan_.passes[sp.pass_of[step.chunk][kind][last ? 1 : 0]];
    if (next.receive < 0) return &next;
    const double arrives = send_fin_[SendIndex(step.pass, step.mb, sp.chunks[step.chunk].position)];
    if (std::isnan(arrives)) return &next;
    Vec in;
    for (int st = 0; st < kStreamCount; ++st) in[st] = c.free[st];
    in[kCarryIn] = c.carry;
    in[kRemoteIn] = remote;
    const double free = Apply(MapOf(s, prev, id, &next), in)[kCompute];
    // Arriving as the stage frees is a tie (both evaluations sum the same durations in a
    // different order): it does not wait.
    return arrives > free + 1e-9 * std::abs(free) ? nullptr : &next;
  }

  // Runs stage s's next pass if its input has arrived.
  bool Advance(int32_t s) {
    const StagePlan& sp = plan_.stages[s];
    Clock& c = clocks_[s];
    if (c.next == sp.order.size()) return false;
    const PipelineStep& step = sp.order[c.next];
    const ModelChunk& chunk = sp.chunks[step.chunk];
    const bool last = step.mb == last_mb_[s][step.chunk];
    const int kind = step.pass == Pass::kForward ? 0 : step.pass == Pass::kBackward ? 1 : 2;
    const int32_t id = sp.pass_of[step.chunk][kind][last ? 1 : 0];
    const PassPlan& p = plan_.passes[id];
    double remote = kNone, remote_start = kNone;
    if (p.receive >= 0) {
      const size_t k = SendIndex(step.pass, step.mb, chunk.position);
      if (std::isnan(send_fin_[k])) return false;
      remote = send_fin_[k];
      if (breakdown_) remote_start = send_start_[k];
    }
    double send = kNone, send_start = kNone, carry = kNone, carry_start = kNone;
    Category carry_category = Category::kPp;
    const Before prev = Previous(c, remote);
    const PassPlan* next = Following(s, prev, id, remote);
    if (breakdown_) {
      Walker w(prev, p, next, durations_[s], c, true);
      w.Run(c.carry, c.carry_start, c.carry_category, remote, remote_start);
      for (int32_t i : p.step_deps) c.step = std::max(c.step, w.finish(i));
      if (p.send >= 0) {
        send = w.finish(p.send);
        send_start = w.start(p.send);
      }
      for (int32_t i : p.carry) {
        if (w.finish(i) > carry) {
          carry = w.finish(i);
          carry_start = w.start(i);
          carry_category = p.tasks[i].category;
        }
      }
    } else {
      const PassMap& map = MapOf(s, prev, id, next);
      Vec in;
      for (int st = 0; st < kStreamCount; ++st) in[st] = c.free[st];
      in[kCarryIn] = c.carry;
      in[kRemoteIn] = remote;
      const std::array<double, kOutputs> y = Apply(map, in);
      for (int st = 0; st < kStreamCount; ++st) c.free[st] = y[st];
      c.step = std::max(c.step, y[kStepOut]);
      if (y[kComputeOut] > kNone) c.last_compute = y[kComputeOut];
      send = y[kSendOut];
      carry = y[kCarryOut];
      c.peak = std::max(c.peak, c.act + p.memory_high);
      c.act += p.memory_net;
    }
    for (const auto& [task, producer] : p.deferred) c.deferred.push_back(&task);
    if (p.send >= 0) {
      const int32_t to = step.pass == Pass::kForward ? chunk.position + 1 : chunk.position - 1;
      const size_t k = SendIndex(step.pass, step.mb, to);
      send_fin_[k] = send;
      if (breakdown_) send_start_[k] = send_start;
    }
    c.carry = carry;
    c.carry_start = carry_start;
    c.carry_category = carry_category;
    ++c.next;
    c.kept_pass = prev.one ? c.last_pass : -1;
    c.last_pass = id;
    return true;
  }

  // The deferred buckets (after the last compute), then the tail's list, whose entry is the
  // last compute, every gradient reduction and the last pass's blocking send.
  StageEval Tail(int32_t s, std::function<double(int32_t, double)> meet) {
    Clock& c = clocks_[s];
    Durations& dur = durations_[s];
    for (const TaskSpec* t : c.deferred) {
      const int st = static_cast<int>(t->stream);
      const double start = std::max(c.free[st], c.last_compute);
      if (breakdown_ && st == kCompute) {
        c.breakdown[static_cast<int>(Category::kBubble)] += start - c.free[kCompute];
        c.breakdown[static_cast<int>(t->category)] += dur.Of(plan_.stages[s].tail, *t);
      }
      c.free[st] = start + dur.Of(plan_.stages[s].tail, *t);
      c.last_category[st] = t->category;
      c.last_start[st] = start;
      c.step = std::max(c.step, c.free[st]);
    }
    const PassPlan& tail = plan_.stages[s].tail;
    const double entry = std::max({c.carry, c.step, c.last_compute});
    // What the entry waited for, for the breakdown: the gradient reductions, or the send.
    const bool dp_bound = c.step >= c.carry;
    const double entry_start = dp_bound ? c.last_compute : c.carry_start;
    Walker w(Previous(c), tail, nullptr, dur, c, breakdown_, true);
    w.Meet(std::move(meet));
    w.Run(entry, entry_start, dp_bound ? Category::kDp : c.carry_category, kNone, kNone);
    StageEval e;
    e.peak_activations = c.peak;
    e.end_s = *std::max_element(c.free.begin(), c.free.end());
    if (breakdown_) {
      // After the compute stream's last task: the stream that ends last, by its last task.
      int last = kCompute;
      for (int st = 0; st < kStreamCount; ++st) {
        if (c.free[st] > c.free[last]) last = st;
      }
      if (last != kCompute) {
        const double from = c.free[kCompute];
        int32_t tail_task = -1;
        for (int32_t i = static_cast<int32_t>(tail.tasks.size()) - 1; i >= 0; --i) {
          if (static_cast<int>(tail.tasks[i].stream) == last) {
            tail_task = i;
            break;
          }
        }
        if (tail_task >= 0 && w.finish(tail_task) == c.free[last]) {
          // The chain of the tail's tasks, as the compute stream's waits are charged.
          w.Running(from, c.free[last], tail_task, 0);
        } else {
          const double s0 = std::max(from, c.last_start[last]);
          c.breakdown[static_cast<int>(c.last_category[last])] += c.free[last] - s0;
          c.breakdown[static_cast<int>(Category::kBubble)] += s0 - from;
        }
      }
      std::copy(std::begin(c.breakdown), std::end(c.breakdown), std::begin(e.breakdown_s));
      e.sm_contention_s = c.sm_contention;
    }
    return e;
  }

  const IterationPlan& plan_;
  const Layout& l_;
  bool breakdown_;
  Contention contention_;
  int32_t m_, positions_;
  std::vector<double> send_fin_, send_start_;
  std::vector<Clock> clocks_;
  std::vector<Durations> durations_;
  std::vector<std::unordered_map<size_t, std::unique_ptr<PassMap>>> maps_;
  std::vector<std::vector<int32_t>> last_mb_;
  double meet_ = kNone;  // when both ends of the embedding group reach its all-reduce
};

// Isolated offsets of one pass list from its start: to its last compute, its send, and the
// next pass's earliest start (last compute, or the send when it blocks).
struct Offsets {
  double compute = 0, send = 0, next = 0;
};

// The pass alone from time 0, the later of when the compute stream is free and what the
// previous pass left blocking (or the received send): the compute stream free at 0 and the
// received send at 0; the entry and every other stream at -inf, since a task that waits only
// for them (a ZeRO-3 gather, a collective) may start before 0, so nothing it does may be
// counted as delaying the pass.
Offsets Isolated(const PassPlan& p, Durations& dur) {
  std::array<double, kStreamCount> free;
  free.fill(kNone);
  free[kCompute] = 0;
  std::vector<double> fin(p.tasks.size());
  double compute = 0;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const TaskSpec& t = p.tasks[i];
    const int st = static_cast<int>(t.stream);
    double ready = free[st];
    for (int32_t d = t.dep_begin; d < t.dep_end; ++d) {
      if (p.deps[d] != kEntryDep) ready = std::max(ready, fin[p.deps[d]]);
    }
    if (static_cast<int32_t>(i) == p.receive) ready = std::max(ready, 0.0);
    fin[i] = free[st] = ready + dur.Of(p, t);
    if (t.kind == TaskKind::kCompute) compute = fin[i];
  }
  Offsets o;
  o.compute = std::max(0.0, compute);
  o.send = p.send >= 0 ? fin[p.send] : 0;
  o.next = o.compute;
  for (int32_t i : p.carry) o.next = std::max(o.next, fin[i]);
  return o;
}

// The tail alone: when its last task (of any stream) ends.
double IsolatedEnd(const PassPlan& p, Durations& dur) {
  std::array<double, kStreamCount> free;
  free.fill(kNone);
  free[kCompute] = 0;
  std::vector<double> fin(p.tasks.size());
  double end = 0;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const TaskSpec& t = p.tasks[i];
    const int st = static_cast<int>(t.stream);
    double ready = std::max(free[st], 0.0);
    for (int32_t d = t.dep_begin; d < t.dep_end; ++d) {
      if (p.deps[d] != kEntryDep) ready = std::max(ready, fin[p.deps[d]]);
    }
    fin[i] = free[st] = ready + dur.Of(p, t);
    end = std::max(end, fin[i]);
  }
  return end;
}

}  // namespace

PlanBound BoundPlan(const IterationPlan& plan, const CollectiveModel& comm, const Layout& l) {
  const int32_t pp = static_cast<int32_t>(l.pp);
  PlanBound out;
  std::vector<std::vector<Offsets>> iso(pp);
  std::vector<Durations> durations;
  std::vector<double> tail(pp), fwd_send(pp), bwd_send(pp), bwd_compute(pp);
  std::vector<double> busy(pp), before_last_bwd(pp), after_last_bwd(pp);
  for (int32_t s = 0; s < pp; ++s) {
    const StagePlan& sp = plan.stages[s];
    durations.emplace_back(comm, l, s, Contention::kNone);
    iso[s].assign(plan.passes.size(), Offsets{});
    std::vector<bool> used(plan.passes.size(), false);
    for (const auto& kinds : sp.pass_of) {
      for (const auto& lasts : kinds) {
        for (int32_t id : lasts) {
          if (id >= 0 && !used[id]) {
            used[id] = true;
            iso[s][id] = Isolated(plan.passes[id], durations[s]);
          }
        }
      }
    }
    // The tail from the stage's last compute, with every stream free.
    tail[s] = IsolatedEnd(sp.tail, durations[s]);
    const std::vector<int32_t> last_mb = LastGradientMicrobatch(l, sp.order);
    // The last backward of chunk 0 (its position is s): the one the drain chain starts from.
    int32_t last_bwd = -1;
    for (size_t i = 0; i < sp.order.size(); ++i) {
      if (sp.order[i].pass == Pass::kBackward && sp.order[i].chunk == 0) last_bwd = static_cast<int32_t>(i);
    }
    double act = 0, peak = 0;
    for (size_t i = 0; i < sp.order.size(); ++i) {
      const PipelineStep& step = sp.order[i];
      const int kind = step.pass == Pass::kForward ? 0 : step.pass == Pass::kBackward ? 1 : 2;
      const int32_t id = sp.pass_of[step.chunk][kind][step.mb == last_mb[step.chunk] ? 1 : 0];
      const PassPlan& p = plan.passes[id];
      peak = std::max(peak, act + p.memory_high);
      act += p.memory_net;
      busy[s] += iso[s][id].next;
      if (static_cast<int32_t>(i) < last_bwd) before_last_bwd[s] += iso[s][id].next;
      if (static_cast<int32_t>(i) > last_bwd) after_last_bwd[s] += iso[s][id].next;
      if (step.mb == 0 && step.chunk == 0 && step.pass == Pass::kForward) fwd_send[s] = iso[s][id].send;
      if (static_cast<int32_t>(i) == last_bwd) {
        bwd_send[s] = iso[s][id].send;
        bwd_compute[s] = iso[s][id].compute;
      }
    }
    out.peak_activations.push_back(peak);
  }
  double fill = 0;
  for (int32_t s = 0; s < pp; ++s) {
    out.time_s = std::max(out.time_s, fill + busy[s] + tail[s]);
    double chain = s == 0 ? bwd_compute[0] : bwd_send[s];
    for (int32_t q = s - 1; q >= 1; --q) chain += bwd_send[q];
    if (s > 0) chain += bwd_compute[0];
    out.time_s = std::max(out.time_s, fill + before_last_bwd[s] + chain + after_last_bwd[0] + tail[0]);
    fill += fwd_send[s];
  }
  return out;
}

PlanEval EvaluatePlan(const IterationPlan& plan, const CollectiveModel& comm, const Layout& l,
                      EvalDetail detail, Contention contention) {
  Evaluator e(plan, comm, l, detail, contention);
  return e.Run();
}

}  // namespace shardsim
