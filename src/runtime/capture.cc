#include "src/runtime/capture.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "streampool/errors.h"

namespace streampool::internal {

namespace {

thread_local CaptureMode thread_mode = CaptureMode::kGlobal;

}  // namespace

absl::Status CaptureError(spError_t error, const char* why) {
  absl::Status st(absl::StatusCode::kFailedPrecondition, why);
  st.SetPayload(kCErrorPayload, absl::Cord(std::to_string(static_cast<int>(error))));
  return st;
}

CaptureMode ExchangeThreadCaptureMode(CaptureMode mode) { return std::exchange(thread_mode, mode); }

absl::StatusOr<Captures::Session*> Captures::Begin(StreamIndex s, std::shared_ptr<Graph> graph,
                                                   uint64_t graph_handle, bool own_graph,
                                                   absl::Span<const NodeIndex> deps,
                                                   CaptureMode mode) {
  if (by_stream_.contains(s)) {
    return CaptureError(spErrorIllegalState, "the stream is already capturing");
  }
  for (NodeIndex d : deps) {
    if (d >= graph->size()) return absl::InvalidArgumentError("dependency not in the graph");
  }
  auto session = std::make_unique<Session>();
  session->id = next_id_++;
  session->graph = std::move(graph);
  session->graph_handle = graph_handle;
  session->own_graph = own_graph;
  session->mode = mode;
  session->origin = s;
  session->thread = std::this_thread::get_id();
  session->streams = {s};
  Session* raw = session.get();
  sessions_.emplace(raw->id, std::move(session));
  by_stream_.emplace(s, Member{raw, {deps.begin(), deps.end()}});
  Opened();
  return raw;
}

absl::StatusOr<std::unique_ptr<Captures::Session>> Captures::End(StreamIndex s) {
  auto it = by_stream_.find(s);
  if (it == by_stream_.end()) {
    return absl::InvalidArgumentError("the stream is not capturing");
  }
  Session* session = it->second.session;
  if (session->origin != s) {
    return CaptureError(spErrorStreamCaptureUnmatched, "the capture was not begun on this stream");
  }
  if (session->mode != CaptureMode::kRelaxed && session->thread != std::this_thread::get_id()) {
    return CaptureError(spErrorStreamCaptureWrongThread,
                        "a Global or ThreadLocal capture must end on the thread that began it");
  }
  // Every stream that joined must have been joined back: the origin's
  // frontier follows every node another stream's frontier holds.
  const std::vector<NodeIndex>& origin = it->second.frontier;
  auto joined = [&](NodeIndex n) {
    return std::any_of(origin.begin(), origin.end(),
                       [&](NodeIndex o) { return o == n || session->graph->Precedes(n, o); });
  };
  bool unjoined = !std::all_of(session->left.begin(), session->left.end(), joined);
  for (StreamIndex m : session->streams) {
    if (m == s || unjoined) continue;
    const std::vector<NodeIndex>& f = by_stream_.at(m).frontier;
    unjoined = !std::all_of(f.begin(), f.end(), joined);
  }
  auto owned = sessions_.extract(session->id);
  for (StreamIndex m : session->streams) by_stream_.erase(m);
  Opened();
  std::unique_ptr<Session> result = std::move(owned.mapped());
  if (result->invalidated) {
    return Invalidated();
  }
  if (unjoined) {
    return CaptureError(spErrorStreamCaptureUnjoined,
                        "a stream that joined the capture was not joined back into its origin");
  }
  return result;
}

absl::Status Captures::Invalidated() {
  return CaptureError(spErrorStreamCaptureInvalidated, "the capture was invalidated");
}

const std::vector<NodeIndex>& Captures::Frontier(StreamIndex s) const {
  return by_stream_.at(s).frontier;
}

absl::Status Captures::Join(StreamIndex s, Session* session, absl::Span<const NodeIndex> nodes) {
  auto it = by_stream_.find(s);
  if (it == by_stream_.end()) {
    session->streams.push_back(s);
    by_stream_.emplace(s, Member{session, {nodes.begin(), nodes.end()}});
    return absl::OkStatus();
  }
  if (it->second.session != session) {
    Invalidate(it->second.session);
    Invalidate(session);
    return CaptureError(spErrorStreamCaptureMerge, "the wait would merge two captures");
  }
  if (session->invalidated) {
    return Invalidated();
  }
  std::vector<NodeIndex>& f = it->second.frontier;
  for (NodeIndex n : nodes) {
    if (std::find(f.begin(), f.end(), n) == f.end()) f.push_back(n);
  }
  return absl::OkStatus();
}

absl::Status Captures::CheckUnsafeCall() {
  if (sessions_.empty() || thread_mode == CaptureMode::kRelaxed) return absl::OkStatus();
  const std::thread::id me = std::this_thread::get_id();
  bool refused = false;
  for (auto& [id, session] : sessions_) {
    const bool mine = session->thread == me && session->mode != CaptureMode::kRelaxed;
    const bool global =
        thread_mode == CaptureMode::kGlobal && session->mode == CaptureMode::kGlobal;
    if (mine || global) {
      Invalidate(session.get());
      refused = true;
    }
  }
  if (!refused) return absl::OkStatus();
  return CaptureError(spErrorStreamCaptureUnsupported,
                      "a call that may synchronize, while a capture forbids it");
}

void Captures::DropStream(StreamIndex s) {
  auto it = by_stream_.find(s);
  if (it == by_stream_.end()) return;
  Session* session = it->second.session;
  if (session->origin == s) Invalidate(session);
  const std::vector<NodeIndex>& f = it->second.frontier;
  session->left.insert(session->left.end(), f.begin(), f.end());
  by_stream_.erase(it);
  auto& streams = session->streams;
  streams.erase(std::remove(streams.begin(), streams.end(), s), streams.end());
  if (session->origin == s) {
    // Nobody can end it now: every stream leaves it.
    for (StreamIndex m : streams) by_stream_.erase(m);
    sessions_.erase(session->id);
    Opened();
  }
}

absl::Status Captures::RefuseLegacyOp(absl::FunctionRef<bool(StreamIndex)> blocking) {
  bool refused = false;
  for (auto& [s, member] : by_stream_) {
    if (!blocking(s)) continue;
    Invalidate(member.session);
    refused = true;
  }
  if (!refused) return absl::OkStatus();
  return CaptureError(spErrorStreamCaptureImplicit,
                      "an op on the legacy stream would wait for a capturing blocking stream");
}

}  // namespace streampool::internal
