// The policy lab: for each trace, every swept setting (reuse policy set x
// release threshold x growth) with the smallest device that runs it
// (src/replay/capacity.h) and what the trace costs there, and which policy set
// needs the least memory.
//
// A row's figures: peak reserved of the unconstrained run; the minimum
// capacity; at that capacity, the makespan (virtual time when all work has
// completed), the waits the pool inserted (rule 5), the trace's synchronize
// calls and the allocations served by each reuse rule. Per trace, the best
// row (smallest minimum capacity, ties to the shorter makespan, then to the
// earlier row) and what it saves against all reuse off at its threshold and
// growth, and against CUDA's defaults: every reuse rule on, threshold 0 and
// chunked growth (a CUDA pool maps chunks; "default" growth here is
// expandable).
//
// What to ship: against the setting the trace runs at today (a recording's
// own pool settings, else the default: every reuse rule on, threshold 0,
// default growth), the report names the setting to use (the best of the
// sweep's streampool rows and that reference, by the same order), and
// replays it once more on the unconstrained device with every pool's
// maxSize set to its minimum capacity: where that run fits, the maxSize
// alone realises the saving on any device; where it does not, only a
// device of that capacity does. Its peak reserved unconstrained stands
// beside the capped one. Searches that found a smaller device below a
// failing one are named as warnings: their minimum may be smaller still.
// Rows of other allocators (--allocator) are compared, never shipped.
//
// JSON (PolicyReportJson, schema "streampool-policy-report/1"; fields are only
// ever added, a change of meaning changes the schema name):
//
//   {"schema": "streampool-policy-report/1",
//    "granule_bytes": 2097152,          the unit of the capacity search
//    "pool": "device", "backing": "address_only",
//    "search_capacity_bytes": N,        the unconstrained runs' capacity
//    "traces": [{
//      "file": "...", "format": "streampool-v1", "ops": N, "peak_live_bytes": N,
//      "rows": [ROW...],                the sweep, in its order
//      "best": {"row": i, "setting": "...", "min_capacity_bytes": N,
//               "makespan_ns_at_min_capacity": N} | null   (null: nothing fits)
//      "vs_none": REF | null,           all reuse off at best's threshold and
//                                       growth (null: no best, or not swept)
//      "vs_cuda_defaults": REF | null,  (null: no best, or neither swept
//                                          nor searched apart)
//      "reference": REF | null,         the recorded or default setting, with
//                                       "source": "recorded" | "default" and
//                                       saved_bytes against the shipped one
//      "ship": SHIP | null,             (null: neither best nor reference fits)
//      "vs_allocators": [REF...],       every other allocator's row
//      "warnings": ["..."]}]}           capacity searches that were not monotone
//   SHIP: {"setting": "...", "row": i | null (null: the reference, searched apart),
//          "is_reference": bool,        no swept setting beats the reference
//          "realised_by": "max_size" | "capacity",
//          "max_size_bytes": N,         the minimum capacity, as every pool's maxSize
//          "capped_fits": bool,         the maxSize run had no failed allocation
//          "peak_reserved_bytes_unconstrained": N, "peak_reserved_bytes_capped": N,
//          "makespan_ns_unconstrained": N, "makespan_ns_capped": N,
//          "saved_bytes": N, "makespan_ns_vs_reference": N (signed)}
//   ROW: {"setting": "none, threshold max",
//         "allocator": "streampool" | "pytorch ..." | "rmm-pool ..." | "cuda",
//                                          the model rows (streampool-replay --allocator)
//                                          keep the pool fields of the sweep's first row
//         "reuse": "event+opportunistic+internal" | "none",
//         "threshold": 0 | "max" | N, "growth": "default", "pool_growth": "expandable",
//         "recorded_pools": N,             0, or the recording's pools when the row
//                                          replayed at their settings (use_recorded; the
//                                          setting fields are then the first pool's)
//         "fits": bool, "peak_reserved_bytes": N, "makespan_ns_unconstrained": N,
//         "min_capacity_bytes": N, "min_capacity_granules": N,
//         "peak_reserved_bytes_at_min_capacity": N, "makespan_ns_at_min_capacity": N,
//         "waits_inserted": N, "synchronizes": N,
//         "reuse_counts": {"fresh", "same_stream", "event_dependency", "opportunistic",
//                          "after_sync", "internal_dependency"},
//         "one_granule_below": "replayed" | "below_peak_live",
//         "lower_fits_found": N,           spot checks below a found capacity that
//                                          fitted although capacities above them
//                                          failed (capacity.h): not monotone
//         "replays": N,
//         "graph_memory_unconstrained": [GRAPH...]}  only for a trace with graph ops:
//                                          report.h's GraphMemoryJson, per device
//     Where "fits" is false, every field from "min_capacity_bytes" to
//     "lower_fits_found" is null; peak reserved and makespan are then those
//     of a run with failed allocations. A trace that reserves nothing fits
//     in 0 bytes, with "one_granule_below" null.
//   REF: {"row": i | null (null: searched apart, not a row), "setting": "...", "fits": bool,
//         "min_capacity_bytes": N | null, "makespan_ns_at_min_capacity": N | null,
//         "saved_bytes": N | null}      saved_bytes = its minimum capacity - best's
#ifndef STREAMPOOL_SRC_REPLAY_POLICY_REPORT_H_
#define STREAMPOOL_SRC_REPLAY_POLICY_REPORT_H_

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/replay/capacity.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"

namespace streampool::replay {

inline constexpr char kPolicyReportSchema[] = "streampool-policy-report/1";

struct TracePolicyReport {
  const Trace* trace = nullptr;
  // One per swept setting, in the sweep's order.
  std::vector<CapacityResult> rows;
  // CUDA's defaults, when they were searched apart from the sweep (which did
  // not have them).
  std::optional<CapacityResult> cuda_defaults;
  // The recording's own settings (use_recorded), or the default setting
  // when the sweep did not have it, searched apart.
  std::optional<CapacityResult> reference;
  // The shipped setting on the unconstrained device with every pool's
  // maxSize at its minimum capacity (series kept, for the page's plot).
  std::optional<ReplayResult> capped;
  // Replays kept for the page's memory-over-time plot (AddPolicySeries):
  // the reference and the shipped setting, unconstrained, series kept.
  std::vector<ReplayResult> series_runs;
  // Whether the report says what to ship (a policy report; a plain capacity
  // table does not).
  bool with_ship = false;
};

// `base` with CUDA's defaults: every reuse rule on, threshold 0, chunked.
ReplaySettings CudaDefaults(const ReplaySettings& base);
bool IsCudaDefaults(const ReplaySettings& settings);

// What a report concludes for one trace; pointers into the report, null
// where there is nothing to point to.
struct PolicySummary {
  // The best of streampool's rows (other allocators' rows are never best).
  const CapacityResult* best = nullptr;
  const CapacityResult* none = nullptr;  // all off, at best's threshold and growth
  const CapacityResult* cuda_defaults = nullptr;
  // The recorded or default setting (a row, or the report's reference).
  const CapacityResult* reference = nullptr;
  bool reference_recorded = false;
  // What to ship: best when it needs less than the reference, or as much in
  // less makespan; else the reference itself.
  const CapacityResult* ship = nullptr;
  std::vector<const CapacityResult*> models;  // rows of other allocators
  // Searches that found a fitting capacity below a failing one.
  std::vector<const CapacityResult*> not_monotone;
};
// The default setting a trace without recorded settings runs at.
bool IsDefaultSetting(const ReplaySettings& settings);
PolicySummary SummarizePolicies(const TracePolicyReport& report);

// Searches every trace under every setting on up to `threads` threads (0: the
// hardware's concurrency). With `with_cuda_defaults` (a policy report) it
// searches CUDA's defaults apart where the settings do not have them, and
// the reference (the recording's settings, or the default setting where
// the sweep lacks it), and replays the shipped setting capped by maxSize.
// The first error of any search is the result.
absl::StatusOr<std::vector<TracePolicyReport>> BuildPolicyReports(
    absl::Span<const Trace> traces, const std::vector<ReplaySettings>& settings,
    bool with_cuda_defaults, int threads = 0, const JobProgressFn& progress = {});

// An aligned table per trace, sizes in GiB or MiB and granules, and the
// summary under it.
std::string FormatPolicyText(const std::vector<TracePolicyReport>& reports);
// The settings --policy-report sweeps, from the command line's (or
// Python's) base setting: all 8 policy sets x `thresholds` (0 and max when
// none were given) x `growths`, then one row per other allocator. The tool
// and sp.replay(report="policy") both take their rows from here.
std::vector<ReplaySettings> PolicySweep(const ReplaySettings& base,
                                        const std::vector<uint64_t>& thresholds,
                                        bool thresholds_given,
                                        const std::vector<PoolGrowth>& growths,
                                        const std::vector<AllocatorKind>& allocators);

// Replays each report's reference and shipped setting unconstrained with
// their series kept (TracePolicyReport::series_runs), for FormatPolicyHtml.
absl::Status AddPolicySeries(std::vector<TracePolicyReport>& reports);

// The schema above.
nlohmann::ordered_json PolicyReportJson(const std::vector<TracePolicyReport>& reports);
// PolicyReportJson as text, indented, with a final newline.
std::string FormatPolicyJson(const std::vector<TracePolicyReport>& reports);
// A self-contained SVG: one panel per trace, minimum capacity (x) against the
// makespan at that capacity (y), one labelled point per row (colour: reuse
// policy set, shape: threshold and growth), CUDA's defaults and the best row
// marked, and a legend.
std::string FormatPolicySvg(const std::vector<TracePolicyReport>& reports);

// One trace's capacity-versus-makespan panel, `width` x `height` px, as an
// SVG group at the origin: points that coincide share one label beside
// them, every label is drawn at its point or tied to it by a leader line,
// and other allocators' rows are named. FormatPolicySvg and the page draw it.
std::string PolicyScatterSvg(const TracePolicyReport& report, double width, double height);
// The panels' legend as SVG elements from (left, top) down: colours,
// shapes of `groups` (threshold and growth), crosses, the reference, ship.
std::string PolicyLegendSvg(const std::vector<std::string>& groups, double left, double top);

// One self-contained HTML page (no network: inline SVG, CSS and script):
// per trace, memory over time of the series runs (peak live bytes and the
// shipped capacity as lines), the capacity-versus-makespan panel, the table
// with what to ship, and the blocks live at the trace's peak with their
// streams and, where the trace names them, the frames that allocated them.
std::string FormatPolicyHtml(const std::vector<TracePolicyReport>& reports);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_POLICY_REPORT_H_
