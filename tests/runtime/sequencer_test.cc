// Sequencer on its own: over the simulator for virtual time, and over a fake
// executor that keeps what it was handed and reports what it is told, so
// that each translation between points and ops shows.
#include "src/runtime/sequencer.h"

#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "src/exec/thread_executor.h"
#include "src/sim/sim_executor.h"

namespace streampool::internal {
namespace {

class FakeExecutor final : public Executor {
 public:
  void AddStream(StreamIndex) override {}
  TimeNs Enqueue(StreamIndex s, Position p, OpDesc op) override {
    enqueued.push_back(std::move(op));
    return 1000 + p;
  }
  Position CompletedPosition(StreamIndex) override { return completed; }
  void WaitFor(StreamIndex, Position) override {}
  TimeNs Now() const override { return now; }
  void HostAdvance(TimeNs ns) override { now += ns; }
  void RunDueEffects() override {}

  std::vector<OpDesc> enqueued;
  Position completed = 0;
  TimeNs now = 0;
};

// A fake installed as seq's executor.
FakeExecutor& InstallFake(Sequencer& seq) {
  auto fake = std::make_unique<FakeExecutor>();
  FakeExecutor& ex = *fake;
  MutexLock lock(&seq.mu());
  seq.set_executor(std::move(fake));
  return ex;
}

// A stream as the runtime makes one: the executor's first, then the slot.
StreamIndex AddStream(Sequencer& seq, int device, StreamKind kind)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(seq.mu()) {
  seq.executor()->AddStream(seq.ordering().NextSlot());
  return seq.ordering().AddStream(device, kind);
}

OpDesc Kernel(TimeNs ns) {
  OpDesc op;
  op.kind = OpKind::kKernel;
  op.duration_ns = ns;
  return op;
}

TEST(SequencerTest, AWaitForAPointIsAWaitForTheOpBeforeIt) {
  Sequencer seq(0);
  FakeExecutor& ex = InstallFake(seq);
  MutexLock lock(&seq.mu());
  const StreamIndex s = AddStream(seq, 0, StreamKind::kNonBlocking);
  const StreamIndex t = AddStream(seq, 0, StreamKind::kNonBlocking);
  EXPECT_EQ(seq.EnqueueOp(s, Kernel(10)), 1u);
  EXPECT_EQ(seq.last_enqueue_end(), 1001u);
  EXPECT_EQ(seq.AdvancePoint(s, OpKind::kFreeMarker), 2u);
  EXPECT_EQ(seq.pos(s), 2u);
  EXPECT_EQ(ex.enqueued.size(), 1u) << "a point is no op";
  EXPECT_EQ(seq.OpAtOrBefore(s, 2), 1u);
  EXPECT_EQ(seq.OpAtOrBefore(t, 7), 0u) << "t has no op yet";
  OpDesc wait;
  wait.kind = OpKind::kInternalWait;
  wait.wait_stream = s;
  wait.wait_position = 2;
  EXPECT_EQ(seq.EnqueueOp(t, std::move(wait)), 1u);
  EXPECT_EQ(ex.enqueued.back().wait_position, 1u);
}

TEST(SequencerTest, ThePointsAfterTheLastOpCompleteWithIt) {
  Sequencer seq(0);
  FakeExecutor& ex = InstallFake(seq);
  MutexLock lock(&seq.mu());
  const StreamIndex s = AddStream(seq, 0, StreamKind::kNonBlocking);
  seq.AdvancePoint(s, OpKind::kAllocMarker);  // 1
  seq.EnqueueOp(s, Kernel(10));               // 2
  seq.AdvancePoint(s, OpKind::kFreeMarker);   // 3
  seq.EnqueueOp(s, Kernel(10));               // 4
  seq.AdvancePoint(s, OpKind::kFreeMarker);   // 5
  EXPECT_EQ(seq.ExecutedThrough(s), 0u);
  ex.completed = 3;  // the point before op 4 completed with op 2
  EXPECT_EQ(seq.ExecutedThrough(s), 3u);
  ex.completed = 4;
  EXPECT_EQ(seq.ExecutedThrough(s), 5u);
  EXPECT_EQ(seq.PointsThrough(s, 2), 2u);
  EXPECT_EQ(seq.PointsThrough(s, 4), 5u);
}

TEST(SequencerTest, ACallCostsTheHostItsTimeOnlyWhenItHasOne) {
  Sequencer costly(50);
  FakeExecutor& ex = InstallFake(costly);
  costly.ChargeCall();
  EXPECT_EQ(ex.now, 50u);
  {
    MutexLock lock(&costly.mu());
    costly.ChargeCallLocked();
  }
  EXPECT_EQ(ex.now, 100u);

  Sequencer free_calls(0);
  FakeExecutor& ex_free = InstallFake(free_calls);
  free_calls.ChargeCall();
  EXPECT_EQ(ex_free.now, 0u);
}

TEST(SequencerTest, AnAllocationOnABlockingStreamIsReadyAfterTheLegacyStream) {
  Sequencer seq(0);
  MutexLock lock(&seq.mu());
  seq.set_executor(std::make_unique<SimExecutor>());
  const StreamIndex legacy = AddStream(seq, 0, StreamKind::kLegacy);
  const StreamIndex blocking = AddStream(seq, 0, StreamKind::kBlocking);
  const StreamIndex free_running = AddStream(seq, 0, StreamKind::kNonBlocking);
  seq.EnqueueOp(legacy, Kernel(100));
  EXPECT_EQ(seq.SimLastEnd(legacy), 100u);
  EXPECT_EQ(seq.SimLastEnd(blocking), 0u);
  EXPECT_EQ(seq.SimAllocReady(blocking), 100u);
  EXPECT_EQ(seq.SimAllocReady(free_running), 0u) << "a non-blocking stream waits for no one";
  seq.EnqueueOp(free_running, Kernel(500));
  seq.EnqueueOp(blocking, Kernel(20));  // after the legacy stream's kernel
  EXPECT_EQ(seq.SimLastEnd(blocking), 120u);
  EXPECT_EQ(seq.SimAllocReady(legacy), 120u) << "the legacy stream waits for blocking ones";
  seq.executor()->HostAdvance(1000);
  EXPECT_EQ(seq.SimLastEnd(blocking), 1000u) << "a point is no earlier than the host";
}

TEST(SequencerTest, TheExecutorIsNamedByItsKindUntilDropped) {
  Sequencer seq(0);
  MutexLock lock(&seq.mu());
  EXPECT_EQ(seq.executor(), nullptr);
  seq.set_executor(std::make_unique<SimExecutor>());
  EXPECT_NE(seq.sim(), nullptr);
  EXPECT_EQ(seq.threads(), nullptr);
  seq.set_executor(std::make_unique<ThreadExecutor>());
  EXPECT_EQ(seq.sim(), nullptr);
  EXPECT_NE(seq.threads(), nullptr);
  EXPECT_EQ(seq.SimAllocReady(0), 0u) << "no virtual time";
  EXPECT_EQ(seq.adapter(), nullptr);
  seq.set_executor(nullptr);
  EXPECT_EQ(seq.executor(), nullptr);
  EXPECT_EQ(seq.threads(), nullptr);
}

TEST(SequencerTest, StreamsOfADeviceAreItsSlotsInOrder) {
  Sequencer seq(0);
  InstallFake(seq);
  MutexLock lock(&seq.mu());
  AddStream(seq, 0, StreamKind::kLegacy);
  AddStream(seq, 1, StreamKind::kLegacy);
  AddStream(seq, 0, StreamKind::kNonBlocking);
  EXPECT_EQ(seq.stream_slots(), 3u);
  EXPECT_EQ(seq.StreamsOfDevice(0), (std::vector<StreamIndex>{0, 2}));
  EXPECT_EQ(seq.StreamsOfDevice(1), (std::vector<StreamIndex>{1}));
}

TEST(SequencerTest, WaitsAreKeptOnlyWhileLoggingAndUntilTaken) {
  Sequencer seq(0);
  MutexLock lock(&seq.mu());
  using Waits = std::vector<std::pair<StreamIndex, Position>>;
  seq.NoteWait(1, 4);
  EXPECT_TRUE(seq.TakeWaits().empty()) << "off by default";
  seq.LogWaits(true);
  seq.NoteWait(1, 4);
  seq.NoteWait(2, 9);
  EXPECT_EQ(seq.TakeWaits(), (Waits{{1, 4}, {2, 9}}));
  EXPECT_TRUE(seq.TakeWaits().empty());
  seq.NoteWait(3, 1);
  seq.LogWaits(false);
  seq.NoteWait(3, 2);
  EXPECT_TRUE(seq.TakeWaits().empty()) << "turning it off drops what was kept";
}

}  // namespace
}  // namespace streampool::internal
