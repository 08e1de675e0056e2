#include "src/replay/capacity.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace streampool::replay {

const char* BelowEvidenceName(BelowEvidence evidence) {
  switch (evidence) {
    case BelowEvidence::kNone:
      return "none";
    case BelowEvidence::kReplayed:
      return "replayed";
    case BelowEvidence::kBelowPeakLive:
      return "below_peak_live";
  }
  return "none";
}

namespace {

// A found capacity is checked from below at most this many times; each pass
// costs about log2(granules above the peak live bytes) replays.
constexpr int kMaxSpotCheckPasses = 4;

// The header key of a recording's device capacity (src/replay/trace.h).
constexpr char kRecordedCapacityKey[] = "device_capacity";

uint64_t CeilGranules(uint64_t bytes) {
  return bytes / kCapacityGranule + (bytes % kCapacityGranule != 0 ? 1 : 0);
}

// A search runs one trace many times and keeps two results; the series
// grows with the trace and nothing a search reports reads it.
ReplayResult Slim(ReplayResult r) {
  r.series.clear();
  r.series.shrink_to_fit();
  return r;
}

// Runs the trace at `capacity` bytes; whether it fitted. Only the
// unconstrained run is reported when it fails; a probe that fails is only a
// "no", and stops at its first failed allocation.
absl::StatusOr<ReplayResult> ReplayAt(const Trace& trace, ReplaySettings& run, uint64_t capacity,
                                      bool stop_early, CapacityResult& out) {
  run.device_capacity = capacity;
  run.stop_at_first_failure = stop_early;
  absl::StatusOr<ReplayResult> r = Replay(trace, run);
  ++out.replays;
  if (!r.ok()) return r.status();
  if (r->peak_reserved > capacity) {
    return absl::FailedPreconditionError(absl::StrCat(
        trace.name, ": a replay at a capacity of ", capacity, " bytes reserved ", r->peak_reserved,
        " (", out.settings.Label(), "): the replay did not run at the capacity the search set"));
  }
  return Slim(*std::move(r));
}

// The search below the unconstrained run of a trace that fits.
// Invariants: `lo_` granules fail (replayed, or below peak live; 0 granules
// is no device at all); `hi_` granules fit, or, while hi_bytes_ is not
// hi_ * granule, the settings' capacity (hi_bytes_) does.
class CapacitySearch {
 public:
  CapacitySearch(const Trace& trace, ReplaySettings run, CapacityResult& out)
      : trace_(trace),
        run_(std::move(run)),
        out_(out),
        live_floor_(LiveFloor(trace)),
        lo_(live_floor_),
        hi_(CeilGranules(out.unconstrained.peak_reserved)),
        hi_bytes_(out.settings.device_capacity),
        at_hi_(out.unconstrained) {}

  // Narrows [lo, hi] to one granule and fills in the result.
  absl::Status Run() {
    if (absl::Status st = Bracket(); !st.ok()) return st;
    if (absl::Status st = Boundary(); !st.ok()) return st;
    if (absl::Status st = SpotChecks(); !st.ok()) return st;
    out_.min_capacity = hi_bytes_;
    out_.at_min = std::move(at_hi_);
    out_.below = lo_evidence_;
    return absl::OkStatus();
  }

 private:
  static uint64_t LiveFloor(const Trace& trace) {
    const uint64_t live_granules = CeilGranules(trace.peak_live_bytes);
    return live_granules == 0 ? 0 : live_granules - 1;
  }

  // hi at the unconstrained run's own peak if that fits there, else at the
  // settings' capacity.
  absl::Status Bracket() {
    const uint64_t capacity = out_.settings.device_capacity;
    if (hi_ * kCapacityGranule < capacity) {
      absl::StatusOr<ReplayResult> r = ReplayAt(trace_, run_, hi_ * kCapacityGranule,
                                                /*stop_early=*/true, out_);
      if (!r.ok()) return r.status();
      if (r->failed_allocs == 0) {
        hi_bytes_ = hi_ * kCapacityGranule;
        at_hi_ = *std::move(r);
      } else {
        // The unconstrained run's own peak did not suffice at that capacity:
        // search down from the settings' capacity instead.
        lo_ = std::max(lo_, hi_);
        lo_evidence_ = BelowEvidence::kReplayed;
        hi_ = CeilGranules(capacity);
      }
    } else {
      hi_ = CeilGranules(capacity);
    }
    // A trace's peak live bytes never exceed what a fitting run reserved, but
    // the search must not rely on a relation it did not check.
    lo_ = std::min(lo_, hi_ - 1);
    return absl::OkStatus();
  }

  // Whether `granules` fit; moves hi or lo there.
  absl::StatusOr<bool> Probe(uint64_t granules) {
    absl::StatusOr<ReplayResult> r =
        ReplayAt(trace_, run_, granules * kCapacityGranule, /*stop_early=*/true, out_);
    if (!r.ok()) return r.status();
    if (r->failed_allocs == 0) {
      hi_ = granules;
      hi_bytes_ = granules * kCapacityGranule;
      at_hi_ = *std::move(r);
      return true;
    }
    lo_ = granules;
    lo_evidence_ = BelowEvidence::kReplayed;
    return false;
  }

  // A boundary between lo and hi: down from hi in doubling steps until a
  // replay fails (the answer is often a few granules below the unconstrained
  // peak), then bisection.
  absl::Status Boundary() {
    for (uint64_t step = 1; hi_ - lo_ > step; step *= 2) {
      absl::StatusOr<bool> fits = Probe(hi_ - step);
      if (!fits.ok()) return fits.status();
      if (!*fits) break;
    }
    while (hi_ - lo_ > 1) {
      absl::StatusOr<bool> fits = Probe(lo_ + (hi_ - lo_) / 2);
      if (!fits.ok()) return fits.status();
    }
    return absl::OkStatus();
  }

  // Below a boundary another capacity may fit again (fitting is not monotone
  // in the capacity): spot checks at 2, 3, 5, 9, ... granules below it, down
  // to the peak live bytes; where one fits, the search goes on below it.
  absl::Status SpotChecks() {
    for (int pass = 0; pass < kMaxSpotCheckPasses; ++pass) {
      bool lower = false;
      for (uint64_t d = 1; hi_ > live_floor_ + d + 1; d *= 2) {
        const uint64_t below = lo_;
        const BelowEvidence below_evidence = lo_evidence_;
        absl::StatusOr<bool> fits = Probe(hi_ - d - 1);
        if (!fits.ok()) return fits.status();
        if (*fits) {
          lower = true;
          ++out_.lower_fits_found;
          break;
        }
        // A failure there says nothing about the granule below the answer.
        lo_ = below;
        lo_evidence_ = below_evidence;
      }
      if (!lower) break;
      lo_ = live_floor_;
      lo_evidence_ = BelowEvidence::kBelowPeakLive;
      if (absl::Status st = Boundary(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  const Trace& trace_;
  ReplaySettings run_;
  CapacityResult& out_;
  const uint64_t live_floor_;
  uint64_t lo_;
  BelowEvidence lo_evidence_ = BelowEvidence::kBelowPeakLive;
  uint64_t hi_;
  uint64_t hi_bytes_;
  ReplayResult at_hi_;
};

}  // namespace

absl::StatusOr<CapacityResult> MinCapacity(const Trace& trace, const ReplaySettings& settings) {
  if (settings.pool_type == AllocationType::kPinnedHost) {
    return absl::InvalidArgumentError(
        "the device's capacity does not bound a pinned host pool; search a device pool");
  }
  CapacityResult out;
  out.settings = settings;
  // With use_recorded a recording's `device_capacity` header would take the
  // place of the capacity the search sets; the search replays a copy without
  // it, keeping every other recorded setting.
  std::optional<Trace> unbounded;
  if (settings.use_recorded && trace.header.count(kRecordedCapacityKey) != 0) {
    unbounded = trace;
    unbounded->header.erase(std::string(kRecordedCapacityKey));
  }
  const Trace& replayed = unbounded ? *unbounded : trace;
  if (settings.use_recorded && !trace.pools.empty()) {
    const TracePool& p = trace.pools[0];
    out.settings.reuse_event = p.reuse_event;
    out.settings.reuse_opportunistic = p.reuse_opportunistic;
    out.settings.reuse_internal = p.reuse_internal;
    out.settings.release_threshold = p.release_threshold;
    out.settings.growth = p.growth;
    out.recorded_pools = trace.pools.size();
  }
  // Speed: a search replays the trace ~log2(range) times, and it reports
  // neither checker findings nor a timeline.
  ReplaySettings run = settings;
  run.check_stream_order = false;
  run.record_timeline = false;
  run.measure_host_cost = false;

  absl::StatusOr<ReplayResult> unconstrained =
      ReplayAt(replayed, run, settings.device_capacity, /*stop_early=*/false, out);
  if (!unconstrained.ok()) return unconstrained.status();
  out.unconstrained = *std::move(unconstrained);
  out.fits = out.unconstrained.failed_allocs == 0;
  if (!out.fits) return out;
  if (out.unconstrained.peak_reserved == 0) {
    out.at_min = out.unconstrained;
    return out;
  }
  CapacitySearch search(replayed, std::move(run), out);
  if (absl::Status st = search.Run(); !st.ok()) return st;
  return out;
}

int CapacityThreads(size_t jobs, int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::min<size_t>(jobs, static_cast<size_t>(threads)));
}

std::vector<absl::StatusOr<CapacityResult>> MinCapacities(absl::Span<const CapacityJob> jobs,
                                                          int threads,
                                                          const JobProgressFn& progress) {
  std::vector<absl::StatusOr<CapacityResult>> results(
      jobs.size(), absl::StatusOr<CapacityResult>(absl::UnknownError("not run")));
  // Longest first: a search costs about ops x replays, and replays vary
  // less than ops do between traces.
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return jobs[a].trace->ops.size() > jobs[b].trace->ops.size();
  });

  std::atomic<size_t> next{0};
  std::mutex progress_mu;
  size_t done = 0;
  auto work = [&] {
    for (size_t k = next.fetch_add(1); k < order.size(); k = next.fetch_add(1)) {
      const CapacityJob& job = jobs[order[k]];
      results[order[k]] = MinCapacity(*job.trace, job.settings);
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mu);
        progress(++done, jobs.size());
      }
    }
  };
  const int n = CapacityThreads(jobs.size(), threads);
  if (n <= 1) {
    work();
    return results;
  }
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return results;
}

}  // namespace streampool::replay
