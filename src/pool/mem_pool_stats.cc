// MemPool: statistics and the invariant walk.
#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/pool/mem_pool.h"
#include "src/util/align.h"
#include "src/util/check.h"

namespace streampool::internal {
uint64_t MemPool::RequestedNow() const {
  const int64_t requested = requested_ + caches_.PublishedRequested();
  return requested > 0 ? static_cast<uint64_t>(requested) : 0;
}

uint64_t MemPool::used() const {
  // The caches' published counts, without their locks.
  const uint64_t cached = caches_.PublishedBytes();
  return used_ > cached ? used_ - cached : 0;
}

bool MemPool::HasPendingOn(StreamIndex s) const {
  if (index_.HasPendingOn(s)) return true;
  for (const Deferred& d : deferred_) {
    if (d.s == s) return true;
    for (const Use& u : d.uses) {
      if (u.first == s) return true;
    }
  }
  FrontCache* c = CacheOf(s);
  return c != nullptr && c->published_bytes() != 0;
}

PoolStats MemPool::Stats() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  PoolStats s = stats_;
  const uint64_t reserved = backing_.reserved();
  s.reserved_bytes = reserved;
  uint64_t cached = 0, largest_cached = 0;
  // What the caches publish, without their locks: a stream's owner never
  // waits for statistics (lock_rank.h).
  caches_.ForEach([&](const FrontCache& c) {
    cached += c.published_bytes();
    // Pops are same-stream reuses; pushes are frees (counted nowhere else).
    const uint64_t allocs = c.published_allocs();
    s.alloc_count += allocs;
    s.reuse_same_stream += allocs;
    s.free_count += c.published_frees();
    largest_cached = std::max(largest_cached, c.published_largest());
  });
  s.used_bytes = used_ > cached ? used_ - cached : 0;
  s.requested_bytes = RequestedNow();
  s.requested_high = std::max(s.requested_high, s.requested_bytes);
  s.segments = backing_.segments();
  backing_.ForEachChunk([&s](const Chunk& c) {
    s.huge_page_bytes += c.mapping.huge_page_bytes;
    s.transparent_huge_page_bytes += c.mapping.transparent_huge_page_bytes;
    s.normal_page_bytes += c.mapping.normal_page_bytes;
  });
  s.largest_free_block = std::max(index_.LargestFree(), largest_cached);
  s.fragmentation = reserved == 0 ? 0.0 : 1.0 - static_cast<double>(s.used_bytes) / reserved;
  return s;
}

bool MemPool::CheckChunkBlocks(const Chunk* c,
                               BlockCounts& n) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (c->first == nullptr || c->first->prev != nullptr) return false;
  const uint64_t unmapped_granules =
      c->expandable ? c->granules() - c->mapped_bytes / Chunk::kGranule : 0;
  uint64_t unmapped_in_blocks = 0;
  uintptr_t at = c->base();
  for (const Block* b = c->first; b != nullptr; b = b->next) {
    if (b->chunk != c || b->addr() != at || b->size() == 0 || b->size() % rule_.granule != 0) {
      return false;
    }
    if (b->next != nullptr && b->next->prev != b) return false;
    at += b->size();
    const uint64_t holes = PoolBacking::CountUnmapped(c, b->addr(), b->end());
    switch (b->state) {
      case BlockState::kLive:
        n.used += b->size();
        ++n.live;
        if (b->stamp != 0 || b->node.in_index || b->end() > c->handed_out_end) return false;
        if (holes != 0 || b->unmapped != 0) return false;
        break;
      case BlockState::kReady:
        ++n.ready;
        n.unbacked += b->unmapped != 0;
        if (b->stamp != 0 || !b->node.in_index || b->unmapped != holes) return false;
        if (b->next != nullptr && b->next->state == BlockState::kReady) return false;
        unmapped_in_blocks += holes;
        break;
      case BlockState::kDeferred:
        ++n.deferred;
        if (b->stamp != 0 || b->node.in_index || holes != 0 || b->unmapped != 0) return false;
        break;
      case BlockState::kPending:
        ++n.pending;
        if (b->stamp == 0 || !b->node.in_index || holes != 0 || b->unmapped != 0) return false;
        if (!index_.IsListed(b->stream)) return false;
        if (b->next != nullptr && b->next->state == BlockState::kPending &&
            b->next->stream == b->stream) {
          return false;
        }
        break;
    }
  }
  if (at != c->base() + c->size()) return false;
  // Unmapped granules lie wholly inside READY blocks, each counted once.
  if (unmapped_in_blocks != unmapped_granules) return false;
  const bool whole_ready = c->first->next == nullptr && c->first->state == BlockState::kReady;
  if (whole_ready != c->in_free_list) return false;
  n.whole_ready_chunks += whole_ready;
  return true;
}

bool MemPool::CheckInvariants() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // The backing's own equations (reserved == Σ chunk mapped bytes, ...),
  // then each chunk's blocks.
  if (!backing_.CheckInvariants()) return false;
  BlockCounts n;
  bool blocks_ok = true;
  backing_.ForEachChunk([&](const Chunk& c) { blocks_ok = blocks_ok && CheckChunkBlocks(&c, n); });
  if (!blocks_ok) return false;
  size_t free_chunks = 0;
  for (const Chunk* c = backing_.free_chunks(); c != nullptr; c = c->next_free) ++free_chunks;
  if (!index_.CheckInvariants()) return false;
  // Front caches: what they hold is LIVE to the central index, and the
  // watermark invariant holds (pool_caches.h).
  if (!caches_.CheckInvariants(this, used_, stats_.used_high)) return false;
  for (const Deferred& d : deferred_) {
    if (d.block->state != BlockState::kDeferred || d.block->chunk->pool != this ||
        d.block->free_pos != d.f || d.uses.empty()) {
      return false;
    }
  }
  return n.used == used_ && n.live == live_blocks_ && n.deferred == deferred_.size() &&
         n.pending == pending_blocks_ && n.pending == index_.pending_size() &&
         n.ready - n.unbacked == index_.ready().size() && n.unbacked == index_.unbacked().size() &&
         free_chunks == n.whole_ready_chunks &&
         n.live + n.pending + n.ready + n.deferred == arena_.live();
}

}  // namespace streampool::internal
