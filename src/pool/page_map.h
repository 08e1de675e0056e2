// PageMap: the block a live allocation's base address names, in O(1) and
// without a lock (DESIGN.md, "Performance model": a pointer is mapped to its
// block by a page map, not a hash lookup).
//
// A three-level radix tree over the address in 64-byte units (the smallest
// block alignment of any pool variant, pinned host's), one per runtime, shared
// by its pools. Only the base of a LIVE block has an entry: an allocation
// stores it, a free takes it out with one exchange, so of two frees of one
// pointer racing on different threads exactly one wins and the other sees a
// double free.
//
// Space: the root is fixed (2^13 entries); interior nodes and leaves are
// made on first use and kept for the map's life. Leaves come from slabs mapped
// with MAP_NORESERVE, so a leaf costs memory only for the 4 KiB pages that
// hold entries in use: at most one page per 32 KiB of address that holds
// block bases. Discard gives whole leaf pages back when a range goes unmapped,
// so a process that runs for weeks keeps no more than what its pools hold now.
// Addresses at or above 2^47 (outside x86-64 and AArch64 user space) are not
// covered; callers keep such pointers elsewhere.
#ifndef STREAMPOOL_SRC_POOL_PAGE_MAP_H_
#define STREAMPOOL_SRC_POOL_PAGE_MAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "src/pool/block.h"

namespace streampool::internal {

class PageMap {
 public:
  static constexpr int kUnitShift = 6;   // 64-byte units
  static constexpr int kAddressBits = 47;
  static constexpr int kLeafBits = 14;   // a leaf covers 1 MiB
  static constexpr int kMidBits = 14;
  static constexpr int kRootBits = kAddressBits - kUnitShift - kLeafBits - kMidBits;  // 13

  PageMap();
  ~PageMap();
  PageMap(const PageMap&) = delete;
  PageMap& operator=(const PageMap&) = delete;

  static bool Covers(uintptr_t addr) { return (addr >> kAddressBits) == 0; }

  // The block whose base is addr, or null. Lock-free.
  Block* Get(uintptr_t addr) const {
    std::atomic<Block*>* e = Find(addr);
    if (e == nullptr) return nullptr;
    Block* b = e->load(std::memory_order_acquire);
    // An entry covers 64 bytes: an interior address of the unit is no base.
    return b != nullptr && b->addr() == addr ? b : nullptr;
  }
  // Takes the entry out: the block, or null when there was none (a double
  // free, an interior or a foreign pointer). Lock-free.
  Block* Claim(uintptr_t addr) {
    std::atomic<Block*>* e = Find(addr);
    if (e == nullptr) return nullptr;
    Block* b = e->load(std::memory_order_acquire);
    while (b != nullptr && b->addr() == addr) {
      if (e->compare_exchange_weak(b, nullptr, std::memory_order_acq_rel)) return b;
    }
    return nullptr;
  }
  // Puts a block back under a base that had one before (a front cache pop):
  // its leaf exists. Lock-free.
  void Restore(uintptr_t addr, Block* b) {
    Find(addr)->store(b, std::memory_order_release);
  }
  // Sets the entry of a new base, making nodes as needed; false when the
  // address is not covered or memory for a node cannot be had.
  bool Set(uintptr_t addr, Block* b);
  // Gives back the leaf pages lying wholly inside [lo, hi) (all their entries
  // must be null: the range holds no live block).
  void Discard(uintptr_t lo, uintptr_t hi);

 private:
  static constexpr size_t kLeafEntries = size_t{1} << kLeafBits;
  static constexpr size_t kMidEntries = size_t{1} << kMidBits;
  static constexpr size_t kRootEntries = size_t{1} << kRootBits;
  static constexpr size_t kLeafBytes = kLeafEntries * sizeof(std::atomic<Block*>);
  static constexpr size_t kLeavesPerSlab = 64;  // 8 MiB of address space a slab

  struct Leaf {
    std::atomic<Block*> e[kLeafEntries];
  };
  struct Mid {
    std::atomic<Leaf*> leaf[kMidEntries];
  };

  std::atomic<Block*>* Find(uintptr_t addr) const {
    if (!Covers(addr)) return nullptr;
    const uintptr_t u = addr >> kUnitShift;
    Mid* mid = root_[u >> (kLeafBits + kMidBits)].load(std::memory_order_acquire);
    if (mid == nullptr) return nullptr;
    Leaf* leaf = mid->leaf[(u >> kLeafBits) & (kMidEntries - 1)].load(std::memory_order_acquire);
    if (leaf == nullptr) return nullptr;
    return &leaf->e[u & (kLeafEntries - 1)];
  }
  Leaf* NewLeaf();  // under grow_mu_

  std::unique_ptr<std::atomic<Mid*>[]> root_;
  // Makes nodes; readers never take it.
  std::mutex grow_mu_;
  std::vector<std::unique_ptr<Mid>> mids_;
  std::vector<std::pair<void*, size_t>> slabs_;
  char* slab_next_ = nullptr;
  char* slab_end_ = nullptr;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_PAGE_MAP_H_
