/// \file
/// The C++ API: a Runtime owns simulated devices, their streams, events and
/// memory pools, and serves stream-ordered allocations from them. Including
/// this header includes every type its methods take and return, each from a
/// header of its own.
///
/// Errors are absl::Status values whose codes map one to one onto the C API
/// (errors.h has the table). A failed call changes nothing (a failed
/// allocation counts one failed_alloc_count). Every method is thread-safe.
/// Handles are never reused, so a destroyed one is always detected.
#ifndef STREAMPOOL_RUNTIME_H_
#define STREAMPOOL_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "streampool/checker.h"
#include "streampool/errors.h"
#include "streampool/event_flags.h"
#include "streampool/executor.h"
#include "streampool/export.h"
#include "streampool/graph.h"
#include "streampool/ids.h"
#include "streampool/mem_access.h"
#include "streampool/memory_info.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_attr.h"
#include "streampool/pool_props.h"
#include "streampool/pool_stats.h"
#include "streampool/reuse_rule.h"
#include "streampool/runtime_config.h"
#include "streampool/snapshot.h"
#include "streampool/stream_adapter.h"
#include "streampool/streampool.h"
#include "streampool/timeline.h"

namespace streampool {

namespace internal {
class RuntimeImpl;
}

/// A runtime: simulated devices with their streams, events and pools, and the
/// stream-ordered allocator over them (the C API's spRuntime_t, with the same
/// handles). Every method is thread-safe; see the file comment for errors.
class STREAMPOOL_EXPORT Runtime {
 public:
  /// A new runtime (C: spRuntimeCreate); kInvalidArgument for a bad config.
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const RuntimeConfig& config = {});
  /// A view of a runtime made through the C API: the same runtime, which stays
  /// alive until spRuntimeDestroy (destroying the view does not destroy it).
  static absl::StatusOr<std::unique_ptr<Runtime>> FromC(spRuntime_t rt);
  /// A runtime made by Create is destroyed with it: everything it owns is
  /// freed. A view from FromC only lets go.
  ~Runtime();

  /// The runtime's C handle, for mixing in sp* calls.
  spRuntime_t c() const;
  /// The configuration it was created with.
  const RuntimeConfig& config() const;

  // Streams and events.

  /// A new stream on `device` (C: spStreamCreate); non_blocking streams are
  /// not ordered with the legacy stream.
  absl::StatusOr<StreamId> CreateStream(int device, bool non_blocking = false);
  /// Destroys the stream at once; its enqueued work still completes and frees
  /// enqueued on it stay valid. The legacy stream cannot be destroyed.
  absl::Status DestroyStream(StreamId s);
  /// The device's legacy default (null) stream.
  absl::StatusOr<StreamId> LegacyStream(int device);
  /// Waits for all work on `s`, then makes the frees that proves complete
  /// reusable in every pool and applies the release thresholds.
  absl::Status StreamSynchronize(StreamId s);
  /// OK when all of the stream's work has completed; kUnavailable while work is
  /// pending. Success promotes proven frees but releases nothing.
  absl::Status StreamQuery(StreamId s);
  /// Later work on `s` waits for the event's latest record (no-op if never
  /// recorded).
  absl::Status StreamWaitEvent(StreamId s, EventId e);
  /// As StreamWaitEvent; on a capturing stream kExternal makes an event wait
  /// node, which waits at each launch for the event's latest record then,
  /// inside the graph or not.
  absl::Status StreamWaitEvent(StreamId s, EventId e, EventWaitFlag flag);
  /// A new, never-recorded event.
  absl::StatusOr<EventId> CreateEvent();
  /// A new event with flags kEventDisableTiming and kEventInterprocess (which
  /// needs the former); C: spEventCreateWithFlags.
  absl::StatusOr<EventId> CreateEvent(unsigned flags);
  /// Destroys the event; waits already enqueued keep their meaning.
  absl::Status DestroyEvent(EventId e);
  /// Captures the work enqueued on `s` so far (replaces an earlier record).
  absl::Status RecordEvent(EventId e, StreamId s);
  /// As RecordEvent; on a capturing stream kExternal makes an event record
  /// node instead, which records the event at each launch (it keeps its last
  /// record until then, so no stream joins the capture by it).
  absl::Status RecordEvent(EventId e, StreamId s, EventRecordFlag flag);
  /// Waits for the event's latest record; a synchronize action like
  /// StreamSynchronize. OK at once if never recorded.
  absl::Status EventSynchronize(EventId e);
  /// OK when the latest record completed (or never recorded), else kUnavailable.
  absl::Status EventQuery(EventId e);
  /// Milliseconds (virtual with the simulator) between two completed records;
  /// kInvalidArgument if either is at UINT64_MAX, past representable time.
  absl::StatusOr<float> EventElapsedMs(EventId start, EventId end);
  /// Waits for every stream of `device`; a synchronize action.
  absl::Status DeviceSynchronize(int device);

  // Work.

  /// A kernel of `duration_ns` that reads and writes `accesses` (declared for
  /// the stream-order checker; nothing is touched).
  absl::Status LaunchKernel(StreamId s, uint64_t duration_ns, absl::Span<const Access> accesses);
  /// `fn` runs on the host once the host observes the op complete (simulator)
  /// or on the stream's worker (threads). It must not call the API.
  absl::Status LaunchHostFunc(StreamId s, std::function<void()> fn);
  /// A kernel with a body: with the threads executor `work` runs on the
  /// stream's worker thread in stream order (it may read and write memory it
  /// declared in `accesses`); with the simulator it runs when the host observes
  /// the kernel complete, after `duration_ns` of virtual time. `work` must not
  /// call the API.
  absl::Status LaunchWork(StreamId s, std::function<void()> work,
                          absl::Span<const Access> accesses = {}, uint64_t duration_ns = 0);
  /// Copies `bytes` in stream order, lasting bytes / copy_bytes_per_us µs;
  /// with touchable memory the bytes really move, no later than the
  /// synchronize or query that observes the copy complete.
  absl::Status MemcpyAsync(void* dst, const void* src, uint64_t bytes, StreamId s);
  /// Sets `bytes` of `dst` to (unsigned char)value, timed and moved like
  /// MemcpyAsync.
  absl::Status MemsetAsync(void* dst, int value, uint64_t bytes, StreamId s);
  /// The host spends `ns` (virtual time with the simulator); kInvalidArgument,
  /// and no time spent, if host time would reach UINT64_MAX.
  absl::Status HostAdvance(uint64_t ns);
  /// Host time now in ns (virtual with the simulator).
  uint64_t HostNow() const;

  /// The native stream behind `s`, to launch native work on: the CUstream of
  /// a kCuda runtime (null for a device's legacy stream, CUDA's legacy default
  /// stream), the embedder's stream of a StreamAdapter runtime; kUnimplemented
  /// otherwise (C: spStreamGetNative).
  absl::StatusOr<void*> NativeStream(StreamId s);
  /// A stream on `device` over `native`, a stream the caller made and keeps
  /// (streampool never destroys it; DestroyStream ends its use). On a kCuda
  /// runtime a null `native` is the device's legacy stream. kUnimplemented on
  /// simulator and threads runtimes (C: spStreamCreateFromNative).
  absl::StatusOr<StreamId> CreateStreamFromNative(int device, void* native);

  // Memory.

  /// `size` bytes from the current pool of the stream's device, in stream
  /// order of `s`, and the rule that served them. size 0: a null pointer.
  absl::StatusOr<AllocInfo> MallocAsync(uint64_t size, StreamId s);
  /// As MallocAsync, from `pool`.
  absl::StatusOr<AllocInfo> MallocFromPoolAsync(uint64_t size, PoolId pool, StreamId s);
  /// Frees `ptr` (an allocation's start) in stream order of `s`: the bytes are
  /// reusable by `s` at once and by other streams per the reuse rules. Any
  /// stream, any device; also frees Malloc memory. Null: a no-op.
  absl::Status FreeAsync(void* ptr, StreamId s);
  /// Declares that stream `s` uses the live stream-ordered allocation at
  /// `ptr` (its start) besides the stream that will free it, as PyTorch's
  /// record_stream does. Its FreeAsync is then ordered after `s`'s work
  /// enqueued up to the free, as well as after the freeing stream: the pool
  /// records `s`'s position at the free and reuses the bytes on no stream
  /// before both are complete (a synchronize proves it, or, with the
  /// opportunistic switch on, both are observed complete). The freeing
  /// stream waits for nothing. kInvalidArgument for a pointer that is not the
  /// start of a live pool allocation (Malloc memory included).
  absl::Status RecordUse(void* ptr, StreamId s);
  /// Synchronous allocation straight from the device's upstream
  /// (ALIGN_UP(size, 4 KiB), counted against the device's capacity).
  absl::StatusOr<void*> Malloc(uint64_t size, int device);
  /// Synchronous free of Malloc memory or a pool allocation; the caller
  /// promises all access to it has completed.
  absl::Status Free(void* ptr);
  /// Synchronous pinned host memory (C: spMallocHost): the host's pages,
  /// touchable whatever the backing, 64-B aligned, usable from every device.
  absl::StatusOr<void*> MallocHost(uint64_t size);
  /// Frees MallocHost memory at once (C: spFreeHost). Null: a no-op.
  absl::Status FreeHost(void* ptr);
  /// Makes [ptr, ptr + size) of host memory device-accessible and returns
  /// its device address, ptr itself (C: spHostRegister, whose comment has
  /// the rules; `flags` are spHostRegisterFlags). kAlreadyExists when a byte
  /// of it is registered already.
  absl::StatusOr<void*> HostRegister(void* ptr, uint64_t size, unsigned flags = 0);
  /// Ends the registration starting at ptr (C: spHostUnregister); the
  /// caller promises no work still uses it. kNotFound when none starts there.
  absl::Status HostUnregister(void* ptr);
  /// The device address of a registered byte (C: spHostGetDevicePointer);
  /// kNotFound when ptr is not registered.
  absl::StatusOr<void*> HostDevicePointer(const void* ptr);
  /// A device's capacity and what is not charged to it yet (by pools'
  /// reserved memory and Malloc): what cudaMemGetInfo reports.
  absl::StatusOr<DeviceMemInfo> MemGetInfo(int device) const;
  /// The allocation containing any byte `ptr` of it; kInvalidArgument if none.
  absl::StatusOr<PointerAttributes> GetPointerAttributes(const void* ptr) const;

  // Pools.

  /// A new pool with `props` over the upstream its type implies.
  absl::StatusOr<PoolId> CreatePool(const PoolProps& props);
  /// A pool over a caller's upstream (NewCallbackMemory, or any
  /// PhysicalMemory); the pool shares ownership of it. A null upstream (what
  /// the factories return when a function is missing) is kInvalidArgument
  /// and makes no pool.
  absl::StatusOr<PoolId> CreatePool(const PoolProps& props,
                                    std::shared_ptr<PhysicalMemory> upstream);
  /// Huge-page bytes `device` may hold across its HugePage and Dvpp pools;
  /// reservations beyond it fall back per page policy. Unlimited by default;
  /// an Atlas-like setting is a quarter of the device's memory.
  absl::Status SetHugePageBudget(int device, uint64_t bytes);
  /// Destroys a pool made by CreatePool (a default pool: kInvalidArgument).
  /// Live allocations stay valid; their memory goes back as they are freed.
  absl::Status DestroyPool(PoolId pool);
  /// The device's default pool.
  absl::StatusOr<PoolId> DefaultPool(int device) const;
  /// The pool MallocAsync uses on `device`.
  absl::StatusOr<PoolId> CurrentPool(int device) const;
  /// Makes `pool` the one MallocAsync uses on `device`.
  absl::Status SetCurrentPool(int device, PoolId pool);
  /// Sets a pool attribute (switches take 0 or 1; High attributes reset with
  /// 0; Current attributes are read-only).
  absl::Status SetPoolAttribute(PoolId pool, PoolAttr attr, uint64_t value);
  /// Reads a pool attribute.
  absl::StatusOr<uint64_t> GetPoolAttribute(PoolId pool, PoolAttr attr) const;
  /// Releases wholly free READY chunks while more than `min_bytes_to_keep`
  /// stays reserved (observes no completion itself).
  absl::Status TrimTo(PoolId pool, uint64_t min_bytes_to_keep);
  /// The pool's statistics.
  absl::StatusOr<PoolStats> GetPoolStats(PoolId pool) const;
  /// Every segment and block of the pool, with its statistics, at one moment
  /// (snapshot.h). O(blocks); allocations on other threads wait meanwhile.
  absl::StatusOr<PoolSnapshot> Snapshot(PoolId pool) const;
  /// Every allocation handed out and not freed: the pools' (destroyed pools'
  /// included) in (pool, address) order, then Malloc's and MallocHost's.
  absl::StatusOr<std::vector<LiveAllocation>> LiveAllocations() const;
  /// The pool's O(n) self-check (docs/design.md invariants); an error names what broke.
  absl::Status CheckPoolInvariants(PoolId pool) const;

  // Multi-device access and IPC (streampool.h documents the rules).

  /// Whether `device` may access memory resident on `peer_device`.
  absl::Status SetPeerAccessible(int device, int peer_device, bool accessible);
  /// The peer matrix's answer (false for device == peer_device, as in CUDA).
  absl::StatusOr<bool> CanAccessPeer(int device, int peer_device) const;
  /// Grants or revokes access to every allocation of the pool, past and future.
  absl::Status SetPoolAccess(PoolId pool, absl::Span<const MemAccessDesc> descs);
  /// The access `location` has to the pool's allocations.
  absl::StatusOr<MemAccessFlags> GetPoolAccess(PoolId pool, MemLocation location) const;
  /// A new fd (close-on-exec, the caller's) naming an exportable pool.
  absl::StatusOr<int> ExportPool(PoolId pool);
  /// An imported pool over an exported pool's fd (the pool keeps a duplicate).
  absl::StatusOr<PoolId> ImportPool(int fd);
  /// The export data of a live allocation of an exportable pool of this runtime.
  absl::StatusOr<spMemPoolPtrExportData> ExportPointer(const void* ptr);
  /// Maps the allocation `data` names into this process.
  absl::StatusOr<void*> ImportPointer(PoolId pool, const spMemPoolPtrExportData& data);
  /// The handle of an interprocess event.
  absl::StatusOr<spIpcEventHandle> GetIpcEventHandle(EventId e);
  /// An event of this runtime standing for the interprocess event `handle` names.
  absl::StatusOr<EventId> OpenIpcEvent(const spIpcEventHandle& handle);

  // Graphs (docs/graphs.md; streampool.h, "graphs", has the rules). Like
  // CUDA's, a graph is not for concurrent use from several threads. `deps`
  // are nodes of the same graph, each at most once.

  /// Ops enqueued on `s` from now on become nodes of a new graph instead of
  /// running (C: spStreamBeginCapture); other streams join by waiting on an
  /// event recorded in the capture.
  absl::Status BeginCapture(StreamId s, CaptureMode mode = CaptureMode::kGlobal);
  /// As BeginCapture, into `graph` after `deps`.
  absl::Status BeginCaptureToGraph(StreamId s, GraphId graph, absl::Span<const GraphNodeId> deps,
                                   CaptureMode mode = CaptureMode::kGlobal);
  /// Ends the capture begun on `s`: its graph, or GraphId{} when it was begun
  /// with BeginCaptureToGraph. An invalidated or unjoined capture returns its
  /// error (its C code as spStreamEndCapture's) and no graph.
  absl::StatusOr<GraphId> EndCapture(StreamId s);
  /// Whether `s` captures (C: spStreamIsCapturing).
  absl::StatusOr<CaptureStatus> CaptureStatusOf(StreamId s);
  /// The capture `s` takes part in (status kNone and nothing else when none).
  absl::StatusOr<CaptureInfo> GetCaptureInfo(StreamId s);

  /// A new, empty graph.
  absl::StatusOr<GraphId> CreateGraph();
  /// Destroys the graph (not while a capture adds to it); executables, live allocations stay.
  absl::Status DestroyGraph(GraphId graph);
  /// A copy of `graph`; kUnimplemented for a graph with memory nodes.
  absl::StatusOr<GraphId> CloneGraph(GraphId graph);
  /// A kernel of `duration_ns` touching `accesses`, with `body` as its effect
  /// when given (run as LaunchWork runs one; it must not call the API).
  absl::StatusOr<GraphNodeId> AddKernelNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                            uint64_t duration_ns,
                                            absl::Span<const Access> accesses = {},
                                            std::function<void()> body = {});
  /// A copy of `bytes` from `src` to `dst`, as MemcpyAsync.
  absl::StatusOr<GraphNodeId> AddMemcpyNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                            void* dst, const void* src, uint64_t bytes);
  /// `bytes` of `dst` set to (unsigned char)`value`, as MemsetAsync.
  absl::StatusOr<GraphNodeId> AddMemsetNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                            void* dst, int value, uint64_t bytes);
  /// `fn` runs as LaunchHostFunc's does.
  absl::StatusOr<GraphNodeId> AddHostNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                          std::function<void()> fn);
  /// Records `e`, as RecordEvent.
  absl::StatusOr<GraphNodeId> AddEventRecordNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                                 EventId e);
  /// Waits for `e`, as StreamWaitEvent.
  absl::StatusOr<GraphNodeId> AddEventWaitNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                               EventId e);
  /// A node that only orders others.
  absl::StatusOr<GraphNodeId> AddEmptyNode(GraphId graph, absl::Span<const GraphNodeId> deps);
  /// A copy of `child` taken now; a child cannot hold memory nodes.
  absl::StatusOr<GraphNodeId> AddChildGraphNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                                GraphId child);
  /// `bytes` of device memory for `props.device` (props.alloc_type must be
  /// kDevice; the other fields are ignored), accessible from `access` as
  /// well; the address is fixed for the graph's life.
  absl::StatusOr<GraphAllocNode> AddMemAllocNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                                 const PoolProps& props, uint64_t bytes,
                                                 absl::Span<const MemAccessDesc> access = {});
  /// As above, on `device`.
  absl::StatusOr<GraphAllocNode> AddMemAllocNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                                 int device, uint64_t bytes);
  /// Frees `dptr`: an allocation of this graph (once, after its allocation
  /// node) or a live graph allocation made elsewhere.
  absl::StatusOr<GraphNodeId> AddMemFreeNode(GraphId graph, absl::Span<const GraphNodeId> deps,
                                             void* dptr);
  /// Adds every edge or none (kInvalidArgument for one that exists or makes a
  /// cycle).
  absl::Status AddDependencies(GraphId graph, absl::Span<const GraphEdge> edges);
  /// The graph's nodes in the order they were added.
  absl::StatusOr<std::vector<GraphNodeId>> GraphNodes(GraphId graph);
  /// The nodes without dependencies.
  absl::StatusOr<std::vector<GraphNodeId>> GraphRootNodes(GraphId graph);
  /// Every edge of the graph.
  absl::StatusOr<std::vector<GraphEdge>> GraphEdges(GraphId graph);
  /// What the node does.
  absl::StatusOr<GraphNodeType> NodeType(GraphNodeId node);
  /// The nodes `node` depends on.
  absl::StatusOr<std::vector<GraphNodeId>> NodeDependencies(GraphNodeId node);
  /// The nodes that depend on `node`.
  absl::StatusOr<std::vector<GraphNodeId>> NodeDependents(GraphNodeId node);

  /// An executable graph of `graph` as it is now; `flags` are
  /// kGraphInstantiate*. A graph with memory nodes has one at a time
  /// (kInvalidArgument for a second).
  absl::StatusOr<GraphExecId> Instantiate(GraphId graph, uint64_t flags = 0);
  /// Accepted: nothing needs uploading here.
  absl::Status UploadGraph(GraphExecId exec, StreamId s);
  /// Enqueues the graph on `s` as one op: after s's earlier work and the
  /// previous launch, and before s's later work. kInvalidArgument when an
  /// allocation of the previous launch is still live and `exec` was not
  /// instantiated with kGraphInstantiateAutoFreeOnLaunch.
  absl::Status LaunchGraph(GraphExecId exec, StreamId s);
  /// Destroys `exec`; launches already enqueued still run.
  absl::Status DestroyGraphExec(GraphExecId exec);
  /// Gives `exec` the parameters of `graph`'s nodes, whose topology and kinds
  /// must be exec's (C code spErrorGraphExecUpdateFailure otherwise).
  absl::Status UpdateGraphExec(GraphExecId exec, GraphId graph);

  /// Gives back graph memory no allocation holds and no launch uses.
  absl::Status TrimGraphMemory(int device);
  /// The device's graph memory figures.
  absl::StatusOr<GraphMemStats> GraphMemoryStats(int device);
  /// Resets one high watermark to its current value.
  absl::Status ResetGraphMemoryHigh(int device, GraphMemHigh which);

  // Stream-order checker.

  /// Turns the checker on or off (reports are kept). Turned on explicitly, it
  /// collects reports even under STREAMPOOL_CHECK_STREAM_ORDER=fatal.
  void EnableChecker(bool on);
  /// The reports so far, oldest first.
  std::vector<CheckReport> CheckReports() const;
  /// Forgets the reports so far.
  void ClearCheckReports();

  /// Records every op's schedule from now on (off by default: it grows
  /// without bound), for timelines and tests.
  void RecordTimeline(bool on);
  /// The ops recorded so far, in enqueue order.
  std::vector<TimelineEntry> Timeline() const;

  // Out of memory (C: spRuntimeSetOomHandler).

  /// Called when an allocation still finds no memory after the runtime's own
  /// out-of-memory handling (RuntimeConfig::oom_reclaim), with the pool and
  /// the size asked for. It runs with no library lock held and may call this
  /// runtime (free, trim, synchronize, destroy pools); returning true asks
  /// for one more try, after which it is called again if that fails too.
  /// An empty function removes it. Every thread's allocations call it.
  void SetOomHandler(std::function<bool(PoolId pool, uint64_t size)> handler);

  // Recording (C: spRuntimeStartRecording).

  /// Writes the runtime's history from now on to `path` as a streampool trace
  /// v1: streams, events, kernels, copies, synchronizes and queries, host
  /// time, pools with their settings, and every allocation with the decision
  /// it got. streampool-replay replays the file; at the recorded settings it
  /// reproduces every decision when the recording began with the runtime
  /// (the STREAMPOOL_RECORD variable does that for every runtime of a
  /// process, the CUDA and AscendCL faces' included). With several host
  /// threads racing on one pool, decisions may replay otherwise where they
  /// raced. kInvalidArgument when already recording or the file cannot be
  /// created.
  absl::Status StartRecording(const std::string& path);
  /// Completes the file (destroying the runtime does too). kInvalidArgument
  /// when not recording; kInternal when a write failed (the recording ends
  /// anyway, and the error names the file).
  absl::Status StopRecording();

  /// The implementation behind the runtime, for the library's own tests and
  /// tools. Not part of the API: its type is internal and may change.
  internal::RuntimeImpl& impl() const { return *impl_; }

 private:
  Runtime(std::shared_ptr<internal::RuntimeImpl> impl, bool owns);
  std::shared_ptr<internal::RuntimeImpl> impl_;
  bool owns_;
};

}  // namespace streampool

#endif  // STREAMPOOL_RUNTIME_H_
