// Recordings as regression tests, as they are: every trace of the policy
// lab (traces/lab/, each a workload's recording) parsed, turned into a
// program of the reference model (from_trace.h) and run on a runtime and
// the model side by side, every decision and statistic checked after every
// op.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/replay/trace.h"
#include "tests/model/from_trace.h"
#include "tests/model/program.h"

namespace streampool::model {
namespace {

class RecordedTrace : public ::testing::TestWithParam<const char*> {};

TEST_P(RecordedTrace, RunsOnTheRuntimeAndTheModelAlike) {
  absl::StatusOr<replay::Trace> trace =
      replay::LoadTrace(absl::StrCat(STREAMPOOL_TRACES_DIR, "/lab/", GetParam(), ".trace"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  absl::StatusOr<Program> program = ProgramFromTrace(*trace);
  ASSERT_TRUE(program.ok()) << program.status();
  const ExecuteResult r = Execute(*program);
  EXPECT_TRUE(r.ok) << "at instruction " << r.failed_at << ": " << r.failure;
  EXPECT_EQ(r.skipped, 0u);
  EXPECT_EQ(r.executed, program->code.size());
  // Every allocation was decided, by a rule or by failing.
  uint64_t decided = r.coverage.failed;
  for (uint64_t n : r.coverage.by_rule) decided += n;
  EXPECT_EQ(decided, trace->alloc_count);
}

INSTANTIATE_TEST_SUITE_P(Lab, RecordedTrace,
                         ::testing::Values("collectives", "dataparallel", "fsdp", "loader",
                                           "offload", "pipeline", "server"));

}  // namespace
}  // namespace streampool::model
