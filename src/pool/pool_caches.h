// PoolCaches: a pool's front caches (front_cache.h), one per stream slot, and
// the allowances that let them hand out blocks without the pool's lock while
// UsedMemHigh stays exact. The pool's central path owns this table (its
// lock); the fast path only reads it (Of) and uses one cache under its
// stream's lock.
//
// Invariants, with `used` the pool's central count of LIVE bytes (cached
// blocks included) and `used_high` its UsedMemHigh:
//   slack == Σ over caches of (allowance - bytes)   (constant under pushes
//                                                     and pops, so exact
//                                                     without the locks)
//   true used + Σ allowance == used + slack <= used_high
//   a cache's bytes == Σ sizes of the blocks it holds, all LIVE in its pool
//   a cache with allowance is on the GrantList (or taken and not revoked)
#ifndef STREAMPOOL_SRC_POOL_POOL_CACHES_H_
#define STREAMPOOL_SRC_POOL_POOL_CACHES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/types/span.h"
#include "src/pool/block.h"
#include "src/pool/front_cache.h"
#include "src/util/spin_lock.h"

namespace streampool::internal {

class MemPool;

class PoolCaches {
 public:
  // A two-level table by stream slot that the fast path reads without a
  // lock (slots never move; a cache lives as long as the pool).
  static constexpr size_t kChunk = 256;
  static constexpr size_t kChunks = 256;

  // The pool's switch: off, nothing is cached and every cache is empty.
  bool on() const { return on_.load(std::memory_order_relaxed); }
  void set_on(bool on) { on_.store(on, std::memory_order_relaxed); }

  // Stream s's cache, or null while it has none. Lock-free.
  FrontCache* Of(StreamIndex s) const {
    if (s >= kChunk * kChunks) return nullptr;
    const std::atomic<FrontCache*>* chunk = dir_[s / kChunk].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : chunk[s % kChunk].load(std::memory_order_acquire);
  }
  // Makes s's cache, guarded by s's stream lock (the pool's lock held).
  void Ensure(StreamIndex s, SpinLock* stream_lock);

  // fn(FrontCache&) for every cache, in the order they were made.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const std::unique_ptr<FrontCache>& c : caches_) fn(*c);
  }

  // Empties c (its lock held) and returns its entries in free order, valid
  // until the next call; their bytes become slack (the pool counts them out
  // of used as it takes them in).
  absl::Span<const FrontCache::Entry> Drain(FrontCache& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu());
  // Rule 0: c's most recent block of `need` bytes whatever its allowance,
  // now LIVE on t for a request of `size`; null when it holds none.
  Block* Take(FrontCache& c, StreamIndex t, uint64_t need, uint64_t size);
  // c's stream is gone: its allowance comes back (c's lock held).
  void TakeBackAllowance(FrontCache& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu());
  // Revokes every cache's allowance, one cache's lock at a time, and returns
  // used + slack: the true used plus what caches took back meanwhile, so a
  // watermark set from it never undercounts.
  uint64_t Revoke(uint64_t used);
  // Whether used bytes of `used` would break the watermark invariant.
  bool Exceeds(uint64_t used, uint64_t used_high) const {
    return static_cast<int64_t>(used) + slack_ > static_cast<int64_t>(used_high);
  }
  // Non-empty caches drained so far.
  uint64_t flushes() const { return flushes_; }

  // What the caches publish, without their locks (front_cache.h).
  uint64_t PublishedBytes() const;
  int64_t PublishedRequested() const;

  // The invariants above, for pool's caches (each cache's lock in turn).
  bool CheckInvariants(const MemPool* pool, uint64_t used, uint64_t used_high) const;

 private:
  std::atomic<bool> on_{true};
  std::atomic<std::atomic<FrontCache*>*> dir_[kChunks] = {};
  std::vector<std::unique_ptr<std::atomic<FrontCache*>[]>> chunks_;
  std::vector<std::unique_ptr<FrontCache>> caches_;
  // The caches that may hold allowance (front_cache.h).
  FrontCache::GrantList granted_;
  std::vector<FrontCache::Entry> scratch_;
  int64_t slack_ = 0;
  uint64_t flushes_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_POOL_CACHES_H_
