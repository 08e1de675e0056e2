#include "src/exec/adapter_executor.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "src/util/check.h"
#include "src/util/sat_time.h"

namespace streampool::internal {

AdapterExecutor::AdapterExecutor(std::shared_ptr<StreamAdapter> adapter, NativeWork* native)
    : adapter_(std::move(adapter)), native_(native), start_(std::chrono::steady_clock::now()) {}

AdapterExecutor::~AdapterExecutor() {
  MutexLock lock(&mu_);
  // A queued native Wait may still name a marker: every stream is
  // synchronized before any marker goes, and streams are destroyed last.
  for (Stream& st : streams_) {
    if (st.bound) {
      StreamAdapter::Marker m = adapter_->Record(st.native);
      adapter_->Synchronize(m);
      adapter_->Release(m);
    } else if (st.reap_pending && !st.marks.empty()) {
      adapter_->Synchronize(st.marks.back().marker->get());
    }
  }
  for (Stream& st : streams_) {
    st.marks.clear();
    st.waited.clear();
  }
  for (Stream& st : streams_) DestroyNative(st);
}

void AdapterExecutor::DestroyNative(Stream& st) {
  if (st.owned && st.native_live) adapter_->DestroyStream(st.native);
  st.native_live = false;
}

void AdapterExecutor::Bind(StreamIndex s, StreamAdapter::NativeStream native, bool owned) {
  if (streams_.size() <= s) streams_.resize(s + 1);
  Stream& st = streams_[s];
  if (st.reap_pending) {
    st.marks.clear();
    st.waited.clear();
    st.reap_pending = false;
    --reap_pending_count_;
  }
  DestroyNative(st);
  // Positions continue: the new incarnation's are all past the old one's.
  if (st.completed == kRemovedMark) st.completed = st.last;
  st.native = native;
  st.native_live = true;
  st.bound = true;
  st.owned = owned;
}

absl::Status AdapterExecutor::BindStream(StreamIndex s, int device, bool legacy,
                                         bool non_blocking) {
  absl::StatusOr<StreamAdapter::NativeStream> native =
      adapter_->CreateStream(device, legacy, non_blocking);
  if (!native.ok()) return native.status();
  MutexLock lock(&mu_);
  Bind(s, *native, /*owned=*/true);
  return absl::OkStatus();
}

void AdapterExecutor::BindAdopted(StreamIndex s, StreamAdapter::NativeStream native, bool wrapped) {
  MutexLock lock(&mu_);
  Bind(s, native, /*owned=*/wrapped);
}

StreamAdapter::NativeStream AdapterExecutor::native(StreamIndex s) {
  MutexLock lock(&mu_);
  return s < streams_.size() && streams_[s].bound ? streams_[s].native : nullptr;
}

void AdapterExecutor::RemoveStream(StreamIndex s) {
  MutexLock lock(&mu_);
  if (s >= streams_.size() || !streams_[s].bound) return;
  Stream& st = streams_[s];
  // The last use of the native stream: a marker after everything enqueued on
  // it, points included (none can be added now). The embedder may destroy an
  // adopted stream as soon as this returns; markers outlive their stream.
  st.marks.push_back(
      Mark{kRemovedMark, std::make_shared<MarkerRef>(adapter_.get(), adapter_->Record(st.native))});
  st.bound = false;
  st.reap_pending = true;
  ++reap_pending_count_;
  ReapRemoved();
}

void AdapterExecutor::ReapRemoved() {
  if (reap_pending_count_ == 0) return;
  for (Stream& st : streams_) {
    if (!st.reap_pending) continue;
    Poll(st);
    if (!st.marks.empty() || !st.waited.empty()) continue;
    DestroyNative(st);
    st.reap_pending = false;
    --reap_pending_count_;
  }
}

void AdapterExecutor::Poll(Stream& st) {
  while (!st.marks.empty()) {
    if (!adapter_->Done(st.marks.front().marker->get())) break;
    st.completed = std::max(st.completed, st.marks.front().position);
    st.marks.pop_front();
  }
  // A wait enqueued at position w is behind the stream once w is reached.
  while (!st.waited.empty() && st.waited.front().position <= st.completed) st.waited.pop_front();
}

std::shared_ptr<AdapterExecutor::MarkerRef> AdapterExecutor::MarkerCovering(StreamIndex s,
                                                                            Position p) {
  Stream& st = streams_[s];
  Poll(st);
  if (p <= st.completed) return nullptr;
  for (const Mark& m : st.marks) {
    if (m.position >= p) return m.marker;
  }
  // Neither bound nor awaiting its final marker: a slot that holds no work.
  if (!st.bound) return nullptr;
  // No marker covers p yet: one recorded now is reached only after
  // everything enqueued so far, p and every point told of before included.
  const Position at = std::max(p, st.last);
  st.last = at;
  auto ref = std::make_shared<MarkerRef>(adapter_.get(), adapter_->Record(st.native));
  st.marks.push_back(Mark{at, ref});
  return ref;
}

TimeNs AdapterExecutor::Enqueue(StreamIndex s, Position position, OpDesc op) {
  MutexLock lock(&mu_);
  SP_CHECK(s < streams_.size() && streams_[s].bound);
  SP_CHECK(position > streams_[s].last);
  auto wait_on = [&](StreamIndex ws, Position wp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ws == s || ws >= streams_.size()) return;
    std::shared_ptr<MarkerRef> m = MarkerCovering(ws, wp);
    if (m == nullptr) return;
    adapter_->Wait(streams_[s].native, m->get());
    streams_[s].waited.push_back(Mark{position, std::move(m)});
  };
  if (op.wait_stream != kNoStream) wait_on(op.wait_stream, op.wait_position);
  // A real device runtime orders its legacy stream itself.
  if (native_ == nullptr) {
    for (const auto& [ws, wp] : op.implicit_waits) wait_on(ws, wp);
  }
  Stream& st = streams_[s];
  st.last = position;
  if (op.kind == OpKind::kRecord) {
    // Waits and queries name an event's record: it is marked now.
    StreamAdapter::Marker m =
        native_ != nullptr ? native_->RecordTimed(st.native) : adapter_->Record(st.native);
    st.marks.push_back(Mark{position, std::make_shared<MarkerRef>(adapter_.get(), m)});
  }
  // Effects run when the host observes their op reached: an adapter's host
  // functions, and the runtime's own (Malloc memory going back). What native
  // work runs by itself comes without one.
  if (op.effect) effects_.push_back(Effect{s, position, std::move(op.effect)});
  return 0;
}

Position AdapterExecutor::CompletedPosition(StreamIndex s) {
  MutexLock lock(&mu_);
  if (s >= streams_.size()) return 0;
  Stream& st = streams_[s];
  Poll(st);
  return st.completed;
}

Position AdapterExecutor::ObserveThrough(StreamIndex s, Position p) {
  MutexLock lock(&mu_);
  if (s >= streams_.size()) return 0;
  MarkerCovering(s, p);
  Stream& st = streams_[s];
  Poll(st);
  return st.completed;
}

void AdapterExecutor::WaitFor(StreamIndex s, Position position) {
  std::shared_ptr<MarkerRef> m;
  {
    MutexLock lock(&mu_);
    if (s >= streams_.size()) return;
    m = MarkerCovering(s, position);
  }
  // Blocks outside our lock, holding a reference to the marker.
  if (m != nullptr) adapter_->Synchronize(m->get());
  MutexLock lock(&mu_);
  Stream& st = streams_[s];
  Poll(st);
  ReapRemoved();
}

std::shared_ptr<void> AdapterExecutor::RecordMarker(StreamIndex s, Position position) {
  MutexLock lock(&mu_);
  if (native_ == nullptr || s >= streams_.size()) return nullptr;
  for (const Mark& m : streams_[s].marks) {
    if (m.position == position) return m.marker;
  }
  return nullptr;
}

absl::StatusOr<float> AdapterExecutor::ElapsedMs(const std::shared_ptr<void>& start,
                                                 const std::shared_ptr<void>& end) {
  if (native_ == nullptr || start == nullptr || end == nullptr) {
    return absl::NotFoundError("elapsed time needs both records' timed markers");
  }
  return native_->ElapsedMs(static_cast<MarkerRef*>(start.get())->get(),
                            static_cast<MarkerRef*>(end.get())->get());
}

TimeNs AdapterExecutor::Now() const {
  return static_cast<TimeNs>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now() - start_)
                                 .count());
}

void AdapterExecutor::HostAdvance(TimeNs ns) { std::this_thread::sleep_for(ToChronoNs(ns)); }

void AdapterExecutor::RunDueEffects() {
  std::vector<std::function<void()>> due;
  {
    MutexLock lock(&mu_);
    for (Stream& st : streams_) Poll(st);
    // Host functions run in enqueue order once their op is reached; one not
    // yet reached holds back those enqueued after it, as on a stream.
    while (!effects_.empty()) {
      const StreamIndex s = effects_.front().stream;
      if (effects_.front().position > streams_[s].completed) {
        // Nothing may have marked it yet: one marker tells.
        MarkerCovering(s, effects_.front().position);
        Poll(streams_[s]);
        if (effects_.front().position > streams_[s].completed) break;
      }
      due.push_back(std::move(effects_.front().fn));
      effects_.pop_front();
    }
    ReapRemoved();
  }
  for (auto& fn : due) fn();
}

}  // namespace streampool::internal
