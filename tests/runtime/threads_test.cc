// Several host threads use one runtime at once, on their own streams and on a
// shared one. Run under TSan in CI; here it also checks that the counts add
// up and the pools stay consistent whatever the interleaving.
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

// The fast path under contention (docs/design.md, "Performance model"): host
// threads on their own streams churn same-size pairs through their front
// caches, on one shared pool or a pool each, while another thread
// synchronizes, trims, flips the front-cache switch, reads statistics and
// checks invariants, and streams come and go. Under both executors; TSan
// watches the lock-free reads (handles, page map, positions) and the caches'
// stream locks. At the end every count adds up exactly.
class FastPathThreadsTest : public ::testing::TestWithParam<std::tuple<ExecutorKind, bool>> {
 protected:
  // A runtime whose calls may take the paths without its lock: the checker
  // (on for every test through the environment) records every allocation
  // under the runtime's lock, which turns them off.
  static std::unique_ptr<Runtime> NewRuntime(ExecutorKind executor) {
    RuntimeConfig cfg;
    cfg.backing = Backing::kAddressOnly;
    cfg.device_capacity = uint64_t{4} << 30;
    cfg.executor = executor;
    auto rt = Runtime::Create(cfg);
    if (!rt.ok()) return nullptr;
    (*rt)->EnableChecker(false);
    return *std::move(rt);
  }
  // Notes a call's error from any thread; the test reports the first.
  void Fail(const absl::Status& st) {
    if (st.ok()) return;
    if (errors_++ == 0) {
      absl::MutexLock lock(&first_mu_);
      first_error_ = st.ToString();
    }
  }
  void ExpectNoErrors() {
    absl::MutexLock lock(&first_mu_);
    EXPECT_EQ(errors_.load(), 0u) << "first: " << first_error_;
  }
  // Once everything is freed and synchronized: every pool is consistent and
  // empty; returns their summed statistics.
  static PoolStats Drained(Runtime& r, const std::vector<PoolId>& pools) {
    PoolStats sum;
    EXPECT_TRUE(r.DeviceSynchronize(0).ok());
    for (PoolId p : pools) {
      EXPECT_TRUE(r.CheckPoolInvariants(p).ok());
      auto st = r.GetPoolStats(p);
      EXPECT_TRUE(st.ok());
      if (!st.ok()) continue;
      EXPECT_EQ(st->used_bytes, 0u);
      sum.alloc_count += st->alloc_count;
      sum.free_count += st->free_count;
      sum.reuse_event_dependency += st->reuse_event_dependency;
      sum.reuse_opportunistic += st->reuse_opportunistic;
      sum.reuse_internal_dependency += st->reuse_internal_dependency;
      sum.upstream_maps += st->upstream_maps;
    }
    return sum;
  }

 private:
  std::atomic<uint64_t> errors_{0};
  absl::Mutex first_mu_;
  std::string first_error_ ABSL_GUARDED_BY(first_mu_);
};

TEST_P(FastPathThreadsTest, CachedPairsSyncsAndFlushesInterleaveSafely) {
  const auto [executor, shared_pool] = GetParam();
  std::unique_ptr<Runtime> rt = NewRuntime(executor);
  ASSERT_NE(rt, nullptr);
  Runtime& r = *rt;
  constexpr int kThreads = 3;
  constexpr int kIters = 4000;
  std::vector<PoolId> pools;
  for (int t = 0; t < (shared_pool ? 1 : kThreads); ++t) {
    PoolProps props;
    props.release_threshold = t % 2 == 0 ? 0 : UINT64_MAX;
    auto p = r.CreatePool(props);
    ASSERT_TRUE(p.ok());
    pools.push_back(*p);
  }
  std::atomic<bool> done{false};
  std::atomic<uint64_t> allocs{0}, frees{0};
  auto fail = [this](const absl::Status& st) { Fail(st); };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(77 + t);
      const PoolId pool = pools[shared_pool ? 0 : t];
      auto s = r.CreateStream(0, /*non_blocking=*/true);
      if (!s.ok()) return fail(s.status());
      std::vector<void*> live;
      for (int i = 0; i < kIters; ++i) {
        // A few sizes, so that the caches hit, miss and overflow.
        const uint64_t size = uint64_t{256} << (rng() % 4);
        if (live.size() < 8 && rng() % 2 == 0) {
          auto a = r.MallocFromPoolAsync(size, pool, *s);
          if (!a.ok()) {
            fail(a.status());
            continue;
          }
          ++allocs;
          live.push_back(a->ptr);
        } else if (!live.empty()) {
          const size_t k = rng() % live.size();
          fail(r.FreeAsync(live[k], *s));
          ++frees;
          live[k] = live.back();
          live.pop_back();
        }
        if (i % 1000 == 999) {
          // A stream's end flushes its caches; a new one takes a slot.
          for (void* p : live) {
            fail(r.FreeAsync(p, *s));
            ++frees;
          }
          live.clear();
          fail(r.DestroyStream(*s));
          s = r.CreateStream(0, /*non_blocking=*/true);
          if (!s.ok()) return fail(s.status());
        }
      }
      for (void* p : live) {
        fail(r.FreeAsync(p, *s));
        ++frees;
      }
      fail(r.StreamSynchronize(*s));
      fail(r.DestroyStream(*s));
    });
  }
  threads.emplace_back([&] {
    std::mt19937_64 rng(5);
    while (!done.load()) {
      const PoolId pool = pools[rng() % pools.size()];
      switch (rng() % 5) {
        case 0:
          fail(r.DeviceSynchronize(0));
          break;
        case 1:
          fail(r.TrimTo(pool, rng() % (4 << 20)));
          break;
        case 2:
          fail(r.SetPoolAttribute(pool, PoolAttr::kFrontCache, rng() % 2));
          break;
        case 3:
          fail(r.GetPoolStats(pool).status());
          break;
        case 4:
          fail(r.CheckPoolInvariants(pool));
          break;
      }
      std::this_thread::yield();
    }
  });
  for (int t = 0; t < kThreads; ++t) threads[t].join();
  done = true;
  threads.back().join();
  ExpectNoErrors();
  const PoolStats sum = Drained(r, pools);
  EXPECT_EQ(sum.alloc_count, allocs.load());
  EXPECT_EQ(sum.free_count, frees.load());
}

INSTANTIATE_TEST_SUITE_P(ExecutorsAndPools, FastPathThreadsTest,
                         ::testing::Combine(::testing::Values(ExecutorKind::kSimulator,
                                                              ExecutorKind::kThreads),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<ExecutorKind, bool>>& info) {
                           return std::string(std::get<0>(info.param) == ExecutorKind::kThreads
                                                  ? "Threads"
                                                  : "Simulator") +
                                  (std::get<1>(info.param) ? "_SharedPool" : "_PoolEach");
                         });

// Allocations another stream's frees serve (event dependencies, observed
// completion, inserted waits) and growth run under the pool's lock and the
// ordering core's, beside kernels, records, waits and synchronizes on other
// host threads: every pointer handed from a producer to a consumer thread is
// freed on the consumer's stream after a wait for the producer's event.
TEST_P(FastPathThreadsTest, CrossStreamReuseAndGrowthInterleaveSafely) {
  const auto [executor, shared_pool] = GetParam();
  std::unique_ptr<Runtime> rt = NewRuntime(executor);
  ASSERT_NE(rt, nullptr);
  Runtime& r = *rt;
  constexpr int kPairs = 2;
  constexpr int kIters = 1500;
  std::vector<PoolId> pools;
  for (int t = 0; t < (shared_pool ? 1 : kPairs); ++t) {
    PoolProps props;
    props.release_threshold = 0;  // syncs give memory back: growth recurs
    auto p = r.CreatePool(props);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(r.SetPoolAttribute(*p, PoolAttr::kReuseAllowInternalDependencies, 1).ok());
    pools.push_back(*p);
  }
  struct Handoff {
    absl::Mutex mu;
    std::vector<std::pair<void*, EventId>> items ABSL_GUARDED_BY(mu);
    bool closed ABSL_GUARDED_BY(mu) = false;
    // Recorded by the consumer after its frees: the producer waits for them,
    // so its next allocations may reuse those frees (rule 2).
    std::vector<EventId> back ABSL_GUARDED_BY(mu);
  };
  std::vector<Handoff> handoffs(kPairs);
  std::atomic<uint64_t> allocs{0}, frees{0};
  auto fail = [this](const absl::Status& st) { Fail(st); };
  std::vector<std::thread> threads;
  for (int t = 0; t < kPairs; ++t) {
    threads.emplace_back([&, t] {  // producer
      std::mt19937_64 rng(91 + t);
      const PoolId pool = pools[shared_pool ? 0 : t];
      auto s = r.CreateStream(0, /*non_blocking=*/true);
      if (!s.ok()) return fail(s.status());
      for (int i = 0; i < kIters; ++i) {
        // Small and large sizes: reuse of the consumer's frees, and growth.
        const uint64_t size =
            rng() % 8 == 0 ? (uint64_t{1} << 20) << (rng() % 3) : uint64_t{512} << (rng() % 6);
        auto a = r.MallocFromPoolAsync(size, pool, *s);
        if (!a.ok()) {
          fail(a.status());
          continue;
        }
        ++allocs;
        fail(r.LaunchKernel(*s, 500, {Access{a->ptr, size, true}}));
        auto e = r.CreateEvent();
        if (!e.ok()) return fail(e.status());
        fail(r.RecordEvent(*e, *s));
        std::vector<EventId> back;
        {
          Handoff& h = handoffs[t];
          absl::MutexLock lock(&h.mu);
          h.items.emplace_back(a->ptr, *e);
          // Every 16 allocations, in step with the consumer: its frees so
          // far become reusable here through its event.
          if (i % 16 == 15)
            h.mu.Await(absl::Condition(
                +[](Handoff* h) ABSL_NO_THREAD_SAFETY_ANALYSIS { return !h->back.empty(); }, &h));
          back.swap(h.back);
        }
        for (EventId b : back) {
          fail(r.StreamWaitEvent(*s, b));
          fail(r.DestroyEvent(b));
        }
      }
      fail(r.StreamSynchronize(*s));
      fail(r.DestroyStream(*s));
      absl::MutexLock lock(&handoffs[t].mu);
      handoffs[t].closed = true;
    });
    threads.emplace_back([&, t] {  // consumer
      auto s = r.CreateStream(0, /*non_blocking=*/true);
      if (!s.ok()) return fail(s.status());
      for (;;) {
        std::vector<std::pair<void*, EventId>> items;
        bool closed;
        {
          absl::MutexLock lock(&handoffs[t].mu);
          items.swap(handoffs[t].items);
          closed = handoffs[t].closed;
        }
        for (const auto& [ptr, e] : items) {
          fail(r.StreamWaitEvent(*s, e));
          fail(r.DestroyEvent(e));
          fail(r.LaunchKernel(*s, 200, {}));
          fail(r.FreeAsync(ptr, *s));
          ++frees;
        }
        if (closed && items.empty()) break;
        if (items.empty()) {
          std::this_thread::yield();
          continue;
        }
        if (closed) continue;
        auto back = r.CreateEvent();
        if (!back.ok()) return fail(back.status());
        fail(r.RecordEvent(*back, *s));
        absl::MutexLock lock(&handoffs[t].mu);
        handoffs[t].back.push_back(*back);
      }
      fail(r.StreamSynchronize(*s));
      fail(r.DestroyStream(*s));
    });
  }
  std::atomic<bool> done{false};
  std::thread maintenance([&] {
    std::mt19937_64 rng(6);
    while (!done.load()) {
      const PoolId pool = pools[rng() % pools.size()];
      switch (rng() % 4) {
        case 0:
          fail(r.DeviceSynchronize(0));
          break;
        case 1:
          fail(r.TrimTo(pool, 0));
          break;
        case 2:
          fail(r.GetPoolStats(pool).status());
          break;
        case 3:
          fail(r.CheckPoolInvariants(pool));
          break;
      }
      std::this_thread::yield();
    }
  });
  for (std::thread& th : threads) th.join();
  done = true;
  maintenance.join();
  ExpectNoErrors();
  const PoolStats sum = Drained(r, pools);
  EXPECT_EQ(sum.alloc_count, allocs.load());
  EXPECT_EQ(sum.free_count, frees.load());
  EXPECT_EQ(sum.alloc_count, uint64_t{kPairs} * kIters);
  // The paths under test ran: other streams' frees served allocations, and
  // pools grew again after synchronizes gave memory back.
  EXPECT_GT(sum.reuse_event_dependency + sum.reuse_opportunistic + sum.reuse_internal_dependency,
            0u);
  EXPECT_GT(sum.upstream_maps, uint64_t{kPairs});
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
