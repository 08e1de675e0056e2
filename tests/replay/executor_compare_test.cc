// A trace replayed on the simulator and on a real-time executor, decision by
// decision (src/replay/executor_compare.h): the diff's bookkeeping on
// decisions made up here, a program whose decisions no timing can change
// (stream order, events and a synchronize decide them all) replayed on the
// threads executor, and the CUDA comparison, which a machine without a GPU
// reports as skipped.
#include "src/replay/executor_compare.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"

namespace streampool::replay {
namespace {

using ::testing::StartsWith;

ReplayDecision Decision(ReuseRule rule, uint64_t offset) {
  ReplayDecision d;
  d.rule = rule;
  d.pool = 0;
  d.offset = offset;
  return d;
}

ReplayDecision Failed() {
  ReplayDecision d;
  d.failed = true;
  return d;
}

TEST(DiffDecisionsTest, EqualRunsHaveNoDifference) {
  const std::vector<ReplayDecision> run = {Decision(ReuseRule::kFresh, 0),
                                           Decision(ReuseRule::kSameStream, 0), Failed()};
  const DecisionDiff d = DiffDecisions(run, run);
  EXPECT_EQ(d.compared, 3u);
  EXPECT_EQ(d.equal, 3u);
  EXPECT_FALSE(d.first_difference.has_value());
  EXPECT_FALSE(d.first_observation_difference.has_value());
  EXPECT_TRUE(d.equal_before_observation);
}

TEST(DiffDecisionsTest, ARule3DifferenceFirstLeavesThePrefixEqual) {
  const std::vector<ReplayDecision> sim = {Decision(ReuseRule::kFresh, 0),
                                           Decision(ReuseRule::kOpportunistic, 0),
                                           Decision(ReuseRule::kAfterSync, 0)};
  const std::vector<ReplayDecision> real = {Decision(ReuseRule::kFresh, 0),
                                            Decision(ReuseRule::kFresh, 4096),
                                            Decision(ReuseRule::kEventDependency, 0)};
  const DecisionDiff d = DiffDecisions(sim, real);
  EXPECT_EQ(d.equal, 1u);
  EXPECT_EQ(d.first_difference, 1u);
  EXPECT_EQ(d.first_observation_difference, 1u);
  EXPECT_TRUE(d.equal_before_observation);
}

TEST(DiffDecisionsTest, ADifferenceBeforeTheFirstRule3OneIsReported) {
  // The executor's side took rule 3 at index 2; index 1 differs in place only.
  const std::vector<ReplayDecision> sim = {Decision(ReuseRule::kFresh, 0),
                                           Decision(ReuseRule::kFresh, 0),
                                           Decision(ReuseRule::kFresh, 8192)};
  const std::vector<ReplayDecision> real = {Decision(ReuseRule::kFresh, 0),
                                            Decision(ReuseRule::kFresh, 256),
                                            Decision(ReuseRule::kOpportunistic, 0)};
  const DecisionDiff d = DiffDecisions(sim, real);
  EXPECT_EQ(d.first_difference, 1u);
  EXPECT_EQ(d.first_observation_difference, 2u);
  EXPECT_FALSE(d.equal_before_observation);
}

TEST(DiffDecisionsTest, AFailureIsADecisionOfItsOwn) {
  const std::vector<ReplayDecision> sim = {Failed(), Failed()};
  const std::vector<ReplayDecision> real = {Failed(), Decision(ReuseRule::kFresh, 0)};
  const DecisionDiff d = DiffDecisions(sim, real);
  EXPECT_EQ(d.equal, 1u);
  EXPECT_EQ(d.first_difference, 1u);
  EXPECT_FALSE(d.first_observation_difference.has_value());
  EXPECT_FALSE(d.equal_before_observation) << "no rule-3 difference excuses it";
}

TEST(DiffDecisionsTest, OnlyWhatBothDecidedIsCompared) {
  const std::vector<ReplayDecision> sim = {Decision(ReuseRule::kFresh, 0),
                                           Decision(ReuseRule::kFresh, 256)};
  const std::vector<ReplayDecision> real = {Decision(ReuseRule::kFresh, 0)};
  const DecisionDiff d = DiffDecisions(sim, real);
  EXPECT_EQ(d.compared, 1u);
  EXPECT_EQ(d.equal, 1u);
}

// Same-stream reuse behind a kernel, a free on a second stream ordered by an
// event, reuse on the first stream through the event back (rule 2), and
// after the synchronizes (threshold 0 gave everything back) a new mapping:
// no decision asks what has finished, so real time decides each as virtual
// time does. The blocks fill their 2 MiB granules, so that no READY
// remainder serves an allocation before the rule under test.
constexpr char kOrderedTrace[] = R"(# streampool trace v1
alloc 1 2097152 1
kernel 1 2000000
free 1 1
alloc 2 2097152 1
record 1 1
wait 2 1
kernel 2 1000000
free 2 2
record 2 2
wait 1 2
alloc 3 2097152 1
sync 1
sync 2
alloc 4 4096 2
free 3 1
free 4 2
dsync
)";

Trace OrderedTrace() {
  absl::StatusOr<Trace> t = ParseTrace(kOrderedTrace, "ordered");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Trace{};
}

TEST(CompareExecutorsTest, OrderedProgramDecidesTheSameOnTheThreadsExecutor) {
  const Trace t = OrderedTrace();
  auto c = CompareExecutors(t, ReplaySettings{}, ExecutorKind::kThreads);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->skipped, "");
  EXPECT_EQ(c->executor, ExecutorKind::kThreads);
  EXPECT_EQ(c->diff.compared, 4u);
  EXPECT_EQ(c->diff.equal, 4u) << FormatComparisonText({*c});
  EXPECT_FALSE(c->diff.first_difference.has_value());
  EXPECT_TRUE(c->diff.equal_before_observation);
  EXPECT_EQ(c->simulator_peak_reserved, c->executor_peak_reserved);
  // The threads replay slept through its kernels (3 ms at least).
  EXPECT_GE(c->executor_wall_ns, 3000000u);

  const std::string text = FormatComparisonText({*c});
  EXPECT_THAT(text, StartsWith("ordered: simulator vs threads ("));
  EXPECT_NE(text.find("decisions equal: 4 of 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("every decision before it equals the simulator's: yes"), std::string::npos)
      << text;
}

TEST(CompareExecutorsTest, TheDecisionsAreTheRulesTheProgramAskedFor) {
  ReplaySettings s;
  s.keep_decisions = true;
  auto r = Replay(OrderedTrace(), s);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->decisions.size(), 4u);
  EXPECT_EQ(r->decisions[0].rule, ReuseRule::kFresh);
  EXPECT_EQ(r->decisions[1].rule, ReuseRule::kSameStream);
  EXPECT_EQ(r->decisions[2].rule, ReuseRule::kEventDependency);
  EXPECT_EQ(r->decisions[3].rule, ReuseRule::kFresh);
  EXPECT_EQ(r->decisions[1].offset, r->decisions[0].offset);
  EXPECT_EQ(r->decisions[2].offset, r->decisions[0].offset);
  EXPECT_EQ(r->decisions[0].line, 2u);
}

TEST(CompareExecutorsTest, CudaIsSkippedWhereThereIsNoGpu) {
  const Trace t = OrderedTrace();
  auto c = CompareExecutors(t, ReplaySettings{}, ExecutorKind::kCuda);
  ASSERT_TRUE(c.ok()) << c.status();
  if (c->skipped.empty()) {
    // A GPU: the program decides on it as on the simulator.
    EXPECT_EQ(c->diff.equal, c->diff.compared) << FormatComparisonText({*c});
    return;
  }
  EXPECT_THAT(c->skipped, StartsWith("no CUDA device ("));
  const std::string text = FormatComparisonText({*c});
  EXPECT_NE(text.find("  skipped: no CUDA device ("), std::string::npos) << text;
  EXPECT_NE(FormatComparisonJson({*c}).find("\"skipped\": \"no CUDA device ("), std::string::npos);
}

TEST(CompareExecutorsTest, TheSimulatorIsNotComparedWithItself) {
  EXPECT_TRUE(absl::IsInvalidArgument(
      CompareExecutors(OrderedTrace(), ReplaySettings{}, ExecutorKind::kSimulator).status()));
}

}  // namespace
}  // namespace streampool::replay
