#include "src/pool/graph_memory.h"

#include <algorithm>
#include <vector>

#include "src/util/check.h"

namespace streampool::internal {

GraphMemory::~GraphMemory() {
  for (auto it = ranges_.begin(); it != ranges_.end();) {
    Range& r = it->second;
    if (r.mapped) Unmap(r);
    upstream_.ReleaseReservation(reinterpret_cast<void*>(it->first), r.size);
    it = ranges_.erase(it);
  }
}

absl::StatusOr<void*> GraphMemory::Reserve(uint64_t bytes) {
  if (bytes == 0 || bytes > (uint64_t{1} << 48)) {
    return absl::InvalidArgumentError("a graph allocation of 0 bytes or more than 2^48");
  }
  const uint64_t size = (bytes + kGranule - 1) / kGranule * kGranule;
  absl::StatusOr<void*> base = upstream_.Reserve(size, kGranule);
  if (!base.ok()) return base.status();
  Range r;
  r.size = size;
  r.requested = bytes;
  r.refs = 1;
  ranges_.emplace(reinterpret_cast<uintptr_t>(*base), r);
  return *base;
}

void GraphMemory::Retain(void* base) {
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(base));
  SP_CHECK(it != ranges_.end());
  if (it->second.refs++ == 0 && it->second.mapped) used_ += it->second.size;
  used_high_ = std::max(used_high_, used_);
}

void GraphMemory::Release(void* base) {
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(base));
  SP_CHECK(it != ranges_.end() && it->second.refs > 0);
  Range& r = it->second;
  if (--r.refs > 0) return;
  if (r.mapped) {
    used_ -= r.size;  // kept, in reserved only, until reused or trimmed
  } else {
    Erase(it);
  }
}

void GraphMemory::Erase(Ranges::iterator it) {
  upstream_.ReleaseReservation(reinterpret_cast<void*>(it->first), it->second.size);
  ranges_.erase(it);
}

void GraphMemory::Account(const Range& r, int sign) {
  const uint64_t bytes = r.size;
  if (sign > 0) {
    reserved_ += bytes;
    if (r.refs > 0) used_ += bytes;
  } else {
    reserved_ -= bytes;
    if (r.refs > 0) used_ -= bytes;
  }
  used_high_ = std::max(used_high_, used_);
  reserved_high_ = std::max(reserved_high_, reserved_);
}

void GraphMemory::Unmap(Range& r, bool release_budget) {
  upstream_.UnmapAt(r.mapping);
  if (release_budget) budget_.Release(r.size);
  Account(r, -1);
  r.mapped = false;
  r.mapping = Mapping{};
}

bool GraphMemory::Reusable(const Range& r, OrderOracle& oracle) const {
  if (r.live) return false;
  if (r.free_stream == kNoStream) return true;
  if (r.free_stream == oracle.stream()) return true;
  return r.free_position <= oracle.OrderedAfter(r.free_stream) ||
         r.free_position <= oracle.ObservedComplete(r.free_stream);
}

absl::Status GraphMemory::Allocate(void* base, uint64_t requested) {
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(base));
  SP_CHECK(it != ranges_.end() && it->second.mapped);
  if (it->second.live) return absl::FailedPreconditionError("the graph allocation is still live");
  it->second.live = true;
  it->second.requested = requested;
  return absl::OkStatus();
}

absl::Status GraphMemory::Back(void* base, OrderOracle& oracle, absl::Span<void* const> keep,
                               std::vector<std::pair<void*, uint64_t>>* moved) {
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(base));
  SP_CHECK(it != ranges_.end());
  Range& r = it->second;
  // Memory stays behind an address from one lifetime to the next: the
  // address is the allocation's for good, and the launch that reuses it
  // follows the one before.
  if (r.mapped) return absl::OkStatus();
  // Donors: ranges whose memory may move here, smallest first so that
  // exact fits go first and large ranges stay whole.
  oracle.NeedOrder();
  std::vector<Ranges::iterator> donors;
  for (auto d = ranges_.begin(); d != ranges_.end(); ++d) {
    const bool kept =
        std::find(keep.begin(), keep.end(), reinterpret_cast<void*>(d->first)) != keep.end();
    if (d != it && !kept && d->second.mapped && Reusable(d->second, oracle)) donors.push_back(d);
  }
  std::stable_sort(donors.begin(), donors.end(),
                   [](auto a, auto b) { return a->second.size < b->second.size; });
  std::vector<Ranges::iterator> taken;
  uint64_t donated = 0;
  auto fit =
      std::find_if(donors.begin(), donors.end(), [&](auto d) { return d->second.size >= r.size; });
  if (fit != donors.end()) {
    taken.push_back(*fit);
    donated = (*fit)->second.size;
  } else {
    for (auto d = donors.rbegin(); d != donors.rend() && donated < r.size; ++d) {
      taken.push_back(*d);
      donated += (*d)->second.size;
    }
  }
  const uint64_t grow = r.size > donated ? r.size - donated : 0;
  if (!budget_.TryReserve(grow)) {
    return absl::ResourceExhaustedError("the device has no memory left for a graph allocation");
  }
  absl::StatusOr<Mapping> m = upstream_.MapAt(base, r.size);
  if (!m.ok()) {
    budget_.Release(grow);
    return m.status();
  }
  // The donors' bytes stay charged to the device: the new mapping holds
  // them (pools grow beside this without the runtime's lock, so bytes given
  // back could not be counted on to be there again).
  for (auto d : taken) {
    if (moved != nullptr) moved->emplace_back(reinterpret_cast<void*>(d->first), d->second.size);
    Unmap(d->second, /*release_budget=*/false);
    if (d->second.refs == 0) Erase(d);
  }
  budget_.Release(donated + grow - r.size);
  r.mapping = *m;
  r.mapped = true;
  Account(r, +1);
  return absl::OkStatus();
}

absl::Status GraphMemory::Free(void* base, StreamIndex s, Position p) {
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(base));
  if (it == ranges_.end() || !it->second.live) {
    return absl::FailedPreconditionError("not a live graph allocation");
  }
  it->second.live = false;
  it->second.free_stream = s;
  it->second.free_position = p;
  return absl::OkStatus();
}

const GraphMemory::Range* GraphMemory::Find(const void* ptr, void** base) const {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return nullptr;
  --it;
  if (addr >= it->first + it->second.size) return nullptr;
  if (base != nullptr) *base = reinterpret_cast<void*>(it->first);
  return &it->second;
}

void GraphMemory::Trim(const std::function<bool(StreamIndex, Position)>& complete) {
  for (auto it = ranges_.begin(); it != ranges_.end();) {
    Range& r = it->second;
    auto next = std::next(it);
    if (r.mapped && !r.live &&
        (r.free_stream == kNoStream || complete(r.free_stream, r.free_position))) {
      Unmap(r);
      if (r.refs == 0) Erase(it);
    }
    it = next;
  }
}

GraphMemStats GraphMemory::stats() const {
  return GraphMemStats{used_, used_high_, reserved_, reserved_high_};
}

void GraphMemory::CheckInvariants() const {
  uint64_t used = 0;
  uint64_t reserved = 0;
  for (const auto& [base, r] : ranges_) {
    SP_CHECK(r.refs >= 0);
    SP_CHECK(!r.live || r.mapped);
    SP_CHECK(r.refs > 0 || r.mapped);  // an unreferenced unmapped range is given back
    if (r.mapped) {
      reserved += r.size;
      if (r.refs > 0) used += r.size;
    }
  }
  SP_CHECK(used == used_);
  SP_CHECK(reserved == reserved_);
  SP_CHECK(used_ <= used_high_ && reserved_ <= reserved_high_);
}

}  // namespace streampool::internal
