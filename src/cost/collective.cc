// See collective.h for the model; the arithmetic of each algorithm is commented below.
#include "src/cost/collective.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "src/util/check.h"

namespace shardsim {

std::string CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all-reduce";
    case Collective::kAllGather: return "all-gather";
    case Collective::kReduceScatter: return "reduce-scatter";
    case Collective::kAllToAll: return "all-to-all";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kSendRecv: return "send-recv";
  }
  return "?";
}

std::string AlgorithmName(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kRing: return "ring";
    case CollectiveAlgorithm::kTree: return "tree";
    case CollectiveAlgorithm::kHierarchical: return "hierarchical";
    case CollectiveAlgorithm::kDirect: return "direct";
  }
  return "?";
}

std::string AlgorithmLabel(const CollectiveCost& c) {
  if (c.protocol == CollectiveProtocol::kSimple) return AlgorithmName(c.algorithm);
  return AlgorithmName(c.algorithm) + (c.protocol == CollectiveProtocol::kLl ? " LL" : " LL128");
}

double BusBandwidthFactor(Collective c, int64_t n) {
  if (n <= 1) return 0;
  const double nd = static_cast<double>(n);
  switch (c) {
    case Collective::kAllReduce: return 2 * (nd - 1) / nd;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return (nd - 1) / nd;
    default: return 1;
  }
}

std::vector<std::vector<int64_t>> CollectiveModel::RingOrders(const std::vector<int64_t>& gpus) const {
  // Members grouped by node, keeping their order within a node.
  std::map<int64_t, std::vector<int64_t>> by_node;
  std::vector<int64_t> node_order;
  for (int64_t g : gpus) {
    const int64_t node = cluster_.NodeOf(g);
    if (by_node.find(node) == by_node.end()) node_order.push_back(node);
    by_node[node].push_back(g);
  }
  if (node_order.size() == 1) return {gpus};
  size_t ppn = gpus.size();
  for (const auto& [node, members] : by_node) ppn = std::min(ppn, members.size());
  const int64_t nics = cluster_.hardware().network ? cluster_.hardware().network->nics : 1;
  // One ring per NIC, as NCCL's channels: ring r enters each node at member r and leaves from
  // member r-1, so the rings leave a node through different GPUs and their NICs.
  const int64_t rings = std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(ppn), nics));
  std::vector<std::vector<int64_t>> out;
  for (int64_t r = 0; r < rings; ++r) {
    std::vector<int64_t> ring;
    for (int64_t node : node_order) {
      const std::vector<int64_t>& m = by_node[node];
      for (size_t i = 0; i < m.size(); ++i) ring.push_back(m[(i + r) % m.size()]);
    }
    out.push_back(std::move(ring));
  }
  return out;
}

CollectiveModel::Phase CollectiveModel::Rings(const std::vector<std::vector<int64_t>>& rings,
                                              double bytes_per_ring, int64_t steps) const {
  // Every step, each member of each ring sends one chunk (bytes_per_ring / ring size) to the
  // next member; a link crossed by k such flows needs k * chunk / bandwidth. The step lasts
  // as long as the most loaded link, plus the slowest route's latency.
  Phase p;
  double alpha = 0;
  size_t n = 0;
  for (const std::vector<int64_t>& ring : rings) {
    n = ring.size();
    for (size_t i = 0; i < ring.size(); ++i) {
      const Route& r = cluster_.RouteBetween(ring[i], ring[(i + 1) % ring.size()]);
      alpha = std::max(alpha, r.latency_s);
      p.crosses_network = p.crosses_network || r.crosses_network;
    }
  }
  if (n <= 1) return p;
  double seconds_per_byte = 0;  // for one chunk byte, on the busiest link
  for (const auto& [link, flows] : RingLoads(rings)) {
    seconds_per_byte = std::max(seconds_per_byte, flows / link->bandwidth);
  }
  const double chunk = bytes_per_ring / static_cast<double>(n);
  p.bandwidth_time_s = static_cast<double>(steps) * chunk * seconds_per_byte;
  p.latency_s = static_cast<double>(steps) * alpha;
  return p;
}

CollectiveModel::Phase CollectiveModel::Flows(const std::vector<std::pair<int64_t, int64_t>>& flows,
                                              double bytes_per_flow) const {
  Phase p;
  for (const auto& [src, dst] : flows) {
    const Route& r = cluster_.RouteBetween(src, dst);
    p.latency_s = std::max(p.latency_s, r.latency_s);
    p.crosses_network = p.crosses_network || r.crosses_network;
  }
  for (const auto& [link, count] : FlowLoads(flows)) {
    p.bandwidth_time_s = std::max(p.bandwidth_time_s, count * bytes_per_flow / link->bandwidth);
  }
  return p;
}

CollectiveCost CollectiveModel::Finish(Collective c, CollectiveAlgorithm a, int64_t n,
                                       double bytes, double bw_time, double latency,
                                       bool network) const {
  CollectiveCost out;
  out.collective = c;
  out.algorithm = a;
  out.ranks = n;
  out.bytes = bytes;
  out.crosses_network = network;
  if (n <= 1 && c != Collective::kSendRecv) return out;  // nothing to exchange
  out.latency_s = latency + cluster_.hardware().collective_base_latency_s;
  out.time_s = bw_time + out.latency_s;
  if (out.time_s > 0) {
    out.algbw = bytes / out.time_s;
    out.busbw = out.algbw * BusBandwidthFactor(c, n);
  }
  return out;
}

CollectiveCost CollectiveModel::EstimateWith(Collective c, CollectiveAlgorithm a,
                                             const std::vector<int64_t>& gpus,
                                             double bytes) const {
  CHECK(bytes >= 0) << "negative collective size";
  const int64_t n = static_cast<int64_t>(gpus.size());
  CollectiveCost none;
  none.collective = c;
  none.algorithm = a;
  none.ranks = n;
  none.bytes = bytes;
  none.time_s = std::numeric_limits<double>::infinity();
  if (n <= 1) return Finish(c, a, n, bytes, 0, 0, false);

  const bool ring_kind = c == Collective::kAllReduce || c == Collective::kAllGather ||
                         c == Collective::kReduceScatter || c == Collective::kBroadcast ||
                         c == Collective::kReduce;
  const std::vector<std::vector<int64_t>> rings = RingOrders(gpus);
  const double channels = static_cast<double>(rings.size());

  if (a == CollectiveAlgorithm::kRing && ring_kind) {
    // All-reduce: 2(n-1) steps of S/n (reduce-scatter then all-gather); AG/RS: n-1 steps of
    // S/n (S the total); broadcast/reduce pipeline S through the ring: n steps of S/n of
    // bandwidth and n-1 of latency. Each of the `channels` rings carries S/channels.
    Phase p;
    if (c == Collective::kAllReduce) {
      p = Rings(rings, bytes / channels, 2 * (n - 1));
    } else if (c == Collective::kAllGather || c == Collective::kReduceScatter) {
      p = Rings(rings, bytes / channels, n - 1);
    } else {
      p = Rings(rings, bytes / channels, n);
      p.latency_s = p.latency_s * static_cast<double>(n - 1) / static_cast<double>(n);
    }
    return Finish(c, a, n, bytes, p.bandwidth_time_s, p.latency_s, p.crosses_network);
  }

  // Node structure of the group, for tree and hierarchical.
  std::map<int64_t, std::vector<int64_t>> by_node;
  for (int64_t g : gpus) by_node[cluster_.NodeOf(g)].push_back(g);
  const int64_t nodes = static_cast<int64_t>(by_node.size());
  size_t ppn = gpus.size();
  bool uniform = true;
  for (const auto& [node, m] : by_node) {
    uniform = uniform && (ppn == gpus.size() || m.size() == ppn);
    ppn = std::min(ppn, m.size());
  }

  if (a == CollectiveAlgorithm::kTree && c == Collective::kAllReduce && nodes >= 2) {
    // NCCL's double binary tree (tuning.cc): a chain inside each node, two binary trees
    // across nodes each carrying S/2. Bandwidth: NCCL converts busBw to algBw with x0.5,
    // i.e. time = 2S / (the bandwidth the rings would get per byte), and takes 0.92 of that
    // bus bandwidth for the tree's all-reduce (`busBw * .92`, before any protocol's factor;
    // its per-channel cap perChMaxTreeBws, 36 to 41 GB/s x 32 channels on Hopper, is above any
    // node's network and not priced). Latency: TreeLatencyOf.
    constexpr double kTreeBusBwFactor = 0.92;
    const Phase unit = Rings(rings, channels * static_cast<double>(rings.front().size()), 1);
    // unit.bandwidth_time_s: seconds for one byte per flow on the busiest link, x channels.
    const double bw_time = 2.0 * bytes * unit.bandwidth_time_s / (channels * channels) / kTreeBusBwFactor;
    const TreeLatency lat = TreeLatencyOf(gpus);
    return Finish(c, a, n, bytes, bw_time, lat.intra_s + lat.inter_s, true);
  }

  if (a == CollectiveAlgorithm::kHierarchical && c == Collective::kAllReduce && nodes >= 2 &&
      ppn >= 2 && uniform) {
    // Intra-node reduce-scatter (ppn-1 steps), inter-node ring all-reduce of S/ppn among the
    // k-th members of every node (all k at once), intra-node all-gather.
    std::vector<std::vector<int64_t>> intra_rings, inter_rings(ppn);
    for (const auto& [node, m] : by_node) {
      intra_rings.push_back(m);
      for (size_t k = 0; k < ppn; ++k) inter_rings[k].push_back(m[k]);
    }
    const Phase rs = Rings(intra_rings, bytes, static_cast<int64_t>(ppn) - 1);
    const Phase ar = Rings(inter_rings, bytes / static_cast<double>(ppn), 2 * (nodes - 1));
    const double bw = 2 * rs.bandwidth_time_s + ar.bandwidth_time_s;
    const double lat = 2 * rs.latency_s + ar.latency_s;
    return Finish(c, a, n, bytes, bw, lat, true);
  }

  if (a == CollectiveAlgorithm::kDirect && c == Collective::kAllToAll) {
    // Every rank sends S/n to each other rank at once (S = one rank's buffer).
    std::vector<std::pair<int64_t, int64_t>> flows;
    for (int64_t s : gpus) {
      for (int64_t d : gpus) {
        if (s != d) flows.emplace_back(s, d);
      }
    }
    const Phase p = Flows(flows, bytes / static_cast<double>(n));
    return Finish(c, a, n, bytes, p.bandwidth_time_s, p.latency_s, p.crosses_network);
  }

  if (a == CollectiveAlgorithm::kDirect && c == Collective::kSendRecv && n == 2) {
    const Phase p = Flows({{gpus[0], gpus[1]}}, bytes);
    return Finish(c, a, n, bytes, p.bandwidth_time_s, p.latency_s, p.crosses_network);
  }
  return none;
}

CollectiveModel::TreeLatency CollectiveModel::TreeLatencyOf(const std::vector<int64_t>& gpus) const {
  std::map<int64_t, std::vector<int64_t>> by_node;
  for (int64_t g : gpus) by_node[cluster_.NodeOf(g)].push_back(g);
  TreeLatency out;
  out.nodes = static_cast<int64_t>(by_node.size());
  if (out.nodes < 2) return out;
  size_t ppn = gpus.size();
  for (const auto& [node, m] : by_node) ppn = std::min(ppn, m.size());
  const std::vector<int64_t>& first = by_node.begin()->second;
  const double intra = first.size() > 1 ? cluster_.RouteBetween(first[0], first[1]).latency_s : 0;
  const double inter = cluster_.RouteBetween(first[0], std::next(by_node.begin())->second[0]).latency_s;
  out.intra_s = 2.0 * static_cast<double>(ppn - 1) * intra;
  out.inter_s = 2.0 * std::ceil(std::log2(static_cast<double>(out.nodes))) * inter;
  return out;
}

CollectiveModel::LinkLoads CollectiveModel::RingLoads(
    const std::vector<std::vector<int64_t>>& rings) const {
  std::vector<std::pair<int64_t, int64_t>> flows;
  for (const std::vector<int64_t>& ring : rings) {
    for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
      flows.emplace_back(ring[i], ring[(i + 1) % ring.size()]);
    }
  }
  return FlowLoads(flows);
}

CollectiveModel::LinkLoads CollectiveModel::FlowLoads(
    const std::vector<std::pair<int64_t, int64_t>>& flows) const {
  std::unordered_map<const ClusterLink*, double> load;
  std::vector<const ClusterLink*> order;  // first-seen order, for determinism
  for (const auto& [src, dst] : flows) {
    for (const ClusterEdge& e : cluster_.RouteBetween(src, dst).links) {
      const ClusterLink* link = &cluster_.graph()[e];
      if (load.find(link) == load.end()) order.push_back(link);
      load[link] += 1;
    }
  }
  LinkLoads out;
  for (const ClusterLink* link : order) out.emplace_back(link, load[link]);
  return out;
}

CollectivePlan CollectiveModel::Plan(Collective c, const std::vector<int64_t>& gpus,
                                     double bytes) const {
  // The chosen algorithm can depend on the size: cache per (collective, group, algorithm)
  // the loads and the volume of one byte, and scale.
  CollectivePlan plan;
  plan.cost = Estimate(c, gpus, bytes);
  const auto key = std::make_pair(static_cast<int>(c) * 16 + static_cast<int>(plan.cost.algorithm), gpus);
  {
    std::shared_lock<std::shared_mutex> lock(cache_mu_);
    auto it = plan_cache_.find(key);
    if (it != plan_cache_.end()) {
      plan.loads = it->second.loads;
      plan.volume = it->second.volume * std::max(0.0, plan.cost.time_s - plan.cost.latency_s);
      return plan;
    }
  }
  const int64_t n = static_cast<int64_t>(gpus.size());
  if (n <= 1 && c != Collective::kSendRecv) return plan;
  switch (plan.cost.algorithm) {
    case CollectiveAlgorithm::kRing:
    case CollectiveAlgorithm::kTree:
      plan.loads = RingLoads(RingOrders(gpus));
      break;
    case CollectiveAlgorithm::kHierarchical: {
      // Intra-node rings and inter-node rings by local index, together.
      std::map<int64_t, std::vector<int64_t>> by_node;
      for (int64_t g : gpus) by_node[cluster_.NodeOf(g)].push_back(g);
      std::vector<std::vector<int64_t>> rings;
      size_t ppn = gpus.size();
      for (const auto& [node, m] : by_node) {
        rings.push_back(m);
        ppn = std::min(ppn, m.size());
      }
      for (size_t k = 0; k < ppn; ++k) {
        std::vector<int64_t> ring;
        for (const auto& [node, m] : by_node) ring.push_back(m[k]);
        rings.push_back(ring);
      }
      plan.loads = RingLoads(rings);
      break;
    }
    case CollectiveAlgorithm::kDirect: {
      std::vector<std::pair<int64_t, int64_t>> flows;
      if (c == Collective::kSendRecv) {
        plan.loads = FlowLoads({{gpus[0], gpus[1]}});
        break;
      }
      for (int64_t s : gpus) {
        for (int64_t d : gpus) {
          if (s != d) flows.emplace_back(s, d);
        }
      }
      plan.loads = FlowLoads(flows);
      break;
    }
  }
  double seconds_per_byte = 0;
  for (const auto& [link, load] : plan.loads) {
    seconds_per_byte = std::max(seconds_per_byte, load / link->bandwidth);
  }
  const double bandwidth_time = std::max(0.0, plan.cost.time_s - plan.cost.latency_s);
  plan.volume = seconds_per_byte > 0 ? bandwidth_time / seconds_per_byte : 0;
  CollectivePlan unit;  // volume per second of bandwidth time
  unit.loads = plan.loads;
  unit.volume = seconds_per_byte > 0 ? 1.0 / seconds_per_byte : 0;
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  plan_cache_.emplace(key, std::move(unit));
  return plan;
}

namespace {
std::atomic<uint64_t> next_model_id{1};
}  // namespace

CollectiveModel::CollectiveModel(const Cluster& cluster) : cluster_(cluster), id_(next_model_id++) {}

const CollectiveModel::Lines& CollectiveModel::Coefficients(Collective c, const std::vector<int64_t>& gpus) const {
  // Groups from the placement are arithmetic progressions (first, stride, count): key those
  // compactly; any other group by its members relative to the first. A group moved by a
  // multiple of the cluster's translation period costs the same, so the first GPU counts only
  // modulo it: every pipeline stage's DP group, say, is priced once.
  bool progression = gpus.size() >= 2;
  const int64_t stride = gpus.size() >= 2 ? gpus[1] - gpus[0] : 0;
  for (size_t i = 2; progression && i < gpus.size(); ++i) progression = gpus[i] - gpus[i - 1] == stride;
  const int64_t first = gpus.empty() ? -1 : gpus.front();
  std::vector<int64_t> relative;
  if (!progression) {
    for (int64_t g : gpus) relative.push_back(g - first);
  }
  const GroupKey key{static_cast<int>(c), first < 0 ? -1 : first % cluster_.TranslationPeriod(), stride,
                     static_cast<int64_t>(gpus.size()), relative};
  // Each thread keeps its own copy of what it has looked up, for the model it last used: the
  // planner's threads price millions of collectives, and a shared lock's cache line passed
  // between cores for each would cost more than the lookup.
  thread_local uint64_t local_id = 0;
  thread_local std::map<GroupKey, Lines> local;
  if (local_id != id_) {
    local.clear();
    local_id = id_;
  }
  if (auto it = local.find(key); it != local.end()) return it->second;
  {
    std::shared_lock<std::shared_mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return local.emplace(key, it->second).first->second;
  }
  // One evaluation per algorithm fixes its line: its latency part is the fixed term, the rest
  // scales. Computed under the lock, so that threads missing the same group wait for one
  // evaluation rather than each making its own (EstimateWith takes no lock of this model's).
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    constexpr double kProbe = 1e9;
    Lines lines;
    for (int a = 0; a < kAlgorithms; ++a) {
      const CollectiveCost probe = EstimateWith(c, static_cast<CollectiveAlgorithm>(a), gpus, kProbe);
      Linear& lin = lines[a];
      lin.algorithm = static_cast<CollectiveAlgorithm>(a);
      lin.applies = std::isfinite(probe.time_s);
      if (lin.applies) {
        lin.fixed = probe.latency_s;
        lin.per_byte = (probe.time_s - probe.latency_s) / kProbe;
        lin.crosses_network = probe.crosses_network;
      }
    }
    const std::vector<ProtocolSpec>& protocols = cluster_.hardware().collective_protocols;
    for (size_t i = 0; i < protocols.size() && i < 2; ++i) {
      lines[kAlgorithms + i] = ProtocolRing(lines[static_cast<int>(CollectiveAlgorithm::kRing)], protocols[i], c, gpus);
      lines[kAlgorithms + 2 + i] = ProtocolTree(lines[static_cast<int>(CollectiveAlgorithm::kTree)], protocols[i], c, gpus);
    }
    it = cache_.emplace(key, lines).first;
  }
  const Lines lines = it->second;
  lock.unlock();
  return local.emplace(key, lines).first->second;
}

CollectiveModel::Linear CollectiveModel::ProtocolRing(const Linear& simple, const ProtocolSpec& p, Collective c,
                                                     const std::vector<int64_t>& gpus) const {
  Linear out;
  out.algorithm = CollectiveAlgorithm::kRing;
  out.protocol = p.protocol;
  out.crosses_network = simple.crosses_network;
  const int64_t n = static_cast<int64_t>(gpus.size());
  if (!simple.applies || n <= 1 || simple.per_byte <= 0) return out;
  const HardwareSpec& hw = cluster_.hardware();
  // The ring's per-step latencies (the Simple line's fixed term less the call's base): inside a
  // node, each step is one fabric route, so the protocol's fabric latency takes its place.
  double steps_latency = simple.fixed - hw.collective_base_latency_s;
  if (!simple.crosses_network) {
    const double fabric = hw.node.fabric.latency_s;
    steps_latency = fabric > 0 ? steps_latency * p.fabric_latency_s / fabric : 0;
  }
  out.fixed = p.base_latency_s + steps_latency;
  // Bus bandwidth: the Simple ring's times the protocol's factor, under its caps.
  const double factor = BusBandwidthFactor(c, n);
  double busbw = factor / simple.per_byte * p.bandwidth_factor;
  std::set<int64_t> nodes;
  for (int64_t g : gpus) nodes.insert(cluster_.NodeOf(g));
  const double by_nodes = nodes.size() == 1   ? p.max_busbw_one_node
                          : nodes.size() == 2 ? p.max_busbw_two_nodes
                                              : p.max_busbw_more_nodes;
  if (by_nodes > 0) busbw = std::min(busbw, by_nodes);
  if (p.max_channel_busbw > 0 && hw.gpu.nccl_channels > 0) {
    busbw = std::min(busbw, p.max_channel_busbw * static_cast<double>(hw.gpu.nccl_channels));
  }
  out.per_byte = factor / busbw;
  out.applies = true;
  return out;
}

CollectiveModel::Linear CollectiveModel::ProtocolTree(const Linear& simple, const ProtocolSpec& p, Collective c,
                                                     const std::vector<int64_t>& gpus) const {
  Linear out;
  out.algorithm = CollectiveAlgorithm::kTree;
  out.protocol = p.protocol;
  out.crosses_network = true;
  const int64_t n = static_cast<int64_t>(gpus.size());
  if (!p.tree || !simple.applies || n <= 1 || simple.per_byte <= 0) return out;
  const TreeProtocolSpec& t = *p.tree;
  const HardwareSpec& hw = cluster_.hardware();
  // The intra-node chains' steps at the protocol's tree fabric latency; the inter-node steps
  // as they are (the wire's and the library's post overhead).
  const TreeLatency lat = TreeLatencyOf(gpus);
  const double fabric = hw.node.fabric.latency_s;
  const double intra = fabric > 0 ? lat.intra_s * t.fabric_latency_s / fabric : 0;
  out.fixed = t.base_latency_s + intra + lat.inter_s;
  const double factor = BusBandwidthFactor(c, n);
  double busbw = factor / simple.per_byte * t.bandwidth_factor;
  // LL's cap is the ring's (NCCL applies llMaxBw to both); LL128's its own per channel.
  const double by_nodes = lat.nodes == 2 ? p.max_busbw_two_nodes : p.max_busbw_more_nodes;
  if (by_nodes > 0) busbw = std::min(busbw, by_nodes);
  const double per_channel = lat.nodes == 2 ? t.max_channel_busbw_two_nodes : t.max_channel_busbw_more_nodes;
  if (per_channel > 0 && hw.gpu.nccl_channels > 0) {
    busbw = std::min(busbw, per_channel * static_cast<double>(hw.gpu.nccl_channels));
  }
  out.per_byte = factor / busbw;
  out.applies = true;
  return out;
}

namespace {

// NCCL's correction of the tree all-reduce's bandwidth at medium sizes ("Trees are not
// perfectly sticking to the model for medium sizes", src/graph/tuning.cc treeCorrectionFactor,
// in NCCL since 2.5.6, 2020; values as of NVIDIA/nccl 5067397c): by protocol (LL, LL128,
// Simple) and log2(bytes / 64) from 0 (64 B) to 22 (256 MiB); 1 outside.
double TreeCorrection(Collective c, CollectiveAlgorithm a, CollectiveProtocol p, double bytes) {
  static constexpr double kFactor[3][23] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
  if (a != CollectiveAlgorithm::kTree || c != Collective::kAllReduce || bytes < 64) return 1;
  const int log_size = static_cast<int>(std::floor(std::log2(bytes / 64)));  // log2i(nBytes >> 6)
  if (log_size < 0 || log_size >= 23) return 1;
  const int row = p == CollectiveProtocol::kLl ? 0 : p == CollectiveProtocol::kLl128 ? 1 : 2;
  return kFactor[row][log_size];
}

}  // namespace

CollectiveCost CollectiveModel::Estimate(Collective c, const std::vector<int64_t>& gpus,
                                         double bytes) const {
  const int64_t n = static_cast<int64_t>(gpus.size());
  CollectiveAlgorithm best_a = CollectiveAlgorithm::kRing;
  const Linear* best = nullptr;
  double best_time = std::numeric_limits<double>::infinity();
  const Lines& lines = Coefficients(c, gpus);
  for (const Linear& lin : lines) {  // Simple's algorithms first: a tie keeps Simple
    if (!lin.applies) continue;
    // The tree's bandwidth at medium sizes is NCCL's corrected one (TreeCorrection).
    const double t = lin.per_byte * bytes / TreeCorrection(c, lin.algorithm, lin.protocol, bytes) + lin.fixed;
    if (t < best_time) {
      best_time = t;
      best = &lin;
      best_a = lin.algorithm;
    }
  }
  CHECK(best != nullptr) << "no algorithm for " << CollectiveName(c) << " over " << n << " ranks";
  CollectiveCost out;
  out.collective = c;
  out.algorithm = best_a;
  out.protocol = best->protocol;
  out.ranks = n;
  out.bytes = bytes;
  out.crosses_network = best->crosses_network;
  if (n <= 1 && c != Collective::kSendRecv) return out;
  out.time_s = best_time;
  out.latency_s = best->fixed;
  if (out.time_s > 0) {
    out.algbw = bytes / out.time_s;
    out.busbw = out.algbw * BusBandwidthFactor(c, n);
  }
  return out;
}

}  // namespace shardsim
