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

std::optional<uint64_t> SizeRule::Apply(uint64_t len) const {
  switch (kind) {
    case Kind::kRound:
      return CheckedAlignUp(len, granule);
    case Kind::kAcl: {
      auto a = CheckedAlignUp(len, 32);
      return a ? CheckedAdd(*a, 32) : std::nullopt;
    }
    case Kind::kDvpp: {
      auto a = CheckedAlignUp(len, 32);
      auto b = a ? CheckedAdd(*a, 32) : std::nullopt;
      return b ? CheckedAlignUp(*b, 128) : std::nullopt;
    }
  }
  return std::nullopt;
}

MemPool::MemPool(const PoolProps& props, SizeRule rule, uint64_t max_size,
                 std::shared_ptr<PhysicalMemory> upstream, DeviceBudget* budget)
    : props_(props),
      rule_(rule),
      max_size_(max_size),
      upstream_(std::move(upstream)),
      budget_(budget),
      follow_events_(props.reuse_follow_event_dependencies),
      opportunistic_(props.reuse_allow_opportunistic),
      internal_deps_(props.reuse_allow_internal_dependencies),
      release_threshold_(props.release_threshold) {
  SP_CHECK(rule_.granule >= 32 && (rule_.granule & (rule_.granule - 1)) == 0);
  SP_CHECK(kChunkGranularity % rule_.granule == 0);
}

MemPool::~MemPool() {
  for (auto& [base, chunk] : chunks_) {
    budget_->Release(chunk->size());
    upstream_->Unmap(chunk->mapping);
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
    ready_.Insert(&b->node);
    if (b->prev == nullptr && b->next == nullptr) LinkFreeChunk(b->chunk);
  } else {
    SP_DCHECK(b->state == BlockState::kPending);
    frees_[b->stream]->index.Insert(&b->node);
  }
}

void MemPool::RemoveFree(Block* b) {
  if (b->state == BlockState::kReady) {
    ready_.Remove(&b->node);
    if (b->chunk->in_free_list) UnlinkFreeChunk(b->chunk);
  } else {
    SP_DCHECK(b->state == BlockState::kPending);
    frees_[b->stream]->index.Remove(&b->node);
  }
}

void MemPool::Absorb(Block* a, Block* b) {
  SP_DCHECK(a->next == b && b->prev == a && a->end() == b->addr());
  a->node.size += b->size();
  a->next = b->next;
  if (b->next != nullptr) b->next->prev = a;
  arena_.Delete(b);
}

// ------------------------------------------------------------ state changes

void MemPool::MakePending(Block* b, StreamIndex s, Position f, uint64_t seq) {
  // A pending block absorbs READY neighbours and its own stream's pending
  // ones, so a single-stream workload never fragments for want of a sync; the
  // merged block's free point is the latest, which is this free.
  StreamFrees& frees = FreesOf(s);
  auto mergeable = [&](const Block* n) {
    return n != nullptr &&
           (n->state == BlockState::kReady || (n->state == BlockState::kPending && n->stream == s));
  };
  // Loops, not ifs: an absorbed READY block may itself border a pending
  // block of s (a READY block next to a PENDING one is legal), and those must
  // merge too. At most two steps per side, since READY blocks never border
  // each other and pending blocks of s never border each other.
  while (mergeable(b->prev)) {
    Block* p = b->prev;
    if (p->state == BlockState::kPending) --pending_blocks_;
    RemoveFree(p);
    Absorb(p, b);
    b = p;
  }
  while (mergeable(b->next)) {
    Block* n = b->next;
    if (n->state == BlockState::kPending) --pending_blocks_;
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

void MemPool::MakeReady(Block* b) {
  b->state = BlockState::kReady;
  b->stamp = 0;
  b->stream = kNoStream;
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
  live->state = BlockState::kLive;
  live->stamp = 0;
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

Block* MemPool::Grow(uint64_t size) {
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
  c->mapping = *m;
  c->id = next_chunk_id_++;
  c->handed_out_end = c->base();
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

  // Rule 1: the stream's own pending frees and READY blocks.
  Block* chosen = nullptr;
  ReuseRule how = ReuseRule::kFresh;
  if (SizeIndexNode* n = ready_.FindBestFit(need)) chosen = Block::FromNode(n);
  if (t < frees_.size() && frees_[t] && !frees_[t]->index.empty()) {
    if (SizeIndexNode* n = frees_[t]->index.FindBestFit(need)) {
      Block* own = Block::FromNode(n);
      if (Better(own, chosen)) chosen = own;
    }
  }
  if (chosen != nullptr) {
    how = chosen->state == BlockState::kPending
              ? ReuseRule::kSameStream
              : (chosen->addr() < chosen->chunk->handed_out_end ? ReuseRule::kAfterSync
                                                                : ReuseRule::kFresh);
  }

  // Rules 2 and 3: other streams' frees that are safe for t.
  auto cross_stream = [&](auto bound_of) {
    Block* best = nullptr;
    for (StreamIndex s : active_) {
      if (s == t) continue;
      Block* b = FindEligible(s, need, bound_of(s));
      if (Better(b, best)) best = b;
    }
    return best;
  };
  if (chosen == nullptr && follow_events_) {
    chosen = cross_stream([&](StreamIndex s) { return oracle.OrderedAfter(s); });
    how = ReuseRule::kEventDependency;
  }
  if (chosen == nullptr && opportunistic_) {
    chosen = cross_stream([&](StreamIndex s) { return oracle.ObservedComplete(s); });
    how = ReuseRule::kOpportunistic;
  }
  // Rule 4: growth.
  if (chosen == nullptr) {
    chosen = Grow(need);
    how = ReuseRule::kFresh;
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

  Block* live = Carve(chosen, need);
  live->stream = t;
  live->requested = size;
  used_ += need;
  stats_.used_high = std::max(stats_.used_high, used_);
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

void MemPool::Promote(const VectorClock& done) {
  for (size_t i = 0; i < active_.size();) {
    const StreamIndex s = active_[i];
    StreamFrees& frees = *frees_[s];
    const Position d = done.Get(s);
    while (!frees.queue.empty() && frees.queue.front().f <= d) {
      const QueueEntry e = frees.queue.front();
      frees.queue.pop_front();
      if (!IsValid(e)) continue;
      frees.index.Remove(&e.block->node);
      --pending_blocks_;
      MakeReady(e.block);
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

PoolStats MemPool::Stats() const {
  PoolStats s = stats_;
  s.reserved_bytes = reserved_;
  s.used_bytes = used_;
  for (const auto& [base, c] : chunks_) {
    s.huge_page_bytes += c->mapping.huge_page_bytes;
    s.transparent_huge_page_bytes += c->mapping.transparent_huge_page_bytes;
    s.normal_page_bytes += c->mapping.normal_page_bytes;
  }
  uint64_t largest = 0;
  if (const SizeIndexNode* n = ready_.Largest()) largest = n->size;
  for (StreamIndex st : active_) {
    if (const SizeIndexNode* n = frees_[st]->index.Largest()) largest = std::max(largest, n->size);
  }
  s.largest_free_block = largest;
  s.fragmentation = reserved_ == 0 ? 0.0 : 1.0 - static_cast<double>(used_) / reserved_;
  return s;
}

bool MemPool::CheckInvariants() const {
  uint64_t reserved = 0, used = 0, live = 0, pending = 0, ready = 0;
  size_t free_chunks = 0;
  for (const Chunk* c = free_chunks_; c != nullptr; c = c->next_free) ++free_chunks;
  size_t whole_ready_chunks = 0;
  for (const auto& [base, c] : chunks_) {
    if (base != c->base() || c->first == nullptr || c->first->prev != nullptr) return false;
    reserved += c->size();
    uintptr_t at = c->base();
    for (const Block* b = c->first; b != nullptr; b = b->next) {
      if (b->chunk != c || b->addr() != at || b->size() == 0 || b->size() % rule_.granule != 0) {
        return false;
      }
      if (b->next != nullptr && b->next->prev != b) return false;
      at += b->size();
      switch (b->state) {
        case BlockState::kLive:
          used += b->size();
          ++live;
          if (b->stamp != 0 || b->node.in_index || b->end() > c->handed_out_end) return false;
          break;
        case BlockState::kReady:
          ++ready;
          if (b->stamp != 0 || !b->node.in_index) return false;
          if (b->next != nullptr && b->next->state == BlockState::kReady) return false;
          break;
        case BlockState::kPending:
          ++pending;
          if (b->stamp == 0 || !b->node.in_index) return false;
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
  return reserved == reserved_ && used == used_ && live == live_blocks_ &&
         pending == pending_blocks_ && pending == indexed_pending && ready == ready_.size() &&
         ready_.CheckInvariants() && free_chunks == whole_ready_chunks &&
         live + pending + ready == arena_.live();
}

}  // namespace internal
}  // namespace streampool
