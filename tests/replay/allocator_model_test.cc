// The other allocators as replay models (src/replay/torch_model.h,
// src/replay/rmm_model.h): their documented sizing, split, stream and
// out-of-memory rules on small traces whose outcome follows from those
// rules, their bookkeeping under random load, and the pytorch model against
// the segment history of the bundled PyTorch traces.
#include "src/replay/allocator_model.h"

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/replay.h"
#include "src/replay/rmm_model.h"
#include "src/replay/torch_model.h"
#include "src/replay/torch_validation.h"
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

ReplayResult MustReplay(const Trace& trace, AllocatorKind kind, absl::string_view conf = "",
                        uint64_t capacity = 80ull << 30) {
  ReplaySettings s;
  s.allocator = kind;
  s.device_capacity = capacity;
  absl::StatusOr<TorchOptions> options = ParseTorchConf(conf);
  EXPECT_TRUE(options.ok()) << options.status();
  if (options.ok()) s.torch = *options;
  absl::StatusOr<ReplayResult> r = Replay(trace, s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayResult{};
}

TEST(TorchSizes, RoundingAndSegmentSizesFollowTheDocumentedRules) {
  const TorchOptions none;
  EXPECT_EQ(TorchRoundSize(1, none), 512u);
  EXPECT_EQ(TorchRoundSize(512, none), 512u);
  EXPECT_EQ(TorchRoundSize(513, none), 1024u);
  EXPECT_EQ(TorchRoundSize(5 * kMiB + 1, none), 5 * kMiB + 512);
  TorchOptions four = *ParseTorchConf("roundup_power2_divisions:4");
  // Between 4 and 8 MiB the steps are 1 MiB.
  EXPECT_EQ(TorchRoundSize(5 * kMiB + 1, four), 6 * kMiB);
  EXPECT_EQ(TorchRoundSize(8 * kMiB, four), 8 * kMiB);
  // Not above 512 B x divisions: 512-B rounding.
  EXPECT_EQ(TorchRoundSize(1200, four), 1536u);

  EXPECT_EQ(TorchAllocationSize(kMiB), 2 * kMiB);
  EXPECT_EQ(TorchAllocationSize(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(TorchAllocationSize(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(TorchAllocationSize(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(TorchAllocationSize(11 * kMiB + 1), 12 * kMiB);
}

TEST(TorchConf, ParsesPytorchSyntaxAndRefusesWhatPytorchRefuses) {
  absl::StatusOr<TorchOptions> o = ParseTorchConf(
      "max_split_size_mb:128, roundup_power2_divisions:[1:4,64:8,>:2],"
      "expandable_segments:True,garbage_collection_threshold:0.6,pinned_use_cuda_host_register:"
      "True");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_split_size, 128 * kMiB);
  EXPECT_EQ(o->roundup_divisions[0], 4u);
  EXPECT_EQ(o->roundup_divisions[5], 0u);  // an entry names its own interval only
  EXPECT_EQ(o->roundup_divisions[6], 8u);  // 64 MiB
  EXPECT_EQ(o->roundup_divisions[7], 2u);
  EXPECT_TRUE(o->expandable_segments);
  EXPECT_DOUBLE_EQ(o->garbage_collection_threshold, 0.6);
  absl::StatusOr<TorchOptions> again = ParseTorchConf(o->ToString());
  ASSERT_TRUE(again.ok()) << again.status() << " " << o->ToString();
  EXPECT_EQ(again->roundup_divisions, o->roundup_divisions);

  for (const char* bad : {"max_split_size_mb:20", "max_split_size_mb:x", "expandable_segments:1",
                          "garbage_collection_threshold:1", "roundup_power2_divisions:3",
                          "roundup_power2_divisions:0", "roundup_power2_divisions:[3:4]",
                          "no_such_option:1", "max_split_size_mb"}) {
    EXPECT_FALSE(ParseTorchConf(bad).ok()) << bad;
  }
  EXPECT_TRUE(ParseTorchConf("").ok());
}

TEST(Allocators, NamesAndRows) {
  absl::StatusOr<std::vector<AllocatorKind>> all = ParseAllocatorList("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 4u);
  EXPECT_FALSE(ParseAllocatorList("pytorch,pytorch").ok());
  EXPECT_FALSE(ParseAllocatorList("tcmalloc").ok());
  std::vector<ReplaySettings> sweep(2);
  sweep[1].release_threshold = UINT64_MAX;
  const std::vector<ReplaySettings> rows = AllocatorRows(*all, sweep);
  ASSERT_EQ(rows.size(), 5u);  // streampool's two, then one each
  EXPECT_EQ(rows[2].allocator, AllocatorKind::kPytorch);
  EXPECT_EQ(rows[3].Label(), "rmm-pool");
  EXPECT_EQ(rows[4].AllocatorLabel(), "cuda");
}

TEST(TorchModel, SmallRequestsShareTwoMibSegments) {
  // 600 KiB three times fits one 2 MiB segment; the fourth needs another.
  const ReplayResult r = MustReplay(MustParse("alloc 0 614400 0\nalloc 1 614400 0\n"
                                              "alloc 2 614400 0\nalloc 3 614400 0\n"),
                                    AllocatorKind::kPytorch);
  EXPECT_EQ(r.peak_reserved, 4 * kMiB);
  EXPECT_EQ(r.counters.segments_made, 2u);
}

TEST(TorchModel, LargeRequestsSplitTwentyMibSegmentsAndKeepSmallRemaindersWhole) {
  // 5 MiB takes the front of a 20 MiB segment; 15 MiB is the rest exactly.
  ReplayResult r =
      MustReplay(MustParse("alloc 0 5242880 0\nalloc 1 15728640 0\n"), AllocatorKind::kPytorch);
  EXPECT_EQ(r.peak_reserved, 20 * kMiB);
  EXPECT_EQ(r.counters.segments_made, 1u);
  // 19.5 MiB: a 20 MiB segment whose 0.5 MiB rest is not split off, so the
  // block holds all 20 MiB.
  r = MustReplay(MustParse("alloc 0 20447232 0\n"), AllocatorKind::kPytorch);
  EXPECT_EQ(r.peak_reserved, 20 * kMiB);
  EXPECT_EQ(r.peak_used, 20 * kMiB);
}

TEST(TorchModel, BlocksServeOnlyTheirOwnStream) {
  const char* trace = "alloc 0 4194304 1\nfree 0 1\nadvance 100000\nalloc 1 4194304 2\n";
  const ReplayResult torch = MustReplay(MustParse(trace), AllocatorKind::kPytorch);
  EXPECT_EQ(torch.counters.segments_made, 2u);
  EXPECT_EQ(torch.peak_reserved, 40 * kMiB);
  // Streampool's pool serves stream 2 from stream 1's completed free.
  const ReplayResult pool = MustReplay(MustParse(trace), AllocatorKind::kStreampool);
  EXPECT_LT(pool.peak_reserved, torch.peak_reserved);
}

TEST(TorchModel, RecordStreamHoldsTheBlockUntilTheOtherStreamIsDone) {
  // 19.5 MiB takes a whole 20 MiB segment. Used on stream 1, whose kernel
  // runs 1 ms: until then the freed block is not cached, and a request for
  // its size takes a new segment; after it, the block serves again.
  const char* trace =
      "alloc 0 20447232 0\nuse 0 1\nkernel 1 1000000\nfree 0 0\nalloc 1 20447232 0\n"
      "advance 2000000\nalloc 2 20447232 0\n";
  const ReplayResult r = MustReplay(MustParse(trace), AllocatorKind::kPytorch);
  EXPECT_EQ(r.counters.segments_made, 2u);
  EXPECT_EQ(r.peak_reserved, 40 * kMiB);
  EXPECT_EQ(r.failed_allocs, 0u);
}

TEST(TorchModel, OutOfMemoryFreesCachedSegmentsAndRetries) {
  // 40 MiB device: the cached 20 MiB segment goes so that 30 MiB fits.
  const char* trace = "alloc 0 5242880 0\nfree 0 0\nalloc 1 31457280 0\n";
  ReplayResult r = MustReplay(MustParse(trace), AllocatorKind::kPytorch, "", 40 * kMiB);
  EXPECT_EQ(r.failed_allocs, 0u);
  EXPECT_EQ(r.counters.oom_retries, 1u);
  EXPECT_EQ(r.counters.segments_freed, 1u);
  EXPECT_EQ(r.stats.reserved_bytes, 30 * kMiB);
  // A live segment cannot go: 30 MiB more does not fit.
  r = MustReplay(MustParse("alloc 0 5242880 0\nalloc 1 31457280 0\n"), AllocatorKind::kPytorch, "",
                 40 * kMiB);
  EXPECT_EQ(r.failed_allocs, 1u);
}

TEST(TorchModel, OversizeBlocksServeOnlyRequestsNearTheirSize) {
  const char* trace = "alloc 0 41943040 0\nfree 0 0\nalloc 1 8388608 0\nalloc 2 41943040 0\n";
  // Unlimited split size: 8 MiB comes from the cached 40 MiB block.
  ReplayResult r = MustReplay(MustParse(trace), AllocatorKind::kPytorch);
  EXPECT_EQ(r.counters.segments_made, 2u);
  EXPECT_EQ(r.peak_reserved, 80 * kMiB);
  // max_split_size_mb:32: the 40 MiB block serves no 8 MiB request, and is
  // there again for the second 40 MiB one.
  r = MustReplay(MustParse(trace), AllocatorKind::kPytorch, "max_split_size_mb:32");
  EXPECT_EQ(r.counters.segments_made, 2u);
  EXPECT_EQ(r.peak_reserved, 60 * kMiB);
}

TEST(TorchModel, ExpandableSegmentsMapPagesAtTheEnd) {
  const char* trace =
      "alloc 0 5242880 0\nalloc 1 5242880 0\nalloc 2 5242880 0\nalloc 3 10485760 0\n";
  const ReplayResult r =
      MustReplay(MustParse(trace), AllocatorKind::kPytorch, "expandable_segments:True");
  // 15 MiB in the first 20 MiB page, then one page more.
  EXPECT_EQ(r.peak_reserved, 40 * kMiB);
  EXPECT_EQ(r.counters.segments_made, 2u);
  EXPECT_EQ(r.counters.segments_high, 1u);
}

TEST(RmmModel, GrowsByThePoolSizeAndNeverMergesUpstreamBlocks) {
  // 1 MiB, then 1 MiB more (the pool's size), then 2 MiB.
  ReplayResult r =
      MustReplay(MustParse("alloc 0 1048576 0\nalloc 1 1048576 0\nalloc 2 2097152 0\n"),
                 AllocatorKind::kRmmPool);
  EXPECT_EQ(r.peak_reserved, 4 * kMiB);
  EXPECT_EQ(r.counters.segments_made, 3u);
  // Two 1 MiB upstream blocks, both free, hold no 2 MiB block.
  r = MustReplay(MustParse("alloc 0 1048576 0\nalloc 1 1048576 0\nfree 0 0\nfree 1 0\n"
                           "alloc 2 2097152 0\n"),
                 AllocatorKind::kRmmPool);
  EXPECT_EQ(r.peak_reserved, 4 * kMiB);
}

TEST(RmmModel, AnotherStreamsBlockServesAfterAWait) {
  const ReplayResult r =
      MustReplay(MustParse("alloc 0 4194304 1\nkernel 1 1000000\nfree 0 1\nalloc 1 4194304 2\n"),
                 AllocatorKind::kRmmPool);
  EXPECT_EQ(r.peak_reserved, 4 * kMiB);
  EXPECT_EQ(r.counters.waits, 1u);
  EXPECT_EQ(r.counters.cross_stream_reuses, 1u);
  // Stream 2 waited for stream 1's kernel.
  EXPECT_GE(r.makespan_ns, 1000000u);
}

// A ModelStreams with no time: every marker is done at once.
class DoneStreams final : public ModelStreams {
 public:
  absl::StatusOr<uint64_t> Record(uint32_t) override { return ++next_; }
  absl::StatusOr<bool> Done(uint64_t marker) override { return marker % 3 != 0 || flip_++ % 2; }
  absl::Status Wait(uint32_t, uint64_t) override { return absl::OkStatus(); }
  absl::Status Synchronize(uint64_t) override { return absl::OkStatus(); }
  void Forget(uint64_t) override {}
  absl::Status SynchronizeDevice() override { return absl::OkStatus(); }

 private:
  uint64_t next_ = 0;
  uint64_t flip_ = 0;
};

void Stress(AllocatorKind kind, const char* conf) {
  DoneStreams streams;
  ModelConfig config;
  config.device_capacity = 512 * kMiB;
  config.torch = *ParseTorchConf(conf);
  absl::StatusOr<std::unique_ptr<AllocatorModel>> m = MakeAllocatorModel(kind, config, &streams);
  ASSERT_TRUE(m.ok()) << m.status();
  AllocatorModel& model = **m;
  std::mt19937_64 rng(42);
  std::map<uint64_t, uint32_t> live;  // address -> stream
  for (int i = 0; i < 4000; ++i) {
    const uint32_t stream = static_cast<uint32_t>(rng() % 3);
    if (live.empty() || rng() % 5 < 3) {
      const uint64_t size = rng() % 2 ? 1 + rng() % (2 * kMiB) : 1 + rng() % (48 * kMiB);
      absl::StatusOr<uint64_t> a = model.Allocate(size, stream, i + 1);
      if (a.ok()) {
        ASSERT_FALSE(live.contains(*a)) << "address handed out twice";
        live[*a] = stream;
      } else {
        ASSERT_TRUE(absl::IsResourceExhausted(a.status())) << a.status();
      }
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      if (rng() % 4 == 0) {
        ASSERT_TRUE(model.RecordUse(it->first, (stream + 1) % 3).ok());
      }
      ASSERT_TRUE(model.Free(it->first, rng() % 4 ? it->second : stream, i + 1).ok());
      live.erase(it);
    }
    ASSERT_LE(model.reserved(), config.device_capacity);
    if (i % 50 == 0) {
      ASSERT_TRUE(model.CheckInvariants().ok()) << model.CheckInvariants();
    }
  }
  EXPECT_TRUE(model.CheckInvariants().ok()) << model.CheckInvariants();
  EXPECT_FALSE(model.Free(12345, 0, 1).ok());
}

TEST(ModelBookkeeping, HoldsUnderRandomLoad) {
  Stress(AllocatorKind::kPytorch, "");
  Stress(AllocatorKind::kPytorch, "max_split_size_mb:24,garbage_collection_threshold:0.5");
  Stress(AllocatorKind::kPytorch, "expandable_segments:True");
  Stress(AllocatorKind::kRmmPool, "");
}

TEST(TraceSegments, CommentsCarryPytorchsSegmentsAndUseIsAnOp) {
  const Trace t = MustParse(
      "# torch_segment 1048576 2097152 0 small\n"
      "# torch_segment 8388608 20971520 0 large\n"
      "alloc 0 1000 0  # torch_block 1048576 1024\n"
      "# segment_alloc 536870912 31457280 0\n"
      "alloc 1 30000000 0\n"
      "use 1 3\n"
      "free 1 0\n");
  ASSERT_EQ(t.initial_segments.size(), 2u);
  EXPECT_TRUE(t.initial_segments[0].small);
  EXPECT_FALSE(t.initial_segments[1].small);
  ASSERT_EQ(t.initial_blocks.size(), 1u);
  EXPECT_EQ(t.initial_blocks[0].address, 1048576u);
  ASSERT_EQ(t.segment_history.size(), 1u);
  EXPECT_EQ(t.segment_history[0].line, 5u);  // the alloc after it
  EXPECT_EQ(t.segment_history[0].size, 31457280u);
  EXPECT_TRUE(std::holds_alternative<ops::Use>(t.ops[2].op));

  EXPECT_FALSE(ParseTrace("alloc 0 1 0\n# torch_segment 0 2097152 0 small\n", "t").ok());
  EXPECT_FALSE(ParseTrace("# torch_segment 0 2097152 0 medium\n", "t").ok());
  EXPECT_FALSE(ParseTrace("# segment_alloc 0 2097152\n", "t").ok());
  EXPECT_FALSE(ParseTrace("alloc 0 4096 0  # torch_block 0 512\n", "t").ok());
  EXPECT_FALSE(ParseTrace("use 0 1\n", "t").ok());
}

// PyTorch's history on a trace whose segments are given: a small segment
// with 1 MiB live, then a 1.5 MiB request (a 20 MiB segment), 512 KiB (the
// small segment's rest), 12 MiB (the large segment's rest), 30 MiB (a
// segment of its own).
constexpr char kSeeded[] =
    "# pretrace 1\n"
    "# torch_segment 1048576 2097152 0 small\n"
    "alloc 0 1048576 0  # torch_block 1048576 1048576\n"
    "# segment_alloc 536870912 20971520 0\n"
    "alloc 1 1572864 0\n"
    "alloc 2 524288 0\n"
    "alloc 3 12582912 0\n"
    "# segment_alloc 1073741824 31457280 0\n"
    "alloc 4 31457280 0\n";

TEST(TorchValidation, ASeededTraceReproducesItsHistory) {
  absl::StatusOr<TorchValidation> v = ValidateTorch(MustParse(kSeeded), ReplaySettings{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->seeded);
  EXPECT_EQ(v->torch_segment_allocs, 2u);
  EXPECT_EQ(v->model_segment_allocs, 2u);
  EXPECT_EQ(v->matched, 2u);
  EXPECT_EQ(v->first_divergence, "");
  EXPECT_EQ(v->model_start_reserved, 2 * kMiB);
  EXPECT_EQ(v->model_peak_reserved, 52 * kMiB);
}

TEST(TorchValidation, ADivergenceNamesTheEventAndBothStates) {
  std::string text = kSeeded;
  // Say PyTorch took 24 MiB for the 30 MiB request: the model cannot agree.
  text.replace(text.find("1073741824 31457280"), 19, "1073741824 25165824");
  absl::StatusOr<TorchValidation> v = ValidateTorch(MustParse(text), ReplaySettings{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->matched, 1u);
  EXPECT_THAT(v->first_divergence, HasSubstr("t:9: PyTorch segment_alloc of 25165824 bytes"));
  EXPECT_THAT(v->first_divergence, HasSubstr("the model segment_alloc of 31457280 bytes"));
  EXPECT_THAT(v->first_divergence, HasSubstr("held 23068672 bytes"));
  EXPECT_THAT(FormatValidationText({*v}), HasSubstr("first divergence"));
}

TEST(TorchValidation, TheWarmStartRunsTheTraceTwice) {
  const Trace t = MustParse(
      "# pretrace 2\nalloc 0 100 0\nalloc 1 200 0\n"
      "alloc 2 300 0\nfree 0 0\nalloc 3 400 0\nfree 3 0\n");
  uint32_t offset = 0;
  absl::StatusOr<Trace> two = TwoPassTrace(t, &offset);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(offset, 8u);  // the header is line 1
  // Pass 1 (6 ops), slot 2 freed and slot 0 allocated again between, then
  // pass 2 without the pre-trace allocations (4 ops).
  EXPECT_EQ(two->ops.size(), 6u + 2u + 4u);
  EXPECT_EQ(two->alloc_count, 4u + 1u + 2u);
  ReplaySettings s;
  s.allocator = AllocatorKind::kPytorch;
  absl::StatusOr<ReplayResult> r = Replay(*two, s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failed_allocs, 0u);
}

#ifdef STREAMPOOL_TRACES_DIR
// The pinned validation: on every bundled PyTorch trace the model's peak
// reserved is within 2 % of PyTorch's, and its segment allocations inside
// the trace agree in number, except where the first divergence is named.
TEST(TorchValidation, BundledTraces) {
  struct Expect {
    const char* file;
    uint64_t torch_segment_allocs;
    uint64_t model_segment_allocs;
  };
  for (const Expect& e : {Expect{"torch-large-256-training.trace", 0, 0},
                          Expect{"torch-medium-128-training.trace", 0, 0},
                          Expect{"torch-medium-512-inference.trace", 0, 0},
                          Expect{"torch-medium-512-training.trace", 1, 0},
                          Expect{"torch-small-64-compiled-training.trace", 0, 0}}) {
    SCOPED_TRACE(e.file);
    absl::StatusOr<Trace> t = LoadTrace(absl::StrCat(STREAMPOOL_TRACES_DIR, "/", e.file));
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<TorchValidation> v = ValidateTorch(*t, ReplaySettings{});
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_TRUE(v->PeakError().has_value());
    EXPECT_LE(std::abs(*v->PeakError()), 0.02) << FormatValidationText({*v});
    EXPECT_EQ(v->torch_segment_allocs, e.torch_segment_allocs);
    EXPECT_EQ(v->model_segment_allocs, e.model_segment_allocs);
    EXPECT_EQ(v->first_divergence.empty(), e.torch_segment_allocs == e.model_segment_allocs);
  }
}
#endif

}  // namespace
}  // namespace streampool::replay
