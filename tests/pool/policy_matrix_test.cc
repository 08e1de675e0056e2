// The three reuse switches (ReuseFollowEventDependencies,
// ReuseAllowOpportunistic, ReuseAllowInternalDependencies) in all eight
// combinations, against cross-stream scenarios that differ in what the pool
// can know about another stream's free: ordered before the allocating stream
// by an event, observed complete without any order, or neither; each with
// growth allowed or blocked (a pool whose maxSize is already reserved).
//
// The expected outcome follows docs/design.md's order of search:
//   1 same stream -- never applies here: the allocating stream has no frees
//     and, since each allocation is a whole 2 MiB chunk, there is no READY
//     memory either (an expandable pool's never-used reservation is READY but
//     unmapped, and only growth uses it);
//   2 events, 3 opportunistic, 4 grow, 5 internal dependency,
//   6 fail with nothing changed (failedAllocCount + 1, *ptr NULL).
//
// Part of the pool variants' conformance suite: the matrix runs for every
// allocation type on both backings with both growth modes
// (conformance_variants.h), and every outcome is the same in both: with
// growth allowed, an expandable pool maps the granule above the original
// free where a chunked pool maps a new chunk. (There, an observed free
// merges with the unmapped rest of the reservation, so rule 3's reuse is
// carved by the growth step, mapping nothing; it counts as opportunistic all
// the same.) "A whole 2 MiB chunk" is a request whose rule size is
// exactly 2 MiB (2 MiB - 32 for Dvpp); growth is blocked by maxSize, which
// bounds every variant alike (pinned host pools have no device capacity to
// block it).
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>

#include "gtest/gtest.h"
#include "streampool/mem_pool.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"
#include "tests/pool/conformance_variants.h"

namespace {

using streampool_test::AllPoolVariants;
using streampool_test::kChunk;  // one growth unit
using streampool_test::PoolVariant;

constexpr uint64_t kKernelNs = 1000;     // the original stream's kernel
constexpr uint64_t kLaterKernelNs = 10;  // the other stream's next kernel

// What the pool knows about the original stream's free when the other
// stream allocates.
enum class Order {
  kEventOrdered,         // an event recorded after the free is waited on; not complete
  kCompletedUnordered,   // host time is past the free; no order, no sync
  kIncompleteUnordered,  // neither
};

struct Scenario {
  const char* name;
  Order order;
  bool growth_allowed;  // false: the pool's maxSize (2 MiB) is already reserved
};

void PrintTo(const Scenario& sc, std::ostream* os) { *os << sc.name; }

constexpr Scenario kScenarios[] = {
    {"EventOrderedGrowthAllowed", Order::kEventOrdered, true},
    {"EventOrderedGrowthBlocked", Order::kEventOrdered, false},
    {"CompletedUnorderedGrowthAllowed", Order::kCompletedUnordered, true},
    {"CompletedUnorderedGrowthBlocked", Order::kCompletedUnordered, false},
    {"IncompleteUnorderedGrowthAllowed", Order::kIncompleteUnordered, true},
    {"IncompleteUnorderedGrowthBlocked", Order::kIncompleteUnordered, false},
};

struct Switches {
  bool follow;         // ReuseFollowEventDependencies
  bool opportunistic;  // ReuseAllowOpportunistic
  bool internal;       // ReuseAllowInternalDependencies
};

Switches SwitchesOf(int mask) { return {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0}; }

enum class Outcome { kEventDependency, kOpportunistic, kGrow, kInternalDependency, kFail };

std::ostream& operator<<(std::ostream& os, Outcome o) {
  switch (o) {
    case Outcome::kEventDependency:
      return os << "event-dependency";
    case Outcome::kOpportunistic:
      return os << "opportunistic";
    case Outcome::kGrow:
      return os << "grow";
    case Outcome::kInternalDependency:
      return os << "internal-dependency";
    case Outcome::kFail:
      return os << "fail";
  }
  return os << "?";
}

// The first rule of the order of search that applies.
Outcome Expected(const Scenario& sc, const Switches& sw) {
  if (sw.follow && sc.order == Order::kEventOrdered) return Outcome::kEventDependency;  // 2
  if (sw.opportunistic && sc.order == Order::kCompletedUnordered) {
    return Outcome::kOpportunistic;  // 3
  }
  if (sc.growth_allowed) return Outcome::kGrow;          // 4
  if (sw.internal) return Outcome::kInternalDependency;  // 5
  return Outcome::kFail;                                 // 6
}

// Every field of spMemPoolStats, so a failure names what differs.
void ExpectSameStats(const spMemPoolStats& a, const spMemPoolStats& b) {
#define SP_EXPECT_FIELD(f) EXPECT_EQ(a.f, b.f) << #f
  SP_EXPECT_FIELD(reservedBytes);
  SP_EXPECT_FIELD(reservedHigh);
  SP_EXPECT_FIELD(usedBytes);
  SP_EXPECT_FIELD(usedHigh);
  SP_EXPECT_FIELD(allocCount);
  SP_EXPECT_FIELD(freeCount);
  SP_EXPECT_FIELD(failedAllocCount);
  SP_EXPECT_FIELD(reuseSameStream);
  SP_EXPECT_FIELD(reuseEventDependency);
  SP_EXPECT_FIELD(reuseOpportunistic);
  SP_EXPECT_FIELD(reuseAfterSync);
  SP_EXPECT_FIELD(reuseInternalDependency);
  SP_EXPECT_FIELD(waitsInserted);
  SP_EXPECT_FIELD(upstreamMaps);
  SP_EXPECT_FIELD(upstreamUnmaps);
  SP_EXPECT_FIELD(hugePageBytes);
  SP_EXPECT_FIELD(transparentHugePageBytes);
  SP_EXPECT_FIELD(normalPageBytes);
  SP_EXPECT_FIELD(largestFreeBlock);
#undef SP_EXPECT_FIELD
}

class PolicyMatrixTest : public ::testing::TestWithParam<std::tuple<PoolVariant, Scenario, int>> {
 protected:
  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.backing = std::get<0>(GetParam()).backing;
    ASSERT_EQ(spRuntimeCreate(&rt_, &cfg), spSuccess);
    auto cpp = streampool::Runtime::FromC(rt_);
    ASSERT_TRUE(cpp.ok()) << cpp.status();
    cpp_ = *std::move(cpp);
  }
  void TearDown() override {
    if (pool_ != nullptr) {
      EXPECT_TRUE(cpp_->CheckPoolInvariants(PoolId()).ok()) << "pool invariants broken";
    }
    EXPECT_EQ(spRuntimeDestroy(rt_), spSuccess);
  }

  streampool::PoolId PoolId() const {
    return {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pool_))};
  }
  spMemPoolStats Stats() {
    spMemPoolStats st = {};
    EXPECT_EQ(spMemPoolGetStats(pool_, &st), spSuccess);
    return st;
  }
  uint64_t FreshAllocs() {
    auto st = cpp_->GetPoolStats(PoolId());
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->fresh_allocs : 0;
  }
  uint64_t Now() {
    uint64_t ns = 0;
    EXPECT_EQ(spHostNow(rt_, &ns), spSuccess);
    return ns;
  }

  spRuntime_t rt_ = nullptr;
  std::unique_ptr<streampool::Runtime> cpp_;
  spMemPool_t pool_ = nullptr;
};

TEST_P(PolicyMatrixTest, CrossStreamDecision) {
  const PoolVariant& variant = std::get<0>(GetParam());
  const Scenario& sc = std::get<1>(GetParam());
  const Switches sw = SwitchesOf(std::get<2>(GetParam()));
  // A request filling one chunk exactly.
  const uint64_t len = variant.LenOccupying(kChunk);
  ASSERT_EQ(variant.RuleSize(len), kChunk);
  const Outcome expected = Expected(sc, sw);
  SCOPED_TRACE(::testing::Message() << "expected outcome: " << expected);

  const spMemPoolProps props = variant.Props(sc.growth_allowed ? 0 : kChunk);
  ASSERT_EQ(spMemPoolCreate(&pool_, rt_, &props), spSuccess);
  variant.Configure(pool_);
  int v = sw.follow;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolReuseFollowEventDependencies, &v), spSuccess);
  v = sw.opportunistic;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolReuseAllowOpportunistic, &v), spSuccess);
  v = sw.internal;
  ASSERT_EQ(spMemPoolSetAttribute(pool_, spMemPoolReuseAllowInternalDependencies, &v), spSuccess);

  spStream_t original = nullptr;
  spStream_t other = nullptr;
  spEvent_t event = nullptr;
  ASSERT_EQ(spStreamCreate(&original, rt_, 0, spStreamDefault), spSuccess);
  ASSERT_EQ(spStreamCreate(&other, rt_, 0, spStreamDefault), spSuccess);
  ASSERT_EQ(spEventCreate(&event, rt_), spSuccess);

  // The original stream allocates a whole chunk, uses it for 1000 ns and
  // frees it: the free point completes at t = 1000.
  void* p = nullptr;
  ASSERT_EQ(spMallocFromPoolAsync(&p, len, pool_, original), spSuccess);
  const spAccess use = {p, len, 1};
  ASSERT_EQ(spLaunchKernel(original, kKernelNs, &use, 1), spSuccess);
  ASSERT_EQ(spFreeAsync(p, original), spSuccess);
  switch (sc.order) {
    case Order::kEventOrdered:
      ASSERT_EQ(spEventRecord(event, original), spSuccess);
      ASSERT_EQ(spStreamWaitEvent(other, event), spSuccess);
      break;
    case Order::kCompletedUnordered:
      ASSERT_EQ(spHostAdvance(rt_, kKernelNs), spSuccess);
      break;
    case Order::kIncompleteUnordered:
      break;
  }

  const spMemPoolStats before = Stats();
  const uint64_t fresh_before = FreshAllocs();
  ASSERT_EQ(before.reservedBytes, kChunk);
  ASSERT_EQ(before.usedBytes, 0u);

  void* q = &q;  // a failed allocation must write NULL
  const spError_t err = spMallocFromPoolAsync(&q, len, pool_, other);
  spMemPoolStats after = Stats();

  if (expected == Outcome::kFail) {
    EXPECT_EQ(err, spErrorMemoryAllocation);
    EXPECT_EQ(q, nullptr);
    EXPECT_EQ(after.failedAllocCount, before.failedAllocCount + 1);
    after.failedAllocCount = before.failedAllocCount;
    ExpectSameStats(after, before);
    EXPECT_EQ(FreshAllocs(), fresh_before);
  } else {
    ASSERT_EQ(err, spSuccess);
    ASSERT_NE(q, nullptr);
    const bool grew = expected == Outcome::kGrow;
    if (grew) {
      EXPECT_NE(q, p) << "growth maps new memory";
    } else {
      EXPECT_EQ(q, p) << "reuse of the original stream's free";
    }
    // Exactly one rule counted, and only what that rule does.
    EXPECT_EQ(after.allocCount, before.allocCount + 1);
    EXPECT_EQ(after.reuseSameStream, before.reuseSameStream);
    EXPECT_EQ(after.reuseAfterSync, before.reuseAfterSync);
    EXPECT_EQ(after.reuseEventDependency,
              before.reuseEventDependency + (expected == Outcome::kEventDependency));
    EXPECT_EQ(after.reuseOpportunistic,
              before.reuseOpportunistic + (expected == Outcome::kOpportunistic));
    EXPECT_EQ(after.reuseInternalDependency,
              before.reuseInternalDependency + (expected == Outcome::kInternalDependency));
    EXPECT_EQ(FreshAllocs(), fresh_before + grew);
    EXPECT_EQ(after.waitsInserted,
              before.waitsInserted + (expected == Outcome::kInternalDependency));
    EXPECT_EQ(after.upstreamMaps, before.upstreamMaps + grew);
    EXPECT_EQ(after.failedAllocCount, before.failedAllocCount);
    EXPECT_EQ(after.reservedBytes, grew ? 2 * kChunk : kChunk);
    EXPECT_EQ(after.usedBytes, kChunk);
  }

  // The other stream's next kernel starts after the original's free only if
  // something ordered it so: the user's event wait, or the inserted wait.
  const spAccess later_use = {q, len, 1};
  ASSERT_EQ(spLaunchKernel(other, kLaterKernelNs, &later_use, q == nullptr ? 0 : 1), spSuccess);
  ASSERT_EQ(spStreamSynchronize(other), spSuccess);
  const bool after_free =
      sc.order != Order::kIncompleteUnordered || expected == Outcome::kInternalDependency;
  EXPECT_EQ(Now(), after_free ? kKernelNs + kLaterKernelNs : kLaterKernelNs);
  if (q != nullptr) {
    EXPECT_EQ(spFreeAsync(q, other), spSuccess);
  }
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<PoolVariant, Scenario, int>>& info) {
  const Switches sw = SwitchesOf(std::get<2>(info.param));
  return std::get<0>(info.param).Name() + "_" + std::get<1>(info.param).name + "_Follow" +
         (sw.follow ? "On" : "Off") + "_Opportunistic" + (sw.opportunistic ? "On" : "Off") +
         "_Internal" + (sw.internal ? "On" : "Off");
}

INSTANTIATE_TEST_SUITE_P(AllSwitches, PolicyMatrixTest,
                         ::testing::Combine(::testing::ValuesIn(AllPoolVariants()),
                                            ::testing::ValuesIn(kScenarios),
                                            ::testing::Range(0, 8)),
                         CaseName);

// The switches default to on (as in CUDA) and read back as exactly 0 or 1
// whatever non-zero int was written: in a device's default pool, and in a
// new pool of every variant.
void ExpectSwitchesDefaultOnAndReadBackAsZeroOrOne(spMemPool_t pool) {
  for (spMemPoolAttr attr :
       {spMemPoolReuseFollowEventDependencies, spMemPoolReuseAllowOpportunistic,
        spMemPoolReuseAllowInternalDependencies}) {
    int v = -1;
    ASSERT_EQ(spMemPoolGetAttribute(pool, attr, &v), spSuccess);
    EXPECT_EQ(v, 1) << "attribute " << attr << " defaults on";
    v = 7;
    ASSERT_EQ(spMemPoolSetAttribute(pool, attr, &v), spSuccess);
    ASSERT_EQ(spMemPoolGetAttribute(pool, attr, &v), spSuccess);
    EXPECT_EQ(v, 1);
    v = 0;
    ASSERT_EQ(spMemPoolSetAttribute(pool, attr, &v), spSuccess);
    v = -1;
    ASSERT_EQ(spMemPoolGetAttribute(pool, attr, &v), spSuccess);
    EXPECT_EQ(v, 0);
  }
}

TEST(PolicySwitches, DefaultOnAndReadBackAsZeroOrOne) {
  spRuntime_t rt = nullptr;
  ASSERT_EQ(spRuntimeCreate(&rt, nullptr), spSuccess);
  spMemPool_t pool = nullptr;
  ASSERT_EQ(spDeviceGetDefaultMemPool(&pool, rt, 0), spSuccess);
  ExpectSwitchesDefaultOnAndReadBackAsZeroOrOne(pool);
  EXPECT_EQ(spRuntimeDestroy(rt), spSuccess);
}

class PolicySwitchesOfVariant : public ::testing::TestWithParam<PoolVariant> {};

TEST_P(PolicySwitchesOfVariant, DefaultOnAndReadBackAsZeroOrOne) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.backing = GetParam().backing;
  spRuntime_t rt = nullptr;
  ASSERT_EQ(spRuntimeCreate(&rt, &cfg), spSuccess);
  const spMemPoolProps props = GetParam().Props(0);
  spMemPool_t pool = nullptr;
  ASSERT_EQ(spMemPoolCreate(&pool, rt, &props), spSuccess);
  ExpectSwitchesDefaultOnAndReadBackAsZeroOrOne(pool);
  EXPECT_EQ(spRuntimeDestroy(rt), spSuccess);
}

INSTANTIATE_TEST_SUITE_P(Variants, PolicySwitchesOfVariant, ::testing::ValuesIn(AllPoolVariants()),
                         streampool_test::VariantName);

}  // namespace
