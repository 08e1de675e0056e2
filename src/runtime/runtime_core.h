// RuntimeCore: what a runtime's parts share, and the few steps they all take.
//
// A runtime is a composition (RuntimeImpl) of parts with one job each:
// Streams, Events, Work, Allocator, Pools, IpcService, SyncProtocol and
// Observation. They share this core: the ordering core and the executor
// (positions and time for every op), the handle tables, the checker, and the
// parts it composes, each with its own contract: the devices (DeviceTable),
// which allocation an address names (AllocationIndex) and the fast path's
// switch (FastPathGate). Every field is guarded by the runtime's lock (`mu`), but
// the ordering core and the executor, which have their own (`order_mu`), and
// what the fast path reads without either, marked "lock-free" below
// (src/README.md, "The two paths").
#ifndef STREAMPOOL_SRC_RUNTIME_RUNTIME_CORE_H_
#define STREAMPOOL_SRC_RUNTIME_RUNTIME_CORE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/exec/adapter_executor.h"
#include "src/exec/cuda_executor.h"
#include "src/exec/thread_executor.h"
#include "src/memory/memfd_memory.h"
#include "src/memory/page_backing.h"
#include "src/ordering/ordering.h"
#include "src/pool/mem_pool.h"
#include "src/runtime/allocation_index.h"
#include "src/runtime/device_table.h"
#include "src/runtime/fast_path_gate.h"
#include "src/runtime/handle_table.h"
#include "src/runtime/handles.h"
#include "src/runtime/ipc.h"
#include "src/runtime/pool_table.h"
#include "src/runtime/process.h"
#include "src/runtime/recorder.h"
#include "src/sim/checker.h"
#include "src/sim/sim_executor.h"
#include "src/util/call_gate.h"
#include "src/util/mutex.h"
#include "streampool/runtime.h"

namespace streampool::internal {

// True while a host function or a kernel body runs on this thread: API calls
// are refused then. Inline, constant-initialized: every call reads it twice.
// Initial-exec: the library is compiled position independent when the Python
// extension embeds it, and the default model would then call
// __tls_get_addr on every read (~10 ns a C-API call).
inline thread_local bool in_host_callback __attribute__((tls_model("initial-exec"))) = false;
inline bool InHostCallback() { return in_host_callback; }
// `fn` run with API calls refused on its thread (host functions, work bodies).
std::function<void()> AsHostCallback(std::function<void()> fn);
// NULL is a bad argument (CUDA answers a NULL pool or event so); a handle
// naming nothing live is an invalid handle.
absl::Status InvalidHandle(const char* what, uint64_t h);

struct RuntimeCore {
  // Fields are atomics: the fast path reads them without the lock.
  struct StreamRec {
    std::atomic<StreamIndex> index{0};
    std::atomic<int> device{0};
    std::atomic<bool> legacy{false};
  };
  RuntimeCore(const RuntimeConfig& config, uint32_t id, Process& process, Mutex& mu,
              const CallGate& gate);
  RuntimeCore(const RuntimeCore&) = delete;
  RuntimeCore& operator=(const RuntimeCore&) = delete;

  // Charges the per-call host cost; called once a call has passed validation
  // (a failed call costs nothing) and before it enqueues anything.
  void ChargeCall() ABSL_LOCKS_EXCLUDED(order_mu);
  void ChargeCallLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);
  absl::StatusOr<StreamRec*> FindStream(uint64_t h);
  // ResourceExhausted once the runtime's event handle ids are used up; checked
  // by every call that makes one, before it changes anything.
  absl::Status HandleRoom() const;
  uint64_t NewHandle(HandleKind kind);
  // The handle of the stream in slot s now (0: destroyed), for reports.
  uint64_t StreamHandleOf(StreamIndex s) const {
    return s < stream_handles.size() ? stream_handles[s] : 0;
  }

  // Enqueues one op on stream index s in both the ordering core and executor.
  Position EnqueueOp(StreamIndex s, OpDesc op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);
  // An allocation or free point on s: a position, not an op (docs/design.md,
  // "Performance model"); only the timeline records it.
  Position AdvancePoint(StreamIndex s, OpKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);
  // The highest position of s whose ops the executor reports complete: up to
  // pos(s) once the last op is, since the points after it complete with it.
  Position ExecutedThrough(StreamIndex s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);
  // The op a wait for (s, p) waits for: the last op at or before p (0: none).
  // (An adapter marks points itself: there the point is what is waited for.)
  Position OpAtOrBefore(StreamIndex s, Position p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu) {
    if (adapter != nullptr) return p;
    return s < last_op.size() ? std::min(p, last_op[s]) : 0;
  }
  // The end time of the op last enqueued on s, when time is virtual.
  TimeNs SimLastEnd(StreamIndex s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);
  // When an allocation point on t is usable: t's next op also waits for the
  // legacy-stream ordering (virtual time only).
  TimeNs SimAllocReady(StreamIndex t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);
  std::vector<StreamIndex> StreamsOfDevice(int device) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);

  // Access rights of a new pool resident on `device` (-1: host) of `type`.
  std::shared_ptr<AccessRights> NewAccessRights(int device, AllocationType type) const;
  // In fatal mode, aborts with the first new report.
  void CheckerAfterEvent();
  // Whether the fast path may run: no checker, no recorded timeline, no
  // per-call host cost, no adapter, not destroyed.
  void UpdateFastPath() ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu);
  // Called by our upstreams when memory goes back (under the lock).
  void OnUnmapped(uintptr_t base, uint64_t size);
  // `inner` with every mapping recorded in the process's registry, so a bare
  // pointer finds its runtime.
  std::shared_ptr<PhysicalMemory> Registering(std::shared_ptr<PhysicalMemory> inner);

  const RuntimeConfig config;
  const uint32_t id;
  // What is process-wide (the registry, the DVPP window), injected at Create.
  Process& process;
  // The runtime's lock (RuntimeImpl::mu_): the sync protocol drops it while
  // it blocks, and effects on worker threads take it.
  Mutex& mu;

  bool destroyed = false;
  // The runtime's call gate (RuntimeImpl::gate_): once a destroy has closed
  // it, a synchronize woken from its wait returns the destroyed runtime's
  // error instead of going on.
  const CallGate& gate;
  // The ordering core's own lock (docs/design.md, "Performance model"): it guards
  // the ordering core and the executor, so that an allocation the pool must
  // judge against other streams (reuse rules 2, 3 and 5) or grow for takes
  // its pool's lock and this, not the runtime's. Order: the runtime's lock,
  // a pool's lock, this, a stream lock. Nothing is taken under it but stream
  // locks and the executor's own; nothing blocks under it but the simulator's
  // virtual waits.
  Mutex order_mu{LockRank::kOrdering};
  // What is lock-free in the ordering core: a stream's lock, and pos(S).
  SpinLock& stream_lock(StreamIndex s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return ordering.stream_lock(s);
  }
  Position pos(StreamIndex s) const ABSL_NO_THREAD_SAFETY_ANALYSIS { return ordering.pos(s); }
  // Slots made so far. Slots are made under the runtime's lock and this one,
  // so either lock suffices to read it (a pool's destruction, under the
  // runtime's, must not wait for another pool's growth under this one).
  size_t stream_slots() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return ordering.stream_count(); }
  // The ordering core and the executor: the simulator, the threads executor
  // or an adapter; sim and adapter point at the first and last (else null).
  Ordering ordering ABSL_GUARDED_BY(order_mu);  // stream locks and pos(S): lock-free
  std::unique_ptr<Executor> executor ABSL_GUARDED_BY(order_mu);
  SimExecutor* sim ABSL_GUARDED_BY(order_mu) = nullptr;
  AdapterExecutor* adapter ABSL_GUARDED_BY(order_mu) = nullptr;
  // The threads executor, whose host waits a destroy interrupts (else null).
  ThreadExecutor* threads ABSL_GUARDED_BY(order_mu) = nullptr;
  // Position of the last op (not point) enqueued on each stream index.
  std::vector<Position> last_op ABSL_GUARDED_BY(order_mu);
  // Completion time of the op EnqueueOp enqueued last.
  TimeNs last_enqueue_end ABSL_GUARDED_BY(order_mu) = 0;
  // Observation::LogInternalWaits: when on, every wait a pool inserts
  // (reuse rule 5), as the free's (stream index, position), until taken, so
  // that a replay can say which allocation made which wait.
  bool log_waits ABSL_GUARDED_BY(order_mu) = false;
  std::vector<std::pair<StreamIndex, Position>> wait_log ABSL_GUARDED_BY(order_mu);
  uint64_t next_object_id = 1;

  // The devices, their budgets and the memory they map.
  DeviceTable devices;
  HandleTable<StreamRec> streams;  // Find: lock-free
  // Handle of every stream index (0 once destroyed), for timelines.
  std::vector<uint64_t> stream_handles;
  PoolTable pools;  // FindFast: lock-free
  // Which live allocation an address names.
  AllocationIndex index;
  // Host memory made device-accessible (HostRegister), by base; the
  // checker reads it (kernels may touch these ranges). Changed under mu and
  // order_mu, as the checker's records.
  RegisteredRanges host_ranges;
  // A CUDA runtime's driver (its streams, events, memory); else null. The
  // native work it runs is reached through `native`.
  std::shared_ptr<CudaDriver> cuda;
  NativeWork* native = nullptr;
  // A CUDA runtime's page-locked host memory (PinnedHost pools, MallocHost).
  std::shared_ptr<PhysicalMemory> pinned_memory;
  // The open recording (spRuntimeStartRecording), else null; the allocator's
  // paths without the runtime's lock read `recording`, which a stop clears
  // and then passes every stream and pool lock before the recorder goes.
  std::unique_ptr<Recorder> recorder;
  std::atomic<Recorder*> recording{nullptr};
  // The embedder's out-of-memory handler (Runtime::SetOomHandler): called
  // with no lock held, after the reclaim, with the pool handle and size;
  // true asks for one more try. Under the runtime's lock, like the other
  // fields the parts share (the analysis cannot see that a part's lock is
  // this `mu`).
  std::function<bool(uint64_t pool, uint64_t size)> oom_handler;
  // The fast path's switch and the epoch its memos are valid under.
  FastPathGate fast;

  // Null while the checker is off.
  std::unique_ptr<StreamOrderChecker> checker;
  bool checker_fatal = false;
  size_t checker_reported = 0;
  // The stream handles of each checker report, taken when it was made.
  std::vector<std::pair<uint64_t, uint64_t>> report_streams;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RUNTIME_CORE_H_
