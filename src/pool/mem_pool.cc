#include "src/pool/mem_pool.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/util/align.h"
#include "src/util/check.h"

namespace streampool {

const char* AllocationTypeName(AllocationType type) {
  switch (type) {
    case AllocationType::kDevice:
      return "device";
    case AllocationType::kPinnedHost:
      return "pinned";
    case AllocationType::kHugePage:
      return "hugepage";
    case AllocationType::kDvpp:
      return "dvpp";
  }
  return "unknown";
}

const char* ReuseRuleName(ReuseRule rule) {
  switch (rule) {
    case ReuseRule::kFresh:
      return "fresh";
    case ReuseRule::kSameStream:
      return "same-stream";
    case ReuseRule::kEventDependency:
      return "event-dependency";
    case ReuseRule::kOpportunistic:
      return "opportunistic";
    case ReuseRule::kAfterSync:
      return "after-sync";
    case ReuseRule::kInternalDependency:
      return "internal-dependency";
  }
  return "unknown";
}

namespace internal {

std::optional<uint64_t> SizeRule::ApplySlow(uint64_t len) const {
  switch (kind) {
    case Kind::kRound:
      return CheckedAlignUp(len, granule);
    case Kind::kAcl:
    case Kind::kDvpp: {
      // The 32 bytes past the rounded length are CANN's; rounding the sum up
      // to the granule keeps the next block's start aligned.
      auto a = CheckedAlignUp(len, 32);
      auto b = a ? CheckedAdd(*a, 32) : std::nullopt;
      return b ? CheckedAlignUp(*b, granule) : std::nullopt;
    }
  }
  return std::nullopt;
}

namespace {

// Each reservation of an expandable pool: max_size (or the caller's size),
// bounded by kMaxReservation, in whole granules.
uint64_t ReservationSize(uint64_t max_size, uint64_t requested) {
  uint64_t r = requested != 0 ? requested : max_size;
  r = std::min(r, MemPool::kMaxReservation);
  return std::max(*CheckedAlignUp(r, Chunk::kGranule), Chunk::kGranule);
}

}  // namespace

MemPool::MemPool(const PoolProps& props, SizeRule rule, uint64_t max_size,
                 std::shared_ptr<PhysicalMemory> upstream, DeviceBudget* budget,
                 uint64_t reservation_bytes)
    : props_(props),
      rule_(rule),
      max_size_(max_size),
      upstream_(std::move(upstream)),
      budget_(budget),
      follow_events_(props.reuse_follow_event_dependencies),
      opportunistic_(props.reuse_allow_opportunistic),
      internal_deps_(props.reuse_allow_internal_dependencies),
      release_threshold_(props.release_threshold),
      expandable_(props.growth != PoolGrowth::kChunked && upstream_->can_reserve()),
      reservation_bytes_(ReservationSize(max_size, reservation_bytes)),
      scarce_address_space_(reservation_bytes != 0) {
  SP_CHECK(rule_.granule >= 32 && (rule_.granule & (rule_.granule - 1)) == 0);
  SP_CHECK(kChunkGranularity % rule_.granule == 0);
  SP_CHECK(Chunk::kGranule == kChunkGranularity);
}

MemPool::~MemPool() {
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

MemPool::StreamFrees& MemPool::FreesOf(StreamIndex s) {
  if (s >= frees_.size()) frees_.resize(s + 1);
  if (!frees_[s]) frees_[s] = std::make_unique<StreamFrees>();
  return *frees_[s];
}

void MemPool::Activate(StreamIndex s) {
  StreamFrees& f = *frees_[s];
  if (f.active) return;
  f.active = true;
  active_.push_back(s);
}

// ----------------------------------------------------------- index plumbing

void MemPool::LinkFreeChunk(Chunk* c) {
  SP_DCHECK(!c->in_free_list);
  c->in_free_list = true;
  c->prev_free = nullptr;
  c->next_free = free_chunks_;
  if (free_chunks_ != nullptr) free_chunks_->prev_free = c;
  free_chunks_ = c;
}

void MemPool::UnlinkFreeChunk(Chunk* c) {
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

void MemPool::InsertFree(Block* b) {
  if (b->state == BlockState::kReady) {
    (b->unmapped == 0 ? ready_ : unbacked_).Insert(&b->node);
    if (b->prev == nullptr && b->next == nullptr) LinkFreeChunk(b->chunk);
  } else {
    SP_DCHECK(b->state == BlockState::kPending);
    frees_[b->stream]->index.Insert(&b->node);
  }
}

void MemPool::RemoveFree(Block* b) {
  if (b->state == BlockState::kReady) {
    (b->unmapped == 0 ? ready_ : unbacked_).Remove(&b->node);
    if (b->chunk->in_free_list) UnlinkFreeChunk(b->chunk);
  } else {
    SP_DCHECK(b->state == BlockState::kPending);
    frees_[b->stream]->index.Remove(&b->node);
  }
}

void MemPool::Absorb(Block* a, Block* b) {
  SP_DCHECK(a->next == b && b->prev == a && a->end() == b->addr());
  a->node.size += b->size();
  a->unmapped += b->unmapped;
  if (Observed(b)) {
    a->observed_stream =
        !Observed(a) || a->observed_stream == b->observed_stream ? b->observed_stream : kNoStream;
  }
  a->observed_epoch = std::max(a->observed_epoch, b->observed_epoch);
  a->next = b->next;
  if (b->next != nullptr) b->next->prev = a;
  arena_.Delete(b);
}

// ------------------------------------------------------------ state changes

void MemPool::MakePending(Block* b, StreamIndex s, Position f, uint64_t seq) {
  // A pending block absorbs its own stream's pending neighbours, so a
  // single-stream workload never fragments for want of a sync; the merged
  // block's free point is the latest, which is this free. READY neighbours
  // stay READY: absorbing them would hide reusable bytes from other streams
  // until the next promotion (and measured worse on the bundled traces), and
  // pending memory must stay mapped where a READY block may not be.
  StreamFrees& frees = FreesOf(s);
  auto mergeable = [&](const Block* n) {
    return n != nullptr && n->state == BlockState::kPending && n->stream == s;
  };
  // Pending blocks of s never border each other, so one step per side.
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    --pending_blocks_;
    RemoveFree(p);
    Absorb(p, b);
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    --pending_blocks_;
    RemoveFree(n);
    Absorb(b, n);
  }
  b->state = BlockState::kPending;
  b->stream = s;
  b->free_pos = f;
  b->free_seq = seq;
  b->stamp = next_stamp_++;
  ++pending_blocks_;
  frees.index.Insert(&b->node);
  frees.queue.push_back(QueueEntry{f, b->stamp, b});
  frees.max_f = std::max(frees.max_f, f);
  Activate(s);
  CompactQueue(frees);
}

void MemPool::MakeReady(Block* b, bool observed) {
  b->observed_stream = observed ? b->stream : kNoStream;
  b->state = BlockState::kReady;
  b->stamp = 0;
  b->stream = kNoStream;
  b->unmapped = 0;
  b->observed_epoch = observed ? proof_epoch_ : 0;
  if (b->prev != nullptr && b->prev->state == BlockState::kReady) {
    Block* p = b->prev;
    RemoveFree(p);
    Absorb(p, b);
    b = p;
  }
  if (b->next != nullptr && b->next->state == BlockState::kReady) {
    Block* n = b->next;
    RemoveFree(n);
    Absorb(b, n);
  }
  InsertFree(b);
}

void MemPool::CompactQueue(StreamFrees& frees) {
  // Stale entries pile up in a workload that never synchronizes; dropping
  // them when they outnumber live ones keeps the queue O(pending) amortized.
  if (frees.queue.size() > 2 * frees.index.size() + 64) {
    frees.queue.Filter([this](const QueueEntry& e) { return IsValid(e); });
  }
}

Block* MemPool::Carve(Block* b, uint64_t size) {
  SP_DCHECK(b->size() >= size);
  RemoveFree(b);
  Block* live = b;
  if (b->size() > size) {
    // The remainder keeps b's object so a pending block's queue entry (which
    // points at b) stays valid with the same stamp and free point.
    live = arena_.New();
    live->node.addr = b->addr();
    live->node.size = size;
    live->chunk = b->chunk;
    live->prev = b->prev;
    live->next = b;
    if (b->prev != nullptr) {
      b->prev->next = live;
    } else {
      b->chunk->first = live;
    }
    b->prev = live;
    b->node.addr += size;
    b->node.size -= size;
    InsertFree(b);
  } else if (b->state == BlockState::kPending) {
    // The whole block is taken: its queue entry goes stale (stamp reset
    // below). The stream stays in active_ until the next Promote.
    --pending_blocks_;
  }
  SP_DCHECK(CountUnmapped(live->chunk, live->addr(), live->end()) == 0);
  live->state = BlockState::kLive;
  live->stamp = 0;
  live->unmapped = 0;
  live->observed_epoch = 0;
  live->chunk->handed_out_end = std::max(live->chunk->handed_out_end, live->end());
  ++live_blocks_;
  return live;
}

// ------------------------------------------------------------------ serving

Block* MemPool::FindEligible(StreamIndex s, uint64_t size, Position bound) {
  StreamFrees& frees = *frees_[s];
  if (frees.index.empty()) return nullptr;
  // Entries are in free order, so the front bounds every pending free point.
  if (frees.queue.empty() || frees.queue.front().f > bound) return nullptr;
  SizeIndexNode* n;
  if (bound >= frees.max_f) {
    n = frees.index.FindBestFit(size);
  } else {
    n = frees.index.FindBestFitIf(
        size, [bound](SizeIndexNode* x) { return Block::FromNode(x)->free_pos <= bound; },
        kCrossStreamProbes);
  }
  return n == nullptr ? nullptr : Block::FromNode(n);
}

Block* MemPool::FindForInternalDependency(StreamIndex t, uint64_t size) {
  // The OOM path: a walk over pending frees is acceptable here, once growth
  // has already failed.
  Block* best = nullptr;
  for (StreamIndex s : active_) {
    if (s == t) continue;
    StreamFrees& frees = *frees_[s];
    for (size_t i = 0; i < frees.queue.size(); ++i) {
      const QueueEntry& e = frees.queue[i];
      if (!IsValid(e) || e.block->size() < size) continue;
      if (best == nullptr || e.block->free_seq < best->free_seq) best = e.block;
      break;  // later entries of this stream were freed later
    }
  }
  return best;
}

Block* MemPool::Grow(uint64_t size) { return expandable_ ? GrowExpandable(size) : GrowChunk(size); }

Block* MemPool::GrowChunk(uint64_t size) {
  const std::optional<uint64_t> bytes = CheckedAlignUp(size, kChunkGranularity);
  if (!bytes || *bytes > max_size_ || reserved_ > max_size_ - *bytes) return nullptr;
  if (!budget_->TryReserve(*bytes)) return nullptr;
  absl::StatusOr<Mapping> m = upstream_->Map(*bytes);
  if (!m.ok()) {
    budget_->Release(*bytes);
    return nullptr;
  }
  if (m->size != *bytes || reinterpret_cast<uintptr_t>(m->base) % rule_.granule != 0) {
    // An upstream that breaks its contract (a user callback, say) fails the
    // allocation rather than the process.
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
  b->node.size = c->size();
  b->chunk = c;
  b->state = BlockState::kReady;
  c->first = b;
  chunks_.emplace(c->base(), c);
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

bool MemPool::MapGranules(Chunk* c, uint64_t g0, uint64_t g1) {
  const uint64_t bytes = (g1 - g0) * Chunk::kGranule;
  void* at = reinterpret_cast<void*>(c->base() + g0 * Chunk::kGranule);
  absl::StatusOr<Mapping> m = upstream_->MapAt(at, bytes);
  if (!m.ok()) return false;
  if (m->base != at || m->size != bytes ||
      m->huge_page_bytes + m->transparent_huge_page_bytes > bytes) {
    upstream_->UnmapAt(*m);  // a contract break fails the allocation, not the process
    return false;
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
  return true;
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

MemPool::MapResult MemPool::MapForCarve(Block* b, uint64_t size) {
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
  bool ok = true;
  for (uint64_t g = first; g < last && ok;) {
    if (c->Mapped(g)) {
      ++g;
      continue;
    }
    uint64_t end = g;
    while (end < last && !c->Mapped(end)) ++end;
    ok = MapGranules(c, g, end);
    if (ok) map_scratch_.emplace_back(g, end);
    g = end;
  }
  if (!ok) {
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

Chunk* MemPool::NewReservation(uint64_t bytes) {
  absl::StatusOr<void*> base = upstream_->Reserve(bytes, Chunk::kGranule);
  if (!base.ok()) return nullptr;
  if (reinterpret_cast<uintptr_t>(*base) % Chunk::kGranule != 0) {
    upstream_->ReleaseReservation(*base, bytes);
    return nullptr;
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

Block* MemPool::GrowExpandable(uint64_t size) {
  // The best-fitting free range; if the pool's or the device's budget cannot
  // take the granules it lacks, a few more candidates that fit the budget. A
  // new reservation only when no range is long enough (address space ran out
  // in the existing reservations). An upstream that refuses to map fails the
  // allocation: trying elsewhere would only repeat the refusal.
  SizeIndexNode* first = unbacked_.FindBestFit(size);
  if (first != nullptr) {
    MapResult r = MapForCarve(Block::FromNode(first), size);
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
    r = MapForCarve(Block::FromNode(other), size);
    return r == MapResult::kMapped ? Block::FromNode(other) : nullptr;
  }
  const std::optional<uint64_t> need = CheckedAlignUp(size, Chunk::kGranule);
  if (!need || *need > max_size_ || reserved_ > max_size_ - *need) return nullptr;
  // No address space for a reservation nothing could be mapped into.
  if (*need > budget_->capacity() - budget_->used()) return nullptr;
  Chunk* c = NewReservation(std::max(reservation_bytes_, *need));
  // Where address space is scarce (other pools hold most of the DVPP
  // window), a reservation just large enough may still fit.
  if (c == nullptr && reservation_bytes_ > *need) c = NewReservation(*need);
  if (c == nullptr) return nullptr;
  Block* b = c->first;
  if (MapForCarve(b, size) != MapResult::kMapped) {
    DropReservation(c);
    return nullptr;
  }
  return b;
}

ReuseRule MemPool::ReadyRule(const Block* b, StreamIndex t) const {
  // Fresh when its bytes were never handed out; else, while its promotion by
  // observation is unproven, same-stream if only t's frees were promoted into
  // it, opportunistic otherwise; else after-sync.
  if (b->addr() >= b->chunk->handed_out_end) return ReuseRule::kFresh;
  if (Observed(b)) {
    return b->observed_stream == t ? ReuseRule::kSameStream : ReuseRule::kOpportunistic;
  }
  return ReuseRule::kAfterSync;
}

std::optional<MemPool::Allocation> MemPool::TakeFromCache(StreamIndex t, uint64_t need,
                                                          uint64_t size) {
  // Rule 0: t's front cache, when the fast path turned the block down for
  // want of allowance (the watermark is settled here, exactly).
  FrontCache* c = front_cache() ? CacheOf(t) : nullptr;
  if (c == nullptr) return std::nullopt;
  Block* b;
  {
    SpinLockHolder lock(&c->mu());
    const int64_t before = static_cast<int64_t>(c->allowance()) - static_cast<int64_t>(c->bytes());
    b = c->Take(need);
    if (b != nullptr) {
      b->stream = t;
      b->requested = size;
      // A take, unlike a pop, may spend less allowance than it takes bytes:
      // cache_slack_ follows the change.
      cache_slack_ +=
          static_cast<int64_t>(c->allowance()) - static_cast<int64_t>(c->bytes()) - before;
    }
  }
  if (b != nullptr) {
    Reconcile(/*reset_high=*/false);
    return Allocation{b, ReuseRule::kSameStream};
  }
  // A miss: t's other cached frees go central, where rule 1 finds them by
  // best fit (split, or merged with their neighbours) as it would have
  // without the cache; otherwise a workload of varied sizes would grow
  // beside its own frees.
  FlushCache(t);
  return std::nullopt;
}

Block* MemPool::FindOwn(StreamIndex t, uint64_t need, ReuseRule* how) {
  Block* chosen = nullptr;
  if (SizeIndexNode* n = ready_.FindBestFit(need)) chosen = Block::FromNode(n);
  if (t < frees_.size() && frees_[t] && !frees_[t]->index.empty()) {
    if (SizeIndexNode* n = frees_[t]->index.FindBestFit(need)) {
      Block* own = Block::FromNode(n);
      if (Better(own, chosen)) chosen = own;
    }
  }
  if (chosen == nullptr && !unbacked_.empty()) chosen = FindMappedLowEnd(need);
  if (chosen != nullptr) {
    *how = chosen->state == BlockState::kPending ? ReuseRule::kSameStream : ReadyRule(chosen, t);
  }
  return chosen;
}

std::optional<MemPool::Allocation> MemPool::AllocateOwn(uint64_t size, StreamIndex t) {
  SP_DCHECK(size > 0);
  const std::optional<uint64_t> rule_size = rule_.Apply(size);
  if (!rule_size || *rule_size > max_size_) return std::nullopt;  // Allocate reports it
  const uint64_t need = *rule_size;
  if (std::optional<Allocation> cached = TakeFromCache(t, need, size)) return cached;
  ReuseRule how = ReuseRule::kFresh;
  Block* chosen = FindOwn(t, need, &how);
  if (chosen == nullptr) return std::nullopt;
  return Finish(chosen, how, t, need, size);
}

absl::StatusOr<MemPool::Allocation> MemPool::Allocate(uint64_t size, OrderOracle& oracle) {
  SP_DCHECK(size > 0);
  const std::optional<uint64_t> rule_size = rule_.Apply(size);
  if (!rule_size || *rule_size > max_size_) {
    ++stats_.failed_alloc_count;
    return absl::ResourceExhaustedError(
        absl::StrCat("request of ", size, " bytes exceeds the pool's maximum size"));
  }
  const uint64_t need = *rule_size;
  const StreamIndex t = oracle.stream();
  if (std::optional<Allocation> cached = TakeFromCache(t, need, size)) return *cached;

  Block* chosen = nullptr;
  ReuseRule how = ReuseRule::kFresh;
  // Rules 1-3; run again after front caches are flushed before growth.
  // (The lambda runs within this call, under the pool's lock.)
  auto search = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // Rule 1: the stream's own pending frees and READY blocks.
    chosen = FindOwn(t, need, &how);
    // Rule 2: other streams' frees that t is ordered after.
    if (chosen == nullptr && follow_events_) {
      for (StreamIndex s : active_) {
        if (s == t) continue;
        Block* b = FindEligible(s, need, oracle.OrderedAfter(s));
        if (Better(b, chosen)) chosen = b;
      }
      how = ReuseRule::kEventDependency;
    }
    // Rule 3: frees observed complete become READY and merge; then READY
    // blocks again (this is also the promotion before growth).
    if (chosen == nullptr && opportunistic_ && pending_blocks_ != 0) {
      PromoteObserved(oracle);
      if (SizeIndexNode* n = ready_.FindBestFit(need)) {
        chosen = Block::FromNode(n);
      } else if (!unbacked_.empty()) {
        chosen = FindMappedLowEnd(need);
      }
      if (chosen != nullptr) how = ReadyRule(chosen, t);
    }
  };
  const uint64_t flushes_before = cache_flushes_;
  search();
  // Front caches never make the pool grow: what they hold goes central (and
  // is promoted, with the switch on) before rules 1-3 are tried once more --
  // also when rule 3's promotion already flushed them during the search.
  if (chosen == nullptr && (FlushCaches() || cache_flushes_ != flushes_before)) search();
  // Rule 4: growth.
  if (chosen == nullptr) {
    chosen = Grow(need);
    if (chosen != nullptr) how = ReadyRule(chosen, t);
  }
  // Rule 5: wait for another stream's free.
  if (chosen == nullptr && internal_deps_) {
    chosen = FindForInternalDependency(t, need);
    if (chosen != nullptr) {
      oracle.InsertWait(chosen->stream, chosen->free_pos);
      ++stats_.waits_inserted;
      how = ReuseRule::kInternalDependency;
    }
  }
  if (chosen == nullptr) {
    ++stats_.failed_alloc_count;
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory: ", need, " bytes with ", reserved_, " reserved of ", max_size_,
        " allowed and ", budget_->capacity() - budget_->used(), " left on the device"));
  }
  return Finish(chosen, how, t, need, size);
}

MemPool::Allocation MemPool::Finish(Block* chosen, ReuseRule how, StreamIndex t, uint64_t need,
                                    uint64_t size) {
  Block* live = Carve(chosen, need);
  live->stream = t;
  live->requested = size;
  used_ += need;
  if (static_cast<int64_t>(used_) + cache_slack_ > static_cast<int64_t>(stats_.used_high)) {
    Reconcile(/*reset_high=*/false);
  }
  ++stats_.alloc_count;
  switch (how) {
    case ReuseRule::kFresh:
      ++stats_.fresh_allocs;
      break;
    case ReuseRule::kSameStream:
      ++stats_.reuse_same_stream;
      break;
    case ReuseRule::kEventDependency:
      ++stats_.reuse_event_dependency;
      break;
    case ReuseRule::kOpportunistic:
      ++stats_.reuse_opportunistic;
      break;
    case ReuseRule::kAfterSync:
      ++stats_.reuse_after_sync;
      break;
    case ReuseRule::kInternalDependency:
      ++stats_.reuse_internal_dependency;
      break;
  }
  return Allocation{live, how};
}

// ---------------------------------------------------------------- freeing

void MemPool::FreeAsync(Block* b, StreamIndex s, Position f) {
  SP_CHECK(b->state == BlockState::kLive);
  used_ -= b->size();
  --live_blocks_;
  ++stats_.free_count;
  MakePending(b, s, f, next_free_seq_++);
}

void MemPool::FreeNow(Block* b) {
  SP_CHECK(b->state == BlockState::kLive);
  used_ -= b->size();
  --live_blocks_;
  ++stats_.free_count;
  MakeReady(b);
}

template <typename BoundOf>
void MemPool::PromoteUpTo(BoundOf bound_of, bool observed) {
  for (size_t i = 0; i < active_.size();) {
    const StreamIndex s = active_[i];
    StreamFrees& frees = *frees_[s];
    const Position d = bound_of(s);
    while (!frees.queue.empty() && frees.queue.front().f <= d) {
      const QueueEntry e = frees.queue.front();
      frees.queue.pop_front();
      if (!IsValid(e)) continue;
      frees.index.Remove(&e.block->node);
      --pending_blocks_;
      MakeReady(e.block, observed);
    }
    if (frees.index.empty()) {
      frees.queue.clear();
      frees.max_f = 0;
      frees.active = false;
      active_[i] = active_.back();
      active_.pop_back();
    } else {
      ++i;
    }
  }
}

void MemPool::Promote(const VectorClock& done) {
  FlushCaches();
  ++proof_epoch_;
  PromoteUpTo([&done](StreamIndex s) { return done.Get(s); }, /*observed=*/false);
}

void MemPool::PromoteObservedOn(StreamIndex s, Position complete) {
  FlushCache(s);
  PromoteUpTo([s, complete](StreamIndex r) { return r == s ? complete : 0; }, /*observed=*/true);
}

void MemPool::PromoteObserved(const OrderOracle& oracle) {
  FlushCaches();
  PromoteUpTo([&oracle](StreamIndex s) { return oracle.ObservedComplete(s); }, /*observed=*/true);
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

// ---------------------------------------------------------------- queries

bool MemPool::Owns(uintptr_t addr) const {
  auto it = chunks_.upper_bound(addr);
  if (it == chunks_.begin()) return false;
  --it;
  return addr < it->second->base() + it->second->size();
}

Block* MemPool::LiveBlockContaining(uintptr_t addr) const {
  auto it = chunks_.upper_bound(addr);
  if (it == chunks_.begin()) return nullptr;
  --it;
  const Chunk* c = it->second;
  if (addr >= c->base() + c->size()) return nullptr;
  for (Block* b = c->first; b != nullptr; b = b->next) {
    if (addr < b->end()) return b->state == BlockState::kLive ? b : nullptr;
  }
  return nullptr;
}

// ------------------------------------------------------------ front caches

void MemPool::FreeOverflow(Block* b, StreamIndex s, Position f) {
  // When the cache is full, what it holds goes central first (older frees
  // before this one, so s's central queue stays in free order), then this
  // free is cached when it fits, else central too.
  if (FrontCache* c = front_cache() ? CacheOf(s) : nullptr) {
    SpinLockHolder lock(&c->mu());
    if (c->Push(b, f)) return;
    if (!c->empty()) {
      FlushInto(*c);
      if (c->Push(b, f)) return;
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

uint64_t MemPool::used() const {
  // The caches' published counts, without their locks.
  uint64_t cached = 0;
  for (const std::unique_ptr<FrontCache>& c : caches_) cached += c->published_bytes();
  return used_ > cached ? used_ - cached : 0;
}

bool MemPool::HasPendingOn(StreamIndex s) const {
  if (s < frees_.size() && frees_[s] && !frees_[s]->index.empty()) return true;
  FrontCache* c = CacheOf(s);
  return c != nullptr && c->published_bytes() != 0;
}

PoolStats MemPool::Stats() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  PoolStats s = stats_;
  s.reserved_bytes = reserved_;
  uint64_t cached = 0, largest_cached = 0;
  // What the caches publish, without their locks: a stream's owner never
  // waits for statistics (lock_rank.h).
  for (const std::unique_ptr<FrontCache>& c : caches_) {
    cached += c->published_bytes();
    // Pops are same-stream reuses; pushes are frees (counted nowhere else).
    const uint64_t allocs = c->published_allocs();
    s.alloc_count += allocs;
    s.reuse_same_stream += allocs;
    s.free_count += c->published_frees();
    largest_cached = std::max(largest_cached, c->published_largest());
  }
  s.used_bytes = used_ > cached ? used_ - cached : 0;
  for (const auto& [base, c] : chunks_) {
    s.huge_page_bytes += c->mapping.huge_page_bytes;
    s.transparent_huge_page_bytes += c->mapping.transparent_huge_page_bytes;
    s.normal_page_bytes += c->mapping.normal_page_bytes;
  }
  uint64_t largest = 0;
  if (const SizeIndexNode* n = ready_.Largest()) largest = n->size;
  // A READY block spanning unmapped granules counts by its mapped low end:
  // what it can serve without growing.
  unbacked_.ForEach([&largest](const SizeIndexNode* n) {
    const Block* b = Block::FromNode(const_cast<SizeIndexNode*>(n));
    const Chunk* c = b->chunk;
    uint64_t g = c->GranuleOf(b->addr());
    while (g < c->granules() && c->Mapped(g)) ++g;
    const uintptr_t mapped_end = std::min<uintptr_t>(b->end(), c->base() + g * Chunk::kGranule);
    if (mapped_end > b->addr()) largest = std::max<uint64_t>(largest, mapped_end - b->addr());
  });
  for (StreamIndex st : active_) {
    if (const SizeIndexNode* n = frees_[st]->index.Largest()) largest = std::max(largest, n->size);
  }
  s.largest_free_block = std::max(largest, largest_cached);
  s.fragmentation = reserved_ == 0 ? 0.0 : 1.0 - static_cast<double>(s.used_bytes) / reserved_;
  return s;
}

bool MemPool::CheckInvariants() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  uint64_t reserved = 0, used = 0, live = 0, pending = 0, ready = 0, unbacked = 0;
  size_t free_chunks = 0;
  for (const Chunk* c = free_chunks_; c != nullptr; c = c->next_free) ++free_chunks;
  size_t whole_ready_chunks = 0;
  for (const auto& [base, c] : chunks_) {
    if (base != c->base() || c->first == nullptr || c->first->prev != nullptr) return false;
    if (c->expandable != expandable_) return false;
    uint64_t unmapped_granules = 0;
    if (c->expandable) {
      if (c->base() % Chunk::kGranule != 0 || c->size() % Chunk::kGranule != 0) return false;
      for (uint64_t g = 0; g < c->granules(); ++g) unmapped_granules += !c->Mapped(g);
      if (c->mapped_bytes != (c->granules() - unmapped_granules) * Chunk::kGranule) return false;
    } else if (c->mapped_bytes != c->size()) {
      return false;
    }
    const Mapping& m = c->mapping;
    if (m.huge_page_bytes + m.transparent_huge_page_bytes + m.normal_page_bytes !=
        c->mapped_bytes) {
      return false;
    }
    reserved += c->mapped_bytes;
    uint64_t unmapped_in_blocks = 0;
    uintptr_t at = c->base();
    for (const Block* b = c->first; b != nullptr; b = b->next) {
      if (b->chunk != c || b->addr() != at || b->size() == 0 || b->size() % rule_.granule != 0) {
        return false;
      }
      if (b->next != nullptr && b->next->prev != b) return false;
      at += b->size();
      const uint64_t holes = CountUnmapped(c, b->addr(), b->end());
      switch (b->state) {
        case BlockState::kLive:
          used += b->size();
          ++live;
          if (b->stamp != 0 || b->node.in_index || b->end() > c->handed_out_end) return false;
          if (holes != 0 || b->unmapped != 0) return false;
          break;
        case BlockState::kReady:
          ++ready;
          unbacked += b->unmapped != 0;
          if (b->stamp != 0 || !b->node.in_index || b->unmapped != holes) return false;
          if (b->next != nullptr && b->next->state == BlockState::kReady) return false;
          unmapped_in_blocks += holes;
          break;
        case BlockState::kPending:
          ++pending;
          if (b->stamp == 0 || !b->node.in_index || holes != 0 || b->unmapped != 0) return false;
          if (b->stream >= frees_.size() || !frees_[b->stream] || !frees_[b->stream]->active) {
            return false;
          }
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
    whole_ready_chunks += whole_ready;
  }
  size_t indexed_pending = 0;
  for (StreamIndex s : active_) {
    const StreamFrees& f = *frees_[s];
    if (!f.active || !f.index.CheckInvariants()) return false;
    indexed_pending += f.index.size();
    size_t valid = 0;
    for (size_t i = 0; i < f.queue.size(); ++i) {
      if (i > 0 && f.queue[i - 1].f > f.queue[i].f) return false;
      if (IsValid(f.queue[i])) {
        ++valid;
        if (f.queue[i].block->stream != s || f.queue[i].block->free_pos != f.queue[i].f) {
          return false;
        }
      }
    }
    if (valid != f.index.size()) return false;
  }
  // Front caches: what they hold is LIVE to the central index; the
  // watermark invariant of front_cache.h holds and cache_slack_ is its sum.
  // One cache's lock at a time (never two): allowance - bytes is constant
  // under the pushes and pops that go on meanwhile, so the sum is exact.
  bool caches_ok = true;
  int64_t slack = 0;
  for (const std::unique_ptr<FrontCache>& c : caches_) {
    SpinLockHolder lock(&c->mu());
    uint64_t bytes = 0;
    c->ForEach([&](const FrontCache::Entry& e) {
      if (e.block->state != BlockState::kLive || e.block->chunk->pool != this) caches_ok = false;
      bytes += e.block->size();
    });
    caches_ok = caches_ok && bytes == c->bytes() && bytes <= used_ &&
                (c->listed() || c->allowance() == 0) && CacheOf(c->stream()) == c.get();
    slack += static_cast<int64_t>(c->allowance()) - static_cast<int64_t>(bytes);
  }
  // true used + Σ allowance == used_ + slack <= UsedMemHigh.
  if (!caches_ok || slack != cache_slack_ ||
      static_cast<int64_t>(used_) + slack > static_cast<int64_t>(stats_.used_high)) {
    return false;
  }
  return reserved == reserved_ && used == used_ && live == live_blocks_ &&
         pending == pending_blocks_ && pending == indexed_pending &&
         ready - unbacked == ready_.size() && unbacked == unbacked_.size() &&
         ready_.CheckInvariants() && unbacked_.CheckInvariants() &&
         free_chunks == whole_ready_chunks && live + pending + ready == arena_.live();
}

}  // namespace internal
}  // namespace streampool
