// The reuse policies on a producer/consumer pipeline in virtual time: what each
// of the 8 combinations costs in peak reserved memory, in virtual makespan and
// in waits the pool inserts. The figures are the counters; the wall time of a
// run is incidental (host-side cost of the whole program).
//
// BM_Pool_ProducerConsumer/policies:M/max_size_mib:X, M the bitmask of
// bench_common.h SetPolicies (bit 0 event dependencies, bit 1 opportunistic,
// bit 2 internal dependencies), X the pool's maxSize in MiB: 64 (tight: about
// three times the bytes in flight, so growth fails and rule 5 or an
// out-of-memory sync decides) or 1024 (the device: what each policy reserves
// when growth is free). One producer stream P and kConsumers consumer
// streams, all non-blocking, one pool. Round r (kRounds of them):
//   1. r >= kDepth: P waits for event consumed[r % kDepth], recorded when the
//      consumer of round r - kDepth had freed its buffer (a ring of kDepth
//      buffers in flight: back-pressure on the device, not the host);
//   2. P allocates a frame buffer, size uniform in [1 MiB, 4 MiB] (seed 42),
//      and fills it with a kernel of kProduceNs; records ready[r];
//   3. consumer c = r % kConsumers waits for ready[r], reads the buffer with a
//      kernel of kConsumeNs, frees it, records consumed[r % kDepth];
//   4. the host spends kHostNsPerRound (launch overhead).
// The host issues faster than the device drains (kHostNsPerRound is less than
// kProduceNs), so the host runs ahead and, at the moment it allocates, few
// frees are complete in virtual time:
//   - rule 2 sees the frees P is already ordered after (through consumed[]);
//   - rule 3 sees only frees complete by host time;
//   - rule 5, once growth hits maxSize, makes P wait for the earliest free;
//   - with none of them, an allocation that cannot grow fails, and the
//     program does what a framework does on out-of-memory: synchronizes the
//     device (every free becomes READY) and retries. oom_syncs counts those.
// The makespan is host time after the final device synchronize.
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

constexpr int kConsumers = 3;
constexpr size_t kRounds = 2000;
constexpr size_t kDepth = 8;
constexpr uint64_t kProduceNs = 50000;
constexpr uint64_t kConsumeNs = 120000;
constexpr uint64_t kHostNsPerRound = 20000;

const std::vector<uint32_t>& FrameSizes() {
  static const std::vector<uint32_t>* sizes = [] {
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<uint32_t> size(1 * kMiB, 4 * kMiB);
    auto* v = new std::vector<uint32_t>(kRounds);
    for (uint32_t& s : *v) s = size(rng);
    return v;
  }();
  return *sizes;
}

struct Outcome {
  bool ok = false;
  spMemPoolStats stats{};
  uint64_t makespan_ns = 0;
  uint64_t oom_syncs = 0;
};

// One run of the pipeline on a fresh runtime. Everything it creates is
// destroyed with the runtime.
Outcome RunPipeline(int64_t mask, uint64_t max_size) {
  Outcome out;
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.backing = spBackingAddressOnly;
  spRuntime_t rt = nullptr;
  if (spRuntimeCreate(&rt, &cfg) != spSuccess) return out;
  struct Destroy {
    spRuntime_t rt;
    ~Destroy() { spRuntimeDestroy(rt); }
  } destroy{rt};

  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  props.device = 0;
  props.maxSize = max_size;
  spMemPool_t pool = nullptr;
  uint64_t keep_all = UINT64_MAX;
  spStream_t producer = nullptr;
  spStream_t consumers[kConsumers] = {};
  spEvent_t ready = nullptr;
  spEvent_t consumed[kDepth] = {};
  bool ok = spMemPoolCreate(&pool, rt, &props) == spSuccess &&
            spMemPoolSetAttribute(pool, spMemPoolAttrReleaseThreshold, &keep_all) == spSuccess &&
            SetPolicies(pool, mask) &&
            spStreamCreate(&producer, rt, 0, spStreamNonBlocking) == spSuccess &&
            spEventCreate(&ready, rt) == spSuccess;
  for (spStream_t& c : consumers) {
    ok = ok && spStreamCreate(&c, rt, 0, spStreamNonBlocking) == spSuccess;
  }
  for (spEvent_t& e : consumed) ok = ok && spEventCreate(&e, rt) == spSuccess;
  if (!ok) return out;

  const std::vector<uint32_t>& sizes = FrameSizes();
  for (size_t r = 0; r < kRounds; ++r) {
    if (r >= kDepth && spStreamWaitEvent(producer, consumed[r % kDepth]) != spSuccess) return out;
    void* buf = nullptr;
    spError_t e = spMallocFromPoolAsync(&buf, sizes[r], pool, producer);
    if (e == spErrorMemoryAllocation) {
      // Out of memory: wait for the device, which makes every free READY,
      // and retry once.
      ++out.oom_syncs;
      if (spDeviceSynchronize(rt, 0) != spSuccess) return out;
      e = spMallocFromPoolAsync(&buf, sizes[r], pool, producer);
    }
    if (e != spSuccess) return out;
    const spAccess write{buf, sizes[r], 1};
    const spAccess read{buf, sizes[r], 0};
    spStream_t c = consumers[r % kConsumers];
    if (spLaunchKernel(producer, kProduceNs, &write, 1) != spSuccess ||
        spEventRecord(ready, producer) != spSuccess || spStreamWaitEvent(c, ready) != spSuccess ||
        spLaunchKernel(c, kConsumeNs, &read, 1) != spSuccess || spFreeAsync(buf, c) != spSuccess ||
        spEventRecord(consumed[r % kDepth], c) != spSuccess ||
        spHostAdvance(rt, kHostNsPerRound) != spSuccess) {
      return out;
    }
  }
  if (spMemPoolGetStats(pool, &out.stats) != spSuccess || spDeviceSynchronize(rt, 0) != spSuccess ||
      spHostNow(rt, &out.makespan_ns) != spSuccess) {
    return out;
  }
  out.ok = true;
  return out;
}

void BM_Pool_ProducerConsumer(benchmark::State& state) {
  const int64_t mask = state.range(0);
  const uint64_t max_size = static_cast<uint64_t>(state.range(1)) * kMiB;
  Outcome last;
  for (auto _ : state) {
    last = RunPipeline(mask, max_size);
    if (!last.ok) {
      state.SkipWithError("the pipeline failed (allocation after an out-of-memory sync?)");
      break;
    }
  }
  ReportReuse(state, spMemPoolStats{}, last.stats);
  state.counters["policies"] = static_cast<double>(mask);
  state.counters["max_size"] = Bytes(max_size);
  state.counters["peak_reserved"] = Bytes(last.stats.reservedHigh);
  state.counters["peak_used"] = Bytes(last.stats.usedHigh);
  state.counters["makespan_us"] = static_cast<double>(last.makespan_ns) / 1000.0;
  state.counters["oom_syncs"] = static_cast<double>(last.oom_syncs);
  // The device-bound lower limit: every frame's producer kernel back to back,
  // then the last consumer kernel.
  state.counters["bound_us"] = static_cast<double>(kRounds * kProduceNs + kConsumeNs) / 1000.0;
}

BENCHMARK(BM_Pool_ProducerConsumer)
    ->ArgNames({"policies", "max_size_mib"})
    ->ArgsProduct({benchmark::CreateDenseRange(0, 7, 1), {64, 1024}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace streampool::bench
