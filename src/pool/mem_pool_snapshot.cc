// MemPool: the block-level view (snapshots and leak reports).
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "src/pool/mem_pool.h"

namespace streampool::internal {
namespace {

struct CachedAt {
  StreamIndex stream;
  Position f;
};

// A READY block of an expandable chunk spanning unmapped granules, as one
// view per run of mapped or unmapped bytes (an unmapped run has
// unmapped_bytes == size), so that a snapshot shows where memory is.
void AppendRuns(const Chunk& c, const MemPool::BlockView& ready,
                std::vector<MemPool::BlockView>* blocks) {
  const uintptr_t end = ready.addr + ready.size;
  uintptr_t at = ready.addr;
  while (at < end) {
    const bool mapped = c.Mapped(c.GranuleOf(at));
    uintptr_t run_end = at;
    while (run_end < end && c.Mapped(c.GranuleOf(run_end)) == mapped) {
      run_end = std::min<uintptr_t>(end, c.base() + (c.GranuleOf(run_end) + 1) * Chunk::kGranule);
    }
    MemPool::BlockView v = ready;
    v.addr = at;
    v.size = run_end - at;
    v.unmapped_bytes = mapped ? 0 : v.size;
    blocks->push_back(v);
    at = run_end;
  }
}

}  // namespace

void MemPool::Snapshot(std::vector<ChunkView>* chunks,
                       std::vector<BlockView>* blocks) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  chunks->clear();
  blocks->clear();
  // The caches first, each under its own lock and never two at once (the
  // pool's lock, then one cache's: lock_rank.h).
  absl::flat_hash_map<const Block*, CachedAt> cached;
  caches_.ForEach([&](const FrontCache& c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    SpinLockHolder lock(&c.mu());
    c.ForEach([&](const FrontCache::Entry& e) { cached[e.block] = CachedAt{c.stream(), e.f}; });
  });
  chunks->reserve(backing_.segments());
  backing_.ForEachChunk([&](const Chunk& chunk) {
    const Chunk* c = &chunk;
    ChunkView cv;
    cv.base = c->base();
    cv.size = c->size();
    cv.mapped_bytes = c->mapped_bytes;
    cv.expandable = c->expandable;
    cv.first_block = blocks->size();
    for (const Block* b = c->first; b != nullptr; b = b->next) {
      BlockView v;
      v.addr = b->addr();
      v.size = b->size();
      v.state = b->state;
      switch (b->state) {
        case BlockState::kLive:
          v.requested = LoadRelaxed(b->requested);
          v.alloc_pos = LoadRelaxed(b->alloc_pos);
          if (auto it = cached.find(b); it != cached.end()) {
            v.cached = true;
            v.stream = it->second.stream;
            v.free_pos = it->second.f;
          } else {
            v.stream = LoadRelaxed(b->stream);
          }
          break;
        case BlockState::kPending:
        case BlockState::kDeferred:
          v.stream = b->stream;
          v.free_pos = b->free_pos;
          break;
        case BlockState::kReady:
          if (b->unmapped != 0) {
            AppendRuns(*c, v, blocks);
            continue;
          }
          break;
      }
      blocks->push_back(v);
    }
    cv.block_count = blocks->size() - cv.first_block;
    chunks->push_back(cv);
  });
}

void MemPool::LiveBlocks(std::vector<BlockView>* blocks) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<ChunkView> chunks;
  Snapshot(&chunks, blocks);
  std::erase_if(*blocks,
                [](const BlockView& v) { return v.state != BlockState::kLive || v.cached; });
}

}  // namespace streampool::internal
