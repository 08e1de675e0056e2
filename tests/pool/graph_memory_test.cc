// GraphMemory (src/pool/graph_memory.h) against a scripted oracle: memory
// stays behind an allocation's address from launch to launch, moves to
// another address only when the oracle shows the free ordered before or
// complete, and goes back at a trim once nothing live needs it.
#include "src/pool/graph_memory.h"

#include <memory>

#include "gtest/gtest.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

class ScriptedOracle final : public OrderOracle {
 public:
  explicit ScriptedOracle(StreamIndex t) : t_(t) {}
  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex s) const override { return s < 8 ? ordered[s] : 0; }
  Position ObservedComplete(StreamIndex s) const override { return s < 8 ? complete[s] : 0; }
  void InsertWait(StreamIndex, Position) override {}
  Position ordered[8] = {};
  Position complete[8] = {};

 private:
  StreamIndex t_;
};

class GraphMemoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<PhysicalMemory> upstream_ = NewAddressOnlyMemory();
  DeviceBudget budget_{uint64_t{1} << 40};
  GraphMemory mem_{*upstream_, budget_};
};

TEST_F(GraphMemoryTest, RangesAreReservedWithoutMemory) {
  absl::StatusOr<void*> a = mem_.Reserve(3 * kMiB);
  ASSERT_TRUE(a.ok());
  void* base = nullptr;
  const GraphMemory::Range* r = mem_.Find(static_cast<char*>(*a) + kMiB, &base);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(base, *a);
  EXPECT_EQ(r->size, 4 * kMiB);  // 2 MiB pages
  EXPECT_EQ(mem_.stats().reserved_current, 0u);
  EXPECT_FALSE(mem_.Reserve(0).ok());
  mem_.CheckInvariants();
  mem_.Release(*a);
}

TEST_F(GraphMemoryTest, MemoryMovesOnlyAfterAnOrderedOrCompleteFree) {
  void* a = *mem_.Reserve(2 * kMiB);
  void* b = *mem_.Reserve(2 * kMiB);
  ScriptedOracle on1(1);
  ASSERT_TRUE(mem_.Back(a, on1, {}).ok());
  ASSERT_TRUE(mem_.Allocate(a, 2 * kMiB).ok());
  EXPECT_FALSE(mem_.Allocate(a, 2 * kMiB).ok());  // live
  ASSERT_TRUE(mem_.Free(a, 1, 10).ok());
  // Stream 2 knows nothing of (1, 10): b needs memory of its own.
  ScriptedOracle on2(2);
  ASSERT_TRUE(mem_.Back(b, on2, {}).ok());
  EXPECT_EQ(mem_.stats().reserved_current, 4 * kMiB);
  ASSERT_TRUE(mem_.Allocate(b, 2 * kMiB).ok());
  ASSERT_TRUE(mem_.Free(b, 2, 5).ok());
  mem_.Trim([](StreamIndex, Position) { return false; });
  EXPECT_EQ(mem_.stats().reserved_current, 4 * kMiB);  // nothing known complete
  mem_.Trim([](StreamIndex s, Position) { return s == 2; });
  EXPECT_EQ(mem_.stats().reserved_current, 2 * kMiB);
  // Now ordered after (1, 10): b takes a's memory, the total stays.
  on2.ordered[1] = 10;
  ASSERT_TRUE(mem_.Back(b, on2, {}).ok());
  EXPECT_EQ(mem_.stats().reserved_current, 2 * kMiB);
  EXPECT_EQ(mem_.stats().reserved_high, 4 * kMiB);
  mem_.CheckInvariants();
  mem_.Release(a);
  mem_.Release(b);
  mem_.CheckInvariants();
}

TEST_F(GraphMemoryTest, KeptRangesDoNotGiveTheirMemory) {
  void* a = *mem_.Reserve(2 * kMiB);
  void* b = *mem_.Reserve(2 * kMiB);
  ScriptedOracle on1(1);
  ASSERT_TRUE(mem_.Back(a, on1, {}).ok());
  void* keep[] = {a, b};
  ASSERT_TRUE(mem_.Back(b, on1, keep).ok());
  EXPECT_EQ(mem_.stats().reserved_current, 4 * kMiB);
  mem_.Release(a);
  mem_.Release(b);
}

TEST_F(GraphMemoryTest, AnUnreferencedMappedRangeStaysReservedUntilTrimmed) {
  void* a = *mem_.Reserve(2 * kMiB);
  ScriptedOracle on1(1);
  ASSERT_TRUE(mem_.Back(a, on1, {}).ok());
  ASSERT_TRUE(mem_.Allocate(a, kMiB).ok());
  ASSERT_TRUE(mem_.Free(a, kNoStream, 0).ok());
  mem_.Release(a);
  EXPECT_EQ(mem_.stats().used_current, 0u);
  EXPECT_EQ(mem_.stats().reserved_current, 2 * kMiB);
  mem_.CheckInvariants();
  mem_.Trim([](StreamIndex, Position) { return true; });
  EXPECT_EQ(mem_.stats().reserved_current, 0u);
  EXPECT_EQ(mem_.Find(a), nullptr);
  mem_.CheckInvariants();
}

TEST_F(GraphMemoryTest, ExhaustionChangesNothing) {
  DeviceBudget small(2 * kMiB);
  GraphMemory mem(*upstream_, small);
  void* a = *mem.Reserve(2 * kMiB);
  void* b = *mem.Reserve(2 * kMiB);
  ScriptedOracle on1(1);
  ASSERT_TRUE(mem.Back(a, on1, {}).ok());
  ASSERT_TRUE(mem.Allocate(a, kMiB).ok());
  const GraphMemStats before = mem.stats();
  EXPECT_TRUE(absl::IsResourceExhausted(mem.Back(b, on1, {})));
  EXPECT_EQ(mem.stats().reserved_current, before.reserved_current);
  EXPECT_EQ(small.used(), 2 * kMiB);
  mem.CheckInvariants();
  ASSERT_TRUE(mem.Free(a, 1, 1).ok());
  ASSERT_TRUE(mem.Back(b, on1, {}).ok());  // same stream: a's memory moves
  EXPECT_EQ(small.used(), 2 * kMiB);
  mem.Release(a);
  mem.Release(b);
}

}  // namespace
}  // namespace streampool::internal
