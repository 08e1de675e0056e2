// AllocationIndex: which live allocation a bare address names.
//
// Contract. A live pool block is found by its base: in the page map (the fast
// path reads and sets it lock-free; a pool takes an entry out at its central
// free), else, for a base the map cannot hold, in a record kept here, which
// also holds every imported pointer. A block in a front cache keeps its entry
// but has no holder: it is no live allocation (PoolBlockAt). Beside each live
// block it keeps the streams the block was declared used by (RecordUse), as
// slots; a slot handed back for reuse was idle, so its declarations are
// dropped then (DropUsesOf). Address space given back takes its entries with
// it (Discard). It owns nothing it points to (blocks are their pools',
// imported pools the pool table's), and takes no lock: records and uses are
// the runtime lock's, the page map's entries lock-free.
#ifndef STREAMPOOL_SRC_RUNTIME_ALLOCATION_INDEX_H_
#define STREAMPOOL_SRC_RUNTIME_ALLOCATION_INDEX_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "src/ordering/ordering.h"
#include "src/pool/block.h"
#include "src/pool/page_map.h"

namespace streampool::internal {

class ImportedPool;
class MemfdMemory;
class MemPool;

class AllocationIndex {
 public:
  // A live pool allocation the page map cannot hold, or an imported pointer.
  struct Rec {
    MemPool* pool = nullptr;  // null for imported pointers
    uint64_t pool_handle = 0;
    Block* block = nullptr;
    int device = 0;
    uint64_t requested = 0;
    MemfdMemory* memfd = nullptr;            // allocations of exportable pools
    std::shared_ptr<ImportedPool> imported;  // imported pointers
  };
  using Uses = absl::InlinedVector<StreamIndex, 2>;

  // The page map, for the pools that set and clear its entries.
  PageMap& page_map() { return page_map_; }
  // The page map's block at addr, held or cached (null: none). Lock-free.
  Block* EntryAt(uintptr_t addr) const { return page_map_.Get(addr); }
  // Sets addr's entry; false when the map cannot hold it (then Add a Rec).
  bool SetEntry(uintptr_t addr, Block* b) { return page_map_.Set(addr, b); }
  // The live pool block starting at addr, from the page map or a record;
  // null for anything else.
  const Block* PoolBlockAt(uintptr_t addr) const {
    if (const Block* b = page_map_.Get(addr)) return HolderOf(*b) != 0 ? b : nullptr;
    const Rec* r = Find(addr);
    return r != nullptr ? r->block : nullptr;
  }

  void Add(uintptr_t addr, Rec r) { recs_.emplace(addr, std::move(r)); }
  const Rec* Find(uintptr_t addr) const {
    auto it = recs_.find(addr);
    return it != recs_.end() ? &it->second : nullptr;
  }
  // The record of addr, taken out (none: not a recorded allocation).
  std::optional<Rec> Take(uintptr_t addr);

  // s declared a user of the live block at base (once however often).
  void DeclareUse(uintptr_t base, StreamIndex s);
  // The streams declared users of base, forgotten here.
  Uses TakeUses(uintptr_t base);
  // base is freed with every access complete: its declarations go.
  void DropUses(uintptr_t base) { uses_.erase(base); }
  // The slot s is reused: its declarations go.
  void DropUsesOf(StreamIndex s);

  // [base, base + size), a chunk or a reservation, went back to the upstream:
  // no block lies there, and its entry pages can go. (Not at every granule
  // unmap: a pool maps its granules again and again, and each discard would
  // cost page faults and a TLB flush on the next allocation there. The map's
  // memory is bounded by the address space the runtime holds, at most an
  // eighth of what was ever mapped in it.)
  void Discard(uintptr_t base, uint64_t size) { page_map_.Discard(base, base + size); }
  // Teardown: every record and declaration goes (the page map goes with the
  // pools' memory).
  void Clear();

 private:
  PageMap page_map_;
  absl::flat_hash_map<uintptr_t, Rec> recs_;
  absl::flat_hash_map<uintptr_t, Uses> uses_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_ALLOCATION_INDEX_H_
