// MemPool: the memory behind the blocks: growth by chunks or by mapping
// granules of reservations, and the release rule that gives it back.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/pool/mem_pool.h"
#include "src/util/align.h"
#include "src/util/check.h"

namespace streampool::internal {
namespace {

std::string Address(const void* p) {
  return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p)));
}

}  // namespace

Block* MemPool::Grow(uint64_t size, absl::Status* upstream_error) {
  return expandable_ ? GrowExpandable(size, upstream_error) : GrowChunk(size, upstream_error);
}

Block* MemPool::GrowChunk(uint64_t size, absl::Status* upstream_error) {
  const std::optional<uint64_t> bytes = CheckedAlignUp(size, kChunkGranularity);
  if (!bytes || *bytes > max_size_ || reserved_ > max_size_ - *bytes) return nullptr;
  if (!budget_->TryReserve(*bytes)) return nullptr;
  absl::StatusOr<Mapping> m = upstream_->Map(*bytes);
  if (!m.ok()) {
    budget_->Release(*bytes);
    *upstream_error = m.status();
    return nullptr;
  }
  if (m->size != *bytes || reinterpret_cast<uintptr_t>(m->base) % rule_.granule != 0) {
    // An upstream that breaks its contract (a user callback, say) fails the
    // allocation rather than the process.
    *upstream_error = absl::ResourceExhaustedError(
        absl::StrCat("the upstream broke its contract: asked for ", *bytes, " bytes aligned to ",
                     rule_.granule, ", it mapped ", m->size, " bytes at ", Address(m->base)));
    upstream_->Unmap(*m);
    budget_->Release(*bytes);
    return nullptr;
  }
  auto* c = new Chunk;
  c->pool = this;
  c->mapping = *m;
  c->id = next_chunk_id_++;
  c->handed_out_end = c->base();
  c->mapped_bytes = c->size();
  Block* b = arena_.New();
  b->node.addr = c->base();
  b->node.order = OrderOf(*c);
  b->node.size = c->size();
  b->chunk = c;
  b->state = BlockState::kReady;
  c->first = b;
  chunks_.emplace(c->base(), c);
  NoteSegment();
  reserved_ += c->size();
  stats_.reserved_high = std::max(stats_.reserved_high, reserved_);
  ++stats_.upstream_maps;
  stats_.upstream_bytes_mapped += c->size();
  InsertFree(b);
  return b;
}

// ------------------------------------------------------- expandable growth

uint64_t MemPool::CountUnmapped(const Chunk* c, uintptr_t lo, uintptr_t hi) {
  if (!c->expandable || hi <= lo) return 0;
  uint64_t n = 0;
  const uint64_t last = c->GranuleOf(hi - 1);
  for (uint64_t g = c->GranuleOf(lo); g <= last; ++g) n += !c->Mapped(g);
  return n;
}

absl::Status MemPool::MapGranules(Chunk* c, uint64_t g0, uint64_t g1) {
  const uint64_t bytes = (g1 - g0) * Chunk::kGranule;
  void* at = reinterpret_cast<void*>(c->base() + g0 * Chunk::kGranule);
  absl::StatusOr<Mapping> m = upstream_->MapAt(at, bytes);
  if (!m.ok()) return m.status();
  if (m->base != at || m->size != bytes ||
      m->huge_page_bytes + m->transparent_huge_page_bytes > bytes) {
    upstream_->UnmapAt(*m);  // a contract break fails the allocation, not the process
    return absl::ResourceExhaustedError(
        absl::StrCat("the upstream broke its contract: asked to map ", bytes, " bytes at ",
                     Address(at), ", it mapped ", m->size, " bytes at ", Address(m->base)));
  }
  uint64_t huge = m->huge_page_bytes, thp = m->transparent_huge_page_bytes;
  if ((huge | thp) != 0 && c->pages.empty()) c->pages.resize(c->granules());
  for (uint64_t g = g0; g < g1; ++g) {
    c->SetMapped(g, true);
    if (c->pages.empty()) continue;
    // Only the sums matter; spread them granule by granule so that any
    // granule-aligned part can be unmapped with consistent counts.
    GranulePages& p = c->pages[g];
    p.huge = static_cast<uint32_t>(std::min(huge, Chunk::kGranule));
    huge -= p.huge;
    p.thp = static_cast<uint32_t>(std::min(thp, Chunk::kGranule - p.huge));
    thp -= p.thp;
  }
  c->mapping.huge_page_bytes += m->huge_page_bytes;
  c->mapping.transparent_huge_page_bytes += m->transparent_huge_page_bytes;
  c->mapping.normal_page_bytes += bytes - m->huge_page_bytes - m->transparent_huge_page_bytes;
  c->mapped_bytes += bytes;
  reserved_ += bytes;
  return absl::OkStatus();
}

void MemPool::UnmapGranules(Chunk* c, uint64_t g0, uint64_t g1) {
  Mapping m;
  m.base = reinterpret_cast<void*>(c->base() + g0 * Chunk::kGranule);
  m.size = (g1 - g0) * Chunk::kGranule;
  for (uint64_t g = g0; g < g1; ++g) {
    SP_DCHECK(c->Mapped(g));
    c->SetMapped(g, false);
    if (c->pages.empty()) continue;
    m.huge_page_bytes += c->pages[g].huge;
    m.transparent_huge_page_bytes += c->pages[g].thp;
    c->pages[g] = GranulePages{};
  }
  m.normal_page_bytes = m.size - m.huge_page_bytes - m.transparent_huge_page_bytes;
  upstream_->UnmapAt(m);
  c->mapping.huge_page_bytes -= m.huge_page_bytes;
  c->mapping.transparent_huge_page_bytes -= m.transparent_huge_page_bytes;
  c->mapping.normal_page_bytes -= m.normal_page_bytes;
  c->mapped_bytes -= m.size;
  reserved_ -= m.size;
  budget_->Release(m.size);
}

MemPool::MapResult MemPool::MapForCarve(Block* b, uint64_t size, absl::Status* upstream_error) {
  Chunk* c = b->chunk;
  const uint64_t missing = CountUnmapped(c, b->addr(), b->addr() + size);
  if (missing == 0) return MapResult::kMapped;
  const uint64_t bytes = missing * Chunk::kGranule;
  if (bytes > max_size_ || reserved_ > max_size_ - bytes) return MapResult::kNoRoom;
  if (!budget_->TryReserve(bytes)) return MapResult::kNoRoom;
  const uint64_t first = c->GranuleOf(b->addr());
  const uint64_t last = c->GranuleOf(b->addr() + size - 1) + 1;
  // Runs of unmapped granules, one upstream call each; a failure takes back
  // what this call mapped, so the pool is exactly as before.
  RemoveFree(b);
  map_scratch_.clear();
  absl::Status mapped;
  for (uint64_t g = first; g < last && mapped.ok();) {
    if (c->Mapped(g)) {
      ++g;
      continue;
    }
    uint64_t end = g;
    while (end < last && !c->Mapped(end)) ++end;
    mapped = MapGranules(c, g, end);
    if (mapped.ok()) map_scratch_.emplace_back(g, end);
    g = end;
  }
  if (!mapped.ok()) {
    *upstream_error = std::move(mapped);
    for (const auto& [g0, g1] : map_scratch_) UnmapGranules(c, g0, g1);  // releases their budget
    uint64_t undone = 0;
    for (const auto& [g0, g1] : map_scratch_) undone += (g1 - g0) * Chunk::kGranule;
    budget_->Release(bytes - undone);
    InsertFree(b);
    return MapResult::kUpstreamFailed;
  }
  const uint64_t runs = map_scratch_.size();
  b->unmapped -= missing;
  InsertFree(b);
  stats_.reserved_high = std::max(stats_.reserved_high, reserved_);
  stats_.upstream_maps += runs;
  stats_.upstream_bytes_mapped += bytes;
  return MapResult::kMapped;
}

absl::StatusOr<Chunk*> MemPool::NewReservation(uint64_t bytes) {
  absl::StatusOr<void*> base = upstream_->Reserve(bytes, Chunk::kGranule);
  if (!base.ok()) return base.status();
  if (reinterpret_cast<uintptr_t>(*base) % Chunk::kGranule != 0) {
    upstream_->ReleaseReservation(*base, bytes);
    return absl::ResourceExhaustedError(
        absl::StrCat("the upstream broke its contract: its reservation at ", Address(*base),
                     " is not aligned to ", Chunk::kGranule));
  }
  auto* c = new Chunk;
  c->pool = this;
  c->expandable = true;
  c->mapping.base = *base;
  c->mapping.size = bytes;
  c->id = next_chunk_id_++;
  c->handed_out_end = c->base();
  c->mapped_bits.assign((c->granules() + 63) / 64, 0);
  Block* b = arena_.New();
  b->node.addr = c->base();
  b->node.order = OrderOf(*c);
  b->node.size = bytes;
  b->chunk = c;
  b->state = BlockState::kReady;
  b->unmapped = c->granules();
  c->first = b;
  chunks_.emplace(c->base(), c);
  InsertFree(b);
  return c;
}

void MemPool::DropReservation(Chunk* c) {
  Block* b = c->first;
  SP_CHECK(c->expandable && c->mapped_bytes == 0 && b->state == BlockState::kReady &&
           b->prev == nullptr && b->next == nullptr);
  RemoveFree(b);
  arena_.Delete(b);
  chunks_.erase(c->base());
  upstream_->ReleaseReservation(c->mapping.base, c->size());
  delete c;
}

Block* MemPool::FindMappedLowEnd(uint64_t size) {
  // Few blocks span unmapped granules (the top of each reservation and the
  // ranges a release left), so a bounded probe in best-fit order finds one
  // whose low end is mapped far enough, if any.
  SizeIndexNode* n = unbacked_.FindBestFitIf(
      size,
      [size](SizeIndexNode* x) {
        const Block* b = Block::FromNode(x);
        return CountUnmapped(b->chunk, b->addr(), b->addr() + size) == 0;
      },
      kCrossStreamProbes);
  return n == nullptr ? nullptr : Block::FromNode(n);
}

Block* MemPool::GrowExpandable(uint64_t size, absl::Status* upstream_error) {
  // The best-fitting free range; if the pool's or the device's budget cannot
  // take the granules it lacks, a few more candidates that fit the budget. A
  // new reservation only when no range is long enough (address space ran out
  // in the existing reservations). An upstream that refuses to map fails the
  // allocation: trying elsewhere would only repeat the refusal.
  SizeIndexNode* first = unbacked_.FindBestFit(size);
  if (first != nullptr) {
    MapResult r = MapForCarve(Block::FromNode(first), size, upstream_error);
    if (r == MapResult::kMapped) return Block::FromNode(first);
    if (r == MapResult::kUpstreamFailed) return nullptr;
    const uint64_t room =
        std::min(max_size_ - std::min(max_size_, reserved_), budget_->capacity() - budget_->used());
    SizeIndexNode* other = unbacked_.FindBestFitIf(
        size,
        [&](SizeIndexNode* n) {
          const Block* b = Block::FromNode(n);
          return n != first &&
                 CountUnmapped(b->chunk, b->addr(), b->addr() + size) * Chunk::kGranule <= room;
        },
        kCrossStreamProbes);
    if (other == nullptr) return nullptr;
    r = MapForCarve(Block::FromNode(other), size, upstream_error);
    return r == MapResult::kMapped ? Block::FromNode(other) : nullptr;
  }
  const std::optional<uint64_t> need = CheckedAlignUp(size, Chunk::kGranule);
  if (!need || *need > max_size_ || reserved_ > max_size_ - *need) return nullptr;
  // No address space for a reservation nothing could be mapped into.
  if (*need > budget_->capacity() - budget_->used()) return nullptr;
  absl::StatusOr<Chunk*> c = NewReservation(std::max(reservation_bytes_, *need));
  // Where address space is scarce (other pools hold most of the DVPP
  // window), a reservation just large enough may still fit.
  if (!c.ok() && reservation_bytes_ > *need) c = NewReservation(*need);
  if (!c.ok()) {
    *upstream_error = c.status();
    return nullptr;
  }
  Block* b = (*c)->first;
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
  chunks_.erase(c->base());
  reserved_ -= c->size();
  ++stats_.upstream_unmaps;
  budget_->Release(c->size());
  upstream_->Unmap(c->mapping);
  delete c;
}

uint64_t MemPool::ReleaseForOom(const OrderOracle& oracle) {
  const uint64_t before = reserved_;
  FlushCaches();
  if (opportunistic_ && HasFreesToObserve()) PromoteObserved(oracle);
  Release(0);
  const uint64_t released = before - reserved_;
  if (released != 0) {
    ++stats_.reclaims;
    stats_.reclaimed_bytes += released;
  }
  return released;
}

void MemPool::Release(uint64_t bound) {
  // Cached blocks merge first, so that whole granules and chunks can go.
  FlushCaches();
  if (expandable_) {
    ReleaseGranules(bound);
  } else {
    ReleaseChunks(bound);
  }
}

void MemPool::ReleaseChunks(uint64_t bound) {
  if (reserved_ <= bound || free_chunks_ == nullptr) return;
  release_scratch_.clear();
  for (Chunk* c = free_chunks_; c != nullptr; c = c->next_free) release_scratch_.push_back(c);
  // Largest first reaches the bound with the fewest unmaps; ids make the
  // order deterministic.
  std::sort(release_scratch_.begin(), release_scratch_.end(), [](const Chunk* a, const Chunk* b) {
    return a->size() != b->size() ? a->size() > b->size() : a->id < b->id;
  });
  for (Chunk* c : release_scratch_) {
    if (reserved_ <= bound) break;
    if (reserved_ - c->size() < bound) continue;  // would undershoot: skip
    UnmapChunk(c);
  }
  release_scratch_.clear();
}

void MemPool::ReleaseGranules(uint64_t bound) {
  constexpr uint64_t kG = Chunk::kGranule;
  if (reserved_ > bound) {
    // READY blocks holding a whole mapped granule: at least a granule long.
    release_blocks_.clear();
    auto collect = [this](SizeIndexNode* n) {
      Block* b = Block::FromNode(n);
      const uint64_t lo = (b->addr() - b->chunk->base() + kG - 1) / kG;
      const uint64_t hi = (b->end() - b->chunk->base()) / kG;
      if (hi > lo && hi - lo > b->unmapped) release_blocks_.push_back(b);
    };
    ready_.ForEachAtLeast(kG, collect);
    unbacked_.ForEachAtLeast(kG, collect);
    // Largest free range first; (chunk id, address) makes ties deterministic.
    std::sort(release_blocks_.begin(), release_blocks_.end(), [](const Block* a, const Block* b) {
      if (a->size() != b->size()) return a->size() > b->size();
      if (a->chunk->id != b->chunk->id) return a->chunk->id < b->chunk->id;
      return a->addr() < b->addr();
    });
    for (Block* b : release_blocks_) {
      // Every granule is the same size: once one would undershoot, all would.
      if (reserved_ - bound < kG) break;
      Chunk* c = b->chunk;
      const uint64_t lo = (b->addr() - c->base() + kG - 1) / kG;
      uint64_t hi = (b->end() - c->base()) / kG;
      RemoveFree(b);
      // From the top down, so the low end (where blocks are carved) stays
      // mapped when the bound stops us part-way.
      while (hi > lo && reserved_ - bound >= kG) {
        if (!c->Mapped(hi - 1)) {
          --hi;
          continue;
        }
        const uint64_t allowed = (reserved_ - bound) / kG;
        uint64_t start = hi - 1;
        while (start > lo && c->Mapped(start - 1) && hi - start < allowed) --start;
        UnmapGranules(c, start, hi);
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
  for (Chunk* c = free_chunks_; c != nullptr;) {
    Chunk* next = c->next_free;
    if (c->mapped_bytes == 0 && (scarce_address_space_ || chunks_.size() > 1)) {
      DropReservation(c);
    }
    c = next;
  }
}

}  // namespace streampool::internal
