// Which part operations a recording writes, and how: RuntimeImpl::Run calls
// RecordedCall<Op>::Write after the operation, still under the runtime's
// lock, with the operation's arguments, result and times. Arguments the operation
// took by move (a pool's upstream, a host function) are read by no Write. Operations not listed
// here (getters, the checker's and the timeline's switches, IPC) change
// nothing a replay reproduces. The allocator's stream-ordered paths do not
// pass through Run; they write their own lines (Allocator).
#ifndef STREAMPOOL_SRC_RUNTIME_RECORDED_CALLS_H_
#define STREAMPOOL_SRC_RUNTIME_RECORDED_CALLS_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/allocator.h"
#include "src/runtime/events.h"
#include "src/runtime/graphs.h"
#include "src/runtime/pools.h"
#include "src/runtime/recorder.h"
#include "src/runtime/streams.h"
#include "src/runtime/work.h"

namespace streampool::internal {

template <auto Op>
struct RecordedCall {
  static constexpr bool kWritten = false;
};

// A call that succeeded is written; a failed one changed nothing.
#define SP_RECORDED(op, params, ...)                                                         \
  template <>                                                                                \
  struct RecordedCall<&op> {                                                                 \
    static constexpr bool kWritten = true;                                                   \
    template <typename Result>                                                               \
    static void Write(Recorder& r, const Result& result, Recorder::Times t [[maybe_unused]], \
                      SP_UNPAREN params) {                                                   \
      if (result.ok()) __VA_ARGS__                                                           \
    }                                                                                        \
  }
#define SP_UNPAREN(...) __VA_ARGS__

SP_RECORDED(Streams::CreateStream, (int device, bool non_blocking),
            { r.StreamCreated(*result, device, non_blocking, t); });
SP_RECORDED(Streams::DestroyStream, (uint64_t s), { r.StreamDestroyed(s, t); });
SP_RECORDED(Streams::StreamSynchronize, (uint64_t s), { r.StreamSynchronized(s, t); });
SP_RECORDED(Streams::DeviceSynchronize, (int device), { r.DeviceSynchronized(device, t); });
SP_RECORDED(Events::CreateEvent, (unsigned flags), { r.EventCreated(*result, flags, t); });
SP_RECORDED(Events::DestroyEvent, (uint64_t e), { r.EventDestroyed(e, t); });
SP_RECORDED(Events::RecordEvent, (uint64_t e, uint64_t s), { r.EventRecorded(e, s, t); });
SP_RECORDED(Events::StreamWaitEvent, (uint64_t s, uint64_t e), { r.StreamWaited(s, e, t); });
SP_RECORDED(Events::RecordEventExternal, (uint64_t e, uint64_t s),
            { r.EventRecorded(e, s, t, /*external=*/true); });
SP_RECORDED(Events::StreamWaitEventExternal, (uint64_t s, uint64_t e),
            { r.StreamWaited(s, e, t, /*external=*/true); });
SP_RECORDED(Events::EventSynchronize, (uint64_t e), { r.EventSynchronized(e, t); });
SP_RECORDED(Work::LaunchKernel, (uint64_t s, uint64_t ns, const auto&), { r.Kernel(s, ns, t); });
SP_RECORDED(Work::LaunchWork, (uint64_t s, uint64_t ns, const auto&, const auto&),
            { r.Kernel(s, ns, t); });
SP_RECORDED(Work::LaunchHostFunc, (uint64_t s, const auto&), { r.HostFunc(s, t); });
SP_RECORDED(Work::MemcpyAsync, (void*, const void*, uint64_t bytes, uint64_t s),
            { r.Copy(s, bytes, t); });
SP_RECORDED(Work::MemsetAsync, (void*, int, uint64_t bytes, uint64_t s), { r.Copy(s, bytes, t); });
SP_RECORDED(Work::HostAdvance, (uint64_t ns), { r.HostAdvanced(ns, t); });
SP_RECORDED(Pools::CreatePool, (const auto&, const auto&), { r.PoolCreated(*result, t); });
SP_RECORDED(Pools::CreatePoolOver, (const auto&, const auto&), { r.PoolCreated(*result, t); });
SP_RECORDED(Pools::DestroyPool, (uint64_t pool), { r.PoolDestroyed(pool, t); });
SP_RECORDED(Pools::SetPoolAttribute, (uint64_t pool, PoolAttr attr, uint64_t value),
            { r.PoolAttributeSet(pool, attr, value, t); });
SP_RECORDED(Pools::TrimTo, (uint64_t pool, uint64_t keep), { r.PoolTrimmed(pool, keep, t); });
SP_RECORDED(Pools::SetCurrentPool, (int device, uint64_t pool),
            { r.CurrentPoolSet(device, pool, t); });
SP_RECORDED(Allocator::Malloc, (uint64_t size, int device),
            { r.Malloced(*result, size, device, t); });
SP_RECORDED(Allocator::Free, (void* ptr), { r.FreedNow(ptr, t); });
SP_RECORDED(Graphs::BeginCapture, (uint64_t s, CaptureMode mode), { r.CaptureBegan(s, mode, t); });
SP_RECORDED(Graphs::BeginCaptureToGraph, (uint64_t s, uint64_t g, const auto&, CaptureMode mode),
            { r.CaptureToGraphBegan(s, g, mode, t); });
SP_RECORDED(Graphs::DestroyGraph, (uint64_t g), { r.GraphDestroyed(g, t); });
SP_RECORDED(Graphs::CloneGraph, (uint64_t g), { r.GraphCloned(*result, g, t); });
// A node's params and deps were moved into it: the recorder reads them there.
SP_RECORDED(Graphs::AddNode, (uint64_t g, const auto&, const auto&, void**),
            { r.NodeAdded(g, *result, 0, t); });
SP_RECORDED(Graphs::AddChildGraphNode, (uint64_t g, const auto&, uint64_t child),
            { r.NodeAdded(g, *result, child, t); });
SP_RECORDED(Graphs::AddDependencies, (uint64_t g, const auto& edges),
            { r.EdgesAdded(g, edges, t); });
SP_RECORDED(Graphs::Instantiate, (uint64_t g, uint64_t flags),
            { r.Instantiated(*result, g, flags, t); });
SP_RECORDED(Graphs::Upload, (uint64_t e, uint64_t s), { r.Uploaded(e, s, t); });
SP_RECORDED(Graphs::Launch, (uint64_t e, uint64_t s), { r.Launched(e, s, t); });
SP_RECORDED(Graphs::DestroyExec, (uint64_t e), { r.ExecDestroyed(e, t); });
SP_RECORDED(Graphs::ExecUpdate, (uint64_t e, uint64_t g, int*), { r.ExecUpdated(e, g, t); });
SP_RECORDED(Graphs::TrimGraphMemory, (int device), { r.GraphMemTrimmed(device, t); });
SP_RECORDED(Graphs::ResetGraphMemoryHigh, (int device, bool used),
            { r.GraphMemHighReset(device, used, t); });

#undef SP_RECORDED
#undef SP_UNPAREN

// Queries cost host time whatever they answer, so both answers are written.
template <>
struct RecordedCall<&Streams::StreamQuery> {
  static constexpr bool kWritten = true;
  static void Write(Recorder& r, const absl::Status& result, Recorder::Times t, uint64_t s) {
    if (result.ok() || absl::IsUnavailable(result)) r.StreamQueried(s, result.ok(), t);
  }
};
template <>
struct RecordedCall<&Events::EventQuery> {
  static constexpr bool kWritten = true;
  static void Write(Recorder& r, const absl::Status& result, Recorder::Times t, uint64_t e) {
    if (result.ok() || absl::IsUnavailable(result)) r.EventQueried(e, result.ok(), t);
  }
};

template <>
struct RecordedCall<&Graphs::CreateGraph> {
  static constexpr bool kWritten = true;
  static void Write(Recorder& r, const absl::StatusOr<uint64_t>& result, Recorder::Times t) {
    if (result.ok()) r.GraphCreated(*result, t);
  }
};

// A capture that ended in failure (invalidated, unjoined) ended all the
// same, and a replay must end it too; one refused on the wrong stream or
// thread is still open.
template <>
struct RecordedCall<&Graphs::EndCapture> {
  static constexpr bool kWritten = true;
  static void Write(Recorder& r, const absl::StatusOr<uint64_t>& result, Recorder::Times t,
                    uint64_t s) {
    r.CaptureEnded(s, result.ok() ? *result : 0, !result.ok(), t);
  }
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RECORDED_CALLS_H_
