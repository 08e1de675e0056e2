#include "src/runtime/allocator.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/runtime/graphs.h"
#include "src/util/check.h"
#include "streampool/streampool.h"

namespace streampool::internal {

using StreamRec = RuntimeCore::StreamRec;
using AllocRec = AllocationIndex::Rec;
using PoolRec = PoolTable::PoolRec;

namespace {

// Answers the pool's questions for one allocation on stream t, while its
// maker holds the ordering core's lock.
class Oracle final : public OrderOracle {
 public:
  // lazy: the ordering core's lock is taken at NeedOrder, if the pool gets
  // that far, and let go with the oracle; otherwise the maker holds it.
  Oracle(RuntimeCore& rt, StreamIndex t, bool lazy = false) : rt_(rt), t_(t), lazy_(lazy) {}
  ~Oracle() override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (locked_) rt_.seq.mu().Unlock();
  }
  Oracle(const Oracle&) = delete;
  Oracle& operator=(const Oracle&) = delete;
  void NeedOrder() override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (lazy_ && !locked_) {
      rt_.seq.mu().Lock();
      locked_ = true;
    }
  }
  // Whether the ordering core's lock is held (the allocation's point is then
  // an op, see AllocateCentral).
  bool ordered() const { return !lazy_ || locked_; }
  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return rt_.seq.ordering().OrderedAfter(t_, s);
  }
  Position ObservedComplete(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return std::max(rt_.seq.ordering().done(s), rt_.seq.ExecutedThrough(s));
  }
  Position CompletesBeforeAllocation(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const Position observed = ObservedComplete(s);
    if (rt_.seq.sim() == nullptr) return observed;
    // The simulator's schedule of what is enqueued is final, so the
    // projection is exact: the ops of s that end by the time T's next op
    // could start anyway. Points after s's last op complete with it.
    return std::max(observed, rt_.seq.PointsThrough(
                                  s, rt_.seq.sim()->CompleteBy(s, rt_.seq.SimAllocReady(t_))));
  }
  void InsertWait(StreamIndex s, Position f) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    OpDesc op;
    op.kind = OpKind::kInternalWait;
    op.wait_stream = s;
    op.wait_position = f;
    rt_.seq.EnqueueOp(t_, std::move(op));
    rt_.seq.NoteWait(s, f);
    if (f == rt_.seq.ordering().pos(s)) {
      // The free is S's latest op, so S's current clock is the free's clock
      // and the wait can carry everything the free was ordered after.
      rt_.seq.ordering().JoinInto(t_, rt_.seq.ordering().clock(s));
    } else {
      rt_.seq.ordering().OrderAfterPoint(t_, s, f);
    }
  }

 private:
  RuntimeCore& rt_;
  StreamIndex t_;
  const bool lazy_;
  bool locked_ = false;
};

}  // namespace

absl::StatusOr<AllocRec> Allocator::TakeLiveAlloc(const void* ptr) {
  std::optional<AllocRec> r = c_.index.Take(reinterpret_cast<uintptr_t>(ptr));
  if (!r.has_value()) {
    return absl::InvalidArgumentError(
        "pointer is not a live allocation of this runtime (double free or foreign pointer)");
  }
  return *std::move(r);
}

Allocator::Allocator(RuntimeCore& core)
    : c_(core),
      // Pinned host memory is the host's own, touchable whatever the devices' backing.
      host_upstream_(core.Registering(NewHostMemory())) {}

const Allocator::Target* Allocator::FindTarget(uint64_t pool, uint64_t s,
                                               bool* resolved) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Memo& m = memo_;
  // Read before resolving: a change made meanwhile leaves the memo stale.
  const uint64_t epoch = c_.fast.epoch();
  if (m.owner == this && m.stream == s && m.pool == pool && m.target.epoch == epoch) {
    return &m.target;
  }
  // Lock-free reads throughout: the handle tables and the device's current
  // pool (atomics).
  if (!c_.fast.on()) return nullptr;
  const StreamRec* rec = c_.streams.Find(s);
  if (rec == nullptr || !Uncaptured(*rec)) return nullptr;
  const uint64_t ph =
      pool != 0 ? pool : c_.devices.current_pool(rec->device.load(std::memory_order_relaxed));
  MemPool* mp = c_.pools.FindFast(ph);
  if (mp == nullptr) return nullptr;
  const StreamIndex t = rec->index.load(std::memory_order_relaxed);
  m = Memo{this, s, pool,
           Target{ph, mp, t, &c_.seq.ordering().stream_lock(t), epoch, nullptr,
                  &c_.seq.ordering().position(t)},
           nullptr};
  *resolved = true;
  return &m.target;
}

void Allocator::PublishSlow(uint64_t ph, Block* b) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // No memory for a page-map node: the hash map holds it instead. The block
  // is LIVE, so its pool, even if destroyed meanwhile, is draining, not freed.
  MutexLock lock(&c_.mu);
  if (absl::StatusOr<PoolRec*> prec = c_.pools.Find(ph); prec.ok()) {
    RecordPoolAlloc(ph, **prec, b);
  }
}

absl::StatusOr<AllocInfo> Allocator::MallocAsync(uint64_t size, uint64_t pool, uint64_t s) {
  absl::StatusOr<AllocInfo> a = MallocAsyncOnce(size, pool, s);
  if (a.ok() || !absl::IsResourceExhausted(a.status())) return a;
  return AfterOutOfMemory(size, pool, s, std::move(a));
}

MemPool* Allocator::PoolFor(uint64_t pool, uint64_t s, uint64_t* handle, StreamIndex* t) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return nullptr;
  *t = (*rec)->index;
  *handle = pool != 0 ? pool : c_.devices.current_pool((*rec)->device);
  absl::StatusOr<PoolRec*> prec = c_.pools.Find(*handle);
  if (!prec.ok()) return nullptr;
  return (*prec)->mem();
}

uint64_t Allocator::ReclaimLocked(MemPool& mp, StreamIndex t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Each pool under its own lock, one at a time (mu_ -> a pool's lock ->
  // order_mu); the oracle answers what completed, for promotion only.
  auto release = [&](MemPool& p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock pool_lock(&p.central_mu());
    MutexLock order_lock(&c_.seq.mu());
    Oracle oracle(c_, t);
    return p.ReleaseForOom(oracle);
  };
  uint64_t released = release(mp);
  c_.pools.AnyMemPool([&](uint64_t h, MemPool& other) {
    if (&other == &mp || other.budget() != mp.budget()) return false;
    // Exportable pools' chunks may be mapped by another process at any time.
    if (absl::StatusOr<PoolRec*> rec = c_.pools.Find(h);
        rec.ok() && (*rec)->exportable() != nullptr) {
      return false;
    }
    released += release(other);
    return false;
  });
  return released;
}

absl::StatusOr<AllocInfo> Allocator::AfterOutOfMemory(uint64_t size, uint64_t pool, uint64_t s,
                                                      absl::StatusOr<AllocInfo> a) {
  std::function<bool(uint64_t, uint64_t)> handler;
  uint64_t ph = 0;
  StreamIndex t = kNoStream;
  // The pool's statistics for the outcome, under its lock, if it still lives.
  auto note = [&](void (MemPool::*what)()) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock lock(&c_.mu);
    uint64_t h = 0;
    StreamIndex st = kNoStream;
    if (MemPool* mp = PoolFor(pool, s, &h, &st)) {
      MutexLock pool_lock(&mp->central_mu());
      (mp->*what)();
    }
  };
  auto record_failure = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock lock(&c_.mu);
    if (Recorder* r = c_.obs.recorder()) {
      const uint64_t now = r->Now();
      r->AllocationFailed(size, s, ph, {now, now});
    }
  };
  {
    MutexLock lock(&c_.mu);
    if (c_.destroyed) return a;
    MemPool* mp = PoolFor(pool, s, &ph, &t);
    if (mp == nullptr) return a;
    if (!mp->CanEverServe(size)) {
      if (Recorder* r = c_.obs.recorder()) {
        const uint64_t now = r->Now();
        r->AllocationFailed(size, s, ph, {now, now});
      }
      return a;
    }
    if (c_.config.oom_reclaim && ReclaimLocked(*mp, t) != 0) {
      {
        MutexLock pool_lock(&mp->central_mu());
        mp->NoteOomRetry();
      }
      a = c_.obs.recorder() != nullptr ? MallocAsyncRecorded(size, pool, s)
                                       : MallocAsyncLocked(size, pool, s);
      if (a.ok() || !absl::IsResourceExhausted(a.status())) return a;
    }
    handler = c_.oom_handler;
  }
  // The embedder's handler, with no lock held: it may free, trim or
  // synchronize through the API.
  while (handler && handler(ph, size)) {
    note(&MemPool::NoteOomRetry);
    a = MallocAsyncOnce(size, pool, s);
    if (!absl::IsResourceExhausted(a.status())) return a;
  }
  note(&MemPool::NoteOom);
  record_failure();
  return a;
}

absl::StatusOr<AllocInfo> Allocator::MallocAsyncOnce(uint64_t size, uint64_t pool,
                                                     uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  bool resolved = false;
  if (const Target* found = size != 0 ? FindTarget(pool, s, &resolved) : nullptr) {
    // The fast tier already missed on a memoized target; a new one is worth
    // its try.
    if (resolved) {
      if (void* p = AllocateFast(size, pool, s)) return AllocInfo{p, ReuseRule::kSameStream};
    }
    const Target target = *found;
    bool pinned = false;
    {
      SpinLockHolder lock(target.lock);
      // Pinned under the stream lock while the epoch shows the pool is the
      // handle's: it is not freed, so its lock may be taken once this one is
      // let go.
      if (c_.fast.epoch_relaxed() == target.epoch) {
        target.mp->Pin();
        pinned = true;
      }
    }
    if (pinned) {
      std::optional<absl::StatusOr<MemPool::Allocation>> a = AllocateCentral(target, size, s);
      target.mp->Unpin();
      if (a.has_value()) {
        if (!a->ok()) return a->status();  // out of memory: the call's answer
        Publish(target.ph, (*a)->block, target.t);
        return AllocInfo{reinterpret_cast<void*>((*a)->block->addr()), (*a)->rule};
      }
    }
  }
  MutexLock lock(&c_.mu);
  if (c_.destroyed) return absl::NotFoundError("runtime destroyed");
  if (c_.obs.recorder() != nullptr) return MallocAsyncRecorded(size, pool, s);
  return MallocAsyncLocked(size, pool, s);
}

bool Allocator::IsGraphMemory(const void* ptr) {
  void* base = nullptr;
  uint64_t size = 0;
  bool live = false;
  return ptr != nullptr && c_.graphs->FindGraphAllocation(ptr, &base, &size, &live);
}

absl::StatusOr<AllocInfo> Allocator::MallocAsyncRecorded(uint64_t size, uint64_t pool, uint64_t s) {
  Recorder& r = *c_.obs.recorder();
  const uint64_t start = r.Now();
  absl::StatusOr<AllocInfo> a = MallocAsyncLocked(size, pool, s);
  const Recorder::Times t{start, r.Now()};
  // Out of memory is written once the handling of it ends (AfterOutOfMemory).
  if (!a.ok()) return a;
  uint64_t ph = pool;
  if (ph == 0) {
    absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
    if (!rec.ok()) return a;
    ph = c_.devices.current_pool((*rec)->device);
  }
  const Block* b =
      a->ptr != nullptr ? c_.index.PoolBlockAt(reinterpret_cast<uintptr_t>(a->ptr)) : nullptr;
  if (b == nullptr && IsGraphMemory(a->ptr)) {
    r.GraphAllocated(size, s, ph, a->ptr, t);
    return a;
  }
  r.Allocated(size, s, ph, b, a->rule, t);
  return a;
}

std::optional<absl::StatusOr<MemPool::Allocation>> Allocator::AllocateCentral(
    const Target& target, uint64_t size, uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  MemPool& mp = *target.mp;
  if (mp.exportable() != nullptr) return std::nullopt;
  MutexLock pool_lock(&mp.central_mu());
  // Pinned, so not freed, but perhaps destroyed.
  if (c_.fast.epoch() != target.epoch) return std::nullopt;
  // Rules 0 and 1 ask no ordering question, so the pool's lock alone serves
  // them: a stream reusing its own frees of other sizes, or READY memory,
  // takes no runtime-wide lock. The later rules take the ordering core's
  // (the pool asks about other streams, and rule 5 inserts a wait).
  Oracle oracle(c_, target.t, /*lazy=*/true);
  absl::StatusOr<MemPool::Allocation> a = mp.Allocate(size, oracle);
  // Out of memory is written once its handling ends (AfterOutOfMemory).
  if (!a.ok()) return a;
  Recorder* r = c_.obs.recording();
  const uint64_t now = r != nullptr ? r->Now() : 0;
  Position at;
  if (oracle.ordered()) {
    at = c_.seq.AdvancePoint(target.t, OpKind::kAllocMarker);
  } else {
    SpinLockHolder lock(target.lock);
    at = c_.seq.ordering().AdvancePoint(target.t);
  }
  StoreRelaxed(a->block->alloc_pos, at);
  if (r != nullptr) r->Allocated(size, s, target.ph, a->block, a->rule, {now, now});
  // The stream's frees of this pool can now take the fast path.
  mp.EnsureCache(target.t, target.lock);
  return a;
}

Block* Allocator::Claim(uintptr_t addr, StreamIndex s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // A block's address is read only while its holder is known, so that no
  // other thread can be recycling it: found by its entry, the block may have
  // been freed and handed out at another address since.
  uint32_t h;
  if (s == kNoStream) {
    Block* b = c_.index.EntryAt(addr);
    if (b == nullptr || (h = HolderOf(*b)) == 0) return nullptr;
  } else {
    SpinLockHolder lock(&c_.seq.stream_lock(s));
    Block* b = c_.index.EntryAt(addr);
    if (b == nullptr || (h = HolderOf(*b)) == 0) return nullptr;
    if (h == s + 1) {
      if (b->addr() != addr) return nullptr;
      ClearHolder(*b);
      return b;
    }
  }
  // Held by another stream: under that stream's lock, if it still is.
  SpinLockHolder lock(&c_.seq.stream_lock(h - 1));
  Block* b = c_.index.EntryAt(addr);
  if (b == nullptr || HolderOf(*b) != h || b->addr() != addr) return nullptr;
  ClearHolder(*b);
  return b;
}

absl::Status Allocator::FreeAsync(void* ptr, uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (ptr != nullptr) {
    // The stream from this thread's memo when it is the last one allocated
    // on, else from the handle table.
    const Memo& m = memo_;
    const uint64_t epoch = c_.fast.epoch();
    StreamIndex t = kNoStream;
    SpinLock* lock = nullptr;
    if (m.owner == this && m.stream == s && m.target.epoch == epoch) {
      t = m.target.t;
      lock = m.target.lock;
    } else if (c_.fast.on()) {
      const StreamRec* rec = c_.streams.Find(s);
      if (rec != nullptr && Uncaptured(*rec)) {
        t = rec->index.load(std::memory_order_relaxed);
        lock = &c_.seq.ordering().stream_lock(t);
      }
    }
    Block* b = lock != nullptr ? Claim(reinterpret_cast<uintptr_t>(ptr), t) : nullptr;
    if (b != nullptr && LoadRelaxed(b->used_elsewhere)) {
      // Other streams' points are read under the ordering core's lock.
      MutexLock rt_lock(&c_.mu);
      Recorder* r = c_.obs.recorder();
      const uint64_t start = r != nullptr ? r->Now() : 0;
      FreeUsed(b, t, /*cacheable=*/true);
      if (r != nullptr) r->Freed(ptr, s, {start, r->Now()});
      return absl::OkStatus();
    }
    if (b != nullptr) {
      ClaimedFree f{b, t, 0};
      bool cached;
      {
        SpinLockHolder hold(lock);
        f.at = c_.seq.ordering().AdvancePoint(t);
        cached = b->chunk->pool->CacheFree(b, t, f.at);
      }
      // Written once the stream lock is let go (the recorder's lock blocks),
      // so a stop cannot count on passing that lock: the write holds the
      // recording instead.
      if (c_.obs.recording(std::memory_order_relaxed) != nullptr) {
        if (Recorder* r = c_.obs.BeginWrite()) {
          const uint64_t now = r->Now();
          r->Freed(ptr, s, {now, now});
          c_.obs.EndWrite();
        }
      }
      if (!cached) FinishFree(f);
      return absl::OkStatus();
    }
  }
  MutexLock lock(&c_.mu);
  if (c_.destroyed) return absl::NotFoundError("runtime destroyed");
  if (c_.obs.recorder() == nullptr) return FreeAsyncLocked(ptr, s);
  Recorder& r = *c_.obs.recorder();
  const uint64_t start = r.Now();
  absl::Status st = FreeAsyncLocked(ptr, s);
  if (st.ok() && ptr != nullptr) r.Freed(ptr, s, {start, r.Now()});
  return st;
}

void Allocator::FinishFree(const ClaimedFree& f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Ours already, at its point: only the central free is left, which no
  // check can refuse now (the runtime cannot be torn down while this call
  // is inside). The checker's records need the runtime's lock; without
  // them only the pool's is taken.
  if (!c_.fast.on()) {
    MutexLock lock(&c_.mu);
    FreeCentral(f);
    return;
  }
  FreeCentral(f);
}

void Allocator::FreeCentral(const ClaimedFree& f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  MemPool& pool = *f.block->chunk->pool;
  if (c_.obs.checker()) {
    MutexLock order_lock(&c_.seq.mu());
    c_.obs.checker()->OnFree(f.block->addr(), f.stream, f.at,
                             c_.seq.ordering().PointClock(f.stream), c_.seq.SimLastEnd(f.stream));
    c_.obs.CheckerAfterEvent();
  }
  // Through the cache (flushed first when full), or central where there is
  // none yet; later frees of this stream in this pool then take the fast path.
  MutexLock pool_lock(&pool.central_mu());
  if (!f.cacheable) {
    pool.FreeAsync(f.block, f.stream, f.at);
    return;
  }
  pool.FreeOverflow(f.block, f.stream, f.at);
  pool.EnsureCache(f.stream, &c_.seq.stream_lock(f.stream));
}

absl::Status Allocator::RecordUse(void* ptr, uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  const auto base = reinterpret_cast<uintptr_t>(ptr);
  Block* b = ptr != nullptr ? const_cast<Block*>(c_.index.PoolBlockAt(base)) : nullptr;
  if (b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        absl::Hex(base), " is not the start of a live stream-ordered allocation of this runtime"));
  }
  const StreamIndex idx = (*rec)->index;
  c_.index.DeclareUse(base, idx);
  StoreRelaxed(b->used_elsewhere, true);
  if (Recorder* r = c_.obs.recorder()) {
    const uint64_t now = r->Now();
    r->Used(ptr, s, {now, now});
  }
  return absl::OkStatus();
}

void Allocator::FreeUsed(Block* b, StreamIndex t, bool cacheable) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const uintptr_t base = b->addr();
  const AllocationIndex::Uses declared = c_.index.TakeUses(base);
  StoreRelaxed(b->used_elsewhere, false);
  absl::InlinedVector<MemPool::Use, 2> pending;
  Position f;
  {
    MutexLock order_lock(&c_.seq.mu());
    c_.seq.ChargeCallLocked();
    f = c_.seq.AdvancePoint(t, OpKind::kFreeMarker);
    VectorClock clock = c_.seq.ordering().PointClock(t);
    TimeNs end = c_.seq.SimLastEnd(t);
    for (const StreamIndex u : declared) {
      if (u == t) continue;
      const Position p = c_.seq.ordering().pos(u);
      // Nothing enqueued, already ordered before the free, or proven done.
      if (p == 0 || clock.Get(u) >= p || c_.seq.ordering().done(u) >= p) continue;
      pending.emplace_back(u, p);
    }
    if (c_.obs.checker()) {
      for (const MemPool::Use& u : pending) {
        clock.Join(c_.seq.ordering().clock(u.first));
        end = std::max(end, c_.seq.SimLastEnd(u.first));
      }
      c_.obs.checker()->OnFree(base, t, f, clock, end, pending);
      c_.obs.CheckerAfterEvent();
    }
  }
  MemPool& pool = *b->chunk->pool;
  MutexLock pool_lock(&pool.central_mu());
  if (pending.empty() && !cacheable) {
    pool.FreeAsync(b, t, f);
  } else if (pending.empty()) {
    pool.FreeOverflow(b, t, f);
    pool.EnsureCache(t, &c_.seq.stream_lock(t));
  } else {
    pool.FreeDeferred(b, t, f, pending);
  }
}

void Allocator::RecordPoolAlloc(uint64_t pool_handle, const PoolRec& rec, Block* b) {
  if (c_.index.SetEntry(b->addr(), b)) return;
  // Outside the page map's range (or no memory for a node): the hash map.
  AllocRec r;
  r.pool = rec.mem();
  r.pool_handle = pool_handle;
  r.block = b;
  r.device = rec.mem()->props().device;
  r.requested = b->requested;
  if (const ExportableMemory* e = rec.exportable()) r.memfd = e->memfd;
  c_.index.Add(b->addr(), r);
}

absl::StatusOr<AllocInfo> Allocator::MallocAsyncLocked(uint64_t size, uint64_t pool, uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  const uint64_t pool_handle = pool != 0 ? pool : c_.devices.current_pool((*rec)->device);
  absl::StatusOr<PoolRec*> prec = c_.pools.Find(pool_handle);
  if (!prec.ok()) return prec.status();
  if ((*prec)->imported() != nullptr) {
    return absl::InvalidArgumentError("an imported pool cannot allocate (CUDA F.11.5)");
  }
  if (size == 0) return AllocInfo{};
  MemPool& mp = *(*prec)->mem();
  const StreamIndex t = (*rec)->index;
  if (absl::Status st = c_.CheckLegacyOp(**rec); !st.ok()) return st;
  if (c_.captures.Of(t) != nullptr) {
    // Captured: an allocation node of graph memory on the pool's device.
    absl::StatusOr<void*> p = c_.graphs->CaptureMalloc(t, size, mp.props(), {});
    if (!p.ok()) return p.status();
    return AllocInfo{*p, ReuseRule::kFresh};
  }
  // The pool judges safety against the clock T's next op would have (on the
  // legacy stream that includes every blocking stream); the allocation's
  // point is taken only once it succeeded, so a failure leaves the stream as
  // it was.
  Oracle oracle(c_, t);
  MutexLock pool_lock(&mp.central_mu());
  MutexLock order_lock(&c_.seq.mu());
  absl::StatusOr<MemPool::Allocation> a = mp.Allocate(size, oracle);
  if (!a.ok()) return a.status();
  c_.seq.ChargeCallLocked();
  const Position at = c_.seq.AdvancePoint(t, OpKind::kAllocMarker);
  StoreRelaxed(a->block->alloc_pos, at);
  if (c_.obs.checker()) {
    c_.obs.checker()->OnAlloc(a->block->addr(), a->block->size(), t, at, c_.seq.SimAllocReady(t),
                              &oracle, (*prec)->attrs.access);
    c_.obs.CheckerAfterEvent();
  }
  SetHolder(*a->block, t);
  RecordPoolAlloc(pool_handle, **prec, a->block);
  // The stream's frees of this pool can now take the fast path.
  mp.EnsureCache(t, &c_.seq.stream_lock(t));
  return AllocInfo{reinterpret_cast<void*>(a->block->addr()), a->rule};
}

absl::Status Allocator::FreeAsyncLocked(void* ptr, uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (ptr == nullptr) return absl::OkStatus();
  const StreamIndex idx = (*rec)->index;
  if (absl::Status st = c_.CheckLegacyOp(**rec); !st.ok()) return st;
  if (c_.captures.Of(idx) != nullptr) return c_.graphs->CaptureFree(idx, ptr);
  if (Block* b = Claim(reinterpret_cast<uintptr_t>(ptr), idx)) {
    if (LoadRelaxed(b->used_elsewhere)) {
      FreeUsed(b, idx, /*cacheable=*/true);
      return absl::OkStatus();
    }
    Position f;
    {
      MutexLock order_lock(&c_.seq.mu());
      c_.seq.ChargeCallLocked();
      f = c_.seq.AdvancePoint(idx, OpKind::kFreeMarker);
    }
    FreeCentral(ClaimedFree{b, idx, f});
    return absl::OkStatus();
  }
  if (std::optional<int> device = direct_.DeviceOf(reinterpret_cast<uintptr_t>(ptr))) {
    if (*device < 0) {
      return absl::InvalidArgumentError("pinned host memory is freed with spFreeHost");
    }
    MutexLock order_lock(&c_.seq.mu());
    c_.seq.ChargeCallLocked();
    // Malloc memory goes back to the upstream when the free executes in
    // stream order, not before: earlier work on the stream may still use it.
    DirectMemory::Allocation a = *direct_.Take(reinterpret_cast<uintptr_t>(ptr));
    OpDesc marker;
    marker.kind = OpKind::kFreeMarker;
    if (c_.seq.threads() != nullptr) {
      // Runs on a worker thread, outside any API call. (An adapter's effects
      // run when an API call, holding the lock, observes the free.)
      marker.effect = [mu = &c_.mu, a]() {
        MutexLock lock(mu);
        DirectMemory::Unmap(a);
      };
    } else {
      // Runs inside an API call that already holds the lock.
      marker.effect = [a]() { DirectMemory::Unmap(a); };
    }
    const Position f = c_.seq.EnqueueOp(idx, std::move(marker));
    if (c_.obs.checker()) {
      c_.obs.checker()->OnFree(reinterpret_cast<uintptr_t>(ptr), idx, f,
                               c_.seq.ordering().clock(idx), c_.seq.SimLastEnd(idx));
      c_.obs.CheckerAfterEvent();
    }
    return absl::OkStatus();
  }
  if (absl::Status st = c_.graphs->FreeOutside(ptr, idx); !absl::IsNotFound(st)) return st;
  absl::StatusOr<AllocRec> found = TakeLiveAlloc(ptr);
  if (!found.ok()) return found.status();
  if (found->imported != nullptr) {
    // The importer's free ends its own use only: the exporter's allocation
    // lives on. The mapping stays until the free is known complete.
    std::shared_ptr<ImportedPool> imported = std::move(found->imported);
    const auto base = reinterpret_cast<uintptr_t>(ptr);
    Position f;
    {
      MutexLock order_lock(&c_.seq.mu());
      c_.seq.ChargeCallLocked();
      f = c_.seq.AdvancePoint(idx, OpKind::kFreeMarker);
      if (c_.obs.checker()) {
        c_.obs.checker()->OnFree(base, idx, f, c_.seq.ordering().PointClock(idx),
                                 c_.seq.SimLastEnd(idx));
        c_.obs.CheckerAfterEvent();
      }
    }
    imported->FreeAsync(base, idx, f);
    return absl::OkStatus();
  }
  // A pool block the page map could not hold.
  Block* block = found->block;
  ClearHolder(*block);
  if (LoadRelaxed(block->used_elsewhere)) {
    FreeUsed(block, idx, /*cacheable=*/false);
    return absl::OkStatus();
  }
  Position f;
  {
    MutexLock order_lock(&c_.seq.mu());
    c_.seq.ChargeCallLocked();
    f = c_.seq.AdvancePoint(idx, OpKind::kFreeMarker);
  }
  FreeCentral(ClaimedFree{block, idx, f, /*cacheable=*/false});
  return absl::OkStatus();
}

absl::StatusOr<void*> Allocator::Malloc(uint64_t size, int device) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  if (absl::Status st = c_.captures.CheckUnsafeCall(); !st.ok()) return st;
  return AllocateDirect(size, device);
}

absl::StatusOr<void*> Allocator::MallocHost(uint64_t size) { return AllocateDirect(size, -1); }

absl::StatusOr<void*> Allocator::AllocateDirect(uint64_t size, int device) {
  if (size == 0) return nullptr;
  const bool host = device < 0;
  PhysicalMemory& host_memory = c_.pinned_memory ? *c_.pinned_memory : *host_upstream_;
  absl::StatusOr<void*> p =
      direct_.Allocate(size, device, host ? host_memory : c_.devices.Memory(device),
                       host ? c_.devices.host_budget() : *c_.devices[device].budget);
  if (!p.ok()) return p.status();
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  // No access rights: as in CUDA, every device may touch either kind.
  if (c_.obs.checker()) {
    c_.obs.checker()->OnAlloc(reinterpret_cast<uintptr_t>(*p), size, kNoStream, 0,
                              c_.seq.executor()->Now(), nullptr);
  }
  return *p;
}

absl::Status Allocator::FreeHost(void* ptr) {
  if (ptr == nullptr) return absl::OkStatus();
  const auto base = reinterpret_cast<uintptr_t>(ptr);
  uintptr_t found_base = 0;
  const DirectMemory::Allocation* a = direct_.Containing(base, &found_base);
  if (a == nullptr || found_base != base || a->device >= 0) {
    return absl::InvalidArgumentError(
        "pointer is not live pinned host memory of this runtime (double free or foreign "
        "pointer)");
  }
  EndRegistrationsIn(base, a->requested);
  NoteFreeNow(ptr);
  DirectMemory::Unmap(*direct_.Take(reinterpret_cast<uintptr_t>(ptr)));
  return absl::OkStatus();
}

namespace {

absl::Status NotRegistered(const void* ptr, const char* what) {
  absl::Status st = absl::NotFoundError(absl::StrFormat("%p %s registered host memory", ptr, what));
  st.SetPayload(kCErrorPayload,
                absl::Cord(absl::StrCat(static_cast<int>(spErrorHostMemoryNotRegistered))));
  return st;
}

// The registered range sharing a byte with [base, base + size), if any.
RegisteredRanges::const_iterator FirstOverlap(const RegisteredRanges& ranges, uintptr_t base,
                                              uint64_t size) {
  auto it = ranges.upper_bound(base);
  if (it != ranges.begin()) {
    auto prev = std::prev(it);
    if (base - prev->first < prev->second.size) return prev;
  }
  if (it != ranges.end() && it->first - base < size) return it;
  return ranges.end();
}

}  // namespace

absl::StatusOr<void*> Allocator::HostRegister(void* ptr, uint64_t size, unsigned flags) {
  const auto base = reinterpret_cast<uintptr_t>(ptr);
  if (ptr == nullptr || size == 0) {
    return absl::InvalidArgumentError("registering a NULL pointer or 0 bytes");
  }
  if (base > UINTPTR_MAX - size) {
    return absl::InvalidArgumentError("registered range wraps the address space");
  }
  constexpr unsigned kKnownFlags = spHostRegisterPortable | spHostRegisterMapped |
                                   spHostRegisterIoMemory | spHostRegisterReadOnly;
  if ((flags & ~kKnownFlags) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown host register flags %#x", flags));
  }
  // The runtime's own memory: only pinned host memory is the host's to
  // register. Device memory already has a device address.
  if (c_.process.registry().Intersects(base, size)) {
    uintptr_t owner = 0;
    const DirectMemory::Allocation* a = direct_.Containing(base, &owner);
    if (a == nullptr || a->device >= 0 || size > owner + a->requested - base) {
      return absl::InvalidArgumentError(
          "the range holds device or pool memory: only host memory the runtime does not "
          "manage, or part of one MallocHost allocation, may be registered");
    }
  }
  if (auto it = FirstOverlap(c_.host_ranges, base, size); it != c_.host_ranges.end()) {
    return absl::AlreadyExistsError(
        absl::StrFormat("[%p, +%u) shares bytes with the registered range [%#x, +%u)", ptr, size,
                        it->first, it->second.size));
  }
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  c_.host_ranges.emplace(base, RegisteredRange{size, (flags & spHostRegisterReadOnly) != 0});
  if (c_.obs.checker()) c_.obs.checker()->OnHostRegister(base, size);
  return ptr;
}

absl::Status Allocator::HostUnregister(void* ptr) {
  auto it = c_.host_ranges.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == c_.host_ranges.end()) return NotRegistered(ptr, "does not start");
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  c_.host_ranges.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<void*> Allocator::HostDevicePointer(const void* ptr) {
  if (FirstOverlap(c_.host_ranges, reinterpret_cast<uintptr_t>(ptr), 1) == c_.host_ranges.end()) {
    return NotRegistered(ptr, "is not");
  }
  // One address space: the device sees registered memory where the host does.
  return const_cast<void*>(ptr);
}

void Allocator::EndRegistrationsIn(uintptr_t base, uint64_t size) {
  MutexLock order_lock(&c_.seq.mu());
  for (auto it = FirstOverlap(c_.host_ranges, base, size);
       it != c_.host_ranges.end() && it->first < base + size;) {
    if (c_.obs.checker())
      c_.obs.checker()->OnFreeRegistered(base, size, it->first, it->second.size);
    it = c_.host_ranges.erase(it);
  }
  if (c_.obs.checker()) c_.obs.CheckerAfterEvent();
}

void Allocator::NoteFreeNow(const void* ptr) {
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  if (c_.obs.checker())
    c_.obs.checker()->OnFreeNow(reinterpret_cast<uintptr_t>(ptr), c_.seq.executor()->Now());
}

absl::StatusOr<DeviceMemInfo> Allocator::MemGetInfo(int device) {
  if (absl::Status st = c_.devices.Check(device); !st.ok()) return st;
  const DeviceBudget& budget = *c_.devices[device].budget;
  return DeviceMemInfo{budget.capacity() - budget.used(), budget.capacity()};
}

absl::Status Allocator::Free(void* ptr) {
  if (ptr == nullptr) return absl::OkStatus();
  if (absl::Status st = c_.captures.CheckUnsafeCall(); !st.ok()) return st;
  if (Block* b = Claim(reinterpret_cast<uintptr_t>(ptr), kNoStream)) {
    NoteFreeNow(ptr);
    // The caller promises every access completed, other streams' included.
    c_.index.DropUses(reinterpret_cast<uintptr_t>(ptr));
    MemPool& pool = *b->chunk->pool;
    MutexLock pool_lock(&pool.central_mu());
    pool.FreeNow(b);
    return absl::OkStatus();
  }
  if (std::optional<int> device = direct_.DeviceOf(reinterpret_cast<uintptr_t>(ptr))) {
    if (*device < 0) {
      return absl::InvalidArgumentError("pinned host memory is freed with spFreeHost");
    }
    NoteFreeNow(ptr);
    DirectMemory::Unmap(*direct_.Take(reinterpret_cast<uintptr_t>(ptr)));
    return absl::OkStatus();
  }
  if (absl::Status st = c_.graphs->FreeOutside(ptr, kNoStream); !absl::IsNotFound(st)) return st;
  absl::StatusOr<AllocRec> r = TakeLiveAlloc(ptr);
  if (!r.ok()) return r.status();
  NoteFreeNow(ptr);
  if (r->imported != nullptr) {
    r->imported->FreeNow(reinterpret_cast<uintptr_t>(ptr));
    c_.pools.ReapImported();
    return absl::OkStatus();
  }
  c_.index.DropUses(reinterpret_cast<uintptr_t>(ptr));
  ClearHolder(*r->block);
  MutexLock pool_lock(&r->pool->central_mu());
  r->pool->FreeNow(r->block);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LiveAllocation>> Allocator::LiveAllocations() {
  std::vector<std::pair<uint64_t, MemPool*>> pools;
  c_.pools.AnyMemPool([&](uint64_t h, MemPool& mp) {
    pools.emplace_back(h, &mp);
    return false;
  });
  std::sort(pools.begin(), pools.end());
  std::vector<LiveAllocation> out;
  std::vector<MemPool::BlockView> blocks;
  for (const auto& [h, mp] : pools) {
    {
      MutexLock pool_lock(&mp->central_mu());
      mp->LiveBlocks(&blocks);
    }
    for (const MemPool::BlockView& v : blocks) {
      LiveAllocation a;
      a.ptr = reinterpret_cast<void*>(v.addr);
      a.size = v.requested;
      a.block_size = v.size;
      if (v.stream != kNoStream) a.stream = StreamId{c_.StreamHandleOf(v.stream)};
      a.pool = PoolId{h};
      a.device = mp->props().alloc_type == AllocationType::kPinnedHost ? -1 : mp->props().device;
      a.seq = v.alloc_pos;
      out.push_back(a);
    }
  }
  std::vector<LiveAllocation> direct = LiveDirectAllocations();
  out.insert(out.end(), direct.begin(), direct.end());
  return out;
}

std::vector<LiveAllocation> Allocator::LiveDirectAllocations() const {
  std::vector<LiveAllocation> out;
  direct_.ForEach([&](uintptr_t base, const DirectMemory::Allocation& a) {
    LiveAllocation l;
    l.ptr = reinterpret_cast<void*>(base);
    l.size = a.requested;
    l.block_size = a.mapping.size;
    l.device = a.device;
    l.seq = a.seq;
    out.push_back(l);
  });
  return out;
}

absl::StatusOr<PointerAttributes> Allocator::GetPointerAttributes(const void* ptr) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  PointerAttributes out;
  uintptr_t direct_base;
  if (const DirectMemory::Allocation* a = direct_.Containing(addr, &direct_base)) {
    out.device = a->device;
    out.base = reinterpret_cast<void*>(direct_base);
    out.size = a->requested;
    return out;
  }
  // A live graph allocation: device memory of no pool, as CUDA reports it.
  {
    void* base = nullptr;
    uint64_t size = 0;
    bool live = false;
    int device = 0;
    if (c_.graphs->FindGraphAllocation(ptr, &base, &size, &live, &device) && live) {
      out.device = device;
      out.base = base;
      out.size = size;
      return out;
    }
  }
  // The start of an allocation (the common question) without walking blocks.
  if (const Block* b = c_.index.EntryAt(addr); b != nullptr && HolderOf(*b) != 0) {
    const MemPool& pool = *b->chunk->pool;
    out.device = pool.props().alloc_type == AllocationType::kPinnedHost ? -1 : pool.props().device;
    out.pool = PoolId{pool.owner_handle()};
    out.base = reinterpret_cast<void*>(addr);
    out.size = b->requested;
    return out;
  }
  if (const AllocRec* r = c_.index.Find(addr); r != nullptr && r->pool != nullptr) {
    const AllocationType type = r->pool->props().alloc_type;
    out.device = type == AllocationType::kPinnedHost ? -1 : r->pool->props().device;
    out.pool = PoolId{r->pool_handle};
    out.base = reinterpret_cast<void*>(addr);
    out.size = r->requested;
    return out;
  }
  auto lookup = [&](uint64_t h, MemPool& pool) -> bool {
    MutexLock pool_lock(&pool.central_mu());
    if (!pool.Owns(addr)) return false;
    const Block* b = pool.LiveBlockContaining(addr);
    // A block in a front cache is LIVE to the central index but freed.
    if (b == nullptr || HolderOf(*b) == 0) {
      return false;
    }
    out.device = pool.props().alloc_type == AllocationType::kPinnedHost ? -1 : pool.props().device;
    out.pool = PoolId{h};
    out.base = reinterpret_cast<void*>(b->addr());
    out.size = b->requested;
    return true;
  };
  if (c_.pools.AnyMemPool(lookup)) return out;
  const bool imported = c_.pools.AnyImported([&](uint64_t h, ImportedPool& pool) {
    const ImportedPool::Import* imp = pool.LiveContaining(addr);
    if (imp == nullptr) return false;
    out.device = pool.header().device;
    out.pool = PoolId{h};
    out.base = reinterpret_cast<void*>(imp->base);
    out.size = imp->requested;
    return true;
  });
  if (imported) return out;
  return absl::InvalidArgumentError("pointer is not inside a live allocation");
}

}  // namespace streampool::internal
