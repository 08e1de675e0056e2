// MemPool on its own (tests/pool/mem_pool_fixture.h): the release rule for
// chunked pools, largest chunk first down to the bound, never touching live or
// pending memory.
#include "tests/pool/mem_pool_fixture.h"

namespace streampool::internal {
namespace {

// -------------------------------------------------------------- release

// Three wholly READY chunks of 2, 4 and 6 MiB.
class ReleaseTest : public MemPoolTest {
 protected:
  void SetUp() override {
    for (uint64_t mib : {2, 4, 6}) {
      Block* b = AllocBlock(mib * kMiB, 0);
      base_[mib] = b->addr();
      FreeNow(b);
    }
    ASSERT_EQ(pool_->reserved(), 12 * kMiB);
  }
  bool Kept(uint64_t mib) const { return pool_->Owns(base_[mib]); }
  uintptr_t base_[7] = {};
};

TEST_F(ReleaseTest, LargestFirstDownToTheBound) {
  // 6 goes (12 -> 6); then 4 would leave 2 < 5 and 2 would leave 4 < 5.
  // (Smallest first would have kept only the 6 MiB chunk.)
  Release(5 * kMiB);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  EXPECT_TRUE(Kept(2));
  EXPECT_TRUE(Kept(4));
  EXPECT_FALSE(Kept(6));
  EXPECT_EQ(budget_->used(), 6 * kMiB);
  EXPECT_EQ(upstream_->live_bytes, 6 * kMiB);
  EXPECT_EQ(pool_->Stats().upstream_unmaps, 1u);
}

TEST_F(ReleaseTest, SkipsAChunkThatWouldUndershootAndTriesSmallerOnes) {
  // 6 would leave 6 < 7: skipped; 4 leaves 8; 2 would leave 6 < 7: skipped.
  Release(7 * kMiB);
  EXPECT_EQ(pool_->reserved(), 8 * kMiB);
  EXPECT_TRUE(Kept(2));
  EXPECT_FALSE(Kept(4));
  EXPECT_TRUE(Kept(6));
}

TEST_F(ReleaseTest, ContinuesPastASkippedChunk) {
  // 6 leaves 6; 4 would leave 2 < 3: skipped; 2 leaves 4.
  Release(3 * kMiB);
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
  EXPECT_FALSE(Kept(2));
  EXPECT_TRUE(Kept(4));
  EXPECT_FALSE(Kept(6));
}

TEST_F(ReleaseTest, BoundAtOrAboveReservedReleasesNothing) {
  Release(12 * kMiB);
  Release(UINT64_MAX);
  EXPECT_EQ(pool_->reserved(), 12 * kMiB);
  EXPECT_EQ(pool_->Stats().upstream_unmaps, 0u);
  Release(0);
  EXPECT_EQ(pool_->reserved(), 0u);
  EXPECT_EQ(budget_->used(), 0u);
  EXPECT_EQ(upstream_->live_mappings, 0u);
  EXPECT_EQ(pool_->Stats().reserved_high, 12 * kMiB);
}

TEST_F(ReleaseTest, AtSyncTheBoundIsTheReleaseThreshold) {
  pool_->set_release_threshold(UINT64_MAX);  // never shrink
  pool_->ReleaseAtSync();
  EXPECT_EQ(pool_->reserved(), 12 * kMiB);
  pool_->set_release_threshold(7 * kMiB);
  pool_->ReleaseAtSync();
  EXPECT_EQ(pool_->reserved(), 8 * kMiB);
  pool_->set_release_threshold(0);
  pool_->ReleaseAtSync();
  EXPECT_EQ(pool_->reserved(), 0u);
}

TEST_F(MemPoolTest, ReleaseNeverTouchesLiveOrPendingMemory) {
  Block* live = AllocBlock(2 * kMiB, 0);
  Block* pending = AllocBlock(2 * kMiB, 0);
  const uintptr_t pending_base = pending->addr();
  FreeAsync(pending, 1, 3);
  Block* part = AllocBlock(4 * kMiB, 0);
  Block* small = AllocBlock(256, 0);  // carved from a fresh 2 MiB chunk
  FreeNow(part);                      // 4 MiB chunk wholly READY
  ASSERT_EQ(pool_->reserved(), 10 * kMiB);

  Release(0);
  // Only the wholly READY chunk goes: the LIVE one, the PENDING one and the
  // mostly READY one with a LIVE block stay.
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  EXPECT_TRUE(pool_->Owns(live->addr()));
  EXPECT_TRUE(pool_->Owns(pending_base));
  EXPECT_TRUE(pool_->Owns(small->addr()));
  EXPECT_EQ(pool_->LiveBlockContaining(live->addr() + 100), live);
  EXPECT_EQ(pool_->LiveBlockContaining(small->addr()), small);

  // Once proven complete, the pending chunk is READY and goes too.
  Promote(Done({{1, 3}}));
  Release(0);
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
  EXPECT_FALSE(pool_->Owns(pending_base));
  FreeNow(small);
  Release(0);
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  EXPECT_EQ(pool_->used(), 2 * kMiB);
}

}  // namespace
}  // namespace streampool::internal
