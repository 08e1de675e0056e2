// SyncProtocol: how a synchronize call turns waiting into freed memory.
//
// wait for the points -> run the effects due -> mark what the wait proved
// complete in the ordering core -> promote PENDING blocks to READY in every
// pool (flushing front caches) -> release above each pool's threshold (sync
// actions only) -> reap destroyed pools that drained. This is the one place
// the runtime's lock is dropped: a wait that really blocks (threads executor,
// another process's event) lets other host threads and the workers' effects
// in meanwhile, so callers keep no pointers into the tables across it.
#ifndef STREAMPOOL_SRC_RUNTIME_SYNC_PROTOCOL_H_
#define STREAMPOOL_SRC_RUNTIME_SYNC_PROTOCOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {

class SyncProtocol {
 public:
  explicit SyncProtocol(RuntimeCore& core) : c_(core) {}
  SyncProtocol(const SyncProtocol&) = delete;
  SyncProtocol& operator=(const SyncProtocol&) = delete;

  // Synchronizes streams: what they had enqueued at the call is proven
  // complete (later work, enqueued by other host threads meanwhile, is not).
  absl::Status SyncStreams(absl::Span<const StreamIndex> streams);
  // Waits for one point and proves `proof` (an event's snapshot) complete.
  absl::Status SyncPoint(std::pair<StreamIndex, Position> point, const VectorClock& proof);
  // What a query observed complete: marked, and pools promote (no release:
  // queries are not sync actions).
  void Proven(const VectorClock& proof);
  // Blocks until every (stream, position) has completed; the lock is released
  // meanwhile when the executor really blocks. Interruptible waits (every
  // synchronize call's) end early when the runtime is being destroyed, with
  // the destroyed runtime's error; the teardown's own wait is not.
  absl::Status WaitPoints(absl::Span<const std::pair<StreamIndex, Position>> points,
                          bool interruptible = true);
  // Blocks, with the lock released, until another process's segment has
  // completed record `seq` (or the runtime is being destroyed: its error).
  absl::Status WaitIpc(const std::shared_ptr<IpcEventSegment>& seg, uint64_t seq);

 private:
  // Marks the proofs complete in the ordering core, then promotes (and, for
  // a sync action, runs due effects first and releases after) in the pools.
  void Complete(absl::Span<const VectorClock> proofs, bool release);
  // The destroyed runtime's error once a destroy has begun (interruptible
  // waits only), else OK. Called with the lock held again.
  absl::Status Interrupted(bool interruptible) const;

  RuntimeCore& c_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_SYNC_PROTOCOL_H_
