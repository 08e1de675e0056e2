// streampool::Runtime hands each call to a part of RuntimeImpl (through
// RuntimeImpl::Run, as the C API does); handles are the same numbers the C API
// uses, so the two APIs can be mixed on one runtime.
#include "streampool/runtime.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "src/pool/names.h"
#include "src/runtime/guard.h"
#include "src/runtime/handles.h"
#include "src/runtime/runtime_impl.h"

namespace streampool {

spError_t ToCError(const absl::Status& status) {
  if (auto c = status.GetPayload(kCErrorPayload)) {
    int code = 0;
    if (absl::SimpleAtoi(std::string(*c), &code)) return static_cast<spError_t>(code);
  }
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return spSuccess;
    case absl::StatusCode::kInvalidArgument:
      return spErrorInvalidValue;
    case absl::StatusCode::kResourceExhausted:
      return spErrorMemoryAllocation;
    case absl::StatusCode::kOutOfRange:
      return spErrorInvalidDevice;
    case absl::StatusCode::kPermissionDenied:
      return spErrorPeerAccessUnsupported;
    case absl::StatusCode::kNotFound:
      return spErrorInvalidResourceHandle;
    case absl::StatusCode::kUnavailable:
      return spErrorNotReady;
    case absl::StatusCode::kUnimplemented:
      return spErrorNotSupported;
    case absl::StatusCode::kInternal:
      return spErrorUnknown;
    case absl::StatusCode::kAlreadyExists:
      return spErrorHostMemoryAlreadyRegistered;
    default:
      return spErrorInvalidValue;
  }
}

using internal::Allocator;
using internal::Events;
using internal::Graphs;
using internal::IpcService;
using internal::Observation;
using internal::Pools;
using internal::RuntimeImpl;
using internal::Streams;
using internal::Work;

namespace {

// A call handed to a part, with nothing thrown leaving the library.
template <auto Op, typename... A>
auto Call(RuntimeImpl& rt, A&&... args) {
  return internal::Guarded([&] { return rt.Run<Op>(std::forward<A>(args)...); });
}
// The same for an operation that makes or finds a handle, typed as the public
// id of its kind.
template <typename Id, auto Op, typename... A>
absl::StatusOr<Id> Call(RuntimeImpl& rt, A&&... args) {
  return internal::Guarded([&]() -> absl::StatusOr<Id> {
    absl::StatusOr<uint64_t> h = rt.Run<Op>(std::forward<A>(args)...);
    if (!h.ok()) return h.status();
    return Id{*h};
  });
}

std::vector<uint64_t> Handles(absl::Span<const GraphNodeId> nodes) {
  std::vector<uint64_t> out;
  out.reserve(nodes.size());
  for (GraphNodeId n : nodes) out.push_back(n.value);
  return out;
}

absl::StatusOr<std::vector<GraphNodeId>> NodeIds(absl::StatusOr<std::vector<uint64_t>> handles) {
  if (!handles.ok()) return handles.status();
  std::vector<GraphNodeId> out;
  out.reserve(handles->size());
  for (uint64_t h : *handles) out.push_back(GraphNodeId{h});
  return out;
}

// A node made from its parameters, named by its public id.
absl::StatusOr<GraphNodeId> AddNode(RuntimeImpl& rt, GraphId g, absl::Span<const GraphNodeId> deps,
                                    internal::NodeParams params) {
  return Call<GraphNodeId, &Graphs::AddNode>(rt, g.value, Handles(deps), std::move(params),
                                             nullptr);
}

}  // namespace

Runtime::Runtime(std::shared_ptr<RuntimeImpl> impl, bool owns)
    : impl_(std::move(impl)), owns_(owns) {}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeConfig& config) {
  return internal::Guarded([&]() -> absl::StatusOr<std::unique_ptr<Runtime>> {
    absl::StatusOr<std::shared_ptr<RuntimeImpl>> impl =
        RuntimeImpl::Create(config, internal::Process::Default());
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<Runtime>(new Runtime(*std::move(impl), /*owns=*/true));
  });
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::FromC(spRuntime_t rt) {
  const auto h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rt));
  if (internal::KindOf(h) != internal::HandleKind::kRuntime) {
    return absl::NotFoundError("not a runtime handle");
  }
  absl::StatusOr<std::shared_ptr<RuntimeImpl>> impl =
      RuntimeImpl::Find(internal::Process::Default(), h);
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Runtime>(new Runtime(*std::move(impl), /*owns=*/false));
}

Runtime::~Runtime() {
  // Destroying a runtime that the C API already destroyed is a no-op.
  if (owns_) RuntimeImpl::Destroy(impl_->process(), impl_->handle()).IgnoreError();
}

spRuntime_t Runtime::c() const {
  return reinterpret_cast<spRuntime_t>(static_cast<uintptr_t>(impl_->handle()));
}
const RuntimeConfig& Runtime::config() const { return impl_->config(); }

absl::StatusOr<StreamId> Runtime::CreateStream(int device, bool non_blocking) {
  return Call<StreamId, &Streams::CreateStream>(*impl_, device, non_blocking);
}
absl::Status Runtime::DestroyStream(StreamId s) {
  return Call<&Streams::DestroyStream>(*impl_, s.value);
}
absl::StatusOr<StreamId> Runtime::LegacyStream(int device) {
  return Call<StreamId, &Streams::LegacyStream>(*impl_, device);
}
absl::Status Runtime::StreamSynchronize(StreamId s) {
  return Call<&Streams::StreamSynchronize>(*impl_, s.value);
}
absl::Status Runtime::StreamQuery(StreamId s) {
  return Call<&Streams::StreamQuery>(*impl_, s.value);
}
absl::Status Runtime::StreamWaitEvent(StreamId s, EventId e) {
  return Call<&Events::StreamWaitEvent>(*impl_, s.value, e.value);
}
absl::Status Runtime::StreamWaitEvent(StreamId s, EventId e, EventWaitFlag flag) {
  switch (flag) {
    case EventWaitFlag::kDefault:
      return StreamWaitEvent(s, e);
    case EventWaitFlag::kExternal:
      return Call<&Events::StreamWaitEventExternal>(*impl_, s.value, e.value);
  }
  return absl::InvalidArgumentError("unknown event wait flag");
}
absl::StatusOr<EventId> Runtime::CreateEvent() { return CreateEvent(0); }
absl::StatusOr<EventId> Runtime::CreateEvent(unsigned flags) {
  return Call<EventId, &Events::CreateEvent>(*impl_, flags);
}
absl::Status Runtime::DestroyEvent(EventId e) {
  return Call<&Events::DestroyEvent>(*impl_, e.value);
}
absl::Status Runtime::RecordEvent(EventId e, StreamId s) {
  return Call<&Events::RecordEvent>(*impl_, e.value, s.value);
}
absl::Status Runtime::RecordEvent(EventId e, StreamId s, EventRecordFlag flag) {
  switch (flag) {
    case EventRecordFlag::kDefault:
      return RecordEvent(e, s);
    case EventRecordFlag::kExternal:
      return Call<&Events::RecordEventExternal>(*impl_, e.value, s.value);
  }
  return absl::InvalidArgumentError("unknown event record flag");
}
absl::Status Runtime::EventSynchronize(EventId e) {
  return Call<&Events::EventSynchronize>(*impl_, e.value);
}
absl::Status Runtime::EventQuery(EventId e) { return Call<&Events::EventQuery>(*impl_, e.value); }
absl::StatusOr<float> Runtime::EventElapsedMs(EventId start, EventId end) {
  return Call<&Events::EventElapsedMs>(*impl_, start.value, end.value);
}
absl::Status Runtime::DeviceSynchronize(int device) {
  return Call<&Streams::DeviceSynchronize>(*impl_, device);
}

absl::Status Runtime::LaunchKernel(StreamId s, uint64_t duration_ns,
                                   absl::Span<const Access> accesses) {
  return Call<&Work::LaunchKernel>(*impl_, s.value, duration_ns, accesses);
}
absl::Status Runtime::LaunchHostFunc(StreamId s, std::function<void()> fn) {
  return Call<&Work::LaunchHostFunc>(*impl_, s.value, std::move(fn));
}
absl::Status Runtime::LaunchWork(StreamId s, std::function<void()> work,
                                 absl::Span<const Access> accesses, uint64_t duration_ns) {
  return Call<&Work::LaunchWork>(*impl_, s.value, duration_ns, std::move(work), accesses);
}
absl::Status Runtime::MemcpyAsync(void* dst, const void* src, uint64_t bytes, StreamId s) {
  return Call<&Work::MemcpyAsync>(*impl_, dst, src, bytes, s.value);
}
absl::Status Runtime::MemsetAsync(void* dst, int value, uint64_t bytes, StreamId s) {
  return Call<&Work::MemsetAsync>(*impl_, dst, value, bytes, s.value);
}
absl::Status Runtime::HostAdvance(uint64_t ns) { return Call<&Work::HostAdvance>(*impl_, ns); }
uint64_t Runtime::HostNow() const { return impl_->HostNow(); }

absl::StatusOr<void*> Runtime::NativeStream(StreamId s) {
  return Call<&Streams::NativeStream>(*impl_, s.value);
}
absl::StatusOr<StreamId> Runtime::CreateStreamFromNative(int device, void* native) {
  return Call<StreamId, &Streams::CreateStreamFromNative>(*impl_, device, native);
}
absl::StatusOr<AllocInfo> Runtime::MallocAsync(uint64_t size, StreamId s) {
  return internal::Guarded(
      [&]() -> absl::StatusOr<AllocInfo> { return impl_->MallocAsync(size, 0, s.value); });
}
absl::StatusOr<AllocInfo> Runtime::MallocFromPoolAsync(uint64_t size, PoolId pool, StreamId s) {
  return internal::Guarded([&]() -> absl::StatusOr<AllocInfo> {
    if (pool.value == 0) return absl::NotFoundError("invalid pool handle");
    return impl_->MallocAsync(size, pool.value, s.value);
  });
}
absl::Status Runtime::FreeAsync(void* ptr, StreamId s) {
  return internal::Guarded([&]() -> absl::Status { return impl_->FreeAsync(ptr, s.value); });
}
absl::Status Runtime::RecordUse(void* ptr, StreamId s) {
  return Call<&Allocator::RecordUse>(*impl_, ptr, s.value);
}
absl::StatusOr<void*> Runtime::Malloc(uint64_t size, int device) {
  return Call<&Allocator::Malloc>(*impl_, size, device);
}
absl::Status Runtime::Free(void* ptr) { return Call<&Allocator::Free>(*impl_, ptr); }
absl::StatusOr<void*> Runtime::MallocHost(uint64_t size) {
  return Call<&Allocator::MallocHost>(*impl_, size);
}
absl::Status Runtime::FreeHost(void* ptr) { return Call<&Allocator::FreeHost>(*impl_, ptr); }

absl::StatusOr<void*> Runtime::HostRegister(void* ptr, uint64_t size, unsigned flags) {
  return Call<&Allocator::HostRegister>(*impl_, ptr, size, flags);
}

absl::Status Runtime::HostUnregister(void* ptr) {
  return Call<&Allocator::HostUnregister>(*impl_, ptr);
}

absl::StatusOr<void*> Runtime::HostDevicePointer(const void* ptr) {
  return Call<&Allocator::HostDevicePointer>(*impl_, ptr);
}
absl::StatusOr<DeviceMemInfo> Runtime::MemGetInfo(int device) const {
  return Call<&Allocator::MemGetInfo>(*impl_, device);
}
absl::StatusOr<PointerAttributes> Runtime::GetPointerAttributes(const void* ptr) const {
  return Call<&Allocator::GetPointerAttributes>(*impl_, ptr);
}

absl::StatusOr<PoolId> Runtime::CreatePool(const PoolProps& props) {
  return Call<PoolId, &Pools::CreatePool>(*impl_, props, nullptr);
}
absl::StatusOr<PoolId> Runtime::CreatePool(const PoolProps& props,
                                           std::shared_ptr<PhysicalMemory> upstream) {
  // A null upstream is one that could not be made (NewVmmCallbackMemory
  // with a function missing), never "the default".
  return Call<PoolId, &Pools::CreatePoolOver>(*impl_, props, std::move(upstream));
}
absl::Status Runtime::SetHugePageBudget(int device, uint64_t bytes) {
  return Call<&Pools::SetHugePageBudget>(*impl_, device, bytes);
}
absl::Status Runtime::DestroyPool(PoolId pool) {
  return Call<&Pools::DestroyPool>(*impl_, pool.value);
}
absl::StatusOr<PoolId> Runtime::DefaultPool(int device) const {
  return Call<PoolId, &Pools::DefaultPool>(*impl_, device);
}
absl::StatusOr<PoolId> Runtime::CurrentPool(int device) const {
  return Call<PoolId, &Pools::CurrentPool>(*impl_, device);
}
absl::Status Runtime::SetCurrentPool(int device, PoolId pool) {
  return Call<&Pools::SetCurrentPool>(*impl_, device, pool.value);
}
absl::Status Runtime::SetPoolAttribute(PoolId pool, PoolAttr attr, uint64_t value) {
  return Call<&Pools::SetPoolAttribute>(*impl_, pool.value, attr, value);
}
absl::StatusOr<uint64_t> Runtime::GetPoolAttribute(PoolId pool, PoolAttr attr) const {
  return Call<&Pools::GetPoolAttribute>(*impl_, pool.value, attr);
}
absl::Status Runtime::TrimTo(PoolId pool, uint64_t min_bytes_to_keep) {
  return Call<&Pools::TrimTo>(*impl_, pool.value, min_bytes_to_keep);
}
absl::StatusOr<PoolStats> Runtime::GetPoolStats(PoolId pool) const {
  return Call<&Pools::GetPoolStats>(*impl_, pool.value);
}
absl::StatusOr<PoolSnapshot> Runtime::Snapshot(PoolId pool) const {
  return Call<&Pools::Snapshot>(*impl_, pool.value);
}
absl::StatusOr<std::vector<LiveAllocation>> Runtime::LiveAllocations() const {
  return Call<&Allocator::LiveAllocations>(*impl_);
}
absl::Status Runtime::CheckPoolInvariants(PoolId pool) const {
  return Call<&Pools::CheckPoolInvariants>(*impl_, pool.value);
}

absl::Status Runtime::SetPeerAccessible(int device, int peer_device, bool accessible) {
  return Call<&Pools::SetPeerAccessible>(*impl_, device, peer_device, accessible);
}
absl::StatusOr<bool> Runtime::CanAccessPeer(int device, int peer_device) const {
  return Call<&Pools::CanAccessPeer>(*impl_, device, peer_device);
}
absl::Status Runtime::SetPoolAccess(PoolId pool, absl::Span<const MemAccessDesc> descs) {
  return Call<&Pools::SetPoolAccess>(*impl_, pool.value, descs);
}
absl::StatusOr<MemAccessFlags> Runtime::GetPoolAccess(PoolId pool, MemLocation location) const {
  return Call<&Pools::GetPoolAccess>(*impl_, pool.value, location);
}
absl::StatusOr<int> Runtime::ExportPool(PoolId pool) {
  return Call<&IpcService::ExportPool>(*impl_, pool.value);
}
absl::StatusOr<PoolId> Runtime::ImportPool(int fd) {
  return Call<PoolId, &IpcService::ImportPool>(*impl_, fd);
}
absl::StatusOr<spMemPoolPtrExportData> Runtime::ExportPointer(const void* ptr) {
  return internal::Guarded([&]() -> absl::StatusOr<spMemPoolPtrExportData> {
    auto d = impl_->Run<&IpcService::ExportPointer>(ptr);
    if (!d.ok()) return d.status();
    static_assert(sizeof(spMemPoolPtrExportData) == sizeof(internal::PtrExportData));
    spMemPoolPtrExportData out;
    std::memcpy(&out, &*d, sizeof out);
    return out;
  });
}
absl::StatusOr<void*> Runtime::ImportPointer(PoolId pool, const spMemPoolPtrExportData& data) {
  internal::PtrExportData d;
  std::memcpy(static_cast<void*>(&d), &data, sizeof d);  // trivially copyable
  return Call<&IpcService::ImportPointer>(*impl_, pool.value, d);
}
absl::StatusOr<spIpcEventHandle> Runtime::GetIpcEventHandle(EventId e) {
  return internal::Guarded([&]() -> absl::StatusOr<spIpcEventHandle> {
    spIpcEventHandle h;
    absl::Status st = impl_->Run<&Events::GetIpcEventHandle>(e.value, h.reserved);
    if (!st.ok()) return st;
    return h;
  });
}
absl::StatusOr<EventId> Runtime::OpenIpcEvent(const spIpcEventHandle& handle) {
  return Call<EventId, &Events::OpenIpcEvent>(*impl_, handle.reserved);
}

absl::Status Runtime::BeginCapture(StreamId s, CaptureMode mode) {
  return Call<&Graphs::BeginCapture>(*impl_, s.value, mode);
}
absl::Status Runtime::BeginCaptureToGraph(StreamId s, GraphId graph,
                                          absl::Span<const GraphNodeId> deps, CaptureMode mode) {
  return Call<&Graphs::BeginCaptureToGraph>(*impl_, s.value, graph.value, Handles(deps), mode);
}
absl::StatusOr<GraphId> Runtime::EndCapture(StreamId s) {
  return Call<GraphId, &Graphs::EndCapture>(*impl_, s.value);
}
absl::StatusOr<CaptureStatus> Runtime::CaptureStatusOf(StreamId s) {
  absl::StatusOr<CaptureInfo> info = GetCaptureInfo(s);
  if (!info.ok()) return info.status();
  return info->status;
}
absl::StatusOr<CaptureInfo> Runtime::GetCaptureInfo(StreamId s) {
  return Call<&Graphs::GetCaptureInfo>(*impl_, s.value);
}

absl::StatusOr<GraphId> Runtime::CreateGraph() {
  return Call<GraphId, &Graphs::CreateGraph>(*impl_);
}
absl::Status Runtime::DestroyGraph(GraphId graph) {
  return Call<&Graphs::DestroyGraph>(*impl_, graph.value);
}
absl::StatusOr<GraphId> Runtime::CloneGraph(GraphId graph) {
  return Call<GraphId, &Graphs::CloneGraph>(*impl_, graph.value);
}
absl::StatusOr<GraphNodeId> Runtime::AddKernelNode(GraphId graph,
                                                   absl::Span<const GraphNodeId> deps,
                                                   uint64_t duration_ns,
                                                   absl::Span<const Access> accesses,
                                                   std::function<void()> body) {
  return AddNode(
      *impl_, graph, deps,
      internal::KernelNode{duration_ns, {accesses.begin(), accesses.end()}, std::move(body)});
}
absl::StatusOr<GraphNodeId> Runtime::AddMemcpyNode(GraphId graph,
                                                   absl::Span<const GraphNodeId> deps, void* dst,
                                                   const void* src, uint64_t bytes) {
  return AddNode(*impl_, graph, deps, internal::MemcpyNode{dst, src, bytes});
}
absl::StatusOr<GraphNodeId> Runtime::AddMemsetNode(GraphId graph,
                                                   absl::Span<const GraphNodeId> deps, void* dst,
                                                   int value, uint64_t bytes) {
  return AddNode(*impl_, graph, deps, internal::MemsetNode{dst, value, bytes});
}
absl::StatusOr<GraphNodeId> Runtime::AddHostNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                                 std::function<void()> fn) {
  return AddNode(*impl_, graph, deps, internal::HostNode{std::move(fn)});
}
absl::StatusOr<GraphNodeId> Runtime::AddEventRecordNode(GraphId graph,
                                                        absl::Span<const GraphNodeId> deps,
                                                        EventId e) {
  return AddNode(*impl_, graph, deps, internal::EventRecordNode{e.value});
}
absl::StatusOr<GraphNodeId> Runtime::AddEventWaitNode(GraphId graph,
                                                      absl::Span<const GraphNodeId> deps,
                                                      EventId e) {
  return AddNode(*impl_, graph, deps, internal::EventWaitNode{e.value});
}
absl::StatusOr<GraphNodeId> Runtime::AddEmptyNode(GraphId graph,
                                                  absl::Span<const GraphNodeId> deps) {
  return AddNode(*impl_, graph, deps, internal::EmptyNode{});
}
absl::StatusOr<GraphNodeId> Runtime::AddChildGraphNode(GraphId graph,
                                                       absl::Span<const GraphNodeId> deps,
                                                       GraphId child) {
  return Call<GraphNodeId, &Graphs::AddChildGraphNode>(*impl_, graph.value, Handles(deps),
                                                       child.value);
}
absl::StatusOr<GraphAllocNode> Runtime::AddMemAllocNode(GraphId graph,
                                                        absl::Span<const GraphNodeId> deps,
                                                        const PoolProps& props, uint64_t bytes,
                                                        absl::Span<const MemAccessDesc> access) {
  void* dptr = nullptr;
  absl::StatusOr<GraphNodeId> node = Call<GraphNodeId, &Graphs::AddNode>(
      *impl_, graph.value, Handles(deps),
      internal::NodeParams(internal::MemAllocNode{props, {access.begin(), access.end()}, bytes}),
      &dptr);
  if (!node.ok()) return node.status();
  return GraphAllocNode{*node, dptr};
}
absl::StatusOr<GraphAllocNode> Runtime::AddMemAllocNode(GraphId graph,
                                                        absl::Span<const GraphNodeId> deps,
                                                        int device, uint64_t bytes) {
  PoolProps props;
  props.device = device;
  return AddMemAllocNode(graph, deps, props, bytes);
}
absl::StatusOr<GraphNodeId> Runtime::AddMemFreeNode(GraphId graph,
                                                    absl::Span<const GraphNodeId> deps,
                                                    void* dptr) {
  return AddNode(*impl_, graph, deps, internal::MemFreeNode{dptr});
}
absl::Status Runtime::AddDependencies(GraphId graph, absl::Span<const GraphEdge> edges) {
  std::vector<std::pair<uint64_t, uint64_t>> pairs;
  for (const GraphEdge& e : edges) pairs.emplace_back(e.from.value, e.to.value);
  return Call<&Graphs::AddDependencies>(*impl_, graph.value, std::move(pairs));
}
absl::StatusOr<std::vector<GraphNodeId>> Runtime::GraphNodes(GraphId graph) {
  return NodeIds(Call<&Graphs::Nodes>(*impl_, graph.value, /*roots_only=*/false));
}
absl::StatusOr<std::vector<GraphNodeId>> Runtime::GraphRootNodes(GraphId graph) {
  return NodeIds(Call<&Graphs::Nodes>(*impl_, graph.value, /*roots_only=*/true));
}
absl::StatusOr<std::vector<GraphEdge>> Runtime::GraphEdges(GraphId graph) {
  auto pairs = Call<&Graphs::Edges>(*impl_, graph.value);
  if (!pairs.ok()) return pairs.status();
  std::vector<GraphEdge> out;
  for (const auto& [from, to] : *pairs) out.push_back(GraphEdge{{from}, {to}});
  return out;
}
absl::StatusOr<GraphNodeType> Runtime::NodeType(GraphNodeId node) {
  return Call<&Graphs::NodeTypeOfHandle>(*impl_, node.value);
}
absl::StatusOr<std::vector<GraphNodeId>> Runtime::NodeDependencies(GraphNodeId node) {
  return NodeIds(Call<&Graphs::NodeNeighbours>(*impl_, node.value, /*dependents=*/false));
}
absl::StatusOr<std::vector<GraphNodeId>> Runtime::NodeDependents(GraphNodeId node) {
  return NodeIds(Call<&Graphs::NodeNeighbours>(*impl_, node.value, /*dependents=*/true));
}

absl::StatusOr<GraphExecId> Runtime::Instantiate(GraphId graph, uint64_t flags) {
  return Call<GraphExecId, &Graphs::Instantiate>(*impl_, graph.value, flags);
}
absl::Status Runtime::UploadGraph(GraphExecId exec, StreamId s) {
  return Call<&Graphs::Upload>(*impl_, exec.value, s.value);
}
absl::Status Runtime::LaunchGraph(GraphExecId exec, StreamId s) {
  return Call<&Graphs::Launch>(*impl_, exec.value, s.value);
}
absl::Status Runtime::DestroyGraphExec(GraphExecId exec) {
  return Call<&Graphs::DestroyExec>(*impl_, exec.value);
}
absl::Status Runtime::UpdateGraphExec(GraphExecId exec, GraphId graph) {
  int result = 0;  // the reason is in the status' message
  return Call<&Graphs::ExecUpdate>(*impl_, exec.value, graph.value, &result);
}

absl::Status Runtime::TrimGraphMemory(int device) {
  return Call<&Graphs::TrimGraphMemory>(*impl_, device);
}
absl::StatusOr<GraphMemStats> Runtime::GraphMemoryStats(int device) {
  return Call<&Graphs::GraphMemoryStats>(*impl_, device);
}
absl::Status Runtime::ResetGraphMemoryHigh(int device, GraphMemHigh which) {
  return Call<&Graphs::ResetGraphMemoryHigh>(*impl_, device, which == GraphMemHigh::kUsed);
}

void Runtime::RecordTimeline(bool on) { impl_->Run<&Observation::RecordTimeline>(on); }
void Runtime::SetOomHandler(std::function<bool(PoolId pool, uint64_t size)> handler) {
  std::function<bool(uint64_t, uint64_t)> raw;
  if (handler) {
    raw = [handler = std::move(handler)](uint64_t pool, uint64_t size) {
      return handler(PoolId{pool}, size);
    };
  }
  impl_->Run<&Observation::SetOomHandler>(std::move(raw));
}
absl::Status Runtime::StartRecording(const std::string& path) {
  return Call<&Observation::StartRecording>(*impl_, path);
}
absl::Status Runtime::StopRecording() { return Call<&Observation::StopRecording>(*impl_); }
void Runtime::EnableChecker(bool on) {
  impl_->Run<&Observation::EnableChecker>(on, /*fatal=*/false);
}
std::vector<CheckReport> Runtime::CheckReports() const {
  return impl_->Run<&Observation::CheckReports>();
}
void Runtime::ClearCheckReports() { impl_->Run<&Observation::ClearCheckReports>(); }
std::vector<TimelineEntry> Runtime::Timeline() const {
  return impl_->Run<&Observation::Timeline>();
}

const char* OpKindName(OpKind kind) { return internal::EnumName(kind); }

}  // namespace streampool
