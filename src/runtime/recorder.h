// Recorder: a runtime's history written as a streampool trace v1
// (traces/README.md, "Recorded traces"), so that a live program can be
// replayed by streampool-replay under other settings, and replayed at its
// own to reproduce every decision.
//
// What is written: the runtime's configuration in the header; every live
// stream and pool when the recording begins, and those made later as they
// are made, pools with their settings; events; kernels and copies with their
// durations, host functions, event records and waits, synchronizes and
// queries, host time; allocations with the decision each got (rule, chunk
// and offset, as a comment v1 readers skip) and frees. Handles become small
// trace ids, reused once their object is gone, so that a program that runs
// for hours writes lines in proportion to its calls and nothing else grows.
//
// Order. A line is appended under the recorder's own lock while the caller
// still holds the lock that serialized the call's decision: the runtime's
// lock for calls that take it, a stream's lock for the allocator's fast
// path, a pool's lock for its central path without the runtime's lock. With
// one host thread calling the runtime at a time the file is the calls'
// order exactly. Calls of several threads on one stream, or a fast-path call
// racing a call that flushes that stream's cache, are written in the order
// their lines were appended, which a replay follows: it stays a valid
// history, but where two threads raced, a decision may come out otherwise
// (the replay counts those).
//
// Lines are written only for calls that succeeded (a failed call changed
// nothing), but for failed allocations, which a replay must fail too, and
// queries, which cost host time either way.
#ifndef STREAMPOOL_SRC_RUNTIME_RECORDER_H_
#define STREAMPOOL_SRC_RUNTIME_RECORDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/trace/ops.h"
#include "src/util/mutex.h"
#include "streampool/executor.h"
#include "streampool/graph.h"
#include "streampool/mem_pool.h"
#include "streampool/runtime.h"

namespace streampool::internal {

struct RuntimeCore;
struct Block;

class Recorder {
 public:
  // When a call ran, under an executor in real time (0 with the simulator,
  // whose virtual host time a replay reproduces by itself): `start` on entry
  // and `end` on return, so that the time between calls becomes an `advance`
  // and a synchronize's own wait, which a replay waits too, does not.
  struct Times {
    uint64_t start = 0;
    uint64_t end = 0;
  };

  // Opens `path` for writing (truncated) and writes the header, with every
  // live stream and pool of the runtime. Runs under the runtime's lock.
  // kInvalidArgument naming the path and the reason when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Recorder>> Open(const std::string& path, RuntimeCore& core);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Writes what is buffered and closes the file; the first write error since
  // Open, if any (kInternal with the path and errno's text).
  absl::Status Close() ABSL_LOCKS_EXCLUDED(mu_);

  // Host time now, for Times, when it is real (else 0). Lock-free.
  uint64_t Now() const { return clock_ != nullptr ? clock_->Now() : 0; }

  // Calls through the runtime's lock (RuntimeImpl::Run).
  void StreamCreated(uint64_t s, int device, bool non_blocking, Times t);
  void StreamDestroyed(uint64_t s, Times t);
  void EventCreated(uint64_t e, unsigned flags, Times t);
  void EventDestroyed(uint64_t e, Times t);
  void EventRecorded(uint64_t e, uint64_t s, Times t, bool external = false);
  void StreamWaited(uint64_t s, uint64_t e, Times t, bool external = false);
  void StreamSynchronized(uint64_t s, Times t);
  void EventSynchronized(uint64_t e, Times t);
  void DeviceSynchronized(int device, Times t);
  void StreamQueried(uint64_t s, bool complete, Times t);
  void EventQueried(uint64_t e, bool complete, Times t);
  void Kernel(uint64_t s, uint64_t duration_ns, Times t);
  void Copy(uint64_t s, uint64_t bytes, Times t);
  void HostFunc(uint64_t s, Times t);
  void HostAdvanced(uint64_t ns, Times t);
  // Takes the pool's lock to read its settings: not under a pool's lock.
  void PoolCreated(uint64_t pool, Times t);
  void PoolDestroyed(uint64_t pool, Times t);
  void PoolAttributeSet(uint64_t pool, PoolAttr attr, uint64_t value, Times t);
  void PoolTrimmed(uint64_t pool, uint64_t min_bytes_to_keep, Times t);
  void CurrentPoolSet(int device, uint64_t pool, Times t);
  void Malloced(const void* ptr, uint64_t size, int device, Times t);
  void FreedNow(const void* ptr, Times t);

  // The allocator's calls, from any of its paths, under the lock that
  // serialized the decision. A MallocAsync that succeeded (block: what it
  // handed out, null for size 0), one that failed for lack of memory, and a
  // FreeAsync.
  void Allocated(uint64_t size, uint64_t s, uint64_t pool, const Block* block, ReuseRule rule,
                 Times t);
  void AllocationFailed(uint64_t size, uint64_t s, uint64_t pool, Times t);
  void Freed(const void* ptr, uint64_t s, Times t);
  // RecordUse: the allocation at ptr is used by stream s too.
  void Used(const void* ptr, uint64_t s, Times t);
  // A MallocAsync on a capturing stream: an allocation node at ptr, whose
  // id names that address for the rest of the recording.
  void GraphAllocated(uint64_t size, uint64_t s, uint64_t pool, const void* ptr, Times t);

  // Graphs, through the runtime's lock. Lines naming a graph or an
  // executable graph made before the recording began are not written.
  void CaptureBegan(uint64_t s, CaptureMode mode, Times t);
  void CaptureToGraphBegan(uint64_t s, uint64_t graph, CaptureMode mode, Times t);
  // graph: the captured graph, 0 when the capture handed out none; failed:
  // the call failed, and is written only if the capture ended.
  void CaptureEnded(uint64_t s, uint64_t graph, bool failed, Times t);
  void GraphCreated(uint64_t graph, Times t);
  void GraphDestroyed(uint64_t graph, Times t);
  void GraphCloned(uint64_t graph, uint64_t from, Times t);
  // A node added by hand; child: the child graph of a child graph node.
  void NodeAdded(uint64_t graph, uint64_t node, uint64_t child, Times t);
  void EdgesAdded(uint64_t graph, absl::Span<const std::pair<uint64_t, uint64_t>> edges, Times t);
  void Instantiated(uint64_t exec, uint64_t graph, uint64_t flags, Times t);
  void Uploaded(uint64_t exec, uint64_t s, Times t);
  void Launched(uint64_t exec, uint64_t s, Times t);
  void ExecDestroyed(uint64_t exec, Times t);
  void ExecUpdated(uint64_t exec, uint64_t graph, Times t);
  void GraphMemTrimmed(int device, Times t);
  void GraphMemHighReset(int device, bool used, Times t);

 private:
  Recorder(int fd, std::string path, RuntimeCore& core);
  // The header and the definitions of what is live (Open, before anyone
  // else can see the recorder).
  void Header() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // A call's op: Line, the op, Done.
  void Write(Times t, const trace::Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Host time since the last call as an `advance` (real time only), before
  // a call's line.
  void Line(Times t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a line: the time it ended, and a write once enough is buffered.
  void Done(Times t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An op's line alone (a definition the call's op needs first).
  void Print(const trace::Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EmitText(absl::string_view text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Flush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  uint64_t StreamId(uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t EventId(uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A graph's or an executable graph's id; nullopt for one made before the
  // recording began.
  std::optional<uint64_t> GraphId(uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<uint64_t> ExecId(uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Node handles as their indices in their graph.
  std::vector<uint64_t> NodeIndices(absl::Span<const uint64_t> nodes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The id naming a graph allocation's address: the one it has, else a new one.
  uint64_t GraphAllocId(const void* ptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Edges in lines of at most trace::kMaxListed nodes.
  void WriteEdges(uint64_t graph, absl::Span<const std::pair<uint64_t, uint64_t>> edges, Times t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A pool's id; one not defined yet (imported, or made while the recording
  // opened) is defined by what the caller can tell without its lock.
  uint64_t PoolId(uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A pool's `pool` op with its settings now; takes its lock.
  trace::PoolCreate PoolOp(uint64_t handle, uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // A stream's `stream` op: device and flags (whether it is non-blocking
  // is read only under the runtime's lock).
  trace::StreamCreate StreamOp(uint64_t handle, uint64_t id,
                               bool runtime_locked) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // Ids that come back when their object goes, smallest first.
  struct IdSpace {
    uint64_t next = 0;
    std::vector<uint64_t> free;
    uint64_t Take();
    void Give(uint64_t id) { free.push_back(id); }
  };

  const int fd_;
  const std::string path_;
  RuntimeCore& core_;
  // The executor's clock when host time is real, else null.
  const Executor* const clock_;

  mutable Mutex mu_{LockRank::kRecorder};
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  const std::unique_ptr<char[]> buf_storage_;
  char* const buf_ ABSL_PT_GUARDED_BY(mu_);  // buf_storage_, its bytes under mu_
  size_t len_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  uint64_t last_ns_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, uint64_t> streams_ ABSL_GUARDED_BY(mu_);  // handle -> id
  absl::flat_hash_map<uint64_t, uint64_t> events_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> pools_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uintptr_t, uint64_t> allocs_ ABSL_GUARDED_BY(mu_);  // base -> id
  // Graph allocations' addresses -> their ids. An address is freed once per
  // launch and lives as long as graphs refer to it, so its id is never
  // given back: these grow with the addresses graphs reserve, not with
  // launches.
  absl::flat_hash_map<uintptr_t, uint64_t> graph_allocs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> graphs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> execs_ ABSL_GUARDED_BY(mu_);
  IdSpace graph_ids_ ABSL_GUARDED_BY(mu_);
  IdSpace exec_ids_ ABSL_GUARDED_BY(mu_);
  IdSpace stream_ids_ ABSL_GUARDED_BY(mu_);
  IdSpace event_ids_ ABSL_GUARDED_BY(mu_);
  IdSpace pool_ids_ ABSL_GUARDED_BY(mu_);
  IdSpace alloc_ids_ ABSL_GUARDED_BY(mu_);
  // The last stream and pool looked up: most calls repeat them.
  uint64_t last_stream_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_stream_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_pool_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_pool_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RECORDER_H_
