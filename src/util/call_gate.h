// CallGate: lets an object be destroyed while other threads may be calling
// into it.
//
// Every call passes the gate on entry and leaves on return; the destroyer
// closes it (calls that start afterwards are refused), wakes whatever it can
// that blocks inside, and drains it (waits until no call is inside) before it
// frees anything. Calls already inside therefore never read freed state, and
// calls that arrive late get an error instead of a crash.
//
// The count is striped over cache lines, a thread keeping to one stripe, so
// host threads calling in parallel do not pass one line back and forth.
// Entry is one locked add plus a load (a store-load pair that needs the full
// fence the add gives: either the caller sees the gate closed, or the
// destroyer sees the caller inside); leaving is one locked subtract.
#ifndef STREAMPOOL_SRC_UTIL_CALL_GATE_H_
#define STREAMPOOL_SRC_UTIL_CALL_GATE_H_

#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace streampool::internal {

class CallGate {
 public:
  CallGate() = default;
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  // False, with nothing counted, once the gate is closed.
  bool Enter() {
    std::atomic<int64_t>& n = stripes_[Stripe()].inside;
    n.fetch_add(1, std::memory_order_seq_cst);
    if (closed_.load(std::memory_order_seq_cst)) {
      n.fetch_sub(1, std::memory_order_release);
      return false;
    }
    return true;
  }
  void Exit() { stripes_[Stripe()].inside.fetch_sub(1, std::memory_order_release); }

  // Refuses every later Enter.
  void Close() { closed_.store(true, std::memory_order_seq_cst); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // After Close: returns once no call is inside. The caller must have woken
  // any call that blocks inside waiting for something only it would do.
  void Drain() const {
    for (int round = 0; Inside() != 0; ++round) {
      if (round < 64) {
        sched_yield();
      } else {
        // A call may be inside for long (a copy, another process's event):
        // poll at 100 us rather than keep a core busy.
        const timespec pause{0, 100 * 1000};
        nanosleep(&pause, nullptr);
      }
    }
  }

  // RAII: entered on construction when the gate is open.
  class Pass {
   public:
    explicit Pass(CallGate& gate) : gate_(gate), entered_(gate.Enter()) {}
    ~Pass() {
      if (entered_) gate_.Exit();
    }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    bool entered() const { return entered_; }

   private:
    CallGate& gate_;
    const bool entered_;
  };

 private:
  static constexpr uint32_t kStripes = 16;
  struct alignas(64) Counter {
    std::atomic<int64_t> inside{0};
  };

  // This thread's stripe, assigned round-robin on first use (0 means not yet,
  // so the thread-local needs no initializer).
  static uint32_t Stripe() {
    uint32_t s = stripe_plus_one_;
    if (s == 0) {
      s = next_stripe_.fetch_add(1, std::memory_order_relaxed) % kStripes + 1;
      stripe_plus_one_ = s;
    }
    return s - 1;
  }
  int64_t Inside() const {
    int64_t n = 0;
    for (const Counter& c : stripes_) n += c.inside.load(std::memory_order_seq_cst);
    return n;
  }

  static inline thread_local uint32_t stripe_plus_one_ __attribute__((tls_model("initial-exec"))) =
      0;
  static inline std::atomic<uint32_t> next_stripe_{0};

  Counter stripes_[kStripes];
  std::atomic<bool> closed_{false};
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_CALL_GATE_H_
