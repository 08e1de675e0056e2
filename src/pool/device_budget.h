// DeviceBudget: the bytes of one device, which its pools and its synchronous
// allocations draw on.
#ifndef STREAMPOOL_SRC_POOL_DEVICE_BUDGET_H_
#define STREAMPOOL_SRC_POOL_DEVICE_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace streampool::internal {

// Bytes of one device shared by its pools and synchronous allocations.
// Atomic: pools grow under their own locks, so two pools of a device may
// reserve at once.
class DeviceBudget {
 public:
  explicit DeviceBudget(uint64_t capacity) : capacity_(capacity) {}
  bool TryReserve(uint64_t bytes) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > capacity_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const uint64_t capacity_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_DEVICE_BUDGET_H_
