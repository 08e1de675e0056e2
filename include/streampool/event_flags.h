/// \file
/// The flags an event is created with (Runtime::CreateEvent(flags); C:
/// spEventCreateWithFlags), and those of a record and a wait.
#ifndef STREAMPOOL_EVENT_FLAGS_H_
#define STREAMPOOL_EVENT_FLAGS_H_

namespace streampool {

/// Event flag: no timing (C: spEventDisableTiming).
inline constexpr unsigned kEventDisableTiming = 2;
/// Event flag: interprocess, needs kEventDisableTiming (C: spEventInterprocess).
inline constexpr unsigned kEventInterprocess = 4;

/// How a record is captured (Runtime::RecordEvent; C: spEventRecordWithFlags).
enum class EventRecordFlag : unsigned {
  kDefault = 0,   ///< in a capture, a dependency a wait on the event follows
  kExternal = 1,  ///< in a capture, an event record node (CUDA's cudaEventRecordExternal)
};
/// How a wait is captured (Runtime::StreamWaitEvent; C: spStreamWaitEventWithFlags).
enum class EventWaitFlag : unsigned {
  kDefault = 0,   ///< in a capture, joins the capture the record was made in
  kExternal = 1,  ///< in a capture, an event wait node (CUDA's cudaEventWaitExternal)
};

}  // namespace streampool

#endif  // STREAMPOOL_EVENT_FLAGS_H_
