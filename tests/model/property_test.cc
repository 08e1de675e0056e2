// Instruction-stream property tests: random programs of alloc, free, kernel,
// record, wait, sync, query, advance, trim and set-attribute instructions on
// up to 8 streams and 3 pools of mixed variants, run against the runtime and
// the reference model side by side (tests/model/program.h). After every
// instruction: no stream-order checker report, every pool's invariants, and
// the model's own decisions (rule, block, waits), statistics, clocks and
// virtual time against the runtime's.
//
// The default run covers the 8 reuse-switch combinations times the 2 growth
// modes (one test each; the expandable programs spell half their pools
// growth=default), each with release thresholds mostly 0 or all UINT64_MAX,
// mostly address-only backing and one program in eight on real host memory:
// kSeedsPerCombination programs of kLength instructions per test. A failure
// prints the seed, the generator options and a minimised program to freeze
// in regression_test.cc.
//
// Soak: STREAMPOOL_SOAK_SECONDS=N runs random seeds for N seconds, every
// policy combination and growth mode, pools of both modes in one program
// included (PropertySoak.RandomSeeds; skipped otherwise).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/model/program.h"

namespace streampool::model {
namespace {

constexpr size_t kLength = 2000;
// 8 x 2 x 64 x 2000 = 2,048,000 instructions. Sanitizer builds, where an
// instruction costs 10 (ASan) to 70 (TSan) times as much and the suite runs
// twice (checker on, and as shipped), run a prefix of the same seeds: a
// quarter under ASan, a sixteenth under TSan. They look for memory errors and
// races; whether the programs reach every decision is the release run's to
// assert, on the full set.
constexpr uint64_t kFullSeeds = 64;
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kSeedsPerCombination = kFullSeeds / 16;
#elif defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kSeedsPerCombination = kFullSeeds / 4;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr uint64_t kSeedsPerCombination = kFullSeeds / 16;
#elif __has_feature(address_sanitizer)
constexpr uint64_t kSeedsPerCombination = kFullSeeds / 4;
#else
constexpr uint64_t kSeedsPerCombination = kFullSeeds;
#endif
#else
constexpr uint64_t kSeedsPerCombination = kFullSeeds;
#endif

GeneratorOptions OptionsFor(uint64_t seed, int policy_mask, GrowthChoice growth) {
  GeneratorOptions o;
  o.seed = seed;
  o.length = kLength;
  o.policy_mask = policy_mask;
  o.growth = growth;
  o.threshold_max = (seed & 1) != 0;
  // Real memory for one program in eight (with either threshold): the same
  // semantics, with mmap'd chunks and reservations and fills that really
  // write.
  o.backing = seed % 16 == 3 || seed % 16 == 6 ? Backing::kHost : Backing::kAddressOnly;
  // One program in four without the checker, so the runtime's lock-free fast
  // path and its pool-lock path serve what they can, against the same model.
  o.checker = seed % 4 != 2;
  return o;
}

std::string Describe(const GeneratorOptions& o) {
  return absl::StrCat("seed=", o.seed, " policy_mask=", o.policy_mask,
                      " growth=", GrowthChoiceName(o.growth),
                      " threshold=", o.threshold_max ? "max" : "mostly 0",
                      " backing=", o.backing == Backing::kHost ? "host" : "address",
                      " length=", o.length, o.checker ? "" : " checker=off");
}

// Runs one generated program; on failure reports the seed and the minimised
// program. Returns the result for the caller's totals.
ExecuteResult RunSeed(const GeneratorOptions& o) {
  const Program program = Generate(o);
  ExecuteResult r = Execute(program);
  if (!r.ok) {
    const Program small = Minimise(program, r);
    const ExecuteResult again = Execute(small);
    ADD_FAILURE() << "Property failure with " << Describe(o) << "\n"
                  << r.failure << "\nMinimised program (" << small.code.size()
                  << " instructions; fails with: " << again.failure << "):\n"
                  << ToString(small);
  }
  return r;
}

struct Totals {
  uint64_t instructions = 0;
  uint64_t skipped = 0;
  uint64_t double_frees = 0;
  Coverage coverage;
  void Add(const ExecuteResult& r) {
    instructions += r.executed;
    skipped += r.skipped;
    double_frees += r.double_frees;
    coverage.Add(r.coverage);
  }
  std::string Summary() const {
    const Coverage& c = coverage;
    std::string s = absl::StrCat(instructions, " instructions (", skipped, " skipped, ",
                                 double_frees, " double frees rejected);");
    for (size_t i = 0; i < c.by_rule.size(); ++i) {
      absl::StrAppend(&s, " ", ReuseRuleName(static_cast<ReuseRule>(i)), "=", c.by_rule[i]);
    }
    absl::StrAppend(&s, " failed=", c.failed, " grew=", c.grew, " (remapped ", c.remapped,
                    ", beside other reservations or chunks ", c.new_reservations,
                    ") mapped-low-end=", c.low_end, " releases=", c.releases,
                    " stopped-by-the-bound=", c.bound_stops, " observation-promoted=", c.observed,
                    " (then failed ", c.observed_failed, ") rule2-probe-limited=", c.probe_limited,
                    " front-cache-hits=", c.cache_hits, " flushes=", c.cache_flushes,
                    " slots-reused=", c.slots_reused, " (frees promoted first ", c.slot_promotions,
                    ")", " after-sync-of-unused-bytes=", c.after_sync_never_used,
                    " frees-waiting-for-uses=", c.deferred_frees, " oom-reclaims=", c.reclaims,
                    " (then served ", c.reclaim_rescued,
                    ") waited-before-growth=", c.waited_before_growth, " joined=", c.joined);
    return s;
  }
};

// (reuse-switch mask, growth of every pool).
class PropertyTest : public ::testing::TestWithParam<std::tuple<int, GrowthChoice>> {};

TEST_P(PropertyTest, ModelAgreesAfterEveryInstruction) {
  const auto [mask, growth] = GetParam();
  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  // Seeds differ per growth mode, so the two modes see different programs.
  const uint64_t base = 1000 * (mask + 1) + (growth == GrowthChoice::kExpandable ? 0 : 500);
  for (uint64_t i = 0; i < kSeedsPerCombination; ++i) {
    const ExecuteResult r = RunSeed(OptionsFor(base + i, mask, growth));
    totals.Add(r);
    if (!r.ok) break;  // one minimised failure per combination is enough to read
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("policy mask %d, %s growth: %s; %.2f us per instruction\n", mask,
              GrowthChoiceName(growth), totals.Summary().c_str(),
              1e6 * secs / static_cast<double>(totals.instructions));
  // The programs must reach the decisions the switches allow, or the test
  // proves little (asserted where all the seeds run).
  if (kSeedsPerCombination < kFullSeeds) return;
  const Coverage& c = totals.coverage;
  const auto& by_rule = c.by_rule;
  EXPECT_GT(by_rule[static_cast<int>(ReuseRule::kFresh)], 0u);
  EXPECT_GT(by_rule[static_cast<int>(ReuseRule::kSameStream)], 0u);
  EXPECT_GT(by_rule[static_cast<int>(ReuseRule::kAfterSync)], 0u);
  EXPECT_GT(c.failed, 0u);
  EXPECT_GT(c.releases, 0u);
  EXPECT_GT(c.bound_stops, 0u);
  // (A switch that starts off may be turned on by a set instruction; the
  // model checks the switch at every decision, so only reach is asserted.)
  if (mask & 1) {
    EXPECT_GT(by_rule[static_cast<int>(ReuseRule::kEventDependency)], 0u);
  }
  if (mask & 2) {
    EXPECT_GT(by_rule[static_cast<int>(ReuseRule::kOpportunistic)], 0u);
    EXPECT_GT(c.observed, 0u);
    EXPECT_GT(c.observed_failed, 0u);
  }
  if (mask & 4) {
    EXPECT_GT(by_rule[static_cast<int>(ReuseRule::kInternalDependency)], 0u);
    // Waits before growth (a free wait, or past the soft limit) and joins of
    // several frees.
    EXPECT_GT(c.waited_before_growth, 0u);
    EXPECT_GT(c.joined, 0u);
  }
  // Front caches (half the pools) served allocations and were flushed.
  EXPECT_GT(c.cache_hits, 0u);
  EXPECT_GT(c.cache_flushes, 0u);
  // Frees of blocks other streams were declared to use (RecordUse).
  EXPECT_GT(c.deferred_frees, 0u);
  // Out-of-memory reclaims (half the programs) that let the allocation succeed.
  EXPECT_GT(c.reclaim_rescued, 0u);
  if (growth == GrowthChoice::kExpandable) {
    // Released granules mapped again, READY blocks served by their mapped
    // low end, and growth beyond the first reservation (where its address
    // space ran out).
    EXPECT_GT(c.remapped, 0u);
    EXPECT_GT(c.low_end, 0u);
    // Rare at these device sizes (a few per combination), and rarer where
    // pools wait before they grow: asserted where no wait can pre-empt it
    // (mem_pool_expandable_test.cc pins the case itself).
    if ((mask & 4) == 0) {
      EXPECT_GT(c.new_reservations, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPolicyCombinations, PropertyTest,
    ::testing::Combine(::testing::Range(0, 8),
                       ::testing::Values(GrowthChoice::kChunked, GrowthChoice::kExpandable)),
    [](const ::testing::TestParamInfo<std::tuple<int, GrowthChoice>>& info) {
      const int mask = std::get<0>(info.param);
      return absl::StrCat(
          "Follow", mask & 1, "Opportunistic", (mask >> 1) & 1, "Internal", (mask >> 2) & 1,
          std::get<1>(info.param) == GrowthChoice::kChunked ? "Chunked" : "Expandable");
    });

TEST(PropertySoak, RandomSeeds) {
  const char* env = std::getenv("STREAMPOOL_SOAK_SECONDS");
  if (env == nullptr) GTEST_SKIP() << "set STREAMPOOL_SOAK_SECONDS=N to soak for N seconds";
  const double budget = std::atof(env);
  // The one place real randomness is wanted: a new region of the seed space
  // each soak. It is printed, and every failure prints its own seed.
  const uint64_t base = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  std::printf("soak: base seed %llu, %.0f s\n", static_cast<unsigned long long>(base), budget);
  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0;; ++i) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > budget) {
      break;
    }
    const uint64_t seed = base + i;
    // Every growth mode, mixed pools included.
    static constexpr GrowthChoice kGrowth[] = {GrowthChoice::kChunked, GrowthChoice::kExpandable,
                                               GrowthChoice::kMixed};
    GeneratorOptions o =
        OptionsFor(seed, static_cast<int>((seed >> 1) % 8), kGrowth[(seed >> 4) % 3]);
    o.length = 500 + seed % 4000;
    const ExecuteResult r = RunSeed(o);
    totals.Add(r);
    if (!r.ok) break;
  }
  std::printf("soak: %s\n", totals.Summary().c_str());
}

}  // namespace
}  // namespace streampool::model
