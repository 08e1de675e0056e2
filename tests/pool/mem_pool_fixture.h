// Shared by the tests/pool/mem_pool_*_test.cc executables, which drive
// MemPool directly: a scripted OrderOracle answers the ordering questions, an
// address-only upstream (or a wrapper that fails or tracks mappings) supplies
// chunks, or, for expandable pools, reservations mapped in granules, and
// every expectation is derived from the rules of docs/design.md ("Block
// lifecycle", "Serving MallocAsync", "Release rule").
#ifndef STREAMPOOL_TESTS_POOL_MEM_POOL_FIXTURE_H_
#define STREAMPOOL_TESTS_POOL_MEM_POOL_FIXTURE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/ordering/oracle.h"
#include "src/ordering/vector_clock.h"
#include "src/pool/mem_pool.h"
#include "src/util/align.h"
#include "streampool/mem_pool.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"

namespace streampool {
// Readable rule names in failure messages.
inline void PrintTo(ReuseRule rule, std::ostream* os) { *os << ReuseRuleName(rule); }
}  // namespace streampool

namespace streampool::internal {

inline constexpr uint64_t kGranule = 256;

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

inline std::ostream& operator<<(std::ostream& os, const ScriptedOracle::Wait& w) {
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
inline std::string StatsString(const PoolStats& s) {
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

inline VectorClock Done(std::initializer_list<std::pair<StreamIndex, Position>> entries) {
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

static_assert(kIsPhysicalMemory<ScriptedMemory>);

}  // namespace streampool::internal

#endif  // STREAMPOOL_TESTS_POOL_MEM_POOL_FIXTURE_H_
