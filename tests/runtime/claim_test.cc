// Who owns a free. A block waiting in its stream's front cache keeps its
// page-map entry, so the map no longer decides which of two frees of one
// pointer wins: the block's holder does, read and cleared under the holding
// stream's lock. These pin what a caller sees: a second free is refused
// whether the block is cached or central, of two racing frees of one pointer
// on two streams exactly one succeeds, and a freed pointer is no allocation
// to any question asked of it.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

class ClaimTest : public testing::Test {
 protected:
  void SetUp() override {
    RuntimeConfig cfg;
    cfg.backing = Backing::kAddressOnly;
    auto rt = Runtime::Create(cfg);
    ASSERT_TRUE(rt.ok());
    rt_ = std::move(*rt);
    auto a = rt_->CreateStream(0);
    auto b = rt_->CreateStream(0);
    auto pool = rt_->DefaultPool(0);
    ASSERT_TRUE(a.ok() && b.ok() && pool.ok());
    a_ = *a;
    b_ = *b;
    pool_ = *pool;
  }
  PoolStats Stats() { return *rt_->GetPoolStats(pool_); }

  std::unique_ptr<Runtime> rt_;
  StreamId a_, b_;
  PoolId pool_;
};

TEST_F(ClaimTest, ASecondFreeOfACachedBlockIsRefusedAndChangesNothing) {
  void* p = rt_->MallocAsync(256, a_)->ptr;
  ASSERT_TRUE(rt_->FreeAsync(p, a_).ok());  // into a's front cache
  const PoolStats before = Stats();
  EXPECT_TRUE(absl::IsInvalidArgument(rt_->FreeAsync(p, a_))) << "same stream";
  EXPECT_TRUE(absl::IsInvalidArgument(rt_->FreeAsync(p, b_))) << "another stream";
  const PoolStats after = Stats();
  EXPECT_EQ(after.free_count, before.free_count);
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  // The cached block is served again, and is then freed once more.
  void* q = rt_->MallocAsync(256, a_)->ptr;
  EXPECT_EQ(q, p) << "the stream's own free, from its cache";
  EXPECT_TRUE(rt_->FreeAsync(q, a_).ok());
}

TEST_F(ClaimTest, AFreedPointerIsNoAllocationToAnyQuestion) {
  void* p = rt_->MallocAsync(512, a_)->ptr;
  ASSERT_TRUE(rt_->GetPointerAttributes(p).ok());
  ASSERT_TRUE(rt_->FreeAsync(p, a_).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(rt_->RecordUse(p, b_)));
  auto attrs = rt_->GetPointerAttributes(p);
  EXPECT_TRUE(!attrs.ok() || attrs->size == 0) << "a cached block is not an allocation";
  auto live = rt_->LiveAllocations();
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty());
}

TEST_F(ClaimTest, AFreeOnAnotherStreamClaimsFromTheAllocatingStream) {
  void* p = rt_->MallocAsync(1024, a_)->ptr;
  ASSERT_TRUE(rt_->FreeAsync(p, b_).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(rt_->FreeAsync(p, a_)));
  EXPECT_EQ(Stats().used_bytes, 0u);
  // b's own free: b reuses it at once.
  auto q = rt_->MallocAsync(1024, b_);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->ptr, p);
  EXPECT_EQ(q->rule, ReuseRule::kSameStream);
  EXPECT_TRUE(rt_->FreeAsync(q->ptr, b_).ok());
}

// Two host threads free the same pointers, each on its own stream, while the
// blocks go through the allocating stream's cache and back: every pointer is
// freed exactly once, whoever wins.
TEST_F(ClaimTest, OfTwoRacingFreesOnTwoStreamsExactlyOneSucceeds) {
  constexpr int kRounds = 200;
  constexpr int kPointers = 64;
  uint64_t won_total = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<void*> ptrs;
    for (int i = 0; i < kPointers; ++i) {
      auto a = rt_->MallocAsync(64 * (1 + i % 4), a_);
      ASSERT_TRUE(a.ok());
      ptrs.push_back(a->ptr);
    }
    std::atomic<int> won{0};
    std::atomic<bool> go{false};
    auto free_all = [&](StreamId s) {
      while (!go.load()) std::this_thread::yield();
      for (void* p : ptrs) won += rt_->FreeAsync(p, s).ok();
    };
    std::thread x(free_all, a_), y(free_all, b_);
    go = true;
    x.join();
    y.join();
    ASSERT_EQ(won.load(), kPointers) << "round " << round;
    won_total += kPointers;
    ASSERT_EQ(Stats().used_bytes, 0u) << "round " << round;
  }
  ASSERT_TRUE(rt_->DeviceSynchronize(0).ok());
  EXPECT_EQ(Stats().free_count, Stats().alloc_count);
  EXPECT_EQ(won_total, uint64_t{kRounds} * kPointers);
}

}  // namespace
}  // namespace streampool
