// The stream-order checker: each kind of bug planted on purpose is reported
// with the ops involved, and a correct multi-stream program reports nothing.
#include "src/sim/checker.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(spRuntimeCreate(&rt_, nullptr), spSuccess);
    ASSERT_EQ(spCheckerEnable(rt_, 1), spSuccess);
    ASSERT_EQ(spStreamCreate(&a_, rt_, 0, spStreamDefault), spSuccess);
    ASSERT_EQ(spStreamCreate(&b_, rt_, 0, spStreamDefault), spSuccess);
    ASSERT_EQ(spEventCreate(&ev_, rt_), spSuccess);
  }
  void TearDown() override { ASSERT_EQ(spRuntimeDestroy(rt_), spSuccess); }

  std::vector<spCheckReport> Reports() {
    size_t n = 0;
    EXPECT_EQ(spCheckerGetReports(rt_, nullptr, 0, &n), spSuccess);
    std::vector<spCheckReport> out(n);
    EXPECT_EQ(spCheckerGetReports(rt_, out.data(), out.size(), &n), spSuccess);
    return out;
  }
  void Kernel(spStream_t s, const void* p, size_t size, int write = 1) {
    spAccess acc{p, size, write};
    ASSERT_EQ(spLaunchKernel(s, 100, &acc, 1), spSuccess);
  }

  spRuntime_t rt_;
  spStream_t a_, b_;
  spEvent_t ev_;
};

TEST_F(CheckerTest, CorrectProducerConsumerReportsNothing) {
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, a_), spSuccess);
  Kernel(a_, p, 4096);
  ASSERT_EQ(spEventRecord(ev_, a_), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(b_, ev_), spSuccess);
  Kernel(b_, p, 4096, 0);
  ASSERT_EQ(spEventRecord(ev_, b_), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(a_, ev_), spSuccess);
  ASSERT_EQ(spFreeAsync(p, a_), spSuccess);
  void* q;
  ASSERT_EQ(spMallocAsync(&q, 4096, a_), spSuccess);
  EXPECT_EQ(q, p);  // same-stream reuse, properly ordered
  Kernel(a_, q, 4096);
  EXPECT_TRUE(Reports().empty());
}

TEST_F(CheckerTest, AccessPastTheEndIsOutOfBounds) {
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, a_), spSuccess);
  Kernel(a_, static_cast<char*>(p) + 4000, 200);
  auto r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckOutOfBounds);
  EXPECT_EQ(r[0].stream, a_);
  EXPECT_EQ(r[0].opIndex, 2u);  // op 1 is the allocation
  EXPECT_EQ(r[0].ptr, static_cast<char*>(p) + 4000);
  EXPECT_EQ(r[0].size, 200u);
}

TEST_F(CheckerTest, AccessAfterTheFreeIsUseAfterFree) {
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, a_), spSuccess);
  ASSERT_EQ(spFreeAsync(p, a_), spSuccess);
  Kernel(a_, p, 16, 0);
  auto r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckUseAfterFree);
  EXPECT_EQ(r[0].opIndex, 3u);
  EXPECT_EQ(r[0].otherStream, a_);
  EXPECT_EQ(r[0].otherOpIndex, 2u);  // the free
}

TEST_F(CheckerTest, FreeNotOrderedAfterAnotherStreamsAccessIsUseAfterFree) {
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, a_), spSuccess);
  ASSERT_EQ(spEventRecord(ev_, a_), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(b_, ev_), spSuccess);
  Kernel(b_, p, 4096);                       // b: wait (1), kernel (2)
  ASSERT_EQ(spFreeAsync(p, a_), spSuccess);  // a never waited for b's kernel
  auto r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckUseAfterFree);
  EXPECT_EQ(r[0].stream, b_);
  EXPECT_EQ(r[0].opIndex, 2u);
  EXPECT_EQ(r[0].otherStream, a_);
  EXPECT_EQ(r[0].otherOpIndex, 3u);  // alloc (1), record (2), free (3)
}

TEST_F(CheckerTest, UnorderedAccessFromAnotherStreamIsUseBeforeReady) {
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, a_), spSuccess);
  Kernel(b_, p, 64);
  auto r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckUseBeforeReady);
  EXPECT_EQ(r[0].stream, b_);
  EXPECT_EQ(r[0].otherStream, a_);
  EXPECT_EQ(r[0].otherOpIndex, 1u);
  // Ordering the access after the allocation makes it fine.
  ASSERT_EQ(spCheckerClearReports(rt_), spSuccess);
  ASSERT_EQ(spEventRecord(ev_, a_), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(b_, ev_), spSuccess);
  Kernel(b_, p, 64);
  EXPECT_TRUE(Reports().empty());
}

TEST_F(CheckerTest, SynchronizeMakesAnAllocationReadyForEveryStream) {
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, a_), spSuccess);
  ASSERT_EQ(spStreamSynchronize(a_), spSuccess);  // proves the allocation complete
  Kernel(b_, p, 64);
  EXPECT_TRUE(Reports().empty());
  // And an access proven complete is ordered before a later free anywhere.
  ASSERT_EQ(spStreamSynchronize(b_), spSuccess);
  ASSERT_EQ(spFreeAsync(p, a_), spSuccess);
  EXPECT_TRUE(Reports().empty());
}

TEST_F(CheckerTest, LegacyStreamOrdersBlockingStreams) {
  spStream_t legacy;
  ASSERT_EQ(spStreamGetLegacy(&legacy, rt_, 0), spSuccess);
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, legacy), spSuccess);
  Kernel(a_, p, 64);  // blocking stream: ordered after prior legacy work
  EXPECT_TRUE(Reports().empty());
  spStream_t nb;
  ASSERT_EQ(spStreamCreate(&nb, rt_, 0, spStreamNonBlocking), spSuccess);
  Kernel(nb, p, 64);  // non-blocking: not ordered
  auto r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckUseBeforeReady);
}

TEST_F(CheckerTest, CopiesOfRuntimeMemoryAreChecked) {
  void* p;
  ASSERT_EQ(spMallocAsync(&p, 4096, a_), spSuccess);
  ASSERT_EQ(spFreeAsync(p, a_), spSuccess);
  char host[16];
  ASSERT_EQ(spMemcpyAsync(host, p, sizeof host, a_), spSuccess);  // reads freed memory
  auto r = Reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].kind, spCheckUseAfterFree);
  // The copy lands in `host` when observed: before it goes out of scope.
  ASSERT_EQ(spStreamSynchronize(a_), spSuccess);
}

// An oracle that answers "nothing is ordered, nothing observed complete".
class UnorderedOracle : public streampool::internal::OrderOracle {
 public:
  streampool::StreamIndex stream() const override { return 1; }
  streampool::Position OrderedAfter(streampool::StreamIndex) const override { return 0; }
  streampool::Position ObservedComplete(streampool::StreamIndex) const override { return 0; }
  void InsertWait(streampool::StreamIndex, streampool::Position) override {}
};

TEST(StreamOrderCheckerTest, ReuseOfAFreeNeitherOrderedNorCompleteIsReportedWithoutTimes) {
  // What the threads executor relies on: no virtual times (all 0), only order.
  streampool::internal::StreamOrderChecker c;
  streampool::internal::VectorClock clock;
  UnorderedOracle oracle;
  c.OnAlloc(0x20000, 512, /*stream=*/0, /*position=*/1, 0, &oracle);
  c.OnFree(0x20000, 0, 2, clock, 0);
  c.OnAlloc(0x20000, 512, /*stream=*/1, /*position=*/1, 0, &oracle);
  ASSERT_EQ(c.reports().size(), 1u);
  EXPECT_EQ(c.reports()[0].kind, streampool::internal::CheckKind::kOverlappingLifetimes);
  // Same stream is always fine.
  c.OnFree(0x20000, 1, 2, clock, 0);
  c.OnAlloc(0x20000, 512, /*stream=*/1, /*position=*/3, 0, &oracle);
  EXPECT_EQ(c.reports().size(), 1u);
}

// The pool self-check cannot be planted through a correct pool, so it is
// driven directly.
TEST(StreamOrderCheckerTest, OverlapWithAFreeNotYetCompleteIsReported) {
  streampool::internal::StreamOrderChecker c;
  streampool::internal::VectorClock clock;
  c.OnAlloc(0x10000, 512, /*stream=*/0, /*position=*/1, /*ready_ns=*/0, nullptr);
  c.OnFree(0x10000, 0, 2, clock, /*end_ns=*/1000);
  c.OnAlloc(0x10100, 256, /*stream=*/1, /*position=*/1, /*ready_ns=*/999, nullptr);
  ASSERT_EQ(c.reports().size(), 1u);
  EXPECT_EQ(c.reports()[0].kind, streampool::internal::CheckKind::kOverlappingLifetimes);
  EXPECT_EQ(c.reports()[0].other_stream, 0u);
  EXPECT_EQ(c.reports()[0].other_position, 2u);
  // A free completed by the time the new block is usable is fine.
  c.OnFree(0x10100, 1, 2, clock, 2000);
  c.OnAlloc(0x10000, 1024, 2, 1, 2000, nullptr);
  EXPECT_EQ(c.reports().size(), 1u);
  // Overlapping a live allocation is always reported.
  c.OnAlloc(0x10200, 64, 3, 1, 5000, nullptr);
  EXPECT_EQ(c.reports().size(), 2u);
}

}  // namespace
