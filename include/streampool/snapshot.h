/// \file
/// What a pool holds, block by block, at one moment (Runtime::Snapshot; C:
/// spMemPoolSnapshot), and what a runtime has handed out and not taken back
/// (Runtime::LiveAllocations; C: spRuntimeGetLiveAllocations).
#ifndef STREAMPOOL_SNAPSHOT_H_
#define STREAMPOOL_SNAPSHOT_H_

#include <cstdint>
#include <vector>

#include "streampool/executor.h"
#include "streampool/export.h"
#include "streampool/ids.h"
#include "streampool/pool_stats.h"

namespace streampool {

/// A block's state in a snapshot (C: spBlockState).
enum class BlockState {
  kLive = 1,          ///< handed out and not freed
  kPending = 2,       ///< freed on `stream` at `free_point`; reusable there at once,
                      ///< elsewhere only under the reuse policies
  kReady = 3,         ///< reusable by any stream
  kCached = 4,        ///< freed, held by the freeing stream's front cache (to the
                      ///< other streams it is PENDING)
  kAwaitingUses = 5,  ///< freed on `stream` at `free_point` while other streams
                      ///< used it (Runtime::RecordUse): reusable by none until
                      ///< the free and those uses are complete
};

/// The state's name in snake_case ("live", "pending", "ready", "cached",
/// "awaiting_uses");
/// "unknown" for a value outside the enum.
STREAMPOOL_EXPORT const char* BlockStateName(BlockState state);

/// One block of a segment.
struct SnapshotBlock {
  /// Its start.
  uint64_t address = 0;
  /// Its bytes (the pool's rule size for allocations).
  uint64_t size = 0;
  /// LIVE and CACHED: the size the allocation asked for; 0 otherwise.
  uint64_t requested = 0;
  /// See BlockState.
  BlockState state = BlockState::kReady;
  /// LIVE: the allocating stream; PENDING, CACHED and AWAITING_USES: the freeing stream;
  /// READY: none. A stream destroyed since reads as none.
  StreamId stream;
  /// PENDING, CACHED and AWAITING_USES: the freeing stream's position at the free.
  Position free_point = 0;
  /// LIVE and CACHED: the allocation's sequence number, the allocating
  /// stream's position at the allocation (each stream-ordered call on a
  /// stream takes the next one, from 1).
  Position alloc_seq = 0;
  /// READY, expandable segments: its bytes when they are not backed by
  /// memory (then == size). A free range spanning unmapped granules shows as
  /// one block per run of mapped or unmapped bytes, so that the mapped
  /// blocks are where the segment's memory is.
  uint64_t unmapped_bytes = 0;
};

/// One reservation (expandable growth) or chunk (chunked growth).
struct SnapshotSegment {
  /// Start of its address range.
  uint64_t address = 0;
  /// Its address range's bytes.
  uint64_t size = 0;
  /// Its bytes backed by memory (== size for a chunk).
  uint64_t mapped_bytes = 0;
  /// A reservation mapped granule by granule (else a chunk, mapped whole).
  bool expandable = false;
  /// Its blocks in address order; they tile [address, address + size).
  std::vector<SnapshotBlock> blocks;
};

/// A pool at one moment. Taken under the pool's lock; blocks other threads
/// move through a front cache meanwhile show as on either side of the move.
struct PoolSnapshot {
  /// The pool.
  PoolId pool;
  /// The pool's device, or -1 for a pinned host pool.
  int device = 0;
  /// Segments in address order (an imported pool has none of its own).
  std::vector<SnapshotSegment> segments;
  /// The pool's statistics, read in the same lock.
  PoolStats stats;
};

/// One allocation handed out and not freed.
struct LiveAllocation {
  /// Its start.
  void* ptr = nullptr;
  /// The size asked for.
  uint64_t size = 0;
  /// The bytes it occupies (the pool's rule size, or whole pages).
  uint64_t block_size = 0;
  /// The allocating stream (none for Malloc and MallocHost, or when destroyed since).
  StreamId stream;
  /// Its pool (none for Malloc and MallocHost).
  PoolId pool;
  /// The device, or -1 for pinned host memory.
  int device = 0;
  /// Pool allocations: SnapshotBlock::alloc_seq. Malloc and MallocHost: the
  /// runtime's count of synchronous allocations, from 1.
  uint64_t seq = 0;
};

}  // namespace streampool

#endif  // STREAMPOOL_SNAPSHOT_H_
