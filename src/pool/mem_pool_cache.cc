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

void MemPool::EnsureCache(StreamIndex s, SpinLock* stream_lock) {
  if (s >= kCacheChunk * kCacheChunks || CacheOf(s) != nullptr) return;
  std::atomic<FrontCache*>* chunk = cache_dir_[s / kCacheChunk].load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    cache_chunks_.push_back(std::make_unique<std::atomic<FrontCache*>[]>(kCacheChunk));
    chunk = cache_chunks_.back().get();
    cache_dir_[s / kCacheChunk].store(chunk, std::memory_order_release);
  }
  caches_.push_back(std::make_unique<FrontCache>(s, stream_lock, &granted_));
  chunk[s % kCacheChunk].store(caches_.back().get(), std::memory_order_release);
}

void MemPool::FlushInto(FrontCache& c) {
  // In free order: a stream's queue of pending frees ascends in f (and
  // nothing central of this stream is newer, see FlushCacheFor), and the
  // frees enter host order (rule 5's tie) oldest first.
  ++cache_flushes_;
  flush_scratch_.clear();
  c.Drain([this](const FrontCache::Entry& e) { flush_scratch_.push_back(e); });
  std::sort(flush_scratch_.begin(), flush_scratch_.end(),
            [](const FrontCache::Entry& a, const FrontCache::Entry& b) { return a.f < b.f; });
  for (const FrontCache::Entry& e : flush_scratch_) {
    Block* b = e.block;
    SP_CHECK(b->state == BlockState::kLive);
    Unpublish(b);
    // The free was counted when it was cached; only the index changes.
    used_ -= b->size();
    --live_blocks_;
    cache_slack_ += static_cast<int64_t>(b->size());
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
  for (const std::unique_ptr<FrontCache>& c : caches_) {
    SpinLockHolder lock(&c->mu());
    if (c->empty()) continue;
    FlushInto(*c);
    any = true;
  }
  return any;
}

void MemPool::RetireCache(StreamIndex s) {
  FrontCache* c = CacheOf(s);
  if (c == nullptr) return;
  SpinLockHolder lock(&c->mu());
  if (!c->empty()) FlushInto(*c);
  cache_slack_ -= static_cast<int64_t>(c->allowance());
  c->set_allowance(0);
}

void MemPool::set_front_cache(bool on) {
  front_cache_.store(on, std::memory_order_relaxed);
  if (!on) FlushCaches();
}

void MemPool::Reconcile(bool reset_high) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Only caches pushed to since their last revocation can hold allowance
  // (FrontCache::GrantList), and cache_slack_ = Σ (allowance - bytes) holds
  // throughout, so revoking those alone, one cache's lock at a time (never
  // two: lock_rank.h), makes used_ + cache_slack_ the true used plus what
  // caches took back meanwhile: the watermark never undercounts.
  for (FrontCache* c = granted_.TakeAll(); c != nullptr;) {
    FrontCache* next = c->next_granted();
    SpinLockHolder lock(&c->mu());
    cache_slack_ -= static_cast<int64_t>(c->Revoke());
    c = next;
  }
  const uint64_t used = static_cast<uint64_t>(static_cast<int64_t>(used_) + cache_slack_);
  stats_.used_high = reset_high ? used : std::max(stats_.used_high, used);
}

}  // namespace streampool::internal
