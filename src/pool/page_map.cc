#include "src/pool/page_map.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace streampool::internal {

PageMap::PageMap() : root_(new std::atomic<Mid*>[kRootEntries]()) {}

PageMap::~PageMap() {
  for (const auto& [base, bytes] : slabs_) munmap(base, bytes);
}

PageMap::Leaf* PageMap::NewLeaf() {
  if (slab_next_ == slab_end_) {
    // Fresh anonymous pages read as zero, which is every entry's initial
    // value; MAP_NORESERVE so that untouched pages cost neither memory nor
    // commit charge.
    const size_t bytes = kLeafBytes * kLeavesPerSlab;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    slabs_.emplace_back(p, bytes);
    slab_next_ = static_cast<char*>(p);
    slab_end_ = slab_next_ + bytes;
  }
  Leaf* leaf = reinterpret_cast<Leaf*>(slab_next_);
  slab_next_ += kLeafBytes;
  return leaf;
}

bool PageMap::Set(uintptr_t addr, Block* b) {
  if (!Covers(addr)) return false;
  if (std::atomic<Block*>* e = Find(addr)) {
    e->store(b, std::memory_order_release);
    return true;
  }
  std::lock_guard<std::mutex> lock(grow_mu_);
  const uintptr_t u = addr >> kUnitShift;
  std::atomic<Mid*>& mid_slot = root_[u >> (kLeafBits + kMidBits)];
  Mid* mid = mid_slot.load(std::memory_order_relaxed);
  if (mid == nullptr) {
    auto fresh = std::make_unique<Mid>();
    mid = fresh.get();
    mids_.push_back(std::move(fresh));
    mid_slot.store(mid, std::memory_order_release);
  }
  std::atomic<Leaf*>& leaf_slot = mid->leaf[(u >> kLeafBits) & (kMidEntries - 1)];
  Leaf* leaf = leaf_slot.load(std::memory_order_relaxed);
  if (leaf == nullptr) {
    leaf = NewLeaf();
    if (leaf == nullptr) return false;
    leaf_slot.store(leaf, std::memory_order_release);
  }
  leaf->e[u & (kLeafEntries - 1)].store(b, std::memory_order_release);
  return true;
}

void PageMap::Discard(uintptr_t lo, uintptr_t hi) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Entries per page of a leaf, and the address span they cover.
  const size_t per_page = page / sizeof(std::atomic<Block*>);
  const uintptr_t span = static_cast<uintptr_t>(per_page) << kUnitShift;
  if (!Covers(lo) || hi <= lo) return;
  hi = std::min<uintptr_t>(hi, uintptr_t{1} << kAddressBits);
  const uintptr_t first = (lo + span - 1) / span * span;
  const uintptr_t last = hi / span * span;
  std::lock_guard<std::mutex> lock(grow_mu_);
  for (uintptr_t a = first; a < last;) {
    const uintptr_t u = a >> kUnitShift;
    const uintptr_t leaf_end = ((u >> kLeafBits) + 1) << (kLeafBits + kUnitShift);
    const uintptr_t end = std::min(last, leaf_end);
    Mid* mid = root_[u >> (kLeafBits + kMidBits)].load(std::memory_order_relaxed);
    Leaf* leaf = mid == nullptr
                     ? nullptr
                     : mid->leaf[(u >> kLeafBits) & (kMidEntries - 1)].load(
                           std::memory_order_relaxed);
    if (leaf != nullptr) {
      // The pages hold only null entries (no live block in the range), and
      // come back as zero pages: dropping them loses nothing.
      std::atomic<Block*>* from = &leaf->e[u & (kLeafEntries - 1)];
      const size_t bytes = ((end - a) >> kUnitShift) * sizeof(std::atomic<Block*>);
      madvise(from, bytes, MADV_DONTNEED);
    }
    a = end;
  }
}

}  // namespace streampool::internal
