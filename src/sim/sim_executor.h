// The deterministic simulator: streams run in virtual time.
//
// An op starts at max(host time at enqueue, end of the previous op of its
// stream, completion of what it waits for) and ends `duration` later. Every
// duration is known at enqueue, so completion times are computed eagerly and
// "is (S, p) complete" is "end(S, p) <= host now". Host time moves only by
// HostAdvance and WaitFor; nothing here reads a real clock, so the same program
// gives the same timeline bit for bit.
//
// Time saturates (src/util/sat_time.h): an end past representable time is
// kTimeNever, HostAdvance stops at kLatestAdvance, just short of it, and only
// WaitFor on such an op takes the host to kTimeNever. So an op never reads as
// complete before its end, and host time never goes backwards.
#ifndef STREAMPOOL_SRC_SIM_SIM_EXECUTOR_H_
#define STREAMPOOL_SRC_SIM_SIM_EXECUTOR_H_

#include <algorithm>
#include <cstdint>
#include <queue>
#include <vector>

#include "src/util/ring.h"
#include "src/util/sat_time.h"
#include "streampool/executor.h"

namespace streampool::internal {

class SimExecutor final : public Executor {
 public:
  SimExecutor() = default;

  void AddStream(StreamIndex s) override;
  TimeNs Enqueue(StreamIndex s, Position position, OpDesc op) override;
  Position CompletedPosition(StreamIndex s) override;
  void WaitFor(StreamIndex s, Position position) override;
  TimeNs Now() const override { return now_; }
  void HostAdvance(TimeNs ns) override;
  void RunDueEffects() override;

  // Completion time of (s, position), or Now() if it completed earlier than
  // anything still tracked. position must have been enqueued.
  TimeNs EndOf(StreamIndex s, Position position) const;
  // The highest position of s whose op (and every op before it) ends at or
  // before `t`, as the schedule stands: the last position when all do.
  Position CompleteBy(StreamIndex s, TimeNs t) const;
  // End of the last op enqueued on s (0 if none).
  TimeNs LastEnd(StreamIndex s) const { return streams_[s].last_end; }

  // Every op's schedule, kept only while enabled (it grows without bound).
  struct TimelineEntry {
    StreamIndex stream;
    Position position;
    OpKind kind;
    TimeNs enqueued;
    TimeNs start;
    TimeNs end;
  };
  // A point that is not an op (an allocation or a free): only the timeline
  // sees it, at the time a 0 ns op enqueued there would have run.
  void RecordPoint(StreamIndex s, Position position, OpKind kind) {
    if (!record_timeline_) return;
    const TimeNs at = std::max(now_, streams_[s].last_end);
    timeline_.push_back(TimelineEntry{s, position, kind, now_, at, at});
  }
  void set_record_timeline(bool on) { record_timeline_ = on; }
  bool record_timeline() const { return record_timeline_; }
  const std::vector<TimelineEntry>& timeline() const { return timeline_; }

 private:
  struct Pending {
    Position position;
    TimeNs end;
  };
  struct StreamState {
    TimeNs last_end = 0;
    Position last_position = 0;
    // Ops whose end is after host time, in position order. Ends are
    // nondecreasing along a stream, so completion pops from the front.
    Ring<Pending> incomplete;
  };
  struct Effect {
    TimeNs end;
    uint64_t seq;
    std::function<void()> fn;
  };
  struct LaterEffect {
    bool operator()(const Effect& a, const Effect& b) const {
      return a.end != b.end ? a.end > b.end : a.seq > b.seq;
    }
  };

  void Retire(StreamState& st);

  TimeNs now_ = 0;
  uint64_t effect_seq_ = 0;
  bool record_timeline_ = false;
  std::vector<TimelineEntry> timeline_;
  std::vector<StreamState> streams_;
  std::priority_queue<Effect, std::vector<Effect>, LaterEffect> effects_;
};

static_assert(kIsExecutor<SimExecutor>);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_SIM_SIM_EXECUTOR_H_
