// MemPool on its own (tests/pool/mem_pool_fixture.h): reuse of other streams'
// frees, by event dependency and observed completion (rules 2 and 3), and by
// an inserted wait once growth failed (rule 5).
#include "tests/pool/mem_pool_fixture.h"

namespace streampool::internal {
namespace {

// ------------------------------------------------- cross-stream: rules 2/3

// Stream 1's frees inside one 4 MiB chunk, separated by LIVE blocks, with
// no READY memory left:
//   A = 1 MiB PENDING(1, 2)   B = 512 KiB PENDING(1, 4)   C = 768 KiB PENDING(1, 6)
// The pool can still grow, so a miss of rules 1-3 shows as growth.
class CrossStreamTest : public MemPoolTest {
 protected:
  void SetUp() override {
    ReserveChunk(4 * kMiB);
    uint64_t carved = 0;
    auto carve = [&](uint64_t n) {
      carved += n;
      return AllocBlock(n, 1);
    };
    Block* a = carve(kMiB);
    carve(256);
    Block* b = carve(512 * kKiB);
    carve(256);
    Block* c = carve(768 * kKiB);
    carve(4 * kMiB - carved);  // the rest, LIVE
    a_ = a->addr();
    b_ = b->addr();
    c_ = c->addr();
    FreeAsync(a, 1, 2);
    FreeAsync(b, 1, 4);
    FreeAsync(c, 1, 6);
    ASSERT_EQ(pool_->reserved(), 4 * kMiB);
  }
  // Stream 0's oracle: ordered after (1, ordered), observed (1, observed).
  ScriptedOracle On0(Position ordered, Position observed) {
    ScriptedOracle o(0);
    o.ordered_after[1] = ordered;
    o.observed_complete[1] = observed;
    return o;
  }
  uintptr_t a_ = 0, b_ = 0, c_ = 0;
};

TEST_F(CrossStreamTest, EventDependencyTakesTheBestEligibleFree) {
  // Ordered after position 5: A and B are eligible, C is not. Best fit of
  // the eligible ones is B, although the pool must look past C to know.
  ScriptedOracle o = On0(5, 0);
  MemPool::Allocation x = AllocWith(512 * kKiB, o);
  EXPECT_EQ(x.block->addr(), b_);
  EXPECT_EQ(x.rule, ReuseRule::kEventDependency);
  EXPECT_EQ(pool_->Stats().reuse_event_dependency, 1u);
  // 600 KiB: C would fit best but is not eligible; A is split.
  MemPool::Allocation y = AllocWith(600 * kKiB, o);
  EXPECT_EQ(y.block->addr(), a_);
  EXPECT_EQ(y.rule, ReuseRule::kEventDependency);
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
}

TEST_F(CrossStreamTest, EventDependencyWithOnlyTheOldestFreeEligible) {
  ScriptedOracle o = On0(3, 0);
  MemPool::Allocation x = AllocWith(512 * kKiB, o);
  EXPECT_EQ(x.block->addr(), a_);  // B fits better but is freed at 4 > 3
  EXPECT_EQ(x.rule, ReuseRule::kEventDependency);
  // A's remainder stays PENDING(1, 2), still eligible at the same bound.
  MemPool::Allocation y = AllocWith(512 * kKiB, o);
  EXPECT_EQ(y.block->addr(), a_ + 512 * kKiB);
  EXPECT_EQ(y.rule, ReuseRule::kEventDependency);
  // Nothing eligible is left: growth.
  MemPool::Allocation z = AllocWith(256, o);
  EXPECT_EQ(z.rule, ReuseRule::kFresh);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
}

TEST_F(CrossStreamTest, EventDependencyWithEveryFreeEligibleIsExactBestFit) {
  ScriptedOracle o = On0(6, 0);
  EXPECT_EQ(AllocWith(600 * kKiB, o).block->addr(), c_);
  EXPECT_EQ(AllocWith(512 * kKiB, o).block->addr(), b_);
  EXPECT_EQ(AllocWith(512 * kKiB, o).block->addr(), a_);
}

TEST_F(CrossStreamTest, NothingEligibleGrowsRatherThanWaits) {
  ScriptedOracle o = On0(1, 1);
  MemPool::Allocation x = AllocWith(512 * kKiB, o);
  EXPECT_EQ(x.rule, ReuseRule::kFresh);
  EXPECT_TRUE(o.waits.empty());
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  EXPECT_EQ(pool_->Stats().upstream_maps, 2u);
}

TEST_F(CrossStreamTest, OpportunisticTakesTheBestObservedCompleteFree) {
  pool_->set_reuse_follow_event_dependencies(false);
  ScriptedOracle o = On0(6, 5);  // event order is ignored with rule 2 off
  MemPool::Allocation x = AllocWith(512 * kKiB, o);
  EXPECT_EQ(x.block->addr(), b_);
  EXPECT_EQ(x.rule, ReuseRule::kOpportunistic);
  MemPool::Allocation y = AllocWith(600 * kKiB, o);
  EXPECT_EQ(y.block->addr(), a_);
  EXPECT_EQ(y.rule, ReuseRule::kOpportunistic);
  EXPECT_EQ(pool_->Stats().reuse_opportunistic, 2u);
}

TEST_F(CrossStreamTest, OpportunisticOnlyWhenNoEventDependencyServes) {
  ScriptedOracle o = On0(0, 3);
  MemPool::Allocation x = AllocWith(512 * kKiB, o);
  EXPECT_EQ(x.block->addr(), a_);
  EXPECT_EQ(x.rule, ReuseRule::kOpportunistic);
}

TEST_F(CrossStreamTest, EventDependencyIsTriedBeforeOpportunistic) {
  // Rule 3 would give the better-fitting B; rule 2 comes first and serves A.
  ScriptedOracle o = On0(3, 5);
  MemPool::Allocation x = AllocWith(512 * kKiB, o);
  EXPECT_EQ(x.block->addr(), a_);
  EXPECT_EQ(x.rule, ReuseRule::kEventDependency);
}

TEST_F(CrossStreamTest, SwitchedOffRulesAreNotUsed) {
  pool_->set_reuse_follow_event_dependencies(false);
  pool_->set_reuse_allow_opportunistic(false);
  ScriptedOracle o = On0(6, 6);
  EXPECT_EQ(AllocWith(512 * kKiB, o).rule, ReuseRule::kFresh);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
}

TEST_F(CrossStreamTest, ReadyMemoryIsTriedBeforeOtherStreamsFrees) {
  // A 2 MiB READY block beats the eligible, better-fitting 512 KiB free of
  // stream 1: rule 1 comes first.
  Make();
  Block* b = AllocBlock(512 * kKiB, 1);
  AllocBlock(1536 * kKiB, 1);  // the rest of b's chunk, LIVE
  Block* r = AllocBlock(2 * kMiB, 0);
  const uintptr_t r_base = r->addr();
  FreeAsync(b, 1, 1);
  FreeNow(r);
  ScriptedOracle o(0);
  o.ordered_after[1] = 1;
  MemPool::Allocation x = AllocWith(512 * kKiB, o);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(x.block->addr(), r_base);
}

TEST_F(MemPoolTest, CrossStreamBestFitSpansStreams) {
  const uintptr_t base = ReserveChunk(4 * kMiB);
  Block* one = AllocBlock(kMiB, 1);
  AllocBlock(256, 0);
  Block* two = AllocBlock(768 * kKiB, 2);
  AllocBlock(256, 0);
  Block* three = AllocBlock(768 * kKiB, 3);
  AllocBlock(4 * kMiB - kMiB - 1536 * kKiB - 512, 0);
  FreeAsync(one, 1, 1);
  FreeAsync(three, 3, 1);
  FreeAsync(two, 2, 1);
  ScriptedOracle o(0);
  o.ordered_after = {{1, 1}, {2, 1}, {3, 1}};
  // 700 KiB: stream 2's and stream 3's 768 KiB blocks tie; the lower address.
  MemPool::Allocation x = AllocWith(700 * kKiB, o);
  EXPECT_EQ(x.block->addr(), base + kMiB + 256);
  EXPECT_EQ(AllocWith(700 * kKiB, o).block->addr(), base + kMiB + 768 * kKiB + 512);
  EXPECT_EQ(AllocWith(700 * kKiB, o).block->addr(), base);
}

// ------------------------------------------------------ rule 5 (internal)

// Streams 1, 2, 3 each hold one whole 2 MiB chunk of a pool that is full
// (max_size 6 MiB).
class InternalDependencyTest : public MemPoolTest {
 protected:
  void SetUp() override {
    Make(/*max_size=*/6 * kMiB);
    for (StreamIndex s : {1, 2, 3}) blk_[s] = AllocBlock(2 * kMiB, s);
  }
  Block* blk_[4] = {};
};

TEST_F(InternalDependencyTest, TakesTheEarliestFreeInHostOrderAndInsertsAWait) {
  const uintptr_t x1 = blk_[1]->addr(), x2 = blk_[2]->addr();
  // Host order of the frees: stream 2 first, although its position is the
  // largest of the three.
  FreeAsync(blk_[2], 2, 7);
  FreeAsync(blk_[1], 1, 3);
  FreeAsync(blk_[3], 3, 1);

  ScriptedOracle o(0);
  MemPool::Allocation a = AllocWith(kMiB, o);
  EXPECT_EQ(a.rule, ReuseRule::kInternalDependency);
  EXPECT_EQ(a.block->addr(), x2);
  EXPECT_EQ(o.waits, (std::vector<ScriptedOracle::Wait>{{2, 7}}));

  // Stream 2's remainder keeps its place in host order, but 2 MiB does not
  // fit it: stream 1's block is next.
  ScriptedOracle o2(0);
  MemPool::Allocation b = AllocWith(2 * kMiB, o2);
  EXPECT_EQ(b.block->addr(), x1);
  EXPECT_EQ(o2.waits, (std::vector<ScriptedOracle::Wait>{{1, 3}}));

  // 1 MiB: the remainder of stream 2's free (seq 1) beats stream 3's (seq 3).
  ScriptedOracle o3(0);
  MemPool::Allocation c = AllocWith(kMiB, o3);
  EXPECT_EQ(c.block->addr(), x2 + kMiB);
  EXPECT_EQ(o3.waits, (std::vector<ScriptedOracle::Wait>{{2, 7}}));

  const PoolStats s = pool_->Stats();
  EXPECT_EQ(s.reuse_internal_dependency, 3u);
  EXPECT_EQ(s.waits_inserted, 3u);
  EXPECT_EQ(s.reserved_bytes, 6 * kMiB);
}

TEST_F(InternalDependencyTest, OnlyAfterGrowthFails) {
  Make(/*max_size=*/8 * kMiB);
  Block* b = AllocBlock(2 * kMiB, 1);
  FreeAsync(b, 1, 1);
  ScriptedOracle o(0);
  EXPECT_EQ(AllocWith(2 * kMiB, o).rule, ReuseRule::kFresh);
  EXPECT_TRUE(o.waits.empty());
}

TEST_F(InternalDependencyTest, SkipsFreesTooSmallForTheRequest) {
  // A full 6 MiB pool: chunk A holds a1 (stream 1) and a2 (stream 2), 1 MiB
  // each; chunks B (stream 3) and C (stream 2) are 2 MiB each.
  Make(/*max_size=*/6 * kMiB);
  Block* a1 = AllocBlock(kMiB, 1);
  const uintptr_t a1_base = a1->addr();
  Block* a2 = AllocBlock(kMiB, 2);
  ASSERT_EQ(a2->addr(), a1_base + kMiB);
  Block* b = AllocBlock(2 * kMiB, 3);
  Block* c = AllocBlock(2 * kMiB, 2);
  ASSERT_EQ(pool_->reserved(), 6 * kMiB);
  const uintptr_t c_base = c->addr();
  // Host order: a1 (too small for 2 MiB), C, B.
  FreeAsync(a1, 1, 2);
  FreeAsync(c, 2, 5);
  FreeAsync(b, 3, 4);
  ScriptedOracle o(0);
  MemPool::Allocation x = AllocWith(2 * kMiB, o);
  EXPECT_EQ(x.block->addr(), c_base);
  EXPECT_EQ(o.waits, (std::vector<ScriptedOracle::Wait>{{2, 5}}));
  // 1 MiB: a1 is first in host order and fits now.
  ScriptedOracle o2(0);
  MemPool::Allocation y = AllocWith(kMiB, o2);
  EXPECT_EQ(y.block->addr(), a1_base);
  EXPECT_EQ(o2.waits, (std::vector<ScriptedOracle::Wait>{{1, 2}}));
}

TEST_F(InternalDependencyTest, SwitchedOffMeansOutOfMemory) {
  FreeAsync(blk_[1], 1, 1);
  pool_->set_reuse_allow_internal_dependencies(false);
  ExpectOutOfMemory(256, 0);
  pool_->set_reuse_allow_internal_dependencies(true);
  ScriptedOracle o(0);
  EXPECT_EQ(AllocWith(256, o).rule, ReuseRule::kInternalDependency);
  EXPECT_EQ(o.waits.size(), 1u);
}

TEST_F(InternalDependencyTest, NoPendingFreeMeansOutOfMemory) {
  ExpectOutOfMemory(256, 0);
  // A stream's own frees are rule 1, never a wait on itself.
  FreeAsync(blk_[1], 1, 1);
  MemPool::Allocation a = Alloc(256, 1);
  EXPECT_EQ(a.rule, ReuseRule::kSameStream);
}

}  // namespace
}  // namespace streampool::internal
