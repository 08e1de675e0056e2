#include "src/graph/graph.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace streampool::internal {

GraphNodeType NodeTypeOf(const NodeParams& params) {
  static constexpr GraphNodeType kTypes[] = {GraphNodeType::kKernel,      GraphNodeType::kMemcpy,
                                             GraphNodeType::kMemset,      GraphNodeType::kHost,
                                             GraphNodeType::kEventRecord, GraphNodeType::kWaitEvent,
                                             GraphNodeType::kEmpty,       GraphNodeType::kGraph,
                                             GraphNodeType::kMemAlloc,    GraphNodeType::kMemFree};
  static_assert(std::size(kTypes) == std::variant_size_v<NodeParams>);
  return kTypes[params.index()];
}

absl::StatusOr<NodeIndex> Graph::Add(NodeParams&& params, absl::Span<const NodeIndex> deps) {
  for (NodeIndex d : deps) {
    if (d >= nodes_.size()) return absl::InvalidArgumentError("dependency not in the graph");
  }
  // Few dependencies are the rule (a capture's frontier is one node): a
  // pairwise check is cheaper than a set.
  if (deps.size() <= 16) {
    for (size_t i = 0; i < deps.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (deps[i] == deps[j]) return absl::InvalidArgumentError("duplicate dependency");
      }
    }
  } else {
    absl::flat_hash_set<NodeIndex> seen;
    for (NodeIndex d : deps) {
      if (!seen.insert(d).second) return absl::InvalidArgumentError("duplicate dependency");
    }
  }
  const auto index = static_cast<NodeIndex>(nodes_.size());
  const GraphNodeType type = NodeTypeOf(params);
  if (type == GraphNodeType::kMemAlloc || type == GraphNodeType::kMemFree) ++memory_nodes_;
  if (type == GraphNodeType::kGraph) ++children_;
  Node& node = nodes_.emplace_back();
  node.params = std::move(params);
  node.deps.assign(deps.begin(), deps.end());
  for (NodeIndex d : deps) nodes_[d].dependents.push_back(index);
  return index;
}

absl::Status Graph::AddEdge(NodeIndex from, NodeIndex to) {
  if (from >= nodes_.size() || to >= nodes_.size()) {
    return absl::InvalidArgumentError("node not in the graph");
  }
  if (from == to || Precedes(to, from)) return absl::InvalidArgumentError("the edge makes a cycle");
  auto& deps = nodes_[to].deps;
  if (std::find(deps.begin(), deps.end(), from) != deps.end()) {
    return absl::InvalidArgumentError("the edge exists");
  }
  deps.push_back(from);
  nodes_[from].dependents.push_back(to);
  if (from > to) ordered_ = false;
  return absl::OkStatus();
}

std::vector<NodeIndex> Graph::Roots() const {
  std::vector<NodeIndex> roots;
  for (NodeIndex i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].deps.empty()) roots.push_back(i);
  }
  return roots;
}

std::vector<std::pair<NodeIndex, NodeIndex>> Graph::Edges() const {
  std::vector<std::pair<NodeIndex, NodeIndex>> edges;
  for (NodeIndex to = 0; to < nodes_.size(); ++to) {
    for (NodeIndex from : nodes_[to].deps) edges.emplace_back(from, to);
  }
  return edges;
}

bool Graph::Precedes(NodeIndex a, NodeIndex b) const {
  // Edges added by Add point from lower to higher indices, but AddEdge may
  // join any two, so this walks back from b.
  std::vector<NodeIndex> todo{b};
  std::vector<bool> seen(nodes_.size(), false);
  while (!todo.empty()) {
    const NodeIndex n = todo.back();
    todo.pop_back();
    for (NodeIndex d : nodes_[n].deps) {
      if (d == a) return true;
      if (!seen[d]) {
        seen[d] = true;
        todo.push_back(d);
      }
    }
  }
  return false;
}

const MemAllocNode* Graph::UnfreedAllocation(const void* dptr, NodeIndex* at) const {
  const MemAllocNode* found = nullptr;
  for (NodeIndex i = 0; i < nodes_.size(); ++i) {
    if (const auto* a = std::get_if<MemAllocNode>(&nodes_[i].params); a && a->dptr == dptr) {
      found = a;
      if (at != nullptr) *at = i;
    } else if (const auto* f = std::get_if<MemFreeNode>(&nodes_[i].params); f && f->dptr == dptr) {
      found = nullptr;
    }
  }
  return found;
}

namespace {

// The graph's nodes flattened (child graphs inlined between an entry and an
// exit step), each with its dependencies as flat step indices.
struct FlatNode {
  const NodeParams* params;
  absl::InlinedVector<uint32_t, 2> deps;
};

// Appends `graph` after `entry` deps; returns the steps its sinks end at.
std::vector<uint32_t> Flatten(const Graph& graph, const std::vector<uint32_t>& entry,
                              std::vector<FlatNode>& out) {
  // Kahn's order over the graph: deterministic (lowest ready index first),
  // and valid whatever order AddEdge left the indices in.
  std::vector<size_t> missing(graph.size());
  std::vector<NodeIndex> ready;
  for (NodeIndex i = 0; i < graph.size(); ++i) {
    missing[i] = graph.node(i).deps.size();
    if (missing[i] == 0) ready.push_back(i);
  }
  std::vector<std::vector<uint32_t>> exits(graph.size());
  std::vector<uint32_t> sinks;
  std::make_heap(ready.begin(), ready.end(), std::greater<>());
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<>());
    const NodeIndex n = ready.back();
    ready.pop_back();
    const Node& node = graph.node(n);
    std::vector<uint32_t> deps;
    if (node.deps.empty()) deps = entry;
    for (NodeIndex d : node.deps) deps.insert(deps.end(), exits[d].begin(), exits[d].end());
    if (const auto* child = std::get_if<ChildGraphNode>(&node.params)) {
      exits[n] = Flatten(*child->graph, deps, out);
      if (exits[n].empty()) exits[n] = deps;  // an empty child orders like an empty node
    } else {
      out.push_back(FlatNode{&node.params, {deps.begin(), deps.end()}});
      exits[n] = {static_cast<uint32_t>(out.size() - 1)};
    }
    if (node.dependents.empty()) sinks.insert(sinks.end(), exits[n].begin(), exits[n].end());
    for (NodeIndex d : node.dependents) {
      if (--missing[d] == 0) {
        ready.push_back(d);
        std::push_heap(ready.begin(), ready.end(), std::greater<>());
      }
    }
  }
  return sinks;
}

// Hardware runs a bounded number of queues at once (CUDA's default is 8
// connections, at most 32); past that, branches share lanes. 16 keeps a
// launch's streams few and still lets the simulator show wide fan-outs.
constexpr uint32_t kMaxLanes = 16;

}  // namespace

Plan MakePlan(const Graph& graph) {
  std::vector<FlatNode> flat;
  if (graph.flat()) {
    // Most graphs (every captured one): the nodes as they are.
    flat.reserve(graph.size());
    for (NodeIndex i = 0; i < graph.size(); ++i) {
      const Node& n = graph.node(i);
      flat.push_back(FlatNode{&n.params, {n.deps.begin(), n.deps.end()}});
    }
  } else {
    Flatten(graph, {}, flat);
  }
  Plan plan;
  plan.steps.reserve(flat.size());
  std::vector<int64_t> lane_last;  // the last step placed on each lane
  for (uint32_t i = 0; i < flat.size(); ++i) {
    auto& deps = flat[i].deps;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    uint32_t lane = plan.lanes;
    for (uint32_t d : deps) {
      if (lane_last[plan.steps[d].lane] == d) {
        lane = plan.steps[d].lane;
        break;
      }
    }
    if (lane == plan.lanes && plan.lanes == kMaxLanes) {
      // Out of lanes: a branch shares one, running after what is there.
      lane = deps.empty() ? i % kMaxLanes : plan.steps[deps.front()].lane;
    } else if (lane == plan.lanes) {
      ++plan.lanes;
      lane_last.push_back(-1);
    }
    PlanStep step{flat[i].params, lane, {}, false};
    for (uint32_t d : deps) {
      if (plan.steps[d].lane != lane) {
        step.waits_for.push_back(d);
        plan.steps[d].signals = true;
      }
    }
    lane_last[lane] = i;
    plan.steps.push_back(std::move(step));
  }
  for (int64_t last : lane_last) {
    if (last >= 0) {
      plan.tails.push_back(static_cast<uint32_t>(last));
      plan.steps[last].signals = true;
    }
  }
  return plan;
}

}  // namespace streampool::internal
