// Costs that must not grow with history or size (issue: long-running
// embedders). Setup — the history of streams and events that came and went,
// the live allocations — runs outside the timed region.
//
// BM_Runtime_StreamCycle/executor:E/history:H  one create / 64 B alloc / free
//     / destroy cycle after H streams were made and destroyed (E: 0 simulator,
//     1 threads). Flat in H: slots are reused, clocks are as wide as the
//     streams alive. items/s is streams created and destroyed per second.
// BM_Runtime_EventCycle/history:H  one event create / record / destroy after
//     H events came and went.
// BM_Runtime_PairAfterHistory/history:H  a 64 B alloc/free pair on a stream
//     made before H other streams came and went.
// BM_Pool_PairWithLive/live:N  a 64 B alloc/free pair with N allocations of
//     64 B live in the same pool (the index and the pointer map at size N).
// BM_Runtime_MemoryPerStream, BM_Runtime_MemoryPerLiveAllocation  host bytes
//     (RSS growth) per live stream and per live 64 B allocation, as counters.
// Baseline in the same binary: glibc's 64 B malloc/free pair with N live.
#include <cstdint>
#include <vector>

#include "bench/bench_common.h"
#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

namespace streampool::bench {
namespace {

spRuntime_t NewRuntime(int executor) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.backing = spBackingAddressOnly;
  cfg.deviceCapacity = 64 * kGiB;
  cfg.executor = executor == 0 ? spExecutorSimulator : spExecutorThreads;
  spRuntime_t rt = nullptr;
  if (spRuntimeCreate(&rt, &cfg) != spSuccess) return nullptr;
  return rt;
}

bool StreamCycle(spRuntime_t rt) {
  spStream_t s;
  void* p;
  return spStreamCreate(&s, rt, 0, spStreamNonBlocking) == spSuccess &&
         spMallocAsync(&p, 64, s) == spSuccess && spFreeAsync(p, s) == spSuccess &&
         spStreamDestroy(s) == spSuccess;
}

void BM_Runtime_StreamCycle(benchmark::State& state) {
  const int executor = static_cast<int>(state.range(0));
  const int64_t history = state.range(1);
  spRuntime_t rt = NewRuntime(executor);
  bool ok = rt != nullptr;
  for (int64_t i = 0; i < history && ok; ++i) ok = StreamCycle(rt);
  for (auto _ : state) {
    if (!ok || !(ok = StreamCycle(rt))) break;
  }
  if (!ok) state.SkipWithError("a stream cycle failed");
  state.SetItemsProcessed(state.iterations());
  if (rt != nullptr) spRuntimeDestroy(rt);
}
BENCHMARK(BM_Runtime_StreamCycle)
    ->ArgNames({"executor", "history"})
    ->Args({0, 10})
    ->Args({0, 1000000})
    ->Args({1, 10})
    ->Args({1, 100000});

bool EventCycle(spRuntime_t rt, spStream_t s) {
  spEvent_t e;
  return spEventCreate(&e, rt) == spSuccess && spEventRecord(e, s) == spSuccess &&
         spEventDestroy(e) == spSuccess;
}

void BM_Runtime_EventCycle(benchmark::State& state) {
  const int64_t history = state.range(0);
  spRuntime_t rt = NewRuntime(0);
  spStream_t s = nullptr;
  bool ok = rt != nullptr && spStreamCreate(&s, rt, 0, spStreamNonBlocking) == spSuccess;
  for (int64_t i = 0; i < history && ok; ++i) ok = EventCycle(rt, s);
  for (auto _ : state) {
    if (!ok || !(ok = EventCycle(rt, s))) break;
  }
  if (!ok) state.SkipWithError("an event cycle failed");
  state.SetItemsProcessed(state.iterations());
  if (rt != nullptr) spRuntimeDestroy(rt);
}
BENCHMARK(BM_Runtime_EventCycle)->ArgName("history")->Arg(10)->Arg(1000000);

void BM_Runtime_PairAfterHistory(benchmark::State& state) {
  const int64_t history = state.range(0);
  spRuntime_t rt = NewRuntime(0);
  spStream_t old = nullptr;
  bool ok = rt != nullptr && spStreamCreate(&old, rt, 0, spStreamNonBlocking) == spSuccess;
  for (int64_t i = 0; i < history && ok; ++i) ok = StreamCycle(rt);
  void* p;
  for (auto _ : state) {
    if (!ok) break;
    ok = spMallocAsync(&p, 64, old) == spSuccess && spFreeAsync(p, old) == spSuccess;
  }
  if (!ok) state.SkipWithError("a pair failed");
  state.SetItemsProcessed(state.iterations());
  if (rt != nullptr) spRuntimeDestroy(rt);
}
BENCHMARK(BM_Runtime_PairAfterHistory)->ArgName("history")->Arg(10)->Arg(1000000);

void BM_Pool_PairWithLive(benchmark::State& state) {
  const int64_t live = state.range(0);
  CRuntime rt;
  std::vector<void*> keep(live);
  bool ok = rt.ok();
  for (int64_t i = 0; i < live && ok; ++i) {
    ok = spMallocAsync(&keep[i], 64, rt.stream()) == spSuccess;
  }
  void* p;
  for (auto _ : state) {
    if (!ok) break;
    ok =
        spMallocAsync(&p, 64, rt.stream()) == spSuccess && spFreeAsync(p, rt.stream()) == spSuccess;
  }
  if (!ok) state.SkipWithError("a pair failed");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Pool_PairWithLive)->ArgName("live")->Arg(1000)->Arg(1000000);

void BM_Glibc_PairWithLive(benchmark::State& state) {
  const int64_t live = state.range(0);
  std::vector<void*> keep(live);
  for (void*& k : keep) k = GlibcMalloc(64);
  for (auto _ : state) {
    void* p = GlibcMalloc(64);
    benchmark::DoNotOptimize(p);
    GlibcFree(p);
  }
  for (void* k : keep) GlibcFree(k);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Glibc_PairWithLive)->ArgName("live")->Arg(1000)->Arg(1000000);

// Host memory: RSS growth per live stream (each with one allocation made)
// and per live 64 B allocation, measured once per run.
void BM_Runtime_MemoryPerStream(benchmark::State& state) {
  const int executor = static_cast<int>(state.range(0));
  constexpr int kStreams = 2000;
  double per_stream = 0;
  for (auto _ : state) {
    state.PauseTiming();
    spRuntime_t rt = NewRuntime(executor);
    std::vector<spStream_t> streams(kStreams);
    const uint64_t before = CurrentRssBytes();
    bool ok = rt != nullptr;
    for (spStream_t& s : streams) {
      void* p;
      ok = ok && spStreamCreate(&s, rt, 0, spStreamNonBlocking) == spSuccess &&
           spMallocAsync(&p, 64, s) == spSuccess && spFreeAsync(p, s) == spSuccess;
    }
    const uint64_t after = CurrentRssBytes();
    per_stream = static_cast<double>(after - before) / kStreams;
    if (rt != nullptr) spRuntimeDestroy(rt);
    state.ResumeTiming();
    if (!ok) {
      state.SkipWithError("stream creation failed");
      break;
    }
  }
  state.counters["bytes_per_stream"] = per_stream;
}
BENCHMARK(BM_Runtime_MemoryPerStream)->ArgName("executor")->Arg(0)->Arg(1)->Iterations(1);

void BM_Runtime_MemoryPerLiveAllocation(benchmark::State& state) {
  constexpr int kLive = 1000000;
  double per_alloc = 0;
  for (auto _ : state) {
    state.PauseTiming();
    CRuntime rt;
    std::vector<void*> keep(kLive);
    const uint64_t before = CurrentRssBytes();
    bool ok = rt.ok();
    for (void*& p : keep) ok = ok && spMallocAsync(&p, 64, rt.stream()) == spSuccess;
    per_alloc = static_cast<double>(CurrentRssBytes() - before) / kLive;
    state.ResumeTiming();
    if (!ok) {
      state.SkipWithError("allocation failed");
      break;
    }
  }
  // The vector of pointers is zeroed (touched) before the first reading.
  state.counters["bytes_per_live_allocation"] = per_alloc;
}
BENCHMARK(BM_Runtime_MemoryPerLiveAllocation)->Iterations(1);

}  // namespace
}  // namespace streampool::bench
