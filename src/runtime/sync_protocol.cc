#include "src/runtime/sync_protocol.h"

namespace streampool::internal {

absl::Status SyncProtocol::SyncStreams(absl::Span<const StreamIndex> streams) {
  // What is proven is what was enqueued at the call: later work (other host
  // threads may enqueue while we wait) is not covered.
  std::vector<std::pair<StreamIndex, Position>> points;
  std::vector<VectorClock> proofs;
  for (StreamIndex s : streams) {
    points.emplace_back(s, c_.ordering.pos(s));
    proofs.push_back(c_.ordering.clock(s));
  }
  WaitPoints(points);
  c_.executor->RunDueEffects();
  for (const VectorClock& proof : proofs) c_.ordering.MarkComplete(proof);
  c_.pools.AfterCompletion(c_.ordering.done(), /*release=*/true);
  return absl::OkStatus();
}

void SyncProtocol::WaitPoints(absl::Span<const std::pair<StreamIndex, Position>> points)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!c_.executor->blocks_host()) {
    for (const auto& [s, p] : points) c_.executor->WaitFor(s, c_.OpAtOrBefore(s, p));
    return;
  }
  // Workers run effects that take this lock (Malloc memory going back).
  std::vector<std::pair<StreamIndex, Position>> ops;
  for (const auto& [s, p] : points) ops.emplace_back(s, c_.OpAtOrBefore(s, p));
  Executor* executor = c_.executor.get();
  c_.mu.Unlock();
  for (const auto& [s, p] : ops) executor->WaitFor(s, p);
  c_.mu.Lock();
}

void SyncProtocol::WaitIpc(const std::shared_ptr<IpcEventSegment>& seg,
                           uint64_t seq) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Another process completes it; other host threads may use the runtime
  // meanwhile (and our own workers may need the lock).
  c_.mu.Unlock();
  seg->WaitComplete(seq);
  c_.mu.Lock();
}

void SyncProtocol::SyncPoint(std::pair<StreamIndex, Position> point, const VectorClock& proof) {
  WaitPoints({&point, 1});
  c_.executor->RunDueEffects();
  c_.ordering.MarkComplete(proof);
  c_.pools.AfterCompletion(c_.ordering.done(), /*release=*/true);
}

void SyncProtocol::Proven(const VectorClock& proof) {
  c_.ordering.MarkComplete(proof);
  c_.pools.AfterCompletion(c_.ordering.done(), /*release=*/false);
}

}  // namespace streampool::internal
