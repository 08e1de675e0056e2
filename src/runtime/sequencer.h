// Sequencer: the ordering core and the executor behind one lock, and the
// steps every part takes on them.
//
// Contract. Every op and point of a runtime's streams gets its position here
// (Ordering: positions, vector clocks, legacy-stream rules, proven
// completion) and then, if it is an op, its time from the executor; both
// change only under mu(), but what the fast path reaches lock-free: a
// stream's lock and pos(S), which that lock orders. Executors wait for ops;
// a point (an allocation, a free) is a position only, reached once the op
// before it completes: EnqueueOp and OpAtOrBefore turn a wait for a point
// into a wait for its op, PointsThrough and ExecutedThrough turn a completed
// op into the points after it (an adapter marks points itself: there a
// point is its own op). Where time is virtual (sim()), SimLastEnd and
// SimAllocReady say when a point is reached. The executor is installed once
// and dropped at teardown (set_executor); sim(), adapter() and threads() name
// it where it is of that kind, else null. Nothing is taken under mu() but
// stream locks and the executor's own, and nothing blocks under it but the
// simulator's virtual waits; it knows no pool, handle or runtime.
#ifndef STREAMPOOL_SRC_RUNTIME_SEQUENCER_H_
#define STREAMPOOL_SRC_RUNTIME_SEQUENCER_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "src/exec/adapter_executor.h"
#include "src/exec/thread_executor.h"
#include "src/ordering/ordering.h"
#include "src/sim/sim_executor.h"
#include "src/util/mutex.h"
#include "streampool/executor.h"

namespace streampool::internal {

class Sequencer {
 public:
  // call_ns: the simulated host cost of each call (0: none).
  explicit Sequencer(uint64_t call_ns) : call_ns_(call_ns) {}
  Sequencer(const Sequencer&) = delete;
  Sequencer& operator=(const Sequencer&) = delete;

  // The lock (docs/design.md, "Performance model"): an allocation the pool
  // must judge against other streams (reuse rules 2, 3 and 5) or grow for
  // takes its pool's lock and this, not the runtime's. Order: the runtime's
  // lock, a pool's lock, this, a stream lock.
  Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  Ordering& ordering() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ordering_; }
  const Ordering& ordering() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ordering_; }
  // Null before set_executor and after the teardown's set_executor(nullptr).
  Executor* executor() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return executor_.get(); }
  SimExecutor* sim() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sim_; }
  AdapterExecutor* adapter() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return adapter_; }
  // The threads executor, whose host waits a destroy interrupts.
  ThreadExecutor* threads() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_; }
  void set_executor(std::unique_ptr<Executor> executor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What is lock-free: a stream's lock, and pos(S).
  SpinLock& stream_lock(StreamIndex s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return ordering_.stream_lock(s);
  }
  Position pos(StreamIndex s) const ABSL_NO_THREAD_SAFETY_ANALYSIS { return ordering_.pos(s); }
  // Slots made so far. Slots are made under the runtime's lock and this one,
  // so either lock suffices to read it (a pool's destruction, under the
  // runtime's, must not wait for another pool's growth under this one).
  size_t stream_slots() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return ordering_.stream_count(); }

  // Charges the per-call host cost; called once a call has passed validation
  // (a failed call costs nothing) and before it enqueues anything.
  void ChargeCall() ABSL_LOCKS_EXCLUDED(mu_);
  void ChargeCallLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (call_ns_ != 0) executor_->HostAdvance(call_ns_);
  }
  // Enqueues one op on stream index s in both the ordering core and executor.
  Position EnqueueOp(StreamIndex s, OpDesc op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Completion time of the op EnqueueOp enqueued last.
  TimeNs last_enqueue_end() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return last_enqueue_end_; }
  // An allocation or free point on s: a position, not an op (docs/design.md,
  // "Performance model"); only the timeline records it.
  Position AdvancePoint(StreamIndex s, OpKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the executor's completing s's ops through c proves: up to pos(s)
  // once the last op is, since the points after it complete with it.
  Position PointsThrough(StreamIndex s, Position c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Position last = s < last_op_.size() ? last_op_[s] : 0;
    return c >= last ? ordering_.pos(s) : c;
  }
  // The highest position of s whose ops the executor reports complete.
  Position ExecutedThrough(StreamIndex s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The op a wait for (s, p) waits for: the last op at or before p (0: none).
  Position OpAtOrBefore(StreamIndex s, Position p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (adapter_ != nullptr) return p;
    return s < last_op_.size() ? std::min(p, last_op_[s]) : 0;
  }
  // The end time of the op last enqueued on s, when time is virtual.
  TimeNs SimLastEnd(StreamIndex s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When an allocation point on t is usable: t's next op also waits for the
  // legacy-stream ordering (virtual time only).
  TimeNs SimAllocReady(StreamIndex t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<StreamIndex> StreamsOfDevice(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // While on (Observation::LogInternalWaits), every wait a pool inserts
  // (reuse rule 5) is kept as the free's (stream index, position) until
  // taken, so that a replay can say which allocation made which wait.
  // Turning it either way drops what was kept.
  void LogWaits(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    log_waits_ = on;
    wait_log_.clear();
  }
  void NoteWait(StreamIndex s, Position f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (log_waits_) wait_log_.emplace_back(s, f);
  }
  std::vector<std::pair<StreamIndex, Position>> TakeWaits() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::exchange(wait_log_, {});
  }

 private:
  const uint64_t call_ns_;
  mutable Mutex mu_{LockRank::kOrdering};
  Ordering ordering_ ABSL_GUARDED_BY(mu_);  // stream locks and pos(S): lock-free
  std::unique_ptr<Executor> executor_ ABSL_GUARDED_BY(mu_);
  SimExecutor* sim_ ABSL_GUARDED_BY(mu_) = nullptr;
  AdapterExecutor* adapter_ ABSL_GUARDED_BY(mu_) = nullptr;
  ThreadExecutor* threads_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Position of the last op (not point) enqueued on each stream index.
  std::vector<Position> last_op_ ABSL_GUARDED_BY(mu_);
  TimeNs last_enqueue_end_ ABSL_GUARDED_BY(mu_) = 0;
  bool log_waits_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<StreamIndex, Position>> wait_log_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_SEQUENCER_H_
