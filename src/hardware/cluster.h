// Cluster: the hardware description turned into a Boost.Graph graph of GPUs, intra-node
// switches, hosts, NICs and network switches, joined by directed links (bandwidth, latency).
// Paths and bottlenecks between GPUs come from this graph, not from special cases.
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "src/hardware/hardware_spec.h"

namespace shardsim {

enum class VertexKind { kGpu, kFabricSwitch, kHost, kNic, kLeafSwitch, kSpineSwitch };

struct ClusterVertex {
  VertexKind kind = VertexKind::kGpu;
  int64_t node = -1;   // -1 for network switches
  int64_t index = -1;  // GPU index (global), NIC index within the node, switch index
  std::string name;
};

// One direction of a physical link. Bandwidth is the achievable rate (line rate x efficiency).
struct ClusterLink {
  double bandwidth = 0;  // bytes/s
  double latency_s = 0;
};

using ClusterGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                           ClusterVertex, ClusterLink>;
using ClusterEdge = boost::graph_traits<ClusterGraph>::edge_descriptor;
using ClusterVertexId = boost::graph_traits<ClusterGraph>::vertex_descriptor;

// A route between two GPUs: the directed links it crosses, in order.
struct Route {
  std::vector<ClusterEdge> links;
  double latency_s = 0;
  double bottleneck_bandwidth = 0;  // min link bandwidth along the route
  bool crosses_network = false;
};

class Cluster {
 public:
  // Builds the nodes of `hw` that hold GPUs 0 .. gpus - 1 (every node when gpus < 0), with
  // the leaf switches of their groups and the spine the whole description has: a job placed on
  // the first GPUs crosses nothing else (RouteBetween), so its routes and prices are those of
  // the whole cluster, and building them costs what the job uses, not the description.
  explicit Cluster(const HardwareSpec& hw, int64_t gpus = -1);

  const HardwareSpec& hardware() const { return hw_; }
  const ClusterGraph& graph() const { return graph_; }
  int64_t gpu_count() const { return static_cast<int64_t>(gpu_vertex_.size()); }  // built
  int64_t node_count() const { return static_cast<int64_t>(host_vertex_.size()); }     // built
  int64_t NodeOf(int64_t gpu) const { return gpu / hw_.node.gpus; }
  ClusterVertexId GpuVertex(int64_t gpu) const { return gpu_vertex_.at(gpu); }
  ClusterVertexId HostVertex(int64_t node) const { return host_vertex_.at(node); }

  // Fastest route for a 1 MiB message (latency + size / bandwidth per link) from one GPU to
  // another; only switches and NICs relay traffic, so a route never enters a third node nor a
  // third group's leaf switches, and each search visits only the two nodes' vertices, their
  // groups' leaves and the spine: its cost does not grow with the cluster's size.
  // Thread-safe; results are cached.
  const Route& RouteBetween(int64_t src_gpu, int64_t dst_gpu) const;
  // Route from a GPU to its node's host memory (offload traffic). Thread-safe; cached.
  Route RouteToHost(int64_t gpu) const;

  std::string Describe() const;  // vertex and link counts by kind

  // GPUs after which the graph repeats: the GPUs of one leaf group of nodes (every node is
  // built alike, every group's leaves alike under one spine), or of the whole cluster without a
  // network. Two groups of GPUs that differ by a multiple of it cross links alike: their
  // collectives cost the same.
  int64_t TranslationPeriod() const {
    return hw_.node.gpus * (leaves_per_group_ > 0 ? nodes_per_group_ : hw_.nodes);
  }

 private:
  ClusterVertexId AddVertex(VertexKind kind, int64_t node, int64_t index, std::string name);
  void AddLink(ClusterVertexId a, ClusterVertexId b, double bandwidth, double latency_s);
  // Dijkstra from `src` to `dst` over the network switches and the vertices of nodes `a`
  // and `b` (-1 for none): the only ones a route between them can cross.
  Route Search(ClusterVertexId src, ClusterVertexId dst, int64_t a, int64_t b) const;

  HardwareSpec hw_;
  ClusterGraph graph_;
  std::vector<ClusterVertexId> gpu_vertex_;
  std::vector<ClusterVertexId> host_vertex_;
  // The network's leaf switches come first, leaves_per_group_ for each group of
  // nodes_per_group_ nodes, then the spine (spine_, or -1 without one); node n's vertices are
  // the contiguous block [node_begin_[n], node_begin_[n + 1]).
  int64_t leaves_per_group_ = 0, nodes_per_group_ = 1, spine_ = -1;
  std::vector<ClusterVertexId> node_begin_;
  mutable std::shared_mutex cache_mu_;  // readers share; a miss takes it alone
  mutable std::map<std::pair<int64_t, int64_t>, Route> cache_;
  mutable std::map<int64_t, Route> host_routes_;
};

}  // namespace shardsim
