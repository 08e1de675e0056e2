#include "src/replay/replay.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/pool/names.h"
#include "src/runtime/runtime_impl.h"

namespace streampool::replay {

namespace {

constexpr ReuseSwitch kReuseSwitches[] = {
    {"event", &ReplaySettings::reuse_event},
    {"opportunistic", &ReplaySettings::reuse_opportunistic},
    {"internal", &ReplaySettings::reuse_internal},
};

// Adds one more pool's statistics to `sum`, each as src/pool/pool_stats.def
// combines it: summed, the largest, or (a ratio) left alone.
void AddPoolStats(PoolStats& sum, const PoolStats& s) {
  enum Combine { kSum, kMax, kNone };
  const auto combine = [](Combine how, auto& into, auto value) {
    if (how == kSum) into += value;
    if (how == kMax) into = std::max(into, value);
  };
#define SP_POOL_STAT(c_name, cxx_name, how) combine(how, sum.cxx_name, s.cxx_name);
#define SP_POOL_STAT_CXX(cxx_name, type, how) combine(how, sum.cxx_name, s.cxx_name);
#include "src/pool/pool_stats.def"
}

}  // namespace

absl::Span<const ReuseSwitch> ReuseSwitches() { return kReuseSwitches; }

absl::Status ParseReuse(absl::string_view list, ReplaySettings* settings) {
  const bool all = list == "all";
  for (const ReuseSwitch& r : kReuseSwitches) settings->*r.on = all;
  if (all || list == "none") return absl::OkStatus();
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    const ReuseSwitch* found = nullptr;
    for (const ReuseSwitch& r : kReuseSwitches) {
      if (name == r.name) found = &r;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown reuse rule '", name,
          "' (a comma-separated list of 'event', 'opportunistic', 'internal', or 'all' or "
          "'none')"));
    }
    settings->*found->on = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  struct Suffix {
    absl::string_view name;
    int shift;
  };
  constexpr Suffix kSuffixes[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40},
                                  {"K", 10},   {"M", 20},   {"G", 30},   {"T", 40}};
  absl::string_view digits = text;
  int shift = 0;
  for (const Suffix& suffix : kSuffixes) {
    if (absl::ConsumeSuffix(&digits, suffix.name)) {
      shift = suffix.shift;
      break;
    }
  }
  std::optional<uint64_t> v = ParseUint(digits);
  if (!v || (shift != 0 && *v > (UINT64_MAX >> shift))) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a byte count (digits with an optional K, M, G, T, ",
                     "KiB, MiB, GiB or TiB; below 2^64)"));
  }
  return *v << shift;
}

absl::StatusOr<uint64_t> ParseThreshold(absl::string_view text) {
  if (text == "max") return UINT64_MAX;
  return ParseBytes(text);
}

std::string ReplaySettings::ReuseLabel() const {
  std::string out;
  for (const ReuseSwitch& r : kReuseSwitches) {
    if (this->*r.on) absl::StrAppend(&out, out.empty() ? "" : "+", r.name);
  }
  if (out.empty()) return "none";
  if (reuse_internal && !wait_before_growth && allocator == AllocatorKind::kStreampool) {
    absl::StrAppend(&out, " (grow first)");
  }
  return out;
}

std::string ReplaySettings::ThresholdLabel() const {
  return release_threshold == UINT64_MAX ? "max" : absl::StrCat(release_threshold);
}

std::string ReplaySettings::AllocatorLabel() const {
  std::string label = AllocatorName(allocator);
  if (allocator == AllocatorKind::kPytorch && !torch.ToString().empty()) {
    absl::StrAppend(&label, " ", torch.ToString());
  }
  if (allocator == AllocatorKind::kRmmPool) {
    if (rmm.initial_pool_size != 0) absl::StrAppend(&label, " initial ", rmm.initial_pool_size);
    if (rmm.maximum_pool_size != 0) absl::StrAppend(&label, " maximum ", rmm.maximum_pool_size);
  }
  return label;
}

std::string ReplaySettings::Label() const {
  if (allocator == AllocatorKind::kPytorch || allocator == AllocatorKind::kRmmPool) {
    return AllocatorLabel();
  }
  if (allocator == AllocatorKind::kCuda) {
    return "cuda (chunked growth, every reuse rule, threshold 0)";
  }
  std::string label = absl::StrCat(ReuseLabel(), ", threshold ", ThresholdLabel());
  if (reuse_internal && soft_limit != UINT64_MAX) {
    absl::StrAppend(&label, ", soft limit ", soft_limit);
  }
  if (growth != PoolGrowth::kDefault || label_growth) {
    absl::StrAppend(&label, ", growth ", internal::EnumName(growth));
  }
  return label;
}

std::vector<ReplaySettings> AllReuseCombinations(const ReplaySettings& base) {
  std::vector<ReplaySettings> out;
  // Bit set = switch off, so the count runs from all-on to none.
  for (int off = 0; off < 8; ++off) {
    ReplaySettings s = base;
    s.reuse_event = (off & 4) == 0;
    s.reuse_opportunistic = (off & 2) == 0;
    s.reuse_internal = (off & 1) == 0;
    out.push_back(s);
  }
  return out;
}

std::vector<ReplaySettings> SweepSettings(const ReplaySettings& base,
                                          const std::vector<uint64_t>& thresholds,
                                          const std::vector<PoolGrowth>& growths,
                                          bool all_policies) {
  std::vector<ReplaySettings> out;
  for (uint64_t t : thresholds) {
    for (PoolGrowth g : growths) {
      ReplaySettings s = base;
      s.release_threshold = t;
      s.growth = g;
      s.label_growth = growths.size() > 1;
      if (all_policies) {
        for (const ReplaySettings& c : AllReuseCombinations(s)) out.push_back(c);
      } else {
        out.push_back(s);
      }
    }
  }
  return out;
}

std::vector<ReplaySettings> AllocatorRows(const std::vector<AllocatorKind>& allocators,
                                          const std::vector<ReplaySettings>& sweep) {
  std::vector<ReplaySettings> out;
  for (AllocatorKind kind : allocators) {
    if (kind == AllocatorKind::kStreampool) {
      out.insert(out.end(), sweep.begin(), sweep.end());
    } else if (!sweep.empty()) {
      ReplaySettings s = sweep.front();
      s.allocator = kind;
      s.label_growth = false;
      out.push_back(s);
    }
  }
  return out;
}

HostCost SummarizeCost(std::vector<uint64_t>& samples) {
  HostCost c;
  c.calls = samples.size();
  if (samples.empty()) return c;
  std::sort(samples.begin(), samples.end());
  long double sum = 0;
  for (uint64_t s : samples) sum += s;
  c.mean_ns = static_cast<double>(sum / samples.size());
  // Nearest rank: the smallest sample with at least p% of samples <= it.
  auto rank = [&](int p) {
    const size_t k = (samples.size() * p + 99) / 100;
    return samples[std::max<size_t>(k, 1) - 1];
  };
  c.p50_ns = rank(50);
  c.p99_ns = rank(99);
  c.max_ns = samples.back();
  return c;
}

bool ReplayDecision::SameAs(const ReplayDecision& other) const {
  if (failed || other.failed) return failed == other.failed;
  return rule == other.rule && pool == other.pool && chunk == other.chunk && offset == other.offset;
}

std::string ReplayDecision::Describe() const {
  if (failed) return "failed (out of memory)";
  return absl::StrCat(ReuseRuleName(rule), " at pool ",
                      pool == TraceOp::kNoPool ? std::string("(own)") : absl::StrCat(pool),
                      " chunk ", chunk, " offset ", offset);
}

namespace {

absl::Status AtLine(const Trace& trace, const TraceOp& op, absl::string_view call,
                    const absl::Status& st) {
  return absl::Status(
      st.code(), absl::StrCat(trace.name, ":", op.line, ": ", call, " failed: ", st.message()));
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

namespace {

// A copy's duration as the runtime times it (bytes / copy_bytes_per_us µs,
// saturating), so that a recorded copy replays as a kernel of equal length.
// The bandwidth is the trace's even where the runtime's must stay at its
// default (a CUDA runtime): the workload's timing is the trace's.
uint64_t TransferNs(uint64_t bytes, uint64_t bytes_per_us) {
  const unsigned __int128 ns = static_cast<unsigned __int128>(bytes) * 1000 / bytes_per_us;
  return ns > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(ns);
}

// The runtime a trace replays on: the workload's own figures from a
// recording's header (devices, per-call cost, copy bandwidth), the
// capacity from the settings unless they defer to the recording.
absl::StatusOr<RuntimeConfig> ConfigFor(const Trace& trace, const ReplaySettings& settings) {
  RuntimeConfig config;
  config.backing = settings.backing;
  config.device_capacity = settings.device_capacity;
  if (std::optional<uint64_t> n = trace.HeaderNumber("device_count")) {
    if (*n < 1 || *n > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat(trace.name, ": header device_count ", *n, " is not 1..64"));
    }
    config.device_count = static_cast<int>(*n);
  }
  if (std::optional<uint64_t> ns = trace.HeaderNumber("api_call_ns")) config.api_call_ns = *ns;
  config.oom_reclaim = settings.oom_reclaim;
  // A recording says whether its runtime reclaimed memory before failing an
  // allocation.
  if (std::optional<uint64_t> reclaim = trace.HeaderNumber("oom_reclaim");
      reclaim && settings.use_recorded) {
    config.oom_reclaim = *reclaim != 0;
  }
  if (std::optional<uint64_t> bw = trace.HeaderNumber("copy_bytes_per_us"); bw && *bw != 0) {
    config.copy_bytes_per_us = *bw;
  }
  if (settings.use_recorded && settings.recorded_capacity) {
    if (std::optional<uint64_t> c = trace.HeaderNumber("device_capacity"); c && *c != 0) {
      config.device_capacity = *c;
    }
  }
  config.executor = settings.executor;
  return config;
}

// The trace's copy bandwidth (TransferNs), whatever the runtime's.
uint64_t CopyBandwidth(const Trace& trace) {
  std::optional<uint64_t> bw = trace.HeaderNumber("copy_bytes_per_us");
  return bw && *bw != 0 ? *bw : RuntimeConfig().copy_bytes_per_us;
}

// A CUDA runtime's memory is the device's and its costs are the device's
// own: backing, per-call cost and copy bandwidth stay at their defaults,
// which is all a CUDA runtime accepts.
void CudaRuntimeDefaults(RuntimeConfig* config) {
  const RuntimeConfig defaults;
  config->backing = defaults.backing;
  config->api_call_ns = defaults.api_call_ns;
  config->copy_bytes_per_us = defaults.copy_bytes_per_us;
}

// CUDA's own pool as created by default: every reuse rule, threshold 0,
// and a chunk per growth.
void CudaDefaults(PoolProps* props) {
  props->reuse_follow_event_dependencies = true;
  props->reuse_allow_opportunistic = true;
  props->reuse_allow_internal_dependencies = true;
  props->release_threshold = 0;
  props->growth = PoolGrowth::kChunked;
  props->wait_before_growth = false;
  props->soft_reserved_limit = UINT64_MAX;
}

// A model's view of stream order: events on the replay's runtime.
class RuntimeStreams final : public ModelStreams {
 public:
  using StreamFn = std::function<absl::StatusOr<StreamId>(uint32_t)>;
  RuntimeStreams(Runtime& rt, int devices, StreamFn stream)
      : rt_(rt), devices_(devices), stream_(std::move(stream)) {}
  ~RuntimeStreams() override {
    for (auto& [marker, e] : events_) (void)rt_.DestroyEvent(e);
  }

  absl::StatusOr<uint64_t> Record(uint32_t stream) override {
    absl::StatusOr<StreamId> s = stream_(stream);
    if (!s.ok()) return s.status();
    absl::StatusOr<EventId> e = rt_.CreateEvent(kEventDisableTiming);
    if (!e.ok()) return e.status();
    if (absl::Status st = rt_.RecordEvent(*e, *s); !st.ok()) {
      (void)rt_.DestroyEvent(*e);
      return st;
    }
    events_.emplace(next_, *e);
    return next_++;
  }
  absl::StatusOr<bool> Done(uint64_t marker) override {
    absl::Status st = rt_.EventQuery(events_.at(marker));
    if (st.ok()) return true;
    if (absl::IsUnavailable(st)) return false;
    return st;
  }
  absl::Status Wait(uint32_t stream, uint64_t marker) override {
    absl::StatusOr<StreamId> s = stream_(stream);
    if (!s.ok()) return s.status();
    return rt_.StreamWaitEvent(*s, events_.at(marker));
  }
  absl::Status Synchronize(uint64_t marker) override {
    return rt_.EventSynchronize(events_.at(marker));
  }
  void Forget(uint64_t marker) override {
    auto it = events_.find(marker);
    if (it == events_.end()) return;
    (void)rt_.DestroyEvent(it->second);
    events_.erase(it);
  }
  absl::Status SynchronizeDevice() override {
    for (int d = 0; d < devices_; ++d) {
      if (absl::Status st = rt_.DeviceSynchronize(d); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  Runtime& rt_;
  int devices_;
  StreamFn stream_;
  absl::flat_hash_map<uint64_t, EventId> events_;
  uint64_t next_ = 1;
};

// A trace pool's properties: as recorded, or with the settings' reuse
// switches, threshold and growth.
PoolProps PropsFor(const TracePool& p, const ReplaySettings& settings) {
  PoolProps props;
  props.alloc_type = p.type;
  props.device = p.device;
  props.max_size = settings.max_size != 0 ? settings.max_size : p.max_size;
  props.page_policy = p.page_policy;
  props.acl_rounding = p.acl_rounding;
  props.acl_align32 = p.acl_align32;
  // Exporting needs a memfd per pool, which a replay has no use for.
  props.handle_types = 0;
  if (settings.use_recorded) {
    props.reuse_follow_event_dependencies = p.reuse_event;
    props.reuse_allow_opportunistic = p.reuse_opportunistic;
    props.reuse_allow_internal_dependencies = p.reuse_internal;
    props.release_threshold = p.release_threshold;
    props.growth = p.growth;
    props.wait_before_growth = p.wait_before_growth;
    props.soft_reserved_limit = p.soft_limit;
  } else {
    props.reuse_follow_event_dependencies = settings.reuse_event;
    props.reuse_allow_opportunistic = settings.reuse_opportunistic;
    props.reuse_allow_internal_dependencies = settings.reuse_internal;
    props.release_threshold = settings.release_threshold;
    props.growth = settings.growth;
    props.wait_before_growth = settings.wait_before_growth;
    props.soft_reserved_limit = settings.soft_limit;
  }
  if (settings.allocator == AllocatorKind::kCuda) CudaDefaults(&props);
  return props;
}

// The blocks around (chunk, offset) of `pool` now. A snapshot names
// segments by address, a decision by the chunk's number in its pool: a LIVE
// block of a segment tells which number it has (PlaceOf), so a segment with
// nothing live cannot be named.
Neighbourhood BlocksAround(Runtime& rt, PoolId pool, uint64_t chunk, uint64_t offset,
                           const std::function<uint32_t(StreamId)>& trace_stream) {
  // Three on either side: enough to show what lay next to the place (the
  // free neighbour a merge would have used, the block that was taken
  // instead) without printing a whole pool.
  constexpr size_t kAround = 3;
  Neighbourhood out;
  absl::StatusOr<PoolSnapshot> snapshot = rt.Snapshot(pool);
  if (!snapshot.ok()) {
    out.note = absl::StrCat("no snapshot: ", snapshot.status().message());
    return out;
  }
  for (const SnapshotSegment& seg : snapshot->segments) {
    std::optional<uint64_t> id;
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.state != BlockState::kLive) continue;
      absl::StatusOr<internal::Observation::BlockPlace> place =
          rt.impl().Run<&internal::Observation::PlaceOf>(reinterpret_cast<const void*>(b.address));
      if (place.ok()) {
        id = place->chunk;
        break;
      }
    }
    if (id != chunk) continue;
    size_t at = seg.blocks.size();
    for (size_t k = 0; k < seg.blocks.size(); ++k) {
      const SnapshotBlock& b = seg.blocks[k];
      if (b.address - seg.address <= offset && offset < b.address - seg.address + b.size) at = k;
    }
    if (at == seg.blocks.size()) {
      out.note = absl::StrCat("chunk ", chunk, " has no block at offset ", offset);
      return out;
    }
    out.found = true;
    out.segment_size = seg.size;
    const size_t from = at >= kAround ? at - kAround : 0;
    const size_t to = std::min(seg.blocks.size(), at + kAround + 1);
    for (size_t k = from; k < to; ++k) {
      const SnapshotBlock& b = seg.blocks[k];
      NeighbourBlock n;
      n.offset = b.address - seg.address;
      n.size = b.size;
      n.requested = b.requested;
      n.state = b.state;
      n.stream = b.stream.value == 0 ? NeighbourBlock::kNoStream : trace_stream(b.stream);
      n.free_point = b.free_point;
      n.unmapped = b.unmapped_bytes != 0;
      n.at_place = k == at;
      out.blocks.push_back(n);
    }
    return out;
  }
  out.note = absl::StrCat("no chunk ", chunk,
                          " with a live block in the pool now (given back, or all of it free)");
  return out;
}

std::string DescribeDecision(const RecordedDecision& d) {
  if (d.failed) return "failed (out of memory)";
  return absl::StrCat(ReuseRuleName(d.rule), " at chunk ", d.chunk, " offset ", d.offset);
}

}  // namespace

absl::StatusOr<ReplayResult> Replay(const Trace& trace, const ReplaySettings& settings,
                                    const ProgressFn& progress, const DecisionFn& on_decision) {
  const uint64_t started_ns = NowNs();
  absl::StatusOr<RuntimeConfig> config = ConfigFor(trace, settings);
  if (!config.ok()) return config.status();
  if (config->executor == ExecutorKind::kCuda) CudaRuntimeDefaults(&*config);
  const uint64_t copy_bytes_per_us = CopyBandwidth(trace);
  // Returned as it is: its C code says whether the machine lacks a driver
  // or a device (an executor comparison skips such a trace).
  absl::StatusOr<std::unique_ptr<Runtime>> created = Runtime::Create(*config);
  if (!created.ok()) return created.status();
  Runtime& rt = **created;
  // Collect reports rather than abort: EnableChecker turns off the fatal mode
  // that STREAMPOOL_CHECK_STREAM_ORDER=fatal (the test suite's) would set.
  rt.EnableChecker(settings.check_stream_order);

  ReplayResult r;
  r.settings = settings;
  r.device_capacity = config->device_capacity;

  // The trace's pools, made where their lines stand; a trace that names none
  // gets one pool of the settings, made now.
  std::vector<std::optional<PoolId>> pools(trace.pools.size());
  std::optional<PoolId> own_pool;
  std::vector<PoolId> all_pools;  // every pool made, for the statistics
  auto make_pool = [&](const PoolProps& props, std::string name) -> absl::StatusOr<PoolId> {
    absl::StatusOr<PoolId> pool = rt.CreatePool(props);
    if (!pool.ok()) {
      return absl::Status(pool.status().code(),
                          absl::StrCat("creating the pool failed: ", pool.status().message()));
    }
    all_pools.push_back(*pool);
    r.pool_series.push_back(
        {absl::StrCat(std::move(name), " (", internal::EnumName(props.alloc_type), ")"),
         {SeriesPoint{rt.HostNow(), 0, 0}}});
    return *pool;
  };
  const bool recorded_pools = !trace.pools.empty();
  const bool modelled = IsModel(settings.allocator);
  bool needs_own_pool = !recorded_pools && !modelled;
  for (const TraceOp& op : trace.ops) {
    if (op.kind == TraceOp::Kind::kAlloc && op.pool == TraceOp::kNoPool && !modelled) {
      needs_own_pool = true;
    }
  }
  if (needs_own_pool) {
    PoolProps props;
    props.alloc_type = settings.pool_type;
    props.reuse_follow_event_dependencies = settings.reuse_event;
    props.reuse_allow_opportunistic = settings.reuse_opportunistic;
    props.reuse_allow_internal_dependencies = settings.reuse_internal;
    props.release_threshold = settings.release_threshold;
    props.growth = settings.growth;
    props.wait_before_growth = settings.wait_before_growth;
    props.soft_reserved_limit = settings.soft_limit;
    props.max_size = settings.max_size;
    if (settings.allocator == AllocatorKind::kCuda) CudaDefaults(&props);
    absl::StatusOr<PoolId> pool = make_pool(props, "the replay's pool");
    if (!pool.ok()) return pool.status();
    own_pool = *pool;
    absl::StatusOr<uint64_t> growth = rt.GetPoolAttribute(*own_pool, PoolAttr::kGrowth);
    if (!growth.ok()) return growth.status();
    r.growth = static_cast<PoolGrowth>(*growth);
  }
  // The other allocators: one model per device, serving every pool of it.
  std::vector<std::unique_ptr<AllocatorModel>> models(config->device_count);
  std::vector<uint64_t> model_address;  // by slot
  std::vector<uint8_t> model_device;    // by slot
  // A pool's bytes as the series and the statistics count them: summed over
  // every pool the replay made.
  auto pool_bytes = [&](uint64_t* reserved, uint64_t* used) -> absl::Status {
    *reserved = *used = 0;
    for (const std::unique_ptr<AllocatorModel>& m : models) {
      if (m == nullptr) continue;
      *reserved += m->reserved();
      *used += m->used();
    }
    for (PoolId p : all_pools) {
      absl::StatusOr<uint64_t> res = rt.GetPoolAttribute(p, PoolAttr::kReservedMemCurrent);
      if (!res.ok()) continue;  // destroyed since
      absl::StatusOr<uint64_t> u = rt.GetPoolAttribute(p, PoolAttr::kUsedMemCurrent);
      if (!u.ok()) continue;
      *reserved += *res;
      *used += *u;
    }
    return absl::OkStatus();
  };

  std::vector<std::optional<StreamId>> streams(trace.stream_ids.size());
  std::vector<std::optional<EventId>> events(trace.event_ids.size());
  absl::StatusOr<StreamId> legacy = rt.LegacyStream(0);
  if (!legacy.ok()) return legacy.status();
  streams[0] = *legacy;

  // slot -> pointer; a slot whose allocation failed keeps `failed`.
  std::vector<void*> ptrs(trace.alloc_count, nullptr);
  std::vector<bool> failed(trace.alloc_count, false);
  std::vector<uint64_t> alloc_ns, free_ns;
  if (settings.measure_host_cost) {
    alloc_ns.reserve(trace.alloc_count);
    free_ns.reserve(trace.free_count);
  }
  // A recording's decisions are streampool's at its recorded settings.
  const bool verify = !trace.decisions.empty() && settings.allocator == AllocatorKind::kStreampool;
  const bool timed = settings.measure_host_cost;
  if (auto it = trace.header.find("executor");
      it != trace.header.end() && it->second == "real_time") {
    r.not_reproducible = "recorded in real time (threads or adapter executor)";
  }
  if (settings.executor != ExecutorKind::kSimulator) {
    r.not_reproducible = absl::StrCat("replayed in real time (",
                                      internal::EnumName(settings.executor), " executor)");
  }
  for (const TracePool& p : trace.pools) {
    if (p.custom_upstream) r.not_reproducible = "a pool sat on the program's own upstream";
  }

  r.series.push_back(SeriesPoint{rt.HostNow(), 0, 0});

  TimelineRecorder recorder;
  const std::string pool_name =
      recorded_pools ? std::string("pools")
                     : absl::StrCat("pool (", internal::EnumName(settings.pool_type), ")");
  const uint64_t series_id = own_pool ? own_pool->value : 0;
  if (settings.record_timeline) {
    rt.RecordTimeline(true);
    recorder.PoolBytes(series_id, pool_name, rt.HostNow(), 0, 0);
  }

  // Created on first use, like the trace says; blocking streams, as
  // cudaStreamCreate makes them.
  auto stream_at = [&](uint32_t index) -> absl::StatusOr<StreamId> {
    if (!streams[index]) {
      absl::StatusOr<StreamId> s = rt.CreateStream(0);
      if (!s.ok()) return s.status();
      streams[index] = *s;
    }
    return *streams[index];
  };
  auto stream = [&](const TraceOp& op) -> absl::StatusOr<StreamId> {
    absl::StatusOr<StreamId> s = stream_at(op.stream);
    if (!s.ok()) return AtLine(trace, op, "CreateStream", s.status());
    return s;
  };
  RuntimeStreams model_streams(rt, config->device_count, stream_at);
  std::vector<bool> seeded;
  if (modelled) {
    model_address.assign(trace.alloc_count, 0);
    model_device.assign(trace.alloc_count, 0);
    ModelConfig mc;
    mc.device_capacity = config->device_capacity;
    mc.keep_history = settings.keep_segment_history;
    mc.torch = settings.torch;
    mc.rmm = settings.rmm;
    for (int d = 0; d < config->device_count; ++d) {
      absl::StatusOr<std::unique_ptr<AllocatorModel>> m =
          MakeAllocatorModel(settings.allocator, mc, &model_streams);
      if (!m.ok()) return m.status();
      models[d] = *std::move(m);
    }
    if (settings.allocator == AllocatorKind::kPytorch && settings.seed_from_trace &&
        !trace.initial_segments.empty()) {
      if (absl::Status st = models[0]->Seed(trace.initial_segments, trace.initial_blocks);
          !st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(trace.name, ": the trace's torch_segment lines: ", st.message()));
      }
      seeded.assign(trace.alloc_count, false);
      for (const InitialBlock& b : trace.initial_blocks) {
        seeded[b.slot] = true;
        model_address[b.slot] = b.address;
      }
    }
  }
  auto device_of = [&](const TraceOp& op) -> uint8_t {
    return op.pool == TraceOp::kNoPool ? 0 : static_cast<uint8_t>(trace.pools[op.pool].device);
  };
  auto event = [&](const TraceOp& op) -> absl::StatusOr<EventId> {
    if (!events[op.event]) {
      absl::StatusOr<EventId> e = rt.CreateEvent();
      if (!e.ok()) return AtLine(trace, op, "CreateEvent", e.status());
      events[op.event] = *e;
    }
    return *events[op.event];
  };
  auto pool_of = [&](const TraceOp& op) -> absl::StatusOr<PoolId> {
    if (op.pool == TraceOp::kNoPool) return *own_pool;
    if (!pools[op.pool]) {
      return absl::FailedPreconditionError(
          absl::StrCat(trace.name, ":", op.line, ": the pool was destroyed"));
    }
    return *pools[op.pool];
  };
  // The first allocation whose decision differs from the recorded one.
  auto diverged = [&](const TraceOp& op, const RecordedDecision& want, const std::string& got) {
    ++r.decisions_diverged;
    if (r.first_divergence.empty()) {
      r.first_divergence =
          absl::StrCat(trace.name, ":", op.line, ": alloc of ", op.value, " bytes: recorded ",
                       DescribeDecision(want), ", replayed ", got);
    }
  };

  // Decisions, for keep_decisions and on_decision.
  const bool decide = settings.keep_decisions || static_cast<bool>(on_decision);
  if (decide) rt.impl().Run<&internal::Observation::LogInternalWaits>(true);
  auto decision_of = [&](size_t index, const TraceOp& op, bool ok) {
    ReplayDecision d;
    d.op = static_cast<uint32_t>(index + 1);
    d.line = op.line;
    d.stream = op.stream;
    d.size = op.value;
    d.failed = !ok;
    d.pool = op.pool;
    return d;
  };
  // A runtime stream as the trace names it (the waits' streams are the
  // runtime's); streams are few, and only decisions that waited ask.
  auto trace_stream_of = [&](StreamId s) -> uint32_t {
    for (size_t k = 0; k < streams.size(); ++k) {
      if (streams[k] && streams[k]->value == s.value) return static_cast<uint32_t>(k);
    }
    return NeighbourBlock::kNoStream;
  };
  BlocksAroundFn blocks_around = [&](uint32_t pool, uint64_t chunk, uint64_t offset) {
    std::optional<PoolId> id = pool == TraceOp::kNoPool ? own_pool
                               : pool < pools.size()    ? pools[pool]
                                                        : std::nullopt;
    if (!id) {
      Neighbourhood none;
      none.note = "the pool is not there (destroyed, or never made)";
      return none;
    }
    return BlocksAround(rt, *id, chunk, offset, trace_stream_of);
  };
  auto decided = [&](ReplayDecision d) {
    const bool go_on = !on_decision || on_decision(d, blocks_around);
    if (settings.keep_decisions) r.decisions.push_back(std::move(d));
    return go_on;
  };

  const size_t total = trace.ops.size();
  for (size_t i = 0; i < total; ++i) {
    const TraceOp& op = trace.ops[i];
    if (progress && i % 512 == 0) progress(i, total);
    absl::Status st;
    switch (op.kind) {
      case TraceOp::Kind::kAlloc: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        if (modelled) {
          if (!seeded.empty() && seeded[op.slot]) break;  // placed by Seed
          const uint8_t device = device_of(op);
          const uint64_t t0 = timed ? NowNs() : 0;
          absl::StatusOr<uint64_t> a = models[device]->Allocate(op.value, op.stream, op.line);
          if (timed) alloc_ns.push_back(NowNs() - t0);
          if (a.ok()) {
            model_address[op.slot] = *a;
            model_device[op.slot] = device;
          } else if (absl::IsResourceExhausted(a.status())) {
            failed[op.slot] = true;
            ++r.failed_allocs;
            if (settings.stop_at_first_failure) {
              r.stopped_at_line = op.line;
              i = total;
            }
          } else {
            return AtLine(trace, op, "Allocate", a.status());
          }
          if (decide) {
            ReplayDecision d = decision_of(i, op, a.ok());
            d.model = true;
            d.pool = 0;  // a model serves every pool of its device
            d.address = a.ok() ? *a : 0;
            if (!decided(std::move(d))) i = total;
          }
          break;
        }
        absl::StatusOr<PoolId> pool = pool_of(op);
        if (!pool.ok()) return pool.status();
        const uint64_t t0 = timed ? NowNs() : 0;
        absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(op.value, *pool, *s);
        if (timed) alloc_ns.push_back(NowNs() - t0);
        if (a.ok()) {
          ptrs[op.slot] = a->ptr;
          if (settings.record_timeline && op.value != 0) {
            recorder.Allocated(*s, a->ptr, op.value, a->rule, rt.HostNow());
          }
        } else if (absl::IsResourceExhausted(a.status())) {
          failed[op.slot] = true;
          ++r.failed_allocs;
          if (settings.stop_at_first_failure) {
            r.stopped_at_line = op.line;
            i = total;  // leaves the loop after this op's bookkeeping
          }
        } else {
          return AtLine(trace, op, "MallocFromPoolAsync", a.status());
        }
        if (decide) {
          ReplayDecision d = decision_of(i, op, a.ok());
          if (a.ok()) d.rule = a->rule;
          // Taken after every allocation, failed ones too, so that no wait
          // is left over to be counted against the next.
          absl::StatusOr<internal::Observation::DecisionFacts> facts =
              rt.impl().Run<&internal::Observation::TakeDecision>(a.ok() ? a->ptr : nullptr);
          if (!facts.ok()) return AtLine(trace, op, "PlaceOf", facts.status());
          if (facts->place) {
            d.chunk = facts->place->chunk;
            d.offset = facts->place->offset;
          }
          for (const internal::Observation::InternalWait& w : facts->waits) {
            d.waits.push_back(DecisionWait{trace_stream_of(w.stream), w.position});
          }
          if (!decided(std::move(d))) i = total;
        }
        if (verify && op.slot < trace.decisions.size() && trace.decisions[op.slot].present) {
          const RecordedDecision& want = trace.decisions[op.slot];
          ++r.decisions_checked;
          if (!a.ok()) {
            if (!want.failed) diverged(op, want, "failed (out of memory)");
          } else if (want.failed) {
            diverged(op, want, absl::StrCat(ReuseRuleName(a->rule), " (it succeeded)"));
          } else {
            absl::StatusOr<internal::Observation::BlockPlace> place =
                rt.impl().Run<&internal::Observation::PlaceOf>(a->ptr);
            absl::StatusOr<PointerAttributes> attrs = rt.GetPointerAttributes(a->ptr);
            if (!place.ok() || !attrs.ok() || !(attrs->pool == *pool) || a->rule != want.rule ||
                place->chunk != want.chunk || place->offset != want.offset) {
              diverged(op, want,
                       place.ok() ? absl::StrCat(ReuseRuleName(a->rule), " at chunk ", place->chunk,
                                                 " offset ", place->offset)
                                  : std::string(place.status().message()));
            }
          }
        }
        break;
      }
      case TraceOp::Kind::kMalloc: {
        absl::StatusOr<void*> p = rt.Malloc(op.value, static_cast<int>(op.aux));
        if (p.ok()) {
          ptrs[op.slot] = *p;
        } else if (absl::IsResourceExhausted(p.status())) {
          failed[op.slot] = true;
          ++r.failed_allocs;
        } else {
          return AtLine(trace, op, "Malloc", p.status());
        }
        break;
      }
      case TraceOp::Kind::kFree: {
        if (failed[op.slot]) {
          ++r.skipped_frees;
          break;
        }
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        if (modelled && (ptrs[op.slot] == nullptr)) {
          const uint64_t t0 = timed ? NowNs() : 0;
          st = models[model_device[op.slot]]->Free(model_address[op.slot], op.stream, op.line);
          if (timed) free_ns.push_back(NowNs() - t0);
          if (!st.ok()) return AtLine(trace, op, "Free", st);
          break;
        }
        const uint64_t t0 = timed ? NowNs() : 0;
        st = rt.FreeAsync(ptrs[op.slot], *s);
        if (timed) free_ns.push_back(NowNs() - t0);
        if (!st.ok()) return AtLine(trace, op, "FreeAsync", st);
        if (settings.record_timeline && ptrs[op.slot] != nullptr) {
          recorder.Freed(*s, ptrs[op.slot], rt.HostNow());
        }
        ptrs[op.slot] = nullptr;
        break;
      }
      case TraceOp::Kind::kRelease: {
        if (failed[op.slot]) {
          ++r.skipped_frees;
          break;
        }
        st = rt.Free(ptrs[op.slot]);
        if (!st.ok()) return AtLine(trace, op, "Free", st);
        ptrs[op.slot] = nullptr;
        break;
      }
      case TraceOp::Kind::kKernel: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        st = rt.LaunchKernel(*s, op.value, {});
        if (!st.ok()) return AtLine(trace, op, "LaunchKernel", st);
        break;
      }
      case TraceOp::Kind::kCopy: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        // A copy of no bytes enqueues nothing but costs its call.
        st = op.value == 0 ? rt.HostAdvance(0)
                           : rt.LaunchKernel(*s, TransferNs(op.value, copy_bytes_per_us), {});
        if (!st.ok()) return AtLine(trace, op, "copy", st);
        break;
      }
      case TraceOp::Kind::kHost: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        st = rt.LaunchHostFunc(*s, [] {});
        if (!st.ok()) return AtLine(trace, op, "LaunchHostFunc", st);
        break;
      }
      case TraceOp::Kind::kRecord: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        absl::StatusOr<EventId> e = event(op);
        if (!e.ok()) return e.status();
        st = rt.RecordEvent(*e, *s);
        if (!st.ok()) return AtLine(trace, op, "RecordEvent", st);
        break;
      }
      case TraceOp::Kind::kWait: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        absl::StatusOr<EventId> e = event(op);
        if (!e.ok()) return e.status();
        st = rt.StreamWaitEvent(*s, *e);
        if (!st.ok()) return AtLine(trace, op, "StreamWaitEvent", st);
        break;
      }
      case TraceOp::Kind::kSync: {
        ++r.synchronizes;
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        st = rt.StreamSynchronize(*s);
        if (!st.ok()) return AtLine(trace, op, "StreamSynchronize", st);
        break;
      }
      case TraceOp::Kind::kQuery: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        st = rt.StreamQuery(*s);
        if (!st.ok() && !absl::IsUnavailable(st)) return AtLine(trace, op, "StreamQuery", st);
        break;
      }
      case TraceOp::Kind::kEventSync: {
        ++r.synchronizes;
        absl::StatusOr<EventId> e = event(op);
        if (!e.ok()) return e.status();
        st = rt.EventSynchronize(*e);
        if (!st.ok()) return AtLine(trace, op, "EventSynchronize", st);
        break;
      }
      case TraceOp::Kind::kEventQuery: {
        absl::StatusOr<EventId> e = event(op);
        if (!e.ok()) return e.status();
        st = rt.EventQuery(*e);
        if (!st.ok() && !absl::IsUnavailable(st)) return AtLine(trace, op, "EventQuery", st);
        break;
      }
      case TraceOp::Kind::kDeviceSync:
        ++r.synchronizes;
        st = rt.DeviceSynchronize(static_cast<int>(op.aux));
        if (!st.ok()) return AtLine(trace, op, "DeviceSynchronize", st);
        break;
      case TraceOp::Kind::kAdvance:
        st = rt.HostAdvance(op.value);
        if (!st.ok()) return AtLine(trace, op, "HostAdvance", st);
        break;
      case TraceOp::Kind::kStream: {
        absl::StatusOr<StreamId> s =
            op.value == 2
                ? rt.LegacyStream(static_cast<int>(op.aux))
                : rt.CreateStream(static_cast<int>(op.aux), /*non_blocking=*/op.value == 1);
        if (!s.ok()) return AtLine(trace, op, "CreateStream", s.status());
        streams[op.stream] = *s;
        break;
      }
      case TraceOp::Kind::kStreamDestroy: {
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        if (absl::StatusOr<StreamId> l = rt.LegacyStream(0); l.ok() && l->value == s->value) break;
        st = rt.DestroyStream(*s);
        if (!st.ok()) return AtLine(trace, op, "DestroyStream", st);
        streams[op.stream].reset();
        break;
      }
      case TraceOp::Kind::kEvent: {
        // Interprocess events need a shared segment a replay has no use for.
        absl::StatusOr<EventId> e =
            rt.CreateEvent(static_cast<unsigned>(op.value) & ~kEventInterprocess);
        if (!e.ok()) return AtLine(trace, op, "CreateEvent", e.status());
        events[op.event] = *e;
        break;
      }
      case TraceOp::Kind::kEventDestroy: {
        absl::StatusOr<EventId> e = event(op);
        if (!e.ok()) return e.status();
        st = rt.DestroyEvent(*e);
        if (!st.ok()) return AtLine(trace, op, "DestroyEvent", st);
        events[op.event].reset();
        break;
      }
      case TraceOp::Kind::kUse: {
        if (failed[op.slot]) break;
        absl::StatusOr<StreamId> s = stream(op);
        if (!s.ok()) return s.status();
        if (modelled && ptrs[op.slot] == nullptr) {
          st = models[model_device[op.slot]]->RecordUse(model_address[op.slot], op.stream);
          if (!st.ok()) return AtLine(trace, op, "RecordUse", st);
        } else if (ptrs[op.slot] != nullptr) {
          st = rt.RecordUse(ptrs[op.slot], *s);
          if (!st.ok()) return AtLine(trace, op, "RecordUse", st);
        }
        break;
      }
      case TraceOp::Kind::kPool: {
        const TracePool& def = trace.pools[op.pool];
        if (def.device >= config->device_count) {
          return absl::InvalidArgumentError(absl::StrCat(
              trace.name, ":", op.line, ": pool on device ", def.device, ", but the trace has ",
              config->device_count, " device(s) (header device_count)"));
        }
        if (modelled) break;  // the device's model serves it
        absl::StatusOr<PoolId> pool =
            make_pool(PropsFor(def, settings), absl::StrCat("pool ", def.id));
        if (!pool.ok()) return AtLine(trace, op, "CreatePool", pool.status());
        if (settings.use_recorded && !def.front_cache) {
          st = rt.SetPoolAttribute(*pool, PoolAttr::kFrontCache, 0);
          if (!st.ok()) return AtLine(trace, op, "SetPoolAttribute", st);
        }
        pools[op.pool] = *pool;
        if (r.growth == PoolGrowth::kDefault) {
          absl::StatusOr<uint64_t> growth = rt.GetPoolAttribute(*pool, PoolAttr::kGrowth);
          if (growth.ok()) r.growth = static_cast<PoolGrowth>(*growth);
        }
        break;
      }
      case TraceOp::Kind::kPoolDestroy: {
        if (modelled) break;
        absl::StatusOr<PoolId> pool = pool_of(op);
        if (!pool.ok()) return pool.status();
        st = rt.DestroyPool(*pool);
        if (!st.ok()) return AtLine(trace, op, "DestroyPool", st);
        pools[op.pool].reset();
        break;
      }
      case TraceOp::Kind::kAttr: {
        // Other settings than the recorded ones stay what the sweep chose.
        if (modelled ||
            (!settings.use_recorded && op.aux != static_cast<uint32_t>(PoolAttr::kFrontCache))) {
          break;
        }
        absl::StatusOr<PoolId> pool = pool_of(op);
        if (!pool.ok()) return pool.status();
        st = rt.SetPoolAttribute(*pool, static_cast<PoolAttr>(op.aux), op.value);
        if (!st.ok()) return AtLine(trace, op, "SetPoolAttribute", st);
        break;
      }
      case TraceOp::Kind::kTrim: {
        if (modelled) break;
        absl::StatusOr<PoolId> pool = pool_of(op);
        if (!pool.ok()) return pool.status();
        st = rt.TrimTo(*pool, op.value);
        if (!st.ok()) return AtLine(trace, op, "TrimTo", st);
        break;
      }
    }
    if (settings.stop_after_line != 0 && op.line >= settings.stop_after_line) {
      if (modelled) r.model_state = models[0]->Describe(op.stream);
      i = total;
    }
    // Only allocator calls and syncs (releases) change the pools' bytes.
    if (op.kind != TraceOp::Kind::kAdvance && op.kind != TraceOp::Kind::kKernel &&
        op.kind != TraceOp::Kind::kCopy) {
      uint64_t reserved = 0, used = 0;
      if (absl::Status bytes = pool_bytes(&reserved, &used); !bytes.ok()) return bytes;
      const SeriesPoint& last = r.series.back();
      if (reserved != last.reserved || used != last.used) {
        r.series.push_back(SeriesPoint{rt.HostNow(), reserved, used});
        // Each pool's own, where there are several to tell apart.
        for (size_t p = 0; all_pools.size() > 1 && p < all_pools.size(); ++p) {
          absl::StatusOr<uint64_t> res =
              rt.GetPoolAttribute(all_pools[p], PoolAttr::kReservedMemCurrent);
          absl::StatusOr<uint64_t> u = rt.GetPoolAttribute(all_pools[p], PoolAttr::kUsedMemCurrent);
          const uint64_t pr = res.ok() ? *res : 0, pu = u.ok() ? *u : 0;
          std::vector<SeriesPoint>& points = r.pool_series[p].points;
          if (points.back().reserved != pr || points.back().used != pu) {
            points.push_back(SeriesPoint{rt.HostNow(), pr, pu});
          }
        }
        r.peak_reserved = std::max(r.peak_reserved, reserved);
        if (settings.record_timeline) {
          recorder.PoolBytes(series_id, pool_name, rt.HostNow(), reserved, used);
        }
      }
    }
  }
  if (progress) progress(total, total);
  if (modelled && r.model_state.empty() && !models.empty()) r.model_state = models[0]->Describe(0);

  // Statistics: combined over the pools (one, unless the trace names several)
  // as src/pool/pool_stats.def says.
  PoolStats sum;
  for (PoolId p : all_pools) {
    absl::StatusOr<PoolStats> ps = rt.GetPoolStats(p);
    if (!ps.ok()) continue;
    AddPoolStats(sum, *ps);
  }
  r.stats = sum;
  r.counters.segments_made = sum.upstream_maps;
  r.counters.segments_freed = sum.upstream_unmaps;
  r.counters.cross_stream_reuses = sum.reuse_event_dependency + sum.reuse_opportunistic +
                                   sum.reuse_internal_dependency + sum.reuse_after_sync;
  r.counters.waits = sum.waits_inserted;
  r.counters.failed = sum.failed_alloc_count;
  if (modelled) {
    // A model's figures in the statistics' terms, so that every report
    // reads them in one place.
    PoolStats m;
    ModelCounters c;
    for (const std::unique_ptr<AllocatorModel>& model : models) {
      m.reserved_bytes += model->reserved();
      m.reserved_high += model->reserved_high();
      m.used_bytes += model->used();
      m.used_high += model->used_high();
      const ModelCounters& mc = model->counters();
      c.segments_made += mc.segments_made;
      c.segments_freed += mc.segments_freed;
      c.segments_high += mc.segments_high;
      c.cross_stream_reuses += mc.cross_stream_reuses;
      c.waits += mc.waits;
      c.syncs += mc.syncs;
      c.oom_retries += mc.oom_retries;
      c.failed += mc.failed;
      if (settings.keep_segment_history) {
        r.segment_history.insert(r.segment_history.end(), model->history().begin(),
                                 model->history().end());
      }
    }
    m.failed_alloc_count = c.failed;
    m.upstream_maps = c.segments_made;
    m.upstream_unmaps = c.segments_freed;
    m.waits_inserted = c.waits;
    r.stats = m;
    r.counters = c;
    r.peak_reserved = config->device_count == 1 ? m.reserved_high : r.peak_reserved;
    r.peak_used = m.used_high;
  }
  if (all_pools.size() == 1) {
    absl::StatusOr<PoolStats> ps = rt.GetPoolStats(all_pools[0]);
    if (ps.ok()) r.stats = *ps;
  }
  // One pool: its own watermarks. Several: the peak of their sum, from the
  // series (the sum of each pool's watermark would overstate it).
  if (all_pools.size() == 1) {
    r.peak_reserved = r.stats.reserved_high;
    r.peak_used = r.stats.used_high;
  } else {
    for (const SeriesPoint& p : r.series) r.peak_used = std::max(r.peak_used, p.used);
  }
  r.utilization = r.peak_reserved == 0
                      ? 0
                      : static_cast<double>(r.peak_used) / static_cast<double>(r.peak_reserved);
  const std::vector<CheckReport> reports = rt.CheckReports();
  r.checker_reports = reports.size();
  for (size_t i = 0; i < reports.size() && i < 5; ++i) {
    r.first_checker_reports.push_back(reports[i].message);
  }
  r.alloc_cost = SummarizeCost(alloc_ns);
  r.free_cost = SummarizeCost(free_ns);
  r.end_time_ns = rt.HostNow();
  if (settings.record_timeline) {
    TimelineProcess process = recorder.Finish(absl::StrCat(trace.name, ": ", settings.Label()),
                                              rt.Timeline(), r.end_time_ns);
    process.stream_labels[legacy->value] = "legacy stream";
    r.timeline = std::move(process);
  }
  for (int d = 0; d < config->device_count; ++d) {
    if (absl::Status st = rt.DeviceSynchronize(d); !st.ok()) return st;
  }
  r.makespan_ns = rt.HostNow();
  r.wall_ns = NowNs() - started_ns;
  return r;
}

}  // namespace streampool::replay
