// Virtual time at the end of its range, through streampool.h alone (docs/design.md,
// "Concurrency contract": virtual time saturates). A sum of times that would
// pass UINT64_MAX ns stays there, meaning "not within representable time", or
// the call is refused with spErrorInvalidValue; an op never reads as complete
// before its end, and host time never goes backwards.
//
// The rules pinned: op ends, copy and fill durations and per-call costs
// saturate; spHostAdvance that would take the host to UINT64_MAX or past it is
// refused and changes nothing, so an op ending at UINT64_MAX completes only
// for a synchronize, which takes the host there; elapsed time to a record at
// UINT64_MAX is refused.
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr
#define SP_EXPECT_OK(expr) EXPECT_EQ((expr), spSuccess) << #expr

constexpr uint64_t kNever = UINT64_MAX;
constexpr uint64_t kMiB = uint64_t{1} << 20;

class VirtualTimeTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  void TearDown() override {
    if (rt_ != nullptr) {
      EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess);
    }
  }

  // (Re)starts the runtime under test: simulator, address-only backing
  // (nothing here needs bytes), with the given per-call cost and bandwidth.
  void Start(uint64_t api_call_ns = 0, uint64_t copy_bytes_per_us = 1000000) {
    if (rt_ != nullptr) {
      ASSERT_EQ(spRuntimeDestroy(rt_), spSuccess);
    }
    rt_ = nullptr;
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.executor = spExecutorSimulator;
    cfg.backing = spBackingAddressOnly;
    cfg.apiCallNs = api_call_ns;
    cfg.copyBytesPerUs = copy_bytes_per_us;
    ASSERT_EQ(spRuntimeCreate(&rt_, &cfg), spSuccess);
  }

  spStream_t NewStream() {
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamCreate(&s, rt_, 0, spStreamNonBlocking), spSuccess);
    return s;
  }
  spEvent_t NewEvent() {
    spEvent_t e = nullptr;
    EXPECT_EQ(spEventCreate(&e, rt_), spSuccess);
    return e;
  }
  spMemPool_t NewPool(size_t max_size = 0) {
    spMemPoolProps props;
    std::memset(&props, 0, sizeof(props));
    props.allocType = spMemAllocationTypeDevice;
    props.device = 0;
    props.maxSize = max_size;
    spMemPool_t pool = nullptr;
    EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spSuccess);
    return pool;
  }
  void SetSwitch(spMemPool_t pool, spMemPoolAttr attr, int on) {
    EXPECT_EQ(spMemPoolSetAttribute(pool, attr, &on), spSuccess);
  }
  spMemPoolStats Stats(spMemPool_t pool) {
    spMemPoolStats s;
    std::memset(&s, 0, sizeof(s));
    EXPECT_EQ(spMemPoolGetStats(pool, &s), spSuccess);
    return s;
  }
  void* Alloc(size_t size, spMemPool_t pool, spStream_t s) {
    void* p = nullptr;
    EXPECT_EQ(spMallocFromPoolAsync(&p, size, pool, s), spSuccess) << "allocating " << size;
    return p;
  }
  uint64_t Now() {
    uint64_t ns = 0;
    EXPECT_EQ(spHostNow(rt_, &ns), spSuccess);
    return ns;
  }
  // Spends host time up to the latest an advance may reach, one below
  // UINT64_MAX.
  void AdvanceToTheLatest() { SP_EXPECT_OK(spHostAdvance(rt_, kNever - 1 - Now())); }
  spError_t WriteKernel(spStream_t s, uint64_t ns, void* p, size_t bytes) {
    const spAccess w{p, bytes, 1};
    return spLaunchKernel(s, ns, &w, 1);
  }

  spRuntime_t rt_ = nullptr;
};

// ------------------------------------------------------------ kernel ends

TEST_F(VirtualTimeTest, AHugeKernelKeepsItsStreamIncompleteAndItsBlockUnreused) {
  spStream_t s1 = NewStream();
  spStream_t s2 = NewStream();
  spMemPool_t pool = NewPool();
  SetSwitch(pool, spMemPoolReuseAllowOpportunistic, 1);
  // Only opportunistic reuse could hand the block over: no inserted waits.
  SetSwitch(pool, spMemPoolReuseAllowInternalDependencies, 0);
  SP_ASSERT_OK(spHostAdvance(rt_, 1000));
  void* p = Alloc(kMiB, pool, s1);
  // Starts at 1000; 1000 + UINT64_MAX - 5 is past representable time.
  SP_ASSERT_OK(WriteKernel(s1, kNever - 5, p, kMiB));
  SP_ASSERT_OK(spFreeAsync(p, s1));
  EXPECT_EQ(spStreamQuery(s1), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(rt_, 1));
  EXPECT_EQ(Now(), 1001u);
  EXPECT_EQ(spStreamQuery(s1), spErrorNotReady);

  // The kernel still writes p: another stream must get other bytes.
  void* q = Alloc(kMiB, pool, s2);
  EXPECT_NE(q, p);
  spMemPoolStats st = Stats(pool);
  EXPECT_EQ(st.reuseOpportunistic, 0u);
  EXPECT_EQ(st.allocCount, 2u);
  EXPECT_EQ(st.usedBytes, kMiB);  // q alone: p's free is still pending

  // As late as the host can go by spending time, the kernel still runs.
  AdvanceToTheLatest();
  EXPECT_EQ(Now(), kNever - 1);
  EXPECT_EQ(spStreamQuery(s1), spErrorNotReady);
  void* r = Alloc(kMiB, pool, s2);
  EXPECT_NE(r, p);
  EXPECT_EQ(Stats(pool).reuseOpportunistic, 0u);
  SP_ASSERT_OK(spFreeAsync(q, s2));
  SP_ASSERT_OK(spFreeAsync(r, s2));

  // Only waiting for it takes the host to the end of time, where it is done.
  SP_ASSERT_OK(spStreamSynchronize(s1));
  EXPECT_EQ(Now(), kNever);
  SP_EXPECT_OK(spStreamQuery(s1));
}

TEST_F(VirtualTimeTest, AWaitForANeverEndingFreeInheritsItsEnd) {
  spStream_t s1 = NewStream();
  spStream_t s2 = NewStream();
  // Room for one 2 MiB block: the second allocation can only reuse the first
  // behind an inserted wait (rule 5).
  spMemPool_t pool = NewPool(2 * kMiB);
  SetSwitch(pool, spMemPoolReuseAllowInternalDependencies, 1);
  SP_ASSERT_OK(spHostAdvance(rt_, 1000));
  void* p = Alloc(2 * kMiB, pool, s1);
  SP_ASSERT_OK(WriteKernel(s1, kNever - 5, p, 2 * kMiB));
  SP_ASSERT_OK(spFreeAsync(p, s1));
  void* q = Alloc(2 * kMiB, pool, s2);
  EXPECT_EQ(q, p);
  EXPECT_EQ(Stats(pool).reuseInternalDependency, 1u);
  EXPECT_EQ(Stats(pool).waitsInserted, 1u);
  // s2 uses q only after the wait, which ends when the kernel does: never
  // within representable time.
  SP_ASSERT_OK(WriteKernel(s2, 10, q, 2 * kMiB));
  AdvanceToTheLatest();
  EXPECT_EQ(spStreamQuery(s2), spErrorNotReady);
  EXPECT_EQ(spStreamQuery(s1), spErrorNotReady);
  SP_ASSERT_OK(spFreeAsync(q, s2));
  SP_ASSERT_OK(spStreamSynchronize(s2));
  EXPECT_EQ(Now(), kNever);
  SP_EXPECT_OK(spStreamQuery(s1));
}

// ------------------------------------------------------------- host time

TEST_F(VirtualTimeTest, HostAdvancePastTheEndOfTimeIsRefusedAndChangesNothing) {
  SP_ASSERT_OK(spHostAdvance(rt_, 1000));
  EXPECT_EQ(spHostAdvance(rt_, kNever), spErrorInvalidValue);
  EXPECT_EQ(Now(), 1000u);
  // Landing exactly on UINT64_MAX is refused too: that is where ops whose end
  // saturated complete, and spending time must not complete them.
  EXPECT_EQ(spHostAdvance(rt_, kNever - 1000), spErrorInvalidValue);
  EXPECT_EQ(Now(), 1000u);
  SP_ASSERT_OK(spHostAdvance(rt_, kNever - 1001));
  EXPECT_EQ(Now(), kNever - 1);
  EXPECT_EQ(spHostAdvance(rt_, 1), spErrorInvalidValue);
  EXPECT_EQ(Now(), kNever - 1);
  SP_EXPECT_OK(spHostAdvance(rt_, 0));
  EXPECT_EQ(Now(), kNever - 1);
}

TEST_F(VirtualTimeTest, SynchronizingOnANeverEndingOpTakesTheHostToTheEndOfTime) {
  spStream_t s = NewStream();
  SP_ASSERT_OK(spHostAdvance(rt_, 1000));
  SP_ASSERT_OK(spLaunchKernel(s, kNever - 5, nullptr, 0));
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), kNever);
  SP_EXPECT_OK(spStreamQuery(s));
  // From there time cannot move on, nor back.
  EXPECT_EQ(spHostAdvance(rt_, 1), spErrorInvalidValue);
  EXPECT_EQ(Now(), kNever);
  SP_EXPECT_OK(spHostAdvance(rt_, 0));
  EXPECT_EQ(Now(), kNever);
  // Work enqueued at the end of time ends there too, so it is complete.
  SP_ASSERT_OK(spLaunchKernel(s, 10, nullptr, 0));
  SP_EXPECT_OK(spStreamQuery(s));
  EXPECT_EQ(Now(), kNever);
}

TEST_F(VirtualTimeTest, PerCallCostSaturatesShortOfTheEndOfTime) {
  // Two calls' cost passes UINT64_MAX.
  Start(/*api_call_ns=*/uint64_t{1} << 63);
  spStream_t s = NewStream();
  uint64_t last = Now();
  for (int i = 0; i < 4; ++i) {
    SP_ASSERT_OK(spHostAdvance(rt_, 0));
    const uint64_t now = Now();
    EXPECT_GE(now, last) << "call " << i;
    last = now;
  }
  EXPECT_EQ(last, kNever - 1);
  // A kernel started there ends at UINT64_MAX, which the cost of later calls
  // never reaches.
  SP_ASSERT_OK(spLaunchKernel(s, 1, nullptr, 0));
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  EXPECT_EQ(Now(), kNever - 1);
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Now(), kNever);
  SP_EXPECT_OK(spStreamQuery(s));
  EXPECT_EQ(Now(), kNever);
}

// ------------------------------------------------------ copies and fills

// The copies below name far more bytes than their allocations hold (no
// allocation can be big enough to overflow a duration): the checker reports
// that, so it collects here instead of aborting.
std::vector<spCheckKind> ReportKinds(spRuntime_t rt) {
  size_t count = 0;
  EXPECT_EQ(spCheckerGetReports(rt, nullptr, 0, &count), spSuccess);
  std::vector<spCheckReport> reports(count);
  EXPECT_EQ(spCheckerGetReports(rt, reports.data(), reports.size(), &count), spSuccess);
  std::vector<spCheckKind> kinds;
  for (const spCheckReport& r : reports) kinds.push_back(r.kind);
  return kinds;
}

TEST_F(VirtualTimeTest, ACopyLastsExactlyItsBytesOverTheBandwidthWhereTheProductOverflows) {
  Start(/*api_call_ns=*/0, /*copy_bytes_per_us=*/1000);  // a byte per ns
  SP_ASSERT_OK(spCheckerEnable(rt_, 1));
  spStream_t s = NewStream();
  spMemPool_t pool = NewPool();
  void* a = Alloc(4096, pool, s);
  void* b = Alloc(4096, pool, s);
  SP_ASSERT_OK(spStreamSynchronize(s));
  const uint64_t start = Now();
  // 2^60 bytes * 1000 does not fit in 64 bits; 2^60 ns does.
  constexpr uint64_t kBytes = uint64_t{1} << 60;
  SP_ASSERT_OK(spMemcpyAsync(b, a, kBytes, s));
  SP_ASSERT_OK(spHostAdvance(rt_, kBytes - 1));
  EXPECT_EQ(spStreamQuery(s), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(rt_, 1));
  EXPECT_EQ(Now(), start + kBytes);
  SP_EXPECT_OK(spStreamQuery(s));
  for (spCheckKind k : ReportKinds(rt_)) EXPECT_EQ(k, spCheckOutOfBounds);
  SP_ASSERT_OK(spFreeAsync(a, s));
  SP_ASSERT_OK(spFreeAsync(b, s));
}

TEST_F(VirtualTimeTest, CopiesAndFillsTooLongForRepresentableTimeNeverCompleteByAdvancing) {
  Start(/*api_call_ns=*/0, /*copy_bytes_per_us=*/1);
  SP_ASSERT_OK(spCheckerEnable(rt_, 1));
  spStream_t copier = NewStream();
  spStream_t filler = NewStream();
  spMemPool_t pool = NewPool();
  void* a = Alloc(4096, pool, copier);
  void* b = Alloc(4096, pool, copier);
  void* c = Alloc(4096, pool, filler);
  SP_ASSERT_OK(spHostAdvance(rt_, 1000));
  // 2^62 bytes at a byte per µs: 2^62 * 1000 ns.
  constexpr uint64_t kBytes = uint64_t{1} << 62;
  SP_ASSERT_OK(spMemcpyAsync(b, a, kBytes, copier));
  SP_ASSERT_OK(spMemsetAsync(c, 0, kBytes, filler));
  EXPECT_EQ(spStreamQuery(copier), spErrorNotReady);
  EXPECT_EQ(spStreamQuery(filler), spErrorNotReady);
  AdvanceToTheLatest();
  EXPECT_EQ(spStreamQuery(copier), spErrorNotReady);
  EXPECT_EQ(spStreamQuery(filler), spErrorNotReady);
  SP_ASSERT_OK(spStreamSynchronize(filler));
  EXPECT_EQ(Now(), kNever);
  SP_EXPECT_OK(spStreamQuery(copier));
  for (spCheckKind k : ReportKinds(rt_)) EXPECT_EQ(k, spCheckOutOfBounds);
  SP_ASSERT_OK(spFreeAsync(a, copier));
  SP_ASSERT_OK(spFreeAsync(b, copier));
  SP_ASSERT_OK(spFreeAsync(c, filler));
}

// ----------------------------------------------------------------- events

TEST_F(VirtualTimeTest, ElapsedTimeToARecordAtTheEndOfTimeIsRefused) {
  spStream_t s = NewStream();
  spStream_t other = NewStream();
  spEvent_t before = NewEvent();
  spEvent_t after = NewEvent();
  spEvent_t late = NewEvent();
  SP_ASSERT_OK(spHostAdvance(rt_, 1000));
  SP_ASSERT_OK(spEventRecord(before, s));
  SP_ASSERT_OK(spLaunchKernel(s, kNever - 5, nullptr, 0));
  SP_ASSERT_OK(spEventRecord(after, s));
  float ms = -1;
  EXPECT_EQ(spEventElapsedTime(&ms, before, after), spErrorNotReady);
  AdvanceToTheLatest();
  EXPECT_EQ(spEventQuery(after), spErrorNotReady);
  EXPECT_EQ(spEventElapsedTime(&ms, before, after), spErrorNotReady);

  // A record at the latest representable time still has an elapsed time.
  SP_ASSERT_OK(spEventRecord(late, other));
  SP_ASSERT_OK(spEventElapsedTime(&ms, before, late));
  EXPECT_FLOAT_EQ(ms, static_cast<float>(static_cast<double>(kNever - 1 - 1000) / 1e6));

  SP_ASSERT_OK(spEventSynchronize(after));
  EXPECT_EQ(Now(), kNever);
  SP_EXPECT_OK(spEventQuery(after));
  ms = -1;
  EXPECT_EQ(spEventElapsedTime(&ms, before, after), spErrorInvalidValue);
  EXPECT_EQ(spEventElapsedTime(&ms, after, before), spErrorInvalidValue);
  EXPECT_EQ(spEventElapsedTime(&ms, after, after), spErrorInvalidValue);
  EXPECT_EQ(spEventElapsedTime(&ms, late, after), spErrorInvalidValue);
  EXPECT_EQ(ms, -1);
  SP_ASSERT_OK(spEventElapsedTime(&ms, before, before));
  EXPECT_EQ(ms, 0);
  SP_EXPECT_OK(spEventDestroy(before));
  SP_EXPECT_OK(spEventDestroy(after));
  SP_EXPECT_OK(spEventDestroy(late));
}

}  // namespace
