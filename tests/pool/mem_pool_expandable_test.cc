// MemPool on its own (tests/pool/mem_pool_fixture.h): expandable growth, a
// reservation mapped granule by granule; its release, giving reservations
// back, and map or reservation failures part way.
#include "tests/pool/mem_pool_fixture.h"

namespace streampool::internal {
namespace {

// ------------------------------------------------------ expandable growth

// Pools over the reservable fake: one reservation (max_size, or the size
// given) mapped in 2 MiB granules. The fake's own account of what is mapped
// is the reference: after every step, the pool's reserved bytes are exactly
// the granules the fake has mapped, and the pool broke no upstream contract.
class ExpandableTest : public MemPoolTest {
 protected:
  static constexpr uint64_t kG = Chunk::kGranule;

  void SetUp() override { MakeExpandable(); }
  void TearDown() override { DestroyPool(); }

  // Destroying the pool gives every granule and reservation back.
  void DestroyPool() {
    pool_.reset();
    if (vmm_ == nullptr) return;
    EXPECT_TRUE(vmm_->mapped.empty());
    EXPECT_TRUE(vmm_->reservations.empty());
    EXPECT_EQ(vmm_->live_bytes, 0u);
    EXPECT_EQ(budget_->used(), 0u);
    ExpectNoViolations();
  }

  void MakeExpandable(uint64_t max_size = kGiB, uint64_t capacity = kGiB,
                      uint64_t reservation_bytes = 0) {
    DestroyPool();
    budget_ = std::make_unique<DeviceBudget>(capacity);
    vmm_ = std::make_shared<ScriptedMemory>(/*reservable=*/true);
    pool_ = std::make_unique<MemPool>(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule},
                                      max_size, vmm_, budget_.get(), reservation_bytes);
    ASSERT_TRUE(pool_->expandable());
    ASSERT_EQ(pool_->growth(), PoolGrowth::kExpandable);
  }

  void ExpectNoViolations() {
    for (const std::string& v : vmm_->violations) ADD_FAILURE() << "upstream contract: " << v;
    vmm_->violations.clear();
  }
  // The pool and the fake agree on what is mapped, and the budget too.
  void ExpectAccountsAgree() {
    EXPECT_EQ(pool_->reserved(), vmm_->live_bytes);
    EXPECT_EQ(pool_->reserved(), vmm_->mapped.size() * kG);
    EXPECT_EQ(budget_->used(), pool_->reserved());
    EXPECT_TRUE(pool_->CheckInvariants());
    ExpectNoViolations();
  }

  // An allocation that must fail and change nothing but failed_alloc_count:
  // not the statistics, not the budget, not what the upstream has mapped or
  // reserved.
  void ExpectFailsCleanly(uint64_t size, StreamIndex t = 0) {
    PoolStats expected = pool_->Stats();
    ++expected.failed_alloc_count;
    const uint64_t budget_used = budget_->used();
    const std::set<uintptr_t> mapped = vmm_->mapped;
    const std::map<uintptr_t, uint64_t> reservations = vmm_->reservations;
    ScriptedOracle oracle(t);
    absl::StatusOr<MemPool::Allocation> a = pool_->Allocate(size, oracle);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << size;
    EXPECT_TRUE(oracle.waits.empty());
    EXPECT_EQ(StatsString(pool_->Stats()), StatsString(expected));
    EXPECT_EQ(budget_->used(), budget_used);
    EXPECT_TRUE(vmm_->mapped == mapped) << "granules mapped or unmapped by a failed allocation";
    EXPECT_TRUE(vmm_->reservations == reservations) << "reservation leaked";
    ExpectAccountsAgree();
  }

  std::string MapOf(uintptr_t base, uint64_t granules) const { return vmm_->MapOf(base, granules); }

  std::shared_ptr<ScriptedMemory> vmm_;
};

TEST_F(ExpandableTest, GrowthMapsOnlyTheShortfallAboveTheTopmostFreeBlock) {
  // 1 MiB: a reservation of max_size, granule 0 mapped.
  MemPool::Allocation a = Alloc(kMiB, 0);
  const uintptr_t base = a.block->addr();
  EXPECT_EQ(base % kG, 0u);
  EXPECT_EQ(a.rule, ReuseRule::kFresh);
  EXPECT_EQ(vmm_->reserve_calls, 1u);
  ASSERT_EQ(vmm_->reservations.size(), 1u);
  EXPECT_EQ(vmm_->reservations.begin()->second, kGiB);
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  EXPECT_EQ(MapOf(base, 4), "M...");
  // The mapped rest of granule 0 is free without growing.
  EXPECT_EQ(Largest(), kMiB);
  ExpectAccountsAgree();

  // 3 MiB goes right above it, [1 MiB, 4 MiB): only granule 1 is lacking.
  // (A chunked pool maps a 4 MiB chunk of its own here: 6 MiB reserved.)
  MemPool::Allocation b = Alloc(3 * kMiB, 0);
  EXPECT_EQ(b.block->addr(), base + kMiB);
  EXPECT_EQ(b.rule, ReuseRule::kFresh);
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
  EXPECT_EQ(MapOf(base, 4), "MM..");
  PoolStats s = pool_->Stats();
  EXPECT_EQ(s.upstream_maps, 2u);
  EXPECT_EQ(s.upstream_bytes_mapped, 4 * kMiB);
  EXPECT_EQ(s.reserved_high, 4 * kMiB);
  EXPECT_EQ(s.fresh_allocs, 2u);
  EXPECT_EQ(vmm_->reserve_calls, 1u) << "one reservation serves every growth";
  EXPECT_EQ(vmm_->map_at_calls, 2u);
  ExpectAccountsAgree();

  // The mapped region ends exactly at b: 256 bytes map a whole granule, and
  // what fits in the rest of it maps nothing.
  Block* c = AllocBlock(256, 1);
  EXPECT_EQ(c->addr(), base + 4 * kMiB);
  EXPECT_EQ(MapOf(base, 4), "MMM.");
  Block* d = AllocBlock(kMiB, 1);
  EXPECT_EQ(d->addr(), base + 4 * kMiB + 256);
  EXPECT_EQ(pool_->Stats().upstream_maps, 3u);
  ExpectAccountsAgree();

  MemPool chunked(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule}, kGiB, upstream_,
                  budget_.get());
  ASSERT_FALSE(chunked.expandable());
  ScriptedOracle o(0);
  ASSERT_TRUE(chunked.Allocate(kMiB, o).ok());
  ASSERT_TRUE(chunked.Allocate(3 * kMiB, o).ok());
  EXPECT_EQ(chunked.reserved(), 6 * kMiB);
}

TEST_F(ExpandableTest, ABlockSpansTwoGrowths) {
  Block* a = AllocBlock(kMiB, 0);
  const uintptr_t base = a->addr();
  Block* b = AllocBlock(3 * kMiB, 0);  // granule 0 from the first growth, 1 from the second
  ASSERT_EQ(pool_->Stats().upstream_maps, 2u);
  EXPECT_EQ(b->addr(), base + kMiB);
  EXPECT_EQ(b->end(), base + 4 * kMiB);
  EXPECT_EQ(pool_->LiveBlockContaining(base + kMiB + 100), b);
  EXPECT_EQ(pool_->LiveBlockContaining(base + 2 * kMiB), b);
  EXPECT_EQ(pool_->LiveBlockContaining(base + 4 * kMiB - 1), b);
  EXPECT_TRUE(pool_->Owns(base + 100 * kMiB)) << "the whole reservation is the pool's";
  EXPECT_EQ(pool_->LiveBlockContaining(base + 100 * kMiB), nullptr);
  // Freed, it is one block again, whichever growth mapped its bytes.
  FreeAsync(b, 0, 1);
  EXPECT_EQ(Largest(), 3 * kMiB);
  MemPool::Allocation again = Alloc(3 * kMiB, 0);
  EXPECT_EQ(again.block->addr(), base + kMiB);
  EXPECT_EQ(again.rule, ReuseRule::kSameStream);
  EXPECT_EQ(pool_->Stats().upstream_maps, 2u);
  ExpectAccountsAgree();
}

TEST_F(ExpandableTest, FreeBlocksCoalesceAcrossGrowths) {
  // Three growths, one granule each.
  Block* a = AllocBlock(2 * kMiB, 0);
  const uintptr_t base = a->addr();
  Block* b = AllocBlock(2 * kMiB, 0);
  Block* c = AllocBlock(2 * kMiB, 0);
  ASSERT_EQ(pool_->Stats().upstream_maps, 3u);
  ASSERT_EQ(c->addr(), base + 4 * kMiB);

  // READY blocks of two growths merge: 4 MiB without growing.
  FreeNow(a);
  FreeNow(b);
  EXPECT_EQ(Largest(), 4 * kMiB);
  MemPool::Allocation x = Alloc(4 * kMiB, 1);
  EXPECT_EQ(x.block->addr(), base);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
  // So do pending frees of one stream.
  FreeAsync(x.block, 2, 1);
  FreeAsync(c, 2, 2);
  EXPECT_EQ(Largest(), 6 * kMiB);
  MemPool::Allocation y = Alloc(6 * kMiB, 2);
  EXPECT_EQ(y.block->addr(), base);
  EXPECT_EQ(y.rule, ReuseRule::kSameStream);
  // And a READY block merges with the unmapped top of the reservation: 6 MiB
  // is served from its mapped low end without a map.
  FreeNow(y.block);
  EXPECT_EQ(Largest(), 6 * kMiB);
  MemPool::Allocation z = Alloc(6 * kMiB, 3);
  EXPECT_EQ(z.block->addr(), base);
  EXPECT_EQ(z.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(pool_->Stats().upstream_maps, 3u);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  ExpectAccountsAgree();

  // A chunked pool cannot: its three chunks stay apart, so 4 MiB grows.
  MemPool chunked(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule}, kGiB, upstream_,
                  budget_.get());
  ScriptedOracle o(0);
  Block* ca = chunked.Allocate(2 * kMiB, o)->block;
  Block* cb = chunked.Allocate(2 * kMiB, o)->block;
  chunked.FreeNow(ca);
  chunked.FreeNow(cb);
  EXPECT_EQ(chunked.Stats().largest_free_block, 2 * kMiB);
  ASSERT_TRUE(chunked.Allocate(4 * kMiB, o).ok());
  EXPECT_EQ(chunked.reserved(), 8 * kMiB);
}

// A 6 MiB block and a LIVE granule above it (so the reservation is never
// wholly free): releases take granules of the block from the top down and
// stop before the bound.
TEST_F(ExpandableTest, ReleaseUnmapsGranulesFromTheTopNeverBelowTheBound) {
  Block* a = AllocBlock(6 * kMiB, 0);
  const uintptr_t base = a->addr();
  Block* s = AllocBlock(256, 0);  // maps granule 3
  ASSERT_EQ(s->addr(), base + 6 * kMiB);
  FreeNow(a);
  ASSERT_EQ(pool_->reserved(), 8 * kMiB);
  ASSERT_EQ(MapOf(base, 5), "MMMM.");

  // Bound 3 MiB: two granules would leave 4 MiB, three would leave 2 < 3.
  Release(3 * kMiB);
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
  EXPECT_EQ(MapOf(base, 5), "M..M.");
  EXPECT_EQ(pool_->Stats().upstream_unmaps, 1u) << "one run, one UnmapAt";
  ASSERT_EQ(vmm_->unmapped_ranges.size(), 1u);
  EXPECT_EQ(vmm_->unmapped_ranges[0], std::make_pair(base + 2 * kMiB, 4 * kMiB));
  // The low end stays mapped and servable.
  EXPECT_EQ(Largest(), 2 * kMiB);
  ExpectAccountsAgree();

  Release(3 * kMiB);  // nothing more above the bound
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
  Release(2 * kMiB);  // exactly one more granule
  EXPECT_EQ(MapOf(base, 5), "...M.");
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  EXPECT_EQ(pool_->Stats().upstream_unmaps, 2u);
  // Granule 3 holds the LIVE block: never released.
  Release(0);
  EXPECT_EQ(MapOf(base, 5), "...M.");
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  EXPECT_EQ(vmm_->release_calls, 0u);
  EXPECT_EQ(pool_->Stats().reserved_high, 8 * kMiB);
  ExpectAccountsAgree();
}

// Two READY blocks of 6 and 4 MiB between LIVE ones: the larger is released
// first, each from its top, and the bound stops the second part-way.
TEST_F(ExpandableTest, ReleaseTakesTheLargestBlockFirst) {
  Block* a = AllocBlock(6 * kMiB, 0);  // granules 0-2
  const uintptr_t base = a->addr();
  AllocBlock(2 * kMiB, 0);             // granule 3, LIVE
  Block* b = AllocBlock(4 * kMiB, 0);  // granules 4-5
  AllocBlock(256, 0);                  // granule 6, LIVE
  FreeNow(b);
  FreeNow(a);
  ASSERT_EQ(pool_->reserved(), 14 * kMiB);

  Release(9 * kMiB);  // 14 -> 10: the top two granules of the 6 MiB block
  EXPECT_EQ(MapOf(base, 8), "M..MMMM.");
  Release(6 * kMiB);  // 10 -> 8 -> 6: what is left of a, then b's top
  EXPECT_EQ(MapOf(base, 8), "...MM.M.");
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  EXPECT_EQ(pool_->Stats().upstream_unmaps, 3u);
  EXPECT_EQ(Largest(), 2 * kMiB) << "b's low end";
  ExpectAccountsAgree();
}

TEST_F(ExpandableTest, ReleaseNeverTouchesPendingGranules) {
  Block* a = AllocBlock(4 * kMiB, 0);
  const uintptr_t base = a->addr();
  FreeAsync(a, 1, 3);
  Release(0);
  EXPECT_EQ(MapOf(base, 3), "MM.");
  EXPECT_EQ(pool_->reserved(), 4 * kMiB);
  Promote(Done({{1, 3}}));
  Release(0);
  EXPECT_EQ(pool_->reserved(), 0u);
  EXPECT_EQ(MapOf(base, 3), "...");
  ExpectAccountsAgree();
}

// A pending free never absorbs a READY neighbour whose granules were
// released (the pending block would span unmapped granules); the READY
// block is mapped again when it is reused.
TEST_F(ExpandableTest, PendingNeverAbsorbsAReadyBlockWithUnmappedGranules) {
  Block* p = AllocBlock(2 * kMiB, 0);  // granule 0
  const uintptr_t base = p->addr();
  Block* r = AllocBlock(4 * kMiB, 0);  // granules 1-2
  AllocBlock(256, 0);                  // granule 3, LIVE
  FreeNow(r);
  Release(2 * kMiB);
  ASSERT_EQ(MapOf(base, 4), "M..M");
  FreeAsync(p, 0, 1);
  EXPECT_EQ(Largest(), 2 * kMiB);
  // Stream 0 asks for 4 MiB: not p + r merged, but r, mapped again.
  MemPool::Allocation x = Alloc(4 * kMiB, 0);
  EXPECT_EQ(x.block->addr(), base + 2 * kMiB);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(MapOf(base, 4), "MMMM");
  ExpectAccountsAgree();
}

TEST_F(ExpandableTest, ReusingAReadyBlockMapsItsReleasedGranulesAgain) {
  AllocBlock(2 * kMiB, 0);             // granule 0, LIVE
  Block* r = AllocBlock(4 * kMiB, 0);  // granules 1-2
  const uintptr_t at = r->addr();
  const uintptr_t base = at - 2 * kMiB;
  AllocBlock(256, 0);  // granule 3, LIVE
  FreeNow(r);
  Release(6 * kMiB);  // r's top granule only
  ASSERT_EQ(MapOf(base, 4), "MM.M");
  const PoolStats before = pool_->Stats();
  ASSERT_EQ(before.upstream_maps, 3u);

  // 2 MiB fits r's mapped low end: no map.
  MemPool::Allocation x = Alloc(2 * kMiB, 1);
  EXPECT_EQ(x.block->addr(), at);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(pool_->Stats().upstream_maps, 3u);
  FreeNow(x.block);

  // 4 MiB maps the granule r lacks, and only it; counted as growth.
  MemPool::Allocation y = Alloc(4 * kMiB, 1);
  EXPECT_EQ(y.block->addr(), at);
  EXPECT_EQ(y.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(MapOf(base, 4), "MMMM");
  PoolStats s = pool_->Stats();
  EXPECT_EQ(s.upstream_maps, 4u);
  EXPECT_EQ(s.upstream_bytes_mapped, before.upstream_bytes_mapped + 2 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 8 * kMiB);
  ExpectAccountsAgree();

  // Wholly released (two granules), it is mapped again in one run.
  FreeNow(y.block);
  Release(4 * kMiB);
  ASSERT_EQ(MapOf(base, 4), "M..M");
  MemPool::Allocation z = Alloc(4 * kMiB, 2);
  EXPECT_EQ(z.block->addr(), at);
  EXPECT_EQ(pool_->Stats().upstream_maps, 5u);
  EXPECT_EQ(pool_->Stats().upstream_bytes_mapped, before.upstream_bytes_mapped + 6 * kMiB);
  ExpectAccountsAgree();
}

TEST_F(ExpandableTest, AWhollyFreeAndUnmappedReservationIsGivenBack) {
  MakeExpandable(kGiB, kGiB, /*reservation_bytes=*/8 * kMiB);
  Block* a = AllocBlock(6 * kMiB, 0);
  const uintptr_t ra = a->addr();
  // 6 MiB more does not fit the 2 MiB left of the first reservation.
  Block* b = AllocBlock(6 * kMiB, 0);
  const uintptr_t rb = b->addr();
  ASSERT_EQ(vmm_->reservations.size(), 2u);
  EXPECT_EQ(vmm_->reservations.at(ra), 8 * kMiB);
  EXPECT_EQ(vmm_->reservations.at(rb), 8 * kMiB);
  EXPECT_EQ(pool_->reserved(), 12 * kMiB);

  // Wholly free but still mapped above the bound: kept.
  FreeNow(a);
  Release(12 * kMiB);
  EXPECT_EQ(vmm_->release_calls, 0u);
  // Unmapped down to the bound but one granule stays: kept.
  Release(8 * kMiB);
  EXPECT_EQ(MapOf(ra, 4), "M...");
  EXPECT_EQ(vmm_->release_calls, 0u);
  EXPECT_TRUE(pool_->Owns(ra));
  // Nothing mapped and nothing in it: given back.
  Release(0);
  EXPECT_EQ(vmm_->release_calls, 1u);
  EXPECT_EQ(vmm_->reservations.count(ra), 0u);
  EXPECT_FALSE(pool_->Owns(ra));
  // b's reservation holds a LIVE block: kept, and so are b's granules.
  EXPECT_TRUE(pool_->Owns(rb));
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  ExpectAccountsAgree();

  FreeNow(b);
  Release(0);
  EXPECT_TRUE(vmm_->reservations.empty());
  EXPECT_EQ(pool_->reserved(), 0u);
  EXPECT_EQ(vmm_->release_calls, 2u);
  // The next growth reserves anew.
  AllocBlock(256, 0);
  EXPECT_EQ(vmm_->reserve_calls, 3u);
  EXPECT_EQ(pool_->reserved(), 2 * kMiB);
  ExpectAccountsAgree();
}

// Reservations sized by the caller (0 above) mean address space is scarce,
// as in the DVPP window: even the last one goes back. Otherwise the pool
// keeps its last, empty reservation (addresses stay stable and a sync cycle
// costs no reserve), and gives back only the others.
TEST_F(ExpandableTest, ThePoolsLastEmptyReservationStaysWhereAddressSpaceIsPlenty) {
  MakeExpandable(/*max_size=*/16 * kMiB);  // reservations of max_size
  Block* a = AllocBlock(2 * kMiB, 0);
  const uintptr_t ra = a->addr();
  FreeNow(a);
  Release(0);
  EXPECT_EQ(pool_->reserved(), 0u);
  EXPECT_EQ(vmm_->release_calls, 0u);
  ASSERT_EQ(vmm_->reservations.size(), 1u);
  EXPECT_TRUE(pool_->Owns(ra));
  ExpectAccountsAgree();

  // Growth maps into it again, from its base. Fill it with two LIVE blocks
  // and two released 6 MiB ranges; 8 MiB then fits no range, but max_size
  // has room: a second reservation.
  Block* x = AllocBlock(2 * kMiB, 0);
  EXPECT_EQ(x->addr(), ra);
  Block* y = AllocBlock(6 * kMiB, 0);
  AllocBlock(2 * kMiB, 0);
  Block* w = AllocBlock(6 * kMiB, 0);
  FreeNow(y);
  FreeNow(w);
  Release(0);
  ASSERT_EQ(MapOf(ra, 8), "M...M...");
  Block* big = AllocBlock(8 * kMiB, 0);
  const uintptr_t rb = big->addr();
  ASSERT_EQ(vmm_->reservations.size(), 2u);
  EXPECT_EQ(vmm_->reserve_calls, 2u);
  EXPECT_EQ(pool_->reserved(), 12 * kMiB);
  // Once empty, the second goes back; the first, holding blocks, stays.
  FreeNow(big);
  Release(0);
  EXPECT_EQ(vmm_->release_calls, 1u);
  EXPECT_EQ(vmm_->reservations.count(rb), 0u);
  EXPECT_EQ(vmm_->reservations.count(ra), 1u);
  EXPECT_FALSE(pool_->Owns(rb));
  ExpectAccountsAgree();
}

// Granules 0 and 2 of a READY block were released and granule 1 is mapped:
// 6 MiB needs two runs. The second MapAt fails: the first run is unmapped
// again and the allocation fails with nothing changed.
TEST_F(ExpandableTest, AMapFailurePartWayUndoesTheGrowth) {
  MakeExpandable(/*max_size=*/8 * kMiB);  // no room for another reservation
  Block* g[4];
  for (Block*& b : g) b = AllocBlock(2 * kMiB, 0);
  const uintptr_t base = g[0]->addr();
  FreeNow(g[0]);
  FreeNow(g[2]);
  Release(0);
  FreeNow(g[1]);  // one READY block [0, 6 MiB) over granules 0 (unmapped), 1, 2 (unmapped)
  ASSERT_EQ(MapOf(base, 4), ".M.M");
  ASSERT_EQ(pool_->reserved(), 4 * kMiB);
  const uint64_t maps_before = vmm_->map_at_calls;
  const uint64_t unmaps_before = vmm_->unmap_at_calls;

  vmm_->FailNthMapAt(2);
  ExpectFailsCleanly(6 * kMiB);
  EXPECT_EQ(vmm_->map_at_calls, maps_before + 2) << "both runs were asked for";
  EXPECT_EQ(vmm_->unmap_at_calls, unmaps_before + 1) << "the first run was taken back";
  EXPECT_EQ(vmm_->unmapped_ranges.back(), std::make_pair(base, 2 * kMiB));
  EXPECT_EQ(MapOf(base, 4), ".M.M");

  // The first run failing leaves nothing to undo.
  vmm_->FailNthMapAt(1);
  ExpectFailsCleanly(6 * kMiB);
  EXPECT_EQ(vmm_->unmap_at_calls, unmaps_before + 1);

  // Nothing was left behind: the same request now maps both runs.
  const PoolStats before = pool_->Stats();
  MemPool::Allocation x = Alloc(6 * kMiB, 0);
  EXPECT_EQ(x.block->addr(), base);
  EXPECT_EQ(x.rule, ReuseRule::kAfterSync);
  EXPECT_EQ(MapOf(base, 4), "MMMM");
  const PoolStats s = pool_->Stats();
  EXPECT_EQ(s.upstream_maps, before.upstream_maps + 2) << "one per run";
  EXPECT_EQ(s.upstream_bytes_mapped, before.upstream_bytes_mapped + 4 * kMiB);
  EXPECT_EQ(s.failed_alloc_count, 2u);
  ExpectAccountsAgree();
}

// An upstream that refuses to map fails the growth: the pool does not try
// the same upstream again elsewhere (the top of the reservation would do).
TEST_F(ExpandableTest, AMapFailureFailsTheGrowthRatherThanTryElsewhere) {
  Block* g[4];
  for (Block*& b : g) b = AllocBlock(2 * kMiB, 0);
  const uintptr_t base = g[0]->addr();
  FreeNow(g[0]);
  FreeNow(g[2]);
  Release(0);  // the READY granules go; 1 and 3 hold LIVE blocks
  FreeNow(g[1]);
  ASSERT_EQ(MapOf(base, 4), ".M.M");
  const uint64_t calls = vmm_->map_at_calls;
  vmm_->FailNthMapAt(2);
  ExpectFailsCleanly(6 * kMiB);
  EXPECT_EQ(vmm_->map_at_calls, calls + 2);
  EXPECT_EQ(MapOf(base, 8), ".M.M....");
  // Asked again, the upstream maps: the best fit is served.
  MemPool::Allocation x = Alloc(6 * kMiB, 0);
  EXPECT_EQ(x.block->addr(), base);
  EXPECT_EQ(MapOf(base, 8), "MMMM....");
  ExpectAccountsAgree();
}

TEST_F(ExpandableTest, AReservationFailureChangesNothing) {
  MakeExpandable(kGiB, kGiB, /*reservation_bytes=*/4 * kMiB);
  Block* a = AllocBlock(3 * kMiB, 0);
  ASSERT_EQ(vmm_->reservations.size(), 1u);
  // 2 MiB needs a second reservation: neither the usual size nor, where
  // address space is short, one just large enough can be had.
  vmm_->FailNthReserve(1, /*count=*/2);
  ExpectFailsCleanly(2 * kMiB);
  EXPECT_EQ(vmm_->reserve_calls, 3u);
  // The mapped rest of the first one still serves.
  EXPECT_EQ(AllocBlock(kMiB, 0)->addr(), a->addr() + 3 * kMiB);
  AllocBlock(2 * kMiB, 0);
  EXPECT_EQ(vmm_->reservations.size(), 2u);
  ExpectAccountsAgree();
}

TEST_F(ExpandableTest, WhereAReservationOfTheUsualSizeFailsOneJustLargeEnoughIsTried) {
  MakeExpandable(kGiB, kGiB, /*reservation_bytes=*/8 * kMiB);
  vmm_->FailNthReserve(1);
  Block* a = AllocBlock(3 * kMiB, 0);
  ASSERT_EQ(vmm_->reservations.size(), 1u);
  EXPECT_EQ(vmm_->reservations.at(a->addr()), 4 * kMiB);
  // The next growth tries the usual size again.
  Block* b = AllocBlock(2 * kMiB, 0);
  ASSERT_EQ(vmm_->reservations.size(), 2u);
  EXPECT_EQ(vmm_->reservations.at(b->addr()), 8 * kMiB);
  EXPECT_EQ(vmm_->reserve_calls, 3u);
  ExpectAccountsAgree();
}

TEST_F(ExpandableTest, BudgetAndMaxSizeCountMappedGranulesOnly) {
  MakeExpandable(/*max_size=*/6 * kMiB, /*capacity=*/kGiB);
  Block* a = AllocBlock(kMiB, 0);
  AllocBlock(3 * kMiB, 0);  // 4 MiB mapped of the 6 MiB reservation
  // 3 MiB more would map granules 2 and 3: 8 > 6.
  ExpectFailsCleanly(3 * kMiB);
  AllocBlock(2 * kMiB, 0);
  EXPECT_EQ(pool_->reserved(), 6 * kMiB);
  ExpectFailsCleanly(256);
  FreeNow(a);
  EXPECT_EQ(AllocBlock(kMiB, 1)->addr(), a->addr());

  MakeExpandable(/*max_size=*/kGiB, /*capacity=*/4 * kMiB);
  AllocBlock(3 * kMiB, 0);
  ExpectFailsCleanly(2 * kMiB);  // granule 2 would pass the device's 4 MiB
  AllocBlock(kMiB, 0);
  EXPECT_EQ(budget_->used(), 4 * kMiB);
  ExpectAccountsAgree();
}

}  // namespace
}  // namespace streampool::internal
