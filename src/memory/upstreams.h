// Factories for the upstreams that need runtime-owned state (the device's
// huge-page budget). The public factories in physical_memory.h cover the rest.
#ifndef STREAMPOOL_SRC_MEMORY_UPSTREAMS_H_
#define STREAMPOOL_SRC_MEMORY_UPSTREAMS_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "src/memory/page_backing.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"

namespace streampool::internal {

// 2 MiB pages per policy; `budget` (may be null) outlives the upstream.
std::unique_ptr<PhysicalMemory> NewHugePageUpstream(PagePolicy policy, bool touchable,
                                                    HugePageBudget* budget);
class DvppWindow;
// Chunks placed in `window` (the process's DVPP window), backed per policy;
// `window` and `budget` outlive the upstream.
std::unique_ptr<PhysicalMemory> NewDvppUpstream(PagePolicy policy, bool touchable,
                                                HugePageBudget* budget, DvppWindow& window);

// A DVPP address window: every DVPP pool of every runtime carves its chunks
// from one 16 GiB range, first fit at 2 MiB granularity, as the Ascend media
// units address only that much. The process has one (the runtime layer's
// Process owns it and hands it to the runtimes it makes); the address range
// is reserved at the first Take and kept for the window's life.
class DvppWindow {
 public:
  static constexpr uint64_t kSize = uint64_t{16} << 30;
  static constexpr uint64_t kGranule = uint64_t{2} << 20;

  DvppWindow();
  DvppWindow(const DvppWindow&) = delete;
  DvppWindow& operator=(const DvppWindow&) = delete;
  ~DvppWindow();

  // The lowest free range of `bytes` (a multiple of kGranule), or null.
  void* Take(uint64_t bytes);
  void Give(void* p, uint64_t bytes);
  uint64_t free_bytes() const;
  // The window's first byte (0 until the first Take reserved it).
  uintptr_t base() const { return base_.load(std::memory_order_acquire); }

 private:
  bool ReserveLocked();
  struct State;
  std::atomic<uintptr_t> base_{0};
  std::unique_ptr<State> state_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_MEMORY_UPSTREAMS_H_
