#include "src/pool/size_index.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "src/util/check.h"

namespace streampool::internal {

SizeIndex::SizeIndex() = default;

SizeIndex::~SizeIndex() {
  // The root is a member; only what hangs below it was allocated.
  if (height_ > 1) {
    uint64_t bits = root_.bitmap;
    while (bits != 0) {
      const unsigned i = std::countr_zero(bits);
      bits &= bits - 1;
      FreeSubtree(ChildNode(&root_, i), height_ - 2);
    }
  }
  while (free_list_ != nullptr) {
    TrieNode* next = free_list_->next_free;
    delete free_list_;
    free_list_ = next;
  }
}

void SizeIndex::FreeSubtree(TrieNode* node, int level) {
  // Recursion depth is bounded by kMaxHeight, not by the number of blocks.
  if (level > 0) {
    uint64_t bits = node->bitmap;
    while (bits != 0) {
      const unsigned i = std::countr_zero(bits);
      bits &= bits - 1;
      FreeSubtree(ChildNode(node, i), level - 1);
    }
  }
  delete node;
}

SizeIndex::TrieNode* SizeIndex::NewTrieNode() {
  if (free_list_ != nullptr) {
    TrieNode* node = free_list_;
    free_list_ = node->next_free;
    node->next_free = nullptr;
    return node;
  }
  return new TrieNode;
}

void SizeIndex::ReleaseTrieNode(TrieNode* node) {
  // Precondition: node is detached and empty, so it can be handed out again
  // without clearing 64 slots.
  SP_DCHECK(node->bitmap == 0);
  node->next_free = free_list_;
  free_list_ = node;
}

void SizeIndex::GrowTo(uint64_t key) {
  while (height_ < kMaxHeight && (key >> (kBitsPerLevel * height_)) != 0) {
    if (root_.bitmap != 0) {
      // Push the whole current trie down one level: it becomes child 0 of
      // the root, since its keys all have a zero digit at the new level.
      TrieNode* old_root = NewTrieNode();
      old_root->bitmap = root_.bitmap;
      for (int i = 0; i < kFanout; ++i) {
        old_root->slot[i] = root_.slot[i];
        root_.slot[i] = nullptr;
      }
      root_.slot[0] = old_root;
      root_.bitmap = 1;
    }
    ++height_;
  }
}

bool SizeIndex::QueryKey(uint64_t min_size, uint64_t* key) {
  if (min_size > kMaxSize) return false;
  // Round up: a block of key k holds k * kSizeQuantum bytes.
  *key = (min_size + kSizeQuantum - 1) / kSizeQuantum;
  return true;
}

SizeIndexNode* SizeIndex::Link(SizeIndexNode* a, SizeIndexNode* b) {
  if (b->order < a->order) std::swap(a, b);
  // b becomes a's first child.
  b->sibling = a->child;
  if (a->child != nullptr) a->child->prev = b;
  b->prev = a;
  a->child = b;
  return a;
}

SizeIndexNode* SizeIndex::MergePairs(SizeIndexNode* first) {
  if (first == nullptr) return nullptr;
  // Pass 1, left to right: meld adjacent pairs, pushing each result onto a
  // stack threaded through `sibling`, so pass 2 can run right to left
  // without recursion or allocation.
  SizeIndexNode* stack = nullptr;
  SizeIndexNode* a = first;
  while (a != nullptr) {
    SizeIndexNode* b = a->sibling;
    SizeIndexNode* next = b != nullptr ? b->sibling : nullptr;
    SizeIndexNode* melded = a;
    if (b != nullptr) {
      b->sibling = nullptr;
      melded = Link(a, b);
    }
    melded->sibling = stack;
    stack = melded;
    a = next;
  }
  // Pass 2, right to left: fold the pairs into one heap.
  SizeIndexNode* result = stack;
  stack = stack->sibling;
  while (stack != nullptr) {
    SizeIndexNode* next = stack->sibling;
    result->sibling = nullptr;
    stack->sibling = nullptr;
    result = Link(result, stack);
    stack = next;
  }
  result->sibling = nullptr;
  result->prev = nullptr;
  return result;
}

void SizeIndex::Insert(SizeIndexNode* node) {
  SP_CHECK(!node->in_index);
  SP_CHECK(node->size > 0 && node->size % kSizeQuantum == 0 && node->size <= kMaxSize);
  const uint64_t key = KeyOf(node->size);
  GrowTo(key);

  TrieNode* t = &root_;
  for (int level = height_ - 1; level > 0; --level) {
    const unsigned d = Digit(key, level);
    if ((t->bitmap >> d & 1) == 0) {
      t->slot[d] = NewTrieNode();
      t->bitmap |= uint64_t{1} << d;
    }
    t = ChildNode(t, d);
  }

  node->child = nullptr;
  node->sibling = nullptr;
  node->prev = nullptr;
  node->in_index = true;
  const unsigned d = Digit(key, 0);
  if ((t->bitmap >> d & 1) == 0) {
    t->slot[d] = node;
    t->bitmap |= uint64_t{1} << d;
  } else {
    t->slot[d] = Link(ChildBin(t, d), node);
  }
  ++size_;
}

void SizeIndex::Remove(SizeIndexNode* node) {
  SP_CHECK(node->in_index);
#if SP_EXPENSIVE_CHECKS_ENABLED
  {
    // Precondition: node is in this index, i.e. its heap root is the bin
    // this trie holds for its key.
    const SizeIndexNode* r = node;
    while (r->prev != nullptr) r = r->prev;
    SP_EXPENSIVE_CHECK(FindBin(KeyOf(node->size)) == r);
  }
#endif
  SizeIndexNode* merged = MergePairs(node->child);

  if (node->prev != nullptr) {
    // Not a heap root: put the merged children where the node was. This
    // keeps heap order (they all have order >= node->order >= its parent's)
    // and, unlike cut-and-meld-with-root, never needs the bin, so removing
    // from the middle of a heap does not touch the trie at all.
    SizeIndexNode* p = node->prev;
    SizeIndexNode* s = node->sibling;
    SizeIndexNode* replacement = merged != nullptr ? merged : s;
    if (merged != nullptr) {
      merged->sibling = s;
      merged->prev = p;
      if (s != nullptr) s->prev = merged;
    } else if (s != nullptr) {
      s->prev = p;
    }
    if (p->child == node) {
      p->child = replacement;
    } else {
      p->sibling = replacement;
    }
  } else {
    // A heap root: the bin's pointer changes, so find it, remembering the
    // path in case the bin empties and nodes must be detached bottom-up.
    const uint64_t key = KeyOf(node->size);
    TrieNode* path[kMaxHeight];
    TrieNode* t = &root_;
    for (int level = height_ - 1; level > 0; --level) {
      path[level] = t;
      t = ChildNode(t, Digit(key, level));
    }
    unsigned d = Digit(key, 0);
    SP_DCHECK(ChildBin(t, d) == node);
    if (merged != nullptr) {
      t->slot[d] = merged;
    } else {
      t->slot[d] = nullptr;
      t->bitmap &= ~(uint64_t{1} << d);
      for (int level = 1; level < height_ && t->bitmap == 0; ++level) {
        ReleaseTrieNode(t);
        t = path[level];
        d = Digit(key, level);
        t->slot[d] = nullptr;
        t->bitmap &= ~(uint64_t{1} << d);
      }
    }
  }

  node->child = nullptr;
  node->sibling = nullptr;
  node->prev = nullptr;
  node->in_index = false;
  --size_;
}

SizeIndexNode* SizeIndex::FindBin(uint64_t key) const {
  if ((key >> (kBitsPerLevel * height_)) != 0) return nullptr;
  // Descend along key's digits. At each level remember whether a larger
  // sibling subtree exists: if the path dies below, the answer is the
  // minimum of the deepest such subtree (the nearest larger key).
  const TrieNode* t = &root_;
  const TrieNode* alt = nullptr;
  int alt_level = 0;
  uint64_t alt_bits = 0;
  for (int level = height_ - 1;; --level) {
    const unsigned d = Digit(key, level);
    const uint64_t bits = t->bitmap;
    if (level == 0) {
      const uint64_t at_or_above = bits & (~uint64_t{0} << d);
      if (at_or_above != 0) return ChildBin(t, std::countr_zero(at_or_above));
      break;
    }
    // Bits strictly above d; for d == 63 the shift leaves nothing, as it
    // should.
    const uint64_t above = bits & (~uint64_t{1} << d);
    if (above != 0) {
      alt = t;
      alt_level = level;
      alt_bits = above;
    }
    if ((bits >> d & 1) == 0) break;
    t = ChildNode(t, d);
  }
  if (alt == nullptr) return nullptr;
  t = alt;
  unsigned i = std::countr_zero(alt_bits);
  for (int level = alt_level; level > 0; --level) {
    t = ChildNode(t, i);
    i = std::countr_zero(t->bitmap);
  }
  return ChildBin(t, i);
}

SizeIndexNode* SizeIndex::FindBestFit(uint64_t min_size) const {
  uint64_t key;
  if (!QueryKey(min_size, &key)) return nullptr;
  return FindBin(key);
}

SizeIndexNode* SizeIndex::Largest() const {
  if (root_.bitmap == 0) return nullptr;
  const TrieNode* t = &root_;
  unsigned i = 63 - std::countl_zero(t->bitmap);
  for (int level = height_ - 1; level > 0; --level) {
    t = ChildNode(t, i);
    i = 63 - std::countl_zero(t->bitmap);
  }
  return ChildBin(t, i);
}

bool SizeIndex::CheckBin(const SizeIndexNode* root, uint64_t key, size_t limit, size_t* count) {
  if (root->prev != nullptr || root->sibling != nullptr) return false;
  // Each visit validates x's child list (prev links, heap order), so by the
  // time WalkHeap follows a prev link upwards that link has been checked.
  // `limit` stops a walk around a corrupted cycle.
  bool ok = true;
  WalkHeap(const_cast<SizeIndexNode*>(root), [&](SizeIndexNode* x) {
    if (++*count > limit || !x->in_index || x->size != key * kSizeQuantum) {
      ok = false;
      return Walk::kStop;
    }
    const SizeIndexNode* expected_prev = x;
    size_t siblings = 0;
    for (const SizeIndexNode* c = x->child; c != nullptr; c = c->sibling) {
      if (c->prev != expected_prev || c->order < x->order || ++siblings > limit) {
        ok = false;
        return Walk::kStop;
      }
      expected_prev = c;
    }
    return Walk::kDescend;
  });
  return ok;
}

bool SizeIndex::CheckSubtree(const TrieNode* node, int level, uint64_t key_prefix,
                             size_t* count) const {
  for (int i = 0; i < kFanout; ++i) {
    const bool bit = (node->bitmap >> i & 1) != 0;
    if (bit != (node->slot[i] != nullptr)) return false;
    if (!bit) continue;
    const uint64_t key = (key_prefix << kBitsPerLevel) | i;
    if (level == 0) {
      if (!CheckBin(ChildBin(node, i), key, size_, count)) return false;
    } else {
      const TrieNode* child = ChildNode(node, i);
      if (child->bitmap == 0) return false;
      if (!CheckSubtree(child, level - 1, key, count)) return false;
    }
  }
  return true;
}

bool SizeIndex::CheckInvariants() const {
  if (height_ < 1 || height_ > kMaxHeight) return false;
  size_t count = 0;
  if (!CheckSubtree(&root_, height_ - 1, 0, &count)) return false;
  if (count != size_) return false;
  for (const TrieNode* f = free_list_; f != nullptr; f = f->next_free) {
    if (f->bitmap != 0) return false;
    for (const void* s : f->slot) {
      if (s != nullptr) return false;
    }
  }
  return true;
}

}  // namespace streampool::internal
