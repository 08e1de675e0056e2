// RuntimeImpl: the state behind one spRuntime_t / streampool::Runtime.
//
// A composition root: it owns the runtime's lock and its parts, each with one
// job. A call reaches a part through Run, which takes the lock, checks the
// runtime is alive and calls the part's operation; the public Runtime and the
// C API name the operation itself (Run<&Streams::CreateStream>), so none is
// declared again here.
//
//   RuntimeCore   what the parts share: ordering core + executor, devices,
//                 handle tables, page map, checker, recording (runtime_core.h)
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
//   Graphs        capture, graphs and their launches, graph memory
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
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/allocator.h"
#include "src/runtime/events.h"
#include "src/runtime/graphs.h"
#include "src/runtime/ipc_service.h"
#include "src/runtime/observation.h"
#include "src/runtime/pools.h"
#include "src/runtime/process.h"
#include "src/runtime/recorded_calls.h"
#include "src/runtime/runtime_core.h"
#include "src/runtime/streams.h"
#include "src/runtime/sync_protocol.h"
#include "src/runtime/work.h"
#include "src/util/call_gate.h"
#include "src/util/mutex.h"
#include "streampool/runtime.h"

namespace streampool::internal {

// The allocator's two paths that take the runtime's lock themselves, only when
// they must: run under it they would take it twice.
template <auto Op>
inline constexpr bool kTakesRuntimeLock = false;
template <>
inline constexpr bool kTakesRuntimeLock<&Allocator::MallocAsync> = true;
template <>
inline constexpr bool kTakesRuntimeLock<&Allocator::FreeAsync> = true;

class RuntimeImpl {
 public:
  // Validates the config; registers the runtime in `process`'s registry,
  // where the lookups below find it again.
  static absl::StatusOr<std::shared_ptr<RuntimeImpl>> Create(const RuntimeConfig& config,
                                                             Process& process);
  // Unregisters from `process` and tears down: synchronizes every device,
  // then frees all.
  static absl::Status Destroy(Process& process, uint64_t runtime_handle);
  // The live runtime of `process` a handle of any kind belongs to.
  static absl::StatusOr<std::shared_ptr<RuntimeImpl>> Find(Process& process, uint64_t handle);
  // Find for the C API's hot path: no lock, no reference count (a per-thread
  // cache keeps the runtime alive). Null for an invalid handle. Inline: every
  // C call starts here.
  static RuntimeImpl* FindFast(Process& process, uint64_t handle) {
    const auto kind = static_cast<uint8_t>(KindOf(handle));
    if (kind == 0 || kind > static_cast<uint8_t>(HandleKind::kGraphExec)) return nullptr;
    return process.registry().FindCached(RuntimeIdOf(handle));
  }

  ~RuntimeImpl();

  uint32_t id() const { return id_; }
  // The process it was created in (fixed: read without the lock).
  Process& process() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return core_.process; }
  uint64_t handle() const;
  // Fixed at creation: read without the lock.
  const RuntimeConfig& config() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return core_.config; }

  // Runs a part's operation under the runtime's lock, after the checks every
  // such call makes, in this order: refused from a host function (host
  // functions run while the lock is held), then the call gate, passed before
  // the lock so that it is let go after it (a destroyer waiting for calls to
  // leave never holds what they need to leave), then the lock and the
  // liveness check. An operation with no status to return (the checker's and
  // the timeline's switches and reads) answers a refusal with an empty result.
  template <auto Op, typename... A>
  auto Run(A&&... args) ABSL_LOCKS_EXCLUDED(mu_) {
    using Part = typename PartOp<decltype(Op)>::Part;
    using R = typename PartOp<decltype(Op)>::Result;
    static_assert(!kTakesRuntimeLock<Op>,
                  "MallocAsync and FreeAsync take the runtime's lock themselves: call "
                  "RuntimeImpl::MallocAsync/FreeAsync");
    if (InHostCallback()) {
      return Refused<R>(absl::UnimplementedError("API call from a host function"));
    }
    CallGate::Pass pass(gate_);
    if (!pass.entered()) return Refused<R>(Destroyed());
    MutexLock lock(&mu_);
    if (absl::Status entered = Enter(); !entered.ok()) return Refused<R>(std::move(entered));
    if constexpr (RecordedCall<Op>::kWritten) {
      if (core_.obs.recorder() != nullptr) {
        const uint64_t start = core_.obs.recorder()->Now();
        R result = (part<Part>().*Op)(std::forward<A>(args)...);
        // A synchronize lets the lock go while it waits: the recording may
        // have been stopped meanwhile.
        if (Recorder* r = core_.obs.recorder()) {
          RecordedCall<Op>::Write(*r, result, Recorder::Times{start, r->Now()}, args...);
        }
        return result;
      }
    }
    return (part<Part>().*Op)(std::forward<A>(args)...);
  }

  // The two paths that take no runtime lock unless they must (the allocator
  // takes it itself). pool == 0: the stream's device's current pool. Each
  // is its fast tier (inline: the call gate and Allocator::AllocateFast or
  // FreeFast), then, where that could not decide, its slow tier.
  absl::StatusOr<AllocInfo> MallocAsync(uint64_t size, uint64_t pool, uint64_t s) {
    if (void* p = AllocateFast(size, pool, s)) return AllocInfo{p, ReuseRule::kSameStream};
    return AllocateSlow(size, pool, s);
  }
  absl::Status FreeAsync(void* ptr, uint64_t s) {
    if (FreeFast(ptr, s)) return absl::OkStatus();
    return FreeSlow(ptr, s);
  }
  // Null, or false, with nothing changed when the fast tier cannot decide.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void* AllocateFast(uint64_t size, uint64_t pool, uint64_t s) {
    if (InHostCallback()) return nullptr;
    CallGate::Pass pass(gate_);
    return pass.entered() ? alloc_.AllocateFast(size, pool, s) : nullptr;
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool FreeFast(void* ptr, uint64_t s) {
    if (InHostCallback()) return false;
    CallGate::Pass pass(gate_);
    return pass.entered() && alloc_.FreeFast(ptr, s);
  }
  // Out of line: the rest of the descent, for a call the fast tier missed.
  absl::StatusOr<AllocInfo> AllocateSlow(uint64_t size, uint64_t pool, uint64_t s);
  absl::Status FreeSlow(void* ptr, uint64_t s);
  // From a host function too: that thread already holds the lock. 0 once
  // the runtime is destroyed.
  uint64_t HostNow();
  // For tests and tools that compare the runtime against a model (not part
  // of the public API): the ordering core's and the simulator's state (empty
  // once the runtime is destroyed), and the slot behind a stream handle.
  using Introspection = Observation::Introspection;
  Introspection Introspect();
  absl::StatusOr<StreamIndex> StreamIndexOf(uint64_t s);

 private:
  RuntimeImpl(const RuntimeConfig& config, uint32_t id, Process& process);
  // An operation's part and result, from its type.
  template <typename Op>
  struct PartOp;
  template <typename P, typename R, typename... Params>
  struct PartOp<R (P::*)(Params...)> {
    using Part = P;
    using Result = R;
  };
  // The part an operation belongs to; a type that is not a part does not
  // compile.
  template <typename Part>
  Part& part() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::get<Part&>(
        std::tie(streams_, events_, work_, alloc_, pools_, ipc_, observation_, graphs_));
  }
  // What Run answers when it refuses a call: the error, where the result can
  // carry one.
  template <typename R>
  static R Refused(absl::Status error) {
    if constexpr (std::is_constructible_v<R, absl::Status>) {
      return R(std::move(error));
    } else {
      return R();
    }
  }
  // STREAMPOOL_RECORD=<path>: every runtime of the process records its
  // history from creation (a face's implicit runtime included), so that an
  // unchanged program can be replayed.
  void RecordFromEnv() ABSL_LOCKS_EXCLUDED(mu_);
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
  // The leak check in effect: STREAMPOOL_LEAK_CHECK, else the config's.
  LeakCheck LeakCheckMode() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At teardown, once enqueued work completed: lists what was never freed
  // (LeakCheck::kReport and kFail), and notes it for kFail.
  void ReportLeaks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets enqueued work complete, then frees everything (idempotent).
  void TearDown() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The runtime's lock. It guards every part; the ordering core and the
  // executor inside the core have a lock of their own (Sequencer::mu),
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
  Graphs graphs_ ABSL_GUARDED_BY(mu_);
  // LeakCheck::kFail found allocations never freed: Shutdown ends the process.
  bool leaked_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RUNTIME_IMPL_H_
