// See planner.h. The search space, pruning and ranking are described in docs/planner.md.
#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <tuple>

#include "planner/pipeline_splits.h"
#include "src/cost/memory.h"
#include "src/layout/validate.h"
#include "src/report/error_band.h"
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

// Whether --fix / --forbid allow a pipeline split (its four keys as LayoutValue writes them).
bool SplitAllowed(const PlanOptions& o, const PipelineSplit& p) {
  auto on = [](bool b) { return std::string(b ? "on" : "off"); };
  return Allowed(o, "first_stage_layers", Str(p.first_stage_layers)) &&
         Allowed(o, "last_stage_layers", Str(p.last_stage_layers)) &&
         Allowed(o, "embedding_in_split", on(p.embedding_in_split)) && Allowed(o, "loss_in_split", on(p.loss_in_split));
}

// Every layout of the space the options allow, in a fixed order. `group` numbers the runs of
// layouts that differ only in recompute and offload (the innermost loops).
std::vector<Layout> Enumerate(const ModelSpec& m, const HardwareSpec& hw, const PlanOptions& o,
                              std::vector<int32_t>* group, int64_t* stack_refused = nullptr) {
  std::vector<Layout> out;
  int32_t next_group = 0;
  const int64_t n = o.gpus;
  const int64_t gbs = o.global_batch;
  // Layout switches that are not searched take the fixed value or the default.
  Layout base;
  base.gbs = gbs;
  // The stack's defaults for what is not searched (DeepSpeed's reduce_bucket_size, ...), then
  // what --fix says.
  std::map<std::string, std::string> unsearched = o.fixed;
  if (o.stack) {
    const std::map<std::string, std::string> defaults = StackDefaultsOn(*o.stack, hw);
    unsearched.insert(defaults.begin(), defaults.end());  // --fix wins
  }
  for (const auto& [key, value] : unsearched) {
    static const std::set<std::string> kSearched = {
        "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "mbs", "zero", "sp", "recompute", "schedule", "offload", "gbs",
        "first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split", "overlap_tp"};
    if (!kSearched.count(key)) {
      StatusOr<Layout> one = ParseLayout(key + "=" + value);
      if (!one.ok()) continue;  // ParseFixed already checked it
      Layout& b = base;
      const Layout& v = *one;
      if (key == "dtype") { b.dtype = v.dtype; b.dtype_given = true; }
      if (key == "compress") b.grad_compression = v.grad_compression;
      if (key == "overlap_dp") b.overlap_dp = v.overlap_dp;
      if (key == "overlap_pp") b.overlap_pp = v.overlap_pp;
      if (key == "prefetch") b.prefetch = v.prefetch;
      if (key == "attention") b.attention = v.attention;
      if (key == "kernels") b.kernels = v.kernels;
      if (key == "cuda_graphs") b.cuda_graphs = v.cuda_graphs;
      if (key == "bucket_params") b.bucket_params = v.bucket_params;
      if (key == "live_params") b.live_params = v.live_params;
      if (key == "grad_bf16") b.grad_bf16 = v.grad_bf16;
    }
  }
  // Userbuffers' TP overlap (overlap_tp=on) is searched on sm90 and later only: Transformer
  // Engine's comm+GEMM overlap relies on CUDA multicast over NVSwitch (NVIDIA/TransformerEngine
  // issues #1071 and #966, a maintainer: without multicast, UB_SKIPMC=1 falls back to CUDA IPC
  // handles "so it may not be as performant"), which Hopper's NVSwitch generation brought; on an
  // A100 it is --fix'ed or not at all. A GPU without an architecture is not restricted.
  const bool userbuffers = hw.gpu.architecture.rfind("sm", 0) != 0 ||
                           std::atoi(hw.gpu.architecture.c_str() + 2) >= 90 || o.fixed.count("overlap_tp");
  // Unsearched switches the stack decides: where the stack refuses a switch's default and it is
  // not fixed, the other value (the 2021 and 2022 stacks ran unfused attention).
  auto stack_refuses = [&](const std::string& key) {
    if (!o.stack || o.fixed.count(key)) return false;
    for (const StackRule& r : o.stack->rules) {
      for (const StackTerm& t : r.refuse) {
        if (t.key == key) return true;
      }
    }
    return false;
  };
  const bool stack_attention = stack_refuses("attention"), stack_overlap_pp = stack_refuses("overlap_pp");
  // The kernels likewise where a rule tests them (torchtitan: eager, its default without
  // torch.compile, cannot run float8 or async TP; compiled can; fused it never runs).
  const bool stack_kernels = o.stack && !o.fixed.count("kernels") &&
                             std::any_of(o.stack->rules.begin(), o.stack->rules.end(),
                                         [](const StackRule& r) { return StackRuleMentions(r, "kernels"); });
  // Whether the stack runs `l`, trying the other value of such a switch where it refuses the
  // layout as it stands (one refusal check for most layouts).
  auto stack_runs = [&](Layout& l) {
    if (!o.stack) return true;
    const StackRefusing refusing = StackRefusingTerm(*o.stack, l);
    if (!refusing.rule) return true;
    // `l` with one switch flipped, where the stack runs that.
    auto runs_flipped = [&](bool searched, const char* key, auto flip) {
      if (!searched || !StackRuleMentions(*refusing.rule, key)) return false;
      Layout other = l;
      flip(other);
      if (StackRefusingTerm(*o.stack, other).rule) return false;
      l = other;
      return true;
    };
    // The kernels: the first other value the stack runs (torchtitan: eager, else compiled).
    auto kernels_to = [&](Kernels k) {
      return l.kernels != k && runs_flipped(stack_kernels, "kernels", [k](Layout& x) { x.kernels = k; });
    };
    return runs_flipped(stack_attention, "attention", [](Layout& x) {
             x.attention = x.attention == AttentionImpl::kFlash ? AttentionImpl::kUnfused : AttentionImpl::kFlash;
           }) ||
           kernels_to(Kernels::kEager) || kernels_to(Kernels::kCompiled) || kernels_to(Kernels::kFused) ||
           runs_flipped(stack_overlap_pp && l.pp > 1, "overlap_pp", [](Layout& x) { x.overlap_pp = !x.overlap_pp; });
  };
  // Precision: the --fix value; else bf16 (fp32 without a bf16 rate) and, on a GPU with an fp8
  // rate, fp8 too (Transformer Engine's fp8 GEMMs over bf16 weights; the published fp8 runs
  // have their own error band, docs/validation/error-bands.yaml). --forbid dtype=fp8 keeps bf16.
  std::vector<DType> dtypes = {base.dtype};
  if (!base.dtype_given) {
    dtypes = {hw.gpu.Peak(DType::kBf16) ? DType::kBf16 : DType::kFp32};
    if (hw.gpu.Peak(DType::kFp8).value_or(0) > 0 && Allowed(o, "dtype", "fp8")) dtypes.push_back(DType::kFp8);
    if (!Allowed(o, "dtype", DTypeName(dtypes.front()))) dtypes.erase(dtypes.begin());
  }
  base.dtype_given = true;
  base.schedule_given = true;

  // The recompute and offload values --fix/--forbid allow (the innermost loops: checked once).
  // recompute=op (torchtitan's per-op checkpointing) only where the stack may run it: not
  // where a rule refuses it whatever the layout (Megatron's and DeepSpeed's stacks), nor
  // without a stack unless fixed (a framework's own policy, not searched for every framework).
  const auto stack_never_runs = [&](const std::string& key, const std::string& value) {
    if (!o.stack) return !o.fixed.count(key);
    for (const StackRule& r : o.stack->rules) {
      if (!r.when.empty()) continue;
      for (const StackTerm& t : r.refuse) {
        if (!t.greater && t.key == key && t.value == value) return true;
      }
    }
    return false;
  };
  std::vector<Recompute> recomputes;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kOp, Recompute::kFull}) {
    if (rc == Recompute::kOp && stack_never_runs("recompute", "op")) continue;
    if (Allowed(o, "recompute", RecomputeName(rc))) recomputes.push_back(rc);
  }
  std::vector<Offload> offloads;
  for (Offload off : {Offload::kNone, Offload::kOptimizer, Offload::kOptimizerAndParams}) {
    if (Allowed(o, "offload", OffloadName(off))) offloads.push_back(off);
  }

  // The interleaved schedule overlaps its sends unless told not to: what Megatron-LM does by
  // default (validate_args sets overlap_p2p_comm only with virtual stages; the other schedules
  // cannot overlap them).
  const bool interleaved_overlaps_pp = !o.fixed.count("overlap_pp") && Allowed(o, "overlap_pp", "on");

  // The pipeline splits of each (pp, vpp, schedule): the same for every tp, cp, ep and mbs.
  std::map<std::tuple<int64_t, int64_t, Schedule>, std::vector<PipelineSplit>> splits;
  for (int64_t tp : Divisors(std::min<int64_t>(n, hw.node.gpus))) {
    if (!Allowed(o, "tp", Str(tp)) || m.heads % tp != 0) continue;
    for (int64_t cp = 1; cp <= n / tp; cp *= 2) {
      if (!Allowed(o, "cp", Str(cp)) || (cp > 1 && m.seq_len % (2 * cp) != 0)) continue;
      // Every pp up to the layers; one that does not divide them runs an uneven split.
      for (int64_t pp : Divisors(n / (tp * cp))) {
        if (pp > m.layers || !Allowed(o, "pp", Str(pp))) continue;
        const int64_t dp = n / (tp * cp * pp);
        if (!Allowed(o, "dp", Str(dp)) || gbs % dp != 0) continue;
        // Expert parallelism and the experts' TP, folded out of the stage's tp x cp x dp ranks
        // (Layout::edp): the experts split as the dense layers (Megatron-Core's default), or
        // whole on each rank under TP (etp 1: torchtitan's default, Megatron-Bridge's MoE
        // recipes), which needs sp (the layout check). Searched under a stack, whose rules say
        // whether it runs it; not yet in the stack-free space, though the runtime runs it
        // (runtime/README.md): with it the estimate property test's sample (1,350 layouts drawn
        // from this space) reaches a dense layout whose estimate is 8.05 % below its simulation,
        // past that test's 8 % (the contention window, tests/estimate_property_test.cc).
        std::vector<std::pair<int64_t, int64_t>> expert_splits = {{1, tp}};  // (ep, etp)
        if (m.moe) {
          expert_splits.clear();
          std::vector<int64_t> etps = {tp};
          if (tp > 1 && o.stack) etps.push_back(1);
          for (int64_t etp : etps) {
            for (int64_t e : Divisors(m.moe->experts)) {
              if ((tp * cp * dp) % (e * etp) == 0) expert_splits.emplace_back(e, etp);
            }
          }
        }
        for (const auto& [ep, etp] : expert_splits) {
          if (!Allowed(o, "ep", Str(ep)) || !Allowed(o, "etp", Str(etp))) continue;
          for (int64_t mbs = 1; mbs <= gbs / dp; mbs *= 2) {
            if (!Allowed(o, "mbs", Str(mbs)) || (gbs / dp) % mbs != 0) continue;
            const int64_t micro = gbs / (dp * mbs);
            struct Pipe {
              int64_t vpp;
              Schedule schedule;
              PipelineSplit split;
            };
            std::vector<Pipe> pipes;
            auto add = [&](int64_t v, Schedule s) {
              auto key = std::make_tuple(pp, v, s);
              auto it = splits.find(key);
              if (it == splits.end()) it = splits.emplace(key, SearchedSplits(m, pp, v, s)).first;
              for (const PipelineSplit& split : it->second) {
                if (SplitAllowed(o, split)) pipes.push_back({v, s, split});
              }
            };
            if (pp == 1) {
              pipes.push_back({1, Schedule::k1F1B, PipelineSplit{}});
            } else {
              for (Schedule s : {Schedule::k1F1B, Schedule::kGpipe, Schedule::kZeroBubble}) add(1, s);
              for (int64_t v = 2; micro % pp == 0 && v * pp <= m.layers + 2; ++v) add(v, Schedule::kInterleaved);
              add(2, Schedule::kZeroBubbleV);
            }
            for (const auto& [vpp, schedule, split] : pipes) {
              if (!Allowed(o, "vpp", Str(vpp)) || !Allowed(o, "schedule", ScheduleName(schedule))) continue;
              // ZeRO where there are replicas: every stage over DP x CP; without them, under a
              // stack, the distributed optimizer alone (zero 1) where the experts have replicas of
              // their own (etp 1 under TP: Megatron-Core shards the experts' states over their
              // expert-DP group whatever the dense DP, distrib_optimizer.py's expert buffers),
              // which the runtime, the stack-free space's, does not run (runtime/README.md).
              const int64_t edp = tp * cp * dp / (etp * ep);
              const int max_zero = dp * cp > 1 ? 3 : (m.moe && edp > 1 && o.stack ? 1 : 0);
              for (int zero = 0; zero <= max_zero; ++zero) {
                if (!Allowed(o, "zero", Str(zero))) continue;
                for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
                  if (!Allowed(o, "sp", sp ? "on" : "off")) continue;
                  if (etp != tp && tp > 1 && sp == 0) continue;  // experts apart from TP need SP (CheckLayout)
                  // TP overlap, where there is TP (the stack keeps what it runs: Megatron-Core
                  // and Transformer Engine always overlap the backward's, docs/layout.md).
                  for (int ot = 0; ot <= (tp > 1 ? (userbuffers ? 2 : 1) : 0); ++ot) {
                  const TpOverlap overlap = tp > 1 ? static_cast<TpOverlap>(ot) : base.overlap_tp;
                  if (tp > 1 && !Allowed(o, "overlap_tp", TpOverlapName(overlap))) continue;  // (no effect at tp 1)
                  for (DType dtype : dtypes) {
                  ++next_group;
                  for (Recompute rc : recomputes) {
                    for (Offload off : offloads) {
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
                      l.etp = etp == tp ? 0 : etp;
                      l.mbs = mbs;
                      l.vpp = vpp;
                      l.schedule = schedule;
                      l.zero = zero;
                      l.sp = sp == 1;
                      l.recompute = rc;
                      l.offload = off;
                      l.overlap_tp = overlap;
                      l.dtype = dtype;
                      if (schedule == Schedule::kInterleaved && interleaved_overlaps_pp) l.overlap_pp = true;
                      split.ApplyTo(l);
                      // What the stack cannot run is counted, not kept (most of the space
                      // under a stack: the check, the bounds and the memory never see it).
                      if (!stack_runs(l)) {
                        if (stack_refused) ++*stack_refused;
                        continue;
                      }
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
    }
  }
  return out;
}

double PeakMemory(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  // The first stage holds the most micro-batches in flight and the embeddings; the last holds
  // the logits and the head: the peak is on one of them.
  // (An uneven split's middle stages, alike, may hold more layers: stage 1 stands for them.)
  double peak = StageMemory(m, hw, l, 0).total();
  if (l.pp > 1) peak = std::max(peak, StageMemory(m, hw, l, l.pp - 1).total());
  if (l.pp > 2 && l.uneven_split()) peak = std::max(peak, StageMemory(m, hw, l, 1).total());
  return peak;
}

bool HostFits(const ModelSpec& m, const HardwareSpec& hw, const Layout& l) {
  if (l.offload == Offload::kNone) return true;
  return StageMemory(m, hw, l, 0).host * hw.node.gpus <= hw.node.host.memory_bytes;
}

// Which keys differ between two layouts, "key a vs b" (keys FormatLayout leaves out of one of
// them, such as an uneven split's, compared at their LayoutValue).
std::vector<std::string> Differences(const Layout& a, const Layout& b) {
  std::vector<std::string> out;
  std::vector<std::string> keys;
  for (const Layout* x : {&a, &b}) {
    for (const std::string& item : Split(FormatLayout(*x), ',')) {
      std::string key = item.substr(0, item.find('='));
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
    }
  }
  for (const std::string& key : keys) {
    const std::string va = LayoutValue(a, key).value_or("?"), vb = LayoutValue(b, key).value_or("?");
    if (va != vb) out.push_back(key + " " + va + " vs " + vb);
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

// "peak 63.9 GiB, 89 % of the limit; no framework-specific feature; 7.9 % exposed communication"
std::string RobustnessText(const Robustness& r, const Candidate& c, double limit) {
  std::string out = "peak " + Fmt("%.1f", c.sim.peak_memory_bytes / 1073741824.0) + " GiB, " +
                    Fmt("%.0f", 100 * c.sim.peak_memory_bytes / limit) + " % of the limit" +
                    (r.tight ? " (tight)" : "") + "; ";
  out += r.features.empty() ? "no framework-specific feature" : Join(r.features, ", ");
  return out + "; " + Fmt("%.1f", 100 * r.exposed_comm) + " % exposed communication";
}

// Why the most robust tie won over the fastest layout.
std::string TieWhy(const PlanResult& res, double tolerance, double fastest_score, double winner_score) {
  const Candidate& win = res.ranked.front();
  const Candidate& fast = *res.fastest;
  const Robustness rw = RobustnessOf(win, winner_score, res.memory_limit_bytes, res.tight_fraction, tolerance);
  const Robustness rf = RobustnessOf(fast, fastest_score, res.memory_limit_bytes, res.tight_fraction, tolerance);
  std::ostringstream out;
  out << res.ties << " layouts simulate within " << Fmt("%.1f", 100 * tolerance)
      << " % of the fastest, the published runs' ranking tolerance (the median error between two "
         "runs' predictions, docs/validation/error-bands.yaml): ties, and the winner is the most robust of them ("
      << RobustnessText(rw, win, res.memory_limit_bytes) << "). The fastest, " << FormatLayout(fast.layout) << ", is "
      << Fmt("%.1f", 100 * (winner_score / fastest_score - 1)) << " % faster by the model, but ";
  if (rf.tight != rw.tight) {
    out << "its peak is over " << Fmt("%.0f", 100 * res.tight_fraction) << " % of the memory limit (" << res.tight_why
        << ")";
  } else if (rf.tight && rf.tight_step != rw.tight_step) {
    out << "both peaks are over " << Fmt("%.0f", 100 * res.tight_fraction) << " % of the memory limit (" << res.tight_why
        << ") and its, " << Fmt("%.1f", fast.sim.peak_memory_bytes / 1073741824.0)
        << " GiB, is higher by a step of 5 % of the limit or more: less headroom";
  } else if (rf.features.size() != rw.features.size()) {
    out << "it needs more framework-specific features (" << (rf.features.empty() ? "none" : Join(rf.features, ", ")) << ")";
  } else if (rf.comm_key != rw.comm_key) {
    out << "it exposes more communication (" << Fmt("%.1f", 100 * rf.exposed_comm) << " %, a step of "
        << Fmt("%.1f", 100 * tolerance) << " % of the iteration or more above)";
  } else {
    out << "it is no more robust";
  }
  out << "; --tie-tolerance 0 picks the fastest.";
  return out.str();
}

// For the layout closest to fitting: which single knob would make it fit, or how much it saves.
std::vector<std::string> Advice(const ModelSpec& m, const HardwareSpec& hw, const Layout& l,
                                double limit, int64_t gpus, const std::optional<StackSpec>& stack) {
  std::vector<std::string> out;
  const double now = PeakMemory(m, hw, l);
  struct Knob {
    std::string name;
    Layout layout;
  };
  std::vector<Knob> knobs;
  if (l.dp_cp() > 1 && l.zero < 3) {
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
  if (l.dp_cp() > 1 && l.offload == Offload::kNone) {
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
    // A knob the stack cannot run says so, with the stack's reason.
    const std::optional<std::string> refused = stack ? StackRefusal(*stack, k.layout) : std::nullopt;
    out.push_back(k.name + ": " + Fmt("%.1f", now / 1073741824.0) + " -> " + Fmt("%.1f", mem / 1073741824.0) +
                  " GiB" + (mem <= limit ? " (fits)" : " (still over)") +
                  (refused ? "; " + *refused : ""));
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
  // The usable memory (capacity less fragmentation), and no more than the fraction of the
  // capacity the user allows.
  res.memory_limit_bytes = std::min(hw.gpu.UsableMemoryBytes(), hw.gpu.memory_bytes * o.max_memory_fraction);
  res.tight_fraction = TightMemoryFraction(hw.gpu, &res.tight_why);
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
  progress("enumerate", 0);
  std::vector<Layout> all = Enumerate(m, hw, o, &group, &res.stack_refused);
  lap("enumerate");
  progress("check", 0);
  res.enumerated = static_cast<int64_t>(all.size()) + res.stack_refused;
  std::vector<char> valid(all.size(), 0);
  std::vector<double> memory(all.size(), 0);
  ParallelFor(static_cast<int64_t>(all.size()), threads, [&](int64_t i) {
    if (!CheckLayout(all[i], m, hw, o.gpus).ok()) return;
    valid[i] = 1;
    memory[i] = PeakMemory(m, hw, all[i]);
  });
  lap("check+memory");
  progress("search", 0);
  // 2. What passes the cheap memory bound, in the order of the compute bound (ties: less
  //    recompute and offload first, so a layout's dominators come before it).
  const CollectiveModel comm(cluster);
  std::vector<int64_t> pre, over;
  if (o.stack) res.stack = o.stack->name;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!valid[i]) {
      ++res.invalid;
    } else if (memory[i] > res.memory_limit_bytes || !HostFits(m, hw, all[i])) {
      ++res.pruned_memory;
      over.push_back(static_cast<int64_t>(i));
    } else {
      pre.push_back(static_cast<int64_t>(i));
    }
  }
  if (res.stack_refused > 0 && res.invalid == static_cast<int64_t>(all.size())) {
    // The rule that refuses the most of the valid layouts, each rule counted on its own, as
    // StackRefusal words it (a key the planner does not search, such as attention, can refuse
    // them all: --fix sets it). The space again without the stack, to see them.
    PlanOptions bare = o;
    bare.stack.reset();
    std::vector<int32_t> bare_group;
    const std::vector<Layout> every = Enumerate(m, hw, bare, &bare_group);
    std::map<std::string, int64_t> reasons;
    int64_t valid_refused = 0;
    for (const Layout& l : every) {
      if (!StackRefusal(*o.stack, l) || !CheckLayout(l, m, hw, o.gpus).ok()) continue;
      ++valid_refused;
      for (const StackRule& rule : o.stack->rules) {
        StackSpec one = *o.stack;
        one.rules = {rule};
        if (const std::optional<std::string> why = StackRefusal(one, l)) ++reasons[*why];
      }
    }
    if (reasons.empty()) reasons["stack '" + res.stack + "' refuses every layout"] = res.stack_refused;
    const auto most = std::max_element(reasons.begin(), reasons.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    return Status::Error("no layout the stack '" + res.stack + "' can run: of " + std::to_string(res.enumerated) +
                         " layouts, " + std::to_string(res.invalid) + " are invalid and " +
                         std::to_string(res.stack_refused) + " use what it cannot run (stacks/" + res.stack +
                         ".yaml); the most common reason, for " + std::to_string(most->second) + " of them: " + most->first +
                         (most->second == valid_refused ? " (the keys the planner does not search take their "
                                                              "default unless --fix sets them, docs/planner.md)"
                                                            : "") +
                         // Data parallelism alone is never enumerated when dp = every GPU does
                         // not divide the batch: say so, as a DP-only stack needs it.
                         (o.global_batch % o.gpus != 0
                              ? "; data parallelism alone (dp = " + std::to_string(o.gpus) +
                                    ") was not a candidate: it needs --global-batch a multiple of " +
                                    std::to_string(o.gpus) + ", found " + std::to_string(o.global_batch)
                              : ""));
  }
  // Nothing valid: say which constraint, from the layouts' own errors (and the flags only
  // where some were given).
  const bool constrained = !o.fixed.empty() || !o.forbidden.empty();
  const std::string flags = constrained ? "--fix/--forbid, " : "";
  if (res.enumerated > 0 && res.invalid == res.enumerated) {
    std::map<std::string, int64_t> reasons;  // each invalid layout's first error, numbers and all
    for (const Layout& l : all) {
      const LayoutCheck c = CheckLayout(l, m, hw, o.gpus);
      if (!c.errors.empty()) ++reasons[c.errors.front()];
    }
    const auto most = std::max_element(reasons.begin(), reasons.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    return Status::Error("no valid layout among " + std::to_string(res.enumerated) + " (" + flags + "--gpus " +
                         std::to_string(o.gpus) + ", --global-batch " + std::to_string(o.global_batch) +
                         "); the most common reason, for " + std::to_string(most->second) + " of them: " + most->first);
  }
  if (res.enumerated == 0) {
    // No combination of the searched sizes multiplies to the GPUs and divides the batch.
    std::string why = "no tp x cp x pp x dp with tp dividing the " + std::to_string(m.heads) +
                      " heads, pp at most the " + std::to_string(m.layers) + " layers and dp dividing --global-batch " +
                      std::to_string(o.global_batch) + " makes --gpus " + std::to_string(o.gpus);
    return Status::Error("no layout to search: " + why + (constrained ? " under --fix/--forbid" : ""));
  }
  std::vector<std::string> key(all.size());
  std::vector<double> lower0(all.size(), 0);
  // Each layer shape (LayerShapeKey: what the layer's ops and costs depend on) is prepared once
  // for every layout that shares it; shape[i] points at layout i's once prepared. The map is
  // filled before the parallel bounds read it, and afterwards only by the (serial) search.
  std::map<std::string, std::shared_ptr<const LayerShapeCosts>> shapes;
  std::vector<const LayerShapeCosts*> shape(all.size(), nullptr);
  auto prepare_shapes = [&](const std::vector<int64_t>& ids) {
    std::vector<std::string> keys(ids.size());
    ParallelFor(static_cast<int64_t>(ids.size()), threads, [&](int64_t k) { keys[k] = LayerShapeKey(all[ids[k]]); });
    std::vector<std::pair<std::string, int64_t>> missing;
    for (size_t k = 0; k < ids.size(); ++k) {
      if (shapes.emplace(keys[k], nullptr).second) missing.emplace_back(keys[k], ids[k]);
    }
    std::vector<std::shared_ptr<const LayerShapeCosts>> made(missing.size());
    ParallelFor(static_cast<int64_t>(missing.size()), threads,
                [&](int64_t k) { made[k] = PrepareLayerShape(m, hw, all[missing[k].second]); });
    for (size_t k = 0; k < missing.size(); ++k) shapes[missing[k].first] = made[k];
    for (size_t k = 0; k < ids.size(); ++k) shape[ids[k]] = shapes.at(keys[k]).get();
  };
  auto compute_bound = [&](int64_t i) {
    key[i] = FormatLayout(all[i]);
    Candidate b;
    b.layout = all[i];
    b.estimated_time_s = ComputeLowerBound(m, comm, all[i], shape[i]);
    lower0[i] = Score(b, m, hw, o);
  };
  // Each group's members, least recompute and offload first (the enumeration's order). A
  // group enters the search with one member at a time: the next one no fitting member
  // dominates, once the one before is bounded.
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(group.empty() ? 0 : group.back() + 1));
  for (int64_t i : pre) members[group[i]].push_back(i);
  std::vector<size_t> cursor(members.size(), 0);
  std::vector<std::vector<int64_t>> fit_in_group(members.size());
  auto less0 = [&](int64_t a, int64_t b) {  // a after b in the min-heap
    if (lower0[a] != lower0[b]) return lower0[a] > lower0[b];
    if (all[a].recompute != all[b].recompute) return all[a].recompute > all[b].recompute;
    if (all[a].offload != all[b].offload) return all[a].offload > all[b].offload;
    return key[a] > key[b];
  };
  std::vector<int64_t> heap0;
  {
    std::vector<int64_t> heads;
    for (const std::vector<int64_t>& g : members) {
      if (!g.empty()) heads.push_back(g.front());
    }
    prepare_shapes(heads);
    ParallelFor(static_cast<int64_t>(heads.size()), threads, [&](int64_t k) { compute_bound(heads[k]); });
    for (size_t g = 0; g < members.size(); ++g) cursor[g] = members[g].empty() ? 0 : 1;
    heap0 = heads;
    std::make_heap(heap0.begin(), heap0.end(), less0);
  }
  // Enters group g's next member that no fitting member dominates.
  auto advance = [&](int32_t g) {
    const std::vector<int64_t>& fit = fit_in_group[g];
    while (cursor[g] < members[g].size()) {
      const int64_t i = members[g][cursor[g]++];
      if (std::any_of(fit.begin(), fit.end(), [&](int64_t j) {
            return all[j].recompute <= all[i].recompute && all[j].offload <= all[i].offload;
          })) {
        ++res.dominated;
        continue;
      }
      prepare_shapes({i});
      compute_bound(i);
      heap0.push_back(i);
      std::push_heap(heap0.begin(), heap0.end(), less0);
      return;
    }
  };
  lap("compute bound");

  // 3. Branch and bound. Each level's bound is below the next (tests/
  //    estimate_property_test.cc): the compute bound and the plan's bound <= the estimate <=
  //    the simulated time. A level's best is taken only once every layout whose lower level
  //    is below it has been raised to its level; so candidates are simulated in estimate
  //    order, until no estimate left can beat the best simulated score. Work goes in
  //    fixed-size batches, so what is examined does not depend on the thread count.
  constexpr size_t kBatch = 16, kTailBatch = 4;
  std::vector<Candidate> cands;     // bounded layouts that fit exactly
  std::vector<double> lower1, score;  // per candidate: plan bound's score, estimate's score
  std::vector<std::string> ckey;
  auto by = [](const std::vector<double>& v, const std::vector<std::string>& k) {
    return [&v, &k](size_t a, size_t b) { return v[a] != v[b] ? v[a] > v[b] : k[a] > k[b]; };  // min-heap
  };
  std::vector<size_t> heap1, heap2;  // bounded (by lower1), estimated (by score)
  auto bound_batch = [&]() {
    std::vector<int64_t> batch;
    while (batch.size() < kBatch && !heap0.empty()) {
      std::pop_heap(heap0.begin(), heap0.end(), less0);
      batch.push_back(heap0.back());
      heap0.pop_back();
    }
    std::vector<QuickEstimate> b(batch.size());
    ParallelFor(static_cast<int64_t>(batch.size()), threads, [&](int64_t k) { b[k] = EstimateBound(m, comm, all[batch[k]]); });
    for (size_t k = 0; k < batch.size(); ++k) {
      const int64_t i = batch[k];
      std::vector<int64_t>& fit = fit_in_group[group[i]];
      if (std::any_of(fit.begin(), fit.end(), [&](int64_t j) {
            return all[j].recompute <= all[i].recompute && all[j].offload <= all[i].offload;
          })) {
        ++res.dominated;
        advance(group[i]);
        continue;
      }
      ++res.bounded;
      if (!b[k].fits || b[k].peak_memory_bytes > res.memory_limit_bytes) {
        ++res.pruned_memory;
        memory[i] = std::max(memory[i], b[k].peak_memory_bytes);
        over.push_back(i);
        advance(group[i]);
        continue;
      }
      fit.push_back(i);
      advance(group[i]);
      Candidate c;
      c.layout = all[i];
      c.memory_bytes = b[k].peak_memory_bytes;
      c.estimated_time_s = b[k].iteration_time_s;
      lower1.push_back(Score(c, m, hw, o));
      score.push_back(0);
      ckey.push_back(key[i]);
      cands.push_back(c);
      heap1.push_back(cands.size() - 1);
      std::push_heap(heap1.begin(), heap1.end(), by(lower1, ckey));
    }
  };
  // The bounded candidate with the least plan bound over the whole space, or SIZE_MAX.
  auto peek1 = [&]() -> size_t {
    while (!heap0.empty() && (heap1.empty() || lower0[heap0.front()] < lower1[heap1.front()])) bound_batch();
    return heap1.empty() ? SIZE_MAX : heap1.front();
  };
  auto pop1 = [&]() {
    std::pop_heap(heap1.begin(), heap1.end(), by(lower1, ckey));
    heap1.pop_back();
  };
  // The candidate with the least estimate over the whole space, removed, or SIZE_MAX.
  auto pop_next = [&]() -> size_t {
    while (true) {
      const double top = heap2.empty() ? std::numeric_limits<double>::infinity() : score[heap2.front()];
      size_t c = peek1();
      if (c == SIZE_MAX || lower1[c] >= top) break;
      std::vector<size_t> batch;
      while (batch.size() < kBatch && c != SIZE_MAX && lower1[c] < top) {
        batch.push_back(c);
        pop1();
        c = peek1();
      }
      ParallelFor(static_cast<int64_t>(batch.size()), threads, [&](int64_t k) {
        Candidate& cand = cands[batch[k]];
        cand.estimated_time_s = EstimateTime(m, comm, cand.layout).iteration_time_s;
        score[batch[k]] = Score(cand, m, hw, o);
      });
      for (size_t b : batch) {
        heap2.push_back(b);
        std::push_heap(heap2.begin(), heap2.end(), by(score, ckey));
      }
      res.estimated += static_cast<int64_t>(batch.size());
    }
    if (heap2.empty()) return SIZE_MAX;
    std::pop_heap(heap2.begin(), heap2.end(), by(score, ckey));
    const size_t c = heap2.back();
    heap2.pop_back();
    return c;
  };
  auto push_back_estimated = [&](size_t c) {
    heap2.push_back(c);
    std::push_heap(heap2.begin(), heap2.end(), by(score, ckey));
  };
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> simulated;
  std::vector<Candidate> done;
  const size_t want = static_cast<size_t>(std::max(1, o.top_k));
  while (true) {
    // First the --top candidates in estimate order; then, a few at a time, those whose
    // estimate is below the best simulated score (times 1 + tie_tolerance: the ties).
    const size_t limit = done.size() < want ? want - done.size() : kTailBatch;
    std::vector<size_t> batch;
    while (batch.size() < limit) {
      const size_t c = pop_next();
      if (c == SIZE_MAX) break;
      if (done.size() >= want && score[c] >= best * (1 + o.tie_tolerance)) {
        push_back_estimated(c);  // nothing left can beat the best (or tie with it)
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
  lap("bound+estimate+simulate");
  res.simulated = static_cast<int64_t>(done.size());
  res.unexamined = static_cast<int64_t>(heap0.size());
  for (size_t g = 0; g < members.size(); ++g) res.unexamined += static_cast<int64_t>(members[g].size() - cursor[g]);
  if (done.empty()) {
    // Nothing fits: the least over memory, and which knob would help it.
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
      res.advice = Advice(m, hw, res.closest.front().layout, res.memory_limit_bytes, o.gpus, o.stack);
    }
    return res;
  }
  std::vector<double> sim_score(done.size());
  for (size_t i = 0; i < done.size(); ++i) sim_score[i] = Score(done[i], m, hw, o);
  std::vector<size_t> sim_order(done.size());
  for (size_t i = 0; i < done.size(); ++i) sim_order[i] = i;
  std::sort(sim_order.begin(), sim_order.end(), [&](size_t a, size_t b) {
    return sim_score[a] != sim_score[b] ? sim_score[a] < sim_score[b]
                                        : FormatLayout(done[a].layout) < FormatLayout(done[b].layout);
  });
  // Ties: every simulated layout within tie_tolerance of the best (the loop above simulated
  // all whose estimate is inside it); the most robust of them wins.
  const double best_score = sim_score[sim_order.front()];
  size_t winner = sim_order.front();
  Robustness most =
      RobustnessOf(done[winner], sim_score[winner], res.memory_limit_bytes, res.tight_fraction, o.tie_tolerance);
  res.ties = 0;
  for (size_t i : sim_order) {
    if (sim_score[i] > best_score * (1 + o.tie_tolerance)) break;
    ++res.ties;
    Robustness r = RobustnessOf(done[i], sim_score[i], res.memory_limit_bytes, res.tight_fraction, o.tie_tolerance);
    if (r < most) {
      winner = i;
      most = std::move(r);
    }
  }
  if (winner != sim_order.front()) res.fastest = done[sim_order.front()];
  res.ranked.push_back(done[winner]);
  for (size_t i = 0; i < sim_order.size() && res.ranked.size() < want; ++i) {
    if (sim_order[i] != winner) res.ranked.push_back(std::move(done[sim_order[i]]));
  }
  if (res.fastest) {
    res.why = TieWhy(res, o.tie_tolerance, Score(*res.fastest, m, hw, o), Score(res.ranked[0], m, hw, o));
  } else {
    if (res.ranked.size() >= 2) res.why = Explain(res.ranked[0], res.ranked[1]);
    if (res.ties > 1) {
      res.why = std::to_string(res.ties) + " layouts simulate within " + Fmt("%.1f", 100 * o.tie_tolerance) +
                " % of the best, the published runs' ranking tolerance: ties, of which the fastest is also the most "
                "robust (" + RobustnessText(RobustnessOf(res.ranked[0], 0, res.memory_limit_bytes, res.tight_fraction, o.tie_tolerance), res.ranked[0],
                                            res.memory_limit_bytes) + "). " + res.why;
    }
  }
  return res;
}

double ExposedCommFraction(const Candidate& c) {
  const RankResult& r = c.sim.ranks[c.sim.critical];
  double s = 0;
  for (Category k : {Category::kTp, Category::kCp, Category::kEp, Category::kPp, Category::kDp}) {
    s += r.breakdown_s[static_cast<int>(k)];
  }
  return s / c.sim.iteration_time_s;
}

bool Robustness::operator<(const Robustness& o) const {
  if (tight != o.tight) return !tight;
  if (tight && tight_step != o.tight_step) return tight_step < o.tight_step;
  if (features.size() != o.features.size()) return features.size() < o.features.size();
  if (comm_key != o.comm_key) return comm_key < o.comm_key;
  return score < o.score;
}

double TightMemoryFraction(const GpuSpec& gpu, std::string* why) {
  std::string none;
  if (const std::optional<MemoryBand> band = FindMemoryBand(gpu, &none)) {
    *why = "published peaks ran up to " + Fmt("%.2f", band->p90) + "x the prediction: the memory band's p90";
    return 1 / band->p90;
  }
  *why = "no memory band (" + none + "): the planner's " + Fmt("%.0f", 100 * (1 - kTightMemoryFraction)) + " %";
  return kTightMemoryFraction;
}

Robustness RobustnessOf(const Candidate& c, double score, double memory_limit_bytes, double tight_fraction,
                        double comm_step) {
  Robustness r;
  const Layout& l = c.layout;
  r.tight = c.sim.peak_memory_bytes > tight_fraction * memory_limit_bytes;
  if (r.tight) {
    r.tight_step = static_cast<int64_t>(std::floor(c.sim.peak_memory_bytes / memory_limit_bytes / (1 - kTightMemoryFraction)));
  }
  if (l.vpp > 1) r.features.push_back("interleaved schedule (vpp " + std::to_string(l.vpp) + ")");
  if (l.schedule == Schedule::kZeroBubble || l.schedule == Schedule::kZeroBubbleV) r.features.push_back("zero-bubble schedule");
  if (l.cp > 1) r.features.push_back("context parallelism");
  if (l.zero >= 2) r.features.push_back("ZeRO-" + std::to_string(l.zero));
  if (l.offload != Offload::kNone) r.features.push_back("offload");
  if (l.grad_compression > 1) r.features.push_back("gradient compression");
  // Only userbuffers' overlap is a feature to switch on: the backward's overlap is what
  // Megatron-Core and Transformer Engine do by default.
  if (l.overlap_tp == TpOverlap::kOn) {
    r.features.push_back(SeparateLinears(l.kernels) ? "TP communication overlap (async TP)"
                                                    : "TP communication overlap (userbuffers)");
  }
  if (l.fp8_params) r.features.push_back("fp8 parameters");
  r.exposed_comm = ExposedCommFraction(c);
  r.comm_key = comm_step > 0 ? std::floor(r.exposed_comm / comm_step) : r.exposed_comm;
  r.score = score;
  return r;
}

PlanFile WinnerPlanFile(const ModelSpec& m, const HardwareSpec& hw, const PlanResult& r,
                        const std::string& objective) {
  const Candidate& win = r.ranked.front();
  PlanFile plan;
  plan.model = m;
  plan.hardware = hw;
  plan.gpus = r.gpus;
  plan.layout = win.layout;
  plan.objective = objective;
  plan.predicted = {win.sim.iteration_time_s, win.sim.tokens_per_s, win.sim.model_tflops_per_gpu,
                    win.sim.hardware_tflops_per_gpu, win.sim.mfu, win.sim.peak_memory_bytes, win.sim.fits};
  return plan;
}

}  // namespace shardsim::planner
