// Every pool option in one place: what the C API's spMemPoolProps and pool
// attributes set, with its type and default.
#ifndef STREAMPOOL_POOL_PROPS_H_
#define STREAMPOOL_POOL_PROPS_H_

#include <cstdint>

namespace streampool {

enum class AllocationType {
  kDevice = 1,      // a simulated device; 256-B blocks
  kPinnedHost = 2,  // host memory usable from every device; 64-B blocks
  kHugePage = 3,    // 2 MiB huge pages, per PagePolicy
  kDvpp = 4,        // Ascend media memory: 128-B starts, ALIGN_UP(len,32)+32 sizing
};

enum class PagePolicy {
  kHugeFirst = 0,   // explicit huge pages, else transparent, else normal
  kHugeOnly = 1,    // explicit huge pages or a clean allocation error
  kNormalOnly = 2,  // normal pages, MADV_NOHUGEPAGE
};

struct PoolProps {
  AllocationType alloc_type = AllocationType::kDevice;
  // The device the pool's memory lives on (ignored for pinned host pools).
  int device = 0;
  // Upper bound on the pool's reserved bytes; 0 = the device's capacity.
  uint64_t max_size = 0;
  PagePolicy page_policy = PagePolicy::kHugeFirst;
  // IPC handle types the pool can be exported as; 0 = not exportable.
  unsigned handle_types = 0;
  // Size blocks by aclrtMalloc's rule, ALIGN_UP(len, 32) + 32 bytes, instead
  // of the type's own (Device and HugePage pools).
  bool acl_rounding = false;

  // Reuse policies (DESIGN.md "Serving MallocAsync"); all on by default, as
  // in CUDA.
  bool reuse_follow_event_dependencies = true;
  bool reuse_allow_opportunistic = true;
  bool reuse_allow_internal_dependencies = true;
  // Bytes the pool keeps reserved at synchronize calls; 0 releases every
  // wholly free chunk, UINT64_MAX never shrinks the pool.
  uint64_t release_threshold = 0;
};

}  // namespace streampool

#endif  // STREAMPOOL_POOL_PROPS_H_
