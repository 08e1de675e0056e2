// AllocationIndex on its own: blocks made by hand stand in for a pool's, so
// what it answers for an address is its own doing.
#include "src/runtime/allocation_index.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "src/pool/block.h"
#include "tests/pool/block_testing.h"

namespace streampool::internal {
namespace {

TEST(AllocationIndexTest, AHeldEntryIsALiveBlockAndACachedOneIsNot) {
  AllocationIndex index;
  const uintptr_t base = uintptr_t{0x7f0000000000};
  Block b = MakeBlock(base, 256);
  ASSERT_TRUE(index.SetEntry(base, &b));
  EXPECT_EQ(index.EntryAt(base), &b);
  EXPECT_EQ(index.PoolBlockAt(base), nullptr) << "no holder: in a front cache";
  SetHolder(b, 3);
  EXPECT_EQ(index.PoolBlockAt(base), &b);
  EXPECT_EQ(index.PoolBlockAt(base + 64), nullptr) << "only its base names it";
}

TEST(AllocationIndexTest, ABaseTheMapCannotHoldIsFoundByItsRecordUntilTaken) {
  AllocationIndex index;
  // Above the page map's 2^47 bytes of address.
  const uintptr_t base = uintptr_t{1} << 50;
  Block b = MakeBlock(base, 4096);
  EXPECT_FALSE(index.SetEntry(base, &b));
  AllocationIndex::Rec r;
  r.block = &b;
  r.requested = 4000;
  r.pool_handle = 7;
  index.Add(base, r);
  ASSERT_NE(index.Find(base), nullptr);
  EXPECT_EQ(index.Find(base)->pool_handle, 7u);
  EXPECT_EQ(index.PoolBlockAt(base), &b) << "the record answers, holder or not";
  std::optional<AllocationIndex::Rec> taken = index.Take(base);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->requested, 4000u);
  EXPECT_EQ(index.Find(base), nullptr);
  EXPECT_EQ(index.PoolBlockAt(base), nullptr);
  EXPECT_FALSE(index.Take(base).has_value()) << "a second take finds nothing";
}

TEST(AllocationIndexTest, UsesAreDeclaredOnceTakenOnceAndDroppedWithTheirSlot) {
  AllocationIndex index;
  const uintptr_t a = 0x1000, b = 0x2000;
  index.DeclareUse(a, 1);
  index.DeclareUse(a, 1);
  index.DeclareUse(a, 2);
  index.DeclareUse(b, 1);
  EXPECT_EQ(index.TakeUses(a), (AllocationIndex::Uses{1, 2}));
  EXPECT_TRUE(index.TakeUses(a).empty()) << "taken: forgotten";

  index.DeclareUse(a, 2);
  index.DeclareUse(a, 1);
  index.DropUsesOf(1);
  EXPECT_EQ(index.TakeUses(a), (AllocationIndex::Uses{2}));
  EXPECT_TRUE(index.TakeUses(b).empty()) << "b's only user was slot 1";

  index.DeclareUse(b, 2);
  index.DropUses(b);
  EXPECT_TRUE(index.TakeUses(b).empty());
}

TEST(AllocationIndexTest, ClearForgetsRecordsAndUses) {
  AllocationIndex index;
  const uintptr_t base = uintptr_t{1} << 50;
  index.Add(base, AllocationIndex::Rec{});
  index.DeclareUse(base, 4);
  index.Clear();
  EXPECT_EQ(index.Find(base), nullptr);
  EXPECT_TRUE(index.TakeUses(base).empty());
}

TEST(AllocationIndexTest, DiscardedAddressSpaceCanBeIndexedAgain) {
  AllocationIndex index;
  const uintptr_t lo = uintptr_t{0x7d0000000000};
  Block below = MakeBlock(lo - 64, 64);
  ASSERT_TRUE(index.SetEntry(below.addr(), &below));
  index.Discard(lo, 4 << 20);
  EXPECT_EQ(index.EntryAt(below.addr()), &below) << "outside the range";
  Block inside = MakeBlock(lo + (1 << 20), 256);
  ASSERT_TRUE(index.SetEntry(inside.addr(), &inside));
  EXPECT_EQ(index.EntryAt(inside.addr()), &inside);
}

}  // namespace
}  // namespace streampool::internal
