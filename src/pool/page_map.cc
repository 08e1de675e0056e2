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
    // Fresh anonymous pages read as zero, every entry's initial value;
    // MAP_NORESERVE so that untouched pages cost neither memory nor commit
    // charge. A slab is one 2 MiB-aligned huge page where transparent huge
    // pages are allowed: lookups of scattered addresses then share one TLB
    // entry per GiB of address space instead of missing per 2 MiB, for 2 MiB
    // of memory per GiB of address the runtime has used (0.2 %).
    const size_t bytes = kLeafBytes * kLeavesPerSlab;
    void* raw = mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (lo + bytes - 1) / bytes * bytes;
    if (aligned > lo) munmap(raw, aligned - lo);
    if (aligned + bytes < lo + 2 * bytes) {
      munmap(reinterpret_cast<void*>(aligned + bytes), lo + 2 * bytes - (aligned + bytes));
    }
    void* p = reinterpret_cast<void*>(aligned);
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages
    slabs_.emplace_back(p, bytes);
    slab_next_ = static_cast<char*>(p);
    slab_end_ = slab_next_ + bytes;
  }
  Leaf* leaf = reinterpret_cast<Leaf*>(slab_next_);
  slab_next_ += kLeafBytes;
  return leaf;
}

PageMap::Sub* PageMap::NewSub() {
  if (!free_subs_.empty()) {
    Sub* s = free_subs_.back();
    free_subs_.pop_back();
    return s;
  }
  // Subs are never freed before the map: a reader may still be inside one.
  constexpr size_t kSubsPerChunk = 128;
  if (sub_chunks_.empty() || sub_next_ == kSubsPerChunk) {
    sub_chunks_.push_back(std::make_unique<Sub[]>(kSubsPerChunk));
    sub_next_ = 0;
  }
  return &sub_chunks_.back()[sub_next_++];
}

std::atomic<uintptr_t>* PageMap::MakeEntry(uintptr_t addr) {
  if (std::atomic<uintptr_t>* e = Entry(addr)) return e;
  if (!Covers(addr)) return nullptr;
  MutexLock lock(&grow_mu_);
  const uintptr_t p = addr >> kPageShift;
  std::atomic<Mid*>& mid_slot = root_[p >> (kLeafBits + kMidBits)];
  Mid* mid = mid_slot.load(std::memory_order_relaxed);
  if (mid == nullptr) {
    auto fresh = std::make_unique<Mid>();
    mid = fresh.get();
    mids_.push_back(std::move(fresh));
    mid_slot.store(mid, std::memory_order_release);
  }
  std::atomic<Leaf*>& leaf_slot = mid->leaf[(p >> kLeafBits) & (kMidEntries - 1)];
  Leaf* leaf = leaf_slot.load(std::memory_order_relaxed);
  if (leaf == nullptr) {
    leaf = NewLeaf();
    if (leaf == nullptr) return nullptr;
    leaf_slot.store(leaf, std::memory_order_release);
  }
  return &leaf->e[p & (kLeafEntries - 1)];
}

void PageMap::Clear(uintptr_t addr, const Block* b) {
  std::atomic<uintptr_t>* e = IsBase(addr) ? Entry(addr) : nullptr;
  if (e == nullptr) return;
  uintptr_t v = e->load(std::memory_order_acquire);
  for (;;) {
    if (IsSub(v)) {
      // A Sub never goes back to a single entry, so the slot decides.
      Block* expected = const_cast<Block*>(b);
      AsSub(v)
          ->At(UnitOf(addr))
          .compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
      return;
    }
    if (v == 0 || UnitTag(v) != UnitOf(addr) || AsBlock(v) != b) return;
    // A compare-and-swap, not a store: the entry may become a Sub meanwhile
    // (another base of the page being set), and then the slot is the one to
    // clear.
    if (e->compare_exchange_weak(v, 0, std::memory_order_acq_rel)) return;
  }
}

bool PageMap::SetSlow(uintptr_t addr, Block* b) {
  std::atomic<uintptr_t>* e = MakeEntry(addr);
  if (e == nullptr) return false;
  uintptr_t v = e->load(std::memory_order_acquire);
  for (;;) {
    if (v == 0) {
      if (e->compare_exchange_weak(v, Single(b, addr), std::memory_order_acq_rel)) return true;
      continue;
    }
    if (IsSub(v)) {
      AsSub(v)->At(UnitOf(addr)).store(b, std::memory_order_release);
      return true;
    }
    // Another live block starts in this page: the page becomes a Sub holding
    // both. It is published by one CAS; if the other block is claimed first,
    // the entry is empty again and the loop takes the plain path.
    MutexLock lock(&grow_mu_);
    Sub* sub = NewSub();
    for (std::atomic<Block*>& slot : sub->slot) slot.store(nullptr, std::memory_order_relaxed);
    sub->At(UnitTag(v)).store(AsBlock(v), std::memory_order_relaxed);
    sub->At(UnitOf(addr)).store(b, std::memory_order_relaxed);
    if (e->compare_exchange_strong(v, reinterpret_cast<uintptr_t>(sub) | 1,
                                   std::memory_order_acq_rel)) {
      return true;
    }
    free_subs_.push_back(sub);  // never published: reusable
  }
}

void PageMap::Discard(uintptr_t lo, uintptr_t hi) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Entries per page of a leaf, and the address span they cover.
  const size_t per_page = page / sizeof(std::atomic<uintptr_t>);
  const uintptr_t span = static_cast<uintptr_t>(per_page) << kPageShift;
  if (!Covers(lo) || hi <= lo) return;
  hi = std::min<uintptr_t>(hi, uintptr_t{1} << kAddressBits);
  const uintptr_t first = (lo + span - 1) / span * span;
  const uintptr_t last = hi / span * span;
  MutexLock lock(&grow_mu_);
  for (uintptr_t a = first; a < last;) {
    const uintptr_t p = a >> kPageShift;
    const uintptr_t leaf_end = ((p >> kLeafBits) + 1) << (kLeafBits + kPageShift);
    const uintptr_t end = std::min(last, leaf_end);
    Mid* mid = root_[p >> (kLeafBits + kMidBits)].load(std::memory_order_relaxed);
    Leaf* leaf =
        mid == nullptr
            ? nullptr
            : mid->leaf[(p >> kLeafBits) & (kMidEntries - 1)].load(std::memory_order_relaxed);
    if (leaf != nullptr) {
      // No live block in the range: the entries are empty or Subs with empty
      // slots. Subs go back to the free list first (only pages in memory can
      // hold one; mincore says which), then the pages, which read as zero.
      std::atomic<uintptr_t>* from = &leaf->e[p & (kLeafEntries - 1)];
      const size_t n = (end - a) >> kPageShift;
      const size_t bytes = n * sizeof(std::atomic<uintptr_t>);
      std::vector<unsigned char> resident((bytes + page - 1) / page);
      if (mincore(from, bytes, resident.data()) == 0) {
        for (size_t pg = 0; pg < resident.size(); ++pg) {
          if ((resident[pg] & 1) == 0) continue;
          for (size_t i = pg * per_page; i < std::min(n, (pg + 1) * per_page); ++i) {
            const uintptr_t v = from[i].load(std::memory_order_relaxed);
            if (IsSub(v)) free_subs_.push_back(AsSub(v));
          }
        }
        madvise(from, bytes, MADV_DONTNEED);
      }
    }
    a = end;
  }
}

}  // namespace streampool::internal
