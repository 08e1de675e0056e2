// Recorder: a runtime's history written as a streampool trace v1
// (traces/README.md, "Recorded traces"), so that a live program can be
// replayed by streampool-replay under other settings, and replayed at its
// own to reproduce every decision.
//
// What is written: the runtime's configuration in the header; streams with
// their flags, events, pools with their settings as they are first used;
// kernels and copies with their durations, host functions, event records
// and waits, synchronizes and queries, host time; allocations with the
// decision each got (rule, chunk and offset, as a comment v1 readers skip)
// and frees. Handles become small trace ids, reused once their object is
// gone, so that a program that runs for hours writes lines in proportion to
// its calls and nothing else grows.
//
// Every method runs under the runtime's lock, which is what orders the
// lines: while a recorder is open the allocator's paths without that lock
// are off (RuntimeCore::UpdateFastPath), so the file's order is the order in
// which the runtime decided. Methods are called after a call succeeded (a
// failed call changed nothing, so there is nothing to replay), except for
// failed allocations, which a replay must fail too, and queries, which cost
// host time either way.
#ifndef STREAMPOOL_SRC_RUNTIME_RECORDER_H_
#define STREAMPOOL_SRC_RUNTIME_RECORDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "streampool/mem_pool.h"
#include "streampool/runtime.h"

namespace streampool::internal {

struct RuntimeCore;
struct Block;

class Recorder {
 public:
  // Opens `path` for writing (truncated) and writes the header. Fails with
  // kInvalidArgument naming the path and the reason when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Recorder>> Open(const std::string& path, RuntimeCore& core);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Writes what is buffered and closes the file; the first write error since
  // Open, if any (kInternal with the path and errno's text).
  absl::Status Close();

  // Host time under an executor that runs in real time: the gap since the
  // last recorded call becomes an `advance` before the next one. `start_ns`
  // of a call that blocks (a synchronize) is its host time on entry, so that
  // the wait itself, which a replay reproduces, is not written as host time.
  bool real_time() const { return real_time_; }

  void StreamCreated(uint64_t s, int device, bool non_blocking, uint64_t start_ns);
  void StreamDestroyed(uint64_t s, uint64_t start_ns);
  void EventCreated(uint64_t e, unsigned flags, uint64_t start_ns);
  void EventDestroyed(uint64_t e, uint64_t start_ns);
  void EventRecorded(uint64_t e, uint64_t s, uint64_t start_ns);
  void StreamWaited(uint64_t s, uint64_t e, uint64_t start_ns);
  void StreamSynchronized(uint64_t s, uint64_t start_ns);
  void EventSynchronized(uint64_t e, uint64_t start_ns);
  void DeviceSynchronized(int device, uint64_t start_ns);
  void StreamQueried(uint64_t s, bool complete, uint64_t start_ns);
  void EventQueried(uint64_t e, bool complete, uint64_t start_ns);
  void Kernel(uint64_t s, uint64_t duration_ns, uint64_t start_ns);
  void Copy(uint64_t s, uint64_t bytes, uint64_t start_ns);
  void HostFunc(uint64_t s, uint64_t start_ns);
  void HostAdvanced(uint64_t ns);
  void PoolCreated(uint64_t pool, uint64_t start_ns);
  void PoolDestroyed(uint64_t pool, uint64_t start_ns);
  void PoolAttributeSet(uint64_t pool, PoolAttr attr, uint64_t value, uint64_t start_ns);
  void PoolTrimmed(uint64_t pool, uint64_t min_bytes_to_keep, uint64_t start_ns);
  void CurrentPoolSet(int device, uint64_t pool, uint64_t start_ns);
  // A MallocAsync that succeeded (block: what it handed out, null for size
  // 0) or failed for lack of memory (rule unused).
  void Allocated(uint64_t size, uint64_t s, uint64_t pool, const Block* block, ReuseRule rule,
                 uint64_t start_ns);
  void AllocationFailed(uint64_t size, uint64_t s, uint64_t pool, uint64_t start_ns);
  void Freed(const void* ptr, uint64_t s, uint64_t start_ns);
  // Malloc memory: made, and freed synchronously (Free) or in stream order
  // (FreeAsync, which Freed writes).
  void Malloced(const void* ptr, uint64_t size, int device, uint64_t start_ns);
  void FreedNow(const void* ptr, uint64_t start_ns);

 private:
  Recorder(int fd, std::string path, RuntimeCore& core);
  void Header();
  // Host time since the last call, written as an advance (real-time
  // executors only), then the line's start.
  std::string& Line(uint64_t start_ns);
  // Ends the line Line began; Done is the same for text that already ends
  // in a newline.
  void EndLine();
  void Done();
  void Flush();

  uint64_t StreamId(uint64_t handle);
  uint64_t EventId(uint64_t handle);
  uint64_t PoolId(uint64_t handle);
  // The pool's `pool` line (settings now), written once.
  void DefinePool(uint64_t handle, uint64_t id);

  // Ids that come back when their object goes, smallest first.
  struct IdSpace {
    uint64_t next = 0;
    std::vector<uint64_t> free;
    uint64_t Take();
    void Give(uint64_t id) { free.push_back(id); }
  };

  const int fd_;
  bool closed_ = false;
  const std::string path_;
  RuntimeCore& core_;
  const bool real_time_;
  std::string buf_;
  absl::Status error_;
  uint64_t last_ns_ = 0;

  absl::flat_hash_map<uint64_t, uint64_t> streams_;  // handle -> trace id
  absl::flat_hash_map<uint64_t, uint64_t> events_;
  absl::flat_hash_map<uint64_t, uint64_t> pools_;
  absl::flat_hash_map<uintptr_t, uint64_t> allocs_;  // base -> trace id
  IdSpace stream_ids_;
  IdSpace event_ids_;
  IdSpace pool_ids_;
  IdSpace alloc_ids_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_RECORDER_H_
