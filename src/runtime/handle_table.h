// HandleTable: handle -> record in O(1), reads without a lock.
//
// A handle's object id (src/runtime/handles.h) is (generation << 16) | slot.
// Find reads the slot's published handle and compares: a stale handle (its
// slot since freed or reused) or a forged one never matches, so nothing is
// ever looked up through it. Slots are reused first in, first out, each up to
// 2^20 times; a slot whose generations are spent is never used again, so an
// id still names one object for the runtime's life.
//
// Records live in the slots, in chunks that are never freed before the table,
// so a reader racing with a removal reads a record that is free or reused,
// never freed memory. Fields a lock-free reader uses must be atomics (the
// fast path reads them; writers hold the owner's lock).
#ifndef STREAMPOOL_SRC_RUNTIME_HANDLE_TABLE_H_
#define STREAMPOOL_SRC_RUNTIME_HANDLE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "src/runtime/handles.h"
#include "src/util/check.h"

namespace streampool::internal {

template <typename T>
class HandleTable {
 public:
  static constexpr int kSlotBits = 16;
  static constexpr int kGenerationBits = 20;
  static constexpr uint32_t kCapacity = uint32_t{1} << kSlotBits;
  static_assert(kSlotBits + kGenerationBits == 36, "object ids are 36 bits");

  HandleTable(HandleKind kind, uint32_t runtime_id) : kind_(kind), runtime_id_(runtime_id) {}
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Whether Add would succeed.
  bool HasRoom() const { return !free_.empty() || next_slot_ < kCapacity; }

  // Takes a slot, lets `fill` set up its record, then publishes the handle
  // (a release store: a reader that finds the handle sees the record).
  // ResourceExhausted when every slot is in use or spent. Writers serialize.
  template <typename Fill>
  absl::StatusOr<uint64_t> Add(Fill fill) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.front();
      free_.pop_front();
    } else if (next_slot_ < kCapacity) {
      slot = next_slot_++;
      if ((slot & (kChunk - 1)) == 0) {
        chunks_.push_back(std::make_unique<Slot[]>(kChunk));
        dir_[slot / kChunk].store(chunks_.back().get(), std::memory_order_release);
      }
    } else {
      return absl::ResourceExhaustedError("handle table full");
    }
    Slot& s = SlotAt(slot);
    const uint64_t h = MakeHandle(kind_, runtime_id_, (uint64_t{s.generation} << kSlotBits) | slot);
    fill(s.value, h);
    s.handle.store(h, std::memory_order_release);
    return h;
  }

  // Unpublishes h (which must be live); its slot is reused later unless
  // its generations are spent.
  void Remove(uint64_t h) {
    const uint32_t slot = SlotOf(h);
    Slot& s = SlotAt(slot);
    SP_CHECK(s.handle.load(std::memory_order_relaxed) == h);
    s.handle.store(0, std::memory_order_release);
    if (++s.generation < (uint32_t{1} << kGenerationBits)) free_.push_back(slot);
  }

  // The record of a live handle, or null. Lock-free.
  T* Find(uint64_t h) const {
    if (KindOf(h) != kind_ || RuntimeIdOf(h) != runtime_id_) return nullptr;
    const uint32_t slot = SlotOf(h);
    const Slot* chunk = dir_[slot / kChunk].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    Slot& s = const_cast<Slot&>(chunk[slot % kChunk]);
    return s.handle.load(std::memory_order_acquire) == h ? &s.value : nullptr;
  }

  // Every live record (writers' lock held).
  template <typename Fn>
  void ForEach(Fn fn) {
    for (uint32_t slot = 0; slot < next_slot_; ++slot) {
      Slot& s = SlotAt(slot);
      if (const uint64_t h = s.handle.load(std::memory_order_relaxed); h != 0) fn(h, s.value);
    }
  }

 private:
  static constexpr uint32_t kChunk = 256;
  struct Slot {
    std::atomic<uint64_t> handle{0};
    uint32_t generation = 0;
    T value{};
  };
  static uint32_t SlotOf(uint64_t h) {
    return static_cast<uint32_t>(ObjectIdOf(h) & (kCapacity - 1));
  }
  Slot& SlotAt(uint32_t slot) {
    return dir_[slot / kChunk].load(std::memory_order_relaxed)[slot % kChunk];
  }

  const HandleKind kind_;
  const uint32_t runtime_id_;
  std::atomic<Slot*> dir_[kCapacity / kChunk] = {};
  std::vector<std::unique_ptr<Slot[]>> chunks_;
  std::deque<uint32_t> free_;
  uint32_t next_slot_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_HANDLE_TABLE_H_
