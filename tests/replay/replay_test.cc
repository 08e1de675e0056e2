// The replay library's parser and replayer (src/replay/): what a trace
// means, how malformed input is refused (with the file and line, never a
// crash), and what a replay reports, on small inline traces whose outcome
// follows from docs/design.md's rules; plus the five bundled PyTorch traces.
#include "src/replay/replay.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/report.h"
#include "src/replay/trace.h"
#include "streampool/mem_pool.h"
#include "streampool/pool_props.h"

namespace streampool::replay {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kChunk = 2 * kMiB;

Trace MustParse(absl::string_view text) {
  absl::StatusOr<Trace> t = ParseTrace(text, "t");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Trace{};
}

// A parsed trace's ops as the printer writes them (its numbers dense),
// without their newlines.
std::vector<std::string> OpLines(const Trace& t) {
  std::vector<std::string> out;
  for (const TraceOp& op : t.ops) {
    std::string line = ops::ToString(op.op);
    line.pop_back();
    out.push_back(std::move(line));
  }
  return out;
}

// The message of a parse that must fail.
std::string ParseError(absl::string_view text) {
  absl::StatusOr<Trace> t = ParseTrace(text, "t");
  EXPECT_FALSE(t.ok()) << "parsed: " << text;
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(t.status().message());
}

ReplayResult MustReplay(const Trace& trace, const ReplaySettings& settings = {}) {
  absl::StatusOr<ReplayResult> r = Replay(trace, settings);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayResult{};
}

ReplaySettings NoReuse() {
  ReplaySettings s;
  s.reuse_event = s.reuse_opportunistic = s.reuse_internal = false;
  return s;
}

// ------------------------------------------------------------- the format

TEST(TraceParse, EveryOpKindWithDenseStreamsEventsAndSlots) {
  const Trace t = MustParse(
      "# streampool trace v1\n"
      "alloc 10 1000 7\n"
      "kernel 7 500\n"
      "record 42 7\n"
      "wait 0 42\n"
      "free 10 0\n"
      "sync 7\n"
      "esync 42\n"
      "dsync\n"
      "advance 250\n"
      "alloc 10 64 0\n");  // id 10 again, after its free: a new slot
  // Stream 7 is the first non-legacy stream (dense 1); event 42 is dense 0;
  // an allocation's id is its slot, which its free names (freed on another
  // stream than allocated), and id 10 again, after its free, is a new slot.
  EXPECT_THAT(t.stream_ids, ElementsAre(0u, 7u));
  EXPECT_THAT(t.event_ids, ElementsAre(42u));
  EXPECT_THAT(OpLines(t),
              ElementsAre("alloc 0 1000 1", "kernel 1 500", "record 0 1", "wait 0 0", "free 0 0",
                          "sync 1", "esync 0", "dsync", "advance 250", "alloc 1 64 0"));
  EXPECT_EQ(t.ops[0].line, 2u);
  EXPECT_EQ(t.alloc_count, 2u);
  EXPECT_EQ(t.free_count, 1u);
  EXPECT_EQ(t.total_time_ns, 750u);  // kernel 500 + advance 250
  EXPECT_EQ(t.format, TraceFormat::kStreampoolV1);
}

TEST(TraceParse, PeakAndFinalLiveBytesAreTheRequestedSizes) {
  const Trace t = MustParse(
      "alloc 1 100 0\n"
      "alloc 2 300 0\n"  // live 400
      "free 1 0\n"
      "alloc 3 250 0\n"  // live 550: the peak
      "free 3 0\n");
  EXPECT_EQ(t.peak_live_bytes, 550u);
  EXPECT_EQ(t.live_at_end_bytes, 300u);
}

TEST(TraceParse, HeaderCommentsBecomeMetadataUntilTheFirstOp) {
  const Trace t = MustParse(
      "# streampool trace v1\n"
      "# source: someone/repo@abc:snap.pickle\n"
      "# torch_peak_reserved_bytes 7235174400 (method: sum of segments)\n"
      "# peak_live_bytes 7013335044\n"
      "# This line is prose, and its first word is not a number\n"
      "\n"
      "alloc 0 1 0   # a trailing comment is fine\n"
      "# late_key 5\n");
  EXPECT_EQ(t.header.at("source"), "someone/repo@abc:snap.pickle");
  EXPECT_EQ(t.HeaderNumber("torch_peak_reserved_bytes"), 7235174400u);
  EXPECT_EQ(t.HeaderNumber("peak_live_bytes"), 7013335044u);
  EXPECT_EQ(t.HeaderNumber("source"), std::nullopt);
  EXPECT_EQ(t.HeaderNumber("This"), std::nullopt);
  EXPECT_EQ(t.HeaderNumber("missing"), std::nullopt);
  // Comments after the first op are comments, not metadata.
  EXPECT_EQ(t.header.count("late_key"), 0u);
  EXPECT_EQ(t.ops.size(), 1u);

  const TorchFigures torch = TorchFiguresOf(t);
  EXPECT_EQ(torch.peak_reserved, 7235174400u);
  EXPECT_EQ(torch.peak_live, 7013335044u);
  ASSERT_TRUE(torch.utilization.has_value());
  EXPECT_DOUBLE_EQ(*torch.utilization, 7013335044.0 / 7235174400.0);
}

TEST(TraceParse, EmptyAndCommentOnlyTracesAreEmpty) {
  EXPECT_TRUE(MustParse("").ops.empty());
  EXPECT_TRUE(MustParse("# nothing here\n\n   \n").ops.empty());
}

TEST(TraceParse, AnEmptyOrBinaryFileIsNotATrace) {
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  for (const std::string& empty : {std::string(), std::string("\n  \n\t\r\n")}) {
    absl::StatusOr<Trace> t = LoadTrace(write("empty.trace", empty));
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), ::testing::HasSubstr("not a trace"));
  }
  absl::StatusOr<Trace> bin = LoadTrace(write("bin.trace", std::string("\x7f"
                                                                       "ELF\x02\x01\x00",
                                                                       7)));
  ASSERT_FALSE(bin.ok());
  EXPECT_THAT(std::string(bin.status().message()), ::testing::HasSubstr("binary data"));
  // A comment-only file is a trace (of nothing), as its text is.
  absl::StatusOr<Trace> comments = LoadTrace(write("comments.trace", "# nothing here\n"));
  ASSERT_TRUE(comments.ok()) << comments.status();
  EXPECT_TRUE(comments->ops.empty());
}

TEST(TraceParse, CrlfLinesParseLikeLf) {
  const std::string lf = "# peak_live_bytes 8\nalloc 1 8 0\nkernel 0 5\nfree 1 0\n";
  const std::string crlf = absl::StrReplaceAll(lf, {{"\n", "\r\n"}});
  const Trace a = MustParse(lf);
  const Trace b = MustParse(crlf);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  EXPECT_EQ(OpLines(a), OpLines(b));
  for (size_t i = 0; i < a.ops.size(); ++i) EXPECT_EQ(a.ops[i].line, b.ops[i].line);
  EXPECT_EQ(b.header.at("peak_live_bytes"), "8");  // no '\r' left in the value
}

TEST(TraceParse, LargestNumbersParse) {
  const Trace t = MustParse("alloc 18446744073709551615 18446744073709551615 0\n");
  EXPECT_EQ(std::get<ops::Alloc>(t.ops[0].op).size, UINT64_MAX);
  // The parser keeps live bytes in 128 bits and reports a saturated peak.
  const Trace two = MustParse(
      "alloc 1 18446744073709551615 0\n"
      "alloc 2 18446744073709551615 0\n");
  EXPECT_EQ(two.peak_live_bytes, UINT64_MAX);
}

// ------------------------------------------------------ malformed input

TEST(TraceParseErrors, UnknownOp) {
  EXPECT_EQ(ParseError("alloc 1 8 0\nallocc 2 8 0\n"), "t:2: unknown op 'allocc'");
  EXPECT_EQ(ParseError("ALLOC 1 8 0\n"), "t:1: unknown op 'ALLOC'");
}

TEST(TraceParseErrors, MissingAndExtraFields) {
  EXPECT_EQ(ParseError("alloc 1 100\n"),
            "t:1: alloc takes 3 or 4 fields (<id> <size> <stream> [<pool>]), got 2");
  EXPECT_EQ(ParseError("pool 1 0\nalloc 1 100 0 1 7\n"),
            "t:2: alloc takes 3 or 4 fields (<id> <size> <stream> [<pool>]), got 5");
  EXPECT_EQ(ParseError("free 1\n"), "t:1: free takes 2 fields (<id> <stream>), got 1");
  EXPECT_EQ(ParseError("sync\n"), "t:1: sync takes 1 field (<stream>), got 0");
  EXPECT_EQ(ParseError("dsync 0 1\n"), "t:1: dsync takes 0 or 1 field ([<device>]), got 2");
  EXPECT_EQ(ParseError("pool 1\n"),
            "t:1: pool takes 2 or more fields (<pool> <device> <key>=<value>...), got 1");
  EXPECT_EQ(ParseError("advance 1 2\n"), "t:1: advance takes 1 field (<ns>), got 2");
}

TEST(TraceParseErrors, NotNumbers) {
  EXPECT_EQ(ParseError("alloc x 100 0\n"), "t:1: id 'x' is not an unsigned decimal integer");
  EXPECT_EQ(ParseError("alloc 1 0x10 0\n"), "t:1: size '0x10' is not an unsigned decimal integer");
  EXPECT_EQ(ParseError("alloc 1 10 +1\n"), "t:1: stream '+1' is not an unsigned decimal integer");
  EXPECT_EQ(ParseError("kernel 0 1.5\n"), "t:1: duration '1.5' is not an unsigned decimal integer");
  EXPECT_EQ(ParseError("record e 0\n"), "t:1: event 'e' is not an unsigned decimal integer");
  // A NUL byte is part of the field, not its end, and is quoted escaped.
  EXPECT_EQ(ParseError(std::string("advance 1\0\n", 11)),
            "t:1: advance '1\\x00' is not an unsigned decimal integer");
}

TEST(TraceParseErrors, NegativeAndOverflowingNumbers) {
  EXPECT_EQ(ParseError("advance -5\n"), "t:1: advance '-5' is negative");
  EXPECT_EQ(ParseError("alloc 1 -1 0\n"), "t:1: size '-1' is negative");
  EXPECT_EQ(ParseError("alloc 1 18446744073709551616 0\n"),
            "t:1: size '18446744073709551616' is out of range (more than 64 bits)");
  EXPECT_EQ(ParseError("sync 99999999999999999999999\n"),
            "t:1: stream '99999999999999999999999' is out of range (more than 64 bits)");
}

TEST(TraceParseErrors, VirtualTimeThatWouldOverflow) {
  // 2^62 ns is allowed in total; one more is not.
  MustParse("advance 4611686018427387904\n");
  EXPECT_EQ(ParseError("advance 4611686018427387904\nkernel 0 1\n"),
            "t:2: total virtual time would pass 2^62 ns");
  EXPECT_EQ(ParseError("advance 18446744073709551615\n"),
            "t:1: total virtual time would pass 2^62 ns");
}

TEST(TraceParseErrors, FreeOfUnknownId) {
  EXPECT_EQ(ParseError("alloc 1 8 0\nfree 7 0\n"), "t:2: free of unknown id 7");
}

TEST(TraceParseErrors, DoubleFree) {
  EXPECT_EQ(ParseError("alloc 1 8 0\nfree 1 0\nfree 1 0\n"),
            "t:3: double free of id 1 (allocated at line 1, freed at line 2)");
}

TEST(TraceParseErrors, AllocOfALiveId) {
  EXPECT_EQ(ParseError("alloc 1 8 0\nalloc 1 8 0\n"),
            "t:2: alloc of id 1, which is live (allocated at line 1)");
}

TEST(TraceParseErrors, VeryLongLines) {
  const std::string long_comment = "#" + std::string(kMaxLineLength - 1, 'x');
  MustParse(long_comment + "\n");  // exactly at the limit
  EXPECT_EQ(ParseError("alloc 1 8 0\n" + long_comment + "x\n"),
            absl::StrCat("t:2: line is ", kMaxLineLength + 1, " bytes long; the limit is ",
                         kMaxLineLength));
  // A megabyte of digits without a newline is refused as a line, not parsed.
  EXPECT_THAT(ParseError("advance " + std::string(1 << 20, '9')),
              HasSubstr("t:1: line is 1048584 bytes long"));
}

TEST(TraceParseErrors, OtherVersions) {
  EXPECT_EQ(ParseError("# streampool trace v2\nalloc 1 8 0\n"),
            "t:1: unsupported trace version 'v2' (this tool reads v1)");
}

TEST(TraceParseErrors, TooManyStreams) {
  // Stream 0 plus kMaxStreams - 1 others fit; one more does not.
  std::string text;
  for (size_t s = 1; s < kMaxStreams; ++s) absl::StrAppend(&text, "sync ", s, "\n");
  EXPECT_EQ(MustParse(text).stream_ids.size(), kMaxStreams);
  absl::StrAppend(&text, "sync 5000\n");
  EXPECT_EQ(ParseError(text),
            absl::StrCat("t:", kMaxStreams, ": more than ", kMaxStreams, " streams"));
}

TEST(TraceParseErrors, LoadTraceNamesTheFile) {
  absl::StatusOr<Trace> t = LoadTrace("/nonexistent/x.trace");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), "/nonexistent/x.trace: cannot open: No such file or directory");
  absl::StatusOr<Trace> dir = LoadTrace("/");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(dir.status().message(), "/: is a directory");
}

TEST(TraceParseErrors, BinaryInputIsQuotedEscapedAndCut) {
  // What a binary file's first line may hold: control bytes, an escape
  // sequence, bytes past ASCII.
  const std::string junk("\x7f\x45LF\x02\x01\x1b[2J\x00\xff", 12);
  // A byte that would read as part of the escape before it is escaped too.
  EXPECT_EQ(ParseError(junk + " 1 2\n"),
            "t:1: unknown op '\\x7f\\x45LF\\x02\\x01\\x1b[2J\\x00\\xff'");
  std::string forty_escapes;
  for (int i = 0; i < 40; ++i) forty_escapes += "\\x1b";
  EXPECT_EQ(ParseError(std::string(200, '\x1b') + "\n"),
            absl::StrCat("t:1: unknown op '", forty_escapes, "...'"));
}

// ------------------------------------------------------------- RMM logs

constexpr char kRmmLog[] =
    "Thread,Time,Action,Pointer,Size,Stream\n"
    "140,08:43:57.000000,allocate,0x7f0000000000,1000,0x0\n"
    "140,08:43:57.000010,allocate,0x7f0000100000,24,0x55aa\n"
    "140,08:43:57.000030,free,0x7f0000000000,1000,0x0\n"
    "140,08:43:57.000030,allocate,0x7f0000000000,2000,0x55aa\n"  // the address again
    "140,08:43:57.000040,free,0x7f0000000000,2000,0x1\n";        // cudaStreamLegacy

TEST(RmmCsv, AllocationsFreesStreamsAndTime) {
  const Trace t = MustParse(kRmmLog);
  EXPECT_EQ(t.format, TraceFormat::kRmmCsv);
  EXPECT_THAT(t.stream_ids, ElementsAre(0u, 0x55aau));
  // Advances of 10 and 20 µs; frees matched by pointer; 0x1 is the legacy
  // stream.
  EXPECT_THAT(OpLines(t),
              ElementsAre("alloc 0 1000 0", "advance 10000", "alloc 1 24 1", "advance 20000",
                          "free 0 0", "alloc 2 2000 1", "advance 10000", "free 2 0"));
  EXPECT_EQ(t.alloc_count, 3u);
  EXPECT_EQ(t.free_count, 2u);
  EXPECT_EQ(t.peak_live_bytes, 2024u);
  EXPECT_EQ(t.live_at_end_bytes, 24u);
  EXPECT_EQ(t.total_time_ns, 40000u);
}

TEST(RmmCsv, SecondsTimeStampsAndDecimalStreamsAndCrlf) {
  const Trace t = MustParse(
      "Thread,Time,Action,Pointer,Size,Stream\r\n"
      "1,1634567890.5,allocate,10,8,0\r\n"
      "1,1634567890.75,deallocate,0x10,8,94000000\r\n"
      "1,1634567890.70,allocate,20,8,0\r\n");  // time going back: no advance
  EXPECT_THAT(OpLines(t),
              ElementsAre("alloc 0 8 0", "advance 250000000", "free 0 1", "alloc 1 8 0"));
  EXPECT_THAT(t.stream_ids, ElementsAre(0u, 94000000u));
}

TEST(RmmCsv, AllocationFailuresAndNullPointersAreSkipped) {
  const Trace t = MustParse(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,00:00:00.0,allocate failure,0x0,99999999999,0x0\n"
      "1,00:00:00.0,allocate,0x0,0,0x0\n"
      "1,00:00:00.0,free,0x0,0,0x0\n");
  EXPECT_TRUE(t.ops.empty());
  EXPECT_EQ(t.HeaderNumber("rmm_allocate_failures"), 1u);
  EXPECT_EQ(t.HeaderNumber("rmm_null_pointer_rows"), 2u);
}

std::string RmmError(absl::string_view rows) {
  return ParseError(absl::StrCat("Thread,Time,Action,Pointer,Size,Stream\n", rows));
}

TEST(RmmCsvErrors, FreeOfAPointerThatIsNotLive) {
  EXPECT_EQ(RmmError("1,0,free,0x10,8,0\n"), "t:2: free of 0x10, which is not a live allocation");
  EXPECT_EQ(RmmError("1,0,allocate,0x10,8,0\n1,0,free,0x10,8,0\n1,0,free,0x10,8,0\n"),
            "t:4: free of 0x10, which is not a live allocation");
}

TEST(RmmCsvErrors, AllocateAtALivePointer) {
  EXPECT_EQ(RmmError("1,0,allocate,0x10,8,0\n1,0,allocate,0x10,8,0\n"),
            "t:3: allocate at 0x10, which is live (allocated at line 2)");
}

TEST(RmmCsvErrors, FreeSizeMismatch) {
  EXPECT_EQ(RmmError("1,0,allocate,0x10,4,0\n1,0,free,0x10,5,0\n"),
            "t:3: free of 5 bytes, but the allocation (line 2) has 4");
}

TEST(RmmCsvErrors, BadFields) {
  EXPECT_EQ(RmmError("1,0,alloc,0x10,4,0\n"),
            "t:2: unknown action 'alloc' (expected allocate or free)");
  EXPECT_EQ(RmmError("1,0,allocate,0x10,4\n"), "t:2: expected 6 comma-separated fields, got 5");
  EXPECT_EQ(RmmError("1,0,allocate,zz,4,0\n"), "t:2: pointer 'zz' is not a hexadecimal address");
  EXPECT_EQ(RmmError("1,0,allocate,0x10,-4,0\n"), "t:2: size '-4' is negative");
  EXPECT_EQ(RmmError("1,0,allocate,0x10,4,s\n"),
            "t:2: stream 's' is not a number or hexadecimal handle");
  EXPECT_EQ(RmmError("1,noon,allocate,0x10,4,0\n"),
            "t:2: time 'noon' is not HH:MM:SS.ffffff or seconds");
  EXPECT_EQ(RmmError("1,12:61:00.0,allocate,0x10,4,0\n"),
            "t:2: time '12:61:00.0' is not HH:MM:SS.ffffff or seconds");
}

TEST(RmmCsvErrors, HeaderWithoutAColumn) {
  absl::StatusOr<Trace> t = ParseRmmCsv("Thread,Time,Action,Pointer,Size\n", "r.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "r.csv:1: not an RMM log: the header has no Stream column (expected "
            "Thread,Time,Action,Pointer,Size,Stream)");
  EXPECT_FALSE(ParseRmmCsv("", "r.csv").ok());
}

// ---------------------------------------------------------------- replay

TEST(Replay, SameStreamReuseFromOneChunk) {
  // 1000 B occupy 1024 (256-B rule); the first grows one 2 MiB chunk, the
  // second takes the stream's own pending free.
  const Trace t = MustParse(
      "alloc 0 1000 0\n"
      "free 0 0\n"
      "alloc 1 1000 0\n"
      "free 1 0\n");
  const ReplayResult r = MustReplay(t);
  EXPECT_EQ(r.peak_reserved, kChunk);
  EXPECT_EQ(r.peak_used, 1024u);
  EXPECT_DOUBLE_EQ(r.utilization, 1024.0 / kChunk);
  EXPECT_EQ(r.stats.fresh_allocs, 1u);
  EXPECT_EQ(r.stats.reuse_same_stream, 1u);
  EXPECT_EQ(r.stats.upstream_maps, 1u);
  EXPECT_EQ(r.failed_allocs, 0u);
  EXPECT_EQ(r.checker_reports, 0u);
  EXPECT_EQ(r.alloc_cost.calls, 2u);
  EXPECT_EQ(r.free_cost.calls, 2u);
  // (t, reserved, used) at each change; no advance, so all at time 0.
  ASSERT_EQ(r.series.size(), 5u);
  EXPECT_EQ(r.series[1].reserved, kChunk);
  EXPECT_EQ(r.series[1].used, 1024u);
  EXPECT_EQ(r.series[2].used, 0u);
  EXPECT_EQ(r.series[4].reserved, kChunk);
}

// One whole chunk allocated on stream 1 and freed behind a 1 µs kernel;
// stream 2 then asks for a chunk. Which rule serves it depends on what
// orders or completes the free.
constexpr char kCrossStream[] =
    "alloc 0 2097152 1\n"
    "kernel 1 1000\n"
    "free 0 1\n";

TEST(Replay, EventDependencyServesTheOtherStream) {
  const Trace t = MustParse(absl::StrCat(kCrossStream,
                                         "record 5 1\n"
                                         "wait 2 5\n"
                                         "alloc 1 2097152 2\n"));
  const ReplayResult on = MustReplay(t);
  EXPECT_EQ(on.stats.reuse_event_dependency, 1u);
  EXPECT_EQ(on.peak_reserved, kChunk);
  EXPECT_DOUBLE_EQ(on.utilization, 1.0);
  // With every rule off the free is unusable: the pool grows a second chunk.
  const ReplayResult off = MustReplay(t, NoReuse());
  EXPECT_EQ(off.stats.reuse_event_dependency, 0u);
  EXPECT_EQ(off.stats.fresh_allocs, 2u);
  EXPECT_EQ(off.peak_reserved, 2 * kChunk);
}

TEST(Replay, OpportunisticReuseOnceTheFreeHasRun) {
  // 1000 ns of host time pass: the kernel (0..1000) and the free are done.
  const Trace t = MustParse(absl::StrCat(kCrossStream,
                                         "advance 1000\n"
                                         "alloc 1 2097152 2\n"));
  const ReplayResult r = MustReplay(t);
  EXPECT_EQ(r.stats.reuse_opportunistic, 1u);
  EXPECT_EQ(r.peak_reserved, kChunk);
  EXPECT_EQ(r.end_time_ns, 1000u);
  ReplaySettings event_only = NoReuse();
  event_only.reuse_event = true;
  EXPECT_EQ(MustReplay(t, event_only).peak_reserved, 2 * kChunk);
}

TEST(Replay, InternalDependencyWhenTheDeviceIsFull) {
  // The device holds one chunk, the free is neither ordered nor complete:
  // only rule 5 can serve, by inserting a wait.
  const Trace t = MustParse(absl::StrCat(kCrossStream,
                                         "alloc 1 2097152 2\n"
                                         "free 1 2\n"));
  ReplaySettings s;
  s.device_capacity = kChunk;
  const ReplayResult r = MustReplay(t, s);
  EXPECT_EQ(r.stats.reuse_internal_dependency, 1u);
  EXPECT_EQ(r.stats.waits_inserted, 1u);
  EXPECT_EQ(r.failed_allocs, 0u);
  EXPECT_EQ(r.checker_reports, 0u);

  // Without it the allocation fails; its free is skipped, not an error.
  ReplaySettings none = NoReuse();
  none.device_capacity = kChunk;
  const ReplayResult f = MustReplay(t, none);
  EXPECT_EQ(f.failed_allocs, 1u);
  EXPECT_EQ(f.stats.failed_alloc_count, 1u);
  EXPECT_EQ(f.skipped_frees, 1u);
  EXPECT_EQ(f.alloc_cost.calls, 2u);  // a failed call is still a call
  EXPECT_EQ(f.free_cost.calls, 1u);
  EXPECT_EQ(f.peak_reserved, kChunk);
}

TEST(Replay, SyncReleasesDownToTheThreshold) {
  const Trace t = MustParse(
      "alloc 0 1000 0\n"
      "free 0 0\n"
      "sync 0\n");
  const ReplayResult zero = MustReplay(t);
  EXPECT_EQ(zero.peak_reserved, kChunk);
  EXPECT_EQ(zero.stats.reserved_bytes, 0u);
  EXPECT_EQ(zero.stats.upstream_unmaps, 1u);
  EXPECT_EQ(zero.series.back().reserved, 0u);

  ReplaySettings keep;
  keep.release_threshold = UINT64_MAX;
  const ReplayResult max = MustReplay(t, keep);
  EXPECT_EQ(max.stats.reserved_bytes, kChunk);
  EXPECT_EQ(max.stats.upstream_unmaps, 0u);
}

TEST(Replay, EventAndDeviceSynchronizeReleaseToo) {
  const ReplayResult e =
      MustReplay(MustParse("alloc 0 1000 3\nfree 0 3\nkernel 3 500\nrecord 1 3\nesync 1\n"));
  EXPECT_EQ(e.stats.reserved_bytes, 0u);
  EXPECT_EQ(e.end_time_ns, 500u);  // the host waited for the kernel
  const ReplayResult d = MustReplay(MustParse("alloc 0 1000 3\nfree 0 3\ndsync\n"));
  EXPECT_EQ(d.stats.reserved_bytes, 0u);
}

TEST(Replay, OutOfMemoryIsCountedNotAnError) {
  // 3 MiB occupy a 4 MiB chunk; the device has 4 MiB.
  const Trace t = MustParse(
      "alloc 0 3145728 0\n"
      "alloc 1 3145728 0\n"
      "free 1 0\n"
      "free 0 0\n");
  ReplaySettings s;
  s.device_capacity = 4 * kMiB;
  const ReplayResult r = MustReplay(t, s);
  EXPECT_EQ(r.failed_allocs, 1u);
  EXPECT_EQ(r.skipped_frees, 1u);
  EXPECT_EQ(r.peak_reserved, 4 * kMiB);
  EXPECT_EQ(r.peak_used, 3 * kMiB);
}

TEST(Replay, ZeroByteAllocationsReserveNothing) {
  const ReplayResult r = MustReplay(MustParse("alloc 0 0 0\nfree 0 0\n"));
  EXPECT_EQ(r.peak_reserved, 0u);
  EXPECT_EQ(r.utilization, 0.0);
  EXPECT_EQ(r.alloc_cost.calls, 1u);
  EXPECT_EQ(r.free_cost.calls, 1u);
  EXPECT_EQ(r.stats.alloc_count, 0u);  // zero bytes count no outcome
}

TEST(Replay, RmmLogReplays) {
  const ReplayResult r = MustReplay(MustParse(kRmmLog));
  // 1024 + 256 (24 B) then 2048 + 256 live at the peak.
  EXPECT_EQ(r.peak_used, 2048u + 256u);
  EXPECT_EQ(r.stats.alloc_count, 3u);
  EXPECT_EQ(r.stats.free_count, 2u);
  EXPECT_EQ(r.end_time_ns, 40000u);
}

TEST(Replay, PoolVariantsReplay) {
  // 1000 B occupy 1024 on device and huge-page pools (256-B rule), 1024 in
  // pinned host pools (64-B rule), ALIGN_UP(1000 + 32, 128) = 1152 in DVPP.
  const Trace t = MustParse("alloc 0 1000 0\nfree 0 0\n");
  const std::pair<AllocationType, uint64_t> cases[] = {
      {AllocationType::kDevice, 1024},
      {AllocationType::kPinnedHost, 1024},
      {AllocationType::kHugePage, 1024},
      {AllocationType::kDvpp, 1152},
  };
  for (const auto& [type, used] : cases) {
    ReplaySettings s;
    s.pool_type = type;
    const ReplayResult r = MustReplay(t, s);
    EXPECT_EQ(r.peak_used, used) << static_cast<int>(type);
    EXPECT_EQ(r.peak_reserved, kChunk) << static_cast<int>(type);
  }
}

// 1 MiB allocated and freed, a sync that keeps everything (threshold max),
// then 3 MiB: the pool holds one 2 MiB mapping, READY and 1 MiB short.
constexpr char kShortfall[] =
    "alloc 0 1048576 0\n"
    "free 0 0\n"
    "sync 0\n"
    "alloc 1 3145728 0\n"
    "free 1 0\n";

TEST(Replay, ExpandableGrowthMapsOnlyTheShortfall) {
  const Trace t = MustParse(kShortfall);
  ReplaySettings s;
  s.release_threshold = UINT64_MAX;
  s.growth = PoolGrowth::kExpandable;
  const ReplayResult expandable = MustReplay(t, s);
  EXPECT_EQ(expandable.growth, PoolGrowth::kExpandable);
  // One more granule above the free 2 MiB: the 3 MiB block spans both growths.
  EXPECT_EQ(expandable.peak_reserved, 4 * kMiB);
  EXPECT_EQ(expandable.stats.upstream_maps, 2u);

  // A chunk never grows: 3 MiB need a 4 MiB chunk of their own beside the
  // first.
  s.growth = PoolGrowth::kChunked;
  const ReplayResult chunked = MustReplay(t, s);
  EXPECT_EQ(chunked.growth, PoolGrowth::kChunked);
  EXPECT_EQ(chunked.peak_reserved, 6 * kMiB);
  EXPECT_EQ(chunked.peak_used, expandable.peak_used);
}

TEST(Replay, DefaultGrowthIsExpandableOnBothBackings) {
  const Trace t = MustParse(kShortfall);
  ReplaySettings s;
  s.release_threshold = UINT64_MAX;
  EXPECT_EQ(MustReplay(t, s).growth, PoolGrowth::kExpandable);
  s.backing = Backing::kHost;
  s.device_capacity = 64 * kMiB;
  const ReplayResult host = MustReplay(t, s);
  EXPECT_EQ(host.growth, PoolGrowth::kExpandable);
  EXPECT_EQ(host.peak_reserved, 4 * kMiB);
}

TEST(Replay, HostBackingReplaysTheSame) {
  ReplaySettings host;
  host.backing = Backing::kHost;
  host.device_capacity = 64 * kMiB;
  const Trace t =
      MustParse(absl::StrCat(kCrossStream, "record 5 1\nwait 2 5\nalloc 1 2097152 2\n"));
  const ReplayResult r = MustReplay(t, host);
  EXPECT_EQ(r.stats.reuse_event_dependency, 1u);
  EXPECT_EQ(r.peak_reserved, kChunk);
}

TEST(Replay, ProgressIsReportedToTheEnd) {
  const Trace t = MustParse("alloc 0 8 0\nfree 0 0\n");
  std::vector<std::pair<size_t, size_t>> calls;
  ASSERT_TRUE(
      Replay(t, {}, [&](size_t done, size_t total) { calls.emplace_back(done, total); }).ok());
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front(), std::make_pair(size_t{0}, size_t{2}));
  EXPECT_EQ(calls.back(), std::make_pair(size_t{2}, size_t{2}));
}

// ------------------------------------------------------ settings, costs

TEST(ReplaySettingsTest, AllEightReuseCombinationsAllOnFirst) {
  std::vector<std::string> labels;
  for (const ReplaySettings& s : AllReuseCombinations({})) labels.push_back(s.ReuseLabel());
  EXPECT_THAT(labels,
              ElementsAre("event+opportunistic+internal", "event+opportunistic", "event+internal",
                          "event", "opportunistic+internal", "opportunistic", "internal", "none"));
  ReplaySettings s;
  s.release_threshold = UINT64_MAX;
  EXPECT_EQ(s.Label(), "event+opportunistic+internal, threshold max");
  s.release_threshold = 4096;
  EXPECT_EQ(s.ThresholdLabel(), "4096");
}

TEST(ReplaySettingsTest, GrowthIsNamedWhenNotDefaultOrWhenSwept) {
  ReplaySettings s;
  EXPECT_EQ(s.Label(), "event+opportunistic+internal, threshold 0");
  s.label_growth = true;
  EXPECT_EQ(s.Label(), "event+opportunistic+internal, threshold 0, growth default");
  s.label_growth = false;
  s.growth = PoolGrowth::kChunked;
  EXPECT_EQ(s.Label(), "event+opportunistic+internal, threshold 0, growth chunked");
  s.growth = PoolGrowth::kExpandable;
  EXPECT_EQ(s.Label(), "event+opportunistic+internal, threshold 0, growth expandable");
}

TEST(HostCostTest, NearestRankPercentiles) {
  std::vector<uint64_t> samples(100);
  std::iota(samples.begin(), samples.end(), 1);  // 1..100
  std::shuffle(samples.begin(), samples.end(), std::mt19937(7));
  const HostCost c = SummarizeCost(samples);
  EXPECT_EQ(c.calls, 100u);
  EXPECT_DOUBLE_EQ(c.mean_ns, 50.5);
  EXPECT_EQ(c.p50_ns, 50u);
  EXPECT_EQ(c.p99_ns, 99u);
  EXPECT_EQ(c.max_ns, 100u);

  std::vector<uint64_t> one = {7};
  const HostCost o = SummarizeCost(one);
  EXPECT_EQ(o.p50_ns, 7u);
  EXPECT_EQ(o.p99_ns, 7u);
  std::vector<uint64_t> none;
  EXPECT_EQ(SummarizeCost(none).calls, 0u);
}

// ---------------------------------------------------------------- output

TEST(Report, SvgHasAPanelPerTraceAndALinePairPerSetting) {
  Trace t =
      MustParse("# torch_peak_reserved_bytes 4194304\nalloc 0 1000 0\nadvance 10\nfree 0 0\n");
  t.name = "a&b<c>.trace";
  TraceReport rep{&t, {}};
  for (const ReplaySettings& s : AllReuseCombinations({})) rep.runs.push_back(MustReplay(t, s));
  const std::string svg = FormatSvg({rep});
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_THAT(svg, HasSubstr("a&amp;b&lt;c&gt;.trace"));
  EXPECT_THAT(svg, HasSubstr("PyTorch peak reserved"));
  EXPECT_THAT(svg, HasSubstr(">none, threshold 0</text>"));
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 2 * 8u);
}

TEST(Report, TextAndJsonCompareWithPyTorch) {
  const Trace t = MustParse(
      "# torch_peak_reserved_bytes 4194304\n"
      "# peak_live_bytes 1000\n"
      "alloc 0 1000 0\nfree 0 0\n");
  TraceReport rep{&t, {MustReplay(t)}};
  const std::string text = FormatText({rep});
  EXPECT_THAT(text, HasSubstr("PyTorch: peak reserved 4194304 (0.004 GiB), utilization 0.0002"));
  EXPECT_THAT(text, HasSubstr("0.5000"));  // vs torch: 2 MiB / 4 MiB
  // The text FormatJson prints is the document ReportJson builds.
  const nlohmann::ordered_json json = nlohmann::ordered_json::parse(FormatJson({rep}));
  EXPECT_EQ(json, ReportJson({rep}));
  const nlohmann::ordered_json& trace = json["traces"][0];
  EXPECT_EQ(trace["torch"]["peak_reserved_bytes"], 4194304);
  EXPECT_EQ(trace["torch"]["peak_live_bytes"], 1000);
  EXPECT_DOUBLE_EQ(trace["torch"]["utilization"].get<double>(), 1000.0 / 4194304);
  const nlohmann::ordered_json& run = trace["runs"][0];
  EXPECT_EQ(run["peak_reserved_bytes"], 2097152);
  EXPECT_EQ(run["peak_used_bytes"], 1024);
  EXPECT_EQ(run["vs_torch_peak_reserved"], 0.5);
  EXPECT_EQ(run["growth"], "default");
  EXPECT_EQ(run["pool_growth"], "expandable");
  EXPECT_EQ(run["reuse_counts"]["fresh"], 1);
}

TEST(Report, GrowthSweepWidensTheSettingColumn) {
  const Trace t = MustParse("alloc 0 1000 0\nfree 0 0\n");
  ReplaySettings chunked;
  chunked.growth = PoolGrowth::kChunked;
  chunked.label_growth = true;
  ReplaySettings expandable = chunked;
  expandable.growth = PoolGrowth::kExpandable;
  TraceReport rep{&t, {MustReplay(t, chunked), MustReplay(t, expandable)}};
  const std::string text = FormatText({rep});
  // The longer label is followed by the column gap, not cut or run into the
  // peak reserved figure.
  EXPECT_THAT(text, HasSubstr("  event+opportunistic+internal, threshold 0, growth expandable "));
  EXPECT_THAT(text, HasSubstr("  event+opportunistic+internal, threshold 0, growth chunked    "));
  const nlohmann::ordered_json runs = ReportJson({rep})["traces"][0]["runs"];
  EXPECT_EQ(runs[0]["growth"], "chunked");
  EXPECT_EQ(runs[0]["pool_growth"], "chunked");
  EXPECT_EQ(runs[1]["growth"], "expandable");
  EXPECT_EQ(runs[1]["pool_growth"], "expandable");
}

TEST(Report, JsonEscapesStrings) {
  EXPECT_EQ(DumpJson(nlohmann::ordered_json("a\"b\\c\n\x01"), -1), R"("a\"b\\c\n\u0001")");
  // Bytes that are not UTF-8 (a file name, say) are replaced, not thrown on.
  EXPECT_EQ(DumpJson(nlohmann::ordered_json("a\xff"), -1), "\"a\xef\xbf\xbd\"");
  EXPECT_EQ(XmlEscape("<&>\""), "&lt;&amp;&gt;&quot;");
}

// ------------------------------------------------------ bundled traces

#ifdef STREAMPOOL_TRACES_DIR
class BundledTrace : public ::testing::TestWithParam<const char*> {};

// Each bundled trace parses to what its own header says, and replays on the
// default settings with no failure, no checker report, and a peak used equal
// to the peak of rule sizes (ALIGN_UP(size, 256)) computed here from the ops.
TEST_P(BundledTrace, MatchesItsHeaderAndReplays) {
  absl::StatusOr<Trace> loaded = LoadTrace(absl::StrCat(STREAMPOOL_TRACES_DIR, "/", GetParam()));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Trace& t = *loaded;
  EXPECT_EQ(t.HeaderNumber("allocs"), t.alloc_count);
  EXPECT_EQ(t.HeaderNumber("frees"), t.free_count);
  EXPECT_EQ(t.HeaderNumber("peak_live_bytes"), t.peak_live_bytes);
  EXPECT_EQ(t.HeaderNumber("live_at_end_bytes"), t.live_at_end_bytes);
  EXPECT_EQ(t.HeaderNumber("duration_ns"), t.total_time_ns);
  ASSERT_TRUE(t.HeaderNumber("torch_peak_reserved_bytes").has_value());

  std::vector<uint64_t> rule(t.alloc_count);
  uint64_t used = 0, peak_used = 0;
  for (const TraceOp& op : t.ops) {
    if (std::optional<Allocation> a = AllocationOf(op.op)) {
      rule[a->slot] = (a->size + 255) / 256 * 256;
      used += rule[a->slot];
      peak_used = std::max(peak_used, used);
    } else if (std::optional<uint64_t> slot = FreedSlot(op.op)) {
      used -= rule[*slot];
    }
  }

  const ReplayResult r = MustReplay(t);
  EXPECT_EQ(r.failed_allocs, 0u);
  EXPECT_EQ(r.checker_reports, 0u);
  EXPECT_EQ(r.peak_used, peak_used);
  EXPECT_GE(r.peak_reserved, r.peak_used);
  EXPECT_EQ(r.peak_reserved % kChunk, 0u);
  // One stream, no syncs: every allocation is fresh or the stream's own.
  EXPECT_EQ(r.stats.fresh_allocs + r.stats.reuse_same_stream, t.alloc_count);
  EXPECT_EQ(r.stats.upstream_unmaps, 0u);
  EXPECT_EQ(r.growth, PoolGrowth::kExpandable);

  // Chunks never coalesce across growths, so chunked growth holds at least
  // as much as expandable growth for the same decisions' worth of used bytes.
  ReplaySettings chunked;
  chunked.growth = PoolGrowth::kChunked;
  const ReplayResult c = MustReplay(t, chunked);
  EXPECT_EQ(c.failed_allocs, 0u);
  EXPECT_EQ(c.peak_used, peak_used);
  EXPECT_LE(r.peak_reserved, c.peak_reserved);
}

INSTANTIATE_TEST_SUITE_P(Traces, BundledTrace,
                         ::testing::Values("torch-large-256-training.trace",
                                           "torch-medium-128-training.trace",
                                           "torch-medium-512-inference.trace",
                                           "torch-medium-512-training.trace",
                                           "torch-small-64-compiled-training.trace"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });
#endif  // STREAMPOOL_TRACES_DIR

}  // namespace
}  // namespace streampool::replay
