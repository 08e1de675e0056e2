// The pool part of the C API, exercised only through streampool.h: the
// allocation edge cases, bad frees, out of memory, statistics and attributes,
// pool lifetime and selection, device capacity, pointer attributes and pool
// creation. Bad input must return the exact documented error and leave the
// pool's statistics bit-identical (memcmp of spMemPoolStats).
//
// Expected byte counts follow docs/design.md: a device pool's rule size is
// ALIGN_UP(size, 256), growth maps ALIGN_UP(rule size, 2 MiB), spMalloc maps
// ALIGN_UP(size, 4 KiB), and pools and spMalloc share the device capacity.
// Also here: pools over a caller's reserve-then-map (VMM) upstream, the
// growth property and attribute, and DVPP pools sharing the process's window.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr
#define SP_EXPECT_OK(expr) EXPECT_EQ((expr), spSuccess) << #expr

// A pointer that no successful call would return, to prove *ptr was written.
void* const kSentinel = reinterpret_cast<void*>(uintptr_t{0x5eed});

std::string StatsString(const spMemPoolStats& s) {
  std::string out;
  auto field = [&](const char* name, uint64_t v) {
    out += name;
    out += "=";
    out += std::to_string(v);
    out += " ";
  };
  field("reserved", s.reservedBytes);
  field("reservedHigh", s.reservedHigh);
  field("used", s.usedBytes);
  field("usedHigh", s.usedHigh);
  field("allocs", s.allocCount);
  field("frees", s.freeCount);
  field("failed", s.failedAllocCount);
  field("sameStream", s.reuseSameStream);
  field("eventDep", s.reuseEventDependency);
  field("opportunistic", s.reuseOpportunistic);
  field("afterSync", s.reuseAfterSync);
  field("internalDep", s.reuseInternalDependency);
  field("waits", s.waitsInserted);
  field("maps", s.upstreamMaps);
  field("unmaps", s.upstreamUnmaps);
  field("huge", s.hugePageBytes);
  field("thp", s.transparentHugePageBytes);
  field("normal", s.normalPageBytes);
  field("largestFree", s.largestFreeBlock);
  return out;
}

// Bit-identical, with both sides printed when not.
::testing::AssertionResult StatsIdentical(const spMemPoolStats& a, const spMemPoolStats& b) {
  if (std::memcmp(&a, &b, sizeof(a)) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\n  " << StatsString(a) << "\n  " << StatsString(b);
}

class PoolCapiTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  void TearDown() override {
    if (other_rt_ != nullptr) {
      EXPECT_EQ(spRuntimeDestroy(other_rt_), spSuccess);
    }
    if (rt_ != nullptr) {
      EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess);
    }
  }

  // (Re)starts the runtime under test: address-only backing (nothing here
  // touches memory), `capacity` bytes per device; `reclaim` is the runtime's
  // out-of-memory reclaim (tests of one pool's own failures turn it off).
  void Start(uint64_t capacity = uint64_t{1} << 30, int devices = 1, bool reclaim = true) {
    if (rt_ != nullptr) {
      ASSERT_EQ(spRuntimeDestroy(rt_), spSuccess);
    }
    rt_ = nullptr;
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.backing = spBackingAddressOnly;
    cfg.deviceCapacity = capacity;
    cfg.deviceCount = devices;
    cfg.oomReclaimOff = reclaim ? 0 : 1;
    ASSERT_EQ(spRuntimeCreate(&rt_, &cfg), spSuccess);
    ASSERT_EQ(spStreamCreate(&s_, rt_, 0, spStreamNonBlocking), spSuccess);
    ASSERT_EQ(spDeviceGetDefaultMemPool(&default_pool_, rt_, 0), spSuccess);
  }

  spMemPool_t NewPool(size_t max_size = 0, int device = 0, spRuntime_t rt = nullptr) {
    spMemPoolProps props;
    std::memset(&props, 0, sizeof(props));
    props.allocType = spMemAllocationTypeDevice;
    props.device = device;
    props.maxSize = max_size;
    spMemPool_t pool = nullptr;
    EXPECT_EQ(spMemPoolCreate(&pool, rt != nullptr ? rt : rt_, &props), spSuccess);
    return pool;
  }
  spStream_t NewStream(int device = 0) {
    spStream_t s = nullptr;
    EXPECT_EQ(spStreamCreate(&s, rt_, device, spStreamNonBlocking), spSuccess);
    return s;
  }
  spRuntime_t OtherRuntime() {
    if (other_rt_ == nullptr) {
      spRuntimeConfig cfg;
      spRuntimeConfigInit(&cfg);
      cfg.backing = spBackingAddressOnly;
      EXPECT_EQ(spRuntimeCreate(&other_rt_, &cfg), spSuccess);
    }
    return other_rt_;
  }

  spMemPoolStats Stats(spMemPool_t pool) {
    spMemPoolStats s;
    std::memset(&s, 0, sizeof(s));
    EXPECT_EQ(spMemPoolGetStats(pool, &s), spSuccess);
    return s;
  }
  uint64_t Attr(spMemPool_t pool, spMemPoolAttr attr) {
    uint64_t v = ~uint64_t{0};
    EXPECT_EQ(spMemPoolGetAttribute(pool, attr, &v), spSuccess);
    return v;
  }
  int Switch(spMemPool_t pool, spMemPoolAttr attr) {
    int v = -7;
    EXPECT_EQ(spMemPoolGetAttribute(pool, attr, &v), spSuccess);
    return v;
  }
  // From the current pool on s_; must succeed.
  void* Alloc(size_t size, spMemPool_t pool = nullptr, spStream_t s = nullptr) {
    void* p = kSentinel;
    const spError_t e = pool == nullptr
                            ? spMallocAsync(&p, size, s != nullptr ? s : s_)
                            : spMallocFromPoolAsync(&p, size, pool, s != nullptr ? s : s_);
    EXPECT_EQ(e, spSuccess) << "allocating " << size;
    EXPECT_NE(p, kSentinel);
    return p;
  }

  spRuntime_t rt_ = nullptr;
  spRuntime_t other_rt_ = nullptr;
  spStream_t s_ = nullptr;
  spMemPool_t default_pool_ = nullptr;
};

// ---------------------------------------------------------------- edge cases

TEST_F(PoolCapiTest, SizeZeroSucceedsWithNullAndChangesNothing) {
  spMemPool_t pool = NewPool();
  const spMemPoolStats before_default = Stats(default_pool_);
  const spMemPoolStats before_pool = Stats(pool);
  void* p = kSentinel;
  EXPECT_EQ(spMallocAsync(&p, 0, s_), spSuccess);
  EXPECT_EQ(p, nullptr);
  p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 0, pool, s_), spSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), before_default));
  EXPECT_TRUE(StatsIdentical(Stats(pool), before_pool));
  EXPECT_EQ(Stats(default_pool_).allocCount, 0u);
}

TEST_F(PoolCapiTest, FreeAsyncOfNullIsANoOp) {
  void* p = Alloc(1000);
  const spMemPoolStats before = Stats(default_pool_);
  EXPECT_EQ(spFreeAsync(nullptr, s_), spSuccess);
  EXPECT_EQ(spFree(rt_, nullptr), spSuccess);
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), before));
  SP_EXPECT_OK(spFreeAsync(p, s_));
}

TEST_F(PoolCapiTest, BadFreesAreInvalidValueAndChangeNothing) {
  char* p = static_cast<char*>(Alloc(1000));
  char* q = static_cast<char*>(Alloc(1000));
  const spMemPoolStats before = Stats(default_pool_);
  int on_stack = 0;

  // Interior pointer of a live allocation.
  EXPECT_EQ(spFreeAsync(p + 256, s_), spErrorInvalidValue);
  EXPECT_EQ(spFree(rt_, p + 1), spErrorInvalidValue);
  // A pointer inside the pool's chunk that was never handed out.
  EXPECT_EQ(spFreeAsync(p + kMiB, s_), spErrorInvalidValue);
  // Memory that is not the runtime's at all.
  EXPECT_EQ(spFreeAsync(&on_stack, s_), spErrorInvalidValue);
  EXPECT_EQ(spFree(rt_, &on_stack), spErrorInvalidValue);
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), before));

  // Double free, stream-ordered and synchronous.
  SP_ASSERT_OK(spFreeAsync(p, s_));
  SP_ASSERT_OK(spFree(rt_, q));
  const spMemPoolStats after_frees = Stats(default_pool_);
  EXPECT_EQ(spFreeAsync(p, s_), spErrorInvalidValue);
  EXPECT_EQ(spFree(rt_, p), spErrorInvalidValue);
  EXPECT_EQ(spFreeAsync(q, s_), spErrorInvalidValue);
  EXPECT_EQ(spFree(rt_, q), spErrorInvalidValue);
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), after_frees));
  EXPECT_EQ(after_frees.freeCount, 2u);
}

// ------------------------------------------------------------ out of memory

TEST_F(PoolCapiTest, OutOfMemoryFailsCleanlyAndThePoolStaysUsable) {
  Start(/*capacity=*/8 * kMiB);
  void* keep = Alloc(kMiB);  // some state: 2 MiB reserved, 1 MiB used
  for (size_t size :
       {size_t{8 * kMiB + 1}, SIZE_MAX, SIZE_MAX - 255, SIZE_MAX - 256, size_t{7 * kMiB + 1}}) {
    SCOPED_TRACE(size);
    spMemPoolStats expected = Stats(default_pool_);
    ++expected.failedAllocCount;
    // The one request the device could hold were it free is out of memory
    // (and its reclaim finds nothing READY to release); the others could
    // never be served.
    if (size == 7 * kMiB + 1) ++expected.oomCount;
    void* p = kSentinel;
    EXPECT_EQ(spMallocAsync(&p, size, s_), spErrorMemoryAllocation);
    EXPECT_EQ(p, nullptr);
    EXPECT_TRUE(StatsIdentical(Stats(default_pool_), expected));
  }
  // 6 MiB still fits beside the first allocation: 2 + 6 = 8 MiB (expandable:
  // [1 MiB, 7 MiB) maps granules 1-3; chunked: a 6 MiB chunk).
  void* big = Alloc(6 * kMiB);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(Stats(default_pool_).reservedBytes, 8 * kMiB);
  EXPECT_EQ(Stats(default_pool_).failedAllocCount, 5u);
  EXPECT_EQ(Stats(default_pool_).allocCount, 2u);
  SP_EXPECT_OK(spFreeAsync(keep, s_));
  SP_EXPECT_OK(spFreeAsync(big, s_));
}

TEST_F(PoolCapiTest, RequestLargerThanTheDeviceFromAPoolIsOutOfMemory) {
  Start(/*capacity=*/8 * kMiB);
  spMemPool_t pool = NewPool();
  spMemPoolStats expected = Stats(pool);
  ++expected.failedAllocCount;
  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 8 * kMiB + 1, pool, s_), spErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(StatsIdentical(Stats(pool), expected));
  // Exactly the capacity fits.
  void* q = Alloc(8 * kMiB, pool);
  EXPECT_EQ(Stats(pool).reservedBytes, 8 * kMiB);
  SP_EXPECT_OK(spFreeAsync(q, s_));
}

// --------------------------------------------------------------- statistics

TEST_F(PoolCapiTest, UsedMemCountsRuleSizesAndDropsAtTheFreeCall) {
  void* p = Alloc(100);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemCurrent), 256u);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReservedMemCurrent), 2 * kMiB);
  EXPECT_EQ(Stats(default_pool_).usedBytes, 256u);
  void* q = Alloc(257);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemCurrent), 256u + 512u);
  // A long kernel keeps the free from completing: used drops at the call
  // anyway, reserved does not.
  SP_ASSERT_OK(spLaunchKernel(s_, 1000000, nullptr, 0));
  SP_ASSERT_OK(spFreeAsync(p, s_));
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemCurrent), 512u);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemHigh), 768u);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReservedMemCurrent), 2 * kMiB);
  SP_ASSERT_OK(spFreeAsync(q, s_));
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemCurrent), 0u);
  EXPECT_EQ(Stats(default_pool_).usedBytes, 0u);
}

TEST_F(PoolCapiTest, AllocAndFreeCountsFollowTheirDefinitions) {
  void* a = Alloc(100);
  void* b = Alloc(100);
  // Not counted as allocations: size 0, and a failure.
  void* zero = Alloc(0);
  EXPECT_EQ(zero, nullptr);
  void* p = kSentinel;
  EXPECT_EQ(spMallocAsync(&p, SIZE_MAX, s_), spErrorMemoryAllocation);
  // Not counted as frees: NULL, and a rejected free.
  SP_ASSERT_OK(spFreeAsync(nullptr, s_));
  SP_ASSERT_OK(spFree(rt_, nullptr));
  // Counted: FreeAsync and spFree alike.
  SP_ASSERT_OK(spFreeAsync(a, s_));
  SP_ASSERT_OK(spFree(rt_, b));
  EXPECT_EQ(spFreeAsync(a, s_), spErrorInvalidValue);
  const spMemPoolStats s = Stats(default_pool_);
  EXPECT_EQ(s.allocCount, 2u);
  EXPECT_EQ(s.freeCount, 2u);
  EXPECT_EQ(s.failedAllocCount, 1u);
}

TEST_F(PoolCapiTest, SyncFreeOfPoolMemoryIsReadyAtOnceButReleasedOnlyAtSyncOrTrim) {
  spStream_t other = NewStream();
  void* p = Alloc(kMiB);
  // Work in flight on s_ that the caller promises does not touch p.
  SP_ASSERT_OK(spLaunchKernel(s_, 1000000, nullptr, 0));
  SP_ASSERT_OK(spFree(rt_, p));
  spMemPoolStats s = Stats(default_pool_);
  EXPECT_EQ(s.usedBytes, 0u);
  EXPECT_EQ(s.reservedBytes, 2 * kMiB);
  EXPECT_EQ(s.largestFreeBlock, 2 * kMiB);  // READY, merged with its neighbour
  // READY: another stream reuses it at once, with no dependency.
  void* q = Alloc(kMiB, nullptr, other);
  EXPECT_EQ(q, p);
  s = Stats(default_pool_);
  EXPECT_EQ(s.reuseAfterSync, 1u);
  EXPECT_EQ(s.waitsInserted, 0u);
  SP_ASSERT_OK(spFree(rt_, q));
  // A successful query promotes but releases nothing.
  SP_ASSERT_OK(spStreamQuery(other));
  EXPECT_EQ(Stats(default_pool_).reservedBytes, 2 * kMiB);
  // A sync applies the release threshold (0): the chunk goes.
  SP_ASSERT_OK(spStreamSynchronize(other));
  EXPECT_EQ(Stats(default_pool_).reservedBytes, 0u);

  // TrimTo releases it too.
  void* r = Alloc(kMiB);
  SP_ASSERT_OK(spFree(rt_, r));
  EXPECT_EQ(Stats(default_pool_).reservedBytes, 2 * kMiB);
  SP_ASSERT_OK(spMemPoolTrimTo(default_pool_, 0));
  EXPECT_EQ(Stats(default_pool_).reservedBytes, 0u);
}

// --------------------------------------------------------------- attributes

TEST_F(PoolCapiTest, ReuseSwitchesDefaultToOneAndReadBackAsZeroOrOne) {
  spMemPool_t pool = NewPool();
  for (spMemPool_t p : {default_pool_, pool}) {
    for (spMemPoolAttr attr :
         {spMemPoolReuseFollowEventDependencies, spMemPoolReuseAllowOpportunistic,
          spMemPoolReuseAllowInternalDependencies}) {
      SCOPED_TRACE(static_cast<int>(attr));
      EXPECT_EQ(Switch(p, attr), 1);
      int v = 0;
      SP_ASSERT_OK(spMemPoolSetAttribute(p, attr, &v));
      EXPECT_EQ(Switch(p, attr), 0);
      v = 7;
      SP_ASSERT_OK(spMemPoolSetAttribute(p, attr, &v));
      EXPECT_EQ(Switch(p, attr), 1);
      v = 0;
      SP_ASSERT_OK(spMemPoolSetAttribute(p, attr, &v));
      v = -1;
      SP_ASSERT_OK(spMemPoolSetAttribute(p, attr, &v));
      EXPECT_EQ(Switch(p, attr), 1);
    }
  }
}

TEST_F(PoolCapiTest, ReleaseThresholdRoundTrips) {
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReleaseThreshold), 0u);
  for (uint64_t v : {uint64_t{12345}, uint64_t{3} * kMiB, UINT64_MAX, uint64_t{0}}) {
    uint64_t in = v;
    SP_ASSERT_OK(spMemPoolSetAttribute(default_pool_, spMemPoolAttrReleaseThreshold, &in));
    EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReleaseThreshold), v);
  }
}

TEST_F(PoolCapiTest, ReleaseThresholdIsTheBoundAtSync) {
  uint64_t keep = 3 * kMiB;
  SP_ASSERT_OK(spMemPoolSetAttribute(default_pool_, spMemPoolAttrReleaseThreshold, &keep));
  void* a = Alloc(2 * kMiB);
  void* b = Alloc(2 * kMiB);
  SP_ASSERT_OK(spFreeAsync(a, s_));
  SP_ASSERT_OK(spFreeAsync(b, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  // Two wholly free 2 MiB chunks, bound 3 MiB: releasing either would leave
  // 2 < 3, so both stay; the release rule never goes below its bound.
  EXPECT_EQ(Stats(default_pool_).reservedBytes, 4 * kMiB);
  keep = 2 * kMiB;
  SP_ASSERT_OK(spMemPoolSetAttribute(default_pool_, spMemPoolAttrReleaseThreshold, &keep));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(Stats(default_pool_).reservedBytes, 2 * kMiB);
}

TEST_F(PoolCapiTest, CurrentAttributesAreReadOnly) {
  void* p = Alloc(100);
  const spMemPoolStats before = Stats(default_pool_);
  for (spMemPoolAttr attr : {spMemPoolAttrReservedMemCurrent, spMemPoolAttrUsedMemCurrent}) {
    for (uint64_t v : {uint64_t{0}, uint64_t{256}}) {
      uint64_t in = v;
      EXPECT_EQ(spMemPoolSetAttribute(default_pool_, attr, &in), spErrorInvalidValue);
    }
  }
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), before));
  SP_EXPECT_OK(spFreeAsync(p, s_));
}

TEST_F(PoolCapiTest, HighWatermarksResetOnlyWithZero) {
  void* a = Alloc(kMiB);
  void* b = Alloc(kMiB);
  void* c = Alloc(3 * kMiB);  // a second chunk, of 4 MiB
  SP_ASSERT_OK(spFreeAsync(b, s_));
  SP_ASSERT_OK(spFreeAsync(c, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));  // releases the 4 MiB chunk
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemCurrent), kMiB);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemHigh), 5 * kMiB);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReservedMemCurrent), 2 * kMiB);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReservedMemHigh), 6 * kMiB);

  const spMemPoolStats before = Stats(default_pool_);
  for (spMemPoolAttr attr : {spMemPoolAttrUsedMemHigh, spMemPoolAttrReservedMemHigh}) {
    for (uint64_t v : {uint64_t{1}, uint64_t{5} * kMiB, UINT64_MAX}) {
      uint64_t in = v;
      EXPECT_EQ(spMemPoolSetAttribute(default_pool_, attr, &in), spErrorInvalidValue);
    }
  }
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), before));

  uint64_t zero = 0;
  SP_ASSERT_OK(spMemPoolSetAttribute(default_pool_, spMemPoolAttrUsedMemHigh, &zero));
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemHigh), kMiB);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReservedMemHigh), 6 * kMiB);
  SP_ASSERT_OK(spMemPoolSetAttribute(default_pool_, spMemPoolAttrReservedMemHigh, &zero));
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrReservedMemHigh), 2 * kMiB);
  // The watermarks climb again from there.
  void* d = Alloc(kMiB);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrUsedMemHigh), 2 * kMiB);
  SP_EXPECT_OK(spFreeAsync(a, s_));
  SP_EXPECT_OK(spFreeAsync(d, s_));
}

// spMemPoolAttrFrontCache: an int, exactly 0 or 1, on by default; anything
// else is refused and changes nothing.
TEST_F(PoolCapiTest, FrontCacheSwitchIsZeroOrOneAndOnByDefault) {
  spMemPool_t pool = NewPool();
  EXPECT_EQ(Switch(pool, spMemPoolAttrFrontCache), 1);
  for (int bad : {2, -1, 7}) {
    int v = bad;
    EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrFrontCache, &v), spErrorInvalidValue);
    EXPECT_EQ(Switch(pool, spMemPoolAttrFrontCache), 1);
  }
  int off = 0;
  EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrFrontCache, &off), spSuccess);
  EXPECT_EQ(Switch(pool, spMemPoolAttrFrontCache), 0);
  EXPECT_EQ(spMemPoolDestroy(pool), spSuccess);
}

// spMemPoolAttrWaitBeforeGrowth: an int, exactly 0 or 1, on by default for
// an expandable pool and off for a chunked one (CUDA's order);
// spMemPoolAttrSoftReservedLimit: a uint64_t, UINT64_MAX (none) by default.
// A refused value changes nothing.
TEST_F(PoolCapiTest, WaitBeforeGrowthAndSoftLimitDefaultsAndValues) {
  static_assert(spMemPoolAttrWaitBeforeGrowth == 0x1002);
  static_assert(spMemPoolAttrSoftReservedLimit == 0x1003);
  static_assert(static_cast<int>(streampool::PoolAttr::kWaitBeforeGrowth) ==
                spMemPoolAttrWaitBeforeGrowth);
  static_assert(static_cast<int>(streampool::PoolAttr::kSoftReservedLimit) ==
                spMemPoolAttrSoftReservedLimit);
  spMemPool_t pool = NewPool();
  EXPECT_EQ(Switch(pool, spMemPoolAttrWaitBeforeGrowth), 1);
  EXPECT_EQ(Attr(pool, spMemPoolAttrSoftReservedLimit), ~uint64_t{0});
  for (int bad : {2, -1}) {
    int v = bad;
    EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrWaitBeforeGrowth, &v), spErrorInvalidValue);
    EXPECT_EQ(Switch(pool, spMemPoolAttrWaitBeforeGrowth), 1);
  }
  int off = 0;
  SP_EXPECT_OK(spMemPoolSetAttribute(pool, spMemPoolAttrWaitBeforeGrowth, &off));
  EXPECT_EQ(Switch(pool, spMemPoolAttrWaitBeforeGrowth), 0);
  uint64_t limit = 64 * kMiB;
  SP_EXPECT_OK(spMemPoolSetAttribute(pool, spMemPoolAttrSoftReservedLimit, &limit));
  EXPECT_EQ(Attr(pool, spMemPoolAttrSoftReservedLimit), 64 * kMiB);
  EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrSoftReservedLimit, nullptr),
            spErrorInvalidValue);
  EXPECT_EQ(Attr(pool, spMemPoolAttrSoftReservedLimit), 64 * kMiB);
  SP_EXPECT_OK(spMemPoolDestroy(pool));

  spMemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = spMemAllocationTypeDevice;
  props.growth = spPoolGrowthChunked;
  spMemPool_t chunked = nullptr;
  SP_ASSERT_OK(spMemPoolCreate(&chunked, rt_, &props));
  EXPECT_EQ(Switch(chunked, spMemPoolAttrWaitBeforeGrowth), 0);
  SP_EXPECT_OK(spMemPoolDestroy(chunked));
}

// streampool's own attributes sit at 0x1000 and up; 9 and 10 are CUDA's
// allocation type and export handle types now, not growth and the front cache.
TEST_F(PoolCapiTest, OwnAttributesAreAt0x1000AndNineAndTenAreCudas) {
  static_assert(spMemPoolAttrGrowth == 0x1000);
  static_assert(spMemPoolAttrFrontCache == 0x1001);
  static_assert(static_cast<int>(streampool::PoolAttr::kGrowth) == spMemPoolAttrGrowth);
  static_assert(static_cast<int>(streampool::PoolAttr::kFrontCache) == spMemPoolAttrFrontCache);
  spMemPool_t pool = NewPool();
  int v = -7;
  SP_ASSERT_OK(spMemPoolGetAttribute(pool, static_cast<spMemPoolAttr>(0x1000), &v));
  EXPECT_TRUE(v == spPoolGrowthChunked || v == spPoolGrowthExpandable) << v;
  EXPECT_EQ(Switch(pool, static_cast<spMemPoolAttr>(0x1001)), 1);
  EXPECT_EQ(Switch(pool, static_cast<spMemPoolAttr>(9)), spMemAllocationTypeDevice);
  EXPECT_EQ(Switch(pool, static_cast<spMemPoolAttr>(10)), spMemHandleTypeNone);
  // Writing 0 to 10 once turned the front cache off; now it is a read-only
  // attribute and the cache stays on.
  int off = 0;
  EXPECT_EQ(spMemPoolSetAttribute(pool, static_cast<spMemPoolAttr>(10), &off), spErrorInvalidValue);
  EXPECT_EQ(Switch(pool, spMemPoolAttrFrontCache), 1);
  SP_EXPECT_OK(spMemPoolDestroy(pool));
}

// CUDA's placement attributes (9-14) read the properties the pool was made
// with; 0 as the maximum size means none of its own.
TEST_F(PoolCapiTest, PlacementAttributesReadThePoolsProperties) {
  Start(uint64_t{1} << 30, 2);
  EXPECT_EQ(Switch(default_pool_, spMemPoolAttrAllocationType), spMemAllocationTypeDevice);
  EXPECT_EQ(Switch(default_pool_, spMemPoolAttrExportHandleTypes), spMemHandleTypeNone);
  EXPECT_EQ(Switch(default_pool_, spMemPoolAttrLocationId), 0);
  EXPECT_EQ(Switch(default_pool_, spMemPoolAttrLocationType), spMemLocationTypeDevice);
  EXPECT_EQ(Attr(default_pool_, spMemPoolAttrMaxPoolSize), 0u);
  EXPECT_EQ(Switch(default_pool_, spMemPoolAttrHwDecompressEnabled), 0);

  spMemPool_t bounded = NewPool(64 * kMiB, 1);
  EXPECT_EQ(Switch(bounded, spMemPoolAttrLocationId), 1);
  EXPECT_EQ(Switch(bounded, spMemPoolAttrLocationType), spMemLocationTypeDevice);
  EXPECT_EQ(Attr(bounded, spMemPoolAttrMaxPoolSize), 64 * kMiB);

  spMemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = spMemAllocationTypePinnedHost;
  spMemPool_t host = nullptr;
  SP_ASSERT_OK(spMemPoolCreate(&host, rt_, &props));
  EXPECT_EQ(Switch(host, spMemPoolAttrAllocationType), spMemAllocationTypePinnedHost);
  EXPECT_EQ(Switch(host, spMemPoolAttrLocationId), -1);
  EXPECT_EQ(Switch(host, spMemPoolAttrLocationType), spMemLocationTypeHost);
  SP_EXPECT_OK(spMemPoolDestroy(host));
  SP_EXPECT_OK(spMemPoolDestroy(bounded));
}

TEST_F(PoolCapiTest, ExportHandleTypesReadTheExportablePoolsTypes) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);  // host backing: exportable pools need it
  spRuntime_t rt = nullptr;
  SP_ASSERT_OK(spRuntimeCreate(&rt, &cfg));
  spMemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = spMemAllocationTypeDevice;
  props.handleTypes = spMemHandleTypePosixFileDescriptor;
  spMemPool_t pool = nullptr;
  SP_ASSERT_OK(spMemPoolCreate(&pool, rt, &props));
  EXPECT_EQ(Switch(pool, spMemPoolAttrExportHandleTypes), spMemHandleTypePosixFileDescriptor);
  SP_EXPECT_OK(spMemPoolDestroy(pool));
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

TEST_F(PoolCapiTest, PlacementAttributesAreReadOnlyAndWritesChangeNothing) {
  spMemPool_t pool = NewPool(64 * kMiB);
  void* p = Alloc(100, pool);
  const spMemPoolStats before = Stats(pool);
  for (spMemPoolAttr attr :
       {spMemPoolAttrAllocationType, spMemPoolAttrExportHandleTypes, spMemPoolAttrLocationId,
        spMemPoolAttrLocationType, spMemPoolAttrHwDecompressEnabled, spMemPoolAttrGrowth}) {
    SCOPED_TRACE(attr);
    int v = 1;
    EXPECT_EQ(spMemPoolSetAttribute(pool, attr, &v), spErrorInvalidValue);
  }
  uint64_t max = 128 * kMiB;
  EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrMaxPoolSize, &max), spErrorInvalidValue);
  EXPECT_EQ(Attr(pool, spMemPoolAttrMaxPoolSize), 64 * kMiB);
  EXPECT_TRUE(StatsIdentical(Stats(pool), before));
  SP_EXPECT_OK(spFreeAsync(p, s_));
  SP_EXPECT_OK(spStreamSynchronize(s_));
  SP_EXPECT_OK(spMemPoolDestroy(pool));
}

// Ties among equal-size blocks (docs/design.md, "Serving"): with the front cache
// the stream's most recent own free comes first; without it, the lowest
// address (the central exact best fit).
TEST_F(PoolCapiTest, FrontCacheServesTheMostRecentOwnFreeOfEqualSize) {
  for (int cache : {1, 0}) {
    SCOPED_TRACE(cache);
    spMemPool_t pool = NewPool();
    ASSERT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrFrontCache, &cache), spSuccess);
    void* a = Alloc(4096, pool);
    void* gap = Alloc(4096, pool);  // keeps a and b from merging centrally
    void* b = Alloc(4096, pool);
    ASSERT_LT(a, b);
    ASSERT_EQ(spFreeAsync(a, s_), spSuccess);
    ASSERT_EQ(spFreeAsync(b, s_), spSuccess);
    const spMemPoolStats before = Stats(pool);
    EXPECT_EQ(before.usedBytes, 4096u);
    EXPECT_EQ(before.freeCount, 2u);
    void* c = Alloc(4096, pool);
    EXPECT_EQ(c, cache ? b : a);
    const spMemPoolStats after = Stats(pool);
    EXPECT_EQ(after.reuseSameStream, before.reuseSameStream + 1);
    EXPECT_EQ(after.usedBytes, 8192u);
    EXPECT_EQ(after.usedHigh, 3 * 4096u);
    ASSERT_EQ(spFreeAsync(c, s_), spSuccess);
    ASSERT_EQ(spFreeAsync(gap, s_), spSuccess);
    ASSERT_EQ(spStreamSynchronize(s_), spSuccess);
    EXPECT_EQ(Stats(pool).usedBytes, 0u);
    EXPECT_EQ(spMemPoolDestroy(pool), spSuccess);
  }
}

// A pop from the front cache that takes used bytes past the high watermark
// (a central allocation came between the free and the pop) raises it exactly.
TEST_F(PoolCapiTest, FrontCachePopsKeepTheUsedWatermarkExact) {
  spMemPool_t pool = NewPool();
  spStream_t other = NewStream();
  void* a = Alloc(1 << 20, pool);
  ASSERT_EQ(spFreeAsync(a, s_), spSuccess);  // cached: used 0, high 1 MiB
  // Central, on another stream (a miss on s_ would flush s_'s cache).
  void* b = Alloc(512 << 10, pool, other);  // used 0.5 MiB
  EXPECT_EQ(Stats(pool).usedHigh, uint64_t{1} << 20);
  void* c = Alloc(1 << 20, pool);  // the cached block: used 1.5 MiB
  EXPECT_EQ(c, a);
  spMemPoolStats st = Stats(pool);
  EXPECT_EQ(st.usedBytes, uint64_t{3} << 19);
  EXPECT_EQ(st.usedHigh, uint64_t{3} << 19);
  ASSERT_EQ(spFreeAsync(b, other), spSuccess);
  ASSERT_EQ(spFreeAsync(c, s_), spSuccess);
  uint64_t zero = 0;
  ASSERT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrUsedMemHigh, &zero), spSuccess);
  EXPECT_EQ(Stats(pool).usedHigh, 0u);
  void* d = Alloc(1 << 20, pool);  // from the cache again
  EXPECT_EQ(d, a);
  EXPECT_EQ(Stats(pool).usedHigh, uint64_t{1} << 20);
  ASSERT_EQ(spFreeAsync(d, s_), spSuccess);
  EXPECT_EQ(spMemPoolDestroy(pool), spSuccess);
}

TEST_F(PoolCapiTest, UnknownAttributesAndNullValuesAreInvalidValue) {
  const spMemPoolStats before = Stats(default_pool_);
  for (int attr : {0, 15, 0xfff, 0x1004}) {
    SCOPED_TRACE(attr);
    uint64_t v = 0;
    EXPECT_EQ(spMemPoolGetAttribute(default_pool_, static_cast<spMemPoolAttr>(attr), &v),
              spErrorInvalidValue);
    EXPECT_EQ(spMemPoolSetAttribute(default_pool_, static_cast<spMemPoolAttr>(attr), &v),
              spErrorInvalidValue);
  }
  for (int attr = spMemPoolReuseFollowEventDependencies; attr <= spMemPoolAttrUsedMemHigh; ++attr) {
    SCOPED_TRACE(attr);
    EXPECT_EQ(spMemPoolGetAttribute(default_pool_, static_cast<spMemPoolAttr>(attr), nullptr),
              spErrorInvalidValue);
    EXPECT_EQ(spMemPoolSetAttribute(default_pool_, static_cast<spMemPoolAttr>(attr), nullptr),
              spErrorInvalidValue);
  }
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), before));
  EXPECT_EQ(Switch(default_pool_, spMemPoolReuseFollowEventDependencies), 1);
}

// ---------------------------------------------------------- pool lifetime

TEST_F(PoolCapiTest, TheDefaultPoolCannotBeDestroyed) {
  EXPECT_EQ(spMemPoolDestroy(default_pool_), spErrorInvalidValue);
  void* p = Alloc(100);  // still works
  EXPECT_NE(p, nullptr);
  SP_EXPECT_OK(spFreeAsync(p, s_));
}

TEST_F(PoolCapiTest, DestroyingTheCurrentPoolMakesTheDefaultCurrent) {
  spMemPool_t pool = NewPool();
  SP_ASSERT_OK(spDeviceSetMemPool(rt_, 0, pool));
  spMemPool_t current = nullptr;
  SP_ASSERT_OK(spDeviceGetMemPool(&current, rt_, 0));
  EXPECT_EQ(current, pool);
  SP_ASSERT_OK(spMemPoolDestroy(pool));
  SP_ASSERT_OK(spDeviceGetMemPool(&current, rt_, 0));
  EXPECT_EQ(current, default_pool_);
  // spMallocAsync now serves from the default pool.
  void* p = Alloc(100);
  EXPECT_EQ(Stats(default_pool_).allocCount, 1u);
  SP_EXPECT_OK(spFreeAsync(p, s_));
}

TEST_F(PoolCapiTest, DestroyingAPoolWithLiveAllocationsDefersItsMemory) {
  Start(/*capacity=*/8 * kMiB);
  spMemPool_t pool = NewPool();
  void* p = Alloc(6 * kMiB, pool);  // a 6 MiB chunk
  SP_ASSERT_OK(spMemPoolDestroy(pool));

  // The handle is dead at once...
  spMemPoolStats st;
  EXPECT_EQ(spMemPoolGetStats(pool, &st), spErrorInvalidResourceHandle);
  EXPECT_EQ(spMemPoolDestroy(pool), spErrorInvalidResourceHandle);
  void* q = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&q, 100, pool, s_), spErrorInvalidResourceHandle);
  uint64_t v = 0;
  EXPECT_EQ(spMemPoolGetAttribute(pool, spMemPoolAttrReservedMemCurrent, &v),
            spErrorInvalidResourceHandle);
  EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrReleaseThreshold, &v),
            spErrorInvalidResourceHandle);
  EXPECT_EQ(spMemPoolTrimTo(pool, 0), spErrorInvalidResourceHandle);
  EXPECT_EQ(spDeviceSetMemPool(rt_, 0, pool), spErrorInvalidResourceHandle);

  // ...but its memory is still held for the live allocation: 6 + 4 > 8.
  void* m = kSentinel;
  EXPECT_EQ(spMalloc(&m, 4 * kMiB, rt_, 0), spErrorMemoryAllocation);
  EXPECT_EQ(m, nullptr);

  // The allocation is still freeable; after the free completes the memory
  // goes back to the device.
  SP_ASSERT_OK(spFreeAsync(p, s_));
  EXPECT_EQ(spFreeAsync(p, s_), spErrorInvalidValue);
  SP_ASSERT_OK(spStreamSynchronize(s_));
  SP_ASSERT_OK(spMalloc(&m, 8 * kMiB, rt_, 0));
  SP_EXPECT_OK(spFree(rt_, m));
}

TEST_F(PoolCapiTest, DestroyedPoolsAllocationCanBeFreedSynchronously) {
  Start(/*capacity=*/8 * kMiB);
  spMemPool_t pool = NewPool();
  void* p = Alloc(6 * kMiB, pool);
  SP_ASSERT_OK(spMemPoolDestroy(pool));
  SP_ASSERT_OK(spFree(rt_, p));
  EXPECT_EQ(spFree(rt_, p), spErrorInvalidValue);
  // By the next synchronize at the latest, the chunk is back.
  SP_ASSERT_OK(spDeviceSynchronize(rt_, 0));
  void* m = nullptr;
  SP_ASSERT_OK(spMalloc(&m, 8 * kMiB, rt_, 0));
  SP_EXPECT_OK(spFree(rt_, m));
}

TEST_F(PoolCapiTest, DestroyingAnIdlePoolReturnsItsMemoryAtOnce) {
  Start(/*capacity=*/8 * kMiB);
  spMemPool_t pool = NewPool();
  void* p = Alloc(6 * kMiB, pool);
  SP_ASSERT_OK(spFree(rt_, p));  // READY, still reserved
  EXPECT_EQ(Stats(pool).reservedBytes, 6 * kMiB);
  SP_ASSERT_OK(spMemPoolDestroy(pool));
  void* m = nullptr;
  SP_ASSERT_OK(spMalloc(&m, 8 * kMiB, rt_, 0));
  SP_EXPECT_OK(spFree(rt_, m));
}

// ------------------------------------------------------ choosing the pool

TEST_F(PoolCapiTest, CurrentPoolSelection) {
  spMemPool_t current = nullptr;
  SP_ASSERT_OK(spDeviceGetMemPool(&current, rt_, 0));
  EXPECT_EQ(current, default_pool_);
  spMemPool_t pool = NewPool();
  EXPECT_NE(pool, default_pool_);
  SP_ASSERT_OK(spDeviceSetMemPool(rt_, 0, pool));
  SP_ASSERT_OK(spDeviceGetMemPool(&current, rt_, 0));
  EXPECT_EQ(current, pool);
  spMemPool_t def = nullptr;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&def, rt_, 0));
  EXPECT_EQ(def, default_pool_);

  // spMallocAsync serves from the current pool.
  void* p = Alloc(100);
  EXPECT_EQ(Stats(pool).allocCount, 1u);
  EXPECT_EQ(Stats(default_pool_).allocCount, 0u);
  // spMallocFromPoolAsync from the one named.
  void* q = Alloc(100, default_pool_);
  EXPECT_EQ(Stats(default_pool_).allocCount, 1u);
  // Either is freed on any stream, into its own pool.
  SP_ASSERT_OK(spFreeAsync(q, s_));
  SP_ASSERT_OK(spFreeAsync(p, s_));
  EXPECT_EQ(Stats(pool).freeCount, 1u);
  EXPECT_EQ(Stats(default_pool_).freeCount, 1u);

  SP_ASSERT_OK(spDeviceSetMemPool(rt_, 0, default_pool_));
  SP_ASSERT_OK(spDeviceGetMemPool(&current, rt_, 0));
  EXPECT_EQ(current, default_pool_);
}

TEST_F(PoolCapiTest, PoolSelectionRejectsBadDevicesAndForeignPools) {
  Start(uint64_t{1} << 30, /*devices=*/2);
  spMemPool_t pool = NewPool();
  spMemPool_t p = nullptr;
  for (int device : {2, -1, 64}) {
    SCOPED_TRACE(device);
    EXPECT_EQ(spDeviceGetDefaultMemPool(&p, rt_, device), spErrorInvalidDevice);
    EXPECT_EQ(spDeviceGetMemPool(&p, rt_, device), spErrorInvalidDevice);
    EXPECT_EQ(spDeviceSetMemPool(rt_, device, pool), spErrorInvalidDevice);
  }
  EXPECT_EQ(spDeviceGetDefaultMemPool(nullptr, rt_, 0), spErrorInvalidValue);
  EXPECT_EQ(spDeviceGetMemPool(nullptr, rt_, 0), spErrorInvalidValue);

  // A pool of another device cannot be device 1's current pool.
  EXPECT_EQ(spDeviceSetMemPool(rt_, 1, pool), spErrorInvalidValue);
  // A pool of another runtime, or no pool, is not a handle of this one.
  spMemPool_t foreign = NewPool(0, 0, OtherRuntime());
  EXPECT_EQ(spDeviceSetMemPool(rt_, 0, foreign), spErrorInvalidResourceHandle);
  EXPECT_EQ(spDeviceSetMemPool(rt_, 0, nullptr), spErrorInvalidValue);

  spMemPool_t current = nullptr;
  SP_ASSERT_OK(spDeviceGetMemPool(&current, rt_, 0));
  EXPECT_EQ(current, default_pool_);
  spMemPool_t default1 = nullptr, current1 = nullptr;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&default1, rt_, 1));
  SP_ASSERT_OK(spDeviceGetMemPool(&current1, rt_, 1));
  EXPECT_EQ(current1, default1);
  EXPECT_NE(default1, default_pool_);
}

TEST_F(PoolCapiTest, AnotherRuntimesPoolOrPointerIsRejected) {
  spRuntime_t other = OtherRuntime();
  spMemPool_t foreign = NewPool(0, 0, other);
  spStream_t other_stream = nullptr;
  SP_ASSERT_OK(spStreamCreate(&other_stream, other, 0, spStreamNonBlocking));
  const spMemPoolStats foreign_before = Stats(foreign);

  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 100, foreign, s_), spErrorInvalidResourceHandle);
  EXPECT_TRUE(StatsIdentical(Stats(foreign), foreign_before));

  // A pointer of the other runtime, freed here: not ours.
  void* theirs = kSentinel;
  SP_ASSERT_OK(spMallocFromPoolAsync(&theirs, 100, foreign, other_stream));
  const spMemPoolStats with_alloc = Stats(foreign);
  const spMemPoolStats ours_before = Stats(default_pool_);
  EXPECT_EQ(spFreeAsync(theirs, s_), spErrorInvalidValue);
  EXPECT_EQ(spFree(rt_, theirs), spErrorInvalidValue);
  EXPECT_TRUE(StatsIdentical(Stats(foreign), with_alloc));
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), ours_before));
  // Its own runtime frees it.
  SP_EXPECT_OK(spFreeAsync(theirs, other_stream));
}

// ------------------------------------------------------------ capacity

TEST_F(PoolCapiTest, PoolsAndMallocShareTheDeviceCapacity) {
  Start(/*capacity=*/8 * kMiB);
  spMemPool_t a = NewPool();
  spMemPool_t b = NewPool();
  void* pa = Alloc(3 * kMiB, a);  // 4 MiB chunk
  void* pb = Alloc(2 * kMiB, b);  // 2 MiB chunk
  void* m = nullptr;
  SP_ASSERT_OK(spMalloc(&m, 2 * kMiB, rt_, 0));
  auto reserved = [&] {
    return Stats(a).reservedBytes + Stats(b).reservedBytes + Stats(default_pool_).reservedBytes;
  };
  EXPECT_EQ(reserved(), 6 * kMiB);

  // The device is full: nobody grows, spMalloc fails.
  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 2 * kMiB, a, s_), spErrorMemoryAllocation);
  EXPECT_EQ(spMallocFromPoolAsync(&p, 1, b, s_), spErrorMemoryAllocation);
  EXPECT_EQ(spMallocAsync(&p, 1, s_), spErrorMemoryAllocation);
  EXPECT_EQ(spMalloc(&p, 1, rt_, 0), spErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(reserved(), 6 * kMiB);
  // a's own chunk still has room (4 MiB - 3 MiB).
  void* small = Alloc(kMiB, a);

  // Malloc memory given back makes room for a pool to grow.
  SP_ASSERT_OK(spFree(rt_, m));
  void* pa2 = Alloc(2 * kMiB, a);
  EXPECT_EQ(Stats(a).reservedBytes, 6 * kMiB);
  EXPECT_EQ(reserved(), 8 * kMiB);
  SP_EXPECT_OK(spFreeAsync(pa, s_));
  SP_EXPECT_OK(spFreeAsync(pa2, s_));
  SP_EXPECT_OK(spFreeAsync(small, s_));
  SP_EXPECT_OK(spFreeAsync(pb, s_));
}

TEST_F(PoolCapiTest, MallocRoundsToPagesAgainstTheCapacity) {
  Start(/*capacity=*/8 * kMiB);
  void* m = nullptr;
  // 8 MiB - 4 KiB + 1 rounds up to 8 MiB: exactly the capacity.
  SP_ASSERT_OK(spMalloc(&m, 8 * kMiB - 4 * kKiB + 1, rt_, 0));
  void* p = kSentinel;
  EXPECT_EQ(spMalloc(&p, 1, rt_, 0), spErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  SP_ASSERT_OK(spFree(rt_, m));
  EXPECT_EQ(spMalloc(&p, SIZE_MAX, rt_, 0), spErrorMemoryAllocation);
}

TEST_F(PoolCapiTest, ReservedNeverExceedsMaxSize) {
  spMemPool_t pool = NewPool(/*max_size=*/3 * kMiB);
  void* a = Alloc(2 * kMiB, pool);
  // Another 2 MiB chunk would make 4 MiB > 3 MiB.
  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 1, pool, s_), spErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(Stats(pool).reservedBytes, 2 * kMiB);
  SP_ASSERT_OK(spFreeAsync(a, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(Stats(pool).reservedBytes, 0u);
  // 3 MiB is within maxSize but its chunk, ALIGN_UP(3 MiB, 2 MiB) = 4 MiB,
  // is not.
  EXPECT_EQ(spMallocFromPoolAsync(&p, 3 * kMiB, pool, s_), spErrorMemoryAllocation);
  EXPECT_EQ(Stats(pool).reservedBytes, 0u);
  EXPECT_EQ(Stats(pool).reservedHigh, 2 * kMiB);
}

TEST_F(PoolCapiTest, MaxSizeAboveTheCapacityIsTheCapacity) {
  Start(/*capacity=*/8 * kMiB);
  spMemPool_t pool = NewPool(/*max_size=*/size_t{1} << 40);
  void* a = Alloc(8 * kMiB, pool);
  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 1, pool, s_), spErrorMemoryAllocation);
  SP_EXPECT_OK(spFreeAsync(a, s_));
}

// ------------------------------------------------------ pointer attributes

TEST_F(PoolCapiTest, PointerAttributesOfPoolMemory) {
  spMemPool_t pool = NewPool();
  char* p = static_cast<char*>(Alloc(1000, pool));
  for (const char* at : {p, p + 1, p + 500, p + 999}) {
    SCOPED_TRACE(at - p);
    spPointerAttributes a;
    std::memset(&a, 0xCD, sizeof(a));
    SP_ASSERT_OK(spPointerGetAttributes(&a, at));
    EXPECT_EQ(a.device, 0);
    EXPECT_EQ(a.pool, pool);
    EXPECT_EQ(a.base, p);
    EXPECT_EQ(a.size, 1000u);
  }
  // A neighbour in the same chunk is its own allocation.
  char* q = static_cast<char*>(Alloc(300, pool));
  ASSERT_EQ(q, p + 1024);
  spPointerAttributes a;
  SP_ASSERT_OK(spPointerGetAttributes(&a, q + 299));
  EXPECT_EQ(a.base, q);
  EXPECT_EQ(a.size, 300u);
  SP_ASSERT_OK(spPointerGetAttributes(&a, p + 999));
  EXPECT_EQ(a.base, p);

  // Freed: no longer an allocation, even before the free completes.
  SP_ASSERT_OK(spLaunchKernel(s_, 1000000, nullptr, 0));
  SP_ASSERT_OK(spFreeAsync(p, s_));
  EXPECT_EQ(spPointerGetAttributes(&a, p), spErrorInvalidValue);
  EXPECT_EQ(spPointerGetAttributes(&a, p + 999), spErrorInvalidValue);
  // Bytes of the chunk never handed out.
  EXPECT_EQ(spPointerGetAttributes(&a, q + kMiB), spErrorInvalidValue);
  SP_EXPECT_OK(spFreeAsync(q, s_));
}

TEST_F(PoolCapiTest, PointerAttributesNameTheDevice) {
  Start(uint64_t{1} << 30, /*devices=*/2);
  spMemPool_t pool1 = NewPool(0, /*device=*/1);
  spStream_t s1 = NewStream(1);
  char* p = static_cast<char*>(Alloc(4096, pool1, s1));
  spPointerAttributes a;
  SP_ASSERT_OK(spPointerGetAttributes(&a, p + 4095));
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.pool, pool1);
  EXPECT_EQ(a.base, p);
  spMemPool_t default1 = nullptr;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&default1, rt_, 1));
  char* d = static_cast<char*>(Alloc(10, nullptr, s1));  // device 1's current pool
  SP_ASSERT_OK(spPointerGetAttributes(&a, d));
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.pool, default1);
  EXPECT_EQ(a.size, 10u);
  SP_EXPECT_OK(spFreeAsync(p, s1));
  SP_EXPECT_OK(spFreeAsync(d, s1));
}

TEST_F(PoolCapiTest, PointerAttributesOfMallocMemory) {
  char* m = nullptr;
  SP_ASSERT_OK(spMalloc(reinterpret_cast<void**>(&m), 5000, rt_, 0));
  for (const char* at : {m, m + 4999}) {
    spPointerAttributes a;
    std::memset(&a, 0xCD, sizeof(a));
    SP_ASSERT_OK(spPointerGetAttributes(&a, at));
    EXPECT_EQ(a.device, 0);
    EXPECT_EQ(a.pool, nullptr);
    EXPECT_EQ(a.base, m);
    EXPECT_EQ(a.size, 5000u);
  }
  SP_ASSERT_OK(spFree(rt_, m));
  spPointerAttributes a;
  EXPECT_EQ(spPointerGetAttributes(&a, m), spErrorInvalidValue);
}

TEST_F(PoolCapiTest, PointerAttributesOfForeignMemoryAreInvalidValue) {
  int on_stack = 0;
  spPointerAttributes a;
  EXPECT_EQ(spPointerGetAttributes(&a, &on_stack), spErrorInvalidValue);
  EXPECT_EQ(spPointerGetAttributes(&a, nullptr), spErrorInvalidValue);
  void* p = Alloc(100);
  EXPECT_EQ(spPointerGetAttributes(nullptr, p), spErrorInvalidValue);
  SP_EXPECT_OK(spFreeAsync(p, s_));
}

// ------------------------------------------------------------- creation

TEST_F(PoolCapiTest, CreateRejectsBadProperties) {
  spMemPoolProps good;
  std::memset(&good, 0, sizeof(good));
  good.allocType = spMemAllocationTypeDevice;
  spMemPool_t pool = nullptr;

  EXPECT_EQ(spMemPoolCreate(&pool, rt_, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolCreate(nullptr, rt_, &good), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolCreate(&pool, nullptr, &good), spErrorInvalidValue);

  spMemPoolProps props = good;
  for (int type : {0, 5}) {
    SCOPED_TRACE(type);
    props = good;
    props.allocType = static_cast<spMemAllocationType>(type);
    EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spErrorInvalidValue);
  }
  props = good;
  props.pagePolicy = static_cast<spPagePolicy>(3);
  EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spErrorInvalidValue);
  for (int device : {1, -1}) {
    SCOPED_TRACE(device);
    props = good;
    props.device = device;
    EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spErrorInvalidDevice);
  }
  props = good;
  props.handleTypes = 1;
  EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spErrorNotSupported);
  EXPECT_EQ(pool, nullptr);  // no failed call wrote it

  SP_ASSERT_OK(spMemPoolCreate(&pool, rt_, &good));
  EXPECT_NE(pool, nullptr);
  EXPECT_NE(pool, default_pool_);
  const spMemPoolStats s = Stats(pool);
  EXPECT_EQ(s.reservedBytes, 0u);
  EXPECT_EQ(s.allocCount, 0u);
  SP_EXPECT_OK(spMemPoolDestroy(pool));
}

// ------------------------------------------- reserve-then-map (VMM) upstreams

// A C-style reserve-then-map upstream, as an embedder writes one over
// cuMemAddressReserve / cuMemMap or aclrtReserveMemAddress / aclrtMapMem:
// reserve takes PROT_NONE address space, map backs granules read-write in
// place (mmap MAP_FIXED), unmap turns them back into reserved address space,
// release gives the range back. It counts every call, keeps its own account
// of what is reserved and mapped (recording any call that breaks the
// contract), and fails chosen map calls.
struct VmmUpstream {
  static constexpr uint64_t kGranule = 2 * kMiB;

  int reserves = 0;
  int maps = 0;  // map calls, failed ones included
  int unmaps = 0;
  int releases = 0;
  int fail_from = 0, fail_to = 0;  // map calls numbered [fail_from, fail_to) fail
  std::map<uintptr_t, size_t> reservations;
  std::set<uintptr_t> mapped;  // granule addresses
  std::vector<std::pair<uintptr_t, size_t>> map_log, unmap_log;
  std::vector<std::string> violations;

  // The n-th map call from now (1: the next) fails, and the count - 1 after it.
  void FailNthMap(int n, int count = 1) {
    fail_from = maps + n;
    fail_to = fail_from + count;
  }
  spUpstreamVmm Upstream() { return spUpstreamVmm{&Reserve, &Map, &Unmap, &Release, this, 1}; }

  static void* Reserve(size_t bytes, size_t alignment, void* user) {
    auto* self = static_cast<VmmUpstream*>(user);
    ++self->reserves;
    const size_t span = bytes + alignment;
    void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto r = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t base = (r + alignment - 1) / alignment * alignment;
    if (base > r) munmap(raw, base - r);
    if (r + span > base + bytes)
      munmap(reinterpret_cast<void*>(base + bytes), r + span - base - bytes);
    self->reservations.emplace(base, bytes);
    return reinterpret_cast<void*>(base);
  }
  static int Map(void* addr, size_t bytes, void* user) {
    auto* self = static_cast<VmmUpstream*>(user);
    const int call = ++self->maps;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    self->Check(a % kGranule == 0 && bytes % kGranule == 0 && bytes > 0, "map: not granules");
    self->Check(self->Inside(a, bytes), "map: outside every reservation");
    for (uintptr_t g = a; g < a + bytes; g += kGranule) {
      self->Check(self->mapped.count(g) == 0, "map: granule already mapped");
    }
    if (call >= self->fail_from && call < self->fail_to) return 1;
    if (mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
        MAP_FAILED) {
      return 1;
    }
    for (uintptr_t g = a; g < a + bytes; g += kGranule) self->mapped.insert(g);
    self->map_log.emplace_back(a, bytes);
    return 0;
  }
  static void Unmap(void* addr, size_t bytes, void* user) {
    auto* self = static_cast<VmmUpstream*>(user);
    ++self->unmaps;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    for (uintptr_t g = a; g < a + bytes; g += kGranule) {
      self->Check(self->mapped.erase(g) == 1, "unmap: granule not mapped");
    }
    self->unmap_log.emplace_back(a, bytes);
    self->Check(mmap(addr, bytes, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED,
                "unmap: cannot return the range to reserved address space");
  }
  static void Release(void* addr, size_t bytes, void* user) {
    auto* self = static_cast<VmmUpstream*>(user);
    ++self->releases;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    auto it = self->reservations.find(a);
    self->Check(it != self->reservations.end() && it->second == bytes, "release: no reservation");
    auto m = self->mapped.lower_bound(a);
    self->Check(m == self->mapped.end() || *m >= a + bytes, "release: granules still mapped");
    if (it != self->reservations.end()) self->reservations.erase(it);
    munmap(addr, bytes);
  }

  uint64_t mapped_bytes() const { return mapped.size() * kGranule; }
  // Nothing mapped, nothing reserved, every call within the contract.
  ::testing::AssertionResult AllGivenBack() const {
    if (!violations.empty()) return ::testing::AssertionFailure() << violations[0];
    if (!mapped.empty() || !reservations.empty() || reserves != releases) {
      return ::testing::AssertionFailure()
             << mapped.size() << " granules mapped, " << reservations.size()
             << " reservations live, " << reserves << " reserves, " << releases << " releases";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  void Check(bool ok, const char* what) {
    if (!ok) violations.push_back(what);
  }
  bool Inside(uintptr_t a, size_t bytes) const {
    auto it = reservations.upper_bound(a);
    if (it == reservations.begin()) return false;
    --it;
    return a + bytes <= it->first + it->second;
  }
};

// Pools over a VmmUpstream that lives as long as the fixture, so it outlives
// the runtime that calls it.
class VmmPoolTest : public PoolCapiTest {
 protected:
  // What an embedder's upstream does on failure, with no reclaim retrying it.
  void SetUp() override { Start(uint64_t{1} << 30, 1, /*reclaim=*/false); }
  spMemPool_t NewVmmPool(size_t max_size = 0, int growth = spPoolGrowthDefault) {
    spMemPoolProps props;
    std::memset(&props, 0, sizeof(props));
    props.allocType = spMemAllocationTypeDevice;
    props.maxSize = max_size;
    props.growth = growth;
    const spUpstreamVmm up = vmm_.Upstream();
    spMemPool_t pool = nullptr;
    EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt_, &props, &up), spSuccess);
    return pool;
  }
  int Growth(spMemPool_t pool) {
    int v = -7;
    EXPECT_EQ(spMemPoolGetAttribute(pool, spMemPoolAttrGrowth, &v), spSuccess);
    return v;
  }

  VmmUpstream vmm_;
};

TEST_F(VmmPoolTest, AllocationsAreTouchableAndGrowthMapsGranulesInPlace) {
  spMemPool_t pool = NewVmmPool();
  EXPECT_EQ(Growth(pool), spPoolGrowthExpandable);
  EXPECT_EQ(vmm_.reserves, 0) << "nothing is reserved before the first growth";

  // 3 MiB: one reservation (maxSize 0: the device's 1 GiB), two granules
  // mapped in one call at its base.
  auto* p = static_cast<unsigned char*>(Alloc(3 * kMiB, pool));
  ASSERT_EQ(vmm_.reserves, 1);
  const uintptr_t base = vmm_.reservations.begin()->first;
  EXPECT_EQ(vmm_.reservations.begin()->second, size_t{1} << 30);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p), base);
  ASSERT_EQ(vmm_.maps, 1);
  EXPECT_EQ(vmm_.map_log[0], std::make_pair(base, size_t{4 * kMiB}));
  spMemPoolStats s = Stats(pool);
  EXPECT_EQ(s.reservedBytes, 4 * kMiB);
  EXPECT_EQ(s.upstreamMaps, 1u);

  // Touchable: the host writes it, and stream-ordered fills land in it.
  std::memset(p, 0x5a, 3 * kMiB);
  SP_ASSERT_OK(spMemsetAsync(p + kMiB, 0x11, 4096, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(p[0], 0x5a);
  EXPECT_EQ(p[kMiB], 0x11);
  EXPECT_EQ(p[kMiB + 4095], 0x11);
  EXPECT_EQ(p[kMiB + 4096], 0x5a);
  EXPECT_EQ(p[3 * kMiB - 1], 0x5a);

  // 2 MiB goes right above it, [3 MiB, 5 MiB): only granule 2 is mapped.
  auto* q = static_cast<unsigned char*>(Alloc(2 * kMiB, pool));
  EXPECT_EQ(q, p + 3 * kMiB);
  ASSERT_EQ(vmm_.maps, 2);
  EXPECT_EQ(vmm_.map_log[1], std::make_pair(base + 4 * kMiB, size_t{2 * kMiB}));
  std::memset(q, 0x77, 2 * kMiB);
  EXPECT_EQ(Stats(pool).reservedBytes, 6 * kMiB);

  // Freed and synchronized (threshold 0): the granule wholly inside free
  // memory goes; granule 1, shared with p, stays.
  SP_ASSERT_OK(spFreeAsync(q, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  ASSERT_EQ(vmm_.unmaps, 1);
  EXPECT_EQ(vmm_.unmap_log[0], std::make_pair(base + 4 * kMiB, size_t{2 * kMiB}));
  EXPECT_EQ(Stats(pool).reservedBytes, 4 * kMiB);
  EXPECT_EQ(p[3 * kMiB - 1], 0x5a);
  // Then all of it, in one call; the empty reservation stays with the pool
  // until it is destroyed.
  SP_ASSERT_OK(spFreeAsync(p, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  ASSERT_EQ(vmm_.unmaps, 2);
  EXPECT_EQ(vmm_.unmap_log[1], std::make_pair(base, size_t{4 * kMiB}));
  s = Stats(pool);
  EXPECT_EQ(s.reservedBytes, 0u);
  EXPECT_EQ(s.upstreamUnmaps, 2u);
  EXPECT_EQ(s.reservedHigh, 6 * kMiB);
  EXPECT_TRUE(vmm_.mapped.empty());
  SP_ASSERT_OK(spMemPoolDestroy(pool));
  EXPECT_TRUE(vmm_.AllGivenBack());
}

TEST_F(VmmPoolTest, RuntimeDestroyGivesEveryGranuleAndReservationBack) {
  spMemPool_t pool = NewVmmPool();
  void* live = Alloc(5 * kMiB, pool);
  void* pending = Alloc(kMiB, pool);
  SP_ASSERT_OK(spLaunchKernel(s_, 1000000, nullptr, 0));
  SP_ASSERT_OK(spFreeAsync(pending, s_));
  // A destroyed pool with a live allocation keeps its memory...
  SP_ASSERT_OK(spMemPoolDestroy(pool));
  EXPECT_FALSE(vmm_.mapped.empty());
  (void)live;
  // ...until the runtime goes.
  Start();
  EXPECT_EQ(vmm_.maps, 1);
  EXPECT_TRUE(vmm_.AllGivenBack());
}

TEST_F(VmmPoolTest, GrowthReadsBackAndCannotBeSet) {
  spMemPool_t vmm = NewVmmPool();
  spMemPool_t expandable = NewVmmPool(0, spPoolGrowthExpandable);
  spMemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = spMemAllocationTypeDevice;
  props.growth = spPoolGrowthChunked;
  spMemPool_t chunked = nullptr;
  SP_ASSERT_OK(spMemPoolCreate(&chunked, rt_, &props));
  // A plain upstream (map/unmap only) cannot reserve: chunked by default.
  props.growth = spPoolGrowthDefault;
  spUpstream plain{[](size_t, void*) -> void* { return nullptr; }, [](void*, size_t, void*) {},
                   nullptr, 1};
  spMemPool_t on_plain = nullptr;
  SP_ASSERT_OK(spMemPoolCreateWithUpstream(&on_plain, rt_, &props, &plain));

  EXPECT_EQ(Growth(default_pool_), spPoolGrowthExpandable);
  EXPECT_EQ(Growth(vmm), spPoolGrowthExpandable);
  EXPECT_EQ(Growth(expandable), spPoolGrowthExpandable);
  EXPECT_EQ(Growth(chunked), spPoolGrowthChunked);
  EXPECT_EQ(Growth(on_plain), spPoolGrowthChunked);

  void* p = Alloc(kMiB, chunked);
  for (spMemPool_t pool : {default_pool_, vmm, chunked, on_plain}) {
    const spMemPoolStats before = Stats(pool);
    const int was = Growth(pool);
    for (int v : {0, 1, 2, 7}) {
      int in = v;
      EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrGrowth, &in), spErrorInvalidValue) << v;
    }
    EXPECT_EQ(spMemPoolGetAttribute(pool, spMemPoolAttrGrowth, nullptr), spErrorInvalidValue);
    EXPECT_EQ(spMemPoolSetAttribute(pool, spMemPoolAttrGrowth, nullptr), spErrorInvalidValue);
    EXPECT_EQ(Growth(pool), was);
    EXPECT_TRUE(StatsIdentical(Stats(pool), before));
  }
  SP_EXPECT_OK(spFreeAsync(p, s_));
  for (spMemPool_t pool : {vmm, expandable, chunked, on_plain})
    SP_EXPECT_OK(spMemPoolDestroy(pool));
}

// Granules 0 and 2 of a free range were released and granule 1 is mapped, so
// 6 MiB needs two map calls; the second fails. The allocation fails with
// spErrorMemoryAllocation, the statistics are bit-identical but for
// failedAllocCount, and the first call's granule is unmapped again.
TEST_F(VmmPoolTest, AMapThatFailsHalfWayLeavesNothingBehind) {
  spMemPool_t pool = NewVmmPool(/*max_size=*/8 * kMiB);
  void* g[4];
  for (void*& p : g) p = Alloc(2 * kMiB, pool);
  ASSERT_EQ(vmm_.maps, 4);
  const uintptr_t base = reinterpret_cast<uintptr_t>(g[0]);
  SP_ASSERT_OK(spFree(rt_, g[0]));
  SP_ASSERT_OK(spFree(rt_, g[2]));
  SP_ASSERT_OK(spMemPoolTrimTo(pool, 0));
  SP_ASSERT_OK(spFree(rt_, g[1]));
  ASSERT_EQ(vmm_.mapped, (std::set<uintptr_t>{base + 2 * kMiB, base + 6 * kMiB}));
  const int unmaps = vmm_.unmaps;

  vmm_.FailNthMap(2);
  spMemPoolStats expected = Stats(pool);
  ++expected.failedAllocCount;
  ++expected.oomCount;  // it fits the device: out of memory
  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 6 * kMiB, pool, s_), spErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(StatsIdentical(Stats(pool), expected));
  EXPECT_EQ(vmm_.maps, 6) << "both runs were asked for";
  EXPECT_EQ(vmm_.unmaps, unmaps + 1);
  EXPECT_EQ(vmm_.unmap_log.back(), std::make_pair(base, size_t{2 * kMiB}));
  EXPECT_EQ(vmm_.mapped, (std::set<uintptr_t>{base + 2 * kMiB, base + 6 * kMiB}));
  EXPECT_TRUE(vmm_.violations.empty());

  // Nothing left behind: the same request now succeeds, at the same place.
  void* q = Alloc(6 * kMiB, pool);
  EXPECT_EQ(q, g[0]);
  EXPECT_EQ(Stats(pool).reservedBytes, 8 * kMiB);
  SP_ASSERT_OK(spFree(rt_, q));
  SP_ASSERT_OK(spFree(rt_, g[3]));
  SP_ASSERT_OK(spMemPoolDestroy(pool));
  EXPECT_TRUE(vmm_.AllGivenBack());
}

TEST_F(VmmPoolTest, AFailedFirstMapGivesTheNewReservationBackAtOnce) {
  spMemPool_t pool = NewVmmPool();
  vmm_.FailNthMap(1);
  spMemPoolStats expected = Stats(pool);
  ++expected.failedAllocCount;
  ++expected.oomCount;  // it fits the device: out of memory
  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, kMiB, pool, s_), spErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(StatsIdentical(Stats(pool), expected));
  EXPECT_EQ(vmm_.reserves, 1);
  EXPECT_TRUE(vmm_.AllGivenBack());
  // The pool is still usable.
  p = Alloc(kMiB, pool);
  SP_ASSERT_OK(spFree(rt_, p));
  SP_ASSERT_OK(spMemPoolDestroy(pool));
  EXPECT_TRUE(vmm_.AllGivenBack());
}

TEST_F(VmmPoolTest, CreateRejectsBadUpstreamsAndGrowthModes) {
  spMemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = spMemAllocationTypeDevice;
  const spUpstreamVmm good = vmm_.Upstream();
  spMemPool_t pool = nullptr;

  EXPECT_EQ(spMemPoolCreateWithVmmUpstream(nullptr, rt_, &props, &good), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt_, nullptr, &good), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt_, &props, nullptr), spErrorInvalidValue);
  for (int missing = 0; missing < 4; ++missing) {
    SCOPED_TRACE(missing);
    spUpstreamVmm up = good;
    if (missing == 0) up.reserve = nullptr;
    if (missing == 1) up.map = nullptr;
    if (missing == 2) up.unmap = nullptr;
    if (missing == 3) up.release = nullptr;
    EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt_, &props, &up), spErrorInvalidValue);
  }
  // A VMM upstream makes an expandable pool; chunks it cannot give.
  props.growth = spPoolGrowthChunked;
  EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt_, &props, &good), spErrorNotSupported);
  // A map/unmap-only upstream cannot reserve: no expandable pool over it.
  props.growth = spPoolGrowthExpandable;
  spUpstream plain{[](size_t, void*) -> void* { return nullptr; }, [](void*, size_t, void*) {},
                   nullptr, 1};
  EXPECT_EQ(spMemPoolCreateWithUpstream(&pool, rt_, &props, &plain), spErrorNotSupported);
  // Growth modes out of range, for every way of creating a pool.
  for (int growth : {3, -1, 0x7fffffff}) {
    SCOPED_TRACE(growth);
    props.growth = growth;
    EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spErrorInvalidValue);
    EXPECT_EQ(spMemPoolCreateWithUpstream(&pool, rt_, &props, &plain), spErrorInvalidValue);
    EXPECT_EQ(spMemPoolCreateWithVmmUpstream(&pool, rt_, &props, &good), spErrorInvalidValue);
  }
  EXPECT_EQ(pool, nullptr) << "no failed call wrote it";
  EXPECT_EQ(vmm_.reserves, 0);

  // Expandable over a VMM upstream, or by default: fine.
  for (int growth : {int{spPoolGrowthDefault}, int{spPoolGrowthExpandable}}) {
    props.growth = growth;
    SP_ASSERT_OK(spMemPoolCreateWithVmmUpstream(&pool, rt_, &props, &good));
    EXPECT_EQ(Growth(pool), spPoolGrowthExpandable);
    SP_EXPECT_OK(spMemPoolDestroy(pool));
  }
}

// ---------------------------------------------------------- the DVPP window

// DVPP pools take their reservations from the process's one 16 GiB window,
// 1 GiB at a time (first fit), so no pool takes the whole window: here
// sixteen reservations fill it, whichever pools hold them. AddressOnly
// backing: nothing is touched; the device is made large enough that only the
// window limits.
class DvppWindowTest : public PoolCapiTest {
 protected:
  static constexpr uint64_t kGiB = uint64_t{1} << 30;
  // ALIGN_UP(ALIGN_UP(len, 32) + 32, 128) of this is 1022 MiB + 128: exactly
  // the 512 granules of one reservation.
  static constexpr size_t kWhole = 1022 * kMiB;

  // The window's own limits, with no reclaim making room in it.
  void SetUp() override { Start(/*capacity=*/64 * kGiB, 1, /*reclaim=*/false); }

  spMemPool_t NewDvppPool() {
    spMemPoolProps props;
    std::memset(&props, 0, sizeof(props));
    props.allocType = spMemAllocationTypeDvpp;
    spMemPool_t pool = nullptr;
    EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spSuccess);
    return pool;
  }
  // Allocates `size` from `pool` until the window refuses, expecting that
  // failure to change nothing but failedAllocCount; returns the pointers.
  std::vector<uintptr_t> FillWindow(spMemPool_t pool, size_t size) {
    std::vector<uintptr_t> got;
    for (int i = 0; i < 17; ++i) {
      spMemPoolStats expected = Stats(pool);
      void* p = kSentinel;
      const spError_t e = spMallocFromPoolAsync(&p, size, pool, s_);
      if (e == spSuccess) {
        got.push_back(reinterpret_cast<uintptr_t>(p));
        continue;
      }
      EXPECT_EQ(e, spErrorMemoryAllocation);
      EXPECT_EQ(p, nullptr);
      ++expected.failedAllocCount;
      ++expected.oomCount;  // it fits the device: out of memory
      EXPECT_TRUE(StatsIdentical(Stats(pool), expected));
      break;
    }
    return got;
  }
};

TEST_F(DvppWindowTest, PoolsShareTheWindowInReservationsOfAGiB) {
  spMemPool_t a = NewDvppPool();
  spMemPool_t b = NewDvppPool();
  spMemPool_t c = NewDvppPool();
  spMemPool_t d = NewDvppPool();
  const auto a1 = reinterpret_cast<uintptr_t>(Alloc(kWhole, a));
  const auto a2 = reinterpret_cast<uintptr_t>(Alloc(kWhole, a));  // a second reservation
  const auto b1 = reinterpret_cast<uintptr_t>(Alloc(kWhole, b));
  const auto c1 = reinterpret_cast<uintptr_t>(Alloc(kMiB, c));  // 2 MiB of it mapped
  EXPECT_EQ(Stats(a).reservedBytes, 2 * kGiB);
  EXPECT_EQ(Stats(b).reservedBytes, kGiB);
  EXPECT_EQ(Stats(c).reservedBytes, 2 * kMiB);

  // Twelve more reservations fit: sixteen in all, whoever holds them.
  std::vector<uintptr_t> bases = FillWindow(d, kWhole);
  EXPECT_EQ(bases.size(), 12u);
  EXPECT_EQ(Stats(d).reservedBytes, 12 * kGiB);
  for (spMemPool_t pool : {a, b}) {
    void* p = kSentinel;
    EXPECT_EQ(spMallocFromPoolAsync(&p, kWhole, pool, s_), spErrorMemoryAllocation);
  }
  // Each allocation above starts its reservation: sixteen ranges 1 GiB
  // apart, one 16 GiB window.
  bases.insert(bases.end(), {a1, a2, b1, c1});
  std::sort(bases.begin(), bases.end());
  for (size_t i = 1; i < bases.size(); ++i) EXPECT_EQ(bases[i] - bases[i - 1], kGiB) << i;

  // Inside their reservations pools still serve: a from the 2 MiB - 128 B
  // left mapped at the end of each, c by mapping more of its own.
  const auto small = reinterpret_cast<uintptr_t>(Alloc(kMiB, a));
  EXPECT_EQ(Stats(a).reservedBytes, 2 * kGiB);
  Alloc(512 * kMiB, c);
  EXPECT_EQ(Stats(c).reservedBytes, 514 * kMiB);  // [0, 513 MiB + 256 B)

  // A reservation given back (its memory freed and trimmed) is the next
  // one any pool gets, at the same address.
  const uintptr_t freed = small >= a1 && small < a1 + kGiB ? a2 : a1;
  SP_ASSERT_OK(spFree(rt_, reinterpret_cast<void*>(freed)));
  SP_ASSERT_OK(spMemPoolTrimTo(a, 0));
  EXPECT_EQ(Stats(a).reservedBytes, kGiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(Alloc(kWhole, d)), freed);
  EXPECT_TRUE(FillWindow(d, kWhole).empty());

  // A destroyed runtime gives back its whole share: a new one has all
  // sixteen.
  Start(/*capacity=*/64 * kGiB);
  EXPECT_EQ(FillWindow(NewDvppPool(), kWhole).size(), 16u);
}

// An allocation larger than a reservation gets one of its own size; where the
// window has no 1 GiB left, a reservation just large enough is taken.
TEST_F(DvppWindowTest, ReservationsLargerOrSmallerThanAGiBWhereTheRequestNeedsIt) {
  spMemPool_t e = NewDvppPool();
  spMemPool_t f = NewDvppPool();
  spMemPool_t g = NewDvppPool();
  // 1.5 GiB occupies 1.5 GiB + 128 B: a reservation of 1538 MiB.
  const auto big = reinterpret_cast<uintptr_t>(Alloc(1536 * kMiB, e));
  EXPECT_EQ(Stats(e).reservedBytes, 1538 * kMiB);
  // 16384 - 1538 = 14846 MiB left: fourteen 1 GiB reservations and 510 MiB.
  std::vector<uintptr_t> bases = FillWindow(f, kWhole);
  EXPECT_EQ(bases.size(), 14u);
  // 400 MiB (402 MiB of granules) still fits the 510 MiB.
  const auto last = reinterpret_cast<uintptr_t>(Alloc(400 * kMiB, g));
  EXPECT_EQ(Stats(g).reservedBytes, 402 * kMiB);
  bases.push_back(big);
  bases.push_back(last);
  const uintptr_t lo = *std::min_element(bases.begin(), bases.end());
  EXPECT_EQ(lo, big) << "first fit: the window's start";
  EXPECT_EQ(last, lo + 1538 * kMiB + 14 * kGiB);
  EXPECT_LE(last + 402 * kMiB - lo, 16 * kGiB);
  void* p = kSentinel;
  EXPECT_EQ(spMallocFromPoolAsync(&p, 200 * kMiB, g, s_), spErrorMemoryAllocation);

  // The large reservation given back serves 1 GiB ones again.
  SP_ASSERT_OK(spFree(rt_, reinterpret_cast<void*>(big)));
  SP_ASSERT_OK(spMemPoolTrimTo(e, 0));
  EXPECT_EQ(Stats(e).reservedBytes, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(Alloc(kWhole, f)), big);
}

// Values a C caller can store in an enum-typed argument or field but that lie
// outside the C++ enum's range (negative, or beyond its highest bit). They
// must be rejected like any other unknown value. Kept last in the file: the
// library currently reads them as enums, which UBSan reports (and, built
// with -fno-sanitize-recover, aborts on).
TEST_F(PoolCapiTest, OutOfRangeEnumValuesAreInvalidValue) {
  const spMemPoolStats before = Stats(default_pool_);
  for (int attr : {-1, 100, 0x7fffffff}) {
    SCOPED_TRACE(attr);
    uint64_t v = 0;
    EXPECT_EQ(spMemPoolGetAttribute(default_pool_, static_cast<spMemPoolAttr>(attr), &v),
              spErrorInvalidValue);
    EXPECT_EQ(spMemPoolSetAttribute(default_pool_, static_cast<spMemPoolAttr>(attr), &v),
              spErrorInvalidValue);
  }
  EXPECT_TRUE(StatsIdentical(Stats(default_pool_), before));

  spMemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = spMemAllocationTypeDevice;
  spMemPool_t pool = nullptr;
  for (int type : {-1, 100}) {
    SCOPED_TRACE(type);
    props.allocType = static_cast<spMemAllocationType>(type);
    EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spErrorInvalidValue);
  }
  props.allocType = spMemAllocationTypeDevice;
  for (int policy : {-1, 100}) {
    SCOPED_TRACE(policy);
    props.pagePolicy = static_cast<spPagePolicy>(policy);
    EXPECT_EQ(spMemPoolCreate(&pool, rt_, &props), spErrorInvalidValue);
  }
  EXPECT_EQ(pool, nullptr);
}

}  // namespace
