// Captures: the streams being captured into graphs, and what each capture
// forbids (docs/graphs.md, "Stream capture").
//
// A capture begins on one stream (its origin) and grows a graph: every op
// enqueued on a capturing stream becomes a node after that stream's frontier
// (the nodes its next op depends on), and the frontier becomes the new node.
// Another stream joins a capture by waiting on an event recorded inside it,
// and must be joined back into the origin (the origin waits on an event
// recorded on it) before the capture ends. A call the capture cannot hold
// (a synchronize of a capturing stream, an unsafe call under the capture's
// mode, the legacy stream touching a blocking capturing stream) fails and
// invalidates the capture: later ops on its streams fail, and ending it
// returns the invalidation error and no graph.
//
// The parts that enqueue (Work, Events, Allocator, Graphs) ask Of(s) first;
// with no capture open that is one test of an empty table. Used under the
// runtime's lock.
#ifndef STREAMPOOL_SRC_RUNTIME_CAPTURE_H_
#define STREAMPOOL_SRC_RUNTIME_CAPTURE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/graph/graph.h"
#include "streampool/executor.h"
#include "streampool/graph.h"

namespace streampool::internal {

// The C error a capture's refusal carries (the CUDA values).
absl::Status CaptureError(spError_t error, const char* why);

class Captures {
 public:
  struct Session {
    uint64_t id = 0;
    // The graph being built and its handle (a graph of the caller's, for
    // BeginCaptureToGraph; else one made at Begin and handed over at End).
    std::shared_ptr<Graph> graph;
    uint64_t graph_handle = 0;
    bool own_graph = true;
    CaptureMode mode = CaptureMode::kGlobal;
    StreamIndex origin = kNoStream;
    std::thread::id thread;
    bool invalidated = false;
    // Every stream in the capture, the origin first.
    std::vector<StreamIndex> streams;
    // The last nodes of joined streams destroyed while it is open: the
    // origin must still have joined them back when it ends.
    std::vector<NodeIndex> left;
  };

  // The capture s takes part in, else null.
  Session* Of(StreamIndex s) {
    if (by_stream_.empty()) return nullptr;
    auto it = by_stream_.find(s);
    return it == by_stream_.end() ? nullptr : it->second.session;
  }
  bool empty() const { return sessions_.empty(); }
  // empty() for readers without the runtime's lock (the fast path).
  bool any_open() const { return open_.load(std::memory_order_relaxed); }
  // An op on a device's legacy stream waits for every blocking stream of the
  // device: where one of them is capturing, CUDA refuses the op
  // (spErrorStreamCaptureImplicit) and invalidates that capture.
  // `blocking(s)`: s is a blocking stream of the legacy stream's device.
  absl::Status RefuseLegacyOp(absl::FunctionRef<bool(StreamIndex)> blocking);
  // Whether an open capture adds nodes to the graph `graph_handle`.
  bool Targets(uint64_t graph_handle) const {
    for (const auto& [id, session] : sessions_) {
      if (session->graph_handle == graph_handle) return true;
    }
    return false;
  }

  // Opens a capture on s into `graph` after `deps` (nodes of it).
  absl::StatusOr<Session*> Begin(StreamIndex s, std::shared_ptr<Graph> graph, uint64_t graph_handle,
                                 bool own_graph, absl::Span<const NodeIndex> deps,
                                 CaptureMode mode);
  // Closes the capture whose origin is s: every stream leaves it. The
  // session's graph is returned; an invalidated capture returns its error.
  absl::StatusOr<std::unique_ptr<Session>> End(StreamIndex s);
  // A node after s's frontier, which it then becomes. s must be capturing;
  // an invalidated capture refuses.
  // P: NodeParams or one of its alternatives.
  template <typename P>
  absl::StatusOr<NodeIndex> Add(StreamIndex s, P&& params) {
    Member& m = by_stream_.at(s);
    if (m.session->invalidated) return Invalidated();
    absl::StatusOr<NodeIndex> n = m.session->graph->Add(std::forward<P>(params), m.frontier);
    if (!n.ok()) return n.status();
    m.frontier.assign(1, *n);
    return *n;
  }
  // What s's next node depends on.
  const std::vector<NodeIndex>& Frontier(StreamIndex s) const;
  // s waits on an event recorded in `session` after `nodes`: s joins the
  // capture (its frontier becomes `nodes`), or, already in it, adds them to
  // its frontier. A stream in another capture cannot (Merge).
  absl::Status Join(StreamIndex s, Session* session, absl::Span<const NodeIndex> nodes);
  // Fails the capture: later ops on its streams and its end fail.
  static void Invalidate(Session* session) { session->invalidated = true; }
  // The error for an unsafe call (one that may synchronize) from this thread
  // under its exchange mode, after invalidating the captures that forbid
  // it; OK when none does.
  absl::Status CheckUnsafeCall();
  // A stream of a capture is destroyed (or the runtime is): the origin's
  // loses the capture; another's leaves it, its work staying in the graph,
  // as CUDA lets a forked stream be destroyed once its work is captured.
  void DropStream(StreamIndex s);
  // Whether an open capture adds to the graph with this handle.
  bool Builds(uint64_t graph_handle) const {
    for (const auto& [id, session] : sessions_) {
      if (session->graph_handle == graph_handle) return true;
    }
    return false;
  }
  // The session by id (events recorded in a capture name it), else null.
  Session* Find(uint64_t id) {
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second.get();
  }

 private:
  struct Member {
    Session* session;
    std::vector<NodeIndex> frontier;
  };
  static absl::Status Invalidated();
  void Opened() { open_.store(!sessions_.empty(), std::memory_order_relaxed); }

  absl::flat_hash_map<uint64_t, std::unique_ptr<Session>> sessions_;
  absl::flat_hash_map<StreamIndex, Member> by_stream_;
  uint64_t next_id_ = 1;
  std::atomic<bool> open_{false};
};

// The calling thread's capture interaction mode
// (spThreadExchangeStreamCaptureMode), Global until changed.
CaptureMode ExchangeThreadCaptureMode(CaptureMode mode);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_CAPTURE_H_
