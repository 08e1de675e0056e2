// Unit tests of the ordering core (src/ordering/): vector clocks, stream
// positions, events as clock snapshots, happens-before, the legacy default
// stream, and completion proofs. Everything here is pure bookkeeping, so
// every expectation is an exact position derived from docs/design.md "Ordering".
#include "src/ordering/ordering.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// -------------------------------------------------------------- ClockTrie

TEST(ClockTrieTest, GetRaiseAndWidth) {
  ClockTrie t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.Width(), 0u);
  EXPECT_FALSE(t.Raise(5, 0));
  EXPECT_TRUE(t.Raise(5, 3));
  EXPECT_FALSE(t.Raise(5, 2));  // lower: ignored
  EXPECT_EQ(t.Width(), 6u);
  // Streams far apart make the tree taller; earlier entries stay.
  EXPECT_TRUE(t.Raise(16, 1));
  EXPECT_TRUE(t.Raise(70000, 9));
  EXPECT_TRUE(t.Raise(300, 4));
  EXPECT_EQ(t.Get(5), 3u);
  EXPECT_EQ(t.Get(16), 1u);
  EXPECT_EQ(t.Get(300), 4u);
  EXPECT_EQ(t.Get(70000), 9u);
  EXPECT_EQ(t.Get(4), 0u);
  EXPECT_EQ(t.Get(69999), 0u);
  EXPECT_EQ(t.Get(4000000000u), 0u);
  EXPECT_EQ(t.Width(), 70001u);
  std::vector<std::pair<StreamIndex, Position>> all;
  t.ForEach([&](StreamIndex s, Position p) { all.emplace_back(s, p); });
  EXPECT_EQ(all,
            (std::vector<std::pair<StreamIndex, Position>>{{5, 3}, {16, 1}, {300, 4}, {70000, 9}}));
}

// Copies are snapshots: raising one never shows in another, however many
// nodes they share. Checked against plain maps over random raises.
TEST(ClockTrieTest, CopiesAreIndependentSnapshots) {
  std::mt19937 rng(7);
  ClockTrie live;
  std::map<StreamIndex, Position> live_model;
  std::vector<std::pair<ClockTrie, std::map<StreamIndex, Position>>> snapshots;
  for (int step = 0; step < 4000; ++step) {
    // Mostly a few hundred streams, sometimes far ones (a taller tree).
    const StreamIndex s = rng() % 50 == 0 ? static_cast<StreamIndex>(rng() % 100000)
                                          : static_cast<StreamIndex>(rng() % 400);
    const Position p = 1 + rng() % 1000;
    const bool rose = p > live_model[s];
    EXPECT_EQ(live.Raise(s, p), rose);
    if (rose) live_model[s] = p;
    if (step % 97 == 0) snapshots.emplace_back(live, live_model);
    if (step % 401 == 0 && !snapshots.empty()) {
      // Raising a snapshot copies its own path; the live table is unmoved.
      auto& [table, model] = snapshots[rng() % snapshots.size()];
      const StreamIndex r = static_cast<StreamIndex>(rng() % 400);
      if (table.Raise(r, model[r] + 5000)) model[r] += 5000;
    }
  }
  snapshots.emplace_back(live, live_model);
  for (const auto& [table, model] : snapshots) {
    std::map<StreamIndex, Position> got;
    table.ForEach([&](StreamIndex s, Position p) { got[s] = p; });
    std::map<StreamIndex, Position> want;
    for (const auto& [s, p] : model) {
      if (p != 0) want[s] = p;
    }
    ASSERT_EQ(got, want);
    for (const auto& [s, p] : want) ASSERT_EQ(table.Get(s), p);
  }
}

// ForEachChanged reports every entry of `now` that differs from `before`,
// for versions of any heights.
TEST(ClockTrieTest, ForEachChangedCoversEveryDifference) {
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    ClockTrie before;
    const int first = static_cast<int>(rng() % 40);
    const StreamIndex limit_before = round % 3 == 0 ? 20 : round % 3 == 1 ? 400 : 9000;
    for (int i = 0; i < first; ++i) before.Raise(rng() % limit_before, 1 + rng() % 50);
    ClockTrie now = before;
    const StreamIndex limit_now = round % 2 == 0 ? 30 : 70000;
    for (int i = 0; i < static_cast<int>(rng() % 30); ++i) {
      now.Raise(rng() % limit_now, 1 + rng() % 100);
    }
    for (int order = 0; order < 2; ++order) {
      const ClockTrie& a = order == 0 ? now : before;
      const ClockTrie& b = order == 0 ? before : now;
      std::map<StreamIndex, Position> changed;
      ClockTrie::ForEachChanged(a, b, [&](StreamIndex s, Position p) { changed[s] = p; });
      a.ForEach([&](StreamIndex s, Position p) {
        if (b.Get(s) != p) {
          ASSERT_EQ(changed.count(s), 1u) << "round " << round << " stream " << s;
        }
      });
      for (const auto& [s, p] : changed) ASSERT_EQ(a.Get(s), p);
    }
    // A version against itself, or against an empty one.
    size_t n = 0;
    ClockTrie::ForEachChanged(now, now, [&](StreamIndex, Position) { ++n; });
    EXPECT_EQ(n, 0u);
    size_t all = 0;
    now.ForEach([&](StreamIndex, Position) { ++all; });
    ClockTrie::ForEachChanged(now, ClockTrie(), [&](StreamIndex, Position) { ++n; });
    EXPECT_EQ(n, all);
  }
}

// Snapshots handed to other threads are read and dropped there while the
// owner keeps raising its table (the runtime hands proofs to pools that way).
// Under TSan this checks the node counts' ordering.
TEST(ClockTrieTest, SnapshotsMayBeReadAndDroppedOnOtherThreads) {
  ClockTrie live;
  std::mutex mu;
  std::deque<ClockTrie> handed;
  std::atomic<bool> done{false};
  auto reader = [&] {
    for (;;) {
      ClockTrie t;
      {
        std::unique_lock<std::mutex> lock(mu);
        if (handed.empty()) {
          if (done.load()) return;
          lock.unlock();
          std::this_thread::yield();
          continue;
        }
        t = std::move(handed.front());
        handed.pop_front();
      }
      // Stream 0 was raised last before each copy: no entry of a snapshot
      // is later than its stream 0's.
      const Position v = t.Get(0);
      size_t later = 0;
      t.ForEach([&](StreamIndex, Position p) { later += p > v ? 1 : 0; });
      EXPECT_EQ(later, 0u);
      EXPECT_GE(v, 3u);
    }
  };
  std::thread r1(reader);
  std::thread r2(reader);
  for (Position v = 1; v <= 3000; ++v) {
    live.Raise(static_cast<StreamIndex>(v * 7919 % 5000) + 1, v);
    live.Raise(0, v);
    if (v % 3 == 0) {
      ClockTrie copy = live;
      std::lock_guard<std::mutex> lock(mu);
      handed.push_back(std::move(copy));
    }
  }
  done.store(true);
  r1.join();
  r2.join();
  EXPECT_EQ(live.Get(0), 3000u);
}

// ------------------------------------------------------- shared clock parts

TEST(VectorClockTest, SharedPartsReadThroughAndKeepTheLatestSnapshot) {
  ClockTrie table;
  table.Raise(3, 5);
  table.Raise(40, 2);
  const SharedClock early{/*owner=*/7, /*at=*/1, /*version=*/2, table};
  table.Raise(3, 6);
  table.Raise(41, 1);
  const SharedClock late{7, 4, 4, table};

  VectorClock c;
  c.Raise(3, 1);  // covered by the snapshot: dropped
  c.Raise(9, 8);
  EXPECT_TRUE(c.JoinShared(early));
  EXPECT_EQ(c.Get(3), 5u);
  EXPECT_EQ(c.Get(7), 1u);
  EXPECT_EQ(c.Get(9), 8u);
  EXPECT_EQ(c.Get(41), 0u);
  EXPECT_EQ(c.stored_entries(), 2u);  // (9, 8) and the snapshot
  EXPECT_EQ(c.width(), 41u);

  VectorClock d;
  d.JoinShared(late);
  EXPECT_FALSE(d.LessOrEqual(c));
  EXPECT_TRUE(c.Join(d));
  EXPECT_EQ(c.Get(3), 6u);
  EXPECT_EQ(c.Get(7), 4u);
  EXPECT_EQ(c.Get(41), 1u);
  EXPECT_EQ(c.shared().size(), 1u);
  // The earlier snapshot arriving late teaches nothing.
  EXPECT_FALSE(c.JoinShared(early));
  EXPECT_EQ(c.Get(3), 6u);
  EXPECT_TRUE(d.LessOrEqual(c));
  EXPECT_FALSE(c.LessOrEqual(d));  // (9, 8)

  // Equality is by value, whatever holds the entries.
  VectorClock spelled_out;
  late.table.ForEach([&](StreamIndex s, Position p) { spelled_out.Raise(s, p); });
  spelled_out.Raise(7, 4);
  EXPECT_TRUE(spelled_out == d);
  spelled_out.Raise(41, 2);
  EXPECT_FALSE(spelled_out == d);
}

TEST(VectorClockTest, FootprintCountsSharedNodesOnce) {
  ClockTrie table;
  for (StreamIndex s = 0; s < 1000; ++s) table.Raise(s, 1);
  ClockFootprint one;
  one.Add(table);
  std::vector<VectorClock> clocks(1000);
  ClockFootprint many;
  for (StreamIndex i = 0; i < clocks.size(); ++i) {
    clocks[i].JoinShared(SharedClock{0, 1, 1, table});
    clocks[i].Raise(5000 + i, 1);
    many.Add(clocks[i]);
  }
  EXPECT_EQ(many.entries(), one.entries() + 2 * clocks.size());
  EXPECT_LT(one.entries(), 2000u);
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

// ------------------------------------------- many streams, legacy ordering

// One device with a legacy stream and many blocking streams, plus a few
// non-blocking ones, and a second device.
class ManyStreamsTest : public ::testing::Test {
 protected:
  static constexpr int kBlocking = 600;

  void SetUp() override {
    legacy0_ = o_.AddStream(0, StreamKind::kLegacy);
    for (int i = 0; i < kBlocking; ++i) {
      blocking_.push_back(o_.AddStream(0, StreamKind::kBlocking));
      if (i % 100 == 0) non_blocking_.push_back(o_.AddStream(0, StreamKind::kNonBlocking));
    }
    legacy1_ = o_.AddStream(1, StreamKind::kLegacy);
    other_dev_ = o_.AddStream(1, StreamKind::kBlocking);
  }
  // Blocking stream i gets 1 + i % 3 ops.
  void OpsOnEveryBlockingStream() {
    for (int i = 0; i < kBlocking; ++i) {
      for (int k = 0; k <= i % 3; ++k) o_.Enqueue(blocking_[i]);
    }
  }
  static Position OpsOf(int i) { return 1 + i % 3; }

  Ordering o_;
  StreamIndex legacy0_ = kNoStream;
  StreamIndex legacy1_ = kNoStream;
  StreamIndex other_dev_ = kNoStream;
  std::vector<StreamIndex> blocking_;
  std::vector<StreamIndex> non_blocking_;
};

TEST_F(ManyStreamsTest, LegacyOpWaitsForEveryBlockingStreamAndNoOther) {
  OpsOnEveryBlockingStream();
  for (StreamIndex nb : non_blocking_) o_.Enqueue(nb);
  o_.Enqueue(other_dev_);

  // Before the legacy op, the pool's question already counts its join...
  for (int i = 0; i < kBlocking; ++i) {
    EXPECT_EQ(o_.OrderedAfter(legacy0_, blocking_[i]), OpsOf(i));
    EXPECT_EQ(o_.PointClock(legacy0_).Get(blocking_[i]), OpsOf(i)) << i;
    EXPECT_EQ(o_.clock(legacy0_).Get(blocking_[i]), 0u);
  }
  EXPECT_EQ(o_.OrderedAfter(legacy0_, non_blocking_[0]), 0u);
  EXPECT_EQ(o_.OrderedAfter(legacy0_, other_dev_), 0u);

  // ...and the op waits for exactly those points.
  absl::InlinedVector<std::pair<StreamIndex, Position>, 2> joined;
  EXPECT_EQ(o_.Enqueue(legacy0_, &joined), 1u);
  ASSERT_EQ(joined.size(), static_cast<size_t>(kBlocking));
  std::sort(joined.begin(), joined.end());
  for (int i = 0; i < kBlocking; ++i) {
    EXPECT_EQ(joined[i], std::make_pair(blocking_[i], OpsOf(i)));
  }
  const VectorClock l = o_.clock(legacy0_);
  for (int i = 0; i < kBlocking; ++i) EXPECT_EQ(l.Get(blocking_[i]), OpsOf(i));
  for (StreamIndex nb : non_blocking_) EXPECT_EQ(l.Get(nb), 0u);
  EXPECT_EQ(l.Get(other_dev_), 0u);
  EXPECT_EQ(l.Get(legacy1_), 0u);
  EXPECT_EQ(l.Get(legacy0_), 1u);

  // A second legacy op with nothing new waits for nothing.
  joined.clear();
  o_.Enqueue(legacy0_, &joined);
  EXPECT_TRUE(joined.empty());
  // One blocking stream moves on: only it is waited for next time.
  o_.Enqueue(blocking_[7]);
  o_.Enqueue(legacy0_, &joined);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0], std::make_pair(blocking_[7], OpsOf(7) + 1));
}

TEST_F(ManyStreamsTest, BlockingStreamsAreOrderedAfterEachOtherThroughTheLegacyStream) {
  OpsOnEveryBlockingStream();
  o_.Enqueue(legacy0_);  // (L, 1): after every blocking stream's work so far

  // Before its next op, blocking stream j's answer includes the join that op
  // makes; its stored clock does not yet.
  const StreamIndex j = blocking_[kBlocking - 1];
  EXPECT_EQ(o_.OrderedAfter(j, blocking_[0]), OpsOf(0));
  EXPECT_EQ(o_.clock(j).Get(blocking_[0]), 0u);

  absl::InlinedVector<std::pair<StreamIndex, Position>, 2> joined;
  for (int i = 0; i < kBlocking; ++i) {
    joined.clear();
    EXPECT_EQ(o_.Enqueue(blocking_[i], &joined), OpsOf(i) + 1);
    ASSERT_EQ(joined.size(), 1u);
    EXPECT_EQ(joined[0], std::make_pair(legacy0_, Position{1}));
  }
  // Every blocking stream is now ordered after every other's work before the
  // legacy op, and not after anything later.
  for (int a = 0; a < kBlocking; a += 37) {
    const VectorClock ca = o_.clock(blocking_[a]);
    EXPECT_EQ(ca.Get(legacy0_), 1u);
    EXPECT_EQ(ca.Get(blocking_[a]), OpsOf(a) + 1);
    for (int b = 0; b < kBlocking; ++b) {
      if (b == a) continue;
      EXPECT_EQ(ca.Get(blocking_[b]), OpsOf(b)) << a << " " << b;
      EXPECT_TRUE(o_.HappensBefore(blocking_[b], OpsOf(b), blocking_[a]));
      EXPECT_FALSE(o_.HappensBefore(blocking_[b], OpsOf(b) + 1, blocking_[a]));
      EXPECT_EQ(o_.OrderedAfter(blocking_[a], blocking_[b]), OpsOf(b));
    }
    for (StreamIndex nb : non_blocking_) EXPECT_EQ(ca.Get(nb), 0u);
    EXPECT_EQ(o_.PointClock(blocking_[a]).Get(blocking_[(a + 1) % kBlocking]),
              OpsOf((a + 1) % kBlocking));
  }
  // The legacy stream's next op would wait for their new work.
  for (int i = 0; i < kBlocking; ++i) {
    EXPECT_EQ(o_.OrderedAfter(legacy0_, blocking_[i]), OpsOf(i) + 1);
  }
  // Points (allocations, frees) advance positions the legacy op joins.
  o_.AdvancePoint(blocking_[3]);
  EXPECT_EQ(o_.OrderedAfter(legacy0_, blocking_[3]), OpsOf(3) + 2);
  EXPECT_EQ(o_.PointClock(legacy0_).Get(blocking_[3]), OpsOf(3) + 2);
  o_.Enqueue(legacy0_);
  EXPECT_EQ(o_.clock(legacy0_).Get(blocking_[3]), OpsOf(3) + 2);
  EXPECT_EQ(o_.clock(legacy0_).Get(blocking_[4]), OpsOf(4) + 1);
}

TEST_F(ManyStreamsTest, EventWaitsCarryLegacyOrderingAcrossStreamsAndDevices) {
  OpsOnEveryBlockingStream();
  // A non-blocking stream's work reaches blocking stream 5 by an event.
  const StreamIndex nb = non_blocking_[1];
  o_.Enqueue(nb);
  o_.Enqueue(nb);
  const VectorClock from_nb = o_.clock(nb);
  o_.Enqueue(blocking_[5]);
  o_.JoinInto(blocking_[5], from_nb);
  o_.Enqueue(legacy0_);  // (L, 1) carries (nb, 2) through blocking stream 5
  EXPECT_EQ(o_.clock(legacy0_).Get(nb), 2u);

  // Blocking stream 9 records an event after joining (L, 1); device 1's
  // blocking stream waits on it, and so learns every blocking stream of
  // device 0 and nb, but not device 0's non-blocking streams' other work.
  o_.Enqueue(blocking_[9]);
  const VectorClock e9 = o_.clock(blocking_[9]);
  EXPECT_EQ(e9.Get(legacy0_), 1u);
  o_.Enqueue(other_dev_);
  o_.JoinInto(other_dev_, e9);
  const VectorClock od = o_.clock(other_dev_);
  for (int i = 0; i < kBlocking; ++i) {
    const Position expect = i == 9 ? OpsOf(i) + 1 : i == 5 ? OpsOf(i) + 1 : OpsOf(i);
    EXPECT_EQ(od.Get(blocking_[i]), expect) << i;
  }
  EXPECT_EQ(od.Get(nb), 2u);
  EXPECT_EQ(od.Get(non_blocking_[0]), 0u);
  EXPECT_EQ(od.Get(legacy0_), 1u);

  // Device 1's legacy op joins its blocking stream, and with it all of that.
  o_.Enqueue(legacy1_);
  const VectorClock l1 = o_.clock(legacy1_);
  EXPECT_EQ(l1.Get(other_dev_), 1u);
  EXPECT_EQ(l1.Get(legacy0_), 1u);
  for (int i = 0; i < kBlocking; i += 11) EXPECT_EQ(l1.Get(blocking_[i]), od.Get(blocking_[i]));
  EXPECT_EQ(l1.Get(nb), 2u);

  // And device 0's legacy stream, waiting on an event recorded there, gets
  // device 1's legacy op and through it nothing new of its own device.
  const VectorClock el1 = o_.clock(legacy1_);
  o_.Enqueue(legacy0_);
  o_.JoinInto(legacy0_, el1);
  EXPECT_EQ(o_.clock(legacy0_).Get(legacy1_), 1u);
  EXPECT_EQ(o_.clock(legacy0_).Get(other_dev_), 1u);
  EXPECT_EQ(o_.clock(legacy0_).Get(blocking_[9]), OpsOf(9) + 1);

  // A blocking stream of device 0 now learns device 1's work through its
  // own legacy stream.
  o_.Enqueue(blocking_[100]);
  EXPECT_EQ(o_.clock(blocking_[100]).Get(legacy1_), 1u);
  EXPECT_EQ(o_.clock(blocking_[100]).Get(other_dev_), 1u);
  EXPECT_TRUE(o_.HappensBefore(other_dev_, 1, blocking_[100]));
  EXPECT_FALSE(o_.HappensBefore(other_dev_, 2, blocking_[100]));
}

TEST_F(ManyStreamsTest, ProvingOneLegacyOpCompleteProvesEveryBlockingStreamsPriorWork) {
  OpsOnEveryBlockingStream();
  o_.Enqueue(legacy0_);
  for (int i = 0; i < kBlocking; ++i) o_.Enqueue(blocking_[i]);  // not covered by (L, 1)
  o_.MarkComplete(o_.clock(legacy0_));
  EXPECT_EQ(o_.done(legacy0_), 1u);
  for (int i = 0; i < kBlocking; ++i) EXPECT_EQ(o_.done(blocking_[i]), OpsOf(i));
  for (StreamIndex nb : non_blocking_) EXPECT_EQ(o_.done(nb), 0u);

  // A blocking op after (L, 1) proves it, and through it the rest.
  Ordering o;
  const StreamIndex l = o.AddStream(0, StreamKind::kLegacy);
  std::vector<StreamIndex> b;
  for (int i = 0; i < kBlocking; ++i) b.push_back(o.AddStream(0, StreamKind::kBlocking));
  for (int i = 0; i < kBlocking; ++i) o.Enqueue(b[i]);
  o.Enqueue(l);
  o.Enqueue(b[0]);
  const VectorClock proof = o.clock(b[0]);
  o.Enqueue(l);  // (L, 2): not covered
  o.MarkComplete(proof);
  EXPECT_EQ(o.done(l), 1u);
  EXPECT_EQ(o.done(b[0]), 2u);
  for (int i = 1; i < kBlocking; ++i) EXPECT_EQ(o.done(b[i]), 1u);
  EXPECT_TRUE(o.done() == proof);
  EXPECT_TRUE(proof.LessOrEqual(o.done()));
}

TEST_F(ManyStreamsTest, ReusedSlotsFollowTheirNewKind) {
  OpsOnEveryBlockingStream();
  // Blocking stream 2's slot comes back as a non-blocking stream: the legacy
  // stream stops waiting for it, and its positions continue.
  const StreamIndex s = blocking_[2];
  o_.RetireStream(s);
  o_.Enqueue(legacy0_);  // a destroyed stream's work is still waited for
  EXPECT_EQ(o_.clock(legacy0_).Get(s), OpsOf(2));
  o_.ReuseSlot(s);
  EXPECT_EQ(o_.AddStream(0, StreamKind::kNonBlocking), s);
  EXPECT_EQ(o_.Enqueue(s), OpsOf(2) + 1);
  EXPECT_EQ(o_.OrderedAfter(legacy0_, s), OpsOf(2));
  o_.Enqueue(legacy0_);
  EXPECT_EQ(o_.clock(legacy0_).Get(s), OpsOf(2));
  EXPECT_EQ(o_.OrderedAfter(s, legacy0_), 0u);

  // Another slot comes back as a blocking stream of device 1.
  const StreamIndex t = blocking_[4];
  o_.RetireStream(t);
  o_.ReuseSlot(t);
  EXPECT_EQ(o_.AddStream(1, StreamKind::kBlocking), t);
  o_.Enqueue(t);
  EXPECT_EQ(o_.clock(t).Get(legacy1_), 0u);
  EXPECT_EQ(o_.OrderedAfter(legacy1_, t), OpsOf(4) + 1);
  EXPECT_EQ(o_.OrderedAfter(legacy0_, t), OpsOf(4));
  o_.Enqueue(legacy1_);
  EXPECT_EQ(o_.clock(legacy1_).Get(t), OpsOf(4) + 1);
  o_.Enqueue(t);
  EXPECT_EQ(o_.clock(t).Get(legacy1_), 1u);
  EXPECT_EQ(o_.clock(t).Get(legacy0_), 0u);
}

// A dense reference of docs/design.md "Ordering: vector clocks": every clock as
// wide as the streams, joined whole. Slow and quadratic, but plainly right.
class DenseOrdering {
 public:
  using Clock = std::vector<Position>;

  static Position At(const Clock& c, StreamIndex s) { return s < c.size() ? c[s] : 0; }
  static void Raise(Clock& c, StreamIndex s, Position p) {
    if (p == 0) return;
    if (c.size() <= s) c.resize(s + 1, 0);
    c[s] = std::max(c[s], p);
  }
  static void Join(Clock& into, const Clock& from) {
    for (StreamIndex i = 0; i < from.size(); ++i) Raise(into, i, from[i]);
  }

  StreamIndex AddStream(int device, StreamKind kind) {
    StreamIndex s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = static_cast<StreamIndex>(streams_.size());
      streams_.emplace_back();
    }
    streams_[s].device = device;
    streams_[s].kind = kind;
    streams_[s].legacy_seen = 0;
    if (kind == StreamKind::kLegacy) legacy_[device] = s;
    return s;
  }
  // A destroyed stream's work still runs: nothing changes until its slot
  // comes back.
  void RetireStream(StreamIndex) {}
  void ReuseSlot(StreamIndex s) { free_.push_back(s); }

  std::vector<std::pair<StreamIndex, Position>> Enqueue(StreamIndex s) {
    std::vector<std::pair<StreamIndex, Position>> joined;
    Stream& st = streams_[s];
    if (st.kind == StreamKind::kLegacy) {
      for (StreamIndex b = 0; b < streams_.size(); ++b) {
        if (b == s || !BlockingOn(b, st.device)) continue;
        if (streams_[b].pos > At(st.vc, b)) {
          joined.emplace_back(b, streams_[b].pos);
          Join(st.vc, Stored(b));
        }
      }
    } else if (st.kind == StreamKind::kBlocking) {
      auto it = legacy_.find(st.device);
      if (it != legacy_.end() && streams_[it->second].pos > st.legacy_seen) {
        joined.emplace_back(it->second, streams_[it->second].pos);
        Join(st.vc, Stored(it->second));
        st.legacy_seen = streams_[it->second].pos;
      }
    }
    Raise(st.vc, s, ++st.pos);
    return joined;
  }
  Position AdvancePoint(StreamIndex s) { return ++streams_[s].pos; }
  Clock Stored(StreamIndex s) const {
    Clock c = streams_[s].vc;
    Raise(c, s, streams_[s].pos);
    return c;
  }
  Clock PointClock(StreamIndex t) const {
    Clock c = Stored(t);
    const Stream& st = streams_[t];
    if (st.kind == StreamKind::kLegacy) {
      for (StreamIndex b = 0; b < streams_.size(); ++b) {
        if (b != t && BlockingOn(b, st.device)) Join(c, Stored(b));
      }
    } else if (st.kind == StreamKind::kBlocking) {
      auto it = legacy_.find(st.device);
      if (it != legacy_.end()) Join(c, Stored(it->second));
    }
    return c;
  }
  Position OrderedAfter(StreamIndex t, StreamIndex s) const { return At(PointClock(t), s); }
  void JoinInto(StreamIndex s, const Clock& snapshot) { Join(streams_[s].vc, snapshot); }
  void OrderAfterPoint(StreamIndex s, StreamIndex on, Position at) {
    Raise(streams_[s].vc, on, at);
  }
  void MarkComplete(const Clock& proof) { Join(done_, proof); }
  const Clock& done() const { return done_; }
  Position pos(StreamIndex s) const { return streams_[s].pos; }
  size_t stream_count() const { return streams_.size(); }
  StreamKind kind(StreamIndex s) const { return streams_[s].kind; }
  StreamIndex legacy(int device) const { return legacy_.at(device); }

 private:
  struct Stream {
    int device = 0;
    StreamKind kind = StreamKind::kBlocking;
    Position pos = 0;
    Clock vc;
    Position legacy_seen = 0;
  };
  bool BlockingOn(StreamIndex b, int device) const {
    return streams_[b].device == device && streams_[b].kind == StreamKind::kBlocking;
  }

  std::vector<Stream> streams_;
  std::map<int, StreamIndex> legacy_;
  std::vector<StreamIndex> free_;
  Clock done_;
};

// Random programs over many streams on three devices, replayed on Ordering
// and on the dense reference: every clock, snapshot, answer, implicit wait
// and proof must agree exactly.
class OrderingVersusDenseTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  void ExpectSameClock(const VectorClock& got, const DenseOrdering::Clock& want,
                       const std::string& what) {
    const StreamIndex n = static_cast<StreamIndex>(model_.stream_count() + 1);
    for (StreamIndex r = 0; r < n; ++r) {
      ASSERT_EQ(got.Get(r), DenseOrdering::At(want, r))
          << what << "[" << r << "] at step " << step_;
    }
  }
  void CheckAll() {
    const StreamIndex n = static_cast<StreamIndex>(model_.stream_count());
    ASSERT_EQ(o_.stream_count(), model_.stream_count());
    for (StreamIndex t = 0; t < n; ++t) {
      ASSERT_EQ(o_.pos(t), model_.pos(t));
      ASSERT_NO_FATAL_FAILURE(
          ExpectSameClock(o_.clock(t), model_.Stored(t), "VC(" + std::to_string(t) + ")"));
      ASSERT_NO_FATAL_FAILURE(ExpectSameClock(o_.PointClock(t), model_.PointClock(t),
                                              "PointClock(" + std::to_string(t) + ")"));
      const DenseOrdering::Clock next = model_.PointClock(t);
      for (StreamIndex s = 0; s < n; ++s) {
        ASSERT_EQ(o_.OrderedAfter(t, s), DenseOrdering::At(next, s))
            << "OrderedAfter(" << t << ", " << s << ") at step " << step_;
      }
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSameClock(o_.done(), model_.done(), "done"));
    for (size_t e = 0; e < events_.size(); ++e) {
      ASSERT_NO_FATAL_FAILURE(
          ExpectSameClock(events_[e], model_events_[e], "event " + std::to_string(e)));
    }
  }

  Ordering o_;
  DenseOrdering model_;
  std::vector<VectorClock> events_;
  std::vector<DenseOrdering::Clock> model_events_;
  int step_ = 0;
};

TEST_P(OrderingVersusDenseTest, RandomProgramsAgree) {
  std::mt19937 rng(GetParam());
  auto uniform = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  constexpr int kDevices = 3;
  std::vector<StreamIndex> live;
  std::vector<StreamIndex> retired;
  auto add = [&](int device, StreamKind kind) {
    const StreamIndex a = o_.AddStream(device, kind);
    const StreamIndex b = model_.AddStream(device, kind);
    ASSERT_EQ(a, b);
    if (kind != StreamKind::kLegacy) live.push_back(a);
  };
  // Device 2's legacy stream comes after some of its blocking streams.
  for (int d = 0; d < kDevices - 1; ++d) add(d, StreamKind::kLegacy);
  for (int i = 0; i < 40; ++i) {
    const int device = static_cast<int>(uniform(kDevices));
    add(device, uniform(4) == 0 ? StreamKind::kNonBlocking : StreamKind::kBlocking);
  }
  add(kDevices - 1, StreamKind::kLegacy);
  std::vector<StreamIndex> legacy;
  for (int d = 0; d < kDevices; ++d) legacy.push_back(model_.legacy(d));

  constexpr int kSteps = 1500;
  for (step_ = 0; step_ < kSteps; ++step_) {
    // Streams that may get work: live ones and the legacy streams.
    std::vector<StreamIndex> active = live;
    active.insert(active.end(), legacy.begin(), legacy.end());
    active.insert(active.end(), legacy.begin(), legacy.end());  // legacy work is common
    const StreamIndex s = active[uniform(active.size())];
    const size_t op = uniform(100);
    if (op < 35) {
      absl::InlinedVector<std::pair<StreamIndex, Position>, 2> joined;
      const Position p = o_.Enqueue(s, &joined);
      std::vector<std::pair<StreamIndex, Position>> want = model_.Enqueue(s);
      ASSERT_EQ(p, model_.pos(s));
      std::vector<std::pair<StreamIndex, Position>> got(joined.begin(), joined.end());
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << "implicit waits of " << s << " at step " << step_;
    } else if (op < 50) {
      ASSERT_EQ(o_.AdvancePoint(s), model_.AdvancePoint(s));
    } else if (op < 60) {
      // Record an event (a new one, or re-record an old one).
      if (events_.empty() || uniform(2) == 0) {
        events_.push_back(o_.clock(s));
        model_events_.push_back(model_.Stored(s));
      } else {
        const size_t e = uniform(events_.size());
        events_[e] = o_.clock(s);
        model_events_[e] = model_.Stored(s);
      }
    } else if (op < 72) {
      // Wait on an event: the wait op, then its join.
      if (events_.empty()) continue;
      const size_t e = uniform(events_.size());
      o_.Enqueue(s);
      model_.Enqueue(s);
      o_.JoinInto(s, events_[e]);
      model_.JoinInto(s, model_events_[e]);
    } else if (op < 78) {
      // The pool's inserted wait on another stream's point.
      const StreamIndex on = active[uniform(active.size())];
      if (on == s || model_.pos(on) == 0) continue;
      const Position at = 1 + uniform(model_.pos(on));
      o_.Enqueue(s);
      model_.Enqueue(s);
      o_.OrderAfterPoint(s, on, at);
      model_.OrderAfterPoint(s, on, at);
    } else if (op < 84) {
      // A synchronize or query proves a stream's clock, or an event's.
      if (uniform(2) == 0 || events_.empty()) {
        o_.MarkComplete(o_.clock(s));
        model_.MarkComplete(model_.Stored(s));
      } else {
        const size_t e = uniform(events_.size());
        o_.MarkComplete(events_[e]);
        model_.MarkComplete(model_events_[e]);
      }
    } else if (op < 88) {
      // Destroy a stream; its slot comes back later.
      if (live.size() < 8 || model_.kind(s) == StreamKind::kLegacy) continue;
      o_.RetireStream(s);
      model_.RetireStream(s);
      live.erase(std::find(live.begin(), live.end(), s));
      retired.push_back(s);
    } else if (op < 91) {
      if (retired.empty()) continue;
      const size_t i = uniform(retired.size());
      o_.ReuseSlot(retired[i]);
      model_.ReuseSlot(retired[i]);
      retired.erase(retired.begin() + static_cast<ptrdiff_t>(i));
    } else if (op < 95) {
      if (o_.NextSlot() == o_.stream_count() && o_.stream_count() > 70) continue;
      ASSERT_NO_FATAL_FAILURE(
          add(static_cast<int>(uniform(kDevices)),
              uniform(3) == 0 ? StreamKind::kNonBlocking : StreamKind::kBlocking));
    } else {
      // A legacy op, whatever stream was picked.
      const StreamIndex l = legacy[uniform(kDevices)];
      absl::InlinedVector<std::pair<StreamIndex, Position>, 2> joined;
      o_.Enqueue(l, &joined);
      std::vector<std::pair<StreamIndex, Position>> want = model_.Enqueue(l);
      std::vector<std::pair<StreamIndex, Position>> got(joined.begin(), joined.end());
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << "implicit waits of " << l << " at step " << step_;
    }
    if (step_ % 7 == 0 || step_ > kSteps - 20) {
      ASSERT_NO_FATAL_FAILURE(CheckAll());
    }
  }
  ASSERT_NO_FATAL_FAILURE(CheckAll());
}

INSTANTIATE_TEST_SUITE_P(Seeds, OrderingVersusDenseTest, ::testing::Values(1u, 2u, 3u, 4u, 5u, 6u));

// --------------------------------------------------------------- scale

// Clocks scale with interaction (docs/design.md): 16 000 blocking streams, each
// ordered with every other through the legacy stream, cost a few entries
// each. Dense clocks joined whole held every stream's entry in every blocking
// stream's clock, over N² = 256 million entries here.
TEST(OrderingScaleTest, ManyBlockingStreamsHoldLinearlyManyClockEntries) {
  constexpr StreamIndex kStreams = 16000;
  Ordering o;
  const StreamIndex legacy = o.AddStream(0, StreamKind::kLegacy);
  std::vector<StreamIndex> b;
  for (StreamIndex i = 0; i < kStreams; ++i) {
    b.push_back(o.AddStream(0, StreamKind::kBlocking));
    o.Enqueue(b.back());  // (b, 1)
  }
  const StreamIndex nb = o.AddStream(0, StreamKind::kNonBlocking);
  o.Enqueue(nb);
  o.Enqueue(legacy);  // (L, 1): after every (b, 1)
  for (StreamIndex i = 0; i < kStreams; ++i) {
    o.Enqueue(b[i]);       // (b, 2): after (L, 1)
    o.AdvancePoint(b[i]);  // an allocation
    o.AdvancePoint(b[i]);  // its free
  }
  o.Enqueue(legacy);  // (L, 2): after every (b, 4)
  const VectorClock e = o.clock(b[kStreams / 2]);
  o.Enqueue(nb);
  o.JoinInto(nb, e);  // a non-blocking stream learns of them all by an event
  // A device synchronize: every stream's clock proven.
  for (StreamIndex i = 0; i < kStreams; ++i) o.MarkComplete(o.clock(b[i]));
  o.MarkComplete(o.clock(legacy));
  o.MarkComplete(o.clock(nb));

  EXPECT_LE(o.ClockEntries(), size_t{8} * kStreams);

  // And the answers are those of dense clocks.
  for (StreamIndex i = 0; i < kStreams; i += 997) {
    for (StreamIndex j = 0; j < kStreams; j += 1009) {
      if (i == j) continue;
      EXPECT_EQ(o.clock(b[i]).Get(b[j]), 1u);
      EXPECT_EQ(o.OrderedAfter(b[i], b[j]), 4u);  // through (L, 2), which the next op joins
      EXPECT_TRUE(o.HappensBefore(b[j], 4, b[i]));
      EXPECT_FALSE(o.HappensBefore(b[j], 5, b[i]));
      EXPECT_EQ(o.OrderedAfter(nb, b[j]), 1u);
    }
    EXPECT_EQ(o.clock(legacy).Get(b[i]), 4u);
    EXPECT_EQ(o.OrderedAfter(legacy, b[i]), 4u);
    EXPECT_EQ(o.done(b[i]), 4u);
  }
  EXPECT_EQ(o.done(legacy), 2u);
  EXPECT_EQ(o.done(nb), 2u);
  EXPECT_EQ(o.clock(nb).Get(legacy), 1u);
}

}  // namespace
}  // namespace streampool::internal
