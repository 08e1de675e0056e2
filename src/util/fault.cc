#include "src/util/fault.h"

#include "src/util/mutex.h"

namespace streampool::internal {
namespace {

struct Counter {
  uint64_t countdown = 0;  // fails when it reaches 1; 0: disarmed
  uint64_t every = 0;
  uint64_t injected = 0;
};

Mutex& Mu() {
  static Mutex* mu = new Mutex(LockRank::kFaultHook);  // lives as long as the process
  return *mu;
}

Counter& CounterOf(Fault f) {
  static Counter* counters = new Counter[static_cast<int>(Fault::kCount)];
  return counters[static_cast<int>(f)];
}

}  // namespace

std::atomic<bool> FaultInjection::armed_{false};

void FaultInjection::Arm(Fault f, uint64_t n, uint64_t every) {
  MutexLock lock(&Mu());
  Counter& c = CounterOf(f);
  c.countdown = n;
  c.every = every;
  c.injected = 0;
  bool any = false;
  for (int i = 0; i < static_cast<int>(Fault::kCount); ++i) {
    any |= CounterOf(static_cast<Fault>(i)).countdown != 0;
  }
  armed_.store(any, std::memory_order_relaxed);
}

void FaultInjection::DisarmAll() {
  MutexLock lock(&Mu());
  for (int i = 0; i < static_cast<int>(Fault::kCount); ++i) {
    CounterOf(static_cast<Fault>(i)).countdown = 0;
  }
  armed_.store(false, std::memory_order_relaxed);
}

uint64_t FaultInjection::injected(Fault f) {
  MutexLock lock(&Mu());
  return CounterOf(f).injected;
}

bool FaultInjection::Next(Fault f) {
  MutexLock lock(&Mu());
  Counter& c = CounterOf(f);
  if (c.countdown == 0) return false;
  if (--c.countdown != 0) return false;
  ++c.injected;
  c.countdown = c.every;  // 0: this was the only one
  return true;
}

}  // namespace streampool::internal
