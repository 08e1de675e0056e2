#include "src/replay/policy_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/pool/names.h"
#include "src/replay/report.h"

namespace streampool::replay {
namespace {

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

PolicySummary SummarizePolicies(const TracePolicyReport& report) {
  PolicySummary sum;
  for (const CapacityResult& r : report.rows) {
    if (r.fits && (sum.best == nullptr || Better(r, *sum.best))) sum.best = &r;
  }
  for (const CapacityResult& r : report.rows) {
    if (sum.cuda_defaults == nullptr && IsCudaDefaults(r.settings)) sum.cuda_defaults = &r;
  }
  if (sum.cuda_defaults == nullptr && report.cuda_defaults)
    sum.cuda_defaults = &*report.cuda_defaults;
  if (sum.best == nullptr) return sum;
  for (const CapacityResult& r : report.rows) {
    if (NoReuse(r.settings) &&
        r.settings.release_threshold == sum.best->settings.release_threshold &&
        r.settings.growth == sum.best->settings.growth) {
      sum.none = &r;
      break;
    }
  }
  return sum;
}

absl::StatusOr<std::vector<TracePolicyReport>> BuildPolicyReports(
    absl::Span<const Trace> traces, const std::vector<ReplaySettings>& settings,
    bool with_cuda_defaults, int threads, const JobProgressFn& progress) {
  bool swept_cuda = false;
  for (const ReplaySettings& s : settings) swept_cuda = swept_cuda || IsCudaDefaults(s);
  const bool apart = with_cuda_defaults && !swept_cuda && !settings.empty();
  const size_t per_trace = settings.size() + (apart ? 1 : 0);

  std::vector<CapacityJob> jobs;
  jobs.reserve(traces.size() * per_trace);
  for (const Trace& t : traces) {
    for (const ReplaySettings& s : settings) jobs.push_back({&t, s});
    if (apart) jobs.push_back({&t, CudaDefaults(settings[0])});
  }
  std::vector<absl::StatusOr<CapacityResult>> results = MinCapacities(jobs, threads, progress);

  std::vector<TracePolicyReport> reports;
  for (size_t i = 0; i < traces.size(); ++i) {
    TracePolicyReport rep;
    rep.trace = &traces[i];
    for (size_t k = 0; k < per_trace; ++k) {
      absl::StatusOr<CapacityResult>& r = results[i * per_trace + k];
      if (!r.ok()) return r.status();
      if (k < settings.size()) {
        rep.rows.push_back(*std::move(r));
      } else {
        rep.cuda_defaults = *std::move(r);
      }
    }
    reports.push_back(std::move(rep));
  }
  return reports;
}

// ------------------------------------------------------------------- text

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
  // Another allocator's row names it where a pool setting would stand.
  auto reuse_of = [](const ReplaySettings& s) {
    return s.allocator == AllocatorKind::kStreampool ? s.ReuseLabel() : s.AllocatorLabel();
  };
  auto threshold_of = [](const ReplaySettings& s) {
    return s.allocator == AllocatorKind::kStreampool ? s.ThresholdLabel()
           : s.allocator == AllocatorKind::kCuda     ? std::string("0")
                                                     : std::string("-");
  };
  auto growth_of = [](const ReplaySettings& s) {
    return s.allocator == AllocatorKind::kStreampool ? std::string(internal::EnumName(s.growth))
           : s.allocator == AllocatorKind::kCuda     ? std::string("chunked")
                                                     : std::string("-");
  };
  for (const TracePolicyReport& rep : reports) {
    const Trace& t = *rep.trace;
    absl::StrAppendFormat(&out, "%s: %d ops, peak live %s (%d bytes)\n", t.name, t.ops.size(),
                          Human(t.peak_live_bytes), t.peak_live_bytes);
    std::vector<std::pair<std::string, const CapacityResult*>> lines;
    for (const CapacityResult& r : rep.rows) {
      lines.emplace_back(r.recorded_pools == 0 || r.settings.allocator != AllocatorKind::kStreampool
                             ? ""
                             : "recorded: ",
                         &r);
    }
    if (rep.cuda_defaults) lines.emplace_back("CUDA defaults: ", &*rep.cuda_defaults);
    int reuse_w = 28, group_w = 9, growth_w = 10;
    for (const auto& [prefix, r] : lines) {
      reuse_w = std::max(reuse_w, static_cast<int>((prefix + reuse_of(r->settings)).size()));
      group_w = std::max(group_w, static_cast<int>(threshold_of(r->settings).size()));
      growth_w = std::max(growth_w, static_cast<int>(growth_of(r->settings).size()));
    }
    absl::StrAppendFormat(&out, "  %-*s %-*s %-*s %13s %13s %8s %12s %6s %6s  %-40s %7s\n", reuse_w,
                          "reuse", group_w, "threshold", growth_w, "growth", "peak reserved",
                          "min capacity", "granules", "makespan ms", "waits", "syncs",
                          "reuse same/event/opp/sync/internal/fresh", "replays");
    for (const auto& [prefix, r] : lines) {
      std::string min = "does not fit", granules = "-", makespan = "-", waits = "-", syncs = "-",
                  reuse = "-";
      if (r->fits) {
        min = Human(r->min_capacity);
        // A mark where a smaller device fitted below one that failed.
        granules = absl::StrCat(r->min_capacity_granules(), r->lower_fits_found > 0 ? "*" : "");
        makespan = Ms(r->at_min.makespan_ns);
        waits = absl::StrCat(r->at_min.counters.waits);
        syncs = absl::StrCat(r->at_min.synchronizes);
        const PoolStats& s = r->at_min.stats;
        reuse =
            IsModel(r->settings.allocator)
                ? absl::StrFormat("cross-stream %d, segments %d",
                                  r->at_min.counters.cross_stream_reuses,
                                  r->at_min.counters.segments_made)
                : absl::StrFormat("%d/%d/%d/%d/%d/%d", s.reuse_same_stream,
                                  s.reuse_event_dependency, s.reuse_opportunistic,
                                  s.reuse_after_sync, s.reuse_internal_dependency, s.fresh_allocs);
      }
      absl::StrAppendFormat(&out, "  %-*s %-*s %-*s %13s %13s %8s %12s %6s %6s  %-40s %7d\n",
                            reuse_w, prefix + reuse_of(r->settings), group_w,
                            threshold_of(r->settings), growth_w, growth_of(r->settings),
                            Human(r->unconstrained.peak_reserved), min, granules, makespan, waits,
                            syncs, reuse, r->replays);
    }
    // One row is its own best; the summary is for a choice between several.
    if (lines.size() < 2) {
      absl::StrAppend(&out, "\n");
      continue;
    }
    const PolicySummary sum = SummarizePolicies(rep);
    if (sum.best == nullptr) {
      absl::StrAppend(&out, "  no setting fits in ",
                      Human(rep.rows.empty() ? 0 : rep.rows[0].settings.device_capacity), "\n\n");
      continue;
    }
    const CapacityResult& best = *sum.best;
    absl::StrAppendFormat(&out, "  best: %s: %s (%d granules), makespan %s ms\n",
                          best.settings.Label(), Human(best.min_capacity),
                          best.min_capacity_granules(), Ms(best.at_min.makespan_ns));
    auto against = [&](const char* what, const CapacityResult* ref) {
      if (ref == nullptr) {
        absl::StrAppendFormat(&out, "    against %s: not swept\n", what);
      } else if (!ref->fits) {
        absl::StrAppendFormat(&out, "    against %s (%s): it does not fit in %s\n", what,
                              ref->settings.Label(), Human(ref->settings.device_capacity));
      } else {
        const int64_t saved =
            static_cast<int64_t>(ref->min_capacity) - static_cast<int64_t>(best.min_capacity);
        const int64_t granules = saved / static_cast<int64_t>(kCapacityGranule);
        absl::StrAppendFormat(&out, "    against %s (%s): %s, saves %s%s (%d granule%s)\n", what,
                              ref->settings.Label(), Human(ref->min_capacity), saved < 0 ? "-" : "",
                              Human(static_cast<uint64_t>(std::abs(saved))), granules,
                              granules == 1 || granules == -1 ? "" : "s");
      }
    };
    against("all reuse off", sum.none);
    against("CUDA's defaults", sum.cuda_defaults);
    absl::StrAppend(&out, "\n");
  }
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
    Json counts = Json::object();
    for (const internal::NamedValue<ReuseRule>& rule : internal::EnumNames<ReuseRule>()) {
      counts[rule.name] = ReuseCount(r.at_min.stats, rule.value);
    }
    row["min_capacity_bytes"] = r.min_capacity;
    row["min_capacity_granules"] = r.min_capacity_granules();
    row["peak_reserved_bytes_at_min_capacity"] = r.at_min.peak_reserved;
    row["makespan_ns_at_min_capacity"] = r.at_min.makespan_ns;
    row["waits_inserted"] = r.at_min.stats.waits_inserted;
    row["synchronizes"] = r.at_min.synchronizes;
    row["reuse_counts"] = std::move(counts);
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
    traces.push_back({{"file", t.name},
                      {"format", TraceFormatName(t.format)},
                      {"ops", t.ops.size()},
                      {"peak_live_bytes", t.peak_live_bytes},
                      {"rows", std::move(rows)},
                      {"best", std::move(best)},
                      {"vs_none", std::move(vs_none)},
                      {"vs_cuda_defaults", std::move(vs_cuda)}});
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

}  // namespace

std::string FormatPolicySvg(const std::vector<TracePolicyReport>& reports) {
  constexpr double kWidth = 960, kPanelH = 380, kLeft = 80, kRight = 260, kTop = 40, kBottom = 50;
  // Threshold/growth groups in the order they first appear.
  std::vector<std::string> groups;
  for (const TracePolicyReport& rep : reports) {
    for (const CapacityResult& r : rep.rows) {
      const std::string g = GroupLabel(r.settings);
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
  }
  auto shape_of = [&](const ReplaySettings& s) {
    return static_cast<int>(std::find(groups.begin(), groups.end(), GroupLabel(s)) -
                            groups.begin());
  };
  const double legend_h = 30 + 18.0 * (8 + groups.size() + 2);
  const double height = kPanelH * reports.size() + legend_h;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, height, kWidth, height);

  for (size_t p = 0; p < reports.size(); ++p) {
    const TracePolicyReport& rep = reports[p];
    const PolicySummary sum = SummarizePolicies(rep);
    const double y0 = p * kPanelH;
    const double plot_w = kWidth - kLeft - kRight;
    const double plot_h = kPanelH - kTop - kBottom;

    std::vector<const CapacityResult*> points;
    std::vector<std::string> misfits;
    for (const CapacityResult& r : rep.rows) {
      if (r.fits) {
        points.push_back(&r);
      } else {
        misfits.push_back(absl::StrCat(ReuseCode(r.settings), " (", GroupLabel(r.settings), ")"));
      }
    }
    const bool cuda_apart = rep.cuda_defaults && rep.cuda_defaults->fits;
    if (cuda_apart) points.push_back(&*rep.cuda_defaults);

    uint64_t c_min = UINT64_MAX, c_max = 0, m_min = UINT64_MAX, m_max = 0;
    for (const CapacityResult* r : points) {
      c_min = std::min(c_min, r->min_capacity);
      c_max = std::max(c_max, r->min_capacity);
      m_min = std::min(m_min, r->at_min.makespan_ns);
      m_max = std::max(m_max, r->at_min.makespan_ns);
    }
    if (points.empty()) c_min = c_max = m_min = m_max = 0;
    const bool gib = c_max >= kGiB;
    const double unit = gib ? kGiBf : kMiBf;
    const Axis xa = Axis::Of(c_min / unit, c_max / unit);
    const Axis ya = Axis::Of(m_min / 1e6, m_max / 1e6);
    auto to_x = [&](uint64_t b) { return kLeft + plot_w * xa.Frac(b / unit); };
    auto to_y = [&](uint64_t ns) { return y0 + kTop + plot_h * (1 - ya.Frac(ns / 1e6)); };

    absl::StrAppendFormat(&out,
                          "<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\" "
                          "font-weight=\"bold\">%s</text>\n",
                          kLeft, y0 + 22,
                          XmlEscape(std::filesystem::path(rep.trace->name).filename().string()));
    absl::StrAppendFormat(
        &out,
        "<g stroke=\"black\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
        "y2=\"%.1f\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
        kLeft, y0 + kTop, kLeft, y0 + kTop + plot_h, kLeft, y0 + kTop + plot_h, kLeft + plot_w,
        y0 + kTop + plot_h);
    const double xs = NiceStep(xa.hi - xa.lo, 8);
    for (double v = std::ceil(xa.lo / xs) * xs; v <= xa.hi + 1e-9; v += xs) {
      const double x = kLeft + plot_w * xa.Frac(v);
      absl::StrAppendFormat(
          &out,
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
          x, y0 + kTop, x, y0 + kTop + plot_h, x, y0 + kTop + plot_h + 16, v);
    }
    absl::StrAppendFormat(&out,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">minimum device "
                          "capacity (%s)</text>\n",
                          kLeft + plot_w / 2, y0 + kTop + plot_h + 34, gib ? "GiB" : "MiB");
    const double ys = NiceStep(ya.hi - ya.lo, 6);
    for (double v = std::ceil(ya.lo / ys) * ys; v <= ya.hi + 1e-9; v += ys) {
      const double y = y0 + kTop + plot_h * (1 - ya.Frac(v));
      absl::StrAppendFormat(
          &out,
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
          kLeft, y, kLeft + plot_w, y, kLeft - 6, y + 4, v);
    }
    absl::StrAppendFormat(&out,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                          "transform=\"rotate(-90 %.1f %.1f)\">makespan at that capacity "
                          "(ms)</text>\n",
                          kLeft - 55, y0 + kTop + plot_h / 2, kLeft - 55, y0 + kTop + plot_h / 2);

    // Markers first, then labels, so that no marker hides a label. Points
    // often coincide (policy sets that decide alike), so each label carries
    // its point's marker in small, and a label moves down below any label it
    // would overlap.
    auto glyph = [&](const CapacityResult* r, double x, double y, double radius) {
      if (cuda_apart && r == &*rep.cuda_defaults) {
        return absl::StrFormat(
            "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"black\" "
            "stroke-width=\"2\"/>",
            x - radius, y - radius, x + radius, y + radius, x - radius, y + radius, x + radius,
            y - radius);
      }
      return Marker(shape_of(r->settings), x, y, kPalette[ReuseIndex(r->settings)], "black",
                    radius);
    };
    for (const CapacityResult* r : points) {
      const double x = to_x(r->min_capacity);
      const double y = to_y(r->at_min.makespan_ns);
      absl::StrAppend(&out, glyph(r, x, y, 5), "\n");
      if (r == sum.best) {
        absl::StrAppendFormat(&out,
                              "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"10\" fill=\"none\" "
                              "stroke=\"#D55E00\" stroke-width=\"2\"/>\n",
                              x, y);
      }
    }
    struct Box {
      double x0, x1, y0, y1;
    };
    std::vector<Box> taken;
    for (const CapacityResult* r : points) {
      const double x = to_x(r->min_capacity);
      const double y = to_y(r->at_min.makespan_ns);
      taken.push_back({x - 6, x + 6, y - 6, y + 6});
    }
    for (const CapacityResult* r : points) {
      const double x = to_x(r->min_capacity);
      const double y = to_y(r->at_min.makespan_ns);
      std::string label =
          cuda_apart && r == &*rep.cuda_defaults ? "CUDA defaults" : ReuseCode(r->settings);
      if (label != "CUDA defaults" && groups.size() > 1) {
        absl::StrAppend(
            &label, " (", r->settings.ThresholdLabel(),
            groups.size() > 2 ? absl::StrCat(", ", internal::EnumName(r->settings.growth)) : "",
            ")");
      }
      if (r == sum.best) label += " best";
      // About 6.6 px per character at font-size 12, plus the glyph.
      const Box at{x + 12, x + 12 + 14 + 6.6 * label.size(), y - 6, y + 7};
      // Beside the point, else the nearest free line below or above it
      // inside the plot, so that no label runs into the axis labels.
      const double top = y0 + kTop, bottom = y0 + kTop + plot_h;
      Box box = at;
      for (int k = 0; k < 80; ++k) {
        const double shift = 13.0 * ((k + 1) / 2) * (k % 2 == 1 ? 1 : -1);
        Box b = at;
        b.y0 += shift;
        b.y1 += shift;
        if (b.y0 < top || b.y1 > bottom) continue;
        const bool clash = std::any_of(taken.begin(), taken.end(), [&](const Box& t) {
          return b.x0 < t.x1 && t.x0 < b.x1 && b.y0 < t.y1 && t.y0 < b.y1;
        });
        box = b;
        if (!clash) break;
      }
      taken.push_back(box);
      absl::StrAppendFormat(&out, "%s<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                            glyph(r, box.x0 + 4, box.y0 + 6.5, 3.5), box.x0 + 12, box.y0 + 10.5,
                            XmlEscape(label));
    }
    if (points.empty()) {
      absl::StrAppendFormat(&out,
                            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">no setting "
                            "fits</text>\n",
                            kLeft + plot_w / 2, y0 + kTop + plot_h / 2);
    }
    for (size_t k = 0; k < misfits.size(); ++k) {
      absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"gray\">%s</text>\n",
                            kLeft + plot_w + 12, y0 + kTop + 14 * (k + 1),
                            XmlEscape(absl::StrCat(k == 0 ? "does not fit: " : "", misfits[k])));
    }
  }

  // Legend: colours are policy sets, shapes threshold/growth groups.
  double ly = kPanelH * reports.size() + 16;
  absl::StrAppendFormat(&out,
                        "<text x=\"%.0f\" y=\"%.0f\">colour: reuse policy set (e = event, o = "
                        "opportunistic, i = internal); shape: threshold and growth</text>\n",
                        kLeft, ly);
  ReplaySettings any;
  const std::vector<ReplaySettings> sets = AllReuseCombinations(any);
  for (const ReplaySettings& s : sets) {
    ly += 18;
    const std::string code = ReuseCode(s);
    const std::string name = s.ReuseLabel();
    absl::StrAppendFormat(&out, "%s<text x=\"%.0f\" y=\"%.1f\">%s</text>\n",
                          Marker(0, kLeft + 6, ly - 4, kPalette[ReuseIndex(s)], "black"),
                          kLeft + 20, ly,
                          XmlEscape(code == name ? name : absl::StrCat(code, "  ", name)));
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    ly += 18;
    absl::StrAppendFormat(&out, "%s<text x=\"%.0f\" y=\"%.1f\">%s</text>\n",
                          Marker(static_cast<int>(g), kLeft + 6, ly - 4, "white", "black"),
                          kLeft + 20, ly, XmlEscape(groups[g]));
  }
  ly += 18;
  absl::StrAppendFormat(&out,
                        "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"black\" "
                        "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.1f\">CUDA defaults (every "
                        "reuse rule, threshold 0, growth chunked), when not among the "
                        "rows</text>\n",
                        kLeft + 1, ly - 9, kLeft + 11, ly + 1, kLeft + 1, ly + 1, kLeft + 11,
                        ly - 9, kLeft + 20, ly);
  ly += 18;
  absl::StrAppendFormat(&out,
                        "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"7\" fill=\"none\" stroke=\"#D55E00\" "
                        "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.1f\">best: smallest minimum "
                        "capacity, then shortest makespan</text>\n",
                        kLeft + 6, ly - 4, kLeft + 20, ly);
  out += "</svg>\n";
  return out;
}

}  // namespace streampool::replay
