#include "src/runtime/events.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/check.h"
#include "src/util/sat_time.h"

namespace streampool::internal {

using StreamRec = RuntimeCore::StreamRec;

absl::StatusOr<Events::EventRec*> Events::FindEvent(uint64_t h) {
  if (KindOf(h) != HandleKind::kEvent || RuntimeIdOf(h) != c_.id) return InvalidHandle("event", h);
  auto it = events_.find(h);
  if (it == events_.end()) return InvalidHandle("event", h);
  return &it->second;
}

absl::Status Events::Wait(uint64_t s, uint64_t e, bool external) {
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  if (absl::Status st = c_.CheckLegacyOp(**rec); !st.ok()) return st;
  if (external && (*rec)->capturing.load(std::memory_order_relaxed)) {
    return c_.captures.Add((*rec)->index, EventWaitNode{e}).status();
  }
  if (absl::Status st = CaptureWait(**rec, **ev); !absl::IsCancelled(st)) return st;
  if (const uint64_t target = RemoteTarget(**ev); target != 0) {
    // Another process's record: nothing of ours to order after, only a point
    // in time to wait for.
    std::shared_ptr<IpcEventSegment> seg = (*ev)->ipc;
    if (seg->completed() >= target) return absl::OkStatus();
    MutexLock order_lock(&c_.seq.mu());
    if (c_.seq.sim() != nullptr || c_.seq.adapter() != nullptr) {
      return absl::UnimplementedError(
          "a stream of this executor cannot wait for another process's record that has not "
          "completed (use the threads executor, or synchronize on the event)");
    }
    c_.seq.ChargeCallLocked();
    OpDesc op;
    op.kind = OpKind::kWait;
    op.effect = [seg, target] { seg->WaitComplete(target); };
    c_.seq.EnqueueOp((*rec)->index, std::move(op));
    return absl::OkStatus();
  }
  if (!(*ev)->recorded) return absl::OkStatus();  // CUDA: waiting on nothing
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  OpDesc op;
  op.kind = OpKind::kWait;
  op.wait_stream = (*ev)->stream;
  op.wait_position = (*ev)->position;
  c_.seq.EnqueueOp((*rec)->index, std::move(op));
  c_.seq.ordering().JoinInto((*rec)->index, (*ev)->snapshot);
  return absl::OkStatus();
}

absl::Status Events::CaptureWait(StreamRec& rec, const EventRec& ev) {
  const StreamIndex s = rec.index;
  Captures::Session* mine = c_.captures.Of(s);
  if (ev.capture != 0) {
    Captures::Session* session = c_.captures.Find(ev.capture);
    if (session == nullptr) {
      return CaptureError(spErrorStreamCaptureIsolation,
                          "the event was recorded in a capture that has ended");
    }
    absl::Status joined = c_.captures.Join(s, session, ev.capture_nodes);
    if (joined.ok() && mine == nullptr) {
      rec.capturing.store(true, std::memory_order_relaxed);
      c_.fast.Invalidate();
    }
    return joined;
  }
  if (mine == nullptr) return absl::CancelledError();  // no capture involved: a plain wait
  if (!ev.recorded) return absl::OkStatus();
  // A capture cannot wait for work outside it.
  Captures::Invalidate(mine);
  return CaptureError(spErrorStreamCaptureIsolation,
                      "a capturing stream cannot wait on an event recorded outside the capture");
}

absl::StatusOr<uint64_t> Events::CreateEvent(unsigned flags) {
  if (absl::Status st = c_.HandleRoom(); !st.ok()) return st;
  if ((flags & ~(kEventDisableTiming | kEventInterprocess)) != 0) {
    return absl::InvalidArgumentError("unknown event flags");
  }
  if ((flags & kEventInterprocess) != 0 && (flags & kEventDisableTiming) == 0) {
    return absl::InvalidArgumentError("an interprocess event needs spEventDisableTiming");
  }
  EventRec rec{};  // {} zeroes the clock's inline storage, which the move below copies
  rec.flags = flags;
  if ((flags & kEventInterprocess) != 0 && c_.cuda != nullptr) {
    return absl::UnimplementedError("interprocess events are not supported on a CUDA runtime");
  }
  if ((flags & kEventInterprocess) != 0) {
    absl::StatusOr<std::shared_ptr<IpcEventSegment>> seg = IpcEventSegment::Create();
    if (!seg.ok()) return seg.status();
    rec.ipc = *std::move(seg);
  }
  c_.seq.ChargeCall();
  const uint64_t h = c_.NewHandle(HandleKind::kEvent);
  events_.emplace(h, std::move(rec));
  return h;
}

uint64_t Events::RemoteTarget(const EventRec& e) {
  if (e.ipc == nullptr) return 0;
  const uint64_t latest = e.ipc->recorded();
  return latest != 0 && latest != e.ipc_seq ? latest : 0;
}

absl::Status Events::DestroyEvent(uint64_t e) {
  if (absl::StatusOr<EventRec*> ev = FindEvent(e); !ev.ok()) return ev.status();
  c_.seq.ChargeCall();
  events_.erase(e);
  return absl::OkStatus();
}

absl::Status Events::Record(uint64_t e, uint64_t s, bool external) {
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  absl::StatusOr<StreamRec*> rec = c_.FindStream(s);
  if (!rec.ok()) return rec.status();
  if (absl::Status st = c_.CheckLegacyOp(**rec); !st.ok()) return st;
  const StreamIndex idx = (*rec)->index;
  if (Captures::Session* session = c_.captures.Of(idx)) {
    // Recorded in the capture: no op, only the nodes a wait on it follows.
    if (session->invalidated) {
      return CaptureError(spErrorStreamCaptureInvalidated, "the capture was invalidated");
    }
    if (external) {
      // Only a node: the event keeps its last record until a launch records
      // it, so that waits outside (the graph's own wait nodes included) are
      // plain waits, not joins of a capture that has ended.
      return c_.captures.Add(idx, EventRecordNode{e}).status();
    }
    (*ev)->capture = session->id;
    (*ev)->capture_nodes = c_.captures.Frontier(idx);
    return absl::OkStatus();
  }
  (*ev)->capture = 0;
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  OpDesc op;
  op.kind = OpKind::kRecord;
  std::shared_ptr<IpcEventSegment> seg = (*ev)->ipc;
  uint64_t seq = 0;
  if (seg != nullptr) {
    // The executor marks the shared record complete when the record op
    // completes: the threads executor as its worker reaches it, the
    // simulator when the host observes it.
    seq = seg->BeginRecord();
    op.effect = [seg, seq] { seg->Complete(seq); };
  }
  const Position p = c_.seq.EnqueueOp(idx, std::move(op));
  const TimeNs end = c_.seq.last_enqueue_end();
  if (seg != nullptr && c_.seq.executor()->CompletedPosition(idx) >= p) seg->Complete(seq);
  EventRec& r = **ev;
  r.ipc_seq = seq;
  r.recorded = true;
  r.stream = idx;
  r.position = p;
  r.end = end;
  if (c_.native != nullptr) r.native_marker = c_.seq.adapter()->RecordMarker(idx, p);
  r.snapshot = c_.seq.ordering().clock(idx);
  return absl::OkStatus();
}

absl::Status Events::EventSynchronize(uint64_t e) {
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  if ((*ev)->capture != 0) {
    return CaptureError(spErrorCapturedEvent, "the event was last recorded in a capture");
  }
  if (absl::Status st = c_.captures.CheckUnsafeCall(); !st.ok()) return st;
  c_.seq.ChargeCall();
  if (const uint64_t target = RemoteTarget(**ev); target != 0) {
    // Proves nothing about our own streams: no pool changes.
    std::shared_ptr<IpcEventSegment> seg = (*ev)->ipc;
    if (seg->completed() < target) return sync_.WaitIpc(seg, target);
    return absl::OkStatus();
  }
  if (!(*ev)->recorded) return absl::OkStatus();
  const std::pair<StreamIndex, Position> point((*ev)->stream, (*ev)->position);
  const VectorClock proof = (*ev)->snapshot;
  return sync_.SyncPoint(point, proof);
}

absl::Status Events::EventQuery(uint64_t e) {
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  if ((*ev)->capture != 0) {
    return CaptureError(spErrorCapturedEvent, "the event was last recorded in a capture");
  }
  if (absl::Status st = c_.captures.CheckUnsafeCall(); !st.ok()) return st;
  c_.seq.ChargeCall();
  if (const uint64_t target = RemoteTarget(**ev); target != 0) {
    if ((*ev)->ipc->completed() < target) {
      return absl::UnavailableError("event's latest record (another process's) has not completed");
    }
    return absl::OkStatus();
  }
  if (!(*ev)->recorded) return absl::OkStatus();
  {
    MutexLock order_lock(&c_.seq.mu());
    c_.seq.executor()->RunDueEffects();
    if (c_.seq.executor()->CompletedPosition((*ev)->stream) < (*ev)->position) {
      return absl::UnavailableError("event's record has not completed");
    }
  }
  sync_.Proven((*ev)->snapshot);
  return absl::OkStatus();
}

absl::StatusOr<float> Events::EventElapsedMs(uint64_t start, uint64_t end) {
  absl::StatusOr<EventRec*> a = FindEvent(start);
  if (!a.ok()) return a.status();
  absl::StatusOr<EventRec*> b = FindEvent(end);
  if (!b.ok()) return b.status();
  if ((((*a)->flags | (*b)->flags) & kEventDisableTiming) != 0) {
    return absl::NotFoundError("elapsed time of an event created without timing");
  }
  if (!(*a)->recorded || !(*b)->recorded) {
    return absl::NotFoundError("elapsed time of an event that was never recorded");
  }
  MutexLock order_lock(&c_.seq.mu());
  c_.seq.ChargeCallLocked();
  if (c_.seq.executor()->CompletedPosition((*a)->stream) < (*a)->position ||
      c_.seq.executor()->CompletedPosition((*b)->stream) < (*b)->position) {
    return absl::UnavailableError("event's record has not completed");
  }
  if (c_.native != nullptr)
    return c_.seq.adapter()->ElapsedMs((*a)->native_marker, (*b)->native_marker);
  // A record at kTimeNever stands for a time past representable time (its
  // stream's end saturated): its true time is unknown, so any difference
  // reported would be made up.
  if ((*a)->end == kTimeNever || (*b)->end == kTimeNever) {
    return absl::InvalidArgumentError(
        "elapsed time of a record past the end of representable virtual time");
  }
  const double ns = static_cast<double>((*b)->end) - static_cast<double>((*a)->end);
  return static_cast<float>(ns / 1e6);
}

absl::Status Events::GetIpcEventHandle(uint64_t e, unsigned char handle[64]) {
  absl::StatusOr<EventRec*> ev = FindEvent(e);
  if (!ev.ok()) return ev.status();
  if ((*ev)->ipc == nullptr) {
    return absl::NotFoundError("the event was not created with spEventInterprocess");
  }
  (*ev)->ipc->WriteHandle(handle);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Events::OpenIpcEvent(const unsigned char handle[64]) {
  if (absl::Status st = c_.HandleRoom(); !st.ok()) return st;
  absl::StatusOr<std::shared_ptr<IpcEventSegment>> seg = IpcEventSegment::Open(handle);
  if (!seg.ok()) return seg.status();
  c_.seq.ChargeCall();
  EventRec rec{};  // {} zeroes the clock's inline storage, which the move below copies
  rec.flags = kEventDisableTiming | kEventInterprocess;
  rec.ipc = *std::move(seg);
  const uint64_t h = c_.NewHandle(HandleKind::kEvent);
  events_.emplace(h, std::move(rec));
  return h;
}

}  // namespace streampool::internal
