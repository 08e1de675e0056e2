#include "src/runtime/direct_memory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/align.h"

namespace streampool::internal {

absl::StatusOr<void*> DirectMemory::Allocate(uint64_t size, int device, PhysicalMemory& upstream,
                                             DeviceBudget& budget) {
  const std::optional<uint64_t> bytes = CheckedAlignUp(size, kGranularity);
  const char* where = device < 0 ? "pinned host memory" : "device";
  if (!bytes || !budget.TryReserve(*bytes)) {
    return absl::ResourceExhaustedError(
        device < 0 ? absl::StrCat(where, " cannot hold ", size, " more bytes")
                   : absl::StrCat(where, " ", device, " cannot hold ", size, " more bytes"));
  }
  absl::StatusOr<Mapping> m = upstream.Map(*bytes);
  if (!m.ok()) {
    budget.Release(*bytes);
    return absl::ResourceExhaustedError(m.status().message());
  }
  Allocation a;
  a.mapping = *m;
  a.device = device;
  a.requested = size;
  a.upstream = &upstream;
  a.budget = &budget;
  a.seq = ++allocated_;
  allocs_.emplace(reinterpret_cast<uintptr_t>(m->base), a);
  return m->base;
}

std::optional<DirectMemory::Allocation> DirectMemory::Take(uintptr_t base) {
  auto it = allocs_.find(base);
  if (it == allocs_.end()) return std::nullopt;
  Allocation a = it->second;
  allocs_.erase(it);
  return a;
}

std::optional<int> DirectMemory::DeviceOf(uintptr_t base) const {
  auto it = allocs_.find(base);
  if (it == allocs_.end()) return std::nullopt;
  return it->second.device;
}

void DirectMemory::Unmap(const Allocation& a) {
  a.budget->Release(a.mapping.size);
  a.upstream->Unmap(a.mapping);
}

const DirectMemory::Allocation* DirectMemory::Containing(uintptr_t addr, uintptr_t* base) const {
  auto it = allocs_.upper_bound(addr);
  if (it == allocs_.begin()) return nullptr;
  --it;
  if (addr - it->first >= it->second.mapping.size) return nullptr;
  *base = it->first;
  return &it->second;
}

void DirectMemory::UnmapAll() {
  for (auto& [base, a] : allocs_) Unmap(a);
  allocs_.clear();
}

}  // namespace streampool::internal
