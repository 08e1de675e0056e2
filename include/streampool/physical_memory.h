/// \file
/// Upstreams: where a pool's memory comes from.
///
/// A PhysicalMemory hands out memory in one of two ways, and pools carve
/// blocks out of it:
///  * chunks: Map(bytes) returns a mapping of exactly `bytes` bytes (a
///    multiple of 4 KiB), page aligned, or an error with nothing left mapped;
///    Unmap takes back exactly a mapping Map returned, once;
///  * reserve-then-map (can_reserve() true; expandable pools): Reserve(bytes,
///    alignment) returns an address range with no memory behind it;
///    MapAt(addr, bytes) maps memory at a granule-aligned range inside a
///    reservation that is not mapped yet, or fails with nothing mapped;
///    UnmapAt takes back any granule-aligned part of what MapAt mapped (not
///    necessarily a whole MapAt range); ReleaseReservation gives the address
///    range back once nothing in it is mapped.
/// Every upstream promises that the byte counts of a mapping by page kind sum
/// to its size, and is used under its owner's lock (no internal locking
/// required).
#ifndef STREAMPOOL_PHYSICAL_MEMORY_H_
#define STREAMPOOL_PHYSICAL_MEMORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>

#include "absl/status/statusor.h"
#include "streampool/export.h"
#include "streampool/pool_props.h"

namespace streampool {

/// One mapping an upstream handed out: a page-aligned range and how it is
/// backed, as far as the system tells (bytes not known to be on huge pages
/// count as normal; the three counts sum to size).
struct Mapping {
  void* base = nullptr;                      ///< first byte
  uint64_t size = 0;                         ///< bytes
  uint64_t huge_page_bytes = 0;              ///< on explicit (hugetlbfs) huge pages
  uint64_t transparent_huge_page_bytes = 0;  ///< on transparent huge pages
  uint64_t normal_page_bytes = 0;            ///< on normal pages, or unknown

  /// A mapping of `size` bytes at `base`, all counted as normal pages (what
  /// an upstream reports when it knows nothing finer).
  static Mapping OfNormalPages(void* base, uint64_t size) {
    Mapping m;
    m.base = base;
    m.size = size;
    m.normal_page_bytes = size;
    return m;
  }
};

/// An upstream: the interface a pool maps its chunks from (promises in the
/// file comment). Implement it to put a pool on other memory, or use
/// NewCallbackMemory.
class STREAMPOOL_EXPORT PhysicalMemory {
 public:
  virtual ~PhysicalMemory() = default;
  /// Maps exactly `bytes` (a multiple of 4 KiB), page aligned; on error
  /// nothing stays mapped (kResourceExhausted when memory is short).
  virtual absl::StatusOr<Mapping> Map(uint64_t bytes) = 0;
  /// Takes back exactly a mapping Map returned, once.
  virtual void Unmap(const Mapping& mapping) = 0;
  /// Whether the host may read and write the memory (false for address-only
  /// reservations).
  virtual bool touchable() const = 0;
  /// A short name for reports ("host", "address-only", ...).
  virtual const char* name() const = 0;

  /// Whether Reserve / MapAt / UnmapAt / ReleaseReservation work (pools over
  /// an upstream that cannot reserve grow in chunks).
  virtual bool can_reserve() const { return false; }
  /// An address range of `bytes` (a multiple of 2 MiB) aligned to
  /// `alignment` (a power of two), with no memory behind it.
  virtual absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment);
  /// Maps memory at [addr, addr + bytes), a 2 MiB-aligned unmapped part of a
  /// reservation; on error nothing stays mapped.
  virtual absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes);
  /// Takes back a 2 MiB-aligned part of what MapAt mapped; `mapping` carries
  /// its byte counts by page kind.
  virtual void UnmapAt(const Mapping& mapping);
  /// Gives back a whole reservation, nothing of which is mapped.
  virtual void ReleaseReservation(void* base, uint64_t bytes);
};

/// Whether T implements PhysicalMemory: derived from it, with every pure
/// function defined. Each upstream is checked against it where it is
/// defined: static_assert(kIsPhysicalMemory<MyUpstream>).
template <typename T>
inline constexpr bool kIsPhysicalMemory =
    std::is_base_of_v<PhysicalMemory, T> && !std::is_abstract_v<T>;

/// Anonymous private mmap: real, touchable memory, faulted in on first touch.
STREAMPOOL_EXPORT std::unique_ptr<PhysicalMemory> NewHostMemory();
/// PROT_NONE reservations: address space only, never touched. Replays
/// workloads larger than the machine's memory.
STREAMPOOL_EXPORT std::unique_ptr<PhysicalMemory> NewAddressOnlyMemory();
/// 2 MiB pages per `policy` (see PagePolicy), prefaulted, with the bytes per
/// page kind read back from the system. With `touchable` false: address space
/// only, counted under the policy's first choice.
STREAMPOOL_EXPORT std::unique_ptr<PhysicalMemory> NewHugePageMemory(PagePolicy policy,
                                                                    bool touchable = true);

/// User functions behind a pool: map returns `bytes` of memory aligned to at
/// least 256 B (or null on failure); unmap takes back exactly what map gave.
struct UpstreamCallbacks {
  /// Returns `bytes` (a multiple of 2 MiB) aligned to at least 256 B, or null.
  std::function<void*(uint64_t bytes)> map;
  /// Takes back exactly what map returned.
  std::function<void(void* base, uint64_t bytes)> unmap;
  /// Whether the host may read and write the memory (copies and fills move
  /// bytes only where it may).
  bool touchable = true;
};
/// An upstream over `callbacks`, for Runtime::CreatePool(props, upstream).
/// Null when either function is missing: check before making a pool over
/// it. Pools over it grow in chunks; a null from map fails the allocation
/// (kResourceExhausted) with a message saying the upstream refused.
STREAMPOOL_EXPORT std::unique_ptr<PhysicalMemory> NewCallbackMemory(UpstreamCallbacks callbacks);

/// User functions behind an expandable pool, the VMM pattern of CUDA
/// (cuMemAddressReserve / cuMemCreate + cuMemMap) and CANN
/// (aclrtReserveMemAddress / aclrtMallocPhysical + aclrtMapMem).
struct VmmCallbacks {
  /// An address range of `bytes` aligned to `alignment`, or null.
  std::function<void*(uint64_t bytes, uint64_t alignment)> reserve;
  /// Backs [addr, addr + bytes) (2 MiB multiples inside a reservation);
  /// true on success, and on failure nothing of the range stays mapped.
  std::function<bool(void* addr, uint64_t bytes)> map;
  /// Takes back a 2 MiB-aligned part of what map backed.
  std::function<void(void* addr, uint64_t bytes)> unmap;
  /// Gives back a whole reservation (nothing mapped in it any more).
  std::function<void(void* base, uint64_t bytes)> release;
  /// Whether the host may read and write mapped memory.
  bool touchable = true;
};
/// A reserve-then-map upstream over `callbacks`. Null when any function is
/// missing: check before making a pool over it. A refused reservation or
/// map, or a reservation not aligned as asked (a break of reserve's
/// contract), fails the allocation (kResourceExhausted) with a message that
/// names which.
STREAMPOOL_EXPORT std::unique_ptr<PhysicalMemory> NewVmmCallbackMemory(VmmCallbacks callbacks);

}  // namespace streampool

#endif  // STREAMPOOL_PHYSICAL_MEMORY_H_
