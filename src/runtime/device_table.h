// DeviceTable: a runtime's devices and the memory they draw on.
//
// Contract. It has a fixed number of devices from its creation, each with its
// byte budget (the capacity every device of the runtime has), its huge-page
// budget, optionally a native memory (a CUDA runtime's), its legacy stream and
// default pool once the runtime has made them, and its current pool. Check
// answers whether a device number is one of them, as an error value for the
// caller's bad input. Memory(d) is what device d's pools and synchronous
// allocations map: its native memory, else the table's shared upstream. Host
// pinned pools draw on an unbounded host budget. It makes no handles and takes
// no lock: its fields are written under the runtime's lock while it starts,
// but current_pool, which the fast path reads lock-free.
#ifndef STREAMPOOL_SRC_RUNTIME_DEVICE_TABLE_H_
#define STREAMPOOL_SRC_RUNTIME_DEVICE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "src/memory/page_backing.h"
#include "src/pool/device_budget.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {

class DeviceTable {
 public:
  struct Device {
    std::unique_ptr<DeviceBudget> budget;
    std::unique_ptr<HugePageBudget> huge_budget;
    // A CUDA runtime's device memory (VMM reservations, cuMemAlloc chunks);
    // null elsewhere, where the upstream serves every device.
    std::shared_ptr<PhysicalMemory> native_memory;
    uint64_t legacy_stream = 0;  // handle
    uint64_t default_pool = 0;   // handle
    // Written under the lock, read lock-free by the fast path.
    std::atomic<uint64_t> current_pool{0};  // handle
  };

  DeviceTable(int count, uint64_t capacity);
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;

  int count() const { return count_; }
  // OutOfRange unless 0 <= device < count().
  absl::Status Check(int device) const;
  Device& operator[](int device) { return devices_[device]; }
  const Device& operator[](int device) const { return devices_[device]; }
  // The pool a device's allocations without one come from: read lock-free
  // (the fast path) ...
  uint64_t current_pool(int device) const {
    return devices_[device].current_pool.load(std::memory_order_acquire);
  }
  // ... and set under the runtime's lock.
  void set_current_pool(int device, uint64_t pool) {
    devices_[device].current_pool.store(pool, std::memory_order_release);
  }

  // What devices without native memory map (host pages or address space).
  const std::shared_ptr<PhysicalMemory>& upstream() const { return upstream_; }
  void set_upstream(std::shared_ptr<PhysicalMemory> upstream) { upstream_ = std::move(upstream); }
  PhysicalMemory& Memory(int device) {
    return devices_[device].native_memory ? *devices_[device].native_memory : *upstream_;
  }
  // Pinned host pools' bytes: bounded only by their maxSize and the system.
  DeviceBudget& host_budget() { return host_budget_; }

 private:
  const int count_;
  std::unique_ptr<Device[]> devices_;
  std::shared_ptr<PhysicalMemory> upstream_;
  DeviceBudget host_budget_{UINT64_MAX};
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_DEVICE_TABLE_H_
