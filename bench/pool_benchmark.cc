// The pool's hot path against general-purpose allocators, in one binary so
// every figure is a ratio from one run (DESIGN.md "Performance model").
//
// BM_Pool_SameStreamPair/free_blocks:N times one spMallocAsync(1 KiB) +
// spFreeAsync pair on one stream of a device pool that holds N free 1 KiB
// holes (2N blocks allocated, every other one freed). The claim under test:
// the cost does not grow with N, from 1 000 to 64 000 free blocks, because the
// pool finds a block through size bins, never by scanning free lists. The
// holes are READY (synchronized) in SameStreamPair and still PENDING on the
// allocating stream in SameStreamPairPending.
//
// Baselines at the same N, each holding N free 1 KiB holes the same way:
//   BM_Glibc_Pair     __libc_malloc/__libc_free. This binary links Debian's
//                     shared mimalloc, which overrides plain malloc for the
//                     whole process, so glibc has to be called by its own name.
//   BM_Mimalloc_Pair  mi_malloc/mi_free.
//   BM_Upstream_Pair  spMalloc/spFree: one mapping per allocation, i.e. no pool
//                     at all (here N live 1 KiB spMalloc allocations stand in
//                     for the holes: the upstream has no free list).
// And pairs by request size (64 B .. 1 MiB): BM_{Pool,Glibc,Mimalloc}_PairBySize.
//
// The pool runs on the simulator with address-only backing: nothing is
// touched, so the figures are the host-side bookkeeping alone (including the
// stream-order marker op every MallocAsync/FreeAsync enqueues).
#include <mimalloc.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "streampool/streampool.h"

// glibc's allocator under its exported internal names (see the file comment).
extern "C" void* __libc_malloc(size_t size);
extern "C" void __libc_free(void* ptr);

namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;
constexpr size_t kBlock = 1 * kKiB;

// A runtime with one device whose default pool never shrinks, with room for
// the largest setup (128 000 KiB-blocks) many times over. Address-only: the
// capacity is a budget, not memory.
class PoolFixture {
 public:
  PoolFixture() {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.backing = spBackingAddressOnly;
    cfg.deviceCapacity = uint64_t{64} << 30;
    ok_ = spRuntimeCreate(&rt_, &cfg) == spSuccess &&
          spStreamCreate(&stream_, rt_, 0, spStreamNonBlocking) == spSuccess &&
          spDeviceGetDefaultMemPool(&pool_, rt_, 0) == spSuccess;
    uint64_t keep_all = UINT64_MAX;
    ok_ = ok_ && spMemPoolSetAttribute(pool_, spMemPoolAttrReleaseThreshold, &keep_all) == spSuccess;
  }
  ~PoolFixture() {
    if (rt_ != nullptr) spRuntimeDestroy(rt_);
  }
  PoolFixture(const PoolFixture&) = delete;
  PoolFixture& operator=(const PoolFixture&) = delete;

  bool ok() const { return ok_; }
  spRuntime_t rt() const { return rt_; }
  spStream_t stream() const { return stream_; }
  spMemPool_t pool() const { return pool_; }
  spMemPoolStats Stats() const {
    spMemPoolStats s{};
    spMemPoolGetStats(pool_, &s);
    return s;
  }

  // 2n blocks of `size`, then every other one freed on the stream: n free
  // holes that cannot coalesce (LIVE blocks separate them). With `sync` they
  // become READY; without, they stay PENDING on the stream.
  // All 2n are allocated before any is freed: freeing as we go would let the
  // next allocation take the block just freed (same-stream reuse), leaving no
  // holes at all.
  bool MakeHoles(size_t n, size_t size, bool sync) {
    std::vector<void*> all(2 * n);
    for (void*& p : all) {
      if (spMallocAsync(&p, size, stream_) != spSuccess) return false;
    }
    live_.reserve(n);
    for (size_t i = 0; i < all.size(); ++i) {
      if (i % 2 == 0) {
        if (spFreeAsync(all[i], stream_) != spSuccess) return false;
      } else {
        live_.push_back(all[i]);
      }
    }
    return !sync || spStreamSynchronize(stream_) == spSuccess;
  }

 private:
  bool ok_ = false;
  spRuntime_t rt_ = nullptr;
  spStream_t stream_ = nullptr;
  spMemPool_t pool_ = nullptr;
  std::vector<void*> live_;  // freed with the runtime
};

// Counters every pool benchmark reports, from the pool's own statistics over
// the timed loop: how the pairs were served and whether anything grew.
void ReportPoolCounters(benchmark::State& state, const spMemPoolStats& before,
                        const spMemPoolStats& after, size_t free_blocks) {
  const double allocs = static_cast<double>(after.allocCount - before.allocCount);
  state.counters["free_blocks"] = static_cast<double>(free_blocks);
  state.counters["reserved_bytes"] = benchmark::Counter(
      static_cast<double>(after.reservedBytes), benchmark::Counter::kDefaults,
      benchmark::Counter::OneK::kIs1024);
  // Fraction of the timed allocations served by the stream's own free
  // (rule 1); the rest are READY reuse (after-sync) or, on the first pair of a
  // fresh pool, fresh memory.
  state.counters["same_stream"] =
      allocs == 0 ? 0 : (after.reuseSameStream - before.reuseSameStream) / allocs;
  // Growth inside the timed loop would mean the pairs were not pure reuse.
  state.counters["grows"] = static_cast<double>(after.upstreamMaps - before.upstreamMaps);
  state.SetItemsProcessed(state.iterations());
}

void PoolPairs(benchmark::State& state, size_t free_blocks, size_t size, bool sync) {
  PoolFixture fx;
  if (!fx.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  if (free_blocks > 0 && !fx.MakeHoles(free_blocks, kBlock, sync)) {
    state.SkipWithError("making the free holes failed");
    return;
  }
  spStream_t s = fx.stream();
  // One untimed pair so that a pool without holes has its chunk already.
  void* warm = nullptr;
  if (spMallocAsync(&warm, size, s) != spSuccess || spFreeAsync(warm, s) != spSuccess) {
    state.SkipWithError("warm-up pair failed");
    return;
  }
  const spMemPoolStats before = fx.Stats();
  for (auto _ : state) {
    void* p = nullptr;
    if (spMallocAsync(&p, size, s) != spSuccess || spFreeAsync(p, s) != spSuccess) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  ReportPoolCounters(state, before, fx.Stats(), free_blocks);
}

// ------------------------------------------------------------- N free holes

void BM_Pool_SameStreamPair(benchmark::State& state) {
  PoolPairs(state, static_cast<size_t>(state.range(0)), kBlock, /*sync=*/true);
}

void BM_Pool_SameStreamPairPending(benchmark::State& state) {
  PoolPairs(state, static_cast<size_t>(state.range(0)), kBlock, /*sync=*/false);
}

// The general-purpose allocators get the same heap shape: n free 1 KiB holes
// between live blocks.
template <void* (*Alloc)(size_t), void (*Free)(void*)>
void HeapPairs(benchmark::State& state, size_t free_blocks, size_t size) {
  // As in PoolFixture::MakeHoles: all 2n first, then every other one freed.
  std::vector<void*> all(2 * free_blocks);
  for (void*& p : all) {
    p = Alloc(kBlock);
    benchmark::DoNotOptimize(p);
  }
  std::vector<void*> live;
  live.reserve(free_blocks);
  for (size_t i = 0; i < all.size(); ++i) {
    if (i % 2 == 0) {
      Free(all[i]);
    } else {
      live.push_back(all[i]);
    }
  }
  for (auto _ : state) {
    void* p = Alloc(size);
    benchmark::DoNotOptimize(p);
    Free(p);
  }
  for (void* p : live) Free(p);
  state.counters["free_blocks"] = static_cast<double>(free_blocks);
  state.SetItemsProcessed(state.iterations());
}

void* GlibcMalloc(size_t n) { return __libc_malloc(n); }
void GlibcFree(void* p) { __libc_free(p); }
void* MiMalloc(size_t n) { return mi_malloc(n); }
void MiFree(void* p) { mi_free(p); }

void BM_Glibc_Pair(benchmark::State& state) {
  HeapPairs<GlibcMalloc, GlibcFree>(state, static_cast<size_t>(state.range(0)), kBlock);
}

void BM_Mimalloc_Pair(benchmark::State& state) {
  HeapPairs<MiMalloc, MiFree>(state, static_cast<size_t>(state.range(0)), kBlock);
}

void BM_Upstream_Pair(benchmark::State& state) {
  const size_t live_count = static_cast<size_t>(state.range(0));
  PoolFixture fx;
  if (!fx.ok()) {
    state.SkipWithError("runtime setup failed");
    return;
  }
  std::vector<void*> live(live_count);
  for (void*& p : live) {
    if (spMalloc(&p, kBlock, fx.rt(), 0) != spSuccess) {
      state.SkipWithError("spMalloc setup failed");
      return;
    }
  }
  for (auto _ : state) {
    void* p = nullptr;
    if (spMalloc(&p, kBlock, fx.rt(), 0) != spSuccess || spFree(fx.rt(), p) != spSuccess) {
      state.SkipWithError("pair failed");
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  state.counters["live_mallocs"] = static_cast<double>(live_count);
  state.SetItemsProcessed(state.iterations());
}

void FreeBlockArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("free_blocks");
  for (int64_t n : {1000, 4000, 16000, 64000}) b->Arg(n);
}

BENCHMARK(BM_Pool_SameStreamPair)->Apply(FreeBlockArgs);
BENCHMARK(BM_Pool_SameStreamPairPending)->Apply(FreeBlockArgs);
BENCHMARK(BM_Glibc_Pair)->Apply(FreeBlockArgs);
BENCHMARK(BM_Mimalloc_Pair)->Apply(FreeBlockArgs);
BENCHMARK(BM_Upstream_Pair)->Apply(FreeBlockArgs);

// ------------------------------------------------------------ by size

// An otherwise empty pool (one warm chunk): the pair's cost by request size.
void BM_Pool_PairBySize(benchmark::State& state) {
  PoolPairs(state, /*free_blocks=*/0, static_cast<size_t>(state.range(0)), /*sync=*/true);
}

void BM_Glibc_PairBySize(benchmark::State& state) {
  HeapPairs<GlibcMalloc, GlibcFree>(state, 0, static_cast<size_t>(state.range(0)));
}

void BM_Mimalloc_PairBySize(benchmark::State& state) {
  HeapPairs<MiMalloc, MiFree>(state, 0, static_cast<size_t>(state.range(0)));
}

void SizeArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("size");
  for (int64_t n : {int64_t{64}, int64_t{4 * kKiB}, int64_t{64 * kKiB}, int64_t{kMiB}}) b->Arg(n);
}

BENCHMARK(BM_Pool_PairBySize)->Apply(SizeArgs);
BENCHMARK(BM_Glibc_PairBySize)->Apply(SizeArgs);
BENCHMARK(BM_Mimalloc_PairBySize)->Apply(SizeArgs);

}  // namespace
