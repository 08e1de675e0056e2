// RuntimeCore: what a runtime's parts share, and the few steps they all take.
//
// A runtime is a composition (RuntimeImpl) of parts with one job each:
// Streams, Events, Work, Allocator, Pools, IpcService, SyncProtocol and
// Observation. They share this core: the config and the runtime's lock, the
// handle tables, and the parts it composes, each with its own contract: the
// ordering core and the executor behind their own lock (Sequencer), the
// devices (DeviceTable), which allocation an address names
// (AllocationIndex), the fast path's switch (FastPathGate) and the checker
// and the recording (Observability). Every field is guarded by the runtime's
// lock (`mu`), but the Sequencer's, under its own, and what the fast path
// reads without either, marked "lock-free" below (src/README.md, "The two
// paths").
#ifndef STREAMPOOL_SRC_RUNTIME_RUNTIME_CORE_H_
#define STREAMPOOL_SRC_RUNTIME_RUNTIME_CORE_H_

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
#include "src/exec/cuda_executor.h"
#include "src/memory/memfd_memory.h"
#include "src/memory/page_backing.h"
#include "src/pool/mem_pool.h"
#include "src/runtime/allocation_index.h"
#include "src/runtime/capture.h"
#include "src/runtime/device_table.h"
#include "src/runtime/fast_path_gate.h"
#include "src/runtime/handle_table.h"
#include "src/runtime/handles.h"
#include "src/runtime/ipc.h"
#include "src/runtime/observability.h"
#include "src/runtime/pool_table.h"
#include "src/runtime/process.h"
#include "src/runtime/sequencer.h"
#include "src/util/call_gate.h"
#include "src/util/mutex.h"
#include "streampool/runtime.h"

namespace streampool::internal {

class Graphs;

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
    // In a capture: the fast path leaves its calls to the paths that add
    // nodes (FindTarget refuses it).
    std::atomic<bool> capturing{false};
  };
  RuntimeCore(const RuntimeConfig& config, uint32_t id, Process& process, Mutex& mu,
              const CallGate& gate);
  RuntimeCore(const RuntimeCore&) = delete;
  RuntimeCore& operator=(const RuntimeCore&) = delete;

  absl::StatusOr<StreamRec*> FindStream(uint64_t h);
  // An op about to be enqueued on rec: refused, with its capture
  // invalidated, when rec is a legacy stream and a blocking stream of its
  // device is capturing (Captures::RefuseLegacyOp). One test when not.
  absl::Status CheckLegacyOp(const StreamRec& rec) {
    if (!rec.legacy.load(std::memory_order_relaxed) || captures.empty()) return absl::OkStatus();
    return RefuseLegacyOp(rec);
  }
  // ResourceExhausted once the runtime's event handle ids are used up; checked
  // by every call that makes one, before it changes anything.
  absl::Status HandleRoom() const;
  uint64_t NewHandle(HandleKind kind);
  absl::Status RefuseLegacyOp(const StreamRec& rec);
  // The handle of the stream in slot s now (0: destroyed), for reports.
  uint64_t StreamHandleOf(StreamIndex s) const {
    return s < stream_handles.size() ? stream_handles[s] : 0;
  }

  // Access rights of a new pool resident on `device` (-1: host) of `type`.
  std::shared_ptr<AccessRights> NewAccessRights(int device, AllocationType type) const;
  // Whether the fast path may run: no checker, no recorded timeline, no
  // per-call host cost, no adapter, not destroyed.
  void UpdateFastPath() ABSL_EXCLUSIVE_LOCKS_REQUIRED(seq.mu());
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
  // The ordering core and the executor, with their own lock.
  Sequencer seq;
  uint64_t next_object_id = 1;

  // The devices, their budgets and the memory they map.
  DeviceTable devices;
  HandleTable<StreamRec> streams;  // Find: lock-free
  // Handle of every stream index (0 once destroyed), for timelines.
  std::vector<uint64_t> stream_handles;
  PoolTable pools;  // FindFast: lock-free
  // Which live allocation an address names.
  AllocationIndex index;
  // The streams being captured into graphs; the graphs part, which frees
  // graph memory for the allocator and adds its nodes.
  Captures captures;
  Graphs* graphs = nullptr;
  // Host memory made device-accessible (HostRegister), by base; the
  // checker reads it (kernels may touch these ranges). Changed under mu and
  // seq.mu(), as the checker's records.
  RegisteredRanges host_ranges;
  // A CUDA runtime's driver (its streams, events, memory); else null. The
  // native work it runs is reached through `native`.
  std::shared_ptr<CudaDriver> cuda;
  NativeWork* native = nullptr;
  // A CUDA runtime's page-locked host memory (PinnedHost pools, MallocHost).
  std::shared_ptr<PhysicalMemory> pinned_memory;
  // The embedder's out-of-memory handler (Runtime::SetOomHandler): called
  // with no lock held, after the reclaim, with the pool handle and size;
  // true asks for one more try. Under the runtime's lock, like the other
  // fields the parts share (the analysis cannot see that a part's lock is
  // this `mu`).
  std::function<bool(uint64_t pool, uint64_t size)> oom_handler;
  // The fast path's switch and the epoch its memos are valid under.
  FastPathGate fast;
  // The checker and the open recording.
  Observability obs;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RUNTIME_CORE_H_
