#include "src/sim/checker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace streampool::internal {

const char* CheckKindName(CheckKind kind) {
  switch (kind) {
    case CheckKind::kOutOfBounds:
      return "out-of-bounds";
    case CheckKind::kUseAfterFree:
      return "use-after-free";
    case CheckKind::kUseBeforeReady:
      return "use-before-ready";
    case CheckKind::kOverlappingLifetimes:
      return "overlapping-lifetimes";
    case CheckKind::kNoAccess:
      return "no-access";
    case CheckKind::kFreeWhileRegistered:
      return "free-while-registered";
  }
  return "unknown";
}

void StreamOrderChecker::Report(CheckReport r) {
  if (reports_.size() < kMaxReports) reports_.push_back(std::move(r));
}

void StreamOrderChecker::OnAlloc(uintptr_t base, uint64_t size, StreamIndex stream,
                                 Position position, TimeNs ready_ns, const OrderOracle* order,
                                 std::shared_ptr<const AccessRights> rights) {
  const uintptr_t end = base + size;
  // Every earlier allocation sharing a byte must have been freed, and its free
  // completed, by the time the new one can be used.
  auto it = records_.lower_bound(base);
  if (it != records_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > base) it = prev;
  }
  while (it != records_.end() && it->first < end) {
    const Record& old = it->second;
    // Safe in stream order: freed synchronously (the caller's promise), on the
    // same stream, ordered before the allocating stream, or observed complete.
    auto covered = [&](StreamIndex s, Position p) {
      return s == stream || order == nullptr || order->OrderedAfter(s) >= p ||
             order->ObservedComplete(s) >= p;
    };
    bool ordered =
        old.freed && (old.free_stream == kNoStream || covered(old.free_stream, old.free_position));
    for (const auto& [u, p] : old.uses) ordered = ordered && covered(u, p);
    if (!ordered || old.free_end > ready_ns) {
      CheckReport r{CheckKind::kOverlappingLifetimes, stream, position, base, size};
      r.other_stream = old.freed ? old.free_stream : old.alloc_stream;
      r.other_position = old.freed ? old.free_position : old.alloc_position;
      r.message =
          old.freed ? absl::StrFormat(
                          "allocation [%#x, +%u) at stream %u op %u is usable at %u ns, but the "
                          "block [%#x, +%u) it overlaps is freed at stream %u op %u only at %u ns",
                          base, size, stream, position, ready_ns, it->first, old.size,
                          old.free_stream, old.free_position, old.free_end)
                    : absl::StrFormat(
                          "allocation [%#x, +%u) at stream %u op %u overlaps live allocation "
                          "[%#x, +%u) made at stream %u op %u",
                          base, size, stream, position, it->first, old.size, old.alloc_stream,
                          old.alloc_position);
      Report(std::move(r));
    }
    it = records_.erase(it);
  }
  Record rec{};
  rec.size = size;
  rec.alloc_stream = stream;
  rec.alloc_position = position;
  rec.rights = std::move(rights);
  records_.emplace(base, std::move(rec));
}

void StreamOrderChecker::OnFree(uintptr_t base, StreamIndex stream, Position position,
                                const VectorClock& clock, TimeNs end_ns,
                                absl::Span<const std::pair<StreamIndex, Position>> uses) {
  auto it = records_.find(base);
  if (it == records_.end()) return;
  for (const auto& [s, p] : it->second.last_access) {
    if (s == stream || clock.Get(s) >= p || Done(s) >= p) continue;
    CheckReport r{CheckKind::kUseAfterFree, s, p, base, it->second.size};
    r.other_stream = stream;
    r.other_position = position;
    r.message = absl::StrFormat(
        "access at stream %u op %u to [%#x, +%u) is not ordered before its free at stream %u op "
        "%u",
        s, p, base, it->second.size, stream, position);
    Report(std::move(r));
  }
  it->second.last_access.clear();
  it->second.freed = true;
  it->second.free_stream = stream;
  it->second.free_position = position;
  it->second.free_end = end_ns;
  it->second.uses.assign(uses.begin(), uses.end());
}

void StreamOrderChecker::OnFreeNow(uintptr_t base, TimeNs now_ns) {
  auto it = records_.find(base);
  if (it == records_.end()) return;
  it->second.freed = true;
  it->second.free_end = now_ns;
}

const std::pair<const uintptr_t, RegisteredRange>* StreamOrderChecker::RegisteredContaining(
    uintptr_t ptr, uint64_t size) const {
  if (registered_ == nullptr) return nullptr;
  auto it = registered_->upper_bound(ptr);
  if (it == registered_->begin()) return nullptr;
  --it;
  if (ptr - it->first >= it->second.size || size > it->first + it->second.size - ptr) {
    return nullptr;
  }
  return &*it;
}

void StreamOrderChecker::OnHostRegister(uintptr_t base, uint64_t size) {
  auto it = records_.lower_bound(base);
  if (it != records_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > base) it = prev;
  }
  while (it != records_.end() && it->first < base + size) {
    it = it->second.freed ? records_.erase(it) : std::next(it);
  }
}

void StreamOrderChecker::OnFreeRegistered(uintptr_t base, uint64_t size, uintptr_t reg,
                                          uint64_t reg_size) {
  CheckReport r{CheckKind::kFreeWhileRegistered, kNoStream, 0, base, size};
  r.message = absl::StrFormat(
      "host memory [%#x, +%u) freed while [%#x, +%u) of it is registered; the registration "
      "ends with it",
      base, size, reg, reg_size);
  Report(std::move(r));
}

void StreamOrderChecker::OnUnmap(uintptr_t base, uint64_t size) {
  auto it = records_.lower_bound(base);
  while (it != records_.end() && it->first < base + size) it = records_.erase(it);
}

void StreamOrderChecker::OnAccess(StreamIndex stream, Position position, const VectorClock& clock,
                                  uintptr_t ptr, uint64_t size, bool write, int device) {
  if (size == 0) return;
  const char* verb = write ? "write" : "read";
  auto it = records_.upper_bound(ptr);
  const Record* rec = nullptr;
  uintptr_t base = 0;
  if (it != records_.begin()) {
    --it;
    if (ptr < it->first + it->second.size) {
      rec = &it->second;
      base = it->first;
    }
  }
  if (rec == nullptr || size > base + rec->size - ptr) {
    if (const auto* reg = RegisteredContaining(ptr, size)) {
      if (write && reg->second.read_only) {
        CheckReport r{CheckKind::kNoAccess, stream, position, ptr, size};
        r.message = absl::StrFormat(
            "write of [%#x, +%u) at stream %u op %u to host memory [%#x, +%u) registered read-only",
            ptr, size, stream, position, reg->first, reg->second.size);
        Report(std::move(r));
      }
      return;
    }
    CheckReport r{CheckKind::kOutOfBounds, stream, position, ptr, size};
    r.message = absl::StrFormat(
        "%s of [%#x, +%u) at stream %u op %u is outside any allocation and any registered host "
        "range",
        verb, ptr, size, stream, position);
    Report(std::move(r));
    return;
  }
  if (rec->freed) {
    CheckReport r{CheckKind::kUseAfterFree, stream, position, ptr, size};
    r.other_stream = rec->free_stream;
    r.other_position = rec->free_position;
    r.message = absl::StrFormat(
        "%s of [%#x, +%u) at stream %u op %u after the allocation [%#x, +%u) was freed at stream "
        "%u op %u",
        verb, ptr, size, stream, position, base, rec->size, rec->free_stream, rec->free_position);
    Report(std::move(r));
    return;
  }
  if (device >= 0 && rec->rights != nullptr) {
    const uint8_t granted = rec->rights->Get(device);
    if (granted == AccessRights::kNone || (write && granted != AccessRights::kReadWrite)) {
      CheckReport r{CheckKind::kNoAccess, stream, position, ptr, size};
      r.other_stream = rec->alloc_stream;
      r.other_position = rec->alloc_position;
      r.message = absl::StrFormat(
          "%s of [%#x, +%u) at stream %u op %u from device %d, which the allocation's pool grants "
          "%s",
          verb, ptr, size, stream, position, device,
          granted == AccessRights::kNone ? "no access" : "read access only");
      Report(std::move(r));
      return;
    }
  }
  Record& live = it->second;
  bool seen = false;
  for (auto& [s, p] : live.last_access) {
    if (s == stream) {
      p = position;
      seen = true;
    }
  }
  if (!seen) live.last_access.emplace_back(stream, position);
  if (stream != rec->alloc_stream && clock.Get(rec->alloc_stream) < rec->alloc_position &&
      Done(rec->alloc_stream) < rec->alloc_position) {
    CheckReport r{CheckKind::kUseBeforeReady, stream, position, ptr, size};
    r.other_stream = rec->alloc_stream;
    r.other_position = rec->alloc_position;
    r.message = absl::StrFormat(
        "%s of [%#x, +%u) at stream %u op %u is not ordered after its allocation at stream %u "
        "op %u",
        verb, ptr, size, stream, position, rec->alloc_stream, rec->alloc_position);
    Report(std::move(r));
  }
}

}  // namespace streampool::internal
