/// \file
/// The flags an event is created with (Runtime::CreateEvent(flags); C:
/// spEventCreateWithFlags).
#ifndef STREAMPOOL_EVENT_FLAGS_H_
#define STREAMPOOL_EVENT_FLAGS_H_

namespace streampool {

/// Event flag: no timing (C: spEventDisableTiming).
inline constexpr unsigned kEventDisableTiming = 2;
/// Event flag: interprocess, needs kEventDisableTiming (C: spEventInterprocess).
inline constexpr unsigned kEventInterprocess = 4;

}  // namespace streampool

#endif  // STREAMPOOL_EVENT_FLAGS_H_
