// Several host threads use one runtime at once, on their own streams and on a
// shared one. Run under TSan in CI; here it also checks that the counts add
// up and the pools stay consistent whatever the interleaving.
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

TEST(ThreadsTest, ConcurrentAllocFreeOnOwnAndSharedStreamsKeepsCountsExact) {
  RuntimeConfig cfg;
  cfg.backing = Backing::kAddressOnly;
  cfg.device_capacity = uint64_t{4} << 30;
  auto rt = Runtime::Create(cfg);
  ASSERT_TRUE(rt.ok());
  Runtime& r = **rt;
  auto shared = r.CreateStream(0);
  ASSERT_TRUE(shared.ok());
  auto pool = r.DefaultPool(0);
  ASSERT_TRUE(pool.ok());

  constexpr int kThreads = 4;
  constexpr int kIters = 3000;
  std::atomic<uint64_t> allocs{0}, frees{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      auto own = r.CreateStream(0, /*non_blocking=*/t % 2 == 1);
      auto ev = r.CreateEvent();
      if (!own.ok() || !ev.ok()) {
        ++errors;
        return;
      }
      std::vector<std::pair<void*, StreamId>> live;
      for (int i = 0; i < kIters; ++i) {
        const StreamId s = rng() % 4 == 0 ? *shared : *own;
        switch (rng() % 6) {
          case 0:
          case 1:
          case 2: {
            auto a = r.MallocAsync(1 + rng() % (1 << 20), s);
            if (!a.ok()) {
              ++errors;
              break;
            }
            ++allocs;
            live.emplace_back(a->ptr, s);
            break;
          }
          case 3:
          case 4:
            if (!live.empty()) {
              const size_t k = rng() % live.size();
              // Freed on the stream that allocated it, so no cross-stream
              // ordering is needed for the free to be correct.
              if (!r.FreeAsync(live[k].first, live[k].second).ok()) ++errors;
              ++frees;
              live[k] = live.back();
              live.pop_back();
            }
            break;
          case 5:
            if (!r.RecordEvent(*ev, *own).ok() || !r.StreamWaitEvent(*shared, *ev).ok()) ++errors;
            if (rng() % 8 == 0 && !r.StreamSynchronize(*own).ok()) ++errors;
            break;
        }
      }
      for (auto& [p, s] : live) {
        if (!r.FreeAsync(p, s).ok()) ++errors;
        ++frees;
      }
      if (!r.StreamSynchronize(*own).ok()) ++errors;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0u);
  ASSERT_TRUE(r.DeviceSynchronize(0).ok());
  auto st = r.GetPoolStats(*pool);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->alloc_count, allocs.load());
  EXPECT_EQ(st->free_count, frees.load());
  EXPECT_EQ(st->used_bytes, 0u);
  EXPECT_EQ(st->reserved_bytes, 0u);  // threshold 0: everything went back at the sync
  EXPECT_EQ(st->reuse_same_stream + st->reuse_event_dependency + st->reuse_opportunistic +
                st->reuse_after_sync + st->reuse_internal_dependency + st->fresh_allocs,
            st->alloc_count);
  EXPECT_TRUE(r.CheckPoolInvariants(*pool).ok());
}

TEST(ThreadsTest, RuntimesCreatedAndDestroyedConcurrentlyStayIsolated) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        spRuntime_t rt;
        spStream_t s;
        void* p;
        if (spRuntimeCreate(&rt, nullptr) != spSuccess) {
          ++failures;
          continue;
        }
        if (spStreamCreate(&s, rt, 0, spStreamDefault) != spSuccess ||
            spMallocAsync(&p, 4096, s) != spSuccess || spFreeAsync(p, s) != spSuccess ||
            spStreamSynchronize(s) != spSuccess) {
          ++failures;
        }
        if (spRuntimeDestroy(rt) != spSuccess) ++failures;
        // The handle is dead for every thread from now on.
        if (spStreamSynchronize(s) != spErrorInvalidResourceHandle) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace streampool
