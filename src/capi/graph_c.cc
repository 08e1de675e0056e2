// The C API of graphs (streampool.h, "graphs"): argument checks and handles;
// the semantics are the Graphs part's (src/runtime/graphs.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/capi/c_entry.h"
#include "src/runtime/graphs.h"
#include "streampool/streampool.h"

using streampool::internal::Entry;
using streampool::internal::EnumInt;
using streampool::internal::Graphs;
using streampool::internal::InHostCallback;
using streampool::internal::IsRuntimeHandle;
using streampool::internal::NodeParams;
using streampool::internal::Process;
using streampool::internal::RunOn;
using streampool::internal::RuntimeImpl;
using streampool::internal::SetHandle;
using streampool::internal::ToError;
using streampool::internal::ToHandle;
using streampool::internal::Value;
namespace internal = streampool::internal;

namespace {

bool ToMode(spStreamCaptureMode in, streampool::CaptureMode* out) {
  const int m = EnumInt(in);
  if (m < spStreamCaptureModeGlobal || m > spStreamCaptureModeRelaxed) return false;
  *out = static_cast<streampool::CaptureMode>(m);
  return true;
}

// NULL with a zero count is no dependencies; NULL with a count is an error.
bool ToDeps(const spGraphNode_t* deps, size_t n, std::vector<uint64_t>* out) {
  if (deps == nullptr && n != 0) return false;
  out->resize(n);
  for (size_t i = 0; i < n; ++i) (*out)[i] = Value(deps[i]);
  return true;
}

template <typename H>
spError_t CopyOut(const absl::StatusOr<std::vector<uint64_t>>& got, H* out, size_t* count) {
  if (!got.ok()) return ToError(got.status());
  if (out != nullptr) {
    for (size_t i = 0; i < got->size() && i < *count; ++i) out[i] = ToHandle<H>((*got)[i]);
  }
  *count = got->size();
  return spSuccess;
}

// The shape every Add*Node shares: resolve the graph, check the out-pointer
// and dependencies, add.
template <typename Make>
spError_t AddNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps, size_t n,
                  Make make) {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, graph);
    std::vector<uint64_t> d;
    if (node == nullptr || !ToDeps(deps, n, &d)) return spErrorInvalidValue;
    return make(r, std::move(d));
  });
}

spError_t Add(internal::RuntimeImpl& r, spGraphNode_t* node, spGraph_t graph,
              std::vector<uint64_t> deps, NodeParams params) {
  return SetHandle(
      r.Run<&Graphs::AddNode>(Value(graph), std::move(deps), std::move(params), nullptr), node);
}

bool ToAccess(const spMemAccessDesc* descs, size_t n, std::vector<streampool::MemAccessDesc>* out) {
  if (descs == nullptr && n != 0) return false;
  for (size_t i = 0; i < n; ++i) {
    const int type = EnumInt(descs[i].location.type);
    const int flags = EnumInt(descs[i].flags);
    if (type != spMemLocationTypeDevice && type != spMemLocationTypeHost) return false;
    if (flags != spMemAccessFlagsProtNone && flags != spMemAccessFlagsProtRead &&
        flags != spMemAccessFlagsProtReadWrite) {
      return false;
    }
    out->push_back(streampool::MemAccessDesc{
        streampool::MemLocation{static_cast<streampool::MemLocationType>(type),
                                descs[i].location.id},
        static_cast<streampool::MemAccessFlags>(flags)});
  }
  return true;
}

// A kernel node's userData, shared by the node's copies; the last one gone
// hands it to destroy.
struct UserData {
  UserData(void* d, void (*f)(void*)) : data(d), destroy(f) {}
  UserData(const UserData&) = delete;
  UserData& operator=(const UserData&) = delete;
  ~UserData() {
    if (destroy != nullptr) destroy(data);
  }
  void* data;
  void (*destroy)(void*);
};

bool ValidAttr(spGraphMemAttributeType attr) {
  const int a = EnumInt(attr);
  return a >= spGraphMemAttrUsedMemCurrent && a <= spGraphMemAttrReservedMemHigh;
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- capture

spError_t spStreamBeginCapture(spStream_t s, spStreamCaptureMode mode) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    streampool::CaptureMode m;
    if (!ToMode(mode, &m)) return spErrorInvalidValue;
    return ToError(r.Run<&Graphs::BeginCapture>(Value(s), m));
  });
}

spError_t spStreamBeginCaptureToGraph(spStream_t s, spGraph_t graph, const spGraphNode_t* deps,
                                      size_t numDeps, spStreamCaptureMode mode) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    streampool::CaptureMode m;
    std::vector<uint64_t> d;
    if (graph == nullptr || !ToMode(mode, &m) || !ToDeps(deps, numDeps, &d)) {
      return spErrorInvalidValue;
    }
    return ToError(r.Run<&Graphs::BeginCaptureToGraph>(Value(s), Value(graph), std::move(d), m));
  });
}

spError_t spStreamEndCapture(spStream_t s, spGraph_t* graph) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (graph == nullptr) return spErrorInvalidValue;
    absl::StatusOr<uint64_t> g = r.Run<&Graphs::EndCapture>(Value(s));
    if (!g.ok()) {
      // CUDA clears the out-graph of a failed capture.
      if (!g.status().ok()) *graph = nullptr;
      return ToError(g.status());
    }
    *graph = ToHandle<spGraph_t>(*g);
    return spSuccess;
  });
}

spError_t spStreamIsCapturing(spStream_t s, spStreamCaptureStatus* status) noexcept {
  return spStreamGetCaptureInfo(s, status, nullptr, nullptr, nullptr, nullptr);
}

spError_t spStreamGetCaptureInfo(spStream_t s, spStreamCaptureStatus* status,
                                 unsigned long long* id, spGraph_t* graph,
                                 const spGraphNode_t** deps, size_t* numDeps) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, s);
    if (status == nullptr) return spErrorInvalidValue;
    absl::StatusOr<streampool::CaptureInfo> info = r.Run<&Graphs::GetCaptureInfo>(Value(s));
    if (!info.ok()) return ToError(info.status());
    *status = static_cast<spStreamCaptureStatus>(info->status);
    if (id != nullptr) *id = info->id;
    if (graph != nullptr) *graph = info->graph.c();
    // Valid until this thread's next call.
    thread_local std::vector<spGraphNode_t> frontier;
    frontier.clear();
    for (streampool::GraphNodeId n : info->deps) frontier.push_back(n.c());
    if (deps != nullptr) *deps = frontier.empty() ? nullptr : frontier.data();
    if (numDeps != nullptr) *numDeps = frontier.size();
    return spSuccess;
  });
}

spError_t spThreadExchangeStreamCaptureMode(spStreamCaptureMode* mode) noexcept {
  return Entry([&]() -> spError_t {
    streampool::CaptureMode m;
    if (mode == nullptr || !ToMode(*mode, &m)) return spErrorInvalidValue;
    *mode = static_cast<spStreamCaptureMode>(internal::ExchangeThreadCaptureMode(m));
    return spSuccess;
  });
}

// ---------------------------------------------------------- graphs, nodes

spError_t spGraphCreate(spGraph_t* graph, spRuntime_t rt, unsigned flags) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (graph == nullptr || flags != 0) return spErrorInvalidValue;
    return SetHandle(r.Run<&Graphs::CreateGraph>(), graph);
  });
}

spError_t spGraphDestroy(spGraph_t graph) noexcept {
  return RunOn<&Graphs::DestroyGraph>(graph, Value(graph));
}

spError_t spGraphClone(spGraph_t* clone, spGraph_t graph) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, graph);
    if (clone == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Graphs::CloneGraph>(Value(graph)), clone);
  });
}

spError_t spGraphAddKernelNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                               size_t numDeps, const spKernelNodeParams* params) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    if (params == nullptr || (params->accesses == nullptr && params->accessCount != 0)) {
      return spErrorInvalidValue;
    }
    internal::KernelNode k;
    k.duration_ns = params->durationNs;
    for (size_t i = 0; i < params->accessCount; ++i) {
      const spAccess& a = params->accesses[i];
      k.accesses.push_back(streampool::Access{a.ptr, a.size, a.write != 0});
    }
    std::shared_ptr<UserData> user;
    if (params->fn != nullptr) {
      user = std::make_shared<UserData>(params->userData, params->destroy);
      k.body = [fn = params->fn, user] { fn(user->data); };
    }
    const spError_t e = Add(r, node, graph, std::move(d), std::move(k));
    // The node's copies died with the failure: userData stays the caller's.
    if (e != spSuccess && user != nullptr) user->destroy = nullptr;
    return e;
  });
}

spError_t spGraphAddMemcpyNode1D(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                                 size_t numDeps, void* dst, const void* src,
                                 size_t bytes) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    return Add(r, node, graph, std::move(d), internal::MemcpyNode{dst, src, bytes});
  });
}

spError_t spGraphAddMemsetNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                               size_t numDeps, void* dst, int value, size_t bytes) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    return Add(r, node, graph, std::move(d), internal::MemsetNode{dst, value, bytes});
  });
}

spError_t spGraphAddHostNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                             size_t numDeps, void (*fn)(void*), void* userData) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    if (fn == nullptr) return spErrorInvalidValue;
    return Add(r, node, graph, std::move(d), internal::HostNode{[fn, userData] { fn(userData); }});
  });
}

spError_t spGraphAddEventRecordNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                                    size_t numDeps, spEvent_t event) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    if (event == nullptr) return spErrorInvalidValue;
    return Add(r, node, graph, std::move(d), internal::EventRecordNode{Value(event)});
  });
}

spError_t spGraphAddEventWaitNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                                  size_t numDeps, spEvent_t event) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    if (event == nullptr) return spErrorInvalidValue;
    return Add(r, node, graph, std::move(d), internal::EventWaitNode{Value(event)});
  });
}

spError_t spGraphAddEmptyNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                              size_t numDeps) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    return Add(r, node, graph, std::move(d), internal::EmptyNode{});
  });
}

spError_t spGraphAddChildGraphNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                                   size_t numDeps, spGraph_t child) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    if (child == nullptr) return spErrorInvalidValue;
    return SetHandle(
        r.template Run<&Graphs::AddChildGraphNode>(Value(graph), std::move(d), Value(child)), node);
  });
}

spError_t spGraphAddMemAllocNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                                 size_t numDeps, spMemAllocNodeParams* params) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    if (params == nullptr) return spErrorInvalidValue;
    internal::MemAllocNode a;
    if (!internal::ToPoolProps(params->poolProps, &a.props) ||
        !ToAccess(params->accessDescs, params->accessDescCount, &a.access)) {
      return spErrorInvalidValue;
    }
    a.bytes = params->bytesize;
    void* dptr = nullptr;
    const spError_t e = SetHandle(r.template Run<&Graphs::AddNode>(Value(graph), std::move(d),
                                                                   NodeParams(std::move(a)), &dptr),
                                  node);
    if (e == spSuccess) params->dptr = dptr;
    return e;
  });
}

spError_t spGraphAddMemFreeNode(spGraphNode_t* node, spGraph_t graph, const spGraphNode_t* deps,
                                size_t numDeps, void* dptr) noexcept {
  return AddNode(node, graph, deps, numDeps, [&](auto& r, std::vector<uint64_t> d) {
    if (dptr == nullptr) return spErrorInvalidValue;
    return Add(r, node, graph, std::move(d), internal::MemFreeNode{dptr});
  });
}

spError_t spGraphMemAllocNodeGetParams(spGraphNode_t node, spMemAllocNodeParams* params) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, node);
    if (params == nullptr) return spErrorInvalidValue;
    absl::StatusOr<NodeParams> p = r.Run<&Graphs::NodeParamsOf>(Value(node));
    if (!p.ok()) return ToError(p.status());
    const auto* a = std::get_if<internal::MemAllocNode>(&*p);
    if (a == nullptr) return spErrorInvalidValue;
    // The access descriptors live as long as the node: point at a copy kept
    // per thread until its next call.
    thread_local std::vector<spMemAccessDesc> descs;
    descs.clear();
    for (const streampool::MemAccessDesc& d : a->access) {
      descs.push_back(spMemAccessDesc{
          spMemLocation{static_cast<spMemLocationType>(d.location.type), d.location.id},
          static_cast<spMemAccessFlags>(d.flags)});
    }
    *params = spMemAllocNodeParams{};
    params->poolProps.allocType = spMemAllocationTypeDevice;
    params->poolProps.device = a->props.device;
    params->accessDescs = descs.empty() ? nullptr : descs.data();
    params->accessDescCount = descs.size();
    params->bytesize = a->bytes;
    params->dptr = a->dptr;
    return spSuccess;
  });
}

spError_t spGraphMemFreeNodeGetParams(spGraphNode_t node, void** dptr) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, node);
    if (dptr == nullptr) return spErrorInvalidValue;
    absl::StatusOr<NodeParams> p = r.Run<&Graphs::NodeParamsOf>(Value(node));
    if (!p.ok()) return ToError(p.status());
    const auto* f = std::get_if<internal::MemFreeNode>(&*p);
    if (f == nullptr) return spErrorInvalidValue;
    *dptr = f->dptr;
    return spSuccess;
  });
}

spError_t spGraphAddDependencies(spGraph_t graph, const spGraphNode_t* from,
                                 const spGraphNode_t* to, size_t count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, graph);
    if (count != 0 && (from == nullptr || to == nullptr)) return spErrorInvalidValue;
    std::vector<std::pair<uint64_t, uint64_t>> edges;
    for (size_t i = 0; i < count; ++i) edges.emplace_back(Value(from[i]), Value(to[i]));
    return ToError(r.Run<&Graphs::AddDependencies>(Value(graph), std::move(edges)));
  });
}

spError_t spGraphGetNodes(spGraph_t graph, spGraphNode_t* nodes, size_t* count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, graph);
    if (count == nullptr) return spErrorInvalidValue;
    return CopyOut(r.Run<&Graphs::Nodes>(Value(graph), false), nodes, count);
  });
}

spError_t spGraphGetRootNodes(spGraph_t graph, spGraphNode_t* nodes, size_t* count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, graph);
    if (count == nullptr) return spErrorInvalidValue;
    return CopyOut(r.Run<&Graphs::Nodes>(Value(graph), true), nodes, count);
  });
}

spError_t spGraphGetEdges(spGraph_t graph, spGraphNode_t* from, spGraphNode_t* to,
                          size_t* count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, graph);
    if (count == nullptr || ((from == nullptr) != (to == nullptr))) return spErrorInvalidValue;
    auto edges = r.Run<&Graphs::Edges>(Value(graph));
    if (!edges.ok()) return ToError(edges.status());
    if (from != nullptr) {
      for (size_t i = 0; i < edges->size() && i < *count; ++i) {
        from[i] = ToHandle<spGraphNode_t>((*edges)[i].first);
        to[i] = ToHandle<spGraphNode_t>((*edges)[i].second);
      }
    }
    *count = edges->size();
    return spSuccess;
  });
}

spError_t spGraphNodeGetType(spGraphNode_t node, spGraphNodeType* type) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, node);
    if (type == nullptr) return spErrorInvalidValue;
    auto t = r.Run<&Graphs::NodeTypeOfHandle>(Value(node));
    if (!t.ok()) return ToError(t.status());
    *type = static_cast<spGraphNodeType>(*t);
    return spSuccess;
  });
}

spError_t spGraphNodeGetDependencies(spGraphNode_t node, spGraphNode_t* deps,
                                     size_t* count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, node);
    if (count == nullptr) return spErrorInvalidValue;
    return CopyOut(r.Run<&Graphs::NodeNeighbours>(Value(node), false), deps, count);
  });
}

spError_t spGraphNodeGetDependentNodes(spGraphNode_t node, spGraphNode_t* dependents,
                                       size_t* count) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, node);
    if (count == nullptr) return spErrorInvalidValue;
    return CopyOut(r.Run<&Graphs::NodeNeighbours>(Value(node), true), dependents, count);
  });
}

// -------------------------------------------------------------- execution

spError_t spGraphInstantiate(spGraphExec_t* exec, spGraph_t graph,
                             unsigned long long flags) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, graph);
    if (exec == nullptr) return spErrorInvalidValue;
    return SetHandle(r.Run<&Graphs::Instantiate>(Value(graph), uint64_t{flags}), exec);
  });
}

spError_t spGraphUpload(spGraphExec_t exec, spStream_t s) noexcept {
  return RunOn<&Graphs::Upload>(exec, Value(exec), Value(s));
}

spError_t spGraphLaunch(spGraphExec_t exec, spStream_t s) noexcept {
  return RunOn<&Graphs::Launch>(exec, Value(exec), Value(s));
}

spError_t spGraphExecDestroy(spGraphExec_t exec) noexcept {
  return RunOn<&Graphs::DestroyExec>(exec, Value(exec));
}

spError_t spGraphExecUpdate(spGraphExec_t exec, spGraph_t graph,
                            spGraphExecUpdateResult* result) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, exec);
    if (graph == nullptr) return spErrorInvalidValue;
    int why = spGraphExecUpdateError;
    const spError_t e = ToError(r.Run<&Graphs::ExecUpdate>(Value(exec), Value(graph), &why));
    if (result != nullptr) *result = static_cast<spGraphExecUpdateResult>(why);
    return e;
  });
}

// ------------------------------------------------------------ graph memory

spError_t spDeviceGraphMemTrim(spRuntime_t rt, int device) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    return ToError(r.Run<&Graphs::TrimGraphMemory>(device));
  });
}

spError_t spDeviceGetGraphMemAttribute(spRuntime_t rt, int device, spGraphMemAttributeType attr,
                                       uint64_t* value) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    if (value == nullptr || !ValidAttr(attr)) return spErrorInvalidValue;
    absl::StatusOr<streampool::GraphMemStats> st = r.Run<&Graphs::GraphMemoryStats>(device);
    if (!st.ok()) return ToError(st.status());
    const uint64_t figures[] = {st->used_current, st->used_high, st->reserved_current,
                                st->reserved_high};
    *value = figures[EnumInt(attr)];
    return spSuccess;
  });
}

spError_t spDeviceSetGraphMemAttribute(spRuntime_t rt, int device, spGraphMemAttributeType attr,
                                       const uint64_t* value) noexcept {
  return Entry([&]() -> spError_t {
    SP_CHECK_RUNTIME_HANDLE(rt);
    SP_RESOLVE(r, rt);
    const int a = EnumInt(attr);
    if (value == nullptr || *value != 0 ||
        (a != spGraphMemAttrUsedMemHigh && a != spGraphMemAttrReservedMemHigh)) {
      return spErrorInvalidValue;
    }
    return ToError(r.Run<&Graphs::ResetGraphMemoryHigh>(device, a == spGraphMemAttrUsedMemHigh));
  });
}

}  // extern "C"
