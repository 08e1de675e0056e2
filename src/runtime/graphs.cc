#include "src/runtime/graphs.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/runtime/capture.h"
#include "src/util/check.h"
#include "streampool/event_flags.h"

namespace streampool::internal {

namespace {

// Answers for a launch's memory, from the launch stream's clock: every lane
// starts there.
class LaunchOracle final : public OrderOracle {
 public:
  LaunchOracle(RuntimeCore& c, StreamIndex t) : c_(c), t_(t) {}
  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return c_.seq.ordering().OrderedAfter(t_, s);
  }
  Position ObservedComplete(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return std::max(c_.seq.ordering().done(s), c_.seq.ExecutedThrough(s));
  }
  void InsertWait(StreamIndex, Position) override {}

 private:
  RuntimeCore& c_;
  const StreamIndex t_;
};

}  // namespace

absl::StatusOr<StreamIndex> Graphs::IndexOf(uint64_t s) { return streams_.StreamIndexOf(s); }

// ---------------------------------------------------------------- capture

absl::Status Graphs::BeginCapture(uint64_t s, CaptureMode mode) {
  return BeginCaptureToGraph(s, 0, {}, mode);
}

absl::Status Graphs::BeginCaptureToGraph(uint64_t s, uint64_t g, std::vector<uint64_t> deps,
                                         CaptureMode mode) {
  absl::StatusOr<RuntimeCore::StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (static_cast<unsigned>(mode) > static_cast<unsigned>(CaptureMode::kRelaxed)) {
    return absl::InvalidArgumentError("unknown capture mode");
  }
  if ((*rec)->legacy.load(std::memory_order_relaxed)) {
    return CaptureError(spErrorStreamCaptureUnsupported, "the legacy stream cannot be captured");
  }
  const StreamIndex t = (*rec)->index;
  if (c_.captures.Of(t) != nullptr) {
    return CaptureError(spErrorIllegalState, "the stream is already capturing");
  }
  uint64_t handle = g;
  std::vector<NodeIndex> from;
  std::shared_ptr<Graph> graph;
  if (g != 0) {
    absl::StatusOr<GraphRec*> grec = FindGraph(g);
    if (!grec.ok()) return grec.status();
    absl::StatusOr<std::vector<NodeIndex>> idx = Indices(g, deps);
    if (!idx.ok()) return idx.status();
    from = *std::move(idx);
    Mutable(**grec);
    graph = (*grec)->graph;
  } else {
    absl::StatusOr<uint64_t> made = NewGraph(std::make_shared<Graph>());
    if (!made.ok()) return made.status();
    handle = *made;
    graph = graphs_.at(handle).graph;
  }
  absl::StatusOr<Captures::Session*> session =
      c_.captures.Begin(t, std::move(graph), handle, g == 0, from, mode);
  if (!session.ok()) {
    if (g == 0) graphs_.erase(handle);
    return session.status();
  }
  (*rec)->capturing.store(true, std::memory_order_relaxed);
  c_.fast.Invalidate();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Graphs::EndCapture(uint64_t s) {
  absl::StatusOr<StreamIndex> t = IndexOf(s);
  if (!t.ok()) return t.status();
  Captures::Session* open = c_.captures.Of(*t);
  if (open == nullptr) return absl::InvalidArgumentError("the stream is not capturing");
  const std::vector<StreamIndex> members = open->streams;
  const uint64_t handle = open->graph_handle;
  const bool own = open->own_graph;
  absl::StatusOr<std::unique_ptr<Captures::Session>> ended = c_.captures.End(*t);
  if (c_.captures.Of(*t) != nullptr) return ended.status();  // still open (wrong stream or thread)
  for (StreamIndex m : members) {
    if (absl::StatusOr<RuntimeCore::StreamRec*> r = c_.FindStream(c_.StreamHandleOf(m)); r.ok()) {
      (*r)->capturing.store(false, std::memory_order_relaxed);
    }
  }
  c_.fast.Invalidate();
  if (!ended.ok()) {
    // A failed capture's graph goes with it (CUDA hands out none).
    if (own) (void)DestroyGraph(handle);
    return ended.status();
  }
  return own ? handle : 0;
}

absl::StatusOr<CaptureInfo> Graphs::GetCaptureInfo(uint64_t s) {
  absl::StatusOr<StreamIndex> t = IndexOf(s);
  if (!t.ok()) return t.status();
  CaptureInfo info;
  Captures::Session* session = c_.captures.Of(*t);
  if (session == nullptr) return info;
  info.status = session->invalidated ? CaptureStatus::kInvalidated : CaptureStatus::kActive;
  info.id = session->id;
  info.graph = GraphId{session->graph_handle};
  GraphRec& rec = graphs_.at(session->graph_handle);
  for (NodeIndex n : c_.captures.Frontier(*t)) {
    info.deps.push_back(GraphNodeId{NodeHandle(session->graph_handle, rec, n)});
  }
  return info;
}

absl::StatusOr<void*> Graphs::CaptureMalloc(StreamIndex t, uint64_t size, const PoolProps& props,
                                            absl::Span<const MemAccessDesc> access) {
  Captures::Session* session = c_.captures.Of(t);
  SP_CHECK(session != nullptr);
  if (session->invalidated) {
    return CaptureError(spErrorStreamCaptureInvalidated, "the capture was invalidated");
  }
  MemAllocNode node;
  node.props = props;
  node.props.alloc_type = AllocationType::kDevice;
  node.access.assign(access.begin(), access.end());
  node.bytes = size;
  GraphRec& rec = graphs_.at(session->graph_handle);
  const std::vector<NodeIndex> deps = c_.captures.Frontier(t);
  absl::StatusOr<void*> addr = AllocationAddress(rec, node, deps);
  if (!addr.ok()) return addr.status();
  node.dptr = *addr;
  absl::StatusOr<NodeIndex> n = c_.captures.Add(t, std::move(node));
  if (!n.ok()) return n.status();
  return *addr;
}

absl::Status Graphs::CaptureFree(StreamIndex t, void* ptr) {
  Captures::Session* session = c_.captures.Of(t);
  SP_CHECK(session != nullptr);
  if (absl::Status st = CheckFreeNode(*session->graph, ptr, c_.captures.Frontier(t)); !st.ok()) {
    Captures::Invalidate(session);
    return st;
  }
  return c_.captures.Add(t, MemFreeNode{ptr}).status();
}

// ---------------------------------------------------------- graphs, nodes

absl::StatusOr<uint64_t> Graphs::NewGraph(std::shared_ptr<Graph> graph) {
  if (absl::Status st = c_.HandleRoom(); !st.ok()) return st;
  const uint64_t h = c_.NewHandle(HandleKind::kGraph);
  graphs_.emplace(h, GraphRec{std::move(graph), {}, 0, {}});
  return h;
}

absl::StatusOr<uint64_t> Graphs::CreateGraph() { return NewGraph(std::make_shared<Graph>()); }

absl::StatusOr<Graphs::GraphRec*> Graphs::FindGraph(uint64_t g) {
  auto it = graphs_.find(g);
  if (KindOf(g) != HandleKind::kGraph || it == graphs_.end()) return InvalidHandle("graph", g);
  return &it->second;
}

absl::StatusOr<Graphs::ExecRec*> Graphs::FindExec(uint64_t e) {
  auto it = execs_.find(e);
  if (KindOf(e) != HandleKind::kGraphExec || it == execs_.end()) {
    return InvalidHandle("executable graph", e);
  }
  return &it->second;
}

absl::StatusOr<Graphs::NodeRef> Graphs::FindNode(uint64_t n) {
  auto it = nodes_.find(n);
  if (KindOf(n) != HandleKind::kGraphNode || it == nodes_.end()) {
    return InvalidHandle("graph node", n);
  }
  return it->second;
}

uint64_t Graphs::NodeHandle(uint64_t g, GraphRec& rec, NodeIndex i) {
  if (rec.node_handles.size() <= i) rec.node_handles.resize(rec.graph->size(), 0);
  uint64_t& h = rec.node_handles[i];
  if (h == 0) {
    h = c_.NewHandle(HandleKind::kGraphNode);
    nodes_.emplace(h, NodeRef{g, i});
  }
  return h;
}

Graph& Graphs::Mutable(GraphRec& rec) {
  if (rec.shared) {
    rec.graph = std::make_shared<Graph>(*rec.graph);
    rec.shared = false;
  }
  return *rec.graph;
}

absl::StatusOr<std::vector<NodeIndex>> Graphs::Indices(uint64_t g,
                                                       absl::Span<const uint64_t> nodes) {
  std::vector<NodeIndex> out;
  out.reserve(nodes.size());
  for (uint64_t n : nodes) {
    absl::StatusOr<NodeRef> ref = FindNode(n);
    if (!ref.ok()) return ref.status();
    if (ref->graph != g) return absl::InvalidArgumentError("a node of another graph");
    out.push_back(ref->index);
  }
  return out;
}

absl::Status Graphs::DestroyGraph(uint64_t g) {
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  // The capture would go on adding nodes to it, and its end hand it out.
  if (c_.captures.Builds(g)) {
    return CaptureError(spErrorIllegalState, "a capture is adding to the graph");
  }
  for (uint64_t h : (*rec)->node_handles) {
    if (h != 0) nodes_.erase(h);
  }
  ReleaseRanges((*rec)->ranges);
  graphs_.erase(g);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Graphs::CloneGraph(uint64_t g) {
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  if ((*rec)->graph->has_memory_nodes()) {
    return absl::UnimplementedError("a graph with memory nodes cannot be cloned");
  }
  return NewGraph(std::make_shared<Graph>(*(*rec)->graph));
}

absl::Status Graphs::CheckAllocNode(const MemAllocNode& node) const {
  if (node.bytes == 0) return absl::InvalidArgumentError("a graph allocation of 0 bytes");
  if (node.props.alloc_type != AllocationType::kDevice) {
    return absl::InvalidArgumentError("graph memory is device memory");
  }
  if (absl::Status st = c_.devices.Check(node.props.device); !st.ok()) return st;
  for (const MemAccessDesc& d : node.access) {
    if (d.location.type != MemLocationType::kDevice) {
      return absl::InvalidArgumentError("graph memory is accessed by devices only");
    }
    if (absl::Status st = c_.devices.Check(d.location.id); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Graphs::CheckFreeNode(const Graph& graph, const void* dptr,
                                   absl::Span<const NodeIndex> deps) const {
  NodeIndex at = 0;
  if (graph.UnfreedAllocation(dptr, &at) != nullptr) {
    // Its own allocation: the free must follow the allocation node.
    const bool after = std::any_of(deps.begin(), deps.end(),
                                   [&](NodeIndex d) { return d == at || graph.Precedes(at, d); });
    if (!after) return absl::InvalidArgumentError("the free node does not follow the allocation");
    return absl::OkStatus();
  }
  for (NodeIndex i = 0; i < graph.size(); ++i) {
    const auto* a = std::get_if<MemAllocNode>(&graph.node(i).params);
    if (a != nullptr && a->dptr == dptr) {
      return absl::InvalidArgumentError("the graph frees this allocation already");
    }
    const auto* f = std::get_if<MemFreeNode>(&graph.node(i).params);
    if (f != nullptr && f->dptr == dptr) {
      return absl::InvalidArgumentError("the graph frees this allocation already");
    }
  }
  // Another graph's allocation, freed here (CUDA allows it).
  for (const auto& m : memory_) {
    void* base = nullptr;
    if (m != nullptr && m->Find(dptr, &base) != nullptr && base == dptr) return absl::OkStatus();
  }
  return absl::InvalidArgumentError("not the address of a graph allocation");
}

absl::StatusOr<GraphMemory*> Graphs::MemoryOf(int device) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  if (memory_.size() <= static_cast<size_t>(device)) memory_.resize(c_.devices.count());
  if (memory_[device] == nullptr) {
    PhysicalMemory& upstream = c_.devices.Memory(device);
    if (!upstream.can_reserve()) {
      return absl::UnimplementedError("graph memory needs an upstream that reserves addresses");
    }
    memory_[device] = std::make_unique<GraphMemory>(upstream, *c_.devices[device].budget);
  }
  return memory_[device].get();
}

absl::StatusOr<void*> Graphs::AllocationAddress(GraphRec& rec, const MemAllocNode& node,
                                                absl::Span<const NodeIndex> deps) {
  if (absl::Status st = CheckAllocNode(node); !st.ok()) return st;
  absl::StatusOr<GraphMemory*> mem = MemoryOf(node.props.device);
  if (!mem.ok()) return mem.status();
  const Graph& graph = *rec.graph;
  const uint64_t need =
      (node.bytes + GraphMemory::kGranule - 1) / GraphMemory::kGranule * GraphMemory::kGranule;
  // A range of the graph whose last lifetime in it ends in a free node the
  // new node follows: stream order inside the graph shows they never overlap
  // (the sample's "d_a and d_b share a virtual address").
  for (const auto& [device, base] : rec.ranges) {
    if (device != node.props.device) continue;
    const GraphMemory::Range* r = (*mem)->Find(base);
    if (r == nullptr || r->size < need || graph.UnfreedAllocation(base) != nullptr) continue;
    NodeIndex last_free = 0;
    bool freed = false;
    for (NodeIndex i = 0; i < graph.size(); ++i) {
      const auto* f = std::get_if<MemFreeNode>(&graph.node(i).params);
      if (f != nullptr && f->dptr == base) {
        last_free = i;
        freed = true;
      }
    }
    if (!freed) continue;
    const bool after = std::any_of(deps.begin(), deps.end(), [&](NodeIndex d) {
      return d == last_free || graph.Precedes(last_free, d);
    });
    if (after) return base;
  }
  absl::StatusOr<void*> base = (*mem)->Reserve(node.bytes);
  if (!base.ok()) return base.status();
  rec.ranges.emplace_back(node.props.device, *base);
  return *base;
}

absl::StatusOr<uint64_t> Graphs::AddNode(uint64_t g, std::vector<uint64_t> deps, NodeParams params,
                                         void** dptr) {
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  absl::StatusOr<std::vector<NodeIndex>> idx = Indices(g, deps);
  if (!idx.ok()) return idx.status();
  if (auto* e = std::get_if<EventRecordNode>(&params)) {
    if (!events_.Exists(e->event)) return InvalidHandle("event", e->event);
  } else if (auto* w = std::get_if<EventWaitNode>(&params)) {
    if (!events_.Exists(w->event)) return InvalidHandle("event", w->event);
  } else if (auto* f = std::get_if<MemFreeNode>(&params)) {
    if (absl::Status st = CheckFreeNode(*(*rec)->graph, f->dptr, *idx); !st.ok()) return st;
  } else if (auto* c = std::get_if<MemcpyNode>(&params)) {
    if (c->bytes != 0 && (c->dst == nullptr || c->src == nullptr)) {
      return absl::InvalidArgumentError("a copy of null memory");
    }
  } else if (auto* m = std::get_if<MemsetNode>(&params)) {
    if (m->bytes != 0 && m->dst == nullptr)
      return absl::InvalidArgumentError("a fill of null memory");
  } else if (auto* h = std::get_if<HostNode>(&params)) {
    if (!h->fn) return absl::InvalidArgumentError("a host node without a function");
  }
  const size_t ranges_before = (*rec)->ranges.size();
  if (auto* a = std::get_if<MemAllocNode>(&params)) {
    absl::StatusOr<void*> addr = AllocationAddress(**rec, *a, *idx);
    if (!addr.ok()) return addr.status();
    a->dptr = *addr;
    if (dptr != nullptr) *dptr = *addr;
  }
  absl::StatusOr<NodeIndex> n = Mutable(**rec).Add(std::move(params), *idx);
  if (!n.ok()) {
    std::vector<std::pair<int, void*>> added((*rec)->ranges.begin() + ranges_before,
                                             (*rec)->ranges.end());
    (*rec)->ranges.resize(ranges_before);
    ReleaseRanges(added);
    return n.status();
  }
  return NodeHandle(g, **rec, *n);
}

absl::StatusOr<uint64_t> Graphs::AddChildGraphNode(uint64_t g, std::vector<uint64_t> deps,
                                                   uint64_t child) {
  absl::StatusOr<GraphRec*> c = FindGraph(child);
  if (!c.ok()) return c.status();
  if ((*c)->graph->has_memory_nodes()) {
    return absl::UnimplementedError("a graph with memory nodes cannot be a child graph");
  }
  if (child == g) return absl::InvalidArgumentError("a graph cannot hold itself");
  return AddNode(g, std::move(deps), ChildGraphNode{std::make_shared<const Graph>(*(*c)->graph)});
}

absl::Status Graphs::AddDependencies(uint64_t g,
                                     absl::Span<const std::pair<uint64_t, uint64_t>> edges) {
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  std::vector<std::pair<NodeIndex, NodeIndex>> idx;
  for (const auto& [from, to] : edges) {
    absl::StatusOr<std::vector<NodeIndex>> both = Indices(g, {from, to});
    if (!both.ok()) return both.status();
    idx.emplace_back((*both)[0], (*both)[1]);
  }
  // All or nothing: each edge is tried on a copy first.
  Graph trial(*(*rec)->graph);
  for (const auto& [from, to] : idx) {
    if (absl::Status st = trial.AddEdge(from, to); !st.ok()) return st;
  }
  Graph& graph = Mutable(**rec);
  for (const auto& [from, to] : idx) SP_CHECK(graph.AddEdge(from, to).ok());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint64_t>> Graphs::Nodes(uint64_t g, bool roots_only) {
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  std::vector<uint64_t> out;
  const Graph& graph = *(*rec)->graph;
  for (NodeIndex i = 0; i < graph.size(); ++i) {
    if (!roots_only || graph.node(i).deps.empty()) out.push_back(NodeHandle(g, **rec, i));
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> Graphs::Edges(uint64_t g) {
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& [from, to] : (*rec)->graph->Edges()) {
    out.emplace_back(NodeHandle(g, **rec, from), NodeHandle(g, **rec, to));
  }
  return out;
}

absl::StatusOr<GraphNodeType> Graphs::NodeTypeOfHandle(uint64_t node) {
  absl::StatusOr<NodeRef> ref = FindNode(node);
  if (!ref.ok()) return ref.status();
  return NodeTypeOf(graphs_.at(ref->graph).graph->node(ref->index).params);
}

absl::StatusOr<std::vector<uint64_t>> Graphs::NodeNeighbours(uint64_t node, bool dependents) {
  absl::StatusOr<NodeRef> ref = FindNode(node);
  if (!ref.ok()) return ref.status();
  GraphRec& rec = graphs_.at(ref->graph);
  const Node& n = rec.graph->node(ref->index);
  std::vector<uint64_t> out;
  for (NodeIndex i : dependents ? n.dependents : n.deps) {
    out.push_back(NodeHandle(ref->graph, rec, i));
  }
  return out;
}

absl::StatusOr<NodeParams> Graphs::NodeParamsOf(uint64_t node) {
  absl::StatusOr<NodeRef> ref = FindNode(node);
  if (!ref.ok()) return ref.status();
  return graphs_.at(ref->graph).graph->node(ref->index).params;
}

const Node* Graphs::NodeAt(uint64_t node, NodeIndex* index) {
  absl::StatusOr<NodeRef> ref = FindNode(node);
  if (!ref.ok()) return nullptr;
  *index = ref->index;
  return &graphs_.at(ref->graph).graph->node(ref->index);
}

// -------------------------------------------------------------- execution

absl::StatusOr<uint64_t> Graphs::Instantiate(uint64_t g, uint64_t flags) {
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  if ((flags & ~uint64_t{spGraphInstantiateFlagAutoFreeOnLaunch | spGraphInstantiateFlagUpload}) !=
      0) {
    return absl::InvalidArgumentError("unknown instantiate flags");
  }
  const bool memory = (*rec)->graph->has_memory_nodes();
  if (memory && (*rec)->exec != 0) {
    return absl::InvalidArgumentError(
        "a graph with memory nodes has one executable graph at a time");
  }
  if (absl::Status st = c_.HandleRoom(); !st.ok()) return st;
  ExecRec exec;
  if (c_.captures.Targets(g)) {
    exec.graph = std::make_shared<const Graph>(*(*rec)->graph);
  } else {
    exec.graph = (*rec)->graph;
    (*rec)->shared = true;
  }
  exec.source = g;
  Prepare(exec);
  exec.auto_free = (flags & spGraphInstantiateFlagAutoFreeOnLaunch) != 0;
  exec.events.assign(exec.plan.steps.size(), 0);
  auto undo = [&] {
    for (uint64_t e : exec.events) {
      if (e != 0) (void)events_.DestroyEvent(e);
    }
    if (exec.done != 0) (void)events_.DestroyEvent(exec.done);
  };
  for (size_t i = 0; i < exec.plan.steps.size(); ++i) {
    if (!exec.plan.steps[i].signals) continue;
    absl::StatusOr<uint64_t> e = events_.CreateEvent(kEventDisableTiming);
    if (!e.ok()) {
      undo();
      return e.status();
    }
    exec.events[i] = *e;
  }
  absl::StatusOr<uint64_t> done = events_.CreateEvent(kEventDisableTiming);
  if (!done.ok()) {
    undo();
    return done.status();
  }
  exec.done = *done;
  exec.ranges = (*rec)->ranges;
  for (const auto& [device, base] : exec.ranges) memory_[device]->Retain(base);
  const uint64_t h = c_.NewHandle(HandleKind::kGraphExec);
  if (memory) (*rec)->exec = h;
  execs_.emplace(h, std::move(exec));
  return h;
}

absl::Status Graphs::Upload(uint64_t e, uint64_t s) {
  absl::StatusOr<ExecRec*> exec = FindExec(e);
  if (!exec.ok()) return exec.status();
  absl::StatusOr<StreamIndex> t = IndexOf(s);
  return t.ok() ? absl::OkStatus() : t.status();
}

absl::Status Graphs::EnqueueStep(const PlanStep& step, uint64_t lane) {
  return std::visit(
      [&](const auto& p) -> absl::Status {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, KernelNode>) {
          if (p.body) return work_.LaunchWork(lane, p.duration_ns, p.body, p.accesses);
          return work_.LaunchKernel(lane, p.duration_ns, p.accesses);
        } else if constexpr (std::is_same_v<P, MemcpyNode>) {
          return work_.MemcpyAsync(p.dst, p.src, p.bytes, lane);
        } else if constexpr (std::is_same_v<P, MemsetNode>) {
          return work_.MemsetAsync(p.dst, p.value, p.bytes, lane);
        } else if constexpr (std::is_same_v<P, HostNode>) {
          return work_.LaunchHostFunc(lane, p.fn);
        } else if constexpr (std::is_same_v<P, EventRecordNode>) {
          return events_.RecordEvent(p.event, lane);
        } else if constexpr (std::is_same_v<P, EventWaitNode>) {
          return events_.StreamWaitEvent(lane, p.event);
        } else if constexpr (std::is_same_v<P, MemAllocNode>) {
          GraphMemory& mem = *memory_[p.props.device];
          if (absl::Status st = mem.Allocate(p.dptr, p.bytes); !st.ok()) return st;
          mem.Retain(p.dptr);  // the live allocation's own reference
          if (c_.obs.checker()) {
            absl::StatusOr<StreamIndex> t = IndexOf(lane);
            MutexLock order_lock(&c_.seq.mu());
            const Position at = c_.seq.AdvancePoint(*t, OpKind::kAllocMarker);
            LaunchOracle oracle(c_, *t);
            c_.obs.checker()->OnAlloc(reinterpret_cast<uintptr_t>(p.dptr), p.bytes, *t, at,
                                      c_.seq.SimAllocReady(*t), &oracle);
            c_.obs.CheckerAfterEvent();
          }
          return absl::OkStatus();
        } else if constexpr (std::is_same_v<P, MemFreeNode>) {
          absl::StatusOr<StreamIndex> t = IndexOf(lane);
          if (!t.ok()) return t.status();
          return FreeOutside(p.dptr, *t);
        } else {
          static_assert(std::is_same_v<P, EmptyNode> || std::is_same_v<P, ChildGraphNode>);
          return absl::OkStatus();  // ordering only; child graphs are flattened
        }
      },
      *step.params);
}

void Graphs::Prepare(ExecRec& exec) const {
  exec.plan = MakePlan(*exec.graph);
  exec.runs.clear();
  exec.event_and_free_steps.clear();
  const std::vector<PlanStep>& steps = exec.plan.steps;
  // A device runtime makes each node its own native op, so a run is a
  // single step there.
  const bool batch = c_.native == nullptr;
  for (uint32_t i = 0; i < steps.size();) {
    uint32_t end = i + 1;
    const bool batched = batch && Work::Batchable(*steps[i].params);
    if (batched) {
      // The steps after i on its lane that nothing but the run's own order
      // comes between: no step of another lane waits inside it, and none
      // inside waits for another lane.
      while (end < steps.size() && !steps[end - 1].signals && steps[end].lane == steps[i].lane &&
             steps[end].waits_for.empty() && Work::Batchable(*steps[end].params)) {
        ++end;
      }
    }
    exec.runs.push_back(Run{i, end, batched});
    if (!batched) {
      const NodeParams& p = *steps[i].params;
      if (std::holds_alternative<EventRecordNode>(p) || std::holds_alternative<EventWaitNode>(p) ||
          std::holds_alternative<MemFreeNode>(p)) {
        exec.event_and_free_steps.push_back(i);
      }
    }
    i = end;
  }
}

absl::Status Graphs::Launch(uint64_t e, uint64_t s) {
  absl::StatusOr<ExecRec*> found = FindExec(e);
  if (!found.ok()) return found.status();
  ExecRec& exec = **found;
  absl::StatusOr<RuntimeCore::StreamRec*> srec = c_.FindStream(s);
  if (!srec.ok()) return srec.status();
  const StreamIndex t = (*srec)->index;
  if (absl::Status st = c_.CheckLegacyOp(**srec); !st.ok()) return st;
  if (c_.captures.Of(t) != nullptr) {
    return CaptureError(spErrorStreamCaptureUnsupported,
                        "launching a graph into a capture is not supported");
  }
  // Memory first, so that a launch that cannot have it enqueues nothing: an
  // allocation still live from the last launch is freed now (auto-free) or
  // refuses the launch, and every range gets memory against the launch
  // stream's clock, where every lane starts.
  for (const auto& [device, base] : exec.ranges) {
    const GraphMemory::Range* r = memory_[device]->Find(base);
    if (r != nullptr && r->live && !exec.auto_free) {
      return absl::InvalidArgumentError(
          "an allocation of the graph's last launch is not freed (instantiate with "
          "spGraphInstantiateFlagAutoFreeOnLaunch to free it at relaunch)");
    }
  }
  for (uint32_t i : exec.event_and_free_steps) {
    const PlanStep& step = exec.plan.steps[i];
    // An event a node names may have been destroyed since: refused before
    // anything is enqueued.
    if (const auto* r = std::get_if<EventRecordNode>(step.params); r && !events_.Exists(r->event)) {
      return InvalidHandle("event", r->event);
    }
    if (const auto* w = std::get_if<EventWaitNode>(step.params); w && !events_.Exists(w->event)) {
      return InvalidHandle("event", w->event);
    }
    const auto* f = std::get_if<MemFreeNode>(step.params);
    if (f == nullptr || exec.graph->UnfreedAllocation(f->dptr) != nullptr) continue;
    bool own = false;
    for (const auto& [device, base] : exec.ranges) own = own || base == f->dptr;
    void* base = nullptr;
    uint64_t size = 0;
    bool live = false;
    if (!own && (!FindGraphAllocation(f->dptr, &base, &size, &live) || !live)) {
      return absl::InvalidArgumentError("a free node's allocation is not live");
    }
  }
  {
    MutexLock order_lock(&c_.seq.mu());
    LaunchOracle oracle(c_, t);
    std::vector<void*> keep;
    for (const auto& [device, base] : exec.ranges) keep.push_back(base);
    std::vector<std::pair<void*, uint64_t>> moved;
    for (const auto& [device, base] : exec.ranges) {
      if (absl::Status st = memory_[device]->Back(base, oracle, keep, &moved); !st.ok()) {
        return st;
      }
    }
    if (StreamOrderChecker* checker = c_.obs.checker(); checker != nullptr && !moved.empty()) {
      // Memory that moved from other ranges: the checker confirms, from its
      // own records, that their lifetimes ended before this launch can use
      // it (as for a pool block handed out again), then forgets them.
      const Position at = c_.seq.AdvancePoint(t, OpKind::kAllocMarker);
      for (const auto& [base, size] : moved) {
        const auto b = reinterpret_cast<uintptr_t>(base);
        checker->OnAlloc(b, size, t, at, c_.seq.SimAllocReady(t), &oracle);
        checker->OnUnmap(b, size);
      }
      c_.obs.CheckerAfterEvent();
    }
  }
  for (const auto& [device, base] : exec.ranges) {
    const GraphMemory::Range* r = memory_[device]->Find(base);
    if (r != nullptr && r->live) SP_CHECK(FreeOutside(base, t).ok());
  }
  if (exec.lanes.empty()) {
    const int device = (*srec)->device.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < exec.plan.lanes; ++i) {
      absl::StatusOr<uint64_t> lane = streams_.CreateStream(device, /*non_blocking=*/true);
      if (!lane.ok()) {
        for (uint64_t l : exec.lanes) (void)streams_.DestroyStream(l);
        exec.lanes.clear();
        return lane.status();
      }
      exec.lanes.push_back(*lane);
    }
  }
  // Fork: every lane after the previous launch (its end, recorded on its
  // stream; before the first launch a wait on it waits for nothing) and
  // after s's work so far.
  for (uint64_t lane : exec.lanes) SP_CHECK(events_.StreamWaitEvent(lane, exec.done).ok());
  SP_CHECK(events_.RecordEvent(exec.done, s).ok());
  for (uint64_t lane : exec.lanes) SP_CHECK(events_.StreamWaitEvent(lane, exec.done).ok());
  absl::Status failed;
  const std::vector<PlanStep>& steps = exec.plan.steps;
  for (const Run& run : exec.runs) {
    const uint64_t lane = exec.lanes[steps[run.begin].lane];
    for (uint32_t d : steps[run.begin].waits_for) {
      SP_CHECK(events_.StreamWaitEvent(lane, exec.events[d]).ok());
    }
    failed = run.batched ? work_.EnqueueNodes(
                               lane, absl::MakeConstSpan(&steps[run.begin], run.end - run.begin))
                         : EnqueueStep(steps[run.begin], lane);
    if (steps[run.end - 1].signals) {
      SP_CHECK(events_.RecordEvent(exec.events[run.end - 1], lane).ok());
    }
    if (!failed.ok()) break;
  }
  // Join: s's later work after every lane.
  for (uint32_t tail : exec.plan.tails) {
    SP_CHECK(events_.StreamWaitEvent(s, exec.events[tail]).ok());
  }
  SP_CHECK(events_.RecordEvent(exec.done, s).ok());
  return failed;
}

absl::Status Graphs::DestroyExec(uint64_t e) {
  absl::StatusOr<ExecRec*> exec = FindExec(e);
  if (!exec.ok()) return exec.status();
  for (uint64_t l : (*exec)->lanes) (void)streams_.DestroyStream(l);
  for (uint64_t ev : (*exec)->events) {
    if (ev != 0) (void)events_.DestroyEvent(ev);
  }
  (void)events_.DestroyEvent((*exec)->done);
  ReleaseRanges((*exec)->ranges);
  if (auto g = graphs_.find((*exec)->source); g != graphs_.end() && g->second.exec == e) {
    g->second.exec = 0;
  }
  execs_.erase(e);
  return absl::OkStatus();
}

absl::Status Graphs::ExecUpdate(uint64_t e, uint64_t g, int* result) {
  *result = spGraphExecUpdateError;
  absl::StatusOr<ExecRec*> exec = FindExec(e);
  if (!exec.ok()) return exec.status();
  absl::StatusOr<GraphRec*> rec = FindGraph(g);
  if (!rec.ok()) return rec.status();
  const Graph& now = *(*exec)->graph;
  const Graph& next = *(*rec)->graph;
  auto refuse = [&](spGraphExecUpdateResult why, const char* what) {
    *result = why;
    return CaptureError(spErrorGraphExecUpdateFailure, what);
  };
  if (now.size() != next.size()) return refuse(spGraphExecUpdateErrorTopologyChanged, "node count");
  for (NodeIndex i = 0; i < now.size(); ++i) {
    if (now.node(i).deps != next.node(i).deps) {
      return refuse(spGraphExecUpdateErrorTopologyChanged, "the edges differ");
    }
    const NodeParams& a = now.node(i).params;
    const NodeParams& b = next.node(i).params;
    if (a.index() != b.index()) {
      return refuse(spGraphExecUpdateErrorNodeTypeChanged, "a node's kind differs");
    }
    const GraphNodeType type = NodeTypeOf(a);
    if (type == GraphNodeType::kMemAlloc || type == GraphNodeType::kMemFree) {
      const void* pa = type == GraphNodeType::kMemAlloc ? std::get<MemAllocNode>(a).dptr
                                                        : std::get<MemFreeNode>(a).dptr;
      const void* pb = type == GraphNodeType::kMemAlloc ? std::get<MemAllocNode>(b).dptr
                                                        : std::get<MemFreeNode>(b).dptr;
      if (pa != pb) {
        return refuse(spGraphExecUpdateErrorNotSupported, "memory nodes cannot be updated");
      }
    }
    // A child graph may change its nodes' parameters, not its shape (an
    // event node may name another event).
    if (type == GraphNodeType::kGraph) {
      const Graph& ca = *std::get<ChildGraphNode>(a).graph;
      const Graph& cb = *std::get<ChildGraphNode>(b).graph;
      if (ca.size() == cb.size() && ca.Edges() == cb.Edges()) continue;
      return refuse(spGraphExecUpdateErrorTopologyChanged, "a child graph's shape differs");
    }
  }
  // Memory nodes are equal, so the copy keeps the same ranges.
  (*exec)->graph = std::make_shared<const Graph>(next);
  Prepare(**exec);
  *result = spGraphExecUpdateSuccess;
  return absl::OkStatus();
}

// ------------------------------------------------------------ graph memory

absl::Status Graphs::FreeOutside(void* ptr, StreamIndex t) {
  for (const auto& m : memory_) {
    void* base = nullptr;
    const GraphMemory::Range* r = m == nullptr ? nullptr : m->Find(ptr, &base);
    if (r == nullptr) continue;
    if (base != ptr) return absl::InvalidArgumentError("not the start of a graph allocation");
    if (!r->live) return absl::InvalidArgumentError("the graph allocation is not live");
    Position at = 0;
    {
      MutexLock order_lock(&c_.seq.mu());
      StreamOrderChecker* checker = c_.obs.checker();
      if (t != kNoStream) {
        at = c_.seq.AdvancePoint(t, OpKind::kFreeMarker);
        if (checker != nullptr) {
          checker->OnFree(reinterpret_cast<uintptr_t>(base), t, at, c_.seq.ordering().PointClock(t),
                          c_.seq.SimLastEnd(t));
        }
      } else if (checker != nullptr) {
        checker->OnFreeNow(reinterpret_cast<uintptr_t>(base), c_.seq.executor()->Now());
      }
    }
    if (c_.obs.checker()) c_.obs.CheckerAfterEvent();
    SP_CHECK(m->Free(base, t, at).ok());
    m->Release(base);  // the live allocation's reference
    return absl::OkStatus();
  }
  return absl::NotFoundError("no graph allocation");
}

bool Graphs::FindGraphAllocation(const void* ptr, void** base, uint64_t* size, bool* live,
                                 int* device) {
  for (size_t d = 0; d < memory_.size(); ++d) {
    const GraphMemory::Range* r = memory_[d] == nullptr ? nullptr : memory_[d]->Find(ptr, base);
    if (r != nullptr) {
      *size = r->requested;
      *live = r->live;
      if (device != nullptr) *device = static_cast<int>(d);
      return true;
    }
  }
  return false;
}

void Graphs::ReleaseRanges(const std::vector<std::pair<int, void*>>& ranges) {
  for (const auto& [device, base] : ranges) memory_[device]->Release(base);
}

absl::Status Graphs::TrimGraphMemory(int device) {
  absl::StatusOr<GraphMemory*> mem = MemoryOf(device);
  if (!mem.ok()) return mem.status();
  MutexLock order_lock(&c_.seq.mu());
  (*mem)->Trim([&](StreamIndex s, Position p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return p <= std::max(c_.seq.ordering().done(s), c_.seq.ExecutedThrough(s));
  });
  return absl::OkStatus();
}

absl::StatusOr<GraphMemStats> Graphs::GraphMemoryStats(int device) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  if (static_cast<size_t>(device) >= memory_.size() || memory_[device] == nullptr) {
    return GraphMemStats{};
  }
  return memory_[device]->stats();
}

absl::Status Graphs::ResetGraphMemoryHigh(int device, bool used) {
  absl::StatusOr<GraphMemory*> mem = MemoryOf(device);
  if (!mem.ok()) return mem.status();
  if (used) {
    (*mem)->ResetUsedHigh();
  } else {
    (*mem)->ResetReservedHigh();
  }
  return absl::OkStatus();
}

void Graphs::StreamDestroyed(StreamIndex t) {
  Captures::Session* session = c_.captures.Of(t);
  if (session == nullptr) return;
  const bool origin = session->origin == t;
  const std::vector<StreamIndex> members = session->streams;
  const uint64_t graph = session->own_graph ? session->graph_handle : 0;
  c_.captures.DropStream(t);
  if (!origin) return;
  for (StreamIndex m : members) {
    if (absl::StatusOr<RuntimeCore::StreamRec*> r = c_.FindStream(c_.StreamHandleOf(m)); r.ok()) {
      (*r)->capturing.store(false, std::memory_order_relaxed);
    }
  }
  c_.fast.Invalidate();
  if (graph != 0) (void)DestroyGraph(graph);
}

void Graphs::Clear() {
  std::vector<uint64_t> execs;
  for (const auto& [h, rec] : execs_) execs.push_back(h);
  for (uint64_t h : execs) (void)DestroyExec(h);
  std::vector<uint64_t> graphs;
  for (const auto& [h, rec] : graphs_) graphs.push_back(h);
  for (uint64_t h : graphs) (void)DestroyGraph(h);
  memory_.clear();
}

}  // namespace streampool::internal
