#include "src/pool/pool_caches.h"

#include <algorithm>

namespace streampool::internal {

void PoolCaches::Ensure(StreamIndex s, SpinLock* stream_lock) {
  if (s >= kChunk * kChunks || Of(s) != nullptr) return;
  std::atomic<FrontCache*>* chunk = dir_[s / kChunk].load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    chunks_.push_back(std::make_unique<std::atomic<FrontCache*>[]>(kChunk));
    chunk = chunks_.back().get();
    dir_[s / kChunk].store(chunk, std::memory_order_release);
  }
  caches_.push_back(std::make_unique<FrontCache>(s, stream_lock, &granted_));
  chunk[s % kChunk].store(caches_.back().get(), std::memory_order_release);
}

absl::Span<const FrontCache::Entry> PoolCaches::Drain(FrontCache& c) {
  // In free order: a stream's queue of pending frees ascends in f, and the
  // frees enter host order (rule 5's tie) oldest first.
  ++flushes_;
  scratch_.clear();
  c.Drain([this](const FrontCache::Entry& e) {
    scratch_.push_back(e);
    slack_ += static_cast<int64_t>(e.block->size());
  });
  std::sort(scratch_.begin(), scratch_.end(),
            [](const FrontCache::Entry& a, const FrontCache::Entry& b) { return a.f < b.f; });
  return scratch_;
}

Block* PoolCaches::Take(FrontCache& c, StreamIndex t, uint64_t need, uint64_t size) {
  SpinLockHolder lock(&c.mu());
  const int64_t before = static_cast<int64_t>(c.allowance()) - static_cast<int64_t>(c.bytes());
  Block* b = c.Take(need);
  if (b == nullptr) return nullptr;
  b->stream = t;
  b->requested = size;
  c.AddRequested(static_cast<int64_t>(size));
  // A take, unlike a pop, may spend less allowance than it takes bytes:
  // the slack follows the change.
  slack_ += static_cast<int64_t>(c.allowance()) - static_cast<int64_t>(c.bytes()) - before;
  return b;
}

void PoolCaches::TakeBackAllowance(FrontCache& c) {
  slack_ -= static_cast<int64_t>(c.allowance());
  c.set_allowance(0);
}

uint64_t PoolCaches::Revoke(uint64_t used) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Only caches pushed to since their last revocation can hold allowance
  // (FrontCache::GrantList), and the slack holds throughout, so revoking
  // those alone, one cache's lock at a time (never two: lock_rank.h), is
  // exact though the caches keep running.
  for (FrontCache* c = granted_.TakeAll(); c != nullptr;) {
    FrontCache* next = c->next_granted();
    SpinLockHolder lock(&c->mu());
    slack_ -= static_cast<int64_t>(c->Revoke());
    c = next;
  }
  return static_cast<uint64_t>(static_cast<int64_t>(used) + slack_);
}

uint64_t PoolCaches::PublishedBytes() const {
  uint64_t bytes = 0;
  for (const std::unique_ptr<FrontCache>& c : caches_) bytes += c->published_bytes();
  return bytes;
}

int64_t PoolCaches::PublishedRequested() const {
  int64_t requested = 0;
  for (const std::unique_ptr<FrontCache>& c : caches_) requested += c->published_requested();
  return requested;
}

bool PoolCaches::CheckInvariants(const MemPool* pool, uint64_t used,
                                 uint64_t used_high) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // One cache's lock at a time (never two): allowance - bytes is constant
  // under the pushes and pops that go on meanwhile, so the sum is exact.
  bool ok = true;
  int64_t slack = 0;
  for (const std::unique_ptr<FrontCache>& c : caches_) {
    SpinLockHolder lock(&c->mu());
    uint64_t bytes = 0;
    c->ForEach([&](const FrontCache::Entry& e) {
      if (e.block->state != BlockState::kLive || e.block->chunk->pool != pool) ok = false;
      bytes += e.block->size();
    });
    ok = ok && bytes == c->bytes() && bytes <= used && (c->listed() || c->allowance() == 0) &&
         Of(c->stream()) == c.get();
    slack += static_cast<int64_t>(c->allowance()) - static_cast<int64_t>(bytes);
  }
  return ok && slack == slack_ && !Exceeds(used, used_high);
}

}  // namespace streampool::internal
