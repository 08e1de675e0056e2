// Out of memory, handled (RuntimeConfig::oom_reclaim, Runtime::SetOomHandler,
// spRuntimeSetOomHandler): before an allocation fails for lack of device
// memory, the pools of its device release what they hold READY and the
// allocation is tried once more; then the embedder's handler, with no lock
// held, may free and ask for another try. Nothing PENDING is released, so
// stream order holds; every step is counted in the pools' statistics.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::unique_ptr<Runtime> MakeRuntime(uint64_t capacity, bool reclaim = true) {
  RuntimeConfig cfg;
  cfg.device_capacity = capacity;
  cfg.backing = Backing::kAddressOnly;
  cfg.oom_reclaim = reclaim;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? *std::move(rt) : nullptr;
}

// A pool that keeps what it frees (threshold max) until something asks.
PoolId KeepingPool(Runtime& rt) {
  PoolProps props;
  props.release_threshold = UINT64_MAX;
  absl::StatusOr<PoolId> p = rt.CreatePool(props);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : PoolId{};
}

PoolStats StatsOf(Runtime& rt, PoolId p) {
  absl::StatusOr<PoolStats> s = rt.GetPoolStats(p);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : PoolStats{};
}

// Eight 6 MiB blocks, every other one freed and synchronized: 24 MiB READY
// in holes no 30 MiB request fits, 48 MiB reserved of 64.
struct Holes {
  PoolId pool;
  StreamId stream;
  std::vector<void*> kept;
};
Holes MakeHoles(Runtime& rt) {
  Holes h{KeepingPool(rt), *rt.CreateStream(0), {}};
  std::vector<void*> all;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(6 * kMiB, h.pool, h.stream);
    EXPECT_TRUE(a.ok()) << a.status();
    all.push_back(a.ok() ? a->ptr : nullptr);
  }
  for (int i = 0; i < 8; ++i) {
    if (i % 2 == 0) {
      EXPECT_TRUE(rt.FreeAsync(all[i], h.stream).ok());
    } else {
      h.kept.push_back(all[i]);
    }
  }
  EXPECT_TRUE(rt.StreamSynchronize(h.stream).ok());
  return h;
}

TEST(OomTest, ThePoolsOwnReadyGranulesMakeRoom) {
  std::unique_ptr<Runtime> rt = MakeRuntime(64 * kMiB);
  Holes h = MakeHoles(*rt);
  absl::StatusOr<AllocInfo> big = rt->MallocFromPoolAsync(30 * kMiB, h.pool, h.stream);
  ASSERT_TRUE(big.ok()) << big.status();
  const PoolStats s = StatsOf(*rt, h.pool);
  EXPECT_EQ(s.reclaims, 1u);
  EXPECT_EQ(s.reclaimed_bytes, 24 * kMiB);
  EXPECT_EQ(s.oom_retries, 1u);
  EXPECT_EQ(s.failed_alloc_count, 0u);
  EXPECT_EQ(s.oom_count, 0u);
  EXPECT_EQ(s.reserved_bytes, 54 * kMiB);
  EXPECT_TRUE(rt->CheckPoolInvariants(h.pool).ok());
  // What was kept is untouched.
  for (void* p : h.kept) EXPECT_TRUE(rt->FreeAsync(p, h.stream).ok());
  EXPECT_TRUE(rt->FreeAsync(big->ptr, h.stream).ok());
}

TEST(OomTest, OffTheAllocationFailsAndNothingIsReleased) {
  std::unique_ptr<Runtime> rt = MakeRuntime(64 * kMiB, /*reclaim=*/false);
  Holes h = MakeHoles(*rt);
  absl::StatusOr<AllocInfo> big = rt->MallocFromPoolAsync(30 * kMiB, h.pool, h.stream);
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
  const PoolStats s = StatsOf(*rt, h.pool);
  EXPECT_EQ(s.reclaims, 0u);
  EXPECT_EQ(s.oom_count, 1u);
  EXPECT_EQ(s.failed_alloc_count, 1u);
  EXPECT_EQ(s.reserved_bytes, 48 * kMiB);
}

TEST(OomTest, OtherPoolsOfTheDeviceGiveBackTheirReadyMemory) {
  std::unique_ptr<Runtime> rt = MakeRuntime(64 * kMiB);
  const PoolId a = KeepingPool(*rt);
  const PoolId b = KeepingPool(*rt);
  const StreamId s = *rt->CreateStream(0);
  absl::StatusOr<AllocInfo> held = rt->MallocFromPoolAsync(40 * kMiB, a, s);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(rt->FreeAsync(held->ptr, s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(s).ok());
  ASSERT_EQ(StatsOf(*rt, a).reserved_bytes, 40 * kMiB);
  absl::StatusOr<AllocInfo> got = rt->MallocFromPoolAsync(40 * kMiB, b, s);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(StatsOf(*rt, a).reserved_bytes, 0u);
  EXPECT_EQ(StatsOf(*rt, a).reclaims, 1u);
  EXPECT_EQ(StatsOf(*rt, b).oom_retries, 1u);
  EXPECT_EQ(StatsOf(*rt, b).reclaims, 0u);  // it had nothing to give
}

TEST(OomTest, PendingFreesAreNotReleased) {
  std::unique_ptr<Runtime> rt = MakeRuntime(64 * kMiB);
  rt->EnableChecker(true);
  const PoolId a = KeepingPool(*rt);
  const PoolId b = KeepingPool(*rt);
  const StreamId s = *rt->CreateStream(0, /*non_blocking=*/true);
  const StreamId t = *rt->CreateStream(0, /*non_blocking=*/true);
  absl::StatusOr<AllocInfo> held = rt->MallocFromPoolAsync(40 * kMiB, a, s);
  ASSERT_TRUE(held.ok());
  // Still in use by a kernel when freed: PENDING, not READY.
  const Access touch{held->ptr, 40 * kMiB, /*write=*/true};
  ASSERT_TRUE(rt->LaunchKernel(s, 1000000, {&touch, 1}).ok());
  ASSERT_TRUE(rt->FreeAsync(held->ptr, s).ok());
  absl::StatusOr<AllocInfo> got = rt->MallocFromPoolAsync(40 * kMiB, b, t);
  EXPECT_TRUE(absl::IsResourceExhausted(got.status())) << got.status();
  EXPECT_EQ(StatsOf(*rt, a).reserved_bytes, 40 * kMiB);
  EXPECT_EQ(StatsOf(*rt, b).oom_count, 1u);
  // Once the kernel is done and that is known, the same request fits.
  ASSERT_TRUE(rt->StreamSynchronize(s).ok());
  got = rt->MallocFromPoolAsync(40 * kMiB, b, t);
  EXPECT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(rt->CheckReports().empty());
}

// An allocation that fails while another stream's free holds the memory
// says so: the free is PENDING, with every reuse rule switched off none may
// serve the allocation, and the message counts its bytes.
TEST(OomTest, TheMessageCountsPendingBytesNoRuleCouldUse) {
  std::unique_ptr<Runtime> rt = MakeRuntime(16 * kMiB);
  const PoolId pool = KeepingPool(*rt);
  for (PoolAttr rule : {PoolAttr::kReuseFollowEventDependencies, PoolAttr::kReuseAllowOpportunistic,
                        PoolAttr::kReuseAllowInternalDependencies}) {
    ASSERT_TRUE(rt->SetPoolAttribute(pool, rule, 0).ok());
  }
  const StreamId a = *rt->CreateStream(0, /*non_blocking=*/true);
  const StreamId b = *rt->CreateStream(0, /*non_blocking=*/true);
  absl::StatusOr<AllocInfo> held = rt->MallocFromPoolAsync(12 * kMiB, pool, a);
  ASSERT_TRUE(held.ok()) << held.status();
  const Access touch{held->ptr, 12 * kMiB, /*write=*/true};
  ASSERT_TRUE(rt->LaunchKernel(a, 1000000, {&touch, 1}).ok());
  ASSERT_TRUE(rt->FreeAsync(held->ptr, a).ok());

  absl::StatusOr<AllocInfo> got = rt->MallocFromPoolAsync(8 * kMiB, pool, b);
  EXPECT_TRUE(absl::IsResourceExhausted(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              AllOf(HasSubstr("out of memory: 8388608 bytes"),
                    HasSubstr("; 12582912 bytes pending on other streams could not be used")));
  // A's own pending frees are A's to reuse, so they are not counted: A takes
  // 8 MiB of its free, and a request its 4 MiB rest cannot hold counts none.
  got = rt->MallocFromPoolAsync(8 * kMiB, pool, a);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<AllocInfo> more = rt->MallocFromPoolAsync(6 * kMiB, pool, a);
  EXPECT_TRUE(absl::IsResourceExhausted(more.status())) << more.status();
  EXPECT_THAT(std::string(more.status().message()), Not(HasSubstr("pending")));
  // Once the free is known complete, B's request fits where it was.
  ASSERT_TRUE(rt->FreeAsync(got->ptr, a).ok());
  ASSERT_TRUE(rt->StreamSynchronize(a).ok());
  got = rt->MallocFromPoolAsync(8 * kMiB, pool, b);
  EXPECT_TRUE(got.ok()) << got.status();
}

TEST(OomTest, ARequestNoPoolCanHoldReleasesNothing) {
  std::unique_ptr<Runtime> rt = MakeRuntime(64 * kMiB);
  const PoolId a = KeepingPool(*rt);
  PoolProps small;
  small.max_size = 8 * kMiB;
  const PoolId b = *rt->CreatePool(small);
  const StreamId s = *rt->CreateStream(0);
  absl::StatusOr<AllocInfo> held = rt->MallocFromPoolAsync(20 * kMiB, a, s);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(rt->FreeAsync(held->ptr, s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(s).ok());
  EXPECT_FALSE(rt->MallocFromPoolAsync(16 * kMiB, b, s).ok());
  EXPECT_EQ(StatsOf(*rt, a).reserved_bytes, 20 * kMiB);
  EXPECT_EQ(StatsOf(*rt, b).failed_alloc_count, 1u);
  EXPECT_EQ(StatsOf(*rt, b).oom_count, 0u);
}

TEST(OomTest, TheHandlerFreesAndAsksForAnotherTry) {
  std::unique_ptr<Runtime> rt = MakeRuntime(64 * kMiB, /*reclaim=*/false);
  const PoolId pool = KeepingPool(*rt);
  const StreamId s = *rt->CreateStream(0);
  absl::StatusOr<AllocInfo> held = rt->MallocFromPoolAsync(40 * kMiB, pool, s);
  ASSERT_TRUE(held.ok());
  int calls = 0;
  PoolId seen_pool;
  uint64_t seen_size = 0;
  rt->SetOomHandler([&](PoolId p, uint64_t size) {
    ++calls;
    seen_pool = p;
    seen_size = size;
    // The API, from inside the handler: no library lock is held.
    EXPECT_TRUE(rt->FreeAsync(held->ptr, s).ok());
    EXPECT_TRUE(rt->StreamSynchronize(s).ok());
    EXPECT_TRUE(rt->TrimTo(pool, 0).ok());
    return true;
  });
  absl::StatusOr<AllocInfo> got = rt->MallocFromPoolAsync(40 * kMiB, pool, s);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_pool, pool);
  EXPECT_EQ(seen_size, 40 * kMiB);
  const PoolStats st = StatsOf(*rt, pool);
  EXPECT_EQ(st.oom_retries, 1u);
  EXPECT_EQ(st.failed_alloc_count, 0u);
  EXPECT_EQ(st.oom_count, 0u);
}

TEST(OomTest, TheHandlerIsAskedAgainUntilItGivesUp) {
  std::unique_ptr<Runtime> rt = MakeRuntime(16 * kMiB);
  const StreamId s = *rt->CreateStream(0);
  absl::StatusOr<AllocInfo> held = rt->MallocAsync(12 * kMiB, s);
  ASSERT_TRUE(held.ok());
  int calls = 0;
  rt->SetOomHandler([&](PoolId, uint64_t) { return ++calls < 4; });
  absl::StatusOr<AllocInfo> got = rt->MallocAsync(8 * kMiB, s);
  EXPECT_TRUE(absl::IsResourceExhausted(got.status()));
  EXPECT_EQ(calls, 4);
  const PoolStats st = StatsOf(*rt, *rt->CurrentPool(0));
  EXPECT_EQ(st.oom_retries, 3u);
  EXPECT_EQ(st.oom_count, 1u);
  EXPECT_EQ(st.failed_alloc_count, 1u);  // one call failed, however often it was tried
  // Removed: the next failure calls nothing.
  rt->SetOomHandler(nullptr);
  EXPECT_FALSE(rt->MallocAsync(8 * kMiB, s).ok());
  EXPECT_EQ(calls, 4);
  // A request beyond the device calls nothing either: no handler can help.
  rt->SetOomHandler([&](PoolId, uint64_t) { return ++calls < 10; });
  EXPECT_FALSE(rt->MallocAsync(32 * kMiB, s).ok());
  EXPECT_EQ(calls, 4);
}

TEST(OomTest, StatisticsCountRequestedBytesAndSegments) {
  std::unique_ptr<Runtime> rt = MakeRuntime(256 * kMiB);
  rt->EnableChecker(false);  // the fast path too
  PoolProps props;
  props.growth = PoolGrowth::kChunked;
  props.release_threshold = UINT64_MAX;
  const PoolId pool = *rt->CreatePool(props);
  const StreamId s = *rt->CreateStream(0);
  std::vector<void*> ptrs;
  for (uint64_t size : {1000u, 3000u, 5u << 20}) {
    absl::StatusOr<AllocInfo> a = rt->MallocFromPoolAsync(size, pool, s);
    ASSERT_TRUE(a.ok());
    ptrs.push_back(a->ptr);
  }
  PoolStats st = StatsOf(*rt, pool);
  EXPECT_EQ(st.requested_bytes, 1000u + 3000u + (5u << 20));
  EXPECT_EQ(st.requested_high, st.requested_bytes);
  EXPECT_EQ(st.segments, 2u);  // a 2 MiB chunk for the small ones, 6 MiB for the large
  EXPECT_EQ(st.segments_high, 2u);
  // Freed and taken again through the stream's front cache.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(rt->FreeAsync(ptrs[1], s).ok());
    absl::StatusOr<AllocInfo> a = rt->MallocFromPoolAsync(2000, pool, s);
    ASSERT_TRUE(a.ok());
    ptrs[1] = a->ptr;
  }
  st = StatsOf(*rt, pool);
  EXPECT_EQ(st.requested_bytes, 1000u + 2000u + (5u << 20));
  for (void* p : ptrs) ASSERT_TRUE(rt->FreeAsync(p, s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(s).ok());
  ASSERT_TRUE(rt->TrimTo(pool, 0).ok());
  st = StatsOf(*rt, pool);
  EXPECT_EQ(st.requested_bytes, 0u);
  EXPECT_EQ(st.segments, 0u);
  EXPECT_EQ(st.segments_high, 2u);
}

// ------------------------------------------------------------------ C API

int CountingHandler(void* user, spMemPool_t, size_t) {
  ++*static_cast<int*>(user);
  return 0;
}

TEST(OomCapiTest, HandlerAndConfig) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  EXPECT_EQ(cfg.oomReclaimOff, 0);
  cfg.deviceCapacity = 16 * kMiB;
  cfg.oomReclaimOff = 2;
  spRuntime_t rt = nullptr;
  EXPECT_EQ(spRuntimeCreate(&rt, &cfg), spErrorInvalidValue);
  cfg.oomReclaimOff = 1;
  ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  int calls = 0;
  EXPECT_EQ(spRuntimeSetOomHandler(nullptr, CountingHandler, &calls), spErrorInvalidValue);
  ASSERT_EQ(spRuntimeSetOomHandler(rt, CountingHandler, &calls), spSuccess);
  spStream_t s = nullptr;
  ASSERT_EQ(spStreamGetLegacy(&s, rt, 0), spSuccess);
  void* held = nullptr;
  ASSERT_EQ(spMallocAsync(&held, 12 * kMiB, s), spSuccess);
  void* p = nullptr;
  EXPECT_EQ(spMallocAsync(&p, 8 * kMiB, s), spErrorMemoryAllocation);
  EXPECT_EQ(calls, 1);
  spMemPool_t pool = nullptr;
  ASSERT_EQ(spDeviceGetMemPool(&pool, rt, 0), spSuccess);
  spMemPoolStats st;
  ASSERT_EQ(spMemPoolGetStats(pool, &st), spSuccess);
  EXPECT_EQ(st.oomCount, 1u);
  EXPECT_EQ(st.oomRetries, 0u);
  EXPECT_EQ(st.reclaims, 0u);
  ASSERT_EQ(spRuntimeSetOomHandler(rt, nullptr, nullptr), spSuccess);
  EXPECT_EQ(spMallocAsync(&p, 8 * kMiB, s), spErrorMemoryAllocation);
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(spMallocAsync(&p, 1000, s), spSuccess);
  ASSERT_EQ(spMemPoolGetStats(pool, &st), spSuccess);
  EXPECT_EQ(st.requestedBytes, 12 * kMiB + 1000);
  EXPECT_EQ(st.segments, 1u);  // one reservation, expandable
  ASSERT_EQ(spFreeAsync(held, s), spSuccess);
  ASSERT_EQ(spFreeAsync(p, s), spSuccess);
  EXPECT_EQ(spRuntimeDestroy(rt), spSuccess);
  EXPECT_EQ(spRuntimeSetOomHandler(rt, CountingHandler, &calls), spErrorInvalidResourceHandle);
}

}  // namespace
}  // namespace streampool
