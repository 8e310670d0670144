// See flow_network.h.
#include "src/sim/flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/util/check.h"

namespace shardsim {

FlowNetwork::FlowNetwork(std::vector<double> capacity) {
  for (double c : capacity) AddLink(c);
}

int32_t FlowNetwork::AddLink(double capacity) {
  CHECK(capacity > 0) << "link capacity must be positive";
  link_.emplace_back();
  link_.back().capacity = capacity;
  return static_cast<int32_t>(link_.size() - 1);
}

int32_t FlowNetwork::Add(const std::vector<Usage>& usage, double volume, SimTime now) {
  CHECK(volume >= 0) << "negative volume";
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<int32_t>(coflows_.size());
    coflows_.emplace_back();
    coflow_mark_.push_back(0);
    coflow_pos_.push_back(0);
  }
  Coflow& c = coflows_[id];
  c.usage.clear();
  ++epoch_;
  c.remaining = volume;
  c.rate = 0;
  c.updated = now;
  c.active = true;
  for (const Usage& u : usage) {
    CHECK(u.link >= 0 && static_cast<size_t>(u.link) < link_.size()) << "bad link " << u.link;
    if (u.weight <= 0) continue;
    Link& k = link_[u.link];
    // A link listed twice is one link with the summed weight.
    if (k.mark == epoch_) {
      c.usage[k.pos].weight += u.weight;
      k.on.back().weight += u.weight;  // c came last
    } else {
      k.mark = epoch_;
      k.pos = static_cast<int32_t>(c.usage.size());
      c.usage.push_back(u);
      k.on.push_back({id, u.weight});
    }
  }
  if (local_updates_ && TryAddAlone(id, now)) {
    ++local_update_count_;
    return id;
  }
  seeds_.assign(1, id);
  Rebalance(seeds_, now);
  return id;
}

void FlowNetwork::Remove(int32_t id, SimTime now) {
  Coflow& c = coflows_[id];
  CHECK(c.active) << "coflow " << id << " removed twice";
  c.active = false;
  ++c.version;  // any pending finish event for it is stale now
  std::vector<int32_t>& neighbours = seeds_;
  neighbours.clear();
  for (const Usage& u : c.usage) {
    Link& k = link_[u.link];
    k.on.erase(std::find_if(k.on.begin(), k.on.end(), [&](const OnLink& x) { return x.id == id; }));
    if (k.on.empty()) {
      k.load = 0;  // exactly, whatever the kept sum's rounding had left
    } else {
      k.load -= u.weight * c.rate;
    }
    for (const OnLink& x : k.on) neighbours.push_back(x.id);
  }
  free_ids_.push_back(id);
  if (neighbours.empty()) return;
  if (local_updates_ && NobodyGains(id)) {
    ++local_update_count_;
    return;
  }
  Rebalance(neighbours, now);
}

std::vector<int32_t> FlowNetwork::TakeChanged() {
  std::vector<int32_t> out;
  out.swap(changed_);
  return out;
}

double FlowNetwork::Load(int32_t link, double* max_rate, int32_t except) const {
  double load = 0;
  for (const OnLink& x : link_[link].on) {
    if (x.id == except) continue;
    const double r = coflows_[x.id].rate;
    load += x.weight * r;
    if (max_rate) *max_rate = std::max(*max_rate, r);
  }
  return load;
}

bool FlowNetwork::TryAddAlone(int32_t id, SimTime now) {
  // The allocation is max-min fair when every coflow has a bottleneck: a saturated link on
  // which no coflow runs faster. If every link of the new coflow has spare capacity, give it
  // the most they leave; if on one of the links that caps it no coflow is faster, it has its
  // bottleneck there, and every other coflow keeps its own (only that link saturates, and it
  // was no one's bottleneck, being unsaturated): the progressive filling's answer, unchanged
  // for all the others.
  Coflow& c = coflows_[id];
  double rate = std::numeric_limits<double>::infinity();
  std::vector<double>& residual = residual_;  // per usage entry of the new coflow
  residual.clear();
  for (const Usage& u : c.usage) {
    const double capacity = link_[u.link].capacity;
    residual.push_back(capacity - link_[u.link].load);  // c's rate is 0 yet
    if (residual.back() <= kSaturated * capacity) return false;
    rate = std::min(rate, residual.back() / u.weight);
  }
  if (!c.usage.empty()) {
    bool bottleneck = false;
    for (size_t k = 0; k < c.usage.size() && !bottleneck; ++k) {
      const Usage& u = c.usage[k];
      if (residual[k] / u.weight > rate * (1 + kSaturated)) continue;  // not a link that caps it
      double fastest = 0;
      Load(u.link, &fastest, id);
      bottleneck = fastest <= rate * (1 + kSaturated);
    }
    if (!bottleneck) return false;
  }
  c.rate = rate;
  c.updated = now;
  ++c.version;
  c.finish = std::isinf(rate) || c.remaining <= 0 ? now : now + ToSimTime(c.remaining / rate);
  for (const Usage& u : c.usage) link_[u.link].load += u.weight * rate;
  changed_.push_back(id);
  return true;
}

bool FlowNetwork::NobodyGains(int32_t id) {
  // A coflow that leaves frees capacity on its links; only a coflow whose every bottleneck is
  // among them can speed up (the others stay capped where they are). So if each coflow on the
  // leaving one's saturated links has a bottleneck elsewhere, the allocation stays max-min fair.
  const Coflow& c = coflows_[id];
  ++epoch_;
  for (const Usage& u : c.usage) link_[u.link].mark = epoch_;
  for (const Usage& u : c.usage) {
    // Saturated before it left: its own share counted back in.
    const Link& k = link_[u.link];
    if (k.capacity - (k.load + u.weight * c.rate) > kSaturated * k.capacity) continue;
    for (const OnLink& x : k.on) {
      const Coflow& o = coflows_[x.id];
      if (std::isinf(o.rate)) continue;
      bool elsewhere = false;
      for (const Usage& v : o.usage) {
        const Link& w = link_[v.link];
        if (w.mark == epoch_) continue;
        if (w.capacity - w.load > kSaturated * w.capacity) continue;
        double fastest = 0;
        Load(v.link, &fastest, -1);
        if (o.rate >= fastest * (1 - kSaturated)) {
          elsewhere = true;
          break;
        }
      }
      if (!elsewhere) return false;
    }
  }
  return true;
}

void FlowNetwork::Rebalance(const std::vector<int32_t>& seeds, SimTime now) {
  // 1. The connected component: coflows reachable through shared links.
  ++epoch_;
  std::vector<int32_t>& comp = comp_;
  std::vector<int32_t>& links = links_;
  comp.clear();
  links.clear();
  for (int32_t s : seeds) {
    if (coflows_[s].active && coflow_mark_[s] != epoch_) {
      coflow_mark_[s] = epoch_;
      comp.push_back(s);
    }
  }
  for (size_t i = 0; i < comp.size(); ++i) {
    for (const Usage& u : coflows_[comp[i]].usage) {
      Link& k = link_[u.link];
      if (k.mark == epoch_) continue;
      k.mark = epoch_;
      links.push_back(u.link);
      for (const OnLink& x : k.on) {
        const int32_t other = x.id;
        if (coflow_mark_[other] != epoch_) {
          coflow_mark_[other] = epoch_;
          comp.push_back(other);
        }
      }
    }
  }
  // The discovery order is deterministic (seeds, usage and per-link lists in insertion order),
  // so the sums below are too.
  for (size_t i = 0; i < comp.size(); ++i) coflow_pos_[comp[i]] = static_cast<int32_t>(i);

  // 2. Bring every coflow's progress up to now at its old rate.
  for (int32_t id : comp) {
    Coflow& c = coflows_[id];
    c.remaining = std::max(0.0, c.remaining - c.rate * ToSeconds(now - c.updated));
    c.updated = now;
    c.rate = 0;
  }

  // 3. Progressive filling: raise all unfrozen rates together until a link saturates;
  //    freeze the coflows on it; repeat.
  std::vector<double>& residual = residual_;
  residual.resize(links.size());
  for (size_t i = 0; i < links.size(); ++i) residual[i] = link_[links[i]].capacity;
  std::vector<char>& frozen = frozen_;
  frozen.assign(comp.size(), 0);
  size_t unfrozen = comp.size();
  // A coflow with no links is limited by nothing: it finishes at once.
  for (size_t i = 0; i < comp.size(); ++i) {
    if (coflows_[comp[i]].usage.empty()) {
      coflows_[comp[i]].rate = std::numeric_limits<double>::infinity();
      frozen[i] = 1;
      --unfrozen;
    }
  }
  for (size_t i = 0; i < links.size(); ++i) link_[links[i]].pos = static_cast<int32_t>(i);
  std::vector<double>& demand = demand_;
  demand.resize(links.size());
  while (unfrozen > 0) {
    // Each unfrozen coflow's weight on each of its links.
    std::fill(demand.begin(), demand.end(), 0.0);
    for (size_t k = 0; k < comp.size(); ++k) {
      if (frozen[k]) continue;
      for (const Usage& u : coflows_[comp[k]].usage) demand[link_[u.link].pos] += u.weight;
    }
    double step = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < links.size(); ++i) {
      if (demand[i] > 0) step = std::min(step, residual[i] / demand[i]);
    }
    CHECK(std::isfinite(step)) << "unfrozen coflows with no loaded link";
    for (size_t i = 0; i < comp.size(); ++i) {
      if (!frozen[i]) coflows_[comp[i]].rate += step;
    }
    for (size_t i = 0; i < links.size(); ++i) {
      residual[i] -= step * demand[i];
      if (demand[i] > 0 && residual[i] <= kSaturated * link_[links[i]].capacity) {
        residual[i] = 0;
        for (const OnLink& x : link_[links[i]].on) {
          const size_t k = static_cast<size_t>(coflow_pos_[x.id]);
          if (!frozen[k]) {
            frozen[k] = 1;
            --unfrozen;
          }
        }
      }
    }
  }

  for (int32_t link : links) Resum(link);

  // 4. New finish times.
  for (int32_t id : comp) {
    Coflow& c = coflows_[id];
    const SimTime finish =
        std::isinf(c.rate) || c.remaining <= 0 ? now : now + ToSimTime(c.remaining / c.rate);
    ++c.version;
    c.finish = finish;
    changed_.push_back(id);
  }
}

}  // namespace shardsim
