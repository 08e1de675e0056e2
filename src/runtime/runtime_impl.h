// RuntimeImpl: the state behind one spRuntime_t / streampool::Runtime.
//
// It ties the layers together: handles -> stream indices and pools; every op
// goes to the ordering core (positions, clocks) and to the executor (time);
// allocations go to pools with an OrderOracle answering from both; synchronize
// actions turn what they prove complete into READY blocks in every pool.
//
// Two paths (DESIGN.md, "Performance model"):
//   fast  MallocAsync/FreeAsync served by the stream's front cache in the
//         pool: a lock-free handle lookup, the page map, one cache lock, a
//         position. No runtime-wide lock, no executor op.
//   slow  everything else, under mu_: the pools' central paths (mu_ is their
//         lock), ordering clocks, executor, events, IPC.
// Lock order: mu_, then a front cache's lock; the fast path holds only the
// latter and never waits for mu_ while holding it.
#ifndef STREAMPOOL_SRC_RUNTIME_RUNTIME_IMPL_H_
#define STREAMPOOL_SRC_RUNTIME_RUNTIME_IMPL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/exec/adapter_executor.h"
#include "src/exec/thread_executor.h"
#include "src/memory/memfd_memory.h"
#include "src/memory/page_backing.h"
#include "src/ordering/ordering.h"
#include "src/pool/mem_pool.h"
#include "src/pool/page_map.h"
#include "src/pool/pool_config.h"
#include "src/runtime/direct_memory.h"
#include "src/runtime/handle_table.h"
#include "src/runtime/handles.h"
#include "src/runtime/ipc.h"
#include "src/runtime/pool_table.h"
#include "src/runtime/process.h"
#include "src/sim/checker.h"
#include "src/sim/sim_executor.h"
#include "src/util/mutex.h"
#include "streampool/runtime.h"

namespace streampool::internal {

// True while a host function runs on this thread: API calls are refused then.
bool InHostCallback();

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
  // cache keeps the runtime alive). Null for an invalid handle.
  static RuntimeImpl* FindFast(uint64_t handle);

  ~RuntimeImpl();

  uint32_t id() const { return id_; }
  uint64_t handle() const;
  const RuntimeConfig& config() const { return config_; }

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
  struct Introspection {
    std::vector<VectorClock> clocks;  // VC(S) by stream index
    std::vector<Position> positions;  // pos(S)
    VectorClock done;                 // proven complete
    std::vector<TimeNs> last_end;     // simulator: end of S's last op (empty otherwise)
  };
  Introspection Introspect();
  // The embedder's native stream behind a stream (adapter runtimes only).
  absl::StatusOr<void*> NativeStream(uint64_t s);
  // The stream index behind a stream handle.
  absl::StatusOr<StreamIndex> StreamIndexOf(uint64_t s);
  void EnableChecker(bool on, bool fatal);
  std::vector<streampool::CheckReport> CheckReports();
  void ClearCheckReports();
  // Called by our upstreams when memory goes back, under the lock.
  void OnUnmapped(uintptr_t base, uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ... and when address space goes back (a chunk, a reservation).
  void OnAddressSpaceReleased(uintptr_t base, uint64_t size);

 private:
  friend class Oracle;
  struct Device {
    std::unique_ptr<DeviceBudget> budget;
    std::unique_ptr<HugePageBudget> huge_budget;
    uint64_t legacy_stream = 0;  // handle
    uint64_t default_pool = 0;   // handle
    // Written under mu_, read by the fast path.
    std::atomic<uint64_t> current_pool{0};  // handle
  };
  // Fields are atomics: the fast path reads them without mu_.
  struct StreamRec {
    std::atomic<StreamIndex> index{0};
    std::atomic<int> device{0};
    std::atomic<bool> legacy{false};
  };
  struct EventRec {
    bool recorded = false;
    StreamIndex stream = kNoStream;
    Position position = 0;
    TimeNs end = 0;
    VectorClock snapshot;
    unsigned flags = 0;
    // Interprocess events: the shared segment, and the shared number of this
    // runtime's latest record of it (0: none). When the segment's latest
    // record is another's, queries and waits go by the shared counters.
    std::shared_ptr<IpcEventSegment> ipc;
    uint64_t ipc_seq = 0;
  };
  using PoolRec = PoolTable::PoolRec;
  // A live pool allocation the page map cannot hold, or an imported pointer,
  // by base address.
  struct AllocRec {
    MemPool* pool = nullptr;  // null for imported pointers
    uint64_t pool_handle = 0;
    Block* block = nullptr;
    int device = 0;
    uint64_t requested = 0;
    MemfdMemory* memfd = nullptr;            // allocations of exportable pools
    std::shared_ptr<ImportedPool> imported;  // imported pointers
  };
  class RegisteringUpstream;

  RuntimeImpl(const RuntimeConfig& config, uint32_t id, Process& process);
  absl::Status Init() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Refuses calls on a destroyed runtime.
  absl::Status Enter() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Charges the per-call host cost; called once a call has passed validation
  // (a failed call costs nothing) and before it enqueues anything.
  void ChargeCall() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckDevice(int device) const;
  absl::StatusOr<StreamRec*> FindStream(uint64_t h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<EventRec*> FindEvent(uint64_t h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t NewHandle(HandleKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ResourceExhausted once the runtime's handle ids are used up; checked by
  // every call that makes a handle, before it changes anything.
  absl::Status HandleRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Slot reuse (src/ordering/ordering.h): whether a destroyed stream's slot
  // has no work running and no free pending in any pool; and handing such
  // slots back to the ordering core.
  bool SlotIdle(StreamIndex s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecycleSlots() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> CreatePoolLocked(const PoolProps& props,
                                            std::shared_ptr<PhysicalMemory> custom_upstream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The fast paths: true when served (result in *out / done), false when the
  // call must take the slow path. No lock but a front cache's.
  bool TryMallocFast(uint64_t size, uint64_t pool, uint64_t s, AllocInfo* out);
  // Claims the pointer's page-map entry when it names a live block of this
  // runtime: *claimed then owns the free, whichever path finishes it.
  bool TryFreeFast(void* ptr, uint64_t s, Block** claimed, StreamIndex* idx, Position* f);
  // Whether the fast path may run: no checker, no recorded timeline, no
  // per-call host cost, no adapter, not destroyed (recomputed under mu_).
  void UpdateFastPath() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A pool's block handed out (slow path): recorded in the page map, or in
  // allocs_ where the map cannot hold it.
  void RecordPoolAlloc(uint64_t pool_handle, const PoolRec& rec, Block* b)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The central free of a block claimed from the page map.
  void FreeClaimed(Block* b, StreamIndex idx, Position f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Enqueues one op on stream index s in both the ordering core and executor.
  Position EnqueueOp(StreamIndex s, OpDesc op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An allocation or free point on s: a position, not an op (DESIGN.md,
  // "Performance model"); only the timeline records it.
  Position AdvancePoint(StreamIndex s, OpKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The highest position of s whose ops the executor reports complete: up to
  // pos(s) once the last op is, since the points after it complete with it.
  Position ExecutedThrough(StreamIndex s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The op a wait for (s, p) waits for: the last op at or before p (0: none).
  Position OpAtOrBefore(StreamIndex s, Position p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return s < last_op_.size() ? std::min(p, last_op_[s]) : 0;
  }
  absl::Status SyncStreams(absl::Span<const StreamIndex> streams)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until every (stream, position) has completed. With an executor
  // that really blocks, the lock is released meanwhile (workers may need it),
  // so callers must not keep pointers into the maps across this call.
  void WaitPoints(absl::Span<const std::pair<StreamIndex, Position>> points)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The end time of the op last enqueued on s, when time is virtual.
  TimeNs SimLastEnd(StreamIndex s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When an allocation point on t is usable: t's next op also waits for the
  // legacy-stream ordering (virtual time only).
  TimeNs SimAllocReady(StreamIndex t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<StreamIndex> StreamsOfDevice(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An effect that copies or fills, skipping bytes that are not touchable
  // (address-only memory, or runtime memory unmapped since the enqueue).
  std::function<void()> MemoryEffect(void* dst, const void* src, int value, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // spMalloc (device >= 0) and spMallocHost (device -1) once validated.
  absl::StatusOr<void*> AllocateDirect(uint64_t size, int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kernels with or without a body (LaunchKernel, LaunchWork).
  absl::Status EnqueueKernel(uint64_t s, uint64_t duration_ns, std::function<void()> body,
                             bool needs_body, absl::Span<const Access> accesses);
  // Access rights of a new pool resident on `device` (-1: host) of `type`.
  std::shared_ptr<AccessRights> NewAccessRights(int device, AllocationType type) const;
  // The shared record number an interprocess event's queries and waits must
  // see complete when its latest record is another runtime's; 0 when the
  // event's latest record is this runtime's (or it was never recorded).
  static uint64_t RemoteTarget(const EventRec& e);
  // Blocks until the segment has completed `seq`, with the lock released.
  void WaitIpc(const std::shared_ptr<IpcEventSegment>& seg, uint64_t seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TearDown() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // In fatal mode, aborts with the first new report.
  void CheckerAfterEvent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports of accesses a copy or fill makes to memory of this runtime.
  void CheckCopyAccess(StreamIndex s, Position p, const void* ptr, uint64_t bytes, bool write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RuntimeConfig config_;
  const uint32_t id_;
  // What is process-wide (the registry, the DVPP window), injected at Create.
  Process& process_;

  mutable Mutex mu_;
  bool destroyed_ ABSL_GUARDED_BY(mu_) = false;
  // Position of the last op (not point) enqueued on each stream index.
  std::vector<Position> last_op_ ABSL_GUARDED_BY(mu_);
  // Completion time of the op EnqueueOp enqueued last.
  TimeNs last_enqueue_end_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_object_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::shared_ptr<PhysicalMemory> upstream_ ABSL_GUARDED_BY(mu_);
  // Pinned host memory of spMallocHost: the host's pages, always touchable.
  std::shared_ptr<PhysicalMemory> host_upstream_ ABSL_GUARDED_BY(mu_);
  // Pinned host pools' bytes: bounded only by their maxSize and the system.
  DeviceBudget host_budget_ ABSL_GUARDED_BY(mu_){UINT64_MAX};
  // The simulator or the threads executor; sim_ points at the former (null
  // with real threads), for what only virtual time can answer.
  std::unique_ptr<Executor> executor_ ABSL_GUARDED_BY(mu_);
  SimExecutor* sim_ ABSL_GUARDED_BY(mu_) = nullptr;
  AdapterExecutor* adapter_ ABSL_GUARDED_BY(mu_) = nullptr;
  Ordering ordering_ ABSL_GUARDED_BY(mu_);
  // Fixed at Init; Device fields other than current_pool are mu_'s.
  std::unique_ptr<Device[]> devices_;
  // Writers hold mu_; Find is lock-free.
  HandleTable<StreamRec> streams_;
  // Base of every live pool block -> block (src/pool/page_map.h).
  PageMap page_map_;
  std::atomic<bool> fast_path_{false};
  // Destroyed streams' slots not yet reusable, and where RecycleSlots looks next.
  std::vector<StreamIndex> retired_slots_ ABSL_GUARDED_BY(mu_);
  size_t recycle_cursor_ ABSL_GUARDED_BY(mu_) = 0;
  // Handle of every stream index (0 once destroyed), for timelines.
  std::vector<uint64_t> stream_handles_ ABSL_GUARDED_BY(mu_);
  // Null while the checker is off.
  std::unique_ptr<StreamOrderChecker> checker_ ABSL_GUARDED_BY(mu_);
  bool checker_fatal_ ABSL_GUARDED_BY(mu_) = false;
  size_t checker_reported_ ABSL_GUARDED_BY(mu_) = 0;
  // The stream handles of each checker report, taken when it was made.
  std::vector<std::pair<uint64_t, uint64_t>> report_streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, EventRec> events_ ABSL_GUARDED_BY(mu_);
  // Local, exportable and imported pools; fast-path lookups are lock-free.
  PoolTable pools_;
  absl::flat_hash_map<uintptr_t, AllocRec> allocs_ ABSL_GUARDED_BY(mu_);
  // peers_[d] bit p: device d may access memory resident on device p.
  std::vector<uint64_t> peers_ ABSL_GUARDED_BY(mu_);
  // Synchronous allocations: spMalloc (device) and spMallocHost (host).
  DirectMemory direct_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RUNTIME_IMPL_H_
