// PageMap: the block a live allocation's base address names, in O(1) and
// without a lock (docs/design.md, "Performance model": a pointer is mapped to its
// block by a page map, not a hash lookup).
//
// A three-level radix tree over the address in 4 KiB pages, one per runtime,
// shared by its pools. Only the base of a block LIVE to its pool's central
// index has an entry: a central allocation stores it, the central free takes
// it out. A block in a front cache keeps its entry, so a same-stream pair
// never writes the map; whether the caller holds the block is the block's
// `holder`, which decides which of two racing frees wins (Block). A page's
// entry is
//   0                       no live block starts in the page;
//   a Block* | unit << 56   the one block that starts in it (most pages:
//                           blocks are rarely smaller than a page), with the
//                           64-byte unit of its base in the page;
//   a Sub* (low bit set)    64 slots, one per 64-byte unit of the page (the
//                           smallest alignment of any pool variant), once two
//                           bases have shared the page; it stays a Sub.
//
// Every base is 64-byte aligned, so an entry or slot names its base exactly
// (page, unit) and a reader never dereferences a block: one it finds may be
// claimed and recycled by another thread (its address rewritten under its
// pool's lock) at any moment.
//
// Space: the root is fixed; interior nodes and leaves are made on first use
// and kept for the map's life, leaves in 2 MiB slabs (a transparent huge page
// where allowed) mapped with MAP_NORESERVE, so entries cost memory only once
// touched: 8 bytes per 4 KiB page of address, a 512th, at most 2 MiB per GiB
// of address space used. Subs take 512 bytes each where small
// blocks live. Discard gives whole entry pages back when address space goes
// back to the upstream. Addresses at or above 2^47 (outside x86-64 and
// AArch64 user space) are not covered; callers keep such pointers elsewhere.
#ifndef STREAMPOOL_SRC_POOL_PAGE_MAP_H_
#define STREAMPOOL_SRC_POOL_PAGE_MAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "src/pool/block.h"
#include "src/util/mutex.h"

namespace streampool::internal {

class PageMap {
 public:
  static constexpr int kPageShift = 12;  // entries per 4 KiB page
  static constexpr int kUnitShift = 6;   // Sub slots per 64 bytes
  static constexpr int kAddressBits = 47;
  static constexpr int kLeafBits = 12;  // a leaf covers 16 MiB
  static constexpr int kMidBits = 12;
  static constexpr int kRootBits = kAddressBits - kPageShift - kLeafBits - kMidBits;  // 11

  PageMap();
  ~PageMap();
  PageMap(const PageMap&) = delete;
  PageMap& operator=(const PageMap&) = delete;

  static bool Covers(uintptr_t addr) { return (addr >> kAddressBits) == 0; }

  // The block whose base is addr, or null. Lock-free.
  Block* Get(uintptr_t addr) const {
    std::atomic<uintptr_t>* e = IsBase(addr) ? Entry(addr) : nullptr;
    if (e == nullptr) return nullptr;
    const uintptr_t v = e->load(std::memory_order_acquire);
    if (IsSub(v)) return AsSub(v)->At(UnitOf(addr)).load(std::memory_order_acquire);
    return v != 0 && UnitTag(v) == UnitOf(addr) ? AsBlock(v) : nullptr;
  }
  // Takes b's entry out, if the entry of addr is b's (the pool's central
  // free). Lock-free.
  void Clear(uintptr_t addr, const Block* b);
  // Sets the entry of a base (a new allocation; a block from its stream's
  // front cache has it still); false when the address is not a covered 64-byte aligned base, the
  // block's own address does not fit an entry, or memory for a node cannot be
  // had. Lock-free unless a node must be made. Inline for the common case, an
  // empty entry of an existing node.
  bool Set(uintptr_t addr, Block* b) {
    if (!IsBase(addr) || !Fits(b)) return false;
    if (std::atomic<uintptr_t>* e = Entry(addr)) {
      // Read first: a compare-and-swap takes the entry's cache line even
      // when it fails, and threads whose blocks share a page (a Sub) would
      // pass that line back and forth at every store.
      uintptr_t v = e->load(std::memory_order_acquire);
      if (IsSub(v)) {
        AsSub(v)->At(UnitOf(addr)).store(b, std::memory_order_release);
        return true;
      }
      if (v == Single(b, addr)) return true;
      if (v == 0 && e->compare_exchange_strong(v, Single(b, addr), std::memory_order_acq_rel)) {
        return true;
      }
    }
    return SetSlow(addr, b);
  }
  // Gives back the entry pages lying wholly inside [lo, hi) (the range must
  // hold no live block).
  void Discard(uintptr_t lo, uintptr_t hi);

 private:
  static constexpr size_t kLeafEntries = size_t{1} << kLeafBits;
  static constexpr size_t kMidEntries = size_t{1} << kMidBits;
  static constexpr size_t kRootEntries = size_t{1} << kRootBits;
  static constexpr size_t kUnits = size_t{1} << (kPageShift - kUnitShift);  // 64
  static constexpr size_t kLeafBytes = kLeafEntries * sizeof(std::atomic<uintptr_t>);
  static constexpr size_t kLeavesPerSlab = 64;  // 2 MiB of entries, 1 GiB of address space

  struct Leaf {
    std::atomic<uintptr_t> e[kLeafEntries];
  };
  struct Mid {
    std::atomic<Leaf*> leaf[kMidEntries];
  };
  struct Sub {
    // Unit u's slot: a line (eight slots) per u ^ (u >> 3) mod 8, a place in
    // it per u >> 3. Neighbouring blocks of any power-of-two size up to half a
    // page (1 KiB blocks: units 0, 16, 32, 48) then lie on different lines,
    // so two threads working on neighbouring blocks do not write one line.
    std::atomic<Block*>& At(size_t u) { return slot[((u ^ (u >> 3)) & 7) << 3 | u >> 3]; }
    std::atomic<Block*> slot[kUnits];
  };
  static_assert(alignof(Block) >= 2 && alignof(Sub) >= 2, "the low bit tags a Sub");

  // A single entry keeps its base's unit in the bits above any user-space
  // pointer (2^56 even with 5-level paging). A block whose own address has
  // them set (a tagged heap) is kept outside the map: Set says no.
  static constexpr int kUnitTagShift = 56;
  static constexpr uintptr_t kBlockBits = (uintptr_t{1} << kUnitTagShift) - 1;

  static bool IsBase(uintptr_t addr) {
    return Covers(addr) && (addr & ((uintptr_t{1} << kUnitShift) - 1)) == 0;
  }
  static bool Fits(const Block* b) { return (reinterpret_cast<uintptr_t>(b) & ~kBlockBits) == 0; }
  static uintptr_t Single(Block* b, uintptr_t addr) {
    return reinterpret_cast<uintptr_t>(b) | (uintptr_t{UnitOf(addr)} << kUnitTagShift);
  }
  static size_t UnitTag(uintptr_t v) { return v >> kUnitTagShift; }
  static Block* AsBlock(uintptr_t v) { return reinterpret_cast<Block*>(v & kBlockBits); }
  static bool IsSub(uintptr_t v) { return (v & 1) != 0; }
  static Sub* AsSub(uintptr_t v) { return reinterpret_cast<Sub*>(v & ~uintptr_t{1}); }
  static size_t UnitOf(uintptr_t addr) { return (addr >> kUnitShift) & (kUnits - 1); }

  std::atomic<uintptr_t>* Entry(uintptr_t addr) const {
    if (!Covers(addr)) return nullptr;
    const uintptr_t p = addr >> kPageShift;
    Mid* mid = root_[p >> (kLeafBits + kMidBits)].load(std::memory_order_acquire);
    if (mid == nullptr) return nullptr;
    Leaf* leaf = mid->leaf[(p >> kLeafBits) & (kMidEntries - 1)].load(std::memory_order_acquire);
    if (leaf == nullptr) return nullptr;
    return &leaf->e[p & (kLeafEntries - 1)];
  }
  // The entry of addr, making its nodes; null when memory cannot be had.
  std::atomic<uintptr_t>* MakeEntry(uintptr_t addr);
  // Set in general: a Sub, a race, or a node to make.
  bool SetSlow(uintptr_t addr, Block* b);
  Leaf* NewLeaf() ABSL_EXCLUSIVE_LOCKS_REQUIRED(grow_mu_);
  Sub* NewSub() ABSL_EXCLUSIVE_LOCKS_REQUIRED(grow_mu_);

  std::unique_ptr<std::atomic<Mid*>[]> root_;
  // Makes nodes and Subs; readers never take it.
  Mutex grow_mu_{LockRank::kPageMapGrowth};
  std::vector<std::unique_ptr<Mid>> mids_;
  std::vector<std::pair<void*, size_t>> slabs_;
  char* slab_next_ = nullptr;
  char* slab_end_ = nullptr;
  std::vector<std::unique_ptr<Sub[]>> sub_chunks_;
  size_t sub_next_ = 0;  // in the last chunk
  // Subs free for reuse: made for a conversion that lost its race, or taken
  // back from pages Discard drops (so churn does not grow the map).
  std::vector<Sub*> free_subs_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_PAGE_MAP_H_
