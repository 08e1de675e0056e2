// SizeIndex: exact best-fit lookup over a pool's free blocks.
//
// A request for n bytes must get the free block with the smallest size >= n,
// and among blocks of that size the one with the lowest `order` (the pool's
// place of a block: its chunk's creation number, then its offset there), so
// that reuse packs towards the low end of a chunk and is the same in every
// process, wherever the system placed the chunks. The index
// sits on the allocator's hot path, so every operation costs O(trie depth)
// plus, within one size, an O(log k) amortized pairing-heap term (k = blocks
// of exactly that size); nothing ever scans blocks of other sizes.
//
// Layout. The key of a block is size / kSizeQuantum. Keys live in a sparse
// 64-ary radix trie: an internal node holds a bitmap of its non-empty
// children and 64 child pointers, so "next non-empty key >= k" is a masked
// std::countr_zero per level. Each child of a bottom-level node is a bin: the
// root of a pairing heap, ordered by `order`, of the nodes with that key. A
// bin is nothing but that root pointer; the trie allocates no per-bin memory.
//
// Height. The root covers keys < 64^height_. height_ starts at 1 and grows
// (never shrinks) to fit the largest key ever inserted, so a pool whose
// blocks stay below 64 KiB walks two levels, not eight. Growing pushes the
// current root down as child 0 of a fresh root; it happens at most
// kMaxHeight - 1 times in an index's life.
//
// Memory. Nodes are intrusive (SizeIndexNode is embedded in the caller's
// block). Trie nodes are allocated when a key path first appears; a node
// emptied by Remove goes onto a free list inside the index and is reused by
// the next path that needs one, so a steady state of inserts and removes
// never allocates. Trie memory is therefore the high-water mark of
// simultaneously live paths; it is returned only by the destructor. A trie
// node is 576 bytes, so the cost depends on how sparse the sizes are: every
// size up to 64 KiB fits under 33 nodes (~19 KiB in total), but isolated
// huge sizes each need up to one node per level of their own (measured:
// ~600 B per block for 64k sizes spread uniformly up to 1 GiB, ~2 KiB per
// block up to 2^45 B).
//
// Thread safety: none; the owning pool serializes access.
#ifndef STREAMPOOL_SRC_POOL_SIZE_INDEX_H_
#define STREAMPOOL_SRC_POOL_SIZE_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <utility>

namespace streampool::internal {

// Embedded in a caller's block. The caller sets `size`, `addr` and `order`
// before Insert and must not change them while the node is in an index.
// Ties between blocks of one size go to the lowest `order`.
struct SizeIndexNode {
  uint64_t size = 0;
  uintptr_t addr = 0;
  uint64_t order = 0;
  // Pairing-heap links, owned by the index.
  SizeIndexNode* child = nullptr;
  SizeIndexNode* sibling = nullptr;
  SizeIndexNode* prev = nullptr;  // parent if first child, else previous sibling
  bool in_index = false;
};

class SizeIndex {
 public:
  // Every size is a positive multiple of kSizeQuantum (the pool's block
  // alignment); dividing it out keeps the trie five bits shallower.
  static constexpr uint64_t kSizeQuantum = 32;
  // Largest accepted size: 2^52 bytes (4 PiB) is beyond any device memory,
  // and bounds the trie at kMaxHeight levels: 2^52 / 32 = 2^47 < 64^8.
  static constexpr uint64_t kMaxSize = uint64_t{1} << 52;

  SizeIndex();
  // Frees the trie. Nodes still in the index are not touched (their blocks
  // may already be gone); their in_index flags stay set.
  ~SizeIndex();
  SizeIndex(const SizeIndex&) = delete;
  SizeIndex& operator=(const SizeIndex&) = delete;

  // Precondition: !node->in_index; node->size is a positive multiple of
  // kSizeQuantum and <= kMaxSize.
  void Insert(SizeIndexNode* node);
  // Precondition: node->in_index and node is in THIS index (only verified
  // under STREAMPOOL_EXPENSIVE_CHECKS, since it costs a walk to the heap root).
  void Remove(SizeIndexNode* node);

  // Smallest size >= min_size, lowest order among equals; nullptr if none.
  // min_size need not be a multiple of kSizeQuantum.
  SizeIndexNode* FindBestFit(uint64_t min_size) const;

  // Like FindBestFit but only among nodes for which eligible(node) is true
  // (eligible is called with a SizeIndexNode* and must not modify the index).
  // Examines nodes in nondecreasing size order; inside the first bin that has
  // an eligible node, it examines the whole bin (subject to the budget) so the
  // lowest eligible order wins. Stops after examining at most `budget`
  // nodes and returns the best eligible node found so far (or nullptr).
  // *examined (if non-null) receives the number of nodes examined.
  //
  // "Examined" counts every node the search touches. Within a bin, once an
  // eligible node of order a is known, a node of order >= a is touched
  // (counted, eligible() not called) but its heap subtree is skipped: heap
  // order puts all of it at orders >= a.
  template <typename Pred>
  SizeIndexNode* FindBestFitIf(uint64_t min_size, Pred&& eligible, size_t budget,
                               size_t* examined = nullptr) const;

  // The node with the largest size (lowest order among equals); nullptr if
  // empty.
  SizeIndexNode* Largest() const;

  // Calls fn(node) with a SizeIndexNode* for every node, in increasing size
  // order (order within a size is unspecified); fn must not modify
  // the index.
  template <typename Fn>
  void ForEach(Fn&& fn) const;

  // ForEach restricted to nodes of size >= min_size.
  template <typename Fn>
  void ForEachAtLeast(uint64_t min_size, Fn&& fn) const;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // O(n) self-check. Invariants, for every trie node N at level l (bins are
  // children of level-0 nodes):
  //   bit i of N.bitmap == 1  <=>  N.slot[i] != nullptr;
  //   a non-root trie node has bitmap != 0 (emptied nodes are detached);
  //   every key reachable at the root is < 64^height_;
  //   for a bin with key k: the heap root has prev == sibling == nullptr,
  //     every heap node has size == k * kSizeQuantum and in_index, each
  //     child's order >= its parent's order, prev links mirror child/sibling;
  //   Σ |bin| == size_;
  //   every free-list node has bitmap == 0 and all slots null.
  // Returns false on any inconsistency.
  bool CheckInvariants() const;

 private:
  static constexpr int kBitsPerLevel = 6;
  static constexpr int kFanout = 1 << kBitsPerLevel;  // = bits in a bitmap
  static constexpr int kMaxHeight = 8;
  static_assert((kMaxSize / kSizeQuantum) >> (kBitsPerLevel * kMaxHeight) == 0,
                "kMaxHeight levels must cover every key up to kMaxSize");

  // 64-byte aligned so that the bitmap and the first slots share a line.
  // slot[i] is a TrieNode* above level 0 and a bin (SizeIndexNode*, the heap
  // root) at level 0; the level is always known from the walk.
  struct alignas(64) TrieNode {
    uint64_t bitmap = 0;
    TrieNode* next_free = nullptr;  // only while on free_list_
    void* slot[kFanout] = {};
  };

  // What a heap walk should do after visiting a node.
  enum class Walk { kDescend, kSkipChildren, kStop };

  static constexpr uint64_t KeyOf(uint64_t size) { return size / kSizeQuantum; }
  static constexpr unsigned Digit(uint64_t key, int level) {
    return static_cast<unsigned>(key >> (kBitsPerLevel * level)) & (kFanout - 1);
  }
  static TrieNode* ChildNode(const TrieNode* node, unsigned i) {
    return static_cast<TrieNode*>(node->slot[i]);
  }
  static SizeIndexNode* ChildBin(const TrieNode* node, unsigned i) {
    return static_cast<SizeIndexNode*>(node->slot[i]);
  }

  // Heap root of the smallest non-empty key >= key; nullptr if none.
  SizeIndexNode* FindBin(uint64_t key) const;
  // Smallest key whose size is >= min_size; false if no key can qualify.
  static bool QueryKey(uint64_t min_size, uint64_t* key);

  void GrowTo(uint64_t key);
  TrieNode* NewTrieNode();
  void ReleaseTrieNode(TrieNode* node);
  static void FreeSubtree(TrieNode* node, int level);
  bool CheckSubtree(const TrieNode* node, int level, uint64_t key_prefix, size_t* count) const;
  static bool CheckBin(const SizeIndexNode* root, uint64_t key, size_t limit, size_t* count);

  // Pairing heap on addr. Link melds two roots (their sibling/prev are the
  // caller's business) and returns the new root. MergePairs is the standard
  // two-pass pairing of a sibling list, iterative so that a degenerate heap
  // cannot overflow the stack; the result has prev == sibling == nullptr.
  static SizeIndexNode* Link(SizeIndexNode* a, SizeIndexNode* b);
  static SizeIndexNode* MergePairs(SizeIndexNode* first);

  // Pre-order walk of the heap rooted at `root`, treating child as the left
  // and sibling as the right link of a binary tree whose parent link is
  // `prev`. O(1) space: heaps can degenerate into long chains, so neither
  // recursion nor an explicit stack is acceptable. visit(x) returns a Walk;
  // kSkipChildren skips x's heap descendants (not its siblings). Returns
  // false if visit stopped the walk.
  template <typename Visit>
  static bool WalkHeap(SizeIndexNode* root, Visit&& visit);

  TrieNode root_;
  int height_ = 1;
  size_t size_ = 0;
  TrieNode* free_list_ = nullptr;
};

template <typename Visit>
bool SizeIndex::WalkHeap(SizeIndexNode* root, Visit&& visit) {
  SizeIndexNode* x = root;
  while (true) {
    const Walk w = visit(x);
    if (w == Walk::kStop) return false;
    if (w == Walk::kDescend && x->child != nullptr) {
      x = x->child;
      continue;
    }
    if (x != root && x->sibling != nullptr) {
      x = x->sibling;
      continue;
    }
    // Climb until we leave a left (child) subtree whose parent still has a
    // right (sibling) subtree to visit. Coming up from a right subtree means
    // that parent is finished too.
    while (true) {
      if (x == root) return true;
      SizeIndexNode* p = x->prev;
      if (p->child == x && p != root && p->sibling != nullptr) {
        x = p->sibling;
        break;
      }
      x = p;
    }
  }
}

template <typename Pred>
SizeIndexNode* SizeIndex::FindBestFitIf(uint64_t min_size, Pred&& eligible, size_t budget,
                                        size_t* examined) const {
  size_t seen = 0;
  SizeIndexNode* best = nullptr;
  uint64_t key;
  if (QueryKey(min_size, &key)) {
    for (SizeIndexNode* bin = FindBin(key); bin != nullptr && best == nullptr && seen < budget;
         bin = FindBin(KeyOf(bin->size) + 1)) {
      WalkHeap(bin, [&](SizeIndexNode* x) {
        if (seen == budget) return Walk::kStop;
        ++seen;
        if (best != nullptr && x->order >= best->order) {
          return Walk::kSkipChildren;
        }
        if (eligible(x)) {
          best = x;
          return Walk::kSkipChildren;
        }
        return Walk::kDescend;
      });
    }
  }
  if (examined != nullptr) *examined = seen;
  return best;
}

template <typename Fn>
void SizeIndex::ForEach(Fn&& fn) const {
  ForEachAtLeast(0, std::forward<Fn>(fn));
}

template <typename Fn>
void SizeIndex::ForEachAtLeast(uint64_t min_size, Fn&& fn) const {
  uint64_t key;
  if (!QueryKey(min_size, &key)) return;
  for (SizeIndexNode* bin = FindBin(key); bin != nullptr; bin = FindBin(KeyOf(bin->size) + 1)) {
    WalkHeap(bin, [&](SizeIndexNode* x) {
      fn(x);
      return Walk::kDescend;
    });
  }
}

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_SIZE_INDEX_H_
