// Unit tests of the deterministic simulator (src/sim/sim_executor.h).
//
// The rules pinned (docs/design.md "Simulator"): an op starts at
// max(host time at enqueue, end of the previous op of its stream, completion
// of what it waits for) and ends `duration` later; ends are computed at
// enqueue; an op is complete iff end <= host time; host time moves only by
// HostAdvance and WaitFor; effects run when the host observes completion, in
// (end time, enqueue order).
#include "src/sim/sim_executor.h"

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/util/sat_time.h"
#include "streampool/executor.h"

namespace streampool::internal {
namespace {

OpDesc Kernel(TimeNs ns) {
  OpDesc op;
  op.kind = OpKind::kKernel;
  op.duration_ns = ns;
  return op;
}

OpDesc Marker() { return OpDesc{}; }

OpDesc Wait(StreamIndex s, Position p) {
  OpDesc op;
  op.kind = OpKind::kWait;
  op.wait_stream = s;
  op.wait_position = p;
  return op;
}

OpDesc WithEffect(OpDesc op, std::vector<std::string>* log, std::string name) {
  op.effect = [log, name = std::move(name)]() { log->push_back(name); };
  return op;
}

// A simulator with `n` streams and a per-stream position counter, so tests
// read as "enqueue this on stream s".
class SimExecutorTest : public ::testing::Test {
 protected:
  void AddStreams(int n) {
    for (int i = 0; i < n; ++i) {
      sim_.AddStream(static_cast<StreamIndex>(next_.size()));
      next_.push_back(1);
    }
  }
  // Enqueues op as the next position of s; returns its end.
  TimeNs Enq(StreamIndex s, OpDesc op) { return sim_.Enqueue(s, next_[s]++, std::move(op)); }

  SimExecutor sim_;
  std::vector<Position> next_;
};

TEST_F(SimExecutorTest, StartsAtHostTimeOnAnIdleStream) {
  AddStreams(1);
  EXPECT_EQ(sim_.Now(), 0u);
  EXPECT_EQ(Enq(0, Kernel(100)), 100u);
  sim_.HostAdvance(500);
  // The stream went idle at 100; the next op cannot start before the host
  // enqueues it at 500.
  EXPECT_EQ(Enq(0, Kernel(10)), 510u);
  EXPECT_EQ(sim_.LastEnd(0), 510u);
}

TEST_F(SimExecutorTest, StartsAfterThePreviousOpOfItsStream) {
  AddStreams(1);
  EXPECT_EQ(Enq(0, Kernel(100)), 100u);
  EXPECT_EQ(Enq(0, Kernel(50)), 150u);
  sim_.HostAdvance(120);  // host is now inside the second op
  EXPECT_EQ(Enq(0, Kernel(5)), 155u);
}

TEST_F(SimExecutorTest, StartsAfterTheWaitedPoint) {
  AddStreams(2);
  Enq(0, Kernel(100));  // (0, 1) ends 100
  Enq(0, Kernel(200));  // (0, 2) ends 300
  // A wait on (0, 1) ends when (0, 1) does; the wait takes 0 ns.
  EXPECT_EQ(Enq(1, Wait(0, 1)), 100u);
  EXPECT_EQ(Enq(1, Kernel(10)), 110u);
  // Waiting on the later point pushes the stream further.
  EXPECT_EQ(Enq(1, Wait(0, 2)), 300u);
  EXPECT_EQ(Enq(1, Kernel(10)), 310u);
}

TEST_F(SimExecutorTest, StartIsTheMaximumOfAllThreeBounds) {
  AddStreams(2);
  Enq(0, Kernel(100));  // (0, 1) ends 100
  Enq(1, Kernel(300));  // (1, 1) ends 300: the stream's previous end dominates
  EXPECT_EQ(Enq(1, Wait(0, 1)), 300u);
  sim_.HostAdvance(400);  // host time dominates both
  EXPECT_EQ(Enq(1, Wait(0, 1)), 400u);
  EXPECT_EQ(Enq(0, Kernel(1000)), 1400u);  // (0, 2)
  EXPECT_EQ(Enq(1, Wait(0, 2)), 1400u);    // the waited point dominates
}

TEST_F(SimExecutorTest, WaitOnACompletedPointDoesNotDelay) {
  AddStreams(2);
  Enq(0, Kernel(100));
  sim_.HostAdvance(250);
  EXPECT_EQ(Enq(1, Wait(0, 1)), 250u);
}

TEST_F(SimExecutorTest, EndsAreComputedEagerly) {
  // Completion times are known at enqueue, long before host time gets there.
  AddStreams(2);
  Enq(0, Kernel(100));
  Enq(0, Kernel(40));
  Enq(1, Wait(0, 2));
  Enq(1, Kernel(7));
  EXPECT_EQ(sim_.EndOf(0, 1), 100u);
  EXPECT_EQ(sim_.EndOf(0, 2), 140u);
  EXPECT_EQ(sim_.EndOf(1, 1), 140u);
  EXPECT_EQ(sim_.EndOf(1, 2), 147u);
  EXPECT_EQ(sim_.Now(), 0u);
}

TEST_F(SimExecutorTest, CompletedPositionFollowsHostTime) {
  AddStreams(1);
  Enq(0, Kernel(100));  // ends 100
  Enq(0, Kernel(50));   // ends 150
  EXPECT_EQ(sim_.CompletedPosition(0), 0u);
  sim_.HostAdvance(99);
  EXPECT_EQ(sim_.CompletedPosition(0), 0u);
  sim_.HostAdvance(1);  // end <= now: complete exactly at its end
  EXPECT_EQ(sim_.CompletedPosition(0), 1u);
  sim_.HostAdvance(49);
  EXPECT_EQ(sim_.CompletedPosition(0), 1u);
  sim_.HostAdvance(1);
  EXPECT_EQ(sim_.CompletedPosition(0), 2u);
  sim_.HostAdvance(1000);
  EXPECT_EQ(sim_.CompletedPosition(0), 2u);
}

TEST_F(SimExecutorTest, CompletedPositionOfAnUnusedStreamIsZero) {
  AddStreams(2);
  Enq(0, Kernel(10));
  EXPECT_EQ(sim_.CompletedPosition(1), 0u);
}

TEST_F(SimExecutorTest, WaitForAdvancesHostTimeExactlyToTheCompletion) {
  AddStreams(2);
  Enq(0, Kernel(100));  // ends 100
  Enq(0, Kernel(50));   // ends 150
  Enq(1, Kernel(500));  // another stream, ends 500: not waited for

  sim_.WaitFor(0, 1);
  EXPECT_EQ(sim_.Now(), 100u);
  EXPECT_EQ(sim_.CompletedPosition(0), 1u);
  EXPECT_EQ(sim_.CompletedPosition(1), 0u);

  sim_.WaitFor(0, 2);
  EXPECT_EQ(sim_.Now(), 150u);
  // Waiting again for something complete does not move time.
  sim_.WaitFor(0, 2);
  EXPECT_EQ(sim_.Now(), 150u);
  sim_.WaitFor(0, 1);
  EXPECT_EQ(sim_.Now(), 150u);
}

TEST_F(SimExecutorTest, WaitForNeverMovesTimeBackwards) {
  AddStreams(1);
  Enq(0, Kernel(100));
  sim_.HostAdvance(300);
  sim_.WaitFor(0, 1);
  EXPECT_EQ(sim_.Now(), 300u);
}

TEST_F(SimExecutorTest, WaitForPositionZeroIsANoOp) {
  AddStreams(1);
  sim_.WaitFor(0, 0);
  EXPECT_EQ(sim_.Now(), 0u);
  Enq(0, Kernel(100));
  sim_.WaitFor(0, 0);
  EXPECT_EQ(sim_.Now(), 0u);
}

TEST_F(SimExecutorTest, ZeroNsOpsEndWhereTheyStart) {
  AddStreams(2);
  // On an idle stream a 0-ns op is complete the moment it is enqueued.
  EXPECT_EQ(Enq(0, Marker()), 0u);
  EXPECT_EQ(sim_.CompletedPosition(0), 1u);
  // Behind a kernel it completes with the kernel.
  EXPECT_EQ(Enq(1, Kernel(100)), 100u);
  EXPECT_EQ(Enq(1, Marker()), 100u);
  EXPECT_EQ(Enq(1, Marker()), 100u);
  EXPECT_EQ(sim_.CompletedPosition(1), 0u);
  sim_.HostAdvance(100);
  EXPECT_EQ(sim_.CompletedPosition(1), 3u);
  // A kernel of 0 ns is just as instantaneous.
  EXPECT_EQ(Enq(1, Kernel(0)), 100u);
  EXPECT_EQ(sim_.CompletedPosition(1), 4u);
}

TEST_F(SimExecutorTest, EffectsRunInEndTimeThenEnqueueOrder) {
  AddStreams(3);
  std::vector<std::string> log;
  Enq(0, Kernel(100));
  Enq(0, WithEffect(Marker(), &log, "a@100"));  // enqueued first, ends 100
  Enq(1, Kernel(50));
  Enq(1, WithEffect(Marker(), &log, "b@50"));  // ends earliest
  Enq(2, Kernel(100));
  Enq(2, WithEffect(Marker(), &log, "c@100"));   // ties with a, enqueued later
  Enq(0, WithEffect(Kernel(1), &log, "d@101"));  // the effect of a kernel itself

  sim_.WaitFor(0, 3);
  EXPECT_EQ(sim_.Now(), 101u);
  EXPECT_EQ(log, (std::vector<std::string>{"b@50", "a@100", "c@100", "d@101"}));
}

TEST_F(SimExecutorTest, EffectsRunAtTheObservationNotBefore) {
  AddStreams(2);
  std::vector<std::string> log;
  Enq(0, WithEffect(Kernel(100), &log, "k0"));
  // A 0-ns op on an idle stream is complete at once, but its effect waits
  // for the host to observe it.
  Enq(1, WithEffect(Marker(), &log, "m1"));
  EXPECT_TRUE(log.empty());

  sim_.RunDueEffects();
  EXPECT_EQ(log, std::vector<std::string>{"m1"});

  // Completion alone (by the numbers) runs nothing; observation does.
  sim_.HostAdvance(99);
  EXPECT_EQ(log, std::vector<std::string>{"m1"});
  sim_.HostAdvance(1);
  EXPECT_EQ(log, (std::vector<std::string>{"m1", "k0"}));
  // Each effect runs once.
  sim_.RunDueEffects();
  sim_.HostAdvance(1000);
  EXPECT_EQ(log.size(), 2u);
}

TEST_F(SimExecutorTest, WaitForRunsOnlyEffectsDueByTheNewHostTime) {
  AddStreams(2);
  std::vector<std::string> log;
  Enq(0, WithEffect(Kernel(100), &log, "s0@100"));
  Enq(1, WithEffect(Kernel(300), &log, "s1@300"));
  sim_.WaitFor(0, 1);
  EXPECT_EQ(log, std::vector<std::string>{"s0@100"});
  sim_.WaitFor(1, 1);
  EXPECT_EQ(log, (std::vector<std::string>{"s0@100", "s1@300"}));
}

// Ops whose end is already <= host time at enqueue are not tracked as
// incomplete. If an older op of the same stream completed (by host time) but
// was not yet retired by a CompletedPosition call, the tracked ops are no
// longer consecutive positions, and EndOf's position-difference indexing
// reads the wrong entry (or past the end). This happens after a plain
// "kernel; synchronize; record/alloc marker; kernel; synchronize".
TEST_F(SimExecutorTest, EndOfAfterAnUntrackedZeroNsOpBehindUnretiredWork) {
  AddStreams(2);
  Enq(0, Kernel(100));                  // (0, 1) ends 100
  sim_.WaitFor(0, 1);                   // now 100; (0, 1) complete but not retired
  EXPECT_EQ(Enq(0, Marker()), 100u);    // (0, 2) ends 100 <= now
  EXPECT_EQ(Enq(0, Kernel(50)), 150u);  // (0, 3) ends 150
  EXPECT_EQ(Enq(0, Kernel(25)), 175u);  // (0, 4) ends 175

  EXPECT_EQ(sim_.EndOf(0, 3), 150u);
  EXPECT_EQ(sim_.EndOf(0, 4), 175u);
  // A wait on the marker does not wait for the kernels behind it.
  EXPECT_EQ(Enq(1, Wait(0, 2)), 100u);
  sim_.WaitFor(0, 3);
  EXPECT_EQ(sim_.Now(), 150u);
}

TEST_F(SimExecutorTest, EndOfAfterHostAdvanceAndAnUntrackedZeroNsOp) {
  AddStreams(2);
  Enq(0, Kernel(100));                  // (0, 1) ends 100
  sim_.HostAdvance(200);                // complete, not retired
  EXPECT_EQ(Enq(0, Marker()), 200u);    // (0, 2) ends at now: untracked
  EXPECT_EQ(Enq(0, Kernel(50)), 250u);  // (0, 3)
  EXPECT_EQ(Enq(1, Wait(0, 3)), 250u);
  sim_.WaitFor(0, 3);
  EXPECT_EQ(sim_.Now(), 250u);
}

TEST_F(SimExecutorTest, SameProgramSameTimeline) {
  // Determinism: two simulators fed the same ops agree on every end.
  auto run = [](SimExecutor& sim) {
    std::vector<TimeNs> ends;
    sim.AddStream(0);
    sim.AddStream(1);
    ends.push_back(sim.Enqueue(0, 1, Kernel(30)));
    ends.push_back(sim.Enqueue(1, 1, Kernel(70)));
    ends.push_back(sim.Enqueue(1, 2, Wait(0, 1)));
    sim.HostAdvance(5);
    ends.push_back(sim.Enqueue(0, 2, Wait(1, 2)));
    ends.push_back(sim.Enqueue(0, 3, Kernel(3)));
    sim.WaitFor(0, 3);
    ends.push_back(sim.Now());
    return ends;
  };
  SimExecutor a;
  SimExecutor b;
  const std::vector<TimeNs> ea = run(a);
  EXPECT_EQ(ea, run(b));
  EXPECT_EQ(ea, (std::vector<TimeNs>{30, 70, 70, 70, 73, 73}));
}

// ------------------------------------------------------- saturating time
//
// Every sum of times stops at kTimeNever ("not within representable time");
// spending host time stops at kLatestAdvance, one below, so an op whose end
// saturated completes only for a WaitFor, which takes the host to kTimeNever.

TEST(SatTimeTest, AddSaturatesAtTheEndOfTime) {
  EXPECT_EQ(SatAddNs(1, 2), 3u);
  EXPECT_EQ(SatAddNs(kTimeNever - 3, 3), kTimeNever);
  EXPECT_EQ(SatAddNs(kTimeNever - 3, 2), kTimeNever - 1);
  EXPECT_EQ(SatAddNs(1000, kTimeNever - 5), kTimeNever);
  EXPECT_EQ(SatAddNs(kTimeNever, kTimeNever), kTimeNever);
  EXPECT_EQ(SatAddNs(kTimeNever, 0), kTimeNever);
}

TEST(SatTimeTest, MulDivIsExactWhereTheProductAloneOverflows) {
  EXPECT_EQ(SatMulDiv(5, 1000, 3), 1666u);
  EXPECT_EQ(SatMulDiv(0, 1000, 1), 0u);
  EXPECT_EQ(SatMulDiv(kTimeNever, 0, 7), 0u);
  const uint64_t k2to60 = uint64_t{1} << 60;
  EXPECT_EQ(SatMulDiv(k2to60, 1000, 1000), k2to60);
  EXPECT_EQ(SatMulDiv(k2to60, 1000, 1), kTimeNever);
  EXPECT_EQ(SatMulDiv(kTimeNever, 1000, 1000), kTimeNever);
  EXPECT_EQ(SatMulDiv(kTimeNever, 1000, 1001), 18428315757951600014u);
  EXPECT_EQ(SatMulDiv(kTimeNever, 2, 3), 12297829382473034410u);
  EXPECT_EQ(SatMulDiv(uint64_t{1} << 63, 3, 2), uint64_t{3} << 62);
  // A remainder close to the divisor, both above 2^64 / 1000.
  const uint64_t c = (uint64_t{1} << 62) + 3;
  EXPECT_EQ(SatMulDiv(2 * c - 1, 1000, c), 1999u);
  EXPECT_EQ(SatMulDiv(kTimeNever, 1000, kTimeNever - 1), 1000u);
  EXPECT_EQ(SatMulDiv(kTimeNever, kTimeNever, kTimeNever), kTimeNever);
  EXPECT_EQ(SatMulDiv(kTimeNever - 1, kTimeNever, kTimeNever), kTimeNever - 1);
}

#ifdef __SIZEOF_INT128__
TEST(SatTimeTest, MulDivAgreesWithWideArithmetic) {
  std::mt19937_64 rng(20261126);
  // Operands of every magnitude, so that both the exact and the saturated
  // outcomes, and every remainder size, come up.
  auto draw = [&rng] { return rng() >> (rng() % 64); };
  for (int i = 0; i < 200000; ++i) {
    const uint64_t a = draw();
    const uint64_t b = draw();
    const uint64_t c = draw() | 1;
    const unsigned __int128 wide = static_cast<unsigned __int128>(a) * b / c;
    const uint64_t want = wide > kTimeNever ? kTimeNever : static_cast<uint64_t>(wide);
    ASSERT_EQ(SatMulDiv(a, b, c), want) << a << " * " << b << " / " << c;
  }
}
#endif

TEST(SatTimeTest, AdvanceFitsOnlyShortOfTheEndOfTime) {
  EXPECT_TRUE(AdvanceFits(1000, kLatestAdvance - 1000));
  EXPECT_FALSE(AdvanceFits(1000, kTimeNever - 1000));
  EXPECT_FALSE(AdvanceFits(1000, kTimeNever));
  EXPECT_FALSE(AdvanceFits(kLatestAdvance, 1));
  EXPECT_TRUE(AdvanceFits(kLatestAdvance, 0));
  EXPECT_TRUE(AdvanceFits(kTimeNever, 0));
  EXPECT_FALSE(AdvanceFits(kTimeNever, 1));
}

TEST(SatTimeTest, SleepsNeverTurnNegative) {
  EXPECT_EQ(ToChronoNs(5), std::chrono::nanoseconds(5));
  EXPECT_EQ(ToChronoNs(uint64_t{1} << 63), std::chrono::nanoseconds::max());
  EXPECT_EQ(ToChronoNs(kTimeNever), std::chrono::nanoseconds::max());
}

TEST_F(SimExecutorTest, AnEndPastRepresentableTimeSaturates) {
  AddStreams(1);
  sim_.HostAdvance(1000);
  EXPECT_EQ(Enq(0, Kernel(kTimeNever - 5)), kTimeNever);
  EXPECT_EQ(sim_.LastEnd(0), kTimeNever);
  EXPECT_EQ(sim_.EndOf(0, 1), kTimeNever);
  EXPECT_EQ(sim_.CompletedPosition(0), 0u);
  // Later ops of the stream end there too, never earlier.
  EXPECT_EQ(Enq(0, Kernel(10)), kTimeNever);
  EXPECT_EQ(Enq(0, Marker()), kTimeNever);
  sim_.HostAdvance(1);
  EXPECT_EQ(sim_.CompletedPosition(0), 0u);
}

TEST_F(SimExecutorTest, HostAdvanceSaturatesShortOfTheEndOfTime) {
  AddStreams(1);
  std::vector<std::string> log;
  Enq(0, WithEffect(Kernel(kTimeNever), &log, "never"));
  sim_.HostAdvance(1000);
  sim_.HostAdvance(kTimeNever);
  EXPECT_EQ(sim_.Now(), kLatestAdvance);
  sim_.HostAdvance(kTimeNever);
  EXPECT_EQ(sim_.Now(), kLatestAdvance);
  EXPECT_EQ(sim_.CompletedPosition(0), 0u);
  EXPECT_TRUE(log.empty());
}

TEST_F(SimExecutorTest, OnlyWaitForTakesTheHostToTheEndOfTime) {
  AddStreams(1);
  std::vector<std::string> log;
  sim_.HostAdvance(1000);
  Enq(0, WithEffect(Kernel(kTimeNever - 5), &log, "never"));
  sim_.WaitFor(0, 1);
  EXPECT_EQ(sim_.Now(), kTimeNever);
  EXPECT_EQ(sim_.CompletedPosition(0), 1u);
  EXPECT_EQ(log, std::vector<std::string>{"never"});
  // From there, spending time moves nothing, and never backwards.
  sim_.HostAdvance(5);
  EXPECT_EQ(sim_.Now(), kTimeNever);
  // What is enqueued at the end of time ends there: complete at once.
  EXPECT_EQ(Enq(0, Kernel(10)), kTimeNever);
  EXPECT_EQ(sim_.CompletedPosition(0), 2u);
}

TEST_F(SimExecutorTest, AWaitForASaturatedEndInheritsIt) {
  AddStreams(3);
  sim_.HostAdvance(1000);
  Enq(0, Kernel(kTimeNever - 5));  // (0, 1) ends kTimeNever
  EXPECT_EQ(Enq(1, Wait(0, 1)), kTimeNever);
  OpDesc implicit = Kernel(1);
  implicit.implicit_waits.emplace_back(0, 1);
  EXPECT_EQ(Enq(2, std::move(implicit)), kTimeNever);
  sim_.HostAdvance(kTimeNever);
  EXPECT_EQ(sim_.CompletedPosition(1), 0u);
  EXPECT_EQ(sim_.CompletedPosition(2), 0u);
}

TEST_F(SimExecutorTest, TimelineEndsNeverPrecedeStarts) {
  AddStreams(1);
  sim_.set_record_timeline(true);
  sim_.HostAdvance(1000);
  Enq(0, Kernel(kTimeNever - 5));
  Enq(0, Kernel(kTimeNever));
  sim_.RecordPoint(0, next_[0]++, OpKind::kFreeMarker);
  ASSERT_EQ(sim_.timeline().size(), 3u);
  for (const SimExecutor::TimelineEntry& e : sim_.timeline()) {
    EXPECT_LE(e.enqueued, e.start);
    EXPECT_LE(e.start, e.end);
  }
  EXPECT_EQ(sim_.timeline()[0].start, 1000u);
  EXPECT_EQ(sim_.timeline()[0].end, kTimeNever);
  EXPECT_EQ(sim_.timeline()[2].start, kTimeNever);
}

}  // namespace
}  // namespace streampool::internal
