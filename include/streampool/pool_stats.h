/// \file
/// What a pool reports: CUDA's four usage attributes plus the decisions behind
/// them, so benchmarks and policy tests can see why memory was or was not
/// reused.
#ifndef STREAMPOOL_POOL_STATS_H_
#define STREAMPOOL_POOL_STATS_H_

#include <cstdint>

#include "streampool/reuse_rule.h"

namespace streampool {

/// A pool's statistics (Runtime::GetPoolStats; C: spMemPoolStats, which has
/// every field but fresh_allocs, upstream_bytes_mapped and fragmentation).
/// Counts are since the pool's creation;
/// "high" values are watermarks (reset through the pool attributes).
struct PoolStats {
  uint64_t reserved_bytes = 0;          ///< bytes mapped from the upstream now (ReservedMemCurrent)
  uint64_t reserved_high = 0;           ///< watermark of reserved_bytes (ReservedMemHigh)
  uint64_t used_bytes = 0;              ///< rule sizes of live allocations (UsedMemCurrent)
  uint64_t used_high = 0;               ///< watermark of used_bytes (UsedMemHigh)
  uint64_t alloc_count = 0;             ///< successful non-zero allocations
  uint64_t free_count = 0;              ///< accepted FreeAsync and Free calls (null excluded)
  uint64_t failed_alloc_count = 0;      ///< allocations that failed
  uint64_t reuse_same_stream = 0;       ///< allocations served by ReuseRule::kSameStream
  uint64_t reuse_event_dependency = 0;  ///< ... by ReuseRule::kEventDependency
  uint64_t reuse_opportunistic = 0;     ///< ... by ReuseRule::kOpportunistic
  uint64_t reuse_after_sync = 0;        ///< ... by ReuseRule::kAfterSync
  uint64_t reuse_internal_dependency = 0;  ///< ... by ReuseRule::kInternalDependency
  uint64_t fresh_allocs = 0;               ///< ... by ReuseRule::kFresh
  uint64_t waits_inserted = 0;             ///< waits rule 5 inserted
  uint64_t upstream_maps = 0;  ///< upstream maps: chunks, or runs of granules a growth mapped
  uint64_t upstream_unmaps =
      0;  ///< upstream unmaps: chunks, or runs of granules a release unmapped
  uint64_t huge_page_bytes = 0;              ///< reserved bytes on explicit huge pages
  uint64_t transparent_huge_page_bytes = 0;  ///< reserved bytes on transparent huge pages
  uint64_t normal_page_bytes = 0;            ///< reserved bytes on normal pages (or unknown)
  uint64_t largest_free_block = 0;  ///< the largest READY or PENDING block (a block spanning
                                    ///< unmapped granules counts by its mapped low end)
  /// Bytes ever mapped from the upstream.
  uint64_t upstream_bytes_mapped = 0;
  /// Bytes the live allocations asked for (before the pool's rounding).
  uint64_t requested_bytes = 0;
  /// Watermark of requested_bytes as the pool's central path sees it (every
  /// allocation the front caches do not serve); a run of front-cache pops can
  /// pass it by at most the bytes the caches hold. Never below
  /// requested_bytes.
  uint64_t requested_high = 0;
  /// Allocations that failed for lack of memory, after the runtime's
  /// out-of-memory handling (requests larger than the pool can ever hold
  /// count in failed_alloc_count only).
  uint64_t oom_count = 0;
  /// Times the out-of-memory handling released this pool's READY memory (for
  /// an allocation of this or another pool of the device).
  uint64_t reclaims = 0;
  /// The bytes those reclaims released.
  uint64_t reclaimed_bytes = 0;
  /// Allocations from this pool tried again after the out-of-memory
  /// handling released memory or an out-of-memory handler asked for it.
  uint64_t oom_retries = 0;
  /// Reservations (expandable growth) or chunks held now.
  uint64_t segments = 0;
  /// Watermark of segments.
  uint64_t segments_high = 0;
  /// Of waits_inserted, those inserted before growing: a wait that delayed
  /// nothing, or any wait once growth would pass the soft reserved limit.
  uint64_t waits_before_growth = 0;
  /// Allocations served by joining several free blocks, some pending on
  /// other streams, after a wait on each of those streams (counted in
  /// reuse_internal_dependency as well).
  uint64_t joined_reuses = 0;
  /// 1 - used/reserved (0 when nothing is reserved).
  double fragmentation = 0;
};

}  // namespace streampool

#endif  // STREAMPOOL_POOL_STATS_H_
