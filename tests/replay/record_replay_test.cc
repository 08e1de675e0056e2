// Recording a live runtime (Runtime::StartRecording) and replaying the file:
// at the recorded settings the replay must take every decision the live run
// took (rule, pool, chunk, offset, failure), whatever the program did with
// streams, events, pools, host time and the checker; the C API's recording
// entry points validate what they are given.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool::replay {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A file under the test's temporary directory, removed at the end.
class TempFile {
 public:
  explicit TempFile(const std::string& name) {
    const char* dir = std::getenv("TEST_TMPDIR");
    path_ = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".", ::getpid(), ".trace");
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  std::string Read() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
};

// What the live run decided, allocation by allocation, for the comparison
// with the replay's own statistics.
struct LiveRun {
  std::vector<ReuseRule> rules;
  uint64_t failed = 0;
};

// A seeded program over several streams, events, two pools (the default one
// and one of its own, with a threshold), host time, synchronizes and
// queries, copies, a stream destroyed and another made: what the recorder
// must capture for the replay to decide alike.
LiveRun RunProgram(Runtime& rt, uint32_t seed, bool with_second_pool) {
  std::mt19937 rng(seed);
  LiveRun live;
  std::vector<StreamId> streams;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<StreamId> s = rt.CreateStream(0, /*non_blocking=*/i % 2 == 1);
    EXPECT_TRUE(s.ok());
    streams.push_back(*s);
  }
  streams.push_back(*rt.LegacyStream(0));
  std::vector<EventId> events;
  for (int i = 0; i < 3; ++i) events.push_back(*rt.CreateEvent());
  PoolId pool = *rt.DefaultPool(0);
  std::optional<PoolId> second;
  if (with_second_pool) {
    PoolProps props;
    props.release_threshold = 8 * kMiB;
    props.reuse_allow_internal_dependencies = false;
    second = *rt.CreatePool(props);
  }
  struct Live {
    void* ptr;
    StreamId stream;
  };
  std::vector<Live> live_ptrs;
  for (int step = 0; step < 600; ++step) {
    const StreamId s = streams[rng() % streams.size()];
    switch (rng() % 12) {
      case 0:
      case 1:
      case 2: {
        const uint64_t size = (uint64_t{1} << (8 + rng() % 15)) + rng() % 4096;
        const PoolId from = second && rng() % 3 == 0 ? *second : pool;
        absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(size, from, s);
        if (a.ok()) {
          live.rules.push_back(a->rule);
          if (a->ptr != nullptr) live_ptrs.push_back({a->ptr, s});
        } else {
          EXPECT_TRUE(absl::IsResourceExhausted(a.status())) << a.status();
          ++live.failed;
        }
        break;
      }
      case 3:
      case 4:
        if (!live_ptrs.empty()) {
          const size_t i = rng() % live_ptrs.size();
          // Freed on the stream that used it, after the stream's work.
          EXPECT_TRUE(rt.FreeAsync(live_ptrs[i].ptr, live_ptrs[i].stream).ok());
          live_ptrs[i] = live_ptrs.back();
          live_ptrs.pop_back();
        }
        break;
      case 5:
        EXPECT_TRUE(rt.LaunchKernel(s, 1000 + rng() % 50000, {}).ok());
        break;
      case 6: {
        const EventId e = events[rng() % events.size()];
        EXPECT_TRUE(rt.RecordEvent(e, s).ok());
        EXPECT_TRUE(rt.StreamWaitEvent(streams[rng() % streams.size()], e).ok());
        break;
      }
      case 7:
        EXPECT_TRUE(rt.HostAdvance(rng() % 20000).ok());
        break;
      case 8: {
        absl::Status q = rt.StreamQuery(s);
        EXPECT_TRUE(q.ok() || absl::IsUnavailable(q));
        break;
      }
      case 9:
        if (rng() % 4 == 0) {
          EXPECT_TRUE(rt.StreamSynchronize(s).ok());
        }
        break;
      case 10:
        if (!live_ptrs.empty()) {
          EXPECT_TRUE(rt.MemsetAsync(live_ptrs.back().ptr, 0, 256, live_ptrs.back().stream).ok());
        }
        break;
      case 11:
        if (rng() % 8 == 0) {
          // A stream goes and another comes (its frees stay valid).
          const size_t i = rng() % 4;
          for (Live& l : live_ptrs) {
            if (l.stream.value == streams[i].value) l.stream = streams[4];
          }
          EXPECT_TRUE(rt.StreamWaitEvent(streams[4], events[0]).ok());
          EXPECT_TRUE(rt.DestroyStream(streams[i]).ok());
          streams[i] = *rt.CreateStream(0);
        } else if (second && rng() % 2 == 0) {
          EXPECT_TRUE(
              rt.SetPoolAttribute(*second, PoolAttr::kReleaseThreshold, rng() % 3 * kMiB).ok());
        } else {
          EXPECT_TRUE(rt.TrimTo(pool, rng() % 4 * kMiB).ok());
        }
        break;
    }
  }
  EXPECT_TRUE(rt.DeviceSynchronize(0).ok());
  return live;
}

ReplayResult ReplayRecorded(const std::string& path) {
  absl::StatusOr<Trace> trace = LoadTrace(path);
  EXPECT_TRUE(trace.ok()) << trace.status();
  if (!trace.ok()) return {};
  ReplaySettings settings;
  settings.use_recorded = true;
  settings.check_stream_order = false;
  absl::StatusOr<ReplayResult> r = Replay(*trace, settings);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayResult{};
}

struct Case {
  uint32_t seed;
  bool checker;       // the live run's: the fast path is off either way
  uint64_t capacity;  // small enough for some allocations to fail
  uint64_t api_call_ns;
  bool second_pool;
};

class RecordReplayTest : public ::testing::TestWithParam<Case> {};

TEST_P(RecordReplayTest, ReplayAtRecordedSettingsTakesEveryDecisionAgain) {
  const Case c = GetParam();
  TempFile file(absl::StrCat("record_replay_", c.seed));
  RuntimeConfig config;
  config.device_capacity = c.capacity;
  config.api_call_ns = c.api_call_ns;
  config.backing = Backing::kAddressOnly;
  std::unique_ptr<Runtime> rt = *Runtime::Create(config);
  rt->EnableChecker(c.checker);
  ASSERT_TRUE(rt->StartRecording(file.path()).ok());
  const LiveRun live = RunProgram(*rt, c.seed, c.second_pool);
  std::vector<PoolStats> live_stats;
  ASSERT_TRUE(rt->StopRecording().ok());

  const ReplayResult r = ReplayRecorded(file.path());
  EXPECT_EQ(r.decisions_checked, live.rules.size() + live.failed);
  EXPECT_EQ(r.decisions_diverged, 0u) << r.first_divergence;
  EXPECT_EQ(r.failed_allocs, live.failed);
  // The rules the live run reported, counted, are the replay's.
  uint64_t fresh = 0, same = 0, event = 0, opportunistic = 0, after_sync = 0, internal = 0;
  for (ReuseRule rule : live.rules) {
    switch (rule) {
      case ReuseRule::kFresh:
        ++fresh;
        break;
      case ReuseRule::kSameStream:
        ++same;
        break;
      case ReuseRule::kEventDependency:
        ++event;
        break;
      case ReuseRule::kOpportunistic:
        ++opportunistic;
        break;
      case ReuseRule::kAfterSync:
        ++after_sync;
        break;
      case ReuseRule::kInternalDependency:
        ++internal;
        break;
    }
  }
  EXPECT_EQ(r.stats.reuse_same_stream, same);
  EXPECT_EQ(r.stats.reuse_event_dependency, event);
  EXPECT_EQ(r.stats.reuse_opportunistic, opportunistic);
  EXPECT_EQ(r.stats.reuse_after_sync, after_sync);
  EXPECT_EQ(r.stats.reuse_internal_dependency, internal);
  // The program is one that exercises the decisions: many allocations, most
  // of them reuses, by more than one rule.
  EXPECT_GT(live.rules.size(), 100u);
  EXPECT_GT(same + event + opportunistic + after_sync + internal, live.rules.size() / 2);
  EXPECT_GE((same > 0) + (event > 0) + (opportunistic > 0) + (after_sync > 0) + (internal > 0), 3);
  std::printf(
      "seed %u: %zu allocations (%lu failed): fresh %lu, same_stream %lu, event %lu, "
      "opportunistic %lu, after_sync %lu, internal %lu\n",
      c.seed, live.rules.size(), static_cast<unsigned long>(live.failed),
      static_cast<unsigned long>(fresh), static_cast<unsigned long>(same),
      static_cast<unsigned long>(event), static_cast<unsigned long>(opportunistic),
      static_cast<unsigned long>(after_sync), static_cast<unsigned long>(internal));
}

INSTANTIATE_TEST_SUITE_P(Programs, RecordReplayTest,
                         ::testing::Values(Case{1, false, uint64_t{1} << 30, 0, false},
                                           Case{2, true, uint64_t{1} << 30, 0, true},
                                           Case{3, false, 24 * kMiB, 0, true},  // allocations fail
                                           Case{4, false, uint64_t{1} << 30, 700, true},
                                           Case{5, true, 16 * kMiB, 300, false},
                                           Case{6, false, 64 * kMiB, 0, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat("seed", info.param.seed);
                         });

TEST(RecordReplay, ADivergenceIsFoundAndNamed) {
  // A recording whose decision the replay cannot take: the first allocation
  // of a pool is fresh memory at offset 0, not a reuse.
  const std::string text =
      "# streampool trace v1\n"
      "pool 0 0 type=device reuse=none threshold=0 growth=expandable front_cache=1 default=1\n"
      "alloc 0 4096 0 0  # fresh 1+0\n"
      "alloc 1 4096 0 0  # same_stream 1+4096\n";
  absl::StatusOr<Trace> trace = ParseTrace(text, "t");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ReplaySettings settings;
  settings.use_recorded = true;
  absl::StatusOr<ReplayResult> r = Replay(*trace, settings);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->decisions_checked, 2u);
  EXPECT_EQ(r->decisions_diverged, 1u);
  EXPECT_THAT(r->first_divergence, HasSubstr("t:4: alloc of 4096 bytes: recorded same_stream"));
  EXPECT_THAT(r->first_divergence, HasSubstr("replayed fresh"));
}

TEST(RecordReplay, RecordedSettingsOrTheSweepsOwn) {
  // With use_recorded the pool line's settings hold; without, the sweep's.
  const std::string text =
      "pool 0 0 type=device reuse=none threshold=max growth=chunked front_cache=1 default=0\n"
      "stream 1 0 0\n"
      "alloc 0 2097152 1 0\n"
      "free 0 1\n"
      "record 0 1\n"
      "wait 2 0\n"
      "alloc 1 2097152 2 0\n";
  absl::StatusOr<Trace> trace = ParseTrace(text, "t");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ReplaySettings recorded;
  recorded.use_recorded = true;
  absl::StatusOr<ReplayResult> a = Replay(*trace, recorded);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->stats.reuse_event_dependency, 0u);  // reuse=none
  EXPECT_EQ(a->growth, PoolGrowth::kChunked);
  ReplaySettings swept;  // all reuse on, expandable by default
  absl::StatusOr<ReplayResult> b = Replay(*trace, swept);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->stats.reuse_event_dependency, 1u);
}

TEST(RecordReplay, TraceOpsARecordingAddsAreParsedAndChecked) {
  absl::StatusOr<Trace> t = ParseTrace(
      "pool 3 0 type=pinned_host reuse=event+internal threshold=4096 growth=chunked\n"
      "stream 5 0 1\nevent 2 2\nquery 5\nequery 2\ncopy 5 4096\nhost 5\n"
      "attr 3 threshold max\nattr 3 reuse_event 0\ntrim 3 0\nmalloc 7 100 0\nrelease 7\n"
      "dsync 0\nedestroy 2\nsdestroy 5\npdestroy 3\n",
      "t");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->pools.size(), 1u);
  EXPECT_EQ(t->pools[0].type, AllocationType::kPinnedHost);
  EXPECT_TRUE(t->pools[0].reuse_event);
  EXPECT_FALSE(t->pools[0].reuse_opportunistic);
  EXPECT_EQ(t->pools[0].release_threshold, 4096u);
  EXPECT_EQ(t->pools[0].growth, PoolGrowth::kChunked);
  ReplaySettings settings;
  settings.use_recorded = true;
  absl::StatusOr<ReplayResult> r = Replay(*t, settings);
  EXPECT_TRUE(r.ok()) << r.status();

  auto error = [](const std::string& text) {
    absl::StatusOr<Trace> bad = ParseTrace(text, "t");
    return bad.ok() ? std::string("parsed") : std::string(bad.status().message());
  };
  EXPECT_THAT(error("alloc 0 16 0 9\n"), HasSubstr("t:1: pool 9 is not defined"));
  EXPECT_THAT(error("pool 1 0\npool 1 0\n"), HasSubstr("already defined (line 1)"));
  EXPECT_THAT(error("pool 1 0 reuse=sometimes\n"), HasSubstr("reuse 'sometimes'"));
  EXPECT_THAT(error("pool 1 0 type=gpu\n"), HasSubstr("type"));
  EXPECT_THAT(error("pool 1 0 front_cache=2\n"), HasSubstr("expected 0 or 1"));
  EXPECT_THAT(error("stream 1 0 7\n"), HasSubstr("stream flags 7"));
  EXPECT_THAT(error("stream 0 0 0\n"), HasSubstr("stream 0 is device 0's legacy stream"));
  EXPECT_THAT(error("stream 1 99 0\n"), HasSubstr("device 99 is out of range"));
  EXPECT_THAT(error("pool 1 0\nattr 1 color 1\n"), HasSubstr("attr 'color'"));
  EXPECT_THAT(error("dsync 0 1\n"), HasSubstr("dsync takes 0 or 1 field"));
  EXPECT_THAT(error("pool 1 0\npdestroy 1\ntrim 1 0\n"), HasSubstr("t:3: pool 1 is not defined"));
}

TEST(RecordReplay, AttributeLinesCarryBytesOrSwitches) {
  // The settings a replay reproduces are written with their values: bytes
  // for the threshold and the soft limit, 0 or 1 for a switch; the parser
  // reads each back. Watermark resets decide nothing and are not written.
  TempFile file("record_attrs");
  std::unique_ptr<Runtime> rt = *Runtime::Create({});
  const PoolId pool = *rt->CreatePool(PoolProps{});
  ASSERT_TRUE(rt->StartRecording(file.path()).ok());
  ASSERT_TRUE(rt->SetPoolAttribute(pool, PoolAttr::kSoftReservedLimit, 3 * kMiB).ok());
  ASSERT_TRUE(rt->SetPoolAttribute(pool, PoolAttr::kReleaseThreshold, UINT64_MAX).ok());
  ASSERT_TRUE(rt->SetPoolAttribute(pool, PoolAttr::kWaitBeforeGrowth, 0).ok());
  ASSERT_TRUE(rt->SetPoolAttribute(pool, PoolAttr::kReservedMemHigh, 0).ok());
  ASSERT_TRUE(rt->StopRecording().ok());
  const std::string text = file.Read();
  EXPECT_THAT(text, HasSubstr(absl::StrCat(" soft_limit ", 3 * kMiB, "\n")));
  EXPECT_THAT(text, HasSubstr(" threshold max\n"));
  EXPECT_THAT(text, HasSubstr(" wait_before_growth 0\n"));
  EXPECT_EQ(text.find("reserved_mem_high"), std::string::npos);
  absl::StatusOr<Trace> t = ParseTrace(text, "t");
  ASSERT_TRUE(t.ok()) << t.status();
}

TEST(RecordReplay, ThreadsExecutorRecordingReplaysInVirtualTime) {
  TempFile file("record_threads");
  RuntimeConfig config;
  config.executor = ExecutorKind::kThreads;
  config.backing = Backing::kAddressOnly;
  std::unique_ptr<Runtime> rt = *Runtime::Create(config);
  ASSERT_TRUE(rt->StartRecording(file.path()).ok());
  const LiveRun live = RunProgram(*rt, 7, true);
  ASSERT_TRUE(rt->StopRecording().ok());
  const std::string text = file.Read();
  EXPECT_THAT(text, HasSubstr("# executor real_time"));
  EXPECT_THAT(text, HasSubstr("\nadvance "));  // real host time between calls
  const ReplayResult r = ReplayRecorded(file.path());
  // Every allocation replays; which rule each gets depends on how far real
  // time had run, which virtual time reproduces only approximately.
  EXPECT_EQ(r.decisions_checked, live.rules.size() + live.failed);
  EXPECT_EQ(r.failed_allocs, 0u);
}

TEST(RecordReplay, SeveralHostThreadsRecordWhileTheFastPathRuns) {
  // The shipped configuration: checker off, so allocations on a thread's own
  // stream take the fast path, which writes under the stream's lock. Each
  // thread has its own stream, so their calls commute and the file replays
  // with every decision as it was; a stop while threads run is safe.
  TempFile file("record_threads_fast");
  RuntimeConfig config;
  config.backing = Backing::kAddressOnly;
  std::unique_ptr<Runtime> rt = *Runtime::Create(config);
  rt->EnableChecker(false);
  ASSERT_TRUE(rt->StartRecording(file.path()).ok());
  constexpr int kThreads = 4;
  constexpr int kPairs = 3000;
  std::vector<StreamId> streams;
  for (int i = 0; i < kThreads; ++i) streams.push_back(*rt->CreateStream(0));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kPairs; ++n) {
        absl::StatusOr<AllocInfo> a = rt->MallocAsync(64 + 64 * (n % 4), streams[i]);
        ASSERT_TRUE(a.ok());
        ASSERT_TRUE(rt->FreeAsync(a->ptr, streams[i]).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(rt->StopRecording().ok());
  const ReplayResult r = ReplayRecorded(file.path());
  EXPECT_EQ(r.decisions_checked, uint64_t{kThreads} * kPairs);
  EXPECT_EQ(r.decisions_diverged, 0u) << r.first_divergence;
}

TEST(RecordReplay, StoppingWhileOtherThreadsAllocateIsSafe) {
  TempFile file("record_stop_race");
  std::unique_ptr<Runtime> rt = *Runtime::Create({});
  rt->EnableChecker(false);
  StreamId s = *rt->CreateStream(0);
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    while (!stop.load()) {
      absl::StatusOr<AllocInfo> a = rt->MallocAsync(256, s);
      ASSERT_TRUE(a.ok());
      ASSERT_TRUE(rt->FreeAsync(a->ptr, s).ok());
    }
  });
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(rt->StartRecording(file.path()).ok());
    ASSERT_TRUE(rt->StopRecording().ok());
  }
  stop = true;
  worker.join();
  // The last file is a trace (perhaps with a free whose allocation came
  // before it began, which it leaves out).
  absl::StatusOr<Trace> t = LoadTrace(file.path());
  EXPECT_TRUE(t.ok()) << t.status();
}

TEST(RecordReplay, ALongRunWritesInProportionToItsCalls) {
  // Streams, events and allocations come and go: ids are reused, so the file
  // grows by lines, and no id grows with history.
  TempFile file("record_long");
  std::unique_ptr<Runtime> rt = *Runtime::Create({});
  ASSERT_TRUE(rt->StartRecording(file.path()).ok());
  for (int i = 0; i < 2000; ++i) {
    StreamId s = *rt->CreateStream(0);
    EventId e = *rt->CreateEvent();
    void* p = rt->MallocAsync(4096, s)->ptr;
    ASSERT_TRUE(rt->RecordEvent(e, s).ok());
    ASSERT_TRUE(rt->FreeAsync(p, s).ok());
    ASSERT_TRUE(rt->DestroyEvent(e).ok());
    ASSERT_TRUE(rt->DestroyStream(s).ok());
  }
  ASSERT_TRUE(rt->StopRecording().ok());
  const std::string text = file.Read();
  EXPECT_THAT(text, HasSubstr("stream 1 0 0\n"));
  EXPECT_EQ(text.find("stream 2 "), std::string::npos);  // id 1 serves every stream
  EXPECT_EQ(text.find("alloc 1 "), std::string::npos);   // id 0 serves every allocation
  EXPECT_LT(text.size(), 2000u * 7 * 40);
  const ReplayResult r = ReplayRecorded(file.path());
  EXPECT_EQ(r.decisions_checked, 2000u);
  EXPECT_EQ(r.decisions_diverged, 0u) << r.first_divergence;
}

TEST(RecordReplay, CApiValidatesAndReportsState) {
  spRuntime_t rt = nullptr;
  ASSERT_EQ(spRuntimeCreate(&rt, nullptr), spSuccess);
  TempFile file("record_capi");
  EXPECT_EQ(spRuntimeStartRecording(rt, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spRuntimeStartRecording(rt, ""), spErrorInvalidValue);
  EXPECT_EQ(spRuntimeStartRecording(nullptr, file.path().c_str()), spErrorInvalidValue);
  EXPECT_EQ(spRuntimeStopRecording(rt), spErrorInvalidValue);  // not recording
  EXPECT_EQ(spRuntimeStartRecording(rt, "/nonexistent-dir/x.trace"), spErrorInvalidValue);
  ASSERT_EQ(spRuntimeStartRecording(rt, file.path().c_str()), spSuccess);
  EXPECT_EQ(spRuntimeStartRecording(rt, file.path().c_str()), spErrorInvalidValue);  // already
  spStream_t s = nullptr;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, 0), spSuccess);
  void* p = nullptr;
  ASSERT_EQ(spMallocAsync(&p, 1000, s), spSuccess);
  ASSERT_EQ(spFreeAsync(p, s), spSuccess);
  // Destroying the runtime completes the file.
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
  const std::string text = file.Read();
  EXPECT_THAT(text, HasSubstr("alloc 0 1000 1 0  # fresh"));
  EXPECT_THAT(text, HasSubstr("free 0 1\n"));
  EXPECT_EQ(spRuntimeStopRecording(rt), spErrorInvalidResourceHandle);
}

}  // namespace
}  // namespace streampool::replay
