// What the benchmark binaries share: the baseline allocators under names that
// cannot be overridden, a C API runtime fixture, the seeded random workload
// every allocator replays identically, and the pool counters.
//
// Not a benchmark itself (bench/CMakeLists.txt builds only *_benchmark.cc).
#ifndef STREAMPOOL_BENCH_BENCH_COMMON_H_
#define STREAMPOOL_BENCH_BENCH_COMMON_H_

#include <mimalloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

// glibc's allocator under its exported internal names. Every benchmark binary
// links Debian's shared mimalloc, which overrides plain malloc/free for the
// whole process, so a glibc baseline has to call glibc by these names.
extern "C" void* __libc_malloc(size_t size);
extern "C" void __libc_free(void* ptr);

namespace streampool::bench {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;

inline void* GlibcMalloc(size_t n) { return __libc_malloc(n); }
inline void GlibcFree(void* p) { __libc_free(p); }
inline void* MiMalloc(size_t n) { return mi_malloc(n); }
inline void MiFree(void* p) { mi_free(p); }

// A C API runtime with address-only backing (nothing is touched, so every
// figure is host-side bookkeeping) and `streams` non-blocking streams on
// device 0. The default pool never shrinks (release threshold UINT64_MAX):
// the benchmarks time reuse, not the upstream. The simulator unless told
// otherwise: with spExecutorThreads every stream is a worker thread, so a
// figure includes handing ops to them.
class CRuntime {
 public:
  explicit CRuntime(int streams = 1, uint64_t capacity = 64 * kGiB,
                    spExecutorKind executor = spExecutorSimulator) {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.backing = spBackingAddressOnly;
    cfg.deviceCapacity = capacity;
    cfg.executor = executor;
    ok_ = spRuntimeCreate(&rt_, &cfg) == spSuccess &&
          spDeviceGetDefaultMemPool(&pool_, rt_, 0) == spSuccess;
    streams_.resize(streams);
    for (spStream_t& s : streams_) {
      ok_ = ok_ && spStreamCreate(&s, rt_, 0, spStreamNonBlocking) == spSuccess;
    }
    uint64_t keep_all = UINT64_MAX;
    ok_ =
        ok_ && spMemPoolSetAttribute(pool_, spMemPoolAttrReleaseThreshold, &keep_all) == spSuccess;
  }
  ~CRuntime() {
    if (rt_ != nullptr) spRuntimeDestroy(rt_);
  }
  CRuntime(const CRuntime&) = delete;
  CRuntime& operator=(const CRuntime&) = delete;

  bool ok() const { return ok_; }
  spRuntime_t rt() const { return rt_; }
  spStream_t stream(size_t i = 0) const { return streams_[i]; }
  spMemPool_t pool() const { return pool_; }
  spMemPoolStats Stats() const {
    spMemPoolStats s{};
    spMemPoolGetStats(pool_, &s);
    return s;
  }

 private:
  bool ok_ = false;
  spRuntime_t rt_ = nullptr;
  spMemPool_t pool_ = nullptr;
  std::vector<spStream_t> streams_;
};

// Sets the three policy switches from a bitmask: bit 0 follow event
// dependencies (rule 2), bit 1 opportunistic (rule 3), bit 2 internal
// dependencies (rule 5). 7 is CUDA's default, all on.
inline bool SetPolicies(spMemPool_t pool, int64_t mask) {
  int events = (mask & 1) != 0, opportunistic = (mask & 2) != 0, internal = (mask & 4) != 0;
  return spMemPoolSetAttribute(pool, spMemPoolReuseFollowEventDependencies, &events) == spSuccess &&
         spMemPoolSetAttribute(pool, spMemPoolReuseAllowOpportunistic, &opportunistic) ==
             spSuccess &&
         spMemPoolSetAttribute(pool, spMemPoolReuseAllowInternalDependencies, &internal) ==
             spSuccess;
}

// The pool's decisions between two snapshots, as counters: how many
// allocations each rule served (fresh = never handed out before) and the
// waits rule 5 inserted. Identical in every iteration of a benchmark that
// replays one deterministic program on a fresh runtime, so the last
// iteration's figures stand for all.
inline void ReportReuse(benchmark::State& state, const spMemPoolStats& before,
                        const spMemPoolStats& after) {
  auto delta = [&](uint64_t spMemPoolStats::*field) {
    return static_cast<double>(after.*field - before.*field);
  };
  const double allocs = delta(&spMemPoolStats::allocCount);
  const double same = delta(&spMemPoolStats::reuseSameStream);
  const double event = delta(&spMemPoolStats::reuseEventDependency);
  const double opportunistic = delta(&spMemPoolStats::reuseOpportunistic);
  const double internal = delta(&spMemPoolStats::reuseInternalDependency);
  const double after_sync = delta(&spMemPoolStats::reuseAfterSync);
  state.counters["allocs"] = allocs;
  state.counters["same_stream"] = same;
  state.counters["event_dep"] = event;
  state.counters["opportunistic"] = opportunistic;
  state.counters["internal_dep"] = internal;
  state.counters["after_sync"] = after_sync;
  state.counters["fresh"] = allocs - same - event - opportunistic - internal - after_sync;
  state.counters["waits_inserted"] = delta(&spMemPoolStats::waitsInserted);
  state.counters["failed_allocs"] = delta(&spMemPoolStats::failedAllocCount);
  state.counters["upstream_maps"] = delta(&spMemPoolStats::upstreamMaps);
}

// Bytes as a counter shown in binary units (2M = 2 MiB).
inline benchmark::Counter Bytes(uint64_t bytes) {
  return benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kDefaults,
                            benchmark::Counter::OneK::kIs1024);
}

// Seconds per `items` over the timed loop (shown as e.g. "250n" = 250 ns).
inline benchmark::Counter TimePer(double items_per_iteration) {
  return benchmark::Counter(items_per_iteration, benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

// Resident set of the process now, from /proc/self/statm (0 if unreadable).
inline uint64_t CurrentRssBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long pages_total = 0, pages_resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &pages_total, &pages_resident);
  std::fclose(f);
  return n == 2 ? pages_resident * 4096 : 0;
}

// ------------------------------------------------------------ random workload

// One step of a replayable allocation program: allocate `size` bytes into
// `slot`, or (size 0) free what `slot` holds. Slots are recycled, so the
// pointer table stays as small as the peak live count.
struct TraceOp {
  uint32_t slot;
  uint32_t size;
};

struct Trace {
  std::vector<TraceOp> ops;
  size_t slots = 0;  // pointer table size
  size_t steps = 0;  // random steps (ops.size() minus any drain)
  size_t allocs = 0;
  size_t frees = 0;
  uint64_t peak_live_bytes = 0;
  size_t peak_live_blocks = 0;
};

// The random workload (issue "Benchmarks"): `steps` steps from
// std::mt19937_64(seed); each step allocates with probability 0.73 a size
// uniform in [1, max_size], else frees a live block chosen uniformly. An
// allocation that would take live bytes above `cap` becomes a free instead,
// and a free with nothing live becomes an allocation. The program is generated
// once, outside any timed region, so every allocator replays exactly the same
// sequence. With `drain`, frees of every block still live are appended (in
// slot order) so that the program leaves the allocator empty and can be
// replayed again on the same heap.
inline Trace MakeRandomTrace(uint64_t seed, size_t steps, uint64_t cap, uint32_t max_size,
                             bool drain) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution alloc_coin(0.73);
  std::uniform_int_distribution<uint32_t> size_dist(1, max_size);
  Trace t;
  t.steps = steps;
  t.ops.reserve(steps);
  std::vector<uint32_t> live;        // slots holding a block
  std::vector<uint32_t> live_size;   // by slot
  std::vector<uint32_t> free_slots;  // recycled slot numbers
  uint64_t live_bytes = 0;
  auto do_free = [&]() {
    std::uniform_int_distribution<size_t> pick(0, live.size() - 1);
    const size_t i = pick(rng);
    const uint32_t slot = live[i];
    live[i] = live.back();
    live.pop_back();
    live_bytes -= live_size[slot];
    free_slots.push_back(slot);
    t.ops.push_back({slot, 0});
    ++t.frees;
  };
  for (size_t step = 0; step < steps; ++step) {
    bool alloc = alloc_coin(rng) || live.empty();
    uint32_t size = 0;
    if (alloc) {
      size = size_dist(rng);
      if (live_bytes + size > cap && !live.empty()) alloc = false;
    }
    if (!alloc) {
      do_free();
      continue;
    }
    uint32_t slot;
    if (free_slots.empty()) {
      slot = static_cast<uint32_t>(live_size.size());
      live_size.push_back(0);
    } else {
      slot = free_slots.back();
      free_slots.pop_back();
    }
    live_size[slot] = size;
    live.push_back(slot);
    live_bytes += size;
    t.ops.push_back({slot, size});
    ++t.allocs;
    if (live_bytes > t.peak_live_bytes) t.peak_live_bytes = live_bytes;
    if (live.size() > t.peak_live_blocks) t.peak_live_blocks = live.size();
  }
  if (drain) {
    std::vector<bool> is_live(live_size.size(), false);
    for (uint32_t slot : live) is_live[slot] = true;
    for (uint32_t slot = 0; slot < is_live.size(); ++slot) {
      if (is_live[slot]) t.ops.push_back({slot, 0});
    }
  }
  t.slots = live_size.size();
  return t;
}

// The slots a trace leaves live (to free them untimed after a run).
inline std::vector<uint32_t> LiveSlotsAtEnd(const Trace& t) {
  std::vector<bool> live(t.slots, false);
  for (const TraceOp& op : t.ops) live[op.slot] = op.size != 0;
  std::vector<uint32_t> out;
  for (uint32_t slot = 0; slot < live.size(); ++slot) {
    if (live[slot]) out.push_back(slot);
  }
  return out;
}

}  // namespace streampool::bench

#endif  // STREAMPOOL_BENCH_BENCH_COMMON_H_
