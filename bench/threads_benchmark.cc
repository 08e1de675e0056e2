// Host threads sharing one runtime: does throughput scale with threads when
// each thread works on its own stream? (DESIGN.md "Performance model": locks
// that do not serialize independent streams; goal: 2 threads >= 1.6x the
// items/s of 1.)
//
// One process-wide runtime (address-only backing) with a non-blocking stream
// per thread on device 0; every thread allocates from the device's default
// pool, as CUDA programs do. Each benchmark runs with 1 and with 2 threads and
// measures wall time (UseRealTime), so items_per_second is the throughput of
// all threads together and the 2-thread/1-thread ratio is the scaling. CPU
// time is the whole process's (MeasureProcessCPUTime), so threads x CPU time /
// real time is how many cores the run actually got: on a loaded machine a
// 2-thread run may get far fewer than 2, and then no allocator can scale.
//   BM_Pool_ThreadsPair     spMallocAsync + spFreeAsync of 1 KiB per item.
//   BM_Pool_ThreadsRandom   the random program of bench_common.h, 200 000
//                           steps per iteration then frees of what is left
//                           (so the pool's state repeats), seed 42 + thread;
//                           an item is one step.
//   BM_Glibc_ThreadsPair / BM_Glibc_ThreadsRandom /
//   BM_Mimalloc_ThreadsPair the same loops on the baselines: per-thread
//                           arenas and heaps, which scale as far as the
//                           machine does, so their ratio is the yardstick
//                           for what this machine allows.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/bench_common.h"
#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

namespace streampool::bench {
namespace {

constexpr int kMaxThreads = 2;
constexpr uint64_t kPairSize = 1 * kKiB;
constexpr size_t kRandomSteps = 200000;
constexpr uint64_t kRandomCap = 8 * kGiB;  // per thread
constexpr uint32_t kRandomMaxSize = 1 << 20;

// Created on first use and kept for the process: the runtime is shared by
// every benchmark run here, each thread always using stream[thread_index].
CRuntime& SharedRuntime() {
  static CRuntime* rt = new CRuntime(kMaxThreads, 64 * kGiB);
  return *rt;
}

const Trace& ThreadTrace(int thread) {
  static const std::vector<Trace>* traces = [] {
    auto* v = new std::vector<Trace>;
    for (int i = 0; i < kMaxThreads; ++i) {
      v->push_back(MakeRandomTrace(42 + i, kRandomSteps, kRandomCap, kRandomMaxSize,
                                   /*drain=*/true));
    }
    return v;
  }();
  return (*traces)[thread];
}

void BM_Pool_ThreadsPair(benchmark::State& state) {
  CRuntime& rt = SharedRuntime();
  if (!rt.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  spStream_t s = rt.stream(state.thread_index());
  for (auto _ : state) {
    void* p = nullptr;
    if (spMallocAsync(&p, kPairSize, s) != spSuccess || spFreeAsync(p, s) != spSuccess) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Pool_ThreadsRandom(benchmark::State& state) {
  CRuntime& rt = SharedRuntime();
  if (!rt.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  spStream_t s = rt.stream(state.thread_index());
  const Trace& t = ThreadTrace(state.thread_index());
  std::vector<void*> ptrs(t.slots);
  bool ok = true;
  for (auto _ : state) {
    for (const TraceOp& op : t.ops) {
      ok = (op.size != 0 ? spMallocAsync(&ptrs[op.slot], op.size, s)
                         : spFreeAsync(ptrs[op.slot], s)) == spSuccess;
      if (!ok) break;
    }
    if (!ok) {
      state.SkipWithError("a step failed");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * t.ops.size()));
  if (state.thread_index() == 0) {
    state.counters["peak_reserved"] = Bytes(rt.Stats().reservedHigh);
  }
}

template <void* (*Alloc)(size_t), void (*Free)(void*)>
void HeapThreadsPair(benchmark::State& state) {
  for (auto _ : state) {
    void* p = Alloc(kPairSize);
    benchmark::DoNotOptimize(p);
    Free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

template <void* (*Alloc)(size_t), void (*Free)(void*)>
void HeapThreadsRandom(benchmark::State& state) {
  const Trace& t = ThreadTrace(state.thread_index());
  std::vector<void*> ptrs(t.slots);
  for (auto _ : state) {
    for (const TraceOp& op : t.ops) {
      if (op.size != 0) {
        ptrs[op.slot] = Alloc(op.size);
        benchmark::DoNotOptimize(ptrs[op.slot]);
      } else {
        Free(ptrs[op.slot]);
      }
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * t.ops.size()));
}

void BM_Glibc_ThreadsPair(benchmark::State& state) {
  HeapThreadsPair<GlibcMalloc, GlibcFree>(state);
}
void BM_Mimalloc_ThreadsPair(benchmark::State& state) { HeapThreadsPair<MiMalloc, MiFree>(state); }
void BM_Glibc_ThreadsRandom(benchmark::State& state) {
  HeapThreadsRandom<GlibcMalloc, GlibcFree>(state);
}

// 1 and 2 threads; wall time for throughput, process CPU time for cores used.
void OneAndTwoThreads(benchmark::internal::Benchmark* b) {
  b->Threads(1)->Threads(2)->UseRealTime()->MeasureProcessCPUTime();
}

BENCHMARK(BM_Pool_ThreadsPair)->Apply(OneAndTwoThreads);
BENCHMARK(BM_Glibc_ThreadsPair)->Apply(OneAndTwoThreads);
BENCHMARK(BM_Mimalloc_ThreadsPair)->Apply(OneAndTwoThreads);
BENCHMARK(BM_Pool_ThreadsRandom)->Apply(OneAndTwoThreads)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Glibc_ThreadsRandom)->Apply(OneAndTwoThreads)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace streampool::bench
