/// \file
/// Graphs in the C++ API: what a capture forbids, what a capture's status
/// is, what a graph's memory figures are (C: spStreamCaptureMode,
/// spStreamCaptureStatus, spGraphMemAttributeType; CUDA's values).
#ifndef STREAMPOOL_GRAPH_H_
#define STREAMPOOL_GRAPH_H_

#include <cstdint>

namespace streampool {

/// Which calls a capture refuses while it is open (docs/graphs.md).
enum class CaptureMode {
  kGlobal = 0,       ///< on the capturing thread, and on every thread while any Global one is open
  kThreadLocal = 1,  ///< on the capturing thread only
  kRelaxed = 2,      ///< none
};

/// Whether a stream captures.
enum class CaptureStatus { kNone = 0, kActive = 1, kInvalidated = 2 };

/// A device's graph memory: used backs graph allocations, reserved is all the
/// device holds for graphs (used plus what no graph holds until a trim).
struct GraphMemStats {
  uint64_t used_current = 0;
  uint64_t used_high = 0;
  uint64_t reserved_current = 0;
  uint64_t reserved_high = 0;
};

}  // namespace streampool

#endif  // STREAMPOOL_GRAPH_H_
