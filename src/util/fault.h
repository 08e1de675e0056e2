// Fault injection for tests: make the n-th system call of a kind fail, so
// that exhaustion paths (no memory to map, no thread to start) are exercised
// deterministically instead of by exhausting the machine. Off unless a test
// arms it; an armed hook costs one relaxed atomic load per guarded call, and
// every guarded call is on a slow path (growth, release, stream creation).
#ifndef STREAMPOOL_SRC_UTIL_FAULT_H_
#define STREAMPOOL_SRC_UTIL_FAULT_H_

#include <atomic>
#include <cstdint>

namespace streampool::internal {

enum class Fault : int {
  kMmap = 0,          // any mmap / memfd mapping the memory layer makes
  kThreadCreate = 1,  // a stream worker thread of the threads executor
  kCount = 2,
};

class FaultInjection {
 public:
  // The n-th guarded call of `f` from now fails (n >= 1), and so does every
  // `every`-th call after it when `every` is non-zero; n == 0 disarms.
  static void Arm(Fault f, uint64_t n, uint64_t every = 0);
  static void DisarmAll();
  // Called by the guarded code: true when this call must fail.
  static bool ShouldFail(Fault f) { return armed_.load(std::memory_order_relaxed) && Next(f); }
  // Guarded calls that failed since the last Arm of `f`.
  static uint64_t injected(Fault f);

 private:
  static bool Next(Fault f);
  static std::atomic<bool> armed_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_FAULT_H_
