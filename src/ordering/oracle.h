// What a pool may ask about stream order while serving one allocation on
// stream T. The runtime answers from the ordering core and the executor; the
// pool never sees either, which keeps it testable against a scripted oracle.
#ifndef STREAMPOOL_SRC_ORDERING_ORACLE_H_
#define STREAMPOOL_SRC_ORDERING_ORACLE_H_

#include "streampool/executor.h"

namespace streampool::internal {

class OrderOracle {
 public:
  virtual ~OrderOracle() = default;
  // Called once per allocation, before the first question about another
  // stream and before growth: a runtime takes the lock its answers need here,
  // so that an allocation served by the stream's own frees or by READY memory
  // (rules 0 and 1) never takes it.
  virtual void NeedOrder() {}
  // The stream the allocation is made on.
  virtual StreamIndex stream() const = 0;
  // VC(T)[s]: every free point (s, f) with f <= this happens before T's next
  // op. For s == T it is T's own position.
  virtual Position OrderedAfter(StreamIndex s) const = 0;
  // The highest position of s observed complete (proven by a synchronize or
  // query, or reported by the executor). Looks only; promotes nothing.
  virtual Position ObservedComplete(StreamIndex s) const = 0;
  // The highest position of s that completes no later than T would reach
  // the allocation anyway, so that a wait of T on it delays nothing: exact
  // in the simulator (its schedule of enqueued work is fixed); elsewhere
  // only what is known complete now.
  virtual Position CompletesBeforeAllocation(StreamIndex s) const { return ObservedComplete(s); }
  // Makes T's later work wait for (s, f) (reuse rule 5).
  virtual void InsertWait(StreamIndex s, Position f) = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_ORDERING_ORACLE_H_
