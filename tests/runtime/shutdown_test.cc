// Destroying a runtime while other host threads are inside it (docs/design.md,
// "Concurrency contract"): calls blocked in a synchronize are woken and
// return the destroyed handle's error, the destroy waits for them to leave
// and then frees, and calls that start afterwards get that error too.
//
// The threads executor: its synchronize calls really block. A host function
// that waits for the test to let it go keeps the stream busy for as long as
// the test needs, so whether the synchronize has begun to block when the
// destroy arrives or comes in after it, its answer is the same.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

std::atomic<bool> release_host_func{false};
std::atomic<bool> host_func_started{false};

void BlockUntilReleased(void*) {
  host_func_started.store(true);
  while (!release_host_func.load()) std::this_thread::yield();
}

enum class SyncKind { kStream, kEvent, kDevice };

class DestroyDuringSyncTest : public ::testing::TestWithParam<SyncKind> {};

TEST_P(DestroyDuringSyncTest, WakesTheBlockedCallWithTheDestroyedHandlesError) {
  release_host_func = false;
  host_func_started = false;
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.executor = spExecutorThreads;
  spRuntime_t rt;
  ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  spStream_t s;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamNonBlocking), spSuccess);
  spEvent_t e;
  ASSERT_EQ(spEventCreate(&e, rt), spSuccess);
  void* p = nullptr;
  ASSERT_EQ(spMallocAsync(&p, 4096, s), spSuccess);
  ASSERT_EQ(spLaunchHostFunc(s, BlockUntilReleased, nullptr), spSuccess);
  ASSERT_EQ(spEventRecord(e, s), spSuccess);
  ASSERT_EQ(spFreeAsync(p, s), spSuccess);
  while (!host_func_started.load()) std::this_thread::yield();

  std::atomic<int> sync_result{-1};
  std::thread waiter([&] {
    spError_t r = spSuccess;
    switch (GetParam()) {
      case SyncKind::kStream:
        r = spStreamSynchronize(s);
        break;
      case SyncKind::kEvent:
        r = spEventSynchronize(e);
        break;
      case SyncKind::kDevice:
        r = spDeviceSynchronize(rt, 0);
        break;
    }
    sync_result = static_cast<int>(r);
  });
  // Give the waiter time to block (it is right either way, see above).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sync_result.load(), -1) << "the stream cannot be complete yet";

  std::atomic<int> destroy_result{-1};
  std::thread destroyer([&] { destroy_result = static_cast<int>(spRuntimeDestroy(rt)); });
  // The synchronize returns while the stream's work is still running.
  waiter.join();
  EXPECT_EQ(sync_result.load(), static_cast<int>(spErrorInvalidResourceHandle));
  EXPECT_EQ(destroy_result.load(), -1) << "the destroy lets enqueued work complete first";
  // Calls that start now are refused.
  EXPECT_EQ(spStreamQuery(s), spErrorInvalidResourceHandle);
  void* q = nullptr;
  EXPECT_EQ(spMallocAsync(&q, 256, s), spErrorInvalidResourceHandle);
  release_host_func = true;
  destroyer.join();
  EXPECT_EQ(destroy_result.load(), static_cast<int>(spSuccess));
  EXPECT_EQ(spStreamSynchronize(s), spErrorInvalidResourceHandle);
  EXPECT_EQ(spRuntimeDestroy(rt), spErrorInvalidResourceHandle);
}

INSTANTIATE_TEST_SUITE_P(Syncs, DestroyDuringSyncTest,
                         ::testing::Values(SyncKind::kStream, SyncKind::kEvent, SyncKind::kDevice),
                         [](const ::testing::TestParamInfo<SyncKind>& info) {
                           switch (info.param) {
                             case SyncKind::kStream:
                               return "StreamSynchronize";
                             case SyncKind::kEvent:
                               return "EventSynchronize";
                             case SyncKind::kDevice:
                               return "DeviceSynchronize";
                           }
                           return "Unknown";
                         });

// Statistics of pools whose front caches belong to streams of other pools
// too, read while those streams allocate and free: reading them used to lock
// every stream's cache in turn under the pool's lock, and two pools listing
// their streams in different orders deadlocked (lock_rank.h now also aborts
// on any such nesting in debug and sanitizer builds).
TEST(LockProtocolTest, StatisticsOfPoolsSharingStreamsWhileTheyAllocate) {
  for (spExecutorKind kind : {spExecutorSimulator, spExecutorThreads}) {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.executor = kind;
    spRuntime_t rt;
    ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
    ASSERT_EQ(spCheckerEnable(rt, 0), spSuccess);  // as shipped: the fast path on
    spMemPoolProps props{};
    props.allocType = spMemAllocationTypeDevice;
    spMemPool_t pools[2];
    ASSERT_EQ(spMemPoolCreate(&pools[0], rt, &props), spSuccess);
    ASSERT_EQ(spMemPoolCreate(&pools[1], rt, &props), spSuccess);
    constexpr int kStreams = 4;
    spStream_t streams[kStreams];
    for (spStream_t& s : streams) ASSERT_EQ(spStreamCreate(&s, rt, 0, 0), spSuccess);
    // Pool 0 sees the streams first in one order, pool 1 in the other.
    for (int i = 0; i < kStreams; ++i) {
      for (int k = 0; k < 2; ++k) {
        const int at = k == 0 ? i : kStreams - 1 - i;
        void* p;
        ASSERT_EQ(spMallocFromPoolAsync(&p, 1024, pools[k], streams[at]), spSuccess);
        ASSERT_EQ(spFreeAsync(p, streams[at]), spSuccess);
      }
    }
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> stats_read{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kStreams; ++i) {
      threads.emplace_back([&, i] {
        for (int n = 0; n < 20000; ++n) {
          void* p;
          if (spMallocFromPoolAsync(&p, 1024 + 256 * (n % 8), pools[n % 2], streams[i]) ==
              spSuccess) {
            spFreeAsync(p, streams[i]);
          }
        }
      });
    }
    for (int k = 0; k < 2; ++k) {
      threads.emplace_back([&, k] {
        // At least one read each, however late the thread is scheduled: on
        // a loaded machine the allocating threads may be done before it runs.
        do {
          spMemPoolStats st;
          if (spMemPoolGetStats(pools[k], &st) == spSuccess) ++stats_read;
          uint64_t zero = 0;
          spMemPoolSetAttribute(pools[k], spMemPoolAttrUsedMemHigh, &zero);
        } while (!stop);
      });
    }
    for (int i = 0; i < kStreams; ++i) threads[i].join();
    stop = true;
    for (size_t i = kStreams; i < threads.size(); ++i) threads[i].join();
    EXPECT_GT(stats_read.load(), 0u);
    for (spMemPool_t pool : pools) {
      spMemPoolStats st;
      ASSERT_EQ(spMemPoolGetStats(pool, &st), spSuccess);
      EXPECT_EQ(st.usedBytes, 0u);
      EXPECT_EQ(st.allocCount, st.freeCount);
    }
    ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
  }
}

}  // namespace
