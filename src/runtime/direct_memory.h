// Synchronous allocations (spMalloc, spMallocHost): the upstream alone, with
// no pool in between, as cudaMalloc and cudaMallocHost are. Each allocation
// maps its own pages and charges its budget; a free unmaps them, at once
// (spFree, spFreeHost) or when a stream-ordered free executes.
#ifndef STREAMPOOL_SRC_RUNTIME_DIRECT_MEMORY_H_
#define STREAMPOOL_SRC_RUNTIME_DIRECT_MEMORY_H_

#include <cstdint>
#include <optional>

#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "src/pool/mem_pool.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {

class DirectMemory {
 public:
  // Pages are the unit: 4 KiB, so every allocation starts 64-B aligned (and
  // page aligned) and never shares a page with another.
  static constexpr uint64_t kGranularity = 4096;

  struct Allocation {
    Mapping mapping;
    int device = 0;  // -1: pinned host memory
    uint64_t requested = 0;
    PhysicalMemory* upstream = nullptr;
    DeviceBudget* budget = nullptr;
    // The runtime's count of synchronous allocations at this one (leak reports).
    uint64_t seq = 0;
  };

  DirectMemory() = default;
  DirectMemory(const DirectMemory&) = delete;
  DirectMemory& operator=(const DirectMemory&) = delete;
  // Whatever is still allocated goes back with the owner's teardown, through
  // UnmapAll; the upstreams must outlive this object until then.
  ~DirectMemory() = default;

  // Maps `size` bytes (rounded up to pages) from `upstream`, charged to
  // `budget`, for `device`. ResourceExhausted when either refuses; nothing is
  // kept then. `upstream` and `budget` must outlive the allocation.
  absl::StatusOr<void*> Allocate(uint64_t size, int device, PhysicalMemory& upstream,
                                 DeviceBudget& budget);
  // Forgets the allocation starting at `base` and hands it to the caller, who
  // unmaps it (now, or when a stream-ordered free executes); nullopt if no
  // allocation starts there.
  std::optional<Allocation> Take(uintptr_t base);
  // The device an allocation starting at `base` belongs to (nullopt: none).
  std::optional<int> DeviceOf(uintptr_t base) const;
  // Unmaps and uncharges a taken allocation.
  static void Unmap(const Allocation& a);
  // The live allocation whose pages contain `addr`, and its base.
  const Allocation* Containing(uintptr_t addr, uintptr_t* base) const;
  // Unmaps every live allocation (teardown).
  void UnmapAll();
  // fn(base, allocation) for every live allocation, in address order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const auto& [base, a] : allocs_) fn(base, a);
  }

 private:
  absl::btree_map<uintptr_t, Allocation> allocs_;
  uint64_t allocated_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_DIRECT_MEMORY_H_
