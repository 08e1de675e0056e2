// StreamFrees: one stream's pending frees in one pool, the candidates of
// rule 1 (its own stream's) and of rules 2, 3 and 5 (another's). A best-fit
// index over its PENDING blocks, and the queue of every pending incarnation
// in free order, which promotion pops up to a proven or observed point. An
// entry whose block has since been merged, reused or promoted is stale (the
// block's stamp moved on) and is skipped.
//
// Invariants (CheckInvariants):
//   the queue ascends in f, and max_f >= every queued f
//   |valid entries| == |index|, each valid entry's block PENDING on this
//   stream at the entry's free point
#ifndef STREAMPOOL_SRC_POOL_STREAM_FREES_H_
#define STREAMPOOL_SRC_POOL_STREAM_FREES_H_

#include <algorithm>
#include <cstdint>

#include "src/pool/block.h"
#include "src/pool/size_index.h"
#include "src/util/ring.h"

namespace streampool::internal {

struct StreamFrees {
  struct Entry {
    Position f;
    uint64_t stamp;
    Block* block;
  };

  SizeIndex index;
  Ring<Entry> queue;
  Position max_f = 0;
  // Listed among the pool's streams with pending frees.
  bool active = false;

  static bool IsValid(const Entry& e) {
    return e.block->state == BlockState::kPending && e.block->stamp == e.stamp;
  }
  // b was just made PENDING at f (and is in the index).
  void Queue(Block* b, Position f) {
    queue.push_back(Entry{f, b->stamp, b});
    max_f = std::max(max_f, f);
    // Stale entries pile up in a workload that never synchronizes; dropping
    // them when they outnumber live ones keeps the queue O(pending) amortized.
    if (queue.size() > 2 * index.size() + 64) queue.Filter(&IsValid);
  }
  // The best fit of at least `size` whose free point is <= bound, or null;
  // at most `probes` candidates when only part of the frees are eligible.
  Block* FindEligible(uint64_t size, Position bound, size_t probes);
  bool CheckInvariants(StreamIndex s) const;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_STREAM_FREES_H_
