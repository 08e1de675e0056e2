#include "src/replay/policy_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/pool/names.h"
#include "src/replay/report.h"

namespace streampool::replay {
namespace {

// A recording replays at its own settings whatever the fields say; they are
// set to its first pool's, as its attr lines leave them, so that the
// reference's label says what it ran at.
void LabelAsRecorded(const Trace& t, ReplaySettings* s) {
  const TracePool& p = t.pools.front();
  s->reuse_event = p.reuse_event;
  s->reuse_opportunistic = p.reuse_opportunistic;
  s->reuse_internal = p.reuse_internal;
  s->release_threshold = p.release_threshold;
  s->growth = p.growth;
  s->wait_before_growth = p.wait_before_growth;
  s->soft_limit = p.soft_limit;
  for (const TraceOp& trace_op : t.ops) {
    const ops::Attr* op = std::get_if<ops::Attr>(&trace_op.op);
    if (op == nullptr || op->pool != 0) continue;
    switch (op->attr) {
      case PoolAttr::kReuseFollowEventDependencies:
        s->reuse_event = op->value != 0;
        break;
      case PoolAttr::kReuseAllowOpportunistic:
        s->reuse_opportunistic = op->value != 0;
        break;
      case PoolAttr::kReuseAllowInternalDependencies:
        s->reuse_internal = op->value != 0;
        break;
      case PoolAttr::kReleaseThreshold:
        s->release_threshold = op->value;
        break;
      case PoolAttr::kWaitBeforeGrowth:
        s->wait_before_growth = op->value != 0;
        break;
      case PoolAttr::kSoftReservedLimit:
        s->soft_limit = op->value;
        break;
      default:
        break;
    }
  }
}

using Json = nlohmann::ordered_json;

constexpr double kMiBf = 1024.0 * 1024.0;
constexpr double kGiBf = 1024.0 * kMiBf;

// GiB from 1 GiB up, MiB below: the capacities compared here differ by a
// few granules, which three decimals of GiB still show.
std::string Human(uint64_t b) {
  if (b >= kGiB) return absl::StrFormat("%.3f GiB", b / kGiBf);
  if (b >= (uint64_t{1} << 20)) return absl::StrFormat("%.1f MiB", b / kMiBf);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrFormat("%d B", b);
}

std::string Ms(uint64_t ns) { return absl::StrFormat("%.3f", ns / 1e6); }

bool SameReuse(const ReplaySettings& a, const ReplaySettings& b) {
  for (const ReuseSwitch& r : ReuseSwitches()) {
    if (a.*r.on != b.*r.on) return false;
  }
  return true;
}

bool NoReuse(const ReplaySettings& s) {
  for (const ReuseSwitch& r : ReuseSwitches()) {
    if (s.*r.on) return false;
  }
  return true;
}

// The policy set's place in AllReuseCombinations: all on 0, none 7.
int ReuseIndex(const ReplaySettings& s) {
  return (s.reuse_event ? 0 : 4) + (s.reuse_opportunistic ? 0 : 2) + (s.reuse_internal ? 0 : 1);
}

// "e+o+i", "o", "none": a point's label, short enough for a crowded chart.
std::string ReuseCode(const ReplaySettings& s) {
  std::string out;
  for (const ReuseSwitch& r : ReuseSwitches()) {
    if (s.*r.on) absl::StrAppend(&out, out.empty() ? "" : "+", std::string(1, r.name[0]));
  }
  return out.empty() ? "none" : out;
}

// Threshold and growth, the part of a setting the policy set is swept within.
std::string GroupLabel(const ReplaySettings& s) {
  return absl::StrCat("threshold ", s.ThresholdLabel(), ", growth ", internal::EnumName(s.growth));
}

// Better: smaller minimum capacity, then shorter makespan there.
bool Better(const CapacityResult& a, const CapacityResult& b) {
  if (a.min_capacity != b.min_capacity) return a.min_capacity < b.min_capacity;
  return a.at_min.makespan_ns < b.at_min.makespan_ns;
}

}  // namespace

ReplaySettings CudaDefaults(const ReplaySettings& base) {
  ReplaySettings s = base;
  for (const ReuseSwitch& r : ReuseSwitches()) s.*r.on = true;
  s.release_threshold = 0;
  s.growth = PoolGrowth::kChunked;
  return s;
}

bool IsCudaDefaults(const ReplaySettings& s) {
  return SameReuse(s, CudaDefaults(s)) && s.release_threshold == 0 &&
         s.growth == PoolGrowth::kChunked;
}

bool IsDefaultSetting(const ReplaySettings& s) {
  const ReplaySettings d;
  return s.allocator == AllocatorKind::kStreampool && !s.use_recorded && SameReuse(s, d) &&
         s.release_threshold == d.release_threshold && s.growth == d.growth;
}

PolicySummary SummarizePolicies(const TracePolicyReport& report) {
  PolicySummary sum;
  for (const CapacityResult& r : report.rows) {
    if (r.settings.allocator != AllocatorKind::kStreampool) {
      sum.models.push_back(&r);
      continue;
    }
    if (r.fits && (sum.best == nullptr || Better(r, *sum.best))) sum.best = &r;
  }
  for (const CapacityResult& r : report.rows) {
    if (sum.cuda_defaults == nullptr && r.settings.allocator == AllocatorKind::kStreampool &&
        IsCudaDefaults(r.settings))
      sum.cuda_defaults = &r;
  }
  if (sum.cuda_defaults == nullptr && report.cuda_defaults)
    sum.cuda_defaults = &*report.cuda_defaults;
  if (!report.with_ship) {
    // A capacity table: no reference, nothing shipped.
  } else if (report.reference) {
    sum.reference = &*report.reference;
    sum.reference_recorded = report.reference->recorded_pools != 0;
  } else {
    for (const CapacityResult& r : report.rows) {
      if (IsDefaultSetting(r.settings)) {
        sum.reference = &r;
        break;
      }
    }
  }
  // The reference stays unless a row beats it outright: a change of setting
  // has to buy something.
  sum.ship = sum.reference != nullptr && sum.reference->fits ? sum.reference : nullptr;
  if (report.with_ship && sum.best != nullptr &&
      (sum.ship == nullptr || Better(*sum.best, *sum.ship))) {
    sum.ship = sum.best;
  }
  auto check_monotone = [&](const CapacityResult* r) {
    if (r != nullptr && r->fits && r->lower_fits_found > 0 &&
        std::find(sum.not_monotone.begin(), sum.not_monotone.end(), r) == sum.not_monotone.end())
      sum.not_monotone.push_back(r);
  };
  for (const CapacityResult& r : report.rows) check_monotone(&r);
  check_monotone(sum.reference);
  check_monotone(sum.cuda_defaults);
  if (sum.best == nullptr) return sum;
  for (const CapacityResult& r : report.rows) {
    if (r.settings.allocator == AllocatorKind::kStreampool && NoReuse(r.settings) &&
        r.settings.release_threshold == sum.best->settings.release_threshold &&
        r.settings.growth == sum.best->settings.growth) {
      sum.none = &r;
      break;
    }
  }
  return sum;
}

std::vector<ReplaySettings> PolicySweep(const ReplaySettings& base,
                                        const std::vector<uint64_t>& thresholds,
                                        bool thresholds_given,
                                        const std::vector<PoolGrowth>& growths,
                                        const std::vector<AllocatorKind>& allocators) {
  ReplaySettings b = base;
  // The sweep sets every pool setting itself; the recorded ones are the
  // reference, searched apart.
  b.use_recorded = false;
  b.record_timeline = false;
  const std::vector<uint64_t> t =
      thresholds_given ? thresholds : std::vector<uint64_t>{0, UINT64_MAX};
  std::vector<AllocatorKind> kinds = allocators;
  if (kinds.empty()) kinds.push_back(AllocatorKind::kStreampool);
  return AllocatorRows(kinds, SweepSettings(b, t, growths, /*all_policies=*/true));
}

namespace {

// The shipped setting on the search's own (unconstrained) device, every
// pool capped at its minimum capacity by maxSize.
absl::StatusOr<ReplayResult> ReplayCapped(const Trace& trace, const CapacityResult& ship) {
  ReplaySettings s = ship.settings;
  if (ship.recorded_pools != 0) s.use_recorded = true;
  s.recorded_capacity = false;
  s.max_size = std::max<uint64_t>(ship.min_capacity, 1);
  s.check_stream_order = false;
  s.measure_host_cost = false;
  s.record_timeline = false;
  return Replay(trace, s);
}

}  // namespace

absl::StatusOr<std::vector<TracePolicyReport>> BuildPolicyReports(
    absl::Span<const Trace> traces, const std::vector<ReplaySettings>& settings,
    bool with_cuda_defaults, int threads, const JobProgressFn& progress) {
  bool swept_cuda = false, swept_default = false;
  for (const ReplaySettings& s : settings) {
    swept_cuda = swept_cuda || (s.allocator == AllocatorKind::kStreampool && IsCudaDefaults(s));
    swept_default = swept_default || IsDefaultSetting(s);
  }
  const bool apart = with_cuda_defaults && !swept_cuda && !settings.empty();
  const size_t per_trace = settings.size() + (apart ? 1 : 0) + 1;

  std::vector<CapacityJob> jobs;
  jobs.reserve(traces.size() * per_trace);
  std::vector<bool> reference_searched(traces.size(), false);
  for (size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = traces[i];
    for (const ReplaySettings& s : settings) jobs.push_back({&t, s});
    if (apart) {
      ReplaySettings c = CudaDefaults(settings[0]);
      c.allocator = AllocatorKind::kStreampool;
      jobs.push_back({&t, c});
    }
    // The reference: a recording's own settings, else the default one
    // unless the sweep has it. A placeholder keeps the jobs per trace even.
    ReplaySettings ref = settings.empty() ? ReplaySettings{} : settings[0];
    ref.allocator = AllocatorKind::kStreampool;
    if (!with_cuda_defaults) {
      // A capacity table names no reference.
    } else if (!t.pools.empty()) {
      ref.use_recorded = true;
      LabelAsRecorded(t, &ref);
      reference_searched[i] = true;
    } else if (!swept_default && !settings.empty()) {
      const ReplaySettings d;
      for (const ReuseSwitch& r : ReuseSwitches()) ref.*r.on = d.*r.on;
      ref.release_threshold = d.release_threshold;
      ref.growth = d.growth;
      ref.use_recorded = false;
      reference_searched[i] = true;
    }
    if (reference_searched[i]) jobs.push_back({&t, ref});
  }
  std::vector<absl::StatusOr<CapacityResult>> results = MinCapacities(jobs, threads, progress);

  std::vector<TracePolicyReport> reports;
  size_t next = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    TracePolicyReport rep;
    rep.trace = &traces[i];
    rep.with_ship = with_cuda_defaults;
    const size_t n = settings.size() + (apart ? 1 : 0) + (reference_searched[i] ? 1 : 0);
    for (size_t k = 0; k < n; ++k) {
      absl::StatusOr<CapacityResult>& r = results[next++];
      if (!r.ok()) return r.status();
      if (k < settings.size()) {
        rep.rows.push_back(*std::move(r));
      } else if (apart && k == settings.size()) {
        rep.cuda_defaults = *std::move(r);
      } else {
        rep.reference = *std::move(r);
      }
    }
    reports.push_back(std::move(rep));
  }
  for (TracePolicyReport& rep : reports) {
    const PolicySummary sum = SummarizePolicies(rep);
    if (!rep.with_ship || sum.ship == nullptr || sum.ship->min_capacity == 0) continue;
    absl::StatusOr<ReplayResult> capped = ReplayCapped(*rep.trace, *sum.ship);
    if (!capped.ok()) return capped.status();
    rep.capped = *std::move(capped);
  }
  return reports;
}

absl::Status AddPolicySeries(std::vector<TracePolicyReport>& reports) {
  for (TracePolicyReport& rep : reports) {
    const PolicySummary sum = SummarizePolicies(rep);
    rep.series_runs.clear();
    std::vector<const CapacityResult*> runs;
    if (sum.reference != nullptr) runs.push_back(sum.reference);
    if (sum.ship != nullptr && sum.ship != sum.reference) runs.push_back(sum.ship);
    for (const CapacityResult* r : runs) {
      ReplaySettings s = r->settings;
      if (r->recorded_pools != 0) s.use_recorded = true;
      s.recorded_capacity = false;
      s.check_stream_order = false;
      s.measure_host_cost = false;
      s.record_timeline = false;
      absl::StatusOr<ReplayResult> run = Replay(*rep.trace, s);
      if (!run.ok()) return run.status();
      rep.series_runs.push_back(*std::move(run));
    }
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------- text

namespace {

// "ship: ..." and how it compares with the reference, in two lines.
std::string ShipText(const TracePolicyReport& rep, const PolicySummary& sum) {
  if (sum.ship == nullptr) return "  ship: nothing (no setting fits)\n";
  const CapacityResult& ship = *sum.ship;
  const char* ref_name = sum.reference_recorded ? "the recorded setting" : "the default setting";
  std::string out;
  if (sum.reference == &ship) {
    absl::StrAppendFormat(&out,
                          "  ship: %s (%s): no swept setting needs less, or as much in "
                          "less time\n",
                          ship.settings.Label(), ref_name);
  } else {
    absl::StrAppendFormat(
        &out, "  ship: %s instead of %s (%s)\n", ship.settings.Label(), ref_name,
        sum.reference == nullptr ? "not searched" : sum.reference->settings.Label());
  }
  const bool capped_fits = rep.capped && rep.capped->failed_allocs == 0;
  if (ship.min_capacity == 0) {
    absl::StrAppend(&out, "    it reserves nothing: any device runs it\n");
    return out;
  }
  if (capped_fits) {
    absl::StrAppendFormat(&out,
                          "    with maxSize %s (%d bytes) on any device: peak reserved %s "
                          "unconstrained, %s capped; makespan %s ms, %s ms capped\n",
                          Human(ship.min_capacity), ship.min_capacity,
                          Human(ship.unconstrained.peak_reserved), Human(rep.capped->peak_reserved),
                          Ms(ship.unconstrained.makespan_ns), Ms(rep.capped->makespan_ns));
  } else {
    absl::StrAppendFormat(&out,
                          "    on a device of %s (maxSize %s alone does not fit: %d failed "
                          "allocations): peak reserved %s unconstrained, %s there; makespan %s "
                          "ms there\n",
                          Human(ship.min_capacity), Human(ship.min_capacity),
                          rep.capped ? rep.capped->failed_allocs : 0,
                          Human(ship.unconstrained.peak_reserved), Human(ship.at_min.peak_reserved),
                          Ms(ship.at_min.makespan_ns));
  }
  if (sum.reference != nullptr && sum.reference != &ship && sum.reference->fits) {
    const CapacityResult& ref = *sum.reference;
    const int64_t saved =
        static_cast<int64_t>(ref.min_capacity) - static_cast<int64_t>(ship.min_capacity);
    const double dt = ref.at_min.makespan_ns == 0
                          ? 0
                          : 100.0 *
                                (static_cast<double>(ship.at_min.makespan_ns) -
                                 static_cast<double>(ref.at_min.makespan_ns)) /
                                static_cast<double>(ref.at_min.makespan_ns);
    absl::StrAppendFormat(&out, "    against %s: %s, saves %s (%.1f %%), makespan %+.1f %%\n",
                          ref_name, Human(ref.min_capacity), Human(static_cast<uint64_t>(saved)),
                          ref.min_capacity == 0 ? 0.0 : 100.0 * saved / ref.min_capacity, dt);
  } else if (sum.reference != nullptr && !sum.reference->fits) {
    absl::StrAppendFormat(&out, "    against %s: it does not fit in %s\n", ref_name,
                          Human(sum.reference->settings.device_capacity));
  }
  return out;
}

// A row's first three columns; another allocator's row names it where a
// pool setting would stand.
std::string ReuseColumn(const ReplaySettings& s) {
  return s.allocator == AllocatorKind::kStreampool ? s.ReuseLabel() : s.AllocatorLabel();
}

std::string ThresholdColumn(const ReplaySettings& s) {
  return s.allocator == AllocatorKind::kStreampool ? s.ThresholdLabel()
         : s.allocator == AllocatorKind::kCuda     ? std::string("0")
                                                   : std::string("-");
}

std::string GrowthColumn(const ReplaySettings& s) {
  return s.allocator == AllocatorKind::kStreampool ? std::string(internal::EnumName(s.growth))
         : s.allocator == AllocatorKind::kCuda     ? std::string("chunked")
                                                   : std::string("-");
}

// A trace's table rows, each with what its first column starts with.
using TextRows = std::vector<std::pair<std::string, const CapacityResult*>>;

TextRows RowsOf(const TracePolicyReport& rep) {
  TextRows rows;
  for (const CapacityResult& r : rep.rows) {
    rows.emplace_back(r.recorded_pools == 0 || r.settings.allocator != AllocatorKind::kStreampool
                          ? ""
                          : "recorded: ",
                      &r);
  }
  if (rep.cuda_defaults) rows.emplace_back("CUDA defaults: ", &*rep.cuda_defaults);
  if (rep.reference) {
    rows.emplace_back(rep.reference->recorded_pools != 0 ? "recorded: " : "default: ",
                      &*rep.reference);
  }
  return rows;
}

// The table: a header and a line per row, the first columns as wide as
// their widest entry.
std::string TableText(const TextRows& rows) {
  int reuse_w = 28, group_w = 9, growth_w = 10;
  for (const auto& [prefix, r] : rows) {
    reuse_w = std::max(reuse_w, static_cast<int>((prefix + ReuseColumn(r->settings)).size()));
    group_w = std::max(group_w, static_cast<int>(ThresholdColumn(r->settings).size()));
    growth_w = std::max(growth_w, static_cast<int>(GrowthColumn(r->settings).size()));
  }
  std::string out = absl::StrFormat(
      "  %-*s %-*s %-*s %13s %13s %8s %12s %6s %6s  %-40s %7s\n", reuse_w, "reuse", group_w,
      "threshold", growth_w, "growth", "peak reserved", "min capacity", "granules", "makespan ms",
      "waits", "syncs", "reuse same/event/opp/sync/internal/fresh", "replays");
  for (const auto& [prefix, r] : rows) {
    std::string min = "does not fit", granules = "-", makespan = "-", waits = "-", syncs = "-",
                reuse = "-";
    if (r->fits) {
      min = Human(r->min_capacity);
      // A mark where a smaller device fitted below one that failed.
      granules = absl::StrCat(r->min_capacity_granules(), r->lower_fits_found > 0 ? "*" : "");
      makespan = Ms(r->at_min.makespan_ns);
      waits = absl::StrCat(r->at_min.counters.waits);
      syncs = absl::StrCat(r->at_min.synchronizes);
      reuse = IsModel(r->settings.allocator)
                  ? absl::StrFormat("cross-stream %d, segments %d",
                                    r->at_min.counters.cross_stream_reuses,
                                    r->at_min.counters.segments_made)
                  : ReuseBreakdown(r->at_min.stats);
    }
    absl::StrAppendFormat(&out, "  %-*s %-*s %-*s %13s %13s %8s %12s %6s %6s  %-40s %7d\n", reuse_w,
                          prefix + ReuseColumn(r->settings), group_w, ThresholdColumn(r->settings),
                          growth_w, GrowthColumn(r->settings),
                          Human(r->unconstrained.peak_reserved), min, granules, makespan, waits,
                          syncs, reuse, r->replays);
  }
  return out;
}

// One line: on some traces most searches find a lower fit.
std::string NotMonotoneText(const PolicySummary& sum) {
  if (sum.not_monotone.empty()) return "";
  std::vector<std::string> names;
  for (const CapacityResult* r : sum.not_monotone) {
    names.push_back(absl::StrCat(r->settings.allocator == AllocatorKind::kStreampool
                                     ? r->settings.Label()
                                     : r->settings.AllocatorLabel(),
                                 " (", r->lower_fits_found, ")"));
  }
  return absl::StrCat(
      "  warning: capacity searches not monotone (a smaller capacity fitted below "
      "one that failed, so a smaller device may fit): ",
      absl::StrJoin(names, "; "), "\n");
}

// "against ...": what `best` saves over `ref`.
std::string AgainstText(const char* what, const CapacityResult* ref, const CapacityResult& best) {
  if (ref == nullptr) return absl::StrFormat("    against %s: not swept\n", what);
  if (!ref->fits) {
    return absl::StrFormat("    against %s (%s): it does not fit in %s\n", what,
                           ref->settings.Label(), Human(ref->settings.device_capacity));
  }
  const int64_t saved =
      static_cast<int64_t>(ref->min_capacity) - static_cast<int64_t>(best.min_capacity);
  const int64_t granules = saved / static_cast<int64_t>(kCapacityGranule);
  return absl::StrFormat("    against %s (%s): %s, saves %s%s (%d granule%s)\n", what,
                         ref->settings.Label(), Human(ref->min_capacity), saved < 0 ? "-" : "",
                         Human(static_cast<uint64_t>(std::abs(saved))), granules,
                         granules == 1 || granules == -1 ? "" : "s");
}

// A trace's line, its table and, where there is a choice, the best setting.
std::string TraceText(const TracePolicyReport& rep) {
  const Trace& t = *rep.trace;
  std::string out = absl::StrFormat("%s: %d ops, peak live %s (%d bytes)\n", t.name, t.ops.size(),
                                    Human(t.peak_live_bytes), t.peak_live_bytes);
  const TextRows rows = RowsOf(rep);
  const PolicySummary sum = SummarizePolicies(rep);
  absl::StrAppend(&out, TableText(rows), NotMonotoneText(sum));
  // Graph memory, beside the pools: the first row's unconstrained run's (a
  // pool setting changes it only through the waits it inserts).
  if (!rep.rows.empty()) absl::StrAppend(&out, GraphMemoryText(rep.rows[0].unconstrained, "  "));
  // One row is its own best; the summary is for a choice between several.
  if (rows.size() < 2) return absl::StrCat(out, "\n");
  if (sum.best == nullptr) {
    return absl::StrCat(out, "  no setting fits in ",
                        Human(rep.rows.empty() ? 0 : rep.rows[0].settings.device_capacity), "\n\n");
  }
  const CapacityResult& best = *sum.best;
  absl::StrAppendFormat(&out, "  best: %s: %s (%d granules), makespan %s ms\n",
                        best.settings.Label(), Human(best.min_capacity),
                        best.min_capacity_granules(), Ms(best.at_min.makespan_ns));
  absl::StrAppend(&out, AgainstText("all reuse off", sum.none, best),
                  AgainstText("CUDA's defaults", sum.cuda_defaults, best));
  for (const CapacityResult* m : sum.models) {
    absl::StrAppend(&out, AgainstText(m->settings.AllocatorLabel().c_str(), m, best));
  }
  if (rep.with_ship) absl::StrAppend(&out, ShipText(rep, sum));
  return absl::StrCat(out, "\n");
}

}  // namespace

std::string FormatPolicyText(const std::vector<TracePolicyReport>& reports) {
  std::string out;
  const CapacityResult* first = nullptr;
  for (const TracePolicyReport& rep : reports) {
    if (first == nullptr && !rep.rows.empty()) first = &rep.rows[0];
  }
  if (first != nullptr) {
    const ReplaySettings& c = first->settings;
    absl::StrAppendFormat(&out,
                          "minimum device capacity in 2 MiB granules; pool %s, backing %s, "
                          "searched up to %s; stream-order checker off in searches\n\n",
                          internal::EnumName(c.pool_type), internal::EnumName(c.backing),
                          Human(c.device_capacity));
  }
  for (const TracePolicyReport& rep : reports) absl::StrAppend(&out, TraceText(rep));
  absl::StrAppend(
      &out,
      "peak reserved: unconstrained run; min capacity: the smallest device (whole 2 MiB "
      "granules) with no failed allocation, and at it: makespan (virtual time when all work "
      "completed), waits the pool inserted (rule 5), the trace's synchronize calls and reuse "
      "by rule; growth default is "
      "expandable, CUDA's pools grow chunked; CUDA defaults: every reuse rule on, threshold 0, "
      "growth chunked; granules*: a capacity below one that failed fitted during the search "
      "(fitting is not monotone in the capacity there, and a smaller device may fit where the "
      "search did not look)\n");
  return out;
}

// ------------------------------------------------------------------- JSON

namespace {

Json ThresholdJson(uint64_t t) { return t == UINT64_MAX ? Json("max") : Json(t); }

Json RowJson(const CapacityResult& r) {
  const ReplaySettings& c = r.settings;
  Json row = {{"setting", c.Label()},
              {"allocator", c.AllocatorLabel()},
              {"reuse", c.ReuseLabel()},
              {"threshold", ThresholdJson(c.release_threshold)},
              {"growth", internal::EnumName(c.growth)},
              {"pool_growth", internal::EnumName(r.unconstrained.growth)},
              {"recorded_pools", r.recorded_pools},
              {"fits", r.fits},
              {"peak_reserved_bytes", r.unconstrained.peak_reserved},
              {"makespan_ns_unconstrained", r.unconstrained.makespan_ns}};
  if (r.fits) {
    row["min_capacity_bytes"] = r.min_capacity;
    row["min_capacity_granules"] = r.min_capacity_granules();
    row["peak_reserved_bytes_at_min_capacity"] = r.at_min.peak_reserved;
    row["makespan_ns_at_min_capacity"] = r.at_min.makespan_ns;
    row["waits_inserted"] = r.at_min.stats.waits_inserted;
    row["synchronizes"] = r.at_min.synchronizes;
    row["reuse_counts"] = ReuseCountsJson(r.at_min.stats);
    row["one_granule_below"] =
        r.below == BelowEvidence::kNone ? Json(nullptr) : Json(BelowEvidenceName(r.below));
    row["lower_fits_found"] = r.lower_fits_found;
  } else {
    for (const char* key :
         {"min_capacity_bytes", "min_capacity_granules", "peak_reserved_bytes_at_min_capacity",
          "makespan_ns_at_min_capacity", "waits_inserted", "synchronizes", "reuse_counts",
          "one_granule_below", "lower_fits_found"}) {
      row[key] = nullptr;
    }
  }
  row["replays"] = r.replays;
  if (!r.unconstrained.graph_memory.empty()) {
    row["graph_memory_unconstrained"] = GraphMemoryJson(r.unconstrained);
  }
  return row;
}

Json RefJson(const TracePolicyReport& rep, const CapacityResult* ref, const CapacityResult& best) {
  if (ref == nullptr) return nullptr;
  Json row = nullptr;
  if (ref >= rep.rows.data() && ref < rep.rows.data() + rep.rows.size())
    row = ref - rep.rows.data();
  Json j = {{"row", row}, {"setting", ref->settings.Label()}, {"fits", ref->fits}};
  if (ref->fits) {
    j["min_capacity_bytes"] = ref->min_capacity;
    j["makespan_ns_at_min_capacity"] = ref->at_min.makespan_ns;
    j["saved_bytes"] =
        static_cast<int64_t>(ref->min_capacity) - static_cast<int64_t>(best.min_capacity);
  } else {
    j["min_capacity_bytes"] = nullptr;
    j["makespan_ns_at_min_capacity"] = nullptr;
    j["saved_bytes"] = nullptr;
  }
  return j;
}

Json ShipJson(const TracePolicyReport& rep, const PolicySummary& sum) {
  const CapacityResult& ship = *sum.ship;
  const bool capped_fits = rep.capped && rep.capped->failed_allocs == 0;
  Json row = nullptr;
  if (&ship >= rep.rows.data() && &ship < rep.rows.data() + rep.rows.size())
    row = &ship - rep.rows.data();
  Json j = {{"setting", ship.settings.Label()},
            {"row", row},
            {"is_reference", sum.reference == &ship},
            {"realised_by", capped_fits ? "max_size" : "capacity"},
            {"max_size_bytes", ship.min_capacity},
            {"capped_fits", capped_fits},
            {"peak_reserved_bytes_unconstrained", ship.unconstrained.peak_reserved},
            {"peak_reserved_bytes_capped",
             rep.capped ? rep.capped->peak_reserved : ship.at_min.peak_reserved},
            {"makespan_ns_unconstrained", ship.unconstrained.makespan_ns},
            {"makespan_ns_capped", rep.capped ? rep.capped->makespan_ns : ship.at_min.makespan_ns}};
  if (sum.reference != nullptr && sum.reference->fits) {
    j["saved_bytes"] =
        static_cast<int64_t>(sum.reference->min_capacity) - static_cast<int64_t>(ship.min_capacity);
    j["makespan_ns_vs_reference"] = static_cast<int64_t>(ship.at_min.makespan_ns) -
                                    static_cast<int64_t>(sum.reference->at_min.makespan_ns);
  } else {
    j["saved_bytes"] = nullptr;
    j["makespan_ns_vs_reference"] = nullptr;
  }
  return j;
}

}  // namespace

nlohmann::ordered_json PolicyReportJson(const std::vector<TracePolicyReport>& reports) {
  Json doc = {{"schema", kPolicyReportSchema}, {"granule_bytes", kCapacityGranule}};
  const CapacityResult* first = nullptr;
  for (const TracePolicyReport& rep : reports) {
    if (first == nullptr && !rep.rows.empty()) first = &rep.rows[0];
  }
  const ReplaySettings c = first != nullptr ? first->settings : ReplaySettings{};
  doc["pool"] = internal::EnumName(c.pool_type);
  doc["backing"] = internal::EnumName(c.backing);
  doc["search_capacity_bytes"] = c.device_capacity;
  Json traces = Json::array();
  for (const TracePolicyReport& rep : reports) {
    const Trace& t = *rep.trace;
    Json rows = Json::array();
    for (const CapacityResult& r : rep.rows) rows.push_back(RowJson(r));
    const PolicySummary sum = SummarizePolicies(rep);
    Json best = nullptr, vs_none = nullptr, vs_cuda = nullptr;
    if (sum.best != nullptr) {
      best = {{"row", sum.best - rep.rows.data()},
              {"setting", sum.best->settings.Label()},
              {"min_capacity_bytes", sum.best->min_capacity},
              {"makespan_ns_at_min_capacity", sum.best->at_min.makespan_ns}};
      vs_none = RefJson(rep, sum.none, *sum.best);
      vs_cuda = RefJson(rep, sum.cuda_defaults, *sum.best);
    }
    Json reference = nullptr, ship = nullptr, models = Json::array(), warnings = Json::array();
    if (sum.ship != nullptr) {
      if (sum.reference != nullptr) {
        reference = RefJson(rep, sum.reference, *sum.ship);
        reference["source"] = sum.reference_recorded ? "recorded" : "default";
      }
      ship = ShipJson(rep, sum);
    } else if (sum.reference != nullptr) {
      reference = RefJson(rep, sum.reference, *sum.reference);
      reference["source"] = sum.reference_recorded ? "recorded" : "default";
    }
    for (const CapacityResult* m : sum.models) {
      Json j = RefJson(rep, m, sum.ship != nullptr ? *sum.ship : *m);
      j["allocator"] = m->settings.AllocatorLabel();
      models.push_back(std::move(j));
    }
    for (const CapacityResult* r : sum.not_monotone) {
      warnings.push_back(absl::StrCat(
          "the search for ",
          r->settings.allocator == AllocatorKind::kStreampool ? r->settings.Label()
                                                              : r->settings.AllocatorLabel(),
          " was not monotone: ", r->lower_fits_found,
          " smaller capacities fitted below one that failed; a smaller device may fit"));
    }
    traces.push_back({{"file", t.name},
                      {"format", TraceFormatName(t.format)},
                      {"ops", t.ops.size()},
                      {"peak_live_bytes", t.peak_live_bytes},
                      {"rows", std::move(rows)},
                      {"best", std::move(best)},
                      {"vs_none", std::move(vs_none)},
                      {"vs_cuda_defaults", std::move(vs_cuda)},
                      {"reference", std::move(reference)},
                      {"ship", std::move(ship)},
                      {"vs_allocators", std::move(models)},
                      {"warnings", std::move(warnings)}});
  }
  doc["traces"] = std::move(traces);
  return doc;
}

std::string FormatPolicyJson(const std::vector<TracePolicyReport>& reports) {
  return DumpJson(PolicyReportJson(reports), /*indent=*/2) + "\n";
}

// -------------------------------------------------------------------- SVG

namespace {

// Colour-blind-safe palette (Okabe-Ito), one per policy set in
// AllReuseCombinations order.
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#999999"};

// An axis over [lo, hi] with a margin, never empty.
struct Axis {
  double lo, hi;
  static Axis Of(double lo, double hi) {
    double pad = (hi - lo) * 0.08;
    if (pad <= 0) pad = std::max(std::abs(hi) * 0.1, 1.0);
    return {std::max(0.0, lo - pad), hi + pad};
  }
  double Frac(double v) const { return (v - lo) / (hi - lo); }
};

// A marker centred at (x, y): shapes tell the threshold/growth groups apart.
std::string Marker(int shape, double x, double y, const char* fill, const char* stroke,
                   double r = 5) {
  switch (shape % 4) {
    case 0:
      return absl::StrFormat(
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\" stroke=\"%s\"/>", x, y, r, fill,
          stroke);
    case 1:
      return absl::StrFormat(
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"%s\"/>",
          x - r, y - r, 2 * r, 2 * r, fill, stroke);
    case 2:
      return absl::StrFormat(
          "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\" stroke=\"%s\"/>", x,
          y - r - 1, x - r - 1, y + r, x + r + 1, y + r, fill, stroke);
    default:
      return absl::StrFormat(
          "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\" "
          "stroke=\"%s\"/>",
          x, y - r - 1, x + r + 1, y, x, y + r + 1, x - r - 1, y, fill, stroke);
  }
}

// Threshold/growth groups in the order they first appear: a marker's shape.
std::vector<std::string> GroupsOf(const TracePolicyReport& rep) {
  std::vector<std::string> groups;
  for (const CapacityResult& r : rep.rows) {
    if (r.settings.allocator != AllocatorKind::kStreampool) continue;
    const std::string g = GroupLabel(r.settings);
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  return groups;
}

// What a point is called on the chart: its policy set and group, another
// allocator's name, or what it stands for.
std::string PointName(const TracePolicyReport& rep, const PolicySummary& sum,
                      const CapacityResult* r, size_t groups) {
  if (rep.cuda_defaults && r == &*rep.cuda_defaults) return "CUDA defaults";
  if (rep.reference && r == &*rep.reference) {
    return sum.reference_recorded ? "recorded" : "default";
  }
  if (r->settings.allocator != AllocatorKind::kStreampool) return r->settings.AllocatorLabel();
  std::string label = ReuseCode(r->settings);
  if (groups > 1) {
    absl::StrAppend(&label, " (", r->settings.ThresholdLabel(),
                    groups > 2 ? absl::StrCat(", ", internal::EnumName(r->settings.growth)) : "",
                    ")");
  }
  return label;
}

// Points that coincide (policy sets that decide alike) are one place on
// the chart with one label naming them all, so that every label sits at
// its point: beside it where there is room, else nearby with a leader.
struct Place {
  uint64_t capacity, makespan;
  std::vector<const CapacityResult*> members;
};

struct Box {
  double x0, x1, y0, y1;
};

std::vector<Place> PlacesOf(const std::vector<const CapacityResult*>& points) {
  std::vector<Place> places;
  for (const CapacityResult* r : points) {
    auto it = std::find_if(places.begin(), places.end(), [&](const Place& p) {
      return p.capacity == r->min_capacity && p.makespan == r->at_min.makespan_ns;
    });
    if (it == places.end()) {
      places.push_back({r->min_capacity, r->at_min.makespan_ns, {r}});
    } else {
      it->members.push_back(r);
    }
  }
  return places;
}

// A place's label: its names while they fit in about a third of the plot's
// width, then how many more; "ship" or "best" where it is one.
std::string PlaceLabel(const std::vector<std::string>& names, bool is_ship, bool is_best,
                       double plot_w) {
  std::string label;
  size_t shown = 0;
  for (const std::string& n : names) {
    const std::string more =
        shown + 1 < names.size() ? absl::StrCat(" +", names.size() - shown - 1, " more") : "";
    if (shown > 0 && 6.6 * (label.size() + 2 + n.size() + more.size()) > plot_w / 3) break;
    absl::StrAppend(&label, shown == 0 ? "" : ", ", n);
    ++shown;
  }
  if (shown < names.size()) absl::StrAppend(&label, " +", names.size() - shown, " more");
  if (is_ship) absl::StrAppend(&label, " ship");
  if (is_best && !is_ship) absl::StrAppend(&label, " best");
  return label;
}

// Where a label `w` wide for the point (x, y) goes inside `area`, clear of
// `taken`: right, left, above, below; then rings further out, with a
// leader (second). Nowhere free: beside the point, over whatever is there.
std::pair<Box, bool> LabelBox(double x, double y, double w, const Box& area,
                              const std::vector<Box>& taken) {
  for (int ring = 0; ring < 12; ++ring) {
    const double d = 8 + 14.0 * ring;
    const Box tries[] = {
        {x + d, x + d + w, y - 6, y + 7},          {x - d - w, x - d, y - 6, y + 7},
        {x - w / 2, x + w / 2, y - d - 13, y - d}, {x - w / 2, x + w / 2, y + d, y + d + 13},
        {x + d, x + d + w, y - d - 13, y - d},     {x + d, x + d + w, y + d, y + d + 13},
        {x - d - w, x - d, y - d - 13, y - d},     {x - d - w, x - d, y + d, y + d + 13}};
    for (const Box& b : tries) {
      if (b.x0 < area.x0 || b.x1 > area.x1 || b.y0 < area.y0 || b.y1 > area.y1) continue;
      const bool clash = std::any_of(taken.begin(), taken.end(), [&](const Box& t) {
        return b.x0 < t.x1 && t.x0 < b.x1 && b.y0 < t.y1 && t.y0 < b.y1;
      });
      if (!clash) return {b, ring > 0};
    }
  }
  return {Box{x + 8, x + 8 + w, y - 6, y + 7}, false};
}

// One trace's chart: minimum capacity across, the makespan there up, a
// point per setting that fits.
class Scatter {
 public:
  static constexpr double kLeft = 80, kRight = 20, kTop = 34, kBottom = 50;

  Scatter(const TracePolicyReport& rep, double width, double height)
      : rep_(rep),
        sum_(SummarizePolicies(rep)),
        groups_(GroupsOf(rep)),
        plot_w_(width - kLeft - kRight),
        plot_h_(height - kTop - kBottom) {
    for (const CapacityResult& r : rep.rows) {
      if (r.fits) {
        points_.push_back(&r);
      } else {
        misfits_.push_back(PointName(rep, sum_, &r, groups_.size()));
      }
    }
    cuda_apart_ = rep.cuda_defaults && rep.cuda_defaults->fits;
    if (cuda_apart_) points_.push_back(&*rep.cuda_defaults);
    if (rep.reference && rep.reference->fits) points_.push_back(&*rep.reference);
    uint64_t c_min = UINT64_MAX, c_max = 0, m_min = UINT64_MAX, m_max = 0;
    for (const CapacityResult* r : points_) {
      c_min = std::min(c_min, r->min_capacity);
      c_max = std::max(c_max, r->min_capacity);
      m_min = std::min(m_min, r->at_min.makespan_ns);
      m_max = std::max(m_max, r->at_min.makespan_ns);
    }
    if (points_.empty()) c_min = c_max = m_min = m_max = 0;
    gib_ = c_max >= kGiB;
    unit_ = gib_ ? kGiBf : kMiBf;
    xa_ = Axis::Of(c_min / unit_, c_max / unit_);
    ya_ = Axis::Of(m_min / 1e6, m_max / 1e6);
  }

  std::string Svg() const {
    std::string out =
        ChartFrameSvg(rep_.trace->name, 22, kLeft, kTop, plot_w_, plot_h_,
                      {xa_.lo, xa_.hi, [&](double v) { return kLeft + plot_w_ * xa_.Frac(v); },
                       gib_ ? "minimum device capacity (GiB)" : "minimum device capacity (MiB)"},
                      {ya_.lo, ya_.hi, [&](double v) { return kTop + plot_h_ * (1 - ya_.Frac(v)); },
                       "makespan at that capacity (ms)"},
                      55);
    const std::vector<Place> places = PlacesOf(points_);
    std::vector<Box> taken;
    for (const Place& p : places) {
      const double x = ToX(p.capacity), y = ToY(p.makespan);
      taken.push_back({x - 6, x + 6, y - 6, y + 6});
    }
    for (const Place& p : places) absl::StrAppend(&out, PlaceSvg(p, taken));
    if (points_.empty()) {
      absl::StrAppendFormat(&out,
                            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">no setting "
                            "fits</text>\n",
                            kLeft + plot_w_ / 2, kTop + plot_h_ / 2);
    }
    if (!misfits_.empty()) {
      absl::StrAppendFormat(
          &out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"gray\">%s</text>\n", kLeft + 8, kTop + 14,
          XmlEscape(absl::StrCat("does not fit: ", absl::StrJoin(misfits_, ", "))));
    }
    return out;
  }

 private:
  double ToX(uint64_t b) const { return kLeft + plot_w_ * xa_.Frac(b / unit_); }
  double ToY(uint64_t ns) const { return kTop + plot_h_ * (1 - ya_.Frac(ns / 1e6)); }

  // A point's mark: a cross for what is not a swept policy set, a white
  // square for the reference, else its colour and shape.
  std::string Glyph(const CapacityResult* r, double x, double y, double radius) const {
    if ((cuda_apart_ && r == &*rep_.cuda_defaults) ||
        r->settings.allocator != AllocatorKind::kStreampool) {
      return absl::StrFormat(
          "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"black\" "
          "stroke-width=\"2\"/>",
          x - radius, y - radius, x + radius, y + radius, x - radius, y + radius, x + radius,
          y - radius);
    }
    if (rep_.reference && r == &*rep_.reference) {
      return absl::StrFormat(
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" "
          "stroke=\"black\" stroke-width=\"2\"/>",
          x - radius, y - radius, 2 * radius, 2 * radius);
    }
    const int shape = static_cast<int>(
        std::find(groups_.begin(), groups_.end(), GroupLabel(r->settings)) - groups_.begin());
    return Marker(shape, x, y, kPalette[ReuseIndex(r->settings)], "black", radius);
  }

  // A place's marks and its label, whose box joins `taken`.
  std::string PlaceSvg(const Place& p, std::vector<Box>& taken) const {
    const double x = ToX(p.capacity), y = ToY(p.makespan);
    std::vector<std::string> names;
    bool is_ship = false, is_best = false;
    for (const CapacityResult* r : p.members) {
      names.push_back(PointName(rep_, sum_, r, groups_.size()));
      is_ship = is_ship || r == sum_.ship;
      is_best = is_best || r == sum_.best;
    }
    const std::string label = PlaceLabel(names, is_ship, is_best, plot_w_);
    const double w = 14 + 6.6 * label.size();
    const Box area{kLeft, kLeft + plot_w_, kTop, kTop + plot_h_};
    const auto [box, leader] = LabelBox(x, y, w, area, taken);
    taken.push_back(box);
    std::string out = absl::StrCat("<g class=\"place\"><title>",
                                   XmlEscape(absl::StrJoin(names, ", ")), "</title>");
    if (leader) {
      const double lx = std::clamp(x, box.x0, box.x1), ly = std::clamp(y, box.y0, box.y1);
      absl::StrAppendFormat(&out,
                            "<line class=\"leader\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                            "y2=\"%.1f\" stroke=\"#888\"/>",
                            x, y, lx, ly);
    }
    for (const CapacityResult* r : p.members) {
      absl::StrAppend(&out, "<g class=\"pt\">", Glyph(r, x, y, 5), "</g>");
    }
    if (is_ship) {
      absl::StrAppendFormat(&out,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"10\" fill=\"none\" "
                            "stroke=\"#D55E00\" stroke-width=\"2\"/>",
                            x, y);
    }
    absl::StrAppendFormat(&out, "%s<text class=\"lbl\" x=\"%.1f\" y=\"%.1f\">%s</text></g>\n",
                          Glyph(p.members[0], box.x0 + 4, box.y0 + 6.5, 3.5), box.x0 + 12,
                          box.y0 + 10.5, XmlEscape(label));
    return out;
  }

  const TracePolicyReport& rep_;
  const PolicySummary sum_;
  const std::vector<std::string> groups_;
  const double plot_w_, plot_h_;
  std::vector<const CapacityResult*> points_;
  std::vector<std::string> misfits_;
  bool cuda_apart_ = false;
  bool gib_ = false;
  double unit_ = 1;
  Axis xa_{}, ya_{};
};

}  // namespace

std::string PolicyScatterSvg(const TracePolicyReport& rep, double width, double height) {
  return Scatter(rep, width, height).Svg();
}

std::string FormatPolicySvg(const std::vector<TracePolicyReport>& reports) {
  constexpr double kWidth = 960, kPanelH = 380, kLeft = 80;
  std::vector<std::string> groups;
  for (const TracePolicyReport& rep : reports) {
    for (const std::string& g : GroupsOf(rep)) {
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
  }
  const double legend_h = 30 + 18.0 * (8 + groups.size() + 3);
  const double height = kPanelH * reports.size() + legend_h;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, height, kWidth, height);
  for (size_t p = 0; p < reports.size(); ++p) {
    absl::StrAppendFormat(&out, "<g transform=\"translate(0 %.0f)\">\n", p * kPanelH);
    absl::StrAppend(&out, PolicyScatterSvg(reports[p], kWidth, kPanelH), "</g>\n");
  }
  absl::StrAppend(&out, PolicyLegendSvg(groups, kLeft, kPanelH * reports.size() + 16));
  out += "</svg>\n";
  return out;
}

std::string PolicyLegendSvg(const std::vector<std::string>& groups, double left, double top) {
  std::string out;
  double ly = top;
  absl::StrAppendFormat(&out,
                        "<text x=\"%.0f\" y=\"%.0f\">colour: reuse policy set (e = event, o = "
                        "opportunistic, i = internal); shape: threshold and growth; settings "
                        "that coincide share a label</text>\n",
                        left, ly);
  ReplaySettings any;
  for (const ReplaySettings& s : AllReuseCombinations(any)) {
    ly += 18;
    const std::string code = ReuseCode(s);
    const std::string name = s.ReuseLabel();
    absl::StrAppendFormat(&out, "%s<text x=\"%.0f\" y=\"%.1f\">%s</text>\n",
                          Marker(0, left + 6, ly - 4, kPalette[ReuseIndex(s)], "black"), left + 20,
                          ly, XmlEscape(code == name ? name : absl::StrCat(code, "  ", name)));
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    ly += 18;
    absl::StrAppendFormat(&out, "%s<text x=\"%.0f\" y=\"%.1f\">%s</text>\n",
                          Marker(static_cast<int>(g), left + 6, ly - 4, "white", "black"),
                          left + 20, ly, XmlEscape(groups[g]));
  }
  ly += 18;
  absl::StrAppendFormat(&out,
                        "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"black\" "
                        "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.1f\">CUDA defaults (every "
                        "reuse rule, threshold 0, growth chunked) when not among the rows, and "
                        "other allocators, by name</text>\n",
                        left + 1, ly - 9, left + 11, ly + 1, left + 1, ly + 1, left + 11, ly - 9,
                        left + 20, ly);
  ly += 18;
  absl::StrAppendFormat(&out,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"white\" "
                        "stroke=\"black\" stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.1f\">the "
                        "recorded setting (or the default one), when not among the rows</text>\n",
                        left + 1, ly - 9, left + 20, ly);
  ly += 18;
  absl::StrAppendFormat(&out,
                        "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"7\" fill=\"none\" stroke=\"#D55E00\" "
                        "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.1f\">ship: smallest minimum "
                        "capacity, then shortest makespan, against the recorded or default "
                        "setting</text>\n",
                        left + 6, ly - 4, left + 20, ly);
  return out;
}

}  // namespace streampool::replay
