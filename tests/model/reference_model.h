// A reference model of stream-ordered pool semantics, for instruction-stream
// property tests (tests/model/property_test.cc).
//
// The model is deliberately simple and knows nothing of how a pool places
// blocks: no bins, no chunks' block lists, no coalescing. It keeps
//   * streams: position, vector clock and the end of the last op, with the
//     legacy-stream rules applied at every op (DESIGN.md "Ordering");
//   * events: the latest record's clock snapshot and completion time;
//   * `done`: what synchronize calls and successful queries proved complete,
//     transitively (a joined clock);
//   * virtual time: host time, and each op's start =
//     max(host now, previous end on its stream, ends of what it waits for);
//   * per pool: live allocations, and for every byte ever handed out its
//     previous occupant (the allocation whose free released it), its free
//     point and that free's completion time; the pool's frees not yet proven
//     complete; the sizes of the chunks it grew, while they are known.
//
// From that it judges each decision the pool reports. For the bytes a pool
// hands out, the "previous occupants" are the freed allocations that last
// held them; whatever blocks the pool merged or split, the reported reuse
// rule has a precondition every previous occupant must meet:
//   fresh            no previous occupant (bytes never handed out since mapped);
//   after-sync       every occupant's free proven complete (or spFree'd);
//   same-stream      every occupant proven, or freed on the allocating stream;
//   event-dependency switch on; every unproven occupant freed on one other
//                    stream S at f with VC(T)[S] >= f for T's next op;
//   opportunistic    switch on; every unproven occupant freed on one other
//                    stream and complete in virtual time at the call;
//   internal-dep.    switch on; growth impossible (maxSize or device
//                    capacity); a wait inserted on a pending free (S, f) of
//                    this pool with every unproven occupant freed on S at or
//                    before f.
// Beyond those, a few "musts" that no placement can excuse: an allocation
// whose growth fits must not fail or use rule 5; a stream's own unproven free
// that is large enough and still wholly free must be found by rule 1 (so no
// growth, no rule 2/3/5, no failure); a failed allocation changes nothing but
// failedAllocCount. Releases are checked against the release rule: never
// below the bound, and when the pool is wholly free and its chunk sizes are
// known, exactly the largest-first result.
//
// Its clocks follow DESIGN.md, plus the one approximation the ordering core
// documents: rule 5's inserted wait joins the free's whole clock only when
// the free is its stream's latest op, and otherwise raises VC(T)[S] alone.
// The executor compares every clock, `done`, every stream's last op end and
// host time with the runtime's after each instruction.
//
// What the model takes from the runtime rather than computing: the address
// an allocation got, the rule it reports, the pool's reserved bytes after a
// release (which chunks were wholly free depends on placement), and the point
// rule 5 waited on (learned from the runtime's clock of the allocating
// stream, then validated: it must be a pending free of the pool that explains
// that clock exactly).
//
// What it does not check (placement and policy choices it cannot see): that
// best fit was best; that rules 2, 3 and 5 were tried only after the earlier
// ones found nothing (a grow, a rule-3 or a rule-5 decision is accepted
// whenever its own precondition holds; only rule 1's certain candidates are
// enforced); which block rule 5 picks (DESIGN: the earliest FreeAsync);
// kCrossStreamProbes; largest_free_block beyond <= reserved - used; exact
// releases when the pool is not wholly free; the huge/THP/normal split beyond
// its sum; memory contents of fills. Nor anything the programs never do:
// spMalloc, DestroyPool and draining pools, host functions, copies, several
// runtimes or host threads, the threads executor, IPC.
#ifndef STREAMPOOL_TESTS_MODEL_REFERENCE_MODEL_H_
#define STREAMPOOL_TESTS_MODEL_REFERENCE_MODEL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "streampool/mem_pool.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"

namespace streampool::model {

// A vector clock indexed by stream index; missing entries are 0.
using Clock = std::vector<uint64_t>;

enum class StreamKind { kBlocking, kNonBlocking, kLegacy };

struct ModelConfig {
  int device_count = 1;
  uint64_t device_capacity = uint64_t{1} << 30;
  uint64_t api_call_ns = 0;
  uint64_t copy_bytes_per_us = 1000000;
  // DESIGN.md counts an allocation as fresh when its bytes were never handed
  // out, and as reuseAfterSync when they were. On: a misclassification is a
  // discrepancy (the pool once reported after-sync for never-used bytes,
  // regression_test.cc Finding.AfterSyncOfBytesNeverHandedOut). Off: counted
  // in coverage only.
  bool strict_fresh = true;
};

struct ModelPoolProps {
  AllocationType type = AllocationType::kDevice;
  int device = 0;
  uint64_t max_size = 0;
  bool follow = true;
  bool opportunistic = true;
  bool internal = true;
  uint64_t threshold = 0;
};

// What the runtime answered to one MallocFromPoolAsync.
struct AllocObservation {
  bool ok = false;
  uintptr_t ptr = 0;
  ReuseRule rule = ReuseRule::kFresh;
  // The pool's ReservedMemCurrent after the call.
  uint64_t reserved_after = 0;
  // The runtime's VC(T) after the call (used only to learn rule 5's wait).
  Clock clock_after;
};

// The pool's attributes as read back, in PoolAttr order (1..8).
using PoolAttrs = std::array<uint64_t, 8>;

// How many allocations the model saw served by each rule, and how many failed
// (coverage figures for the property test's report).
struct Coverage {
  std::array<uint64_t, 6> by_rule{};
  uint64_t failed = 0;
  uint64_t grew = 0;
  uint64_t exact_releases = 0;        // releases whose result the model predicted exactly
  uint64_t releases = 0;              // releases that unmapped something
  uint64_t own_candidate_checks = 0;  // allocations where rule 1 was known to apply
  // after-sync allocations none of whose bytes were handed out before (see
  // the note in ReferenceModel::Alloc).
  uint64_t after_sync_never_used = 0;
};

class ReferenceModel {
 public:
  // Creates one legacy stream per device (indices 0..device_count-1), as the
  // runtime does when it starts; that costs no host time.
  explicit ReferenceModel(const ModelConfig& config);

  // Streams, events, pools. Stream indices are dense in creation order, the
  // same numbering the runtime's ordering core uses.
  uint32_t LegacyStream(int device) const { return static_cast<uint32_t>(device); }
  uint32_t CreateStream(int device, bool non_blocking);
  void DestroyStream(uint32_t s);
  int CreateEvent();
  int AddPool(const ModelPoolProps& props);
  // Host time the setup left (the program's clock starts there).
  void SetNow(uint64_t now) { now_ = now; }

  // What a well-formed program may do, so that the stream-order checker has
  // nothing to report; the executor skips instructions that fail these.
  bool IsLive(int id) const { return live_.contains(id); }
  // T's next op is ordered after allocation `id`'s allocation point.
  bool MayAccess(uint32_t t, int id) const;
  // A FreeAsync on s would be ordered after every access to `id`.
  bool MayFreeAsync(int id, uint32_t s) const;
  // Every op touching `id` (and its allocation) has completed by now.
  bool MayFreeNow(int id) const;
  uintptr_t Address(int id) const { return live_.at(id).addr; }
  // Whether any live allocation (of any pool) contains addr.
  bool LiveAt(uintptr_t addr) const;
  uint64_t Requested(int id) const { return live_.at(id).requested; }
  int PoolOf(int id) const { return live_.at(id).pool; }

  // Instructions. Each mirrors one runtime call that succeeded (or, for
  // Alloc and the queries, whatever it answered); a non-OK status is a
  // discrepancy, its message "category: detail".
  absl::Status Alloc(int id, int pool, uint32_t t, uint64_t size, const AllocObservation& obs);
  void FreeAsync(int id, uint32_t s);
  void FreeNow(int id);
  void Kernel(uint32_t s, uint64_t duration_ns, const std::vector<int>& accessed);
  void Fill(uint32_t s, int id, uint64_t bytes);
  void Record(int e, uint32_t s);
  void Wait(uint32_t s, int e);
  void SyncStream(uint32_t s);
  void SyncEvent(int e);
  void SyncDevice(int device);
  absl::Status QueryStream(uint32_t s, bool runtime_ready);
  absl::Status QueryEvent(int e, bool runtime_ready);
  void Advance(uint64_t ns);
  void Trim(int pool, uint64_t min_bytes_to_keep);
  void SetAttr(int pool, PoolAttr attr, uint64_t value);

  // After every instruction: the pool's statistics and attributes against
  // the model's (and a release, if the instruction could make one, against
  // the release rule). `mapped(addr)` says whether an address is still
  // mapped by the runtime, to forget the history of released chunks.
  absl::Status CheckPool(int pool, const PoolStats& stats, const PoolAttrs& attrs,
                         const std::function<bool(uintptr_t)>& mapped);
  // The runtime's clocks, proven-complete clock, last op ends and host time
  // against the model's.
  absl::Status CheckOrdering(const std::vector<Clock>& clocks, const Clock& done,
                             const std::vector<uint64_t>& last_ends, uint64_t now) const;

  uint64_t now() const { return now_; }
  size_t stream_count() const { return streams_.size(); }
  int pool_count() const { return static_cast<int>(pools_.size()); }
  const Coverage& coverage() const { return coverage_; }

  // The rule size of a request in a pool of this type, or nullopt when it
  // overflows: ALIGN_UP(len, 256) for device and huge-page pools, 64 for
  // pinned host, ALIGN_UP(ALIGN_UP(len, 32) + 32, 128) for DVPP.
  static std::optional<uint64_t> RuleSize(AllocationType type, uint64_t len);

 private:
  struct Stream {
    int device = 0;
    StreamKind kind = StreamKind::kBlocking;
    uint64_t pos = 0;
    Clock clock;
    uint64_t last_end = 0;
    bool destroyed = false;
  };
  struct Event {
    bool recorded = false;
    uint64_t end = 0;
    Clock snapshot;
  };
  struct AccessRec {
    uint32_t stream;
    uint64_t pos;
    uint64_t end;
  };
  struct Live {
    int pool = 0;
    uint32_t stream = 0;
    uint64_t pos = 0;  // allocation point
    uint64_t end = 0;  // its completion time
    uintptr_t addr = 0;
    uint64_t size = 0;  // rule size
    uint64_t requested = 0;
    std::vector<AccessRec> accesses;  // the latest per stream
  };
  // Bytes whose last occupant is freed; keyed by address, never overlapping.
  struct Freed {
    int id = 0;
    uint64_t size = 0;
    uint64_t original_size = 0;  // size == original_size: none of it reused
    bool now = false;            // spFree: complete at once
    uint32_t stream = 0;         // free point (stream, pos), completing at end
    uint64_t pos = 0;
    uint64_t end = 0;
  };
  struct Pool {
    ModelPoolProps props;
    uint64_t max_size = 0;  // effective
    uint64_t granule = 256;
    bool pinned = false;
    bool follow = true, opportunistic = true, internal = true;
    uint64_t threshold = 0;
    uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
    uint64_t allocs = 0, frees = 0, failed = 0, waits = 0;
    uint64_t maps = 0, unmaps = 0, bytes_mapped = 0;
    std::array<uint64_t, 6> by_rule{};
    size_t live = 0;
    std::map<uintptr_t, Freed> history;
    // FreeAsync points into this pool not yet proven complete -> their end.
    std::map<std::pair<uint32_t, uint64_t>, uint64_t> unproven_frees;
    std::multiset<uint64_t> chunks;  // grown chunk sizes, while known
    bool chunks_known = true;
    // Set by a sync action or TrimTo: the bound the pool may release to.
    std::optional<uint64_t> release_bound;
  };

  void Charge() { now_ += config_.api_call_ns; }
  // VC of s's next op: its clock plus the legacy-stream joins that op makes.
  Clock NextClock(uint32_t s) const;
  // Appends an op to s; returns its end. `wait_end`: completion of an
  // explicit wait (event or inserted), 0 if none.
  uint64_t Enqueue(uint32_t s, uint64_t duration_ns, uint64_t wait_end);
  void Prove(const Clock& proof);
  bool Proven(uint32_t s, uint64_t pos) const { return Get(done_, s) >= pos; }
  bool EntirelyFree(const Pool& pool) const {
    return pool.live == 0 && pool.unproven_frees.empty();
  }
  uint64_t DeviceReserved(int device) const;
  void ReleaseAtSync();
  void Touch(int id, uint32_t s, uint64_t end);
  absl::Status CheckRelease(Pool& pool, uint64_t bound, const PoolStats& stats,
                            const std::function<bool(uintptr_t)>& mapped);

  static uint64_t Get(const Clock& c, uint32_t s) { return s < c.size() ? c[s] : 0; }
  static void Join(Clock& into, const Clock& other);

  ModelConfig config_;
  uint64_t now_ = 0;
  std::vector<Stream> streams_;
  std::vector<Event> events_;
  std::vector<Pool> pools_;
  Clock done_;
  absl::flat_hash_map<int, Live> live_;
  std::map<uintptr_t, int> live_by_addr_;  // every pool's live allocations
  Coverage coverage_;
};

const char* ReuseRuleLabel(ReuseRule rule);

}  // namespace streampool::model

#endif  // STREAMPOOL_TESTS_MODEL_REFERENCE_MODEL_H_
