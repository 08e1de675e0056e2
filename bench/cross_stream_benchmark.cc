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
// streams never merge (DESIGN.md "Block lifecycle"); each stream keeps
// splitting its own frees into ever smaller pieces, and peak_reserved shows
// how far reserved memory drifts above peak_used.
//
// Counters (the last iteration's; every iteration replays the same program on
// a fresh runtime): allocations by rule, peak reserved, and time_per_step.
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

BENCHMARK(BM_Pool_CrossStream)
    ->ArgName("policies")
    ->DenseRange(0, 7)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace streampool::bench
