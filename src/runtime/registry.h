// Process-wide tables: live runtimes by id, and the address ranges each
// runtime has mapped (so a bare pointer, as spPointerGetAttributes gets, finds
// its runtime).
#ifndef STREAMPOOL_SRC_RUNTIME_REGISTRY_H_
#define STREAMPOOL_SRC_RUNTIME_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "src/util/mutex.h"

namespace streampool::internal {

class RuntimeImpl;

// One per Process (src/runtime/process.h).
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // A fresh runtime id, or 0 when ids are exhausted.
  uint32_t NextRuntimeId();
  void Add(uint32_t id, std::shared_ptr<RuntimeImpl> rt);
  // Removes and returns the runtime (null if absent).
  std::shared_ptr<RuntimeImpl> Remove(uint32_t id);
  std::shared_ptr<RuntimeImpl> Find(uint32_t id) const;
  // Like Find, but answers repeated lookups of one runtime from a per-thread
  // cache, so the hot path takes no lock and touches no reference count. The
  // cache is dropped whenever any runtime is removed.
  RuntimeImpl* FindCached(uint32_t id) {
    const uint64_t epoch = epoch_.load(std::memory_order_acquire);
    const FastCache& c = fast_cache_;
    if (c.registry == this && c.id == id && c.epoch == epoch && c.rt != nullptr) return c.rt;
    return FindCachedSlow(id, epoch);
  }

  // Makes [base, base + size) the runtime's, replacing whatever was recorded
  // for any part of it (an expandable pool's reservation is recorded
  // untouchable, and its granules touchable while mapped).
  void AddRange(uintptr_t base, uint64_t size, uint32_t runtime_id, bool touchable);
  // Forgets [base, base + size), whole ranges or parts of them.
  void RemoveRange(uintptr_t base, uint64_t size);
  // The runtime whose range contains addr, or 0.
  uint32_t RuntimeOwning(uintptr_t addr) const;
  // Whether [addr, addr + bytes) meets any runtime's range at all.
  bool Intersects(uintptr_t addr, uint64_t bytes) const;
  // Whether the host may write or read [addr, addr + bytes): it meets no
  // runtime's memory, or lies inside one touchable range of some runtime.
  bool SafeToTouch(uintptr_t addr, uint64_t bytes) const;

 private:
  struct Range {
    uintptr_t end;
    uint32_t runtime_id;
    bool touchable;
  };
  void CutLocked(uintptr_t base, uintptr_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A miss of FindCached: looks up, and keeps a reference in a second
  // per-thread slot so the runtime outlives the cached raw pointer.
  RuntimeImpl* FindCachedSlow(uint32_t id, uint64_t epoch);

  // Trivially destructible, so reading it needs no per-thread init check.
  struct FastCache {
    const Registry* registry;
    uint32_t id;
    uint64_t epoch;
    RuntimeImpl* rt;
  };
  // Initial-exec, as in_host_callback (runtime_core.h): read on every call.
  static inline thread_local FastCache fast_cache_ __attribute__((tls_model("initial-exec"))){};

  mutable Mutex mu_{LockRank::kRegistry};
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Bumped by every Remove; per-thread caches from an older epoch are stale.
  std::atomic<uint64_t> epoch_{1};
  absl::flat_hash_map<uint32_t, std::shared_ptr<RuntimeImpl>> runtimes_ ABSL_GUARDED_BY(mu_);
  absl::btree_map<uintptr_t, Range> ranges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_REGISTRY_H_
