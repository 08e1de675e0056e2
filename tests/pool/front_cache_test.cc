// FrontCache: LIFO per size, bounded, and a pop spends the allowance its
// pushes earned (src/pool/front_cache.h).
#include "src/pool/front_cache.h"

#include <cstdint>
#include <deque>
#include <vector>

#include "gtest/gtest.h"
#include "src/pool/block.h"
#include "src/util/spin_lock.h"

namespace streampool::internal {
namespace {

class FrontCacheTest : public ::testing::Test {
 protected:
  Block* NewBlock(uint64_t size) {
    Block& b = blocks_.emplace_back();
    b.node.addr = next_;
    b.node.size = size;
    b.state = BlockState::kLive;
    next_ += size;
    return &b;
  }
  SpinLock lock_;
  FrontCache cache_{3, &lock_};
  std::deque<Block> blocks_;
  uintptr_t next_ = 0x100000;
};

TEST_F(FrontCacheTest, PopsTheMostRecentFreeOfExactlyTheSize) {
  SpinLockHolder hold(&lock_);
  Block* a = NewBlock(256);
  Block* b = NewBlock(256);
  Block* c = NewBlock(512);
  ASSERT_TRUE(cache_.Push(a, 10));
  ASSERT_TRUE(cache_.Push(c, 11));
  ASSERT_TRUE(cache_.Push(b, 12));
  EXPECT_EQ(cache_.bytes(), 1024u);
  EXPECT_EQ(cache_.Pop(1024), nullptr) << "no size but an exact one";
  EXPECT_EQ(cache_.Pop(256), b);
  EXPECT_EQ(cache_.Pop(256), a);
  EXPECT_EQ(cache_.Pop(256), nullptr);
  EXPECT_EQ(cache_.Pop(512), c);
  EXPECT_TRUE(cache_.empty());
  EXPECT_EQ(cache_.published_allocs(), 3u);
  EXPECT_EQ(cache_.published_frees(), 3u);
}

TEST_F(FrontCacheTest, APopNeedsTheAllowanceItsPushesEarned) {
  SpinLockHolder hold(&lock_);
  Block* a = NewBlock(4096);
  ASSERT_TRUE(cache_.Push(a, 1));
  EXPECT_EQ(cache_.allowance(), 4096u);
  cache_.set_allowance(4095);  // the pool revoked some of it
  EXPECT_EQ(cache_.Pop(4096), nullptr);
  EXPECT_EQ(cache_.bytes(), 4096u) << "a refused pop takes nothing";
  EXPECT_EQ(cache_.Take(4096), a) << "the pool's slow path takes it regardless";
  EXPECT_EQ(cache_.allowance(), 0u);
}

TEST_F(FrontCacheTest, BoundedBySizesDepthAndBytes) {
  SpinLockHolder hold(&lock_);
  // kSizes distinct sizes fit; one more does not.
  for (int i = 0; i < FrontCache::kSizes; ++i) ASSERT_TRUE(cache_.Push(NewBlock(256 * (i + 1)), i));
  EXPECT_FALSE(cache_.Push(NewBlock(256 * 100), 99));
  // A size's bin is kDepth deep.
  for (int i = 1; i < FrontCache::kDepth; ++i) ASSERT_TRUE(cache_.Push(NewBlock(256), 100 + i));
  EXPECT_FALSE(cache_.Push(NewBlock(256), 200));
  // Emptied bins take other sizes again.
  std::vector<FrontCache::Entry> drained;
  cache_.Drain([&drained](const FrontCache::Entry& e) { drained.push_back(e); });
  EXPECT_EQ(drained.size(), size_t(FrontCache::kSizes + FrontCache::kDepth - 1));
  EXPECT_TRUE(cache_.empty());
  EXPECT_TRUE(cache_.Push(NewBlock(256 * 100), 300));
  // Blocks above kMaxBlock always go central.
  EXPECT_TRUE(cache_.Push(NewBlock(FrontCache::kMaxBlock), 301));
  EXPECT_FALSE(cache_.Push(NewBlock(FrontCache::kMaxBlock + 256), 302));
}

// A size emptied by pops keeps its bin: pushes of it land there again, and
// never in a second bin beside one that refilled (each size in one bin, so a
// pop finds every block of its size).
TEST_F(FrontCacheTest, AnEmptiedSizeKeepsOneBin) {
  SpinLockHolder hold(&lock_);
  std::vector<Block*> small;
  for (int i = 0; i < 3; ++i) small.push_back(NewBlock(256));
  ASSERT_TRUE(cache_.Push(small[0], 1));
  EXPECT_EQ(cache_.Pop(256), small[0]);
  // Every other bin taken by another size, the 256 bin empty.
  for (int i = 1; i < FrontCache::kSizes; ++i) {
    ASSERT_TRUE(cache_.Push(NewBlock(256 * (i + 1)), 2)) << i;
  }
  ASSERT_TRUE(cache_.Push(small[1], 3));
  ASSERT_TRUE(cache_.Push(small[2], 4));
  EXPECT_EQ(cache_.Pop(256), small[2]);
  EXPECT_EQ(cache_.Pop(256), small[1]);
  EXPECT_EQ(cache_.Pop(256), nullptr);
  // A ninth size finds no empty bin but the 256 one, which it takes over.
  Block* big = NewBlock(256 * 9);
  ASSERT_TRUE(cache_.Push(big, 5));
  EXPECT_EQ(cache_.Pop(256 * 9), big);
  ASSERT_TRUE(cache_.Push(small[0], 6));
  EXPECT_EQ(cache_.Pop(256), small[0]);
}

}  // namespace
}  // namespace streampool::internal
