#include "src/sim/sim_executor.h"

#include <algorithm>
#include <utility>

#include "src/util/check.h"
#include "src/util/sat_time.h"

namespace streampool::internal {

void SimExecutor::AddStream(StreamIndex s) {
  // A reused slot keeps its schedule: its positions continue.
  SP_CHECK(s <= streams_.size());
  if (s == streams_.size()) streams_.emplace_back();
}

TimeNs SimExecutor::EndOf(StreamIndex s, Position position) const {
  const StreamState& st = streams_[s];
  SP_DCHECK(position <= st.last_position);
  if (st.incomplete.empty() || position < st.incomplete.front().position) return now_;
  // Positions may skip (points that are not ops): the op at or before
  // `position` with the highest position decides.
  size_t lo = 0, hi = st.incomplete.size();
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (st.incomplete[mid].position <= position) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return st.incomplete[lo].end;
}

Position SimExecutor::CompleteBy(StreamIndex s, TimeNs t) const {
  const StreamState& st = streams_[s];
  // Ends are nondecreasing along the stream: the first incomplete op that
  // ends after t bounds what completes by then.
  size_t lo = 0, hi = st.incomplete.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (st.incomplete[mid].end <= t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo == st.incomplete.size() ? st.last_position : st.incomplete[lo].position - 1;
}

TimeNs SimExecutor::Enqueue(StreamIndex s, Position position, OpDesc op) {
  StreamState& st = streams_[s];
  SP_CHECK(position > st.last_position);
  Retire(st);
  TimeNs start = std::max(now_, st.last_end);
  if (op.wait_stream != kNoStream) start = std::max(start, EndOf(op.wait_stream, op.wait_position));
  for (const auto& [ws, wp] : op.implicit_waits) start = std::max(start, EndOf(ws, wp));
  // Saturates: an end past representable time stays kTimeNever, which no
  // advance of host time reaches (HostAdvance), so the op never reads as
  // complete before it ends.
  const TimeNs end = SatAddNs(start, op.duration_ns);
  st.last_end = end;
  st.last_position = position;
  if (end > now_) st.incomplete.push_back(Pending{position, end});
  if (record_timeline_) timeline_.push_back(TimelineEntry{s, position, op.kind, now_, start, end});
  if (op.effect) effects_.push(Effect{end, effect_seq_++, std::move(op.effect)});
  return end;
}

void SimExecutor::Retire(StreamState& st) {
  while (!st.incomplete.empty() && st.incomplete.front().end <= now_) st.incomplete.pop_front();
}

Position SimExecutor::CompletedPosition(StreamIndex s) {
  StreamState& st = streams_[s];
  Retire(st);
  return st.incomplete.empty() ? st.last_position : st.incomplete.front().position - 1;
}

void SimExecutor::WaitFor(StreamIndex s, Position position) {
  if (position == 0) return;
  const TimeNs end = EndOf(s, position);
  if (end > now_) now_ = end;
  RunDueEffects();
}

void SimExecutor::HostAdvance(TimeNs ns) {
  // Saturates short of kTimeNever: reaching it would complete every op whose
  // end saturated. Only waiting for such an op takes the host there (WaitFor),
  // and from there host time stays put.
  if (now_ < kLatestAdvance) now_ = std::min(SatAddNs(now_, ns), kLatestAdvance);
  RunDueEffects();
}

void SimExecutor::RunDueEffects() {
  while (!effects_.empty() && effects_.top().end <= now_) {
    // Moved out before running: an effect may enqueue nothing (host functions
    // cannot call the API), but it must not see itself still queued.
    std::function<void()> fn = std::move(const_cast<Effect&>(effects_.top()).fn);
    effects_.pop();
    fn();
  }
}

}  // namespace streampool::internal
