#include "src/runtime/registry.h"

#include <iterator>

#include "src/runtime/handles.h"
#include "src/util/check.h"

namespace streampool::internal {

uint32_t Registry::NextRuntimeId() {
  MutexLock lock(&mu_);
  if (next_id_ > kMaxRuntimeId) return 0;
  return next_id_++;
}

void Registry::Add(uint32_t id, std::shared_ptr<RuntimeImpl> rt) {
  MutexLock lock(&mu_);
  SP_CHECK(runtimes_.emplace(id, std::move(rt)).second);
}

std::shared_ptr<RuntimeImpl> Registry::Remove(uint32_t id) {
  MutexLock lock(&mu_);
  auto it = runtimes_.find(id);
  if (it == runtimes_.end()) return nullptr;
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  std::shared_ptr<RuntimeImpl> rt = std::move(it->second);
  runtimes_.erase(it);
  return rt;
}

std::shared_ptr<RuntimeImpl> Registry::Find(uint32_t id) const {
  MutexLock lock(&mu_);
  auto it = runtimes_.find(id);
  return it == runtimes_.end() ? nullptr : it->second;
}

RuntimeImpl* Registry::FindCachedSlow(uint32_t id, uint64_t epoch) {
  // The held reference keeps the cached runtime alive; the epoch check makes
  // a destroyed runtime miss at once.
  thread_local std::shared_ptr<RuntimeImpl> held;
  held = Find(id);
  fast_cache_ = FastCache{this, id, epoch, held.get()};
  return held.get();
}

void Registry::CutLocked(uintptr_t base, uintptr_t end) {
  auto it = ranges_.lower_bound(base);
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > base) {
      const Range old = prev->second;
      prev->second.end = base;
      if (old.end > end) ranges_[end] = old;
    }
  }
  it = ranges_.lower_bound(base);
  while (it != ranges_.end() && it->first < end) {
    if (it->second.end > end) {
      const Range rest = it->second;
      ranges_.erase(it);
      ranges_[end] = rest;
      break;
    }
    it = ranges_.erase(it);
  }
}

void Registry::AddRange(uintptr_t base, uint64_t size, uint32_t runtime_id, bool touchable) {
  MutexLock lock(&mu_);
  const uintptr_t end = base + size;
  CutLocked(base, end);
  // Neighbours with the same owner and touchability merge, so that memory
  // mapped piecewise (the granules of an expandable pool) is one range and a
  // copy across the pieces counts as inside one touchable range.
  auto [it, inserted] = ranges_.emplace(base, Range{end, runtime_id, touchable});
  auto same = [&](const Range& r) {
    return r.runtime_id == runtime_id && r.touchable == touchable;
  };
  auto next = std::next(it);
  if (next != ranges_.end() && next->first == end && same(next->second)) {
    it->second.end = next->second.end;
    ranges_.erase(next);
    it = ranges_.find(base);  // a btree's erase invalidates every iterator
  }
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end == base && same(prev->second)) {
      prev->second.end = it->second.end;
      ranges_.erase(it);
    }
  }
}

void Registry::RemoveRange(uintptr_t base, uint64_t size) {
  MutexLock lock(&mu_);
  CutLocked(base, base + size);
}

uint32_t Registry::RuntimeOwning(uintptr_t addr) const {
  MutexLock lock(&mu_);
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return 0;
  --it;
  return addr < it->second.end ? it->second.runtime_id : 0;
}

bool Registry::Intersects(uintptr_t addr, uint64_t bytes) const {
  MutexLock lock(&mu_);
  const uintptr_t end = bytes > UINTPTR_MAX - addr ? UINTPTR_MAX : addr + bytes;
  auto it = ranges_.lower_bound(end);
  if (it == ranges_.begin()) return false;
  --it;
  return it->second.end > addr;
}

bool Registry::SafeToTouch(uintptr_t addr, uint64_t bytes) const {
  MutexLock lock(&mu_);
  const uintptr_t end = bytes > UINTPTR_MAX - addr ? UINTPTR_MAX : addr + bytes;
  auto it = ranges_.lower_bound(end);
  if (it == ranges_.begin()) return true;
  --it;
  if (it->second.end <= addr) return true;  // nearest range below ends before us
  return it->first <= addr && end <= it->second.end && it->second.touchable;
}

}  // namespace streampool::internal
