#include "src/graph/graph.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

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

namespace {

// The node arrays of graphs that are gone, emptied but with their capacity.
// A program that captures a graph each step (a new input shape, an update
// that cannot apply) would otherwise free a large array each time, which the
// C allocator hands back to the system and then faults in again: that was a
// third of a 1 000-node capture's time. Bounded, so idle graphs of the past
// cost at most kMaxBytes.
class NodeArrays {
 public:
  static NodeArrays& Get() {
    static NodeArrays* arrays = new NodeArrays;  // outlives graphs freed at exit
    return *arrays;
  }
  std::vector<Node> Take() {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return {};
    std::vector<Node> nodes = std::move(free_.back());
    free_.pop_back();
    bytes_ -= nodes.capacity() * sizeof(Node);
    return nodes;
  }
  void Give(std::vector<Node>&& nodes) {
    nodes.clear();
    const size_t bytes = nodes.capacity() * sizeof(Node);
    if (bytes == 0) return;
    absl::MutexLock lock(&mu_);
    if (bytes_ + bytes > kMaxBytes || free_.size() == kMaxArrays) return;
    bytes_ += bytes;
    free_.push_back(std::move(nodes));
  }

 private:
  static constexpr size_t kMaxBytes = size_t{4} << 20;
  static constexpr size_t kMaxArrays = 8;
  absl::Mutex mu_;
  std::vector<std::vector<Node>> free_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

Graph::Graph() : nodes_(NodeArrays::Get().Take()) {}

Graph::Graph(const Graph& other)
    : nodes_(NodeArrays::Get().Take()),
      memory_nodes_(other.memory_nodes_),
      children_(other.children_),
      ordered_(other.ordered_),
      chain_(other.chain_) {
  nodes_.assign(other.nodes_.begin(), other.nodes_.end());
}

Graph::~Graph() { NodeArrays::Get().Give(std::move(nodes_)); }

absl::Status Graph::CheckDeps(absl::Span<const NodeIndex> deps) const {
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
  return absl::OkStatus();
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
  chain_ = false;
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
  if (graph.chain()) {
    // What the general walk below makes of a chain, without the walk.
    Plan plan;
    plan.steps.resize(graph.size());
    for (NodeIndex i = 0; i < graph.size(); ++i) plan.steps[i].params = &graph.node(i).params;
    if (graph.size() != 0) {
      plan.lanes = 1;
      plan.tails.push_back(static_cast<uint32_t>(graph.size() - 1));
      plan.steps.back().signals = true;
    }
    return plan;
  }
  // Most graphs (every captured one) are planned from their nodes as they
  // are; the others from their flattening.
  const bool direct = graph.flat();
  std::vector<FlatNode> flat;
  if (!direct) Flatten(graph, {}, flat);
  const size_t count = direct ? graph.size() : flat.size();
  Plan plan;
  plan.steps.reserve(count);       // so a step's reference stays valid below
  std::vector<int64_t> lane_last;  // the last step placed on each lane
  absl::InlinedVector<uint32_t, 4> sorted;
  for (uint32_t i = 0; i < count; ++i) {
    absl::Span<const uint32_t> deps =
        direct ? absl::Span<const uint32_t>(graph.node(i).deps) : flat[i].deps;
    if (deps.size() > 1) {
      sorted.assign(deps.begin(), deps.end());
      std::sort(sorted.begin(), sorted.end());
      sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      deps = sorted;
    }
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
    PlanStep& step = plan.steps.emplace_back();
    step.params = direct ? &graph.node(i).params : flat[i].params;
    step.lane = lane;
    for (uint32_t d : deps) {
      if (plan.steps[d].lane != lane) {
        step.waits_for.push_back(d);
        plan.steps[d].signals = true;
      }
    }
    lane_last[lane] = i;
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
