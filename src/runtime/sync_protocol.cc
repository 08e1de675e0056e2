#include "src/runtime/sync_protocol.h"

namespace streampool::internal {

absl::Status SyncProtocol::SyncStreams(absl::Span<const StreamIndex> streams) {
  // What is proven is what was enqueued at the call: later work (other host
  // threads may enqueue while we wait) is not covered.
  std::vector<std::pair<StreamIndex, Position>> points;
  std::vector<VectorClock> proofs;
  {
    MutexLock order_lock(&c_.seq.mu());
    for (StreamIndex s : streams) {
      points.emplace_back(s, c_.seq.ordering().pos(s));
      proofs.push_back(c_.seq.ordering().clock(s));
    }
  }
  if (absl::Status st = WaitPoints(points); !st.ok()) return st;
  Complete(proofs, /*release=*/true);
  return absl::OkStatus();
}

void SyncProtocol::Complete(absl::Span<const VectorClock> proofs, bool release) {
  // The ordering core first, then the pools: a pool's lock comes before the
  // ordering core's, so the proof is copied out rather than held.
  VectorClock done;
  {
    MutexLock order_lock(&c_.seq.mu());
    if (release) c_.seq.executor()->RunDueEffects();
    for (const VectorClock& proof : proofs) c_.seq.ordering().MarkComplete(proof);
    done = c_.seq.ordering().done();
  }
  c_.pools.AfterCompletion(done, release);
}

absl::Status SyncProtocol::WaitPoints(absl::Span<const std::pair<StreamIndex, Position>> points,
                                      bool interruptible) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<std::pair<StreamIndex, Position>> ops;
  ThreadExecutor* threads;
  Executor* executor;
  {
    MutexLock order_lock(&c_.seq.mu());
    executor = c_.seq.executor();
    threads = c_.seq.threads();
    if (!executor->blocks_host()) {
      // Virtual time: the simulator runs to the points under the ordering
      // core's lock (it is not thread safe); nothing really blocks.
      for (const auto& [s, p] : points) executor->WaitFor(s, c_.seq.OpAtOrBefore(s, p));
      return absl::OkStatus();
    }
    for (const auto& [s, p] : points) ops.emplace_back(s, c_.seq.OpAtOrBefore(s, p));
  }
  // Workers run effects that take the runtime's lock (Malloc memory going
  // back), and other host threads go on meanwhile. A destroy cannot free the
  // executor under us: it waits for this call to leave, after waking it.
  c_.mu.Unlock();
  for (const auto& [s, p] : ops) {
    if (threads != nullptr && interruptible) {
      if (!threads->HostWaitFor(s, p)) break;
    } else {
      executor->WaitFor(s, p);
    }
  }
  c_.mu.Lock();
  return Interrupted(interruptible);
}

absl::Status SyncProtocol::Interrupted(bool interruptible) const {
  if (interruptible && c_.gate.closed()) {
    return absl::NotFoundError("runtime destroyed while the call waited");
  }
  return absl::OkStatus();
}

absl::Status SyncProtocol::WaitIpc(const std::shared_ptr<IpcEventSegment>& seg,
                                   uint64_t seq) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Another process completes it; other host threads may use the runtime
  // meanwhile (and our own workers may need the lock). A destroy ends the
  // wait at the segment's next poll.
  c_.mu.Unlock();
  seg->WaitComplete(seq, &c_.gate);
  c_.mu.Lock();
  return Interrupted(/*interruptible=*/true);
}

absl::Status SyncProtocol::SyncPoint(std::pair<StreamIndex, Position> point,
                                     const VectorClock& proof) {
  if (absl::Status st = WaitPoints({&point, 1}); !st.ok()) return st;
  Complete({&proof, 1}, /*release=*/true);
  return absl::OkStatus();
}

void SyncProtocol::Proven(const VectorClock& proof) { Complete({&proof, 1}, /*release=*/false); }

}  // namespace streampool::internal
