// The one printer and the one parser of a trace line (src/trace/ops.h):
// each op prints as the line it parses from, byte for byte, and a line that
// is not one says why.
#include "src/trace/ops.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace streampool::internal::trace {
namespace {

// The op of one line ("<op> <fields>[  # <comment>]\n"), printed again.
std::string RoundTrip(absl::string_view line) {
  absl::ConsumeSuffix(&line, "\n");
  absl::string_view body = line, comment;
  if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
    body = line.substr(0, hash);
    comment = line.substr(hash + 1);
  }
  absl::StatusOr<Op> op = ParseOp(Fields(body), comment);
  if (!op.ok()) return std::string(op.status().message());
  return ToString(*op);
}

TEST(TraceOps, EveryOpPrintsAsTheLineItParsesFrom) {
  for (const char* line : {
           "alloc 3 4096 1\n",
           "alloc 3 4096 1 2\n",
           "alloc 3 4096 1 2  # same_stream 7+512\n",
           "alloc 3 4096 1 2  # failed\n",
           "free 3 1\n",
           "kernel 1 500\n",
           "record 4 1\n",
           "wait 2 4\n",
           "sync 1\n",
           "esync 4\n",
           "dsync\n",
           "dsync 1\n",
           "advance 250\n",
           "stream 1 0 1\n",
           "sdestroy 1\n",
           "event 4 2\n",
           "edestroy 4\n",
           "pool 2 0\n",
           "pool 2 0 imported=1\n",
           "pool 2 1 type=huge_page reuse=event+internal threshold=max growth=chunked "
           "front_cache=0 wait_before_growth=1 soft_limit=1048576 default=1 max_size=4096 "
           "page_policy=huge_first acl_rounding=1 acl_align32=1 handle_types=1 upstream=custom\n",
           "pool 2 0 type=device reuse=none threshold=0 growth=default front_cache=1 "
           "wait_before_growth=0 soft_limit=max default=0\n",
           "pdestroy 2\n",
           "malloc 5 100 1\n",
           "release 5\n",
           "copy 1 65536\n",
           "host 1\n",
           "query 1\n",
           "query 1  # not_ready\n",
           "equery 4  # not_ready\n",
           "attr 2 threshold max\n",
           "attr 2 soft_limit 1048576\n",
           "attr 2 reuse_event 0\n",
           "trim 2 0\n",
           "use 3 2\n",
           "alloc 3 4096 1 2  # graph\n",
           "capture 1 0\n",
           "capture_to 1 2 2\n",
           "capture_to 1 2 1 0 3\n",
           "endcapture 1\n",
           "endcapture 1 2\n",
           "gcreate 2\n",
           "gdestroy 2\n",
           "gclone 3 2\n",
           "gnode 2 0 kernel 500\n",
           "gnode 2 1 memcpy 4096 0\n",
           "gnode 2 2 memset 64 0 1\n",
           "gnode 2 3 host 2\n",
           "gnode 2 4 event_record 4 3\n",
           "gnode 2 5 wait_event 4\n",
           "gnode 2 6 empty 4 5\n",
           "gnode 2 7 graph 3 6\n",
           "gnode 2 8 mem_alloc 9 1 2097152 7\n",
           "gnode 2 9 mem_free 9 8\n",
           "gedge 2 0 1\n",
           "gedge 2 0 1 1 2\n",
           "ginst 1 2 1\n",
           "gupload 1 3\n",
           "glaunch 1 3\n",
           "gxdestroy 1\n",
           "gupdate 1 2\n",
           "gtrim 0\n",
           "greset 1 used\n",
           "greset 0 reserved\n",
       }) {
    EXPECT_EQ(RoundTrip(line), line);
  }
}

TEST(TraceOps, ALineThatIsNoOpSaysWhy) {
  EXPECT_EQ(RoundTrip("allocc 1 2 3"), "unknown op 'allocc'");
  EXPECT_EQ(RoundTrip("kernel 0 -5"), "duration '-5' is negative");
  EXPECT_EQ(RoundTrip("malloc 1 8 64"), "device 64 is out of range (0..63)");
  EXPECT_EQ(RoundTrip("stream 0 0 0"), "stream 0 is device 0's legacy stream");
  EXPECT_EQ(RoundTrip("gnode 2 0 mem_alloc 9 1"), "a mem_alloc node takes 3 params, got 2");
  EXPECT_EQ(RoundTrip("gnode 2 0 leaf"),
            "node kind: unknown graph node type 'leaf' (one of 'kernel', 'memcpy', 'memset', "
            "'host', 'graph', 'empty', 'wait_event', 'event_record', 'mem_alloc', 'mem_free')");
  EXPECT_EQ(RoundTrip("gedge 2 0 1 2"), "gedge lists its edges as <from> <to> pairs");
  EXPECT_EQ(RoundTrip("greset 0 peak"), "greset 'peak': expected used or reserved");
  EXPECT_EQ(RoundTrip("endcapture"), "endcapture takes 1 or 2 fields (<stream> [<graph>]), got 0");
  EXPECT_EQ(RoundTrip("attr 0 colour 1"),
            "attr 'colour': expected reuse_event, reuse_opportunistic, reuse_internal, "
            "threshold, front_cache, wait_before_growth or soft_limit");
  EXPECT_EQ(RoundTrip("pool 1 0 reuse=some"),
            "reuse 'some': expected 'none' or event, opportunistic, internal joined by '+'");
}

// Every line a recording wrote (the policy lab's traces are the workloads'
// recordings) but its comments is the printer's own.
TEST(TraceOps, EveryLineOfTheLabsRecordingsRoundTrips) {
  for (const char* name :
       {"collectives", "dataparallel", "fsdp", "loader", "offload", "pipeline", "server"}) {
    std::ifstream in(absl::StrCat(STREAMPOOL_TRACES_DIR, "/lab/", name, ".trace"));
    ASSERT_TRUE(in.good()) << name;
    std::string line;
    size_t ops = 0;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      EXPECT_EQ(RoundTrip(line), line + "\n") << name;
      ++ops;
    }
    EXPECT_GT(ops, 1000u) << name;
  }
}

}  // namespace
}  // namespace streampool::internal::trace
