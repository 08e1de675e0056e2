// The CUDA programming guide's stream-ordered allocator examples (sections
// F.3, F.7, F.8, F.9.1-F.9.4 and F.12), one test each, replayed through the C
// API (cuda* -> sp*) in virtual time. Each test states the decision the guide
// describes, the rule that made it (docs/design.md "Serving MallocAsync"), and the
// reserved/used bytes that follow.
//
// This is the conformance suite of the pool variants: every test runs for
// each allocation type (Device, PinnedHost, HugePage, Dvpp) on both backings,
// with chunked and with expandable growth (conformance_variants.h), since
// every variant keeps the device pool's stream-ordered semantics, policies and
// statistics. Sizes differ: a request occupies the variant's rule size, and
// expected used/reserved bytes are derived from it. Where a scenario depends
// on a variant's placement rather than its semantics (pinned host memory is
// not bounded by the device's capacity), the test says so and checks what
// holds instead. Where the growth mode changes an outcome (what a growth maps,
// which address a reuse gets, how many upstream calls a release makes, what
// the largest free block is), the test pins both with ByGrowth(chunked,
// expandable) and says why they differ; the last sections pin what only
// expandable growth does and promotion on observation.
//
// Sizes are chosen so that no expectation hangs on an implementation choice
// docs/design.md leaves open: cross-stream examples allocate whole 2 MiB chunks (so
// no never-used remainder could serve the other stream by rule 1), and the
// synchronization examples fill their chunk with a live "anchor" so the freed
// block is the only free block there. "Whole chunk" means a request whose rule
// size is exactly 2 MiB (PoolVariant::LenOccupying): 2 MiB itself, but 32
// bytes less for Dvpp, whose blocks carry 32 bytes beyond the request. In an
// expandable pool a whole chunk is one 2 MiB granule, and an empty pool's
// first growth maps the same bytes either way.
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/mem_pool.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"
#include "tests/pool/conformance_variants.h"

namespace {

using streampool::AllocInfo;
using streampool::ReuseRule;
using streampool_test::AllPoolVariants;
using streampool_test::kChunk;
using streampool_test::kGranule;
using streampool_test::kMiB;
using streampool_test::PoolVariant;
using streampool_test::VariantName;

constexpr uint64_t kKiB = uint64_t{1} << 10;

// How many successful allocations each rule has served (spMemPoolGetStats;
// fresh is what is left of allocCount).
struct RuleCounts {
  uint64_t same_stream = 0;
  uint64_t event_dependency = 0;
  uint64_t opportunistic = 0;
  uint64_t internal_dependency = 0;
  uint64_t after_sync = 0;
  uint64_t fresh = 0;
  friend bool operator==(const RuleCounts&, const RuleCounts&) = default;
  friend std::ostream& operator<<(std::ostream& os, const RuleCounts& c) {
    return os << "{same_stream=" << c.same_stream << " event_dependency=" << c.event_dependency
              << " opportunistic=" << c.opportunistic
              << " internal_dependency=" << c.internal_dependency << " after_sync=" << c.after_sync
              << " fresh=" << c.fresh << "}";
  }
};

class ScenarioTest : public ::testing::TestWithParam<PoolVariant> {
 protected:
  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.deviceCount = 2;  // F.12's cross-device free needs a second device
    Start(cfg);
  }

  void TearDown() override { Stop(); }

  const PoolVariant& variant() const { return GetParam(); }

  // (Re)creates the runtime on the variant's backing, with pool_ a fresh pool
  // of the variant. Where the guide allocates from the device's default pool,
  // the variant's pool stands in for it: it is made device 0's current pool
  // when the variant allows (not pinned host pools). Tests that need a small
  // device call Start again.
  void Start(spRuntimeConfig cfg) {
    Stop();
    cfg.backing = variant().backing;
    ASSERT_EQ(spRuntimeCreate(&rt_, &cfg), spSuccess);
    auto cpp = streampool::Runtime::FromC(rt_);
    ASSERT_TRUE(cpp.ok()) << cpp.status();
    cpp_ = *std::move(cpp);
    pool_ = NewPool(0);
    ASSERT_NE(pool_, nullptr);
    if (variant().CanBeCurrent()) {
      ASSERT_EQ(spDeviceSetMemPool(rt_, 0, pool_), spSuccess);
    } else {
      EXPECT_EQ(spDeviceSetMemPool(rt_, 0, pool_), spErrorInvalidValue);
    }
    if (cfg.deviceCount > 1) {
      ASSERT_EQ(spDeviceGetDefaultMemPool(&dev1_pool_, rt_, 1), spSuccess);
      variant().Configure(dev1_pool_);
      pools_.push_back(dev1_pool_);
    }
  }

  void Stop() {
    if (rt_ == nullptr) return;
    for (spMemPool_t p : pools_) {
      EXPECT_TRUE(cpp_->CheckPoolInvariants(PoolId(p)).ok()) << "pool invariants broken";
    }
    EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess);
    cpp_.reset();  // the C runtime is gone already: a no-op
    rt_ = nullptr;
    pool_ = dev1_pool_ = nullptr;
    pools_.clear();
  }

  static streampool::StreamId StreamId(spStream_t s) {
    return {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s))};
  }
  static streampool::PoolId PoolId(spMemPool_t p) {
    return {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p))};
  }

  bool Expandable() const { return variant().Expandable(); }
  // The expectation of this variant's growth mode, where the two differ.
  template <typename T>
  T ByGrowth(T chunked, T expandable) const {
    return Expandable() ? expandable : chunked;
  }

  // The variant's rule size and growth chunk for a request of len bytes.
  uint64_t Rule(uint64_t len) const { return variant().RuleSize(len); }
  uint64_t ChunkFor(uint64_t len) const { return variant().ChunkSize(len); }
  // The largest request occupying exactly `bytes` in this variant's pool.
  uint64_t Occupying(uint64_t bytes) const {
    const uint64_t len = variant().LenOccupying(bytes);
    EXPECT_EQ(Rule(len), bytes) << "not a possible rule size";
    EXPECT_GT(Rule(len + 1), bytes) << "not the largest such request";
    return len;
  }
  // A request filling one 2 MiB chunk exactly.
  uint64_t WholeChunk() const { return Occupying(kChunk); }

  spStream_t NewStream(int device = 0) {
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamCreate(&s, rt_, device, spStreamDefault), spSuccess);
    return s;
  }
  spEvent_t NewEvent() {
    spEvent_t e = nullptr;
    EXPECT_EQ(spEventCreate(&e, rt_), spSuccess);
    return e;
  }
  // A pool of the variant of at most max_size bytes (0 = the device, or no
  // bound for pinned host pools).
  spMemPool_t NewPool(uint64_t max_size) {
    const spMemPoolProps props = variant().Props(max_size);
    spMemPool_t p = nullptr;
    EXPECT_EQ(spMemPoolCreate(&p, rt_, &props), spSuccess);
    if (p != nullptr) {
      variant().Configure(p);
      pools_.push_back(p);
    }
    return p;
  }

  // The guide's cudaMallocAsync: from device 0's current pool, which is
  // pool_ -- except for pinned host pools, which cannot be current and are
  // asked by name.
  spError_t MallocAsync(void** ptr, uint64_t size, spStream_t s) {
    return variant().CanBeCurrent() ? spMallocAsync(ptr, size, s)
                                    : spMallocFromPoolAsync(ptr, size, pool_, s);
  }
  // MallocFromPoolAsync through the C++ API, which also says which rule
  // served it.
  AllocInfo Alloc(uint64_t size, spStream_t s, spMemPool_t pool = nullptr) {
    auto r = cpp_->MallocFromPoolAsync(size, PoolId(pool == nullptr ? pool_ : pool), StreamId(s));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : AllocInfo{};
  }
  void Free(void* p, spStream_t s) { EXPECT_EQ(spFreeAsync(p, s), spSuccess); }
  // A kernel of ns virtual nanoseconds writing [p, p + bytes) (nothing if
  // p is NULL).
  void Kernel(spStream_t s, uint64_t ns, void* p = nullptr, uint64_t bytes = 0) {
    const spAccess a = {p, bytes, 1};
    EXPECT_EQ(spLaunchKernel(s, ns, &a, p == nullptr ? 0 : 1), spSuccess);
  }
  void Sync(spStream_t s) { EXPECT_EQ(spStreamSynchronize(s), spSuccess); }
  void Advance(uint64_t ns) { EXPECT_EQ(spHostAdvance(rt_, ns), spSuccess); }
  uint64_t Now() {
    uint64_t ns = 0;
    EXPECT_EQ(spHostNow(rt_, &ns), spSuccess);
    return ns;
  }

  spMemPoolStats Stats(spMemPool_t pool = nullptr) {
    spMemPoolStats st = {};
    EXPECT_EQ(spMemPoolGetStats(pool == nullptr ? pool_ : pool, &st), spSuccess);
    // Every variant says how its reserved bytes are backed, and the three
    // kinds always add up (docs/design.md "Pool variants").
    EXPECT_EQ(st.hugePageBytes + st.transparentHugePageBytes + st.normalPageBytes,
              st.reservedBytes);
    return st;
  }
  RuleCounts Rules(spMemPool_t pool = nullptr) {
    const spMemPoolStats st = Stats(pool);
    RuleCounts c;
    c.same_stream = st.reuseSameStream;
    c.event_dependency = st.reuseEventDependency;
    c.opportunistic = st.reuseOpportunistic;
    c.internal_dependency = st.reuseInternalDependency;
    c.after_sync = st.reuseAfterSync;
    c.fresh = st.allocCount - c.same_stream - c.event_dependency - c.opportunistic -
              c.internal_dependency - c.after_sync;
    // The C++ API counts fresh allocations itself: every allocation counts
    // exactly one outcome, so the two must agree.
    auto cpp = cpp_->GetPoolStats(PoolId(pool == nullptr ? pool_ : pool));
    EXPECT_TRUE(cpp.ok());
    if (cpp.ok()) {
      EXPECT_EQ(cpp->fresh_allocs, c.fresh);
    }
    return c;
  }

  // Bytes ever mapped from the upstream (C++ statistics only).
  uint64_t BytesMapped(spMemPool_t pool = nullptr) {
    auto st = cpp_->GetPoolStats(PoolId(pool == nullptr ? pool_ : pool));
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->upstream_bytes_mapped : 0;
  }
  static void* At(void* base, uint64_t offset) { return static_cast<char*>(base) + offset; }

  uint64_t Attr(spMemPoolAttr attr, spMemPool_t pool = nullptr) {
    uint64_t v = 0;
    EXPECT_EQ(spMemPoolGetAttribute(pool == nullptr ? pool_ : pool, attr, &v), spSuccess);
    return v;
  }
  void SetThreshold(uint64_t bytes, spMemPool_t pool = nullptr) {
    EXPECT_EQ(spMemPoolSetAttribute(pool == nullptr ? pool_ : pool, spMemPoolAttrReleaseThreshold,
                                    &bytes),
              spSuccess);
  }
  void SetPolicies(bool follow, bool opportunistic, bool internal, spMemPool_t pool = nullptr) {
    spMemPool_t p = pool == nullptr ? pool_ : pool;
    int v = follow;
    EXPECT_EQ(spMemPoolSetAttribute(p, spMemPoolReuseFollowEventDependencies, &v), spSuccess);
    v = opportunistic;
    EXPECT_EQ(spMemPoolSetAttribute(p, spMemPoolReuseAllowOpportunistic, &v), spSuccess);
    v = internal;
    EXPECT_EQ(spMemPoolSetAttribute(p, spMemPoolReuseAllowInternalDependencies, &v), spSuccess);
  }

  spRuntime_t rt_ = nullptr;
  std::unique_ptr<streampool::Runtime> cpp_;
  spMemPool_t pool_ = nullptr;       // the variant's pool on device 0
  spMemPool_t dev1_pool_ = nullptr;  // device 1's default pool
  std::vector<spMemPool_t> pools_;   // every pool whose invariants Stop checks
};

// Every suite below runs once per variant:
// Variants/<Suite>.<Test>/Dvpp_Host_Expandable.
#define INSTANTIATE_FOR_EVERY_VARIANT(suite) \
  INSTANTIATE_TEST_SUITE_P(Variants, suite, ::testing::ValuesIn(AllPoolVariants()), VariantName)

// ===================================================================== F.3

using F3ApiFundamentals = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(F3ApiFundamentals);

// "The simplest use pattern is to allocate, use, and free memory into the
// same stream." The pointer is known at once; the free needs no sync; and
// the stream may reuse its own free immediately.
TEST_P(F3ApiFundamentals, AllocUseFreeOnOneStreamThenReuse) {
  spStream_t stream = NewStream();
  void* ptr = nullptr;
  ASSERT_EQ(MallocAsync(&ptr, 512, stream), spSuccess);
  ASSERT_NE(ptr, nullptr);
  Kernel(stream, 100, ptr, 512);
  ASSERT_EQ(spFreeAsync(ptr, stream), spSuccess);

  EXPECT_EQ(Now(), 0u) << "neither call made the host wait";
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, ChunkFor(512)) << "the allocation came from the variant's pool";
  EXPECT_EQ(st.usedBytes, 0u) << "used drops at the FreeAsync call";
  EXPECT_EQ(st.usedHigh, Rule(512));
  EXPECT_EQ(st.allocCount, 1u);
  EXPECT_EQ(st.freeCount, 1u);
  EXPECT_EQ(st.upstreamMaps, 1u);
  EXPECT_EQ((Rules()), (RuleCounts{.fresh = 1}));

  // Memory freed in a stream is reusable at once by later work of that
  // stream (F.9: "memory freed in a stream can be reused immediately").
  const AllocInfo again = Alloc(512, stream);
  EXPECT_EQ(again.ptr, ptr);
  EXPECT_EQ(again.rule, ReuseRule::kSameStream);
  EXPECT_EQ((Rules()), (RuleCounts{.same_stream = 1, .fresh = 1}));
  st = Stats();
  EXPECT_EQ(st.reservedBytes, ChunkFor(512));
  EXPECT_EQ(st.usedBytes, Rule(512));
  EXPECT_EQ(st.upstreamMaps, 1u);
  EXPECT_EQ(st.waitsInserted, 0u);

  Free(again.ptr, stream);
  Sync(stream);
  EXPECT_EQ(Now(), 100u);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 0u) << "release threshold 0 returns the free chunk at the sync";
  EXPECT_EQ(st.upstreamUnmaps, 1u);
}

// "cudaMallocAsync(&ptr, size, stream); kernel; cudaStreamSynchronize(stream);
// cudaFree(ptr);" -- cudaFree assumes all access completed: the block is
// READY at once, but nothing goes back to the OS before a sync or trim.
TEST_P(F3ApiFundamentals, SynchronousFreeOfAsyncAllocationAfterSync) {
  spStream_t stream = NewStream();
  spStream_t other = NewStream();
  void* ptr = nullptr;
  ASSERT_EQ(MallocAsync(&ptr, 512, stream), spSuccess);
  Kernel(stream, 100, ptr, 512);
  Sync(stream);  // "synchronize is needed to avoid prematurely freeing"
  EXPECT_EQ(Now(), 100u);
  EXPECT_EQ(Stats().reservedBytes, ChunkFor(512)) << "a live allocation keeps its chunk at a sync";

  ASSERT_EQ(spFree(rt_, ptr), spSuccess);
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.usedBytes, 0u);
  EXPECT_EQ(st.freeCount, 1u);
  EXPECT_EQ(st.reservedBytes, ChunkFor(512)) << "spFree releases nothing by itself";
  EXPECT_EQ(st.upstreamUnmaps, 0u);

  // READY at once: another stream reuses it with every policy off and no
  // further sync.
  SetPolicies(false, false, false);
  const AllocInfo reuse = Alloc(512, other);
  EXPECT_EQ(reuse.ptr, ptr);
  EXPECT_EQ(reuse.rule, ReuseRule::kAfterSync);
  EXPECT_EQ((Rules()), (RuleCounts{.after_sync = 1, .fresh = 1}));
  EXPECT_EQ(Stats().upstreamMaps, 1u);

  ASSERT_EQ(spFree(rt_, reuse.ptr), spSuccess);
  EXPECT_EQ(Stats().reservedBytes, ChunkFor(512));
  Sync(other);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 0u) << "the next sync applies the release threshold";
  EXPECT_EQ(st.upstreamUnmaps, 1u);
}

// "cudaMalloc(&ptr, size); kernel<<<..., stream>>>(ptr); cudaFreeAsync(ptr,
// stream);" -- synchronous memory freed in stream order. It is not pool
// memory, and its bytes go back when the free executes, not before: the
// kernel still uses them.
TEST_P(F3ApiFundamentals, FreeAsyncOfSynchronousMalloc) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.deviceCapacity = 4 * kMiB;
  Start(cfg);
  spStream_t stream = NewStream();
  spStream_t other = NewStream();

  void* m = nullptr;
  ASSERT_EQ(spMalloc(&m, 4 * kMiB, rt_, 0), spSuccess);  // the whole device
  Kernel(stream, 1000, m, 4 * kMiB);
  ASSERT_EQ(spFreeAsync(m, stream), spSuccess);
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.freeCount, 0u) << "spMalloc memory is not the pool's";
  EXPECT_EQ(st.reservedBytes, 0u);

  if (variant().BoundedByDeviceCapacity()) {
    // At host time 0 the free has not executed: the device is still full.
    void* p = &p;
    EXPECT_EQ(spMallocFromPoolAsync(&p, 512, pool_, other), spErrorMemoryAllocation);
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(Stats().failedAllocCount, 1u);

    Sync(stream);
    EXPECT_EQ(Now(), 1000u);
    const uint64_t whole_device = Occupying(4 * kMiB);
    ASSERT_EQ(spMallocFromPoolAsync(&p, whole_device, pool_, other), spSuccess);
    st = Stats();
    EXPECT_EQ(st.reservedBytes, 4 * kMiB) << "the Malloc bytes came back at the free point";
    EXPECT_EQ(st.upstreamMaps, 1u);
    EXPECT_EQ((Rules()), (RuleCounts{.fresh = 1}));
    Free(p, other);
    return;
  }

  // Pinned host memory is not the device's: the pool grows at host time 0
  // although the device is full. That the device's bytes come back only at
  // the free point is then seen through spMalloc, which the full device
  // refuses until the sync.
  const AllocInfo pinned = Alloc(512, other);
  EXPECT_EQ(pinned.rule, ReuseRule::kFresh);
  st = Stats();
  EXPECT_EQ(st.failedAllocCount, 0u);
  EXPECT_EQ(st.reservedBytes, ChunkFor(512));
  EXPECT_EQ(st.upstreamMaps, 1u);
  void* d = &d;
  EXPECT_EQ(spMalloc(&d, 4 * kKiB, rt_, 0), spErrorMemoryAllocation) << "the device is still full";

  Sync(stream);
  EXPECT_EQ(Now(), 1000u);
  ASSERT_EQ(spMalloc(&d, 4 * kMiB, rt_, 0), spSuccess)
      << "the Malloc bytes came back at the free point";
  ASSERT_EQ(spFree(rt_, d), spSuccess);
  EXPECT_EQ((Rules()), (RuleCounts{.fresh = 1}));
  Free(pinned.ptr, other);
}

// ===================================================================== F.7

using F7PhysicalPageCaching = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(F7PhysicalPageCaching);

// "By default, the allocator tries to minimize the physical memory owned by
// a pool": threshold 0, so every sync returns wholly free chunks.
TEST_P(F7PhysicalPageCaching, DefaultThresholdZeroReleasesAtSync) {
  EXPECT_EQ(Attr(spMemPoolAttrReleaseThreshold), 0u);
  spStream_t stream = NewStream();
  const AllocInfo a = Alloc(512, stream);
  Free(a.ptr, stream);
  Advance(10);  // time passing is not a sync
  EXPECT_EQ(Stats().reservedBytes, ChunkFor(512));

  Sync(stream);
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 0u);
  EXPECT_EQ(st.reservedHigh, ChunkFor(512));
  EXPECT_EQ(st.upstreamUnmaps, 1u);
}

// "Setting the release threshold to UINT64_MAX will prevent the driver from
// attempting to shrink the pool after every synchronization." The kept bytes
// serve later allocations without going back to the upstream. (A 2 MiB
// request: one 2 MiB chunk, but 4 MiB for Dvpp, whose block is 2 MiB + 128.)
TEST_P(F7PhysicalPageCaching, ThresholdMaxKeepsMemoryAcrossSyncs) {
  SetThreshold(UINT64_MAX);
  EXPECT_EQ(Attr(spMemPoolAttrReleaseThreshold), UINT64_MAX);
  spStream_t stream = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(kChunk, stream);
  Kernel(stream, 100, a.ptr, kChunk);
  Free(a.ptr, stream);
  Sync(stream);
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, ChunkFor(kChunk));
  EXPECT_EQ(st.upstreamUnmaps, 0u);

  SetPolicies(false, false, false);  // only the sync makes it reusable
  const AllocInfo b = Alloc(kChunk, other);
  EXPECT_EQ(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kAfterSync);
  st = Stats();
  EXPECT_EQ(st.upstreamMaps, 1u);
  EXPECT_EQ(st.reservedBytes, ChunkFor(kChunk));
  Free(b.ptr, other);
}

// "When more than the release threshold bytes are held by the pool, the
// allocator will try to release memory on the next sync", never going below
// the threshold. A chunked pool gives back wholly free chunks, largest first,
// skipping one whose release would undershoot; an expandable pool unmaps the
// granules of its free range from the top down and keeps the first one whose
// release would undershoot. Both keep 4 MiB here, but not the same bytes.
TEST_P(F7PhysicalPageCaching, ThresholdReleasesDownToButNeverBelowIt) {
  spStream_t stream = NewStream();
  const AllocInfo small = Alloc(Occupying(2 * kMiB), stream);  // maps 2 MiB
  const AllocInfo large = Alloc(Occupying(4 * kMiB), stream);  // maps 4 MiB
  ASSERT_NE(small.ptr, large.ptr);
  if (Expandable()) {
    ASSERT_EQ(large.ptr, At(small.ptr, 2 * kMiB)) << "the second growth maps right above the first";
  }
  Free(small.ptr, stream);
  Free(large.ptr, stream);
  EXPECT_EQ(Stats().reservedBytes, 6 * kMiB);

  // 6 MiB held, threshold 3 MiB. Chunked: dropping the 4 MiB chunk would
  // leave 2 < 3, so only the 2 MiB chunk goes. Expandable: the two frees
  // coalesced across the growths into one free range; its top granule goes
  // (6 -> 4), the next would leave 2 < 3. One upstream call either way.
  SetThreshold(3 * kMiB);
  Sync(stream);
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 4 * kMiB);
  EXPECT_EQ(st.upstreamUnmaps, 1u);
  // The 4 MiB chunk, or the mapped low end of the free range.
  EXPECT_EQ(st.largestFreeBlock, 4 * kMiB);

  // At the threshold already: nothing more.
  SetThreshold(4 * kMiB);
  Sync(stream);
  EXPECT_EQ(Stats().reservedBytes, 4 * kMiB);

  // The survivor serves again without a new map: the 4 MiB chunk where large
  // was, or the range's low 4 MiB, which start where small was.
  const AllocInfo again = Alloc(Occupying(4 * kMiB), stream);
  EXPECT_EQ(again.ptr, ByGrowth(large.ptr, small.ptr));
  EXPECT_EQ(again.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(Stats().upstreamMaps, 2u);
  Free(again.ptr, stream);

  SetThreshold(0);
  Sync(stream);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 0u);
  EXPECT_EQ(st.upstreamUnmaps, 2u);
}

// The guide's phase loop: threshold UINT64_MAX, ten iterations of ten
// allocations, one kernel and ten frees on one stream, then "synchronize so
// that the trim operation will know that the allocations are no longer in
// use", then cudaMemPoolTrimTo(mempool, 0).
TEST_P(F7PhysicalPageCaching, PhaseLoopThenSynchronizeThenTrimToZero) {
  SetThreshold(UINT64_MAX);
  spStream_t stream = NewStream();
  // size[j]: requests occupying 1.5 MiB and 0.5 MiB in turn, so each pair
  // fills one 2 MiB chunk (or granule).
  uint64_t size[10];
  for (int j = 0; j < 10; ++j) size[j] = Occupying(j % 2 == 0 ? 3 * kMiB / 2 : kMiB / 2);

  void* ptrs[10] = {};
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 10; ++j) {
      ASSERT_EQ(MallocAsync(&ptrs[j], size[j], stream), spSuccess);
    }
    spAccess acc[10];
    for (int j = 0; j < 10; ++j) acc[j] = {ptrs[j], size[j], 1};
    ASSERT_EQ(spLaunchKernel(stream, 1000, acc, 10), spSuccess);
    for (int j = 0; j < 10; ++j) ASSERT_EQ(spFreeAsync(ptrs[j], stream), spSuccess);
  }
  // Iteration 0 maps five chunks or granules (each 1.5 MiB request grows the
  // pool by one; the 0.5 MiB one takes the never-used rest); iterations 1-9
  // reuse the stream's own frees, which coalesce back.
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 10 * kMiB);
  EXPECT_EQ(st.reservedHigh, 10 * kMiB);
  EXPECT_EQ(st.usedBytes, 0u);
  EXPECT_EQ(st.usedHigh, 10 * kMiB);
  EXPECT_EQ(st.upstreamMaps, 5u);
  EXPECT_EQ(st.allocCount, 100u);
  EXPECT_EQ(st.freeCount, 100u);
  EXPECT_EQ((Rules()), (RuleCounts{.same_stream = 90, .fresh = 10}));
  EXPECT_EQ(Now(), 0u);

  // Without the sync, the trim cannot know the frees completed: it keeps
  // everything.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 0), spSuccess);
  EXPECT_EQ(Stats().reservedBytes, 10 * kMiB);

  Sync(stream);
  EXPECT_EQ(Now(), 10 * 1000u);
  EXPECT_EQ(Stats().reservedBytes, 10 * kMiB) << "threshold UINT64_MAX: the sync keeps it all";

  // Chunked: five chunks, five unmaps. Expandable: the five granules are one
  // free range, whatever growth mapped them, and go back in one run.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 0), spSuccess);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 0u);
  EXPECT_EQ(st.upstreamUnmaps, ByGrowth(5u, 1u));
}

// "The minBytesToKeep parameter allows an application to hold onto an amount
// of memory it expects to need in a subsequent phase." Four growths of 2, 4, 6
// and 8 MiB. A chunked pool keeps them as four chunks and the release rule
// goes largest first, skipping a chunk whose release would undershoot the
// bound. An expandable pool holds one free range [0, 20 MiB) and unmaps its
// granules from the top, keeping the first that would undershoot. The
// reserved bytes and unmap counts come out equal here; what survives (and so
// the largest free block and the addresses reuse gets) does not.
TEST_P(F7PhysicalPageCaching, TrimToKeepsAtLeastMinBytesAndSkipsUndershootingChunks) {
  SetThreshold(UINT64_MAX);
  spStream_t stream = NewStream();
  const uint64_t len2 = Occupying(2 * kMiB);
  const uint64_t len4 = Occupying(4 * kMiB);
  const uint64_t len6 = Occupying(6 * kMiB);
  const uint64_t len8 = Occupying(8 * kMiB);
  const AllocInfo p2 = Alloc(len2, stream);
  const AllocInfo p4 = Alloc(len4, stream);
  const AllocInfo p6 = Alloc(len6, stream);
  const AllocInfo p8 = Alloc(len8, stream);
  EXPECT_EQ(Stats().upstreamMaps, 4u) << "each request maps exactly what it lacks";
  void* const base = p2.ptr;  // expandable: the reservation's start
  if (Expandable()) {
    EXPECT_EQ(p8.ptr, At(base, 12 * kMiB)) << "the growths are stacked in one reservation";
  }
  for (const AllocInfo& a : {p2, p4, p6, p8}) Free(a.ptr, stream);
  Sync(stream);
  EXPECT_EQ(Stats().reservedBytes, 20 * kMiB);

  // Bound 11 MiB. Chunked: 8 goes (20 -> 12); 6, 4 and 2 would each
  // undershoot. Expandable: granules [12, 20) go (20 -> 12); one more would
  // leave 10 < 11.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 11 * kMiB), spSuccess);
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 12 * kMiB);
  EXPECT_EQ(st.upstreamUnmaps, 1u);
  EXPECT_EQ(st.largestFreeBlock, ByGrowth(6 * kMiB, 12 * kMiB));
  // What survived serves 6, 4 and 2 MiB again without a map: the chunks
  // where p6, p4 and p2 were, or the low 12 MiB of the range, carved in order.
  const AllocInfo again6 = Alloc(len6, stream);
  const AllocInfo again4 = Alloc(len4, stream);
  const AllocInfo again2 = Alloc(len2, stream);
  EXPECT_EQ(again6.ptr, ByGrowth(p6.ptr, base));
  EXPECT_EQ(again4.ptr, ByGrowth(p4.ptr, At(base, 6 * kMiB)));
  EXPECT_EQ(again2.ptr, ByGrowth(p2.ptr, At(base, 10 * kMiB)));
  for (const AllocInfo& a : {again6, again4, again2}) EXPECT_EQ(a.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(Stats().upstreamMaps, 4u);
  for (const AllocInfo& a : {again2, again4, again6}) Free(a.ptr, stream);
  Sync(stream);

  // Bound 9 MiB. Chunked: 6 and 4 would each undershoot and are skipped; 2
  // goes (12 -> 10): a smaller chunk may go where a larger one may not.
  // Expandable: granule [10, 12) goes; the next would leave 8 < 9.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 9 * kMiB), spSuccess);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 10 * kMiB);
  EXPECT_EQ(st.upstreamUnmaps, 2u);
  EXPECT_EQ(st.largestFreeBlock, ByGrowth(6 * kMiB, 10 * kMiB));

  // Bound 5 MiB. Chunked: 6 would undershoot (10 -> 4); 4 goes (10 -> 6).
  // Expandable: granules [6, 10) go in one run; the next would leave 4 < 5.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 5 * kMiB), spSuccess);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 6 * kMiB);
  EXPECT_EQ(st.upstreamUnmaps, 3u);
  EXPECT_EQ(st.largestFreeBlock, 6 * kMiB);

  // A bound above what is reserved releases nothing.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 13 * kMiB), spSuccess);
  EXPECT_EQ(Stats().reservedBytes, 6 * kMiB);

  const AllocInfo last = Alloc(len6, stream);
  EXPECT_EQ(last.ptr, ByGrowth(p6.ptr, base));
  EXPECT_EQ(Stats().upstreamMaps, 4u);
  Free(last.ptr, stream);
  Sync(stream);

  ASSERT_EQ(spMemPoolTrimTo(pool_, 0), spSuccess);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 0u);
  EXPECT_EQ(st.upstreamUnmaps, 4u);
}

// ===================================================================== F.8

using F8ResourceUsageStatistics = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(F8ResourceUsageStatistics);

// The guide's getUsageStatistics / resetStatistics helpers. The requests are
// the same for every variant; what they occupy is the variant's rule size.
// 1030 B is a size where every rule differs: 1280 B on Device and HugePage,
// 1088 on PinnedHost, 1152 on Dvpp.
//
// The 3 MiB request grows the pool differently by growth mode, so the
// reserved figures and the reserved watermark differ: a chunked pool maps a
// 4 MiB chunk of its own (6 MiB reserved); an expandable pool carves it right
// above `small`, where the first granule's free rest already holds almost
// 2 MiB of it, and maps only the second granule (4 MiB reserved).
TEST_P(F8ResourceUsageStatistics, FourAttributesAndWatermarkReset) {
  spStream_t stream = NewStream();
  const uint64_t small_bytes = Rule(1030);
  const uint64_t grown_high = ByGrowth(6 * kMiB, 4 * kMiB);
  const AllocInfo small = Alloc(1030, stream);
  const AllocInfo big = Alloc(3 * kMiB, stream);
  ASSERT_EQ(ChunkFor(1030), kChunk);
  ASSERT_EQ(ChunkFor(3 * kMiB), 4 * kMiB);
  if (Expandable()) {
    EXPECT_EQ(big.ptr, At(small.ptr, small_bytes));
  }
  EXPECT_EQ(Attr(spMemPoolAttrReservedMemCurrent), grown_high);
  EXPECT_EQ(Stats().upstreamMaps, 2u);
  EXPECT_EQ(Attr(spMemPoolAttrUsedMemCurrent), Rule(3 * kMiB) + small_bytes);
  Free(big.ptr, stream);
  EXPECT_EQ(Attr(spMemPoolAttrUsedMemCurrent), small_bytes) << "used drops at the FreeAsync call";
  // Threshold 0 returns the 4 MiB chunk, or the second granule: the only one
  // lying wholly inside free memory (the first holds `small`).
  Sync(stream);

  // getUsageStatistics
  const uint64_t reserved = Attr(spMemPoolAttrReservedMemCurrent);
  const uint64_t reserved_high = Attr(spMemPoolAttrReservedMemHigh);
  const uint64_t used = Attr(spMemPoolAttrUsedMemCurrent);
  const uint64_t used_high = Attr(spMemPoolAttrUsedMemHigh);
  EXPECT_EQ(reserved, kChunk);
  EXPECT_EQ(reserved_high, grown_high);
  EXPECT_EQ(used, small_bytes);
  EXPECT_EQ(used_high, Rule(3 * kMiB) + small_bytes);
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, reserved);
  EXPECT_EQ(st.reservedHigh, reserved_high);
  EXPECT_EQ(st.usedBytes, used);
  EXPECT_EQ(st.usedHigh, used_high);

  // resetStatistics: "resetting the watermarks will make them take on the
  // current value".
  uint64_t value = 0;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolAttrReservedMemHigh, &value), spSuccess);
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolAttrUsedMemHigh, &value), spSuccess);
  EXPECT_EQ(Attr(spMemPoolAttrReservedMemHigh), kChunk);
  EXPECT_EQ(Attr(spMemPoolAttrUsedMemHigh), small_bytes);

  // Only 0 resets; the Current attributes are read-only. Nothing changes.
  for (uint64_t bad : {uint64_t{1}, grown_high}) {
    EXPECT_EQ(spMemPoolSetAttribute(pool_, spMemPoolAttrReservedMemHigh, &bad),
              spErrorInvalidValue);
    EXPECT_EQ(spMemPoolSetAttribute(pool_, spMemPoolAttrUsedMemHigh, &bad), spErrorInvalidValue);
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{1}}) {
    EXPECT_EQ(spMemPoolSetAttribute(pool_, spMemPoolAttrReservedMemCurrent, &v),
              spErrorInvalidValue);
    EXPECT_EQ(spMemPoolSetAttribute(pool_, spMemPoolAttrUsedMemCurrent, &v), spErrorInvalidValue);
  }
  EXPECT_EQ(Attr(spMemPoolAttrReservedMemCurrent), kChunk);
  EXPECT_EQ(Attr(spMemPoolAttrReservedMemHigh), kChunk);
  EXPECT_EQ(Attr(spMemPoolAttrUsedMemCurrent), small_bytes);
  EXPECT_EQ(Attr(spMemPoolAttrUsedMemHigh), small_bytes);

  // The reset watermarks track from the current values on.
  const AllocInfo mid = Alloc(kMiB, stream);  // fits the first chunk's (granule's) rest
  EXPECT_EQ(Attr(spMemPoolAttrUsedMemHigh), small_bytes + Rule(kMiB));
  EXPECT_EQ(Attr(spMemPoolAttrReservedMemHigh), kChunk);
  Free(mid.ptr, stream);
  Free(small.ptr, stream);
}

// =================================================================== F.9.1

using F91ReuseFollowEventDependencies = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(F91ReuseFollowEventDependencies);

// "Waiting on the event that captures the free in another stream allows the
// allocator to reuse the memory ... in the other stream."
TEST_P(F91ReuseFollowEventDependencies, WaitOnEventAfterFreeLetsOtherStreamReuse) {
  const uint64_t len = WholeChunk();
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  spEvent_t event = NewEvent();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  ASSERT_EQ(spEventRecord(event, original), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(other, event), spSuccess);

  // Host time 0: the kernel is still running, so only the event order (not
  // completion) can justify the reuse.
  const AllocInfo b = Alloc(len, other);
  EXPECT_EQ(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kEventDependency);
  EXPECT_EQ((Rules()), (RuleCounts{.event_dependency = 1, .fresh = 1}));
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, kChunk);
  EXPECT_EQ(st.upstreamMaps, 1u);
  EXPECT_EQ(st.waitsInserted, 0u) << "the user's wait already orders the streams";

  // other's work runs after original's kernel through the user's wait.
  Kernel(other, 10, b.ptr, len);
  Sync(other);
  EXPECT_EQ(Now(), 1010u);
  Free(b.ptr, other);
}

// With the policy disabled the same program grows the pool instead.
TEST_P(F91ReuseFollowEventDependencies, PolicyDisabledGrowsDespiteTheWait) {
  const uint64_t len = WholeChunk();
  int off = 0;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolReuseFollowEventDependencies, &off), spSuccess);
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  spEvent_t event = NewEvent();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  ASSERT_EQ(spEventRecord(event, original), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(other, event), spSuccess);

  const AllocInfo b = Alloc(len, other);
  EXPECT_NE(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ((Rules()), (RuleCounts{.fresh = 2}));
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 2 * kChunk);
  EXPECT_EQ(st.upstreamMaps, 2u);
  EXPECT_EQ(st.waitsInserted, 0u);
  Free(b.ptr, other);
}

// =================================================================== F.9.2

using F92ReuseAllowOpportunistic = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(F92ReuseAllowOpportunistic);

// "After some time, the kernel finishes running ... this allocation request
// can be fulfilled with the prior allocation based on the progress of
// originalStream." Complete means end <= host now, and looking promotes
// (docs/design.md "Block lifecycle"): when rules 1 and 2 find nothing, rule 3 makes
// every free observed complete READY. A promoted block stays READY whatever
// the switch says afterwards, and its reuse counts as opportunistic until a
// sync (or successful query) proves it, as after-sync from then on.
TEST_P(F92ReuseAllowOpportunistic, ReusesOnceTheKernelHasFinished) {
  const uint64_t half = Occupying(kMiB);
  const uint64_t quarter = Occupying(kMiB / 2);
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  spStream_t third = NewStream();
  const AllocInfo a1 = Alloc(half, original);
  const AllocInfo a2 = Alloc(quarter, original);  // a1, a2 and a3 fill one chunk
  const AllocInfo a3 = Alloc(quarter, original);
  ASSERT_EQ(a2.ptr, At(a1.ptr, kMiB));
  ASSERT_EQ(a3.ptr, At(a2.ptr, kMiB / 2));
  Kernel(original, 1000, a1.ptr, half);  // runs [0, 1000)
  Free(a1.ptr, original);
  Free(a2.ptr, original);
  Free(a3.ptr, original);
  Advance(1000);  // wait(10): the kernel and the frees have finished

  const AllocInfo b = Alloc(half, other);
  EXPECT_EQ(b.ptr, a1.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kOpportunistic);
  EXPECT_EQ((Rules()), (RuleCounts{.opportunistic = 1, .fresh = 3}));
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, kChunk);
  EXPECT_EQ(st.upstreamMaps, 1u);
  EXPECT_EQ(st.waitsInserted, 0u);

  // b's allocation promoted the whole free (one pending block by then), so
  // the rest of the chunk is READY. With the switch off nothing more is
  // promoted, but nothing is demoted either: a third stream takes a2's bytes
  // without growing, and since no sync has proven the free, that reuse too
  // counts as opportunistic.
  int off = 0;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolReuseAllowOpportunistic, &off), spSuccess);
  const AllocInfo c = Alloc(quarter, third);
  EXPECT_EQ(c.ptr, a2.ptr);
  EXPECT_EQ(c.rule, ReuseRule::kOpportunistic);
  EXPECT_EQ((Rules()), (RuleCounts{.opportunistic = 2, .fresh = 3}));
  EXPECT_EQ(Stats().upstreamMaps, 1u);

  // The sync proves the free: reuse of what is left now counts after-sync.
  Sync(original);
  const AllocInfo d = Alloc(quarter, third);
  EXPECT_EQ(d.ptr, a3.ptr);
  EXPECT_EQ(d.rule, ReuseRule::kAfterSync);
  EXPECT_EQ((Rules()), (RuleCounts{.opportunistic = 2, .after_sync = 1, .fresh = 3}));
  st = Stats();
  EXPECT_EQ(st.reservedBytes, kChunk);
  EXPECT_EQ(st.upstreamMaps, 1u);
  EXPECT_EQ(st.waitsInserted, 0u);
  Free(b.ptr, other);
  Free(c.ptr, third);
  Free(d.ptr, third);
}

// One nanosecond before the kernel ends the free is not complete: the other
// stream grows the pool.
TEST_P(F92ReuseAllowOpportunistic, NotBeforeTheKernelHasFinished) {
  const uint64_t len = WholeChunk();
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  Advance(999);

  const AllocInfo b = Alloc(len, other);
  EXPECT_NE(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ((Rules()), (RuleCounts{.fresh = 2}));
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 2 * kChunk);
  EXPECT_EQ(st.waitsInserted, 0u) << "growth succeeded, so no internal dependency";
  Free(b.ptr, other);
}

// "When disabled, the allocator will still reuse memory made available when
// a stream is synchronized with the cpu" -- but not memory merely observed
// complete.
TEST_P(F92ReuseAllowOpportunistic, PolicyDisabledGrowsUntilASync) {
  const uint64_t len = WholeChunk();
  int off = 0;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolReuseAllowOpportunistic, &off), spSuccess);
  SetThreshold(UINT64_MAX);  // keep what the sync makes free
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  Advance(2000);

  const AllocInfo b = Alloc(len, other);
  EXPECT_NE(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ(Stats().reservedBytes, 2 * kChunk);

  Sync(original);
  const AllocInfo c = Alloc(len, other);
  EXPECT_EQ(c.ptr, a.ptr);
  EXPECT_EQ(c.rule, ReuseRule::kAfterSync);
  EXPECT_EQ((Rules()), (RuleCounts{.after_sync = 1, .fresh = 2}));
  Free(b.ptr, other);
  Free(c.ptr, other);
}

// =================================================================== F.9.3

class F93ReuseAllowInternalDependencies : public ScenarioTest {
 protected:
  // The original stream's 1000-ns kernel and free, then an allocation on the
  // other stream that cannot grow. It takes the pending block and waits for
  // the free: the other stream's next kernel (10 ns) ends at 1010, not 10.
  void ExpectInternalDependency(spMemPool_t pool) {
    const uint64_t len = WholeChunk();
    spStream_t original = NewStream();
    spStream_t other = NewStream();
    const AllocInfo a = Alloc(len, original, pool);  // the pool is now full
    Kernel(original, 1000, a.ptr, len);
    Free(a.ptr, original);

    const AllocInfo b = Alloc(len, other, pool);
    EXPECT_EQ(b.ptr, a.ptr);
    EXPECT_EQ(b.rule, ReuseRule::kInternalDependency);
    EXPECT_EQ((Rules(pool)), (RuleCounts{.internal_dependency = 1, .fresh = 1}));
    const spMemPoolStats st = Stats(pool);
    EXPECT_EQ(st.waitsInserted, 1u);
    EXPECT_EQ(st.upstreamMaps, 1u);
    EXPECT_EQ(st.reservedBytes, kChunk);
    EXPECT_EQ(st.failedAllocCount, 0u);

    Kernel(other, 10, b.ptr, len);
    Advance(1005);
    EXPECT_EQ(spStreamQuery(other), spErrorNotReady) << "other's kernel runs [1000, 1010)";
    Sync(other);
    EXPECT_EQ(Now(), 1010u);
    Free(b.ptr, other);
  }
};
INSTANTIATE_FOR_EVERY_VARIANT(F93ReuseAllowInternalDependencies);

// Growth fails because the pool's maxSize (2 MiB) is already reserved.
TEST_P(F93ReuseAllowInternalDependencies, WaitInsertedWhenMaxSizeBlocksGrowth) {
  ExpectInternalDependency(NewPool(kChunk));
}

// Growth fails because the device (2 MiB) is full.
TEST_P(F93ReuseAllowInternalDependencies, WaitInsertedWhenDeviceCapacityBlocksGrowth) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.deviceCapacity = kChunk;
  Start(cfg);
  if (variant().BoundedByDeviceCapacity()) {
    ExpectInternalDependency(pool_);
    return;
  }

  // A pinned host pool has no device capacity to run out of: on the same
  // 2 MiB device, the other stream grows past it with no dependency and its
  // kernel does not wait for the original's ...
  const uint64_t len = WholeChunk();
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  const AllocInfo b = Alloc(len, other);
  EXPECT_NE(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 2 * kChunk) << "more than the device holds";
  EXPECT_EQ(st.waitsInserted, 0u);
  Kernel(other, 10, b.ptr, len);
  Sync(other);
  EXPECT_EQ(Now(), 10u);
  Free(b.ptr, other);

  // ... so the capacity bound is played by maxSize, on a fresh runtime.
  Start(cfg);
  ExpectInternalDependency(NewPool(kChunk));
}

// "If the driver fails to allocate more physical memory" -- only then: while
// growth succeeds, no dependency is inserted and other's work does not wait.
TEST_P(F93ReuseAllowInternalDependencies, NoDependencyWhileGrowthSucceeds) {
  const uint64_t len = WholeChunk();
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);

  const AllocInfo b = Alloc(len, other);
  EXPECT_NE(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ((Rules()), (RuleCounts{.fresh = 2}));
  EXPECT_EQ(Stats().waitsInserted, 0u);
  Kernel(other, 10, b.ptr, len);
  Sync(other);
  EXPECT_EQ(Now(), 10u);
  Free(b.ptr, other);
}

// With the policy off and growth blocked the allocation fails and changes
// nothing but failedAllocCount and oomCount (the reclaim finds nothing READY:
// the free is still PENDING behind the kernel).
TEST_P(F93ReuseAllowInternalDependencies, PolicyDisabledFailsWhenGrowthFails) {
  const uint64_t len = WholeChunk();
  spMemPool_t pool = NewPool(kChunk);
  SetPolicies(true, true, false, pool);
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(len, original, pool);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  const spMemPoolStats before = Stats(pool);

  void* p = &p;
  EXPECT_EQ(spMallocFromPoolAsync(&p, len, pool, other), spErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  spMemPoolStats after = Stats(pool);
  EXPECT_EQ(after.failedAllocCount, before.failedAllocCount + 1);
  EXPECT_EQ(after.oomCount, before.oomCount + 1);
  after.failedAllocCount = before.failedAllocCount;
  after.oomCount = before.oomCount;
  EXPECT_EQ(std::memcmp(&after, &before, sizeof before), 0) << "a failure changes nothing else";

  // other's later work does not wait for original.
  Kernel(other, 10);
  Sync(other);
  EXPECT_EQ(Now(), 10u);
}

// =================================================================== F.9.4

using F94DisablingReusePolicies = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(F94DisablingReusePolicies);

// With all three policies off, another stream's free is reused only after a
// synchronize: an event order and observed completion are both ignored.
TEST_P(F94DisablingReusePolicies, CrossStreamAllocationGrowsInstead) {
  const uint64_t len = WholeChunk();
  SetPolicies(false, false, false);
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  spEvent_t event = NewEvent();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  ASSERT_EQ(spEventRecord(event, original), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(other, event), spSuccess);
  Advance(2000);  // ordered and complete: rules 2 and 3 would both apply

  const AllocInfo b = Alloc(len, other);
  EXPECT_NE(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ((Rules()), (RuleCounts{.fresh = 2}));
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 2 * kChunk);
  EXPECT_EQ(st.upstreamMaps, 2u);
  EXPECT_EQ(st.waitsInserted, 0u);
  Free(b.ptr, other);
}

TEST_P(F94DisablingReusePolicies, SynchronizeStillMakesFreesReusable) {
  const uint64_t len = WholeChunk();
  SetPolicies(false, false, false);
  SetThreshold(UINT64_MAX);
  spStream_t original = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(len, original);
  Kernel(original, 1000, a.ptr, len);
  Free(a.ptr, original);
  Sync(original);

  const AllocInfo b = Alloc(len, other);
  EXPECT_EQ(b.ptr, a.ptr);
  EXPECT_EQ(b.rule, ReuseRule::kAfterSync);
  EXPECT_EQ((Rules()), (RuleCounts{.after_sync = 1, .fresh = 1}));
  EXPECT_EQ(Stats().upstreamMaps, 1u);
  Free(b.ptr, other);
}

// ==================================================================== F.12

// "When the user requests the driver to synchronize, the driver ... will
// determine what frees were guaranteed to be completed by the
// synchronization. These allocations are made available for allocation
// regardless of specified stream or disabled allocation policies."
//
// Every F.12 test lays out one chunk as [p: 512 B | anchor: the rest of the
// chunk, live], frees p on `original` after a 1000-ns kernel, and asks
// whether a stream with every policy off gets p back without growing. (p
// occupies the variant's rule size of 512 B: 640 on Dvpp.)
class F12SynchronizationActions : public ScenarioTest {
 protected:
  enum class SyncKind { kStream, kEvent, kDevice };

  void SetUp() override {
    ScenarioTest::SetUp();
    SetPolicies(false, false, false);
    original_ = NewStream();
    later_ = NewStream();
    p_ = Alloc(512, original_);
    anchor_ = Alloc(Occupying(kChunk - Rule(512)), original_);
    ASSERT_EQ(static_cast<char*>(anchor_.ptr), static_cast<char*>(p_.ptr) + Rule(512));
    Kernel(original_, 1000, p_.ptr, 512);
  }

  // The allocation on `later_` with every policy off: p again iff the sync
  // made p's free READY.
  void ExpectPReady() {
    const AllocInfo b = Alloc(512, later_);
    EXPECT_EQ(b.ptr, p_.ptr);
    EXPECT_EQ(b.rule, ReuseRule::kAfterSync);
    EXPECT_EQ((Rules()), (RuleCounts{.after_sync = 1, .fresh = 2}));
    const spMemPoolStats st = Stats();
    EXPECT_EQ(st.upstreamMaps, 1u);
    EXPECT_EQ(st.reservedBytes, kChunk) << "the anchor keeps the chunk";
    EXPECT_EQ(st.waitsInserted, 0u);
  }

  // Each kind of synchronize, on the free's own stream or an event recorded
  // after it, makes p's free READY whatever the policies say.
  void ExpectSyncMakesFreeReady(SyncKind kind) {
    Free(p_.ptr, original_);
    spEvent_t event = NewEvent();
    ASSERT_EQ(spEventRecord(event, original_), spSuccess);
    switch (kind) {
      case SyncKind::kStream:
        ASSERT_EQ(spStreamSynchronize(original_), spSuccess);
        break;
      case SyncKind::kEvent:
        ASSERT_EQ(spEventSynchronize(event), spSuccess);
        break;
      case SyncKind::kDevice:
        ASSERT_EQ(spDeviceSynchronize(rt_, 0), spSuccess);
        break;
    }
    EXPECT_EQ(Now(), 1000u) << "the sync waited for the kernel";
    ExpectPReady();
  }

  spStream_t original_ = nullptr;
  spStream_t later_ = nullptr;
  AllocInfo p_;
  AllocInfo anchor_;
};
INSTANTIATE_FOR_EVERY_VARIANT(F12SynchronizationActions);

TEST_P(F12SynchronizationActions, StreamSynchronizeMakesFreeReadyRegardlessOfPolicies) {
  ExpectSyncMakesFreeReady(SyncKind::kStream);
}

TEST_P(F12SynchronizationActions, EventSynchronizeMakesFreeReadyRegardlessOfPolicies) {
  ExpectSyncMakesFreeReady(SyncKind::kEvent);
}

TEST_P(F12SynchronizationActions, DeviceSynchronizeMakesFreeReadyRegardlessOfPolicies) {
  ExpectSyncMakesFreeReady(SyncKind::kDevice);
}

// Memory of the pool (device 0's, or pinned host memory, which no device
// owns) freed on a stream of device 1 after waiting for the kernel:
// synchronizing device 1 proves the free complete, and the owning pool takes
// note.
TEST_P(F12SynchronizationActions, SyncOfAnotherDeviceReachesTheOwningPool) {
  spStream_t dev1 = NewStream(/*device=*/1);
  spEvent_t kernel_done = NewEvent();
  ASSERT_EQ(spEventRecord(kernel_done, original_), spSuccess);
  ASSERT_EQ(spStreamWaitEvent(dev1, kernel_done), spSuccess);
  Free(p_.ptr, dev1);
  ASSERT_EQ(spDeviceSynchronize(rt_, 1), spSuccess);
  EXPECT_EQ(Now(), 1000u);
  ExpectPReady();
  EXPECT_EQ(Stats(dev1_pool_).reservedBytes, 0u) << "device 1's own pool is untouched";
}

// Transitivity: syncing stream B, which waited on an event recorded after the
// free on A, proves A's free complete too.
TEST_P(F12SynchronizationActions, SyncIsTransitiveThroughEventWaits) {
  Free(p_.ptr, original_);
  spEvent_t after_free = NewEvent();
  ASSERT_EQ(spEventRecord(after_free, original_), spSuccess);
  spStream_t b = NewStream();
  ASSERT_EQ(spStreamWaitEvent(b, after_free), spSuccess);
  Kernel(b, 10);
  Sync(b);
  EXPECT_EQ(Now(), 1010u);
  ExpectPReady();
}

// The converse: a sync proves only what it waited for. Stream B never waited
// on A; although A's free has completed in time, B's sync does not make it
// READY, and with every policy off the allocation grows.
TEST_P(F12SynchronizationActions, SyncOfUnrelatedStreamProvesNothingAboutOthers) {
  Free(p_.ptr, original_);
  spStream_t b = NewStream();
  Kernel(b, 2000);
  Sync(b);
  EXPECT_EQ(Now(), 2000u);
  const AllocInfo c = Alloc(512, later_);
  EXPECT_NE(c.ptr, p_.ptr);
  EXPECT_EQ(c.rule, ReuseRule::kFresh);
  EXPECT_EQ(Stats().upstreamMaps, 2u);
}

class F12QueryActions : public ScenarioTest {
 protected:
  enum class QueryKind { kStream, kEvent };

  // A successful query makes the free READY (reuse with every policy off) but
  // releases nothing, even with threshold 0 and the chunk wholly free; the
  // next sync does.
  void ExpectQueryPromotesButDoesNotRelease(QueryKind kind) {
    const uint64_t len = WholeChunk();
    SetPolicies(false, false, false);
    spStream_t original = NewStream();
    spStream_t other = NewStream();
    spEvent_t event = NewEvent();
    const AllocInfo a = Alloc(len, original);
    Kernel(original, 1000, a.ptr, len);
    Free(a.ptr, original);
    ASSERT_EQ(spEventRecord(event, original), spSuccess);
    auto query = [&] {
      return kind == QueryKind::kStream ? spStreamQuery(original) : spEventQuery(event);
    };

    Advance(999);
    EXPECT_EQ(query(), spErrorNotReady);
    Advance(1);
    EXPECT_EQ(query(), spSuccess);
    spMemPoolStats st = Stats();
    EXPECT_EQ(st.reservedBytes, kChunk) << "queries release nothing";
    EXPECT_EQ(st.upstreamUnmaps, 0u);

    const AllocInfo b = Alloc(len, other);
    EXPECT_EQ(b.ptr, a.ptr);
    EXPECT_EQ(b.rule, ReuseRule::kAfterSync);
    EXPECT_EQ((Rules()), (RuleCounts{.after_sync = 1, .fresh = 1}));

    Free(b.ptr, other);
    Sync(other);
    st = Stats();
    EXPECT_EQ(st.reservedBytes, 0u);
    EXPECT_EQ(st.upstreamUnmaps, 1u);
  }
};
INSTANTIATE_FOR_EVERY_VARIANT(F12QueryActions);

TEST_P(F12QueryActions, StreamQuerySuccessPromotesButDoesNotRelease) {
  ExpectQueryPromotesButDoesNotRelease(QueryKind::kStream);
}

TEST_P(F12QueryActions, EventQuerySuccessPromotesButDoesNotRelease) {
  ExpectQueryPromotesButDoesNotRelease(QueryKind::kEvent);
}

// ======================================================== Expandable growth

// docs/design.md "Block lifecycle": an expandable pool maps 2 MiB granules into
// one reserved range, so free blocks coalesce whichever growth mapped them, a
// growth maps only the granules the chosen block lacks, and release unmaps
// whole granules inside READY blocks. Each scenario runs in both growth modes
// and pins the chunked pool's outcome beside the expandable one's.
using ExpandableGrowth = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(ExpandableGrowth);

// The pool reads back the mode it was made with; it is a property, not a
// setting.
TEST_P(ExpandableGrowth, PoolReadsBackItsGrowthMode) {
  int growth = -1;
  ASSERT_EQ(spMemPoolGetAttribute(pool_, spMemPoolAttrGrowth, &growth), spSuccess);
  EXPECT_EQ(growth, variant().growth);
  int other = Expandable() ? spPoolGrowthChunked : spPoolGrowthExpandable;
  EXPECT_EQ(spMemPoolSetAttribute(pool_, spMemPoolAttrGrowth, &other), spErrorInvalidValue);
  ASSERT_EQ(spMemPoolGetAttribute(pool_, spMemPoolAttrGrowth, &growth), spSuccess);
  EXPECT_EQ(growth, variant().growth);
}

// 1 MiB live at the bottom of the pool, then a 3 MiB request. The expandable
// pool's topmost free block (the rest of the first granule and the unmapped
// range above it) already holds 1 MiB mapped, so the growth maps only the
// 2 MiB that lack: reserved = used = 4 MiB, nothing mapped lies free. The
// chunked pool maps a 4 MiB chunk of its own and holds 2 MiB it does not use.
TEST_P(ExpandableGrowth, ShortfallGrowthMapsOnlyWhatTheTopFreeBlockLacks) {
  spStream_t s = NewStream();
  const AllocInfo low = Alloc(Occupying(kMiB), s);
  EXPECT_EQ(Stats().reservedBytes, kGranule);

  const AllocInfo top = Alloc(Occupying(3 * kMiB), s);
  EXPECT_EQ(top.rule, ReuseRule::kFresh);
  if (Expandable()) {
    EXPECT_EQ(top.ptr, At(low.ptr, kMiB)) << "carved right above low, across two granules";
  } else {
    EXPECT_TRUE(top.ptr < low.ptr || top.ptr >= At(low.ptr, kChunk)) << "a chunk of its own";
  }
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.usedBytes, 4 * kMiB);
  EXPECT_EQ(st.reservedBytes, ByGrowth(6 * kMiB, 4 * kMiB));
  EXPECT_EQ(st.upstreamMaps, 2u) << "one upstream call per growth";
  EXPECT_EQ(BytesMapped(), ByGrowth(6 * kMiB, 4 * kMiB));
  // Chunked: the last 1 MiB of each chunk. Expandable: the free range above
  // `top` starts on an unmapped granule, so nothing free is mapped.
  EXPECT_EQ(st.largestFreeBlock, ByGrowth(kMiB, uint64_t{0}));

  // Threshold 0: everything goes back at the sync, the expandable pool's two
  // granules in one run since they are one free range by then.
  Free(low.ptr, s);
  Free(top.ptr, s);
  Sync(s);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 0u);
  EXPECT_EQ(st.upstreamUnmaps, ByGrowth(2u, 1u));
}

// Two growths on one stream map adjacent granules in an expandable pool, and
// the stream's two frees merge into one pending block spanning both: a 4 MiB
// request of the same stream reuses it without a sync and without growing. A
// chunked pool's blocks never span chunks, so the same program grows.
TEST_P(ExpandableGrowth, PendingFreesOfOneStreamCoalesceAcrossGrowths) {
  const uint64_t len = WholeChunk();
  spStream_t s = NewStream();
  const AllocInfo a = Alloc(len, s);
  const AllocInfo b = Alloc(len, s);
  EXPECT_EQ(Stats().upstreamMaps, 2u);
  if (Expandable()) {
    ASSERT_EQ(b.ptr, At(a.ptr, kGranule));
  }
  Kernel(s, 1000, a.ptr, len);
  Free(a.ptr, s);
  Free(b.ptr, s);
  // (Blocks above 1 MiB never wait in a front cache: they merge at once.)
  EXPECT_EQ(Stats().largestFreeBlock, ByGrowth(kChunk, 2 * kGranule));

  const AllocInfo c = Alloc(Occupying(4 * kMiB), s);
  EXPECT_EQ(c.rule, ByGrowth(ReuseRule::kFresh, ReuseRule::kSameStream));
  if (Expandable()) {
    EXPECT_EQ(c.ptr, a.ptr);
  } else {
    EXPECT_TRUE(c.ptr != a.ptr && c.ptr != b.ptr);
  }
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.upstreamMaps, ByGrowth(3u, 2u));
  EXPECT_EQ(st.reservedBytes, ByGrowth(8 * kMiB, 4 * kMiB));
  EXPECT_EQ(Now(), 0u) << "no sync was needed";
  Free(c.ptr, s);
}

// The same across streams, once a sync has made both frees READY: READY
// blocks merge across the growth boundary, so another stream's 4 MiB request
// fits (every policy off: only the sync makes the frees reusable). The
// chunked pool holds two free 2 MiB chunks and still has to grow.
TEST_P(ExpandableGrowth, ReadyBlocksCoalesceAcrossGrowths) {
  const uint64_t len = WholeChunk();
  SetThreshold(UINT64_MAX);
  SetPolicies(false, false, false);
  spStream_t s1 = NewStream();
  spStream_t s2 = NewStream();
  spStream_t other = NewStream();
  const AllocInfo a = Alloc(len, s1);
  const AllocInfo b = Alloc(len, s2);
  if (Expandable()) {
    ASSERT_EQ(b.ptr, At(a.ptr, kGranule));
  }
  Kernel(s1, 1000, a.ptr, len);
  Kernel(s2, 1000, b.ptr, len);
  Free(a.ptr, s1);
  Free(b.ptr, s2);
  Sync(s1);
  Sync(s2);
  EXPECT_EQ(Stats().largestFreeBlock, ByGrowth(kChunk, 2 * kGranule));

  const AllocInfo c = Alloc(Occupying(4 * kMiB), other);
  EXPECT_EQ(c.rule, ByGrowth(ReuseRule::kFresh, ReuseRule::kAfterSync));
  if (Expandable()) {
    EXPECT_EQ(c.ptr, a.ptr);
  }
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.upstreamMaps, ByGrowth(3u, 2u));
  EXPECT_EQ(st.reservedBytes, ByGrowth(8 * kMiB, 4 * kMiB));
  EXPECT_EQ(st.waitsInserted, 0u);
  Free(c.ptr, other);
}

// Release under a threshold, then TrimTo, around a live 1 MiB anchor at the
// bottom of the pool with 7 MiB freed above it. The expandable pool releases
// whole granules inside the free range, from the top down, and keeps the
// first whose release would take reserved below the bound; the granule
// holding the anchor is never wholly free. The chunked pool's only free chunk
// is all 8 MiB of the big allocation's, all or nothing.
TEST_P(ExpandableGrowth, ReleaseUnmapsFreeGranulesButNeverBelowTheBound) {
  spStream_t s = NewStream();
  const AllocInfo anchor = Alloc(Occupying(kMiB), s);
  const AllocInfo big = Alloc(Occupying(7 * kMiB), s);
  // Expandable: granules 1-3 are the shortfall. Chunked: an 8 MiB chunk.
  EXPECT_EQ(Stats().reservedBytes, ByGrowth(10 * kMiB, 8 * kMiB));
  if (Expandable()) {
    ASSERT_EQ(big.ptr, At(anchor.ptr, kMiB));
  }
  Kernel(s, 1000, big.ptr, Occupying(7 * kMiB));
  Free(big.ptr, s);

  // Threshold 3 MiB. Expandable: granules 3 and 2 go in one run (8 -> 4);
  // granule 1 would leave 2 < 3 and is kept, as is granule 0 (the anchor's).
  // Chunked: the 8 MiB chunk would leave 2 < 3: nothing goes.
  SetThreshold(3 * kMiB);
  Sync(s);
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, ByGrowth(10 * kMiB, 4 * kMiB));
  EXPECT_EQ(st.upstreamUnmaps, ByGrowth(0u, 1u));
  // Chunked: the whole free chunk. Expandable: the free range's mapped low
  // end, from just above the anchor to the top of granule 1.
  EXPECT_EQ(st.largestFreeBlock, ByGrowth(8 * kMiB, 3 * kMiB));

  // The kept bytes serve 3 MiB again without a map, at big's address in both
  // modes (the bottom of its chunk, or just above the anchor).
  const AllocInfo again = Alloc(Occupying(3 * kMiB), s);
  EXPECT_EQ(again.ptr, big.ptr);
  EXPECT_EQ(again.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(Stats().upstreamMaps, 2u);
  Free(again.ptr, s);
  Sync(s);
  EXPECT_EQ(Stats().reservedBytes, ByGrowth(10 * kMiB, 4 * kMiB));

  // TrimTo(3 MiB) keeps what the threshold kept, for the same reason.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 3 * kMiB), spSuccess);
  EXPECT_EQ(Stats().reservedBytes, ByGrowth(10 * kMiB, 4 * kMiB));
  // TrimTo(2 MiB) lets granule 1 (or the 8 MiB chunk) go: exactly the bound.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 2 * kMiB), spSuccess);
  st = Stats();
  EXPECT_EQ(st.reservedBytes, 2 * kMiB);
  EXPECT_EQ(st.upstreamUnmaps, ByGrowth(1u, 2u));
  // TrimTo(0): the anchor's granule (chunk) is not wholly free.
  ASSERT_EQ(spMemPoolTrimTo(pool_, 0), spSuccess);
  EXPECT_EQ(Stats().reservedBytes, 2 * kMiB);
  Free(anchor.ptr, s);
}

// A READY range whose granules were released maps them again when reused:
// the same address, counted as growth (upstreamMaps) and as reuse after a
// sync, since those addresses were handed out before. The chunked pool gave
// the whole chunk back and maps a new one: fresh memory, and 2 MiB more
// reserved.
TEST_P(ExpandableGrowth, ReusingAReleasedRangeMapsItsGranulesAgain) {
  SetThreshold(2 * kMiB);
  spStream_t s = NewStream();
  spStream_t other = NewStream();
  const AllocInfo anchor = Alloc(Occupying(kMiB), s);
  const AllocInfo big = Alloc(Occupying(5 * kMiB), s);
  EXPECT_EQ(Stats().reservedBytes, ByGrowth(8 * kMiB, 6 * kMiB));
  Kernel(s, 1000, big.ptr, Occupying(5 * kMiB));
  Free(big.ptr, s);
  // Down to the 2 MiB threshold: granules 2 and 1 go in one run, or big's
  // 6 MiB chunk goes. Either way the anchor's 2 MiB stay.
  Sync(s);
  spMemPoolStats st = Stats();
  EXPECT_EQ(st.reservedBytes, 2 * kMiB);
  EXPECT_EQ(st.upstreamUnmaps, 1u);
  EXPECT_EQ(st.largestFreeBlock, kMiB) << "the rest of the anchor's granule (chunk)";

  const AllocInfo again = Alloc(Occupying(5 * kMiB), other);
  if (Expandable()) {
    EXPECT_EQ(again.ptr, big.ptr) << "the free range still starts right above the anchor";
  }
  EXPECT_EQ(again.rule, ByGrowth(ReuseRule::kFresh, ReuseRule::kAfterSync));
  st = Stats();
  EXPECT_EQ(st.upstreamMaps, 3u) << "granules 1 and 2 mapped again in one run, or a new chunk";
  EXPECT_EQ(st.reservedBytes, ByGrowth(8 * kMiB, 6 * kMiB));
  EXPECT_EQ(BytesMapped(), ByGrowth(14 * kMiB, 10 * kMiB));
  EXPECT_EQ((Rules()), ByGrowth(RuleCounts{.fresh = 3}, RuleCounts{.after_sync = 1, .fresh = 2}));
  Free(again.ptr, other);
  Free(anchor.ptr, s);
}

// =================================================== Promotion on observation

// docs/design.md "Block lifecycle": while ReuseAllowOpportunistic is on, when rules
// 1 and 2 find nothing the pool promotes every free the executor reports
// complete, of every stream, to READY, where they merge like any READY block.
using PromotionOnObservation = ScenarioTest;
INSTANTIATE_FOR_EVERY_VARIANT(PromotionOnObservation);

// x and y are adjacent in an expandable pool (two growths, one granule each)
// and in separate chunks in a chunked one. Each is used by a 1000-ns kernel
// and freed on its own stream, so their pending blocks never merge. At host
// time 1000 both frees are complete, and a third stream asks for 4 MiB.
class TwoStreamsFreeAdjacentChunks : public ScenarioTest {
 protected:
  void SetUp() override {
    ScenarioTest::SetUp();
    const uint64_t len = WholeChunk();
    s1_ = NewStream();
    s2_ = NewStream();
    asker_ = NewStream();
    x_ = Alloc(len, s1_);
    y_ = Alloc(len, s2_);
    if (Expandable()) {
      ASSERT_EQ(y_.ptr, At(x_.ptr, kGranule));
    }
    Kernel(s1_, 1000, x_.ptr, len);
    Kernel(s2_, 1000, y_.ptr, len);
    Free(x_.ptr, s1_);
    Free(y_.ptr, s2_);
    Advance(1000);
  }

  spStream_t s1_ = nullptr;
  spStream_t s2_ = nullptr;
  spStream_t asker_ = nullptr;
  AllocInfo x_;
  AllocInfo y_;
};
INSTANTIATE_FOR_EVERY_VARIANT(TwoStreamsFreeAdjacentChunks);

// Promotion makes both READY and, in the expandable pool, one 4 MiB block:
// the request fits at x's address without growing, and counts as
// opportunistic (the asking stream freed none of it). The chunked pool's two
// READY chunks are 2 MiB each, and blocks never span chunks: it grows.
TEST_P(TwoStreamsFreeAdjacentChunks, ObservationMergesThemSoALargerRequestFits) {
  const AllocInfo c = Alloc(Occupying(4 * kMiB), asker_);
  EXPECT_EQ(c.rule, ByGrowth(ReuseRule::kFresh, ReuseRule::kOpportunistic));
  if (Expandable()) {
    EXPECT_EQ(c.ptr, x_.ptr);
  }
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.upstreamMaps, ByGrowth(3u, 2u));
  EXPECT_EQ(st.reservedBytes, ByGrowth(8 * kMiB, 4 * kMiB));
  EXPECT_EQ(st.waitsInserted, 0u);
  // Chunked: the two promoted chunks. Expandable: nothing mapped is free.
  EXPECT_EQ(st.largestFreeBlock, ByGrowth(kChunk, uint64_t{0}));
  Free(c.ptr, asker_);
}

// With the switch off nothing is promoted: the two pending blocks stay apart
// and the request grows in both modes -- the expandable pool maps the two
// granules above y, in one run.
TEST_P(TwoStreamsFreeAdjacentChunks, WithTheSwitchOffTheLargerRequestGrows) {
  int off = 0;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolReuseAllowOpportunistic, &off), spSuccess);
  const AllocInfo c = Alloc(Occupying(4 * kMiB), asker_);
  EXPECT_EQ(c.rule, ReuseRule::kFresh);
  if (Expandable()) {
    EXPECT_EQ(c.ptr, At(x_.ptr, 2 * kGranule));
  }
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.upstreamMaps, 3u);
  EXPECT_EQ(st.reservedBytes, 8 * kMiB);
  EXPECT_EQ(st.waitsInserted, 0u);
  EXPECT_EQ(st.largestFreeBlock, kChunk) << "x and y, still pending";
  Free(c.ptr, asker_);
}

// How reuse of observed memory counts (docs/semantics.md "How reuse of promoted memory is
// counted"): a block promoted by observation counts as opportunistic, or as
// same-stream when only the allocating stream's own frees were promoted into
// it, until the next proof anywhere in the runtime; then as after-sync. The
// chunk is laid out in eighths (256 KiB) as [x2 x2 x2 | a | x1a | x1b | b b]:
// x2 freed on s2, x1a and x1b on s1 (one pending block), the anchors a and b
// live, so that no promoted block borders another, nor never-used memory.
TEST_P(PromotionOnObservation, ObservedBlocksCountOpportunisticUntilAnyProof) {
  constexpr uint64_t kEighth = kMiB / 4;
  const uint64_t eighth = Occupying(kEighth);
  spStream_t s1 = NewStream();
  spStream_t s2 = NewStream();
  spStream_t s3 = NewStream();
  const AllocInfo x2 = Alloc(Occupying(3 * kEighth), s2);
  const AllocInfo a = Alloc(eighth, s1);
  const AllocInfo x1a = Alloc(eighth, s1);
  const AllocInfo x1b = Alloc(eighth, s1);
  const AllocInfo b = Alloc(Occupying(2 * kEighth), s1);
  ASSERT_EQ(x1a.ptr, At(x2.ptr, 4 * kEighth));
  ASSERT_EQ(b.ptr, At(x2.ptr, 6 * kEighth));
  Kernel(s1, 1000, x1a.ptr, eighth);
  Kernel(s2, 1000, x2.ptr, Occupying(3 * kEighth));
  Free(x2.ptr, s2);
  Free(x1a.ptr, s1);
  Free(x1b.ptr, s1);
  Advance(1000);

  // s3 has no frees: rule 3 promotes both streams' and takes the only block
  // that fits, x2. None of it was s3's.
  const AllocInfo c3 = Alloc(Occupying(3 * kEighth), s3);
  EXPECT_EQ(c3.ptr, x2.ptr);
  EXPECT_EQ(c3.rule, ReuseRule::kOpportunistic);

  // The READY block [x1a | x1b] holds only s1's frees: s1's own reuse, by
  // rule 1.
  const AllocInfo c1 = Alloc(eighth, s1);
  EXPECT_EQ(c1.ptr, x1a.ptr);
  EXPECT_EQ(c1.rule, ReuseRule::kSameStream);

  // Any proof ends the mark, even a sync of a stream that has no work and
  // proves nothing about s1: the frees were complete anyway, and the count
  // only says whether the program had synchronized.
  spStream_t idle = NewStream();
  Sync(idle);
  const AllocInfo c1b = Alloc(eighth, s1);
  EXPECT_EQ(c1b.ptr, x1b.ptr);
  EXPECT_EQ(c1b.rule, ReuseRule::kAfterSync);

  EXPECT_EQ((Rules()),
            (RuleCounts{.same_stream = 1, .opportunistic = 1, .after_sync = 1, .fresh = 5}));
  const spMemPoolStats st = Stats();
  EXPECT_EQ(st.upstreamMaps, 1u);
  EXPECT_EQ(st.reservedBytes, kChunk);
  EXPECT_EQ(st.waitsInserted, 0u);
  for (const AllocInfo& x : {a, c1, c1b, b}) Free(x.ptr, s1);
  Free(c3.ptr, s3);
}

}  // namespace
