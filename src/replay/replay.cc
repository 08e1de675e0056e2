#include "src/replay/replay.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/pool/names.h"

namespace streampool::replay {

namespace {

constexpr ReuseSwitch kReuseSwitches[] = {
    {"event", &ReplaySettings::reuse_event},
    {"opportunistic", &ReplaySettings::reuse_opportunistic},
    {"internal", &ReplaySettings::reuse_internal},
};

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
  return out.empty() ? "none" : out;
}

std::string ReplaySettings::ThresholdLabel() const {
  return release_threshold == UINT64_MAX ? "max" : absl::StrCat(release_threshold);
}

std::string ReplaySettings::Label() const {
  std::string label = absl::StrCat(ReuseLabel(), ", threshold ", ThresholdLabel());
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

absl::StatusOr<ReplayResult> Replay(const Trace& trace, const ReplaySettings& settings,
                                    const ProgressFn& progress) {
  RuntimeConfig config;
  config.backing = settings.backing;
  config.device_capacity = settings.device_capacity;
  absl::StatusOr<std::unique_ptr<Runtime>> created = Runtime::Create(config);
  if (!created.ok()) return created.status();
  Runtime& rt = **created;
  // Collect reports rather than abort: EnableChecker turns off the fatal mode
  // that STREAMPOOL_CHECK_STREAM_ORDER=fatal (the test suite's) would set.
  rt.EnableChecker(settings.check_stream_order);

  PoolProps props;
  props.alloc_type = settings.pool_type;
  props.reuse_follow_event_dependencies = settings.reuse_event;
  props.reuse_allow_opportunistic = settings.reuse_opportunistic;
  props.reuse_allow_internal_dependencies = settings.reuse_internal;
  props.release_threshold = settings.release_threshold;
  props.growth = settings.growth;
  absl::StatusOr<PoolId> pool = rt.CreatePool(props);
  if (!pool.ok()) {
    return absl::Status(pool.status().code(),
                        absl::StrCat("creating the pool failed: ", pool.status().message()));
  }
  absl::StatusOr<uint64_t> growth = rt.GetPoolAttribute(*pool, PoolAttr::kGrowth);
  if (!growth.ok()) return growth.status();

  std::vector<std::optional<StreamId>> streams(trace.stream_ids.size());
  std::vector<std::optional<EventId>> events(trace.event_ids.size());
  absl::StatusOr<StreamId> legacy = rt.LegacyStream(0);
  if (!legacy.ok()) return legacy.status();
  streams[0] = *legacy;

  // slot -> pointer; a slot whose allocation failed keeps `failed`.
  std::vector<void*> ptrs(trace.alloc_count, nullptr);
  std::vector<bool> failed(trace.alloc_count, false);
  std::vector<uint64_t> alloc_ns, free_ns;
  alloc_ns.reserve(trace.alloc_count);
  free_ns.reserve(trace.free_count);

  ReplayResult r;
  r.settings = settings;
  r.growth = static_cast<PoolGrowth>(*growth);
  r.series.push_back(SeriesPoint{rt.HostNow(), 0, 0});

  TimelineRecorder recorder;
  const std::string pool_name = absl::StrCat("pool (", internal::EnumName(settings.pool_type), ")");
  if (settings.record_timeline) {
    rt.RecordTimeline(true);
    recorder.PoolBytes(pool->value, pool_name, rt.HostNow(), 0, 0);
  }

  // Created on first use, like the trace says; blocking streams, as
  // cudaStreamCreate makes them.
  auto stream = [&](const TraceOp& op) -> absl::StatusOr<StreamId> {
    if (!streams[op.stream]) {
      absl::StatusOr<StreamId> s = rt.CreateStream(0);
      if (!s.ok()) return AtLine(trace, op, "CreateStream", s.status());
      streams[op.stream] = *s;
    }
    return *streams[op.stream];
  };
  auto event = [&](const TraceOp& op) -> absl::StatusOr<EventId> {
    if (!events[op.event]) {
      absl::StatusOr<EventId> e = rt.CreateEvent();
      if (!e.ok()) return AtLine(trace, op, "CreateEvent", e.status());
      events[op.event] = *e;
    }
    return *events[op.event];
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
        const uint64_t t0 = NowNs();
        absl::StatusOr<AllocInfo> a = rt.MallocFromPoolAsync(op.value, *pool, *s);
        const uint64_t t1 = NowNs();
        alloc_ns.push_back(t1 - t0);
        if (a.ok()) {
          ptrs[op.slot] = a->ptr;
          if (settings.record_timeline && op.value != 0) {
            recorder.Allocated(*s, a->ptr, op.value, a->rule, rt.HostNow());
          }
        } else if (absl::IsResourceExhausted(a.status())) {
          failed[op.slot] = true;
          ++r.failed_allocs;
        } else {
          return AtLine(trace, op, "MallocFromPoolAsync", a.status());
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
        const uint64_t t0 = NowNs();
        st = rt.FreeAsync(ptrs[op.slot], *s);
        const uint64_t t1 = NowNs();
        free_ns.push_back(t1 - t0);
        if (!st.ok()) return AtLine(trace, op, "FreeAsync", st);
        if (settings.record_timeline && ptrs[op.slot] != nullptr) {
          recorder.Freed(*s, ptrs[op.slot], rt.HostNow());
        }
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
      case TraceOp::Kind::kEventSync: {
        ++r.synchronizes;
        absl::StatusOr<EventId> e = event(op);
        if (!e.ok()) return e.status();
        st = rt.EventSynchronize(*e);
        if (!st.ok()) return AtLine(trace, op, "EventSynchronize", st);
        break;
      }
      case TraceOp::Kind::kDeviceSync:
        ++r.synchronizes;
        st = rt.DeviceSynchronize(0);
        if (!st.ok()) return AtLine(trace, op, "DeviceSynchronize", st);
        break;
      case TraceOp::Kind::kAdvance:
        st = rt.HostAdvance(op.value);
        if (!st.ok()) return AtLine(trace, op, "HostAdvance", st);
        break;
    }
    // Only allocator calls and syncs (releases) change the pool's bytes.
    if (op.kind != TraceOp::Kind::kAdvance && op.kind != TraceOp::Kind::kKernel) {
      absl::StatusOr<PoolStats> ps = rt.GetPoolStats(*pool);
      if (!ps.ok()) return ps.status();
      const SeriesPoint& last = r.series.back();
      if (ps->reserved_bytes != last.reserved || ps->used_bytes != last.used) {
        r.series.push_back(SeriesPoint{rt.HostNow(), ps->reserved_bytes, ps->used_bytes});
        if (settings.record_timeline) {
          recorder.PoolBytes(pool->value, pool_name, rt.HostNow(), ps->reserved_bytes,
                             ps->used_bytes);
        }
      }
    }
  }
  if (progress) progress(total, total);

  absl::StatusOr<PoolStats> ps = rt.GetPoolStats(*pool);
  if (!ps.ok()) return ps.status();
  r.stats = *ps;
  r.peak_reserved = ps->reserved_high;
  r.peak_used = ps->used_high;
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
  if (absl::Status st = rt.DeviceSynchronize(0); !st.ok()) return st;
  r.makespan_ns = rt.HostNow();
  return r;
}

}  // namespace streampool::replay
