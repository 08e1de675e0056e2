// PoolBacking: the memory behind a pool's blocks. Chunked growth maps whole
// chunks, one upstream mapping each; expandable growth reserves address
// space and maps it granule by granule. Every mapped byte is charged to the
// pool's maximum and to the device's budget, and goes back to both when it is
// unmapped. The backing knows chunks and granules, never blocks: the pool
// carves blocks out of what it maps and chooses what to release.
//
// Invariants (CheckInvariants):
//   reserved == Σ chunk mapped_bytes <= max_size
//   chunked chunk:    mapped_bytes == size
//   expandable chunk: mapped_bytes == kGranule × mapped granules, base and
//                     size granule-aligned
//   huge + transparent huge + normal page bytes == mapped_bytes, per chunk
//   in_free_list == on the free list (the pool links a chunk while it is one
//   READY block)
#ifndef STREAMPOOL_SRC_POOL_POOL_BACKING_H_
#define STREAMPOOL_SRC_POOL_POOL_BACKING_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/pool/block.h"
#include "src/pool/device_budget.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {

class PoolBacking {
 public:
  // reservation_bytes: each expandable reservation's size.
  PoolBacking(std::shared_ptr<PhysicalMemory> upstream, DeviceBudget* budget, uint64_t max_size,
              bool expandable, uint64_t reservation_bytes, bool scarce_address_space);
  ~PoolBacking();  // returns every granule, chunk and reservation to the upstream
  PoolBacking(const PoolBacking&) = delete;
  PoolBacking& operator=(const PoolBacking&) = delete;

  PhysicalMemory& upstream() const { return *upstream_; }
  DeviceBudget* budget() const { return budget_; }
  uint64_t max_size() const { return max_size_; }
  bool expandable() const { return expandable_; }
  uint64_t reservation_bytes() const { return reservation_bytes_; }
  // Reservations were sized by the caller because address space is scarce:
  // an empty one goes back even when it is the pool's last.
  bool scarce_address_space() const { return scarce_address_space_; }
  // Mapped bytes (ReservedMemCurrent).
  uint64_t reserved() const { return reserved_; }
  size_t segments() const { return chunks_.size(); }
  // Whether `bytes` more stay within the pool's maximum.
  bool FitsMax(uint64_t bytes) const {
    return bytes <= max_size_ && reserved_ <= max_size_ - bytes;
  }
  // Bytes that could still be mapped: within the maximum and the device.
  uint64_t Room() const {
    return std::min(max_size_ - std::min(max_size_, reserved_),
                    budget_->capacity() - budget_->used());
  }

  // Chunked growth: a chunk of `bytes` (a multiple of 2 MiB) mapped whole,
  // with no blocks yet; null when the maximum or the device has no room, or
  // the upstream refused or broke its contract (then *upstream_error says
  // what failed). Its blocks' starts are multiples of granule.
  Chunk* MapChunk(uint64_t bytes, uint64_t granule, MemPool* pool, absl::Status* upstream_error);
  // A chunk whose blocks are gone: unmapped and freed.
  void UnmapChunk(Chunk* c);
  // Expandable growth: a reservation of `bytes`, nothing mapped, no blocks.
  absl::StatusOr<Chunk*> NewReservation(uint64_t bytes, MemPool* pool);
  // A reservation with nothing mapped whose blocks are gone.
  void DropReservation(Chunk* c);
  // Charges `bytes` to the maximum and the device before MapCharged; false
  // when either has no room.
  bool Charge(uint64_t bytes);
  // Maps the unmapped granules of c in [first, last), `bytes` of them all
  // charged, one upstream call per run (*runs counts them). On error nothing
  // of them stays mapped or charged.
  absl::Status MapCharged(Chunk* c, uint64_t first, uint64_t last, uint64_t bytes, uint64_t* runs);
  // Unmaps granules [g0, g1) of c (all mapped), uncharging them.
  void UnmapGranules(Chunk* c, uint64_t g0, uint64_t g1);
  // Unmapped granules [lo, hi) of an expandable chunk touches.
  static uint64_t CountUnmapped(const Chunk* c, uintptr_t lo, uintptr_t hi);

  // Chunks that are one READY block, most recently linked first.
  Chunk* free_chunks() const { return free_chunks_; }
  void LinkFree(Chunk* c);
  void UnlinkFree(Chunk* c);

  // The chunk holding addr, or null.
  const Chunk* ChunkAt(uintptr_t addr) const;
  // fn(const Chunk&) for every chunk in address order.
  template <typename Fn>
  void ForEachChunk(Fn fn) const {
    for (const auto& [base, c] : chunks_) fn(*c);
  }

  bool CheckInvariants() const;

 private:
  absl::Status MapGranules(Chunk* c, uint64_t g0, uint64_t g1);
  Chunk* NewChunk(const Mapping& m, bool expandable, MemPool* pool);

  const std::shared_ptr<PhysicalMemory> upstream_;
  DeviceBudget* const budget_;
  const uint64_t max_size_;
  const bool expandable_;
  const uint64_t reservation_bytes_;
  const bool scarce_address_space_;

  absl::btree_map<uintptr_t, Chunk*> chunks_;  // by base address
  Chunk* free_chunks_ = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> map_scratch_;  // granule runs one growth mapped
  uint64_t reserved_ = 0;
  uint64_t next_chunk_id_ = 1;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_POOL_BACKING_H_
