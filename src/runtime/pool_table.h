// PoolTable: a runtime's pools by handle.
//
// A pool is one of three kinds (what it can do follows from the kind, not from
// nullable fields): local, exportable (its memory a memfd another process may
// map) and imported (another process's pool, which allocates nothing). Every
// kind has the same attributes. Destroyed pools leave the table at once (their
// handles die) but stay here while they still hold allocations or frees not
// yet known complete: local pools drain, imported pools keep their mappings.
//
// The fast path reads a pool's slot without the owner's lock (FindFast); every
// other member needs the owner's lock.
#ifndef STREAMPOOL_SRC_RUNTIME_POOL_TABLE_H_
#define STREAMPOOL_SRC_RUNTIME_POOL_TABLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "src/memory/memfd_memory.h"
#include "src/ordering/vector_clock.h"
#include "src/pool/mem_pool.h"
#include "src/runtime/handle_table.h"
#include "src/runtime/ipc.h"
#include "src/sim/checker.h"

namespace streampool::internal {

class PoolTable {
 public:
  struct LocalPool {
    std::unique_ptr<MemPool> pool;
  };
  struct ExportablePool {
    std::unique_ptr<MemPool> pool;
    ExportableMemory memory;
  };
  struct ImportedPoolRef {
    std::shared_ptr<ImportedPool> pool;
  };
  struct PoolAttrs {
    bool is_default = false;
    // Which devices may touch its allocations (null: every device, as for
    // pinned host memory). Shared with the checker's records.
    std::shared_ptr<AccessRights> access;
    // The resident device (-1: host).
    int device = 0;
    // Made over a caller's upstream (spMemPoolCreateWithUpstream), whose
    // limits a recording's replay cannot have.
    bool custom_upstream = false;
  };
  struct PoolRec {
    std::variant<LocalPool, ExportablePool, ImportedPoolRef> kind;
    PoolAttrs attrs;
    // The pool's blocks: local and exportable pools (null: imported).
    MemPool* mem() const;
    // Exportable pools: their memory (else null). The pool itself answers
    // the same (MemPool::exportable), for finders that hold only a block.
    const ExportableMemory* exportable() const;
    // Imported pools (else null).
    const std::shared_ptr<ImportedPool>* imported() const;
  };

  explicit PoolTable(uint32_t runtime_id) : slots_(HandleKind::kPool, runtime_id) {}

  // Runs before a destroyed pool's MemPool is freed. The fast path finds a
  // pool without the owner's lock and uses it under a stream lock, after
  // checking the handle still names it; the owner passes every stream lock,
  // so no fast path that found the pool before it was unpublished is still
  // inside.
  void set_quiesce(std::function<void()> fn) { quiesce_ = std::move(fn); }
  // Runs once a destroyed pool's handle no longer resolves, before anything
  // else of the destroy: lookups memoized from the handle must miss from now.
  void set_unpublished(std::function<void()> fn) { unpublished_ = std::move(fn); }
  PoolTable(const PoolTable&) = delete;
  PoolTable& operator=(const PoolTable&) = delete;

  // Whether Add can issue one more handle; checked before a pool is built.
  bool HasRoom() const { return slots_.HasRoom(); }
  // A new handle for `rec`; ResourceExhausted when handles are used up.
  absl::StatusOr<uint64_t> Add(PoolRec rec);
  // The live pool of handle h: NotFound for anything else, InvalidArgument
  // for NULL (docs/design.md).
  absl::StatusOr<PoolRec*> Find(uint64_t h);
  // The fast path's lookup, without the lock: the blocks of a live local or
  // exportable pool, else null.
  MemPool* FindFast(uint64_t h) const {
    const Slot* slot = slots_.Find(h);
    return slot == nullptr ? nullptr : slot->pool.load(std::memory_order_acquire);
  }
  // Destroys handle h (a live pool): a local pool with allocations or pending
  // frees drains until AfterCompletion finds it empty; an imported one stays
  // until its imports are freed and those frees are known complete.
  void Remove(uint64_t h);
  // After completion was proven: PENDING -> READY in every pool; the release
  // threshold when `release` (sync actions; never for exportable pools, whose
  // chunks another process may map at any time, CUDA F.11.4); imported pools
  // retire what completed; destroyed pools that emptied go.
  void AfterCompletion(const VectorClock& done, bool release);
  // Drops everything (teardown): every pool gives its memory back.
  void Clear();

  // Every local and exportable pool, live or draining: fn(MemPool&).
  template <typename Fn>
  void ForEachMemPool(Fn fn) {
    for (auto& [h, rec] : pools_) {
      if (MemPool* m = rec.mem()) fn(*m);
    }
    for (auto& [h, pool] : draining_) fn(*pool);
  }
  // Every live pool's handle (local, exportable or imported): fn(h).
  template <typename Fn>
  void ForEachPool(Fn fn) const {
    for (const auto& [h, rec] : pools_) fn(h);
  }
  // The same with handles, stopping at the first fn(h, MemPool&) that returns
  // true.
  template <typename Fn>
  bool AnyMemPool(Fn fn) {
    for (auto& [h, rec] : pools_) {
      if (MemPool* m = rec.mem(); m != nullptr && fn(h, *m)) return true;
    }
    for (auto& [h, pool] : draining_) {
      if (fn(h, *pool)) return true;
    }
    return false;
  }
  // Every imported pool, live or destroyed with imports left, stopping at the
  // first fn(h, ImportedPool&) that returns true.
  template <typename Fn>
  bool AnyImported(Fn fn) {
    for (auto& [h, pool] : imported_) {
      if (fn(h, *pool)) return true;
    }
    return false;
  }
  // Imported pools destroyed by the caller go once nothing of them is left.
  void ReapImported();

 private:
  // A handle's slot: the pool the fast path allocates from (null for
  // imported pools).
  struct Slot {
    std::atomic<MemPool*> pool{nullptr};
  };
  void ReapDestroyed();
  // Frees a MemPool nobody can reach any more (after quiesce_).
  void Free(std::unique_ptr<MemPool> pool);

  std::function<void()> quiesce_;
  std::function<void()> unpublished_;
  HandleTable<Slot> slots_;
  absl::flat_hash_map<uint64_t, PoolRec> pools_;
  // Destroyed local pools that still had live allocations or pending frees.
  absl::flat_hash_map<uint64_t, std::unique_ptr<MemPool>> draining_;
  // Every imported pool by handle, including destroyed ones that still have
  // live imports or frees not known complete.
  absl::flat_hash_map<uint64_t, std::shared_ptr<ImportedPool>> imported_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_POOL_TABLE_H_
