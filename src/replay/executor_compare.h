// One trace replayed on the simulator and on a real-time executor (threads,
// cuda), allocation by allocation: how many decisions agree, where and how
// they first part, and whether they agree up to the first that observation
// decided.
//
// The simulator decides by virtual time, a real executor by what its
// workers or the GPU have finished when the host asks. Rule 3
// (opportunistic reuse of a free observed complete) is the one rule that
// asks, so a difference where either side took rule 3 is the executor's
// timing, not a fault; every decision before the first such difference
// should be the simulator's. One that is not, before it, is what this
// comparison is for: a real executor deciding a rule other than rule 3
// differently. Real time also reaches decisions by other ways, which show
// here the same way: a query's answer, and observation that promotes frees
// without deciding an allocation by rule 3 (a rule-3 search that still ends
// in growth, a stream created into a destroyed one's slot), after which a
// READY block may be placed or counted otherwise. The count of queries
// before the first difference tells the first kind apart.
#ifndef STREAMPOOL_SRC_REPLAY_EXECUTOR_COMPARE_H_
#define STREAMPOOL_SRC_REPLAY_EXECUTOR_COMPARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"
#include "streampool/runtime.h"

namespace streampool::replay {

// Two replays' decisions, index by index (the trace's allocations in order).
struct DecisionDiff {
  uint64_t compared = 0;  // allocations both replays decided
  uint64_t equal = 0;
  // The first index whose decisions differ; nullopt when none does.
  std::optional<uint64_t> first_difference;
  // The first index whose decisions differ and where either took rule 3.
  std::optional<uint64_t> first_observation_difference;
  // Every decision before first_observation_difference (every decision,
  // when there is none) is the same: no difference comes before the first
  // rule-3 one.
  bool equal_before_observation = true;
};
DecisionDiff DiffDecisions(absl::Span<const ReplayDecision> simulator,
                           absl::Span<const ReplayDecision> executor);

struct ExecutorComparison {
  std::string trace;    // its name
  std::string setting;  // ReplaySettings::Label()
  ExecutorKind executor = ExecutorKind::kThreads;
  // Why the executor's replay did not run, as the report prints it after
  // "skipped: " ("no CUDA device (...)"); empty when it ran.
  std::string skipped;
  DecisionDiff diff;
  // The two decisions at diff.first_difference, when there is one, and the
  // trace's queries (StreamQuery, EventQuery) before its line.
  ReplayDecision simulator_first, executor_first;
  uint64_t queries_before_first_difference = 0;
  // Figures of both replays: peak reserved bytes, allocations that failed,
  // wall-clock time (the executor's is real work, the simulator's
  // bookkeeping), and the executor's inserted waits against the simulator's.
  uint64_t simulator_peak_reserved = 0, executor_peak_reserved = 0;
  uint64_t simulator_failed = 0, executor_failed = 0;
  uint64_t simulator_waits = 0, executor_waits = 0;
  uint64_t simulator_wall_ns = 0, executor_wall_ns = 0;
};

// Replays `trace` at `settings` on the simulator and on `executor` (not the
// simulator), keeping every decision of both. Where the executor's runtime
// cannot be made because the machine has no CUDA driver or device, or fewer
// devices than the trace needs, the comparison is skipped, not an error;
// any other failure of either replay is.
absl::StatusOr<ExecutorComparison> CompareExecutors(const Trace& trace,
                                                    const ReplaySettings& settings,
                                                    ExecutorKind executor);

// Text: a paragraph per comparison. JSON: {"schema":
// "streampool-executor-compare/1", "comparisons": [...]}, a comparison's
// fields under the names above (decisions by their rule, pool, chunk,
// offset and failed).
std::string FormatComparisonText(const std::vector<ExecutorComparison>& comparisons);
std::string FormatComparisonJson(const std::vector<ExecutorComparison>& comparisons);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_EXECUTOR_COMPARE_H_
