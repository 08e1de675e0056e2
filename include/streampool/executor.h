/// \file
/// How streams run.
///
/// The runtime decides *what* is ordered (vector clocks, in the ordering layer);
/// an Executor decides *when* work runs and reports what has completed. The
/// deterministic simulator is one executor; a pool of worker threads or an
/// adapter over a real device runtime's events are others. Pools never talk to
/// an executor: they ask the ordering layer, which asks the executor.
#ifndef STREAMPOOL_EXECUTOR_H_
#define STREAMPOOL_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "streampool/export.h"

namespace streampool {

/// Dense index of a stream inside one runtime: a slot. A destroyed stream's
/// slot is reused by a later stream once all its work is proven complete;
/// positions continue across the reuse, so (slot, position) names one op for
/// the runtime's life.
using StreamIndex = uint32_t;
/// Position of an op in its stream: the n-th op enqueued has position n (1-based;
/// position 0 means "before any op").
using Position = uint64_t;
/// Nanoseconds: virtual for the simulator, steady-clock for real executors.
///
/// StreamIndex, Position and TimeNs are names, not strong types: they are the
/// words of this interface, which executors outside the library implement,
/// and the ordering core, the pools and the runtime pass them to each other
/// on every allocation. A field or parameter holding one is declared with
/// its name (OpDesc, TimelineEntry, CheckReport, SnapshotBlock); what callers
/// hold and could mix up, streams, events and pools, are strong ids (ids.h).
using TimeNs = uint64_t;

/// "No stream": OpDesc::wait_stream of an op that waits for nothing.
inline constexpr StreamIndex kNoStream = std::numeric_limits<StreamIndex>::max();

/// What an op on a stream is (see TimelineEntry and OpDesc).
enum class OpKind {
  kKernel,        ///< a duration and declared accesses
  kCopy,          ///< async copy: duration from the copy bandwidth
  kFill,          ///< async memset
  kHostFunc,      ///< a host callback
  kRecord,        ///< event record (0 ns)
  kWait,          ///< stream waits for an event's record (0 ns)
  kInternalWait,  ///< a wait the pool inserted (reuse rule 5, 0 ns)
  kAllocMarker,   ///< an allocation's point in its stream (0 ns)
  kFreeMarker,    ///< a FreeAsync's point: the free point the pool reasons about (0 ns)
};

/// One op as the runtime hands it to an Executor.
struct OpDesc {
  /// What the op is.
  OpKind kind = OpKind::kAllocMarker;
  /// How long it runs once started (0 for markers, records and waits).
  TimeNs duration_ns = 0;
  /// For kWait and kInternalWait: the op may not start before (wait_stream,
  /// wait_position) has completed.
  StreamIndex wait_stream = kNoStream;
  /// See wait_stream.
  Position wait_position = 0;
  /// Points the op is implicitly ordered after (the legacy default stream's
  /// synchronization with blocking streams): it may not start before each has
  /// completed either.
  absl::InlinedVector<std::pair<StreamIndex, Position>, 2> implicit_waits;
  /// Runs on the host once the host observes the op complete (host functions,
  /// and the memory effect of copies and fills). Effects run in order of
  /// completion time, then enqueue order.
  std::function<void()> effect;
};

/// Runs the ops of a runtime's streams. The contract every executor keeps:
///  * Ops of one stream complete in position order.
///  * An op with a wait point does not start before that point completes.
///  * CompletedPosition never goes backwards, and a position it reports is
///    really complete (all effects of ops up to it have run or run before the
///    next observation returns).
///  * WaitFor returns only when the position is complete.
class STREAMPOOL_EXPORT Executor {
 public:
  virtual ~Executor() = default;

  /// Registers stream `s`; indices are handed out densely from 0, and an
  /// index given back by RemoveStream may come again once every op enqueued
  /// on it has completed (its positions then continue where they stopped).
  virtual void AddStream(StreamIndex s) = 0;
  /// Stream `s` was destroyed: what is enqueued still runs to completion, and
  /// then whatever the executor holds for it (a worker thread) may go.
  virtual void RemoveStream(StreamIndex s) { (void)s; }
  /// Enqueues `op` as position `position` of `s`. Positions increase but may
  /// skip: the positions in between are points that are not ops (allocations
  /// and frees), complete once the op before them is.
  /// Returns the op's predicted completion time (exact for the simulator).
  virtual TimeNs Enqueue(StreamIndex s, Position position, OpDesc op) = 0;
  /// A position of `s` such that every op at or before it is known complete
  /// now, without waiting (the first incomplete op's position minus one, or the
  /// last op's position when none is incomplete).
  virtual Position CompletedPosition(StreamIndex s) = 0;
  /// Blocks the host until every op of `s` at or before `position` has
  /// completed (`position` is never past the last op); the simulator advances
  /// host time to its completion.
  virtual void WaitFor(StreamIndex s, Position position) = 0;
  /// Host time now.
  virtual TimeNs Now() const = 0;
  /// The host spends `ns` (the simulator advances virtual time).
  virtual void HostAdvance(TimeNs ns) = 0;
  /// Runs the effects of every op that has completed by Now() (the simulator
  /// runs effects when the host observes completion; real executors run them
  /// as the ops execute and do nothing here).
  virtual void RunDueEffects() = 0;
  /// Whether WaitFor really blocks the calling thread until other threads make
  /// progress (callers must then not hold locks those threads need).
  virtual bool blocks_host() const { return false; }
};

/// Whether T implements Executor: derived from it, with every pure function
/// defined. Each executor is checked against it where it is defined:
/// static_assert(kIsExecutor<MyExecutor>).
template <typename T>
inline constexpr bool kIsExecutor = std::is_base_of_v<Executor, T> && !std::is_abstract_v<T>;

}  // namespace streampool

#endif  // STREAMPOOL_EXECUTOR_H_
