// Observation: what tools and tests read about a runtime besides its
// results — the stream-order checker's switch and reports, the simulator's
// timeline, and the ordering core's state for models.
#ifndef STREAMPOOL_SRC_RUNTIME_OBSERVATION_H_
#define STREAMPOOL_SRC_RUNTIME_OBSERVATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {

class Observation {
 public:
  explicit Observation(RuntimeCore& core) : c_(core) {}
  Observation(const Observation&) = delete;
  Observation& operator=(const Observation&) = delete;

  // The ordering core's and the simulator's state, for tests and tools that
  // compare the runtime against a model (not part of the public API).
  struct Introspection {
    std::vector<VectorClock> clocks;  // VC(S) by stream index
    std::vector<Position> positions;  // pos(S)
    VectorClock done;                 // proven complete
    std::vector<TimeNs> last_end;     // simulator: end of S's last op (empty otherwise)
  };
  Introspection Introspect();
  void EnableChecker(bool on, bool fatal);
  std::vector<streampool::CheckReport> CheckReports();
  void ClearCheckReports();
  void RecordTimeline(bool on);
  // The runtime's history from now on, as a v1 trace at `path` (recorder.h);
  // kInvalidArgument when one is already open or the file cannot be made.
  absl::Status StartRecording(const std::string& path);
  // Completes the file; kInvalidArgument when none is open, kInternal when
  // writing it failed (the recording still ends).
  absl::Status StopRecording();
  // Where a live pool allocation starting at `ptr` lies: its chunk's id in
  // the pool and its offset there, what a recording writes of each decision
  // and a replay compares. kInvalidArgument for anything else.
  struct BlockPlace {
    uint64_t chunk = 0;
    uint64_t offset = 0;
  };
  absl::StatusOr<BlockPlace> PlaceOf(const void* ptr);
  std::vector<TimelineEntry> Timeline();
  // Keeps every wait the pools insert from now on (reuse rule 5: the
  // allocating stream waits for another stream's free), until taken. A
  // replay takes them after each allocation, whose decision they are part
  // of. Off drops what was kept.
  struct InternalWait {
    StreamId stream;        // the freeing stream
    Position position = 0;  // its free point
  };
  void LogInternalWaits(bool on);
  // What a replay keeps of the allocation just made at `ptr` (null: none,
  // it failed or had size 0): PlaceOf's answer and the waits kept since the
  // last call, taken. One call, so that a replay that keeps decisions pays
  // one trip through the runtime's lock per allocation.
  struct DecisionFacts {
    std::optional<BlockPlace> place;
    std::vector<InternalWait> waits;
  };
  absl::StatusOr<DecisionFacts> TakeDecision(const void* ptr);
  // The embedder's out-of-memory handler (empty: none); RuntimeCore says
  // when it runs.
  void SetOomHandler(std::function<bool(uint64_t pool, uint64_t size)> handler);

 private:
  RuntimeCore& c_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_OBSERVATION_H_
