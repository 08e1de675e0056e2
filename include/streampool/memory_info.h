/// \file
/// What the runtime tells about memory it handed out: the allocation a
/// pointer lies in, the rule that served an allocation, a device's free and
/// total bytes.
#ifndef STREAMPOOL_MEMORY_INFO_H_
#define STREAMPOOL_MEMORY_INFO_H_

#include <cstdint>

#include "streampool/ids.h"
#include "streampool/reuse_rule.h"

namespace streampool {

/// What Runtime::GetPointerAttributes tells about a pointer
/// (C: spPointerAttributes).
struct PointerAttributes {
  int device = -1;       ///< the pool's device; -1 for pinned host memory
  PoolId pool;           ///< value 0 for Malloc memory
  void* base = nullptr;  ///< start of the allocation
  uint64_t size = 0;     ///< its requested size
};

/// What the last allocation decided, for policy tests and benchmarks.
struct AllocInfo {
  void* ptr = nullptr;                 ///< the allocation (null for size 0)
  ReuseRule rule = ReuseRule::kFresh;  ///< which rule served it
};

/// A device's memory (Runtime::MemGetInfo).
struct DeviceMemInfo {
  uint64_t free = 0;   ///< capacity minus the bytes charged to the device
  uint64_t total = 0;  ///< the device's capacity
};

}  // namespace streampool

#endif  // STREAMPOOL_MEMORY_INFO_H_
