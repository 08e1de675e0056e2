// Frees on one stream, allocations on another: what each reuse policy buys and
// what the cross-stream checks cost.
//
// BM_Pool_CrossStream/policies:M: 4 non-blocking streams, 100 000 steps. Step
// i allocates a size uniform in [4 KiB, 64 KiB] (std::mt19937_64, seed 42) on
// stream i % 4 and frees, on stream (i + 1) % 4, the block step i - 8
// allocated. The block step i - 8 allocated was made on stream i % 4 too, so
// every block is freed on the stream after the one that made it, and that
// stream allocates in the very next step: rule 1 (the stream's own frees)
// can serve most requests, rules 2/3 only what rule 1 cannot fit.
// M is the policy bitmask (bench_common.h SetPolicies): bit 0 event
// dependencies, bit 1 opportunistic, bit 2 internal dependencies; 7 = all on
// (CUDA's default).
//
// Nothing runs on the streams but the pool's 0-ns marker ops and host time
// never advances, so every free is complete at virtual time 0: rule 3 sees
// every other-stream free as complete. No events are recorded, so rule 2
// never applies, and the device is large enough that growth never fails, so
// rule 5 never applies either; the masks differ only by whether rule 3 may
// serve what rule 1 cannot. Without rule 3 that is growth: nothing ever
// synchronizes, so no free becomes READY, and pending blocks of different
// streams never merge (docs/design.md "Block lifecycle"); each stream keeps
// splitting its own frees into ever smaller pieces, and peak_reserved shows
// how far reserved memory drifts above peak_used.
//
// Counters (the last iteration's; every iteration replays the same program on
// a fresh runtime): allocations by rule, peak reserved, and time_per_step.
//
// BM_Pool_CrossStreamThreads/ring:R: the same hand-over between two streams,
// but with the threads executor, so the streams really run on worker threads
// and what a free's completion means is decided by them, not by virtual time.
// One iteration is one step: the producer stream allocates 64 KiB and records
// `ready`; the consumer stream waits for `ready` and frees the block. With
// R > 0 the consumer also records consumed[i % R] after its free, and the
// producer waits for consumed[i % R] before step i's allocation (a ring of R
// buffers in flight, as a pipeline's back-pressure): the producer is then
// ordered after the consumer's free of step i - R, which is what rule 2
// (event dependencies) needs. With R = 0 nothing orders the producer after a
// free, so of the consumer's pending frees only those rule 3 sees its worker
// has executed can serve it, and how many those are depends on how far the
// workers lag behind the host. The consumer's frees go into its
// front cache, which the producer's central allocation flushes before growing
// (front_cache.h): the cost of that flush is in these figures too.
// All streams are synchronized every kThreadsSyncEvery steps inside the timed
// loop (so the time includes draining the workers, amortized over those
// steps; without it nothing bounds the workers' queues, as the host may
// enqueue faster than they run), and once more after it, untimed, before the
// counters are read. Counters: allocations by rule over the timed steps and
// event_dep_share / opportunistic_share, their fractions of the allocations.
// Expect after_sync to dominate in steady state, whatever R: a synchronize
// makes every free READY, rule 1 takes READY blocks before rule 2 looks at
// other streams' pending frees, and the last window's kThreadsSyncEvery
// blocks are exactly what the next window needs. So the pool settles at
// kThreadsSyncEvery x 64 KiB reserved (peak_reserved), not R blocks, and
// rules 2 and 3 serve only what READY memory happens to lack; a change to
// the pool's order of rules would show here as a change in these shares.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "bench/bench_common.h"
#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

namespace streampool::bench {
namespace {

constexpr int kStreams = 4;
constexpr size_t kSteps = 100000;
constexpr size_t kLag = 8;  // a block is freed this many steps after its allocation

const std::vector<uint32_t>& CrossStreamSizes() {
  static const std::vector<uint32_t>* sizes = [] {
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<uint32_t> size(4 * kKiB, 64 * kKiB);
    auto* v = new std::vector<uint32_t>(kSteps);
    for (uint32_t& s : *v) s = size(rng);
    return v;
  }();
  return *sizes;
}

void BM_Pool_CrossStream(benchmark::State& state) {
  const int64_t mask = state.range(0);
  const std::vector<uint32_t>& sizes = CrossStreamSizes();
  std::vector<void*> ptrs(kSteps, nullptr);
  spMemPoolStats stats{};
  for (auto _ : state) {
    state.PauseTiming();
    auto rt = std::make_unique<CRuntime>(kStreams, 64 * kGiB);
    if (!rt->ok() || !SetPolicies(rt->pool(), mask)) {
      state.SkipWithError("runtime setup failed");
      break;
    }
    spStream_t streams[kStreams];
    for (int i = 0; i < kStreams; ++i) streams[i] = rt->stream(i);
    state.ResumeTiming();
    bool ok = true;
    for (size_t i = 0; i < kSteps && ok; ++i) {
      ok = spMallocAsync(&ptrs[i], sizes[i], streams[i % kStreams]) == spSuccess;
      if (ok && i >= kLag) {
        ok = spFreeAsync(ptrs[i - kLag], streams[(i + 1) % kStreams]) == spSuccess;
      }
    }
    state.PauseTiming();
    if (!ok) {
      state.SkipWithError("a step failed");
      break;
    }
    stats = rt->Stats();
    rt.reset();  // frees the last kLag blocks with the runtime
    state.ResumeTiming();
  }
  ReportReuse(state, spMemPoolStats{}, stats);
  state.counters["policies"] = static_cast<double>(mask);
  state.counters["peak_reserved"] = Bytes(stats.reservedHigh);
  state.counters["peak_used"] = Bytes(stats.usedHigh);
  state.counters["time_per_step"] = TimePer(kSteps);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kSteps));
}

constexpr uint64_t kThreadsBlock = 64 * kKiB;
constexpr int64_t kThreadsSyncEvery = 1024;
constexpr int64_t kMaxRing = 64;

void BM_Pool_CrossStreamThreads(benchmark::State& state) {
  const int64_t ring = state.range(0);
  CRuntime rt(2, 64 * kGiB, spExecutorThreads);
  spStream_t producer = rt.ok() ? rt.stream(0) : nullptr;
  spStream_t consumer = rt.ok() ? rt.stream(1) : nullptr;
  spEvent_t ready = nullptr;
  spEvent_t consumed[kMaxRing] = {};
  bool ok = rt.ok() && ring >= 0 && ring <= kMaxRing && spEventCreate(&ready, rt.rt()) == spSuccess;
  for (int64_t i = 0; i < ring && ok; ++i) {
    ok = spEventCreate(&consumed[i], rt.rt()) == spSuccess;
  }
  if (!ok) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  int64_t step = 0;
  auto one_step = [&]() {
    void* p = nullptr;
    if (ring > 0 && step >= ring &&
        spStreamWaitEvent(producer, consumed[step % ring]) != spSuccess) {
      return false;
    }
    if (spMallocAsync(&p, kThreadsBlock, producer) != spSuccess ||
        spEventRecord(ready, producer) != spSuccess ||
        spStreamWaitEvent(consumer, ready) != spSuccess || spFreeAsync(p, consumer) != spSuccess) {
      return false;
    }
    if (ring > 0 && spEventRecord(consumed[step % ring], consumer) != spSuccess) return false;
    ++step;
    return true;
  };
  // One untimed step and a synchronize: the pool's first chunk is mapped and
  // the workers are running before the clock starts.
  if (!one_step() || spDeviceSynchronize(rt.rt(), 0) != spSuccess) {
    state.SkipWithError("warm-up step failed");
    return;
  }
  const spMemPoolStats before = rt.Stats();
  int64_t syncs = 0;
  for (auto _ : state) {
    if (!one_step()) {
      state.SkipWithError("a step failed");
      break;
    }
    if (step % kThreadsSyncEvery == 0) {
      if (spDeviceSynchronize(rt.rt(), 0) != spSuccess) {
        state.SkipWithError("synchronize failed");
        break;
      }
      ++syncs;
    }
  }
  if (spDeviceSynchronize(rt.rt(), 0) != spSuccess) {
    state.SkipWithError("final synchronize failed");
    return;
  }
  const spMemPoolStats after = rt.Stats();
  ReportReuse(state, before, after);
  const double allocs = static_cast<double>(after.allocCount - before.allocCount);
  auto share = [allocs](uint64_t n) { return allocs == 0 ? 0.0 : static_cast<double>(n) / allocs; };
  state.counters["event_dep_share"] =
      share(after.reuseEventDependency - before.reuseEventDependency);
  state.counters["opportunistic_share"] =
      share(after.reuseOpportunistic - before.reuseOpportunistic);
  state.counters["ring"] = static_cast<double>(ring);
  state.counters["syncs"] = static_cast<double>(syncs);
  state.counters["peak_reserved"] = Bytes(after.reservedHigh);
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_Pool_CrossStream)
    ->ArgName("policies")
    ->DenseRange(0, 7)
    ->Unit(benchmark::kMillisecond);

// Real time: the steps' cost includes waiting for the workers at each
// synchronize, which the host thread's CPU time would not show.
BENCHMARK(BM_Pool_CrossStreamThreads)->ArgName("ring")->Arg(0)->Arg(8)->UseRealTime();

}  // namespace
}  // namespace streampool::bench
