// Waiting versus growing (docs/design.md "Waiting versus growing"): a wait
// that delays nothing comes before growth; past the soft reserved limit any
// wait does; rule 5 may join several pending frees into one block. Each test
// reads as the rule it pins, in virtual time unless it says otherwise.
#include <cstdint>
#include <memory>

#include "gtest/gtest.h"
#include "streampool/mem_pool.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kChunk = 2 * kMiB;

class WaitBeforeGrowthTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(RuntimeConfig{}); }

  void Make(const RuntimeConfig& config) {
    auto rt = Runtime::Create(config);
    ASSERT_TRUE(rt.ok()) << rt.status();
    rt_ = *std::move(rt);
    for (StreamId* s : {&a_, &b_, &c_}) {
      auto made = rt_->CreateStream(0, /*non_blocking=*/true);
      ASSERT_TRUE(made.ok());
      *s = *made;
    }
  }

  PoolId Pool(uint64_t max_size = 0, PoolGrowth growth = PoolGrowth::kDefault) {
    PoolProps props;
    props.max_size = max_size;
    props.growth = growth;
    // Rule 3 off, so that only a wait can reuse another stream's free.
    props.reuse_allow_opportunistic = false;
    auto pool = rt_->CreatePool(props);
    EXPECT_TRUE(pool.ok());
    return *pool;
  }

  // `bytes` on s, used by a kernel of ns and freed after it.
  void* UsedThenFreed(PoolId pool, StreamId s, uint64_t ns, uint64_t bytes = kChunk) {
    auto got = rt_->MallocFromPoolAsync(bytes, pool, s);
    EXPECT_TRUE(got.ok());
    const Access write{got->ptr, bytes, true};
    EXPECT_TRUE(rt_->LaunchKernel(s, ns, {&write, 1}).ok());
    EXPECT_TRUE(rt_->FreeAsync(got->ptr, s).ok());
    return got->ptr;
  }

  void Busy(StreamId s, uint64_t ns) { EXPECT_TRUE(rt_->LaunchKernel(s, ns, {}).ok()); }

  PoolStats Stats(PoolId pool) { return *rt_->GetPoolStats(pool); }
  uint64_t Reserved(PoolId pool) {
    return *rt_->GetPoolAttribute(pool, PoolAttr::kReservedMemCurrent);
  }

  std::unique_ptr<Runtime> rt_;
  StreamId a_, b_, c_;
};

TEST_F(WaitBeforeGrowthTest, AFreeThatEndsBeforeTheStreamGetsThereIsReusedRatherThanGrown) {
  const PoolId pool = Pool();
  void* freed = UsedThenFreed(pool, a_, 100'000);  // A's free completes at 100 us
  Busy(b_, 300'000);                               // B is busy until 300 us
  auto got = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->ptr, freed);
  EXPECT_EQ(got->rule, ReuseRule::kInternalDependency);
  EXPECT_EQ(Reserved(pool), kChunk);
  const PoolStats s = Stats(pool);
  EXPECT_EQ(s.waits_inserted, 1u);
  EXPECT_EQ(s.waits_before_growth, 1u);
  // The wait delayed nothing: B's next kernel still starts at 300 us.
  Busy(b_, 10'000);
  ASSERT_TRUE(rt_->StreamSynchronize(b_).ok());
  EXPECT_EQ(rt_->HostNow(), 310'000u);
  EXPECT_TRUE(rt_->CheckReports().empty());
  EXPECT_TRUE(rt_->FreeAsync(got->ptr, b_).ok());
}

TEST_F(WaitBeforeGrowthTest, AFreeThatWouldDelayTheStreamIsNotWaitedForWhileThePoolCanGrow) {
  const PoolId pool = Pool();
  void* freed = UsedThenFreed(pool, a_, 300'000);  // completes at 300 us
  Busy(b_, 100'000);                               // B would be there at 100 us
  auto got = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  ASSERT_TRUE(got.ok());
  EXPECT_NE(got->ptr, freed);
  EXPECT_EQ(got->rule, ReuseRule::kFresh);
  EXPECT_EQ(Reserved(pool), 2 * kChunk);
  EXPECT_EQ(Stats(pool).waits_inserted, 0u);
  EXPECT_TRUE(rt_->FreeAsync(got->ptr, b_).ok());
}

TEST_F(WaitBeforeGrowthTest, SwitchedOffThePoolGrowsFirstAsCudaDoes) {
  const PoolId pool = Pool();
  ASSERT_TRUE(rt_->SetPoolAttribute(pool, PoolAttr::kWaitBeforeGrowth, 0).ok());
  void* freed = UsedThenFreed(pool, a_, 100'000);
  Busy(b_, 300'000);
  auto got = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  ASSERT_TRUE(got.ok());
  EXPECT_NE(got->ptr, freed);
  EXPECT_EQ(got->rule, ReuseRule::kFresh);
  EXPECT_EQ(Stats(pool).waits_inserted, 0u);
  EXPECT_TRUE(rt_->FreeAsync(got->ptr, b_).ok());
}

TEST_F(WaitBeforeGrowthTest, AChunkedPoolKeepsCudasOrderUnlessAsked) {
  const PoolId pool = Pool(0, PoolGrowth::kChunked);
  EXPECT_EQ(*rt_->GetPoolAttribute(pool, PoolAttr::kWaitBeforeGrowth), 0u);
  void* freed = UsedThenFreed(pool, a_, 100'000);
  Busy(b_, 300'000);
  auto grown = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(grown->rule, ReuseRule::kFresh);
  // Asked, it waits where that delays nothing.
  ASSERT_TRUE(rt_->SetPoolAttribute(pool, PoolAttr::kWaitBeforeGrowth, 1).ok());
  auto waited = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->ptr, freed);
  EXPECT_EQ(waited->rule, ReuseRule::kInternalDependency);
  EXPECT_TRUE(rt_->FreeAsync(grown->ptr, b_).ok());
  EXPECT_TRUE(rt_->FreeAsync(waited->ptr, b_).ok());
}

TEST_F(WaitBeforeGrowthTest, PastTheSoftLimitAnyWaitComesBeforeGrowth) {
  const PoolId pool = Pool();
  ASSERT_TRUE(rt_->SetPoolAttribute(pool, PoolAttr::kSoftReservedLimit, kChunk).ok());
  void* freed = UsedThenFreed(pool, a_, 300'000);  // completes at 300 us
  Busy(b_, 100'000);
  // Growing would take reserved past 2 MiB: B waits for A's free instead,
  // although the wait delays it to 300 us.
  auto got = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->ptr, freed);
  EXPECT_EQ(got->rule, ReuseRule::kInternalDependency);
  EXPECT_EQ(Reserved(pool), kChunk);
  EXPECT_EQ(Stats(pool).waits_before_growth, 1u);
  Busy(b_, 10'000);
  ASSERT_TRUE(rt_->StreamSynchronize(b_).ok());
  EXPECT_EQ(rt_->HostNow(), 310'000u);
  EXPECT_TRUE(rt_->CheckReports().empty());
  // A limit still above what growth needs lets it grow.
  ASSERT_TRUE(rt_->SetPoolAttribute(pool, PoolAttr::kSoftReservedLimit, 4 * kChunk).ok());
  UsedThenFreed(pool, a_, 900'000);
  auto grown = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(grown->rule, ReuseRule::kFresh);
  EXPECT_TRUE(rt_->FreeAsync(got->ptr, b_).ok());
  EXPECT_TRUE(rt_->FreeAsync(grown->ptr, b_).ok());
}

TEST_F(WaitBeforeGrowthTest, WhenNoSingleFreeFitsRuleFiveJoinsAdjacentFreesOfSeveralStreams) {
  const PoolId pool = Pool(2 * kChunk);  // no room to grow past two chunks
  auto x = rt_->MallocFromPoolAsync(kChunk, pool, a_);
  auto y = rt_->MallocFromPoolAsync(kChunk, pool, c_);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_EQ(static_cast<char*>(y->ptr), static_cast<char*>(x->ptr) + kChunk);
  Busy(a_, 500'000);
  Busy(c_, 700'000);
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, a_).ok());
  ASSERT_TRUE(rt_->FreeAsync(y->ptr, c_).ok());
  // 4 MiB fits in neither free alone: B waits on both streams and takes the
  // two as one block.
  auto got = rt_->MallocFromPoolAsync(2 * kChunk, pool, b_);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ptr, x->ptr);
  EXPECT_EQ(got->rule, ReuseRule::kInternalDependency);
  const PoolStats s = Stats(pool);
  EXPECT_EQ(s.waits_inserted, 2u);
  EXPECT_EQ(s.joined_reuses, 1u);
  // B's work runs after both frees.
  const Access write{got->ptr, 2 * kChunk, true};
  ASSERT_TRUE(rt_->LaunchKernel(b_, 10'000, {&write, 1}).ok());
  ASSERT_TRUE(rt_->StreamSynchronize(b_).ok());
  EXPECT_EQ(rt_->HostNow(), 710'000u);
  EXPECT_TRUE(rt_->CheckReports().empty());
  EXPECT_TRUE(rt_->FreeAsync(got->ptr, b_).ok());
}

TEST_F(WaitBeforeGrowthTest, AJoinTakesTheFewestWaitsAndTheStreamsOwnFreesNeedNone) {
  const PoolId pool = Pool(3 * kChunk);
  // Three adjacent chunks: A's, B's own, C's.
  auto x = rt_->MallocFromPoolAsync(kChunk, pool, a_);
  auto y = rt_->MallocFromPoolAsync(kChunk, pool, b_);
  auto z = rt_->MallocFromPoolAsync(kChunk, pool, c_);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  Busy(a_, 900'000);
  Busy(c_, 500'000);
  ASSERT_TRUE(rt_->FreeAsync(x->ptr, a_).ok());
  ASSERT_TRUE(rt_->FreeAsync(y->ptr, b_).ok());
  ASSERT_TRUE(rt_->FreeAsync(z->ptr, c_).ok());
  // [A's, B's] and [B's, C's] each need one wait; A's free came first in
  // host order, so B joins its own free with A's.
  auto got = rt_->MallocFromPoolAsync(2 * kChunk, pool, b_);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ptr, x->ptr);
  EXPECT_EQ(Stats(pool).waits_inserted, 1u);
  EXPECT_EQ(Stats(pool).joined_reuses, 1u);
  EXPECT_TRUE(rt_->FreeAsync(got->ptr, b_).ok());
}

TEST(WaitBeforeGrowthThreads, TheThreadsExecutorWaitsOnlyForFreesAlreadyComplete) {
  // In real time nothing projects when a running kernel ends: a free behind
  // a kernel still running is not free to wait for, so the pool grows.
  RuntimeConfig config;
  config.executor = ExecutorKind::kThreads;
  auto rt = Runtime::Create(config);
  ASSERT_TRUE(rt.ok());
  auto a = (*rt)->CreateStream(0, true);
  auto b = (*rt)->CreateStream(0, true);
  PoolProps props;
  props.reuse_allow_opportunistic = false;
  auto pool = (*rt)->CreatePool(props);
  ASSERT_TRUE(a.ok() && b.ok() && pool.ok());
  auto x = (*rt)->MallocFromPoolAsync(kChunk, *pool, *a);
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE((*rt)->LaunchKernel(*a, 200'000'000, {}).ok());  // 200 ms
  ASSERT_TRUE((*rt)->FreeAsync(x->ptr, *a).ok());
  auto y = (*rt)->MallocFromPoolAsync(kChunk, *pool, *b);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->rule, ReuseRule::kFresh);
  EXPECT_NE(y->ptr, x->ptr);
  EXPECT_EQ((*rt)->GetPoolStats(*pool)->waits_inserted, 0u);
  ASSERT_TRUE((*rt)->FreeAsync(y->ptr, *b).ok());
  ASSERT_TRUE((*rt)->DeviceSynchronize(0).ok());
}

}  // namespace
}  // namespace streampool
