// PoolTable: handles of pools of each kind, their death at Remove, draining
// of a destroyed pool that still holds memory, and its reaping once proven
// complete.
#include "src/runtime/pool_table.h"

#include <cstdint>
#include <memory>
#include <utility>

#include "gtest/gtest.h"
#include "src/ordering/oracle.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {
namespace {

constexpr uint64_t kGranule = uint64_t{2} << 20;

// Every stream's frees are unordered and unobserved: only rule 0 applies.
class NoOrderOracle final : public OrderOracle {
 public:
  explicit NoOrderOracle(StreamIndex t) : t_(t) {}
  StreamIndex stream() const override { return t_; }
  Position OrderedAfter(StreamIndex) const override { return 0; }
  Position ObservedComplete(StreamIndex) const override { return 0; }
  void InsertWait(StreamIndex, Position) override {}

 private:
  StreamIndex t_;
};

class PoolTableTest : public ::testing::Test {
 protected:
  PoolTable::PoolRec LocalRec() {
    PoolTable::PoolRec rec;
    rec.kind = PoolTable::LocalPool{
        std::make_unique<MemPool>(PoolProps{}, SizeRule{SizeRule::Kind::kRound, 256},
                                  uint64_t{1} << 30, upstream_, &budget_)};
    return rec;
  }

  // A new pool's handle and its first block of 1000 bytes, on stream 1.
  std::pair<uint64_t, Block*> PoolWithABlock() {
    absl::StatusOr<uint64_t> h = table_.Add(LocalRec());
    EXPECT_TRUE(h.ok());
    NoOrderOracle oracle(1);
    absl::StatusOr<MemPool::Allocation> a = table_.FindFast(*h)->Allocate(1000, oracle);
    EXPECT_TRUE(a.ok());
    return {*h, a->block};
  }
  int MemPoolCount() {
    int pools = 0;
    table_.ForEachMemPool([&](MemPool&) { ++pools; });
    return pools;
  }

  std::shared_ptr<PhysicalMemory> upstream_ = NewHostMemory();
  DeviceBudget budget_{uint64_t{1} << 30};
  PoolTable table_{7};
};

TEST_F(PoolTableTest, HandlesFindTheirPoolUntilRemoved) {
  absl::StatusOr<uint64_t> h = table_.Add(LocalRec());
  ASSERT_TRUE(h.ok());
  absl::StatusOr<PoolTable::PoolRec*> rec = table_.Find(*h);
  ASSERT_TRUE(rec.ok());
  EXPECT_NE((*rec)->mem(), nullptr);
  EXPECT_EQ((*rec)->exportable(), nullptr);
  EXPECT_EQ((*rec)->imported(), nullptr);
  EXPECT_EQ(table_.FindFast(*h), (*rec)->mem());
  EXPECT_EQ(table_.Find(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Find(*h + 1).status().code(), absl::StatusCode::kNotFound);
  table_.Remove(*h);
  EXPECT_EQ(table_.Find(*h).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_.FindFast(*h), nullptr);
  // The slot comes back under a new generation: the old handle stays dead.
  absl::StatusOr<uint64_t> again = table_.Add(LocalRec());
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, *h);
  EXPECT_EQ(table_.Find(*h).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(table_.Find(*again).ok());
}

TEST_F(PoolTableTest, ARemovedPoolDrainsUntilItsFreesAreProven) {
  const auto [h, block] = PoolWithABlock();
  MemPool* pool = table_.FindFast(h);
  EXPECT_EQ(budget_.used(), kGranule);
  table_.Remove(h);
  EXPECT_EQ(MemPoolCount(), 1) << "draining: its allocation is live";
  EXPECT_EQ(budget_.used(), kGranule);
  pool->FreeAsync(block, 1, 5);
  VectorClock done;
  done.Raise(1, 4);
  table_.AfterCompletion(done, /*release=*/true);
  EXPECT_EQ(MemPoolCount(), 1) << "the free at 5 is not proven by 4";
  done.Raise(1, 5);
  table_.AfterCompletion(done, /*release=*/true);
  EXPECT_EQ(MemPoolCount(), 0) << "reaped once empty";
  EXPECT_EQ(budget_.used(), 0u) << "its memory went back";
}

TEST_F(PoolTableTest, ReleaseAtSyncSparesNothingButThreshold) {
  const auto [h, block] = PoolWithABlock();
  MemPool* pool = table_.FindFast(h);
  pool->FreeAsync(block, 1, 1);
  VectorClock done;
  done.Raise(1, 1);
  table_.AfterCompletion(done, /*release=*/false);
  EXPECT_EQ(pool->reserved(), kGranule) << "a query promotes but never releases";
  table_.AfterCompletion(done, /*release=*/true);
  EXPECT_EQ(pool->reserved(), 0u) << "a sync action releases above the threshold (0)";
}

}  // namespace
}  // namespace streampool::internal
