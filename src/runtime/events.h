// Events: records, waits, queries and timings, within a process or (IPC
// events, a shared segment) across processes.
#ifndef STREAMPOOL_SRC_RUNTIME_EVENTS_H_
#define STREAMPOOL_SRC_RUNTIME_EVENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/runtime_core.h"
#include "src/runtime/sync_protocol.h"

namespace streampool::internal {

class Events {
 public:
  Events(RuntimeCore& core, SyncProtocol& sync) : c_(core), sync_(sync) {}
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  absl::StatusOr<uint64_t> CreateEvent(unsigned flags);
  absl::Status DestroyEvent(uint64_t e);
  absl::Status RecordEvent(uint64_t e, uint64_t s) { return Record(e, s, /*external=*/false); }
  absl::Status StreamWaitEvent(uint64_t s, uint64_t e) { return Wait(s, e, /*external=*/false); }
  // As RecordEvent and StreamWaitEvent, but in a capture an event record or
  // wait node (CUDA's cudaEventRecordExternal, cudaEventWaitExternal) rather
  // than a dependency: at each launch the graph records the event, or waits
  // for its latest record, which may be outside the graph. Such a record
  // leaves the event as it was until a launch records it, so no capturing
  // stream joins the capture by it.
  absl::Status RecordEventExternal(uint64_t e, uint64_t s) { return Record(e, s, true); }
  absl::Status StreamWaitEventExternal(uint64_t s, uint64_t e) { return Wait(s, e, true); }
  absl::Status EventSynchronize(uint64_t e);
  absl::Status EventQuery(uint64_t e);
  absl::StatusOr<float> EventElapsedMs(uint64_t start, uint64_t end);
  absl::Status GetIpcEventHandle(uint64_t e, unsigned char handle[64]);
  absl::StatusOr<uint64_t> OpenIpcEvent(const unsigned char handle[64]);
  // Drops every event (teardown).
  void Clear() { events_.clear(); }
  bool Exists(uint64_t e) { return FindEvent(e).ok(); }

 private:
  struct EventRec {
    bool recorded = false;
    StreamIndex stream = kNoStream;
    Position position = 0;
    TimeNs end = 0;
    VectorClock snapshot;
    unsigned flags = 0;
    // Interprocess events: the shared segment, and the shared number of this
    // runtime's latest record of it (0: none). When the segment's latest
    // record is another's, queries and waits go by the shared counters.
    std::shared_ptr<IpcEventSegment> ipc;
    uint64_t ipc_seq = 0;
    // A CUDA runtime's latest record: its timed CUevent (EventElapsedMs).
    std::shared_ptr<void> native_marker;
    // Recorded in a capture (Captures::Session::id, else 0) after these
    // nodes: a wait on it joins the capture.
    uint64_t capture = 0;
    std::vector<NodeIndex> capture_nodes;
  };
  absl::StatusOr<EventRec*> FindEvent(uint64_t h);
  absl::Status Record(uint64_t e, uint64_t s, bool external);
  absl::Status Wait(uint64_t s, uint64_t e, bool external);
  // A wait that involves a capture: s joins the capture the event was
  // recorded in, or a capturing s refuses an event from outside. Cancelled
  // when no capture is involved (the wait is an op).
  absl::Status CaptureWait(RuntimeCore::StreamRec& rec, const EventRec& ev);
  // The shared record number an interprocess event's queries and waits must
  // see complete when its latest record is another runtime's; 0 when the
  // event's latest record is this runtime's (or it was never recorded).
  static uint64_t RemoteTarget(const EventRec& e);

  RuntimeCore& c_;
  SyncProtocol& sync_;
  absl::flat_hash_map<uint64_t, EventRec> events_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_EVENTS_H_
