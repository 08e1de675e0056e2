#include "src/pool/mem_pool.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/pool/names.h"
#include "src/util/align.h"
#include "src/util/check.h"

namespace streampool {

// The public names are the shared table's (src/pool/names.h), as the tools
// and the Python package print them.
const char* AllocationTypeName(AllocationType type) { return internal::EnumName(type); }
const char* ReuseRuleName(ReuseRule rule) { return internal::EnumName(rule); }
const char* BlockStateName(BlockState state) { return internal::EnumName(state); }

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
      follow_events_(props.reuse_follow_event_dependencies),
      opportunistic_(props.reuse_allow_opportunistic),
      internal_deps_(props.reuse_allow_internal_dependencies),
      // Chunked pools keep CUDA's order unless asked otherwise.
      wait_before_growth_(props.wait_before_growth && props.growth != PoolGrowth::kChunked &&
                          upstream->can_reserve()),
      soft_reserved_limit_(props.soft_reserved_limit),
      release_threshold_(props.release_threshold),
      // A copy: the growth mode reads the upstream in the same call.
      backing_(upstream, budget, max_size,
               props.growth != PoolGrowth::kChunked && upstream->can_reserve(),
               ReservationSize(max_size, reservation_bytes), reservation_bytes != 0) {
  SP_CHECK(rule_.granule >= 32 && (rule_.granule & (rule_.granule - 1)) == 0);
  SP_CHECK(kChunkGranularity % rule_.granule == 0);
  SP_CHECK(Chunk::kGranule == kChunkGranularity);
}

// ----------------------------------------------------------- index plumbing

void MemPool::InsertFree(Block* b) {
  if (b->state == BlockState::kReady) {
    if (b->prev == nullptr && b->next == nullptr) backing_.LinkFree(b->chunk);
  }
  index_.Insert(b);
}

void MemPool::RemoveFree(Block* b) {
  if (b->state == BlockState::kReady) {
    if (b->chunk->in_free_list) backing_.UnlinkFree(b->chunk);
  }
  index_.Remove(b);
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
  StreamFrees& frees = index_.FreesOf(s);
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
  frees.Queue(b, f);
  index_.Activate(s);
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

Block* MemPool::SplitOffLow(Block* b, uint64_t size) {
  // The remainder keeps b's object so a pending block's queue entry (which
  // points at b) stays valid with the same stamp and free point.
  Block* low = arena_.New();
  low->node.addr = b->addr();
  low->node.order = b->node.order;
  low->node.size = size;
  low->chunk = b->chunk;
  low->prev = b->prev;
  low->next = b;
  if (b->prev != nullptr) {
    b->prev->next = low;
  } else {
    b->chunk->first = low;
  }
  b->prev = low;
  b->node.addr += size;
  b->node.order += size;
  b->node.size -= size;
  return low;
}

Block* MemPool::Carve(Block* b, uint64_t size) {
  SP_DCHECK(b->size() >= size);
  RemoveFree(b);
  Block* live = b;
  if (b->size() > size) {
    live = SplitOffLow(b, size);
    InsertFree(b);
  } else if (b->state == BlockState::kPending) {
    // The whole block is taken: its queue entry goes stale (stamp reset
    // below). The stream stays listed in the index until the next Promote.
    --pending_blocks_;
  }
  SP_DCHECK(PoolBacking::CountUnmapped(live->chunk, live->addr(), live->end()) == 0);
  live->state = BlockState::kLive;
  live->stamp = 0;
  live->unmapped = 0;
  live->observed_epoch = 0;
  live->chunk->handed_out_end = std::max(live->chunk->handed_out_end, live->end());
  ++live_blocks_;
  return live;
}

Block* MemPool::JoinRun(Block* first, Block* last, uint64_t need) {
  // The last block gives only what the window lacks; its remainder keeps its
  // object, state and queue entry, as Carve's does.
  uint64_t before_last = 0;
  for (Block* b = first; b != last; b = b->next) before_last += b->size();
  SP_DCHECK(before_last < need && before_last + last->size() >= need);
  const uint64_t from_last = need - before_last;
  Block* tail = last;
  if (last->size() > from_last) {
    RemoveFree(last);
    tail = SplitOffLow(last, from_last);
    InsertFree(last);
  } else {
    RemoveFree(last);
    if (last->state == BlockState::kPending) --pending_blocks_;
  }
  for (Block* b = first; b != tail; b = b->next) {
    RemoveFree(b);
    if (b->state == BlockState::kPending) --pending_blocks_;
  }
  // One READY block of exactly need bytes, in the ready index for the
  // moment it takes Finish to hand it out whole (its queue entries, if it
  // was pending, go stale with the stamp).
  Block* const after = tail->next;
  while (first->next != after) Absorb(first, first->next);
  first->state = BlockState::kReady;
  first->stamp = 0;
  first->stream = kNoStream;
  first->unmapped = 0;
  first->observed_epoch = 0;
  first->observed_stream = kNoStream;
  InsertFree(first);
  return first;
}

// ---------------------------------------------------------------- freeing

void MemPool::Unpublish(const Block* b) {
  if (page_map_ != nullptr) page_map_->Clear(b->addr(), b);
}

void MemPool::FreeAsync(Block* b, StreamIndex s, Position f) {
  SP_CHECK(b->state == BlockState::kLive);
  Unpublish(b);
  StoreRelaxed(b->used_elsewhere, false);
  used_ -= b->size();
  requested_ -= static_cast<int64_t>(b->requested);
  --live_blocks_;
  ++stats_.free_count;
  MakePending(b, s, f, next_free_seq_++);
}

void MemPool::FreeDeferred(Block* b, StreamIndex s, Position f, absl::Span<const Use> uses) {
  SP_CHECK(b->state == BlockState::kLive);
  Unpublish(b);
  used_ -= b->size();
  requested_ -= static_cast<int64_t>(b->requested);
  --live_blocks_;
  ++stats_.free_count;
  b->state = BlockState::kDeferred;
  b->stream = s;
  b->free_pos = f;
  StoreRelaxed(b->used_elsewhere, false);
  deferred_.push_back(Deferred{b, s, f, absl::InlinedVector<Use, 2>(uses.begin(), uses.end())});
}

template <typename BoundOf>
void MemPool::SettleDeferred(BoundOf bound_of, bool observed) {
  if (deferred_.empty()) return;
  size_t kept = 0;
  for (size_t i = 0; i < deferred_.size(); ++i) {
    Deferred& d = deferred_[i];
    bool complete = d.f <= bound_of(d.s);
    for (const Use& u : d.uses) complete = complete && u.second <= bound_of(u.first);
    if (!complete) {
      if (kept != i) deferred_[kept] = std::move(d);
      ++kept;
      continue;
    }
    // Reuse by observation counts as opportunistic for every stream: the
    // block held work of several.
    d.block->stream = kNoStream;
    d.block->free_pos = 0;
    MakeReady(d.block, observed);
  }
  deferred_.resize(kept);
}

void MemPool::FreeNow(Block* b) {
  SP_CHECK(b->state == BlockState::kLive);
  Unpublish(b);
  StoreRelaxed(b->used_elsewhere, false);
  used_ -= b->size();
  requested_ -= static_cast<int64_t>(b->requested);
  --live_blocks_;
  ++stats_.free_count;
  MakeReady(b);
}

template <typename BoundOf>
void MemPool::PromoteUpTo(BoundOf bound_of, bool observed) {
  index_.PopUpTo(bound_of, [&](Block* b) {
    --pending_blocks_;
    MakeReady(b, observed);
  });
}

void MemPool::Promote(const VectorClock& done) {
  FlushCaches();
  ++proof_epoch_;
  PromoteUpTo([&done](StreamIndex s) { return done.Get(s); }, /*observed=*/false);
  SettleDeferred([&done](StreamIndex s) { return done.Get(s); }, /*observed=*/false);
}

void MemPool::PromoteObservedOn(StreamIndex s, Position complete) {
  FlushCache(s);
  PromoteUpTo([s, complete](StreamIndex r) { return r == s ? complete : 0; }, /*observed=*/true);
}

void MemPool::PromoteObserved(const OrderOracle& oracle) {
  FlushCaches();
  PromoteUpTo([&oracle](StreamIndex s) { return oracle.ObservedComplete(s); }, /*observed=*/true);
  SettleDeferred([&oracle](StreamIndex s) { return oracle.ObservedComplete(s); },
                 /*observed=*/true);
}

// ---------------------------------------------------------------- queries

bool MemPool::Owns(uintptr_t addr) const { return backing_.ChunkAt(addr) != nullptr; }

Block* MemPool::LiveBlockContaining(uintptr_t addr) const {
  const Chunk* c = backing_.ChunkAt(addr);
  if (c == nullptr) return nullptr;
  for (Block* b = c->first; b != nullptr; b = b->next) {
    if (addr < b->end()) return b->state == BlockState::kLive ? b : nullptr;
  }
  return nullptr;
}

}  // namespace internal
}  // namespace streampool
