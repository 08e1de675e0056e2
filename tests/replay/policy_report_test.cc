// What the policy report says to ship (src/replay/policy_report.h): against
// the recorded or default setting, with the maxSize that realises it, the
// warnings of searches that were not monotone, other allocators' rows, the
// scatter panel's labels and the HTML page, on small inline traces.
#include "src/replay/policy_report.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/capacity.h"
#include "src/replay/replay.h"
#include "src/replay/report.h"
#include "src/replay/trace.h"

namespace streampool::replay {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kG = kCapacityGranule;

Trace MustParse(absl::string_view text, absl::string_view name = "t") {
  absl::StatusOr<Trace> t = ParseTrace(text, name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Trace{};
}

std::vector<TracePolicyReport> MustBuild(const std::vector<Trace>& traces,
                                         const std::vector<ReplaySettings>& settings) {
  absl::StatusOr<std::vector<TracePolicyReport>> r =
      BuildPolicyReports(traces, settings, /*with_cuda_defaults=*/true, 2);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : std::vector<TracePolicyReport>{};
}

// Stream 2 allocates while stream 1's free is pending and unordered: rule 5
// fits it in one granule by a wait; without rule 5 it needs two.
constexpr char kUnordered[] =
    "alloc 0 2097152 1\n"
    "kernel 1 1000\n"
    "free 0 1\n"
    "alloc 1 2097152 2\n"
    "kernel 2 500\n"
    "free 1 2\n"
    "sync 2\n";

// The same as a recording whose pool had every reuse rule off: its own
// setting needs two granules.
constexpr char kRecordedNone[] =
    "# streampool trace v1\n"
    "# device_capacity 1073741824\n"
    "pool 0 0 type=device reuse=none threshold=0 growth=expandable front_cache=1 default=1\n"
    "alloc 0 2097152 1 0\n"
    "kernel 1 1000\n"
    "free 0 1\n"
    "alloc 1 2097152 2 0\n"
    "kernel 2 500\n"
    "free 1 2\n"
    "sync 2\n";

std::vector<ReplaySettings> Sweep(std::vector<AllocatorKind> allocators = {}) {
  return PolicySweep(ReplaySettings{}, {}, /*thresholds_given=*/false, {PoolGrowth::kDefault},
                     allocators);
}

TEST(PolicySweep, EightSetsAtZeroAndMaxThenOneRowPerOtherAllocator) {
  const std::vector<ReplaySettings> rows =
      Sweep({AllocatorKind::kStreampool, AllocatorKind::kRmmPool});
  ASSERT_EQ(rows.size(), 17u);
  EXPECT_EQ(rows[0].release_threshold, 0u);
  EXPECT_EQ(rows[8].release_threshold, UINT64_MAX);
  EXPECT_EQ(rows[16].allocator, AllocatorKind::kRmmPool);
  ReplaySettings recorded;
  recorded.use_recorded = true;
  for (const ReplaySettings& s :
       PolicySweep(recorded, {0}, /*thresholds_given=*/true, {PoolGrowth::kDefault}, {})) {
    EXPECT_FALSE(s.use_recorded);  // the recorded setting is the reference, not a row
  }
}

TEST(PolicyReport, TheDefaultSettingStaysWhenNothingBeatsIt) {
  const std::vector<Trace> traces = {MustParse(kUnordered, "unordered.trace")};
  const std::vector<TracePolicyReport> reports = MustBuild(traces, Sweep());
  ASSERT_EQ(reports.size(), 1u);
  const PolicySummary sum = SummarizePolicies(reports[0]);
  // The sweep has the default setting: it is the reference, not searched apart.
  EXPECT_FALSE(reports[0].reference.has_value());
  ASSERT_NE(sum.reference, nullptr);
  EXPECT_TRUE(IsDefaultSetting(sum.reference->settings));
  EXPECT_FALSE(sum.reference_recorded);
  EXPECT_EQ(sum.ship, sum.reference);

  const nlohmann::ordered_json ship = PolicyReportJson(reports)["traces"][0]["ship"];
  EXPECT_TRUE(ship["is_reference"].get<bool>());
  EXPECT_EQ(ship["max_size_bytes"], kG);
  // One granule as maxSize on an 80 GiB device holds the trace as the
  // 2 MiB device does: rule 5 serves where the pool may not grow.
  EXPECT_EQ(ship["realised_by"], "max_size");
  EXPECT_TRUE(ship["capped_fits"].get<bool>());
  EXPECT_EQ(ship["peak_reserved_bytes_unconstrained"], 2 * kG);
  EXPECT_EQ(ship["peak_reserved_bytes_capped"], kG);
  EXPECT_GT(ship["makespan_ns_capped"].get<uint64_t>(),
            ship["makespan_ns_unconstrained"].get<uint64_t>());
  EXPECT_EQ(ship["saved_bytes"], 0);
  const std::string text = FormatPolicyText(reports);
  EXPECT_THAT(text, HasSubstr("ship: event+opportunistic+internal, threshold 0 (the default "
                              "setting): no swept setting needs less"));
  EXPECT_THAT(text, HasSubstr("with maxSize 2.0 MiB (2097152 bytes) on any device: peak "
                              "reserved 4.0 MiB unconstrained, 2.0 MiB capped"));
}

TEST(PolicyReport, ARecordingIsShippedAgainstItsOwnSettings) {
  const std::vector<Trace> traces = {MustParse(kRecordedNone, "recorded.trace")};
  const std::vector<TracePolicyReport> reports = MustBuild(traces, Sweep());
  ASSERT_EQ(reports.size(), 1u);
  const TracePolicyReport& rep = reports[0];
  ASSERT_TRUE(rep.reference.has_value());
  EXPECT_EQ(rep.reference->recorded_pools, 1u);
  EXPECT_EQ(rep.reference->settings.ReuseLabel(), "none");
  EXPECT_EQ(rep.reference->min_capacity, 2 * kG);
  const PolicySummary sum = SummarizePolicies(rep);
  ASSERT_NE(sum.ship, nullptr);
  EXPECT_NE(sum.ship, sum.reference);
  EXPECT_EQ(sum.ship, sum.best);
  EXPECT_EQ(sum.ship->min_capacity, kG);

  const nlohmann::ordered_json trace = PolicyReportJson(reports)["traces"][0];
  EXPECT_EQ(trace["reference"]["source"], "recorded");
  EXPECT_TRUE(trace["reference"]["row"].is_null());
  EXPECT_EQ(trace["reference"]["saved_bytes"], kG);
  EXPECT_EQ(trace["ship"]["saved_bytes"], kG);
  EXPECT_FALSE(trace["ship"]["is_reference"].get<bool>());
  EXPECT_EQ(trace["ship"]["row"], trace["best"]["row"]);
  const std::string text = FormatPolicyText(reports);
  EXPECT_THAT(text, HasSubstr("recorded: none"));
  EXPECT_THAT(text, HasSubstr("instead of the recorded setting (none, threshold 0"));
  EXPECT_THAT(text, HasSubstr("against the recorded setting: 4.0 MiB, saves 2.0 MiB (50.0 %)"));
}

TEST(PolicyReport, TiesToTheReferenceGoToTheShorterMakespan) {
  const Trace t;
  TracePolicyReport rep;
  rep.trace = &t;
  rep.with_ship = true;
  auto row = [](uint64_t capacity, uint64_t makespan, bool all_on) {
    CapacityResult r;
    r.fits = true;
    r.min_capacity = capacity;
    r.at_min.makespan_ns = makespan;
    r.settings.reuse_event = r.settings.reuse_opportunistic = r.settings.reuse_internal = all_on;
    return r;
  };
  // The default setting (all on) against a set as small but faster.
  rep.rows = {row(2 * kG, 300, true), row(2 * kG, 200, false)};
  EXPECT_EQ(SummarizePolicies(rep).ship, &rep.rows[1]);
  rep.rows[1].at_min.makespan_ns = 300;  // a full tie keeps what runs today
  EXPECT_EQ(SummarizePolicies(rep).ship, &rep.rows[0]);
}

TEST(PolicyReport, SearchesThatWereNotMonotoneAreWarnings) {
  const Trace t = MustParse(kUnordered, "unordered.trace");
  TracePolicyReport rep;
  rep.trace = &t;
  rep.with_ship = true;
  CapacityResult r;
  r.fits = true;
  r.min_capacity = kG;
  r.lower_fits_found = 2;
  rep.rows = {r};
  std::vector<TracePolicyReport> reports = {rep};
  EXPECT_THAT(FormatPolicyText(reports),
              HasSubstr("warning: capacity searches not monotone (a smaller capacity fitted "
                        "below one that failed, so a smaller device may fit): "
                        "event+opportunistic+internal, threshold 0 (2)"));
  const nlohmann::ordered_json doc = PolicyReportJson(reports);
  ASSERT_EQ(doc["traces"][0]["warnings"].size(), 1u);
  EXPECT_THAT(doc["traces"][0]["warnings"][0].get<std::string>(), HasSubstr("not monotone"));
  EXPECT_THAT(FormatPolicyHtml(reports), HasSubstr("<p class=\"warn\">Warning: capacity searches "
                                                   "not monotone"));
  reports[0].rows[0].lower_fits_found = 0;
  EXPECT_THAT(FormatPolicyText(reports), Not(HasSubstr("not monotone (")));
}

TEST(PolicyReport, OtherAllocatorsAreComparedNeverShipped) {
  const std::vector<Trace> traces = {MustParse(kUnordered, "unordered.trace")};
  const std::vector<TracePolicyReport> reports = MustBuild(
      traces,
      Sweep({AllocatorKind::kStreampool, AllocatorKind::kRmmPool, AllocatorKind::kPytorch}));
  const PolicySummary sum = SummarizePolicies(reports[0]);
  ASSERT_EQ(sum.models.size(), 2u);
  ASSERT_NE(sum.ship, nullptr);
  EXPECT_EQ(sum.ship->settings.allocator, AllocatorKind::kStreampool);
  EXPECT_EQ(sum.best->settings.allocator, AllocatorKind::kStreampool);
  const nlohmann::ordered_json trace = PolicyReportJson(reports)["traces"][0];
  ASSERT_EQ(trace["vs_allocators"].size(), 2u);
  EXPECT_EQ(trace["vs_allocators"][0]["allocator"], "rmm-pool");
  EXPECT_EQ(trace["vs_allocators"][1]["allocator"], "pytorch");
  const std::string svg = PolicyScatterSvg(reports[0], 680, 400);
  EXPECT_THAT(svg, HasSubstr("rmm-pool"));
  EXPECT_THAT(svg, HasSubstr("pytorch"));
  EXPECT_THAT(FormatPolicyText(reports), HasSubstr("against rmm-pool"));
}

// Every label is drawn once per place, and sits at its point: within reach
// of it, or tied to it by a leader line.
TEST(PolicyScatter, CoincidingPointsShareOneLabelBesideThem) {
  const std::vector<Trace> traces = {MustParse(kUnordered, "unordered.trace")};
  const std::vector<TracePolicyReport> reports = MustBuild(traces, Sweep());
  const std::string svg = PolicyScatterSvg(reports[0], 680, 400);
  const std::regex place("<g class=\"place\">");
  const std::regex label("<text class=\"lbl\"");
  const std::regex point("<g class=\"pt\">");
  const auto count = [&](const std::regex& re) {
    return std::distance(std::sregex_iterator(svg.begin(), svg.end(), re), std::sregex_iterator());
  };
  // 16 rows and CUDA's defaults on two places: with rule 5 and without.
  EXPECT_EQ(count(point), 17);
  EXPECT_EQ(count(label), count(place));
  EXPECT_LT(count(place), 17);
  EXPECT_THAT(svg, HasSubstr(" ship</text>"));
  EXPECT_THAT(svg, HasSubstr("CUDA defaults"));
  // Each label's box (about 6.6 px a character after a 12 px glyph) lies
  // within 40 px of its place's first point.
  const std::regex pair(
      "<g class=\"pt\">(?:<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"|<rect x=\"([0-9.]+)\" "
      "y=\"([0-9.]+)\"|<polygon points=\"([0-9.]+),([0-9.]+)|<path d=\"M([0-9.]+) ([0-9.]+))"
      "[^\\n]*<text class=\"lbl\" x=\"([0-9.]+)\" y=\"([0-9.]+)\">([^<]*)<");
  int checked = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), pair); it != std::sregex_iterator();
       ++it) {
    double px = 0, py = 0;
    for (int g = 1; g <= 7; g += 2) {
      if ((*it)[g].matched) {
        px = std::stod((*it)[g]);
        py = std::stod((*it)[g + 1]);
      }
    }
    const double x0 = std::stod((*it)[9]) - 12, y = std::stod((*it)[10]);
    const double x1 = x0 + 12 + 6.6 * (*it)[11].length();
    const double dx = px < x0 ? x0 - px : px > x1 ? px - x1 : 0;
    EXPECT_LT(dx + std::abs(y - 4 - py), 40) << (*it)[0];
    ++checked;
  }
  EXPECT_EQ(checked, count(place));
}

TEST(PolicyHtml, OnePageWithEverythingInline) {
  // The framed allocation is live at the peak, never freed.
  const std::vector<Trace> traces = {
      MustParse("alloc 2 4096 1\n# frames forward (model.py:12) | step (train.py:40)\n" +
                    std::string(kUnordered),
                "framed.trace")};
  ASSERT_EQ(traces[0].frames.size(), 1u);
  std::vector<TracePolicyReport> reports = MustBuild(traces, Sweep());
  ASSERT_TRUE(AddPolicySeries(reports).ok());
  const std::string html = FormatPolicyHtml(reports);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_THAT(html, HasSubstr("<script>"));
  EXPECT_THAT(html, HasSubstr("<svg class=\"mem\""));
  EXPECT_THAT(html, HasSubstr("<svg class=\"scatter\""));
  EXPECT_THAT(html, HasSubstr("<table class=\"rows\">"));
  EXPECT_THAT(html, HasSubstr("peak live 2.0 MiB"));
  // The reference unconstrained, and the shipped setting capped (reserved and used).
  EXPECT_EQ(reports[0].series_runs.size(), 1u);
  EXPECT_THAT(html, HasSubstr("data-series=\"2\""));
  EXPECT_THAT(html, HasSubstr("<span class=\"frame\">forward (model.py:12)</span><br><span "
                              "class=\"frame\">step (train.py:40)</span>"));
  // Nothing outside the page: no source, link or style from elsewhere.
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("href=\"http")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
}

TEST(PolicyHtml, ATraceOfSeveralPoolsDrawsEachPool) {
  // A device pool and a pinned host pool: the chart has the sum and each.
  constexpr char kTwoPools[] =
      "# streampool trace v1\n"
      "# device_capacity 1073741824\n"
      "pool 0 0 type=device reuse=event+opportunistic+internal threshold=0 growth=expandable "
      "front_cache=1 default=1\n"
      "pool 1 0 type=pinned_host reuse=event+opportunistic+internal threshold=0 "
      "growth=expandable front_cache=1\n"
      "alloc 0 4194304 1 0\n"
      "alloc 1 2097152 1 1\n"
      "kernel 1 1000\n"
      "free 0 1\n"
      "free 1 1\n"
      "sync 1\n";
  // The reports point at their traces, which must outlive them.
  const std::vector<Trace> traces = {MustParse(kTwoPools, "two.trace")};
  std::vector<TracePolicyReport> reports = MustBuild(traces, Sweep());
  ASSERT_EQ(reports.size(), 1u);
  ASSERT_TRUE(AddPolicySeries(reports).ok());
  ASSERT_FALSE(reports[0].series_runs.empty());
  const ReplayResult& run = reports[0].series_runs.front();
  ASSERT_EQ(run.pool_series.size(), 2u);
  EXPECT_EQ(run.pool_series[0].name, "pool 0 (device)");
  EXPECT_EQ(run.pool_series[1].name, "pool 1 (pinned_host)");
  uint64_t device_peak = 0, host_peak = 0;
  for (const SeriesPoint& p : run.pool_series[0].points)
    device_peak = std::max(device_peak, p.reserved);
  for (const SeriesPoint& p : run.pool_series[1].points)
    host_peak = std::max(host_peak, p.reserved);
  EXPECT_EQ(device_peak, 4u << 20);
  EXPECT_EQ(host_peak, 2u << 20);
  const std::string html = FormatPolicyHtml(reports);
  EXPECT_THAT(html, HasSubstr("of it, pool 0 (device) (reserved)"));
  EXPECT_THAT(html, HasSubstr("of it, pool 1 (pinned_host) (reserved)"));
}

TEST(TraceFrames, AFramesCommentBelongsToTheAllocBeforeIt) {
  const Trace t = MustParse("alloc 7 100 1\n# frames f (a.py:1) | g (b.py:2)\nfree 7 1\n");
  ASSERT_EQ(t.frames.count(0), 1u);
  EXPECT_EQ(t.frames.at(0), "f (a.py:1) | g (b.py:2)");
  absl::StatusOr<Trace> bad = ParseTrace("kernel 1 5\n# frames f (a.py:1)\n", "bad");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("bad:2: a frames comment follows"));
}

TEST(ReplayReport, TheHeaderShowsTheCapacityAsReplayed) {
  const Trace t = MustParse(kRecordedNone, "recorded.trace");
  ReplaySettings s;
  s.use_recorded = true;
  absl::StatusOr<ReplayResult> r = Replay(t, s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device_capacity, kGiB);  // the recording's, not the settings' 80 GiB
  TraceReport rep;
  rep.trace = &t;
  rep.runs.push_back(*r);
  EXPECT_THAT(FormatText({rep}), HasSubstr("device capacity 1073741824 (1.000 GiB)"));
  EXPECT_EQ(ReportJson({rep})["traces"][0]["runs"][0]["capacity"], kGiB);
  s.recorded_capacity = false;
  absl::StatusOr<ReplayResult> chosen = Replay(t, s);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->device_capacity, 80 * kGiB);
}

}  // namespace
}  // namespace streampool::replay
