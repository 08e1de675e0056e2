// The threads executor: streams are worker threads, work really runs, waits
// really block. Producer/consumer pipelines move real bytes through pool
// memory with the checker's self-check on (ctest runs it fatal; here every
// test also asserts no report).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

std::unique_ptr<Runtime> ThreadsRuntime() {
  RuntimeConfig cfg;
  cfg.executor = ExecutorKind::kThreads;
  cfg.check_stream_order = true;
  cfg.device_capacity = uint64_t{256} << 20;
  auto rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return *std::move(rt);
}

TEST(ThreadExecutorTest, WorkRunsInStreamOrderOnAWorkerThread) {
  auto rt = ThreadsRuntime();
  auto s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  std::vector<int> order;
  std::atomic<bool> on_other_thread{true};
  const auto host = std::this_thread::get_id();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(rt->LaunchWork(*s, [&order, &on_other_thread, host, i] {
                    order.push_back(i);
                    if (std::this_thread::get_id() == host) on_other_thread = false;
                  }).ok());
  }
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(on_other_thread);
}

TEST(ThreadExecutorTest, EventWaitMakesTheConsumerSeeTheProducersBytes) {
  auto rt = ThreadsRuntime();
  auto producer = rt->CreateStream(0);
  auto consumer = rt->CreateStream(0);
  auto ev = rt->CreateEvent();
  ASSERT_TRUE(producer.ok() && consumer.ok() && ev.ok());
  constexpr int kRounds = 200;
  constexpr uint64_t kBytes = 64 << 10;
  std::atomic<int> bad{0};
  for (int round = 0; round < kRounds; ++round) {
    auto a = rt->MallocAsync(kBytes, *producer);
    ASSERT_TRUE(a.ok()) << a.status();
    auto* p = static_cast<unsigned char*>(a->ptr);
    const Access w{p, kBytes, true};
    ASSERT_TRUE(rt->LaunchWork(*producer,
                               [p, round] {
                                 // Slow enough that an unordered reader would see old bytes.
                                 std::this_thread::sleep_for(std::chrono::microseconds(50));
                                 std::memset(p, round & 0xff, kBytes);
                               },
                               {&w, 1})
                    .ok());
    ASSERT_TRUE(rt->RecordEvent(*ev, *producer).ok());
    ASSERT_TRUE(rt->StreamWaitEvent(*consumer, *ev).ok());
    const Access r{p, kBytes, false};
    ASSERT_TRUE(rt->LaunchWork(*consumer,
                               [p, round, &bad] {
                                 for (uint64_t i = 0; i < kBytes; i += 4096) {
                                   if (p[i] != (round & 0xff)) ++bad;
                                 }
                               },
                               {&r, 1})
                    .ok());
    // Freed on the consumer: the producer's next allocation may take it back
    // only through the pool's rules.
    ASSERT_TRUE(rt->FreeAsync(p, *consumer).ok());
  }
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(rt->CheckReports().empty()) << rt->CheckReports()[0].message;
  auto stats = rt->GetPoolStats(*rt->DefaultPool(0));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->alloc_count, static_cast<uint64_t>(kRounds));
  EXPECT_EQ(stats->used_bytes, 0u);
}

TEST(ThreadExecutorTest, SeveralHostThreadsRunPipelinesConcurrently) {
  auto rt = ThreadsRuntime();
  std::atomic<int> bad{0}, errors{0};
  std::vector<std::thread> hosts;
  for (int t = 0; t < 3; ++t) {
    hosts.emplace_back([&, t] {
      auto a = rt->CreateStream(0);
      auto b = rt->CreateStream(0, /*non_blocking=*/true);
      auto ev = rt->CreateEvent();
      if (!a.ok() || !b.ok() || !ev.ok()) {
        ++errors;
        return;
      }
      for (int i = 0; i < 100; ++i) {
        const uint64_t n = 4096 * (1 + (i + t) % 8);
        auto m = rt->MallocAsync(n, *a);
        if (!m.ok()) {
          ++errors;
          continue;
        }
        auto* p = static_cast<unsigned char*>(m->ptr);
        const unsigned char v = static_cast<unsigned char>(t * 31 + i);
        const Access acc{p, n, true};
        if (!rt->LaunchWork(*a, [p, n, v] { std::memset(p, v, n); }, {&acc, 1}).ok()) ++errors;
        if (!rt->RecordEvent(*ev, *a).ok() || !rt->StreamWaitEvent(*b, *ev).ok()) ++errors;
        const Access racc{p, n, false};
        if (!rt->LaunchWork(*b,
                            [p, n, v, &bad] {
                              if (p[0] != v || p[n - 1] != v) ++bad;
                            },
                            {&racc, 1})
                 .ok()) {
          ++errors;
        }
        if (!rt->FreeAsync(p, *b).ok()) ++errors;
        if (i % 25 == 24 && !rt->StreamSynchronize(*b).ok()) ++errors;
      }
      if (!rt->StreamSynchronize(*b).ok()) ++errors;
    });
  }
  for (auto& h : hosts) h.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(rt->CheckReports().empty());
  EXPECT_TRUE(rt->CheckPoolInvariants(*rt->DefaultPool(0)).ok());
}

TEST(ThreadExecutorTest, SynchronizeBlocksUntilWorkDoneAndQueryReportsProgress) {
  auto rt = ThreadsRuntime();
  auto s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  std::atomic<bool> release{false};
  ASSERT_TRUE(rt->LaunchWork(*s, [&release] {
                  while (!release.load()) std::this_thread::yield();
                }).ok());
  EXPECT_EQ(rt->StreamQuery(*s).code(), absl::StatusCode::kUnavailable);
  release = true;
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  EXPECT_TRUE(rt->StreamQuery(*s).ok());
}

TEST(ThreadExecutorTest, ApiCallsFromWorkAreRefused) {
  auto rt = ThreadsRuntime();
  auto s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  std::atomic<int> code{-1};
  spStream_t cs = s->c();
  ASSERT_TRUE(rt->LaunchHostFunc(*s, [&code, cs] { code = spStreamQuery(cs); }).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  EXPECT_EQ(code.load(), spErrorNotSupported);
}

TEST(ThreadExecutorTest, FreedMallocMemoryReturnsWhenTheFreeRuns) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.executor = spExecutorThreads;
  cfg.deviceCapacity = 8 << 20;
  spRuntime_t rt;
  ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  spStream_t s;
  ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
  void* p;
  ASSERT_EQ(spMalloc(&p, 8 << 20, rt, 0), spSuccess);
  ASSERT_EQ(spLaunchKernel(s, 2000000, nullptr, 0), spSuccess);  // 2 ms of "work"
  ASSERT_EQ(spFreeAsync(p, s), spSuccess);
  ASSERT_EQ(spStreamSynchronize(s), spSuccess);
  void* q;
  EXPECT_EQ(spMalloc(&q, 8 << 20, rt, 0), spSuccess);  // capacity came back
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
}

}  // namespace
}  // namespace streampool
