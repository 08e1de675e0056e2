// Observation: what tools and tests read about a runtime besides its
// results — the stream-order checker's switch and reports, the simulator's
// timeline, and the ordering core's state for models.
#ifndef STREAMPOOL_SRC_RUNTIME_OBSERVATION_H_
#define STREAMPOOL_SRC_RUNTIME_OBSERVATION_H_

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
  std::vector<TimelineEntry> Timeline();

 private:
  RuntimeCore& c_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_OBSERVATION_H_
