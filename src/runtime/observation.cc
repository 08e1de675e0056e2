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
  MutexLock order_lock(&c_.seq.mu());
  Introspection out;
  for (StreamIndex s = 0; s < c_.seq.ordering().stream_count(); ++s) {
    out.clocks.push_back(c_.seq.ordering().clock(s));
    out.positions.push_back(c_.seq.ordering().pos(s));
    if (c_.seq.sim() != nullptr) out.last_end.push_back(c_.seq.sim()->LastEnd(s));
  }
  out.done = c_.seq.ordering().done();
  return out;
}

void Observation::EnableChecker(bool on, bool fatal) {
  MutexLock order_lock(&c_.seq.mu());
  c_.obs.EnableChecker(on, fatal, &c_.seq.ordering().done(), &c_.host_ranges);
  c_.UpdateFastPath();
}

std::vector<streampool::CheckReport> Observation::CheckReports() { return c_.obs.Reports(); }

void Observation::ClearCheckReports() { c_.obs.ClearReports(); }

void Observation::SetOomHandler(std::function<bool(uint64_t pool, uint64_t size)> handler) {
  c_.oom_handler = std::move(handler);
}

void Observation::RecordTimeline(bool on) {
  MutexLock order_lock(&c_.seq.mu());
  if (c_.seq.sim() != nullptr) c_.seq.sim()->set_record_timeline(on);
  c_.UpdateFastPath();
}

absl::Status Observation::StartRecording(const std::string& path) {
  if (c_.obs.recorder() != nullptr) {
    return absl::InvalidArgumentError("this runtime is already recording");
  }
  absl::StatusOr<std::unique_ptr<Recorder>> r = Recorder::Open(path, c_);
  if (!r.ok()) return r.status();
  c_.obs.StartRecording(*std::move(r));
  return absl::OkStatus();
}

absl::Status Observation::StopRecording() {
  if (c_.obs.recorder() == nullptr)
    return absl::InvalidArgumentError("this runtime is not recording");
  // The allocator's paths without the runtime's lock write under a stream's
  // lock or a pool's, or holding the recording (TakeRecording waits for
  // those): once each lock has been passed, none is still writing.
  std::unique_ptr<Recorder> r = c_.obs.TakeRecording();
  for (StreamIndex s = 0; s < c_.seq.stream_slots(); ++s) {
    SpinLockHolder pass(&c_.seq.stream_lock(s));
  }
  c_.pools.ForEachMemPool([](MemPool& pool) { MutexLock pass(&pool.central_mu()); });
  return r->Close();
}

absl::StatusOr<Observation::BlockPlace> Observation::PlaceOf(const void* ptr) {
  const Block* b = c_.index.PoolBlockAt(reinterpret_cast<uintptr_t>(ptr));
  if (b == nullptr) return absl::InvalidArgumentError("not the start of a live pool allocation");
  return BlockPlace{b->chunk->id, b->addr() - b->chunk->base()};
}

std::vector<TimelineEntry> Observation::Timeline() {
  MutexLock order_lock(&c_.seq.mu());
  std::vector<TimelineEntry> out;
  if (c_.seq.sim() == nullptr) return out;
  out.reserve(c_.seq.sim()->timeline().size());
  for (const SimExecutor::TimelineEntry& e : c_.seq.sim()->timeline()) {
    TimelineEntry t;
    t.stream = StreamId{c_.stream_handles[e.stream]};
    t.stream_index = e.stream;
    t.device = c_.seq.ordering().device(e.stream);
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
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.LogWaits(on);
}

absl::StatusOr<Observation::DecisionFacts> Observation::TakeDecision(const void* ptr) {
  DecisionFacts out;
  if (ptr != nullptr) {
    absl::StatusOr<BlockPlace> place = PlaceOf(ptr);
    if (!place.ok()) return place.status();
    out.place = *place;
  }
  MutexLock order_lock(&c_.seq.mu());
  for (const auto& [s, f] : c_.seq.TakeWaits()) {
    out.waits.push_back(InternalWait{StreamId{c_.StreamHandleOf(s)}, f});
  }
  return out;
}

}  // namespace streampool::internal
