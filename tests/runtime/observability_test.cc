// Observability on its own: a checker fed by hand, and a stream table that
// is a vector whose slots the test reuses.
#include "src/runtime/observability.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "src/sim/checker.h"

namespace streampool::internal {
namespace {

// Stream 1 reuses bytes stream 0 freed before that free completed.
void PlantOverlap(StreamOrderChecker& checker) {
  const VectorClock clock;
  checker.OnAlloc(0x10000, 512, /*stream=*/0, /*position=*/1, /*ready_ns=*/0, nullptr);
  checker.OnFree(0x10000, 0, 2, clock, /*end_ns=*/1000);
  checker.OnAlloc(0x10100, 256, /*stream=*/1, /*position=*/1, /*ready_ns=*/999, nullptr);
}

TEST(ObservabilityTest, AReportNamesTheStreamsItsSlotsHeldWhenItWasMade) {
  std::vector<uint64_t> handles = {0x11, 0x22};
  Observability obs(handles);
  VectorClock done;
  RegisteredRanges ranges;
  EXPECT_EQ(obs.checker(), nullptr);
  EXPECT_TRUE(obs.Reports().empty());
  obs.EnableChecker(true, /*fatal=*/false, &done, &ranges);
  ASSERT_NE(obs.checker(), nullptr);
  PlantOverlap(*obs.checker());
  obs.CheckerAfterEvent();
  handles[0] = 0x33;  // slot 0 now holds another stream
  handles[1] = 0;     // slot 1's stream was destroyed
  std::vector<streampool::CheckReport> reports = obs.Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].kind, streampool::CheckKind::kOverlappingLifetimes);
  EXPECT_EQ(reports[0].stream.value, 0x22u);
  EXPECT_EQ(reports[0].other_stream.value, 0x11u);
  EXPECT_EQ(reports[0].other_position, 2u);
}

TEST(ObservabilityTest, ClearingOrTurningOffDropsTheReports) {
  std::vector<uint64_t> handles = {0x11, 0x22};
  Observability obs(handles);
  VectorClock done;
  RegisteredRanges ranges;
  obs.EnableChecker(true, false, &done, &ranges);
  PlantOverlap(*obs.checker());
  obs.CheckerAfterEvent();
  StreamOrderChecker* running = obs.checker();
  obs.EnableChecker(true, false, &done, &ranges);
  EXPECT_EQ(obs.checker(), running) << "turning it on again keeps the running checker";
  EXPECT_EQ(obs.Reports().size(), 1u);
  obs.ClearReports();
  EXPECT_TRUE(obs.Reports().empty());
  PlantOverlap(*obs.checker());
  obs.CheckerAfterEvent();
  obs.EnableChecker(false, false, &done, &ranges);
  EXPECT_EQ(obs.checker(), nullptr);
  EXPECT_TRUE(obs.Reports().empty());
}

TEST(ObservabilityDeathTest, FatalModeAbortsWithTheFirstNewReport) {
  std::vector<uint64_t> handles = {0x11, 0x22};
  Observability obs(handles);
  VectorClock done;
  RegisteredRanges ranges;
  obs.EnableChecker(true, /*fatal=*/true, &done, &ranges);
  obs.CheckerAfterEvent();  // nothing new: goes on
  PlantOverlap(*obs.checker());
  EXPECT_DEATH(obs.CheckerAfterEvent(), "stream-order checker: ");
}

TEST(ObservabilityTest, NothingIsRecordingUntilARecordingStarts) {
  const std::vector<uint64_t> handles;
  Observability obs(handles);
  EXPECT_EQ(obs.recorder(), nullptr);
  EXPECT_EQ(obs.recording(), nullptr);
  EXPECT_EQ(obs.TakeRecording(), nullptr);
  EXPECT_EQ(obs.recording(std::memory_order_relaxed), nullptr);
}

}  // namespace
}  // namespace streampool::internal
