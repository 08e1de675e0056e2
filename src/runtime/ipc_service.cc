#include "src/runtime/ipc_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/check.h"

namespace streampool::internal {

using AllocRec = AllocationIndex::Rec;
using PoolRec = PoolTable::PoolRec;

absl::StatusOr<int> IpcService::ExportPool(uint64_t pool) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  const ExportableMemory* exported = (*rec)->exportable();
  if (exported == nullptr) {
    return absl::InvalidArgumentError(
        "the pool is not exportable (create it with handleTypes = "
        "spMemHandleTypePosixFileDescriptor)");
  }
  const int fd = fcntl(exported->memfd->fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("duplicating the pool's descriptor: ", std::strerror(errno)));
  }
  return fd;
}

absl::StatusOr<uint64_t> IpcService::ImportPool(int fd) {
  if (absl::Status st = c_.HandleRoom(); !st.ok()) return st;
  if (c_.config.backing != Backing::kHost) {
    return absl::UnimplementedError("importing a pool needs Host backing");
  }
  absl::StatusOr<PoolFileHeader> header = ReadPoolFileHeader(fd);
  if (!header.ok()) return header.status();
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("duplicating the pool's descriptor: ", std::strerror(errno)));
  }
  ImportedPool::Hooks hooks;
  const uint32_t id = c_.id;
  Registry& registry = c_.process.registry();
  hooks.mapped = [id, &registry](uintptr_t base, uint64_t size) {
    registry.AddRange(base, size, id, /*touchable=*/true);
  };
  // Imported pools map and unmap only under the runtime's lock.
  hooks.unmapped = [this, &registry](uintptr_t base, uint64_t size) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    c_.OnUnmapped(base, size);
    registry.RemoveRange(base, size);
  };
  if (!c_.pools.HasRoom()) {
    return absl::ResourceExhaustedError("this runtime's pool handles are used up");
  }
  auto imported = std::make_shared<ImportedPool>(own, *header, std::move(hooks));
  PoolRec rec;
  rec.attrs.device = header->device;
  rec.attrs.access = c_.NewAccessRights(
      header->device, header->alloc_type == static_cast<int>(AllocationType::kPinnedHost)
                          ? AllocationType::kPinnedHost
                          : AllocationType::kDevice);
  rec.kind = PoolTable::ImportedPoolRef{std::move(imported)};
  absl::StatusOr<uint64_t> h = c_.pools.Add(std::move(rec));
  SP_CHECK(h.ok());  // HasRoom said so, under the same lock
  return *h;
}

absl::StatusOr<PtrExportData> IpcService::ExportPointer(const void* ptr) {
  AllocRec r;
  if (Block* b = c_.index.EntryAt(reinterpret_cast<uintptr_t>(ptr));
      b != nullptr && HolderOf(*b) != 0) {
    const MemPool& pool = *b->chunk->pool;
    r.block = b;
    r.requested = b->requested;
    if (const ExportableMemory* e = pool.exportable()) r.memfd = e->memfd;
  } else {
    const AllocRec* found = c_.index.Find(reinterpret_cast<uintptr_t>(ptr));
    if (found == nullptr) {
      return absl::InvalidArgumentError("pointer is not the start of a live allocation");
    }
    r = *found;
  }
  if (r.memfd == nullptr || r.block == nullptr) {
    return absl::InvalidArgumentError("the allocation is not from an exportable pool");
  }
  // What the importer maps: a chunk, or the granules of a reservation the
  // block lies in (file offsets inside a reservation are its own offsets).
  const Chunk& chunk = *r.block->chunk;
  uintptr_t lo = chunk.base(), hi = chunk.base() + chunk.size();
  if (chunk.expandable) {
    lo = chunk.base() + chunk.GranuleOf(r.block->addr()) * Chunk::kGranule;
    hi = chunk.base() + (chunk.GranuleOf(r.block->end() - 1) + 1) * Chunk::kGranule;
  }
  const std::optional<uint64_t> offset = r.memfd->FileOffsetOf(lo);
  SP_CHECK(offset.has_value());
  PtrExportData d;
  d.token = r.memfd->header().token;
  d.chunk_offset = *offset;
  d.chunk_size = hi - lo;
  d.offset_in_chunk = r.block->addr() - lo;
  d.requested = r.requested;
  d.block_size = r.block->size();
  return d;
}

absl::StatusOr<void*> IpcService::ImportPointer(uint64_t pool, const PtrExportData& data) {
  absl::StatusOr<PoolRec*> rec = c_.pools.Find(pool);
  if (!rec.ok()) return rec.status();
  if ((*rec)->imported() == nullptr) {
    return absl::InvalidArgumentError("pointers are imported into an imported pool");
  }
  absl::StatusOr<ImportedPool::Import> imp = (*(*rec)->imported())->ImportPointer(data);
  if (!imp.ok()) return imp.status();
  AllocRec r;
  r.pool_handle = pool;
  r.device = (*rec)->attrs.device;
  r.requested = imp->requested;
  r.imported = *(*rec)->imported();
  c_.index.Add(imp->base, std::move(r));
  if (c_.obs.checker()) {
    MutexLock order_lock(&c_.seq.mu());
    // The exporter's allocation point is in another process: the importer
    // orders its accesses with an interprocess event, which the checker
    // cannot see, so no order-based check applies.
    c_.obs.checker()->OnAlloc(imp->base, imp->block_size, kNoStream, 0, c_.seq.executor()->Now(),
                              nullptr, (*rec)->attrs.access);
    c_.obs.CheckerAfterEvent();
  }
  return reinterpret_cast<void*>(imp->base);
}

}  // namespace streampool::internal
