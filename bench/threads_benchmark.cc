// Host threads sharing one runtime: does throughput scale with threads when
// each thread works on its own stream? (docs/design.md "Performance model": locks
// that do not serialize independent streams; goal: 2 threads >= 1.6x the
// items/s of 1, on a shared pool and on separate pools.)
//
// One process-wide runtime (address-only backing) with a non-blocking stream
// per thread on device 0. Each benchmark runs with 1, 2 and 4 threads and
// measures wall time (UseRealTime), so items_per_second is the throughput of
// all threads together and the n-thread/1-thread ratio is the scaling. CPU
// time is the whole process's (MeasureProcessCPUTime), so threads x CPU time /
// real time is how many cores the run actually got: on a loaded machine a
// 2-thread run may get far fewer than 2, and then no allocator can scale; with
// more threads than cores (4 on a 2-core machine) the figure shows what
// oversubscription costs (a preempted lock holder), not scaling.
//   BM_Pool_ThreadsPair         spMallocAsync + spFreeAsync of 1 KiB per
//                               item, every thread on the device's default
//                               pool, as CUDA programs do: one pool, a front
//                               cache per stream, so the pair never needs a
//                               lock another thread takes.
//   BM_Pool_ThreadsPairPoolEach the same pair through spMallocFromPoolAsync
//                               from a pool of the thread's own (one per
//                               thread index, made once): what sharing the
//                               pool costs, when the two differ.
//   BM_Pool_ThreadsRandom       the random program of bench_common.h, 200 000
//                               steps per iteration then frees of what is
//                               left (so the pool's state repeats), seed 42 +
//                               thread, on the default pool; an item is one
//                               step. Mostly the central path (random sizes
//                               rarely match a cached one exactly): it shows
//                               what the runtime lock serializes.
//   BM_Glibc_ThreadsPair / BM_Glibc_ThreadsRandom /
//   BM_Mimalloc_ThreadsPair     the same loops on the baselines: per-thread
//                               arenas and heaps, which scale as far as the
//                               machine does, so their ratio is the yardstick
//                               for what this machine allows.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/bench_common.h"
#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

namespace streampool::bench {
namespace {

constexpr int kMaxThreads = 4;
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

// A pool per thread index on the shared runtime, made on first use (by
// whichever thread gets there first: the static's initialization is the only
// synchronization needed) and kept for the process like the runtime. Empty
// when the runtime or any pool could not be made.
const std::vector<spMemPool_t>& ThreadPools() {
  static const std::vector<spMemPool_t>* pools = [] {
    auto* v = new std::vector<spMemPool_t>;
    CRuntime& rt = SharedRuntime();
    if (!rt.ok()) return v;
    spMemPoolProps props{};
    props.allocType = spMemAllocationTypeDevice;
    props.device = 0;
    uint64_t keep_all = UINT64_MAX;
    for (int i = 0; i < kMaxThreads; ++i) {
      spMemPool_t pool = nullptr;
      if (spMemPoolCreate(&pool, rt.rt(), &props) != spSuccess ||
          spMemPoolSetAttribute(pool, spMemPoolAttrReleaseThreshold, &keep_all) != spSuccess) {
        v->clear();
        return v;
      }
      v->push_back(pool);
    }
    return v;
  }();
  return *pools;
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

void BM_Pool_ThreadsPairPoolEach(benchmark::State& state) {
  CRuntime& rt = SharedRuntime();
  const std::vector<spMemPool_t>& pools = ThreadPools();
  if (!rt.ok() || pools.empty()) {
    state.SkipWithError("runtime or pool setup failed");
    return;
  }
  spStream_t s = rt.stream(state.thread_index());
  spMemPool_t pool = pools[state.thread_index()];
  for (auto _ : state) {
    void* p = nullptr;
    if (spMallocFromPoolAsync(&p, kPairSize, pool, s) != spSuccess ||
        spFreeAsync(p, s) != spSuccess) {
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

// 1, 2 and 4 threads; wall time for throughput, process CPU time for cores
// used.
void ThreadCounts(benchmark::internal::Benchmark* b) {
  b->Threads(1)->Threads(2)->Threads(kMaxThreads)->UseRealTime()->MeasureProcessCPUTime();
}

BENCHMARK(BM_Pool_ThreadsPair)->Apply(ThreadCounts);
BENCHMARK(BM_Pool_ThreadsPairPoolEach)->Apply(ThreadCounts);
BENCHMARK(BM_Glibc_ThreadsPair)->Apply(ThreadCounts);
BENCHMARK(BM_Mimalloc_ThreadsPair)->Apply(ThreadCounts);
BENCHMARK(BM_Pool_ThreadsRandom)->Apply(ThreadCounts)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Glibc_ThreadsRandom)->Apply(ThreadCounts)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace streampool::bench
