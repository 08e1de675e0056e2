// GraphMemory: a device's graph memory, apart from its pools — the memory
// behind graph allocation nodes (docs/graphs.md, "Graph memory").
//
// Each allocation node owns an address range, reserved when the node is made
// and fixed for the life of whatever refers to it: its graph, the graph's
// executable graphs and the allocation while it is live (a graph allocation
// not freed in its graph outlives the graph). Memory is mapped behind a range
// when a launch reaches its allocation node and stays mapped after the free,
// so a relaunch reuses it in place. An allocation whose range has no memory
// takes the memory of ranges whose frees stream order shows finished before
// it (the free's stream is the allocating one, an event orders it before, or
// it was observed complete), unmapping them and mapping as much at its own
// address: physical memory moves between addresses the way CUDA remaps it,
// and the device's bytes grow only by what no such free covers. Trim unmaps
// every range whose free completed.
//
//   used     = Σ mapped bytes of ranges something still refers to
//   reserved = Σ mapped bytes (used, plus ranges nothing refers to, kept for
//              reuse until a trim)
//
// The pool layer's rule holds: a graph memory never sees an executor; it
// asks the OrderOracle. Used under the runtime's lock.
#ifndef STREAMPOOL_SRC_POOL_GRAPH_MEMORY_H_
#define STREAMPOOL_SRC_POOL_GRAPH_MEMORY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/ordering/oracle.h"
#include "src/pool/device_budget.h"
#include "streampool/graph.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {

class GraphMemory {
 public:
  // CUDA maps graph memory in 2 MiB pages: an allocation's range and memory
  // are its size rounded up to them.
  static constexpr uint64_t kGranule = uint64_t{2} << 20;

  struct Range {
    uint64_t size = 0;  // rounded
    uint64_t requested = 0;
    int refs = 0;
    bool mapped = false;
    bool live = false;
    Mapping mapping;
    // Where the last lifetime was freed; kNoStream: known complete.
    StreamIndex free_stream = kNoStream;
    Position free_position = 0;
  };

  // `upstream` must reserve (can_reserve()); `budget` is the device's.
  GraphMemory(PhysicalMemory& upstream, DeviceBudget& budget)
      : upstream_(upstream), budget_(budget) {}
  GraphMemory(const GraphMemory&) = delete;
  GraphMemory& operator=(const GraphMemory&) = delete;
  ~GraphMemory();

  // A new range of `bytes` (rounded), referred to once, with nothing mapped.
  absl::StatusOr<void*> Reserve(uint64_t bytes);
  // One more (fewer) reference to the range at `base`. The last release of
  // an unmapped range gives its addresses back; a mapped one is kept (in
  // reserved) until it is reused or trimmed.
  void Retain(void* base);
  void Release(void* base);
  // Memory behind `base` for a launch on oracle.stream() (nothing to do if
  // it has some): taken over from ranges whose frees are ordered before, or
  // new; never from the ranges in `keep` (the launch's own, which it is about
  // to use). ResourceExhausted when the device or the upstream is out of
  // memory, with nothing changed.
  // `moved` receives each range whose memory moved here (base, size), for
  // the checker to confirm its lifetime had ended.
  absl::Status Back(void* base, OrderOracle& oracle, absl::Span<void* const> keep,
                    std::vector<std::pair<void*, uint64_t>>* moved = nullptr);
  // An allocation node reached: the backed range at `base` becomes live.
  // FailedPrecondition while it is live.
  absl::Status Allocate(void* base, uint64_t requested);
  // The allocation at `base` freed at (s, p) (s == kNoStream: complete now).
  // FailedPrecondition when it is not live.
  absl::Status Free(void* base, StreamIndex s, Position p);
  // The range holding `ptr`, and its base; null when none does.
  const Range* Find(const void* ptr, void** base = nullptr) const;
  // Unmaps every range not live whose free `complete` says has completed,
  // and gives back the addresses of those nothing refers to.
  void Trim(const std::function<bool(StreamIndex, Position)>& complete);

  GraphMemStats stats() const;
  void ResetUsedHigh() { used_high_ = used_; }
  void ResetReservedHigh() { reserved_high_ = reserved_; }
  // used and reserved are the sums above; refs >= 0; live ranges are mapped.
  void CheckInvariants() const;

 private:
  using Ranges = std::map<uintptr_t, Range>;
  bool Reusable(const Range& r, OrderOracle& oracle) const;
  void Unmap(Range& r, bool release_budget = true);
  void Account(const Range& r, int sign);
  void Erase(Ranges::iterator it);

  PhysicalMemory& upstream_;
  DeviceBudget& budget_;
  Ranges ranges_;
  uint64_t used_ = 0;
  uint64_t used_high_ = 0;
  uint64_t reserved_ = 0;
  uint64_t reserved_high_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_GRAPH_MEMORY_H_
