/// \file
/// The attributes of a pool that Runtime::GetPoolAttribute and
/// SetPoolAttribute read and write (C: spMemPoolAttr).
#ifndef STREAMPOOL_POOL_ATTR_H_
#define STREAMPOOL_POOL_ATTR_H_

namespace streampool {

/// Pool attributes (C: spMemPoolAttr, same values), read and written as
/// uint64_t by Runtime::GetPoolAttribute / SetPoolAttribute. 1-14 are CUDA 13's
/// cudaMemPoolAttr values; streampool's own start at 0x1000, out of the way of
/// attributes CUDA may add.
enum class PoolAttr {
  kReuseFollowEventDependencies = 1,    ///< rule 2 on (1) or off (0)
  kReuseAllowOpportunistic = 2,         ///< rule 3 on (1) or off (0)
  kReuseAllowInternalDependencies = 3,  ///< rule 5 on (1) or off (0)
  kReleaseThreshold = 4,                ///< bytes kept reserved at synchronize calls
  kReservedMemCurrent = 5,              ///< reserved bytes (read-only)
  kReservedMemHigh = 6,                 ///< watermark of reserved bytes (set 0 to reset)
  kUsedMemCurrent = 7,                  ///< used bytes (read-only)
  kUsedMemHigh = 8,                     ///< watermark of used bytes (set 0 to reset)
  kAllocationType = 9,                  ///< the pool's AllocationType (read-only)
  /// Handle types the pool can be exported as; 0 for an imported pool, which
  /// cannot be exported again (read-only).
  kExportHandleTypes = 10,
  kLocationId = 11,    ///< the pool's device, -1 for pinned host memory (read-only)
  kLocationType = 12,  ///< where it lives: device (1) or host (2), as spMemLocationType (read-only)
  /// PoolProps::max_size as the pool was made; 0 = no limit of its own
  /// (imported pools: 0) (read-only).
  kMaxPoolSize = 13,
  kHwDecompressEnabled = 14,  ///< always 0: no pool decompresses (read-only)
  /// How the pool grows, a PoolGrowth: chunked (1) or expandable (2) (read-only).
  kGrowth = 0x1000,
  /// The per-stream front caches (docs/design.md, "Performance model"): on (1, the
  /// default) or off (0, every allocation takes the central exact best fit);
  /// turning them off flushes what they hold.
  kFrontCache = 0x1001,
  /// Waiting before growing (docs/design.md "Waiting versus growing"): with
  /// rule 5 on, a wait that delays nothing comes before growth (1, the
  /// default); 0 keeps CUDA's order.
  kWaitBeforeGrowth = 0x1002,
  /// Growth that would take the reserved bytes past this waits for other
  /// streams' pending frees first (rule 5 on); UINT64_MAX (the default): no
  /// limit.
  kSoftReservedLimit = 0x1003,
};

}  // namespace streampool

#endif  // STREAMPOOL_POOL_ATTR_H_
