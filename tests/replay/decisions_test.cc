// Decisions as data (src/replay/decisions.h): the file round-trips, a check
// stops at the first decision that differs and names its op, a diff of two
// settings counts every difference by rule and bytes. The traces are written
// here, so that what differs follows from the settings each test flips, not
// from which rule today's pool happens to prefer.
#include "src/replay/decisions.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"

namespace streampool::replay {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;

Trace MustParse(absl::string_view text) {
  absl::StatusOr<Trace> t = ParseTrace(text, "t");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Trace{};
}

std::vector<ReplayDecision> DecisionsOf(const Trace& trace, ReplaySettings s) {
  s.keep_decisions = true;
  absl::StatusOr<ReplayResult> r = Replay(trace, s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->decisions : std::vector<ReplayDecision>{};
}

ReplaySettings NoReuse() {
  ReplaySettings s;
  s.reuse_event = s.reuse_opportunistic = s.reuse_internal = false;
  return s;
}

// Stream 1 frees a block, stream 2 waits on an event recorded after the
// free and asks for the same size: with reuse it can take the freed block,
// with none it cannot (the free is still pending: nothing synchronized).
// 4 MiB is past what a stream's front cache keeps to itself.
constexpr char kCrossStream[] =
    "alloc 1 4194304 1\n"  // op 1
    "kernel 1 1000000\n"   // op 2
    "free 1 1\n"           // op 3
    "record 1 1\n"         // op 4
    "wait 2 1\n"           // op 5
    "alloc 2 4194304 2\n"  // op 6
    "alloc 3 4096 1\n"     // op 7
    "free 2 2\n"           // op 8
    "free 3 1\n";          // op 9

TEST(DecisionFileTest, RoundTripsEveryField) {
  const Trace t = MustParse(kCrossStream);
  const std::vector<ReplayDecision> ds = DecisionsOf(t, {});
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[0].op, 1u);
  EXPECT_EQ(ds[1].op, 6u);
  EXPECT_EQ(ds[1].line, 6u);
  EXPECT_EQ(ds[1].stream, 2u);
  EXPECT_EQ(ds[1].size, 4194304u);
  const std::string text = FormatDecisions(t, "all", ds);
  EXPECT_TRUE(absl::StartsWith(text, "streampool-decisions/1\n")) << text;
  absl::StatusOr<DecisionFile> back = ParseDecisions(text, "d", t);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->setting, "all");
  ASSERT_EQ(back->decisions.size(), ds.size());
  for (size_t k = 0; k < ds.size(); ++k) {
    EXPECT_TRUE(SameDecision(back->decisions[k], ds[k])) << FormatDecisionLine(t, ds[k]);
    EXPECT_EQ(FormatDecisionLine(t, back->decisions[k]), FormatDecisionLine(t, ds[k]));
  }
}

TEST(DecisionFileTest, PlacesArePoolRelative) {
  // The first allocation of a fresh pool lies at the start of its first
  // chunk, whatever address the machine gave the chunk.
  const Trace t = MustParse(kCrossStream);
  const std::vector<ReplayDecision> ds = DecisionsOf(t, {});
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds[0].chunk, 1u);
  EXPECT_EQ(ds[0].offset, 0u);
  EXPECT_THAT(FormatDecisionLine(t, ds[0]), HasSubstr(" own 1+0 -"));
}

TEST(DecisionFileTest, MalformedFilesNameTheirLine) {
  const Trace t = MustParse(kCrossStream);
  auto error = [&](absl::string_view text) {
    absl::StatusOr<DecisionFile> f = ParseDecisions(text, "d", t);
    EXPECT_FALSE(f.ok()) << text;
    return f.ok() ? std::string() : std::string(f.status().message());
  };
  EXPECT_THAT(error(""), HasSubstr("not a decisions file"));
  EXPECT_THAT(error("streampool-decisions/2\n"), HasSubstr("d:1: not a decisions file"));
  EXPECT_THAT(error("streampool-decisions/1\n1 1 1 4096 fresh own\n"),
              HasSubstr("d:2: a decision has 8 fields"));
  EXPECT_THAT(error("streampool-decisions/1\n1 1 7 4096 fresh own 1+0 -\n"),
              HasSubstr("stream '7' is not a stream of t"));
  EXPECT_THAT(error("streampool-decisions/1\n1 1 1 4096 sideways own 1+0 -\n"),
              HasSubstr("sideways"));
  EXPECT_THAT(error("streampool-decisions/1\n99 1 1 4096 fresh own 1+0 -\n"),
              HasSubstr("op '99' is not an op of t"));
  EXPECT_THAT(error("streampool-decisions/1\n1 1 1 4096 fresh own 1+0 2@x\n"),
              HasSubstr("bad wait '2@x'"));
  EXPECT_THAT(error("streampool-decisions/1\n6 6 1 4096 fresh own 1+0 -\n"
                    "1 1 1 4096 fresh own 1+0 -\n"),
              HasSubstr("d:3: decisions are in op order"));
}

TEST(CheckDecisionsTest, TheSameSettingAgreesEverywhere) {
  const Trace t = MustParse(kCrossStream);
  const std::vector<ReplayDecision> ds = DecisionsOf(t, {});
  absl::StatusOr<DecisionFile> saved = ParseDecisions(FormatDecisions(t, "all", ds), "d", t);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<DecisionCheck> check = CheckDecisions(t, {}, *saved);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_FALSE(check->difference.has_value()) << FormatCheck(t, *check);
  EXPECT_EQ(check->agreed, ds.size());
  EXPECT_THAT(FormatCheck(t, *check), HasSubstr("all 3 decisions agree"));
}

TEST(CheckDecisionsTest, AFlippedSettingIsReportedAtItsOp) {
  const Trace t = MustParse(kCrossStream);
  const std::vector<ReplayDecision> all = DecisionsOf(t, {});
  const std::vector<ReplayDecision> none = DecisionsOf(t, NoReuse());
  // Where the two settings first part, from their own decisions.
  size_t first = 0;
  while (first < all.size() && SameDecision(all[first], none[first])) ++first;
  ASSERT_LT(first, all.size()) << "no reuse and all reuse decide the same here";
  EXPECT_EQ(all[first].op, 6u);  // stream 2's allocation, the only one that can reuse

  absl::StatusOr<DecisionFile> saved = ParseDecisions(FormatDecisions(t, "all", all), "d", t);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<DecisionCheck> check = CheckDecisions(t, NoReuse(), *saved);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE(check->difference.has_value());
  EXPECT_EQ(check->difference->op, 6u);
  EXPECT_EQ(check->agreed, first);
  ASSERT_TRUE(check->difference->a && check->difference->b);
  EXPECT_TRUE(SameDecision(*check->difference->a, all[first]));
  EXPECT_TRUE(SameDecision(*check->difference->b, none[first]));
  // The replayed block is in its pool's snapshot, marked.
  const Neighbourhood& around = check->difference->b_blocks;
  ASSERT_TRUE(around.found) << around.note;
  int marked = 0;
  for (const NeighbourBlock& b : around.blocks) {
    if (!b.at_place) continue;
    ++marked;
    EXPECT_EQ(b.offset, none[first].offset);
    EXPECT_EQ(b.state, BlockState::kLive);
    EXPECT_EQ(b.stream, 2u);
  }
  EXPECT_EQ(marked, 1);
  const std::string report = FormatCheck(t, *check);
  EXPECT_THAT(report, HasSubstr("t:6: the decision at op 6 differs"));
  EXPECT_THAT(report, HasSubstr("rule behind the saved one"));
  EXPECT_THAT(report, HasSubstr("rule behind the replayed one"));
  EXPECT_THAT(report, HasSubstr("blocks around the saved place"));
}

TEST(CheckDecisionsTest, AnEditedDecisionStopsTheCheckThere) {
  const Trace t = MustParse(kCrossStream);
  const std::vector<ReplayDecision> ds = DecisionsOf(t, {});
  ASSERT_EQ(ds.size(), 3u);
  std::vector<ReplayDecision> edited = ds;
  edited[2].offset += 256;
  absl::StatusOr<DecisionFile> saved = ParseDecisions(FormatDecisions(t, "all", edited), "d", t);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<DecisionCheck> check = CheckDecisions(t, {}, *saved);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE(check->difference.has_value());
  EXPECT_EQ(check->difference->op, 7u);
  EXPECT_EQ(check->agreed, 2u);
}

TEST(CheckDecisionsTest, AFileLongerThanTheReplayDiffersAtItsExtraDecision) {
  const Trace t = MustParse(kCrossStream);
  const Trace shorter = MustParse(
      "alloc 1 4194304 1\nkernel 1 1000000\nfree 1 1\nrecord 1 1\nwait 2 1\n"
      "alloc 2 4194304 2\nadvance 1\nfree 2 2\nadvance 1\n");
  std::vector<ReplayDecision> ds = DecisionsOf(t, {});
  absl::StatusOr<DecisionFile> saved = ParseDecisions(FormatDecisions(t, "all", ds), "d", shorter);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<DecisionCheck> check = CheckDecisions(shorter, {}, *saved);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE(check->difference.has_value());
  EXPECT_EQ(check->difference->op, 7u);
  EXPECT_TRUE(check->difference->a.has_value());
  EXPECT_FALSE(check->difference->b.has_value());
  EXPECT_THAT(FormatCheck(shorter, *check), HasSubstr("no decision at this op"));
}

// Rule 5 inserts a wait: stream 2 needs the only memory the device has,
// which stream 1 freed behind a long kernel.
constexpr char kMustWait[] =
    "alloc 1 2097152 1\n"  // op 1: the whole device
    "kernel 1 5000000\n"   // op 2
    "free 1 1\n"           // op 3
    "alloc 2 2097152 2\n"  // op 4: only rule 5 can serve it
    "free 2 2\n";          // op 5

TEST(DecisionFileTest, WaitsAreTheFreesWaitedFor) {
  const Trace t = MustParse(kMustWait);
  ReplaySettings s;
  s.device_capacity = 2 * kMiB;
  const std::vector<ReplayDecision> ds = DecisionsOf(t, s);
  ASSERT_EQ(ds.size(), 2u);
  ASSERT_FALSE(ds[1].failed);
  EXPECT_EQ(ds[1].rule, ReuseRule::kInternalDependency);
  ASSERT_EQ(ds[1].waits.size(), 1u);
  EXPECT_EQ(ds[1].waits[0].stream, 1u);
  EXPECT_GT(ds[1].waits[0].position, 0u);
  EXPECT_TRUE(ds[0].waits.empty());
  const std::string line = FormatDecisionLine(t, ds[1]);
  EXPECT_THAT(line, HasSubstr(absl::StrCat(" 1@", ds[1].waits[0].position)));
  absl::StatusOr<DecisionFile> back = ParseDecisions(FormatDecisions(t, "x", ds), "d", t);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->decisions[1].waits, ds[1].waits);

  // Without rule 5 the allocation fails: a check names it, a failure.
  ReplaySettings no_internal = s;
  no_internal.reuse_internal = false;
  absl::StatusOr<DecisionCheck> check = CheckDecisions(t, no_internal, *back);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE(check->difference.has_value());
  EXPECT_EQ(check->difference->op, 4u);
  ASSERT_TRUE(check->difference->b.has_value());
  EXPECT_TRUE(check->difference->b->failed);
  EXPECT_THAT(FormatCheck(t, *check), HasSubstr("4 4 2 2097152 failed own - -"));
}

TEST(DiffSettingsTest, ASettingAgainstItselfHasNoDifference) {
  const Trace t = MustParse(kCrossStream);
  absl::StatusOr<SettingsDiff> d = DiffSettings(t, {}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->compared, 3u);
  EXPECT_EQ(d->differing, 0u);
  EXPECT_FALSE(d->first.has_value());
  EXPECT_THAT(FormatSettingsDiff(t, *d), HasSubstr("all 3 decisions are the same"));
}

TEST(DiffSettingsTest, EveryDifferenceIsCountedByRuleAndBytes) {
  const Trace t = MustParse(kCrossStream);
  const std::vector<ReplayDecision> all = DecisionsOf(t, {});
  const std::vector<ReplayDecision> none = DecisionsOf(t, NoReuse());
  uint64_t differing = 0, bytes = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    if (!SameDecision(all[k], none[k])) {
      ++differing;
      bytes += all[k].size;
    }
  }
  ASSERT_GT(differing, 0u);
  absl::StatusOr<SettingsDiff> d = DiffSettings(t, {}, NoReuse());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->differing, differing);
  EXPECT_EQ(d->differing_bytes, bytes);
  EXPECT_EQ(d->same_rule_elsewhere + d->other_rule, differing);
  uint64_t by_rule = 0, by_rule_bytes = 0;
  for (const RuleChange& c : d->by_rule) {
    by_rule += c.decisions;
    by_rule_bytes += c.bytes;
  }
  EXPECT_EQ(by_rule, differing);
  EXPECT_EQ(by_rule_bytes, bytes);
  ASSERT_TRUE(d->first.has_value());
  EXPECT_EQ(d->first->op, 6u);
  // a's blocks come from a's own pool at that op, b's from b's.
  EXPECT_TRUE(d->first->a_blocks.found) << d->first->a_blocks.note;
  EXPECT_TRUE(d->first->b_blocks.found) << d->first->b_blocks.note;
}

TEST(DiffSettingsTest, TwoAllocatorsCompareTheirOutcomes) {
  const Trace t = MustParse(kCrossStream);
  ReplaySettings rmm;
  rmm.allocator = AllocatorKind::kRmmPool;
  absl::StatusOr<SettingsDiff> d = DiffSettings(t, {}, rmm);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->b_setting, "rmm-pool");
  // A model's decisions are its own places: every one differs from the
  // pool's, by rule ("model").
  EXPECT_EQ(d->differing, 3u);
  for (const RuleChange& c : d->by_rule) EXPECT_EQ(c.b_rule, "model");
  // A model's own decisions, saved, check clean: its places are the same
  // in every run.
  const std::vector<ReplayDecision> ds = DecisionsOf(t, rmm);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_TRUE(ds[0].model);
  EXPECT_THAT(FormatDecisionLine(t, ds[0]), HasSubstr(" model - @"));
  absl::StatusOr<DecisionFile> saved = ParseDecisions(FormatDecisions(t, "rmm", ds), "d", t);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<DecisionCheck> check = CheckDecisions(t, rmm, *saved);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_FALSE(check->difference.has_value()) << FormatCheck(t, *check);
}

TEST(DiffSettingsTest, SettingChangesReadLikeTheFlags) {
  ReplaySettings s;
  ASSERT_TRUE(ApplySettingChange("reuse=event,internal/threshold=max/growth=chunked", &s).ok());
  EXPECT_TRUE(s.reuse_event);
  EXPECT_FALSE(s.reuse_opportunistic);
  EXPECT_TRUE(s.reuse_internal);
  EXPECT_EQ(s.release_threshold, UINT64_MAX);
  EXPECT_EQ(s.growth, PoolGrowth::kChunked);
  ASSERT_TRUE(ApplySettingChange("allocator=pytorch/capacity=4GiB", &s).ok());
  EXPECT_EQ(s.allocator, AllocatorKind::kPytorch);
  EXPECT_EQ(s.device_capacity, uint64_t{4} << 30);
  absl::Status bad = ApplySettingChange("colour=blue", &s);
  EXPECT_THAT(bad.message(), HasSubstr("unknown setting 'colour'"));
  EXPECT_THAT(ApplySettingChange("threshold=lots", &s).message(), HasSubstr("'threshold=lots'"));
}

// A long multi-stream program (seeded): the check of a 100 000-op trace
// finds a decision edited near its end at that op.
std::string LongTrace(uint32_t seed, size_t ops) {
  std::mt19937 rng(seed);
  std::string out;
  std::vector<std::vector<uint64_t>> live(4);
  uint64_t next_id = 1;
  size_t n = 0;
  while (n < ops) {
    const uint32_t s = 1 + rng() % 4;
    switch (rng() % 6) {
      case 0:
      case 1: {
        const uint64_t size = (1 + rng() % 64) * 4096 * (1 + rng() % 16);
        absl::StrAppend(&out, "alloc ", next_id, " ", size, " ", s, "\n");
        live[s - 1].push_back(next_id++);
        break;
      }
      case 2:
        if (!live[s - 1].empty()) {
          absl::StrAppend(&out, "free ", live[s - 1].front(), " ", s, "\n");
          live[s - 1].erase(live[s - 1].begin());
        } else {
          absl::StrAppend(&out, "advance 1000\n");
        }
        break;
      case 3:
        absl::StrAppend(&out, "kernel ", s, " ", 1000 + rng() % 50000, "\n");
        break;
      case 4:
        absl::StrAppend(&out, "record ", s, " ", s, "\nwait ", 1 + s % 4, " ", s, "\n");
        ++n;
        break;
      default:
        absl::StrAppend(&out, "advance ", rng() % 20000, "\n");
        break;
    }
    ++n;
  }
  return out;
}

TEST(CheckDecisionsTest, AnEditNearTheEndOfALongTraceIsFoundAtItsOp) {
  constexpr uint32_t kSeed = 20261201;
  const Trace t = MustParse(LongTrace(kSeed, 100000));
  ASSERT_GE(t.ops.size(), 100000u) << "seed " << kSeed;
  const std::vector<ReplayDecision> ds = DecisionsOf(t, {});
  ASSERT_GT(ds.size(), 1000u) << "seed " << kSeed;
  std::vector<ReplayDecision> edited = ds;
  size_t k = ds.size() - 10;
  while (edited[k].failed) --k;
  edited[k].offset += 4096;
  absl::StatusOr<DecisionFile> saved = ParseDecisions(FormatDecisions(t, "all", edited), "d", t);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<DecisionCheck> check = CheckDecisions(t, {}, *saved);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE(check->difference.has_value()) << "seed " << kSeed;
  EXPECT_EQ(check->difference->op, ds[k].op) << "seed " << kSeed;
  EXPECT_EQ(check->agreed, k);
}

}  // namespace
}  // namespace streampool::replay
