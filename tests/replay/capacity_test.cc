// The capacity search and the policy report (src/replay/capacity.h,
// src/replay/policy_report.h) on small inline traces whose smallest device
// follows from docs/design.md's reuse rules, and on random traces where the
// search's answer is checked by replaying at it and one granule below.
#include "src/replay/capacity.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/policy_report.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"
#include "streampool/pool_props.h"

namespace streampool::replay {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kG = kCapacityGranule;

Trace MustParse(absl::string_view text, absl::string_view name = "t") {
  absl::StatusOr<Trace> t = ParseTrace(text, name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Trace{};
}

CapacityResult MustSearch(const Trace& trace, const ReplaySettings& settings) {
  absl::StatusOr<CapacityResult> r = MinCapacity(trace, settings);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : CapacityResult{};
}

// Failed allocations of a replay at `capacity` bytes.
uint64_t FailedAt(const Trace& trace, ReplaySettings settings, uint64_t capacity) {
  settings.device_capacity = capacity;
  absl::StatusOr<ReplayResult> r = Replay(trace, settings);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->failed_allocs : 0;
}

ReplaySettings Reuse(bool event, bool opportunistic, bool internal) {
  ReplaySettings s;
  s.reuse_event = event;
  s.reuse_opportunistic = opportunistic;
  s.reuse_internal = internal;
  return s;
}

// One granule on stream 1, freed after a 1000 ns kernel; stream 2 then
// allocates a granule after waiting on an event recorded behind the free.
// With rule 2 the free serves stream 2 and one granule holds the trace;
// without any reuse rule the pool needs two.
constexpr char kEventOrdered[] =
    "alloc 0 2097152 1\n"
    "kernel 1 1000\n"
    "free 0 1\n"
    "record 5 1\n"
    "wait 2 5\n"
    "alloc 1 2097152 2\n"
    "free 1 2\n";

// The same without the event: stream 2 is not ordered after the free, and
// at time 0 it has not run. An unconstrained pool grows a second granule;
// in one granule only rule 5 serves, by making stream 2 wait for stream 1's
// kernel, so its own 500 ns kernel ends at 1500 rather than 500.
constexpr char kUnordered[] =
    "alloc 0 2097152 1\n"
    "kernel 1 1000\n"
    "free 0 1\n"
    "alloc 1 2097152 2\n"
    "kernel 2 500\n"
    "free 1 2\n"
    "sync 2\n";

TEST(MinCapacity, EventReuseHalvesTheDevice) {
  const Trace t = MustParse(kEventOrdered);
  const CapacityResult on = MustSearch(t, Reuse(true, false, false));
  ASSERT_TRUE(on.fits);
  EXPECT_EQ(on.min_capacity, kG);
  EXPECT_EQ(on.min_capacity_granules(), 1u);
  EXPECT_EQ(on.at_min.stats.reuse_event_dependency, 1u);
  EXPECT_EQ(on.at_min.failed_allocs, 0u);
  // Zero granules is no device: the peak live bytes say one is the least.
  EXPECT_EQ(on.below, BelowEvidence::kBelowPeakLive);
  // The unconstrained run, then its peak (one granule) to confirm it.
  EXPECT_EQ(on.replays, 2);

  const CapacityResult off = MustSearch(t, Reuse(false, false, false));
  ASSERT_TRUE(off.fits);
  EXPECT_EQ(off.min_capacity, 2 * kG);
  EXPECT_EQ(off.unconstrained.peak_reserved, 2 * kG);
  EXPECT_EQ(off.at_min.stats.fresh_allocs, 2u);
  EXPECT_EQ(off.below, BelowEvidence::kReplayed);  // one granule was tried and failed
  EXPECT_EQ(off.replays, 3);
  EXPECT_LT(on.min_capacity, off.min_capacity);
}

TEST(MinCapacity, InternalDependencyTradesTimeForMemory) {
  const Trace t = MustParse(kUnordered);
  const CapacityResult internal = MustSearch(t, Reuse(false, false, true));
  ASSERT_TRUE(internal.fits);
  // Unconstrained, growth comes before rule 5: two granules, no wait.
  EXPECT_EQ(internal.unconstrained.peak_reserved, 2 * kG);
  EXPECT_EQ(internal.unconstrained.stats.waits_inserted, 0u);
  EXPECT_EQ(internal.unconstrained.makespan_ns, 1000u);
  // At its smallest device rule 5 serves and stream 2 waits for stream 1.
  EXPECT_EQ(internal.min_capacity, kG);
  EXPECT_EQ(internal.at_min.stats.waits_inserted, 1u);
  EXPECT_EQ(internal.at_min.stats.reuse_internal_dependency, 1u);
  EXPECT_EQ(internal.at_min.makespan_ns, 1500u);
  EXPECT_EQ(internal.at_min.synchronizes, 1u);

  const CapacityResult none = MustSearch(t, Reuse(false, false, false));
  EXPECT_EQ(none.min_capacity, 2 * kG);
  EXPECT_EQ(none.at_min.stats.waits_inserted, 0u);
  EXPECT_EQ(none.at_min.makespan_ns, 1000u);
  // Rule 2 has no event to follow here, so it alone saves nothing.
  EXPECT_EQ(MustSearch(t, Reuse(true, false, false)).min_capacity, 2 * kG);
}

TEST(MinCapacity, ReleaseThresholdAndGrowthDecideTheDevice) {
  // Two granules, released or kept at the sync, then three on another
  // stream. Released (threshold 0): three granules hold the trace. Kept
  // (threshold max): an expandable pool maps the one granule its free top
  // block lacks, three again; a chunked pool cannot extend its chunk and
  // needs a new three-granule chunk beside it: five, unless the runtime's
  // out-of-memory reclaim gives the kept chunk back first (three).
  const Trace t = MustParse(
      "alloc 0 4194304 1\n"
      "free 0 1\n"
      "sync 1\n"
      "alloc 1 6291456 2\n"
      "free 1 2\n");
  ReplaySettings s = Reuse(false, false, false);
  for (PoolGrowth g : {PoolGrowth::kExpandable, PoolGrowth::kChunked}) {
    s.growth = g;
    s.release_threshold = 0;
    EXPECT_EQ(MustSearch(t, s).min_capacity, 3 * kG) << static_cast<int>(g);
  }
  s.release_threshold = UINT64_MAX;
  s.growth = PoolGrowth::kExpandable;
  EXPECT_EQ(MustSearch(t, s).min_capacity, 3 * kG);
  s.growth = PoolGrowth::kChunked;
  const CapacityResult chunked = MustSearch(t, s);
  EXPECT_EQ(chunked.unconstrained.peak_reserved, 5 * kG);
  EXPECT_EQ(chunked.min_capacity, 3 * kG);
  EXPECT_EQ(chunked.below, BelowEvidence::kBelowPeakLive);
  EXPECT_EQ(chunked.at_min.stats.reclaims, 1u);
  s.oom_reclaim = false;
  const CapacityResult kept = MustSearch(t, s);
  EXPECT_EQ(kept.min_capacity, 5 * kG);
  EXPECT_EQ(kept.below, BelowEvidence::kReplayed);
}

TEST(MinCapacity, ATraceThatNeverFits) {
  // 100 GiB in one allocation; the search's ceiling is 80 GiB.
  const Trace t = MustParse("alloc 0 107374182400 0\nfree 0 0\n");
  const CapacityResult r = MustSearch(t, ReplaySettings{});
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.unconstrained.failed_allocs, 1u);
  EXPECT_EQ(r.replays, 1);
  EXPECT_EQ(r.below, BelowEvidence::kNone);

  // The ceiling is the settings' capacity: without reuse the trace needs two
  // granules.
  ReplaySettings small = Reuse(false, false, false);
  small.device_capacity = kG;
  const CapacityResult one = MustSearch(MustParse(kEventOrdered), small);
  EXPECT_FALSE(one.fits);
  EXPECT_EQ(one.unconstrained.failed_allocs, 1u);
}

TEST(MinCapacity, ACapacityThatIsNotWholeGranulesIsTheAnswerOnlyWhenNothingLessFits) {
  ReplaySettings s = Reuse(false, false, false);
  s.device_capacity = 2 * kG + 4096;
  const CapacityResult r = MustSearch(MustParse(kEventOrdered), s);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.min_capacity, 2 * kG);
}

TEST(MinCapacity, NothingReservedFitsInNothing) {
  const CapacityResult r = MustSearch(MustParse("alloc 0 0 0\nfree 0 0\nkernel 0 10\n"), {});
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.min_capacity, 0u);
  EXPECT_EQ(r.at_min.makespan_ns, 10u);
  EXPECT_EQ(r.replays, 1);
}

TEST(MinCapacity, ARecordedCapacityDoesNotOverrideTheSearch) {
  // A recording's header names an 80 GiB device; the search's capacities
  // still apply when the replay takes the recorded settings.
  const Trace t = MustParse(absl::StrCat("# device_capacity 85899345920\n", kEventOrdered));
  ReplaySettings s = Reuse(false, false, false);
  s.use_recorded = true;
  const CapacityResult r = MustSearch(t, s);
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.min_capacity, 2 * kG);
  EXPECT_EQ(r.below, BelowEvidence::kReplayed);
}

TEST(MinCapacity, RowsSayTheRecordedSettingsTheyRanAt) {
  // kEventOrdered in a recorded pool with no reuse rule: two granules at the
  // recorded settings, one at the settings' (every rule on).
  const Trace t = MustParse(
      "pool 0 0 type=device reuse=none threshold=max growth=chunked default=1\n"
      "alloc 0 2097152 1 0\n"
      "kernel 1 1000\n"
      "free 0 1\n"
      "record 5 1\n"
      "wait 2 5\n"
      "alloc 1 2097152 2 0\n"
      "free 1 2\n");
  ReplaySettings s;
  s.use_recorded = true;
  const CapacityResult recorded = MustSearch(t, s);
  EXPECT_EQ(recorded.recorded_pools, 1u);
  EXPECT_EQ(recorded.settings.Label(), "none, threshold max, growth chunked");
  EXPECT_EQ(recorded.min_capacity, 2 * kG);
  s.use_recorded = false;
  const CapacityResult swept = MustSearch(t, s);
  EXPECT_EQ(swept.recorded_pools, 0u);
  EXPECT_EQ(swept.settings.Label(), "event+opportunistic+internal, threshold 0");
  EXPECT_EQ(swept.min_capacity, kG);

  const std::vector<Trace> traces = {t};
  absl::StatusOr<std::vector<TracePolicyReport>> rep = BuildPolicyReports(traces,
                                                                          {ReplaySettings{},
                                                                           [] {
                                                                             ReplaySettings r;
                                                                             r.use_recorded = true;
                                                                             return r;
                                                                           }()},
                                                                          false, 1);
  ASSERT_TRUE(rep.ok()) << rep.status();
  const nlohmann::ordered_json doc = PolicyReportJson(*rep);
  EXPECT_EQ(doc["traces"][0]["rows"][0]["recorded_pools"], 0);
  EXPECT_EQ(doc["traces"][0]["rows"][1]["recorded_pools"], 1);
  EXPECT_EQ(doc["traces"][0]["rows"][1]["reuse"], "none");
  EXPECT_THAT(FormatPolicyText(*rep), HasSubstr("recorded: none"));
}

TEST(MinCapacity, PinnedHostPoolsAreRefused) {
  ReplaySettings s;
  s.pool_type = AllocationType::kPinnedHost;
  absl::StatusOr<CapacityResult> r = MinCapacity(MustParse(kEventOrdered), s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("pinned host"));
}

// A random trace over a few streams: allocations of 1 B to 6 MiB, frees on
// their own stream or another, kernels, events, waits and host time.
std::string RandomTrace(uint32_t seed, int ops) {
  std::mt19937 rng(seed);
  std::string text;
  std::vector<uint64_t> live;
  uint64_t next_id = 0;
  for (int i = 0; i < ops; ++i) {
    const uint32_t stream = 1 + rng() % 3;
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2:
        absl::StrAppend(&text, "alloc ", next_id, " ", 1 + rng() % (6 << 20), " ", stream, "\n");
        live.push_back(next_id++);
        break;
      case 3:
      case 4:
        if (!live.empty()) {
          const size_t k = rng() % live.size();
          absl::StrAppend(&text, "free ", live[k], " ", stream, "\n");
          live.erase(live.begin() + k);
        }
        break;
      case 5:
        absl::StrAppend(&text, "kernel ", stream, " ", rng() % 5000, "\n");
        break;
      case 6:
        absl::StrAppend(&text, "record ", stream, " ", stream, "\nwait ", 1 + rng() % 3, " ",
                        stream, "\n");
        break;
      default:
        absl::StrAppend(&text, "advance ", rng() % 3000, "\n");
    }
  }
  return text;
}

TEST(MinCapacity, TheAnswerFitsAndOneGranuleLessFails) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const Trace t = MustParse(RandomTrace(seed, 400), absl::StrCat("random", seed));
    for (const ReplaySettings& s :
         SweepSettings(ReplaySettings{}, {0, UINT64_MAX},
                       {PoolGrowth::kExpandable, PoolGrowth::kChunked}, /*all_policies=*/true)) {
      SCOPED_TRACE(absl::StrCat(t.name, ": ", s.Label()));
      const CapacityResult r = MustSearch(t, s);
      ASSERT_TRUE(r.fits);
      EXPECT_EQ(r.min_capacity % kG, 0u);
      EXPECT_GE(r.min_capacity, t.peak_live_bytes);
      EXPECT_LE(r.min_capacity, (r.unconstrained.peak_reserved + kG - 1) / kG * kG);
      ReplaySettings at = s;
      at.device_capacity = r.min_capacity;
      absl::StatusOr<ReplayResult> fit = Replay(t, at);
      ASSERT_TRUE(fit.ok()) << fit.status();
      EXPECT_EQ(fit->failed_allocs, 0u);
      EXPECT_EQ(fit->makespan_ns, r.at_min.makespan_ns);
      EXPECT_EQ(fit->checker_reports, 0u);  // the search ran without the checker
      if (r.below == BelowEvidence::kReplayed) {
        at.device_capacity = r.min_capacity - kG;
        absl::StatusOr<ReplayResult> below = Replay(t, at);
        ASSERT_TRUE(below.ok()) << below.status();
        EXPECT_GT(below->failed_allocs, 0u);
      } else {
        ASSERT_EQ(r.below, BelowEvidence::kBelowPeakLive);
        EXPECT_LT(r.min_capacity - kG, t.peak_live_bytes);
      }
    }
  }
}

TEST(MinCapacity, SpotChecksFindASmallerDeviceBelowOneThatFails) {
  // Where growth fails rule 5 takes over, and the run takes another course:
  // on this trace a device fits, a larger one fails, and a larger one still
  // fits. The search's spot checks below its first boundary find the lower
  // one and say so.
  // (In CUDA's order, growth before any wait; the first random trace that
  // shows it.)
  ReplaySettings s = Reuse(false, true, true);
  s.wait_before_growth = false;
  std::optional<Trace> found;
  CapacityResult r;
  for (uint32_t seed = 1; seed <= 40 && !found; ++seed) {
    Trace t = MustParse(RandomTrace(seed, 300), absl::StrCat("random", seed));
    r = MustSearch(t, s);
    if (r.fits && r.lower_fits_found == 1) found = std::move(t);
  }
  ASSERT_TRUE(found.has_value()) << "no trace of 40 whose fitting is not monotone";
  const Trace& t = *found;
  EXPECT_EQ(FailedAt(t, s, r.min_capacity), 0u);
  EXPECT_GT(FailedAt(t, s, r.min_capacity - kG), 0u);
  bool larger_fails = false;
  for (uint64_t c = r.min_capacity + kG; c < r.unconstrained.peak_reserved; c += kG) {
    larger_fails = larger_fails || FailedAt(t, s, c) > 0;
  }
  EXPECT_TRUE(larger_fails);
}

TEST(MinCapacities, ParallelResultsAreTheSerialOnesInJobOrder) {
  std::vector<Trace> traces;
  for (uint32_t seed = 10; seed < 13; ++seed) {
    traces.push_back(MustParse(RandomTrace(seed, 200 * (seed - 9)), absl::StrCat("r", seed)));
  }
  std::vector<CapacityJob> jobs;
  for (const Trace& t : traces) {
    for (const ReplaySettings& s : AllReuseCombinations(ReplaySettings{})) jobs.push_back({&t, s});
  }
  size_t calls = 0, last = 0;
  const std::vector<absl::StatusOr<CapacityResult>> parallel =
      MinCapacities(jobs, /*threads=*/4, [&](size_t done, size_t total) {
        ++calls;
        EXPECT_EQ(total, jobs.size());
        EXPECT_EQ(done, last + 1);
        last = done;
      });
  EXPECT_EQ(calls, jobs.size());
  ASSERT_EQ(parallel.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(parallel[i].ok()) << parallel[i].status();
    const CapacityResult serial = MustSearch(*jobs[i].trace, jobs[i].settings);
    EXPECT_EQ(parallel[i]->settings.Label(), jobs[i].settings.Label());
    EXPECT_EQ(parallel[i]->min_capacity, serial.min_capacity) << i;
    EXPECT_EQ(parallel[i]->at_min.makespan_ns, serial.at_min.makespan_ns) << i;
    EXPECT_EQ(parallel[i]->replays, serial.replays) << i;
  }
  EXPECT_EQ(CapacityThreads(3, 8), 3);
  EXPECT_EQ(CapacityThreads(100, 2), 2);
  EXPECT_GE(CapacityThreads(100, 0), 1);
  EXPECT_EQ(CapacityThreads(0, 0), 0);
}

// ------------------------------------------------------------ the report

std::vector<TracePolicyReport> MustBuild(const std::vector<Trace>& traces,
                                         const std::vector<ReplaySettings>& settings,
                                         bool with_cuda_defaults) {
  absl::StatusOr<std::vector<TracePolicyReport>> r =
      BuildPolicyReports(traces, settings, with_cuda_defaults, /*threads=*/2);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : std::vector<TracePolicyReport>{};
}

TEST(PolicyReport, BestSetAndItsSavings) {
  const std::vector<Trace> traces = {MustParse(kUnordered, "unordered.trace")};
  const std::vector<ReplaySettings> sweep =
      SweepSettings(ReplaySettings{}, {0, UINT64_MAX}, {PoolGrowth::kDefault}, true);
  const std::vector<TracePolicyReport> reports = MustBuild(traces, sweep, true);
  ASSERT_EQ(reports.size(), 1u);
  const TracePolicyReport& rep = reports[0];
  ASSERT_EQ(rep.rows.size(), 16u);
  // Default growth is not CUDA's: its defaults were searched apart.
  ASSERT_TRUE(rep.cuda_defaults.has_value());
  EXPECT_TRUE(IsCudaDefaults(rep.cuda_defaults->settings));
  EXPECT_EQ(rep.cuda_defaults->min_capacity, kG);

  const PolicySummary sum = SummarizePolicies(rep);
  ASSERT_NE(sum.best, nullptr);
  // Every set with rule 5 fits in one granule at the same makespan; the
  // first of them in the sweep, all rules on at threshold 0, is the best.
  EXPECT_EQ(sum.best, &rep.rows[0]);
  EXPECT_EQ(sum.best->min_capacity, kG);
  ASSERT_NE(sum.none, nullptr);
  EXPECT_EQ(sum.none, &rep.rows[7]);
  EXPECT_EQ(sum.none->settings.ReuseLabel(), "none");
  EXPECT_EQ(sum.none->min_capacity, 2 * kG);
  EXPECT_EQ(sum.cuda_defaults, &*rep.cuda_defaults);

  const nlohmann::ordered_json doc = PolicyReportJson(reports);
  EXPECT_EQ(doc["schema"], "streampool-policy-report/1");
  EXPECT_EQ(doc["granule_bytes"], kG);
  EXPECT_EQ(doc["pool"], "device");
  EXPECT_EQ(doc["backing"], "address_only");
  EXPECT_EQ(doc["search_capacity_bytes"], 80 * kGiB);
  const auto& trace = doc["traces"][0];
  EXPECT_EQ(trace["file"], "unordered.trace");
  EXPECT_EQ(trace["ops"], 7);
  EXPECT_EQ(trace["peak_live_bytes"], kG);  // the trace frees the first before the second
  ASSERT_EQ(trace["rows"].size(), 16u);
  for (const auto& row : trace["rows"]) {
    for (const char* key :
         {"setting", "reuse", "threshold", "growth", "pool_growth", "recorded_pools", "fits",
          "peak_reserved_bytes", "makespan_ns_unconstrained", "min_capacity_bytes",
          "min_capacity_granules", "peak_reserved_bytes_at_min_capacity",
          "makespan_ns_at_min_capacity", "waits_inserted", "synchronizes", "reuse_counts",
          "one_granule_below", "lower_fits_found", "replays"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    EXPECT_TRUE(row["fits"].get<bool>());
    EXPECT_EQ(row["synchronizes"], 1);
    EXPECT_EQ(row["growth"], "default");
    EXPECT_EQ(row["pool_growth"], "expandable");
    uint64_t counted = 0;
    for (const auto& [rule, n] : row["reuse_counts"].items()) counted += n.get<uint64_t>();
    EXPECT_EQ(counted, 2u);  // both allocations, each served by one rule
  }
  const auto& first = trace["rows"][0];
  EXPECT_EQ(first["reuse"], "event+opportunistic+internal");
  EXPECT_EQ(first["threshold"], 0);
  EXPECT_EQ(first["min_capacity_bytes"], kG);
  EXPECT_EQ(first["min_capacity_granules"], 1);
  EXPECT_EQ(first["makespan_ns_at_min_capacity"], 1500);
  EXPECT_EQ(first["waits_inserted"], 1);
  EXPECT_EQ(first["reuse_counts"]["internal_dependency"], 1);
  EXPECT_EQ(first["one_granule_below"], "below_peak_live");
  EXPECT_EQ(trace["rows"][8]["threshold"], "max");
  EXPECT_EQ(trace["rows"][7]["one_granule_below"], "replayed");

  EXPECT_EQ(trace["best"]["row"], 0);
  EXPECT_EQ(trace["best"]["min_capacity_bytes"], kG);
  EXPECT_EQ(trace["vs_none"]["row"], 7);
  EXPECT_EQ(trace["vs_none"]["saved_bytes"], kG);
  EXPECT_TRUE(trace["vs_cuda_defaults"]["row"].is_null());
  EXPECT_EQ(trace["vs_cuda_defaults"]["setting"],
            "event+opportunistic+internal, threshold 0, growth chunked");
  EXPECT_EQ(trace["vs_cuda_defaults"]["saved_bytes"], 0);

  const std::string text = FormatPolicyText(reports);
  EXPECT_THAT(text, HasSubstr("unordered.trace: 7 ops"));
  EXPECT_THAT(text, HasSubstr("best: event+opportunistic+internal, threshold 0"));
  EXPECT_THAT(text, HasSubstr("against all reuse off (none, threshold 0): 4.0 MiB, saves 2.0 MiB"));
  EXPECT_THAT(text, HasSubstr("CUDA defaults: event+opportunistic+internal"));

  const std::string svg = FormatPolicySvg(reports);
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(svg, HasSubstr("unordered.trace"));
  EXPECT_THAT(svg, HasSubstr("minimum device capacity (MiB)"));
  // Sets that coincide share the label beside their point; the shipped one
  // (here the default setting, which nothing beats) is marked.
  EXPECT_THAT(svg, HasSubstr(">e+o+i (0), "));
  EXPECT_THAT(svg, HasSubstr(" ship</text>"));
  EXPECT_THAT(svg, HasSubstr("CUDA defaults</title>"));
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

TEST(PolicyReport, CudaDefaultsInTheSweepAreNotSearchedAgain) {
  const std::vector<Trace> traces = {MustParse(kEventOrdered)};
  const std::vector<TracePolicyReport> reports =
      MustBuild(traces, SweepSettings(ReplaySettings{}, {0}, {PoolGrowth::kChunked}, true), true);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].cuda_defaults.has_value());
  const PolicySummary sum = SummarizePolicies(reports[0]);
  EXPECT_EQ(sum.cuda_defaults, &reports[0].rows[0]);
  EXPECT_EQ(PolicyReportJson(reports)["traces"][0]["vs_cuda_defaults"]["row"], 0);
}

TEST(PolicyReport, TiesGoToTheShorterMakespanThenToTheEarlierRow) {
  TracePolicyReport rep;
  const Trace t;
  rep.trace = &t;
  auto row = [](uint64_t capacity, uint64_t makespan, bool fits = true) {
    CapacityResult r;
    r.fits = fits;
    r.min_capacity = capacity;
    r.at_min.makespan_ns = makespan;
    return r;
  };
  rep.rows = {row(4 * kG, 100), row(2 * kG, 300), row(2 * kG, 200), row(2 * kG, 200),
              row(kG, 50, /*fits=*/false)};
  EXPECT_EQ(SummarizePolicies(rep).best, &rep.rows[2]);
}

TEST(PolicyReport, NothingFits) {
  const std::vector<Trace> traces = {MustParse("alloc 0 107374182400 0\n", "huge")};
  const std::vector<TracePolicyReport> reports =
      MustBuild(traces, SweepSettings(ReplaySettings{}, {0}, {PoolGrowth::kDefault}, true), false);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(SummarizePolicies(reports[0]).best, nullptr);
  const nlohmann::ordered_json doc = PolicyReportJson(reports);
  const auto& trace = doc["traces"][0];
  EXPECT_TRUE(trace["best"].is_null());
  EXPECT_TRUE(trace["vs_none"].is_null());
  EXPECT_FALSE(trace["rows"][0]["fits"].get<bool>());
  EXPECT_TRUE(trace["rows"][0]["min_capacity_bytes"].is_null());
  EXPECT_TRUE(trace["rows"][0]["reuse_counts"].is_null());
  EXPECT_THAT(FormatPolicyText(reports), HasSubstr("does not fit"));
  EXPECT_THAT(FormatPolicyText(reports), HasSubstr("no setting fits in 80.000 GiB"));
  EXPECT_THAT(FormatPolicySvg(reports), HasSubstr("no setting fits"));
}

TEST(PolicyReport, SearchErrorsAreTheResult) {
  const std::vector<Trace> traces = {MustParse(kEventOrdered)};
  ReplaySettings pinned;
  pinned.pool_type = AllocationType::kPinnedHost;
  absl::StatusOr<std::vector<TracePolicyReport>> r = BuildPolicyReports(traces, {pinned}, false, 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streampool::replay
