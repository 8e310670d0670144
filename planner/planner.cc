// See planner.h. The search space, pruning and ranking are described in docs/planner.md.
#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <sstream>
#include <thread>

#include "src/cost/memory.h"
#include "src/layout/validate.h"
#include "src/util/strings.h"

namespace shardsim::planner {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// Runs body(i) for i in [0, n) on `threads` threads; results go to index i, so the outcome
// does not depend on the thread count.
void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& body,
                 const std::function<void(int64_t)>& tick = nullptr) {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  auto worker = [&] {
    for (int64_t i = next++; i < n; i = next++) {
      body(i);
      const int64_t d = ++done;
      if (tick && threads == 1) tick(d);
    }
  };
  if (threads <= 1 || n < 2) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (tick) tick(n);
}

bool Allowed(const PlanOptions& o, const std::string& key, const std::string& value) {
  if (auto f = o.fixed.find(key); f != o.fixed.end() && f->second != value) return false;
  if (auto f = o.forbidden.find(key); f != o.forbidden.end() && f->second.count(value)) return false;
  return true;
}

std::string Str(int64_t v) { return std::to_string(v); }

// Every layout of the space the options allow, in a fixed order. `group` numbers the runs of
// layouts that differ only in recompute and offload (the innermost loops).
std::vector<Layout> Enumerate(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                              std::vector<int32_t>* group) {
  std::vector<Layout> out;
  int32_t next_group = 0;
  const int64_t n = o.gpus;
  const int64_t gbs = o.global_batch;
  // Layout switches that are not searched take the fixed value or the default.
  Layout base;
  base.gbs = gbs;
  for (const auto& [key, value] : o.fixed) {
    static const std::set<std::string> kSearched = {"tp", "pp", "dp", "cp", "ep", "vpp", "mbs",
                                                    "zero", "sp", "recompute", "schedule", "offload", "gbs"};
    if (!kSearched.count(key)) {
      StatusOr<Layout> one = ParseLayout(key + "=" + value);
      if (!one.ok()) continue;  // ParseFixed already checked it
      Layout& b = base;
      const Layout& v = *one;
      if (key == "dtype") { b.dtype = v.dtype; b.dtype_given = true; }
      if (key == "compress") b.grad_compression = v.grad_compression;
      if (key == "overlap_dp") b.overlap_dp = v.overlap_dp;
      if (key == "overlap_tp") b.overlap_tp = v.overlap_tp;
      if (key == "overlap_pp") b.overlap_pp = v.overlap_pp;
      if (key == "prefetch") b.prefetch = v.prefetch;
      if (key == "attention") b.attention = v.attention;
    }
  }
  if (!base.dtype_given) base.dtype = hw.gpu.Peak(DType::kBf16) ? DType::kBf16 : DType::kFp32;
  base.dtype_given = true;
  base.schedule_given = true;

  for (int64_t tp : Divisors(std::min<int64_t>(n, hw.node.gpus))) {
    if (!Allowed(o, "tp", Str(tp)) || m.heads % tp != 0) continue;
    for (int64_t cp = 1; cp <= n / tp; cp *= 2) {
      if (!Allowed(o, "cp", Str(cp)) || (cp > 1 && m.seq_len % (2 * cp) != 0)) continue;
      for (int64_t pp : Divisors(m.layers)) {
        if (!Allowed(o, "pp", Str(pp)) || n % (tp * cp * pp) != 0) continue;
        const int64_t dp = n / (tp * cp * pp);
        if (!Allowed(o, "dp", Str(dp)) || gbs % dp != 0) continue;
        std::vector<int64_t> eps = {1};
        if (m.moe) {
          eps.clear();
          for (int64_t e : Divisors(m.moe->experts)) {
            if (dp % e == 0) eps.push_back(e);
          }
        }
        for (int64_t ep : eps) {
          if (!Allowed(o, "ep", Str(ep))) continue;
          for (int64_t mbs = 1; mbs <= gbs / dp; mbs *= 2) {
            if (!Allowed(o, "mbs", Str(mbs)) || (gbs / dp) % mbs != 0) continue;
            const int64_t micro = gbs / (dp * mbs);
            std::vector<std::pair<int64_t, Schedule>> pipes;
            if (pp == 1) {
              pipes.push_back({1, Schedule::k1F1B});
            } else {
              for (Schedule s : {Schedule::k1F1B, Schedule::kGpipe, Schedule::kZeroBubble}) pipes.push_back({1, s});
              for (int64_t v : Divisors(m.layers / pp)) {
                if (v > 1 && micro % pp == 0) pipes.push_back({v, Schedule::kInterleaved});
              }
            }
            for (const auto& [vpp, schedule] : pipes) {
              if (!Allowed(o, "vpp", Str(vpp)) || !Allowed(o, "schedule", ScheduleName(schedule))) continue;
              for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
                if (!Allowed(o, "zero", Str(zero))) continue;
                for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
                  if (!Allowed(o, "sp", sp ? "on" : "off")) continue;
                  ++next_group;
                  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                    if (!Allowed(o, "recompute", RecomputeName(rc))) continue;
                    for (Offload off : {Offload::kNone, Offload::kOptimizer, Offload::kOptimizerAndParams}) {
                      if (!Allowed(o, "offload", OffloadName(off))) continue;
                      if ((off == Offload::kOptimizer && zero == 0) ||
                          (off == Offload::kOptimizerAndParams && zero != 3)) {
                        continue;
                      }
                      Layout l = base;
                      l.tp = tp;
                      l.cp = cp;
                      l.pp = pp;
                      l.dp = dp;
                      l.ep = ep;
                      l.mbs = mbs;
                      l.vpp = vpp;
                      l.schedule = schedule;
                      l.zero = zero;
                      l.sp = sp == 1;
                      l.recompute = rc;
                      l.offload = off;
                      out.push_back(l);
                      group->push_back(next_group);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

double PeakMemory(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  // The first stage holds the most micro-batches in flight and the embeddings; the last holds
  // the logits and the head: the peak is on one of them.
  double peak = StageMemory(m, hw, l, 0).total();
  if (l.pp > 1) peak = std::max(peak, StageMemory(m, hw, l, l.pp - 1).total());
  return peak;
}

bool HostFits(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  if (l.offload == Offload::kNone) return true;
  return StageMemory(m, hw, l, 0).host * hw.node.gpus <= hw.node.host.memory_bytes;
}

// Which keys differ between two layouts, "key a vs b".
std::vector<std::string> Differences(const Layout& a, const Layout& b) {
  std::vector<std::string> out;
  const std::vector<std::string> x = Split(FormatLayout(a), ','), y = Split(FormatLayout(b), ',');
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i] != y[i]) {
      const size_t eq = x[i].find('=');
      out.push_back(x[i].substr(0, eq) + " " + x[i].substr(eq + 1) + " vs " + y[i].substr(y[i].find('=') + 1));
    }
  }
  return out;
}

std::string Explain(const Candidate& win, const Candidate& second) {
  const RankResult& a = win.sim.ranks[win.sim.critical];
  const RankResult& b = second.sim.ranks[second.sim.critical];
  const double dt = second.time_s() - win.time_s();
  std::ostringstream out;
  out << "The winner's iteration is " << Fmt("%.4f", dt) << " s shorter than the runner-up's ("
      << Fmt("%.1f", 100 * dt / second.time_s()) << " %).";
  // The terms that differ most, largest first.
  std::vector<std::pair<double, int>> diffs;
  for (int c = 0; c < kCategoryCount; ++c) diffs.push_back({b.breakdown_s[c] - a.breakdown_s[c], c});
  std::sort(diffs.begin(), diffs.end(), [](const auto& x, const auto& y) {
    return std::fabs(x.first) > std::fabs(y.first) || (std::fabs(x.first) == std::fabs(y.first) && x.second < y.second);
  });
  out << " Largest differences (runner-up minus winner):";
  for (size_t i = 0; i < 3 && i < diffs.size(); ++i) {
    if (std::fabs(diffs[i].first) < 1e-9) break;
    const int c = diffs[i].second;
    out << (i ? ";" : "") << " " << CategoryName(static_cast<Category>(c)) << " "
        << Fmt("%.4f", b.breakdown_s[c]) << " s vs " << Fmt("%.4f", a.breakdown_s[c]) << " s ("
        << (diffs[i].first > 0 ? "+" : "") << Fmt("%.4f", diffs[i].first) << " s)";
  }
  out << ". The layouts differ in: " << Join(Differences(win.layout, second.layout), ", ") << ".";
  if (win.sim.peak_memory_bytes != second.sim.peak_memory_bytes) {
    out << " Peak memory " << Fmt("%.1f", win.sim.peak_memory_bytes / 1073741824.0) << " GiB vs "
        << Fmt("%.1f", second.sim.peak_memory_bytes / 1073741824.0) << " GiB.";
  }
  return out.str();
}

// For the layout closest to fitting: which single knob would make it fit, or how much it saves.
std::vector<std::string> Advice(const ModelSpec& m, const HardwareSpec& hw, const Layout& l,
                                double limit, int64_t gpus) {
  std::vector<std::string> out;
  const double now = PeakMemory(m, hw, l);
  struct Knob {
    std::string name;
    Layout layout;
  };
  std::vector<Knob> knobs;
  if (l.dp > 1 && l.zero < 3) {
    Layout k = l;
    k.zero = 3;
    knobs.push_back({"zero=3", k});
  }
  if (l.recompute != Recompute::kFull) {
    Layout k = l;
    k.recompute = Recompute::kFull;
    knobs.push_back({"recompute=full", k});
  }
  if (l.tp > 1 && !l.sp) {
    Layout k = l;
    k.sp = true;
    knobs.push_back({"sp=on", k});
  }
  if (l.dp > 1 && l.offload == Offload::kNone) {
    Layout k = l;
    k.zero = std::max(k.zero, 1);
    k.offload = Offload::kOptimizer;
    knobs.push_back({"offload=optimizer (with zero >= 1)", k});
    Layout p = l;
    p.zero = 3;
    p.offload = Offload::kOptimizerAndParams;
    knobs.push_back({"offload=optimizer+params (with zero=3)", p});
  }
  for (const Knob& k : knobs) {
    const double mem = PeakMemory(m, hw, k.layout);
    out.push_back(k.name + ": " + Fmt("%.1f", now / 1073741824.0) + " -> " +
                  Fmt("%.1f", mem / 1073741824.0) + " GiB" + (mem <= limit ? " (fits)" : " (still over)"));
  }
  // Model states shrink with more data-parallel GPUs under ZeRO-3: a rough count that would
  // bring the states under the limit.
  const double over = now / limit;
  const int64_t more = static_cast<int64_t>(std::ceil(static_cast<double>(gpus) * over));
  out.push_back("more GPUs: about " + std::to_string(more) + " (x" + Fmt("%.1f", over) +
                ") with ZeRO-3 to spread the model states");
  return out;
}

}  // namespace

std::vector<Layout> EnumerateLayouts(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o) {
  std::vector<int32_t> group;
  return Enumerate(m, hw, o, &group);
}

double PeakMemoryBound(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  return PeakMemory(m, hw, l);
}

StatusOr<std::map<std::string, std::string>> ParseFixed(const std::string& spec) {
  std::map<std::string, std::string> out;
  if (spec.empty()) return out;
  if (StatusOr<Layout> l = ParseLayout(spec); !l.ok()) return l.status();
  for (const std::string& item : Split(spec, ',')) {
    const size_t eq = item.find('=');
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

StatusOr<std::map<std::string, std::set<std::string>>> ParseForbidden(const std::string& spec) {
  std::map<std::string, std::set<std::string>> out;
  if (spec.empty()) return out;
  for (const std::string& item : Split(spec, ',')) {
    // Each item must be a valid single key=value (values of one key may repeat).
    StatusOr<Layout> one = ParseLayout(item);
    if (!one.ok()) return Status::Error("--forbid: " + one.status().message());
    const size_t eq = item.find('=');
    out[item.substr(0, eq)].insert(item.substr(eq + 1));
  }
  return out;
}

double Score(const Candidate& c, const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o) {
  const double t = c.time_s();
  switch (o.objective) {
    case Objective::kThroughput: return t;
    case Objective::kTimeToTrain: {
      const double tokens_per_iter = static_cast<double>(c.layout.gbs * m.seq_len);
      return t * std::ceil(o.tokens / tokens_per_iter);
    }
    case Objective::kCost: {
      const double tokens_per_iter = static_cast<double>(c.layout.gbs * m.seq_len);
      const double hours = t * std::ceil(o.tokens / tokens_per_iter) / 3600.0;
      return hours * static_cast<double>(c.layout.world()) * hw.price_per_gpu_hour.value_or(0);
    }
  }
  return t;
}

StatusOr<PlanResult> Plan(const ModelSpec& m, const Cluster& cluster, const PlanOptions& o) {
  const HardwareSpec& hw = cluster.hardware();
  if (o.gpus < 1) return Status::Error("--gpus must be at least 1, found " + std::to_string(o.gpus));
  if (o.gpus > hw.total_gpus()) {
    return Status::Error(std::to_string(o.gpus) + " GPUs requested but " + hw.name + " has " +
                         std::to_string(hw.total_gpus()));
  }
  if (o.global_batch < 1) return Status::Error("--global-batch must be at least 1 sequence");
  if (o.max_memory_fraction <= 0 || o.max_memory_fraction > 1) {
    return Status::Error("--max-memory-fraction must be in (0, 1]");
  }
  if (o.objective != Objective::kThroughput && o.tokens <= 0) {
    return Status::Error("--objective time-to-train and cost need --tokens T");
  }
  if (o.objective == Objective::kCost && !hw.price_per_gpu_hour) {
    return Status::Error("--objective cost needs price_per_gpu_hour in " + hw.name);
  }
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  PlanResult res;
  res.gpus = o.gpus;
  res.memory_limit_bytes = hw.gpu.memory_bytes * o.max_memory_fraction;
  auto progress = [&](const std::string& stage, double f) {
    if (o.progress) o.progress(stage, f);
  };

  // 1. Enumerate, validate, bound memory.
  auto t0 = std::chrono::steady_clock::now();
  auto lap = [&](const char* what) {
    if (std::getenv("SHARDSIM_PROFILE")) {
      const auto t1 = std::chrono::steady_clock::now();
      std::fprintf(stderr, "%s %.3f s\n", what, std::chrono::duration<double>(t1 - t0).count());
      t0 = t1;
    }
  };
  std::vector<int32_t> group;
  std::vector<Layout> all = Enumerate(m, hw, o, &group);
  lap("enumerate");
  res.enumerated = static_cast<int64_t>(all.size());
  std::vector<char> valid(all.size(), 0);
  std::vector<double> memory(all.size(), 0);
  ParallelFor(static_cast<int64_t>(all.size()), threads, [&](int64_t i) {
    if (!CheckLayout(all[i], m, hw, o.gpus).ok()) return;
    valid[i] = 1;
    memory[i] = PeakMemory(m, hw, all[i]);
  });
  lap("check+memory");
  // 2. Exact memory (the schedule's activation peak, as the simulator counts it) for what
  //    passes the cheap bound, with a lower bound of its time. Within a group of layouts that
  //    differ only in recompute and offload, in the order least first: a layout is dominated
  //    (never faster: it only adds work) when one that recomputes no more and offloads no
  //    more fits; so each group's members are bounded in order until one fits.
  const CollectiveModel comm(cluster);
  std::vector<std::pair<int64_t, int64_t>> groups;  // [begin, end) of each group in `all`
  for (size_t i = 0; i < all.size(); ++i) {
    if (i == 0 || group[i] != group[i - 1]) groups.emplace_back(static_cast<int64_t>(i), static_cast<int64_t>(i));
    groups.back().second = static_cast<int64_t>(i) + 1;
  }
  // 0 invalid, 1 over the cheap bound, 2 over memory, 3 dominated, 4 a candidate.
  std::vector<char> verdict(all.size(), 0);
  std::vector<QuickEstimate> bound(all.size());
  ParallelFor(static_cast<int64_t>(groups.size()), threads, [&](int64_t g) {
    std::vector<int64_t> fit;
    for (int64_t i = groups[g].first; i < groups[g].second; ++i) {
      if (!valid[i]) continue;
      if (memory[i] > res.memory_limit_bytes || !HostFits(m, hw, all[i])) {
        verdict[i] = 1;
        continue;
      }
      const bool dominated = std::any_of(fit.begin(), fit.end(), [&](int64_t j) {
        return all[j].recompute <= all[i].recompute && all[j].offload <= all[i].offload;
      });
      if (dominated) {
        verdict[i] = 3;
        continue;
      }
      bound[i] = EstimateBound(m, comm, all[i]);
      if (bound[i].fits && bound[i].peak_memory_bytes <= res.memory_limit_bytes) {
        verdict[i] = 4;
        fit.push_back(i);
      } else {
        verdict[i] = 2;
      }
    }
  }, [&](int64_t d) { progress("bound", static_cast<double>(d) / static_cast<double>(groups.size())); });
  lap("bound");
  std::vector<int64_t> fitting, over;
  for (size_t i = 0; i < all.size(); ++i) {
    switch (verdict[i]) {
      case 0: ++res.invalid; break;
      case 1: ++res.pruned_memory; over.push_back(static_cast<int64_t>(i)); break;
      case 2:
        ++res.pruned_memory;
        memory[i] = std::max(memory[i], bound[i].peak_memory_bytes);
        over.push_back(static_cast<int64_t>(i));
        break;
      case 3: ++res.dominated; break;
      default: fitting.push_back(static_cast<int64_t>(i));
    }
  }
  if (res.enumerated > 0 && res.invalid == res.enumerated) {
    return Status::Error("no valid layout: the constraints (--fix/--forbid, --gpus " +
                         std::to_string(o.gpus) + ", --global-batch " + std::to_string(o.global_batch) +
                         ") leave nothing that divides the model and the GPUs");
  }
  if (res.enumerated == 0) {
    return Status::Error("no layout matches the constraints: check --fix/--forbid against the model (" +
                         std::to_string(m.heads) + " heads, " + std::to_string(m.layers) +
                         " layers), --gpus " + std::to_string(o.gpus) + " and --global-batch " +
                         std::to_string(o.global_batch));
  }
  if (fitting.empty()) {
    std::sort(over.begin(), over.end(), [&](int64_t a, int64_t b) {
      return memory[a] != memory[b] ? memory[a] < memory[b] : FormatLayout(all[a]) < FormatLayout(all[b]);
    });
    for (size_t i = 0; i < over.size() && i < 5; ++i) {
      Candidate c;
      c.layout = all[over[i]];
      c.memory_bytes = memory[over[i]];
      res.closest.push_back(c);
    }
    if (!res.closest.empty()) {
      res.advice = Advice(m, hw, res.closest.front().layout, res.memory_limit_bytes, o.gpus);
    }
    return res;
  }

  // 3. Search by the bounds. The estimate (the simulation without contention) never exceeds
  //    the simulated time and the bound never exceeds the estimate (tests/
  //    estimate_property_test.cc), so candidates are estimated in bound order and simulated
  //    in estimate order until no unsimulated candidate's estimate can beat the best
  //    simulated score: the winner is the best simulated layout of the whole space, whatever
  //    --top says; --top only sets how many are simulated and shown at least.
  std::vector<Candidate> cands(fitting.size());
  std::vector<double> lower(fitting.size());
  std::vector<std::string> key(fitting.size());
  for (size_t k = 0; k < fitting.size(); ++k) {
    cands[k].layout = all[fitting[k]];
    cands[k].memory_bytes = bound[fitting[k]].peak_memory_bytes;
    Candidate b = cands[k];
    b.estimated_time_s = bound[fitting[k]].iteration_time_s;
    lower[k] = Score(b, m, hw, o);
    key[k] = FormatLayout(cands[k].layout);
  }
  std::vector<size_t> by_bound(cands.size());
  for (size_t i = 0; i < by_bound.size(); ++i) by_bound[i] = i;
  std::sort(by_bound.begin(), by_bound.end(), [&](size_t a, size_t b) {
    return lower[a] != lower[b] ? lower[a] < lower[b] : key[a] < key[b];
  });
  // Work goes in fixed-size batches, so what is estimated and simulated does not depend on the
  // thread count.
  constexpr size_t kBatch = 16, kTailBatch = 4;
  std::vector<double> score(cands.size(), 0);
  size_t next_bound = 0;  // by_bound position of the next candidate to estimate
  std::vector<size_t> estimated;  // candidates estimated, not yet simulated (a heap by score)
  auto heap_less = [&](size_t a, size_t b) {  // std heap is a max-heap: invert
    return score[a] != score[b] ? score[a] > score[b] : key[a] > key[b];
  };
  // Estimates the next batch in bound order.
  auto estimate_batch = [&]() {
    const size_t n = std::min(kBatch, by_bound.size() - next_bound);
    ParallelFor(static_cast<int64_t>(n), threads, [&](int64_t i) {
      Candidate& c = cands[by_bound[next_bound + i]];
      c.estimated_time_s = EstimateTime(m, comm, c.layout).iteration_time_s;
      score[by_bound[next_bound + i]] = Score(c, m, hw, o);
    });
    for (size_t i = 0; i < n; ++i) {
      estimated.push_back(by_bound[next_bound + i]);
      std::push_heap(estimated.begin(), estimated.end(), heap_less);
    }
    next_bound += n;
    res.estimated += static_cast<int64_t>(n);
  };
  // The next candidate in estimate order: every candidate whose bound is below the best
  // estimate so far must be estimated first.
  auto pop_next = [&]() -> size_t {
    while (true) {
      const double top = estimated.empty() ? std::numeric_limits<double>::infinity() : score[estimated.front()];
      if (next_bound == by_bound.size() || lower[by_bound[next_bound]] >= top) break;
      estimate_batch();
    }
    if (estimated.empty()) return SIZE_MAX;
    std::pop_heap(estimated.begin(), estimated.end(), heap_less);
    const size_t c = estimated.back();
    estimated.pop_back();
    return c;
  };
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> simulated;
  std::vector<Candidate> done;
  const size_t want = static_cast<size_t>(std::max(1, o.top_k));
  while (true) {
    // First the --top candidates in estimate order; then, a few at a time, those whose
    // estimate is below the best simulated score.
    const size_t limit = done.size() < want ? want - done.size() : kTailBatch;
    std::vector<size_t> batch;
    while (batch.size() < limit) {
      const size_t c = pop_next();
      if (c == SIZE_MAX) break;
      if (done.size() >= want && score[c] >= best) {
        // Nothing left can beat the best: put it back and stop.
        estimated.push_back(c);
        std::push_heap(estimated.begin(), estimated.end(), heap_less);
        break;
      }
      batch.push_back(c);
    }
    if (batch.empty()) break;
    std::vector<Status> errors(batch.size());
    ParallelFor(static_cast<int64_t>(batch.size()), threads, [&](int64_t i) {
      Candidate& c = cands[batch[i]];
      SimOptions so;
      so.critical_path = false;
      so.check_acyclic = false;  // programs from BuildIteration; a deadlock would still be caught
      so.collectives = &comm;
      StatusOr<SimResult> r = Simulate(m, cluster, c.layout, so);
      if (!r.ok()) {
        errors[i] = r.status();
        return;
      }
      c.sim = *r;
      c.simulated = true;
    }, [&](int64_t d) { progress("simulate", static_cast<double>(d) / static_cast<double>(batch.size())); });
    for (const Status& e : errors) SHARDSIM_RETURN_IF_ERROR(e);
    for (size_t c : batch) {
      done.push_back(cands[c]);
      best = std::min(best, Score(cands[c], m, hw, o));
    }
  }
  lap("estimate+simulate");
  res.simulated = static_cast<int64_t>(done.size());
  std::vector<double> sim_score(done.size());
  for (size_t i = 0; i < done.size(); ++i) sim_score[i] = Score(done[i], m, hw, o);
  std::vector<size_t> sim_order(done.size());
  for (size_t i = 0; i < done.size(); ++i) sim_order[i] = i;
  std::sort(sim_order.begin(), sim_order.end(), [&](size_t a, size_t b) {
    return sim_score[a] != sim_score[b] ? sim_score[a] < sim_score[b]
                                        : FormatLayout(done[a].layout) < FormatLayout(done[b].layout);
  });
  for (size_t i = 0; i < sim_order.size() && i < want; ++i) res.ranked.push_back(std::move(done[sim_order[i]]));
  if (res.ranked.size() >= 2) res.why = Explain(res.ranked[0], res.ranked[1]);
  return res;
}

}  // namespace shardsim::planner
