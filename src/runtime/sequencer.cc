#include "src/runtime/sequencer.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace streampool::internal {

void Sequencer::set_executor(std::unique_ptr<Executor> executor) {
  executor_ = std::move(executor);
  sim_ = dynamic_cast<SimExecutor*>(executor_.get());
  adapter_ = dynamic_cast<AdapterExecutor*>(executor_.get());
  threads_ = dynamic_cast<ThreadExecutor*>(executor_.get());
}

void Sequencer::ChargeCall() {
  if (call_ns_ == 0) return;
  MutexLock order_lock(&mu_);
  ChargeCallLocked();
}

Position Sequencer::EnqueueOp(StreamIndex s, OpDesc op) {
  Position p;
  {
    SpinLockHolder lock(&ordering_.stream_lock(s));
    p = ordering_.Enqueue(s, &op.implicit_waits);
  }
  // Executors wait for ops: a point (allocation, free) is waited for through
  // the op before it.
  if (op.wait_stream != kNoStream)
    op.wait_position = OpAtOrBefore(op.wait_stream, op.wait_position);
  for (auto& [ws, wp] : op.implicit_waits) wp = OpAtOrBefore(ws, wp);
  if (s >= last_op_.size()) last_op_.resize(s + 1, 0);
  last_op_[s] = p;
  last_enqueue_end_ = executor_->Enqueue(s, p, std::move(op));
  return p;
}

Position Sequencer::AdvancePoint(StreamIndex s, OpKind kind) {
  // An adapter's stream runs native work we never saw; it learns where the
  // stream is by a marker when someone asks (AdapterExecutor), not here.
  Position p;
  {
    SpinLockHolder lock(&ordering_.stream_lock(s));
    p = ordering_.AdvancePoint(s);
  }
  if (sim_ != nullptr) sim_->RecordPoint(s, p, kind);
  return p;
}

Position Sequencer::ExecutedThrough(StreamIndex s) {
  if (adapter_ != nullptr)
    return std::min(adapter_->ObserveThrough(s, ordering_.pos(s)), ordering_.pos(s));
  return PointsThrough(s, executor_->CompletedPosition(s));
}

std::vector<StreamIndex> Sequencer::StreamsOfDevice(int device) const {
  std::vector<StreamIndex> out;
  for (StreamIndex s = 0; s < ordering_.stream_count(); ++s) {
    if (ordering_.device(s) == device) out.push_back(s);
  }
  return out;
}

TimeNs Sequencer::SimAllocReady(StreamIndex t) const {
  if (sim_ == nullptr) return 0;
  // T's next op will wait for the legacy-stream ordering too.
  TimeNs at = SimLastEnd(t);
  const StreamKind kind = ordering_.kind(t);
  const int device = ordering_.device(t);
  if (kind == StreamKind::kBlocking) {
    const StreamIndex legacy = ordering_.legacy_stream(device);
    if (legacy != kNoStream) at = std::max(at, sim_->LastEnd(legacy));
  } else if (kind == StreamKind::kLegacy) {
    // The lambda is analysed on its own: it gets the simulator, not the lock.
    const SimExecutor& executor = *sim_;
    ordering_.ForEachBlocking(device, [&](StreamIndex b) {
      if (b != t) at = std::max(at, executor.LastEnd(b));
    });
  }
  return at;
}

TimeNs Sequencer::SimLastEnd(StreamIndex s) const {
  // A point on s is reached once the host is past s's last op.
  return sim_ != nullptr ? std::max(sim_->Now(), sim_->LastEnd(s)) : 0;
}

}  // namespace streampool::internal
