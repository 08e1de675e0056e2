#include "src/pool/stream_frees.h"

namespace streampool::internal {

Block* StreamFrees::FindEligible(uint64_t size, Position bound, size_t probes) {
  if (index.empty()) return nullptr;
  // Entries are in free order, so the front bounds every pending free point.
  if (queue.empty() || queue.front().f > bound) return nullptr;
  SizeIndexNode* n;
  if (bound >= max_f) {
    n = index.FindBestFit(size);
  } else {
    n = index.FindBestFitIf(
        size, [bound](SizeIndexNode* x) { return Block::FromNode(x)->free_pos <= bound; }, probes);
  }
  return n == nullptr ? nullptr : Block::FromNode(n);
}

bool StreamFrees::CheckInvariants(StreamIndex s) const {
  if (!index.CheckInvariants()) return false;
  size_t valid = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const Entry& e = queue[i];
    if ((i > 0 && queue[i - 1].f > e.f) || e.f > max_f) return false;
    if (!IsValid(e)) continue;
    ++valid;
    if (e.block->stream != s || e.block->free_pos != e.f) return false;
  }
  return valid == index.size();
}

}  // namespace streampool::internal
