// Allocator: every allocation and free — stream-ordered (MallocAsync,
// FreeAsync: the fast path through a stream's front cache, else the pool's
// central path with an OrderOracle answering from the ordering core and the
// executor), synchronous (Malloc, MallocHost: DirectMemory), and what a
// pointer is (GetPointerAttributes).
//
// The descent (src/README.md draws it): AllocateFast / FreeFast, inline in
// the caller's translation unit (a memoized target, the stream's biased
// lock, its front cache, a position: no read-modify-write, no runtime lock,
// no executor op) -> MallocAsync / FreeAsync, out of line (the target
// resolved, then the pool's ladder under its own lock, AllocateCentral) ->
// the runtime's lock (MallocAsyncLocked / FreeAsyncLocked: the checker's
// records, recordings, exportable and imported pools) -> out of memory
// (AfterOutOfMemory: reclaim, the embedder's handler).
#ifndef STREAMPOOL_SRC_RUNTIME_ALLOCATOR_H_
#define STREAMPOOL_SRC_RUNTIME_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/direct_memory.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {

class Allocator {
 public:
  explicit Allocator(RuntimeCore& core);
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Every stream-ordered allocation and free (pool == 0: the stream's
  // device's current pool). The caller has passed the call gate and refused
  // host callbacks; these take the runtime's lock only for what the paths
  // without it cannot serve (src/README.md draws the descent).
  absl::StatusOr<AllocInfo> MallocAsync(uint64_t size, uint64_t pool, uint64_t s);
  absl::Status FreeAsync(void* ptr, uint64_t s);

  // The fast tier (inline, for the C entry points' translation unit): this
  // thread's last (stream, pool) resolution, the stream's lock, a pop from
  // its front cache, a position. Null (nothing changed) when it cannot
  // decide: then MallocAsync. No read-modify-write: the stream lock is
  // biased to its thread and a cached block kept its page-map entry.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void* AllocateFast(uint64_t size, uint64_t pool,
                                                  uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Memo& m = memo_;
    if (m.owner != this || m.stream != s || m.pool != pool || size == 0 ||
        c_.obs.recording(std::memory_order_relaxed) != nullptr) {
      return nullptr;
    }
    Target& t = m.target;
    SpinLockHolder lock(t.lock);
    // The pool is still the handle's: destroying it changes the epoch
    // before its MemPool is freed, which passes every stream lock first.
    if (c_.fast.epoch_relaxed() != t.epoch) return nullptr;
    if (t.cache == nullptr && (t.cache = t.mp->CacheOf(t.t)) == nullptr) return nullptr;
    Block* b = t.mp->CacheAllocate(*t.cache, t.t, size);
    if (b == nullptr) return nullptr;
    SetHolder(*b, t.t);
    StoreRelaxed(b->alloc_pos, Ordering::AdvancePoint(*t.position));
    m.last = b;
    return reinterpret_cast<void*>(b->addr());
  }
  // The fast tier of the free: a block the stream itself holds, into its
  // cache (or, the cache full, the pool's central free). False (nothing
  // changed) when it cannot decide: then FreeAsync.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool FreeFast(void* ptr, uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const Memo& m = memo_;
    if (m.owner != this || m.stream != s || ptr == nullptr ||
        c_.obs.recording(std::memory_order_relaxed) != nullptr) {
      return false;
    }
    const Target& t = m.target;
    ClaimedFree f;
    {
      SpinLockHolder lock(t.lock);
      if (c_.fast.epoch_relaxed() != t.epoch) return false;
      const auto addr = reinterpret_cast<uintptr_t>(ptr);
      // Held by this stream: only this lock's holder may change that, and a
      // held block's address cannot be changing under another thread's
      // recycling, so the holder is read first. The last block handed out
      // here needs no page-map walk.
      auto held = [&](const Block* c) {
        return c != nullptr && HolderOf(*c) == t.t + 1 && c->addr() == addr;
      };
      Block* b = m.last;
      const bool last = held(b);
      if (!last && !held(b = c_.index.EntryAt(addr))) return false;
      if (LoadRelaxed(b->used_elsewhere)) return false;
      ClearHolder(*b);
      f = ClaimedFree{b, t.t, Ordering::AdvancePoint(*t.position)};
      // The last block came from the memo's pool and stream cache.
      const bool cached =
          last ? t.mp->CacheFree(*t.cache, b, f.at) : b->chunk->pool->CacheFree(b, t.t, f.at);
      if (cached) return true;
    }
    FinishFree(f);
    return true;
  }
  // The pool `pool` names on stream s (0: the device's current pool), under
  // the runtime's lock; null when either handle is not a live local pool.
  MemPool* PoolFor(uint64_t pool, uint64_t s, uint64_t* handle, StreamIndex* t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_.mu);
  // Declares the live pool allocation at ptr used by stream s: its free will
  // also be ordered after s's work up to then, and its bytes reused by no
  // stream before both are complete.
  absl::Status RecordUse(void* ptr, uint64_t s);
  absl::StatusOr<void*> Malloc(uint64_t size, int device);
  absl::Status Free(void* ptr);
  absl::StatusOr<void*> MallocHost(uint64_t size);
  absl::Status FreeHost(void* ptr);
  // Host memory registration (spHostRegister and its siblings): the
  // runtime's table of ranges, which the checker reads.
  absl::StatusOr<void*> HostRegister(void* ptr, uint64_t size, unsigned flags);
  absl::Status HostUnregister(void* ptr);
  absl::StatusOr<void*> HostDevicePointer(const void* ptr);
  absl::StatusOr<DeviceMemInfo> MemGetInfo(int device);
  absl::StatusOr<PointerAttributes> GetPointerAttributes(const void* ptr);
  // Every allocation handed out and not freed: the pools' (live pools and
  // destroyed ones with allocations left), in (pool, address) order, then
  // the synchronous ones (Malloc, MallocHost) in address order. Under the
  // runtime's lock, as every part operation.
  absl::StatusOr<std::vector<LiveAllocation>> LiveAllocations();
  // Unmaps every synchronous allocation (teardown).
  void UnmapAll() { direct_.UnmapAll(); }

 private:
  // What the paths without the runtime's lock allocate from: the pool
  // handle (the given one, or the device's current one), its MemPool, the
  // stream's slot and lock, and the lookup epoch they were resolved under
  // (FastPathGate::epoch: a pool destroyed since changed it).
  struct Target {
    uint64_t ph;
    MemPool* mp;
    StreamIndex t;
    SpinLock* lock;
    uint64_t epoch;
    // t's front cache in mp, once it has one (filled by the fast tier).
    FrontCache* cache;
    std::atomic<Position>* position;  // pos(t)
  };
  // A host thread's last resolution, so that a thread allocating on one
  // stream resolves its handles once, not at every call.
  struct Memo {
    const Allocator* owner;
    uint64_t stream;
    uint64_t pool;
    Target target;
    // The block the fast tier last handed out here: a free of it (the
    // common next call) needs no page-map walk. Only a hint: the free reads
    // it under the stream lock, with the epoch showing the pool alive, and
    // checks its holder and address as it would a block from the map.
    Block* last;
  };
  // Trivially destructible and initial-exec, as the registry's per-thread
  // cache: read on every call.
  static inline thread_local Memo memo_ __attribute__((tls_model("initial-exec"))){};
  // A free claimed from the page map: the block, and the point its free
  // took on the freeing stream. Whoever holds one owns the free.
  struct ClaimedFree {
    Block* block = nullptr;
    StreamIndex stream = kNoStream;
    Position at = 0;
    // False for a block the page map does not hold (a record does):
    // it never enters a front cache, whose pops find blocks by the map.
    bool cacheable = true;
  };
  // Claims the block live at addr for a free on stream s (clears its
  // holder), taking s's lock, then the holder's if that is another stream;
  // null when no block is live there (a double free, a foreign or interior
  // pointer). A block is read only under a stream lock: a pool is freed only
  // once every stream lock is passed, after its cached blocks' entries went.
  // s = kNoStream (a synchronous free): the holder's lock alone, under the
  // runtime's lock, which no pool is freed without.
  Block* Claim(uintptr_t addr, StreamIndex s);

  // One try, by the fast path, the pool's central path or under the
  // runtime's lock; out of memory is the caller's to handle.
  absl::StatusOr<AllocInfo> MallocAsyncOnce(uint64_t size, uint64_t pool, uint64_t s);
  // An allocation that ran out of memory: the reclaim (RuntimeConfig::
  // oom_reclaim) and one more try, then the embedder's handler as long as
  // it asks for another; the failure, when it stays, is written to the
  // recording here, once.
  absl::StatusOr<AllocInfo> AfterOutOfMemory(uint64_t size, uint64_t pool, uint64_t s,
                                             absl::StatusOr<AllocInfo> failed);
  // Releases what the pools sharing mp's memory hold READY, mp first;
  // returns the bytes released. Pools of another process's memory (imported,
  // exportable) keep theirs.
  uint64_t ReclaimLocked(MemPool& mp, StreamIndex t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_.mu);

  // The target of (pool, s) for the paths without the runtime's lock; null
  // when they may not run (checker, timeline, host cost, adapter, a
  // destroyed runtime) or a handle is not live.
  // *resolved is set when the memo was made anew.
  const Target* FindTarget(uint64_t pool, uint64_t s, bool* resolved);
  // Whether the paths without the lock may serve rec's stream: not while it
  // captures (its calls become nodes), nor, while any capture is open, for a
  // legacy stream (its calls may be refused: RuntimeCore::CheckLegacyOp).
  bool Uncaptured(const RuntimeCore::StreamRec& rec) const {
    return !rec.capturing.load(std::memory_order_relaxed) &&
           !(rec.legacy.load(std::memory_order_relaxed) && c_.captures.any_open());
  }
  // The pool's central path without the runtime's lock: its lock, and the
  // ordering core's only once a rule needs it. Null when the call must go
  // under the runtime's lock (the pool was destroyed meanwhile, or the pool is
  // exportable: its growth is the runtime lock's, IPC reads its memfd).
  // Runs with the pool pinned.
  // `s` is the stream's handle, for the recording.
  std::optional<absl::StatusOr<MemPool::Allocation>> AllocateCentral(const Target& target,
                                                                     uint64_t size, uint64_t s);
  // The central free of a claimed block: without the runtime's lock when the
  // fast path is on, else under it (the checker's records).
  void FinishFree(const ClaimedFree& f);
  // The free of a claimed block other streams were declared to use, its
  // point not yet taken: under the runtime's lock, with the ordering core's.
  void FreeUsed(Block* b, StreamIndex t, bool cacheable);
  void FreeCentral(const ClaimedFree& f);
  // Under the runtime's lock: the checker's records, spMalloc and imported
  // memory, exportable pools.
  absl::StatusOr<AllocInfo> MallocAsyncLocked(uint64_t size, uint64_t pool, uint64_t s);
  absl::Status FreeAsyncLocked(void* ptr, uint64_t s);
  // MallocAsyncLocked, written to the open recording with its decision.
  absl::StatusOr<AllocInfo> MallocAsyncRecorded(uint64_t size, uint64_t pool, uint64_t s);
  // Whether ptr lies in a device's graph memory (not a pool's): a recording
  // writes it as a graph allocation. Under the runtime's lock, as the
  // recorded paths run.
  bool IsGraphMemory(const void* ptr);
  // Makes a block handed out without the runtime's lock findable by its base
  // (pool handle ph). Reads nothing of the pool: the caller may have
  // unpinned it.
  void Publish(uint64_t ph, Block* b, StreamIndex t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    SetHolder(*b, t);
    if (!c_.index.SetEntry(b->addr(), b)) PublishSlow(ph, b);
  }
  void PublishSlow(uint64_t ph, Block* b);
  // A pool's block handed out (slow path): recorded in the page map, or in
  // a record where the map cannot hold it.
  void RecordPoolAlloc(uint64_t pool_handle, const PoolTable::PoolRec& rec, Block* b);
  // The record of a live allocation starting at ptr (one the page map could
  // not hold, or an imported pointer), taken out; InvalidArgument if none.
  absl::StatusOr<AllocationIndex::Rec> TakeLiveAlloc(const void* ptr);
  // Ends the registrations inside pinned host memory being freed, each
  // reported to the checker.
  void EndRegistrationsIn(uintptr_t base, uint64_t size);
  // A synchronous free, charged and told to the checker.
  void NoteFreeNow(const void* ptr);
  std::vector<LiveAllocation> LiveDirectAllocations() const;
  // spMalloc (device >= 0) and spMallocHost (device -1) once validated.
  absl::StatusOr<void*> AllocateDirect(uint64_t size, int device);

  RuntimeCore& c_;
  // Pinned host memory of spMallocHost: the host's pages, always touchable.
  std::shared_ptr<PhysicalMemory> host_upstream_;
  // Synchronous allocations: spMalloc (device) and spMallocHost (host).
  DirectMemory direct_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_ALLOCATOR_H_
