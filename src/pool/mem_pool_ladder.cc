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

Block* MemPool::FirstPendingFree(StreamIndex t, uint64_t size) {
  // Slow paths only (before growth, or once it failed): a walk over each
  // stream's pending frees in free order, to its first that fits within the
  // stream's bound.
  Block* best = nullptr;
  for (StreamIndex s : active_) {
    if (s == t) continue;
    StreamFrees& frees = *frees_[s];
    for (size_t i = 0; i < frees.queue.size(); ++i) {
      const StreamFrees::Entry& e = frees.queue[i];
      if (e.f > wait_bounds_[s]) break;
      if (!StreamFrees::IsValid(e) || e.block->size() < size) continue;
      if (best == nullptr || e.block->free_seq < best->free_seq) best = e.block;
      break;  // later entries of this stream were freed later
    }
  }
  return best;
}

Block* MemPool::WaitForPending(StreamIndex t, uint64_t need, OrderOracle& oracle, WaitOn on) {
  // Each stream's bound, asked of the oracle once: a wait that delays
  // nothing, or any.
  wait_bounds_.assign(frees_.size(), kNoBound);
  if (on == WaitOn::kFreeWaits) {
    for (StreamIndex s : active_) {
      if (s != t) wait_bounds_[s] = oracle.CompletesBeforeAllocation(s);
    }
  }
  // As rule 5 chooses (and RMM's pool steals), the free that came first;
  // else a join.
  if (Block* b = FirstPendingFree(t, need)) {
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
  // For an allocation no single free serves: runs of address-adjacent free
  // blocks (wholly mapped READY ones, and PENDING ones of any stream) are
  // the candidates, each window starting at a block and ending at the first
  // block that makes it fit. The window with the fewest other streams to
  // wait on wins, then the one whose latest such free came first in host
  // order, then the lowest place. Only runs holding another stream's
  // pending free can win, so the walk starts from those frees (their
  // streams' queues) and costs what they and their runs hold, never the
  // LIVE blocks; each run is scanned once with a sliding window (per-stream
  // counts for the streams to wait on, a monotonic queue for the latest
  // free).
  auto usable = [&](const Block* b) {
    if (b->state == BlockState::kReady) return b->unmapped == 0;
    return b->state == BlockState::kPending &&
           (b->stream == t || b->free_pos <= wait_bounds_[b->stream]);
  };
  auto waited = [t](const Block* b) { return b->state == BlockState::kPending && b->stream != t; };
  join_counts_.assign(frees_.size(), 0);
  join_seen_.clear();
  Block* best = nullptr;
  size_t best_waits = 0;
  uint64_t best_latest = 0;
  auto scan_run = [&](Block* b) {
    while (b != nullptr && usable(b)) {
      // Window [a, b) holds `bytes`.
      Block* a = b;
      uint64_t bytes = 0;
      size_t streams = 0;
      join_latest_.clear();
      size_t head = 0;
      for (;;) {
        while (bytes < need && b != nullptr && usable(b)) {
          bytes += b->size();
          if (waited(b)) {
            join_seen_.insert(b);
            if (join_counts_[b->stream]++ == 0) ++streams;
            while (join_latest_.size() > head && join_latest_.back()->free_seq <= b->free_seq) {
              join_latest_.pop_back();
            }
            join_latest_.push_back(b);
          }
          b = b->next;
        }
        if (bytes < need) break;  // the run ends short: no later start fits
        // A window of one block was rule 1's or rule 5's to take.
        if (streams != 0 && a->next != b) {
          const uint64_t latest = join_latest_[head]->free_seq;
          if (best == nullptr || streams < best_waits ||
              (streams == best_waits &&
               (latest < best_latest ||
                (latest == best_latest && a->node.order < best->node.order)))) {
            best = a;
            best_waits = streams;
            best_latest = latest;
          }
        }
        bytes -= a->size();
        if (waited(a)) {
          if (--join_counts_[a->stream] == 0) --streams;
          if (join_latest_[head] == a) ++head;
        }
        a = a->next;
        if (a == b) break;  // a block alone fits: a new window starts at b
      }
      // Counts back to zero for the next window or run.
      for (Block* x = a; x != b; x = x->next) {
        if (waited(x)) --join_counts_[x->stream];
      }
    }
  };
  for (StreamIndex s : active_) {
    if (s == t) continue;
    const StreamFrees& frees = *frees_[s];
    // Free order is f's order: past the bound, nothing of s is usable.
    for (size_t i = 0; i < frees.queue.size() && frees.queue[i].f <= wait_bounds_[s]; ++i) {
      const StreamFrees::Entry& e = frees.queue[i];
      if (!StreamFrees::IsValid(e)) continue;
      // A free between two blocks that cannot join it is only ever a window
      // of one: rule 5's single search has looked at it.
      const Block* p = e.block;
      if ((p->prev == nullptr || !usable(p->prev)) && (p->next == nullptr || !usable(p->next))) {
        continue;
      }
      if (join_seen_.contains(p) || !usable(p)) continue;
      Block* start = e.block;
      while (start->prev != nullptr && usable(start->prev)) start = start->prev;
      scan_run(start);
    }
  }
  if (best == nullptr) return nullptr;
  // One wait per other stream, on its latest free in the window, in stream
  // order.
  absl::InlinedVector<std::pair<StreamIndex, Position>, 4> waits;
  uint64_t bytes = 0;
  Block* last = best;
  for (Block* b = best;; b = b->next) {
    if (waited(b)) {
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
      for (StreamIndex s : active_) {
        if (s == t) continue;
        Block* b = frees_[s]->FindEligible(need, oracle.OrderedAfter(s), kCrossStreamProbes);
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
  uint64_t bytes = 0;
  for (StreamIndex s : active_) {
    if (s == t) continue;
    frees_[s]->index.ForEach([&bytes](const SizeIndexNode* n) { bytes += n->size; });
  }
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
