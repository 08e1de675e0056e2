#include "src/runtime/pool_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace streampool::internal {

MemPool* PoolTable::PoolRec::mem() const {
  if (const auto* l = std::get_if<LocalPool>(&kind)) return l->pool.get();
  if (const auto* e = std::get_if<ExportablePool>(&kind)) return e->pool.get();
  return nullptr;
}

const ExportableMemory* PoolTable::PoolRec::exportable() const {
  const auto* e = std::get_if<ExportablePool>(&kind);
  return e != nullptr ? &e->memory : nullptr;
}

const std::shared_ptr<ImportedPool>* PoolTable::PoolRec::imported() const {
  const auto* i = std::get_if<ImportedPoolRef>(&kind);
  return i != nullptr ? &i->pool : nullptr;
}

absl::StatusOr<uint64_t> PoolTable::Add(PoolRec rec) {
  MemPool* fast = rec.mem();
  const ExportableMemory* exported = rec.exportable();
  const ExportKind kind = exported != nullptr ? ExportKind{*exported} : ExportKind{LocalMemory{}};
  // The owner is set before the handle is published: a lock-free finder that
  // sees the handle reads it (an exportable pool sends its allocations to the
  // runtime's lock).
  absl::StatusOr<uint64_t> added = slots_.Add([fast, kind](Slot& slot, uint64_t h) {
    if (fast != nullptr) fast->set_owner(h, kind);
    slot.pool = fast;
  });
  if (!added.ok()) return absl::ResourceExhaustedError("this runtime's pool handles are used up");
  if (const std::shared_ptr<ImportedPool>* imp = rec.imported()) imported_.emplace(*added, *imp);
  pools_.emplace(*added, std::move(rec));
  return *added;
}

absl::StatusOr<PoolTable::PoolRec*> PoolTable::Find(uint64_t h) {
  if (h == 0) return absl::InvalidArgumentError("NULL pool handle");
  auto it = slots_.Find(h) != nullptr ? pools_.find(h) : pools_.end();
  if (it == pools_.end()) return absl::NotFoundError("invalid or destroyed pool handle");
  return &it->second;
}

void PoolTable::Remove(uint64_t h) {
  auto it = pools_.find(h);
  if (it == pools_.end()) return;
  PoolRec rec = std::move(it->second);
  pools_.erase(it);
  slots_.Remove(h);
  if (unpublished_) unpublished_();
  if (rec.imported() != nullptr) {
    // Live imports stay valid until freed, as a destroyed pool's allocations do.
    ReapImported();
    return;
  }
  std::unique_ptr<MemPool> mp;
  if (auto* l = std::get_if<LocalPool>(&rec.kind)) mp = std::move(l->pool);
  if (auto* e = std::get_if<ExportablePool>(&rec.kind)) mp = std::move(e->pool);
  // What its caches hold goes central; a destroyed pool caches nothing more.
  bool drains;
  {
    MutexLock pool_lock(&mp->central_mu());
    mp->set_front_cache(false);
    drains = mp->has_live_or_pending();
  }
  if (drains) {
    draining_.emplace(h, std::move(mp));
    ReapDestroyed();  // releases what is already wholly free
  } else {
    Free(std::move(mp));
  }
}

void PoolTable::Free(std::unique_ptr<MemPool> pool) {
  // Lock-free finders check the handle under a stream lock: once every
  // stream lock is passed, none can newly find or pin the pool. Those that
  // pinned it before (to go on to its lock) let go without waiting for
  // anything this thread holds.
  if (quiesce_) quiesce_();
  pool->WaitUnpinned();
  { MutexLock pass(&pool->central_mu()); }
  pool.reset();
}

void PoolTable::AfterCompletion(const VectorClock& done, bool release) {
  for (auto& [h, rec] : pools_) {
    MemPool* m = rec.mem();
    if (m == nullptr) continue;  // imported: retired below
    MutexLock pool_lock(&m->central_mu());
    m->Promote(done);
    if (release && rec.exportable() == nullptr) m->ReleaseAtSync();
  }
  for (auto& [h, pool] : draining_) {
    MutexLock pool_lock(&pool->central_mu());
    pool->Promote(done);
  }
  for (auto& [h, imported] : imported_) imported->Retire(done);
  ReapDestroyed();
  ReapImported();
}

void PoolTable::ReapImported() {
  for (auto it = imported_.begin(); it != imported_.end();) {
    if (!pools_.contains(it->first) && it->second->empty()) {
      imported_.erase(it++);
    } else {
      ++it;
    }
  }
}

void PoolTable::ReapDestroyed() {
  // A destroyed pool keeps nothing it does not have to: every chunk goes back
  // as soon as it is wholly free, and the pool itself once nothing is left.
  for (auto it = draining_.begin(); it != draining_.end();) {
    bool empty;
    {
      MutexLock pool_lock(&it->second->central_mu());
      it->second->Release(0);
      empty = !it->second->has_live_or_pending() && it->second->reserved() == 0;
    }
    if (empty) {
      Free(std::move(it->second));
      draining_.erase(it++);
    } else {
      ++it;
    }
  }
}

void PoolTable::Clear() {
  pools_.clear();  // ~MemPool returns every chunk
  draining_.clear();
  imported_.clear();  // ~ImportedPool unmaps what it mapped
}

}  // namespace streampool::internal
