#include "src/runtime/allocator.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/check.h"

namespace streampool::internal {

using StreamRec = RuntimeCore::StreamRec;
using AllocRec = RuntimeCore::AllocRec;
using PoolRec = PoolTable::PoolRec;

namespace {

// Answers the pool's questions for one allocation on stream t, while its
// maker holds the ordering core's lock.
class Oracle final : public OrderOracle {
 public:
  Oracle(RuntimeCore& rt, StreamIndex t) : rt_(rt), t_(t) {}
  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return rt_.ordering.OrderedAfter(t_, s);
  }
  Position ObservedComplete(StreamIndex s) const override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return std::max(rt_.ordering.done(s), rt_.ExecutedThrough(s));
  }
  void InsertWait(StreamIndex s, Position f) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    OpDesc op;
    op.kind = OpKind::kInternalWait;
    op.wait_stream = s;
    op.wait_position = f;
    rt_.EnqueueOp(t_, std::move(op));
    if (f == rt_.ordering.pos(s)) {
      // The free is S's latest op, so S's current clock is the free's clock
      // and the wait can carry everything the free was ordered after.
      rt_.ordering.JoinInto(t_, rt_.ordering.clock(s));
    } else {
      rt_.ordering.OrderAfterPoint(t_, s, f);
    }
  }

 private:
  RuntimeCore& rt_;
  StreamIndex t_;
};

}  // namespace

absl::StatusOr<Allocator::AllocIterator> Allocator::LiveAlloc(const void* ptr) {
  auto it = c_.allocs.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == c_.allocs.end()) {
    return absl::InvalidArgumentError(
        "pointer is not a live allocation of this runtime (double free or foreign pointer)");
  }
  return it;
}

Allocator::Allocator(RuntimeCore& core)
    : c_(core),
      // Pinned host memory is the host's own, touchable whatever the devices' backing.
      host_upstream_(core.Registering(NewHostMemory())) {}

std::optional<Allocator::Target> Allocator::FindTarget(uint64_t size, uint64_t pool,
                                                       uint64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Lock-free reads throughout: the handle tables, the device's current pool
  // (atomics), and the ordering core's pos(T) (see Ordering's constructor).
  // (The entry point refused host callbacks before passing the call gate.)
  if (!c_.fast_path.load(std::memory_order_acquire) || size == 0) {
    return std::nullopt;
  }
  const StreamRec* rec = c_.streams.Find(s);
  if (rec == nullptr) return std::nullopt;
  const uint64_t ph =
      pool != 0 ? pool
                : c_.devices[rec->device.load(std::memory_order_relaxed)].current_pool.load(
                      std::memory_order_acquire);
  MemPool* mp = c_.pools.FindFast(ph);
  if (mp == nullptr) return std::nullopt;
  return Target{ph, mp, rec->index.load(std::memory_order_relaxed)};
}

void Allocator::Publish(uint64_t ph, Block* b) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (c_.page_map.Set(b->addr(), b)) return;
  // No memory for a page-map node: the hash map holds it instead. The block
  // is LIVE, so its pool, even if destroyed meanwhile, is draining, not freed.
  MutexLock lock(&c_.mu);
  if (absl::StatusOr<PoolRec*> prec = c_.pools.Find(ph); prec.ok()) {
    RecordPoolAlloc(ph, **prec, b);
  }
}

bool Allocator::TryMallocUnlocked(uint64_t size, uint64_t pool, uint64_t s, AllocInfo* out,
                                  absl::Status* error) {
  // One lookup for every try: a cache miss goes on to the pool's lock, then
  // to the pool's lock and the ordering core's.
  const std::optional<Target> target = FindTarget(size, pool, s);
  if (!target) return false;
  Block* b = nullptr;
  ReuseRule rule = ReuseRule::kSameStream;
  switch (FromCache(*target, size, &b)) {
    case CacheTry::kHit:
      break;
    case CacheTry::kGone:
      return false;
    case CacheTry::kPinned: {
      const bool served =
          FromOwn(*target, size, &b, &rule) || FromCentral(*target, size, &b, &rule, error);
      target->mp->Unpin();
      if (!served || b == nullptr) return served;  // not served, or served an error
      break;
    }
  }
  Publish(target->ph, b);
  *out = AllocInfo{reinterpret_cast<void*>(b->addr()), rule};
  return true;
}

Allocator::CacheTry Allocator::FromCache(const Target& target, uint64_t size,
                                         Block** b) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const auto [ph, mp, t] = target;
  // The stream's lock: its cache and its position, one atomic instruction.
  SpinLockHolder lock(&c_.ordering.stream_lock(t));
  // Still the pool's: a pool destroyed meanwhile is freed only once every
  // stream lock has been passed (PoolTable::Free).
  if (c_.pools.FindFast(ph) != mp) return CacheTry::kGone;
  *b = mp->CacheAllocate(t, size);
  if (*b == nullptr) {
    mp->Pin();
    return CacheTry::kPinned;
  }
  c_.ordering.AdvancePoint(t);
  return CacheTry::kHit;
}

bool Allocator::FromOwn(const Target& target, uint64_t size, Block** b,
                        ReuseRule* rule) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Rules 0 and 1 ask no ordering question, so the pool's lock alone serves
  // them: a stream reusing its own frees of other sizes, or READY memory,
  // takes no runtime-wide lock either.
  const auto [ph, mp, t] = target;
  MutexLock pool_lock(&mp->central_mu());
  // Still the pool's: pinned, so not freed, but perhaps destroyed.
  if (c_.pools.FindFast(ph) != mp) return false;
  std::optional<MemPool::Allocation> a = mp->AllocateOwn(size, t);
  if (!a) return false;
  *b = a->block;
  *rule = a->rule;
  {
    SpinLockHolder lock(&c_.ordering.stream_lock(t));
    c_.ordering.AdvancePoint(t);
  }
  mp->EnsureCache(t, &c_.ordering.stream_lock(t));
  return true;
}

bool Allocator::FromCentral(const Target& target, uint64_t size, Block** b, ReuseRule* rule,
                            absl::Status* error) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Every rule, growth included: the pool's lock and the ordering core's
  // (the pool asks about other streams, and rule 5 inserts a wait), not the
  // runtime's. An exportable pool's memfd is the runtime lock's (IPC reads
  // it), so its growth goes there.
  const auto [ph, mp, t] = target;
  if (mp->owner_data() != nullptr) return false;
  MutexLock pool_lock(&mp->central_mu());
  if (c_.pools.FindFast(ph) != mp) return false;
  MutexLock order_lock(&c_.order_mu);
  Oracle oracle(c_, t);
  absl::StatusOr<MemPool::Allocation> a = mp->Allocate(size, oracle);
  if (!a.ok()) {
    *error = a.status();
    return true;
  }
  *b = a->block;
  *rule = a->rule;
  c_.AdvancePoint(t, OpKind::kAllocMarker);
  mp->EnsureCache(t, &c_.ordering.stream_lock(t));
  return true;
}

bool Allocator::TryFreeClaimed(Block* b, StreamIndex idx, Position f) {
  // The checker's records need the runtime's lock; without it only the
  // pool's is taken.
  if (!c_.fast_path.load(std::memory_order_acquire)) return false;
  MemPool& pool = *static_cast<MemPool*>(b->chunk->pool);
  MutexLock pool_lock(&pool.central_mu());
  pool.FreeOverflow(b, idx, f);
  pool.EnsureCache(idx, &c_.stream_lock(idx));
  return true;
}

bool Allocator::TryFreeFast(void* ptr, uint64_t s, Block** claimed, StreamIndex* idx,
                            Position* f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  *claimed = nullptr;
  if (!c_.fast_path.load(std::memory_order_acquire) || ptr == nullptr) {
    return false;
  }
  const StreamRec* rec = c_.streams.Find(s);
  if (rec == nullptr) return false;
  // One exchange decides which of two racing frees of a pointer owns it.
  Block* b = c_.page_map.Claim(reinterpret_cast<uintptr_t>(ptr));
  if (b == nullptr) return false;
  *claimed = b;
  *idx = rec->index.load(std::memory_order_relaxed);
  SpinLockHolder lock(&c_.ordering.stream_lock(*idx));
  *f = c_.ordering.AdvancePoint(*idx);
  return static_cast<MemPool*>(b->chunk->pool)->CacheFree(b, *idx, *f);
}

void Allocator::RecordPoolAlloc(uint64_t pool_handle, const PoolRec& rec, Block* b) {
  if (c_.page_map.Set(b->addr(), b)) return;
  // Outside the page map's range (or no memory for a node): the hash map.
  AllocRec r;
  r.pool = rec.mem();
  r.pool_handle = pool_handle;
  r.block = b;
  r.device = rec.mem()->props().device;
  r.requested = b->requested;
  r.memfd = rec.memfd();
  c_.allocs.emplace(b->addr(), r);
}

void Allocator::FreeClaimed(Block* b, StreamIndex idx, Position f) {
  MemPool& pool = *static_cast<MemPool*>(b->chunk->pool);
  if (c_.checker) {
    MutexLock order_lock(&c_.order_mu);
    c_.checker->OnFree(b->addr(), idx, f, c_.ordering.PointClock(idx), c_.SimLastEnd(idx));
    c_.CheckerAfterEvent();
  }
  // Through the cache (flushed first when full), or central where there is
  // none yet; later frees of this stream in this pool then take the fast path.
  MutexLock pool_lock(&pool.central_mu());
  pool.FreeOverflow(b, idx, f);
  pool.EnsureCache(idx, &c_.stream_lock(idx));
}

absl::StatusOr<AllocInfo> Allocator::MallocAsync(uint64_t size, uint64_t pool, uint64_t s) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  const uint64_t pool_handle =
      pool != 0 ? pool : c_.devices[(*rec)->device].current_pool.load(std::memory_order_relaxed);
  absl::StatusOr<PoolRec*> prec = c_.pools.Find(pool_handle);
  if (!prec.ok()) return prec.status();
  if ((*prec)->imported() != nullptr) {
    return absl::InvalidArgumentError("an imported pool cannot allocate (CUDA F.11.5)");
  }
  if (size == 0) return AllocInfo{};
  MemPool& mp = *(*prec)->mem();
  const StreamIndex t = (*rec)->index;
  // The pool judges safety against the clock T's next op would have (on the
  // legacy stream that includes every blocking stream); the allocation's
  // point is taken only once it succeeded, so a failure leaves the stream as
  // it was.
  Oracle oracle(c_, t);
  MutexLock pool_lock(&mp.central_mu());
  MutexLock order_lock(&c_.order_mu);
  absl::StatusOr<MemPool::Allocation> a = mp.Allocate(size, oracle);
  if (!a.ok()) return a.status();
  c_.ChargeCallLocked();
  const Position at = c_.AdvancePoint(t, OpKind::kAllocMarker);
  if (c_.checker) {
    c_.checker->OnAlloc(a->block->addr(), a->block->size(), t, at, c_.SimAllocReady(t), &oracle,
                        (*prec)->attrs.access);
    c_.CheckerAfterEvent();
  }
  RecordPoolAlloc(pool_handle, **prec, a->block);
  // The stream's frees of this pool can now take the fast path.
  mp.EnsureCache(t, &c_.stream_lock(t));
  return AllocInfo{reinterpret_cast<void*>(a->block->addr()), a->rule};
}

absl::Status Allocator::FreeAsync(void* ptr, uint64_t s) {
  // RuntimeImpl::FreeAsync tried the paths without the runtime's lock first.
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (ptr == nullptr) return absl::OkStatus();
  const StreamIndex idx = (*rec)->index;
  if (Block* b = c_.page_map.Claim(reinterpret_cast<uintptr_t>(ptr))) {
    Position f;
    {
      MutexLock order_lock(&c_.order_mu);
      c_.ChargeCallLocked();
      f = c_.AdvancePoint(idx, OpKind::kFreeMarker);
    }
    FreeClaimed(b, idx, f);
    return absl::OkStatus();
  }
  if (std::optional<int> device = direct_.DeviceOf(reinterpret_cast<uintptr_t>(ptr))) {
    if (*device < 0) {
      return absl::InvalidArgumentError("pinned host memory is freed with spFreeHost");
    }
    MutexLock order_lock(&c_.order_mu);
    c_.ChargeCallLocked();
    // Malloc memory goes back to the upstream when the free executes in
    // stream order, not before: earlier work on the stream may still use it.
    DirectMemory::Allocation a = *direct_.Take(reinterpret_cast<uintptr_t>(ptr));
    OpDesc marker;
    marker.kind = OpKind::kFreeMarker;
    if (c_.executor->blocks_host()) {
      // Runs on a worker thread, outside any API call.
      marker.effect = [mu = &c_.mu, a]() {
        MutexLock lock(mu);
        DirectMemory::Unmap(a);
      };
    } else {
      // Runs inside an API call that already holds the lock.
      marker.effect = [a]() { DirectMemory::Unmap(a); };
    }
    const Position f = c_.EnqueueOp(idx, std::move(marker));
    if (c_.checker) {
      c_.checker->OnFree(reinterpret_cast<uintptr_t>(ptr), idx, f, c_.ordering.clock(idx),
                         c_.SimLastEnd(idx));
      c_.CheckerAfterEvent();
    }
    return absl::OkStatus();
  }
  auto found = LiveAlloc(ptr);
  if (!found.ok()) return found.status();
  auto it = *found;
  if (it->second.imported != nullptr) {
    // The importer's free ends its own use only: the exporter's allocation
    // lives on. The mapping stays until the free is known complete.
    std::shared_ptr<ImportedPool> imported = std::move(it->second.imported);
    const uintptr_t base = it->first;
    c_.allocs.erase(it);
    Position f;
    {
      MutexLock order_lock(&c_.order_mu);
      c_.ChargeCallLocked();
      f = c_.AdvancePoint(idx, OpKind::kFreeMarker);
      if (c_.checker) {
        c_.checker->OnFree(base, idx, f, c_.ordering.PointClock(idx), c_.SimLastEnd(idx));
        c_.CheckerAfterEvent();
      }
    }
    imported->FreeAsync(base, idx, f);
    return absl::OkStatus();
  }
  // A pool block the page map could not hold.
  Block* block = it->second.block;
  c_.allocs.erase(it);
  Position f;
  {
    MutexLock order_lock(&c_.order_mu);
    c_.ChargeCallLocked();
    f = c_.AdvancePoint(idx, OpKind::kFreeMarker);
  }
  FreeClaimed(block, idx, f);
  return absl::OkStatus();
}

absl::StatusOr<void*> Allocator::Malloc(uint64_t size, int device) {
  if (absl::Status st = c_.CheckDevice(device); !st.ok()) return st;
  return AllocateDirect(size, device);
}

absl::StatusOr<void*> Allocator::MallocHost(uint64_t size) { return AllocateDirect(size, -1); }

absl::StatusOr<void*> Allocator::AllocateDirect(uint64_t size, int device) {
  if (size == 0) return nullptr;
  const bool host = device < 0;
  absl::StatusOr<void*> p = direct_.Allocate(size, device, host ? *host_upstream_ : *c_.upstream,
                                             host ? c_.host_budget : *c_.devices[device].budget);
  if (!p.ok()) return p.status();
  MutexLock order_lock(&c_.order_mu);
  c_.ChargeCallLocked();
  // No access rights: as in CUDA, every device may touch either kind.
  if (c_.checker) {
    c_.checker->OnAlloc(reinterpret_cast<uintptr_t>(*p), size, kNoStream, 0, c_.executor->Now(),
                        nullptr);
  }
  return *p;
}

absl::Status Allocator::FreeHost(void* ptr) {
  if (ptr == nullptr) return absl::OkStatus();
  const std::optional<int> device = direct_.DeviceOf(reinterpret_cast<uintptr_t>(ptr));
  if (!device || *device >= 0) {
    return absl::InvalidArgumentError(
        "pointer is not live pinned host memory of this runtime (double free or foreign "
        "pointer)");
  }
  NoteFreeNow(ptr);
  DirectMemory::Unmap(*direct_.Take(reinterpret_cast<uintptr_t>(ptr)));
  return absl::OkStatus();
}

void Allocator::NoteFreeNow(const void* ptr) {
  MutexLock order_lock(&c_.order_mu);
  c_.ChargeCallLocked();
  if (c_.checker) c_.checker->OnFreeNow(reinterpret_cast<uintptr_t>(ptr), c_.executor->Now());
}

absl::StatusOr<DeviceMemInfo> Allocator::MemGetInfo(int device) {
  if (absl::Status st = c_.CheckDevice(device); !st.ok()) return st;
  const DeviceBudget& budget = *c_.devices[device].budget;
  return DeviceMemInfo{budget.capacity() - budget.used(), budget.capacity()};
}

absl::Status Allocator::Free(void* ptr) {
  if (ptr == nullptr) return absl::OkStatus();
  if (Block* b = c_.page_map.Claim(reinterpret_cast<uintptr_t>(ptr))) {
    NoteFreeNow(ptr);
    MemPool& pool = *static_cast<MemPool*>(b->chunk->pool);
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
  auto found = LiveAlloc(ptr);
  if (!found.ok()) return found.status();
  auto it = *found;
  AllocRec r = it->second;
  c_.allocs.erase(it);
  NoteFreeNow(ptr);
  if (r.imported != nullptr) {
    r.imported->FreeNow(reinterpret_cast<uintptr_t>(ptr));
    c_.pools.ReapImported();
    return absl::OkStatus();
  }
  MutexLock pool_lock(&r.pool->central_mu());
  r.pool->FreeNow(r.block);
  return absl::OkStatus();
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
  // The start of an allocation (the common question) without walking blocks.
  if (const Block* b = c_.page_map.Get(addr)) {
    const MemPool& pool = *static_cast<const MemPool*>(b->chunk->pool);
    out.device = pool.props().alloc_type == AllocationType::kPinnedHost ? -1 : pool.props().device;
    out.pool = PoolId{pool.owner_handle()};
    out.base = reinterpret_cast<void*>(addr);
    out.size = b->requested;
    return out;
  }
  if (auto it = c_.allocs.find(addr); it != c_.allocs.end() && it->second.pool != nullptr) {
    const AllocRec& r = it->second;
    const AllocationType type = r.pool->props().alloc_type;
    out.device = type == AllocationType::kPinnedHost ? -1 : r.pool->props().device;
    out.pool = PoolId{r.pool_handle};
    out.base = reinterpret_cast<void*>(addr);
    out.size = r.requested;
    return out;
  }
  auto lookup = [&](uint64_t h, MemPool& pool) -> bool {
    MutexLock pool_lock(&pool.central_mu());
    if (!pool.Owns(addr)) return false;
    const Block* b = pool.LiveBlockContaining(addr);
    // A block in a front cache is LIVE to the central index but freed.
    if (b == nullptr || (c_.page_map.Get(b->addr()) != b && !c_.allocs.contains(b->addr()))) {
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
