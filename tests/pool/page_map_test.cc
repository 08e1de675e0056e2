// PageMap: a base address finds its block, nothing else does, and a clear
// takes out only the block it names, whatever its neighbours do meanwhile.
#include "src/pool/page_map.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/pool/block.h"
#include "tests/pool/block_testing.h"

namespace streampool::internal {
namespace {

// What a central free does: the entry out, if it is still b's.
Block* Take(PageMap& map, uintptr_t addr) {
  Block* b = map.Get(addr);
  if (b != nullptr) map.Clear(addr, b);
  return b;
}

TEST(PageMapTest, OnlyTheBaseOfAnEntryFindsItsBlock) {
  PageMap map;
  const uintptr_t base = uintptr_t{0x7f0000000000} + 0x40;
  Block b = MakeBlock(base, 4096);
  ASSERT_TRUE(map.Set(base, &b));
  EXPECT_EQ(map.Get(base), &b);
  // An entry covers 64 bytes: an address inside that unit is not the base.
  EXPECT_EQ(map.Get(base + 1), nullptr);
  EXPECT_EQ(map.Get(base + 63), nullptr);
  EXPECT_EQ(Take(map, base + 8), nullptr);
  EXPECT_EQ(map.Get(base), &b) << "a clear of an inner address takes nothing out";
  // Never set, in a leaf that exists and in one that does not.
  EXPECT_EQ(map.Get(base + 4096), nullptr);
  EXPECT_EQ(map.Get(uintptr_t{0x100000000000}), nullptr);
}

TEST(PageMapTest, AClearTakesTheEntryOutAndSetPutsItBack) {
  PageMap map;
  const uintptr_t base = uintptr_t{0x7e0000200000};
  Block b = MakeBlock(base, 256);
  Block other = MakeBlock(base, 256);
  ASSERT_TRUE(map.Set(base, &b));
  // A block back from a front cache kept its entry: setting it again is no
  // change.
  ASSERT_TRUE(map.Set(base, &b));
  map.Clear(base, &other);
  EXPECT_EQ(map.Get(base), &b) << "a clear naming another block takes nothing out";
  EXPECT_EQ(Take(map, base), &b);
  EXPECT_EQ(Take(map, base), nullptr) << "a double free finds nothing";
  EXPECT_EQ(map.Get(base), nullptr);
  ASSERT_TRUE(map.Set(base, &b));
  EXPECT_EQ(map.Get(base), &b);
}

// Blocks smaller than a page share its entry: each base still finds its own
// block, and claims take out only theirs.
TEST(PageMapTest, SmallBlocksSharingAPageKeepTheirOwnEntries) {
  PageMap map;
  const uintptr_t page = uintptr_t{0x7b0000000000};
  std::vector<Block> blocks;
  blocks.reserve(64);
  for (int i = 0; i < 64; ++i) blocks.push_back(MakeBlock(page + i * 64, 64));
  for (Block& b : blocks) ASSERT_TRUE(map.Set(b.addr(), &b));
  for (Block& b : blocks) EXPECT_EQ(map.Get(b.addr()), &b);
  EXPECT_EQ(Take(map, blocks[3].addr()), &blocks[3]);
  EXPECT_EQ(map.Get(blocks[3].addr()), nullptr);
  EXPECT_EQ(map.Get(blocks[4].addr()), &blocks[4]);
  EXPECT_EQ(Take(map, blocks[3].addr()), nullptr);
  ASSERT_TRUE(map.Set(blocks[3].addr(), &blocks[3]));
  EXPECT_EQ(map.Get(blocks[3].addr()), &blocks[3]);
  // A block at another offset of a page whose only entry was claimed.
  const uintptr_t other = page + 4096;
  Block a = MakeBlock(other, 256), c = MakeBlock(other + 512, 256);
  ASSERT_TRUE(map.Set(a.addr(), &a));
  EXPECT_EQ(Take(map, a.addr()), &a);
  ASSERT_TRUE(map.Set(c.addr(), &c));
  EXPECT_EQ(map.Get(c.addr()), &c);
  EXPECT_EQ(map.Get(a.addr()), nullptr);
}

TEST(PageMapTest, AddressesOutsideUserSpaceAreNotCovered) {
  PageMap map;
  Block b = MakeBlock(uintptr_t{1} << 47, 256);
  EXPECT_FALSE(PageMap::Covers(uintptr_t{1} << 47));
  EXPECT_FALSE(map.Set(uintptr_t{1} << 47, &b));
  EXPECT_EQ(map.Get(uintptr_t{1} << 47), nullptr);
  EXPECT_EQ(Take(map, uintptr_t{1} << 47), nullptr);
}

TEST(PageMapTest, DiscardKeepsEntriesOutsideTheRangeAndDropsOnlyWholePages) {
  PageMap map;
  const uintptr_t lo = uintptr_t{0x7d0000000000};
  // One block below the range, one above; the range between holds none.
  Block below = MakeBlock(lo - 64, 64);
  Block above = MakeBlock(lo + (4 << 20), 64);
  ASSERT_TRUE(map.Set(below.addr(), &below));
  ASSERT_TRUE(map.Set(above.addr(), &above));
  map.Discard(lo, lo + (4 << 20));
  EXPECT_EQ(map.Get(below.addr()), &below);
  EXPECT_EQ(map.Get(above.addr()), &above);
  // Entries inside a discarded range can be set again.
  Block inside = MakeBlock(lo + (1 << 20), 256);
  ASSERT_TRUE(map.Set(inside.addr(), &inside));
  EXPECT_EQ(map.Get(inside.addr()), &inside);
}

// Two threads set and clear neighbouring bases of one page: a clear racing
// with the page becoming a Sub (the other's set) must take out only its own
// entry, and each thread always finds its block after setting it.
TEST(PageMapTest, ClearsRacingWithANeighboursSetLoseNoEntry) {
  PageMap map;
  const uintptr_t page = uintptr_t{0x7c0000000000};
  constexpr int kRounds = 20000;
  Block x = MakeBlock(page, 64), y = MakeBlock(page + 64, 64);
  std::atomic<bool> wrong{false};
  auto churn = [&](Block& b) {
    for (int i = 0; i < kRounds; ++i) {
      if (!map.Set(b.addr(), &b) || map.Get(b.addr()) != &b) wrong = true;
      map.Clear(b.addr(), &b);
      if (map.Get(b.addr()) != nullptr) wrong = true;
    }
  };
  std::thread a([&] { churn(x); }), b([&] { churn(y); });
  a.join();
  b.join();
  EXPECT_FALSE(wrong.load());
}

// Only 64-byte aligned bases have entries, and a block whose own address
// would not fit an entry is refused (its caller keeps it elsewhere).
TEST(PageMapTest, UnalignedBasesAndUnfitBlocksAreRefused) {
  PageMap map;
  const uintptr_t base = uintptr_t{0x7a0000000000};
  Block b = MakeBlock(base + 32, 64);
  EXPECT_FALSE(map.Set(base + 32, &b));
  EXPECT_EQ(map.Get(base), nullptr);
  // Never dereferenced: the map only stores it.
  Block* tagged = reinterpret_cast<Block*>(uintptr_t{0x5a} << 56);
  EXPECT_FALSE(map.Set(base, tagged));
  EXPECT_EQ(map.Get(base), nullptr);
}

// A block another thread claims may be recycled at once: its pool rewrites
// its address for a new base in the same page. A thread setting a neighbour
// meanwhile must not read that address, and every base still finds exactly
// its own block. (TSan reported the read before entries carried the unit.)
TEST(PageMapTest, ARecycledNeighbourIsNeverRead) {
  PageMap map;
  const uintptr_t page = uintptr_t{0x790000000000};
  constexpr int kRounds = 20000;
  Block moving = MakeBlock(page, 64);
  std::atomic<bool> wrong{false};
  std::thread recycler([&] {
    for (int i = 0; i < kRounds; ++i) {
      const uintptr_t at = page + uint64_t(i % 32) * 64;
      moving.node.addr = at;  // as a pool recycling a claimed block would
      if (!map.Set(at, &moving) || Take(map, at) != &moving) wrong = true;
    }
  });
  std::vector<Block> still;
  still.reserve(32);
  for (int i = 0; i < 32; ++i) still.push_back(MakeBlock(page + 2048 + uint64_t(i) * 64, 64));
  for (int i = 0; i < kRounds; ++i) {
    Block& b = still[i % 32];
    if (!map.Set(b.addr(), &b) || map.Get(b.addr()) != &b || Take(map, b.addr()) != &b) {
      wrong = true;
    }
  }
  recycler.join();
  EXPECT_FALSE(wrong.load());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(map.Get(page + uint64_t(i) * 64), nullptr) << i;
}

}  // namespace
}  // namespace streampool::internal
