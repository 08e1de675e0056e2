// A FIFO over a power-of-two array that grows but never shrinks, so a queue
// that reaches its steady-state length stops allocating (std::deque frees and
// reallocates its blocks as the ends move).
#ifndef STREAMPOOL_SRC_UTIL_RING_H_
#define STREAMPOOL_SRC_UTIL_RING_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "src/util/check.h"

namespace streampool::internal {

template <typename T>
class Ring {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  T& front() {
    SP_DCHECK(size_ > 0);
    return buf_[head_];
  }
  const T& front() const {
    SP_DCHECK(size_ > 0);
    return buf_[head_];
  }
  T& back() {
    SP_DCHECK(size_ > 0);
    return buf_[(head_ + size_ - 1) & (buf_.size() - 1)];
  }
  // i-th element from the front.
  T& operator[](size_t i) {
    SP_DCHECK(i < size_);
    return buf_[(head_ + i) & (buf_.size() - 1)];
  }
  const T& operator[](size_t i) const {
    SP_DCHECK(i < size_);
    return buf_[(head_ + i) & (buf_.size() - 1)];
  }

  void push_back(T value) {
    if (size_ == buf_.size()) Grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = std::move(value);
    ++size_;
  }
  void pop_front() {
    SP_DCHECK(size_ > 0);
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
  }
  void clear() {
    head_ = 0;
    size_ = 0;
  }

  // Keeps the elements for which keep(x) is true, in order.
  template <typename Pred>
  void Filter(Pred&& keep) {
    size_t out = 0;
    for (size_t i = 0; i < size_; ++i) {
      T& x = (*this)[i];
      if (keep(x)) (*this)[out++] = std::move(x);
    }
    size_ = out;
  }

 private:
  void Grow() {
    std::vector<T> bigger(buf_.empty() ? 16 : buf_.size() * 2);
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    buf_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> buf_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_RING_H_
