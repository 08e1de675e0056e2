// Long-running embedders create and destroy streams and events as they go. A
// runtime must give back whatever a destroyed stream or event held: worker
// threads, clock slots, per-stream pool state, and memory. These tests churn
// through many streams and events (STREAMPOOL_CHURN_CYCLES; 20 000 under the
// simulator and 4 000 under the threads executor by default, the long form is
// 1 000 000) under both executors, with other
// host threads allocating and freeing on live streams meanwhile, and assert
// bounds on threads, clock width and resident memory — never on time.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/runtime/runtime_impl.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

// The short form CI runs: a thread start and join per stream make the
// threads executor's cycle ~100x the simulator's.
uint64_t Cycles(ExecutorKind executor) {
  if (const char* env = std::getenv("STREAMPOOL_CHURN_CYCLES")) {
    const long long v = std::atoll(env);
    if (v > 0) return static_cast<uint64_t>(v);
  }
  return executor == ExecutorKind::kThreads ? 4000 : 20000;
}

// Threads of this process, from /proc/self/status.
int ThreadCount() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int n = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "Threads: %d", &n) == 1) break;
  }
  std::fclose(f);
  return n;
}

// Resident bytes of this process, from /proc/self/statm.
uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

struct ChurnParam {
  ExecutorKind executor;
  const char* name;
};

class ChurnTest : public ::testing::TestWithParam<ChurnParam> {
 protected:
  void SetUp() override {
    RuntimeConfig cfg;
    cfg.backing = Backing::kAddressOnly;
    cfg.device_capacity = uint64_t{8} << 30;
    cfg.executor = GetParam().executor;
    auto rt = Runtime::Create(cfg);
    ASSERT_TRUE(rt.ok()) << rt.status();
    rt_ = *std::move(rt);
  }
  // Slots the ordering core has ever made: the width every clock may reach.
  size_t Slots() { return rt_->impl().Introspect().clocks.size(); }

  std::unique_ptr<Runtime> rt_;
};

// Host threads that allocate and free on streams of their own while the
// main thread churns: the churn must not disturb them, nor they it.
class Background {
 public:
  Background(Runtime& rt, int threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, &rt, t] {
        std::mt19937_64 rng(77 + t);
        auto s = rt.CreateStream(0, /*non_blocking=*/true);
        if (!s.ok()) {
          ++errors_;
          return;
        }
        std::vector<void*> live;
        while (!stop_.load(std::memory_order_relaxed)) {
          if (live.size() < 16 && rng() % 2 == 0) {
            auto a = rt.MallocAsync(64 + rng() % (64 << 10), *s);
            if (!a.ok()) {
              ++errors_;
              break;
            }
            live.push_back(a->ptr);
          } else if (!live.empty()) {
            if (!rt.FreeAsync(live.back(), *s).ok()) ++errors_;
            live.pop_back();
          }
          ops_.fetch_add(1, std::memory_order_relaxed);
          // Contend, but leave the churning thread its share of two cores.
          std::this_thread::yield();
        }
        for (void* p : live) {
          if (!rt.FreeAsync(p, *s).ok()) ++errors_;
        }
        if (!rt.StreamSynchronize(*s).ok() || !rt.DestroyStream(*s).ok()) ++errors_;
      });
    }
  }
  ~Background() { Stop(); }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  uint64_t errors() const { return errors_.load(); }
  uint64_t ops() const { return ops_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> ops_{0};
  std::vector<std::thread> threads_;
};

TEST_P(ChurnTest, StreamCreateAllocFreeDestroyGivesEverythingBack) {
  constexpr int kBackground = 3;
  Background bg(*rt_, kBackground);
  const uint64_t cycles = Cycles(GetParam().executor);
  const int threads_before = ThreadCount();
  uint64_t rss_at_tenth = 0;
  size_t max_threads = 0;
  for (uint64_t i = 0; i < cycles; ++i) {
    auto s = rt_->CreateStream(0, /*non_blocking=*/i % 2 == 0);
    ASSERT_TRUE(s.ok()) << "cycle " << i << ": " << s.status();
    // Every other cycle leaves a free pending on the stream it destroys, so
    // slots are also retired with work and frees outstanding.
    auto a = rt_->MallocAsync(1 + i % 8192, *s);
    ASSERT_TRUE(a.ok()) << "cycle " << i << ": " << a.status();
    ASSERT_TRUE(rt_->FreeAsync(a->ptr, *s).ok());
    if (i % 2 == 1) ASSERT_TRUE(rt_->StreamSynchronize(*s).ok());
    ASSERT_TRUE(rt_->DestroyStream(*s).ok());
    if (i % 1024 == 0) {
      max_threads = std::max<size_t>(max_threads, ThreadCount());
      if (i == cycles / 10) rss_at_tenth = ResidentBytes();
    }
  }
  bg.Stop();
  EXPECT_EQ(bg.errors(), 0u);
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  // Threads: the background streams' workers and a few destroyed ones not
  // yet joined, never one per stream ever made.
  EXPECT_LE(max_threads, static_cast<size_t>(threads_before + 2 * kBackground + 8));
  // Slots: as many as streams were alive at once (the churned one, the
  // legacy stream, the background streams) plus destroyed ones whose work
  // was still running, far below the number of streams made.
  EXPECT_LE(Slots(), 2u + kBackground + 16u) << "after " << cycles << " streams";
  // Memory: after the first tenth, growth stays within 8 MiB (allocator
  // noise), however many cycles follow.
  if (rss_at_tenth != 0) EXPECT_LE(ResidentBytes(), rss_at_tenth + (8u << 20));
}

TEST_P(ChurnTest, EventCreateRecordWaitDestroyGivesEverythingBack) {
  Background bg(*rt_, 2);
  auto s = rt_->CreateStream(0);
  auto t = rt_->CreateStream(0);
  ASSERT_TRUE(s.ok() && t.ok());
  const uint64_t cycles = Cycles(GetParam().executor);
  uint64_t rss_at_tenth = 0;
  for (uint64_t i = 0; i < cycles; ++i) {
    auto e = rt_->CreateEvent();
    ASSERT_TRUE(e.ok()) << "cycle " << i << ": " << e.status();
    ASSERT_TRUE(rt_->RecordEvent(*e, *s).ok());
    ASSERT_TRUE(rt_->StreamWaitEvent(*t, *e).ok());
    // Destroyed while a wait on it is still enqueued: the wait keeps its
    // snapshot, the event goes.
    ASSERT_TRUE(rt_->DestroyEvent(*e).ok());
    if (i % 4096 == 0) ASSERT_TRUE(rt_->StreamSynchronize(*t).ok());
    if (i == cycles / 10) rss_at_tenth = ResidentBytes();
  }
  bg.Stop();
  EXPECT_EQ(bg.errors(), 0u);
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  if (rss_at_tenth != 0) EXPECT_LE(ResidentBytes(), rss_at_tenth + (8u << 20));
  ASSERT_TRUE(rt_->DestroyStream(*s).ok());
  ASSERT_TRUE(rt_->DestroyStream(*t).ok());
}

// A destroyed stream's slot is reused only once nothing can refer to its
// positions: a free pending on it keeps the slot retired (strict mode: no
// promotion without a sync) and, once a sync proves the free, the slot comes
// back and the successor's positions continue the old ones.
TEST_P(ChurnTest, SlotReuseWaitsForPendingFreesAndContinuesPositions) {
  auto pool = rt_->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(rt_->SetPoolAttribute(*pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  auto s = rt_->CreateStream(0);
  ASSERT_TRUE(s.ok());
  const StreamIndex slot = *rt_->impl().StreamIndexOf(s->value);
  auto a = rt_->MallocAsync(4096, *s);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(rt_->FreeAsync(a->ptr, *s).ok());
  const Position last = rt_->impl().Introspect().positions[slot];
  ASSERT_TRUE(rt_->DestroyStream(*s).ok());
  // The free is pending and unproven: a new stream gets another slot.
  auto s2 = rt_->CreateStream(0);
  ASSERT_TRUE(s2.ok());
  EXPECT_NE(*rt_->impl().StreamIndexOf(s2->value), slot);
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  // Proven and promoted: the slot is reused, positions continuing.
  StreamId s3;
  for (int tries = 0; tries < 8; ++tries) {
    auto n = rt_->CreateStream(0);
    ASSERT_TRUE(n.ok());
    s3 = *n;
    if (*rt_->impl().StreamIndexOf(s3.value) == slot) break;
  }
  ASSERT_EQ(*rt_->impl().StreamIndexOf(s3.value), slot);
  auto b = rt_->MallocAsync(4096, s3);
  ASSERT_TRUE(b.ok());
  EXPECT_GT(rt_->impl().Introspect().positions[slot], last);
  ASSERT_TRUE(rt_->FreeAsync(b->ptr, s3).ok());
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
}

INSTANTIATE_TEST_SUITE_P(Executors, ChurnTest,
                         ::testing::Values(ChurnParam{ExecutorKind::kSimulator, "Simulator"},
                                           ChurnParam{ExecutorKind::kThreads, "Threads"}),
                         [](const ::testing::TestParamInfo<ChurnParam>& p) {
                           return std::string(p.param.name);
                         });

}  // namespace
}  // namespace streampool
