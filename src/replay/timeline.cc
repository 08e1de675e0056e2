#include "src/replay/timeline.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/pool/names.h"
#include "src/replay/report.h"

namespace streampool::replay {

void TimelineRecorder::Allocated(StreamId s, const void* ptr, uint64_t size, ReuseRule rule,
                                 uint64_t host_ns) {
  points_.push_back(Point{true, s, reinterpret_cast<uintptr_t>(ptr), size, rule, host_ns});
}

void TimelineRecorder::Freed(StreamId s, const void* ptr, uint64_t host_ns) {
  points_.push_back(
      Point{false, s, reinterpret_cast<uintptr_t>(ptr), 0, ReuseRule::kFresh, host_ns});
}

void TimelineRecorder::PoolBytes(uint64_t pool, absl::string_view name, uint64_t host_ns,
                                 uint64_t reserved, uint64_t used) {
  auto [it, inserted] = pool_index_.emplace(pool, pools_.size());
  if (inserted) pools_.push_back(PoolCounter{std::string(name), {}});
  std::vector<SeriesPoint>& points = pools_[it->second].points;
  if (!points.empty() && points.back().reserved == reserved && points.back().used == used) return;
  points.push_back(SeriesPoint{host_ns, reserved, used});
}

void TimelineRecorder::Clear() {
  points_.clear();
  pools_.clear();
  pool_index_.clear();
}

TimelineProcess TimelineRecorder::Finish(std::string name, std::vector<TimelineEntry> ops,
                                         uint64_t end_ns) const {
  TimelineProcess p;
  p.name = std::move(name);
  p.end_ns = end_ns;
  for (const TimelineEntry& e : ops) p.end_ns = std::max(p.end_ns, e.end_ns);

  // When each told call's point completed in stream order.
  std::vector<uint64_t> when(points_.size());
  size_t matched = 0;
  for (const TimelineEntry& e : ops) {
    if (e.kind != OpKind::kAllocMarker && e.kind != OpKind::kFreeMarker) continue;
    if (matched == points_.size()) break;
    const Point& pt = points_[matched];
    // A destroyed stream's entries carry value 0; they match any stream.
    const bool same_stream = e.stream.value == 0 || e.stream.value == pt.stream.value;
    if (pt.alloc != (e.kind == OpKind::kAllocMarker) || !same_stream) break;
    when[matched++] = e.end_ns;
  }
  for (size_t i = matched; i < points_.size(); ++i) when[i] = points_[i].host_ns;

  std::unordered_map<uintptr_t, size_t> live;
  for (size_t i = 0; i < points_.size(); ++i) {
    const Point& pt = points_[i];
    if (pt.alloc) {
      live[pt.ptr] = p.allocations.size();
      p.allocations.push_back(AllocationSpan{pt.ptr, pt.size, pt.rule, pt.stream, StreamId{},
                                             when[i], p.end_ns, false});
      continue;
    }
    auto it = live.find(pt.ptr);
    // Frees of memory this recording did not see allocated have no span.
    if (it == live.end()) continue;
    AllocationSpan& span = p.allocations[it->second];
    span.free_stream = pt.stream;
    span.end_ns = std::max(when[i], span.begin_ns);
    span.freed = true;
    live.erase(it);
  }
  for (AllocationSpan& span : p.allocations) {
    if (!span.freed) span.end_ns = std::max(span.end_ns, span.begin_ns);
  }
  p.ops = std::move(ops);
  p.pools = pools_;
  return p;
}

namespace {

using Json = nlohmann::ordered_json;

// The viewer's unit is the microsecond; a double keeps every nanosecond of
// the first 2^53 ns (104 days of virtual time).
double Us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// Thread ids start at 1: some viewers treat tid 0 as the idle thread.
uint64_t Tid(uint32_t stream_index) { return uint64_t{stream_index} + 1; }

// Appends the events of one process to the "traceEvents" array in `out`.
// `next_id` numbers allocations across processes: viewers pair async slices
// by id within a whole file.
void AppendProcess(const TimelineProcess& p, uint64_t pid, uint64_t& next_id, std::string& out) {
  auto event = [&out](const Json& e) {
    absl::StrAppend(&out, out.back() == '[' ? "\n" : ",\n", DumpJson(e, /*indent=*/-1));
  };
  event({{"ph", "M"}, {"pid", pid}, {"name", "process_name"}, {"args", {{"name", p.name}}}});
  event(
      {{"ph", "M"}, {"pid", pid}, {"name", "process_sort_index"}, {"args", {{"sort_index", pid}}}});

  // Streams in the order of their dense index, which is creation order.
  struct StreamInfo {
    uint64_t value = 0;
    int device = 0;
  };
  std::map<uint32_t, StreamInfo> streams;
  std::unordered_map<uint64_t, uint32_t> index_of;
  for (const TimelineEntry& e : p.ops) {
    auto [it, inserted] = streams.emplace(e.stream_index, StreamInfo{e.stream.value, e.device});
    if (it->second.value == 0) it->second.value = e.stream.value;
    if (e.stream.value != 0) index_of.emplace(e.stream.value, e.stream_index);
  }
  for (const auto& [index, info] : streams) {
    auto label = p.stream_labels.find(info.value);
    const std::string name = absl::StrCat(
        label != p.stream_labels.end() ? label->second : absl::StrCat("stream ", index),
        " (device ", info.device, ")");
    event({{"ph", "M"},
           {"pid", pid},
           {"tid", Tid(index)},
           {"name", "thread_name"},
           {"args", {{"name", name}}}});
    event({{"ph", "M"},
           {"pid", pid},
           {"tid", Tid(index)},
           {"name", "thread_sort_index"},
           {"args", {{"sort_index", index}}}});
  }

  for (const TimelineEntry& e : p.ops) {
    event({{"ph", "X"},
           {"cat", "op"},
           {"name", internal::EnumName(e.kind)},
           {"pid", pid},
           {"tid", Tid(e.stream_index)},
           {"ts", Us(e.start_ns)},
           {"dur", Us(e.end_ns - std::min(e.end_ns, e.start_ns))},
           {"args",
            {{"position", e.position},
             {"enqueued_us", Us(e.enqueued_ns)},
             {"stream", e.stream.value}}}});
  }

  auto tid_of = [&index_of](StreamId s) -> uint64_t {
    auto it = index_of.find(s.value);
    return it == index_of.end() ? 0 : Tid(it->second);
  };
  for (const AllocationSpan& a : p.allocations) {
    // Async slices pair by (cat, id, name); overlapping ones get their own rows.
    Json begin = {{"ph", "b"},       {"cat", "allocation"}, {"name", "allocation"},
                  {"id", next_id++}, {"pid", pid},          {"tid", tid_of(a.alloc_stream)}};
    Json end = begin;
    end["ph"] = "e";
    end["ts"] = Us(a.end_ns);
    begin["ts"] = Us(a.begin_ns);
    begin["args"] = {{"size", a.size},
                     {"ptr", absl::StrCat("0x", absl::Hex(a.ptr))},
                     {"rule", internal::EnumName(a.rule)},
                     {"stream", a.alloc_stream.value},
                     {"free_stream", a.free_stream.value},
                     {"freed", a.freed}};
    event(begin);
    event(end);
  }

  for (const PoolCounter& pool : p.pools) {
    for (const SeriesPoint& s : pool.points) {
      event({{"ph", "C"},
             {"name", pool.name},
             {"pid", pid},
             {"ts", Us(s.time_ns)},
             {"args", {{"reserved", s.reserved}, {"used", s.used}}}});
    }
  }
}

}  // namespace

std::string FormatChromeTrace(const std::vector<TimelineProcess>& processes) {
  // Events are written one at a time, so that a long trace's timeline is
  // never held as a whole document; the frame around them is fixed.
  std::string out =
      "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"generator\": \"streampool\"}, "
      "\"traceEvents\": [";
  uint64_t next_id = 1;
  for (size_t i = 0; i < processes.size(); ++i) AppendProcess(processes[i], i + 1, next_id, out);
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace streampool::replay
