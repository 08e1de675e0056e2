// A reference model of stream-ordered pool semantics, for instruction-stream
// property tests (tests/model/property_test.cc).
//
// The model is the specification written as plainly as possible, with none of
// the pool's machinery (no bins, no queues, no intrusive lists). It keeps
//   * streams: position, vector clock and the end of the last op, with the
//     legacy-stream rules applied at every op (docs/design.md "Ordering");
//   * events: the latest record's clock snapshot and completion time;
//   * `done`: what synchronize calls and successful queries proved complete,
//     transitively (a joined clock);
//   * virtual time: host time, and each op's start =
//     max(host now, previous end on its stream, ends of what it waits for);
//   * per pool, its reservations (expandable growth) or chunks (chunked
//     growth), each a flat list of blocks tiling it in address order and, for
//     a reservation, the set of its mapped 2 MiB granules.
//
// From that it decides every allocation itself, by docs/design.md "Serving" and
// the choices the pool documents (src/pool/mem_pool.h), and the runtime must
// agree bit for bit: the outcome, the block as (reservation, offset), the
// reuse rule, the point rule 5 waits on, and after every instruction every
// statistic and attribute (reserved and its watermark, upstream maps, unmaps
// and bytes, the largest free block, ...), clocks and virtual time. Only the
// base of a new reservation or chunk is the runtime's to choose: the model
// learns it from the allocation that made it (at offset 0 always) and checks
// that it is aligned and overlaps no other; every other address it predicts.
//
// The rules, as the model applies them (best fit = smallest size, then lowest
// address):
//   1. READY blocks whose granules are all mapped, and T's own PENDING blocks;
//      failing those, a READY block spanning unmapped granules whose low end
//      [addr, addr + size) is mapped;
//   2. (follow switch) PENDING(S, f) of another stream with f <= VC(T)[S];
//   3. (opportunistic switch, some block pending) promotion on observation:
//      every PENDING(S, f) whose free completed in virtual time (end <= host
//      now) becomes READY, whatever S, T included; then READY blocks as in
//      rule 1;
//   4. growth. Chunked: a new chunk of ALIGN_UP(size, 2 MiB). Expandable: the
//      best-fitting READY block that spans unmapped granules, carved at its
//      low end after mapping what [addr, addr + size) lacks (one upstream map
//      per run of unmapped granules); if maxSize or the device refuses, the
//      best such block whose shortfall fits; else a new reservation (maxSize,
//      at most 128 GiB; DVPP: 1 GiB);
//   5. (internal switch) the PENDING block of another stream, large enough,
//      whose FreeAsync came first; T waits on its free point;
//   6. failure (promotions made by rule 3 stay).
// Counting a READY block's reuse: fresh when its first byte was never handed
// out (what was handed out is a prefix of each reservation or chunk, since
// blocks are carved at their low end); else, while it holds frees promoted by
// observation and no proof (sync action or successful query, of anything)
// has happened since, same-stream when all of them were T's, opportunistic
// otherwise; else after-sync.
// Coalescing: adjacent READY blocks always merge; adjacent PENDING blocks of
// one stream merge (free point, host order and end of the later free); a
// PENDING block never absorbs a READY one. The release rule (threshold at a
// sync action, minBytesToKeep at TrimTo): chunked, wholly free chunks largest
// first (then oldest), skipping any whose release would undershoot;
// expandable, whole mapped granules inside READY blocks, largest block first
// (then older reservation, lower address), from the top of a block down,
// stopping where one more granule would undershoot. A reservation left with
// nothing mapped goes back, but a pool other than DVPP (whose window all
// pools share) keeps its last one.
//
// Where the model allows a choice: rule 2 examines at most 32 blocks per
// stream when only part of that stream's frees are eligible
// (MemPool::kCrossStreamProbes). Where a stream has more candidates than
// that, any eligible block of it (or none) is accepted, provided no stream
// searched exhaustively offered a better one; the model then follows the
// runtime's choice. The same bound on the searches among READY blocks that
// span unmapped granules (rules 1, 3, 4) cannot bind with the generated
// programs' device sizes (a block per run of unmapped granules, at most one
// per mapped one); the model reports a model limit if it ever could.
//
// Beside the decisions, an independent safety check that does not trust the
// model's own placement: for every byte handed out, its previous occupant
// (the allocation whose free released it) must be proven complete, ordered
// before T, complete in virtual time at the call, or covered by rule 5's
// wait, and consistent with the reported rule (fresh: none; after-sync:
// proven or complete; ...).
//
// Not checked (the programs never do it): spMalloc, DestroyPool and draining
// pools, host functions, copies, several runtimes or host threads, the
// threads executor, IPC; nor the huge/THP/normal split beyond its sum, nor
// memory contents of fills.
#ifndef STREAMPOOL_TESTS_MODEL_REFERENCE_MODEL_H_
#define STREAMPOOL_TESTS_MODEL_REFERENCE_MODEL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
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
  // docs/design.md counts an allocation as fresh when its bytes were never handed
  // out, and as reuseAfterSync when they were. On: after-sync for bytes none
  // of which had an occupant is a discrepancy (the pool once did that,
  // regression_test.cc Finding.AfterSyncOfBytesNeverHandedOut). Off: counted
  // in coverage only.
  bool strict_fresh = true;
  // RuntimeConfig::oom_reclaim (docs/design.md "Memory pressure"): an
  // allocation that fails for lack of memory makes its pool, then every pool
  // of the same budget, flush its caches, promote what rule 3 would (with the
  // opportunistic switch), release every whole READY granule or chunk, and
  // is served once more when anything was released.
  bool oom_reclaim = false;
};

struct ModelPoolProps {
  AllocationType type = AllocationType::kDevice;
  int device = 0;
  uint64_t max_size = 0;
  bool follow = true;
  bool opportunistic = true;
  bool internal = true;
  uint64_t threshold = 0;
  // kDefault is expandable: every built-in upstream can reserve.
  PoolGrowth growth = PoolGrowth::kDefault;
  // spMemPoolAttrFrontCache (src/pool/front_cache.h); the program text says
  // cache=1 for it, and a program without the key runs with the caches off.
  bool front_cache = false;
  // PoolProps::wait_before_growth and soft_reserved_limit; a program without
  // the keys (wait=1, soft=<bytes>) runs in CUDA's order.
  bool wait_before_growth = false;
  uint64_t soft_limit = UINT64_MAX;
};

// What the runtime answered to one MallocFromPoolAsync.
struct AllocObservation {
  bool ok = false;
  uintptr_t ptr = 0;
  ReuseRule rule = ReuseRule::kFresh;
};

// The pool's attributes as read back: CUDA's 1-8, then PoolAttr::kGrowth.
using PoolAttrs = std::array<uint64_t, 9>;

// What the programs reached (the property test's report, and what it asserts
// the programs exercise).
struct Coverage {
  std::array<uint64_t, 6> by_rule{};
  uint64_t failed = 0;
  uint64_t grew = 0;                  // allocations that mapped memory
  uint64_t remapped = 0;              // ... into bytes handed out before (released granules)
  uint64_t new_reservations = 0;      // reservations (or chunks) beside others of the pool
  uint64_t waited_before_growth = 0;  // allocations whose waits came before growth
  uint64_t joined = 0;                // ... served by a join of several free blocks
  uint64_t low_end = 0;               // served by a READY block's mapped low end (rules 1, 3)
  uint64_t releases = 0;              // release calls that unmapped something
  uint64_t bound_stops = 0;           // releases the bound stopped with READY memory left
  uint64_t observed = 0;              // allocations whose rule 3 promoted something
  uint64_t observed_failed = 0;       // ... and then failed anyway
  uint64_t probe_limited = 0;         // rule-2 searches the probe bound could cut short
  uint64_t slots_reused = 0;          // streams created in a destroyed stream's slot
  uint64_t slot_promotions = 0;       // ... whose frees a pool promoted first
  uint64_t cache_hits = 0;            // allocations a front cache served
  uint64_t cache_flushes = 0;         // front caches flushed with frees in them
  uint64_t deferred_frees = 0;        // frees that waited for other streams (RecordUse)
  uint64_t reclaims = 0;              // out-of-memory reclaims that released something
  uint64_t reclaim_rescued = 0;       // ... after which the retried allocation succeeded
  // after-sync allocations none of whose bytes were handed out before (only
  // with strict_fresh off).
  uint64_t after_sync_never_used = 0;
  void Add(const Coverage& o);
};

class ReferenceModel {
 public:
  // Creates one legacy stream per device (indices 0..device_count-1), as the
  // runtime does when it starts; that costs no host time.
  explicit ReferenceModel(const ModelConfig& config);

  // Streams, events, pools. Stream indices are slots, numbered as the
  // runtime's ordering core does: a new one per stream, except that a
  // destroyed stream's slot is handed back once its work is complete and no
  // pool holds its frees (src/ordering/ordering.h, "Slot reuse").
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
  // RecordUse: stream s uses allocation id too. Its FreeAsync then records
  // each such stream's position (unless the free is already ordered after it
  // or it is proven), and the block is DEFERRED: reusable by none until the
  // free and every use are complete, READY then (by a proof, or by rule 3's
  // observation as frees of several streams).
  void RecordUse(int id, uint32_t s);
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

  // After every instruction: the pool's statistics and attributes against the
  // model's. `owned(addr)` says whether the runtime still holds an address
  // (its reservations and chunks must be exactly the model's).
  absl::Status CheckPool(int pool, const PoolStats& stats, const PoolAttrs& attrs,
                         const std::function<bool(uintptr_t)>& owned) const;
  // The runtime's clocks, proven-complete clock, last op ends and host time
  // against the model's.
  absl::Status CheckOrdering(const std::vector<Clock>& clocks, const Clock& done,
                             const std::vector<uint64_t>& last_ends, uint64_t now) const;

  uint64_t now() const { return now_; }
  size_t stream_count() const { return streams_.size(); }
  int pool_count() const { return static_cast<int>(pools_.size()); }
  const Coverage& coverage() const { return coverage_; }
  // The pool's blocks, one line per reservation (for failure reports).
  std::string DescribePool(int pool) const;

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
    std::vector<uint32_t> uses = {};  // RecordUse's streams
  };
  // A stream's point a deferred free waits for, and when it completes.
  struct UsePoint {
    uint32_t stream = 0;
    uint64_t pos = 0;
    uint64_t end = 0;
  };
  // Bytes whose last occupant is freed; keyed by address, never overlapping
  // (the safety check's record, independent of the blocks).
  struct Freed {
    int id = 0;
    uint64_t size = 0;
    bool now = false;     // spFree: complete at once
    uint32_t stream = 0;  // free point (stream, pos), completing at end
    uint64_t pos = 0;
    uint64_t end = 0;
    std::vector<UsePoint> uses = {};  // the other streams the free waited for
  };

  enum class State { kLive, kReady, kPending, kDeferred };
  static constexpr uint32_t kMixed = UINT32_MAX;  // observed frees of several streams
  struct Block {
    uint64_t offset = 0;
    uint64_t size = 0;
    State state = State::kReady;
    // PENDING: the free point (stream, f), the free's host order and the
    // virtual time it completes at (those of the latest free merged in).
    uint32_t stream = 0;
    uint64_t f = 0;
    uint64_t seq = 0;
    uint64_t end = 0;
    // READY: the proof epoch when observation promoted frees into it (0:
    // never), and whose frees they were (kMixed: several streams').
    uint64_t observed_epoch = 0;
    uint32_t observed_stream = kMixed;
    // LIVE: freed into a front cache (a pending free to the statistics; LIVE
    // to the central index until flushed).
    bool cached = false;
    // DEFERRED: the free point is (stream, f) ending at `end`, and these.
    std::vector<UsePoint> uses = {};
  };
  // A chunk (chunked growth: all mapped) or a reservation (expandable).
  struct Reservation {
    uint64_t id = 0;  // creation order; ties of the release rule
    uintptr_t base = 0;
    uint64_t size = 0;
    bool expandable = false;
    std::vector<Block> blocks;    // tile [0, size) in offset order
    std::set<uint64_t> mapped;    // expandable: mapped granule indexes
    uint64_t handed_out_end = 0;  // offsets below were handed out at some point
  };
  // A block of a pool: indexes into its reservations and their blocks, valid
  // until the next change.
  struct Ref {
    size_t r = 0;
    size_t b = 0;
  };
  struct Pool {
    ModelPoolProps props;
    uint64_t max_size = 0;  // effective
    uint64_t granule = 256;
    bool pinned = false;
    bool expandable = true;
    uint64_t reservation_bytes = 0;
    // DVPP: every pool of the process shares one window, so a pool keeps no
    // empty reservation.
    bool scarce = false;
    bool follow = true, opportunistic = true, internal = true;
    bool wait_before_growth = false;
    uint64_t soft_limit = UINT64_MAX;
    uint64_t waits_before_growth = 0, joined = 0;
    uint64_t threshold = 0;
    uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
    uint64_t allocs = 0, frees = 0, failed = 0, waits = 0;
    uint64_t maps = 0, unmaps = 0, bytes_mapped = 0;
    std::array<uint64_t, 6> by_rule{};
    std::vector<Reservation> res;  // in creation order
    uint64_t next_id = 1;
    uint64_t next_seq = 1;
    std::map<uintptr_t, Freed> history;
    // Front caches, in the order the runtime made them (the flush order).
    bool front_cache = false;
    struct CacheEntry {
      uintptr_t addr;
      uint64_t size;
      uint64_t f;
      uint64_t end;
    };
    struct CacheBin {
      uint64_t size = 0;
      std::vector<CacheEntry> entries;  // oldest first
    };
    struct Cache {
      uint32_t stream = 0;
      std::array<CacheBin, 8> bins;
      uint64_t bytes = 0;
    };
    std::vector<Cache> caches;
  };
  // What serving decided.
  struct Decision {
    bool ok = false;
    Ref ref;
    bool new_reservation = false;  // ref is a reservation made by this growth
    uint64_t mapped_bytes = 0;     // what the growth mapped
    ReuseRule rule = ReuseRule::kFresh;
    // Rule 5's free points (one per other stream), in stream order, and
    // when each completes.
    std::vector<std::pair<uint32_t, uint64_t>> waits;
    std::vector<uint64_t> wait_ends;
    // A join: ref is the first of join_count adjacent free blocks that make
    // the allocation (the last one only in part).
    size_t join_count = 0;
    bool before_growth = false;  // the waits came before growth
    bool promoted = false;       // rule 3 promoted something
    bool remapped = false;       // the growth mapped bytes handed out before
    bool low_end = false;        // served by the mapped low end of an unbacked block
    bool cache_hit = false;      // rule 0: a front cache's block of exactly the size
  };

  void Charge() { now_ += config_.api_call_ns; }
  // Front caches (src/pool/front_cache.h, mirrored): the cache of stream s,
  // made at the runtime's points (a central allocation or free on s).
  Pool::Cache* CacheOf(Pool& pool, uint32_t s);
  void EnsureCache(Pool& pool, uint32_t s);
  // Caches a freed block; false when full.
  static bool CachePush(Pool::Cache& c, const Pool::CacheEntry& e);
  // The cache's frees into the central index, oldest free point first;
  // true when there were any.
  bool FlushCache(Pool& pool, Pool::Cache& c);
  bool FlushCaches(Pool& pool);
  // A free point made PENDING in the central index (and merged).
  void MakePendingAt(Pool& pool, uintptr_t addr, uint32_t s, uint64_t f, uint64_t end);
  // VC of s's next op: its clock plus the legacy-stream joins that op makes.
  Clock NextClock(uint32_t s) const;
  // Appends an op to s; returns its end. `wait_end`: completion of an
  // explicit wait (event or inserted), 0 if none.
  // Advances pos(s) for an allocation or free point; returns when the
  // point is reached.
  uint64_t AdvancePoint(uint32_t s);
  uint64_t Enqueue(uint32_t s, uint64_t duration_ns, uint64_t wait_end);
  void Prove(const Clock& proof) { Join(done_, proof); }
  bool Proven(uint32_t s, uint64_t pos) const { return Get(done_, s) >= pos; }
  // What every sync action and successful query does to every pool: a proof
  // epoch (ending every observation's count), proven frees READY, and for
  // sync actions the release rule with the pool's threshold.
  void AfterCompletion(bool release);
  // CreateStream's look at retired slots, and whether slot s may be reused
  // (promoting its frees where the opportunistic switch is on).
  void RecycleSlots();
  bool SlotIdle(uint32_t s);
  void Touch(int id, uint32_t s, uint64_t end);

  // Blocks.
  static uintptr_t Addr(const Pool& pool, Ref x) {
    return pool.res[x.r].base + pool.res[x.r].blocks[x.b].offset;
  }
  static const Block& At(const Pool& pool, Ref x) { return pool.res[x.r].blocks[x.b]; }
  static Block& At(Pool& pool, Ref x) { return pool.res[x.r].blocks[x.b]; }
  // Smallest block satisfying pred with size >= need; among equals, the one
  // of the earliest reservation, at the lowest offset.
  std::optional<Ref> BestFit(const Pool& pool, uint64_t need,
                             const std::function<bool(Ref)>& pred) const;
  static bool Better(const Pool& pool, Ref a, Ref b);
  bool Observed(const Block& b) const {
    return b.observed_epoch != 0 && b.observed_epoch == epoch_;
  }
  // Unmapped granules touching [offset, offset + len) of a reservation.
  static uint64_t Missing(const Reservation& r, uint64_t offset, uint64_t len);
  static bool Backed(const Reservation& r, const Block& b) {
    return Missing(r, b.offset, b.size) == 0;
  }
  // The rule a READY block's reuse by t counts under.
  ReuseRule ReadyRule(const Pool& pool, Ref x, uint32_t t) const;
  // Adjacent READY blocks merge, and adjacent PENDING blocks of one stream.
  void Coalesce(Reservation& r) const;
  // Every PENDING block for which `promote` holds becomes READY.
  void PromoteIf(Pool& pool, bool observed, const std::function<bool(const Block&)>& promote);
  // Every DEFERRED block whose free and uses are all `complete(stream, pos,
  // end)` becomes READY, observed as frees of several streams when observed;
  // true when any did.
  bool SettleIf(Pool& pool, bool observed,
                const std::function<bool(uint32_t, uint64_t, uint64_t)>& complete);
  // Whether a block is PENDING or DEFERRED (what observation could promote).
  static bool HasFreesToObserve(const Pool& pool);
  // Rule 3's promotion: every free (and deferred free with its uses) complete
  // in virtual time or proven becomes READY, observed; true when any did.
  bool PromoteObserved(Pool& pool);
  // Whether mapping what x lacks for `need` bytes fits maxSize and the device.
  bool MapFits(const Pool& pool, Ref x, uint64_t need) const;
  // Maps the granules [offset, offset + need) of x lacks; returns the bytes.
  uint64_t MapFor(Pool& pool, Ref x, uint64_t need, bool* remapped);
  // The device's (pinned: the host's) bytes left for this pool to map.
  uint64_t BudgetRoom(const Pool& pool) const;
  // Rule 4. Fills d on success.
  absl::Status Grow(Pool& pool, uint32_t t, uint64_t need, Decision& d);
  // Rules 1 to 6; may promote (rule 3) and grow (rule 4). Uses obs only where
  // rule 2's probe bound leaves a choice.
  absl::Status Serve(Pool& pool, uint32_t t, uint64_t need, const AllocObservation& obs,
                     Decision& d, bool retried = false);
  // Splits x at need: the LIVE block [offset, offset + need) and the rest,
  // which keeps x's state.
  void Carve(Pool& pool, Ref x, uint64_t need);
  void Release(Pool& pool, uint64_t bound);
  // The out-of-memory reclaim of one pool; the bytes it released.
  uint64_t Reclaim(Pool& pool);
  void ReleaseChunks(Pool& pool, uint64_t bound);
  void ReleaseGranules(Pool& pool, uint64_t bound);
  void DropReservation(Pool& pool, size_t r);
  // The LIVE block at addr.
  Ref LiveBlockAt(const Pool& pool, uintptr_t addr) const;
  uint64_t LargestFree(const Pool& pool) const;
  // The bytes' previous occupants against the rule the runtime reported.
  absl::Status CheckOccupants(Pool& pool, uint32_t t, uintptr_t ptr, uint64_t need, ReuseRule rule,
                              const std::vector<std::pair<uint32_t, uint64_t>>& waits,
                              uint64_t decided_at, const std::string& took);
  // When T's next op could start anyway: host now, T's last op and the
  // legacy-stream ordering.
  uint64_t AllocReady(uint32_t t) const;
  // Rule 5's choices, also before growth: the other stream's pending free
  // of at least need bytes that came first, else a join; only blocks whose
  // free ends by `by` (UINT64_MAX: any). True when one was chosen.
  bool ChooseWait(Pool& pool, uint32_t t, uint64_t need, uint64_t by, Decision& d);
  bool ChooseJoin(Pool& pool, uint32_t t, uint64_t need, uint64_t by, Decision& d);
  // Merges the join's blocks into one READY block of need bytes at d.ref.
  void JoinBlocks(Pool& pool, const Decision& d, uint64_t need);

  static uint64_t Get(const Clock& c, uint32_t s) { return s < c.size() ? c[s] : 0; }
  static void Join(Clock& into, const Clock& other);

  ModelConfig config_;
  uint64_t now_ = 0;
  // Bumped by every proof: observation's counting ends there.
  uint64_t epoch_ = 1;
  std::vector<Stream> streams_;
  std::vector<uint32_t> retired_;     // destroyed streams' slots, not yet handed back
  size_t recycle_cursor_ = 0;         // round robin over retired_
  std::vector<uint32_t> free_slots_;  // handed back, reused last in first out
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
