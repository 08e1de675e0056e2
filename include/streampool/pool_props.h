/// \file
/// Every pool option in one place: what the C API's spMemPoolProps and pool
/// attributes set, with its type and default.
#ifndef STREAMPOOL_POOL_PROPS_H_
#define STREAMPOOL_POOL_PROPS_H_

#include <cstdint>

#include "streampool/export.h"

namespace streampool {

/// What memory a pool hands out (C: spMemAllocationType); the type fixes the
/// block start alignment and the size rule (docs/design.md "Pool variants").
enum class AllocationType {
  kDevice = 1,      ///< a simulated device; 256-B blocks
  kPinnedHost = 2,  ///< host memory usable from every device; 64-B blocks
  kHugePage = 3,    ///< 2 MiB huge pages, per PagePolicy
  kDvpp = 4,        ///< Ascend media memory: 128-B starts, ALIGN_UP(len,32)+32 sizing
};

/// Which pages back HugePage and Dvpp pools (as ACL_MEM_MALLOC_HUGE_FIRST /
/// HUGE_ONLY / NORMAL_ONLY; C: spPagePolicy).
enum class PagePolicy {
  kHugeFirst = 0,   ///< explicit huge pages, else transparent, else normal
  kHugeOnly = 1,    ///< explicit huge pages or a clean allocation error
  kNormalOnly = 2,  ///< normal pages, MADV_NOHUGEPAGE
};

/// How a pool grows (C: spMemPoolProps.growth, docs/design.md "Block lifecycle").
enum class PoolGrowth {
  /// Expandable where the upstream can reserve, else chunked.
  kDefault = 0,
  /// Each growth maps ALIGN_UP(rule size, 2 MiB) as a chunk of its own;
  /// blocks never span chunks; chunks are the unit of release.
  kChunked = 1,
  /// One reserved address range (or several where address space is scarce)
  /// mapped in 2 MiB granules; free blocks coalesce across growths, release
  /// unmaps whole granules.
  kExpandable = 2,
};

/// The name of an allocation type ("device", "pinned_host", "huge_page",
/// "dvpp"), as the tools, reports and the Python package print it.
STREAMPOOL_EXPORT const char* AllocationTypeName(AllocationType type);

/// PoolProps::handle_types value that makes a pool exportable as a memfd
/// (C: spMemHandleTypePosixFileDescriptor).
inline constexpr unsigned kHandleTypePosixFileDescriptor = 1;

/// The properties of a pool made by Runtime::CreatePool (C: spMemPoolProps
/// plus the pool attributes). Each field has its default here.
struct PoolProps {
  /// What memory the pool hands out.
  AllocationType alloc_type = AllocationType::kDevice;
  /// The device the pool's memory lives on (ignored for pinned host pools).
  int device = 0;
  /// Upper bound on the pool's reserved bytes; 0 = the device's capacity.
  uint64_t max_size = 0;
  /// Pages behind HugePage and Dvpp pools (ignored by the other types).
  PagePolicy page_policy = PagePolicy::kHugeFirst;
  /// IPC handle types the pool can be exported as; 0 = not exportable.
  unsigned handle_types = 0;
  /// Size blocks by aclrtMalloc's rule instead of the type's own (Device and
  /// HugePage pools): ALIGN_UP(ALIGN_UP(len, 32) + 32, 64) bytes, starting
  /// 64-B aligned.
  bool acl_rounding = false;
  /// With acl_rounding, aclrtMallocAlign32's rule instead: without the 32
  /// extra bytes, ALIGN_UP(len, 64) bytes starting 64-B aligned. Ignored
  /// without acl_rounding.
  bool acl_align32 = false;
  /// How the pool grows; expandable needs an upstream that can reserve.
  PoolGrowth growth = PoolGrowth::kDefault;

  // Reuse policies (docs/design.md "Serving MallocAsync"); all on by default, as
  // in CUDA.

  /// Rule 2: reuse another stream's free that this stream is ordered after
  /// (events, the legacy stream).
  bool reuse_follow_event_dependencies = true;
  /// Rule 3: reuse another stream's free observed complete.
  bool reuse_allow_opportunistic = true;
  /// Rule 5: when growth fails, reuse another stream's pending free after
  /// inserting a wait on it.
  bool reuse_allow_internal_dependencies = true;
  /// With rule 5 on: before growing, reuse another stream's pending free
  /// whose wait delays nothing (the free completes, as the executor can tell,
  /// before this stream would reach the allocation anyway). Off keeps CUDA's
  /// order, growth before any wait (docs/design.md "Waiting versus growing").
  bool wait_before_growth = true;
  /// With rule 5 on: a growth that would take the reserved bytes past this
  /// first waits for any pending free that serves (RMM's order).
  /// UINT64_MAX (the default): no such limit; 0: always wait before growing.
  uint64_t soft_reserved_limit = UINT64_MAX;
  /// Bytes the pool keeps reserved at synchronize calls; 0 releases every
  /// wholly free chunk, UINT64_MAX never shrinks the pool.
  uint64_t release_threshold = 0;
};

}  // namespace streampool

#endif  // STREAMPOOL_POOL_PROPS_H_
