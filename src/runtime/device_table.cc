#include "src/runtime/device_table.h"

#include "absl/strings/str_cat.h"

namespace streampool::internal {

DeviceTable::DeviceTable(int count, uint64_t capacity)
    : count_(count), devices_(std::make_unique<Device[]>(count)) {
  for (int d = 0; d < count; ++d) {
    devices_[d].budget = std::make_unique<DeviceBudget>(capacity);
    devices_[d].huge_budget = std::make_unique<HugePageBudget>();
  }
}

absl::Status DeviceTable::Check(int device) const {
  if (device < 0 || device >= count_) {
    return absl::OutOfRangeError(
        absl::StrCat("device ", device, " out of range [0, ", count_, ")"));
  }
  return absl::OkStatus();
}

}  // namespace streampool::internal
