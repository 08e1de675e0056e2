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
#define SP_POOL_STAT(c_name, cxx_name, how, ...) combine(how, sum.cxx_name, s.cxx_name);
#define SP_POOL_STAT_CXX(cxx_name, type, how, ...) combine(how, sum.cxx_name, s.cxx_name);
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

// A replay: the runtime a trace runs on, what the trace's numbers stand for
// in it, and the result as it grows. One handler per op (operator()), each
// run with the op's line in line_; a handler that ends the run early sets
// stop_.
class Replayer {
 public:
  Replayer(const Trace& trace, const ReplaySettings& settings, const ProgressFn& progress,
           const DecisionFn& on_decision)
      : trace_(trace),
        settings_(settings),
        progress_(progress),
        on_decision_(on_decision),
        modelled_(IsModel(settings.allocator)),
        timed_(settings.measure_host_cost),
        decide_(settings.keep_decisions || static_cast<bool>(on_decision)) {}

  absl::StatusOr<ReplayResult> Run() {
    const uint64_t started_ns = NowNs();
    if (absl::Status st = Start(); !st.ok()) return st;
    if (absl::Status st = StartModels(); !st.ok()) return st;
    const size_t total = trace_.ops.size();
    for (size_t i = 0; i < total && !stop_; ++i) {
      const TraceOp& op = trace_.ops[i];
      if (progress_ && i % 512 == 0) progress_(i, total);
      line_ = op.line;
      op_index_ = i;
      if (absl::Status st = std::visit(*this, op.op); !st.ok()) return st;
      if (settings_.stop_after_line != 0 && op.line >= settings_.stop_after_line) {
        if (modelled_) r_.model_state = models_[0]->Describe(StreamOf(op.op));
        stop_ = true;
      }
      // Only allocator calls and syncs (releases) change the pools' bytes.
      if (!std::holds_alternative<ops::Advance>(op.op) &&
          !std::holds_alternative<ops::Kernel>(op.op) &&
          !std::holds_alternative<ops::Copy>(op.op)) {
        if (absl::Status st = TakeSeries(); !st.ok()) return st;
      }
    }
    if (progress_) progress_(total, total);
    if (modelled_ && r_.model_state.empty() && !models_.empty()) {
      r_.model_state = models_[0]->Describe(0);
    }
    Summarize();
    for (int d = 0; d < config_.device_count; ++d) {
      if (absl::Status st = rt().DeviceSynchronize(d); !st.ok()) return st;
    }
    r_.makespan_ns = rt().HostNow();
    r_.wall_ns = NowNs() - started_ns;
    return std::move(r_);
  }

  absl::Status operator()(const ops::Alloc& op) {
    absl::StatusOr<StreamId> s = Stream(op.stream);
    if (!s.ok()) return s.status();
    if (op.decision.graph) return GraphAlloc(op, *s);
    if (modelled_) return ModelAlloc(op);
    absl::StatusOr<PoolId> pool = PoolOf(op.pool);
    if (!pool.ok()) return pool.status();
    const uint64_t t0 = timed_ ? NowNs() : 0;
    absl::StatusOr<AllocInfo> a = rt().MallocFromPoolAsync(op.size, *pool, *s);
    if (timed_) alloc_ns_.push_back(NowNs() - t0);
    if (a.ok()) {
      ptrs_[op.id] = a->ptr;
      if (settings_.record_timeline && op.size != 0) {
        timeline_.Allocated(*s, a->ptr, op.size, a->rule, rt().HostNow());
      }
    } else if (absl::IsResourceExhausted(a.status())) {
      Failed(op.id);
    } else {
      return AtLine("MallocFromPoolAsync", a.status());
    }
    if (decide_) {
      ReplayDecision d = DecisionOf(op, a.ok());
      if (a.ok()) d.rule = a->rule;
      // Taken after every allocation, failed ones too, so that no wait
      // is left over to be counted against the next.
      absl::StatusOr<internal::Observation::DecisionFacts> facts =
          rt().impl().Run<&internal::Observation::TakeDecision>(a.ok() ? a->ptr : nullptr);
      if (!facts.ok()) return AtLine("PlaceOf", facts.status());
      if (facts->place) {
        d.chunk = facts->place->chunk;
        d.offset = facts->place->offset;
      }
      for (const internal::Observation::InternalWait& w : facts->waits) {
        d.waits.push_back(DecisionWait{TraceStreamOf(w.stream), w.position});
      }
      Decided(std::move(d));
    }
    if (op.decision.present && settings_.allocator == AllocatorKind::kStreampool) {
      Verify(op, a, *pool);
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const ops::Malloc& op) {
    absl::StatusOr<void*> p = rt().Malloc(op.size, static_cast<int>(op.device));
    if (p.ok()) {
      ptrs_[op.id] = *p;
    } else if (absl::IsResourceExhausted(p.status())) {
      failed_[op.id] = true;
      ++r_.failed_allocs;
    } else {
      return AtLine("Malloc", p.status());
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const ops::Free& op) {
    if (failed_[op.id]) {
      ++r_.skipped_frees;
      return absl::OkStatus();
    }
    absl::StatusOr<StreamId> s = Stream(op.stream);
    if (!s.ok()) return s.status();
    const uint64_t t0 = timed_ ? NowNs() : 0;
    absl::Status st;
    if (modelled_ && ptrs_[op.id] == nullptr) {
      st = models_[model_device_[op.id]]->Free(model_address_[op.id],
                                               static_cast<uint32_t>(op.stream), line_);
      if (timed_) free_ns_.push_back(NowNs() - t0);
      return st.ok() ? st : AtLine("Free", st);
    }
    st = rt().FreeAsync(ptrs_[op.id], *s);
    if (timed_) free_ns_.push_back(NowNs() - t0);
    if (graph_[op.id]) return GraphFreed(st, "FreeAsync");
    if (!st.ok()) return AtLine("FreeAsync", st);
    if (settings_.record_timeline && ptrs_[op.id] != nullptr) {
      timeline_.Freed(*s, ptrs_[op.id], rt().HostNow());
    }
    ptrs_[op.id] = nullptr;
    return absl::OkStatus();
  }

  absl::Status operator()(const ops::Release& op) {
    if (failed_[op.id]) {
      ++r_.skipped_frees;
      return absl::OkStatus();
    }
    absl::Status st = rt().Free(ptrs_[op.id]);
    if (graph_[op.id]) return GraphFreed(st, "Free");
    if (!st.ok()) return AtLine("Free", st);
    ptrs_[op.id] = nullptr;
    return absl::OkStatus();
  }

  absl::Status operator()(const ops::Use& op) {
    if (failed_[op.id]) return absl::OkStatus();
    absl::StatusOr<StreamId> s = Stream(op.stream);
    if (!s.ok()) return s.status();
    absl::Status st;
    if (modelled_ && ptrs_[op.id] == nullptr) {
      st = models_[model_device_[op.id]]->RecordUse(model_address_[op.id],
                                                    static_cast<uint32_t>(op.stream));
    } else if (ptrs_[op.id] != nullptr) {
      st = rt().RecordUse(ptrs_[op.id], *s);
    }
    return st.ok() ? st : AtLine("RecordUse", st);
  }

  absl::Status operator()(const ops::Kernel& op) {
    return Call(Stream(op.stream), "LaunchKernel",
                [&](StreamId s) { return rt().LaunchKernel(s, op.ns, {}); });
  }
  absl::Status operator()(const ops::Copy& op) {
    // A copy of no bytes enqueues nothing but costs its call; captured, it
    // is a node all the same.
    return Call(Stream(op.stream), "copy", [&](StreamId s) {
      const bool node = op.bytes != 0 ||
                        (uses_graphs_ && rt().CaptureStatusOf(s).value_or(CaptureStatus::kNone) !=
                                             CaptureStatus::kNone);
      return node ? rt().LaunchKernel(s, TransferNs(op.bytes, copy_bytes_per_us_), {})
                  : rt().HostAdvance(0);
    });
  }
  absl::Status operator()(const ops::Host& op) {
    return Call(Stream(op.stream), "LaunchHostFunc",
                [&](StreamId s) { return rt().LaunchHostFunc(s, [] {}); });
  }
  absl::Status operator()(const ops::Record& op) {
    return OnEvent(op.stream, op.event, "RecordEvent",
                   [&](StreamId s, EventId e) { return rt().RecordEvent(e, s); });
  }
  absl::Status operator()(const ops::Wait& op) {
    return OnEvent(op.stream, op.event, "StreamWaitEvent",
                   [&](StreamId s, EventId e) { return rt().StreamWaitEvent(s, e); });
  }
  absl::Status operator()(const ops::RecordExternal& op) {
    return OnEvent(op.stream, op.event, "RecordEvent", [&](StreamId s, EventId e) {
      return rt().RecordEvent(e, s, EventRecordFlag::kExternal);
    });
  }
  absl::Status operator()(const ops::WaitExternal& op) {
    return OnEvent(op.stream, op.event, "StreamWaitEvent", [&](StreamId s, EventId e) {
      return rt().StreamWaitEvent(s, e, EventWaitFlag::kExternal);
    });
  }
  absl::Status operator()(const ops::Sync& op) {
    ++r_.synchronizes;
    return Call(Stream(op.stream), "StreamSynchronize",
                [&](StreamId s) { return rt().StreamSynchronize(s); });
  }
  absl::Status operator()(const ops::Query& op) {
    return Call(Stream(op.stream), "StreamQuery",
                [&](StreamId s) { return Answer(rt().StreamQuery(s)); });
  }
  absl::Status operator()(const ops::EventSync& op) {
    ++r_.synchronizes;
    return Call(Event(op.event), "EventSynchronize",
                [&](EventId e) { return rt().EventSynchronize(e); });
  }
  absl::Status operator()(const ops::EventQuery& op) {
    return Call(Event(op.event), "EventQuery",
                [&](EventId e) { return Answer(rt().EventQuery(e)); });
  }
  absl::Status operator()(const ops::DeviceSync& op) {
    ++r_.synchronizes;
    absl::Status st = rt().DeviceSynchronize(static_cast<int>(op.device));
    return st.ok() ? st : AtLine("DeviceSynchronize", st);
  }
  absl::Status operator()(const ops::Advance& op) {
    absl::Status st = rt().HostAdvance(op.ns);
    return st.ok() ? st : AtLine("HostAdvance", st);
  }

  absl::Status operator()(const ops::StreamCreate& op) {
    const int device = static_cast<int>(op.device);
    absl::StatusOr<StreamId> s =
        op.flags == 2 ? rt().LegacyStream(device) : rt().CreateStream(device, op.flags == 1);
    if (!s.ok()) return AtLine("CreateStream", s.status());
    streams_[op.stream] = *s;
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::StreamDestroy& op) {
    absl::StatusOr<StreamId> s = Stream(op.stream);
    if (!s.ok()) return s.status();
    if (absl::StatusOr<StreamId> l = rt().LegacyStream(0); l.ok() && l->value == s->value) {
      return absl::OkStatus();
    }
    if (absl::Status st = rt().DestroyStream(*s); !st.ok()) return AtLine("DestroyStream", st);
    streams_[op.stream].reset();
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::EventCreate& op) {
    // Interprocess events need a shared segment a replay has no use for.
    absl::StatusOr<EventId> e =
        rt().CreateEvent(static_cast<unsigned>(op.flags) & ~kEventInterprocess);
    if (!e.ok()) return AtLine("CreateEvent", e.status());
    events_[op.event] = *e;
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::EventDestroy& op) {
    absl::StatusOr<EventId> e = Event(op.event);
    if (!e.ok()) return e.status();
    if (absl::Status st = rt().DestroyEvent(*e); !st.ok()) return AtLine("DestroyEvent", st);
    events_[op.event].reset();
    return absl::OkStatus();
  }

  absl::Status operator()(const ops::PoolCreate& op) {
    const TracePool& def = trace_.pools[op.pool];
    if (def.device >= config_.device_count) {
      return absl::InvalidArgumentError(absl::StrCat(
          trace_.name, ":", line_, ": pool on device ", def.device, ", but the trace has ",
          config_.device_count, " device(s) (header device_count)"));
    }
    if (modelled_) return absl::OkStatus();  // the device's model serves it
    absl::StatusOr<PoolId> pool =
        MakePool(PropsFor(def, settings_), absl::StrCat("pool ", def.pool));
    if (!pool.ok()) return AtLine("CreatePool", pool.status());
    if (settings_.use_recorded && !def.front_cache) {
      absl::Status st = rt().SetPoolAttribute(*pool, PoolAttr::kFrontCache, 0);
      if (!st.ok()) return AtLine("SetPoolAttribute", st);
    }
    pools_[op.pool] = *pool;
    if (r_.growth == PoolGrowth::kDefault) {
      absl::StatusOr<uint64_t> growth = rt().GetPoolAttribute(*pool, PoolAttr::kGrowth);
      if (growth.ok()) r_.growth = static_cast<PoolGrowth>(*growth);
    }
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::PoolDestroy& op) {
    return OnPool(op.pool, "DestroyPool", [&](PoolId p) {
      absl::Status st = rt().DestroyPool(p);
      if (st.ok()) pools_[op.pool].reset();
      return st;
    });
  }
  absl::Status operator()(const ops::Attr& op) {
    // Other settings than the recorded ones stay what the sweep chose.
    if (!settings_.use_recorded && op.attr != PoolAttr::kFrontCache) return absl::OkStatus();
    return OnPool(op.pool, "SetPoolAttribute",
                  [&](PoolId p) { return rt().SetPoolAttribute(p, op.attr, op.value); });
  }
  absl::Status operator()(const ops::Trim& op) {
    return OnPool(op.pool, "TrimTo", [&](PoolId p) { return rt().TrimTo(p, op.bytes); });
  }

  // Graphs: the trace's graph and executable graph ids map to the replay's;
  // a node, named by its index, to the handle the replay's graph has there.
  absl::Status operator()(const ops::CaptureBegin& op) {
    return Call(Stream(op.stream), "BeginCapture", [&](StreamId s) {
      return rt().BeginCapture(s, static_cast<CaptureMode>(op.mode));
    });
  }
  absl::Status operator()(const ops::CaptureToGraph& op) {
    absl::StatusOr<GraphId> g = Graph(op.graph);
    if (!g.ok()) return g.status();
    absl::StatusOr<std::vector<GraphNodeId>> deps = Nodes(op.graph, op.deps);
    if (!deps.ok()) return deps.status();
    return Call(Stream(op.stream), "BeginCaptureToGraph", [&](StreamId s) {
      return rt().BeginCaptureToGraph(s, *g, *deps, static_cast<CaptureMode>(op.mode));
    });
  }
  absl::Status operator()(const ops::CaptureEnd& op) {
    absl::StatusOr<StreamId> s = Stream(op.stream);
    if (!s.ok()) return s.status();
    absl::StatusOr<GraphId> g = rt().EndCapture(*s);
    if (op.graph == ops::kNoGraph) {
      // The recording's capture failed (or filled a graph of its own): a
      // graph this one handed out goes, as the recording had none.
      if (g.ok() && g->value != 0) (void)rt().DestroyGraph(*g);
      return absl::OkStatus();
    }
    if (!g.ok()) return AtLine("EndCapture", g.status());
    BindGraph(op.graph, *g);
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::GraphCreate& op) {
    absl::StatusOr<GraphId> g = rt().CreateGraph();
    if (!g.ok()) return AtLine("CreateGraph", g.status());
    BindGraph(op.graph, *g);
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::GraphDestroy& op) {
    return Call(Graph(op.graph), "DestroyGraph", [&](GraphId g) {
      absl::Status st = rt().DestroyGraph(g);
      graphs_.erase(op.graph);
      return st;
    });
  }
  absl::Status operator()(const ops::GraphClone& op) {
    absl::StatusOr<GraphId> from = Graph(op.from);
    if (!from.ok()) return from.status();
    absl::StatusOr<GraphId> g = rt().CloneGraph(*from);
    if (!g.ok()) return AtLine("CloneGraph", g.status());
    BindGraph(op.graph, *g);
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::GraphNode& op) {
    absl::StatusOr<GraphId> g = Graph(op.graph);
    if (!g.ok()) return g.status();
    absl::StatusOr<std::vector<GraphNodeId>> deps = Nodes(op.graph, op.deps);
    if (!deps.ok()) return deps.status();
    absl::StatusOr<GraphNodeId> node = AddNode(op, *g, *deps);
    if (!node.ok()) return AtLine("AddNode", node.status());
    std::vector<GraphNodeId>& known = graphs_[op.graph].nodes;
    if (known.size() == op.node) known.push_back(*node);
    absl::StatusOr<std::vector<GraphNodeId>> at = Nodes(op.graph, {op.node});
    if (!at.ok() || !((*at)[0] == *node)) {
      return absl::InternalError(absl::StrCat(trace_.name, ":", line_,
                                              ": the replay's node is not ", "node ", op.node,
                                              " of its graph"));
    }
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::GraphEdges& op) {
    absl::StatusOr<GraphId> g = Graph(op.graph);
    if (!g.ok()) return g.status();
    std::vector<GraphEdge> edges;
    for (const auto& [from, to] : op.edges) {
      absl::StatusOr<std::vector<GraphNodeId>> both = Nodes(op.graph, {from, to});
      if (!both.ok()) return both.status();
      edges.push_back(GraphEdge{(*both)[0], (*both)[1]});
    }
    absl::Status st = rt().AddDependencies(*g, edges);
    return st.ok() ? st : AtLine("AddDependencies", st);
  }
  absl::Status operator()(const ops::GraphInstantiate& op) {
    absl::StatusOr<GraphId> g = Graph(op.graph);
    if (!g.ok()) return g.status();
    absl::StatusOr<GraphExecId> e = rt().Instantiate(*g, op.flags);
    if (!e.ok()) return AtLine("Instantiate", e.status());
    execs_[op.exec] = *e;
    return absl::OkStatus();
  }
  absl::Status operator()(const ops::GraphUpload& op) {
    absl::StatusOr<GraphExecId> e = Exec(op.exec);
    if (!e.ok()) return e.status();
    return Call(Stream(op.stream), "UploadGraph",
                [&](StreamId s) { return rt().UploadGraph(*e, s); });
  }
  absl::Status operator()(const ops::GraphLaunch& op) {
    absl::StatusOr<GraphExecId> e = Exec(op.exec);
    if (!e.ok()) return e.status();
    return Call(Stream(op.stream), "LaunchGraph", [&](StreamId s) {
      absl::Status st = rt().LaunchGraph(*e, s);
      if (!absl::IsResourceExhausted(st)) return st;
      // Under other settings the device may lack room for the graph's
      // memory: counted, and its frees are skipped from now on.
      ++r_.failed_launches;
      return absl::OkStatus();
    });
  }
  absl::Status operator()(const ops::GraphExecDestroy& op) {
    return Call(Exec(op.exec), "DestroyGraphExec", [&](GraphExecId e) {
      absl::Status st = rt().DestroyGraphExec(e);
      execs_.erase(op.exec);
      return st;
    });
  }
  absl::Status operator()(const ops::GraphExecUpdate& op) {
    absl::StatusOr<GraphId> g = Graph(op.graph);
    if (!g.ok()) return g.status();
    return Call(Exec(op.exec), "UpdateGraphExec",
                [&](GraphExecId e) { return rt().UpdateGraphExec(e, *g); });
  }
  absl::Status operator()(const ops::GraphMemTrim& op) {
    absl::Status st = rt().TrimGraphMemory(static_cast<int>(op.device));
    return st.ok() ? st : AtLine("TrimGraphMemory", st);
  }
  absl::Status operator()(const ops::GraphMemReset& op) {
    absl::Status st = rt().ResetGraphMemoryHigh(
        static_cast<int>(op.device), op.used ? GraphMemHigh::kUsed : GraphMemHigh::kReserved);
    return st.ok() ? st : AtLine("ResetGraphMemoryHigh", st);
  }

 private:
  // A trace graph's replay graph and the handles of its nodes by index, as
  // far as they are known.
  struct GraphRef {
    GraphId id;
    std::vector<GraphNodeId> nodes;
  };

  // A call on a trace stream and event (record, wait), its failure placed
  // at the line.
  template <typename F>
  absl::Status OnEvent(uint64_t stream, uint64_t event, const char* what, F call) {
    absl::StatusOr<StreamId> s = Stream(stream);
    if (!s.ok()) return s.status();
    absl::StatusOr<EventId> e = Event(event);
    if (!e.ok()) return e.status();
    absl::Status st = call(*s, *e);
    return st.ok() ? st : AtLine(what, st);
  }
  void BindGraph(uint64_t trace_id, GraphId g) { graphs_[trace_id] = GraphRef{g, {}}; }
  absl::StatusOr<GraphId> Graph(uint64_t trace_id) {
    auto it = graphs_.find(trace_id);
    if (it == graphs_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(trace_.name, ":", line_, ": graph ", trace_id, " is not defined"));
    }
    return it->second.id;
  }
  absl::StatusOr<GraphExecId> Exec(uint64_t trace_id) {
    auto it = execs_.find(trace_id);
    if (it == execs_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(trace_.name, ":", line_, ": executable graph ",
                                                     trace_id, " is not defined"));
    }
    return it->second;
  }
  // Nodes by index: captured nodes got their handles in the replay's graph
  // without the trace seeing them, so an index past the known ones asks it.
  absl::StatusOr<std::vector<GraphNodeId>> Nodes(uint64_t graph, absl::Span<const uint64_t> at) {
    absl::StatusOr<GraphId> g = Graph(graph);
    if (!g.ok()) return g.status();
    std::vector<GraphNodeId>& known = graphs_[graph].nodes;
    std::vector<GraphNodeId> out;
    for (uint64_t i : at) {
      if (i >= known.size()) {
        absl::StatusOr<std::vector<GraphNodeId>> all = rt().GraphNodes(*g);
        if (!all.ok()) return AtLine("GraphNodes", all.status());
        known = *std::move(all);
      }
      if (i >= known.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(trace_.name, ":", line_, ": graph ", graph, " has no node ", i));
      }
      out.push_back(known[i]);
    }
    return out;
  }
  absl::StatusOr<GraphNodeId> AddNode(const ops::GraphNode& op, GraphId g,
                                      absl::Span<const GraphNodeId> deps) {
    switch (op.kind) {
      case GraphNodeType::kKernel:
        return rt().AddKernelNode(g, deps, op.value);
      case GraphNodeType::kMemcpy:
      case GraphNodeType::kMemset:
        // Timed as a `copy` line is: nothing is copied.
        return rt().AddKernelNode(g, deps, TransferNs(op.value, copy_bytes_per_us_));
      case GraphNodeType::kHost:
        return rt().AddHostNode(g, deps, [] {});
      case GraphNodeType::kEventRecord:
      case GraphNodeType::kWaitEvent: {
        absl::StatusOr<EventId> e = Event(op.ref);
        if (!e.ok()) return e.status();
        return op.kind == GraphNodeType::kEventRecord ? rt().AddEventRecordNode(g, deps, *e)
                                                      : rt().AddEventWaitNode(g, deps, *e);
      }
      case GraphNodeType::kEmpty:
        return rt().AddEmptyNode(g, deps);
      case GraphNodeType::kGraph: {
        absl::StatusOr<GraphId> child = Graph(op.ref);
        if (!child.ok()) return child.status();
        return rt().AddChildGraphNode(g, deps, *child);
      }
      case GraphNodeType::kMemAlloc: {
        absl::StatusOr<GraphAllocNode> a =
            rt().AddMemAllocNode(g, deps, static_cast<int>(op.device), op.value);
        if (!a.ok()) return a.status();
        ptrs_[op.ref] = a->dptr;
        graph_[op.ref] = true;
        return a->node;
      }
      case GraphNodeType::kMemFree:
        return rt().AddMemFreeNode(g, deps, ptrs_[op.ref]);
    }
    return absl::InvalidArgumentError("unknown node kind");
  }

  // A MallocAsync on a capturing stream: an allocation node, whose address
  // the slot names from now on. Its decision is that it is graph memory.
  absl::Status GraphAlloc(const ops::Alloc& op, StreamId s) {
    absl::StatusOr<AllocInfo> a = absl::InternalError("no pool");
    if (op.pool == ops::kNoPool || modelled_ || !pools_[op.pool]) {
      a = rt().MallocAsync(op.size, s);
    } else {
      a = rt().MallocFromPoolAsync(op.size, *pools_[op.pool], s);
    }
    if (!a.ok()) return AtLine("MallocAsync", a.status());
    ptrs_[op.id] = a->ptr;
    graph_[op.id] = true;
    ++r_.decisions_checked;
    if (rt().impl().Run<&internal::Observation::PlaceOf>(a->ptr).ok()) {
      ++r_.decisions_diverged;
      if (r_.first_divergence.empty()) {
        r_.first_divergence = absl::StrCat(trace_.name, ":", line_, ": alloc of ", op.size,
                                           " bytes: recorded graph memory, replayed ",
                                           ReuseRuleName(a->rule), " (a pool's)");
      }
    }
    return absl::OkStatus();
  }
  // A free of a graph allocation (its slot keeps the address): after a
  // launch that failed for lack of memory, one that finds it not live is
  // skipped.
  absl::Status GraphFreed(const absl::Status& st, absl::string_view call) {
    if (st.ok()) return st;
    if (r_.failed_launches > 0 && absl::IsInvalidArgument(st)) {
      ++r_.skipped_frees;
      return absl::OkStatus();
    }
    return AtLine(call, st);
  }

  Runtime& rt() { return *runtime_; }

  absl::Status AtLine(absl::string_view call, const absl::Status& st) const {
    return absl::Status(
        st.code(), absl::StrCat(trace_.name, ":", line_, ": ", call, " failed: ", st.message()));
  }
  // A query's answer, either way, is no error.
  static absl::Status Answer(absl::Status st) {
    return absl::IsUnavailable(st) ? absl::OkStatus() : st;
  }

  // The runtime, the trace's pools and the legacy stream: what the trace
  // starts from.
  absl::Status Start() {
    absl::StatusOr<RuntimeConfig> config = ConfigFor(trace_, settings_);
    if (!config.ok()) return config.status();
    config_ = *config;
    if (config_.executor == ExecutorKind::kCuda) CudaRuntimeDefaults(&config_);
    copy_bytes_per_us_ = CopyBandwidth(trace_);
    // Returned as it is: its C code says whether the machine lacks a driver
    // or a device (an executor comparison skips such a trace).
    absl::StatusOr<std::unique_ptr<Runtime>> created = Runtime::Create(config_);
    if (!created.ok()) return created.status();
    runtime_ = *std::move(created);
    // Collect reports rather than abort: EnableChecker turns off the fatal
    // mode that STREAMPOOL_CHECK_STREAM_ORDER=fatal (the test suite's) would
    // set.
    rt().EnableChecker(settings_.check_stream_order);
    r_.settings = settings_;
    r_.device_capacity = config_.device_capacity;
    pools_.resize(trace_.pools.size());
    // A trace that names no pool gets one pool of the settings, made now.
    const bool recorded_pools = !trace_.pools.empty();
    bool needs_own_pool = !recorded_pools && !modelled_;
    for (const TraceOp& op : trace_.ops) {
      const ops::Alloc* a = std::get_if<ops::Alloc>(&op.op);
      if (a != nullptr && a->pool == ops::kNoPool && !modelled_) needs_own_pool = true;
    }
    if (needs_own_pool) {
      if (absl::Status st = MakeOwnPool(); !st.ok()) return st;
    }
    streams_.resize(trace_.stream_ids.size());
    events_.resize(trace_.event_ids.size());
    absl::StatusOr<StreamId> legacy = rt().LegacyStream(0);
    if (!legacy.ok()) return legacy.status();
    streams_[0] = legacy_ = *legacy;
    ptrs_.assign(trace_.alloc_count, nullptr);
    failed_.assign(trace_.alloc_count, false);
    graph_.assign(trace_.alloc_count, false);
    uses_graphs_ = std::any_of(trace_.ops.begin(), trace_.ops.end(),
                               [](const TraceOp& op) { return ops::IsGraphOp(op.op); });
    if (timed_) {
      alloc_ns_.reserve(trace_.alloc_count);
      free_ns_.reserve(trace_.free_count);
    }
    if (auto it = trace_.header.find("executor");
        it != trace_.header.end() && it->second == "real_time") {
      r_.not_reproducible = "recorded in real time (threads or adapter executor)";
    }
    if (settings_.executor != ExecutorKind::kSimulator) {
      r_.not_reproducible = absl::StrCat("replayed in real time (",
                                         internal::EnumName(settings_.executor), " executor)");
    }
    for (const TracePool& p : trace_.pools) {
      if (p.custom_upstream) r_.not_reproducible = "a pool sat on the program's own upstream";
    }
    r_.series.push_back(SeriesPoint{rt().HostNow(), 0, 0});
    pool_name_ = recorded_pools
                     ? std::string("pools")
                     : absl::StrCat("pool (", internal::EnumName(settings_.pool_type), ")");
    series_id_ = own_pool_ ? own_pool_->value : 0;
    if (settings_.record_timeline) {
      rt().RecordTimeline(true);
      timeline_.PoolBytes(series_id_, pool_name_, rt().HostNow(), 0, 0);
    }
    if (decide_) rt().impl().Run<&internal::Observation::LogInternalWaits>(true);
    return absl::OkStatus();
  }

  absl::Status MakeOwnPool() {
    PoolProps props;
    props.alloc_type = settings_.pool_type;
    props.reuse_follow_event_dependencies = settings_.reuse_event;
    props.reuse_allow_opportunistic = settings_.reuse_opportunistic;
    props.reuse_allow_internal_dependencies = settings_.reuse_internal;
    props.release_threshold = settings_.release_threshold;
    props.growth = settings_.growth;
    props.wait_before_growth = settings_.wait_before_growth;
    props.soft_reserved_limit = settings_.soft_limit;
    props.max_size = settings_.max_size;
    if (settings_.allocator == AllocatorKind::kCuda) CudaDefaults(&props);
    absl::StatusOr<PoolId> pool = MakePool(props, "the replay's pool");
    if (!pool.ok()) return pool.status();
    own_pool_ = *pool;
    absl::StatusOr<uint64_t> growth = rt().GetPoolAttribute(*own_pool_, PoolAttr::kGrowth);
    if (!growth.ok()) return growth.status();
    r_.growth = static_cast<PoolGrowth>(*growth);
    return absl::OkStatus();
  }

  // The other allocators: one model per device, serving every pool of it.
  absl::Status StartModels() {
    models_.resize(config_.device_count);
    model_streams_ = std::make_unique<RuntimeStreams>(
        rt(), config_.device_count, [this](uint32_t index) { return StreamAt(index); });
    if (!modelled_) return absl::OkStatus();
    model_address_.assign(trace_.alloc_count, 0);
    model_device_.assign(trace_.alloc_count, 0);
    ModelConfig mc;
    mc.device_capacity = config_.device_capacity;
    mc.keep_history = settings_.keep_segment_history;
    mc.torch = settings_.torch;
    mc.rmm = settings_.rmm;
    for (int d = 0; d < config_.device_count; ++d) {
      absl::StatusOr<std::unique_ptr<AllocatorModel>> m =
          MakeAllocatorModel(settings_.allocator, mc, model_streams_.get());
      if (!m.ok()) return m.status();
      models_[d] = *std::move(m);
    }
    if (settings_.allocator == AllocatorKind::kPytorch && settings_.seed_from_trace &&
        !trace_.initial_segments.empty()) {
      if (absl::Status st = models_[0]->Seed(trace_.initial_segments, trace_.initial_blocks);
          !st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(trace_.name, ": the trace's torch_segment lines: ", st.message()));
      }
      seeded_.assign(trace_.alloc_count, false);
      for (const InitialBlock& b : trace_.initial_blocks) {
        seeded_[b.slot] = true;
        model_address_[b.slot] = b.address;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<PoolId> MakePool(const PoolProps& props, std::string name) {
    absl::StatusOr<PoolId> pool = rt().CreatePool(props);
    if (!pool.ok()) {
      return absl::Status(pool.status().code(),
                          absl::StrCat("creating the pool failed: ", pool.status().message()));
    }
    all_pools_.push_back(*pool);
    r_.pool_series.push_back(
        {absl::StrCat(std::move(name), " (", internal::EnumName(props.alloc_type), ")"),
         {SeriesPoint{rt().HostNow(), 0, 0}}});
    return *pool;
  }

  // A trace stream, created on first use like the trace says: a blocking
  // stream, as cudaStreamCreate makes it.
  absl::StatusOr<StreamId> StreamAt(uint32_t index) {
    if (!streams_[index]) {
      absl::StatusOr<StreamId> s = rt().CreateStream(0);
      if (!s.ok()) return s.status();
      streams_[index] = *s;
    }
    return *streams_[index];
  }
  absl::StatusOr<StreamId> Stream(uint64_t index) {
    absl::StatusOr<StreamId> s = StreamAt(static_cast<uint32_t>(index));
    if (!s.ok()) return AtLine("CreateStream", s.status());
    return s;
  }
  absl::StatusOr<EventId> Event(uint64_t index) {
    if (!events_[index]) {
      absl::StatusOr<EventId> e = rt().CreateEvent();
      if (!e.ok()) return AtLine("CreateEvent", e.status());
      events_[index] = *e;
    }
    return *events_[index];
  }
  absl::StatusOr<PoolId> PoolOf(uint64_t index) {
    if (index == ops::kNoPool) return *own_pool_;
    if (!pools_[index]) {
      return absl::FailedPreconditionError(
          absl::StrCat(trace_.name, ":", line_, ": the pool was destroyed"));
    }
    return *pools_[index];
  }
  // A call on a stream, an event or a pool of the trace, named in its error.
  template <typename H, typename F>
  absl::Status Call(absl::StatusOr<H> handle, absl::string_view call, F f) {
    if (!handle.ok()) return handle.status();
    absl::Status st = f(*handle);
    return st.ok() ? st : AtLine(call, st);
  }
  // A model serves no pool of the trace: pool ops mean nothing to it.
  template <typename F>
  absl::Status OnPool(uint64_t index, absl::string_view call, F f) {
    return modelled_ ? absl::OkStatus() : Call(PoolOf(index), call, f);
  }
  // The stream an op names, for a model's description (0 if none).
  static uint32_t StreamOf(const ops::Op& op) {
    return std::visit(
        [](const auto& o) -> uint32_t {
          if constexpr (requires { o.stream; }) {
            return static_cast<uint32_t>(o.stream);
          } else {
            return 0;
          }
        },
        op);
  }

  void Failed(uint64_t slot) {
    failed_[slot] = true;
    ++r_.failed_allocs;
    if (settings_.stop_at_first_failure) {
      r_.stopped_at_line = line_;
      stop_ = true;  // after this op's bookkeeping
    }
  }

  absl::Status ModelAlloc(const ops::Alloc& op) {
    if (!seeded_.empty() && seeded_[op.id]) return absl::OkStatus();  // placed by Seed
    const uint8_t device =
        op.pool == ops::kNoPool ? 0 : static_cast<uint8_t>(trace_.pools[op.pool].device);
    const uint64_t t0 = timed_ ? NowNs() : 0;
    absl::StatusOr<uint64_t> a =
        models_[device]->Allocate(op.size, static_cast<uint32_t>(op.stream), line_);
    if (timed_) alloc_ns_.push_back(NowNs() - t0);
    if (a.ok()) {
      model_address_[op.id] = *a;
      model_device_[op.id] = device;
    } else if (absl::IsResourceExhausted(a.status())) {
      Failed(op.id);
    } else {
      return AtLine("Allocate", a.status());
    }
    if (decide_) {
      ReplayDecision d = DecisionOf(op, a.ok());
      d.model = true;
      d.pool = 0;  // a model serves every pool of its device
      d.address = a.ok() ? *a : 0;
      Decided(std::move(d));
    }
    return absl::OkStatus();
  }

  ReplayDecision DecisionOf(const ops::Alloc& op, bool ok) const {
    ReplayDecision d;
    d.op = static_cast<uint32_t>(op_index_ + 1);
    d.line = line_;
    d.stream = static_cast<uint32_t>(op.stream);
    d.size = op.size;
    d.failed = !ok;
    d.pool = op.pool == ops::kNoPool ? TraceOp::kNoPool : static_cast<uint32_t>(op.pool);
    return d;
  }
  void Decided(ReplayDecision d) {
    if (on_decision_ && !on_decision_(d, blocks_around_)) stop_ = true;
    if (settings_.keep_decisions) r_.decisions.push_back(std::move(d));
  }
  // The blocks around a decision's place, for on_decision.
  Neighbourhood BlocksAroundPlace(uint32_t pool, uint64_t chunk, uint64_t offset) {
    std::optional<PoolId> id = pool == TraceOp::kNoPool ? own_pool_
                               : pool < pools_.size()   ? pools_[pool]
                                                        : std::nullopt;
    if (!id) {
      Neighbourhood none;
      none.note = "the pool is not there (destroyed, or never made)";
      return none;
    }
    return BlocksAround(rt(), *id, chunk, offset, [this](StreamId s) { return TraceStreamOf(s); });
  }
  // A runtime stream as the trace names it (the waits' streams are the
  // runtime's); streams are few, and only decisions that waited ask.
  uint32_t TraceStreamOf(StreamId s) const {
    for (size_t k = 0; k < streams_.size(); ++k) {
      if (streams_[k] && streams_[k]->value == s.value) return static_cast<uint32_t>(k);
    }
    return NeighbourBlock::kNoStream;
  }

  // The recording's decision against the replay's: the first that differs
  // is described.
  void Verify(const ops::Alloc& op, const absl::StatusOr<AllocInfo>& a, PoolId pool) {
    const RecordedDecision& want = op.decision;
    ++r_.decisions_checked;
    std::string got;
    if (!a.ok()) {
      if (!want.failed) got = "failed (out of memory)";
    } else if (want.failed) {
      got = absl::StrCat(ReuseRuleName(a->rule), " (it succeeded)");
    } else {
      absl::StatusOr<internal::Observation::BlockPlace> place =
          rt().impl().Run<&internal::Observation::PlaceOf>(a->ptr);
      absl::StatusOr<PointerAttributes> attrs = rt().GetPointerAttributes(a->ptr);
      if (!place.ok() || !attrs.ok() || !(attrs->pool == pool) || a->rule != want.rule ||
          place->chunk != want.chunk || place->offset != want.offset) {
        got = place.ok() ? absl::StrCat(ReuseRuleName(a->rule), " at chunk ", place->chunk,
                                        " offset ", place->offset)
                         : std::string(place.status().message());
      }
    }
    if (got.empty()) return;
    ++r_.decisions_diverged;
    if (r_.first_divergence.empty()) {
      r_.first_divergence =
          absl::StrCat(trace_.name, ":", line_, ": alloc of ", op.size, " bytes: recorded ",
                       DescribeDecision(want), ", replayed ", got);
    }
  }

  // The pools' bytes after an op, summed and each pool's own (where there
  // are several to tell apart), where they changed.
  absl::Status TakeSeries() {
    uint64_t reserved = 0, used = 0;
    for (const std::unique_ptr<AllocatorModel>& m : models_) {
      if (m == nullptr) continue;
      reserved += m->reserved();
      used += m->used();
    }
    for (PoolId p : all_pools_) {
      absl::StatusOr<uint64_t> res = rt().GetPoolAttribute(p, PoolAttr::kReservedMemCurrent);
      if (!res.ok()) continue;  // destroyed since
      absl::StatusOr<uint64_t> u = rt().GetPoolAttribute(p, PoolAttr::kUsedMemCurrent);
      if (!u.ok()) continue;
      reserved += *res;
      used += *u;
    }
    const SeriesPoint& last = r_.series.back();
    if (reserved == last.reserved && used == last.used) return absl::OkStatus();
    r_.series.push_back(SeriesPoint{rt().HostNow(), reserved, used});
    for (size_t p = 0; all_pools_.size() > 1 && p < all_pools_.size(); ++p) {
      absl::StatusOr<uint64_t> res =
          rt().GetPoolAttribute(all_pools_[p], PoolAttr::kReservedMemCurrent);
      absl::StatusOr<uint64_t> u = rt().GetPoolAttribute(all_pools_[p], PoolAttr::kUsedMemCurrent);
      const uint64_t pr = res.ok() ? *res : 0, pu = u.ok() ? *u : 0;
      std::vector<SeriesPoint>& points = r_.pool_series[p].points;
      if (points.back().reserved != pr || points.back().used != pu) {
        points.push_back(SeriesPoint{rt().HostNow(), pr, pu});
      }
    }
    r_.peak_reserved = std::max(r_.peak_reserved, reserved);
    if (settings_.record_timeline) {
      timeline_.PoolBytes(series_id_, pool_name_, rt().HostNow(), reserved, used);
    }
    return absl::OkStatus();
  }

  // Statistics: the pools', or the models' figures in the statistics' terms.
  void Summarize() {
    // Combined over the pools (one, unless the trace names several) as
    // src/pool/pool_stats.def says.
    PoolStats sum;
    for (PoolId p : all_pools_) {
      absl::StatusOr<PoolStats> ps = rt().GetPoolStats(p);
      if (ps.ok()) AddPoolStats(sum, *ps);
    }
    r_.stats = sum;
    r_.counters.segments_made = sum.upstream_maps;
    r_.counters.segments_freed = sum.upstream_unmaps;
    r_.counters.cross_stream_reuses = sum.reuse_event_dependency + sum.reuse_opportunistic +
                                      sum.reuse_internal_dependency + sum.reuse_after_sync;
    r_.counters.waits = sum.waits_inserted;
    r_.counters.failed = sum.failed_alloc_count;
    if (modelled_) {
      // A model's figures in the statistics' terms, so that every report
      // reads them in one place.
      PoolStats m;
      ModelCounters c;
      for (const std::unique_ptr<AllocatorModel>& model : models_) {
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
        if (settings_.keep_segment_history) {
          r_.segment_history.insert(r_.segment_history.end(), model->history().begin(),
                                    model->history().end());
        }
      }
      m.failed_alloc_count = c.failed;
      m.upstream_maps = c.segments_made;
      m.upstream_unmaps = c.segments_freed;
      m.waits_inserted = c.waits;
      r_.stats = m;
      r_.counters = c;
      r_.peak_reserved = config_.device_count == 1 ? m.reserved_high : r_.peak_reserved;
      r_.peak_used = m.used_high;
    }
    if (all_pools_.size() == 1) {
      absl::StatusOr<PoolStats> ps = rt().GetPoolStats(all_pools_[0]);
      if (ps.ok()) r_.stats = *ps;
    }
    // One pool: its own watermarks. Several: the peak of their sum, from the
    // series (the sum of each pool's watermark would overstate it).
    if (all_pools_.size() == 1) {
      r_.peak_reserved = r_.stats.reserved_high;
      r_.peak_used = r_.stats.used_high;
    } else {
      for (const SeriesPoint& p : r_.series) r_.peak_used = std::max(r_.peak_used, p.used);
    }
    r_.utilization = r_.peak_reserved == 0 ? 0
                                           : static_cast<double>(r_.peak_used) /
                                                 static_cast<double>(r_.peak_reserved);
    for (int d = 0; uses_graphs_ && d < config_.device_count; ++d) {
      absl::StatusOr<GraphMemStats> g = rt().GraphMemoryStats(d);
      if (!g.ok()) continue;
      r_.graph_memory.push_back(
          {d, g->used_high, g->reserved_high, g->used_current, g->reserved_current});
    }
    const std::vector<CheckReport> reports = rt().CheckReports();
    r_.checker_reports = reports.size();
    for (size_t i = 0; i < reports.size() && i < 5; ++i) {
      r_.first_checker_reports.push_back(reports[i].message);
    }
    r_.alloc_cost = SummarizeCost(alloc_ns_);
    r_.free_cost = SummarizeCost(free_ns_);
    r_.end_time_ns = rt().HostNow();
    if (settings_.record_timeline) {
      TimelineProcess process = timeline_.Finish(absl::StrCat(trace_.name, ": ", settings_.Label()),
                                                 rt().Timeline(), r_.end_time_ns);
      process.stream_labels[legacy_.value] = "legacy stream";
      r_.timeline = std::move(process);
    }
  }

  const Trace& trace_;
  const ReplaySettings& settings_;
  const ProgressFn& progress_;
  const DecisionFn& on_decision_;
  const bool modelled_;
  const bool timed_;
  // Decisions, for keep_decisions and on_decision.
  const bool decide_;

  RuntimeConfig config_;
  uint64_t copy_bytes_per_us_ = 0;
  std::unique_ptr<Runtime> runtime_;
  ReplayResult r_;
  uint32_t line_ = 0;    // the op's
  size_t op_index_ = 0;  // the op's, in trace_.ops
  bool stop_ = false;    // the run ends after this op

  // The trace's pools, made where their lines stand, by index; the
  // replay's own; every pool made, for the statistics.
  std::vector<std::optional<PoolId>> pools_;
  std::optional<PoolId> own_pool_;
  std::vector<PoolId> all_pools_;
  std::vector<std::optional<StreamId>> streams_;
  std::vector<std::optional<EventId>> events_;
  StreamId legacy_{};
  // By slot: the pointer; whether the allocation failed.
  std::vector<void*> ptrs_;
  std::vector<bool> failed_;
  std::vector<bool> graph_;  // the slot names a graph allocation's address
  bool uses_graphs_ = false;
  absl::flat_hash_map<uint64_t, GraphRef> graphs_;
  absl::flat_hash_map<uint64_t, GraphExecId> execs_;
  std::vector<uint64_t> alloc_ns_, free_ns_;

  std::unique_ptr<RuntimeStreams> model_streams_;
  std::vector<std::unique_ptr<AllocatorModel>> models_;  // by device
  std::vector<uint64_t> model_address_;                  // by slot
  std::vector<uint8_t> model_device_;                    // by slot
  std::vector<bool> seeded_;                             // by slot: placed by Seed

  TimelineRecorder timeline_;
  std::string pool_name_;
  uint64_t series_id_ = 0;
  const BlocksAroundFn blocks_around_ = [this](uint32_t pool, uint64_t chunk, uint64_t offset) {
    return BlocksAroundPlace(pool, chunk, offset);
  };
};

}  // namespace

absl::StatusOr<ReplayResult> Replay(const Trace& trace, const ReplaySettings& settings,
                                    const ProgressFn& progress, const DecisionFn& on_decision) {
  return Replayer(trace, settings, progress, on_decision).Run();
}

}  // namespace streampool::replay
