// MemPool: a stream-ordered pool over one upstream.
//
// Serving Allocate(size) on stream T (docs/design.md "Serving MallocAsync"):
//   1. T's own PENDING blocks and wholly mapped READY blocks, best fit (and,
//      when none fits, the mapped low end of a READY block that spans
//      unmapped granules);
//   2. ReuseFollowEventDependencies: PENDING(S, f) with f <= VC(T)[S];
//   3. ReuseAllowOpportunistic: promote every free point observed complete
//      (they merge like any READY block), then READY blocks again;
//   with rule 5 on, waits before growth: with wait_before_growth, rule 5's
//      choice among the frees whose wait delays nothing (the oracle's
//      CompletesBeforeAllocation), then a join of such frees; then, when
//      growth would pass soft_reserved_limit, rule 5 over every free;
//   4. grow: expandable pools map the granules the best-fitting READY block
//      lacks (at the top of the mapped region, the shortfall above the
//      topmost free block), or reserve anew; chunked pools map a chunk of
//      ALIGN_UP(rule size, 2 MiB); within max_size and the device;
//   5. ReuseAllowInternalDependencies: the PENDING block of another stream
//      whose FreeAsync came first, after inserting a wait of T on its free;
//      when none is large enough, a join of adjacent free blocks, pending
//      on several streams (JoinPending), after a wait on each other stream;
//   6. fail, changing nothing but failed_alloc_count.
// Best fit is exact (smallest size, then lowest address) for rules 1, 3 and
// 4, and for rule 2 whenever every pending free of the candidate stream is
// eligible; otherwise rule 2 examines at most kCrossStreamProbes blocks per
// stream, in best-fit order, so an allocation's cost stays bounded however
// many frees other streams have pending.
//
// Rule 0, before all of these, is the allocating stream's front cache
// (src/pool/front_cache.h): CacheAllocate and CacheFree are the fast path,
// and Allocate, the central path, tries it once more (a block the fast path
// turned down for want of allowance) before rule 1.
//
// Thread safety: CacheAllocate and CacheFree may run on any thread at any
// time, each taking only one cache's lock. Everything else is the central
// path, run under the pool's own lock (central_mu()); it takes cache locks as
// it needs them, one at a time (pool, then cache: never the other way round,
// never two caches at once; src/util/lock_rank.h checks both).
#ifndef STREAMPOOL_SRC_POOL_MEM_POOL_H_
#define STREAMPOOL_SRC_POOL_MEM_POOL_H_

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/ordering/oracle.h"
#include "src/ordering/vector_clock.h"
#include "src/pool/block.h"
#include "src/pool/device_budget.h"
#include "src/pool/free_index.h"
#include "src/pool/front_cache.h"
#include "src/pool/page_map.h"
#include "src/pool/pool_backing.h"
#include "src/pool/pool_caches.h"
#include "src/pool/size_index.h"
#include "src/pool/stream_frees.h"
#include "src/util/mutex.h"
#include "src/util/ring.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"
#include "streampool/pool_stats.h"

namespace streampool::internal {

class MemfdMemory;  // src/memory/memfd_memory.h: the pool only carries it

// Whether other processes may map a pool's memory: one fact, set by the
// pool's owner with its handle. An exportable pool's upstream is the memfd
// an importer maps, and its allocations go through the owner's lock (IPC
// reads the memfd there); a local pool's never need to.
struct LocalMemory {};
struct ExportableMemory {
  MemfdMemory* memfd;  // owned through the pool's upstream
};
using ExportKind = std::variant<LocalMemory, ExportableMemory>;

// How requests become block sizes.
struct SizeRule {
  enum class Kind {
    kRound,  // ALIGN_UP(len, granule)
    kAcl,    // ALIGN_UP(ALIGN_UP(len, 32) + 32, granule): aclrtMalloc's rule (64)
    kDvpp,   // ALIGN_UP(ALIGN_UP(len, 32) + 32, 128): acldvppMalloc's
  };
  Kind kind = Kind::kRound;
  // Block starts and sizes are multiples of it (a power of two >= 32).
  uint64_t granule = 256;

  // The rule size of a request, or nullopt when it cannot be represented.
  // Inline for the fast path's common case, ALIGN_UP to a power of two.
  std::optional<uint64_t> Apply(uint64_t len) const {
    uint64_t out;
    if (ApplyFast(len, &out)) return out;
    return ApplySlow(len);
  }
  // The common case without an optional (whose return through memory costs
  // a store-forwarding stall on the fast path): false when it is not.
  bool ApplyFast(uint64_t len, uint64_t* out) const {
    if (kind != Kind::kRound || len == 0 || len > UINT64_MAX - granule) return false;
    *out = (len + granule - 1) & ~(granule - 1);
    return true;
  }
  std::optional<uint64_t> ApplySlow(uint64_t len) const;
};

class MemPool {
 public:
  // Rule 2's probes per stream (free_index.h); growth probes as many.
  static constexpr size_t kCrossStreamProbes = FreeIndex::kCrossStreamProbes;

  struct Allocation {
    Block* block;
    ReuseRule rule;
  };

  // Largest reservation of an expandable pool: bounds the per-granule
  // bookkeeping (a bit each) of pools whose max_size is unbounded (pinned
  // host); such pools hold several reservations.
  static constexpr uint64_t kMaxReservation = uint64_t{128} << 30;

  // Expandable when props.growth allows and the upstream can reserve;
  // reservation_bytes (0: max_size) sizes each reservation, for upstreams
  // whose address space is scarce (the DVPP window).
  MemPool(const PoolProps& props, SizeRule rule, uint64_t max_size,
          std::shared_ptr<PhysicalMemory> upstream, DeviceBudget* budget,
          uint64_t reservation_bytes = 0);
  ~MemPool() = default;  // the backing returns every granule, chunk and reservation
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  // The central path: rules 0 to 5, each once, in order (the file comment),
  // for size > 0 on oracle.stream(). Rules 0 and 1 ask the oracle nothing;
  // before any later rule it calls oracle.NeedOrder() once. On failure
  // nothing changes except failed_alloc_count.
  absl::StatusOr<Allocation> Allocate(uint64_t size, OrderOracle& oracle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);

  // The central index's lock (docs/design.md, "Performance model": the central
  // index, growth and release take the pool's lock). Every member but the
  // Cache* fast functions, front_cache() and the fixed properties needs it.
  // Order: the runtime's lock, then this, then the ordering core's (which
  // Allocate asks for through the oracle), then a stream lock.
  Mutex& central_mu() const ABSL_LOCK_RETURNED(central_mu_) { return central_mu_; }

  // Pins for lock-free finders. A finder that checked the pool's handle
  // under a stream lock (so the owner has not yet passed that lock on its
  // way to freeing the pool) pins it before letting the stream lock go, and
  // may then take the pool's lock; the owner frees the pool only once it is
  // unpinned. A finder holds no lock the owner waits for: it unpins before
  // it could need the runtime's.
  void Pin() { pins_.fetch_add(1, std::memory_order_relaxed); }
  void Unpin() { pins_.fetch_sub(1, std::memory_order_release); }
  void WaitUnpinned() const {
    while (pins_.load(std::memory_order_acquire) != 0) sched_yield();
  }

  // Fast path (any thread, no pool lock; the caller holds t's stream lock,
  // the lock EnsureCache was given): a block of size's rule size from t's
  // front cache, now LIVE on t and counted as a same-stream reuse; null when
  // the cache is off, absent, holds none or lacks allowance (then Allocate,
  // whose rule 0 settles the allowance).
  ABSL_ATTRIBUTE_ALWAYS_INLINE Block* CacheAllocate(StreamIndex t,
                                                    uint64_t size) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    FrontCache* c = CacheOf(t);
    return c != nullptr ? CacheAllocate(*c, t, size) : nullptr;
  }
  // The same from t's cache c, as the caller found it before (CacheOf).
  ABSL_ATTRIBUTE_ALWAYS_INLINE Block* CacheAllocate(FrontCache& c, StreamIndex t,
                                                    uint64_t size) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!front_cache()) return nullptr;
    uint64_t need;
    if (!rule_.ApplyFast(size, &need)) {
      const std::optional<uint64_t> slow = rule_.ApplySlow(size);
      if (!slow) return nullptr;
      need = *slow;
    }
    Block* b = c.Pop(need);
    // Written only when they change: blocks of different streams may share a
    // cache line, and a steady pair re-pops the same block for the same size.
    if (b != nullptr) {
      if (b->stream != t) StoreRelaxed(b->stream, t);
      if (b->requested != size) StoreRelaxed(b->requested, size);
      c.AddRequested(static_cast<int64_t>(size));
    }
    return b;
  }
  // Fast path (s's stream lock held): caches LIVE block b freed at (s, f);
  // false when the cache is off, absent or full (then FreeAsync).
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool CacheFree(Block* b, StreamIndex s,
                                              Position f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    FrontCache* c = CacheOf(s);
    return c != nullptr && CacheFree(*c, b, f);
  }
  // The same into s's cache c.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool CacheFree(FrontCache& c, Block* b,
                                              Position f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!front_cache() || !c.Push(b, f)) return false;
    c.AddRequested(-static_cast<int64_t>(b->requested));
    return true;
  }
  // Central: a free the fast path could not cache (s's cache full): flushes
  // s's cache, then caches it or frees it centrally.
  void FreeOverflow(Block* b, StreamIndex s, Position f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Makes s's front cache, guarded by s's stream lock, so that s's next frees
  // can be cached.
  void EnsureCache(StreamIndex s, SpinLock* stream_lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Moves s's cached blocks (every stream's) into the central index, where
  // they coalesce; true when there were any.
  bool FlushCache(StreamIndex s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  bool FlushCaches() ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // s is destroyed: flushes its cache and takes back its allowance.
  void RetireCache(StreamIndex s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  bool front_cache() const { return caches_.on(); }
  // Stream s's front cache, or null while it has none (EnsureCache makes
  // it). Lock-free; a cache lives as long as its pool.
  FrontCache* CacheOf(StreamIndex s) const { return caches_.Of(s); }
  // The map the runtime publishes this pool's allocations in: the pool takes
  // a block's entry out when the central index frees it (a cached block keeps
  // its entry). Null for a pool on its own (tests). Set before any
  // allocation.
  void set_page_map(PageMap* map) { page_map_ = map; }

  // Out of memory. Whether a request could ever be served here (its rule size
  // within the pool's maximum and the device): when not, no release helps. Reads only what
  // never changes.
  // What the pool's reservations are charged to: pools sharing it compete
  // for the same memory.
  const DeviceBudget* budget() const { return backing_.budget(); }
  bool CanEverServe(uint64_t size) const {
    const std::optional<uint64_t> need = rule_.Apply(size);
    return need && *need <= backing_.max_size() && *need <= backing_.budget()->capacity();
  }
  // Releases what this pool holds READY, to nothing, for another allocation's
  // sake: caches flushed, frees observed complete promoted (with the
  // opportunistic switch on; otherwise only what synchronizes proved is
  // READY), then every whole free granule or free chunk unmapped. Counted as
  // a reclaim when it released anything. Returns the bytes released.
  uint64_t ReleaseForOom(const OrderOracle& oracle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // The out-of-memory handling's outcome for an allocation of this pool:
  // tried once more (the failure Allocate counted was then not the call's:
  // failed_alloc_count counts calls, each once), or failed for lack of memory.
  void NoteOomRetry() ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    ++stats_.oom_retries;
    if (stats_.failed_alloc_count > 0) --stats_.failed_alloc_count;
  }
  void NoteOom() ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) { ++stats_.oom_count; }
  void set_front_cache(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // The rule size `size` would occupy (for callers that check before acting).
  std::optional<uint64_t> RuleSize(uint64_t size) const { return rule_.Apply(size); }
  // LIVE -> PENDING(s, f), in the central index.
  void FreeAsync(Block* block, StreamIndex s, Position f)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // LIVE -> DEFERRED: freed at (s, f) while other streams used it, each up
  // to its point in `uses` (none of which the free is ordered after). No
  // stream reuses it until (s, f) and every use are complete: Promote makes
  // it READY when the proof covers all of them, PromoteObserved when all
  // were observed complete (marked observed, of no single stream).
  using Use = std::pair<StreamIndex, Position>;
  void FreeDeferred(Block* block, StreamIndex s, Position f, absl::Span<const Use> uses)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // LIVE -> READY at once (spFree: the caller promises all access completed).
  void FreeNow(Block* block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Every PENDING(S, f) with f <= done[S] becomes READY (a proof: it ends the
  // opportunistic count of blocks promoted by observation).
  void Promote(const VectorClock& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Every PENDING(S, f) the oracle reports observed complete becomes READY,
  // marked as promoted by observation (rule 3; the caller checks the switch).
  void PromoteObserved(const OrderOracle& oracle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Observation of one stream: its frees up to `complete` become READY, as
  // PromoteObserved would make them (the caller checks the switch).
  void PromoteObservedOn(StreamIndex s, Position complete)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // The release rule: unmaps whole granules inside READY blocks (chunked:
  // wholly free chunks), largest free range first, while reserved > bound,
  // skipping any whose release would take reserved below bound.
  void Release(uint64_t bound) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  void ReleaseAtSync() ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) { Release(release_threshold_); }

  // The LIVE block containing addr, or nullptr.
  Block* LiveBlockContaining(uintptr_t addr) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Whether addr lies in any chunk of this pool.
  bool Owns(uintptr_t addr) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);

  // What the owner (the runtime) names this pool by, and whether it is
  // exportable, for pointers found by address.
  void set_owner(uint64_t handle, ExportKind kind) {
    owner_handle_ = handle;
    export_kind_ = kind;
  }
  uint64_t owner_handle() const { return owner_handle_; }
  // The exportable pool's memory, or null for a local pool.
  const ExportableMemory* exportable() const {
    return std::get_if<ExportableMemory>(&export_kind_);
  }

  const PoolProps& props() const { return props_; }
  bool expandable() const { return backing_.expandable(); }
  // The growth mode in effect (never kDefault).
  PoolGrowth growth() const {
    return expandable() ? PoolGrowth::kExpandable : PoolGrowth::kChunked;
  }
  uint64_t granule() const { return rule_.granule; }
  bool touchable() const { return backing_.upstream().touchable(); }
  uint64_t reserved() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return backing_.reserved();
  }
  // UsedMemCurrent: the central count less what front caches hold.
  uint64_t used() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  bool has_live_or_pending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return live_blocks_ > 0 || pending_blocks_ > 0 || !deferred_.empty();
  }
  // Whether a free of stream s is still pending here, cached or central (its
  // slot may not be reused meanwhile).
  bool HasPendingOn(StreamIndex s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);

  // Attributes.
  bool reuse_follow_event_dependencies() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return follow_events_;
  }
  bool reuse_allow_opportunistic() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return opportunistic_;
  }
  bool reuse_allow_internal_dependencies() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return internal_deps_;
  }
  void set_reuse_follow_event_dependencies(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    follow_events_ = on;
  }
  void set_reuse_allow_opportunistic(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    opportunistic_ = on;
  }
  void set_reuse_allow_internal_dependencies(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    internal_deps_ = on;
  }
  bool wait_before_growth() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return wait_before_growth_;
  }
  void set_wait_before_growth(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    wait_before_growth_ = on;
  }
  uint64_t soft_reserved_limit() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return soft_reserved_limit_;
  }
  void set_soft_reserved_limit(uint64_t v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    soft_reserved_limit_ = v;
  }
  uint64_t release_threshold() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return release_threshold_;
  }
  void set_release_threshold(uint64_t v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    release_threshold_ = v;
  }
  uint64_t reserved_high() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    return stats_.reserved_high;
  }
  uint64_t used_high() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) { return stats_.used_high; }
  void ResetReservedHigh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    stats_.reserved_high = backing_.reserved();
  }
  void ResetUsedHigh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    Reconcile(/*reset_high=*/true);
  }

  PoolStats Stats() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);

  // A snapshot's view of one block (the runtime names its stream and pool).
  struct BlockView {
    uintptr_t addr = 0;
    uint64_t size = 0;
    // LIVE and cached: what the allocation asked for.
    uint64_t requested = 0;
    BlockState state = BlockState::kReady;
    // Freed and held by its freeing stream's front cache (state kLive inside
    // the pool, PENDING to everyone else).
    bool cached = false;
    // LIVE: the allocating stream; PENDING and cached: the freeing one.
    StreamIndex stream = kNoStream;
    Position free_pos = 0;
    Position alloc_pos = 0;
    // READY: its bytes when they are not mapped (a READY block spanning
    // unmapped granules shows as one view per mapped or unmapped run).
    uint64_t unmapped_bytes = 0;
  };
  struct ChunkView {
    uintptr_t base = 0;
    uint64_t size = 0;
    uint64_t mapped_bytes = 0;
    bool expandable = false;
    // Its blocks: blocks[first_block, first_block + block_count).
    size_t first_block = 0;
    size_t block_count = 0;
  };
  // Every chunk in address order with its blocks in address order. The
  // caches are read one at a time under their own locks: a block another
  // thread moves through a front cache meanwhile shows as it was on either
  // side of that move.
  void Snapshot(std::vector<ChunkView>* chunks, std::vector<BlockView>* blocks) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // The LIVE blocks no front cache holds, in address order (leak reports).
  void LiveBlocks(std::vector<BlockView>* blocks) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // O(blocks) walk of every invariant in block.h plus
  //   reserved == Σ chunk sizes, used == Σ LIVE block sizes,
  //   every free block in exactly the index its state names.
  bool CheckInvariants() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);

 private:
  // Blocks by state, summed over chunks by CheckChunkBlocks.
  struct BlockCounts {
    uint64_t used = 0, live = 0, pending = 0, ready = 0, unbacked = 0, deferred = 0;
    size_t whole_ready_chunks = 0;
  };
  // c's blocks tile it in address order, each in the state's invariants.
  bool CheckChunkBlocks(const Chunk* c, BlockCounts& n) const;
  mutable Mutex central_mu_{LockRank::kPool};
  std::atomic<int> pins_{0};

  // How a READY block's reuse counts for t (see Allocate).
  ReuseRule ReadyRule(const Block* b, StreamIndex t) const;
  // Rule 0 for t: a cached block (settling the watermark), else t's cache is
  // flushed; nullopt when the cache held none of need.
  std::optional<Allocation> TakeFromCache(StreamIndex t, uint64_t need, uint64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Rule 1: t's own pending frees and READY blocks, best fit.
  Block* FindOwn(StreamIndex t, uint64_t need, ReuseRule* how)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);
  // Hands out `chosen` (need bytes of it) to t, counting the rule.
  Allocation Finish(Block* chosen, ReuseRule how, StreamIndex t, uint64_t need, uint64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_);

  // c's blocks into the central index (c's lock held).
  void FlushInto(FrontCache& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu());
  // Settles UsedMemHigh and revokes every cache's allowance, restoring the
  // watermark invariant (pool_caches.h). reset_high: UsedMemHigh := the
  // true used (the attribute's reset).
  void Reconcile(bool reset_high);

  // Rule 5, also before growth: the pending free of another stream that came
  // first in host order (FirstPendingFree), else a join of several
  // (JoinPending), after inserting the waits; or null. kFreeWaits: only
  // frees the oracle projects complete before t reaches the allocation.
  // Before growth a join is tried only while the pool holds at most
  // kJoinBeforeGrowthBlocks pending blocks.
  enum class WaitOn { kFreeWaits, kAnyBeforeGrowth, kAfterGrowth };
  static constexpr uint64_t kJoinBeforeGrowthBlocks = 256;
  Block* WaitForPending(StreamIndex t, uint64_t need, OrderOracle& oracle, WaitOn on);
  Block* JoinPending(StreamIndex t, uint64_t need, OrderOracle& oracle);
  // Merges the adjacent free blocks first..last into one READY block of
  // need bytes (last only in part), in the ready index.
  Block* JoinRun(Block* first, Block* last, uint64_t need);
  // Rule 4: a READY block of at least `size` bytes, or null. When the
  // upstream refused (or broke its contract) rather than the pool's or the
  // device's limit, *upstream_error says what failed; otherwise it is left
  // as it was.
  Block* Grow(uint64_t size, absl::Status* upstream_error);
  Block* GrowChunk(uint64_t size, absl::Status* upstream_error);
  Block* GrowExpandable(uint64_t size, absl::Status* upstream_error);
  // Maps every unmapped granule [addr, addr + size) of READY block b touches;
  // on kNoRoom (max_size or the device budget) or kUpstreamFailed (with
  // *upstream_error set) nothing changed.
  enum class MapResult { kMapped, kNoRoom, kUpstreamFailed };
  MapResult MapForCarve(Block* b, uint64_t size, absl::Status* upstream_error);
  // The answer to an allocation of `need` bytes on t that no rule served.
  absl::Status OutOfMemory(StreamIndex t, uint64_t need, const absl::Status& upstream_error) const;
  // Bytes freed but not usable by t without a wait: other streams' PENDING
  // and cached blocks, and DEFERRED blocks. A walk, for the failure path.
  uint64_t PendingBytesBesides(StreamIndex t) const;
  // A new chunk's or reservation's one READY block, in its index.
  Block* FirstBlock(Chunk* c);
  // An empty reservation (its one block READY and unmapped) goes back.
  void DropReservation(Chunk* c);
  void ReleaseChunks(uint64_t bound);
  void ReleaseGranules(uint64_t bound);
  // Moves a READY block between the ready and unbacked indexes after its
  // unmapped count changed.
  void Reindex(Block* b);
  // Whether b's reuse counts as opportunistic (promoted by observation and
  // not proven since).
  bool Observed(const Block* b) const {
    return b->observed_epoch != 0 && b->observed_epoch == proof_epoch_;
  }
  // Pops queue entries of every active stream up to bound_of(s) into READY.
  template <typename BoundOf>
  void PromoteUpTo(BoundOf bound_of, bool observed);

  // Whether observation could promote anything: a PENDING or DEFERRED block.
  bool HasFreesToObserve() const { return pending_blocks_ != 0 || !deferred_.empty(); }
  // DEFERRED blocks whose free and uses are all at or below bound_of(stream)
  // become READY, in free order.
  template <typename BoundOf>
  void SettleDeferred(BoundOf bound_of, bool observed);
  void InsertFree(Block* b);
  void RemoveFree(Block* b);
  void MakePending(Block* b, StreamIndex s, Position f, uint64_t seq);
  // A LIVE block leaves the central index's LIVE set: its page-map entry
  // goes (a front cache keeps it while the block waits there).
  void Unpublish(const Block* b);
  void MakeReady(Block* b, bool observed = false);
  // a absorbs its right neighbour b.
  void Absorb(Block* a, Block* b);
  Block* Carve(Block* b, uint64_t size);
  // A new block of b's low `size` bytes, in no index and of no state; b
  // (out of its index) keeps the rest.
  Block* SplitOffLow(Block* b, uint64_t size);
  void UnmapChunk(Chunk* c);

  const PoolProps props_;
  const SizeRule rule_;

  bool follow_events_;
  bool opportunistic_;
  bool internal_deps_;
  bool wait_before_growth_;
  uint64_t soft_reserved_limit_;
  uint64_t release_threshold_;

  PoolBacking backing_;
  BlockArena arena_;
  FreeIndex index_;
  // DEFERRED blocks in free order, with their free point and uses.
  struct Deferred {
    Block* block;
    StreamIndex s;
    Position f;
    absl::InlinedVector<Use, 2> uses;
  };
  std::vector<Deferred> deferred_;
  std::vector<Chunk*> release_scratch_;
  std::vector<Block*> release_blocks_;
  // Bumped by every proof (Promote): marks of observation go stale.
  uint64_t proof_epoch_ = 1;

  uint64_t owner_handle_ = 0;
  ExportKind export_kind_;
  // Rule sizes of LIVE blocks, cached ones included (see front_cache.h).
  uint64_t used_ = 0;
  // Requested bytes of live blocks the central path handed out or took back
  // (the front caches publish their own part).
  int64_t requested_ = 0;
  // The requested bytes now: the central count and every cache's part.
  uint64_t RequestedNow() const;
  void NoteRequestedHigh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(central_mu_) {
    stats_.requested_high = std::max(stats_.requested_high, RequestedNow());
  }
  // A reservation or chunk was added: the segment watermark.
  // Under the pool's lock (its callers, the growth paths, are not annotated).
  void NoteSegment() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    stats_.segments_high = std::max<uint64_t>(stats_.segments_high, backing_.segments());
  }
  PageMap* page_map_ = nullptr;
  PoolCaches caches_;
  uint64_t live_blocks_ = 0;
  uint64_t pending_blocks_ = 0;
  uint64_t next_stamp_ = 1;
  uint64_t next_free_seq_ = 1;
  PoolStats stats_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_MEM_POOL_H_
