// The runtime part of the C API, exercised only through streampool.h: virtual
// time, events, the legacy stream, stream destruction, host functions, async
// copies and fills, per-call cost, configuration defaults and error names.
//
// Every expected time is derived from docs/design.md "Simulator": an op starts at
// max(host time at enqueue, end of the previous op of its stream, completion
// of what it waits for) and ends `duration` later; synchronize calls move the
// host exactly to the completion they wait for.
#include <cstdint>
#include <cstring>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr
#define SP_EXPECT_OK(expr) EXPECT_EQ((expr), spSuccess) << #expr

class RuntimeCapiTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(nullptr); }
  void TearDown() override {
    if (rt_ != nullptr) {
      EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess);
    }
  }

  // (Re)starts the runtime under test with `cfg` (NULL = defaults).
  void Start(const spRuntimeConfig* cfg) {
    if (rt_ != nullptr) {
      ASSERT_EQ(spRuntimeDestroy(rt_), spSuccess);
    }
    rt_ = nullptr;
    ASSERT_EQ(spRuntimeCreate(&rt_, cfg), spSuccess);
  }

  spStream_t NewStream(unsigned flags = spStreamNonBlocking, int device = 0) {
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamCreate(&s, rt_, device, flags), spSuccess);
    return s;
  }
  spEvent_t NewEvent() {
    spEvent_t e = nullptr;
    EXPECT_EQ(spEventCreate(&e, rt_), spSuccess);
    return e;
  }
  spStream_t Legacy(int device = 0) {
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamGetLegacy(&s, rt_, device), spSuccess);
    return s;
  }
  uint64_t Now() {
    uint64_t ns = ~uint64_t{0};
    EXPECT_EQ(spHostNow(rt_, &ns), spSuccess);
    return ns;
  }
  spError_t Kernel(spStream_t s, uint64_t ns) { return spLaunchKernel(s, ns, nullptr, 0); }

  spRuntime_t rt_ = nullptr;
};

// ------------------------------------------------------------ configuration

TEST(RuntimeConfigTest, InitFillsTheDocumentedDefaults) {
  spRuntimeConfig cfg;
  std::memset(&cfg, 0xCD, sizeof(cfg));
  spRuntimeConfigInit(&cfg);
  EXPECT_EQ(cfg.deviceCount, 1);
  EXPECT_EQ(cfg.deviceCapacity, uint64_t{1} << 30);
  EXPECT_EQ(cfg.backing, spBackingHost);
  EXPECT_EQ(cfg.apiCallNs, 0u);
  EXPECT_EQ(cfg.copyBytesPerUs, 1000000u);
  spRuntimeConfigInit(nullptr);  // documented as harmless: nothing to fill
}

TEST(RuntimeConfigTest, DefaultConfigAndNullConfigAreTheSame) {
  // One device (device 1 does not exist) and a host clock at 0.
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  for (const spRuntimeConfig* c :
       {static_cast<const spRuntimeConfig*>(nullptr), static_cast<const spRuntimeConfig*>(&cfg)}) {
    spRuntime_t rt = nullptr;
    ASSERT_EQ(spRuntimeCreate(&rt, c), spSuccess);
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamGetLegacy(&s, rt, 0), spSuccess);
    EXPECT_EQ(spStreamGetLegacy(&s, rt, 1), spErrorInvalidDevice);
    uint64_t now = 1;
    EXPECT_EQ(spHostNow(rt, &now), spSuccess);
    EXPECT_EQ(now, 0u);
    EXPECT_EQ(spRuntimeDestroy(rt), spSuccess);
  }
}

// ------------------------------------------------------------ error names

TEST(ErrorNamesTest, EveryCodeHasItsNameAndADistinctDescription) {
  const struct {
    spError_t code;
    const char* name;
  } kCodes[] = {
      {spSuccess, "spSuccess"},
      {spErrorInvalidValue, "spErrorInvalidValue"},
      {spErrorMemoryAllocation, "spErrorMemoryAllocation"},
      {spErrorInsufficientDriver, "spErrorInsufficientDriver"},
      {spErrorNoDevice, "spErrorNoDevice"},
      {spErrorInvalidDevice, "spErrorInvalidDevice"},
      {spErrorPeerAccessUnsupported, "spErrorPeerAccessUnsupported"},
      {spErrorInvalidResourceHandle, "spErrorInvalidResourceHandle"},
      {spErrorNotReady, "spErrorNotReady"},
      {spErrorNotSupported, "spErrorNotSupported"},
  };
  std::set<std::string> descriptions;
  for (const auto& c : kCodes) {
    SCOPED_TRACE(c.name);
    ASSERT_NE(spGetErrorName(c.code), nullptr);
    EXPECT_STREQ(spGetErrorName(c.code), c.name);
    const char* text = spGetErrorString(c.code);
    ASSERT_NE(text, nullptr);
    EXPECT_GT(std::strlen(text), 0u);
    descriptions.insert(text);
  }
  EXPECT_EQ(descriptions.size(), std::size(kCodes));

  // A value that is no spError: a name that says so, and a description that
  // is none of the real ones.
  for (int bogus : {3, 102, 999, -1, 0x7fffffff}) {
    SCOPED_TRACE(bogus);
    const auto e = static_cast<spError_t>(bogus);
    EXPECT_STREQ(spGetErrorName(e), "spErrorUnknown");
    ASSERT_NE(spGetErrorString(e), nullptr);
    EXPECT_GT(std::strlen(spGetErrorString(e)), 0u);
    EXPECT_EQ(descriptions.count(spGetErrorString(e)), 0u);
  }
}

// ------------------------------------------------------------ virtual time

TEST_F(RuntimeCapiTest, SynchronizeAdvancesHostTimeExactlyToCompletion) {
  spStream_t s = NewStream();
  EXPECT_EQ(Now(), 0u);
  SP_ASSERT_OK(Kernel(s, 100));
  EXPECT_EQ(Now(), 0u);  // launching is asynchronous
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 100u);
  // Nothing left to wait for: time does not move.
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 100u);
}

TEST_F(RuntimeCapiTest, KernelsQueueBehindEachOtherAndBehindHostTime) {
  spStream_t s = NewStream();
  SP_ASSERT_OK(Kernel(s, 100));  // 0..100
  SP_ASSERT_OK(Kernel(s, 30));   // 100..130
  SP_ASSERT_OK(spHostAdvance(rt_, 500));
  EXPECT_EQ(Now(), 500u);
  SP_ASSERT_OK(Kernel(s, 20));  // the stream is idle: 500..520
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 520u);
}

TEST_F(RuntimeCapiTest, SynchronizeAfterTheHostPassedCompletionDoesNotGoBack) {
  spStream_t s = NewStream();
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spHostAdvance(rt_, 300));
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 300u);
}

TEST_F(RuntimeCapiTest, StreamQueryIsNotReadyUntilHostTimeReachesTheEnd) {
  spStream_t s = NewStream();
  SP_ASSERT_OK(spStreamQuery(s));  // no work: complete
  SP_ASSERT_OK(Kernel(s, 100));
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(rt_, 99));
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(rt_, 1));
  EXPECT_EQ(spStreamQuery(s), spSuccess);
  // Queries never move time.
  EXPECT_EQ(Now(), 100u);
}

TEST_F(RuntimeCapiTest, EventQueryIsNotReadyUntilHostTimeReachesTheRecord) {
  spStream_t s = NewStream();
  spEvent_t e = NewEvent();
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spEventRecord(e, s));  // completes at 100
  SP_ASSERT_OK(Kernel(s, 400));       // later work: not covered by e
  EXPECT_EQ(spEventQuery(e), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(rt_, 99));
  EXPECT_EQ(spEventQuery(e), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(rt_, 1));
  EXPECT_EQ(spEventQuery(e), spSuccess);
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  EXPECT_EQ(Now(), 100u);
}

TEST_F(RuntimeCapiTest, EventSynchronizeWaitsForTheRecordNotForLaterWork) {
  spStream_t s = NewStream();
  spEvent_t e = NewEvent();
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spEventRecord(e, s));
  SP_ASSERT_OK(Kernel(s, 400));
  SP_ASSERT_OK(spEventSynchronize(e));
  EXPECT_EQ(Now(), 100u);
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 500u);
}

TEST_F(RuntimeCapiTest, ElapsedTimeIsTheVirtualTimeBetweenTwoRecords) {
  spStream_t s = NewStream();
  spEvent_t start = NewEvent();
  spEvent_t end = NewEvent();
  SP_ASSERT_OK(Kernel(s, 1000));
  SP_ASSERT_OK(spEventRecord(start, s));  // at 1000
  SP_ASSERT_OK(Kernel(s, 2'500'000));     // 2.5 ms
  SP_ASSERT_OK(spEventRecord(end, s));    // at 2'501'000
  float ms = -1;
  EXPECT_EQ(spEventElapsedTime(&ms, start, end), spErrorNotReady);
  SP_ASSERT_OK(spEventSynchronize(start));
  EXPECT_EQ(spEventElapsedTime(&ms, start, end), spErrorNotReady);
  SP_ASSERT_OK(spEventSynchronize(end));
  SP_ASSERT_OK(spEventElapsedTime(&ms, start, end));
  EXPECT_FLOAT_EQ(ms, 2.5f);
  SP_ASSERT_OK(spEventElapsedTime(&ms, end, start));
  EXPECT_FLOAT_EQ(ms, -2.5f);
  SP_ASSERT_OK(spEventElapsedTime(&ms, start, start));
  EXPECT_FLOAT_EQ(ms, 0.0f);
}

TEST_F(RuntimeCapiTest, StreamWaitEventMakesTheWaitingStreamStartAfterTheRecord) {
  spStream_t producer = NewStream();
  spStream_t consumer = NewStream();
  spStream_t bystander = NewStream();
  spEvent_t produced = NewEvent();
  spEvent_t consumed = NewEvent();
  spEvent_t free_run = NewEvent();

  SP_ASSERT_OK(Kernel(producer, 1000));             // 0..1000
  SP_ASSERT_OK(spEventRecord(produced, producer));  // at 1000
  SP_ASSERT_OK(spStreamWaitEvent(consumer, produced));
  SP_ASSERT_OK(Kernel(consumer, 10));  // 1000..1010, not 0..10
  SP_ASSERT_OK(spEventRecord(consumed, consumer));
  SP_ASSERT_OK(Kernel(bystander, 10));  // did not wait: 0..10
  SP_ASSERT_OK(spEventRecord(free_run, bystander));

  SP_ASSERT_OK(spEventSynchronize(free_run));
  EXPECT_EQ(Now(), 10u);
  SP_ASSERT_OK(spEventSynchronize(consumed));
  EXPECT_EQ(Now(), 1010u);
  float ms = 0;
  SP_ASSERT_OK(spEventElapsedTime(&ms, produced, consumed));
  EXPECT_FLOAT_EQ(ms, 10e-6f);
}

TEST_F(RuntimeCapiTest, WaitsChainAcrossThreeStreams) {
  // a -> b -> c by events: c's kernel starts after a's, although c never
  // waited on a directly.
  spStream_t a = NewStream();
  spStream_t b = NewStream();
  spStream_t c = NewStream();
  spEvent_t ea = NewEvent();
  spEvent_t eb = NewEvent();
  SP_ASSERT_OK(Kernel(a, 700));
  SP_ASSERT_OK(spEventRecord(ea, a));
  SP_ASSERT_OK(spStreamWaitEvent(b, ea));
  SP_ASSERT_OK(Kernel(b, 5));  // 700..705
  SP_ASSERT_OK(spEventRecord(eb, b));
  SP_ASSERT_OK(spStreamWaitEvent(c, eb));
  SP_ASSERT_OK(Kernel(c, 1));  // 705..706
  SP_ASSERT_OK(spStreamSynchronize(c));
  EXPECT_EQ(Now(), 706u);
  EXPECT_EQ(spStreamQuery(a), spSuccess);
  EXPECT_EQ(spStreamQuery(b), spSuccess);
}

// ------------------------------------------------------------------ events

TEST_F(RuntimeCapiTest, NeverRecordedEventIsCompleteAndWaitingOnItIsANoOp) {
  spStream_t busy = NewStream();
  spStream_t s = NewStream();
  spEvent_t never = NewEvent();
  SP_ASSERT_OK(Kernel(busy, 1000));
  EXPECT_EQ(spEventQuery(never), spSuccess);
  EXPECT_EQ(spEventSynchronize(never), spSuccess);
  EXPECT_EQ(Now(), 0u);  // waited for nothing
  EXPECT_EQ(spStreamWaitEvent(s, never), spSuccess);
  SP_ASSERT_OK(Kernel(s, 10));  // not delayed: 0..10
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 10u);
  float ms = 0;
  // Elapsed time needs two records.
  spEvent_t recorded = NewEvent();
  SP_ASSERT_OK(spEventRecord(recorded, NewStream()));
  SP_ASSERT_OK(spEventSynchronize(recorded));
  EXPECT_EQ(spEventElapsedTime(&ms, never, recorded), spErrorInvalidResourceHandle);
  EXPECT_EQ(spEventElapsedTime(&ms, recorded, never), spErrorInvalidResourceHandle);
}

TEST_F(RuntimeCapiTest, QueryAndSynchronizeUseTheLatestRecord) {
  spStream_t s = NewStream();
  spEvent_t e = NewEvent();
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spEventRecord(e, s));  // first record: at 100
  SP_ASSERT_OK(Kernel(s, 500));
  SP_ASSERT_OK(spEventRecord(e, s));  // re-record: at 600
  SP_ASSERT_OK(spHostAdvance(rt_, 100));
  // The first record is complete, but it was replaced.
  EXPECT_EQ(spEventQuery(e), spErrorNotReady);
  SP_ASSERT_OK(spEventSynchronize(e));
  EXPECT_EQ(Now(), 600u);
  EXPECT_EQ(spEventQuery(e), spSuccess);
}

TEST_F(RuntimeCapiTest, AnEnqueuedWaitKeepsItsSnapshotWhenTheEventIsReRecorded) {
  spStream_t s = NewStream();
  spStream_t t = NewStream();
  spEvent_t e = NewEvent();
  spEvent_t done = NewEvent();
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spEventRecord(e, s));      // at 100
  SP_ASSERT_OK(spStreamWaitEvent(t, e));  // t waits for the record at 100
  SP_ASSERT_OK(Kernel(s, 500));
  SP_ASSERT_OK(spEventRecord(e, s));  // re-recorded: at 600
  SP_ASSERT_OK(Kernel(t, 10));        // after 100, not after 600
  SP_ASSERT_OK(spEventRecord(done, t));
  SP_ASSERT_OK(spEventSynchronize(done));
  EXPECT_EQ(Now(), 110u);
  // A wait made now uses the new record.
  spStream_t u = NewStream();
  SP_ASSERT_OK(spStreamWaitEvent(u, e));
  SP_ASSERT_OK(Kernel(u, 10));
  SP_ASSERT_OK(spStreamSynchronize(u));
  EXPECT_EQ(Now(), 610u);
}

// ------------------------------------------------------------ legacy stream

TEST_F(RuntimeCapiTest, BlockingStreamWorkStartsAfterPriorLegacyWork) {
  spStream_t legacy = Legacy();
  spStream_t blocking = NewStream(spStreamDefault);
  spStream_t non_blocking = NewStream(spStreamNonBlocking);
  SP_ASSERT_OK(Kernel(legacy, 100));       // 0..100
  SP_ASSERT_OK(Kernel(non_blocking, 50));  // opts out: 0..50
  SP_ASSERT_OK(Kernel(blocking, 50));      // implicit sync: 100..150

  SP_ASSERT_OK(spStreamSynchronize(non_blocking));
  EXPECT_EQ(Now(), 50u);
  SP_ASSERT_OK(spStreamSynchronize(blocking));
  EXPECT_EQ(Now(), 150u);
  // Synchronizing the blocking stream synchronized the legacy work it was
  // ordered after.
  EXPECT_EQ(spStreamQuery(legacy), spSuccess);
}

TEST_F(RuntimeCapiTest, LegacyWorkStartsAfterPriorWorkOfBlockingStreamsOnly) {
  spStream_t legacy = Legacy();
  spStream_t blocking = NewStream(spStreamDefault);
  spStream_t non_blocking = NewStream(spStreamNonBlocking);
  SP_ASSERT_OK(Kernel(non_blocking, 1000));  // the legacy stream ignores it
  SP_ASSERT_OK(Kernel(blocking, 100));       // 0..100
  SP_ASSERT_OK(Kernel(legacy, 50));          // 100..150
  SP_ASSERT_OK(spStreamSynchronize(legacy));
  EXPECT_EQ(Now(), 150u);
  EXPECT_EQ(spStreamQuery(non_blocking), spErrorNotReady);
}

TEST_F(RuntimeCapiTest, LegacyStreamOfAnotherDeviceDoesNotSynchronize) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.deviceCount = 2;
  Start(&cfg);
  spStream_t legacy1 = Legacy(1);
  spStream_t blocking0 = NewStream(spStreamDefault, 0);
  SP_ASSERT_OK(Kernel(legacy1, 100));
  SP_ASSERT_OK(Kernel(blocking0, 10));  // device 0: 0..10
  SP_ASSERT_OK(spStreamSynchronize(blocking0));
  EXPECT_EQ(Now(), 10u);
}

// -------------------------------------------------------- stream destroy

int g_destroyed_stream_hostfunc_runs = 0;
void CountRun(void*) { ++g_destroyed_stream_hostfunc_runs; }

TEST_F(RuntimeCapiTest, DestroyedStreamIsInvalidAtOnceButItsWorkStillCompletes) {
  g_destroyed_stream_hostfunc_runs = 0;
  spStream_t s = NewStream();
  spEvent_t e = NewEvent();
  SP_ASSERT_OK(Kernel(s, 1000));
  SP_ASSERT_OK(spEventRecord(e, s));
  SP_ASSERT_OK(spLaunchHostFunc(s, &CountRun, nullptr));
  SP_ASSERT_OK(spStreamDestroy(s));

  EXPECT_EQ(Now(), 0u);  // destroying does not wait
  EXPECT_EQ(spStreamQuery(s), spErrorInvalidResourceHandle);
  EXPECT_EQ(spStreamSynchronize(s), spErrorInvalidResourceHandle);
  EXPECT_EQ(Kernel(s, 1), spErrorInvalidResourceHandle);
  EXPECT_EQ(spStreamDestroy(s), spErrorInvalidResourceHandle);
  // The record made before the destroy is still a valid point to wait for.
  EXPECT_EQ(spEventQuery(e), spErrorNotReady);

  SP_ASSERT_OK(spDeviceSynchronize(rt_, 0));
  EXPECT_EQ(Now(), 1000u);
  EXPECT_EQ(g_destroyed_stream_hostfunc_runs, 1);
  EXPECT_EQ(spEventQuery(e), spSuccess);
}

TEST_F(RuntimeCapiTest, DeviceSynchronizeWaitsForEveryStreamOfTheDevice) {
  spStream_t a = NewStream(spStreamDefault);
  spStream_t b = NewStream(spStreamNonBlocking);
  SP_ASSERT_OK(Kernel(a, 300));
  SP_ASSERT_OK(Kernel(b, 700));
  SP_ASSERT_OK(Kernel(Legacy(), 100));  // after a: 300..400
  SP_ASSERT_OK(spDeviceSynchronize(rt_, 0));
  EXPECT_EQ(Now(), 700u);
  EXPECT_EQ(spStreamQuery(a), spSuccess);
  EXPECT_EQ(spStreamQuery(b), spSuccess);
  EXPECT_EQ(spStreamQuery(Legacy()), spSuccess);
}

// ------------------------------------------------------------ host functions

struct HostLog {
  std::vector<std::string> entries;
};
struct HostFuncArg {
  HostLog* log;
  const char* name;
};
void Append(void* p) {
  auto* arg = static_cast<HostFuncArg*>(p);
  arg->log->entries.push_back(arg->name);
}

TEST_F(RuntimeCapiTest, HostFunctionsRunInCompletionTimeThenEnqueueOrder) {
  spStream_t a = NewStream();
  spStream_t b = NewStream();
  spStream_t c = NewStream();
  HostLog log;
  HostFuncArg fa{&log, "a@100"};
  HostFuncArg fb{&log, "b@50"};
  HostFuncArg fc{&log, "c@100"};
  SP_ASSERT_OK(Kernel(a, 100));
  SP_ASSERT_OK(spLaunchHostFunc(a, &Append, &fa));  // enqueued first
  SP_ASSERT_OK(Kernel(b, 50));
  SP_ASSERT_OK(spLaunchHostFunc(b, &Append, &fb));  // completes first
  SP_ASSERT_OK(Kernel(c, 100));
  SP_ASSERT_OK(spLaunchHostFunc(c, &Append, &fc));  // ties with a
  EXPECT_TRUE(log.entries.empty());

  SP_ASSERT_OK(spHostAdvance(rt_, 60));
  EXPECT_EQ(spStreamQuery(b), spSuccess);  // observed complete: b ran
  EXPECT_EQ(log.entries, std::vector<std::string>{"b@50"});

  SP_ASSERT_OK(spDeviceSynchronize(rt_, 0));
  EXPECT_EQ(Now(), 100u);
  EXPECT_EQ(log.entries, (std::vector<std::string>{"b@50", "a@100", "c@100"}));
}

TEST_F(RuntimeCapiTest, HostFunctionRunsWhenTheHostObservesItNotAtLaunch) {
  spStream_t s = NewStream();
  HostLog log;
  HostFuncArg f{&log, "f"};
  // The stream is idle, so the host function completes at once in virtual
  // time; it still runs only when the host looks.
  SP_ASSERT_OK(spLaunchHostFunc(s, &Append, &f));
  EXPECT_TRUE(log.entries.empty());
  EXPECT_EQ(spStreamQuery(s), spSuccess);
  EXPECT_EQ(log.entries, std::vector<std::string>{"f"});
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(log.entries.size(), 1u);  // once
}

// Everything a host function tries: each call must be refused.
struct ReentryProbe {
  spRuntime_t rt;
  spStream_t s;
  spEvent_t e;
  std::vector<std::pair<std::string, spError_t>> results;
};
void CallTheApi(void* p) {
  auto* probe = static_cast<ReentryProbe*>(p);
  auto note = [&](const char* what, spError_t r) { probe->results.emplace_back(what, r); };
  uint64_t ns = 0;
  note("spHostNow", spHostNow(probe->rt, &ns));
  note("spHostAdvance", spHostAdvance(probe->rt, 5));
  note("spLaunchKernel", spLaunchKernel(probe->s, 1000, nullptr, 0));
  note("spStreamSynchronize", spStreamSynchronize(probe->s));
  note("spStreamQuery", spStreamQuery(probe->s));
  note("spEventRecord", spEventRecord(probe->e, probe->s));
  note("spEventSynchronize", spEventSynchronize(probe->e));
  note("spDeviceSynchronize", spDeviceSynchronize(probe->rt, 0));
  spStream_t s2 = nullptr;
  note("spStreamCreate", spStreamCreate(&s2, probe->rt, 0, 0));
  void* ptr = nullptr;
  note("spMallocAsync", spMallocAsync(&ptr, 256, probe->s));
  note("spMalloc", spMalloc(&ptr, 256, probe->rt, 0));
  spRuntime_t other = nullptr;
  note("spRuntimeCreate", spRuntimeCreate(&other, nullptr));
  note("spRuntimeDestroy", spRuntimeDestroy(probe->rt));
}

TEST_F(RuntimeCapiTest, SpCallsFromAHostFunctionAreNotSupported) {
  spStream_t s = NewStream();
  spEvent_t e = NewEvent();
  ReentryProbe probe{rt_, s, e, {}};
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spLaunchHostFunc(s, &CallTheApi, &probe));
  SP_ASSERT_OK(spStreamSynchronize(s));
  ASSERT_EQ(probe.results.size(), 13u);
  for (const auto& [what, r] : probe.results) {
    EXPECT_EQ(r, spErrorNotSupported) << what;
  }
  // None of the refused calls had an effect: no kernel, no host advance, the
  // runtime is alive, and calls from the host work again.
  EXPECT_EQ(Now(), 100u);
  SP_EXPECT_OK(spStreamQuery(s));
  SP_EXPECT_OK(spEventQuery(e));  // never recorded
  SP_ASSERT_OK(Kernel(s, 1));
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 101u);
}

// ---------------------------------------------------- async copies and fills

class RuntimeCopyTest : public RuntimeCapiTest {
 protected:
  // 1000 bytes per microsecond = 1 byte per ns, so durations read as sizes.
  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.copyBytesPerUs = 1000;
    Start(&cfg);
  }
};

TEST_F(RuntimeCopyTest, CopiesAndFillsMoveRealBytesInStreamOrder) {
  constexpr size_t kBytes = 4096;
  spStream_t s = NewStream();
  void* dev = nullptr;
  SP_ASSERT_OK(spMalloc(&dev, kBytes, rt_, 0));
  ASSERT_NE(dev, nullptr);
  std::vector<unsigned char> src(kBytes);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  std::vector<unsigned char> dst(kBytes, 0);

  auto* d = static_cast<unsigned char*>(dev);
  SP_ASSERT_OK(spMemcpyAsync(dev, src.data(), kBytes, s));  // 0..4096
  SP_ASSERT_OK(spMemsetAsync(d + 1024, 0x5A, 1024, s));     // 4096..5120
  SP_ASSERT_OK(spMemcpyAsync(dst.data(), dev, kBytes, s));  // 5120..9216
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 9216u);

  std::vector<unsigned char> want = src;
  std::memset(want.data() + 1024, 0x5A, 1024);
  EXPECT_EQ(dst, want);
  EXPECT_EQ(std::memcmp(dev, want.data(), kBytes), 0);
  SP_ASSERT_OK(spFree(rt_, dev));
}

TEST_F(RuntimeCopyTest, FillOfAnOrdinaryHostBufferLandsByTheQueryThatSeesItDone) {
  constexpr size_t kBytes = 3000;
  spStream_t s = NewStream();
  std::vector<unsigned char> buf(kBytes, 0);
  SP_ASSERT_OK(spMemsetAsync(buf.data(), 0xEE, kBytes, s));  // 0..3000
  SP_ASSERT_OK(spHostAdvance(rt_, 2999));
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(rt_, 1));
  ASSERT_EQ(spStreamQuery(s), spSuccess);
  EXPECT_EQ(buf, std::vector<unsigned char>(kBytes, 0xEE));
}

TEST_F(RuntimeCopyTest, CopyDurationIsBytesOverBandwidth) {
  constexpr size_t kBytes = 2500;
  spStream_t s = NewStream();
  spEvent_t before = NewEvent();
  spEvent_t after = NewEvent();
  std::vector<char> a(kBytes, 'a');
  std::vector<char> b(kBytes, 'b');
  SP_ASSERT_OK(spEventRecord(before, s));
  SP_ASSERT_OK(spMemcpyAsync(b.data(), a.data(), kBytes, s));
  SP_ASSERT_OK(spEventRecord(after, s));
  SP_ASSERT_OK(spEventSynchronize(after));
  EXPECT_EQ(Now(), 2500u);
  float ms = 0;
  SP_ASSERT_OK(spEventElapsedTime(&ms, before, after));
  EXPECT_FLOAT_EQ(ms, 2500e-6f);
  EXPECT_EQ(b, a);
}

TEST_F(RuntimeCapiTest, DefaultBandwidthIsOneMillionBytesPerMicrosecond) {
  // 2,000,000 bytes at 1e6 B/us: 2 us.
  constexpr size_t kBytes = 2'000'000;
  spStream_t s = NewStream();
  std::vector<char> a(kBytes, 'x');
  std::vector<char> b(kBytes, 'y');
  SP_ASSERT_OK(spMemcpyAsync(b.data(), a.data(), kBytes, s));
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 2000u);
  EXPECT_EQ(b, a);
}

// ------------------------------------------------------------ per-call cost

class RuntimeApiCostTest : public RuntimeCapiTest {
 protected:
  static constexpr uint64_t kCallNs = 7;
  void SetUp() override { StartWith(1); }
  void StartWith(int devices) {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.apiCallNs = kCallNs;
    cfg.deviceCount = devices;
    Start(&cfg);
  }
};

TEST_F(RuntimeApiCostTest, EachCallChargesHostTimeBeforeItActs) {
  spStream_t s = NewStream();
  const uint64_t t0 = Now();  // reading the clock is free
  EXPECT_EQ(Now(), t0);
  SP_ASSERT_OK(Kernel(s, 100));  // host t0+7; kernel t0+7 .. t0+107
  EXPECT_EQ(Now(), t0 + 7);
  SP_ASSERT_OK(spStreamSynchronize(s));  // charged to t0+14, then waits
  EXPECT_EQ(Now(), t0 + 107);
  SP_ASSERT_OK(spStreamSynchronize(s));  // nothing to wait for: one charge
  EXPECT_EQ(Now(), t0 + 114);
  SP_ASSERT_OK(spHostAdvance(rt_, 10));
  EXPECT_EQ(Now(), t0 + 131);
  SP_ASSERT_OK(spStreamQuery(s));
  EXPECT_EQ(Now(), t0 + 138);
}

TEST_F(RuntimeApiCostTest, CreatingARuntimeChargesAtMostOneCall) {
  // Runtime creation is one API call whatever the number of devices; the
  // internal setup (legacy streams, default pools) is not the caller's calls.
  const uint64_t one_device = Now();
  EXPECT_LE(one_device, kCallNs);
  StartWith(4);
  EXPECT_EQ(Now(), one_device);
}

// ------------------------------------------------------------ simulator bug

// The simulator's incomplete-op tracking, seen from the C API: a kernel, a
// synchronize, then a record (0 ns, complete at once), then another kernel.
// Synchronizing on the record must stop at the record; synchronizing the
// stream must stop at the kernel's end.
TEST_F(RuntimeCapiTest, RecordAfterASynchronizeThenMoreWork) {
  spStream_t s = NewStream();
  spEvent_t e = NewEvent();
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spStreamSynchronize(s));  // now 100
  SP_ASSERT_OK(spEventRecord(e, s));     // complete at 100
  SP_ASSERT_OK(Kernel(s, 50));           // 100..150
  SP_ASSERT_OK(Kernel(s, 25));           // 150..175
  SP_ASSERT_OK(spEventSynchronize(e));
  EXPECT_EQ(Now(), 100u);
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 175u);
}

TEST_F(RuntimeCapiTest, AllocationMarkerAfterASynchronizeThenMoreWork) {
  spStream_t s = NewStream();
  SP_ASSERT_OK(Kernel(s, 100));
  SP_ASSERT_OK(spStreamSynchronize(s));
  void* p = nullptr;
  SP_ASSERT_OK(spMallocAsync(&p, 1024, s));  // a 0-ns marker, complete at once
  SP_ASSERT_OK(Kernel(s, 50));
  SP_ASSERT_OK(spFreeAsync(p, s));
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), 150u);
}

}  // namespace
