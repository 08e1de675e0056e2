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

Block* MemPool::WaitForPending(StreamIndex t, uint64_t need, OrderOracle& oracle, WaitOn on) {
  // Each stream's bound: a wait that delays nothing, or any.
  index_.SetWaitBounds(t, on == WaitOn::kFreeWaits ? &oracle : nullptr);
  // As rule 5 chooses (and RMM's pool steals), the free that came first;
  // else a join.
  if (Block* b = index_.FirstPendingFree(t, need)) {
    oracle.InsertWait(b->stream, b->free_pos);
    ++stats_.waits_inserted;
    return b;
  }
  // A join walks the pending frees; where growth is the alternative, only
  // while they are few, so that a pool of many scattered frees that never
  // complete (nothing synchronizes, observation off) does not pay that walk
  // at every growth.
  if (on != WaitOn::kAfterGrowth && pending_blocks_ > kJoinBeforeGrowthBlocks) return nullptr;
  return JoinPending(t, need, oracle);
}

Block* MemPool::JoinPending(StreamIndex t, uint64_t need, OrderOracle& oracle) {
  Block* best = index_.FindJoin(t, need);
  if (best == nullptr) return nullptr;
  // One wait per other stream, on its latest free in the window, in stream
  // order.
  absl::InlinedVector<std::pair<StreamIndex, Position>, 4> waits;
  uint64_t bytes = 0;
  Block* last = best;
  for (Block* b = best;; b = b->next) {
    if (FreeIndex::Waited(b, t)) {
      auto it = std::find_if(waits.begin(), waits.end(),
                             [b](const auto& w) { return w.first == b->stream; });
      if (it == waits.end()) {
        waits.emplace_back(b->stream, b->free_pos);
      } else {
        it->second = std::max(it->second, b->free_pos);
      }
    }
    bytes += b->size();
    last = b;
    if (bytes >= need) break;
  }
  std::sort(waits.begin(), waits.end());
  for (const auto& [s, f] : waits) {
    oracle.InsertWait(s, f);
    ++stats_.waits_inserted;
  }
  ++stats_.joined_reuses;
  return JoinRun(best, last, need);
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
  if (Block* b = caches_.Take(*c, t, need, size)) {
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
  Block* chosen = index_.FindOwn(t, need);
  if (chosen != nullptr) {
    *how = chosen->state == BlockState::kPending ? ReuseRule::kSameStream : ReadyRule(chosen, t);
  }
  return chosen;
}

absl::StatusOr<MemPool::Allocation> MemPool::Allocate(uint64_t size, OrderOracle& oracle) {
  SP_DCHECK(size > 0);
  const std::optional<uint64_t> rule_size = rule_.Apply(size);
  if (!rule_size || *rule_size > backing_.max_size()) {
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
      chosen = index_.FindOrdered(t, need, oracle);
      how = ReuseRule::kEventDependency;
    }
    // Rule 3: frees observed complete become READY and merge; then READY
    // blocks again (this is also the promotion before growth).
    if (chosen == nullptr && opportunistic_ && HasFreesToObserve()) {
      PromoteObserved(oracle);
      if (SizeIndexNode* n = index_.ready().FindBestFit(need)) {
        chosen = Block::FromNode(n);
      } else if (!index_.unbacked().empty()) {
        chosen = index_.FindMappedLowEnd(need);
      }
      if (chosen != nullptr) how = ReadyRule(chosen, t);
    }
  };
  const uint64_t flushes_before = caches_.flushes();
  search(/*own=*/false);
  // Front caches never make the pool grow: what they hold goes central (and
  // is promoted, with the switch on) before rules 1-3 are tried once more --
  // also when rule 3's promotion already flushed them during the search.
  if (chosen == nullptr && (FlushCaches() || caches_.flushes() != flushes_before)) {
    search(/*own=*/true);
  }
  // Waiting before growing (rule 5 on): a wait that delays nothing, then,
  // once growth would pass the soft reserved limit, any wait.
  if (chosen == nullptr && internal_deps_) {
    const uint64_t waits_before = stats_.waits_inserted;
    if (wait_before_growth_) chosen = WaitForPending(t, need, oracle, WaitOn::kFreeWaits);
    if (chosen == nullptr && backing_.reserved() + need > soft_reserved_limit_) {
      chosen = WaitForPending(t, need, oracle, WaitOn::kAnyBeforeGrowth);
    }
    if (chosen != nullptr) {
      stats_.waits_before_growth += stats_.waits_inserted - waits_before;
      how = ReuseRule::kInternalDependency;
    }
  }
  // Rule 4: growth.
  absl::Status upstream_error;
  if (chosen == nullptr) {
    chosen = Grow(need, &upstream_error);
    if (chosen != nullptr) how = ReadyRule(chosen, t);
  }
  // Rule 5: wait for other streams' frees.
  if (chosen == nullptr && internal_deps_) {
    chosen = WaitForPending(t, need, oracle, WaitOn::kAfterGrowth);
    if (chosen != nullptr) how = ReuseRule::kInternalDependency;
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
          ? absl::StrCat("out of memory: ", need, " bytes with ", backing_.reserved(),
                         " reserved of ", backing_.max_size(), " allowed and ",
                         backing_.budget()->capacity() - backing_.budget()->used(),
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
  uint64_t bytes = index_.PendingBytesBesides(t);
  for (const Deferred& d : deferred_) bytes += d.block->size();
  // Other streams' caches, by what they publish: their owners may be
  // pushing frees meanwhile.
  caches_.ForEach([&](const FrontCache& c) {
    if (c.stream() != t) bytes += c.published_bytes();
  });
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
  if (caches_.Exceeds(used_, stats_.used_high)) Reconcile(/*reset_high=*/false);
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
