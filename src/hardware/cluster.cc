// Builds the cluster graph (docs/hardware.md, "The cluster graph") and routes over it.
#include "src/hardware/cluster.h"


#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <sstream>

#include "src/util/check.h"

namespace shardsim {

ClusterVertexId Cluster::AddVertex(VertexKind kind, int64_t node, int64_t index,
                                   std::string name) {
  return boost::add_vertex(ClusterVertex{kind, node, index, std::move(name)}, graph_);
}

void Cluster::AddLink(ClusterVertexId a, ClusterVertexId b, double bandwidth, double latency_s) {
  CHECK(bandwidth > 0) << "link bandwidth must be positive";
  boost::add_edge(a, b, ClusterLink{bandwidth, latency_s}, graph_);
  boost::add_edge(b, a, ClusterLink{bandwidth, latency_s}, graph_);
}

Cluster::Cluster(const HardwareSpec& hw, int64_t gpus) : hw_(hw) {
  const int64_t per_node = hw.node.gpus;
  CHECK(per_node > 0) << "a node needs GPUs";
  const int64_t built = gpus < 0 ? hw.nodes : std::min(hw.nodes, std::max<int64_t>(1, gpus / per_node + (gpus % per_node != 0)));
  const FabricSpec& fabric = hw.node.fabric;
  const HostSpec& host = hw.node.host;
  // Network: leaf switches (one per group of nodes, or one per rail per group) and a spine.
  std::vector<ClusterVertexId> leaves;
  ClusterVertexId spine = 0;
  int64_t groups = 0;
  bool has_spine = false;
  const NetworkSpec* net = hw.network ? &*hw.network : nullptr;
  if (net && hw.nodes > 1) {
    const int64_t all_groups = (hw.nodes + net->nodes_per_switch - 1) / net->nodes_per_switch;
    groups = (built + net->nodes_per_switch - 1) / net->nodes_per_switch;
    const bool rails = net->topology == NetworkTopology::kRailOptimized;
    const int64_t per_group = rails ? net->nics : 1;
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t r = 0; r < per_group; ++r) {
        leaves.push_back(AddVertex(VertexKind::kLeafSwitch, -1, g * per_group + r,
                                   "leaf" + std::to_string(g) + (rails ? "-rail" + std::to_string(r) : "")));
      }
    }
    has_spine = all_groups * per_group > 1;  // the whole description's leaves need one
    if (has_spine) {
      spine = AddVertex(VertexKind::kSpineSwitch, -1, 0, "spine");
      // Uplink capacity of a leaf: its downlinks divided by the oversubscription ratio.
      const int64_t down_ports = rails ? net->nodes_per_switch : net->nodes_per_switch * net->nics;
      const double up_bw = down_ports * net->effective_nic_bandwidth() / net->oversubscription;
      for (ClusterVertexId leaf : leaves) AddLink(leaf, spine, up_bw, net->switch_latency_s / 2);
    }
  }
  if (!leaves.empty()) {
    leaves_per_group_ = static_cast<int64_t>(leaves.size()) / groups;
    nodes_per_group_ = net->nodes_per_switch;
    if (has_spine) spine_ = static_cast<int64_t>(spine);
  }
  for (int64_t n = 0; n < built; ++n) {
    node_begin_.push_back(boost::num_vertices(graph_));
    const ClusterVertexId host_v = AddVertex(VertexKind::kHost, n, n, "node" + std::to_string(n) + "/host");
    host_vertex_.push_back(host_v);
    std::vector<ClusterVertexId> gpus;
    for (int64_t i = 0; i < per_node; ++i) {
      const int64_t g = n * per_node + i;
      gpus.push_back(AddVertex(VertexKind::kGpu, n, g, "gpu" + std::to_string(g)));
      gpu_vertex_.push_back(gpus.back());
      AddLink(gpus.back(), host_v, host.link_bandwidth, host.link_latency_s);
    }
    // Intra-node fabric: a switch vertex (NVSwitch, PCIe switch, shared memory), or for
    // direct NVLink a full mesh sharing each GPU's bandwidth over its peers.
    if (per_node > 1) {
      if (fabric.kind == FabricKind::kNvLink) {
        const double per_peer = fabric.effective_bandwidth() / static_cast<double>(per_node - 1);
        for (int64_t i = 0; i < per_node; ++i) {
          for (int64_t j = i + 1; j < per_node; ++j) AddLink(gpus[i], gpus[j], per_peer, fabric.latency_s);
        }
      } else {
        const ClusterVertexId sw =
            AddVertex(VertexKind::kFabricSwitch, n, n, "node" + std::to_string(n) + "/fabric");
        for (ClusterVertexId g : gpus) AddLink(g, sw, fabric.effective_bandwidth(), fabric.latency_s / 2);
      }
    }
    // NICs: NIC k serves GPUs k*per_node/nics .. (k+1)*per_node/nics - 1 (its PCIe switch).
    if (net && hw.nodes > 1) {
      const int64_t group = n / net->nodes_per_switch;
      for (int64_t k = 0; k < net->nics; ++k) {
        const ClusterVertexId nic = AddVertex(VertexKind::kNic, n, k,
                                              "node" + std::to_string(n) + "/nic" + std::to_string(k));
        for (int64_t i = 0; i < per_node; ++i) {
          if (i * net->nics / per_node == k || (net->nics > per_node && k % per_node == i)) {
            AddLink(gpus[i], nic, host.link_bandwidth, 0.0);  // network.latency covers NIC to NIC
          }
        }
        const bool rails = net->topology == NetworkTopology::kRailOptimized;
        const ClusterVertexId leaf = leaves[rails ? group * net->nics + k : group];
        AddLink(nic, leaf, net->effective_nic_bandwidth(), net->latency_s / 2);
      }
    }
  }
  node_begin_.push_back(boost::num_vertices(graph_));
}

namespace {

// Weight: the time a 1 MiB message needs on each link (latency + size / bandwidth), so wide
// links win as in NCCL's path search (NVLink before PCIe before the network), and among
// equals the lower latency.
constexpr double kRouteReferenceBytes = 1 << 20;

}  // namespace

Route Cluster::Search(ClusterVertexId src, ClusterVertexId dst, int64_t a, int64_t b) const {
  // The vertices a route between nodes a and b can cross: their groups' leaf switches, the
  // spine, their own blocks. Numbered locally in the global order (so the heap breaks ties as
  // over the whole graph), block after block.
  struct Block {
    int64_t begin, size;
  };
  std::vector<Block> blocks;
  auto group_leaves = [&](int64_t node) {
    const int64_t g = node / nodes_per_group_;
    return Block{g * leaves_per_group_, leaves_per_group_};
  };
  if (leaves_per_group_ > 0 && a >= 0) {
    blocks.push_back(group_leaves(a));
    if (b >= 0 && b / nodes_per_group_ != a / nodes_per_group_) blocks.push_back(group_leaves(b));
  }
  if (spine_ >= 0) blocks.push_back({spine_, 1});
  for (int64_t node : {a, b == a ? int64_t{-1} : b}) {
    if (node < 0) continue;
    const int64_t begin = static_cast<int64_t>(node_begin_[node]);
    blocks.push_back({begin, static_cast<int64_t>(node_begin_[node + 1]) - begin});
  }
  std::sort(blocks.begin(), blocks.end(), [](const Block& x, const Block& y) { return x.begin < y.begin; });
  std::vector<int64_t> offset(blocks.size() + 1, 0);
  for (size_t i = 0; i < blocks.size(); ++i) offset[i + 1] = offset[i] + blocks[i].size;
  auto local = [&](ClusterVertexId v) -> int64_t {
    const int64_t g = static_cast<int64_t>(v);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (g >= blocks[i].begin && g < blocks[i].begin + blocks[i].size) return offset[i] + g - blocks[i].begin;
    }
    return -1;  // another node or another group's leaf: never on the route
  };
  auto global = [&](int64_t i) -> ClusterVertexId {
    size_t k = 0;
    while (offset[k + 1] <= i) ++k;
    return static_cast<ClusterVertexId>(blocks[k].begin + i - offset[k]);
  };
  // Dijkstra where only switches and NICs relay: GPUs and hosts other than the source are
  // reached (relaxed) but never expanded, so they are end points only.
  const int64_t n = offset.back();
  std::vector<int64_t> pred(n, -1);
  std::vector<double> dist(n, std::numeric_limits<double>::infinity());
  using Item = std::pair<double, int64_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  const int64_t s0 = local(src), t0 = local(dst);
  CHECK(s0 >= 0 && t0 >= 0) << "route end points outside the searched nodes";
  dist[s0] = 0;
  queue.push({0, s0});
  while (!queue.empty()) {
    const auto [d, i] = queue.top();
    queue.pop();
    if (d > dist[i]) continue;
    if (i == t0) break;
    const ClusterVertexId v = global(i);
    const VertexKind k = graph_[v].kind;
    if (i != s0 && (k == VertexKind::kGpu || k == VertexKind::kHost)) continue;  // an end point
    for (auto [it, end] = boost::out_edges(v, graph_); it != end; ++it) {
      const int64_t w = local(boost::target(*it, graph_));
      if (w < 0) continue;
      const double nd = d + graph_[*it].latency_s + kRouteReferenceBytes / graph_[*it].bandwidth;
      // The heap orders (distance, vertex) pairs, so ties resolve the same way every run.
      if (nd < dist[w]) {
        dist[w] = nd;
        pred[w] = i;
        queue.push({nd, w});
      }
    }
  }
  Route route;
  if (s0 == t0) return route;
  CHECK(pred[t0] >= 0) << "no route from " << graph_[src].name << " to " << graph_[dst].name;
  std::vector<ClusterVertexId> vertices{dst};
  for (int64_t i = t0; i != s0;) {
    i = pred[i];
    vertices.push_back(global(i));
  }
  std::reverse(vertices.begin(), vertices.end());
  for (size_t i = 0; i + 1 < vertices.size(); ++i) {
    // Among parallel links (none today) take the widest.
    ClusterEdge best;
    double best_bw = -1;
    for (auto [it, end] = boost::out_edges(vertices[i], graph_); it != end; ++it) {
      if (boost::target(*it, graph_) == vertices[i + 1] && graph_[*it].bandwidth > best_bw) {
        best = *it;
        best_bw = graph_[*it].bandwidth;
      }
    }
    route.links.push_back(best);
    route.latency_s += graph_[best].latency_s;
    route.bottleneck_bandwidth = i == 0 ? best_bw : std::min(route.bottleneck_bandwidth, best_bw);
    route.crosses_network = route.crosses_network || graph_[vertices[i + 1]].kind == VertexKind::kLeafSwitch;
  }
  return route;
}

const Route& Cluster::RouteBetween(int64_t src_gpu, int64_t dst_gpu) const {
  CHECK(src_gpu >= 0 && src_gpu < gpu_count() && dst_gpu >= 0 && dst_gpu < gpu_count())
      << "GPU index out of range: " << src_gpu << " -> " << dst_gpu;
  const auto key = std::make_pair(src_gpu, dst_gpu);
  {
    std::shared_lock<std::shared_mutex> read(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;  // std::map entries never move
  }
  Route r = Search(gpu_vertex_[src_gpu], gpu_vertex_[dst_gpu], NodeOf(src_gpu), NodeOf(dst_gpu));
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  return cache_.emplace(key, std::move(r)).first->second;
}

Route Cluster::RouteToHost(int64_t gpu) const {
  {
    std::shared_lock<std::shared_mutex> read(cache_mu_);
    auto it = host_routes_.find(gpu);
    if (it != host_routes_.end()) return it->second;
  }
  Route r = Search(gpu_vertex_.at(gpu), host_vertex_.at(NodeOf(gpu)), NodeOf(gpu), -1);
  std::unique_lock<std::shared_mutex> lock(cache_mu_);
  return host_routes_.emplace(gpu, std::move(r)).first->second;
}

std::string Cluster::Describe() const {
  int64_t counts[6] = {0, 0, 0, 0, 0, 0};
  for (auto [it, end] = boost::vertices(graph_); it != end; ++it) {
    ++counts[static_cast<int>(graph_[*it].kind)];
  }
  std::ostringstream out;
  out << counts[0] << " GPUs, " << counts[1] << " intra-node switches, " << counts[2]
      << " hosts, " << counts[3] << " NICs, " << counts[4] << " leaf switches, " << counts[5]
      << " spine switches, " << boost::num_edges(graph_) << " directed links";
  return out.str();
}

}  // namespace shardsim
