// DeviceTable on its own: two upstreams made here stand in for the
// runtime's shared one and a CUDA device's native memory.
#include "src/runtime/device_table.h"

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {
namespace {

TEST(DeviceTableTest, EveryDeviceHasTheCapacityAndOnlyItsNumbersAreDevices) {
  DeviceTable devices(3, uint64_t{1} << 20);
  EXPECT_EQ(devices.count(), 3);
  for (int d = 0; d < 3; ++d) {
    EXPECT_TRUE(devices.Check(d).ok());
    EXPECT_EQ(devices[d].budget->capacity(), uint64_t{1} << 20);
    EXPECT_NE(devices[d].huge_budget, nullptr);
    EXPECT_EQ(devices.current_pool(d), 0u) << "no pool before the runtime makes one";
  }
  EXPECT_EQ(devices.Check(3).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(devices.Check(-1).code(), absl::StatusCode::kOutOfRange);
  devices.set_current_pool(2, 42);
  EXPECT_EQ(devices.current_pool(2), 42u);
  EXPECT_EQ(devices.current_pool(1), 0u);
  // Budgets are per device.
  ASSERT_TRUE(devices[0].budget->TryReserve(4096));
  EXPECT_EQ(devices[1].budget->used(), 0u);
}

TEST(DeviceTableTest, ADeviceMapsItsNativeMemoryElseTheUpstream) {
  DeviceTable devices(2, uint64_t{1} << 20);
  std::shared_ptr<PhysicalMemory> upstream = NewAddressOnlyMemory();
  std::shared_ptr<PhysicalMemory> native = NewAddressOnlyMemory();
  devices.set_upstream(upstream);
  devices[1].native_memory = native;
  EXPECT_EQ(&devices.Memory(0), upstream.get());
  EXPECT_EQ(&devices.Memory(1), native.get());
  EXPECT_EQ(devices.upstream(), upstream);
}

TEST(DeviceTableTest, TheHostBudgetIsUnbounded) {
  DeviceTable devices(1, 4096);
  EXPECT_EQ(devices.host_budget().capacity(), UINT64_MAX);
  EXPECT_TRUE(devices.host_budget().TryReserve(uint64_t{1} << 40));
}

}  // namespace
}  // namespace streampool::internal
