// RuntimeImpl: the state behind one spRuntime_t / streampool::Runtime.
//
// A composition root: it owns the runtime's lock and its parts, each with one
// job, and every entry point takes the lock, checks the runtime is alive and
// hands the call to its part.
//
//   RuntimeCore   what the parts share: ordering core + executor, devices,
//                 handle tables, page map, checker (runtime_core.h)
//   Streams       streams and devices, slot reuse
//   Events        events, in a process and across processes
//   Work          kernels, host functions, copies, fills, host time
//   Allocator     MallocAsync/FreeAsync (fast and slow paths), Malloc,
//                 MallocHost, pointer attributes
//   Pools         pool creation by type, attributes, trimming, peer access
//   IpcService    exported and imported pools and pointers
//   SyncProtocol  wait -> mark complete -> promote/flush -> release -> reap,
//                 the one place the lock is dropped
//   Observation   checker reports, timeline, introspection
//
// Two paths (docs/design.md, "Performance model"): MallocAsync and FreeAsync try
// the Allocator's fast path first, with no runtime lock (a stream's lock
// only); everything else runs under mu_. Lock order: mu_, then a stream lock.
// Process-wide state (registry, DVPP window) comes from the Process given to
// Create.
#ifndef STREAMPOOL_SRC_RUNTIME_RUNTIME_IMPL_H_
#define STREAMPOOL_SRC_RUNTIME_RUNTIME_IMPL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/allocator.h"
#include "src/runtime/events.h"
#include "src/runtime/ipc_service.h"
#include "src/runtime/observation.h"
#include "src/runtime/pools.h"
#include "src/runtime/process.h"
#include "src/runtime/runtime_core.h"
#include "src/runtime/streams.h"
#include "src/runtime/sync_protocol.h"
#include "src/runtime/work.h"
#include "src/util/call_gate.h"
#include "src/util/mutex.h"
#include "streampool/runtime.h"

namespace streampool::internal {

class RuntimeImpl {
 public:
  // Validates the config; registers the runtime in the process registry.
  // Registers the runtime in `process`'s registry; handle lookups (Find,
  // FindFast, Destroy) look in the default process's.
  static absl::StatusOr<std::shared_ptr<RuntimeImpl>> Create(const RuntimeConfig& config,
                                                             Process& process = Process::Default());
  // Unregisters and tears down: synchronizes every device, then frees all.
  static absl::Status Destroy(uint64_t runtime_handle);
  // The live runtime a handle of any kind belongs to.
  static absl::StatusOr<std::shared_ptr<RuntimeImpl>> Find(uint64_t handle);
  // Find for the C API's hot path: no lock, no reference count (a per-thread
  // cache keeps the runtime alive). Null for an invalid handle. Inline: every
  // C call starts here.
  static RuntimeImpl* FindFast(uint64_t handle) {
    const auto kind = static_cast<uint8_t>(KindOf(handle));
    if (kind == 0 || kind > static_cast<uint8_t>(HandleKind::kPool)) return nullptr;
    return Process::Default().registry().FindCached(RuntimeIdOf(handle));
  }

  ~RuntimeImpl();

  uint32_t id() const { return id_; }
  uint64_t handle() const;
  // Fixed at creation: read without the lock.
  const RuntimeConfig& config() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return core_.config; }

  absl::StatusOr<uint64_t> CreateStream(int device, bool non_blocking);
  absl::Status DestroyStream(uint64_t s);
  absl::StatusOr<uint64_t> LegacyStream(int device);
  absl::Status StreamSynchronize(uint64_t s);
  absl::Status StreamQuery(uint64_t s);
  absl::Status StreamWaitEvent(uint64_t s, uint64_t e);
  absl::StatusOr<uint64_t> CreateEvent(unsigned flags = 0);
  absl::Status DestroyEvent(uint64_t e);
  absl::Status RecordEvent(uint64_t e, uint64_t s);
  absl::Status EventSynchronize(uint64_t e);
  absl::Status EventQuery(uint64_t e);
  absl::StatusOr<float> EventElapsedMs(uint64_t start, uint64_t end);
  absl::Status DeviceSynchronize(int device);

  absl::Status LaunchKernel(uint64_t s, uint64_t duration_ns, absl::Span<const Access> accesses);
  absl::Status LaunchHostFunc(uint64_t s, std::function<void()> fn);
  // A kernel whose body is `work` (run on the stream's worker by the threads
  // executor; by the simulator when the host observes it complete).
  absl::Status LaunchWork(uint64_t s, uint64_t duration_ns, std::function<void()> work,
                          absl::Span<const Access> accesses);
  absl::Status MemcpyAsync(void* dst, const void* src, uint64_t bytes, uint64_t s);
  absl::Status MemsetAsync(void* dst, int value, uint64_t bytes, uint64_t s);
  absl::Status HostAdvance(uint64_t ns);
  uint64_t HostNow();

  // pool == 0: the stream's device's current pool.
  absl::StatusOr<AllocInfo> MallocAsync(uint64_t size, uint64_t pool, uint64_t s);
  absl::Status FreeAsync(void* ptr, uint64_t s);
  absl::StatusOr<void*> Malloc(uint64_t size, int device);
  absl::Status Free(void* ptr);
  // Pinned host memory (spMallocHost): touchable, 64-B aligned, any device's.
  absl::StatusOr<void*> MallocHost(uint64_t size);
  absl::Status FreeHost(void* ptr);
  absl::StatusOr<DeviceMemInfo> MemGetInfo(int device);
  absl::StatusOr<PointerAttributes> GetPointerAttributes(const void* ptr);

  // upstream null: the one the pool's type implies.
  absl::StatusOr<uint64_t> CreatePool(const PoolProps& props,
                                      std::shared_ptr<PhysicalMemory> upstream);
  absl::Status SetHugePageBudget(int device, uint64_t bytes);
  absl::Status DestroyPool(uint64_t pool);
  absl::StatusOr<uint64_t> DefaultPool(int device);
  absl::StatusOr<uint64_t> CurrentPool(int device);
  absl::Status SetCurrentPool(int device, uint64_t pool);
  absl::Status SetPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value);
  absl::StatusOr<uint64_t> GetPoolAttribute(uint64_t pool, PoolAttr attr);
  absl::Status TrimTo(uint64_t pool, uint64_t min_bytes_to_keep);
  absl::StatusOr<PoolStats> GetPoolStats(uint64_t pool);
  absl::Status CheckPoolInvariants(uint64_t pool);

  // Multi-device access (CUDA guide F.10).
  absl::Status SetPeerAccessible(int device, int peer, bool accessible);
  absl::StatusOr<bool> CanAccessPeer(int device, int peer);
  absl::Status SetPoolAccess(uint64_t pool, absl::Span<const MemAccessDesc> descs);
  absl::StatusOr<MemAccessFlags> GetPoolAccess(uint64_t pool, MemLocation location);

  // IPC pools and events (F.11).
  // A new close-on-exec descriptor of an exportable pool's memfd.
  absl::StatusOr<int> ExportPool(uint64_t pool);
  // An imported pool over `fd` (which stays the caller's).
  absl::StatusOr<uint64_t> ImportPool(int fd);
  absl::StatusOr<PtrExportData> ExportPointer(const void* ptr);
  absl::StatusOr<void*> ImportPointer(uint64_t pool, const PtrExportData& data);
  absl::Status GetIpcEventHandle(uint64_t e, unsigned char handle[64]);
  absl::StatusOr<uint64_t> OpenIpcEvent(const unsigned char handle[64]);

  void RecordTimeline(bool on);
  std::vector<TimelineEntry> Timeline();
  // The ordering core's and the simulator's state, for tests and tools that
  // compare the runtime against a model (not part of the public API).
  using Introspection = Observation::Introspection;
  Introspection Introspect();
  // The embedder's native stream behind a stream (adapter runtimes only).
  absl::StatusOr<void*> NativeStream(uint64_t s);
  // The stream index behind a stream handle.
  absl::StatusOr<StreamIndex> StreamIndexOf(uint64_t s);
  void EnableChecker(bool on, bool fatal);
  std::vector<streampool::CheckReport> CheckReports();
  void ClearCheckReports();

 private:
  RuntimeImpl(const RuntimeConfig& config, uint32_t id, Process& process);
  // The executor, the upstream, the checker and each device with its legacy
  // stream and default pool.
  absl::Status Init() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses calls on a destroyed runtime.
  absl::Status Enter() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error of a call on a destroyed runtime (a destroyed handle's).
  static absl::Status Destroyed();
  // Destroy's protocol (docs/design.md, "Concurrency contract"): refuse new
  // calls, wake the calls blocked in synchronize calls, wait until no call
  // is inside, then tear down.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  // Lets enqueued work complete, then frees everything (idempotent).
  void TearDown() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The runtime's lock. It guards every part; the ordering core and the
  // executor inside the core have a lock of their own (RuntimeCore::order_mu),
  // pools theirs, streams a SpinLock each (src/README.md, "Locks").
  const uint32_t id_;
  // Every entry point passes it before taking mu_; Shutdown closes and
  // drains it.
  CallGate gate_;
  mutable Mutex mu_{LockRank::kRuntime};
  RuntimeCore core_ ABSL_GUARDED_BY(mu_);
  SyncProtocol sync_ ABSL_GUARDED_BY(mu_);
  Streams streams_ ABSL_GUARDED_BY(mu_);
  Events events_ ABSL_GUARDED_BY(mu_);
  Work work_ ABSL_GUARDED_BY(mu_);
  // Its paths for pool memory run without mu_ (ABSL_NO_THREAD_SAFETY_ANALYSIS
  // there).
  Allocator alloc_ ABSL_GUARDED_BY(mu_);
  Pools pools_ ABSL_GUARDED_BY(mu_);
  IpcService ipc_ ABSL_GUARDED_BY(mu_);
  Observation observation_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RUNTIME_IMPL_H_
