// What a pool reports: CUDA's four usage attributes plus the decisions behind
// them, so benchmarks and policy tests can see why memory was or was not
// reused.
#ifndef STREAMPOOL_MEM_POOL_H_
#define STREAMPOOL_MEM_POOL_H_

#include <cstdint>

namespace streampool {

// How one successful non-zero allocation was served (DESIGN.md "Serving
// MallocAsync"); each counts exactly one.
enum class ReuseRule {
  kFresh,                // bytes never handed out before (growth is upstream_maps)
  kSameStream,           // the stream's own pending free
  kEventDependency,      // rule 2: a free ordered before by events or the legacy stream
  kOpportunistic,        // rule 3: a free observed complete
  kAfterSync,            // a READY block holding bytes handed out before
  kInternalDependency,   // rule 5: a wait inserted on the free
};

const char* ReuseRuleName(ReuseRule rule);

struct PoolStats {
  uint64_t reserved_bytes = 0;
  uint64_t reserved_high = 0;
  uint64_t used_bytes = 0;
  uint64_t used_high = 0;
  uint64_t alloc_count = 0;
  uint64_t free_count = 0;
  uint64_t failed_alloc_count = 0;
  uint64_t reuse_same_stream = 0;
  uint64_t reuse_event_dependency = 0;
  uint64_t reuse_opportunistic = 0;
  uint64_t reuse_after_sync = 0;
  uint64_t reuse_internal_dependency = 0;
  uint64_t fresh_allocs = 0;
  uint64_t waits_inserted = 0;
  uint64_t upstream_maps = 0;
  uint64_t upstream_unmaps = 0;
  uint64_t huge_page_bytes = 0;
  uint64_t transparent_huge_page_bytes = 0;
  uint64_t normal_page_bytes = 0;
  uint64_t largest_free_block = 0;
  // Bytes ever mapped from the upstream.
  uint64_t upstream_bytes_mapped = 0;
  // 1 - used/reserved (0 when nothing is reserved).
  double fragmentation = 0;
};

}  // namespace streampool

#endif  // STREAMPOOL_MEM_POOL_H_
