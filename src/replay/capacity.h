// The smallest device that runs a trace: a search over device capacity, in
// whole 2 MiB granules, for the capacity at which a replay has no failed
// allocation. It steps down from the unconstrained peak in doubling steps
// until a replay fails, then bisects between the last that failed and the
// last that fitted; then it checks a few capacities further below (2, 3, 5,
// 9, ... granules), and where one fits it searches on from there.
//
// A pool under a tight capacity behaves differently, not just fails later:
// where growth fails, rule 5 serves instead (and inserts a wait), so later
// allocations find other blocks and the run takes another course. Whether a
// replay fits is therefore not proven monotone in the capacity, and the
// search claims no more than it establishes: the answer fits (it was
// replayed), and one granule less fails (it was replayed, or it is below the
// trace's peak live bytes, which no pool can hold in less).
//
// The bounds: below ceil(peak live bytes / granule) granules nothing fits;
// a run at the settings' own capacity (80 GiB by default), unconstrained in
// practice, fits or the trace "does not fit", and its peak reserved, rounded
// up to a granule, is where the search starts from above.
#ifndef STREAMPOOL_SRC_REPLAY_CAPACITY_H_
#define STREAMPOOL_SRC_REPLAY_CAPACITY_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"

namespace streampool::replay {

// The unit of the search: device pools map 2 MiB granules.
inline constexpr uint64_t kCapacityGranule = uint64_t{2} << 20;

// How the granule below a found capacity is known to fail.
enum class BelowEvidence {
  kNone,           // no answer (the trace does not fit), or the answer is 0
  kReplayed,       // a replay at that capacity had a failed allocation
  kBelowPeakLive,  // it holds less than the trace's peak live bytes
};
const char* BelowEvidenceName(BelowEvidence evidence);

struct CapacityResult {
  // As given; the runs below differ from it in device_capacity, and the
  // search runs them with the checker and the timeline off. Where the replay
  // took a recording's pool settings (use_recorded), its reuse switches,
  // threshold and growth are the first recorded pool's, so that labels say
  // what ran.
  ReplaySettings settings;
  // The trace's recorded pools when the replay took their settings, else 0.
  size_t recorded_pools = 0;
  // The run at settings.device_capacity. Its series is dropped (a search
  // keeps many results, and nothing here plots them).
  ReplayResult unconstrained;
  // Whether the unconstrained run had no failed allocation. When false there
  // is no answer, and min_capacity and at_min mean nothing.
  bool fits = false;
  // The smallest capacity found, in bytes: a whole number of granules, or
  // settings.device_capacity itself when only that fitted. 0 for a trace
  // that reserves nothing (any device runs it; at_min is then the
  // unconstrained run).
  uint64_t min_capacity = 0;
  // The run at min_capacity (series dropped): its peak reserved, makespan,
  // inserted waits and reuse by rule are the trace's at that capacity.
  ReplayResult at_min;
  BelowEvidence below = BelowEvidence::kNone;
  // Times a spot check below a found capacity fitted, though capacities
  // between them failed: proof that fitting is not monotone here, and that
  // a smaller device than the answer may fit where no check looked.
  int lower_fits_found = 0;
  // Replays the search took, the unconstrained run included.
  int replays = 0;

  uint64_t min_capacity_granules() const {
    return (min_capacity + kCapacityGranule - 1) / kCapacityGranule;
  }
};

// Searches the smallest capacity at which `trace` replays under `settings`
// without a failed allocation. With settings.use_recorded every recorded
// setting applies but a recorded device capacity, which the search sets.
// Errors: a pool type that the device capacity does not bound (pinned host
// memory), any error Replay() returns, and a run that reserved more than its
// capacity (a replay that took its capacity from elsewhere, so that the
// search would be meaningless).
absl::StatusOr<CapacityResult> MinCapacity(const Trace& trace, const ReplaySettings& settings);

struct CapacityJob {
  const Trace* trace = nullptr;
  ReplaySettings settings;
};

// Called once per finished job, from the thread that ran it but never from
// two threads at once, with (jobs done, jobs total).
using JobProgressFn = std::function<void(size_t, size_t)>;

// MinCapacity for every job, on up to `threads` std::threads (0: the
// hardware's concurrency), never more threads than jobs. Results are in the
// jobs' order. Jobs start longest trace first, so that one long search does
// not run alone at the end.
std::vector<absl::StatusOr<CapacityResult>> MinCapacities(absl::Span<const CapacityJob> jobs,
                                                          int threads = 0,
                                                          const JobProgressFn& progress = {});

// The threads MinCapacities uses for `jobs` jobs when asked for `threads`.
int CapacityThreads(size_t jobs, int threads);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_CAPACITY_H_
