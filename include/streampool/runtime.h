/// \file
/// The C++ API: a Runtime owns simulated devices, their streams, events and
/// memory pools, and serves stream-ordered allocations from them.
///
/// Errors are absl::Status values whose codes map one to one onto the C API:
///
/// | absl::StatusCode   | spError_t                    |
/// |--------------------|------------------------------|
/// | kInvalidArgument   | spErrorInvalidValue          |
/// | kResourceExhausted | spErrorMemoryAllocation      |
/// | kOutOfRange        | spErrorInvalidDevice         |
/// | kPermissionDenied  | spErrorPeerAccessUnsupported |
/// | kNotFound          | spErrorInvalidResourceHandle |
/// | kUnavailable       | spErrorNotReady              |
/// | kUnimplemented     | spErrorNotSupported          |
/// | kAlreadyExists     | spErrorHostMemoryAlreadyRegistered |
///
/// One exception: a host pointer that is not registered is kNotFound with
/// a payload that makes it spErrorHostMemoryNotRegistered (ToCError).
/// A failed call changes nothing (a failed allocation counts one
/// failed_alloc_count). Every method is thread-safe. Handles are never reused,
/// so a destroyed one is always detected.
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
#include "streampool/executor.h"
#include "streampool/export.h"
#include "streampool/ids.h"
#include "streampool/mem_pool.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"
#include "streampool/snapshot.h"
#include "streampool/stream_adapter.h"
#include "streampool/streampool.h"

namespace streampool {

namespace internal {
class RuntimeImpl;
}

/// What memory Device pools and Malloc get from the system (C: spBacking).
enum class Backing {
  kHost = 0,         ///< real, touchable memory
  kAddressOnly = 1,  ///< address space reserved, never touched
};

/// How a runtime's streams run (C: spExecutorKind).
enum class ExecutorKind {
  kSimulator = 0,  ///< deterministic virtual time (the default)
  kThreads = 1,    ///< a worker thread per stream; real time, real blocking
  kCuda = 2,       ///< the machine's CUDA devices (C: spExecutorCuda)
};

/// What destroying a runtime does with live allocations (RuntimeConfig::leak_check).
enum class LeakCheck {
  kOff = 0,     ///< nothing
  kReport = 1,  ///< lists them on stderr
  kFail = 2,    ///< lists them, then exits the process with status 1
};

/// A runtime's configuration (C: spRuntimeConfig), with every default.
struct RuntimeConfig {
  /// Simulated devices, 1..64.
  int device_count = 1;
  /// Bytes per device shared by its pools' reservations and Malloc.
  uint64_t device_capacity = uint64_t{1} << 30;
  /// Memory behind Device pools and Malloc.
  Backing backing = Backing::kHost;
  /// Virtual host time charged per successful call that creates or destroys a
  /// stream or event, enqueues work, synchronizes, queries, allocates or frees
  /// (before the work it enqueues). Failed calls and pure getters cost nothing.
  uint64_t api_call_ns = 0;
  /// Bandwidth of async copies and fills (1 TB/s by default).
  uint64_t copy_bytes_per_us = 1000000;
  /// The stream-order checker (Runtime::CheckReports). Off by default: it costs
  /// a lookup per allocation, free and declared access. The environment
  /// variable STREAMPOOL_CHECK_STREAM_ORDER=1 turns it on for every runtime,
  /// and =fatal also aborts the process at the first report (the test suite
  /// runs that way).
  bool check_stream_order = false;
  /// How streams run. The pools, ordering and API are the same for both.
  ExecutorKind executor = ExecutorKind::kSimulator;
  /// Out-of-memory handling: before an allocation fails for lack of memory,
  /// the pools of its device (its own first) flush their front caches and
  /// release every whole granule or chunk they hold READY, and the
  /// allocation is tried once more. Nothing PENDING is touched, so stream
  /// order holds. Counted in PoolStats (reclaims, oom_retries, oom_count).
  bool oom_reclaim = true;
  /// What destroying the runtime does with allocations never freed (pool
  /// and synchronous ones): kOff nothing, kReport prints them to stderr
  /// (pointer, size, stream, pool, device, sequence number), kFail prints
  /// them and ends the process with exit status 1 once the runtime is gone.
  /// The environment variable STREAMPOOL_LEAK_CHECK=report|1 sets it for
  /// every runtime of a process (0 turns it off), the CUDA and AscendCL
  /// faces' included; their own STREAMPOOL_CUDA_LEAK_CHECK and
  /// STREAMPOOL_ACL_LEAK_CHECK set it for their implicit runtime.
  LeakCheck leak_check = LeakCheck::kOff;
  /// Streams and events of another runtime (see stream_adapter.h). When set,
  /// it decides how streams run and `executor` is ignored.
  std::shared_ptr<StreamAdapter> adapter;
};

/// What the stream-order checker found (C: spCheckKind).
enum class CheckKind {
  kOutOfBounds = 1,           ///< access outside any allocation
  kUseAfterFree = 2,          ///< access after the free, or a free not ordered after an access
  kUseBeforeReady = 3,        ///< access not ordered after the allocation
  kOverlappingLifetimes = 4,  ///< pool self-check: bytes handed out while still in use
  kNoAccess = 5,              ///< a kernel on a device the allocation's pool does not grant
  kFreeWhileRegistered = 6,   ///< FreeHost of memory holding a registered host range
};

/// Where memory can be accessed from (CUDA guide F.10; C: spMemLocationType).
enum class MemLocationType { kDevice = 1, kHost = 2 };
/// A device or the host (C: spMemLocation).
struct MemLocation {
  MemLocationType type = MemLocationType::kDevice;  ///< device or host
  int id = 0;                                       ///< the device (ignored for the host)
};
/// Access a location has to a pool's allocations (C: spMemAccessFlags).
enum class MemAccessFlags { kProtNone = 0, kProtRead = 1, kProtReadWrite = 3 };
/// One grant of spMemPoolSetAccess (C: spMemAccessDesc).
struct MemAccessDesc {
  MemLocation location;                                   ///< who
  MemAccessFlags flags = MemAccessFlags::kProtReadWrite;  ///< what access
};

/// Event flag: no timing (C: spEventDisableTiming).
inline constexpr unsigned kEventDisableTiming = 2;
/// Event flag: interprocess, needs kEventDisableTiming (C: spEventInterprocess).
inline constexpr unsigned kEventInterprocess = 4;
/// PoolProps::handle_types value that makes a pool exportable as a memfd
/// (C: spMemHandleTypePosixFileDescriptor).
inline constexpr unsigned kHandleTypePosixFileDescriptor = 1;

/// One finding of the stream-order checker (C: spCheckReport).
struct CheckReport {
  CheckKind kind = CheckKind::kOutOfBounds;  ///< what went wrong
  StreamId stream;              ///< the offending op (value 0 if that stream is destroyed)
  uint64_t op_position = 0;     ///< its position in the stream (1 = first op)
  const void* ptr = nullptr;    ///< the accessed (or allocated) range's start
  uint64_t size = 0;            ///< its bytes
  StreamId other_stream;        ///< the other op involved (allocation or free), if any
  uint64_t other_position = 0;  ///< its position in other_stream
  std::string message;          ///< both ops, addresses and sizes in words
};

/// A byte range a kernel reads or writes, for the stream-order checker
/// (C: spAccess).
struct Access {
  const void* ptr = nullptr;  ///< first byte
  uint64_t size = 0;          ///< bytes
  bool write = false;         ///< written (else read)
};

/// Pool attributes (C: spMemPoolAttr, same values), read and written as
/// uint64_t by Runtime::GetPoolAttribute / SetPoolAttribute. 1-14 are CUDA 13's
/// cudaMemPoolAttr values; streampool's own start at 0x1000, out of the way of
/// attributes CUDA may add.
enum class PoolAttr {
  kReuseFollowEventDependencies = 1,    ///< rule 2 on (1) or off (0)
  kReuseAllowOpportunistic = 2,         ///< rule 3 on (1) or off (0)
  kReuseAllowInternalDependencies = 3,  ///< rule 5 on (1) or off (0)
  kReleaseThreshold = 4,                ///< bytes kept reserved at synchronize calls
  kReservedMemCurrent = 5,              ///< reserved bytes (read-only)
  kReservedMemHigh = 6,                 ///< watermark of reserved bytes (set 0 to reset)
  kUsedMemCurrent = 7,                  ///< used bytes (read-only)
  kUsedMemHigh = 8,                     ///< watermark of used bytes (set 0 to reset)
  kAllocationType = 9,                  ///< the pool's AllocationType (read-only)
  /// Handle types the pool can be exported as; 0 for an imported pool, which
  /// cannot be exported again (read-only).
  kExportHandleTypes = 10,
  kLocationId = 11,    ///< the pool's device, -1 for pinned host memory (read-only)
  kLocationType = 12,  ///< where it lives: device (1) or host (2), as spMemLocationType (read-only)
  /// PoolProps::max_size as the pool was made; 0 = no limit of its own
  /// (imported pools: 0) (read-only).
  kMaxPoolSize = 13,
  kHwDecompressEnabled = 14,  ///< always 0: no pool decompresses (read-only)
  /// How the pool grows, a PoolGrowth: chunked (1) or expandable (2) (read-only).
  kGrowth = 0x1000,
  /// The per-stream front caches (docs/design.md, "Performance model"): on (1, the
  /// default) or off (0, every allocation takes the central exact best fit);
  /// turning them off flushes what they hold.
  kFrontCache = 0x1001,
  /// Waiting before growing (docs/design.md "Waiting versus growing"): with
  /// rule 5 on, a wait that delays nothing comes before growth (1, the
  /// default); 0 keeps CUDA's order.
  kWaitBeforeGrowth = 0x1002,
  /// Growth that would take the reserved bytes past this waits for other
  /// streams' pending frees first (rule 5 on); UINT64_MAX (the default): no
  /// limit.
  kSoftReservedLimit = 0x1003,
};

/// What Runtime::GetPointerAttributes tells about a pointer
/// (C: spPointerAttributes).
struct PointerAttributes {
  int device = -1;       ///< the pool's device; -1 for pinned host memory
  PoolId pool;           ///< value 0 for Malloc memory
  void* base = nullptr;  ///< start of the allocation
  uint64_t size = 0;     ///< its requested size
};

/// What the last allocation decided, for policy tests and benchmarks.
struct AllocInfo {
  void* ptr = nullptr;                 ///< the allocation (null for size 0)
  ReuseRule rule = ReuseRule::kFresh;  ///< which rule served it
};

/// One op as the simulator scheduled it (see Runtime::Timeline).
struct TimelineEntry {
  StreamId stream;                     ///< value 0 for a stream destroyed since
  uint32_t stream_index;               ///< dense index, stable for the runtime's life
  int device = 0;                      ///< the stream's device
  uint64_t position = 0;               ///< the op's position in its stream
  OpKind kind = OpKind::kAllocMarker;  ///< what the op was
  uint64_t enqueued_ns = 0;            ///< host time when it was enqueued
  uint64_t start_ns = 0;               ///< when it started
  uint64_t end_ns = 0;                 ///< when it completed
};

/// A device's memory (Runtime::MemGetInfo).
struct DeviceMemInfo {
  uint64_t free = 0;   ///< capacity minus the bytes charged to the device
  uint64_t total = 0;  ///< the device's capacity
};

/// The C API's error for a status this API returned — what the sp* function
/// of the same name returns for the same failure: kInvalidArgument is
/// spErrorInvalidValue, kResourceExhausted spErrorMemoryAllocation,
/// kOutOfRange spErrorInvalidDevice, kPermissionDenied
/// spErrorPeerAccessUnsupported, kNotFound spErrorInvalidResourceHandle,
/// kUnavailable spErrorNotReady, kUnimplemented spErrorNotSupported, kInternal
/// spErrorUnknown, kAlreadyExists spErrorHostMemoryAlreadyRegistered; any
/// other code spErrorInvalidValue; OK spSuccess. A status carrying the
/// kCErrorPayload payload (the error's decimal value) is that error.
STREAMPOOL_EXPORT spError_t ToCError(const absl::Status& status);
/// The payload URL of a status whose C error is not its code's.
inline constexpr char kCErrorPayload[] = "streampool/spError";

/// The kind's name as the tools and timelines print it: "kernel",
/// "host_func", "internal_wait", "alloc", "free", ...; "unknown" outside the
/// enum.
STREAMPOOL_EXPORT const char* OpKindName(OpKind kind);

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
  /// A new, never-recorded event.
  absl::StatusOr<EventId> CreateEvent();
  /// A new event with flags kEventDisableTiming and kEventInterprocess (which
  /// needs the former); C: spEventCreateWithFlags.
  absl::StatusOr<EventId> CreateEvent(unsigned flags);
  /// Destroys the event; waits already enqueued keep their meaning.
  absl::Status DestroyEvent(EventId e);
  /// Captures the work enqueued on `s` so far (replaces an earlier record).
  absl::Status RecordEvent(EventId e, StreamId s);
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
