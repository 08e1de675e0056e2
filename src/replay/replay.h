// Replaying a Trace through the simulator: one fresh Runtime per run, one
// pool with the chosen settings, every op of the trace in order, and what the
// pool did.
//
// Two clocks are kept apart. Virtual time is the simulator's (the trace's
// advances and kernel durations); it drives completion and the reserved/used
// series. Host cost is real: the wall-clock nanoseconds each MallocAsync and
// FreeAsync call took (std::chrono::steady_clock), i.e. the allocator's own
// bookkeeping, including the stream-order checker's lookup when it is on.
#ifndef STREAMPOOL_SRC_REPLAY_REPLAY_H_
#define STREAMPOOL_SRC_REPLAY_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "src/replay/allocator_model.h"
#include "src/replay/timeline.h"
#include "src/replay/trace.h"
#include "streampool/mem_pool.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "streampool/snapshot.h"

namespace streampool::replay {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// One pool setting to replay a trace under.
struct ReplaySettings {
  bool reuse_event = true;          // ReuseFollowEventDependencies
  bool reuse_opportunistic = true;  // ReuseAllowOpportunistic
  bool reuse_internal = true;       // ReuseAllowInternalDependencies
  // ReleaseThreshold; UINT64_MAX never shrinks the pool (PyTorch's caching
  // allocator never returns memory unless asked to).
  uint64_t release_threshold = 0;
  // PoolProps::wait_before_growth and soft_reserved_limit (rule 5 on): the
  // pool's defaults; off and UINT64_MAX are CUDA's order.
  bool wait_before_growth = true;
  uint64_t soft_limit = UINT64_MAX;
  // kDefault is expandable over every backing the tool offers.
  PoolGrowth growth = PoolGrowth::kDefault;
  // Whether Label() names the growth when it is kDefault: a sweep over several
  // growths sets it on every row, so that no row's growth goes unsaid.
  bool label_growth = false;
  AllocationType pool_type = AllocationType::kDevice;
  // Address-only backing touches nothing, so 80 GiB "devices" cost no memory.
  Backing backing = Backing::kAddressOnly;
  uint64_t device_capacity = 80 * kGiB;
  bool check_stream_order = true;
  // Take every pool's reuse switches, threshold, growth and front cache,
  // and the runtime's device count, capacity and per-call cost, from the
  // trace (a recorded trace's header and `pool` lines) instead of the fields
  // above. A trace without them replays at the fields. streampool-replay
  // sets it when no setting flag is given.
  bool use_recorded = false;
  // With use_recorded: whether the recording's device capacity replaces
  // device_capacity too (false when the caller chose a capacity).
  bool recorded_capacity = true;
  // Time every MallocAsync and FreeAsync call (ReplayResult's host cost);
  // capacity searches, which report none, turn it off.
  bool measure_host_cost = true;
  // End the replay at the first allocation that fails for lack of memory
  // (the result then covers the trace up to there): a capacity search only
  // asks whether a trace fits.
  bool stop_at_first_failure = false;
  // Records the runtime's timeline, allocation lifetimes and pool bytes into
  // ReplayResult::timeline (memory grows with the trace).
  bool record_timeline = false;

  // Which allocator serves the trace's allocations. kCuda replaces the reuse
  // switches, threshold and growth above (and recorded ones) with CUDA's
  // defaults; the models ignore them and serve every pool of a device.
  AllocatorKind allocator = AllocatorKind::kStreampool;
  TorchOptions torch;  // kPytorch's PYTORCH_CUDA_ALLOC_CONF
  RmmOptions rmm;      // kRmmPool's construction arguments
  // kPytorch starts from the segments a converted snapshot names (the
  // trace's initial_segments, with its initial_blocks live in them) instead
  // of empty.
  bool seed_from_trace = true;
  // RuntimeConfig::oom_reclaim: before an allocation fails, the device's
  // pools release their READY memory and it is tried again. A recording's
  // header (oom_reclaim) decides for a recording replayed at its settings.
  bool oom_reclaim = true;
  // Keeps a model's segment events in ReplayResult::segment_history.
  bool keep_segment_history = false;
  // Ends the replay after the op on this trace line (0: runs to the end); a
  // model's state there is ReplayResult::model_state.
  uint32_t stop_after_line = 0;
  // How the replay's streams run. The simulator's virtual time makes every
  // replay decide the same; threads and cuda replay in real time (kernels
  // last their duration on a worker thread or the GPU, advances sleep), so
  // what a free's completion means, and with it each decision rule 3 or a
  // query depends on, is decided by the run. A CUDA replay keeps the
  // runtime's backing, per-call cost and copy bandwidth at their defaults,
  // as a CUDA runtime requires (copies still last what the trace's
  // bandwidth says: they replay as kernels).
  ExecutorKind executor = ExecutorKind::kSimulator;
  // Keeps every allocation's decision in ReplayResult::decisions.
  bool keep_decisions = false;
  // Every pool's maxSize (PoolProps::max_size) in place of the recorded one
  // (0: as recorded, or none): the cap a policy report ships, replayed on a
  // device of any size to show that the cap alone realises the saving.
  uint64_t max_size = 0;

  // "event+opportunistic+internal, threshold 0"; "none" when no reuse rule
  // is on, "max" for UINT64_MAX; " (grow first)" after the rules when rule 5
  // waits only once growth failed, ", soft limit <bytes>" when one is set,
  // ", growth chunked" when the growth is not the default or label_growth is
  // set.
  std::string ReuseLabel() const;
  std::string ThresholdLabel() const;
  std::string Label() const;
  // "streampool", "pytorch", "pytorch max_split_size_mb:128", "rmm-pool",
  // "rmm-pool initial 1073741824", "cuda".
  std::string AllocatorLabel() const;
};

// The 8 combinations of the three reuse switches, all-on first, none last.
std::vector<ReplaySettings> AllReuseCombinations(const ReplaySettings& base);

// A sweep: each threshold with each growth (outer to inner), and each of
// those with all 8 reuse combinations when `all_policies`, else with base's.
// Rows name their growth when more than one is swept.
std::vector<ReplaySettings> SweepSettings(const ReplaySettings& base,
                                          const std::vector<uint64_t>& thresholds,
                                          const std::vector<PoolGrowth>& growths,
                                          bool all_policies);

// Rows for several allocators: streampool's are `sweep`; every other
// allocator is one row, sweep's first setting with that allocator.
std::vector<ReplaySettings> AllocatorRows(const std::vector<AllocatorKind>& allocators,
                                          const std::vector<ReplaySettings>& sweep);

// A reuse switch by the name --reuse, reports and Python give it: "event",
// "opportunistic" and "internal", in that order.
struct ReuseSwitch {
  const char* name;
  bool ReplaySettings::*on;
};
absl::Span<const ReuseSwitch> ReuseSwitches();

// --reuse's value: "all", "none", or a comma-separated list of switch names,
// which turns those on and the others off.
absl::Status ParseReuse(absl::string_view list, ReplaySettings* settings);

// A byte count: decimal, with an optional binary suffix (K, M, G, T or KiB,
// MiB, GiB, TiB: "80GiB", "4G"). InvalidArgument for anything else and for
// counts past 2^64.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);
// A release threshold: bytes as ParseBytes reads them, or "max" (UINT64_MAX).
absl::StatusOr<uint64_t> ParseThreshold(absl::string_view text);

struct HostCost {
  uint64_t calls = 0;
  double mean_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t max_ns = 0;
};
// Nearest-rank percentiles over the samples (sorted in place).
HostCost SummarizeCost(std::vector<uint64_t>& samples_ns);

// A wait a decision inserted (reuse rule 5): the allocating stream's later
// work waits for the free at `position` of trace stream `stream`.
struct DecisionWait {
  uint32_t stream = 0;  // dense trace stream index
  uint64_t position = 0;
  bool operator==(const DecisionWait&) const = default;
};

// One allocation's decision as a replay took it: what --verify compares
// with a recording's, and an executor comparison across two replays.
struct ReplayDecision {
  uint32_t op = 0;      // the alloc op's index in Trace::ops, from 1
  uint32_t line = 0;    // the alloc op's trace line
  uint32_t stream = 0;  // the allocating stream (dense trace index)
  uint64_t size = 0;
  bool failed = false;  // out of memory; the fields below are then unset
  ReuseRule rule = ReuseRule::kFresh;
  uint32_t pool = 0;  // the trace's pool (TraceOp::kNoPool: the replay's own)
  // Where the block lies in its pool (Observation::PlaceOf); 0, 0 for a
  // size-0 allocation, which gets no block.
  uint64_t chunk = 0;
  uint64_t offset = 0;
  // The waits the decision inserted, in the order the pool inserted them.
  std::vector<DecisionWait> waits;
  // An allocator model's allocation (its rule is then kFresh, its pool and
  // chunk 0): where the model put it, in the model's own address space,
  // which starts at a fixed base, so it is the same in every run.
  bool model = false;
  uint64_t address = 0;

  // Same outcome: both failed, or the same rule, pool, chunk and offset.
  bool SameAs(const ReplayDecision& other) const;
  // "same_stream at pool 0 chunk 0 offset 4096", "failed (out of memory)".
  std::string Describe() const;
};

struct ReplayResult {
  ReplaySettings settings;
  // What the pool made of settings.growth (spMemPoolAttrGrowth): chunked or
  // expandable, never kDefault.
  PoolGrowth growth = PoolGrowth::kDefault;
  PoolStats stats;  // at the end of the trace
  // The device capacity the run had: settings.device_capacity, or a
  // recording's own when it replayed at its recorded settings.
  uint64_t device_capacity = 0;
  uint64_t peak_reserved = 0;  // ReservedMemHigh
  uint64_t peak_used = 0;      // UsedMemHigh: rule sizes of live allocations
  // peak_used / peak_reserved; 0 when nothing was reserved.
  double utilization = 0;
  uint64_t failed_allocs = 0;
  // Frees of allocations that failed (out of memory), which are skipped.
  uint64_t skipped_frees = 0;
  size_t checker_reports = 0;
  std::vector<std::string> first_checker_reports;  // up to 5 messages
  HostCost alloc_cost;
  HostCost free_cost;
  uint64_t end_time_ns = 0;  // host virtual time after the last op
  // Virtual time when every op of the trace has completed: end_time_ns, or
  // later when work was still running on a stream after the last op. A
  // final synchronize finds it, after every other figure is taken.
  uint64_t makespan_ns = 0;
  // Synchronize calls the trace made (sync, esync, dsync): the host waits a
  // workload needed besides the pool's inserted waits (stats.waits_inserted).
  uint64_t synchronizes = 0;
  // A recording's decisions (Trace::decisions) against the replay's: how
  // many allocations were compared, how many got another rule, pool, chunk,
  // offset or outcome, and the first of those in words (empty: none).
  uint64_t decisions_checked = 0;
  uint64_t decisions_diverged = 0;
  std::string first_divergence;
  // With stop_at_first_failure: the line of the allocation that failed and
  // ended the replay (0: it ran to the end).
  uint32_t stopped_at_line = 0;
  // Why the recorded decisions need not hold here (empty: they must): the
  // recording ran in real time, or a pool sat on the program's own upstream.
  std::string not_reproducible;
  // What every allocator reports alike: segments (PyTorch), upstream blocks
  // (RMM), or maps (streampool: chunks, or runs of granules) made and given
  // back; cross-stream reuses; waits the allocator inserted and device
  // synchronizations it forced; retries after freeing its cache.
  ModelCounters counters;
  // With settings.keep_segment_history, a model's segment events.
  std::vector<SegmentEvent> segment_history;
  // A model's state at the end, in words (AllocatorModel::Describe for the
  // stream of the last op).
  std::string model_state;
  // Every change of (reserved, used), starting with (0, 0, 0).
  std::vector<SeriesPoint> series;
  // With more than one pool of streampool's: each pool's own changes, in
  // the order the replay made them ("pool 2 (pinned_host)", "the replay's
  // pool"), each starting at (0, 0, 0) when its pool was made.
  struct PoolSeries {
    std::string name;
    std::vector<SeriesPoint> points;
  };
  std::vector<PoolSeries> pool_series;
  // With settings.record_timeline: the run as one timeline process.
  std::optional<TimelineProcess> timeline;
  // With settings.keep_decisions: every pool allocation's decision, in trace
  // order (a model's allocations have none).
  std::vector<ReplayDecision> decisions;
  // Wall-clock time the replay took, creating the runtime included.
  uint64_t wall_ns = 0;
  // A trace with graph ops: each device's graph memory beside the pools
  // (empty for a trace without graphs), and launches refused for lack of
  // memory.
  struct GraphMemory {
    int device = 0;
    uint64_t used_high = 0;
    uint64_t reserved_high = 0;
    uint64_t used_end = 0;
    uint64_t reserved_end = 0;
  };
  std::vector<GraphMemory> graph_memory;
  uint64_t failed_launches = 0;
};

// Called every few hundred ops with (ops done, ops total).
using ProgressFn = std::function<void(size_t, size_t)>;

// A block of a pool's chunk or reservation as a decision observer sees it:
// where it lies from the segment's start (never an address, which differs
// between runs), and whose it is.
struct NeighbourBlock {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t requested = 0;  // LIVE and cached: the size asked for
  BlockState state = BlockState::kReady;
  // LIVE: the allocating stream; freed: the freeing stream (dense trace
  // index); kNoStream for READY blocks and streams destroyed since.
  uint32_t stream = kNoStream;
  uint64_t free_point = 0;  // freed blocks: the freeing stream's position
  bool unmapped = false;    // READY bytes not backed by memory
  bool at_place = false;    // the block the question was about
  static constexpr uint32_t kNoStream = UINT32_MAX;
};
// The blocks around one place of a pool: the block that starts at or
// covers it and a few on either side, in address order.
struct Neighbourhood {
  bool found = false;  // false: `note` says why there are no blocks
  uint64_t segment_size = 0;
  std::vector<NeighbourBlock> blocks;
  std::string note;
};
// What a decision observer may ask while the replay stands at a decision:
// the blocks around (pool, chunk, offset) as the pool has them then (after
// the allocation). Pool is the trace's pool index, TraceOp::kNoPool for the
// replay's own. Costs a pool snapshot: meant for the decision that differs.
using BlocksAroundFn = std::function<Neighbourhood(uint32_t pool, uint64_t chunk, uint64_t offset)>;
// Called with each allocation's decision as the replay takes it, waits
// included; false ends the replay after that op (the result then covers the
// trace up to there).
using DecisionFn = std::function<bool(const ReplayDecision&, const BlocksAroundFn&)>;

// Replays `trace`. Allocations that run out of memory are counted, not
// errors; any other failing call (an unsupported pool type, say) is an error
// naming the trace line.
absl::StatusOr<ReplayResult> Replay(const Trace& trace, const ReplaySettings& settings,
                                    const ProgressFn& progress = {},
                                    const DecisionFn& on_decision = {});

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_REPLAY_H_
