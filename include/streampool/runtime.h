// The C++ API: a Runtime owns simulated devices, their streams, events and
// memory pools, and serves stream-ordered allocations from them.
//
// Errors are absl::Status values whose codes map one to one onto the C API:
//   kInvalidArgument    spErrorInvalidValue
//   kResourceExhausted  spErrorMemoryAllocation
//   kOutOfRange         spErrorInvalidDevice
//   kPermissionDenied   spErrorPeerAccessUnsupported
//   kNotFound           spErrorInvalidResourceHandle
//   kUnavailable        spErrorNotReady
//   kUnimplemented      spErrorNotSupported
// A failed call changes nothing (a failed allocation counts one
// failed_alloc_count). Every method is thread-safe. Handles are never reused,
// so a destroyed one is always detected.
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
#include "streampool/mem_pool.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"
#include "streampool/stream_adapter.h"
#include "streampool/streampool.h"

namespace streampool {

namespace internal {
class RuntimeImpl;
}

enum class Backing {
  kHost = 0,         // real, touchable memory
  kAddressOnly = 1,  // address space reserved, never touched
};

enum class ExecutorKind {
  kSimulator = 0,  // deterministic virtual time (the default)
  kThreads = 1,    // a worker thread per stream; real time, real blocking
};

struct RuntimeConfig {
  // Simulated devices, 1..64.
  int device_count = 1;
  // Bytes per device shared by its pools' reservations and Malloc.
  uint64_t device_capacity = uint64_t{1} << 30;
  Backing backing = Backing::kHost;
  // Virtual host time charged per successful call that creates or destroys a
  // stream or event, enqueues work, synchronizes, queries, allocates or frees
  // (before the work it enqueues). Failed calls and pure getters cost nothing.
  uint64_t api_call_ns = 0;
  // Bandwidth of async copies and fills (1 TB/s by default).
  uint64_t copy_bytes_per_us = 1000000;
  // The stream-order checker (Runtime::CheckReports). Off by default: it costs
  // a lookup per allocation, free and declared access. The environment
  // variable STREAMPOOL_CHECK_STREAM_ORDER=1 turns it on for every runtime,
  // and =fatal also aborts the process at the first report (the test suite
  // runs that way).
  bool check_stream_order = false;
  // How streams run. The pools, ordering and API are the same for both.
  ExecutorKind executor = ExecutorKind::kSimulator;
  // Streams and events of another runtime (see stream_adapter.h). When set,
  // it decides how streams run and `executor` is ignored.
  std::shared_ptr<StreamAdapter> adapter;
};



// Strong ids; value is the same number as the C API's opaque handle.
struct StreamId {
  uint64_t value = 0;
  spStream_t c() const { return reinterpret_cast<spStream_t>(static_cast<uintptr_t>(value)); }
};
struct EventId {
  uint64_t value = 0;
  spEvent_t c() const { return reinterpret_cast<spEvent_t>(static_cast<uintptr_t>(value)); }
};
struct PoolId {
  uint64_t value = 0;
  spMemPool_t c() const { return reinterpret_cast<spMemPool_t>(static_cast<uintptr_t>(value)); }
  friend bool operator==(PoolId a, PoolId b) { return a.value == b.value; }
};

enum class CheckKind {
  kOutOfBounds = 1,          // access outside any allocation
  kUseAfterFree = 2,         // access after the free, or a free not ordered after an access
  kUseBeforeReady = 3,       // access not ordered after the allocation
  kOverlappingLifetimes = 4, // pool self-check: bytes handed out while still in use
};

struct CheckReport {
  CheckKind kind = CheckKind::kOutOfBounds;
  StreamId stream;           // the offending op (value 0 if that stream is destroyed)
  uint64_t op_position = 0;  // its position in the stream (1 = first op)
  const void* ptr = nullptr;
  uint64_t size = 0;
  StreamId other_stream;     // the other op involved (allocation or free), if any
  uint64_t other_position = 0;
  std::string message;
};

struct Access {
  const void* ptr = nullptr;
  uint64_t size = 0;
  bool write = false;
};

enum class PoolAttr {
  kReuseFollowEventDependencies = 1,
  kReuseAllowOpportunistic = 2,
  kReuseAllowInternalDependencies = 3,
  kReleaseThreshold = 4,
  kReservedMemCurrent = 5,
  kReservedMemHigh = 6,
  kUsedMemCurrent = 7,
  kUsedMemHigh = 8,
};

struct PointerAttributes {
  int device = -1;      // the pool's device; -1 for pinned host memory
  PoolId pool;          // value 0 for Malloc memory
  void* base = nullptr; // start of the allocation
  uint64_t size = 0;    // its requested size
};

// What the last allocation decided, for policy tests and benchmarks.
struct AllocInfo {
  void* ptr = nullptr;
  ReuseRule rule = ReuseRule::kFresh;
};

// One op as the simulator scheduled it (see Runtime::Timeline).
struct TimelineEntry {
  StreamId stream;       // value 0 for a stream destroyed since
  uint32_t stream_index; // dense index, stable for the runtime's life
  int device = 0;
  uint64_t position = 0; // the op's position in its stream
  OpKind kind = OpKind::kAllocMarker;
  uint64_t enqueued_ns = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

STREAMPOOL_EXPORT const char* OpKindName(OpKind kind);

class STREAMPOOL_EXPORT Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const RuntimeConfig& config = {});
  // A view of a runtime made through the C API: the same runtime, which stays
  // alive until spRuntimeDestroy (destroying the view does not destroy it).
  static absl::StatusOr<std::unique_ptr<Runtime>> FromC(spRuntime_t rt);
  // A runtime made by Create is destroyed with it: everything it owns is
  // freed. A view from FromC only lets go.
  ~Runtime();

  spRuntime_t c() const;
  const RuntimeConfig& config() const;

  // Streams and events.
  absl::StatusOr<StreamId> CreateStream(int device, bool non_blocking = false);
  absl::Status DestroyStream(StreamId s);
  absl::StatusOr<StreamId> LegacyStream(int device);
  absl::Status StreamSynchronize(StreamId s);
  absl::Status StreamQuery(StreamId s);  // kUnavailable while work is pending
  absl::Status StreamWaitEvent(StreamId s, EventId e);
  absl::StatusOr<EventId> CreateEvent();
  absl::Status DestroyEvent(EventId e);
  absl::Status RecordEvent(EventId e, StreamId s);
  absl::Status EventSynchronize(EventId e);
  absl::Status EventQuery(EventId e);
  absl::StatusOr<float> EventElapsedMs(EventId start, EventId end);
  absl::Status DeviceSynchronize(int device);

  // Work.
  absl::Status LaunchKernel(StreamId s, uint64_t duration_ns, absl::Span<const Access> accesses);
  absl::Status LaunchHostFunc(StreamId s, std::function<void()> fn);
  // A kernel with a body: with the threads executor `work` runs on the
  // stream's worker thread in stream order (it may read and write memory it
  // declared in `accesses`); with the simulator it runs when the host observes
  // the kernel complete, after `duration_ns` of virtual time. `work` must not
  // call the API.
  absl::Status LaunchWork(StreamId s, std::function<void()> work,
                          absl::Span<const Access> accesses = {}, uint64_t duration_ns = 0);
  absl::Status MemcpyAsync(void* dst, const void* src, uint64_t bytes, StreamId s);
  absl::Status MemsetAsync(void* dst, int value, uint64_t bytes, StreamId s);
  absl::Status HostAdvance(uint64_t ns);
  uint64_t HostNow() const;

  // The embedder's native stream behind `s` (runtimes with a StreamAdapter;
  // kFailedPrecondition otherwise), to launch native work on.
  absl::StatusOr<void*> NativeStream(StreamId s);

  // Memory.
  absl::StatusOr<AllocInfo> MallocAsync(uint64_t size, StreamId s);
  absl::StatusOr<AllocInfo> MallocFromPoolAsync(uint64_t size, PoolId pool, StreamId s);
  absl::Status FreeAsync(void* ptr, StreamId s);
  absl::StatusOr<void*> Malloc(uint64_t size, int device);
  absl::Status Free(void* ptr);
  absl::StatusOr<PointerAttributes> GetPointerAttributes(const void* ptr) const;

  // Pools.
  absl::StatusOr<PoolId> CreatePool(const PoolProps& props);
  // A pool over a caller's upstream (NewCallbackMemory, or any
  // PhysicalMemory); the pool shares ownership of it.
  absl::StatusOr<PoolId> CreatePool(const PoolProps& props,
                                    std::shared_ptr<PhysicalMemory> upstream);
  // Huge-page bytes `device` may hold across its HugePage and Dvpp pools;
  // reservations beyond it fall back per page policy. Unlimited by default;
  // an Atlas-like setting is a quarter of the device's memory.
  absl::Status SetHugePageBudget(int device, uint64_t bytes);
  absl::Status DestroyPool(PoolId pool);
  absl::StatusOr<PoolId> DefaultPool(int device) const;
  absl::StatusOr<PoolId> CurrentPool(int device) const;
  absl::Status SetCurrentPool(int device, PoolId pool);
  absl::Status SetPoolAttribute(PoolId pool, PoolAttr attr, uint64_t value);
  absl::StatusOr<uint64_t> GetPoolAttribute(PoolId pool, PoolAttr attr) const;
  absl::Status TrimTo(PoolId pool, uint64_t min_bytes_to_keep);
  absl::StatusOr<PoolStats> GetPoolStats(PoolId pool) const;
  // The pool's O(n) self-check (DESIGN.md invariants); an error names what broke.
  absl::Status CheckPoolInvariants(PoolId pool) const;

  // Stream-order checker: turn on or off (reports are kept), read, clear.
  void EnableChecker(bool on);
  std::vector<CheckReport> CheckReports() const;
  void ClearCheckReports();

  // Records every op's schedule from now on (off by default: it grows
  // without bound), for timelines and tests.
  void RecordTimeline(bool on);
  std::vector<TimelineEntry> Timeline() const;

  internal::RuntimeImpl& impl() const { return *impl_; }

 private:
  Runtime(std::shared_ptr<internal::RuntimeImpl> impl, bool owns);
  std::shared_ptr<internal::RuntimeImpl> impl_;
  bool owns_;
};

}  // namespace streampool

#endif  // STREAMPOOL_RUNTIME_H_
