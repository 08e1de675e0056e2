#include "src/runtime/recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/pool/block.h"
#include "src/pool/names.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {
namespace {

// Lines are buffered and written in blocks: a recording costs a formatted
// line per call, not a system call.
constexpr size_t kFlushBytes = 64 * 1024;

const char* ThresholdText(uint64_t v, std::string* storage) {
  if (v == UINT64_MAX) return "max";
  *storage = absl::StrCat(v);
  return storage->c_str();
}

// The names `attr` lines use: the settings a replay must reproduce.
const char* AttrName(PoolAttr attr) {
  switch (attr) {
    case PoolAttr::kReuseFollowEventDependencies:
      return "reuse_event";
    case PoolAttr::kReuseAllowOpportunistic:
      return "reuse_opportunistic";
    case PoolAttr::kReuseAllowInternalDependencies:
      return "reuse_internal";
    case PoolAttr::kReleaseThreshold:
      return "threshold";
    case PoolAttr::kFrontCache:
      return "front_cache";
    default:
      return nullptr;  // watermarks and read-only values decide nothing
  }
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
      real_time_(core.sim == nullptr) {
  buf_.reserve(kFlushBytes + 4096);
  // The legacy stream of device 0 is stream 0 in every v1 trace.
  stream_ids_.next = 1;
  streams_.emplace(core.devices[0].legacy_stream, 0);
  MutexLock order_lock(&core.order_mu);
  last_ns_ = core.executor->Now();
}

Recorder::~Recorder() { Close().IgnoreError(); }

absl::Status Recorder::Close() {
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
  while (done < buf_.size() && error_.ok()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = absl::InternalError(absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
      break;
    }
    done += static_cast<size_t>(n);
  }
  buf_.clear();
}

namespace {

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

void Recorder::Header() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const RuntimeConfig& c = core_.config;
  absl::StrAppend(&buf_, "# streampool trace v1\n", "# recorded_by streampool\n");
  if (const std::string command = CommandLine(); !command.empty()) {
    absl::StrAppend(&buf_, "# program ", command, "\n");
  }
  absl::StrAppend(&buf_, "# executor ", core_.sim != nullptr ? "simulator" : "real_time", "\n",
                  "# device_count ", c.device_count, "\n", "# device_capacity ", c.device_capacity,
                  "\n", "# backing ", EnumName(c.backing), "\n", "# api_call_ns ", c.api_call_ns,
                  "\n", "# copy_bytes_per_us ", c.copy_bytes_per_us, "\n");
  // Every device's current pool, as the program starts with it.
  for (int d = 0; d < c.device_count; ++d) {
    PoolId(core_.devices[d].current_pool.load(std::memory_order_relaxed));
  }
}

std::string& Recorder::Line(uint64_t start_ns) {
  if (real_time_ && start_ns > last_ns_) {
    absl::StrAppend(&buf_, "advance ", start_ns - last_ns_, "\n");
    last_ns_ = start_ns;
  }
  return buf_;
}

void Recorder::EndLine() {
  buf_.push_back('\n');
  Done();
}

void Recorder::Done() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (real_time_) {
    MutexLock order_lock(&core_.order_mu);
    last_ns_ = std::max(last_ns_, core_.executor->Now());
  }
  if (buf_.size() >= kFlushBytes) Flush();
}

uint64_t Recorder::StreamId(uint64_t handle) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto it = streams_.find(handle);
  if (it != streams_.end()) return it->second;
  // A stream made before the recording began, or a legacy stream of another
  // device: defined where it is first used.
  const uint64_t id = stream_ids_.Take();
  streams_.emplace(handle, id);
  int device = 0;
  unsigned flags = 0;
  if (absl::StatusOr<RuntimeCore::StreamRec*> rec = core_.FindStream(handle); rec.ok()) {
    device = (*rec)->device.load(std::memory_order_relaxed);
    if ((*rec)->legacy.load(std::memory_order_relaxed)) {
      flags = 2;
    } else {
      MutexLock order_lock(&core_.order_mu);
      const StreamIndex idx = (*rec)->index.load(std::memory_order_relaxed);
      if (core_.ordering.kind(idx) == StreamKind::kNonBlocking) flags = 1;
    }
  }
  absl::StrAppend(&buf_, "stream ", id, " ", device, " ", flags, "\n");
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
  auto [it, inserted] = pools_.try_emplace(handle, 0);
  if (inserted) {
    it->second = pool_ids_.Take();
    DefinePool(handle, it->second);
  }
  return it->second;
}

void Recorder::DefinePool(uint64_t handle, uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  absl::StatusOr<PoolTable::PoolRec*> rec = core_.pools.Find(handle);
  if (!rec.ok() || (*rec)->mem() == nullptr) {
    // An imported pool allocates nothing; it is named for completeness.
    absl::StrAppend(&buf_, "pool ", id, " 0 imported=1\n");
    return;
  }
  MemPool& mp = *(*rec)->mem();
  const PoolProps& p = mp.props();
  std::string threshold;
  MutexLock pool_lock(&mp.central_mu());
  std::string reuse;
  if (mp.reuse_follow_event_dependencies()) absl::StrAppend(&reuse, "event");
  if (mp.reuse_allow_opportunistic())
    absl::StrAppend(&reuse, reuse.empty() ? "" : "+", "opportunistic");
  if (mp.reuse_allow_internal_dependencies()) {
    absl::StrAppend(&reuse, reuse.empty() ? "" : "+", "internal");
  }
  if (reuse.empty()) reuse = "none";
  absl::StrAppend(&buf_, "pool ", id, " ", (*rec)->attrs.device < 0 ? 0 : (*rec)->attrs.device,
                  " type=", EnumName(p.alloc_type), " reuse=", reuse,
                  " threshold=", ThresholdText(mp.release_threshold(), &threshold),
                  " growth=", EnumName(mp.growth()), " front_cache=", mp.front_cache() ? 1 : 0,
                  " default=", (*rec)->attrs.is_default ? 1 : 0);
  if (p.max_size != 0) absl::StrAppend(&buf_, " max_size=", p.max_size);
  if (p.alloc_type == AllocationType::kHugePage || p.alloc_type == AllocationType::kDvpp) {
    absl::StrAppend(&buf_, " page_policy=", EnumName(p.page_policy));
  }
  if (p.acl_rounding) absl::StrAppend(&buf_, " acl_rounding=1");
  if (p.acl_align32) absl::StrAppend(&buf_, " acl_align32=1");
  if (p.handle_types != 0) absl::StrAppend(&buf_, " handle_types=", p.handle_types);
  buf_.push_back('\n');
}

void Recorder::StreamCreated(uint64_t s, int device, bool non_blocking, uint64_t start_ns) {
  const uint64_t id = stream_ids_.Take();
  streams_[s] = id;
  absl::StrAppend(&Line(start_ns), "stream ", id, " ", device, " ", non_blocking ? 1 : 0);
  EndLine();
}

void Recorder::StreamDestroyed(uint64_t s, uint64_t start_ns) {
  auto it = streams_.find(s);
  if (it == streams_.end()) return;  // never used while recording: nothing to undo
  absl::StrAppend(&Line(start_ns), "sdestroy ", it->second);
  EndLine();
  stream_ids_.Give(it->second);
  streams_.erase(it);
}

void Recorder::EventCreated(uint64_t e, unsigned flags, uint64_t start_ns) {
  const uint64_t id = event_ids_.Take();
  events_[e] = id;
  absl::StrAppend(&Line(start_ns), "event ", id, " ", flags);
  EndLine();
}

void Recorder::EventDestroyed(uint64_t e, uint64_t start_ns) {
  auto it = events_.find(e);
  if (it == events_.end()) return;
  absl::StrAppend(&Line(start_ns), "edestroy ", it->second);
  EndLine();
  event_ids_.Give(it->second);
  events_.erase(it);
}

void Recorder::EventRecorded(uint64_t e, uint64_t s, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  const uint64_t eid = EventId(e);
  absl::StrAppend(&Line(start_ns), "record ", eid, " ", sid);
  EndLine();
}

void Recorder::StreamWaited(uint64_t s, uint64_t e, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  const uint64_t eid = EventId(e);
  absl::StrAppend(&Line(start_ns), "wait ", sid, " ", eid);
  EndLine();
}

void Recorder::StreamSynchronized(uint64_t s, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  absl::StrAppend(&Line(start_ns), "sync ", sid);
  EndLine();
}

void Recorder::EventSynchronized(uint64_t e, uint64_t start_ns) {
  const uint64_t eid = EventId(e);
  absl::StrAppend(&Line(start_ns), "esync ", eid);
  EndLine();
}

void Recorder::DeviceSynchronized(int device, uint64_t start_ns) {
  std::string& line = Line(start_ns);
  if (device == 0) {
    absl::StrAppend(&line, "dsync");
  } else {
    absl::StrAppend(&line, "dsync ", device);
  }
  EndLine();
}

void Recorder::StreamQueried(uint64_t s, bool complete, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  absl::StrAppend(&Line(start_ns), "query ", sid, complete ? "" : "  # not_ready");
  EndLine();
}

void Recorder::EventQueried(uint64_t e, bool complete, uint64_t start_ns) {
  const uint64_t eid = EventId(e);
  absl::StrAppend(&Line(start_ns), "equery ", eid, complete ? "" : "  # not_ready");
  EndLine();
}

void Recorder::Kernel(uint64_t s, uint64_t duration_ns, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  absl::StrAppend(&Line(start_ns), "kernel ", sid, " ", duration_ns);
  EndLine();
}

void Recorder::Copy(uint64_t s, uint64_t bytes, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  absl::StrAppend(&Line(start_ns), "copy ", sid, " ", bytes);
  EndLine();
}

void Recorder::HostFunc(uint64_t s, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  absl::StrAppend(&Line(start_ns), "host ", sid);
  EndLine();
}

void Recorder::HostAdvanced(uint64_t ns) {
  // A real-time executor's host time is written as the gaps between calls.
  if (real_time_) return;
  absl::StrAppend(&buf_, "advance ", ns);
  EndLine();
}

void Recorder::PoolCreated(uint64_t pool, uint64_t start_ns) {
  Line(start_ns);
  PoolId(pool);
  Done();
}

void Recorder::PoolDestroyed(uint64_t pool, uint64_t start_ns) {
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  absl::StrAppend(&Line(start_ns), "pdestroy ", it->second);
  EndLine();
  pool_ids_.Give(it->second);
  pools_.erase(it);
}

void Recorder::PoolAttributeSet(uint64_t pool, PoolAttr attr, uint64_t value, uint64_t start_ns) {
  const char* name = AttrName(attr);
  if (name == nullptr) return;
  const uint64_t pid = PoolId(pool);
  std::string text;
  absl::StrAppend(
      &Line(start_ns), "attr ", pid, " ", name, " ",
      attr == PoolAttr::kReleaseThreshold ? ThresholdText(value, &text) : (value != 0 ? "1" : "0"));
  EndLine();
}

void Recorder::PoolTrimmed(uint64_t pool, uint64_t min_bytes_to_keep, uint64_t start_ns) {
  const uint64_t pid = PoolId(pool);
  absl::StrAppend(&Line(start_ns), "trim ", pid, " ", min_bytes_to_keep);
  EndLine();
}

void Recorder::CurrentPoolSet(int device, uint64_t pool, uint64_t start_ns) {
  // Allocations name their pool, so a replay needs no current pool; the
  // call is written for what it costs (nothing) and for readers.
  const uint64_t pid = PoolId(pool);
  absl::StrAppend(&Line(start_ns), "# current_pool ", device, " ", pid);
  EndLine();
}

void Recorder::Allocated(uint64_t size, uint64_t s, uint64_t pool, const Block* block,
                         ReuseRule rule, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  const uint64_t pid = PoolId(pool);
  const uint64_t id = alloc_ids_.Take();
  std::string& line = Line(start_ns);
  absl::StrAppend(&line, "alloc ", id, " ", size, " ", sid, " ", pid);
  if (block == nullptr) {
    // Size 0: a null pointer, nothing to free; the id goes back at once.
    alloc_ids_.Give(id);
    absl::StrAppend(&line, "\nfree ", id, " ", sid);
  } else {
    allocs_.emplace(block->addr(), id);
    absl::StrAppend(&line, "  # ", ReuseRuleName(rule), " ", block->chunk->id, "+",
                    block->addr() - block->chunk->base());
  }
  EndLine();
}

void Recorder::AllocationFailed(uint64_t size, uint64_t s, uint64_t pool, uint64_t start_ns) {
  const uint64_t sid = StreamId(s);
  const uint64_t pid = PoolId(pool);
  const uint64_t id = alloc_ids_.Take();
  // Nothing became live: the id is free again, and a replay's free of it is
  // never written.
  alloc_ids_.Give(id);
  std::string& line = Line(start_ns);
  absl::StrAppend(&line, "alloc ", id, " ", size, " ", sid, " ", pid, "  # failed");
  EndLine();
  // The replay keeps the id live until a free; give it one that frees
  // nothing (a failed allocation's free is skipped).
  absl::StrAppend(&buf_, "free ", id, " ", sid);
  EndLine();
}

void Recorder::Freed(const void* ptr, uint64_t s, uint64_t start_ns) {
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocs_.end()) return;  // made before the recording began
  const uint64_t sid = StreamId(s);
  absl::StrAppend(&Line(start_ns), "free ", it->second, " ", sid);
  EndLine();
  alloc_ids_.Give(it->second);
  allocs_.erase(it);
}

void Recorder::Malloced(const void* ptr, uint64_t size, int device, uint64_t start_ns) {
  const uint64_t id = alloc_ids_.Take();
  allocs_.emplace(reinterpret_cast<uintptr_t>(ptr), id);
  absl::StrAppend(&Line(start_ns), "malloc ", id, " ", size, " ", device);
  EndLine();
}

void Recorder::FreedNow(const void* ptr, uint64_t start_ns) {
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocs_.end()) return;
  absl::StrAppend(&Line(start_ns), "release ", it->second);
  EndLine();
  alloc_ids_.Give(it->second);
  allocs_.erase(it);
}

}  // namespace streampool::internal
