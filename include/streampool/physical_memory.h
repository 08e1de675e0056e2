// Upstreams: where a pool's chunks come from.
//
// A PhysicalMemory hands out whole mappings and takes them back; pools carve
// blocks out of them. Every upstream promises:
//  * Map(bytes) returns a mapping of exactly `bytes` bytes (bytes is a
//    multiple of 4 KiB), page aligned, or an error with nothing left mapped;
//  * Unmap takes back exactly a mapping Map returned, once;
//  * the byte counts of a mapping by page kind sum to its size;
//  * it is used under its owner's lock (no internal locking required).
#ifndef STREAMPOOL_PHYSICAL_MEMORY_H_
#define STREAMPOOL_PHYSICAL_MEMORY_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "streampool/pool_props.h"

namespace streampool {

struct Mapping {
  void* base = nullptr;
  uint64_t size = 0;
  // How the mapping is backed, as far as the system tells; bytes not known to
  // be on huge pages count as normal.
  uint64_t huge_page_bytes = 0;
  uint64_t transparent_huge_page_bytes = 0;
  uint64_t normal_page_bytes = 0;
};

class PhysicalMemory {
 public:
  virtual ~PhysicalMemory() = default;
  virtual absl::StatusOr<Mapping> Map(uint64_t bytes) = 0;
  virtual void Unmap(const Mapping& mapping) = 0;
  // Whether the host may read and write the memory (false for address-only
  // reservations).
  virtual bool touchable() const = 0;
  virtual const char* name() const = 0;
};

// Anonymous private mmap: real, touchable memory, faulted in on first touch.
std::unique_ptr<PhysicalMemory> NewHostMemory();
// PROT_NONE reservations: address space only, never touched. Replays
// workloads larger than the machine's memory.
std::unique_ptr<PhysicalMemory> NewAddressOnlyMemory();
// 2 MiB pages per `policy` (see PagePolicy), prefaulted, with the bytes per
// page kind read back from the system. Not touchable: address space only,
// counted under the policy's first choice.
std::unique_ptr<PhysicalMemory> NewHugePageMemory(PagePolicy policy, bool touchable = true);

// User functions behind a pool: map returns `bytes` of memory aligned to at
// least 256 B (or null on failure); unmap takes back exactly what map gave.
struct UpstreamCallbacks {
  std::function<void*(uint64_t bytes)> map;
  std::function<void(void* base, uint64_t bytes)> unmap;
  // Whether the host may read and write the memory (copies and fills move
  // bytes only where it may).
  bool touchable = true;
};
// Null when either function is missing.
std::unique_ptr<PhysicalMemory> NewCallbackMemory(UpstreamCallbacks callbacks);

}  // namespace streampool

#endif  // STREAMPOOL_PHYSICAL_MEMORY_H_
