// Blocks and chunks: the pool's unit of carving and its unit of address space.
//
// A chunk is either one upstream mapping (chunked growth: wholly mapped, the
// unit of release) or one reservation (expandable growth: an address range
// mapped in kGranule granules, some of which may be unmapped). Its blocks tile
// it exactly, linked in address order. A block is in one of three states:
//
//   LIVE               handed out; in no index.
//   READY              reusable by any stream; in the pool's ready index when
//                      every granule it touches is mapped, else in the
//                      unbacked index (reusing it maps what it lacks).
//   PENDING(S, f)      freed on stream S at position f; reusable by S at once,
//                      by others only under the reuse policies; in S's index.
//   DEFERRED           freed on S at f while other streams still used it (up
//                      to their points at the free); reusable by no stream
//                      until the free and every use are complete, READY then;
//                      in no index, on the pool's deferred list.
//
// Invariants (MemPool::CheckInvariants):
//   Σ block sizes of a chunk == chunk size, blocks contiguous in address order;
//   no two adjacent READY blocks; no two adjacent PENDING blocks of one stream;
//   a PENDING block has a non-zero stamp, any other block stamp 0;
//   every LIVE block lies below its chunk's handed_out_end;
//   every granule a LIVE or PENDING block touches is mapped, so an unmapped
//   granule lies wholly inside one READY block, and
//   block.unmapped == number of unmapped granules inside it;
//   chunk.mapped_bytes == kGranule · (mapped granules)  (chunked: == size).
#ifndef STREAMPOOL_SRC_POOL_BLOCK_H_
#define STREAMPOOL_SRC_POOL_BLOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/pool/size_index.h"
#include "streampool/executor.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {

class MemPool;

struct Chunk;

enum class BlockState : uint8_t { kLive, kReady, kPending, kDeferred };

// Block::holder: read by threads that hold none of the locks its writers
// hold (the memo's hint, a page-map lookup racing with a recycling), so every
// access is atomic, the reset of a recycled block by assignment included.
struct HolderWord {
  HolderWord() = default;
  HolderWord(const HolderWord& o) : word(o.word.load(std::memory_order_relaxed)) {}
  HolderWord& operator=(const HolderWord& o) {
    word.store(o.word.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
  std::atomic<uint32_t> word{0};
};

struct Block {
  // First member, so that an index node converts back to its block.
  SizeIndexNode node;
  Chunk* chunk = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  BlockState state = BlockState::kReady;
  // LIVE: another stream was declared to use it (RecordUse), so its free
  // takes the path that records those streams' points. Read without a lock
  // by the fast free path (LoadRelaxed).
  bool used_elsewhere = false;
  // Who holds it: while the caller does (from its allocation to its free),
  // the allocating stream's index + 1; otherwise 0 (in a front cache,
  // claimed by a free, or not LIVE). It leaves a nonzero value only under
  // that stream's lock, so a free claims the block by reading it there and
  // clearing it, and of two racing frees one wins (the page map keeps the
  // entries of cached blocks, so it cannot decide). Stored with release
  // after the block's address, loaded with acquire by a claimer that found
  // the block in the page map (HolderOf).
  HolderWord holder;
  // PENDING: the freeing stream. LIVE: the allocating stream.
  StreamIndex stream = kNoStream;
  Position free_pos = 0;
  // Host order of the FreeAsync that made it pending (reuse rule 5).
  uint64_t free_seq = 0;
  // Unique per pending incarnation, 0 otherwise: lets queue entries that
  // outlived a merge or a reuse be recognised as stale.
  uint64_t stamp = 0;
  // LIVE: the size the caller asked for.
  uint64_t requested = 0;
  // LIVE: the allocating stream's position at the allocation (each
  // stream-ordered call takes one), the allocation's sequence number in
  // snapshots and leak reports.
  Position alloc_pos = 0;
  // READY: unmapped granules inside it (expandable chunks only).
  uint64_t unmapped = 0;
  // READY: the pool's proof epoch when observation promoted (part of) it;
  // while that is the current epoch its reuse counts as opportunistic.
  uint64_t observed_epoch = 0;
  // READY, while observed: the stream whose frees observation promoted into
  // it (kNoStream once frees of several streams merged).
  StreamIndex observed_stream = kNoStream;

  uint64_t size() const { return node.size; }
  uintptr_t addr() const { return node.addr; }
  uintptr_t end() const { return node.addr + node.size; }
  static Block* FromNode(SizeIndexNode* n) { return reinterpret_cast<Block*>(n); }
};
static_assert(offsetof(Block, node) == 0);

// A LIVE block's stream, requested size and alloc_pos are written by the
// fast path under a stream's lock only, while a snapshot or leak report may
// read them under the pool's lock: both sides use relaxed atomic accesses
// (plain moves on every target), so neither is a data race.
template <class T>
T LoadRelaxed(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}
template <class T>
void StoreRelaxed(T& field, T value) {
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}
inline uint32_t HolderOf(const Block& b) { return b.holder.word.load(std::memory_order_acquire); }
// b is held by the caller of an allocation on stream t.
inline void SetHolder(Block& b, StreamIndex t) {
  b.holder.word.store(t + 1, std::memory_order_release);
}
inline void ClearHolder(Block& b) { b.holder.word.store(0, std::memory_order_relaxed); }

// Page kinds of one mapped granule (normal = kGranule - huge - thp).
struct GranulePages {
  uint32_t huge = 0;
  uint32_t thp = 0;
};

struct Chunk {
  // The granule of expandable growth: what a device MMU maps at once.
  static constexpr uint64_t kGranule = uint64_t{2} << 20;

  // Chunked: the upstream's mapping. Expandable: the reservation's base and
  // size, with the page-kind counts summed over its mapped granules.
  Mapping mapping;
  // The pool it belongs to: a pointer found by address leads to its pool
  // through its block's chunk.
  MemPool* pool = nullptr;
  uint64_t id = 0;
  bool expandable = false;
  uint8_t size_class = 0;
  // Expandable: one bit per granule, set while mapped.
  std::vector<uint64_t> mapped_bits;
  // Expandable: page kinds per granule, allocated only once a granule is
  // not all normal pages (most upstreams never need it).
  std::vector<GranulePages> pages;
  uint64_t mapped_bytes = 0;
  Block* first = nullptr;
  // Bytes below this address have been handed out at some point. Blocks are
  // always carved from the low end of a free block, so what was ever handed
  // out is a prefix of the chunk: an allocation starting at or above this
  // mark is fresh memory, one starting below it reuses bytes (reuseAfterSync
  // when the block was READY).
  uintptr_t handed_out_end = 0;
  // Intrusive list of chunks that are one READY block (releasable).
  Chunk* prev_free = nullptr;
  Chunk* next_free = nullptr;
  bool in_free_list = false;

  uintptr_t base() const { return reinterpret_cast<uintptr_t>(mapping.base); }
  uint64_t size() const { return mapping.size; }
  uint64_t granules() const { return size() / kGranule; }
  // Granule index of an address inside the chunk.
  uint64_t GranuleOf(uintptr_t addr) const { return (addr - base()) / kGranule; }
  bool Mapped(uint64_t g) const {
    return !expandable || (mapped_bits[g / 64] >> (g % 64) & 1) != 0;
  }
  void SetMapped(uint64_t g, bool on) {
    if (on) {
      mapped_bits[g / 64] |= uint64_t{1} << (g % 64);
    } else {
      mapped_bits[g / 64] &= ~(uint64_t{1} << (g % 64));
    }
  }
};

// A block's place for best-fit ties (SizeIndexNode::order): its chunk's
// creation number, then its offset in the chunk, so that ties break alike in
// every process, wherever the system mapped the chunks. Offsets below 16 TiB
// keep chunks apart.
inline uint64_t OrderOf(const Chunk& c) { return c.id << 44; }

// Block objects come from slabs and go back to a free list, never to the
// system: the steady state allocates nothing, and a stale queue entry may
// still read a recycled block's stamp safely.
class BlockArena {
 public:
  Block* New() {
    if (free_ == nullptr) Refill();
    Block* b = free_;
    free_ = b->next;
    *b = Block{};
    ++live_;
    return b;
  }
  void Delete(Block* b) {
    b->stamp = 0;
    b->state = BlockState::kReady;
    b->next = free_;
    free_ = b;
    --live_;
  }
  size_t live() const { return live_; }

 private:
  static constexpr size_t kSlab = 256;
  void Refill() {
    slabs_.push_back(std::make_unique<Block[]>(kSlab));
    Block* slab = slabs_.back().get();
    for (size_t i = 0; i < kSlab; ++i) {
      slab[i].next = free_;
      free_ = &slab[i];
    }
  }
  std::vector<std::unique_ptr<Block[]>> slabs_;
  Block* free_ = nullptr;
  size_t live_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_BLOCK_H_
