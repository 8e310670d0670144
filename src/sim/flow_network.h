// FlowNetwork: bandwidth sharing on the cluster's links. Each active transfer is a coflow
// (all the flows of one collective, or one send) with a weight per link it loads: the bytes
// it moves on that link per byte of its own progress. Rates are max-min fair across coflows
// (progressive filling, as SimGrid's network model), recomputed whenever a coflow starts or
// ends, over the coflows that share links with it (transitively) only.
#pragma once

#include <cstdint>
#include <vector>

#include "src/sim/engine.h"

namespace shardsim {

class FlowNetwork {
 public:
  struct Usage {
    int32_t link = 0;
    double weight = 0;  // bytes on `link` per byte of progress
  };

  explicit FlowNetwork(std::vector<double> capacity);  // bytes/s per link
  // A new link of `capacity` bytes/s; returns its index.
  int32_t AddLink(double capacity);

  // Starts a coflow needing `volume` bytes of progress at time `now`; returns its id.
  int32_t Add(const std::vector<Usage>& usage, double volume, SimTime now);
  // Ends a coflow (at its finish time) and gives its bandwidth to the others.
  void Remove(int32_t id, SimTime now);

  // Coflows whose finish time changed since the last call (the caller reschedules them).
  std::vector<int32_t> TakeChanged();
  // The same into *out (its old contents dropped), the two buffers keeping their capacity.
  void TakeChanged(std::vector<int32_t>* out) {
    out->clear();
    out->swap(changed_);
  }
  SimTime FinishTime(int32_t id) const { return coflows_[id].finish; }
  uint64_t Version(int32_t id) const { return coflows_[id].version; }
  double Rate(int32_t id) const { return coflows_[id].rate; }
  bool Active(int32_t id) const { return coflows_[id].active; }
  size_t link_count() const { return link_.size(); }
  // Off: every start and end recomputes its whole component (for tests of the local checks).
  void set_local_updates(bool on) { local_updates_ = on; }
  // Starts and ends settled by the local checks, without a recomputation.
  int64_t local_update_count() const { return local_update_count_; }

 private:
  struct Coflow {
    std::vector<Usage> usage;
    double remaining = 0;
    double rate = 0;  // bytes of progress per second
    SimTime updated = 0;
    SimTime finish = 0;
    uint64_t version = 0;
    bool active = false;
  };
  // Recomputes max-min fair rates of every coflow connected to `seeds` through shared links.
  void Rebalance(const std::vector<int32_t>& seeds, SimTime now);
  // The two cases that leave every other coflow's rate as it is, checked locally (the
  // component of a collective spanning many nodes holds most of a full simulation's coflows):
  // a new coflow that fits in what its links leave, and a leaving one whose freed capacity
  // nobody can take. Each returns false (nothing changed) when it cannot tell.
  bool TryAddAlone(int32_t id, SimTime now);
  bool NobodyGains(int32_t id);
  // The load of `link` (sum of weight x rate), skipping coflow `except`; the fastest coflow's
  // rate into *max_rate when given. Summed afresh over the link's coflows (Link::load keeps
  // the same sum up to date).
  double Load(int32_t link, double* max_rate, int32_t except) const;
  // Sets load_ of `link` to its sum afresh (after its coflows' rates changed together).
  void Resum(int32_t link) { link_[link].load = Load(link, nullptr, -1); }
  // A link is saturated when what is left of it is at most this fraction of its capacity.
  static constexpr double kSaturated = 1e-9;

  // A link's state in one place: a coflow's start or end visits every link it loads, up to
  // thousands for a collective over a large DP group.
  struct OnLink {
    int32_t id;     // an active coflow loading the link
    double weight;  // its weight on it
  };
  struct Link {
    double capacity = 0;
    double load = 0;    // sum of weight x rate of its coflows
    uint32_t mark = 0;  // scratch: epoch_ when visited
    int32_t pos = 0;    // scratch: index in the coflow or component being visited
    std::vector<OnLink> on;  // its active coflows, in the order they came
  };
  std::vector<Link> link_;
  std::vector<Coflow> coflows_;
  std::vector<int32_t> free_ids_;
  std::vector<int32_t> changed_;
  // Scratch for Rebalance, sized to the links and coflows.
  std::vector<uint32_t> coflow_mark_;
  std::vector<int32_t> coflow_pos_;  // a coflow's index in the component being rebalanced
  std::vector<int32_t> seeds_, comp_, links_;
  std::vector<double> residual_, demand_;
  std::vector<char> frozen_;
  uint32_t epoch_ = 0;
  bool local_updates_ = true;
  int64_t local_update_count_ = 0;
};

}  // namespace shardsim
