// Page-level mapping shared by the huge-page and DVPP upstreams: obtain
// `bytes` of memory (optionally at a fixed address inside a reservation)
// under a page policy, prefault it, and report what the system really gave.
#ifndef STREAMPOOL_SRC_MEMORY_PAGE_BACKING_H_
#define STREAMPOOL_SRC_MEMORY_PAGE_BACKING_H_

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"

namespace streampool::internal {

inline constexpr uint64_t kHugePageSize = uint64_t{2} << 20;

// Huge-page bytes a device may hold (models the reserve an Ascend device sets
// aside for huge pages, about 1940 MB on Atlas 200/300/500). Reservations
// beyond it fall back as their policy allows. Unlimited by default.
// Atomic: pools of a device grow under their own locks.
class HugePageBudget {
 public:
  void set_limit(uint64_t limit) { limit_.store(limit, std::memory_order_relaxed); }
  uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // Takes `bytes` if they fit under the limit.
  bool TryTake(uint64_t bytes) {
    const uint64_t limit = this->limit();
    uint64_t used = this->used();
    do {
      if (bytes > limit || used > limit - bytes) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void Give(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> limit_{UINT64_MAX};
  std::atomic<uint64_t> used_{0};
};

struct PageRequest {
  uint64_t bytes = 0;     // a multiple of 2 MiB
  void* fixed = nullptr;  // inside a PROT_NONE reservation we own, or null
  PagePolicy policy = PagePolicy::kHugeFirst;
  bool touchable = true;             // false: address space only, nothing mapped
  HugePageBudget* budget = nullptr;  // may be null (unlimited)
};

// Maps per policy:
//   HugeFirst   MAP_HUGETLB, else transparent huge pages (MADV_HUGEPAGE), else
//               normal pages;
//   HugeOnly    MAP_HUGETLB or ResourceExhausted;
//   NormalOnly  normal pages with MADV_NOHUGEPAGE.
// Huge-page memory is prefaulted so a shortage fails here, not as SIGBUS later.
// Byte counts come from the system (smaps AnonHugePages for THP). Without
// touchable memory nothing is mapped and bytes count under the first choice
// the budget allows.
absl::StatusOr<Mapping> MapPages(const PageRequest& req);
// Gives back a mapping from MapPages. With `keep_reserved` the range returns
// to PROT_NONE (it belongs to a reservation) instead of being unmapped.
void UnmapPages(const Mapping& m, bool keep_reserved, HugePageBudget* budget);

// Reserve-then-map helpers shared by the upstreams that can reserve.
// A PROT_NONE, MAP_NORESERVE range of `bytes` (whole 2 MiB granules) aligned
// to max(alignment, 2 MiB): address space only.
absl::StatusOr<void*> ReserveAddressRange(uint64_t bytes, uint64_t alignment);
void ReleaseAddressRange(void* base, uint64_t bytes);
// Normal anonymous pages at [addr, addr + bytes) inside a reservation; with
// `touchable` false nothing is mapped (address-only memory).
absl::StatusOr<Mapping> MapAnonymousAt(void* addr, uint64_t bytes, bool touchable);
// Returns [addr, addr + bytes) to PROT_NONE address space (its pages go back
// to the system; the range stays reserved).
void UnmapToReservation(void* addr, uint64_t bytes);

// Transparent huge-page bytes backing [base, base + bytes), from
// /proc/self/smaps; the range must be a whole mapping of its own.
uint64_t TransparentHugeBytes(const void* base, uint64_t bytes);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_MEMORY_PAGE_BACKING_H_
