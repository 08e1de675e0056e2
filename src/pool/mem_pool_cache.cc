// MemPool: the central side of the front caches: overflow, flushes, the
// allowances and the watermark they settle (front_cache.h).
#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/pool/mem_pool.h"
#include "src/util/align.h"
#include "src/util/check.h"

namespace streampool::internal {
// ------------------------------------------------------------ front caches

void MemPool::FreeOverflow(Block* b, StreamIndex s, Position f) {
  // When the cache is full, what it holds goes central first (older frees
  // before this one, so s's central queue stays in free order), then this
  // free is cached when it fits, else central too.
  if (FrontCache* c = front_cache() ? CacheOf(s) : nullptr) {
    SpinLockHolder lock(&c->mu());
    bool cached = c->Push(b, f);
    if (!cached && !c->empty()) {
      FlushInto(*c);
      cached = c->Push(b, f);
    }
    if (cached) {
      c->AddRequested(-static_cast<int64_t>(b->requested));
      return;
    }
  }
  FreeAsync(b, s, f);
}

void MemPool::EnsureCache(StreamIndex s, SpinLock* stream_lock) { caches_.Ensure(s, stream_lock); }

void MemPool::FlushInto(FrontCache& c) {
  // Free order (PoolCaches::Drain): nothing central of this stream is newer.
  for (const FrontCache::Entry& e : caches_.Drain(c)) {
    Block* b = e.block;
    SP_CHECK(b->state == BlockState::kLive);
    Unpublish(b);
    // The free was counted when it was cached; only the index changes.
    used_ -= b->size();
    --live_blocks_;
    MakePending(b, c.stream(), e.f, next_free_seq_++);
  }
}

bool MemPool::FlushCache(StreamIndex s) {
  FrontCache* c = CacheOf(s);
  if (c == nullptr) return false;
  SpinLockHolder lock(&c->mu());
  if (c->empty()) return false;
  FlushInto(*c);
  return true;
}

bool MemPool::FlushCaches() {
  bool any = false;
  caches_.ForEach([&](FrontCache& c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    SpinLockHolder lock(&c.mu());
    if (c.empty()) return;
    FlushInto(c);
    any = true;
  });
  return any;
}

void MemPool::RetireCache(StreamIndex s) {
  FrontCache* c = CacheOf(s);
  if (c == nullptr) return;
  SpinLockHolder lock(&c->mu());
  if (!c->empty()) FlushInto(*c);
  caches_.TakeBackAllowance(*c);
}

void MemPool::set_front_cache(bool on) {
  caches_.set_on(on);
  if (!on) FlushCaches();
}

void MemPool::Reconcile(bool reset_high) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const uint64_t used = caches_.Revoke(used_);
  stats_.used_high = reset_high ? used : std::max(stats_.used_high, used);
}

}  // namespace streampool::internal
