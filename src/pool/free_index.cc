#include "src/pool/free_index.h"

#include <algorithm>

#include "src/pool/pool_backing.h"
#include "src/util/check.h"

namespace streampool::internal {

void FreeIndex::Insert(Block* b) {
  if (b->state == BlockState::kReady) {
    (b->unmapped == 0 ? ready_ : unbacked_).Insert(&b->node);
  } else {
    SP_DCHECK(b->state == BlockState::kPending);
    frees_[b->stream]->index.Insert(&b->node);
  }
}

void FreeIndex::Remove(Block* b) {
  if (b->state == BlockState::kReady) {
    (b->unmapped == 0 ? ready_ : unbacked_).Remove(&b->node);
  } else {
    SP_DCHECK(b->state == BlockState::kPending);
    frees_[b->stream]->index.Remove(&b->node);
  }
}

StreamFrees& FreeIndex::FreesOf(StreamIndex s) {
  if (s >= frees_.size()) frees_.resize(s + 1);
  if (!frees_[s]) frees_[s] = std::make_unique<StreamFrees>();
  return *frees_[s];
}

void FreeIndex::Activate(StreamIndex s) {
  StreamFrees& f = *frees_[s];
  if (f.active) return;
  f.active = true;
  active_.push_back(s);
}

Block* FreeIndex::FindOwn(StreamIndex t, uint64_t need) {
  Block* chosen = nullptr;
  if (SizeIndexNode* n = ready_.FindBestFit(need)) chosen = Block::FromNode(n);
  if (t < frees_.size() && frees_[t] && !frees_[t]->index.empty()) {
    if (SizeIndexNode* n = frees_[t]->index.FindBestFit(need)) {
      Block* own = Block::FromNode(n);
      if (Better(own, chosen)) chosen = own;
    }
  }
  if (chosen == nullptr && !unbacked_.empty()) chosen = FindMappedLowEnd(need);
  return chosen;
}

Block* FreeIndex::FindMappedLowEnd(uint64_t size) {
  // Few blocks span unmapped granules (the top of each reservation and the
  // ranges a release left), so a bounded probe in best-fit order finds one
  // whose low end is mapped far enough, if any.
  SizeIndexNode* n = unbacked_.FindBestFitIf(
      size,
      [size](SizeIndexNode* x) {
        const Block* b = Block::FromNode(x);
        return PoolBacking::CountUnmapped(b->chunk, b->addr(), b->addr() + size) == 0;
      },
      kCrossStreamProbes);
  return n == nullptr ? nullptr : Block::FromNode(n);
}

Block* FreeIndex::FindOrdered(StreamIndex t, uint64_t need, const OrderOracle& oracle) {
  Block* chosen = nullptr;
  for (StreamIndex s : active_) {
    if (s == t) continue;
    Block* b = frees_[s]->FindEligible(need, oracle.OrderedAfter(s), kCrossStreamProbes);
    if (Better(b, chosen)) chosen = b;
  }
  return chosen;
}

void FreeIndex::SetWaitBounds(StreamIndex t, const OrderOracle* free_waits) {
  // Each stream's bound, asked of the oracle once.
  wait_bounds_.assign(frees_.size(), kNoBound);
  if (free_waits == nullptr) return;
  for (StreamIndex s : active_) {
    if (s != t) wait_bounds_[s] = free_waits->CompletesBeforeAllocation(s);
  }
}

Block* FreeIndex::FirstPendingFree(StreamIndex t, uint64_t size) const {
  // Slow paths only (before growth, or once it failed): a walk over each
  // stream's pending frees in free order, to its first that fits within the
  // stream's bound.
  Block* best = nullptr;
  for (StreamIndex s : active_) {
    if (s == t) continue;
    const StreamFrees& frees = *frees_[s];
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

Block* FreeIndex::FindJoin(StreamIndex t, uint64_t need) {
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
  auto waited = [t](const Block* b) { return Waited(b, t); };
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
  return best;
}

uint64_t FreeIndex::PendingBytesBesides(StreamIndex t) const {
  uint64_t bytes = 0;
  for (StreamIndex s : active_) {
    if (s == t) continue;
    frees_[s]->index.ForEach([&bytes](const SizeIndexNode* n) { bytes += n->size; });
  }
  return bytes;
}

uint64_t FreeIndex::LargestFree() const {
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
  return largest;
}

size_t FreeIndex::pending_size() const {
  size_t n = 0;
  for (StreamIndex s : active_) n += frees_[s]->index.size();
  return n;
}

bool FreeIndex::CheckInvariants() const {
  if (!ready_.CheckInvariants() || !unbacked_.CheckInvariants()) return false;
  size_t listed = 0;
  for (StreamIndex s : active_) {
    const StreamFrees& f = *frees_[s];
    if (!f.active || !f.CheckInvariants(s)) return false;
  }
  for (StreamIndex s = 0; s < frees_.size(); ++s) {
    if (!frees_[s]) continue;
    if (frees_[s]->active) {
      ++listed;
    } else if (!frees_[s]->index.empty()) {
      return false;
    }
  }
  return listed == active_.size();
}

}  // namespace streampool::internal
