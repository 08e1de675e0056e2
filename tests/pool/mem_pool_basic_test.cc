// MemPool on its own (tests/pool/mem_pool_fixture.h): size rules, chunked
// growth within maxSize and the device budget, splitting, exact best fit, and
// upstream failures that change nothing.
#include <optional>

#include "tests/pool/mem_pool_fixture.h"

namespace streampool::internal {
namespace {

// ------------------------------------------------------------ size rules

TEST_F(MemPoolTest, RuleSizeRoundsUpTo256) {
  EXPECT_EQ(pool_->RuleSize(1), 256u);
  EXPECT_EQ(pool_->RuleSize(100), 256u);
  EXPECT_EQ(pool_->RuleSize(256), 256u);
  EXPECT_EQ(pool_->RuleSize(257), 512u);
  // The largest representable multiple of 256 rounds to itself; one more
  // byte cannot be represented and must not wrap to a small size.
  EXPECT_EQ(pool_->RuleSize(UINT64_MAX - 255), UINT64_MAX - 255);
  EXPECT_EQ(pool_->RuleSize(UINT64_MAX - 256), UINT64_MAX - 255);
  EXPECT_EQ(pool_->RuleSize(UINT64_MAX - 254), std::nullopt);
  EXPECT_EQ(pool_->RuleSize(UINT64_MAX), std::nullopt);

  // A block occupies its rule size; the caller's size is kept for
  // spPointerGetAttributes; used counts rule sizes.
  Block* b = AllocBlock(100, 0);
  EXPECT_EQ(b->size(), 256u);
  EXPECT_EQ(b->requested, 100u);
  EXPECT_EQ(b->addr() % kGranule, 0u);
  EXPECT_EQ(pool_->used(), 256u);
  Block* c = AllocBlock(257, 0);
  EXPECT_EQ(c->size(), 512u);
  EXPECT_EQ(c->addr(), b->addr() + 256);  // carved right after b
  EXPECT_EQ(pool_->used(), 768u);
  EXPECT_EQ(pool_->Stats().used_high, 768u);
}

TEST_F(MemPoolTest, RequestsBeyondMaxSizeFailWithoutWrapping) {
  Make(/*max_size=*/8 * kMiB);
  Block* b = AllocBlock(kMiB, 0);
  ASSERT_NE(b, nullptr);
  ExpectOutOfMemory(8 * kMiB + 1, 0);
  ExpectOutOfMemory(UINT64_MAX, 0);
  // Rounds to itself (no wrap), then cannot be grown: ALIGN_UP to 2 MiB
  // overflows.
  ExpectOutOfMemory(UINT64_MAX - 255, 0);
  Make(/*max_size=*/UINT64_MAX, /*capacity=*/UINT64_MAX);
  ExpectOutOfMemory(UINT64_MAX - 255, 0);
  ExpectOutOfMemory(UINT64_MAX - 2 * kMiB, 0);
}

// --------------------------------------------------------------- growth

TEST_F(MemPoolTest, GrowthMapsExactlyTheRuleSizeAlignedTo2MiB) {
  // 3 MiB + 1 -> rule size 3 MiB + 256 -> one 4 MiB chunk, not more.
  Block* a = AllocBlock(3 * kMiB + 1, 0);
  EXPECT_EQ(a->size(), 3 * kMiB + 256);
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
  EXPECT_EQ(budget_->used(), 4 * kMiB);
  EXPECT_EQ(upstream_->live_bytes, 4 * kMiB);
  PoolStats s = pool_->Stats();
  EXPECT_EQ(s.upstream_maps, 1u);
  EXPECT_EQ(s.upstream_bytes_mapped, 4 * kMiB);
  EXPECT_EQ(s.fresh_allocs, 1u);
  // The rest of the chunk is one READY block.
  EXPECT_EQ(s.largest_free_block, kMiB - 256);

  // 1 MiB does not fit the 1 MiB - 256 remainder: a 2 MiB chunk.
  Alloc(kMiB, 0);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  // 1 MiB - 256 fits the remainder exactly: no growth.
  Block* c = AllocBlock(kMiB - 256, 0);
  EXPECT_EQ(c->addr(), a->addr() + 3 * kMiB + 256);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  // Exactly 2 MiB: a 2 MiB chunk; 1 byte when nothing is free: 2 MiB too.
  Alloc(2 * kMiB, 0);
  EXPECT_EQ(pool_->reserved(), 8 * kMiB);
  Alloc(kMiB, 0);  // the 1 MiB remainder of the second chunk
  EXPECT_EQ(pool_->reserved(), 8 * kMiB);
  Alloc(1, 0);
  EXPECT_EQ(pool_->reserved(), 10 * kMiB);
  EXPECT_EQ(pool_->Stats().upstream_maps, 4u);
  EXPECT_EQ(pool_->Stats().reserved_high, 10 * kMiB);
}

TEST_F(MemPoolTest, DeviceBudgetIsSharedByPoolsOnIt) {
  Make(/*max_size=*/kGiB, /*capacity=*/4 * kMiB);
  MemPool other(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule}, kGiB, upstream_,
                budget_.get());
  Block* mine = AllocBlock(2 * kMiB, 0);
  ScriptedOracle o(0);
  ASSERT_TRUE(other.Allocate(kMiB, o).ok());  // other maps 2 MiB
  EXPECT_EQ(budget_->used(), 4 * kMiB);
  // The device is full, although this pool is far below its max_size.
  ExpectOutOfMemory(1, 0);
  // Once this pool gives a chunk back, it can grow again.
  FreeNow(mine);
  Release(0);
  EXPECT_EQ(budget_->used(), 2 * kMiB);
  Alloc(2 * kMiB, 0);
  EXPECT_EQ(budget_->used(), 4 * kMiB);
}

TEST_F(MemPoolTest, ReservedNeverExceedsMaxSize) {
  Make(/*max_size=*/5 * kMiB);
  Alloc(2 * kMiB, 0);
  Alloc(2 * kMiB, 0);
  // A third 2 MiB chunk would make 6 MiB > 5 MiB.
  ExpectOutOfMemory(1, 0);
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
}

// ------------------------------------------------------------ splitting

TEST_F(MemPoolTest, SplitLeavesAReadyRemainderForAnyStream) {
  Block* a = AllocBlock(256, 0);
  EXPECT_EQ(Largest(), 2 * kMiB - 256);
  // The remainder is READY and never handed out: fresh, for any stream.
  MemPool::Allocation b = Alloc(2 * kMiB - 256, 7);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ(b.block->addr(), a->addr() + 256);
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  EXPECT_EQ(pool_->Stats().fresh_allocs, 2u);
}

TEST_F(MemPoolTest, PartiallyReusedPendingBlockKeepsItsFreePoint) {
  Make(/*max_size=*/2 * kMiB);
  Block* a = AllocBlock(kMiB, 0);
  Block* b = AllocBlock(kMiB, 0);
  const uintptr_t base = a->addr();
  FreeAsync(a, 0, 5);
  // Stream 0 reuses the front quarter of its own free; the rest stays
  // PENDING(0, 5).
  MemPool::Allocation c = Alloc(256 * kKiB, 0);
  EXPECT_EQ(c.rule, ReuseRule::kSameStream);
  EXPECT_EQ(c.block->addr(), base);
  EXPECT_EQ(Largest(), 768 * kKiB);

  // Still PENDING on stream 0: another stream cannot have it without proof
  // (and the pool is full, rule 5 is off).
  pool_->set_reuse_allow_internal_dependencies(false);
  ScriptedOracle before(1);
  before.ordered_after[0] = 4;
  before.observed_complete[0] = 4;
  ExpectOutOfMemory(768 * kKiB, before);
  // The free point survived the split: completion up to 4 promotes nothing,
  // completion of 5 promotes the remainder.
  Promote(Done({{0, 4}}));
  ExpectOutOfMemory(768 * kKiB, 1);
  Promote(Done({{0, 5}}));
  MemPool::Allocation d = Alloc(768 * kKiB, 1);
  EXPECT_EQ(d.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(d.block->addr(), base + 256 * kKiB);
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  (void)b;
}

// -------------------------------------------------------------- best fit

TEST_F(MemPoolTest, BestFitIsExactWithLowestAddressTieBreak) {
  // Free blocks of 512, 256, 512, 768 bytes separated by LIVE 256-byte
  // blocks, then the READY tail, all in the first 2 MiB chunk:
  //   a@0 s@512 b@768 s@1024 c@1280 s@1792 d@2048 s@2816 tail@3072
  Block* a = AllocBlock(512, 0);
  const uintptr_t base = a->addr();
  AllocBlock(256, 0);
  Block* b = AllocBlock(256, 0);
  AllocBlock(256, 0);
  Block* c = AllocBlock(512, 0);
  AllocBlock(256, 0);
  Block* d = AllocBlock(768, 0);
  AllocBlock(256, 0);
  ASSERT_EQ(d->addr(), base + 2048);
  FreeNow(c);
  FreeNow(a);
  FreeNow(d);
  FreeNow(b);

  // 257 -> 512: two 512-byte blocks fit exactly; the lower address wins.
  EXPECT_EQ(AllocBlock(257, 1)->addr(), base);
  EXPECT_EQ(AllocBlock(512, 1)->addr(), base + 1280);
  // 1 -> 256: the exact 256 block, not a split of anything larger.
  EXPECT_EQ(AllocBlock(1, 1)->addr(), base + 768);
  // 513 -> 768: d, although the tail is far larger.
  EXPECT_EQ(AllocBlock(513, 1)->addr(), base + 2048);
  // Only the tail is left; its bytes were never handed out: fresh.
  MemPool::Allocation t = Alloc(256, 1);
  EXPECT_EQ(t.block->addr(), base + 3072);
  EXPECT_EQ(t.rule, ReuseRule::kFresh);
  EXPECT_EQ(pool_->Stats().reuse_after_sync, 4u);
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
}

TEST_F(MemPoolTest, OwnPendingAndReadyBlocksCompeteByBestFit) {
  //   a@0 (512) s@512 b@768 (256) s@1024 c@1280 (512) s@1792 tail@2048
  Block* a = AllocBlock(512, 0);
  const uintptr_t base = a->addr();
  AllocBlock(256, 0);
  Block* b = AllocBlock(256, 0);
  AllocBlock(256, 0);
  Block* c = AllocBlock(512, 0);
  AllocBlock(256, 0);
  FreeAsync(c, 0, 10);
  FreeNow(a);
  FreeAsync(b, 0, 11);

  // Rule 1 is one best fit over READY blocks and stream 0's own frees:
  // the exact 256 pending block beats the larger READY ones.
  MemPool::Allocation x = Alloc(256, 0);
  EXPECT_EQ(x.block->addr(), base + 768);
  EXPECT_EQ(x.rule, ReuseRule::kSameStream);
  // Two 512 blocks, READY a and PENDING(0) c: the lower address wins.
  MemPool::Allocation y = Alloc(512, 0);
  EXPECT_EQ(y.block->addr(), base);
  EXPECT_EQ(y.rule, ReuseRule::kAfterSync);
  MemPool::Allocation z = Alloc(512, 0);
  EXPECT_EQ(z.block->addr(), base + 1280);
  EXPECT_EQ(z.rule, ReuseRule::kSameStream);
}

// -------------------------------------------------------- upstream errors

TEST_F(MemPoolTest, UpstreamFailureChangesNothing) {
  // Some state worth preserving: a LIVE block, a READY remainder, a small
  // PENDING free of another stream (too small for rule 5 to serve 3 MiB).
  Block* live = AllocBlock(kMiB, 0);
  Block* small = AllocBlock(256, 1);
  const uintptr_t small_base = small->addr();
  FreeAsync(small, 1, 1);
  const uint64_t maps = upstream_->map_calls;

  upstream_->fail_maps = 1;
  PoolStats expected = pool_->Stats();
  ++expected.failed_alloc_count;
  ScriptedOracle o(0);
  absl::StatusOr<MemPool::Allocation> a = pool_->Allocate(3 * kMiB, o);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(upstream_->map_calls, maps + 1);  // the upstream was asked, and said no
  EXPECT_EQ(StatsString(pool_->Stats()), StatsString(expected));
  EXPECT_TRUE(pool_->CheckInvariants());
  EXPECT_TRUE(o.waits.empty());
  // No chunk leaked, no budget leaked.
  EXPECT_EQ(budget_->used(), 2 * kMiB);
  EXPECT_EQ(upstream_->live_mappings, 1u);
  EXPECT_EQ(upstream_->live_bytes, 2 * kMiB);

  // The pool is still usable, with its state intact.
  MemPool::Allocation b = Alloc(3 * kMiB + 1, 0);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  EXPECT_EQ(pool_->LiveBlockContaining(live->addr()), live);
  // Stream 1's free is intact: still PENDING(1, 1), and still 256 bytes (a
  // pending block does not absorb its READY neighbour), so stream 1 reuses it
  // in place rather than either READY remainder.
  MemPool::Allocation c = Alloc(256, 1);
  EXPECT_EQ(c.rule, ReuseRule::kSameStream);
  EXPECT_EQ(c.block->addr(), small_base);
}

TEST_F(MemPoolTest, UpstreamFailureFallsBackToAnInternalDependency) {
  Block* other = AllocBlock(4 * kMiB, 1);
  const uintptr_t base = other->addr();
  FreeAsync(other, 1, 9);
  upstream_->fail_maps = 1;
  ScriptedOracle o(0);
  MemPool::Allocation a = AllocWith(3 * kMiB, o);
  EXPECT_EQ(a.rule, ReuseRule::kInternalDependency);
  EXPECT_EQ(a.block->addr(), base);
  EXPECT_EQ(o.waits, (std::vector<ScriptedOracle::Wait>{{1, 9}}));
  EXPECT_EQ(budget_->used(), 4 * kMiB);
  EXPECT_EQ(upstream_->live_mappings, 1u);
}

}  // namespace
}  // namespace streampool::internal
