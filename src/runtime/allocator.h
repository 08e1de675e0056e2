// Allocator: every allocation and free — stream-ordered (MallocAsync,
// FreeAsync: the fast path through a stream's front cache, else the pool's
// central path with an OrderOracle answering from the ordering core and the
// executor), synchronous (Malloc, MallocHost: DirectMemory), and what a
// pointer is (GetPointerAttributes).
//
// Fast path (docs/design.md, "Performance model"): a lock-free handle lookup, the
// page map, one stream lock, a position; no runtime lock, no executor op.
#ifndef STREAMPOOL_SRC_RUNTIME_ALLOCATOR_H_
#define STREAMPOOL_SRC_RUNTIME_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/direct_memory.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {

class Allocator {
 public:
  explicit Allocator(RuntimeCore& core);
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // The fast paths, without the runtime's lock: true when served (result in
  // *out / done), false when the call must take the slow path.
  // An allocation first tries the stream's front cache under its stream
  // lock, then rules 0 and 1 under the pool's lock only
  // (MemPool::AllocateOwn); false when it needs the runtime's lock.
  // Then, when its own frees and READY memory cannot serve it, every rule
  // (other streams' frees, growth) under the pool's lock and the ordering
  // core's; an error there (out of memory) is the call's answer, in *error.
  bool TryMallocUnlocked(uint64_t size, uint64_t pool, uint64_t s, AllocInfo* out,
                         absl::Status* error);
  // Claims the pointer's page-map entry when it names a live block of this
  // runtime: *claimed then owns the free, whichever path finishes it.
  bool TryFreeFast(void* ptr, uint64_t s, Block** claimed, StreamIndex* idx, Position* f);
  // The central free of a block claimed from the page map: without the
  // runtime's lock (false when the checker needs it), or under it.
  bool TryFreeClaimed(Block* b, StreamIndex idx, Position f);
  void FreeClaimed(Block* b, StreamIndex idx, Position f);

  // The paths under the runtime's lock (the checker's records, spMalloc and
  // imported memory, exportable pools).
  // pool == 0: the stream's device's current pool.
  absl::StatusOr<AllocInfo> MallocAsync(uint64_t size, uint64_t pool, uint64_t s);
  absl::Status FreeAsync(void* ptr, uint64_t s);
  absl::StatusOr<void*> Malloc(uint64_t size, int device);
  absl::Status Free(void* ptr);
  absl::StatusOr<void*> MallocHost(uint64_t size);
  absl::Status FreeHost(void* ptr);
  absl::StatusOr<DeviceMemInfo> MemGetInfo(int device);
  absl::StatusOr<PointerAttributes> GetPointerAttributes(const void* ptr);
  // Unmaps every synchronous allocation (teardown).
  void UnmapAll() { direct_.UnmapAll(); }

 private:
  // What the paths without the runtime's lock allocate from: the pool handle
  // (the given one, or the device's current one), its MemPool and the
  // stream's slot.
  struct Target {
    uint64_t ph;
    MemPool* mp;
    StreamIndex t;
  };
  // Nullopt when those paths may not run (checker, timeline, host cost,
  // adapter, a destroyed runtime) or a handle is not live. The caller has
  // refused calls from host callbacks.
  std::optional<Target> FindTarget(uint64_t size, uint64_t pool, uint64_t s);
  // The tries of TryMallocUnlocked. FromCache pops the front cache under the
  // stream's lock; on a miss it pins the pool (MemPool::Pin) if the handle
  // still names it, so FromOwn and FromCentral, which run under the pool's
  // lock, never touch a pool freed meanwhile; the caller unpins.
  enum class CacheTry { kHit, kPinned, kGone };
  CacheTry FromCache(const Target& target, uint64_t size, Block** b);
  bool FromOwn(const Target& target, uint64_t size, Block** b, ReuseRule* rule);
  bool FromCentral(const Target& target, uint64_t size, Block** b, ReuseRule* rule,
                   absl::Status* error);
  // Makes a block handed out without the runtime's lock findable by its base
  // (pool handle ph). Reads nothing of the pool: the caller may have
  // unpinned it.
  void Publish(uint64_t ph, Block* b);
  // A pool's block handed out (slow path): recorded in the page map, or in
  // the core's allocs where the map cannot hold it.
  void RecordPoolAlloc(uint64_t pool_handle, const PoolTable::PoolRec& rec, Block* b);
  using AllocIterator = absl::flat_hash_map<uintptr_t, RuntimeCore::AllocRec>::iterator;
  // The core's record of a live allocation starting at ptr (one the page map
  // could not hold, or an imported pointer); InvalidArgument if none.
  absl::StatusOr<AllocIterator> LiveAlloc(const void* ptr);
  // A synchronous free, charged and told to the checker.
  void NoteFreeNow(const void* ptr);
  // spMalloc (device >= 0) and spMallocHost (device -1) once validated.
  absl::StatusOr<void*> AllocateDirect(uint64_t size, int device);

  RuntimeCore& c_;
  // Pinned host memory of spMallocHost: the host's pages, always touchable.
  std::shared_ptr<PhysicalMemory> host_upstream_;
  // Synchronous allocations: spMalloc (device) and spMallocHost (host).
  DirectMemory direct_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_ALLOCATOR_H_
