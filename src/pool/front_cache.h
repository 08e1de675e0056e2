// FrontCache: one stream's recent frees in one pool, by size (docs/design.md,
// "Performance model"), the fast path in front of the pool's central index.
//
//   alloc on T:  T's cache has a block of exactly the rule size  -> pop it
//                (LIFO: T's most recent own free first)         [fast path]
//                else the pool's central ladder, rules 1-6       [slow path]
//   free on S:   S's cache has room                             -> push it
//                else the central index (coalescing)             [slow path]
//
// Stream order alone makes a pop safe: the block's free point is S's own and
// the allocation comes after it on S. No index, split, coalescing or ordering
// query is involved, and only this cache's lock (its stream's, uncontended
// unless the pool flushes it) is taken.
//
// A cached block is a PENDING(S, f) block in every statistic and in the
// safety invariant; the cache is only an index over such blocks. The central
// index sees it as LIVE (never merged, never handed out) until the pool
// flushes it there: on overflow (the free goes central instead), at every
// synchronize action, before any growth, at TrimTo, when the stream or the
// pool is destroyed and when the cache is switched off.
//
// Its lock is its stream's (the runtime's per-stream SpinLock, which also
// guards the stream's position): the fast path takes it once per call, the
// pool's central path takes it to flush or settle (central lock first).
//
// Used-bytes accounting without a shared counter. The pool's central count
// `used` keeps counting cached blocks, so the true UsedMemCurrent is
// used - Σ bytes (over the pool's caches). UsedMemHigh must still be exact,
// and a pop raises the true count; so a pop spends `allowance`, bytes the
// pool has granted this cache to hand out without passing the high watermark:
//     true used + Σ allowance <= used_high            (the pool's invariant)
// A push earns back what it frees; the pool revokes allowances (one cache's
// lock at a time: allowance - bytes is constant under pushes and pops, so the
// sum stays exact though the caches keep running) whenever a central
// allocation would break the invariant, and a pop without enough allowance
// goes the slow way, which settles the watermark exactly.
//
// Counters for readers without the lock. Statistics sum every cache of a
// pool; locking each in turn under the pool's lock is what a stream's owner
// would then wait for, so the cache publishes its byte count, its counters
// and its bins' sizes as relaxed atomics, written only by the lock holder
// (plain stores on the hot path, no read-modify-write) and read by anyone.
#ifndef STREAMPOOL_SRC_POOL_FRONT_CACHE_H_
#define STREAMPOOL_SRC_POOL_FRONT_CACHE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "src/pool/block.h"
#include "src/util/spin_lock.h"
#include "streampool/executor.h"

namespace streampool::internal {

// On cache lines of its own: the caches of one pool are made one after
// another for streams that run on different host threads, and each writes its
// bins and counters on every call.
class alignas(64) FrontCache {
 public:
  // Sizes held at once, blocks per size, and bytes in all. Eight sizes and
  // sixteen deep cover the steady state of a training step's same-stream
  // churn (a few tensor shapes, freed and re-made each iteration) while a
  // flush stays a few hundred block moves; 64 MiB keeps large blocks from
  // idling here when the central index could coalesce them.
  static constexpr int kSizes = 8;
  static constexpr int kDepth = 16;
  static constexpr uint64_t kMaxBytes = uint64_t{64} << 20;
  // Larger blocks always go central: where the bytes are large, best fit at
  // the lowest address and coalescing keep the pool's peak down (PyTorch's
  // caching allocator draws its small/large line at the same 1 MiB), and a
  // large tensor's allocation is rare enough that the central path's cost
  // does not show.
  static constexpr uint64_t kMaxBlock = uint64_t{1} << 20;

  struct Entry {
    Block* block;
    Position f;
  };

  // The caches of one pool that may hold allowance: a cache joins when a
  // push grants it some, and the pool takes the whole list when it revokes
  // (MemPool::Reconcile), so revoking costs the caches used since the last
  // time, not every stream the pool ever served. Lock-free: caches join
  // under their own stream's lock, which the pool does not hold.
  class GrantList {
   public:
    void Add(FrontCache* c) {
      FrontCache* head = head_.load(std::memory_order_relaxed);
      do {
        c->next_granted_ = head;
      } while (!head_.compare_exchange_weak(head, c, std::memory_order_release,
                                            std::memory_order_relaxed));
    }
    // Every cache added since the last call; follow next_granted().
    FrontCache* TakeAll() { return head_.exchange(nullptr, std::memory_order_acquire); }

   private:
    std::atomic<FrontCache*> head_{nullptr};
  };

  // `granted` may be null (a cache on its own, in tests): allowance is then
  // tracked but never listed.
  FrontCache(StreamIndex stream, SpinLock* lock, GrantList* granted = nullptr)
      : stream_(stream), mu_(*lock), granted_(granted) {}

  StreamIndex stream() const { return stream_; }
  SpinLock& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // The most recent block of exactly `size` bytes, spending its bytes of
  // allowance; null when there is none or the allowance is short.
  ABSL_ATTRIBUTE_ALWAYS_INLINE Block* Pop(uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Bin* bin = Find(size);
    if (bin == nullptr || bin->count == 0 || allowance_ < size) return nullptr;
    allowance_ -= size;
    bytes_ = bytes_ - size;
    allocs_ = allocs_ + 1;
    const uint32_t n = bin->count - 1;
    bin->count = n;
    return bin->entries[n].block;
  }
  // Pops the most recent block of `size` regardless of allowance (the pool's
  // slow path, which settles the watermark itself); null when there is none.
  Block* Take(uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Bin* bin = Find(size);
    if (bin == nullptr || bin->count == 0) return nullptr;
    bytes_ = bytes_ - size;
    allowance_ = allowance_ >= size ? allowance_ - size : 0;
    allocs_ = allocs_ + 1;
    const uint32_t n = bin->count - 1;
    bin->count = n;
    return bin->entries[n].block;
  }
  // Caches a LIVE block freed at (stream, f); false when full.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Push(Block* b, Position f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint64_t size = b->size();
    if (size > kMaxBlock || bytes_ + size > kMaxBytes) return false;
    Bin* bin = Find(size);
    if (bin == nullptr) {
      // A size not held yet takes an empty bin (its old size goes).
      for (Bin& other : bins_) {
        if (other.count == 0) {
          bin = &other;
          break;
        }
      }
      if (bin == nullptr) return false;
      bin->size = size;
      hint_ = static_cast<uint8_t>(bin - bins_);
    }
    const uint32_t n = bin->count;
    if (n == kDepth) return false;
    bin->entries[n] = Entry{b, f};
    bin->count = n + 1;
    bytes_ = bytes_ + size;
    allowance_ += size;
    frees_ = frees_ + 1;
    if (!listed_ && granted_ != nullptr) {
      listed_ = true;
      granted_->Add(this);
    }
    return true;
  }

  // Every cached entry, oldest first within a size; the cache is then empty.
  template <typename Fn>
  void Drain(Fn fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (Bin& bin : bins_) {
      const uint32_t n = bin.count;
      for (uint32_t i = 0; i < n; ++i) fn(bin.entries[i]);
      bin.count = 0;
    }
    bytes_ = 0;
  }
  template <typename Fn>
  void ForEach(Fn fn) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const Bin& bin : bins_) {
      const uint32_t n = bin.count;
      for (uint32_t i = 0; i < n; ++i) fn(bin.entries[i]);
    }
  }

  uint64_t bytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return bytes_; }
  uint64_t allowance() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return allowance_; }
  void set_allowance(uint64_t a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { allowance_ = a; }
  // Whether the cache is on its pool's GrantList (or was taken from it and
  // not yet revoked): a cache that is not has no allowance.
  bool listed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return listed_; }
  // Revokes the allowance of a cache taken from the GrantList; returns it.
  // Pushes after this list the cache again.
  uint64_t Revoke() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint64_t a = allowance_;
    allowance_ = 0;
    listed_ = false;
    return a;
  }
  // The next cache of a list TakeAll returned (stable until this cache is
  // revoked and granted again).
  FrontCache* next_granted() const { return next_granted_; }
  bool empty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return bytes_ == 0; }

  // Without the lock: each value was true at some moment, not necessarily
  // the same one (statistics).
  uint64_t published_bytes() const { return bytes_; }
  // What this cache's pops and pushes changed the pool's requested bytes by
  // (pops add the request, pushes take the freed block's away).
  int64_t published_requested() const { return requested_; }
  ABSL_ATTRIBUTE_ALWAYS_INLINE void AddRequested(int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    requested_ = requested_ + delta;
  }
  // Allocations served and frees taken here, since the cache was made.
  uint64_t published_allocs() const { return allocs_; }
  uint64_t published_frees() const { return frees_; }
  // The largest size with a block in it.
  uint64_t published_largest() const {
    uint64_t largest = 0;
    for (const Bin& bin : bins_) {
      if (bin.count != 0) largest = std::max<uint64_t>(largest, bin.size);
    }
    return largest;
  }

 private:
  // A value the lock holder writes and anyone may read: a relaxed atomic
  // that reads and assigns like the plain field it replaces (one writer, so
  // x = x + 1 is a load and a store, never a locked instruction).
  template <typename T>
  class Published {
   public:
    Published() = default;
    Published(T v) : v_(v) {}  // NOLINT: reads as the plain field it replaces
    operator T() const { return v_.load(std::memory_order_relaxed); }  // NOLINT
    Published& operator=(T v) {
      v_.store(v, std::memory_order_relaxed);
      return *this;
    }

   private:
    std::atomic<T> v_{};
  };

  struct Bin {
    // Kept when the bin empties, until another size takes it.
    Published<uint64_t> size = 0;
    Published<uint32_t> count = 0;
    Entry entries[kDepth];
  };

  // The bin of `size` (empty or not), or null. A size is in one bin at most,
  // so a steady same-size pair finds it at the hint, the bin last found,
  // without walking the others.
  Bin* Find(uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (bins_[hint_].size == size) return &bins_[hint_];
    for (Bin& bin : bins_) {
      if (bin.size == size) {
        hint_ = static_cast<uint8_t>(&bin - bins_);
        return &bin;
      }
    }
    return nullptr;
  }

  const StreamIndex stream_;
  SpinLock& mu_;
  GrantList* const granted_;
  bool listed_ ABSL_GUARDED_BY(mu_) = false;
  // Written by Add before the list's release; read after TakeAll's acquire.
  FrontCache* next_granted_ = nullptr;
  // Entries are the lock holder's; sizes and counts are published.
  Bin bins_[kSizes];
  Published<uint64_t> bytes_ = 0;
  Published<int64_t> requested_ = 0;
  uint64_t allowance_ ABSL_GUARDED_BY(mu_) = 0;
  Published<uint64_t> allocs_ = 0;
  Published<uint64_t> frees_ = 0;
  uint8_t hint_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_FRONT_CACHE_H_
