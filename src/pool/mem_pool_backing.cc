// MemPool: growth and release in blocks, over the memory its backing maps
// (pool_backing.h): a new chunk's or reservation's first block, mapping the
// granules a READY block lacks, and the release rule.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "src/pool/mem_pool.h"
#include "src/util/align.h"
#include "src/util/check.h"

namespace streampool::internal {
Block* MemPool::Grow(uint64_t size, absl::Status* upstream_error) {
  return backing_.expandable() ? GrowExpandable(size, upstream_error)
                               : GrowChunk(size, upstream_error);
}

Block* MemPool::FirstBlock(Chunk* c) {
  Block* b = arena_.New();
  b->node.addr = c->base();
  b->node.order = OrderOf(*c);
  b->node.size = c->size();
  b->chunk = c;
  b->state = BlockState::kReady;
  b->unmapped = c->expandable ? c->granules() : 0;
  c->first = b;
  InsertFree(b);
  return b;
}

Block* MemPool::GrowChunk(uint64_t size, absl::Status* upstream_error) {
  const std::optional<uint64_t> bytes = CheckedAlignUp(size, kChunkGranularity);
  if (!bytes) return nullptr;
  Chunk* c = backing_.MapChunk(*bytes, rule_.granule, this, upstream_error);
  if (c == nullptr) return nullptr;
  NoteSegment();
  stats_.reserved_high = std::max(stats_.reserved_high, backing_.reserved());
  ++stats_.upstream_maps;
  stats_.upstream_bytes_mapped += c->size();
  return FirstBlock(c);
}

// ------------------------------------------------------- expandable growth

MemPool::MapResult MemPool::MapForCarve(Block* b, uint64_t size, absl::Status* upstream_error) {
  Chunk* c = b->chunk;
  const uint64_t missing = PoolBacking::CountUnmapped(c, b->addr(), b->addr() + size);
  if (missing == 0) return MapResult::kMapped;
  const uint64_t bytes = missing * Chunk::kGranule;
  if (!backing_.Charge(bytes)) return MapResult::kNoRoom;
  RemoveFree(b);
  uint64_t runs = 0;
  absl::Status mapped = backing_.MapCharged(c, c->GranuleOf(b->addr()),
                                            c->GranuleOf(b->addr() + size - 1) + 1, bytes, &runs);
  if (mapped.ok()) b->unmapped -= missing;
  InsertFree(b);
  if (!mapped.ok()) {
    *upstream_error = std::move(mapped);
    return MapResult::kUpstreamFailed;
  }
  stats_.reserved_high = std::max(stats_.reserved_high, backing_.reserved());
  stats_.upstream_maps += runs;
  stats_.upstream_bytes_mapped += bytes;
  return MapResult::kMapped;
}

void MemPool::DropReservation(Chunk* c) {
  Block* b = c->first;
  SP_CHECK(b->state == BlockState::kReady && b->prev == nullptr && b->next == nullptr);
  RemoveFree(b);
  arena_.Delete(b);
  backing_.DropReservation(c);
}

Block* MemPool::GrowExpandable(uint64_t size, absl::Status* upstream_error) {
  // The best-fitting free range; if the pool's or the device's budget cannot
  // take the granules it lacks, a few more candidates that fit the budget. A
  // new reservation only when no range is long enough (address space ran out
  // in the existing reservations). An upstream that refuses to map fails the
  // allocation: trying elsewhere would only repeat the refusal.
  SizeIndexNode* first = index_.unbacked().FindBestFit(size);
  if (first != nullptr) {
    MapResult r = MapForCarve(Block::FromNode(first), size, upstream_error);
    if (r == MapResult::kMapped) return Block::FromNode(first);
    if (r == MapResult::kUpstreamFailed) return nullptr;
    const uint64_t room = backing_.Room();
    SizeIndexNode* other = index_.unbacked().FindBestFitIf(
        size,
        [&](SizeIndexNode* n) {
          const Block* b = Block::FromNode(n);
          return n != first && PoolBacking::CountUnmapped(b->chunk, b->addr(), b->addr() + size) *
                                       Chunk::kGranule <=
                                   room;
        },
        kCrossStreamProbes);
    if (other == nullptr) return nullptr;
    r = MapForCarve(Block::FromNode(other), size, upstream_error);
    return r == MapResult::kMapped ? Block::FromNode(other) : nullptr;
  }
  const std::optional<uint64_t> need = CheckedAlignUp(size, Chunk::kGranule);
  // No address space for a reservation nothing could be mapped into.
  if (!need || *need > backing_.Room()) return nullptr;
  const uint64_t reservation = backing_.reservation_bytes();
  absl::StatusOr<Chunk*> c = backing_.NewReservation(std::max(reservation, *need), this);
  // Where address space is scarce (other pools hold most of the DVPP
  // window), a reservation just large enough may still fit.
  if (!c.ok() && reservation > *need) c = backing_.NewReservation(*need, this);
  if (!c.ok()) {
    *upstream_error = c.status();
    return nullptr;
  }
  Block* b = FirstBlock(*c);
  if (MapForCarve(b, size, upstream_error) != MapResult::kMapped) {
    DropReservation(*c);
    return nullptr;
  }
  // A segment once something is mapped in it: a reservation a failed map
  // gave back never counted.
  NoteSegment();
  return b;
}

// ---------------------------------------------------------------- release

void MemPool::UnmapChunk(Chunk* c) {
  Block* b = c->first;
  SP_CHECK(b->state == BlockState::kReady && b->prev == nullptr && b->next == nullptr);
  RemoveFree(b);
  arena_.Delete(b);
  ++stats_.upstream_unmaps;
  backing_.UnmapChunk(c);
}

uint64_t MemPool::ReleaseForOom(const OrderOracle& oracle) {
  const uint64_t before = backing_.reserved();
  FlushCaches();
  if (opportunistic_ && HasFreesToObserve()) PromoteObserved(oracle);
  Release(0);
  const uint64_t released = before - backing_.reserved();
  if (released != 0) {
    ++stats_.reclaims;
    stats_.reclaimed_bytes += released;
  }
  return released;
}

void MemPool::Release(uint64_t bound) {
  // Cached blocks merge first, so that whole granules and chunks can go.
  FlushCaches();
  if (backing_.expandable()) {
    ReleaseGranules(bound);
  } else {
    ReleaseChunks(bound);
  }
}

void MemPool::ReleaseChunks(uint64_t bound) {
  if (backing_.reserved() <= bound || backing_.free_chunks() == nullptr) return;
  release_scratch_.clear();
  for (Chunk* c = backing_.free_chunks(); c != nullptr; c = c->next_free) {
    release_scratch_.push_back(c);
  }
  // Largest first reaches the bound with the fewest unmaps; ids make the
  // order deterministic.
  std::sort(release_scratch_.begin(), release_scratch_.end(), [](const Chunk* a, const Chunk* b) {
    return a->size() != b->size() ? a->size() > b->size() : a->id < b->id;
  });
  for (Chunk* c : release_scratch_) {
    if (backing_.reserved() <= bound) break;
    if (backing_.reserved() - c->size() < bound) continue;  // would undershoot: skip
    UnmapChunk(c);
  }
  release_scratch_.clear();
}

void MemPool::ReleaseGranules(uint64_t bound) {
  constexpr uint64_t kG = Chunk::kGranule;
  if (backing_.reserved() > bound) {
    // READY blocks holding a whole mapped granule: at least a granule long.
    release_blocks_.clear();
    auto collect = [this](SizeIndexNode* n) {
      Block* b = Block::FromNode(n);
      const uint64_t lo = (b->addr() - b->chunk->base() + kG - 1) / kG;
      const uint64_t hi = (b->end() - b->chunk->base()) / kG;
      if (hi > lo && hi - lo > b->unmapped) release_blocks_.push_back(b);
    };
    index_.ready().ForEachAtLeast(kG, collect);
    index_.unbacked().ForEachAtLeast(kG, collect);
    // Largest free range first; (chunk id, address) makes ties deterministic.
    std::sort(release_blocks_.begin(), release_blocks_.end(), [](const Block* a, const Block* b) {
      if (a->size() != b->size()) return a->size() > b->size();
      if (a->chunk->id != b->chunk->id) return a->chunk->id < b->chunk->id;
      return a->addr() < b->addr();
    });
    for (Block* b : release_blocks_) {
      // Every granule is the same size: once one would undershoot, all would.
      if (backing_.reserved() - bound < kG) break;
      Chunk* c = b->chunk;
      const uint64_t lo = (b->addr() - c->base() + kG - 1) / kG;
      uint64_t hi = (b->end() - c->base()) / kG;
      RemoveFree(b);
      // From the top down, so the low end (where blocks are carved) stays
      // mapped when the bound stops us part-way.
      while (hi > lo && backing_.reserved() - bound >= kG) {
        if (!c->Mapped(hi - 1)) {
          --hi;
          continue;
        }
        const uint64_t allowed = (backing_.reserved() - bound) / kG;
        uint64_t start = hi - 1;
        while (start > lo && c->Mapped(start - 1) && hi - start < allowed) --start;
        backing_.UnmapGranules(c, start, hi);
        b->unmapped += hi - start;
        ++stats_.upstream_unmaps;
        hi = start;
      }
      InsertFree(b);
    }
    release_blocks_.clear();
  }
  // A reservation with nothing mapped and nothing in it goes back, but for
  // the pool's last one: keeping it saves a reserve per sync cycle and keeps
  // addresses stable. Where address space is scarce (the DVPP window, shared
  // by every pool of the process) even the last one goes back.
  for (Chunk* c = backing_.free_chunks(); c != nullptr;) {
    Chunk* next = c->next_free;
    if (c->mapped_bytes == 0 && (backing_.scarce_address_space() || backing_.segments() > 1)) {
      DropReservation(c);
    }
    c = next;
  }
}

}  // namespace streampool::internal
