#include "src/runtime/allocation_index.h"

#include <algorithm>
#include <utility>

namespace streampool::internal {

std::optional<AllocationIndex::Rec> AllocationIndex::Take(uintptr_t addr) {
  auto it = recs_.find(addr);
  if (it == recs_.end()) return std::nullopt;
  Rec r = std::move(it->second);
  recs_.erase(it);
  return r;
}

void AllocationIndex::DeclareUse(uintptr_t base, StreamIndex s) {
  Uses& declared = uses_[base];
  if (std::find(declared.begin(), declared.end(), s) == declared.end()) declared.push_back(s);
}

AllocationIndex::Uses AllocationIndex::TakeUses(uintptr_t base) {
  auto it = uses_.find(base);
  if (it == uses_.end()) return {};
  Uses declared = std::move(it->second);
  uses_.erase(it);
  return declared;
}

void AllocationIndex::DropUsesOf(StreamIndex s) {
  for (auto it = uses_.begin(); it != uses_.end();) {
    Uses& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), s), list.end());
    if (list.empty()) {
      uses_.erase(it++);
    } else {
      ++it;
    }
  }
}

void AllocationIndex::Clear() {
  recs_.clear();
  uses_.clear();
}

}  // namespace streampool::internal
