// The ordering core: stream positions, vector clocks, events as clock
// snapshots, the legacy default stream, and what synchronize calls have
// proven complete.
//
//   pos(S)    ops enqueued on S so far; the n-th op has position n.
//   VC(S)     for each R, the highest position of R that every future op of S
//             is ordered after; VC(S)[S] == pos(S).
//   done      for each R, the highest position of R proven complete.
//
// Happens-before of a free point (S, f) and the next op of T is the test
// VC(T)[S] >= f. Because clocks are joined whole, they are transitively
// closed: proving (S, p) complete proves (R, VC_p(S)[R]) for every R by one
// join into `done`.
//
// The legacy stream as one epoch. A legacy op is ordered after all prior work
// of every blocking stream of its device, and a blocking stream's next op
// after it; joined as values, N blocking streams would each carry N entries.
// Instead the legacy stream's clock is a copy-on-write table (ClockTrie) of
// its device: a legacy op raises, for each blocking stream whose position
// moved since, that stream's entry and what its clock holds (reading every
// blocking stream's position, copying no clock), and a blocking stream's op
// after a legacy op joins a reference to the table as it stands (a
// SharedClock: "ordered after legacy position L"). Questions about a blocking
// stream answer through that reference, a legacy stream's through its table
// and its device's blocking positions (about any other stream, through
// their clocks, as its next op would join them). Clocks otherwise hold
// entries only for streams an order was established with (vector_clock.h),
// so memory grows with interaction: each blocking stream costs its own
// entries and one reference, and each table version kept alive by a
// reference costs one copied path. The values every question answers are
// those of dense clocks joined whole.
//
// Slot reuse. A stream index is a slot, not a name. A destroyed stream's slot
// is retired, and the runtime hands it back (ReuseSlot) once the executor
// reports every op it ever had complete and no pool still holds a free
// pending on it; nothing can then wait for, or be owed, any of its positions.
// A new stream in that slot continues its positions (its first op is pos(S)
// + 1) and starts from the old clock. That is the epoch tag, as
// ThreadSanitizer tags reused thread slots: a position names one op of one
// incarnation forever, so an event snapshot, a clock entry or a free point of
// the dead stream never reads as its successor's, and every statement about
// the old positions stays true — they are complete, and the successor is
// ordered after them at no cost. Slots are therefore as many as the most
// streams alive at once (plus those destroyed with work still running), not
// as every stream ever made.
#ifndef STREAMPOOL_SRC_ORDERING_ORDERING_H_
#define STREAMPOOL_SRC_ORDERING_ORDERING_H_

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "src/ordering/vector_clock.h"
#include "src/util/spin_lock.h"
#include "src/util/stable_vector.h"
#include "streampool/executor.h"

namespace streampool::internal {

enum class StreamKind {
  kBlocking,     // synchronizes with the device's legacy stream
  kNonBlocking,  // opts out of legacy-stream ordering
  kLegacy,       // the device's default (null) stream
};

class Ordering {
 public:
  // Slots are stored in place for the runtime's life (StableVector), so
  // that pos(S) can be read and advanced without the lock that guards the
  // rest: a point (AdvancePoint) touches only pos(S).
  Ordering() = default;

  // The slot AddStream will use next: a reusable retired slot, or a new one.
  StreamIndex NextSlot() const;
  StreamIndex AddStream(int device, StreamKind kind);
  // The stream in slot s is destroyed (never a legacy stream).
  void RetireStream(StreamIndex s);
  // Slot s, retired, may hold a new stream (the caller checked "Slot reuse").
  void ReuseSlot(StreamIndex s);
  // Slots ever made: live, retired or free (the clock width bound).
  size_t stream_count() const { return streams_.size(); }
  // Clock entries held (stream clocks, legacy tables, done), each shared
  // table node once: what memory clocks cost, for tests and tools. Walks
  // every clock.
  size_t ClockEntries() const;
  int device(StreamIndex s) const { return streams_[s].device; }
  StreamKind kind(StreamIndex s) const { return streams_[s].kind; }

  // Appends one op to `s` (s's stream lock held), applying legacy-stream
  // ordering, and returns its
  // position. If `joined` is given, it receives the points of other streams
  // the op was newly ordered after by that ordering (what an executor must
  // make it wait for).
  Position Enqueue(StreamIndex s,
                   absl::InlinedVector<std::pair<StreamIndex, Position>, 2>* joined = nullptr);
  // Advances pos(s) for a point that is not an op (an allocation or a free,
  // docs/design.md "Performance model"): it keeps its place in stream order but
  // enqueues nothing and joins no legacy-stream clock (no op of s waits
  // because of it; the next op makes that join). Returns the new position.
  // Takes only s's stream lock (the caller holds it), not the lock that
  // guards the rest (see the constructor).
  ABSL_ATTRIBUTE_ALWAYS_INLINE Position AdvancePoint(StreamIndex s) {
    return AdvancePoint(position(s));
  }
  // The same through pos(s)'s place, which stays put for the runtime's life
  // (the fast tier keeps it rather than find it at every call).
  std::atomic<Position>& position(StreamIndex s) { return streams_[s].pos; }
  ABSL_ATTRIBUTE_ALWAYS_INLINE static Position AdvancePoint(std::atomic<Position>& pos) {
    const Position p = pos.load(std::memory_order_relaxed) + 1;
    pos.store(p, std::memory_order_release);
    return p;
  }
  // The lock every advance of pos(s) holds, points and ops alike: one per
  // slot, for the runtime's life. Front caches of s's frees share it (the
  // stream's own lock, docs/design.md "Performance model").
  SpinLock& stream_lock(StreamIndex s) const { return streams_[s].lock; }
  // VC of a point about to be made on t: VC(t) joined with the legacy-stream
  // ordering an op there would make (for the checker's records of points).
  VectorClock PointClock(StreamIndex t) const;
  // Joins `snapshot` into VC(s): the op just enqueued on `s` (a wait) and
  // everything after it are ordered after the snapshot.
  void JoinInto(StreamIndex s, const VectorClock& snapshot);
  // Orders s after the single point (on, at): an inserted internal wait.
  void OrderAfterPoint(StreamIndex s, StreamIndex on, Position at);

  Position pos(StreamIndex s) const { return streams_[s].pos.load(std::memory_order_acquire); }
  // VC(s), own entry included (points advance pos(s) without touching the
  // stored clock, which has no own entry). A copy that shares the legacy
  // tables it refers to.
  VectorClock clock(StreamIndex s) const;
  // VC(t)[s] for t's next op, including the legacy-stream join that op would
  // make. Used by the pool before the op exists.
  Position OrderedAfter(StreamIndex t, StreamIndex s) const;
  bool HappensBefore(StreamIndex s, Position f, StreamIndex t) const {
    return s == t ? f <= pos(t) : OrderedAfter(t, s) >= f;
  }

  // Records that everything `proof` covers has completed.
  void MarkComplete(const VectorClock& proof) { done_.Join(proof); }
  Position done(StreamIndex s) const { return done_.Get(s); }
  const VectorClock& done() const { return done_; }

  // The device's legacy stream (kNoStream before it is made), and each
  // blocking stream of the device: what the legacy-stream rule relates, so
  // that a caller iterates those, not every slot.
  StreamIndex legacy_stream(int device) const { return LegacyOf(device); }
  template <typename Fn>
  void ForEachBlocking(int device, Fn fn) const {
    if (static_cast<size_t>(device) >= devices_.size()) return;
    for (const BlockingStream& b : devices_[device].blocking) fn(b.stream);
  }

 private:
  // A cache line each: pos and the stream lock are written by the stream's
  // own host thread on every allocation and free, and must not share a line
  // with another stream's.
  struct alignas(64) StreamState {
    StreamState(int d, StreamKind k) : device(d), kind(k) {}
    int device;
    StreamKind kind;
    // Advanced under `lock` (ops and points alike); read anywhere.
    std::atomic<Position> pos{0};
    mutable SpinLock lock;
    // VC(s) but its own entry, which pos(s) gives. Empty for a legacy
    // stream, whose clock is its device's table.
    VectorClock clock;
    // pos(legacy) last joined, so that ordinary ops skip the join while the
    // legacy stream is idle.
    Position legacy_seen = 0;
    bool retired = false;
  };
  // A blocking stream of a device, live or destroyed (its work still runs).
  struct BlockingStream {
    StreamIndex stream;
    // A position of it the legacy clock is known to hold, so that a legacy
    // op skips, by one comparison, the streams that did not move.
    Position seen;
  };
  struct DeviceState {
    StreamIndex legacy = kNoStream;
    // VC(legacy) but its own entry; `version` grows with every change.
    ClockTrie legacy_clock;
    uint64_t version = 0;
    // The latest snapshot of each other device's legacy clock joined into
    // this one: a later one joins only what changed since.
    absl::InlinedVector<SharedClock, 1> folded;
    std::vector<BlockingStream> blocking;  // ascending by stream
  };

  StreamIndex LegacyOf(int device) const {
    return static_cast<size_t>(device) < devices_.size() ? devices_[device].legacy : kNoStream;
  }
  // VC(legacy) as it stands, by reference.
  SharedClock LegacySnapshot(const DeviceState& d) const {
    return SharedClock{d.legacy, pos(d.legacy), d.version, d.legacy_clock};
  }
  void RaiseLegacy(DeviceState& d, StreamIndex s, Position p);
  // Joins `c` into the legacy clock of `d`.
  void FoldIntoLegacy(DeviceState& d, const VectorClock& c);
  void FoldSharedIntoLegacy(DeviceState& d, const SharedClock& shared);

  StableVector<StreamState> streams_;
  std::vector<DeviceState> devices_;  // by device, made as streams name them
  VectorClock done_;
  // Retired slots handed back for reuse (last in, first out).
  std::vector<StreamIndex> free_slots_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_ORDERING_ORDERING_H_
