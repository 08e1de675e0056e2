#include "src/ordering/vector_clock.h"

namespace streampool::internal {

// ------------------------------------------------------------ ClockTrie

void ClockTrie::Unref(Node* n, uint32_t height) {
  if (n->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (height == 0) {
    delete static_cast<Leaf*>(n);
    return;
  }
  Inner* in = static_cast<Inner*>(n);
  for (Node* c : in->child) {
    if (c != nullptr) Unref(c, height - 1);
  }
  delete in;
}

void ClockTrie::Own(Node** link, uint32_t height) {
  Node* n = *link;
  if (n == nullptr) {
    *link = height == 0 ? static_cast<Node*>(new Leaf) : new Inner;
    return;
  }
  // A count of 1 means no other handle or parent reaches the node, and none
  // can start to: copies are made of handles, which hold a count of their own.
  if (n->refs.load(std::memory_order_acquire) == 1) return;
  Node* copy;
  if (height == 0) {
    Leaf* leaf = new Leaf;
    std::copy(std::begin(static_cast<Leaf*>(n)->slot), std::end(static_cast<Leaf*>(n)->slot),
              leaf->slot);
    copy = leaf;
  } else {
    Inner* inner = new Inner;
    const Inner* from = static_cast<Inner*>(n);
    for (size_t i = 0; i < kFanout; ++i) {
      if ((inner->child[i] = from->child[i]) != nullptr) {
        inner->child[i]->refs.fetch_add(1, std::memory_order_relaxed);
      }
    }
    copy = inner;
  }
  *link = copy;
  Unref(n, height);
}

bool ClockTrie::Raise(StreamIndex s, Position p) {
  if (p <= Get(s)) return false;
  while (s >= Span(height_)) {
    if (root_ != nullptr) {
      Inner* up = new Inner;
      up->child[0] = root_;  // the handle's count moves to the new parent
      root_ = up;
    }
    ++height_;
  }
  Node** link = &root_;
  for (uint32_t h = height_;; --h) {
    Own(link, h);
    if (h == 0) break;
    link = &static_cast<Inner*>(*link)->child[(s >> (kBits * h)) & kMask];
  }
  static_cast<Leaf*>(*link)->slot[s & kMask] = p;
  return true;
}

size_t ClockTrie::Width() const {
  const Node* n = root_;
  if (n == nullptr) return 0;
  uint64_t base = 0;
  for (uint32_t h = height_; h > 0; --h) {
    const Inner* in = static_cast<const Inner*>(n);
    size_t i = kFanout;
    while (i > 0 && in->child[i - 1] == nullptr) --i;
    if (i == 0) return 0;
    base += (i - 1) * Span(h - 1);
    n = in->child[i - 1];
  }
  const Leaf* leaf = static_cast<const Leaf*>(n);
  size_t i = kFanout;
  while (i > 0 && leaf->slot[i - 1] == 0) --i;
  return i == 0 ? 0 : static_cast<size_t>(base + i);
}

void ClockTrie::ForEach(absl::FunctionRef<void(StreamIndex, Position)> f) const {
  struct Walk {
    absl::FunctionRef<void(StreamIndex, Position)>& f;
    void All(const Node* n, uint32_t height, uint64_t base) {
      if (height == 0) {
        const Leaf* leaf = static_cast<const Leaf*>(n);
        for (size_t i = 0; i < kFanout; ++i) {
          if (leaf->slot[i] != 0) f(static_cast<StreamIndex>(base + i), leaf->slot[i]);
        }
        return;
      }
      const Inner* in = static_cast<const Inner*>(n);
      for (size_t i = 0; i < kFanout; ++i) {
        if (in->child[i] != nullptr) All(in->child[i], height - 1, base + i * Span(height - 1));
      }
    }
  } walk{f};
  if (root_ != nullptr) walk.All(root_, height_, 0);
}

void ClockTrie::ForEachChanged(const ClockTrie& now, const ClockTrie& before,
                               absl::FunctionRef<void(StreamIndex, Position)> f) {
  if (now.root_ == nullptr) return;
  // `n` and `b` cover the same streams from `base`, at `height`; a null `b`
  // holds nothing.
  struct Walk {
    absl::FunctionRef<void(StreamIndex, Position)>& f;
    void Same(const Node* n, const Node* b, uint32_t height, uint64_t base) {
      if (n == b) return;  // shared: nothing changed below
      if (height == 0) {
        const Leaf* nl = static_cast<const Leaf*>(n);
        const Leaf* bl = static_cast<const Leaf*>(b);
        for (size_t i = 0; i < kFanout; ++i) {
          const Position p = nl->slot[i];
          if (p != 0 && (bl == nullptr || bl->slot[i] != p)) {
            f(static_cast<StreamIndex>(base + i), p);
          }
        }
        return;
      }
      const Inner* ni = static_cast<const Inner*>(n);
      const Inner* bi = static_cast<const Inner*>(b);
      for (size_t i = 0; i < kFanout; ++i) {
        if (ni->child[i] == nullptr) continue;
        Same(ni->child[i], bi != nullptr ? bi->child[i] : nullptr, height - 1,
             base + i * Span(height - 1));
      }
    }
    // `n` is taller than `b`, which covers the streams of n's first child.
    void Taller(const Node* n, uint32_t height, const Node* b, uint32_t b_height) {
      const Inner* ni = static_cast<const Inner*>(n);
      for (size_t i = 0; i < kFanout; ++i) {
        const Node* c = ni->child[i];
        if (c == nullptr) continue;
        if (i != 0) {
          Same(c, nullptr, height - 1, i * Span(height - 1));
        } else if (height - 1 == b_height) {
          Same(c, b, b_height, 0);
        } else {
          Taller(c, height - 1, b, b_height);
        }
      }
    }
  } walk{f};
  const Node* b = before.root_;
  uint32_t b_height = before.height_;
  // A taller `before`: the part of it covering now's streams.
  while (b != nullptr && b_height > now.height_) {
    b = static_cast<const Inner*>(b)->child[0];
    --b_height;
  }
  if (b != nullptr && b_height < now.height_) {
    walk.Taller(now.root_, now.height_, b, b_height);
  } else {
    walk.Same(now.root_, b, now.height_, 0);
  }
}

void ClockTrie::VisitNodes(absl::FunctionRef<bool(const void*)> visit) const {
  struct Walk {
    absl::FunctionRef<bool(const void*)>& visit;
    void From(const Node* n, uint32_t height) {
      if (!visit(n) || height == 0) return;
      for (const Node* c : static_cast<const Inner*>(n)->child) {
        if (c != nullptr) From(c, height - 1);
      }
    }
  } walk{visit};
  if (root_ != nullptr) walk.From(root_, height_);
}

// ---------------------------------------------------------- VectorClock

void VectorClock::Raise(StreamIndex s, Position p) {
  if (p == 0) return;
  auto it = std::lower_bound(entries_.begin(), entries_.end(), s,
                             [](const Entry& e, StreamIndex k) { return e.stream < k; });
  if (it != entries_.end() && it->stream == s) {
    it->position = std::max(it->position, p);
    return;
  }
  // An entry a shared part already covers would teach nothing.
  if (p <= SharedGet(s)) return;
  entries_.insert(it, Entry{s, p});
}

bool VectorClock::JoinShared(const SharedClock& shared) {
  for (SharedClock& mine : shared_) {
    if (mine.owner != shared.owner) continue;
    bool changed = false;
    if (shared.version > mine.version) {
      mine.version = shared.version;
      mine.table = shared.table;
      changed = true;
    }
    if (shared.at > mine.at) {
      mine.at = shared.at;
      changed = true;
    }
    if (changed) Prune();
    return changed;
  }
  shared_.push_back(shared);
  Prune();
  return true;
}

void VectorClock::Prune() {
  // Bounded, so that a clock with many own entries (the proven-complete one)
  // does not pay a pass over them for every newer snapshot it joins; what is
  // left is redundant, never wrong.
  constexpr size_t kPruneAtMost = 16;
  if (entries_.empty() || entries_.size() > kPruneAtMost) return;
  entries_.erase(
      std::remove_if(entries_.begin(), entries_.end(),
                     [this](const Entry& e) { return e.position <= SharedGet(e.stream); }),
      entries_.end());
}

bool VectorClock::Join(const VectorClock& other) {
  bool changed = false;
  for (const SharedClock& sh : other.shared_) changed |= JoinShared(sh);
  if (other.entries_.empty()) return changed;
  if (entries_.empty() && shared_.empty()) {
    entries_ = other.entries_;
    return true;
  }
  // Few entries: insert each in place. Many: one merge, so that joining
  // two wide clocks stays linear.
  constexpr size_t kInsertAtMost = 8;
  if (other.entries_.size() <= kInsertAtMost) {
    for (const Entry& e : other.entries_) {
      if (e.position > Get(e.stream)) {
        Raise(e.stream, e.position);
        changed = true;
      }
    }
    return changed;
  }
  absl::InlinedVector<Entry, 2> merged;
  merged.reserve(entries_.size() + other.entries_.size());
  auto a = entries_.begin();
  auto b = other.entries_.begin();
  while (a != entries_.end() || b != other.entries_.end()) {
    if (b == other.entries_.end() || (a != entries_.end() && a->stream < b->stream)) {
      merged.push_back(*a++);
      continue;
    }
    Position mine = 0;
    if (a != entries_.end() && a->stream == b->stream) mine = (a++)->position;
    if (b->position > mine && b->position > SharedGet(b->stream)) {
      merged.push_back(*b);
      changed = true;
    } else if (mine != 0) {
      merged.push_back(Entry{b->stream, mine});
    }
    ++b;
  }
  entries_ = std::move(merged);
  return changed;
}

bool VectorClock::LessOrEqual(const VectorClock& other) const {
  for (const Entry& e : entries_) {
    if (e.position > other.Get(e.stream)) return false;
  }
  for (const SharedClock& sh : shared_) {
    // A snapshot of the same owner at least as late holds all of this one.
    bool covered = false;
    for (const SharedClock& theirs : other.shared_) {
      covered = covered ||
                (theirs.owner == sh.owner && theirs.version >= sh.version && theirs.at >= sh.at);
    }
    if (covered) continue;
    if (sh.at > other.Get(sh.owner)) return false;
    bool ok = true;
    sh.table.ForEach([&](StreamIndex s, Position p) { ok = ok && p <= other.Get(s); });
    if (!ok) return false;
  }
  return true;
}

size_t VectorClock::width() const {
  size_t w = entries_.empty() ? 0 : entries_.back().stream + size_t{1};
  for (const SharedClock& sh : shared_) {
    w = std::max(w, sh.table.Width());
    if (sh.at != 0) w = std::max(w, sh.owner + size_t{1});
  }
  return w;
}

// -------------------------------------------------------- ClockFootprint

void ClockFootprint::Add(const VectorClock& clock) {
  entries_ += clock.stored_entries();
  for (const SharedClock& sh : clock.shared_) Add(sh.table);
}

void ClockFootprint::Add(const ClockTrie& table) {
  table.VisitNodes([this](const void* node) {
    if (!seen_.insert(node).second) return false;
    entries_ += ClockTrie::kFanout;
    return true;
  });
}

}  // namespace streampool::internal
