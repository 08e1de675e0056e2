/// \file
/// The strong ids of a Runtime's streams, events, pools and graphs. An id's value is
/// the same number as the C API's opaque handle, so the two APIs can be mixed
/// on one runtime.
#ifndef STREAMPOOL_IDS_H_
#define STREAMPOOL_IDS_H_

#include <cstdint>

#include "streampool/streampool.h"

namespace streampool {

/// A stream of a Runtime (C: spStream_t).
struct StreamId {
  uint64_t value = 0;  ///< the handle's number; 0 = no stream
  /// The same stream as a C handle.
  spStream_t c() const { return reinterpret_cast<spStream_t>(static_cast<uintptr_t>(value)); }
};
/// An event of a Runtime (C: spEvent_t).
struct EventId {
  uint64_t value = 0;  ///< the handle's number; 0 = no event
  /// The same event as a C handle.
  spEvent_t c() const { return reinterpret_cast<spEvent_t>(static_cast<uintptr_t>(value)); }
};
/// A pool of a Runtime (C: spMemPool_t).
struct PoolId {
  uint64_t value = 0;  ///< the handle's number; 0 = no pool
  /// The same pool as a C handle.
  spMemPool_t c() const { return reinterpret_cast<spMemPool_t>(static_cast<uintptr_t>(value)); }
  /// Same handle.
  friend bool operator==(PoolId a, PoolId b) { return a.value == b.value; }
};
/// A graph of a Runtime (C: spGraph_t).
struct GraphId {
  uint64_t value = 0;  ///< the handle's number; 0 = no graph
  /// The same graph as a C handle.
  spGraph_t c() const { return reinterpret_cast<spGraph_t>(static_cast<uintptr_t>(value)); }
  /// Same handle.
  friend bool operator==(GraphId a, GraphId b) { return a.value == b.value; }
};
/// A node of a graph (C: spGraphNode_t).
struct GraphNodeId {
  uint64_t value = 0;  ///< the handle's number; 0 = no node
  /// The same node as a C handle.
  spGraphNode_t c() const { return reinterpret_cast<spGraphNode_t>(static_cast<uintptr_t>(value)); }
  /// Same handle.
  friend bool operator==(GraphNodeId a, GraphNodeId b) { return a.value == b.value; }
};
/// An executable graph (C: spGraphExec_t).
struct GraphExecId {
  uint64_t value = 0;  ///< the handle's number; 0 = no executable graph
  /// The same executable graph as a C handle.
  spGraphExec_t c() const { return reinterpret_cast<spGraphExec_t>(static_cast<uintptr_t>(value)); }
};

}  // namespace streampool

#endif  // STREAMPOOL_IDS_H_
