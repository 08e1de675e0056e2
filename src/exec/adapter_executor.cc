#include "src/exec/adapter_executor.h"

#include <thread>
#include <utility>

#include "src/util/check.h"
#include "src/util/sat_time.h"

namespace streampool::internal {

AdapterExecutor::AdapterExecutor(std::shared_ptr<StreamAdapter> adapter)
    : adapter_(std::move(adapter)), start_(std::chrono::steady_clock::now()) {}

AdapterExecutor::~AdapterExecutor() {
  MutexLock lock(&mu_);
  for (Stream& st : streams_) {
    st.marks.clear();  // releases the markers
    if (st.native != nullptr) adapter_->DestroyStream(st.native);
  }
}

absl::Status AdapterExecutor::BindStream(StreamIndex s, int device, bool legacy,
                                         bool non_blocking) {
  absl::StatusOr<StreamAdapter::NativeStream> native =
      adapter_->CreateStream(device, legacy, non_blocking);
  if (!native.ok()) return native.status();
  MutexLock lock(&mu_);
  if (streams_.size() <= s) streams_.resize(s + 1);
  streams_[s].native = *native;
  return absl::OkStatus();
}

StreamAdapter::NativeStream AdapterExecutor::native(StreamIndex s) {
  MutexLock lock(&mu_);
  return s < streams_.size() ? streams_[s].native : nullptr;
}

AdapterExecutor::Mark AdapterExecutor::NewMark(Stream& st, Position p) {
  return Mark{p, std::make_shared<MarkerRef>(adapter_.get(), adapter_->Record(st.native))};
}

void AdapterExecutor::Poll(Stream& st) {
  while (!st.marks.empty() && adapter_->Done(st.marks.front().marker->get())) {
    st.completed = st.marks.front().position;
    st.marks.pop_front();
  }
}

std::shared_ptr<AdapterExecutor::MarkerRef> AdapterExecutor::MarkerAtOrBefore(StreamIndex s,
                                                                              Position p) {
  Stream& st = streams_[s];
  Poll(st);
  if (p <= st.completed) return nullptr;
  // Every op is marked, and positions skip points that are not ops: the last
  // op at or before p stands for p (none left: p is complete).
  std::shared_ptr<MarkerRef> found;
  for (const Mark& m : st.marks) {
    if (m.position > p) break;
    found = m.marker;
  }
  return found;
}

TimeNs AdapterExecutor::Enqueue(StreamIndex s, Position position, OpDesc op) {
  MutexLock lock(&mu_);
  SP_CHECK(s < streams_.size() && streams_[s].native != nullptr);
  Stream& st = streams_[s];
  SP_CHECK(position > st.last);
  auto wait_on = [&](StreamIndex ws, Position wp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ws == s) return;
    if (std::shared_ptr<MarkerRef> m = MarkerAtOrBefore(ws, wp))
      adapter_->Wait(st.native, m->get());
  };
  if (op.wait_stream != kNoStream) wait_on(op.wait_stream, op.wait_position);
  for (const auto& [ws, wp] : op.implicit_waits) wait_on(ws, wp);
  st.last = position;
  st.marks.push_back(NewMark(st, position));
  if (op.effect) effects_.push_back(Effect{s, position, std::move(op.effect)});
  return 0;
}

Position AdapterExecutor::CompletedPosition(StreamIndex s) {
  MutexLock lock(&mu_);
  Stream& st = streams_[s];
  Poll(st);
  return st.marks.empty() ? st.last : st.marks.front().position - 1;
}

void AdapterExecutor::WaitFor(StreamIndex s, Position position) {
  std::shared_ptr<MarkerRef> m;
  {
    MutexLock lock(&mu_);
    m = MarkerAtOrBefore(s, position);
  }
  // Blocks outside our lock, holding a reference to the marker.
  if (m != nullptr) adapter_->Synchronize(m->get());
  MutexLock lock(&mu_);
  Poll(streams_[s]);
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
    while (!effects_.empty() &&
           effects_.front().position <= streams_[effects_.front().stream].completed) {
      due.push_back(std::move(effects_.front().fn));
      effects_.pop_front();
    }
  }
  for (auto& fn : due) fn();
}

}  // namespace streampool::internal
