#include "src/util/call_gate.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <mutex>

#include "src/util/check.h"

namespace streampool::internal {
namespace {

pthread_key_t slot_key;

}  // namespace

CallGate::CallGate() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A thread that exits gives its slot back (DetachThread runs with the
    // slot as its value).
    SP_CHECK(pthread_key_create(&slot_key, &CallGate::DetachThread) == 0);
    AsymmetricFence::Init();
  });
}

CallGate::Slot* CallGate::AttachThread() {
  Slot* slot = nullptr;
  for (Slot* s = slots_.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    bool free = false;
    if (s->in_use.compare_exchange_strong(free, true, std::memory_order_acquire)) {
      slot = s;
      break;
    }
  }
  if (slot == nullptr) {
    // Never freed: a destroyer may be reading it at any time, and the next
    // thread to come takes it over.
    slot = new Slot;
    slot->in_use.store(true, std::memory_order_relaxed);
    Slot* head = slots_.load(std::memory_order_relaxed);
    do {
      slot->next = head;
    } while (!slots_.compare_exchange_weak(head, slot, std::memory_order_release,
                                           std::memory_order_relaxed));
  }
  slot->depth = 0;
  pthread_setspecific(slot_key, slot);
  thread_slot_ = slot;
  return slot;
}

void CallGate::DetachThread(void* p) {
  // Outside every call (a thread exits between calls), so gate is null.
  Slot* slot = static_cast<Slot*>(p);
  if (thread_slot_ == slot) thread_slot_ = nullptr;  // a later destructor's call attaches anew
  slot->in_use.store(false, std::memory_order_release);
}

void CallGate::Close() {
  closed_.store(true, std::memory_order_seq_cst);
  // Every thread now inside a call has made its slot visible, or will see
  // `closed` (the header: the other half of the asymmetric fence).
  AsymmetricFence::Heavy();
}

size_t CallGate::SlotCount() {
  size_t n = 0;
  for (Slot* s = slots_.load(std::memory_order_acquire); s != nullptr; s = s->next) ++n;
  return n;
}

void CallGate::Drain() const {
  for (Slot* s = slots_.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    for (int round = 0; s->gate.load(std::memory_order_acquire) == this; ++round) {
      if (round < 64) {
        sched_yield();
      } else {
        // A call may stay inside for long (a copy, another process's event):
        // poll at 100 us rather than keep a core busy.
        const timespec pause{0, 100 * 1000};
        nanosleep(&pause, nullptr);
      }
    }
  }
}

}  // namespace streampool::internal
