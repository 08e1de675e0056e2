// A graph: nodes of work with the dependencies between them, as CUDA's
// cudaGraph_t holds them — built by hand or by capturing a stream — and the
// plan a launch follows.
//
// A graph is plain data: nothing here enqueues, maps or orders anything. The
// runtime builds graphs (src/runtime/graphs.h), keeps the memory an allocation
// node names (src/pool/graph_memory.h), and launches a plan by enqueueing each
// node on one of the plan's lanes, streams of their own that run independent
// branches concurrently. Like CUDA's, a graph is used under its owner's lock:
// nothing here is thread-safe.
#ifndef STREAMPOOL_SRC_GRAPH_GRAPH_H_
#define STREAMPOOL_SRC_GRAPH_GRAPH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "streampool/checker.h"
#include "streampool/graph.h"
#include "streampool/mem_access.h"
#include "streampool/pool_props.h"

namespace streampool::internal {

class Graph;

// A node's index in its graph: nodes are never removed from a graph that has
// memory nodes, and a graph without them removes none either (CUDA's node
// removal is not offered), so an index names one node for the graph's life.
using NodeIndex = uint32_t;

struct KernelNode {
  uint64_t duration_ns = 0;
  // Kernels declare a range or two: kept inline, capturing one allocates
  // nothing for them.
  absl::InlinedVector<Access, 2> accesses;
  // Runs as the kernel's effect when set (a face's emulated kernel).
  std::function<void()> body;
};
struct MemcpyNode {
  void* dst = nullptr;
  const void* src = nullptr;
  uint64_t bytes = 0;
};
struct MemsetNode {
  void* dst = nullptr;
  int value = 0;
  uint64_t bytes = 0;
};
struct HostNode {
  std::function<void()> fn;
};
// Event handles of the runtime that owns the graph.
struct EventRecordNode {
  uint64_t event = 0;
};
struct EventWaitNode {
  uint64_t event = 0;
};
struct EmptyNode {};
// A copy of the child taken when the node was added (CUDA clones it too), so
// that later changes to the child do not reach the parent.
struct ChildGraphNode {
  std::shared_ptr<const Graph> graph;
};
// An allocation whose address is fixed when the node is made (the graph
// memory of src/pool/graph_memory.h reserves it); a later allocation node
// ordered after this one's free may be given the same address.
struct MemAllocNode {
  PoolProps props;
  std::vector<MemAccessDesc> access;
  uint64_t bytes = 0;
  void* dptr = nullptr;
};
struct MemFreeNode {
  void* dptr = nullptr;
};

using NodeParams =
    std::variant<KernelNode, MemcpyNode, MemsetNode, HostNode, EventRecordNode, EventWaitNode,
                 EmptyNode, ChildGraphNode, MemAllocNode, MemFreeNode>;

// The public kind of each of NodeParams' alternatives.
GraphNodeType NodeTypeOf(const NodeParams& params);

struct Node {
  // P: NodeParams or one of its alternatives (made in place, not moved twice).
  template <typename P>
  Node(P&& p, absl::Span<const NodeIndex> d)
      : params(std::forward<P>(p)), deps(d.begin(), d.end()) {}
  NodeParams params;
  absl::InlinedVector<NodeIndex, 2> deps;        // in the order given, no duplicates
  absl::InlinedVector<NodeIndex, 2> dependents;  // in the order the edges were made
};

class Graph {
 public:
  Graph();
  // Copies every node; the caller checks CanClone first.
  Graph(const Graph& other);
  ~Graph();
  Graph& operator=(const Graph&) = delete;

  // Adds a node after `deps` (each an index of this graph, no duplicates:
  // InvalidArgument otherwise, and nothing added).
  // P: NodeParams or one of its alternatives.
  template <typename P>
  absl::StatusOr<NodeIndex> Add(P&& params, absl::Span<const NodeIndex> deps) {
    if (absl::Status st = CheckDeps(deps); !st.ok()) return st;
    const auto index = static_cast<NodeIndex>(nodes_.size());
    chain_ = chain_ && (index == 0 ? deps.empty() : deps.size() == 1 && deps[0] == index - 1);
    Node& node = nodes_.emplace_back(std::forward<P>(params), deps);
    Count(node.params);
    for (NodeIndex d : deps) nodes_[d].dependents.push_back(index);
    return index;
  }
  // Adds the edge from -> to; InvalidArgument for a bad index, an edge that
  // exists or one that would make a cycle.
  absl::Status AddEdge(NodeIndex from, NodeIndex to);

  size_t size() const { return nodes_.size(); }
  const Node& node(NodeIndex i) const { return nodes_[i]; }
  Node& mutable_node(NodeIndex i) { return nodes_[i]; }
  std::vector<NodeIndex> Roots() const;
  // Every edge, as (from, to), by `to` then in dependency order.
  std::vector<std::pair<NodeIndex, NodeIndex>> Edges() const;
  // Whether a is an ancestor of b (a path a -> ... -> b exists).
  bool Precedes(NodeIndex a, NodeIndex b) const;
  // Memory nodes anywhere in the graph (child graphs cannot hold them).
  bool has_memory_nodes() const { return memory_nodes_ > 0; }
  // The allocation node whose address is `dptr` and that no free node of this
  // graph frees yet, else null.
  const MemAllocNode* UnfreedAllocation(const void* dptr, NodeIndex* at = nullptr) const;
  // No child graph, and every edge from a lower index to a higher one (so
  // the indices are an order a launch may follow as they are).
  bool flat() const { return children_ == 0 && ordered_; }
  // flat(), and each node after the one before it alone (a capture on one
  // stream): one lane, planned as it is.
  bool chain() const { return flat() && chain_; }

 private:
  // InvalidArgument for an index not in the graph or a duplicate.
  absl::Status CheckDeps(absl::Span<const NodeIndex> deps) const;
  void Count(const NodeParams& params) {
    const GraphNodeType type = NodeTypeOf(params);
    if (type == GraphNodeType::kMemAlloc || type == GraphNodeType::kMemFree) ++memory_nodes_;
    if (type == GraphNodeType::kGraph) ++children_;
  }

  std::vector<Node> nodes_;
  size_t memory_nodes_ = 0;
  size_t children_ = 0;
  bool ordered_ = true;
  bool chain_ = true;
};

// How a launch runs a graph: every node, child graphs flattened, in an order
// that respects the edges, each on a lane (a stream of the launch). A node
// goes on the lane of its first dependency whose last node it is, else on a
// new lane (up to a bound, then an existing one), so a chain stays on one
// lane and each fork opens one; a lane waits for another only where an edge
// crosses. Deterministic: the same graph gives the same plan.
struct PlanStep {
  const NodeParams* params = nullptr;  // points into the graph the plan was made from
  uint32_t lane = 0;
  absl::InlinedVector<uint32_t, 2> waits_for;  // steps on other lanes this one waits for
  bool signals = false;                        // a step on another lane waits for this one
};
struct Plan {
  std::vector<PlanStep> steps;
  uint32_t lanes = 0;
  // Steps a launch's stream waits for at the end: the last of each lane.
  std::vector<uint32_t> tails;
};
// The graph and every child it holds stay alive while the plan is used.
Plan MakePlan(const Graph& graph);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_GRAPH_GRAPH_H_
