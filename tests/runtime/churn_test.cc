// Long-running embedders create and destroy streams and events as they go. A
// runtime must give back whatever a destroyed stream or event held: worker
// threads, clock slots, per-stream pool state, and memory. These tests churn
// through many streams and events (STREAMPOOL_CHURN_CYCLES; 20 000 under the
// simulator and 4 000 under the threads executor by default, the long form is
// 1 000 000) under both executors, with other
// host threads allocating and freeing on live streams meanwhile, and assert
// bounds on threads, clock width and resident memory — never on time.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
    if (i % 2 == 1) {
      ASSERT_TRUE(rt_->StreamSynchronize(*s).ok());
    }
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
  if (rss_at_tenth != 0) {
    EXPECT_LE(ResidentBytes(), rss_at_tenth + (8u << 20));
  }
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
    if (i % 4096 == 0) {
      ASSERT_TRUE(rt_->StreamSynchronize(*t).ok());
    }
    if (i == cycles / 10) rss_at_tenth = ResidentBytes();
  }
  bg.Stop();
  EXPECT_EQ(bg.errors(), 0u);
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  if (rss_at_tenth != 0) {
    EXPECT_LE(ResidentBytes(), rss_at_tenth + (8u << 20));
  }
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

// The soak: everything at once, from several host threads, for
// STREAMPOOL_SOAK_SECONDS (a fixed 3 000 steps per thread in CI): streams
// destroyed with frees pending and kernels running, events destroyed while
// waits on them are enqueued, pools destroyed with live allocations, growth
// modes and reuse switches mixed, syncs, queries and trims — with the
// stream-order checker on and every pool's invariants checked at the end.
TEST_P(ChurnTest, SoakMixesEverything) {
  const char* env = std::getenv("STREAMPOOL_SOAK_SECONDS");
  const int seconds = env != nullptr ? std::atoi(env) : 0;
  constexpr int kThreads = 3;
  constexpr int kStepsInCi = 3000;
  rt_->EnableChecker(true);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<uint64_t> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(4242 + t);
      auto fail = [&](const absl::Status& st) {
        if (!st.ok()) {
          ++errors;
          ADD_FAILURE() << st;
        }
      };
      struct Live {
        void* ptr;
        size_t stream;
      };
      std::vector<StreamId> streams;
      std::vector<EventId> events;
      std::vector<Live> live;
      PoolId pool = *rt_->DefaultPool(0);
      for (int step = 0;; ++step) {
        if (seconds > 0 ? std::chrono::steady_clock::now() >= deadline : step >= kStepsInCi) {
          break;
        }
        if (streams.size() < 2) {
          auto s = rt_->CreateStream(0, rng() % 2 == 0);
          if (!s.ok()) return fail(s.status());
          streams.push_back(*s);
          continue;
        }
        const size_t si = rng() % streams.size();
        const StreamId s = streams[si];
        switch (rng() % 12) {
          case 0:
          case 1:
          case 2: {  // allocate, maybe from a pool of our own
            auto a = rt_->MallocFromPoolAsync(64 + rng() % (3 << 20), pool, s);
            if (a.ok()) {
              live.push_back(Live{a->ptr, si});
              fail(rt_->LaunchKernel(s, rng() % 2000, {{a->ptr, 64, true}}));
            } else if (a.status().code() != absl::StatusCode::kResourceExhausted) {
              fail(a.status());
            }
            break;
          }
          case 3:
          case 4: {  // free, on its own stream or after an event on another
            if (live.empty()) break;
            const size_t k = rng() % live.size();
            const Live l = live[k];
            live[k] = live.back();
            live.pop_back();
            StreamId on = streams[l.stream];
            if (rng() % 3 == 0 && l.stream != si) {
              auto e = rt_->CreateEvent();
              if (!e.ok()) return fail(e.status());
              fail(rt_->RecordEvent(*e, streams[l.stream]));
              fail(rt_->StreamWaitEvent(s, *e));
              fail(rt_->DestroyEvent(*e));  // the wait keeps its snapshot
              on = s;
            }
            fail(rt_->FreeAsync(l.ptr, on));
            break;
          }
          case 5: {  // events kept a while, waited on and destroyed later
            auto e = rt_->CreateEvent();
            if (!e.ok()) return fail(e.status());
            fail(rt_->RecordEvent(*e, s));
            events.push_back(*e);
            if (events.size() > 4) {
              fail(rt_->StreamWaitEvent(streams[rng() % streams.size()], events.front()));
              fail(rt_->DestroyEvent(events.front()));
              events.erase(events.begin());
            }
            break;
          }
          case 6: {  // destroy a stream with whatever it has pending
            for (Live& l : live) {
              if (l.stream == si) {
                fail(rt_->FreeAsync(l.ptr, s));
                l.ptr = nullptr;
              }
            }
            live.erase(std::remove_if(live.begin(), live.end(),
                                      [](const Live& l) { return l.ptr == nullptr; }),
                       live.end());
            for (Live& l : live) {
              if (l.stream == streams.size() - 1) l.stream = si;
            }
            fail(rt_->DestroyStream(s));
            streams[si] = streams.back();
            streams.pop_back();
            break;
          }
          case 7:
            fail(rng() % 2 == 0 ? rt_->StreamSynchronize(s) : rt_->DeviceSynchronize(0));
            break;
          case 8: {
            const absl::Status q = rt_->StreamQuery(s);
            if (!q.ok() && q.code() != absl::StatusCode::kUnavailable) fail(q);
            fail(rt_->HostAdvance(rng() % 3000));
            break;
          }
          case 9:
            fail(rt_->TrimTo(pool, rng() % (8 << 20)));
            break;
          case 10:
            fail(rt_->SetPoolAttribute(pool,
                                       rng() % 2 == 0 ? PoolAttr::kReuseAllowOpportunistic
                                                      : PoolAttr::kReuseFollowEventDependencies,
                                       rng() % 2));
            break;
          case 11: {  // a pool of our own, destroyed with live allocations
            for (Live& l : live) fail(rt_->FreeAsync(l.ptr, streams[l.stream]));
            live.clear();
            const PoolId old = pool;
            PoolProps props;
            props.growth = rng() % 2 == 0 ? PoolGrowth::kChunked : PoolGrowth::kExpandable;
            props.max_size = uint64_t{64} << 20;
            auto p = rt_->CreatePool(props);
            if (!p.ok()) return fail(p.status());
            pool = *p;
            if (old != *rt_->DefaultPool(0)) {
              fail(rt_->CheckPoolInvariants(old));
              fail(rt_->DestroyPool(old));
            }
            break;
          }
        }
      }
      for (const Live& l : live) fail(rt_->FreeAsync(l.ptr, streams[l.stream]));
      for (EventId e : events) fail(rt_->DestroyEvent(e));
      for (StreamId s : streams) fail(rt_->DestroyStream(s));
      fail(rt_->CheckPoolInvariants(pool));
      if (pool != *rt_->DefaultPool(0)) fail(rt_->DestroyPool(pool));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0u);
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  EXPECT_TRUE(rt_->CheckPoolInvariants(*rt_->DefaultPool(0)).ok());
  EXPECT_TRUE(rt_->CheckReports().empty());
  auto stats = rt_->GetPoolStats(*rt_->DefaultPool(0));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->used_bytes, 0u);
  // Every slot's work is proven complete and every free promoted: at most as
  // many slots as streams were alive at once (threads x a few, the legacy one).
  EXPECT_LE(Slots(), 1u + kThreads * 8u);
}

INSTANTIATE_TEST_SUITE_P(Executors, ChurnTest,
                         ::testing::Values(ChurnParam{ExecutorKind::kSimulator, "Simulator"},
                                           ChurnParam{ExecutorKind::kThreads, "Threads"}),
                         [](const ::testing::TestParamInfo<ChurnParam>& p) {
                           return std::string(p.param.name);
                         });

}  // namespace
}  // namespace streampool
