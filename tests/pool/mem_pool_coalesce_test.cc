// MemPool on its own (tests/pool/mem_pool_fixture.h): which free blocks merge
// (READY with READY, pending blocks of one stream), and promotion of pending
// frees by each stream's completed position.
#include <algorithm>
#include <random>

#include "tests/pool/mem_pool_fixture.h"

namespace streampool::internal {
namespace {

// ------------------------------------------------------------ coalescing

// One 2 MiB chunk cut into four 512 KiB LIVE blocks A B C D, and a pool that
// cannot grow: every allocation must come from those bytes.
class CoalesceTest : public MemPoolTest {
 protected:
  void SetUp() override {
    Make(/*max_size=*/2 * kMiB);
    pool_->set_reuse_allow_internal_dependencies(false);
    for (Block*& b : blk_) b = AllocBlock(512 * kKiB, 0);
    base_ = blk_[0]->addr();
    ASSERT_EQ(blk_[3]->addr(), base_ + 1536 * kKiB);
    ASSERT_EQ(Largest(), 0u);
  }
  Block* blk_[4] = {};
  uintptr_t base_ = 0;
};

TEST_F(CoalesceTest, ReadyMergesWithReadyNeighbours) {
  FreeNow(blk_[0]);
  FreeNow(blk_[2]);
  EXPECT_EQ(Largest(), 512 * kKiB);
  // B joins A on its left and C on its right.
  FreeNow(blk_[1]);
  EXPECT_EQ(Largest(), 1536 * kKiB);
  MemPool::Allocation x = Alloc(1536 * kKiB, 3);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
}

TEST_F(CoalesceTest, PendingOfOneStreamMergeWithTheLatestFreePoint) {
  FreeAsync(blk_[1], 0, 10);
  FreeAsync(blk_[0], 0, 12);
  EXPECT_EQ(Largest(), kMiB);
  // The merged block is PENDING(0, 12): proof of 11 is not enough for
  // another stream, by event order or by observed completion...
  ScriptedOracle at11(1);
  at11.ordered_after[0] = 11;
  at11.observed_complete[0] = 11;
  ExpectOutOfMemory(256, at11);
  // ...nor does completion of 11 promote it.
  Promote(Done({{0, 11}}));
  ExpectOutOfMemory(256, 1);
  // An event that orders stream 1 after 12 makes the whole MiB usable.
  ScriptedOracle at12(1);
  at12.ordered_after[0] = 12;
  MemPool::Allocation x = AllocWith(kMiB, at12);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kEventDependency);
}

TEST_F(CoalesceTest, PendingOfOneStreamIsPromotedWhole) {
  FreeAsync(blk_[0], 0, 10);
  FreeAsync(blk_[1], 0, 12);
  Promote(Done({{0, 12}}));
  MemPool::Allocation x = Alloc(kMiB, 1);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
}

// PENDING(S) never absorbs a READY neighbour: the READY bytes stay reusable
// by every stream at once (absorbed, they would be hidden from other streams
// until S's free is proven), and in an expandable pool a READY block may span
// unmapped granules, which a PENDING block never does. The two merge once the
// free becomes READY.
TEST_F(CoalesceTest, PendingDoesNotAbsorbAReadyNeighbour) {
  FreeNow(blk_[0]);
  FreeAsync(blk_[1], 0, 5);
  EXPECT_EQ(Largest(), 512 * kKiB);
  // A and B are two blocks: 1 MiB is not there, not even for stream 0.
  ExpectOutOfMemory(kMiB, 0);
  ExpectOutOfMemory(kMiB, 1);
  // Another stream takes A at once, with no proof about stream 0's free.
  MemPool::Allocation x = Alloc(512 * kKiB, 1);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
  // B is still PENDING(0, 5): stream 0's own.
  MemPool::Allocation y = Alloc(512 * kKiB, 0);
  EXPECT_EQ(y.block->addr(), base_ + 512 * kKiB);
  EXPECT_EQ(y.rule, ReuseRule::kSameStream);
}

TEST_F(CoalesceTest, PendingMergesWithItsReadyNeighboursOncePromoted) {
  FreeNow(blk_[0]);
  FreeNow(blk_[2]);
  FreeAsync(blk_[1], 0, 5);
  EXPECT_EQ(Largest(), 512 * kKiB);
  ExpectOutOfMemory(kMiB, 0);
  Promote(Done({{0, 5}}));
  EXPECT_EQ(Largest(), 1536 * kKiB);
  MemPool::Allocation x = Alloc(1536 * kKiB, 1);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
}

// Observation (rule 3) promotes the free, which then merges with its READY
// neighbour; the merged block counts as same-stream for the stream whose
// free it holds, and as opportunistic for any other.
TEST_F(CoalesceTest, PendingMergesWithItsReadyNeighbourWhenObservedComplete) {
  FreeNow(blk_[0]);
  FreeAsync(blk_[1], 0, 5);
  ScriptedOracle seen(1);
  seen.observed_complete[0] = 5;
  MemPool::Allocation x = AllocWith(kMiB, seen);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kOpportunistic);
  FreeNow(x.block);

  FreeAsync(blk_[2], 0, 6);
  FreeAsync(blk_[3], 1, 1);  // another stream's free beside it: no merge
  ScriptedOracle own(0);
  own.observed_complete[0] = 6;
  MemPool::Allocation y = AllocWith(1536 * kKiB, own);
  EXPECT_EQ(y.block->addr(), base_);
  EXPECT_EQ(y.rule, ReuseRule::kSameStream);
}

// A READY block can sit between two PENDING blocks of S (it became READY by
// FreeNow or a promotion). It keeps them apart until a promotion merges all
// three; meanwhile any stream may take it.
TEST_F(CoalesceTest, AReadyBlockBetweenPendingBlocksOfOneStreamKeepsThemApart) {
  FreeAsync(blk_[0], 0, 1);
  FreeNow(blk_[1]);  // READY, between PENDING(0, 1) and LIVE C
  FreeAsync(blk_[2], 0, 2);
  EXPECT_EQ(Largest(), 512 * kKiB);
  ExpectOutOfMemory(1536 * kKiB, 0);
  Promote(Done({{0, 2}}));
  EXPECT_EQ(Largest(), 1536 * kKiB);
  MemPool::Allocation x = Alloc(1536 * kKiB, 1);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
}

TEST_F(CoalesceTest, AReadyBlockBetweenPendingBlocksOfOneStreamKeepsThemApartOnTheRight) {
  FreeAsync(blk_[3], 0, 1);
  FreeNow(blk_[2]);  // READY, between LIVE B and PENDING(0, 1)
  FreeAsync(blk_[1], 0, 2);
  EXPECT_EQ(Largest(), 512 * kKiB);
  ExpectOutOfMemory(1536 * kKiB, 0);
  // The READY block in the middle is anyone's.
  MemPool::Allocation x = Alloc(512 * kKiB, 2);
  EXPECT_EQ(x.block->addr(), base_ + kMiB);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
  FreeNow(x.block);
  Promote(Done({{0, 2}}));
  MemPool::Allocation y = Alloc(1536 * kKiB, 2);
  EXPECT_EQ(y.block->addr(), base_ + 512 * kKiB);
  EXPECT_EQ(y.rule, ReuseRule::kAfterSync);
}

TEST_F(CoalesceTest, PendingOfDifferentStreamsNeverMerge) {
  FreeAsync(blk_[0], 0, 5);
  FreeAsync(blk_[1], 1, 5);
  EXPECT_EQ(Largest(), 512 * kKiB);
  // Stream 2 is ordered after both frees, yet 1 MiB is two blocks.
  ScriptedOracle both(2);
  both.ordered_after = {{0, 5}, {1, 5}};
  ExpectOutOfMemory(kMiB, both);
  // Two eligible 512 KiB blocks on different streams: the lower address.
  MemPool::Allocation x = AllocWith(512 * kKiB, both);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kEventDependency);
}

TEST_F(CoalesceTest, PendingOfDifferentStreamsMergeOnceBothAreReady) {
  FreeAsync(blk_[0], 0, 5);
  FreeAsync(blk_[1], 1, 5);
  Promote(Done({{0, 5}}));
  EXPECT_EQ(Largest(), 512 * kKiB);
  Promote(Done({{0, 5}, {1, 5}}));
  EXPECT_EQ(Largest(), kMiB);
}

// A single stream that allocates and frees without ever synchronizing must
// reuse its own frees: reserved stays at the first chunk.
TEST_F(MemPoolTest, SingleStreamWorkloadNeverGrows) {
  std::mt19937_64 rng(7);
  Position pos = 0;
  Alloc(1, 0);  // maps the one 2 MiB chunk
  ASSERT_EQ(pool_->reserved(), 2 * kMiB);
  auto size = [&](uint64_t max) { return std::uniform_int_distribution<uint64_t>(1, max)(rng); };

  // Rounds: random sizes totalling < 2 MiB - 256, freed in random order.
  for (int round = 0; round < 200; ++round) {
    std::vector<Block*> live;
    uint64_t total = 256;
    while (true) {
      const uint64_t n = size(round % 2 == 0 ? 64 * kKiB : 512 * kKiB);
      if (total + *pool_->RuleSize(n) > 2 * kMiB) break;
      total += *pool_->RuleSize(n);
      live.push_back(AllocBlock(n, 0));
    }
    std::shuffle(live.begin(), live.end(), rng);
    for (Block* b : live) FreeAsync(b, 0, ++pos);
  }
  // A sliding window of at most 4 live blocks of <= 128 KiB: at most 512 KiB
  // live leaves >= 1.5 MiB free in <= 5 holes, so some hole always fits.
  std::vector<Block*> window;
  for (int i = 0; i < 20000; ++i) {
    window.push_back(AllocBlock(size(128 * kKiB), 0));
    if (window.size() > 3 || size(2) == 1) {
      const size_t k = size(window.size()) - 1;
      FreeAsync(window[k], 0, ++pos);
      window.erase(window.begin() + k);
    }
  }
  const PoolStats s = pool_->Stats();
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.reserved_high, 2 * kMiB);
  EXPECT_EQ(s.upstream_maps, 1u);
  EXPECT_EQ(s.reuse_event_dependency + s.reuse_opportunistic + s.reuse_internal_dependency +
                s.reuse_after_sync,
            0u);
  EXPECT_GT(s.reuse_same_stream, 20000u);
}

// -------------------------------------------------------------- promote

// One whole 2 MiB chunk per block: a block is READY iff Release(0) can take
// its chunk back, which Owns() then shows.
TEST_F(MemPoolTest, PromoteHonoursEachStreamsDonePosition) {
  std::vector<uintptr_t> c;
  std::vector<Block*> b;
  for (int i = 0; i < 6; ++i) {
    b.push_back(AllocBlock(2 * kMiB, 0));
    c.push_back(b.back()->addr());
  }
  FreeAsync(b[0], 0, 3);
  FreeAsync(b[1], 0, 6);
  FreeAsync(b[2], 1, 2);
  FreeAsync(b[3], 1, 9);
  FreeAsync(b[4], 2, 4);
  // b[5] stays LIVE.

  // Stream 0 done to 5, stream 1 unknown (0), stream 2 done to 4.
  Promote(Done({{0, 5}, {2, 4}}));
  Release(0);
  EXPECT_EQ(pool_->reserved(), 8 * kMiB);
  EXPECT_FALSE(pool_->Owns(c[0]));
  EXPECT_TRUE(pool_->Owns(c[1]));
  EXPECT_TRUE(pool_->Owns(c[2]));
  EXPECT_TRUE(pool_->Owns(c[3]));
  EXPECT_FALSE(pool_->Owns(c[4]));
  EXPECT_TRUE(pool_->Owns(c[5]));

  // A done vector that says less than before changes nothing.
  Promote(Done({{0, 1}}));
  Release(0);
  EXPECT_EQ(pool_->reserved(), 8 * kMiB);

  // Stream 1 done to 8: only its free at 2.
  Promote(Done({{1, 8}}));
  Release(0);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  EXPECT_FALSE(pool_->Owns(c[2]));
  EXPECT_TRUE(pool_->Owns(c[3]));

  Promote(Done({{0, 6}, {1, 9}}));
  Release(0);
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  EXPECT_TRUE(pool_->Owns(c[5]));
  EXPECT_EQ(pool_->Stats().upstream_unmaps, 5u);
}

}  // namespace
}  // namespace streampool::internal
