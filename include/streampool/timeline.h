/// \file
/// The schedule of a runtime's ops as it recorded them (Runtime::RecordTimeline,
/// Runtime::Timeline), and the names the tools print for op kinds.
#ifndef STREAMPOOL_TIMELINE_H_
#define STREAMPOOL_TIMELINE_H_

#include "streampool/executor.h"
#include "streampool/export.h"
#include "streampool/ids.h"

namespace streampool {

/// One op as the simulator scheduled it (see Runtime::Timeline).
struct TimelineEntry {
  StreamId stream;                     ///< value 0 for a stream destroyed since
  StreamIndex stream_index;            ///< dense index, stable for the runtime's life
  int device = 0;                      ///< the stream's device
  Position position = 0;               ///< the op's position in its stream
  OpKind kind = OpKind::kAllocMarker;  ///< what the op was
  TimeNs enqueued_ns = 0;              ///< host time when it was enqueued
  TimeNs start_ns = 0;                 ///< when it started
  TimeNs end_ns = 0;                   ///< when it completed
};

/// The kind's name as the tools and timelines print it: "kernel",
/// "host_func", "internal_wait", "alloc", "free", ...; "unknown" outside the
/// enum.
STREAMPOOL_EXPORT const char* OpKindName(OpKind kind);

}  // namespace streampool

#endif  // STREAMPOOL_TIMELINE_H_
