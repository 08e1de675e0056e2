// MemPool: serving an allocation, the ladder of reuse rules (mem_pool.h).
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
      c->AddRequested(static_cast<int64_t>(size));
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
  // Rule 0: the stream's front cache (a block the fast path turned down for
  // want of allowance).
  if (std::optional<Allocation> cached = TakeFromCache(t, need, size)) return *cached;
  // Rule 1: the stream's own pending frees and READY blocks.
  ReuseRule how = ReuseRule::kFresh;
  Block* chosen = FindOwn(t, need, &how);
  if (chosen != nullptr) return Finish(chosen, how, t, need, size);

  // From here on the rules ask about other streams or grow.
  oracle.NeedOrder();
  // Rules 2 and 3; run again, with rule 1, after front caches are flushed
  // before growth. (The lambda runs within this call, under the pool's lock.)
  auto search = [&](bool own) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (own) chosen = FindOwn(t, need, &how);
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
    if (chosen == nullptr && opportunistic_ && HasFreesToObserve()) {
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
  search(/*own=*/false);
  // Front caches never make the pool grow: what they hold goes central (and
  // is promoted, with the switch on) before rules 1-3 are tried once more --
  // also when rule 3's promotion already flushed them during the search.
  if (chosen == nullptr && (FlushCaches() || cache_flushes_ != flushes_before)) {
    search(/*own=*/true);
  }
  // Rule 4: growth.
  absl::Status upstream_error;
  if (chosen == nullptr) {
    chosen = Grow(need, &upstream_error);
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
    return OutOfMemory(t, need, upstream_error);
  }
  return Finish(chosen, how, t, need, size);
}

absl::Status MemPool::OutOfMemory(StreamIndex t, uint64_t need,
                                  const absl::Status& upstream_error) const {
  // An upstream's refusal is named as what it is: the pool's and the
  // device's limits had room. Either way the code is kResourceExhausted
  // (spErrorMemoryAllocation), the answer cudaMallocAsync gives.
  std::string message =
      upstream_error.ok()
          ? absl::StrCat("out of memory: ", need, " bytes with ", reserved_, " reserved of ",
                         max_size_, " allowed and ", budget_->capacity() - budget_->used(),
                         " left on the device")
          : absl::StrCat("cannot allocate ", need, " bytes: ", upstream_error.message());
  // What the reuse switches or the stream order kept from this allocation:
  // the hint that a synchronize, an event or a switch would have served it.
  if (const uint64_t pending = PendingBytesBesides(t); pending != 0) {
    absl::StrAppend(&message, "; ", pending, " bytes pending on other streams could not be used");
  }
  return absl::ResourceExhaustedError(message);
}

uint64_t MemPool::PendingBytesBesides(StreamIndex t) const {
  uint64_t bytes = 0;
  for (StreamIndex s : active_) {
    if (s == t) continue;
    frees_[s]->index.ForEach([&bytes](const SizeIndexNode* n) { bytes += n->size; });
  }
  for (const Deferred& d : deferred_) bytes += d.block->size();
  // Other streams' caches, by what they publish: their owners may be
  // pushing frees meanwhile.
  for (const std::unique_ptr<FrontCache>& c : caches_) {
    if (c->stream() != t) bytes += c->published_bytes();
  }
  return bytes;
}

MemPool::Allocation MemPool::Finish(Block* chosen, ReuseRule how, StreamIndex t, uint64_t need,
                                    uint64_t size) {
  Block* live = Carve(chosen, need);
  live->stream = t;
  live->requested = size;
  used_ += need;
  requested_ += static_cast<int64_t>(size);
  NoteRequestedHigh();
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

}  // namespace streampool::internal
