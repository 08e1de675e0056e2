// CallGate: lets an object be destroyed while other threads may be calling
// into it.
//
// Every call passes the gate on entry and leaves on return; the destroyer
// closes it (calls that start afterwards are refused), wakes whatever it can
// that blocks inside, and drains it (waits until no call is inside) before it
// frees anything. Calls already inside therefore never read freed state, and
// calls that arrive late get an error instead of a crash.
//
// The hot path pays two plain stores and a load. Each host thread has a slot
// (made on its first call, reused by a later thread once it exits) saying
// which gate it is inside. Entry is the classic store-then-load pair: write
// the slot, then read `closed`; the destroyer writes `closed`, then reads
// every slot. Such a pair needs a full fence on both sides, or each may miss
// the other. Ours sits on the destroyer's side alone: membarrier(2)'s
// PRIVATE_EXPEDITED command runs a full fence on every thread of the process
// that is running at that moment, so the caller needs only a compiler
// barrier (the asymmetric fence of RCU implementations). Where the kernel
// lacks the command, entry pays a real fence instead.
#ifndef STREAMPOOL_SRC_UTIL_CALL_GATE_H_
#define STREAMPOOL_SRC_UTIL_CALL_GATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/util/asymmetric_fence.h"

namespace streampool::internal {

class CallGate {
 public:
  CallGate();
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  // False, with nothing recorded, once the gate is closed. Calls on one
  // thread may nest (depth counted) within the same gate; a thread is inside
  // one gate at a time.
  bool Enter() {
    Slot* slot = thread_slot_;
    if (slot == nullptr) slot = AttachThread();
    if (slot->gate.load(std::memory_order_relaxed) == this) {
      ++slot->depth;
      return true;
    }
    slot->gate.store(this, std::memory_order_relaxed);
    AsymmetricFence::Light();
    if (closed_.load(std::memory_order_relaxed)) {
      slot->gate.store(nullptr, std::memory_order_release);
      return false;
    }
    slot->depth = 1;
    return true;
  }
  void Exit() {
    Slot* slot = thread_slot_;
    if (--slot->depth == 0) slot->gate.store(nullptr, std::memory_order_release);
  }

  // Refuses every later Enter.
  void Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // After Close: returns once no call is inside. The caller must have woken
  // any call that blocks inside waiting for something only it would do.
  void Drain() const;

  // Slots made so far: as many as host threads ever called at once.
  static size_t SlotCount();

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
  // One per host thread that ever called; never freed (a later thread takes
  // over an exited thread's), so the destroyer may read any at any time.
  struct alignas(64) Slot {
    std::atomic<const CallGate*> gate{nullptr};
    uint32_t depth = 0;  // the owner thread's alone
    std::atomic<bool> in_use{false};
    Slot* next = nullptr;  // the list of all slots; fixed once published
  };

  static Slot* AttachThread();
  static void DetachThread(void* slot);

  // Initial-exec and trivially constructed, as the other thread-locals the
  // hot path reads (src/runtime/runtime_core.h).
  static inline thread_local Slot* thread_slot_ __attribute__((tls_model("initial-exec"))) =
      nullptr;
  static inline std::atomic<Slot*> slots_{nullptr};

  std::atomic<bool> closed_{false};
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_CALL_GATE_H_
