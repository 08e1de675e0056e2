// Unit tests of the ordering core (src/ordering/): vector clocks, stream
// positions, events as clock snapshots, happens-before, the legacy default
// stream, and completion proofs. Everything here is pure bookkeeping, so
// every expectation is an exact position derived from DESIGN.md "Ordering".
#include "src/ordering/ordering.h"

#include "gtest/gtest.h"
#include "src/ordering/vector_clock.h"
#include "streampool/executor.h"

namespace streampool::internal {
namespace {

// ------------------------------------------------------------ VectorClock

TEST(VectorClockTest, MissingEntriesReadAsZero) {
  VectorClock vc;
  EXPECT_EQ(vc.Get(0), 0u);
  EXPECT_EQ(vc.Get(1000), 0u);
  EXPECT_EQ(vc.width(), 0u);
}

TEST(VectorClockTest, RaiseKeepsTheMaximum) {
  VectorClock vc;
  vc.Raise(2, 5);
  vc.Raise(2, 3);  // lower: ignored
  EXPECT_EQ(vc.Get(2), 5u);
  vc.Raise(2, 7);
  EXPECT_EQ(vc.Get(2), 7u);
  EXPECT_EQ(vc.Get(0), 0u);
  EXPECT_EQ(vc.Get(1), 0u);
}

TEST(VectorClockTest, RaisingBeyondTheWidthToZeroDoesNotGrow) {
  // Clocks of early streams stay short until they learn of later streams;
  // a zero entry teaches nothing.
  VectorClock vc;
  vc.Raise(9, 0);
  EXPECT_EQ(vc.width(), 0u);
}

TEST(VectorClockTest, JoinIsComponentwiseMaxAndReportsChange) {
  VectorClock a;
  a.Raise(0, 4);
  a.Raise(1, 1);
  VectorClock b;
  b.Raise(1, 3);
  b.Raise(3, 2);

  EXPECT_TRUE(a.Join(b));
  EXPECT_EQ(a.Get(0), 4u);
  EXPECT_EQ(a.Get(1), 3u);
  EXPECT_EQ(a.Get(2), 0u);
  EXPECT_EQ(a.Get(3), 2u);

  // Joining what is already known changes nothing.
  EXPECT_FALSE(a.Join(b));
  EXPECT_FALSE(a.Join(VectorClock()));
}

TEST(VectorClockTest, LessOrEqualAndEquality) {
  VectorClock shorter;
  shorter.Raise(0, 2);
  VectorClock longer;
  longer.Raise(0, 2);
  longer.Raise(5, 1);

  EXPECT_TRUE(shorter.LessOrEqual(longer));
  EXPECT_FALSE(longer.LessOrEqual(shorter));
  EXPECT_FALSE(shorter == longer);

  // Equal values compare equal however they were built.
  VectorClock joined;
  joined.Join(longer);
  EXPECT_TRUE(joined == longer);
  EXPECT_TRUE(joined.LessOrEqual(longer));
  EXPECT_TRUE(longer.LessOrEqual(joined));
}

// --------------------------------------------------------------- Ordering

TEST(OrderingTest, PositionsCountOpsFromOne) {
  Ordering o;
  const StreamIndex a = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex b = o.AddStream(0, StreamKind::kNonBlocking);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(o.stream_count(), 2u);
  EXPECT_EQ(o.pos(a), 0u);  // position 0 = before any op

  EXPECT_EQ(o.Enqueue(a), 1u);
  EXPECT_EQ(o.Enqueue(a), 2u);
  EXPECT_EQ(o.Enqueue(b), 1u);
  EXPECT_EQ(o.Enqueue(a), 3u);
  EXPECT_EQ(o.pos(a), 3u);
  EXPECT_EQ(o.pos(b), 1u);
  // VC(S)[S] == pos(S); independent streams know nothing of each other.
  EXPECT_EQ(o.clock(a).Get(a), 3u);
  EXPECT_EQ(o.clock(b).Get(b), 1u);
  EXPECT_EQ(o.clock(a).Get(b), 0u);
  EXPECT_EQ(o.clock(b).Get(a), 0u);
}

TEST(OrderingTest, RecordsDeviceAndKind) {
  Ordering o;
  const StreamIndex l = o.AddStream(1, StreamKind::kLegacy);
  const StreamIndex n = o.AddStream(0, StreamKind::kNonBlocking);
  EXPECT_EQ(o.device(l), 1);
  EXPECT_EQ(o.kind(l), StreamKind::kLegacy);
  EXPECT_EQ(o.device(n), 0);
  EXPECT_EQ(o.kind(n), StreamKind::kNonBlocking);
}

TEST(OrderingTest, OwnStreamIsAlwaysOrdered) {
  // Stream order: every enqueued op of S happens before S's next op.
  Ordering o;
  const StreamIndex s = o.AddStream(0, StreamKind::kBlocking);
  o.Enqueue(s);
  o.Enqueue(s);
  EXPECT_TRUE(o.HappensBefore(s, 1, s));
  EXPECT_TRUE(o.HappensBefore(s, 2, s));
  EXPECT_EQ(o.OrderedAfter(s, s), 2u);
}

TEST(OrderingTest, EventSnapshotIsACopyThatLaterWorkDoesNotChange) {
  // RecordEvent(E, S): E's snapshot := VC(S), a value; S's later ops do not
  // move it.
  Ordering o;
  const StreamIndex s = o.AddStream(0, StreamKind::kNonBlocking);
  o.Enqueue(s);
  o.Enqueue(s);  // the record op, position 2
  const VectorClock snapshot = o.clock(s);
  o.Enqueue(s);
  o.Enqueue(s);
  EXPECT_EQ(snapshot.Get(s), 2u);
  EXPECT_EQ(o.clock(s).Get(s), 4u);
}

TEST(OrderingTest, WaitJoinsTheSnapshotNotTheStreamsLaterWork) {
  Ordering o;
  const StreamIndex s = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex t = o.AddStream(0, StreamKind::kNonBlocking);
  o.Enqueue(s);
  const VectorClock snapshot = o.clock(s);  // record at (s, 1)
  o.Enqueue(s);                             // later work on s: not covered
  o.Enqueue(t);                             // the wait op on t
  o.JoinInto(t, snapshot);

  EXPECT_EQ(o.clock(t).Get(s), 1u);
  EXPECT_TRUE(o.HappensBefore(s, 1, t));
  EXPECT_FALSE(o.HappensBefore(s, 2, t));
  // Waiting is one-directional.
  EXPECT_FALSE(o.HappensBefore(t, 1, s));
}

TEST(OrderingTest, ReRecordReplacesTheSnapshotButAnEnqueuedWaitKeepsItsOwn) {
  Ordering o;
  const StreamIndex s = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex t = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex u = o.AddStream(0, StreamKind::kNonBlocking);

  o.Enqueue(s);
  VectorClock event = o.clock(s);  // first record: (s, 1)
  o.Enqueue(t);
  o.JoinInto(t, event);  // t waits on the first record

  o.Enqueue(s);
  o.Enqueue(s);
  event = o.clock(s);  // re-record: (s, 3) replaces (s, 1)
  EXPECT_EQ(event.Get(s), 3u);

  // The wait t already made is unaffected by the re-record...
  EXPECT_EQ(o.clock(t).Get(s), 1u);
  EXPECT_FALSE(o.HappensBefore(s, 2, t));
  // ...and a wait made now uses the latest record.
  o.Enqueue(u);
  o.JoinInto(u, event);
  EXPECT_EQ(o.clock(u).Get(s), 3u);
  EXPECT_TRUE(o.HappensBefore(s, 3, u));
}

TEST(OrderingTest, HappensBeforeIsTransitiveThroughAChainOfEventWaits) {
  // a -> b -> c -> d by event waits: a's first op happens before d's next op
  // although d never waited on a directly. Clocks are joined whole, so the
  // chain is carried by one join per wait.
  Ordering o;
  const StreamIndex a = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex b = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex c = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex d = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex bystander = o.AddStream(0, StreamKind::kNonBlocking);

  o.Enqueue(a);  // (a, 1): say a free
  o.Enqueue(a);  // (a, 2): record ea
  const VectorClock ea = o.clock(a);
  o.Enqueue(a);  // (a, 3): not covered by ea

  o.Enqueue(b);  // (b, 1): wait ea
  o.JoinInto(b, ea);
  o.Enqueue(b);  // (b, 2): record eb
  const VectorClock eb = o.clock(b);

  o.Enqueue(c);  // (c, 1): wait eb
  o.JoinInto(c, eb);
  o.Enqueue(c);  // (c, 2): record ec
  const VectorClock ec = o.clock(c);

  o.Enqueue(d);  // (d, 1): wait ec
  o.JoinInto(d, ec);

  EXPECT_EQ(o.clock(d).Get(a), 2u);
  EXPECT_EQ(o.clock(d).Get(b), 2u);
  EXPECT_EQ(o.clock(d).Get(c), 2u);
  EXPECT_TRUE(o.HappensBefore(a, 1, d));
  EXPECT_TRUE(o.HappensBefore(a, 2, d));
  EXPECT_FALSE(o.HappensBefore(a, 3, d));
  EXPECT_TRUE(o.HappensBefore(b, 2, d));
  EXPECT_TRUE(o.HappensBefore(c, 2, d));
  // Nobody waited on the bystander, nor did it wait on anyone.
  o.Enqueue(bystander);
  EXPECT_FALSE(o.HappensBefore(a, 1, bystander));
  EXPECT_FALSE(o.HappensBefore(bystander, 1, d));
}

TEST(OrderingTest, OrderAfterPointRaisesOnlyThatComponent) {
  // The pool's inserted wait on (on, at) orders s after that point only; the
  // transitive entries are not known and must not be invented.
  Ordering o;
  const StreamIndex a = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex b = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex t = o.AddStream(0, StreamKind::kNonBlocking);
  o.Enqueue(a);
  o.Enqueue(b);
  o.JoinInto(b, o.clock(a));  // b is ordered after (a, 1)
  o.Enqueue(b);
  o.Enqueue(b);  // (b, 3)

  o.Enqueue(t);  // the inserted wait
  o.OrderAfterPoint(t, b, 2);
  EXPECT_EQ(o.clock(t).Get(b), 2u);
  EXPECT_TRUE(o.HappensBefore(b, 2, t));
  EXPECT_FALSE(o.HappensBefore(b, 3, t));
  EXPECT_EQ(o.clock(t).Get(a), 0u);
}

// ----------------------------------------------------------- legacy stream

// Two devices: on device 0 a legacy stream, two blocking streams and one
// non-blocking stream; on device 1 a legacy and a blocking stream.
class LegacyOrderingTest : public ::testing::Test {
 protected:
  Ordering o_;
  const StreamIndex legacy0_ = o_.AddStream(0, StreamKind::kLegacy);
  const StreamIndex b1_ = o_.AddStream(0, StreamKind::kBlocking);
  const StreamIndex b2_ = o_.AddStream(0, StreamKind::kBlocking);
  const StreamIndex nb_ = o_.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex legacy1_ = o_.AddStream(1, StreamKind::kLegacy);
  const StreamIndex other_dev_ = o_.AddStream(1, StreamKind::kBlocking);
};

TEST_F(LegacyOrderingTest, LegacyOpIsOrderedAfterPriorWorkOfEveryBlockingStream) {
  o_.Enqueue(b1_);
  o_.Enqueue(b1_);
  o_.Enqueue(b2_);
  o_.Enqueue(nb_);
  o_.Enqueue(other_dev_);

  o_.Enqueue(legacy0_);
  EXPECT_EQ(o_.clock(legacy0_).Get(b1_), 2u);
  EXPECT_EQ(o_.clock(legacy0_).Get(b2_), 1u);
  // Non-blocking streams opt out; another device's streams are not involved.
  EXPECT_EQ(o_.clock(legacy0_).Get(nb_), 0u);
  EXPECT_EQ(o_.clock(legacy0_).Get(other_dev_), 0u);

  // Only *prior* work: b1's next op is not covered by the legacy op already
  // enqueued.
  o_.Enqueue(b1_);
  EXPECT_EQ(o_.clock(legacy0_).Get(b1_), 2u);
  // The legacy stream's next op would join it.
  EXPECT_EQ(o_.OrderedAfter(legacy0_, b1_), 3u);
}

TEST_F(LegacyOrderingTest, LegacyOpCarriesWhatTheBlockingStreamsWereOrderedAfter) {
  // b1 waited on the non-blocking stream; the legacy op after b1 inherits
  // that (clocks are joined whole).
  o_.Enqueue(nb_);
  o_.Enqueue(nb_);
  const VectorClock e = o_.clock(nb_);
  o_.Enqueue(b1_);
  o_.JoinInto(b1_, e);
  o_.Enqueue(legacy0_);
  EXPECT_EQ(o_.clock(legacy0_).Get(nb_), 2u);
}

TEST_F(LegacyOrderingTest, LaterBlockingWorkIsOrderedAfterPriorLegacyWork) {
  o_.Enqueue(b1_);       // (b1, 1)
  o_.Enqueue(legacy0_);  // (L, 1): after (b1, 1)
  o_.Enqueue(legacy0_);  // (L, 2)

  o_.Enqueue(b2_);
  EXPECT_EQ(o_.clock(b2_).Get(legacy0_), 2u);
  // Transitively through the legacy stream, b2 is ordered after b1's work.
  EXPECT_EQ(o_.clock(b2_).Get(b1_), 1u);
  EXPECT_TRUE(o_.HappensBefore(b1_, 1, b2_));

  // Legacy work enqueued after b2's op is not covered by that op...
  o_.Enqueue(legacy0_);  // (L, 3)
  EXPECT_EQ(o_.clock(b2_).Get(legacy0_), 2u);
  // ...but b2's next op joins it.
  o_.Enqueue(b2_);
  EXPECT_EQ(o_.clock(b2_).Get(legacy0_), 3u);
}

TEST_F(LegacyOrderingTest, NonBlockingStreamOptsOutInBothDirections) {
  o_.Enqueue(nb_);       // (nb, 1)
  o_.Enqueue(legacy0_);  // not after (nb, 1)
  EXPECT_EQ(o_.clock(legacy0_).Get(nb_), 0u);
  EXPECT_FALSE(o_.HappensBefore(nb_, 1, legacy0_));

  o_.Enqueue(nb_);  // not after (L, 1)
  EXPECT_EQ(o_.clock(nb_).Get(legacy0_), 0u);
  EXPECT_FALSE(o_.HappensBefore(legacy0_, 1, nb_));
  EXPECT_EQ(o_.OrderedAfter(nb_, legacy0_), 0u);
}

TEST_F(LegacyOrderingTest, LegacyStreamOfAnotherDeviceDoesNotOrder) {
  o_.Enqueue(b1_);
  o_.Enqueue(legacy1_);  // device 1's legacy op: not after device 0's b1
  EXPECT_EQ(o_.clock(legacy1_).Get(b1_), 0u);
  EXPECT_FALSE(o_.HappensBefore(b1_, 1, legacy1_));

  o_.Enqueue(b2_);  // device 0: not after device 1's legacy op
  EXPECT_EQ(o_.clock(b2_).Get(legacy1_), 0u);
  EXPECT_FALSE(o_.HappensBefore(legacy1_, 1, b2_));

  // Device 1's own blocking stream is ordered after it.
  o_.Enqueue(other_dev_);
  EXPECT_TRUE(o_.HappensBefore(legacy1_, 1, other_dev_));
}

TEST_F(LegacyOrderingTest, OrderedAfterIncludesTheLegacyJoinTheNextOpWouldMake) {
  // The pool asks before the allocation's op exists; the answer must already
  // count the implicit legacy synchronization that op will make.
  o_.Enqueue(b1_);  // (b1, 1), e.g. a free
  EXPECT_EQ(o_.clock(legacy0_).Get(b1_), 0u);
  EXPECT_EQ(o_.OrderedAfter(legacy0_, b1_), 1u);
  EXPECT_TRUE(o_.HappensBefore(b1_, 1, legacy0_));
  EXPECT_EQ(o_.OrderedAfter(nb_, b1_), 0u);
  EXPECT_EQ(o_.OrderedAfter(legacy1_, b1_), 0u);

  // And the op, once enqueued, does join exactly that.
  o_.Enqueue(legacy0_);
  EXPECT_EQ(o_.clock(legacy0_).Get(b1_), 1u);

  // A blocking stream's next op joins the legacy clock, and through it b1.
  EXPECT_EQ(o_.clock(b2_).Get(b1_), 0u);
  EXPECT_EQ(o_.OrderedAfter(b2_, b1_), 1u);
  EXPECT_EQ(o_.OrderedAfter(b2_, legacy0_), 1u);
  EXPECT_TRUE(o_.HappensBefore(b1_, 1, b2_));
  // b1's work after the legacy op is not covered for b2.
  o_.Enqueue(b1_);
  EXPECT_EQ(o_.OrderedAfter(b2_, b1_), 1u);
  EXPECT_FALSE(o_.HappensBefore(b1_, 2, b2_));

  o_.Enqueue(b2_);
  EXPECT_EQ(o_.clock(b2_).Get(b1_), 1u);
  EXPECT_EQ(o_.clock(b2_).Get(legacy0_), 1u);
}

TEST_F(LegacyOrderingTest, LegacyOrderingIncludesDestroyedStreamsWork) {
  // The ordering core never forgets a stream: a destroyed stream's enqueued
  // work still runs, so the legacy stream still waits for it. Destruction is
  // a runtime notion; here the stream simply gets no more ops.
  o_.Enqueue(b1_);
  o_.Enqueue(b1_);
  o_.Enqueue(legacy0_);
  EXPECT_EQ(o_.clock(legacy0_).Get(b1_), 2u);
}

// -------------------------------------------------------------- completion

TEST(OrderingCompletionTest, NothingIsCompleteUntilProven) {
  Ordering o;
  const StreamIndex s = o.AddStream(0, StreamKind::kBlocking);
  o.Enqueue(s);
  EXPECT_EQ(o.done(s), 0u);
  EXPECT_EQ(o.done().width(), 0u);
}

TEST(OrderingCompletionTest, ProvingAPointCompleteProvesItsWholeClock) {
  // Proving (c, p) complete proves (r, VC_p(c)[r]) for every r.
  Ordering o;
  const StreamIndex a = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex b = o.AddStream(0, StreamKind::kNonBlocking);
  const StreamIndex c = o.AddStream(0, StreamKind::kNonBlocking);
  o.Enqueue(a);
  o.Enqueue(a);
  const VectorClock ea = o.clock(a);  // (a, 2)
  o.Enqueue(a);                       // (a, 3): not covered
  o.Enqueue(b);
  o.JoinInto(b, ea);
  const VectorClock eb = o.clock(b);  // (b, 1), after (a, 2)
  o.Enqueue(c);
  o.Enqueue(c);
  o.JoinInto(c, eb);
  const VectorClock proof = o.clock(c);  // VC_2(c)
  o.Enqueue(c);                          // (c, 3): not covered

  o.MarkComplete(proof);
  EXPECT_EQ(o.done(c), 2u);
  EXPECT_EQ(o.done(b), 1u);
  EXPECT_EQ(o.done(a), 2u);
  EXPECT_TRUE(o.done() == proof);
}

TEST(OrderingCompletionTest, DoneNeverGoesBackwards) {
  Ordering o;
  const StreamIndex s = o.AddStream(0, StreamKind::kNonBlocking);
  o.Enqueue(s);
  const VectorClock early = o.clock(s);
  o.Enqueue(s);
  o.Enqueue(s);
  o.MarkComplete(o.clock(s));
  EXPECT_EQ(o.done(s), 3u);
  o.MarkComplete(early);  // an older proof arriving late
  EXPECT_EQ(o.done(s), 3u);
}

TEST_F(LegacyOrderingTest, CompletionOfALegacyOpProvesPriorBlockingWork) {
  o_.Enqueue(b1_);
  o_.Enqueue(b1_);
  o_.Enqueue(b2_);
  o_.Enqueue(nb_);
  o_.Enqueue(legacy0_);
  o_.MarkComplete(o_.clock(legacy0_));
  EXPECT_EQ(o_.done(legacy0_), 1u);
  EXPECT_EQ(o_.done(b1_), 2u);
  EXPECT_EQ(o_.done(b2_), 1u);
  EXPECT_EQ(o_.done(nb_), 0u);  // opted out: not proven by the legacy op

  // Completion of a blocking op after the legacy one proves the legacy op
  // and, through it, the blocking work before it.
  Ordering o;
  const StreamIndex l = o.AddStream(0, StreamKind::kLegacy);
  const StreamIndex x = o.AddStream(0, StreamKind::kBlocking);
  const StreamIndex y = o.AddStream(0, StreamKind::kBlocking);
  o.Enqueue(x);
  o.Enqueue(l);
  o.Enqueue(y);
  o.MarkComplete(o.clock(y));
  EXPECT_EQ(o.done(y), 1u);
  EXPECT_EQ(o.done(l), 1u);
  EXPECT_EQ(o.done(x), 1u);
}

}  // namespace
}  // namespace streampool::internal
