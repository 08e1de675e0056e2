#include "src/runtime/recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/pool/block.h"
#include "src/pool/names.h"
#include "src/runtime/graphs.h"
#include "src/runtime/runtime_core.h"
#include "src/util/check.h"

namespace streampool::internal {
namespace {

// Lines are buffered and written in blocks: a recording costs a formatted
// line per call, not a system call.
constexpr size_t kFlushBytes = 64 * 1024;
// Room for a flush's worth and the longest line the printer writes; longer
// text (the command line) is written in pieces.
constexpr size_t kBufferBytes = kFlushBytes + 4096;
static_assert(kBufferBytes - kFlushBytes >= trace::kMaxPrintedLine);

// The program and its arguments (/proc/self/cmdline), so that a recording
// says what produced it: the program's file name without its directory, each
// argument as given, cut at kMaxCommand bytes; empty where the system has no
// such file.
std::string CommandLine() {
  constexpr size_t kMaxCommand = 1024;
  std::string raw;
  if (std::FILE* f = std::fopen("/proc/self/cmdline", "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && raw.size() < 64 * 1024) {
      raw.append(buf, n);
    }
    std::fclose(f);
  }
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i <= raw.size(); ++i) {
    if (i < raw.size() && raw[i] != '\0') continue;
    std::string arg = raw.substr(start, i - start);
    start = i + 1;
    if (out.empty()) {
      const size_t slash = arg.rfind('/');
      if (slash != std::string::npos) arg = arg.substr(slash + 1);
    }
    if (arg.empty() && !out.empty()) continue;
    for (char& ch : arg) {
      if (ch == '\n' || ch == '\r' || ch == '#') ch = ' ';  // one comment line
    }
    absl::StrAppend(&out, out.empty() ? "" : " ", arg);
    if (out.size() > kMaxCommand) {
      out.resize(kMaxCommand);
      break;
    }
  }
  return out;
}

}  // namespace

uint64_t Recorder::IdSpace::Take() {
  if (free.empty()) return next++;
  // Smallest first, so that ids stay small and a reader's tables dense.
  auto it = std::min_element(free.begin(), free.end());
  const uint64_t id = *it;
  *it = free.back();
  free.pop_back();
  return id;
}

absl::StatusOr<std::unique_ptr<Recorder>> Recorder::Open(const std::string& path,
                                                         RuntimeCore& core) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", path, " for the recording: ", std::strerror(errno)));
  }
  std::unique_ptr<Recorder> r(new Recorder(fd, path, core));
  r->Header();
  return r;
}

Recorder::Recorder(int fd, std::string path, RuntimeCore& core) ABSL_NO_THREAD_SAFETY_ANALYSIS
    : fd_(fd),
      path_(std::move(path)),
      core_(core),
      clock_(core.seq.sim() == nullptr ? core.seq.executor() : nullptr),
      buf_storage_(new char[kBufferBytes]),
      buf_(buf_storage_.get()) {
  last_ns_ = Now();
}

Recorder::~Recorder() { Close().IgnoreError(); }

absl::Status Recorder::Close() {
  MutexLock lock(&mu_);
  if (!closed_) {
    Flush();
    if (::close(fd_) != 0 && error_.ok()) {
      error_ = absl::InternalError(absl::StrCat("closing ", path_, ": ", std::strerror(errno)));
    }
    closed_ = true;
  }
  return error_;
}

void Recorder::Flush() {
  size_t done = 0;
  while (done < len_ && error_.ok()) {
    const ssize_t n = ::write(fd_, buf_ + done, len_ - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = absl::InternalError(absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
      break;
    }
    done += static_cast<size_t>(n);
  }
  len_ = 0;
}

void Recorder::Header() {
  const RuntimeConfig& c = core_.config;
  EmitText("# streampool trace v1\n# recorded_by streampool\n");
  if (const std::string command = CommandLine(); !command.empty()) {
    EmitText(absl::StrCat("# program ", command, "\n"));
  }
  EmitText(absl::StrCat("# executor ", clock_ == nullptr ? "simulator" : "real_time",
                        "\n# device_count ", c.device_count, "\n# device_capacity ",
                        c.device_capacity, "\n# backing ", EnumName(c.backing), "\n# api_call_ns ",
                        c.api_call_ns, "\n# copy_bytes_per_us ", c.copy_bytes_per_us,
                        "\n# oom_reclaim ", c.oom_reclaim ? 1 : 0, "\n"));
  // Every live pool and stream: their calls can come at any time, some by
  // the allocator's fast path, which must find them defined. The legacy
  // stream of device 0 is stream 0 in every v1 trace.
  std::vector<uint64_t> pools;
  core_.pools.ForEachPool([&](uint64_t h) { pools.push_back(h); });
  std::sort(pools.begin(), pools.end());
  for (uint64_t h : pools) {
    const uint64_t id = pool_ids_.Take();
    pools_.emplace(h, id);
    Print(PoolOp(h, id));
  }
  stream_ids_.next = 1;
  streams_.emplace(core_.devices[0].legacy_stream, 0);
  for (uint64_t h : core_.stream_handles) {
    if (h == 0 || streams_.contains(h)) continue;
    const uint64_t id = stream_ids_.Take();
    streams_.emplace(h, id);
    Print(StreamOp(h, id, /*runtime_locked=*/true));
  }
}

trace::StreamCreate Recorder::StreamOp(uint64_t handle, uint64_t id, bool runtime_locked) {
  trace::StreamCreate op{.stream = id};
  if (absl::StatusOr<RuntimeCore::StreamRec*> rec = core_.FindStream(handle); rec.ok()) {
    op.device = static_cast<uint64_t>((*rec)->device.load(std::memory_order_relaxed));
    if ((*rec)->legacy.load(std::memory_order_relaxed)) {
      op.flags = 2;
    } else if (runtime_locked && core_.seq.ordering().kind((*rec)->index.load(
                                     std::memory_order_relaxed)) == StreamKind::kNonBlocking) {
      // Only under the runtime's lock, which every stream creation holds;
      // elsewhere the kind is not known, and the stream is written blocking.
      op.flags = 1;
    }
  }
  return op;
}

trace::PoolCreate Recorder::PoolOp(uint64_t handle, uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  trace::PoolCreate op{.pool = id};
  absl::StatusOr<PoolTable::PoolRec*> rec = core_.pools.Find(handle);
  if (!rec.ok() || (*rec)->mem() == nullptr) {
    // An imported pool allocates nothing; it is named for completeness.
    op.line = trace::PoolCreate::Line::kImported;
    return op;
  }
  MemPool& mp = *(*rec)->mem();
  const PoolProps& p = mp.props();
  MutexLock pool_lock(&mp.central_mu());
  op.device = std::max((*rec)->attrs.device, 0);
  op.type = p.alloc_type;
  op.reuse_event = mp.reuse_follow_event_dependencies();
  op.reuse_opportunistic = mp.reuse_allow_opportunistic();
  op.reuse_internal = mp.reuse_allow_internal_dependencies();
  op.release_threshold = mp.release_threshold();
  op.growth = mp.growth();
  op.front_cache = mp.front_cache();
  op.wait_before_growth = mp.wait_before_growth();
  op.soft_limit = mp.soft_reserved_limit();
  op.is_default = (*rec)->attrs.is_default;
  op.max_size = p.max_size;
  op.page_policy = p.page_policy;
  op.acl_rounding = p.acl_rounding;
  op.acl_align32 = p.acl_align32;
  op.handle_types = p.handle_types;
  op.custom_upstream = (*rec)->attrs.custom_upstream;
  return op;
}

void Recorder::EmitText(absl::string_view text) {
  while (!text.empty()) {
    if (len_ == kBufferBytes) Flush();
    const size_t n = std::min(text.size(), kBufferBytes - len_);
    std::memcpy(buf_ + len_, text.data(), n);
    len_ += n;
    text.remove_prefix(n);
  }
}

void Recorder::Print(const trace::Op& op) {
  if (len_ + trace::kMaxPrintedLine > kBufferBytes) Flush();
  len_ = static_cast<size_t>(trace::PrintOp(op, buf_ + len_) - buf_);
}

void Recorder::Line(Times t) {
  if (clock_ != nullptr && t.start > last_ns_) {
    Print(trace::Advance{.ns = t.start - last_ns_});
    last_ns_ = t.start;
  }
}

void Recorder::Done(Times t) {
  last_ns_ = std::max(last_ns_, t.end);
  if (len_ >= kFlushBytes) Flush();
}

void Recorder::Write(Times t, const trace::Op& op) {
  Line(t);
  Print(op);
  Done(t);
}

uint64_t Recorder::StreamId(uint64_t handle) {
  if (handle == last_stream_) return last_stream_id_;
  auto it = streams_.find(handle);
  uint64_t id;
  if (it != streams_.end()) {
    id = it->second;
  } else {
    // A stream made while the recording opened: defined where first used.
    id = stream_ids_.Take();
    streams_.emplace(handle, id);
    Print(StreamOp(handle, id, /*runtime_locked=*/false));
  }
  last_stream_ = handle;
  last_stream_id_ = id;
  return id;
}

uint64_t Recorder::EventId(uint64_t handle) {
  auto [it, inserted] = events_.try_emplace(handle, 0);
  // An event made before the recording began is created where it is first
  // used, as v1 has it.
  if (inserted) it->second = event_ids_.Take();
  return it->second;
}

uint64_t Recorder::PoolId(uint64_t handle) {
  if (handle == last_pool_) return last_pool_id_;
  auto [it, inserted] = pools_.try_emplace(handle, 0);
  if (inserted) {
    // Made while the recording opened (its lock cannot be taken here): its
    // type and device, at the settings a pool is made with.
    it->second = pool_ids_.Take();
    Print(trace::PoolCreate{.line = trace::PoolCreate::Line::kBare, .pool = it->second});
  }
  last_pool_ = handle;
  last_pool_id_ = it->second;
  return it->second;
}

void Recorder::StreamCreated(uint64_t s, int device, bool non_blocking, Times t) {
  MutexLock lock(&mu_);
  const uint64_t id = stream_ids_.Take();
  streams_[s] = id;
  Write(t, trace::StreamCreate{id, static_cast<uint64_t>(device), non_blocking ? 1u : 0u});
}

void Recorder::StreamDestroyed(uint64_t s, Times t) {
  MutexLock lock(&mu_);
  auto it = streams_.find(s);
  if (it == streams_.end()) return;
  Write(t, trace::StreamDestroy{it->second});
  stream_ids_.Give(it->second);
  streams_.erase(it);
  if (last_stream_ == s) last_stream_ = 0;
}

void Recorder::EventCreated(uint64_t e, unsigned flags, Times t) {
  MutexLock lock(&mu_);
  const uint64_t id = event_ids_.Take();
  events_[e] = id;
  Write(t, trace::EventCreate{id, flags});
}

void Recorder::EventDestroyed(uint64_t e, Times t) {
  MutexLock lock(&mu_);
  auto it = events_.find(e);
  if (it == events_.end()) return;
  Write(t, trace::EventDestroy{it->second});
  event_ids_.Give(it->second);
  events_.erase(it);
}

void Recorder::EventRecorded(uint64_t e, uint64_t s, Times t, bool external) {
  MutexLock lock(&mu_);
  const uint64_t sid = StreamId(s);
  if (external) {
    Write(t, trace::RecordExternal{.event = EventId(e), .stream = sid});
  } else {
    Write(t, trace::Record{.event = EventId(e), .stream = sid});
  }
}

void Recorder::StreamWaited(uint64_t s, uint64_t e, Times t, bool external) {
  MutexLock lock(&mu_);
  const uint64_t sid = StreamId(s);
  if (external) {
    Write(t, trace::WaitExternal{.stream = sid, .event = EventId(e)});
  } else {
    Write(t, trace::Wait{.stream = sid, .event = EventId(e)});
  }
}

void Recorder::StreamSynchronized(uint64_t s, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::Sync{StreamId(s)});
}

void Recorder::EventSynchronized(uint64_t e, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::EventSync{EventId(e)});
}

void Recorder::DeviceSynchronized(int device, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::DeviceSync{static_cast<uint64_t>(device)});
}

void Recorder::StreamQueried(uint64_t s, bool complete, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::Query{StreamId(s), complete});
}

void Recorder::EventQueried(uint64_t e, bool complete, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::EventQuery{EventId(e), complete});
}

void Recorder::Kernel(uint64_t s, uint64_t duration_ns, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::Kernel{StreamId(s), duration_ns});
}

void Recorder::Copy(uint64_t s, uint64_t bytes, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::Copy{StreamId(s), bytes});
}

void Recorder::HostFunc(uint64_t s, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::Host{StreamId(s)});
}

void Recorder::HostAdvanced(uint64_t ns, Times t) {
  // A real-time executor's host time is written as the gaps between calls.
  if (clock_ != nullptr) return;
  MutexLock lock(&mu_);
  Write(t, trace::Advance{ns});
}

void Recorder::PoolCreated(uint64_t pool, Times t) {
  uint64_t id;
  {
    MutexLock lock(&mu_);
    id = pool_ids_.Take();
    pools_[pool] = id;
  }
  const trace::PoolCreate op = PoolOp(pool, id);
  MutexLock lock(&mu_);
  Write(t, op);
}

void Recorder::PoolDestroyed(uint64_t pool, Times t) {
  MutexLock lock(&mu_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  Write(t, trace::PoolDestroy{it->second});
  pool_ids_.Give(it->second);
  pools_.erase(it);
  if (last_pool_ == pool) last_pool_ = 0;
}

void Recorder::PoolAttributeSet(uint64_t pool, PoolAttr attr, uint64_t value, Times t) {
  if (trace::AttrName(attr) == nullptr) return;
  MutexLock lock(&mu_);
  Write(t, trace::Attr{PoolId(pool), attr, value});
}

void Recorder::PoolTrimmed(uint64_t pool, uint64_t min_bytes_to_keep, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::Trim{PoolId(pool), min_bytes_to_keep});
}

void Recorder::CurrentPoolSet(int device, uint64_t pool, Times t) {
  // Allocations name their pool, so a replay needs no current pool; the
  // call is written for readers, as a comment.
  MutexLock lock(&mu_);
  const uint64_t pid = PoolId(pool);
  Line(t);
  EmitText(absl::StrCat("# current_pool ", static_cast<uint64_t>(device), " ", pid, "\n"));
  Done(t);
}

void Recorder::Allocated(uint64_t size, uint64_t s, uint64_t pool, const Block* block,
                         ReuseRule rule, Times t) {
  MutexLock lock(&mu_);
  trace::Alloc op;
  op.id = alloc_ids_.Take();
  op.size = size;
  op.stream = StreamId(s);
  op.pool = PoolId(pool);
  if (block == nullptr) {
    // Size 0: a null pointer, nothing to free; the id goes back at once.
    alloc_ids_.Give(op.id);
    Write(t, op);
    Write(t, trace::Free{op.id, op.stream});
    return;
  }
  allocs_.emplace(block->addr(), op.id);
  op.decision = {.present = true,
                 .rule = rule,
                 .chunk = block->chunk->id,
                 .offset = static_cast<uint64_t>(block->addr() - block->chunk->base())};
  Write(t, op);
}

void Recorder::AllocationFailed(uint64_t size, uint64_t s, uint64_t pool, Times t) {
  MutexLock lock(&mu_);
  // Nothing became live: a replay skips the free that keeps the id's
  // bookkeeping whole, and the id is free again at once.
  trace::Alloc op;
  op.id = alloc_ids_.Take();
  op.size = size;
  op.stream = StreamId(s);
  op.pool = PoolId(pool);
  alloc_ids_.Give(op.id);
  op.decision = {.present = true, .failed = true};
  Write(t, op);
  Write(t, trace::Free{op.id, op.stream});
}

void Recorder::Freed(const void* ptr, uint64_t s, Times t) {
  MutexLock lock(&mu_);
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocs_.end()) {
    if (auto g = graph_allocs_.find(reinterpret_cast<uintptr_t>(ptr)); g != graph_allocs_.end()) {
      Write(t, trace::Free{g->second, StreamId(s)});
    }
    return;  // else made before the recording began
  }
  Write(t, trace::Free{it->second, StreamId(s)});
  alloc_ids_.Give(it->second);
  allocs_.erase(it);
}

void Recorder::Used(const void* ptr, uint64_t s, Times t) {
  MutexLock lock(&mu_);
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocs_.end()) return;  // made before the recording began
  Write(t, trace::Use{it->second, StreamId(s)});
}

void Recorder::Malloced(const void* ptr, uint64_t size, int device, Times t) {
  MutexLock lock(&mu_);
  const uint64_t id = alloc_ids_.Take();
  allocs_.emplace(reinterpret_cast<uintptr_t>(ptr), id);
  Write(t, trace::Malloc{id, size, static_cast<uint64_t>(device)});
}

void Recorder::FreedNow(const void* ptr, Times t) {
  MutexLock lock(&mu_);
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocs_.end()) {
    if (auto g = graph_allocs_.find(reinterpret_cast<uintptr_t>(ptr)); g != graph_allocs_.end()) {
      Write(t, trace::Release{g->second});
    }
    return;
  }
  Write(t, trace::Release{it->second});
  alloc_ids_.Give(it->second);
  allocs_.erase(it);
}

// ------------------------------------------------------------------ graphs

uint64_t Recorder::GraphAllocId(const void* ptr) {
  auto [it, inserted] = graph_allocs_.try_emplace(reinterpret_cast<uintptr_t>(ptr), 0);
  if (inserted) it->second = alloc_ids_.Take();
  return it->second;
}

std::optional<uint64_t> Recorder::GraphId(uint64_t handle) {
  auto it = graphs_.find(handle);
  if (it == graphs_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> Recorder::ExecId(uint64_t handle) {
  auto it = execs_.find(handle);
  if (it == execs_.end()) return std::nullopt;
  return it->second;
}

std::vector<uint64_t> Recorder::NodeIndices(absl::Span<const uint64_t> nodes) {
  std::vector<uint64_t> out;
  for (uint64_t n : nodes) {
    NodeIndex i = 0;
    if (core_.graphs->NodeAt(n, &i) != nullptr) out.push_back(i);
  }
  return out;
}

void Recorder::GraphAllocated(uint64_t size, uint64_t s, uint64_t pool, const void* ptr, Times t) {
  MutexLock lock(&mu_);
  trace::Alloc op;
  op.id = GraphAllocId(ptr);
  op.size = size;
  op.stream = StreamId(s);
  op.pool = PoolId(pool);
  op.decision = {.present = true, .graph = true};
  Write(t, op);
}

void Recorder::CaptureBegan(uint64_t s, CaptureMode mode, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::CaptureBegin{StreamId(s), static_cast<uint64_t>(mode)});
}

void Recorder::CaptureToGraphBegan(uint64_t s, uint64_t graph, CaptureMode mode, Times t) {
  // The nodes it begins after are the stream's frontier now.
  absl::StatusOr<CaptureInfo> info = core_.graphs->GetCaptureInfo(s);
  std::vector<uint64_t> deps;
  if (info.ok()) {
    for (GraphNodeId n : info->deps) deps.push_back(n.value);
  }
  MutexLock lock(&mu_);
  const std::optional<uint64_t> gid = GraphId(graph);
  if (!gid) return;
  trace::CaptureToGraph op{StreamId(s), *gid, static_cast<uint64_t>(mode), NodeIndices(deps)};
  // A longer frontier is cut: a line holds kMaxListed nodes.
  if (op.deps.size() > trace::kMaxListed) op.deps.resize(trace::kMaxListed);
  Write(t, op);
}

void Recorder::CaptureEnded(uint64_t s, uint64_t graph, bool failed, Times t) {
  if (failed) {
    absl::StatusOr<RuntimeCore::StreamRec*> rec = core_.FindStream(s);
    if (!rec.ok() || (*rec)->capturing.load(std::memory_order_relaxed)) return;
  }
  MutexLock lock(&mu_);
  trace::CaptureEnd op{.stream = StreamId(s)};
  if (graph != 0) {
    op.graph = graph_ids_.Take();
    graphs_[graph] = op.graph;
  }
  Write(t, op);
}

void Recorder::GraphCreated(uint64_t graph, Times t) {
  MutexLock lock(&mu_);
  const uint64_t id = graph_ids_.Take();
  graphs_[graph] = id;
  Write(t, trace::GraphCreate{id});
}

void Recorder::GraphDestroyed(uint64_t graph, Times t) {
  MutexLock lock(&mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) return;
  Write(t, trace::GraphDestroy{it->second});
  graph_ids_.Give(it->second);
  graphs_.erase(it);
}

void Recorder::GraphCloned(uint64_t graph, uint64_t from, Times t) {
  MutexLock lock(&mu_);
  const std::optional<uint64_t> fid = GraphId(from);
  if (!fid) return;
  const uint64_t id = graph_ids_.Take();
  graphs_[graph] = id;
  Write(t, trace::GraphClone{id, *fid});
}

void Recorder::NodeAdded(uint64_t graph, uint64_t node, uint64_t child, Times t) {
  NodeIndex index = 0;
  const Node* n = core_.graphs->NodeAt(node, &index);
  if (n == nullptr) return;
  MutexLock lock(&mu_);
  const std::optional<uint64_t> gid = GraphId(graph);
  if (!gid) return;
  trace::GraphNode op;
  op.graph = *gid;
  op.node = index;
  op.kind = NodeTypeOf(n->params);
  std::visit(
      [&](const auto& p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, KernelNode>) {
          op.value = p.duration_ns;
        } else if constexpr (std::is_same_v<P, MemcpyNode> || std::is_same_v<P, MemsetNode>) {
          op.value = p.bytes;
        } else if constexpr (std::is_same_v<P, EventRecordNode> ||
                             std::is_same_v<P, EventWaitNode>) {
          op.ref = EventId(p.event);
        } else if constexpr (std::is_same_v<P, ChildGraphNode>) {
          op.ref = GraphId(child).value_or(0);
        } else if constexpr (std::is_same_v<P, MemAllocNode>) {
          op.ref = GraphAllocId(p.dptr);
          op.device = static_cast<uint64_t>(p.props.device);
          op.value = p.bytes;
        } else if constexpr (std::is_same_v<P, MemFreeNode>) {
          op.ref = GraphAllocId(p.dptr);
        }
      },
      n->params);
  if (op.kind == GraphNodeType::kGraph && !GraphId(child)) return;
  // Dependencies past a line's worth follow as edges, in the order given.
  std::vector<std::pair<uint64_t, uint64_t>> more;
  for (size_t i = 0; i < n->deps.size(); ++i) {
    if (i < trace::kMaxListed) {
      op.deps.push_back(n->deps[i]);
    } else {
      more.emplace_back(n->deps[i], index);
    }
  }
  Write(t, op);
  if (!more.empty()) WriteEdges(*gid, more, t);
}

void Recorder::WriteEdges(uint64_t graph, absl::Span<const std::pair<uint64_t, uint64_t>> edges,
                          Times t) {
  constexpr size_t kPerLine = trace::kMaxListed / 2;
  for (size_t i = 0; i < edges.size(); i += kPerLine) {
    trace::GraphEdges op;
    op.graph = graph;
    op.edges.assign(edges.begin() + i, edges.begin() + std::min(edges.size(), i + kPerLine));
    Write(t, op);
  }
}

void Recorder::EdgesAdded(uint64_t graph, absl::Span<const std::pair<uint64_t, uint64_t>> edges,
                          Times t) {
  std::vector<std::pair<uint64_t, uint64_t>> indices;
  for (const auto& [from, to] : edges) {
    NodeIndex a = 0, b = 0;
    if (core_.graphs->NodeAt(from, &a) == nullptr || core_.graphs->NodeAt(to, &b) == nullptr) {
      return;
    }
    indices.emplace_back(a, b);
  }
  MutexLock lock(&mu_);
  if (const std::optional<uint64_t> gid = GraphId(graph)) WriteEdges(*gid, indices, t);
}

void Recorder::Instantiated(uint64_t exec, uint64_t graph, uint64_t flags, Times t) {
  MutexLock lock(&mu_);
  const std::optional<uint64_t> gid = GraphId(graph);
  if (!gid) return;
  const uint64_t id = exec_ids_.Take();
  execs_[exec] = id;
  Write(t, trace::GraphInstantiate{id, *gid, flags});
}

void Recorder::Uploaded(uint64_t exec, uint64_t s, Times t) {
  MutexLock lock(&mu_);
  if (const std::optional<uint64_t> id = ExecId(exec)) {
    Write(t, trace::GraphUpload{*id, StreamId(s)});
  }
}

void Recorder::Launched(uint64_t exec, uint64_t s, Times t) {
  MutexLock lock(&mu_);
  if (const std::optional<uint64_t> id = ExecId(exec)) {
    Write(t, trace::GraphLaunch{*id, StreamId(s)});
  }
}

void Recorder::ExecDestroyed(uint64_t exec, Times t) {
  MutexLock lock(&mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  Write(t, trace::GraphExecDestroy{it->second});
  exec_ids_.Give(it->second);
  execs_.erase(it);
}

void Recorder::ExecUpdated(uint64_t exec, uint64_t graph, Times t) {
  MutexLock lock(&mu_);
  const std::optional<uint64_t> id = ExecId(exec);
  const std::optional<uint64_t> gid = GraphId(graph);
  if (id && gid) Write(t, trace::GraphExecUpdate{*id, *gid});
}

void Recorder::GraphMemTrimmed(int device, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::GraphMemTrim{static_cast<uint64_t>(device)});
}

void Recorder::GraphMemHighReset(int device, bool used, Times t) {
  MutexLock lock(&mu_);
  Write(t, trace::GraphMemReset{static_cast<uint64_t>(device), used});
}

}  // namespace streampool::internal
