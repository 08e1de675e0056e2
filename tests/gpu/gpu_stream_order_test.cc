// The CUDA guide's stream-ordered scenarios on the CUDA executor: streams are
// CUstreams, kernels really run for their duration on the device, and what a
// free's completion means is decided by the GPU, not by virtual time. Each
// test is one scenario with the decision it expects and the rule that makes
// it; the simulator's versions are tests/pool/scenarios_test.cc.
//
// Kernels last long enough (tens to hundreds of ms) that the host is
// certainly done with its calls before they end, so "still running" holds
// without racing the device; every wait for the device has a deadline.
#include <chrono>
#include <cstdint>
#include <thread>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "tests/gpu/gpu_test_util.h"

namespace streampool::gpu_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint64_t kBlock = 4 * kMiB;
constexpr uint64_t kMs = 1000 * 1000;  // ns

// Two non-blocking streams A and B and two events, as the guide's examples
// have them.
struct TwoStreams {
  StreamId a, b;
  EventId e1, e2;
};

absl::StatusOr<TwoStreams> MakeTwoStreams(Runtime& rt) {
  TwoStreams t;
  absl::StatusOr<StreamId> a = rt.CreateStream(0, /*non_blocking=*/true);
  absl::StatusOr<StreamId> b = rt.CreateStream(0, /*non_blocking=*/true);
  absl::StatusOr<EventId> e1 = rt.CreateEvent();
  absl::StatusOr<EventId> e2 = rt.CreateEvent();
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status();
  if (!e1.ok()) return e1.status();
  if (!e2.ok()) return e2.status();
  t.a = *a;
  t.b = *b;
  t.e1 = *e1;
  t.e2 = *e2;
  return t;
}

// Allocates on A and hands the block to B (B waits for A's event), where a
// kernel of `kernel_ns` uses it before B frees it: the guide's producer and
// consumer, with the free on the consumer.
absl::StatusOr<void*> AllocOnAFreeOnB(Runtime& rt, const TwoStreams& t, uint64_t kernel_ns,
                                      PoolId pool) {
  absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(kBlock, pool, t.a);
  if (!a.ok()) return a.status();
  const Access use{a->ptr, kBlock, /*write=*/true};
  if (absl::Status st = rt.RecordEvent(t.e1, t.a); !st.ok()) return st;
  if (absl::Status st = rt.StreamWaitEvent(t.b, t.e1); !st.ok()) return st;
  if (absl::Status st = rt.LaunchKernel(t.b, kernel_ns, {&use, 1}); !st.ok()) return st;
  if (absl::Status st = rt.FreeAsync(a->ptr, t.b); !st.ok()) return st;
  return a->ptr;
}

PoolStats Stats(Runtime& rt, PoolId pool) {
  absl::StatusOr<PoolStats> s = rt.GetPoolStats(pool);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : PoolStats{};
}

// Rule 1: a stream's own free is reusable by it at once, in stream order,
// while the kernel that used the block is still running.
TEST(GpuStreamOrderTest, SameStreamReuseGetsThePointerBack) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto s = rt->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  auto a = rt->MallocAsync(kMiB, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->rule, ReuseRule::kFresh);
  const Access use{a->ptr, kMiB, /*write=*/true};
  ASSERT_TRUE(rt->LaunchKernel(*s, 100 * kMs, {&use, 1}).ok());
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  auto b = rt->MallocAsync(kMiB, *s);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ptr, a->ptr);
  EXPECT_EQ(b->rule, ReuseRule::kSameStream);
  EXPECT_TRUE(absl::IsUnavailable(rt->StreamQuery(*s))) << "the kernel is still running";
  ASSERT_TRUE(rt->FreeAsync(b->ptr, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
}

// Rule 2: A allocates after waiting for an event B recorded after its free,
// so the free is ordered before A's next work and A takes the block without
// waiting for the kernel still running on B.
TEST(GpuStreamOrderTest, EventDependencyReuseOnTheWaitingStream) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  auto t = MakeTwoStreams(*rt);
  ASSERT_TRUE(t.ok()) << t.status();
  auto p = AllocOnAFreeOnB(*rt, *t, 300 * kMs, *pool);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(rt->RecordEvent(t->e2, t->b).ok());
  ASSERT_TRUE(rt->StreamWaitEvent(t->a, t->e2).ok());
  auto b = rt->MallocAsync(kBlock, t->a);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ptr, *p);
  EXPECT_EQ(b->rule, ReuseRule::kEventDependency);
  EXPECT_TRUE(absl::IsUnavailable(rt->StreamQuery(t->b))) << "B's kernel is still running";
  const PoolStats stats = Stats(*rt, *pool);
  EXPECT_EQ(stats.reuse_event_dependency, 1u);
  EXPECT_EQ(stats.waits_inserted, 0u);
  ASSERT_TRUE(rt->FreeAsync(b->ptr, t->a).ok());
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
}

// The same program with rule 2 off: the free is neither ordered before A's
// allocation for the pool nor complete, so the pool grows.
TEST(GpuStreamOrderTest, WithoutEventDependenciesThePoolGrowsInstead) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*pool, PoolAttr::kReuseFollowEventDependencies, 0).ok());
  auto t = MakeTwoStreams(*rt);
  ASSERT_TRUE(t.ok()) << t.status();
  auto p = AllocOnAFreeOnB(*rt, *t, 300 * kMs, *pool);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(rt->RecordEvent(t->e2, t->b).ok());
  ASSERT_TRUE(rt->StreamWaitEvent(t->a, t->e2).ok());
  auto b = rt->MallocAsync(kBlock, t->a);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->ptr, *p);
  EXPECT_EQ(b->rule, ReuseRule::kFresh);
  ASSERT_TRUE(rt->FreeAsync(b->ptr, t->a).ok());
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
}

// Rule 3: nothing orders A after B's free, but the GPU has finished B's work
// (the test waits on B's CUstream itself, so streampool is not told): with
// the opportunistic switch on, A's allocation observes the free complete and
// reuses the block. A first allocates while B's kernel still runs, as a
// producer would: that allocation asks about B's free (and grows), which is
// where the executor marks B's stream; the second finds the mark passed.
TEST(GpuStreamOrderTest, OpportunisticReuseOnceTheGpuFinished) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto driver = Driver::Open();
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  auto t = MakeTwoStreams(*rt);
  ASSERT_TRUE(t.ok()) << t.status();
  auto native_b = rt->NativeStream(t->b);
  ASSERT_TRUE(native_b.ok()) << native_b.status();
  ASSERT_NE(*native_b, nullptr) << "a created stream is a CUstream of its own";
  auto p = AllocOnAFreeOnB(*rt, *t, 100 * kMs, *pool);
  ASSERT_TRUE(p.ok()) << p.status();
  auto early = rt->MallocAsync(kBlock, t->a);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_NE(early->ptr, *p) << "B's kernel is still running";
  ASSERT_TRUE((*driver)->StreamSynchronize(*native_b).ok());
  auto b = rt->MallocAsync(kBlock, t->a);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ptr, *p);
  EXPECT_EQ(b->rule, ReuseRule::kOpportunistic);
  EXPECT_EQ(Stats(*rt, *pool).reuse_opportunistic, 1u);
  ASSERT_TRUE(rt->FreeAsync(early->ptr, t->a).ok());
  ASSERT_TRUE(rt->FreeAsync(b->ptr, t->a).ok());
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
}

// CUDA's strict mode: with the opportunistic switch off, work the GPU
// finished is not enough; the same program grows the pool again.
TEST(GpuStreamOrderTest, StrictModeIgnoresWorkTheGpuFinished) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto driver = Driver::Open();
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  auto t = MakeTwoStreams(*rt);
  ASSERT_TRUE(t.ok()) << t.status();
  auto native_b = rt->NativeStream(t->b);
  ASSERT_TRUE(native_b.ok()) << native_b.status();
  auto p = AllocOnAFreeOnB(*rt, *t, 100 * kMs, *pool);
  ASSERT_TRUE(p.ok()) << p.status();
  auto early = rt->MallocAsync(kBlock, t->a);
  ASSERT_TRUE(early.ok()) << early.status();
  ASSERT_TRUE((*driver)->StreamSynchronize(*native_b).ok());
  auto b = rt->MallocAsync(kBlock, t->a);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->ptr, *p);
  EXPECT_EQ(b->rule, ReuseRule::kFresh);
  ASSERT_TRUE(rt->FreeAsync(early->ptr, t->a).ok());
  ASSERT_TRUE(rt->FreeAsync(b->ptr, t->a).ok());
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
}

// A successful StreamQuery on B proves its free complete, opportunistic
// switch or not: A reuses the block, counted as reuse after a proof.
TEST(GpuStreamOrderTest, SuccessfulQueryOnTheFreeingStreamMakesTheBlockReusable) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  auto t = MakeTwoStreams(*rt);
  ASSERT_TRUE(t.ok()) << t.status();
  auto p = AllocOnAFreeOnB(*rt, *t, 20 * kMs, *pool);
  ASSERT_TRUE(p.ok()) << p.status();
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  absl::Status query = rt->StreamQuery(t->b);
  while (absl::IsUnavailable(query) && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
    query = rt->StreamQuery(t->b);
  }
  ASSERT_TRUE(query.ok()) << "B's 20 ms kernel did not finish within 10 s: " << query;
  auto b = rt->MallocAsync(kBlock, t->a);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ptr, *p);
  EXPECT_EQ(b->rule, ReuseRule::kAfterSync);
  ASSERT_TRUE(rt->FreeAsync(b->ptr, t->a).ok());
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
}

// Rule 5: the pool is full (its max size is one block), B's free is neither
// ordered before A nor complete, so the pool makes A wait for it: the
// allocation returns at once with B's block, and A's stream, with no work of
// its own, stays busy until B's kernel ends.
TEST(GpuStreamOrderTest, InternalDependencyInsertsARealWait) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  PoolProps props;
  props.device = 0;
  props.max_size = kBlock;
  auto pool = rt->CreatePool(props);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto t = MakeTwoStreams(*rt);
  ASSERT_TRUE(t.ok()) << t.status();
  constexpr uint64_t kKernelNs = 300 * kMs;
  const auto launched = steady_clock::now();
  auto p = AllocOnAFreeOnB(*rt, *t, kKernelNs, *pool);
  ASSERT_TRUE(p.ok()) << p.status();
  auto b = rt->MallocFromPoolAsync(kBlock, *pool, t->a);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ptr, *p);
  EXPECT_EQ(b->rule, ReuseRule::kInternalDependency);
  EXPECT_LT(steady_clock::now() - launched, milliseconds(kKernelNs / kMs / 2))
      << "the allocation must not wait on the host";
  EXPECT_TRUE(absl::IsUnavailable(rt->StreamQuery(t->a))) << "A waits on the GPU for B's kernel";
  const PoolStats stats = Stats(*rt, *pool);
  EXPECT_EQ(stats.reuse_internal_dependency, 1u);
  EXPECT_EQ(stats.waits_inserted, 1u);
  ASSERT_TRUE(rt->StreamSynchronize(t->a).ok());
  EXPECT_GE(steady_clock::now() - launched, milliseconds(kKernelNs / kMs * 9 / 10))
      << "A's synchronize returned before B's kernel could have ended";
  ASSERT_TRUE(rt->FreeAsync(b->ptr, t->a).ok());
  ASSERT_TRUE(rt->DeviceSynchronize(0).ok());
  ASSERT_TRUE(rt->DestroyPool(*pool).ok());
}

// The release rule at a synchronize: threshold 0 gives back every whole
// granule of READY memory.
TEST(GpuStreamOrderTest, SynchronizeReleasesDownToTheThreshold) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  auto s = rt->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok());
  auto a = rt->MallocAsync(64 * kMiB, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(rt->MemsetAsync(a->ptr, 0, 64 * kMiB, *s).ok());
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  EXPECT_GE(Stats(*rt, *pool).reserved_bytes, 64 * kMiB) << "nothing is released before a sync";
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  EXPECT_EQ(Stats(*rt, *pool).reserved_bytes, 0u);
}

// TrimTo applies the same rule with its own bound to a pool that keeps
// everything at synchronize calls.
TEST(GpuStreamOrderTest, TrimToReleasesWhatTheThresholdKept) {
  SP_CUDA_RUNTIME_OR_SKIP(rt, CudaConfig());
  auto pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*pool, PoolAttr::kReleaseThreshold, UINT64_MAX).ok());
  auto s = rt->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok());
  auto a = rt->MallocAsync(64 * kMiB, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  EXPECT_GE(Stats(*rt, *pool).reserved_bytes, 64 * kMiB);
  ASSERT_TRUE(rt->TrimTo(*pool, 32 * kMiB).ok());
  const uint64_t kept = Stats(*rt, *pool).reserved_bytes;
  EXPECT_GE(kept, 32 * kMiB) << "a trim never goes below its bound";
  EXPECT_LT(kept, 64 * kMiB);
  ASSERT_TRUE(rt->TrimTo(*pool, 0).ok());
  EXPECT_EQ(Stats(*rt, *pool).reserved_bytes, 0u);
}

// Out of memory on a 64 MiB device: the default pool keeps 48 MiB READY
// (threshold max), so a second pool's 48 MiB does not fit until the
// runtime's reclaim releases the first pool's READY memory and tries again.
class GpuOomReclaimTest : public ::testing::TestWithParam<bool> {};

TEST_P(GpuOomReclaimTest, ReclaimReleasesAnotherPoolsReadyMemory) {
  const bool reclaim = GetParam();
  RuntimeConfig cfg = CudaConfig(64 * kMiB);
  cfg.oom_reclaim = reclaim;
  SP_CUDA_RUNTIME_OR_SKIP(rt, cfg);
  auto first = rt->DefaultPool(0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*first, PoolAttr::kReleaseThreshold, UINT64_MAX).ok());
  PoolProps props;
  props.device = 0;
  auto second = rt->CreatePool(props);
  ASSERT_TRUE(second.ok()) << second.status();
  auto s = rt->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok());
  auto a = rt->MallocFromPoolAsync(48 * kMiB, *first, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  ASSERT_GE(Stats(*rt, *first).reserved_bytes, 48 * kMiB);

  auto b = rt->MallocFromPoolAsync(48 * kMiB, *second, *s);
  if (!reclaim) {
    EXPECT_TRUE(absl::IsResourceExhausted(b.status())) << b.status();
    EXPECT_EQ(Stats(*rt, *second).failed_alloc_count, 1u);
    return;
  }
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->rule, ReuseRule::kFresh);
  const PoolStats f = Stats(*rt, *first);
  EXPECT_GE(f.reclaims, 1u);
  EXPECT_GE(f.reclaimed_bytes, 32 * kMiB);
  EXPECT_LE(f.reserved_bytes, 16 * kMiB);
  EXPECT_EQ(Stats(*rt, *second).oom_retries, 1u);
  ASSERT_TRUE(rt->FreeAsync(b->ptr, *s).ok());
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
}

INSTANTIATE_TEST_SUITE_P(Reclaim, GpuOomReclaimTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "On" : "Off";
                         });

}  // namespace
}  // namespace streampool::gpu_test
