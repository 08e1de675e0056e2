// DirectMemory: synchronous allocations straight from an upstream — whole
// pages charged to a budget, given back exactly once, and found by any byte.
#include "src/runtime/direct_memory.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {
namespace {

class DirectMemoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<PhysicalMemory> upstream_ = NewHostMemory();
  DeviceBudget budget_{64 * 1024};
  DirectMemory direct_;
};

TEST_F(DirectMemoryTest, ChargesWholePagesAndGivesThemBack) {
  absl::StatusOr<void*> p = direct_.Allocate(5000, 0, *upstream_, budget_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % DirectMemory::kGranularity, 0u);
  EXPECT_EQ(budget_.used(), 2 * DirectMemory::kGranularity);
  std::memset(*p, 1, 8192);  // both pages are mapped
  const auto base = reinterpret_cast<uintptr_t>(*p);
  ASSERT_EQ(direct_.DeviceOf(base), std::optional<int>(0));
  std::optional<DirectMemory::Allocation> a = direct_.Take(base);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->requested, 5000u);
  EXPECT_FALSE(direct_.DeviceOf(base).has_value()) << "taken: no longer live";
  EXPECT_FALSE(direct_.Take(base).has_value()) << "taken once only";
  EXPECT_EQ(budget_.used(), 2 * DirectMemory::kGranularity) << "charged until unmapped";
  DirectMemory::Unmap(*a);
  EXPECT_EQ(budget_.used(), 0u);
}

TEST_F(DirectMemoryTest, ARefusedAllocationKeepsNothing) {
  EXPECT_EQ(direct_.Allocate(64 * 1024 + 1, 0, *upstream_, budget_).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(direct_.Allocate(UINT64_MAX, 0, *upstream_, budget_).status().code(),
            absl::StatusCode::kResourceExhausted)
      << "rounding up would overflow";
  EXPECT_EQ(budget_.used(), 0u);
  uintptr_t base = 0;
  EXPECT_EQ(direct_.Containing(0x1000, &base), nullptr);
}

TEST_F(DirectMemoryTest, AnyByteFindsItsAllocation) {
  absl::StatusOr<void*> a = direct_.Allocate(100, -1, *upstream_, budget_);
  absl::StatusOr<void*> b = direct_.Allocate(4096, 1, *upstream_, budget_);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto pa = reinterpret_cast<uintptr_t>(*a);
  uintptr_t base = 0;
  const DirectMemory::Allocation* found = direct_.Containing(pa + 4095, &base);
  ASSERT_NE(found, nullptr) << "the page past the requested bytes is still the allocation's";
  EXPECT_EQ(base, pa);
  EXPECT_EQ(found->device, -1);
  const auto pb = reinterpret_cast<uintptr_t>(*b);
  found = direct_.Containing(pb + 4095, &base);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->device, 1);
  if (pb != pa + 4096) {
    EXPECT_EQ(direct_.Containing(pa + 4096, &base), nullptr);
  }
  direct_.UnmapAll();
  EXPECT_EQ(budget_.used(), 0u);
  EXPECT_EQ(direct_.Containing(pa, &base), nullptr);
}

}  // namespace
}  // namespace streampool::internal
