// The pool's single-stream hot path against general-purpose allocators, in
// one binary so that every figure is a ratio from one run (docs/design.md
// "Performance model"). tools/bench_summary.py turns the JSON into ratios.
//
// Pair: one same-stream alloc + free of `size` bytes (64 B .. 1 MiB).
//   BM_Pool_Pair           spMallocAsync/spFreeAsync (the C API): after the
//                          warm-up pair every pair is a front-cache pop and
//                          push (the fast path, no runtime lock).
//   BM_Pool_PairNoCache    the same with spMemPoolAttrFrontCache = 0 on the
//                          pool: every pair takes the runtime lock and the
//                          central index. Its ratio to Pool_Pair is what the
//                          cache buys.
//   BM_Runtime_Pair        Runtime::MallocAsync/FreeAsync (the C++ API).
//   BM_MemPool_Pair        the internal MemPool's central path alone, with a
//                          one-stream oracle: no runtime lock, handle lookup,
//                          allocation map or stream marker op.
//                          Pool_PairNoCache minus this is the runtime's share
//                          of the central path.
//   BM_MemPool_CachedPair  the MemPool's fast path alone (CacheAllocate +
//                          CacheFree under a local SpinLock, as the runtime
//                          holds its stream lock). Pool_Pair minus this is the
//                          runtime's share of the fast path (handle lookup,
//                          page map, stream position).
//   BM_Glibc_Pair          __libc_malloc/__libc_free (see bench_common.h).
//   BM_Mimalloc_Pair       mi_malloc/mi_free.
//   BM_Upstream_Pair       spMalloc/spFree: one upstream mapping per
//                          allocation, i.e. no pool at all.
//   Goal: Pool_Pair <= 1.5x Glibc_Pair.
//
// Holes: 2H blocks of 1 KiB allocated, every other one freed, then the timed
// 1 KiB alloc + free pair, for H = 1 000 .. 64 000 free holes. The claim: the
// cost does not grow with H (goal: H = 64 000 within 1.3x of H = 1 000)
// because the pool finds a block through size bins, never by scanning free
// lists. BM_Pool_Holes synchronizes so the holes are READY;
// BM_Pool_HolesPending leaves them PENDING on the allocating stream. Glibc
// and mimalloc get the same heap shape; BM_Upstream_Holes holds H live
// spMalloc allocations instead (the upstream has no free list).
//
// Random: 200 000 steps of the seeded random program of bench_common.h (sizes
// 1 B .. 1 MiB, live bytes capped at 8 GiB), replayed identically by the pool
// (address-only backing) and the baselines (real memory that nothing writes,
// so resident memory stays small: the max_rss counter shows it).
//
// The pool runs on the simulator with address-only backing: nothing is
// touched, so pool figures are host-side bookkeeping alone (including the
// stream-order marker op every MallocAsync/FreeAsync enqueues).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/bench_common.h"
#include "benchmark/benchmark.h"
#include "src/ordering/oracle.h"
#include "src/pool/mem_pool.h"
#include "src/util/spin_lock.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool::bench {
namespace {

constexpr uint64_t kHoleBlock = 1 * kKiB;

// ---------------------------------------------------------------- Pair

// One untimed pair first, so that the timed pairs find the pool's chunk
// already mapped and the loop measures reuse alone (the grows counter proves
// it stays 0).
void PoolPairs(benchmark::State& state, CRuntime& rt, uint64_t size) {
  spStream_t s = rt.stream();
  void* warm = nullptr;
  if (spMallocAsync(&warm, size, s) != spSuccess || spFreeAsync(warm, s) != spSuccess) {
    state.SkipWithError("warm-up pair failed");
    return;
  }
  const spMemPoolStats before = rt.Stats();
  for (auto _ : state) {
    void* p = nullptr;
    if (spMallocAsync(&p, size, s) != spSuccess || spFreeAsync(p, s) != spSuccess) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  const spMemPoolStats after = rt.Stats();
  const double allocs = static_cast<double>(after.allocCount - before.allocCount);
  // Every timed allocation should be the stream's own free (rule 1).
  state.counters["same_stream"] =
      allocs == 0 ? 0 : (after.reuseSameStream - before.reuseSameStream) / allocs;
  state.counters["grows"] = static_cast<double>(after.upstreamMaps - before.upstreamMaps);
  state.counters["reserved"] = Bytes(after.reservedBytes);
  state.SetItemsProcessed(state.iterations());
}

void BM_Pool_Pair(benchmark::State& state) {
  CRuntime rt;
  if (!rt.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  PoolPairs(state, rt, static_cast<uint64_t>(state.range(0)));
}

// The pool's own fast path switched off, so every pair is the central path
// through the C API (the rest of the runtime is as in BM_Pool_Pair).
void BM_Pool_PairNoCache(benchmark::State& state) {
  CRuntime rt;
  spMemPool_t pool = nullptr;
  int off = 0;
  int read_back = 1;
  if (!rt.ok() || spDeviceGetMemPool(&pool, rt.rt(), 0) != spSuccess ||
      spMemPoolSetAttribute(pool, spMemPoolAttrFrontCache, &off) != spSuccess ||
      spMemPoolGetAttribute(pool, spMemPoolAttrFrontCache, &read_back) != spSuccess ||
      read_back != 0) {
    state.SkipWithError("runtime setup (front cache off) failed");
    return;
  }
  PoolPairs(state, rt, static_cast<uint64_t>(state.range(0)));
  state.counters["front_cache"] = read_back;
}

// The pair while the runtime records its history (spRuntimeStartRecording):
// every call takes the runtime's lock and writes a line. The file goes to
// /dev/null, so the cost measured is the recorder's, not the disk's.
void BM_Pool_PairRecording(benchmark::State& state) {
  CRuntime rt;
  if (!rt.ok() || spRuntimeStartRecording(rt.rt(), "/dev/null") != spSuccess) {
    state.SkipWithError("runtime setup (recording) failed");
    return;
  }
  PoolPairs(state, rt, static_cast<uint64_t>(state.range(0)));
  if (spRuntimeStopRecording(rt.rt()) != spSuccess) state.SkipWithError("recording failed");
}

void BM_Runtime_Pair(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  RuntimeConfig cfg;
  cfg.backing = Backing::kAddressOnly;
  cfg.device_capacity = 64 * kGiB;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  if (!rt.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  Runtime& r = **rt;
  absl::StatusOr<StreamId> s = r.CreateStream(0, /*non_blocking=*/true);
  absl::StatusOr<PoolId> pool = r.DefaultPool(0);
  if (!s.ok() || !pool.ok() ||
      !r.SetPoolAttribute(*pool, PoolAttr::kReleaseThreshold, UINT64_MAX).ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  absl::StatusOr<AllocInfo> warm = r.MallocAsync(size, *s);
  if (!warm.ok() || !r.FreeAsync(warm->ptr, *s).ok()) {
    state.SkipWithError("warm-up pair failed");
    return;
  }
  const uint64_t maps_before = r.GetPoolStats(*pool)->upstream_maps;
  for (auto _ : state) {
    absl::StatusOr<AllocInfo> a = r.MallocAsync(size, *s);
    if (!a.ok() || !r.FreeAsync(a->ptr, *s).ok()) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(a->ptr);
  }
  state.counters["grows"] = static_cast<double>(r.GetPoolStats(*pool)->upstream_maps - maps_before);
  state.SetItemsProcessed(state.iterations());
}

// What the runtime tells a pool about one stream that nothing else touches:
// all of its frees are ordered before its next op, none is known complete.
class OneStreamOracle final : public internal::OrderOracle {
 public:
  StreamIndex stream() const override { return 0; }
  Position OrderedAfter(StreamIndex s) const override { return s == 0 ? pos_ : 0; }
  Position ObservedComplete(StreamIndex) const override { return 0; }
  void InsertWait(StreamIndex, Position) override {}
  // The position the next op takes, as the runtime's marker op would.
  Position Next() { return ++pos_; }

 private:
  Position pos_ = 0;
};

void BM_MemPool_Pair(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  internal::DeviceBudget budget(64 * kGiB);
  PoolProps props;
  props.release_threshold = UINT64_MAX;
  internal::MemPool pool(props, internal::SizeRule{}, budget.capacity(), NewAddressOnlyMemory(),
                         &budget);
  OneStreamOracle oracle;
  auto pair = [&]() {
    absl::StatusOr<internal::MemPool::Allocation> a = pool.Allocate(size, oracle);
    if (!a.ok()) return false;
    oracle.Next();  // the allocation's marker op
    benchmark::DoNotOptimize(a->block);
    pool.FreeAsync(a->block, 0, oracle.Next());
    return true;
  };
  if (!pair()) {
    state.SkipWithError("warm-up pair failed");
    return;
  }
  for (auto _ : state) {
    if (!pair()) {
      state.SkipWithError("pair failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// The fast path needs a cached block of the rule size: a free is cached only
// once the stream has a cache, so the warm-up pair (which maps the chunk)
// leaves its block in the central index, and a central allocation takes it
// back out to be freed into the cache. The cache is guarded by `lock`, as the
// runtime's caches are by their stream's lock; the lock is declared before the
// pool because the pool's caches refer to it until the pool is gone.
void BM_MemPool_CachedPair(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  internal::SpinLock lock;
  internal::DeviceBudget budget(64 * kGiB);
  PoolProps props;
  props.release_threshold = UINT64_MAX;
  internal::MemPool pool(props, internal::SizeRule{}, budget.capacity(), NewAddressOnlyMemory(),
                         &budget);
  OneStreamOracle oracle;
  absl::StatusOr<internal::MemPool::Allocation> warm = pool.Allocate(size, oracle);
  if (!warm.ok()) {
    state.SkipWithError("warm-up allocation failed");
    return;
  }
  oracle.Next();
  pool.FreeAsync(warm->block, 0, oracle.Next());
  pool.EnsureCache(0, &lock);
  lock.Lock();
  internal::Block* first = pool.CacheAllocate(0, size);
  lock.Unlock();
  if (first == nullptr) {
    // Expected: the warm-up block was freed centrally, before the cache existed.
    absl::StatusOr<internal::MemPool::Allocation> a = pool.Allocate(size, oracle);
    if (!a.ok()) {
      state.SkipWithError("central re-allocation failed");
      return;
    }
    oracle.Next();
    first = a->block;
  }
  lock.Lock();
  const bool cached = pool.CacheFree(first, 0, oracle.Next());
  lock.Unlock();
  if (!cached) {
    state.SkipWithError("the warm-up block did not go into the front cache");
    return;
  }
  for (auto _ : state) {
    lock.Lock();
    internal::Block* b = pool.CacheAllocate(0, size);
    lock.Unlock();
    if (b == nullptr) {
      state.SkipWithError("cache miss in the timed loop");
      break;
    }
    benchmark::DoNotOptimize(b);
    lock.Lock();
    const bool ok = pool.CacheFree(b, 0, oracle.Next());
    lock.Unlock();
    if (!ok) {
      state.SkipWithError("cache refused a free in the timed loop");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

template <void* (*Alloc)(size_t), void (*Free)(void*)>
void HeapPairs(benchmark::State& state, size_t size) {
  for (auto _ : state) {
    void* p = Alloc(size);
    benchmark::DoNotOptimize(p);
    Free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Glibc_Pair(benchmark::State& state) {
  HeapPairs<GlibcMalloc, GlibcFree>(state, static_cast<size_t>(state.range(0)));
}

void BM_Mimalloc_Pair(benchmark::State& state) {
  HeapPairs<MiMalloc, MiFree>(state, static_cast<size_t>(state.range(0)));
}

void BM_Upstream_Pair(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  CRuntime rt;
  if (!rt.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  for (auto _ : state) {
    void* p = nullptr;
    if (spMalloc(&p, size, rt.rt(), 0) != spSuccess || spFree(rt.rt(), p) != spSuccess) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void SizeArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("size");
  for (uint64_t n : {uint64_t{64}, 4 * kKiB, 64 * kKiB, kMiB}) b->Arg(static_cast<int64_t>(n));
}

BENCHMARK(BM_Pool_Pair)->Apply(SizeArgs);
BENCHMARK(BM_Pool_PairNoCache)->Apply(SizeArgs);
BENCHMARK(BM_Pool_PairRecording)->Apply(SizeArgs);
BENCHMARK(BM_Runtime_Pair)->Apply(SizeArgs);
BENCHMARK(BM_MemPool_Pair)->Apply(SizeArgs);
BENCHMARK(BM_MemPool_CachedPair)->Apply(SizeArgs);
BENCHMARK(BM_Glibc_Pair)->Apply(SizeArgs);
BENCHMARK(BM_Mimalloc_Pair)->Apply(SizeArgs);
BENCHMARK(BM_Upstream_Pair)->Apply(SizeArgs);

// --------------------------------------------------------------- Holes

// 2n blocks of `size`, then every other one freed on the stream: n free
// holes that cannot coalesce (LIVE blocks separate them). All 2n are
// allocated before any is freed: freeing as we go would let the next
// allocation take the block just freed (same-stream reuse), leaving no holes.
// With `sync` the holes become READY; without, they stay PENDING on the
// stream. The live half is freed with the runtime.
bool MakePoolHoles(CRuntime& rt, size_t n, uint64_t size, bool sync) {
  std::vector<void*> all(2 * n);
  for (void*& p : all) {
    if (spMallocAsync(&p, size, rt.stream()) != spSuccess) return false;
  }
  for (size_t i = 0; i < all.size(); i += 2) {
    if (spFreeAsync(all[i], rt.stream()) != spSuccess) return false;
  }
  return !sync || spStreamSynchronize(rt.stream()) == spSuccess;
}

void PoolHoles(benchmark::State& state, bool sync) {
  const size_t holes = static_cast<size_t>(state.range(0));
  CRuntime rt;
  if (!rt.ok() || !MakePoolHoles(rt, holes, kHoleBlock, sync)) {
    state.SkipWithError("making the free holes failed");
    return;
  }
  PoolPairs(state, rt, kHoleBlock);
  state.counters["free_blocks"] = static_cast<double>(holes);
}

void BM_Pool_Holes(benchmark::State& state) { PoolHoles(state, /*sync=*/true); }
void BM_Pool_HolesPending(benchmark::State& state) { PoolHoles(state, /*sync=*/false); }

// The same heap shape for a general-purpose allocator.
template <void* (*Alloc)(size_t), void (*Free)(void*)>
void HeapHoles(benchmark::State& state) {
  const size_t holes = static_cast<size_t>(state.range(0));
  std::vector<void*> all(2 * holes);
  for (void*& p : all) {
    p = Alloc(kHoleBlock);
    benchmark::DoNotOptimize(p);
  }
  for (size_t i = 0; i < all.size(); i += 2) Free(all[i]);
  for (auto _ : state) {
    void* p = Alloc(kHoleBlock);
    benchmark::DoNotOptimize(p);
    Free(p);
  }
  for (size_t i = 1; i < all.size(); i += 2) Free(all[i]);
  state.counters["free_blocks"] = static_cast<double>(holes);
  state.SetItemsProcessed(state.iterations());
}

void BM_Glibc_Holes(benchmark::State& state) { HeapHoles<GlibcMalloc, GlibcFree>(state); }
void BM_Mimalloc_Holes(benchmark::State& state) { HeapHoles<MiMalloc, MiFree>(state); }

void BM_Upstream_Holes(benchmark::State& state) {
  const size_t live_count = static_cast<size_t>(state.range(0));
  CRuntime rt;
  if (!rt.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  std::vector<void*> live(live_count);
  for (void*& p : live) {
    if (spMalloc(&p, kHoleBlock, rt.rt(), 0) != spSuccess) {
      state.SkipWithError("spMalloc setup failed");
      return;
    }
  }
  for (auto _ : state) {
    void* p = nullptr;
    if (spMalloc(&p, kHoleBlock, rt.rt(), 0) != spSuccess || spFree(rt.rt(), p) != spSuccess) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  state.counters["live_mallocs"] = static_cast<double>(live_count);
  state.SetItemsProcessed(state.iterations());
}

void HoleArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("free_blocks");
  for (int64_t n : {1000, 4000, 16000, 64000}) b->Arg(n);
}

BENCHMARK(BM_Pool_Holes)->Apply(HoleArgs);
BENCHMARK(BM_Pool_HolesPending)->Apply(HoleArgs);
BENCHMARK(BM_Glibc_Holes)->Apply(HoleArgs);
BENCHMARK(BM_Mimalloc_Holes)->Apply(HoleArgs);
BENCHMARK(BM_Upstream_Holes)->Apply(HoleArgs);

// -------------------------------------------------------------- Random

constexpr uint64_t kRandomSeed = 42;
constexpr size_t kRandomSteps = 200000;
constexpr uint64_t kRandomCap = 8 * kGiB;
constexpr uint32_t kRandomMaxSize = 1 << 20;

const Trace& RandomTrace() {
  static const Trace* trace =
      new Trace(MakeRandomTrace(kRandomSeed, kRandomSteps, kRandomCap, kRandomMaxSize,
                                /*drain=*/false));
  return *trace;
}

void ReportTrace(benchmark::State& state, const Trace& t) {
  state.counters["steps"] = static_cast<double>(t.ops.size());
  state.counters["time_per_step"] = TimePer(static_cast<double>(t.ops.size()));
  state.counters["peak_live"] = Bytes(t.peak_live_bytes);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * t.ops.size()));
}

// Each iteration replays the whole program on a fresh runtime; creating it and
// freeing what is left at the end are untimed.
void BM_Pool_Random(benchmark::State& state) {
  const Trace& t = RandomTrace();
  std::vector<void*> ptrs(t.slots);
  const std::vector<uint32_t> leftover = LiveSlotsAtEnd(t);
  spMemPoolStats stats{};
  for (auto _ : state) {
    state.PauseTiming();
    {
      // 64 GiB of address space: room for the 8 GiB cap plus whatever
      // fragmentation costs (the peak_reserved counter shows it).
      auto rt = std::make_unique<CRuntime>(1, 64 * kGiB);
      if (!rt->ok()) {
        state.SkipWithError("runtime setup failed");
        break;
      }
      spStream_t s = rt->stream();
      state.ResumeTiming();
      bool ok = true;
      for (const TraceOp& op : t.ops) {
        if (op.size != 0) {
          ok = spMallocAsync(&ptrs[op.slot], op.size, s) == spSuccess;
        } else {
          ok = spFreeAsync(ptrs[op.slot], s) == spSuccess;
        }
        if (!ok) break;
      }
      state.PauseTiming();
      if (!ok) {
        state.SkipWithError("a step failed");
        break;
      }
      stats = rt->Stats();
    }  // destroying the runtime frees the leftovers
    state.ResumeTiming();
  }
  ReportTrace(state, t);
  state.counters["peak_reserved"] = Bytes(stats.reservedHigh);
  state.counters["upstream_maps"] = static_cast<double>(stats.upstreamMaps);
  state.counters["same_stream"] = static_cast<double>(stats.reuseSameStream);
  state.counters["leftover_blocks"] = static_cast<double>(leftover.size());
}

template <void* (*Alloc)(size_t), void (*Free)(void*)>
void HeapRandom(benchmark::State& state) {
  const Trace& t = RandomTrace();
  std::vector<void*> ptrs(t.slots);
  const std::vector<uint32_t> leftover = LiveSlotsAtEnd(t);
  uint64_t rss_at_end = 0;
  for (auto _ : state) {
    for (const TraceOp& op : t.ops) {
      if (op.size != 0) {
        ptrs[op.slot] = Alloc(op.size);
        benchmark::DoNotOptimize(ptrs[op.slot]);
      } else {
        Free(ptrs[op.slot]);
      }
    }
    state.PauseTiming();
    // With up to 8 GiB live, resident memory must stay small: the allocator
    // touches its headers, never the blocks.
    rss_at_end = CurrentRssBytes();
    for (uint32_t slot : leftover) Free(ptrs[slot]);
    state.ResumeTiming();
  }
  ReportTrace(state, t);
  state.counters["rss_at_end"] = Bytes(rss_at_end);
}

void BM_Glibc_Random(benchmark::State& state) { HeapRandom<GlibcMalloc, GlibcFree>(state); }
void BM_Mimalloc_Random(benchmark::State& state) { HeapRandom<MiMalloc, MiFree>(state); }

BENCHMARK(BM_Pool_Random)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Glibc_Random)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mimalloc_Random)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace streampool::bench
