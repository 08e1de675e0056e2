// StableVector: a vector whose elements never move, readable without a lock
// while another thread appends (under the owner's lock).
//
// Elements live in chunks of kChunk, found through a fixed directory, so an
// append never relocates anything a reader may hold or be reading, and a
// runtime with a few streams allocates one small chunk rather than reserving
// for the most it could ever have (which, reserved up front, cost every
// runtime megabytes of address space, and under ASan a mapping that
// outlived it in the allocator's quarantine). Readers must only index
// elements whose publication they synchronized with (the handle table's
// release store does that for stream slots).
#ifndef STREAMPOOL_SRC_UTIL_STABLE_VECTOR_H_
#define STREAMPOOL_SRC_UTIL_STABLE_VECTOR_H_

#include <atomic>
#include <cstddef>
#include <new>
#include <utility>

#include "src/util/check.h"

namespace streampool::internal {

template <typename T, size_t kChunk = 256, size_t kChunks = 256>
class StableVector {
 public:
  static constexpr size_t kCapacity = kChunk * kChunks;

  StableVector() = default;
  StableVector(const StableVector&) = delete;
  StableVector& operator=(const StableVector&) = delete;
  ~StableVector() {
    for (size_t i = 0; i < size_; ++i) (*this)[i].~T();
    for (size_t c = 0; c < kChunks; ++c) {
      if (T* chunk = dir_[c].load(std::memory_order_relaxed)) {
        ::operator delete(chunk, std::align_val_t(alignof(T)));
      }
    }
  }

  size_t size() const { return size_; }
  bool full() const { return size_ == kCapacity; }

  T& operator[](size_t i) { return dir_[i / kChunk].load(std::memory_order_acquire)[i % kChunk]; }
  const T& operator[](size_t i) const {
    return dir_[i / kChunk].load(std::memory_order_acquire)[i % kChunk];
  }

  // Appends (the caller checked !full()); writers serialize.
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    SP_CHECK(size_ < kCapacity);
    std::atomic<T*>& slot = dir_[size_ / kChunk];
    T* chunk = slot.load(std::memory_order_relaxed);
    if (chunk == nullptr) {
      chunk = static_cast<T*>(::operator new(sizeof(T) * kChunk, std::align_val_t(alignof(T))));
      slot.store(chunk, std::memory_order_release);
    }
    T* t = new (&chunk[size_ % kChunk]) T(std::forward<Args>(args)...);
    ++size_;
    return *t;
  }

 private:
  std::atomic<T*> dir_[kChunks] = {};
  size_t size_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_STABLE_VECTOR_H_
