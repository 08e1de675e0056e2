// MemPool driven directly: a scripted OrderOracle answers the ordering
// questions, an address-only upstream (or a wrapper that fails or tracks
// mappings) supplies chunks, and every expectation is derived from the rules
// of DESIGN.md ("Block lifecycle", "Serving MallocAsync", "Release rule").
#include "src/pool/mem_pool.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/ordering/oracle.h"
#include "src/ordering/vector_clock.h"
#include "src/util/align.h"
#include "streampool/mem_pool.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"

// Counts every global allocation so that the steady-state test can prove a
// same-stream alloc/free pair touches no host heap. Both the plain and the
// aligned forms are replaced: SizeIndex trie nodes are over-aligned.
namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, std::align_val_t al) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t a = static_cast<size_t>(al);
  if (void* p = std::aligned_alloc(a, (std::max<size_t>(n, 1) + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
// noinline: once inlined, GCC pairs a library `new` with our free() and warns
// about a mismatch that is not there.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace streampool {
// Readable rule names in failure messages.
void PrintTo(ReuseRule rule, std::ostream* os) { *os << ReuseRuleName(rule); }
}  // namespace streampool

namespace streampool::internal {
namespace {

constexpr uint64_t kGranule = 256;

// ------------------------------------------------------------------ fakes

// Answers from maps the test sets; a stream not in a map is answered 0
// ("nothing of it is ordered before T / observed complete"). Records every
// wait the pool inserts.
class ScriptedOracle final : public OrderOracle {
 public:
  struct Wait {
    StreamIndex stream;
    Position f;
    friend bool operator==(const Wait& a, const Wait& b) {
      return a.stream == b.stream && a.f == b.f;
    }
  };

  explicit ScriptedOracle(StreamIndex t) : t_(t) {}

  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex s) const override { return Lookup(ordered_after, s); }
  Position ObservedComplete(StreamIndex s) const override { return Lookup(observed_complete, s); }
  void InsertWait(StreamIndex s, Position f) override { waits.push_back(Wait{s, f}); }

  std::map<StreamIndex, Position> ordered_after;
  std::map<StreamIndex, Position> observed_complete;
  std::vector<Wait> waits;

 private:
  static Position Lookup(const std::map<StreamIndex, Position>& m, StreamIndex s) {
    auto it = m.find(s);
    return it == m.end() ? 0 : it->second;
  }
  StreamIndex t_;
};

std::ostream& operator<<(std::ostream& os, const ScriptedOracle::Wait& w) {
  return os << "(" << w.stream << ", " << w.f << ")";
}

// An upstream over address-only memory that can be told to fail its next
// Map, and that tracks what is mapped (so a test can prove no chunk leaked)
// and reports every Unmap.
class ScriptedMemory final : public PhysicalMemory {
 public:
  ScriptedMemory() : inner_(NewAddressOnlyMemory()) {}

  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    ++map_calls;
    if (fail_maps > 0) {
      --fail_maps;
      return absl::ResourceExhaustedError("scripted upstream failure");
    }
    absl::StatusOr<Mapping> m = inner_->Map(bytes);
    if (m.ok()) {
      ++live_mappings;
      live_bytes += m->size;
    }
    return m;
  }
  void Unmap(const Mapping& mapping) override {
    --live_mappings;
    live_bytes -= mapping.size;
    if (on_unmap) on_unmap(mapping);
    inner_->Unmap(mapping);
  }
  bool touchable() const override { return inner_->touchable(); }
  const char* name() const override { return "scripted"; }

  int fail_maps = 0;  // the next fail_maps calls of Map fail
  uint64_t map_calls = 0;
  uint64_t live_mappings = 0;
  uint64_t live_bytes = 0;
  std::function<void(const Mapping&)> on_unmap;

 private:
  std::unique_ptr<PhysicalMemory> inner_;
};

// Every field, so that "nothing changed" is one string comparison with a
// readable diff.
std::string StatsString(const PoolStats& s) {
  return absl::StrCat(
      "reserved=", s.reserved_bytes, " reserved_high=", s.reserved_high, " used=", s.used_bytes,
      " used_high=", s.used_high, " allocs=", s.alloc_count, " frees=", s.free_count,
      " failed=", s.failed_alloc_count, " same_stream=", s.reuse_same_stream,
      " event_dep=", s.reuse_event_dependency, " opportunistic=", s.reuse_opportunistic,
      " after_sync=", s.reuse_after_sync, " internal_dep=", s.reuse_internal_dependency,
      " fresh=", s.fresh_allocs, " waits=", s.waits_inserted, " maps=", s.upstream_maps,
      " unmaps=", s.upstream_unmaps, " huge=", s.huge_page_bytes,
      " thp=", s.transparent_huge_page_bytes, " normal=", s.normal_page_bytes,
      " largest_free=", s.largest_free_block, " mapped_bytes=", s.upstream_bytes_mapped,
      " fragmentation=", s.fragmentation);
}

VectorClock Done(std::initializer_list<std::pair<StreamIndex, Position>> entries) {
  VectorClock v;
  for (const auto& [s, p] : entries) v.Raise(s, p);
  return v;
}

// ---------------------------------------------------------------- fixture

class MemPoolTest : public ::testing::Test {
 protected:
  MemPoolTest() { Make(); }

  // (Re)builds the pool under test on a fresh budget.
  void Make(uint64_t max_size = kGiB, uint64_t capacity = kGiB) {
    pool_.reset();
    budget_ = std::make_unique<DeviceBudget>(capacity);
    pool_ = std::make_unique<MemPool>(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule},
                                      max_size, upstream_, budget_.get());
  }

  // Allocates on oracle.stream(); the allocation must succeed.
  MemPool::Allocation AllocWith(uint64_t size, ScriptedOracle& oracle) {
    absl::StatusOr<MemPool::Allocation> a = pool_->Allocate(size, oracle);
    if (!a.ok()) {
      // The scenario cannot go on without the block: end this test (gtest
      // catches the exception and reports it) but not the whole binary.
      throw std::runtime_error(absl::StrCat("Allocate(", size, ") on stream ", oracle.stream(),
                                            " failed: ", a.status().ToString()));
    }
    EXPECT_TRUE(pool_->CheckInvariants());
    return *a;
  }
  // Allocates on t with an oracle that proves nothing about other streams.
  MemPool::Allocation Alloc(uint64_t size, StreamIndex t) {
    ScriptedOracle oracle(t);
    MemPool::Allocation a = AllocWith(size, oracle);
    EXPECT_TRUE(oracle.waits.empty());
    return a;
  }
  Block* AllocBlock(uint64_t size, StreamIndex t) { return Alloc(size, t).block; }

  // Tries an allocation that must fail with out-of-memory and change nothing
  // but failed_alloc_count.
  void ExpectOutOfMemory(uint64_t size, ScriptedOracle& oracle) {
    PoolStats expected = pool_->Stats();
    ++expected.failed_alloc_count;
    const uint64_t budget_used = budget_->used();
    const uint64_t live_mappings = upstream_->live_mappings;
    absl::StatusOr<MemPool::Allocation> a = pool_->Allocate(size, oracle);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << size;
    EXPECT_TRUE(oracle.waits.empty());
    EXPECT_EQ(StatsString(pool_->Stats()), StatsString(expected));
    EXPECT_EQ(budget_->used(), budget_used);
    EXPECT_EQ(upstream_->live_mappings, live_mappings);
    EXPECT_TRUE(pool_->CheckInvariants());
  }
  void ExpectOutOfMemory(uint64_t size, StreamIndex t) {
    ScriptedOracle oracle(t);
    ExpectOutOfMemory(size, oracle);
  }

  void FreeAsync(Block* b, StreamIndex s, Position f) {
    pool_->FreeAsync(b, s, f);
    EXPECT_TRUE(pool_->CheckInvariants());
  }
  void FreeNow(Block* b) {
    pool_->FreeNow(b);
    EXPECT_TRUE(pool_->CheckInvariants());
  }
  void Promote(const VectorClock& done) {
    pool_->Promote(done);
    EXPECT_TRUE(pool_->CheckInvariants());
  }
  void Release(uint64_t bound) {
    pool_->Release(bound);
    EXPECT_TRUE(pool_->CheckInvariants());
  }

  // Makes the next allocations carve one chunk of `bytes` from its low end:
  // grows it, then hands it straight back as one READY block.
  uintptr_t ReserveChunk(uint64_t bytes) {
    Block* b = AllocBlock(bytes, 0);
    const uintptr_t base = b->addr();
    FreeNow(b);
    return base;
  }

  uint64_t Largest() const { return pool_->Stats().largest_free_block; }

  std::shared_ptr<ScriptedMemory> upstream_ = std::make_shared<ScriptedMemory>();
  std::unique_ptr<DeviceBudget> budget_;
  std::unique_ptr<MemPool> pool_;
};

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

TEST_F(CoalesceTest, PendingAbsorbsReadyNeighbour) {
  FreeNow(blk_[0]);
  FreeAsync(blk_[1], 0, 5);
  // A (READY) and B became one PENDING(0, 5) block: our trade-off helps
  // stream 0 and hides A's bytes from other streams until 5 completes.
  EXPECT_EQ(Largest(), kMiB);
  ExpectOutOfMemory(256, 1);
  MemPool::Allocation x = Alloc(kMiB, 0);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kSameStream);
}

TEST_F(CoalesceTest, PendingAbsorbsReadyNeighbourOnBothSides) {
  FreeNow(blk_[0]);
  FreeNow(blk_[2]);
  FreeAsync(blk_[1], 0, 5);
  EXPECT_EQ(Largest(), 1536 * kKiB);
  Promote(Done({{0, 5}}));
  MemPool::Allocation x = Alloc(1536 * kKiB, 1);
  EXPECT_EQ(x.block->addr(), base_);
}

// A READY block can sit next to PENDING(S) (it became READY later, by
// FreeNow or a promotion). When S frees the block on its other side, the
// free absorbs the READY block and must then merge with S's pending block
// beyond it, or a single-stream workload fragments for want of a sync.
TEST_F(CoalesceTest, PendingMergesWithItsStreamBeyondAnAbsorbedReadyBlock) {
  FreeAsync(blk_[0], 0, 1);
  FreeNow(blk_[1]);  // READY, between PENDING(0, 1) and LIVE C
  FreeAsync(blk_[2], 0, 2);
  EXPECT_EQ(Largest(), 1536 * kKiB);
  MemPool::Allocation x = Alloc(1536 * kKiB, 0);
  EXPECT_EQ(x.block->addr(), base_);
  EXPECT_EQ(x.rule, ReuseRule::kSameStream);
}

TEST_F(CoalesceTest, PendingMergesWithItsStreamBeyondAnAbsorbedReadyBlockOnTheRight) {
  FreeAsync(blk_[3], 0, 1);
  FreeNow(blk_[2]);  // READY, between LIVE B and PENDING(0, 1)
  FreeAsync(blk_[1], 0, 2);
  EXPECT_EQ(Largest(), 1536 * kKiB);
  MemPool::Allocation x = Alloc(1536 * kKiB, 0);
  EXPECT_EQ(x.block->addr(), base_ + 512 * kKiB);
  EXPECT_EQ(x.rule, ReuseRule::kSameStream);
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

// -------------------------------------------------------- upstream errors

TEST_F(MemPoolTest, UpstreamFailureChangesNothing) {
  // Some state worth preserving: a LIVE block, a READY remainder, a small
  // PENDING free of another stream (too small for rule 5 to serve 3 MiB).
  Block* live = AllocBlock(kMiB, 0);
  Block* small = AllocBlock(256, 1);
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
  // Stream 1's free (1 MiB after absorbing its READY neighbour) is intact;
  // the new chunk's READY tail is 1 MiB - 256, too small for it.
  EXPECT_EQ(Alloc(kMiB, 1).rule, ReuseRule::kSameStream);
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

// ------------------------------------------------- random, with a model

// The last free of each byte range the pool has handed out: which stream
// freed it at which position, or `now` for FreeNow (the caller promised all
// access complete). Bytes never handed out have no entry; ranges of an
// unmapped chunk are erased (their addresses may come back fresh).
struct LastFree {
  StreamIndex stream = kNoStream;
  Position f = 0;
  bool now = false;
};

class LastFreeMap {
 public:
  void Assign(uintptr_t a, uintptr_t b, LastFree v) {
    Erase(a, b);
    m_.emplace(a, Interval{b, v});
  }
  void Erase(uintptr_t a, uintptr_t b) {
    SplitAt(a);
    SplitAt(b);
    m_.erase(m_.lower_bound(a), m_.lower_bound(b));
  }
  template <typename Fn>
  void ForEachOverlap(uintptr_t a, uintptr_t b, Fn&& fn) const {
    auto it = m_.upper_bound(a);
    if (it != m_.begin() && std::prev(it)->second.end > a) --it;
    for (; it != m_.end() && it->first < b; ++it) fn(it->second.v);
  }

 private:
  struct Interval {
    uintptr_t end;
    LastFree v;
  };
  void SplitAt(uintptr_t x) {
    auto it = m_.upper_bound(x);
    if (it == m_.begin()) return;
    --it;
    if (it->first < x && x < it->second.end) {
      const Interval right{it->second.end, it->second.v};
      it->second.end = x;
      m_.emplace(x, right);
    }
  }
  std::map<uintptr_t, Interval> m_;
};

// Random allocations, frees, event waits, completions, promotions, releases
// and switch flips over 4 streams. The oracle's answers are consistent with
// a real program: VC(T)[S] and completion of S only grow and never pass
// pos(S). After every op the pool's invariants hold, and every allocation
// is checked against a reference: it overlaps no LIVE block, and each of its
// bytes last freed on another stream is covered by the bound of the rule
// that was counted (or was promoted, or freed with FreeNow).
void RunRandomOps(uint64_t seed, int ops) {
  SCOPED_TRACE(absl::StrCat("seed=", seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  constexpr StreamIndex kStreams = 4;
  constexpr uint64_t kMaxSize = 32 * kMiB;
  constexpr size_t kMaxLive = 150;

  LastFreeMap last_free;
  auto upstream = std::make_shared<ScriptedMemory>();
  upstream->on_unmap = [&](const Mapping& m) {
    const auto base = reinterpret_cast<uintptr_t>(m.base);
    last_free.Erase(base, base + m.size);
  };
  DeviceBudget budget(48 * kMiB);
  auto pool = std::make_unique<MemPool>(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule},
                                        kMaxSize, upstream, &budget);

  Position pos[kStreams] = {};
  Position vc[kStreams][kStreams] = {};  // vc[T][S]: VC(T)[S]
  Position complete[kStreams] = {};      // observed complete
  Position promoted[kStreams] = {};      // the done vector last promoted
  struct Live {
    Block* block;
    StreamIndex stream;
  };
  std::vector<Live> live;
  std::map<uintptr_t, uintptr_t> live_ranges;  // base -> end
  uint64_t used = 0;
  uint64_t successes = 0, failures = 0;

  auto free_one = [&](bool now) -> ::testing::AssertionResult {
    const size_t k = uniform(0, live.size() - 1);
    const Live l = live[k];
    live[k] = live.back();
    live.pop_back();
    const uintptr_t a = l.block->addr(), e = l.block->end();
    live_ranges.erase(a);
    used -= l.block->size();
    if (now) {
      pool->FreeNow(l.block);
      last_free.Assign(a, e, LastFree{kNoStream, 0, true});
    } else {
      const StreamIndex s =
          uniform(0, 9) < 7 ? l.stream : static_cast<StreamIndex>(uniform(0, kStreams - 1));
      const Position f = ++pos[s];
      pool->FreeAsync(l.block, s, f);
      last_free.Assign(a, e, LastFree{s, f, false});
    }
    return ::testing::AssertionSuccess();
  };

  auto alloc = [&]() -> ::testing::AssertionResult {
    const StreamIndex t = uniform(0, kStreams - 1);
    const uint64_t r = uniform(0, 99);
    const uint64_t size = r < 70   ? uniform(1, 16 * kKiB)
                          : r < 95 ? uniform(16 * kKiB, 512 * kKiB)
                                   : uniform(512 * kKiB, 3 * kMiB);
    ScriptedOracle o(t);
    for (StreamIndex s = 0; s < kStreams; ++s) {
      if (s == t) continue;
      o.ordered_after[s] = vc[t][s];
      o.observed_complete[s] = complete[s];
    }
    ++pos[t];  // the allocation's marker op
    PoolStats expected = pool->Stats();
    absl::StatusOr<MemPool::Allocation> a = pool->Allocate(size, o);
    if (!a.ok()) {
      ++failures;
      ++expected.failed_alloc_count;
      // Rule 3 promotes what it observed complete even when nothing fits (as a
      // query would): blocks merge, so only the largest free block may grow.
      const PoolStats got = pool->Stats();
      if (pool->reuse_allow_opportunistic() &&
          got.largest_free_block >= expected.largest_free_block) {
        expected.largest_free_block = got.largest_free_block;
      }
      if (a.status().code() != absl::StatusCode::kResourceExhausted || !o.waits.empty() ||
          StatsString(got) != StatsString(expected)) {
        return ::testing::AssertionFailure()
               << "failed allocation changed state: " << a.status() << "\n  "
               << StatsString(pool->Stats()) << "\n  " << StatsString(expected);
      }
      return ::testing::AssertionSuccess();
    }
    ++successes;
    Block* b = a->block;
    const ReuseRule rule = a->rule;
    const uintptr_t lo = b->addr(), hi = b->end();
    if (b->size() != *pool->RuleSize(size) || b->requested != size || lo % kGranule != 0 ||
        b->state != BlockState::kLive) {
      return ::testing::AssertionFailure() << "bad block for " << size;
    }
    // Safety 1: no byte shared with a LIVE allocation.
    auto next = live_ranges.lower_bound(lo);
    if (next != live_ranges.end() && next->first < hi) {
      return ::testing::AssertionFailure() << "overlaps LIVE block at " << next->first;
    }
    if (next != live_ranges.begin() && std::prev(next)->second > lo) {
      return ::testing::AssertionFailure() << "overlaps LIVE block at " << std::prev(next)->first;
    }
    // A wait is inserted exactly for rule 5, on another stream.
    if (rule == ReuseRule::kInternalDependency) {
      if (o.waits.size() != 1 || o.waits[0].stream == t) {
        return ::testing::AssertionFailure() << "rule 5 without exactly one foreign wait";
      }
    } else if (!o.waits.empty()) {
      return ::testing::AssertionFailure() << "a wait inserted for " << ReuseRuleName(rule);
    }
    // Safety 2: every byte's last free is covered by the counted rule.
    std::string error;
    StreamIndex pending_stream = kNoStream;
    last_free.ForEachOverlap(lo, hi, [&](const LastFree& lf) {
      if (!error.empty()) return;
      // Complete as far as the pool may know: proven by a sync, or observed
      // by the executor (rule 3 promotes observed frees, which then merge and
      // may serve any rule that reuses READY bytes).
      const bool completed = lf.now || lf.f <= promoted[lf.stream] || lf.f <= complete[lf.stream];
      bool ok = false;
      switch (rule) {
        case ReuseRule::kFresh:
          ok = false;  // fresh bytes were never handed out
          break;
        case ReuseRule::kAfterSync:
        case ReuseRule::kOpportunistic:
          ok = completed;
          break;
        case ReuseRule::kSameStream:
          ok = completed || lf.stream == t;
          break;
        case ReuseRule::kEventDependency:
          ok = completed || (lf.stream != t && lf.f <= vc[t][lf.stream]);
          break;
        case ReuseRule::kInternalDependency:
          ok = completed || (lf.stream == o.waits[0].stream && lf.f <= o.waits[0].f);
          break;
      }
      // The block was PENDING on one stream: its bytes not known complete
      // were all freed by that stream.
      if (ok && !completed) {
        if (pending_stream == kNoStream) pending_stream = lf.stream;
        ok = lf.stream == pending_stream;
      }
      if (!ok) {
        error = absl::StrCat(ReuseRuleName(rule), " on stream ", t, " reused bytes last freed at (",
                             lf.stream, ", ", lf.f, ") now=", lf.now,
                             "; VC(T)[S]=", lf.stream < kStreams ? vc[t][lf.stream] : 0,
                             " complete=", lf.stream < kStreams ? complete[lf.stream] : 0,
                             " promoted=", lf.stream < kStreams ? promoted[lf.stream] : 0);
      }
    });
    if (!error.empty()) return ::testing::AssertionFailure() << error;
    if (rule == ReuseRule::kInternalDependency) {
      Position& v = vc[t][o.waits[0].stream];
      v = std::max(v, o.waits[0].f);
    }
    live.push_back(Live{b, t});
    live_ranges.emplace(lo, hi);
    used += b->size();
    return ::testing::AssertionSuccess();
  };

  for (int i = 0; i < ops; ++i) {
    const uint64_t r = uniform(0, 99);
    if (r < 40 && live.size() < kMaxLive) {
      ASSERT_TRUE(alloc()) << "op " << i;
    } else if (r < 71 && !live.empty()) {
      ASSERT_TRUE(free_one(/*now=*/r >= 68)) << "op " << i;
    } else if (r < 79) {
      // An event wait: T learns a prefix of S.
      const StreamIndex t = uniform(0, kStreams - 1), s = uniform(0, kStreams - 1);
      if (s != t) vc[t][s] = uniform(vc[t][s], pos[s]);
    } else if (r < 87) {
      // The executor reports progress of S.
      const StreamIndex s = uniform(0, kStreams - 1);
      complete[s] = uniform(complete[s], pos[s]);
    } else if (r < 93) {
      // A synchronize action proves what is observed complete.
      VectorClock done;
      for (StreamIndex s = 0; s < kStreams; ++s) {
        done.Raise(s, complete[s]);
        promoted[s] = complete[s];
      }
      pool->Promote(done);
    } else if (r < 97) {
      const uint64_t reserved = pool->reserved();
      const uint64_t bound = uniform(0, 2) == 0 ? 0 : uniform(0, reserved);
      if (uniform(0, 1) == 0) {
        pool->Release(bound);
      } else {
        pool->set_release_threshold(bound);
        pool->ReleaseAtSync();
      }
      ASSERT_LE(pool->reserved(), reserved) << "op " << i;
      // The release rule never goes below its bound by releasing.
      if (reserved >= bound) {
        ASSERT_GE(pool->reserved(), bound) << "op " << i;
      }
    } else {
      const bool on = uniform(0, 9) < 7;
      switch (uniform(0, 2)) {
        case 0:
          pool->set_reuse_follow_event_dependencies(on);
          break;
        case 1:
          pool->set_reuse_allow_opportunistic(on);
          break;
        default:
          pool->set_reuse_allow_internal_dependencies(on);
          break;
      }
    }
    ASSERT_TRUE(pool->CheckInvariants()) << "op " << i;
    ASSERT_EQ(pool->used(), used) << "op " << i;
    ASSERT_EQ(pool->reserved(), upstream->live_bytes) << "op " << i;
    ASSERT_EQ(budget.used(), pool->reserved()) << "op " << i;
    ASSERT_LE(pool->reserved(), kMaxSize) << "op " << i;
  }

  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.alloc_count, successes);
  EXPECT_EQ(s.failed_alloc_count, failures);
  EXPECT_EQ(s.fresh_allocs + s.reuse_same_stream + s.reuse_event_dependency +
                s.reuse_opportunistic + s.reuse_after_sync + s.reuse_internal_dependency,
            successes);
  EXPECT_EQ(s.waits_inserted, s.reuse_internal_dependency);
  // Every path was exercised, or the sequence proves little.
  EXPECT_GT(s.fresh_allocs, 0u);
  EXPECT_GT(s.reuse_same_stream, 0u);
  EXPECT_GT(s.reuse_event_dependency, 0u);
  EXPECT_GT(s.reuse_opportunistic, 0u);
  EXPECT_GT(s.reuse_after_sync, 0u);
  EXPECT_GT(s.reuse_internal_dependency, 0u);
  EXPECT_GT(s.upstream_unmaps, 0u);
  EXPECT_GT(failures, 0u);

  // Drain: everything freed and proven complete goes back.
  while (!live.empty()) ASSERT_TRUE(free_one(/*now=*/false));
  VectorClock all;
  for (StreamIndex st = 0; st < kStreams; ++st) all.Raise(st, pos[st]);
  pool->Promote(all);
  pool->Release(0);
  EXPECT_TRUE(pool->CheckInvariants());
  EXPECT_EQ(pool->reserved(), 0u);
  EXPECT_EQ(upstream->live_mappings, 0u);
  EXPECT_EQ(budget.used(), 0u);
  pool.reset();
}

TEST(MemPoolRandomTest, FixedSeed) { RunRandomOps(20240601, 60000); }

TEST(MemPoolRandomTest, FreshSeed) { RunRandomOps(std::random_device{}(), 60000); }

// --------------------------------------------------- host heap, hot path

// A same-stream alloc/free pair, once warm, allocates no host memory however
// many other free blocks (READY, and PENDING on other streams) the pool
// holds.
void ExpectSteadyPairsDoNotAllocate(size_t other_free_blocks) {
  SCOPED_TRACE(absl::StrCat("other free blocks: ", other_free_blocks));
  auto upstream = std::make_shared<ScriptedMemory>();
  DeviceBudget budget(4 * kGiB);
  MemPool pool(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule}, 4 * kGiB, upstream,
               &budget);
  std::mt19937_64 rng(other_free_blocks);
  Position pos[4] = {};
  std::vector<std::pair<Block*, StreamIndex>> others;
  for (size_t i = 0; i < other_free_blocks; ++i) {
    const StreamIndex s = 1 + i % 3;
    ScriptedOracle o(s);
    const uint64_t size = std::uniform_int_distribution<uint64_t>(1, 16)(rng) * kGranule;
    absl::StatusOr<MemPool::Allocation> a = pool.Allocate(size, o);
    ASSERT_TRUE(a.ok());
    others.emplace_back(a->block, s);
    ASSERT_TRUE(pool.Allocate(kGranule, o).ok());  // a LIVE separator
  }
  for (size_t i = 0; i < others.size(); ++i) {
    if (i % 2 == 0) {
      pool.FreeNow(others[i].first);
    } else {
      const StreamIndex s = others[i].second;
      pool.FreeAsync(others[i].first, s, ++pos[s]);
    }
  }
  ASSERT_TRUE(pool.CheckInvariants());

  // 64 KiB is larger than any other free block: the pair lives in its own.
  ScriptedOracle o0(0);
  bool ok = true;
  auto pair = [&] {
    absl::StatusOr<MemPool::Allocation> a = pool.Allocate(64 * kKiB, o0);
    if (!a.ok() || a->rule == ReuseRule::kInternalDependency) {
      ok = false;
      return;
    }
    pool.FreeAsync(a->block, 0, ++pos[0]);
  };
  for (int i = 0; i < 1000; ++i) pair();
  const PoolStats warm = pool.Stats();
  const size_t before = g_allocations.load(std::memory_order_relaxed);
  for (int i = 0; i < 10000; ++i) pair();
  const size_t after = g_allocations.load(std::memory_order_relaxed);
  EXPECT_TRUE(ok);
  EXPECT_EQ(after - before, 0u);
  const PoolStats s = pool.Stats();
  EXPECT_EQ(s.reuse_same_stream - warm.reuse_same_stream, 10000u);
  EXPECT_EQ(s.reserved_bytes, warm.reserved_bytes);
  EXPECT_TRUE(pool.CheckInvariants());
}

TEST(MemPoolHostHeapTest, SameStreamPairDoesNotAllocateWith1000OtherFreeBlocks) {
  ExpectSteadyPairsDoNotAllocate(1000);
}

TEST(MemPoolHostHeapTest, SameStreamPairDoesNotAllocateWith64000OtherFreeBlocks) {
  ExpectSteadyPairsDoNotAllocate(64000);
}

}  // namespace
}  // namespace streampool::internal
