// FreeIndex: a pool's central index of free blocks, what the ladder of
// reuse rules (mem_pool_ladder.cc) searches. READY blocks by best fit, those
// wholly mapped apart from those spanning unmapped granules (expandable
// pools); PENDING blocks by their freeing stream (StreamFrees), with the
// list of streams that have any. Its searches are the rules' candidates:
// rule 1 (FindOwn), rule 2 (FindOrdered), rule 5's single free
// (FirstPendingFree) and join (FindJoin); MemPool, which owns the blocks'
// states, decides what a found block becomes.
//
// Invariants (CheckInvariants):
//   every listed stream is active, once, and its StreamFrees holds;
//   a stream with indexed frees is listed
#ifndef STREAMPOOL_SRC_POOL_FREE_INDEX_H_
#define STREAMPOOL_SRC_POOL_FREE_INDEX_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "src/ordering/oracle.h"
#include "src/pool/block.h"
#include "src/pool/size_index.h"
#include "src/pool/stream_frees.h"

namespace streampool::internal {

class FreeIndex {
 public:
  // Cross-stream candidates examined per stream by rules 2 and 3 when only
  // part of that stream's pending frees are eligible. 32 keeps a miss cheap
  // (a few hundred ns) while typical producer/consumer patterns, whose
  // eligible frees are the oldest and hence usually fit first, still hit.
  static constexpr size_t kCrossStreamProbes = 32;
  static constexpr Position kNoBound = ~Position{0};

  // A free block into the index its state names (READY by whether it spans
  // unmapped granules, PENDING by its stream), or out of it.
  void Insert(Block* b);
  void Remove(Block* b);
  // Stream s's pending frees, made on first use.
  StreamFrees& FreesOf(StreamIndex s);
  // s has pending frees: listed among the streams the rules walk.
  void Activate(StreamIndex s);
  bool HasPendingOn(StreamIndex s) const {
    return s < frees_.size() && frees_[s] && !frees_[s]->index.empty();
  }
  bool IsListed(StreamIndex s) const { return s < frees_.size() && frees_[s] && frees_[s]->active; }
  // Streams listed with pending frees.
  const std::vector<StreamIndex>& active() const { return active_; }
  const StreamFrees& frees(StreamIndex s) const { return *frees_[s]; }

  SizeIndex& ready() { return ready_; }
  const SizeIndex& ready() const { return ready_; }
  SizeIndex& unbacked() { return unbacked_; }
  const SizeIndex& unbacked() const { return unbacked_; }

  // Pops queue entries of every listed stream up to bound_of(s), each still
  // pending block out of its index and handed to made_ready; a stream left
  // without pending frees leaves the list.
  template <typename BoundOf, typename MadeReady>
  void PopUpTo(BoundOf bound_of, MadeReady made_ready);

  // Rule 1: the best fit among READY blocks and t's own pending frees, else
  // a READY block whose mapped low end holds need; null when none fits.
  Block* FindOwn(StreamIndex t, uint64_t need);
  // A READY block spanning unmapped granules whose mapped low end holds
  // `size` bytes, or null.
  Block* FindMappedLowEnd(uint64_t size);
  // Rule 2: the best fit among other streams' frees that t is ordered after
  // (oracle.OrderedAfter), or null.
  Block* FindOrdered(StreamIndex t, uint64_t need, const OrderOracle& oracle);
  // Rule 5's bounds: per stream, the latest free point a wait may be on.
  // With free_waits, each other listed stream's CompletesBeforeAllocation (a
  // wait that delays nothing); without, any.
  void SetWaitBounds(StreamIndex t, const OrderOracle* free_waits);
  // Rule 5: the pending free of another stream within its bound that came
  // first in host order and holds size bytes, or null.
  Block* FirstPendingFree(StreamIndex t, uint64_t size) const;
  // Rule 5's join: the first block of the best run of address-adjacent free
  // blocks (wholly mapped READY ones, t's pending ones and other streams'
  // within their bounds) that holds need bytes and waits on another stream,
  // or null; the best waits on the fewest streams, then on the earliest
  // latest free, then lies lowest.
  Block* FindJoin(StreamIndex t, uint64_t need);
  // Whether b, a block of a run FindJoin found, is waited on by t.
  static bool Waited(const Block* b, StreamIndex t) {
    return b->state == BlockState::kPending && b->stream != t;
  }
  // Bytes of other streams' pending frees.
  uint64_t PendingBytesBesides(StreamIndex t) const;
  // The largest block serving without growth: READY, by its mapped low end
  // when it spans unmapped granules, or pending on any stream.
  uint64_t LargestFree() const;

  size_t pending_size() const;
  bool CheckInvariants() const;

  // Best fit across indexes, ties as inside one (SizeIndexNode::order).
  static bool Better(const Block* a, const Block* b) {
    return b == nullptr ||
           (a != nullptr &&
            (a->size() != b->size() ? a->size() < b->size() : a->node.order < b->node.order));
  }

 private:
  SizeIndex ready_;
  // READY blocks with unmapped granules (expandable pools).
  SizeIndex unbacked_;
  std::vector<std::unique_ptr<StreamFrees>> frees_;  // by StreamIndex
  std::vector<StreamIndex> active_;                  // streams with pending frees
  // Per stream, the latest free point rule 5 may wait on; kept, with
  // FindJoin's scratch, so that the slow path allocates nothing in steady
  // state.
  std::vector<Position> wait_bounds_;
  std::vector<uint32_t> join_counts_;
  std::vector<Block*> join_latest_;
  absl::flat_hash_set<const Block*> join_seen_;
};

template <typename BoundOf, typename MadeReady>
void FreeIndex::PopUpTo(BoundOf bound_of, MadeReady made_ready) {
  for (size_t i = 0; i < active_.size();) {
    const StreamIndex s = active_[i];
    StreamFrees& frees = *frees_[s];
    const Position d = bound_of(s);
    while (!frees.queue.empty() && frees.queue.front().f <= d) {
      const StreamFrees::Entry e = frees.queue.front();
      frees.queue.pop_front();
      if (!StreamFrees::IsValid(e)) continue;
      frees.index.Remove(&e.block->node);
      made_ready(e.block);
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

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_FREE_INDEX_H_
