// The pool part of the C API, exercised only through streampool.h: the
// allocation edge cases, bad frees, out of memory, statistics and attributes,
// pool lifetime and selection, device capacity, pointer attributes and pool
// creation. Bad input must return the exact documented error and leave the
// pool's statistics bit-identical (memcmp of spMemPoolStats).
//
// Expected byte counts follow DESIGN.md: a device pool's rule size is
// ALIGN_UP(size, 256), growth maps ALIGN_UP(rule size, 2 MiB), spMalloc maps
// ALIGN_UP(size, 4 KiB), and pools and spMalloc share the device capacity.
#include <cstdint>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
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
  // touches memory), `capacity` bytes per device.
  void Start(uint64_t capacity = uint64_t{1} << 30, int devices = 1) {
    if (rt_ != nullptr) {
      ASSERT_EQ(spRuntimeDestroy(rt_), spSuccess);
    }
    rt_ = nullptr;
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.backing = spBackingAddressOnly;
    cfg.deviceCapacity = capacity;
    cfg.deviceCount = devices;
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

TEST_F(PoolCapiTest, UnknownAttributesAndNullValuesAreInvalidValue) {
  const spMemPoolStats before = Stats(default_pool_);
  for (int attr : {0, 10}) {
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
  EXPECT_EQ(spDeviceSetMemPool(rt_, 0, nullptr), spErrorInvalidResourceHandle);

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
  EXPECT_EQ(spMemPoolCreate(&pool, nullptr, &good), spErrorInvalidResourceHandle);

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
