// Collective communication cost over the cluster graph: all-reduce, all-gather,
// reduce-scatter, all-to-all, broadcast, reduce, send/recv, for any group of GPUs.
// Algorithms: ring (NCCL's multi-channel rings, one per NIC so a node's NICs all carry
// traffic), double binary tree, and hierarchical (intra-node RS, inter-node ring AR,
// intra-node AG). Time = latency terms + bytes over the bottleneck link, where each link's
// load is the number of flows of the algorithm's step that cross it. The cheapest
// algorithm is chosen, as NCCL's tuner does (src/graph/tuning.cc; REFERENCES.md section 2).
//
// Protocols: every figure of the hardware description is NCCL's Simple protocol's. Where the
// description lists LL and LL128 (collectives.protocols), the ring is also priced under each,
// as NCCL's tuner does (REFERENCES 2.2-2.3): the call's base latency is the protocol's; a ring
// inside one node takes the protocol's per-step fabric latency in place of the fabric's
// (hwLat[NVLINK][Ring]: LL 0.6, LL128 1.9 against Simple's 3.4 us on NVLink); a ring across
// nodes keeps its per-step latency (the description's network latency is the wire's and the
// library's post overhead, which no protocol removes); the bus bandwidth is the Simple ring's
// times the protocol's factor (LL 0.5: half of each 8-byte store is a flag; LL128 0.92),
// capped by the protocol's limits (NCCL llMaxBws by node count, perChMaxRingLL128Bws per
// channel). Where a protocol also gives its tree figures (`tree:`), the double binary tree of
// an all-reduce across nodes is priced under it likewise: the protocol's tree base latency
// (baseLat[Tree]), its intra-node chain's steps at the protocol's tree fabric latency
// (hwLat[NVLINK][Tree]: LL 0.6, LL128 1.25 against Simple's 4.0 us) while the inter-node steps
// keep the description's network latency, and the Simple tree's bus bandwidth times the
// tree factor (LL 1/3.8, LL128 120/128 across nodes) under the protocol's caps (LL: the same
// llMaxBws as the ring; LL128: perChMaxTreeLL128Bws per channel, by node count). The cheapest
// (algorithm, protocol) wins per size: LL for small messages, LL128 between, Simple for
// large. The tree's all-reduce bandwidth at each size is NCCL's corrected one
// (treeCorrectionFactor by protocol and log2(size / 64): 0.4 to 1.0 between 64 B and 256 MiB,
// NCCL's own fit of its tree model to measured medium sizes), under every protocol.
// Hierarchical and direct run Simple only (NCCL's p2p LL below 16 KiB is not priced).
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <vector>

#include "src/hardware/cluster.h"

namespace shardsim {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce,
                        kSendRecv };
enum class CollectiveAlgorithm { kRing, kTree, kHierarchical, kDirect };

std::string CollectiveName(Collective c);
std::string AlgorithmName(CollectiveAlgorithm a);
struct CollectiveCost;
// The algorithm, with the protocol where it is not Simple: "ring", "ring LL128", "tree".
std::string AlgorithmLabel(const CollectiveCost& c);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): all-reduce 2(n-1)/n, all-gather,
// reduce-scatter and all-to-all (n-1)/n, others 1.
double BusBandwidthFactor(Collective c, int64_t n);

struct CollectiveCost {
  Collective collective = Collective::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  CollectiveProtocol protocol = CollectiveProtocol::kSimple;
  int64_t ranks = 0;
  double bytes = 0;         // nccl-tests convention: AR/bcast/reduce/sendrecv the buffer, AG/RS/A2A the total
  double time_s = 0;
  double latency_s = 0;     // the part of time_s that does not scale with bytes
  double algbw = 0;         // bytes / time_s
  double busbw = 0;         // algbw x BusBandwidthFactor
  bool crosses_network = false;
};

// A collective as the event simulator schedules it: its isolated cost, the links it loads
// (flows of the chosen algorithm per link) and the progress volume such that, alone,
// volume x max over links (load / bandwidth) is the bandwidth part of cost.time_s.
struct CollectivePlan {
  CollectiveCost cost;
  std::vector<std::pair<const ClusterLink*, double>> loads;
  double volume = 0;
};

class CollectiveModel {
 public:
  explicit CollectiveModel(const Cluster& cluster);
  const Cluster& cluster() const { return cluster_; }

  // Cheapest algorithm for this collective on these GPUs (GPU indices of the cluster).
  CollectiveCost Estimate(Collective c, const std::vector<int64_t>& gpus, double bytes) const;
  // The cheapest algorithm with the links it loads, for the event simulator. Cached per
  // (collective, group); the volume scales with the bytes.
  CollectivePlan Plan(Collective c, const std::vector<int64_t>& gpus, double bytes) const;
  // One named algorithm (kDirect for all-to-all and send/recv; others ring/tree/hierarchical).
  // Returns time_s = +inf when the algorithm does not apply to the collective or group.
  CollectiveCost EstimateWith(Collective c, CollectiveAlgorithm a, const std::vector<int64_t>& gpus,
                              double bytes) const;

 private:
  struct Phase {
    double bandwidth_time_s = 0;
    double latency_s = 0;
    bool crosses_network = false;
  };
  using LinkLoads = std::vector<std::pair<const ClusterLink*, double>>;
  // Flows per link of a set of rings (each member sends to the next) or of point flows.
  LinkLoads RingLoads(const std::vector<std::vector<int64_t>>& rings) const;
  LinkLoads FlowLoads(const std::vector<std::pair<int64_t, int64_t>>& flows) const;
  // Concurrent rings, each carrying `bytes_per_ring` in `steps` steps of bytes/ring_size.
  Phase Rings(const std::vector<std::vector<int64_t>>& rings, double bytes_per_ring,
              int64_t steps) const;
  // All flows at once, each of `bytes_per_flow` (all-to-all, send/recv).
  Phase Flows(const std::vector<std::pair<int64_t, int64_t>>& flows, double bytes_per_flow) const;
  // The group's GPUs arranged as rings: one per NIC when it spans nodes.
  std::vector<std::vector<int64_t>> RingOrders(const std::vector<int64_t>& gpus) const;
  CollectiveCost Finish(Collective c, CollectiveAlgorithm a, int64_t n, double bytes,
                        double bw_time, double latency, bool network) const;

  // Every algorithm's time is linear in the bytes: time = per_byte x bytes + fixed. Estimate
  // caches the two coefficients of every algorithm per (collective, group), so repeated
  // pricing of the same group (the planner, the simulator) costs one lookup.
  struct Linear {
    double per_byte = 0, fixed = 0;
    bool applies = false;
    bool crosses_network = false;
    CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
    CollectiveProtocol protocol = CollectiveProtocol::kSimple;
  };
  static constexpr int kAlgorithms = 4;
  // By CollectiveAlgorithm under Simple, then the ring under each protocol the hardware lists,
  // then the tree under each.
  using Lines = std::array<Linear, kAlgorithms + 4>;
  // The ring under `p`, from its Simple line (the class comment's rules).
  Linear ProtocolRing(const Linear& simple, const ProtocolSpec& p, Collective c,
                      const std::vector<int64_t>& gpus) const;
  // The tree under `p` (an all-reduce across nodes, where `p` gives tree figures), from its
  // Simple line.
  Linear ProtocolTree(const Linear& simple, const ProtocolSpec& p, Collective c,
                      const std::vector<int64_t>& gpus) const;
  // The double binary tree's latency over `gpus` (two or more nodes): the intra-node chains'
  // part, 2 (ppn - 1) x one fabric route, and the inter-node part, 2 ceil(log2 nodes) x one
  // node-to-node route (NCCL tuning.cc).
  struct TreeLatency {
    double intra_s = 0, inter_s = 0;
    int64_t nodes = 0;
  };
  TreeLatency TreeLatencyOf(const std::vector<int64_t>& gpus) const;
  const Lines& Coefficients(Collective c, const std::vector<int64_t>& gpus) const;

  const Cluster& cluster_;
  // Tells this model's entries from another's in each thread's copy of the cache (Coefficients).
  const uint64_t id_;
  mutable std::shared_mutex cache_mu_;
  // (collective, first GPU, stride, count, members unless an arithmetic progression)
  using GroupKey = std::tuple<int, int64_t, int64_t, int64_t, std::vector<int64_t>>;
  mutable std::map<GroupKey, Lines> cache_;
  mutable std::map<std::pair<int, std::vector<int64_t>>, CollectivePlan> plan_cache_;  // per byte
};

}  // namespace shardsim
