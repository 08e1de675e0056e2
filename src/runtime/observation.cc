#include "src/runtime/observation.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/check.h"

namespace streampool::internal {

Observation::Introspection Observation::Introspect() {
  MutexLock order_lock(&c_.order_mu);
  Introspection out;
  for (StreamIndex s = 0; s < c_.ordering.stream_count(); ++s) {
    out.clocks.push_back(c_.ordering.clock(s));
    out.positions.push_back(c_.ordering.pos(s));
    if (c_.sim != nullptr) out.last_end.push_back(c_.sim->LastEnd(s));
  }
  out.done = c_.ordering.done();
  return out;
}

void Observation::EnableChecker(bool on, bool fatal) {
  MutexLock order_lock(&c_.order_mu);
  if (on && !c_.checker) {
    c_.checker = std::make_unique<StreamOrderChecker>();
    c_.checker->set_done(&c_.ordering.done());
    c_.checker->set_registered(&c_.host_ranges);
  }
  if (!on) c_.checker.reset();
  c_.UpdateFastPath();
  c_.checker_fatal = on && fatal;
  c_.checker_reported = c_.checker ? c_.checker->reports().size() : 0;
  if (!c_.checker) c_.report_streams.clear();
}

std::vector<streampool::CheckReport> Observation::CheckReports() {
  std::vector<streampool::CheckReport> out;
  if (!c_.checker) return out;
  const auto& reports = c_.checker->reports();
  for (size_t i = 0; i < reports.size(); ++i) {
    const internal::CheckReport& r = reports[i];
    const bool named = i < c_.report_streams.size();
    streampool::CheckReport o;
    o.kind = static_cast<streampool::CheckKind>(static_cast<int>(r.kind) + 1);
    o.stream = StreamId{named                                 ? c_.report_streams[i].first
                        : r.stream < c_.stream_handles.size() ? c_.stream_handles[r.stream]
                                                              : 0};
    o.op_position = r.position;
    o.ptr = reinterpret_cast<const void*>(r.ptr);
    o.size = r.size;
    o.other_stream =
        StreamId{named                                       ? c_.report_streams[i].second
                 : r.other_stream < c_.stream_handles.size() ? c_.stream_handles[r.other_stream]
                                                             : 0};
    o.other_position = r.other_position;
    o.message = r.message;
    out.push_back(std::move(o));
  }
  return out;
}

void Observation::ClearCheckReports() {
  if (c_.checker) c_.checker->ClearReports();
  c_.checker_reported = 0;
  c_.report_streams.clear();
}

void Observation::SetOomHandler(std::function<bool(uint64_t pool, uint64_t size)> handler) {
  c_.oom_handler = std::move(handler);
}

void Observation::RecordTimeline(bool on) {
  MutexLock order_lock(&c_.order_mu);
  if (c_.sim != nullptr) c_.sim->set_record_timeline(on);
  c_.UpdateFastPath();
}

absl::Status Observation::StartRecording(const std::string& path) {
  if (c_.recorder != nullptr) {
    return absl::InvalidArgumentError("this runtime is already recording");
  }
  absl::StatusOr<std::unique_ptr<Recorder>> r = Recorder::Open(path, c_);
  if (!r.ok()) return r.status();
  c_.recorder = *std::move(r);
  c_.recording.store(c_.recorder.get(), std::memory_order_release);
  return absl::OkStatus();
}

absl::Status Observation::StopRecording() {
  if (c_.recorder == nullptr) return absl::InvalidArgumentError("this runtime is not recording");
  // The allocator's paths without the runtime's lock write under a stream's
  // lock or a pool's: once each has been passed, none is still writing.
  c_.recording.store(nullptr, std::memory_order_release);
  for (StreamIndex s = 0; s < c_.stream_slots(); ++s) {
    SpinLockHolder pass(&c_.stream_lock(s));
  }
  c_.pools.ForEachMemPool([](MemPool& pool) { MutexLock pass(&pool.central_mu()); });
  absl::Status closed = c_.recorder->Close();
  c_.recorder.reset();
  return closed;
}

absl::StatusOr<Observation::BlockPlace> Observation::PlaceOf(const void* ptr) {
  const Block* b = c_.index.PoolBlockAt(reinterpret_cast<uintptr_t>(ptr));
  if (b == nullptr) return absl::InvalidArgumentError("not the start of a live pool allocation");
  return BlockPlace{b->chunk->id, b->addr() - b->chunk->base()};
}

std::vector<TimelineEntry> Observation::Timeline() {
  MutexLock order_lock(&c_.order_mu);
  std::vector<TimelineEntry> out;
  if (c_.sim == nullptr) return out;
  out.reserve(c_.sim->timeline().size());
  for (const SimExecutor::TimelineEntry& e : c_.sim->timeline()) {
    TimelineEntry t;
    t.stream = StreamId{c_.stream_handles[e.stream]};
    t.stream_index = e.stream;
    t.device = c_.ordering.device(e.stream);
    t.position = e.position;
    t.kind = e.kind;
    t.enqueued_ns = e.enqueued;
    t.start_ns = e.start;
    t.end_ns = e.end;
    out.push_back(t);
  }
  return out;
}

void Observation::LogInternalWaits(bool on) {
  MutexLock order_lock(&c_.order_mu);
  c_.log_waits = on;
  c_.wait_log.clear();
}

absl::StatusOr<Observation::DecisionFacts> Observation::TakeDecision(const void* ptr) {
  DecisionFacts out;
  if (ptr != nullptr) {
    absl::StatusOr<BlockPlace> place = PlaceOf(ptr);
    if (!place.ok()) return place.status();
    out.place = *place;
  }
  MutexLock order_lock(&c_.order_mu);
  for (const auto& [s, f] : c_.wait_log) {
    out.waits.push_back(InternalWait{StreamId{c_.StreamHandleOf(s)}, f});
  }
  c_.wait_log.clear();
  return out;
}

}  // namespace streampool::internal
