#include "src/pool/pool_backing.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/check.h"

namespace streampool::internal {
namespace {

std::string Address(const void* p) {
  return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p)));
}

}  // namespace

PoolBacking::PoolBacking(std::shared_ptr<PhysicalMemory> upstream, DeviceBudget* budget,
                         uint64_t max_size, bool expandable, uint64_t reservation_bytes,
                         bool scarce_address_space)
    : upstream_(std::move(upstream)),
      budget_(budget),
      max_size_(max_size),
      expandable_(expandable),
      reservation_bytes_(reservation_bytes),
      scarce_address_space_(scarce_address_space) {}

PoolBacking::~PoolBacking() {
  for (auto& [base, chunk] : chunks_) {
    if (chunk->expandable) {
      for (uint64_t g = 0; g < chunk->granules();) {
        if (!chunk->Mapped(g)) {
          ++g;
          continue;
        }
        uint64_t end = g;
        while (end < chunk->granules() && chunk->Mapped(end)) ++end;
        UnmapGranules(chunk, g, end);
        g = end;
      }
      upstream_->ReleaseReservation(chunk->mapping.base, chunk->size());
    } else {
      budget_->Release(chunk->size());
      upstream_->Unmap(chunk->mapping);
    }
    delete chunk;
  }
}

Chunk* PoolBacking::NewChunk(const Mapping& m, bool expandable, MemPool* pool) {
  auto* c = new Chunk;
  c->pool = pool;
  c->expandable = expandable;
  c->mapping = m;
  c->id = next_chunk_id_++;
  c->handed_out_end = c->base();
  if (expandable) {
    c->mapped_bits.assign((c->granules() + 63) / 64, 0);
  } else {
    c->mapped_bytes = c->size();
  }
  chunks_.emplace(c->base(), c);
  reserved_ += c->mapped_bytes;
  return c;
}

Chunk* PoolBacking::MapChunk(uint64_t bytes, uint64_t granule, MemPool* pool,
                             absl::Status* upstream_error) {
  if (!FitsMax(bytes) || !budget_->TryReserve(bytes)) return nullptr;
  absl::StatusOr<Mapping> m = upstream_->Map(bytes);
  if (!m.ok()) {
    budget_->Release(bytes);
    *upstream_error = m.status();
    return nullptr;
  }
  if (m->size != bytes || reinterpret_cast<uintptr_t>(m->base) % granule != 0) {
    // An upstream that breaks its contract (a user callback, say) fails the
    // allocation rather than the process.
    *upstream_error = absl::ResourceExhaustedError(
        absl::StrCat("the upstream broke its contract: asked for ", bytes, " bytes aligned to ",
                     granule, ", it mapped ", m->size, " bytes at ", Address(m->base)));
    upstream_->Unmap(*m);
    budget_->Release(bytes);
    return nullptr;
  }
  return NewChunk(*m, /*expandable=*/false, pool);
}

void PoolBacking::UnmapChunk(Chunk* c) {
  chunks_.erase(c->base());
  reserved_ -= c->size();
  budget_->Release(c->size());
  upstream_->Unmap(c->mapping);
  delete c;
}

absl::StatusOr<Chunk*> PoolBacking::NewReservation(uint64_t bytes, MemPool* pool) {
  absl::StatusOr<void*> base = upstream_->Reserve(bytes, Chunk::kGranule);
  if (!base.ok()) return base.status();
  if (reinterpret_cast<uintptr_t>(*base) % Chunk::kGranule != 0) {
    upstream_->ReleaseReservation(*base, bytes);
    return absl::ResourceExhaustedError(
        absl::StrCat("the upstream broke its contract: its reservation at ", Address(*base),
                     " is not aligned to ", Chunk::kGranule));
  }
  Mapping m;
  m.base = *base;
  m.size = bytes;
  return NewChunk(m, /*expandable=*/true, pool);
}

void PoolBacking::DropReservation(Chunk* c) {
  SP_CHECK(c->expandable && c->mapped_bytes == 0);
  chunks_.erase(c->base());
  upstream_->ReleaseReservation(c->mapping.base, c->size());
  delete c;
}

uint64_t PoolBacking::CountUnmapped(const Chunk* c, uintptr_t lo, uintptr_t hi) {
  if (!c->expandable || hi <= lo) return 0;
  uint64_t n = 0;
  const uint64_t last = c->GranuleOf(hi - 1);
  for (uint64_t g = c->GranuleOf(lo); g <= last; ++g) n += !c->Mapped(g);
  return n;
}

bool PoolBacking::Charge(uint64_t bytes) { return FitsMax(bytes) && budget_->TryReserve(bytes); }

absl::Status PoolBacking::MapCharged(Chunk* c, uint64_t first, uint64_t last, uint64_t bytes,
                                     uint64_t* runs) {
  // Runs of unmapped granules, one upstream call each; a failure takes back
  // what this call mapped, so everything is exactly as before.
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
    for (const auto& [g0, g1] : map_scratch_) UnmapGranules(c, g0, g1);  // releases their budget
    uint64_t undone = 0;
    for (const auto& [g0, g1] : map_scratch_) undone += (g1 - g0) * Chunk::kGranule;
    budget_->Release(bytes - undone);
    return mapped;
  }
  *runs = map_scratch_.size();
  return absl::OkStatus();
}

absl::Status PoolBacking::MapGranules(Chunk* c, uint64_t g0, uint64_t g1) {
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

void PoolBacking::UnmapGranules(Chunk* c, uint64_t g0, uint64_t g1) {
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

void PoolBacking::LinkFree(Chunk* c) {
  SP_DCHECK(!c->in_free_list);
  c->in_free_list = true;
  c->prev_free = nullptr;
  c->next_free = free_chunks_;
  if (free_chunks_ != nullptr) free_chunks_->prev_free = c;
  free_chunks_ = c;
}

void PoolBacking::UnlinkFree(Chunk* c) {
  SP_DCHECK(c->in_free_list);
  c->in_free_list = false;
  if (c->prev_free != nullptr) {
    c->prev_free->next_free = c->next_free;
  } else {
    free_chunks_ = c->next_free;
  }
  if (c->next_free != nullptr) c->next_free->prev_free = c->prev_free;
  c->prev_free = c->next_free = nullptr;
}

const Chunk* PoolBacking::ChunkAt(uintptr_t addr) const {
  auto it = chunks_.upper_bound(addr);
  if (it == chunks_.begin()) return nullptr;
  --it;
  return addr < it->second->base() + it->second->size() ? it->second : nullptr;
}

bool PoolBacking::CheckInvariants() const {
  uint64_t reserved = 0;
  size_t listed = 0, on_list = 0;
  for (const Chunk* c = free_chunks_; c != nullptr; c = c->next_free) {
    if (!c->in_free_list) return false;
    ++on_list;
  }
  for (const auto& [base, c] : chunks_) {
    if (base != c->base() || c->expandable != expandable_) return false;
    if (c->expandable) {
      if (c->base() % Chunk::kGranule != 0 || c->size() % Chunk::kGranule != 0) return false;
      uint64_t mapped = 0;
      for (uint64_t g = 0; g < c->granules(); ++g) mapped += c->Mapped(g);
      if (c->mapped_bytes != mapped * Chunk::kGranule) return false;
    } else if (c->mapped_bytes != c->size()) {
      return false;
    }
    const Mapping& m = c->mapping;
    if (m.huge_page_bytes + m.transparent_huge_page_bytes + m.normal_page_bytes !=
        c->mapped_bytes) {
      return false;
    }
    reserved += c->mapped_bytes;
    listed += c->in_free_list;
  }
  return reserved == reserved_ && reserved_ <= max_size_ && listed == on_list;
}

}  // namespace streampool::internal
