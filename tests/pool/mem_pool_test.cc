// MemPool driven directly: a scripted OrderOracle answers the ordering
// questions, an address-only upstream (or a wrapper that fails or tracks
// mappings) supplies chunks, or, for expandable pools, reservations mapped in
// granules, and every expectation is derived from the rules of docs/design.md
// ("Block lifecycle", "Serving MallocAsync", "Release rule").
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
#include <set>
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
//
// Made reservable, it is also a reserve-then-map upstream (expandable pools):
// PROT_NONE reservations with granules "mapped" in place, where it keeps its
// own account of every reservation and every mapped 2 MiB granule, checks
// each call against the PhysicalMemory contract (MapAt only over unmapped
// granules of a reservation, UnmapAt only of mapped ones, ReleaseReservation
// only of a whole reservation with nothing mapped) and records a violation
// rather than crash, and can be told to fail the N-th MapAt or Reserve from
// now (and the count - 1 calls after it).
class ScriptedMemory final : public PhysicalMemory {
 public:
  static constexpr uint64_t kMapGranule = Chunk::kGranule;

  explicit ScriptedMemory(bool reservable = false)
      : reservable_(reservable), inner_(NewAddressOnlyMemory()) {}

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

  bool can_reserve() const override { return reservable_; }
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override {
    ++reserve_calls;
    Expect(reservable_, "Reserve on an upstream that cannot reserve");
    if (reserve_calls >= fail_reserve_from_ && reserve_calls < fail_reserve_to_) {
      return absl::ResourceExhaustedError("scripted reservation failure");
    }
    absl::StatusOr<void*> p = inner_->Reserve(bytes, alignment);
    if (p.ok()) {
      Expect(reinterpret_cast<uintptr_t>(*p) % alignment == 0, "reservation misaligned");
      reservations.emplace(reinterpret_cast<uintptr_t>(*p), bytes);
    }
    return p;
  }
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override {
    ++map_at_calls;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    Expect(bytes > 0 && a % kMapGranule == 0 && bytes % kMapGranule == 0,
           absl::StrCat("MapAt(", a, ", ", bytes, ") is not whole granules"));
    Expect(InOneReservation(a, bytes), absl::StrCat("MapAt(", a, ", ", bytes, ") outside"));
    for (uintptr_t g = a; g < a + bytes; g += kMapGranule) {
      Expect(!mapped.contains(g), absl::StrCat("MapAt over mapped granule ", g));
    }
    if (map_at_calls >= fail_map_at_from_ && map_at_calls < fail_map_at_to_) {
      return absl::ResourceExhaustedError("scripted map failure");
    }
    absl::StatusOr<Mapping> m = inner_->MapAt(addr, bytes);
    if (m.ok()) {
      for (uintptr_t g = a; g < a + bytes; g += kMapGranule) mapped.insert(g);
      live_bytes += bytes;
    }
    return m;
  }
  void UnmapAt(const Mapping& m) override {
    ++unmap_at_calls;
    const auto a = reinterpret_cast<uintptr_t>(m.base);
    Expect(m.size > 0 && a % kMapGranule == 0 && m.size % kMapGranule == 0,
           absl::StrCat("UnmapAt(", a, ", ", m.size, ") is not whole granules"));
    Expect(m.huge_page_bytes + m.transparent_huge_page_bytes + m.normal_page_bytes == m.size,
           "UnmapAt with page counts that do not sum to its size");
    for (uintptr_t g = a; g < a + m.size; g += kMapGranule) {
      Expect(mapped.erase(g) == 1, absl::StrCat("UnmapAt of unmapped granule ", g));
    }
    live_bytes -= m.size;
    unmapped_ranges.emplace_back(a, m.size);
    inner_->UnmapAt(m);
  }
  void ReleaseReservation(void* base, uint64_t bytes) override {
    ++release_calls;
    const auto a = reinterpret_cast<uintptr_t>(base);
    auto it = reservations.find(a);
    Expect(it != reservations.end() && it->second == bytes,
           absl::StrCat("ReleaseReservation(", a, ", ", bytes, ") is no reservation"));
    auto first_mapped = mapped.lower_bound(a);
    Expect(first_mapped == mapped.end() || *first_mapped >= a + bytes,
           "ReleaseReservation with granules mapped");
    if (it != reservations.end()) reservations.erase(it);
    if (on_release) on_release(a, bytes);
    inner_->ReleaseReservation(base, bytes);
  }

  // The n-th call from now (1: the next) of MapAt / Reserve fails, and so do
  // the count - 1 calls after it.
  void FailNthMapAt(uint64_t n, uint64_t count = 1) {
    fail_map_at_from_ = map_at_calls + n;
    fail_map_at_to_ = fail_map_at_from_ + count;
  }
  void FailNthReserve(uint64_t n, uint64_t count = 1) {
    fail_reserve_from_ = reserve_calls + n;
    fail_reserve_to_ = fail_reserve_from_ + count;
  }

  // Which of the first n granules from base are mapped: 'M' mapped, '.' not.
  std::string MapOf(uintptr_t base, uint64_t n) const {
    std::string out;
    for (uint64_t g = 0; g < n; ++g) out += mapped.contains(base + g * kMapGranule) ? 'M' : '.';
    return out;
  }

  int fail_maps = 0;  // the next fail_maps calls of Map fail
  uint64_t map_calls = 0;
  uint64_t live_mappings = 0;  // chunks
  uint64_t live_bytes = 0;     // chunks and mapped granules
  std::function<void(const Mapping&)> on_unmap;

  uint64_t reserve_calls = 0;
  uint64_t map_at_calls = 0;
  uint64_t unmap_at_calls = 0;
  uint64_t release_calls = 0;
  std::map<uintptr_t, uint64_t> reservations;                   // base -> bytes
  std::set<uintptr_t> mapped;                                   // addresses of mapped granules
  std::vector<std::pair<uintptr_t, uint64_t>> unmapped_ranges;  // every UnmapAt, in order
  std::vector<std::string> violations;
  std::function<void(uintptr_t, uint64_t)> on_release;

 private:
  void Expect(bool ok, std::string what) {
    if (!ok) violations.push_back(std::move(what));
  }
  bool InOneReservation(uintptr_t a, uint64_t bytes) const {
    auto it = reservations.upper_bound(a);
    if (it == reservations.begin()) return false;
    --it;
    return a + bytes <= it->first + it->second;
  }

  const bool reservable_;
  uint64_t fail_map_at_from_ = 0, fail_map_at_to_ = 0;
  uint64_t fail_reserve_from_ = 0, fail_reserve_to_ = 0;
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
// that was counted (or was promoted, or freed with FreeNow). The upstream
// fails now and then (a chunk, a granule run, a reservation): a failed
// allocation changes nothing, in the pool or in the upstream.
//
// Both growth modes run it. Expandable pools are checked further against the
// fake's own account of mapped granules; the history of bytes survives their
// unmapping (a re-mapped granule's bytes were handed out before and must
// still be safe to reuse) and is forgotten only when the reservation goes.
struct RandomGrowth {
  const char* name;
  bool expandable;
  uint64_t reservation_bytes;  // 0: max_size
};

// coverage: assert that every path was exercised (true for the fixed seed,
// whose sequence is known to; a fresh seed may miss a rare one, such as a
// chunk wholly free at a release, without anything being wrong).
void RunRandomOps(uint64_t seed, int ops, const RandomGrowth& growth, bool coverage) {
  SCOPED_TRACE(absl::StrCat("seed=", seed, " growth=", growth.name));
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  constexpr StreamIndex kStreams = 4;
  constexpr uint64_t kMaxSize = 32 * kMiB;
  constexpr size_t kMaxLive = 150;

  LastFreeMap last_free;
  auto upstream = std::make_shared<ScriptedMemory>(growth.expandable);
  upstream->on_unmap = [&](const Mapping& m) {
    const auto base = reinterpret_cast<uintptr_t>(m.base);
    last_free.Erase(base, base + m.size);
  };
  upstream->on_release = [&](uintptr_t base, uint64_t bytes) {
    last_free.Erase(base, base + bytes);
  };
  DeviceBudget budget(48 * kMiB);
  auto pool = std::make_unique<MemPool>(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule},
                                        kMaxSize, upstream, &budget, growth.reservation_bytes);
  ASSERT_EQ(pool->expandable(), growth.expandable);

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
    if (uniform(0, 99) < 3) {
      if (growth.expandable) {
        upstream->FailNthMapAt(uniform(1, 2));
      } else {
        upstream->fail_maps = 1;
      }
    }
    if (growth.expandable && uniform(0, 99) < 1) upstream->FailNthReserve(1, uniform(1, 2));
    PoolStats expected = pool->Stats();
    const std::set<uintptr_t> mapped = upstream->mapped;
    const std::map<uintptr_t, uint64_t> reservations = upstream->reservations;
    const uint64_t live_bytes = upstream->live_bytes, live_mappings = upstream->live_mappings;
    absl::StatusOr<MemPool::Allocation> a = pool->Allocate(size, o);
    if (!a.ok()) {
      ++failures;
      ++expected.failed_alloc_count;
      if (upstream->mapped != mapped || upstream->reservations != reservations ||
          upstream->live_bytes != live_bytes || upstream->live_mappings != live_mappings) {
        return ::testing::AssertionFailure() << "failed allocation left the upstream changed";
      }
      // Rule 3 promotes what it observed complete even when nothing fits (as a
      // query would): blocks merge, so the largest free block may change. In
      // a chunked pool it can only grow; in an expandable one a promoted
      // block that merges with a READY block whose low granules are unmapped
      // counts only by the merged block's mapped low end, so it may shrink.
      const PoolStats got = pool->Stats();
      if (pool->reuse_allow_opportunistic() &&
          (growth.expandable || got.largest_free_block >= expected.largest_free_block)) {
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
      ASSERT_TRUE(free_one(/*now=*/r >= 69)) << "op " << i;
    } else if (r < 82) {
      // An event wait: T learns a prefix of S.
      const StreamIndex t = uniform(0, kStreams - 1), s = uniform(0, kStreams - 1);
      if (s != t) vc[t][s] = uniform(vc[t][s], pos[s]);
    } else if (r < 90) {
      // The executor reports progress of S, at most half of what is
      // outstanding: frees must stay pending a while, or rule 3 promotes
      // nearly all of them before rule 2 (which comes first but needs an
      // event) ever serves one.
      const StreamIndex s = uniform(0, kStreams - 1);
      complete[s] = uniform(complete[s], complete[s] + (pos[s] - complete[s]) / 2);
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
    if (growth.expandable) {
      ASSERT_EQ(pool->reserved(), upstream->mapped.size() * Chunk::kGranule) << "op " << i;
    }
    ASSERT_TRUE(upstream->violations.empty()) << "op " << i << ": " << upstream->violations[0];
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
  if (coverage) {
    EXPECT_GT(s.fresh_allocs, 0u);
    EXPECT_GT(s.reuse_same_stream, 0u);
    EXPECT_GT(s.reuse_event_dependency, 0u);
    EXPECT_GT(s.reuse_opportunistic, 0u);
    EXPECT_GT(s.reuse_after_sync, 0u);
    EXPECT_GT(s.reuse_internal_dependency, 0u);
    EXPECT_GT(s.upstream_unmaps, 0u);
    EXPECT_GT(failures, 0u);
  }

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
  // Released to the bound 0, nothing is mapped; every reservation went back
  // but the last, which a pool keeps unless its address space is scarce
  // (reservations sized by the caller), and which goes at destruction.
  EXPECT_TRUE(upstream->mapped.empty());
  EXPECT_EQ(upstream->reservations.size(),
            growth.expandable && growth.reservation_bytes == 0 ? 1u : 0u);
  if (growth.expandable) {
    EXPECT_GT(upstream->unmap_at_calls, 0u);
    // Small reservations come and go.
    if (growth.reservation_bytes != 0) {
      EXPECT_GT(upstream->release_calls, 0u);
    }
  }
  pool.reset();
  EXPECT_TRUE(upstream->reservations.empty());
  EXPECT_TRUE(upstream->violations.empty());
}

class MemPoolRandomTest : public ::testing::TestWithParam<RandomGrowth> {};

TEST_P(MemPoolRandomTest, FixedSeed) { RunRandomOps(20240601, 60000, GetParam(), true); }

TEST_P(MemPoolRandomTest, FreshSeed) {
  RunRandomOps(std::random_device{}(), 60000, GetParam(), false);
}

INSTANTIATE_TEST_SUITE_P(Growth, MemPoolRandomTest,
                         ::testing::Values(RandomGrowth{"Chunked", false, 0},
                                           RandomGrowth{"Expandable", true, 0},
                                           // Several reservations at once.
                                           RandomGrowth{"Expandable8MiB", true, 8 * kMiB}),
                         [](const ::testing::TestParamInfo<RandomGrowth>& info) {
                           return std::string(info.param.name);
                         });

// --------------------------------------------------- host heap, hot path

// A same-stream alloc/free pair, once warm, allocates no host memory however
// many other free blocks (READY, and PENDING on other streams) the pool
// holds.
void ExpectSteadyPairsDoNotAllocate(size_t other_free_blocks, bool expandable = false) {
  SCOPED_TRACE(
      absl::StrCat("other free blocks: ", other_free_blocks, expandable ? " (expandable)" : ""));
  auto upstream = std::make_shared<ScriptedMemory>(expandable);
  DeviceBudget budget(4 * kGiB);
  MemPool pool(PoolProps{}, SizeRule{SizeRule::Kind::kRound, kGranule}, 4 * kGiB, upstream,
               &budget);
  ASSERT_EQ(pool.expandable(), expandable);
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

TEST(MemPoolHostHeapTest, SameStreamPairInAnExpandablePoolDoesNotAllocate) {
  ExpectSteadyPairsDoNotAllocate(1000, /*expandable=*/true);
  ExpectSteadyPairsDoNotAllocate(64000, /*expandable=*/true);
}

}  // namespace
}  // namespace streampool::internal
