// Graphs: graphs built by hand or captured from streams, their executable
// graphs and launches, and each device's graph memory (docs/graphs.md).
//
// A launch enqueues the executable graph's plan (src/graph/graph.h) on the
// plan's lanes — streams the executable graph owns — after the launch
// stream's earlier work and the previous launch, with the launch stream
// waiting for every lane at the end. A node is the op it stands for; a run of
// a lane's kernels, copies and fills that nothing else can order itself
// between is one op (Work::EnqueueNodes). So the simulator runs independent
// branches concurrently in virtual time, the threads executor on threads, a
// CUDA runtime on CUstreams, and the checker sees every node's accesses as it
// sees any op's. All graph memory of a launch is decided when it starts,
// against the launch stream's clock, so a launch that cannot have it
// enqueues nothing; a free node (or a free of the address outside the graph)
// marks an allocation freed at its point.
#ifndef STREAMPOOL_SRC_RUNTIME_GRAPHS_H_
#define STREAMPOOL_SRC_RUNTIME_GRAPHS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/graph/graph.h"
#include "src/pool/graph_memory.h"
#include "src/runtime/events.h"
#include "src/runtime/runtime_core.h"
#include "src/runtime/streams.h"
#include "src/runtime/work.h"
#include "streampool/graph.h"

namespace streampool::internal {

class Graphs {
 public:
  Graphs(RuntimeCore& core, Streams& streams, Events& events, Work& work)
      : c_(core), streams_(streams), events_(events), work_(work) {}
  Graphs(const Graphs&) = delete;
  Graphs& operator=(const Graphs&) = delete;

  // Capture.
  absl::Status BeginCapture(uint64_t s, CaptureMode mode);
  absl::Status BeginCaptureToGraph(uint64_t s, uint64_t graph, std::vector<uint64_t> deps,
                                   CaptureMode mode);
  // The captured graph's handle (0 for a capture into a caller's graph).
  absl::StatusOr<uint64_t> EndCapture(uint64_t s);
  absl::StatusOr<CaptureInfo> GetCaptureInfo(uint64_t s);

  // Graphs and nodes. Node handles are made when first handed out.
  absl::StatusOr<uint64_t> CreateGraph();
  absl::Status DestroyGraph(uint64_t g);
  absl::StatusOr<uint64_t> CloneGraph(uint64_t g);
  // Adds a node; for an allocation node *dptr is set to its address.
  absl::StatusOr<uint64_t> AddNode(uint64_t g, std::vector<uint64_t> deps, NodeParams params,
                                   void** dptr = nullptr);
  // A child graph node: a copy of `child`.
  absl::StatusOr<uint64_t> AddChildGraphNode(uint64_t g, std::vector<uint64_t> deps,
                                             uint64_t child);
  absl::Status AddDependencies(uint64_t g, absl::Span<const std::pair<uint64_t, uint64_t>> edges);
  absl::StatusOr<std::vector<uint64_t>> Nodes(uint64_t g, bool roots_only);
  absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> Edges(uint64_t g);
  absl::StatusOr<GraphNodeType> NodeTypeOfHandle(uint64_t node);
  absl::StatusOr<std::vector<uint64_t>> NodeNeighbours(uint64_t node, bool dependents);
  absl::StatusOr<NodeParams> NodeParamsOf(uint64_t node);
  // The node a handle names and its index in its graph (the recorder's name
  // for it), else null.
  const Node* NodeAt(uint64_t node, NodeIndex* index);

  // Executable graphs.
  absl::StatusOr<uint64_t> Instantiate(uint64_t g, uint64_t flags);
  absl::Status Upload(uint64_t exec, uint64_t s);
  absl::Status Launch(uint64_t exec, uint64_t s);
  absl::Status DestroyExec(uint64_t exec);
  // Result: CUDA's cudaGraphExecUpdateResult value; non-zero with an error.
  absl::Status ExecUpdate(uint64_t exec, uint64_t g, int* result);

  // Graph memory.
  absl::Status TrimGraphMemory(int device);
  absl::StatusOr<GraphMemStats> GraphMemoryStats(int device);
  absl::Status ResetGraphMemoryHigh(int device, bool used);

  // Hooks for the other parts, under the runtime's lock.
  // MallocAsync / FreeAsync on a capturing stream s (index t): a node.
  absl::StatusOr<void*> CaptureMalloc(StreamIndex t, uint64_t size, const PoolProps& props,
                                      absl::Span<const MemAccessDesc> access);
  absl::Status CaptureFree(StreamIndex t, void* ptr);
  // A free of a graph allocation outside its graph: stream-ordered on t, or
  // (t == kNoStream) synchronous. NotFound when ptr is no graph allocation.
  absl::Status FreeOutside(void* ptr, StreamIndex t);
  // Whether ptr is inside graph memory; its base, requested size and device.
  bool FindGraphAllocation(const void* ptr, void** base, uint64_t* size, bool* live,
                           int* device = nullptr);
  // Stream t is being destroyed: it leaves its capture; destroying the
  // origin ends the capture for good (its streams leave, its graph goes).
  void StreamDestroyed(StreamIndex t);
  // Everything goes (teardown): executable graphs' lanes included.
  void Clear();

 private:
  struct GraphRec {
    std::shared_ptr<Graph> graph;
    std::vector<uint64_t> node_handles;  // by index; 0 until handed out
    // The executable graph of a graph with memory nodes (one at a time).
    uint64_t exec = 0;
    // Allocation node ranges this graph refers to, per device.
    std::vector<std::pair<int, void*>> ranges;
    // An executable graph holds `graph` as it is: a change makes a copy
    // first (Mutable), so instantiating copies nothing.
    bool shared = false;
  };
  struct NodeRef {
    uint64_t graph;
    NodeIndex index;
  };
  // Steps [begin, end) of one lane that a launch enqueues together: as one
  // op when `batched` (Work::EnqueueNodes), else the one step alone.
  struct Run {
    uint32_t begin = 0;
    uint32_t end = 0;
    bool batched = false;
  };
  struct ExecRec {
    std::shared_ptr<const Graph> graph;
    uint64_t source = 0;  // the graph it was made from (perhaps destroyed since)
    Plan plan;
    // Made with the plan (Prepare), so that a launch walks runs, not nodes.
    std::vector<Run> runs;
    std::vector<uint32_t> event_and_free_steps;  // what a launch checks first
    std::vector<uint64_t> lanes;                 // stream handles
    std::vector<uint64_t> events;                // per step that signals (else 0)
    uint64_t done = 0;                           // recorded on the launch stream after a launch
    bool auto_free = false;
    std::vector<std::pair<int, void*>> ranges;
  };

  absl::StatusOr<GraphRec*> FindGraph(uint64_t g);
  absl::StatusOr<ExecRec*> FindExec(uint64_t e);
  absl::StatusOr<NodeRef> FindNode(uint64_t n);
  absl::StatusOr<std::vector<NodeIndex>> Indices(uint64_t g, absl::Span<const uint64_t> nodes);
  uint64_t NodeHandle(uint64_t g, GraphRec& rec, NodeIndex i);
  static Graph& Mutable(GraphRec& rec);
  absl::StatusOr<uint64_t> NewGraph(std::shared_ptr<Graph> graph);
  // An allocation node's address: one of the graph's ranges whose every
  // lifetime ends in a free node ordered before `deps`, else a new range.
  absl::StatusOr<void*> AllocationAddress(GraphRec& rec, const MemAllocNode& node,
                                          absl::Span<const NodeIndex> deps);
  absl::Status CheckAllocNode(const MemAllocNode& node) const;
  absl::Status CheckFreeNode(const Graph& graph, const void* dptr,
                             absl::Span<const NodeIndex> deps) const;
  absl::StatusOr<GraphMemory*> MemoryOf(int device);
  absl::Status EnqueueStep(const PlanStep& step, uint64_t lane);
  // The plan of exec.graph, its runs and the steps a launch checks.
  void Prepare(ExecRec& exec) const;
  void ReleaseRanges(const std::vector<std::pair<int, void*>>& ranges);
  absl::StatusOr<StreamIndex> IndexOf(uint64_t s);

  RuntimeCore& c_;
  Streams& streams_;
  Events& events_;
  Work& work_;
  absl::flat_hash_map<uint64_t, GraphRec> graphs_;
  absl::flat_hash_map<uint64_t, NodeRef> nodes_;
  absl::flat_hash_map<uint64_t, ExecRec> execs_;
  std::vector<std::unique_ptr<GraphMemory>> memory_;  // by device, made when first used
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_GRAPHS_H_
