/// \file
/// Graphs in the C++ API: what a capture forbids and what its status is, a
/// node's kind, the instantiate flags, what a graph's memory figures are
/// (C: spStreamCaptureMode, spStreamCaptureStatus, spGraphNodeType,
/// spGraphInstantiateFlag*, spGraphMemAttributeType; CUDA's values).
#ifndef STREAMPOOL_GRAPH_H_
#define STREAMPOOL_GRAPH_H_

#include <cstdint>
#include <vector>

#include "streampool/ids.h"

namespace streampool {

/// Which calls a capture refuses while it is open (docs/graphs.md).
enum class CaptureMode {
  kGlobal = 0,       ///< on the capturing thread, and on every thread while any Global one is open
  kThreadLocal = 1,  ///< on the capturing thread only
  kRelaxed = 2,      ///< none
};

/// Whether a stream captures.
enum class CaptureStatus { kNone = 0, kActive = 1, kInvalidated = 2 };

/// A stream's capture (C: spStreamGetCaptureInfo).
struct CaptureInfo {
  CaptureStatus status = CaptureStatus::kNone;  ///< none, active or invalidated
  uint64_t id = 0;                ///< unique per runtime, from 1; 0 when not capturing
  GraphId graph;                  ///< the graph being built
  std::vector<GraphNodeId> deps;  ///< what the stream's next node will depend on
};

/// What a node does (CUDA's cudaGraphNodeType values).
enum class GraphNodeType : int {
  kKernel = 0,
  kMemcpy = 1,
  kMemset = 2,
  kHost = 3,
  kGraph = 4,  ///< a child graph
  kEmpty = 5,
  kWaitEvent = 6,
  kEventRecord = 7,
  kMemAlloc = 10,
  kMemFree = 11,
};

/// An edge of a graph: `to` depends on `from`.
struct GraphEdge {
  GraphNodeId from;  ///< the dependency
  GraphNodeId to;    ///< the node that depends on it
  /// Same nodes.
  friend bool operator==(const GraphEdge& a, const GraphEdge& b) = default;
};

/// An allocation node and the address its allocation has for the graph's life.
struct GraphAllocNode {
  GraphNodeId node;      ///< the allocation node
  void* dptr = nullptr;  ///< its allocation's address
};

/// A Runtime::Instantiate flag: a launch first frees what the previous launch
/// allocated and did not free.
inline constexpr uint64_t kGraphInstantiateAutoFreeOnLaunch =
    spGraphInstantiateFlagAutoFreeOnLaunch;
/// A Runtime::Instantiate flag, accepted: nothing needs uploading here.
inline constexpr uint64_t kGraphInstantiateUpload = spGraphInstantiateFlagUpload;

/// A device's graph memory: used backs graph allocations, reserved is all the
/// device holds for graphs (used plus what no graph holds until a trim).
struct GraphMemStats {
  uint64_t used_current = 0;      ///< bytes behind ranges something refers to
  uint64_t used_high = 0;         ///< its high watermark
  uint64_t reserved_current = 0;  ///< every mapped byte of graph memory
  uint64_t reserved_high = 0;     ///< its high watermark
};

/// Which high watermark of GraphMemStats Runtime::ResetGraphMemoryHigh resets.
enum class GraphMemHigh { kUsed, kReserved };

}  // namespace streampool

#endif  // STREAMPOOL_GRAPH_H_
