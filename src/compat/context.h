// The compatibility core: what a runtime API face (CUDA's cuda*, AscendCL's
// aclrt*) needs beyond the sp* API, shared by every face.
//
// Programs written for those APIs never create a runtime: the first call makes
// one for the whole process (an implicit runtime, as the CUDA runtime's
// primary contexts), configured from the face's environment variables, and it
// lives until the face resets it (cudaDeviceReset) or the process exits. They
// also keep per-host-thread state the sp* API does not have: the current
// device, the last error, and a default stream per device that belongs to the
// thread (cudaStreamPerThread).
//
// Locking: a call takes a reference to the runtime under mu_ and releases the
// lock before calling the runtime, because synchronize calls run host
// functions and kernel bodies on the calling thread; no lock of this layer is
// ever held across an sp* call.
#ifndef STREAMPOOL_SRC_COMPAT_CONTEXT_H_
#define STREAMPOOL_SRC_COMPAT_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/compat/env_config.h"
#include "src/compat/export.h"
#include "streampool/runtime.h"

namespace streampool::internal::compat {

// What makes every later call of a face fail until the runtime is reset: the
// equivalent of CUDA's "sticky" errors, which corrupt a context for good. The
// only one streampool can have is an emulated kernel that threw.
enum class Fault : int {
  kNone = 0,
  kKernelFailed = 1,
};

// One implicit runtime, from creation to reset. Shared by the calls in
// flight: a reset drops the context's reference, and the runtime is destroyed
// when the last call using it returns.
class STREAMPOOL_COMPAT_EXPORT ProcessRuntime {
 public:
  ProcessRuntime(std::unique_ptr<Runtime> runtime, const CompatConfig& config, uint64_t generation);
  ~ProcessRuntime();
  ProcessRuntime(const ProcessRuntime&) = delete;
  ProcessRuntime& operator=(const ProcessRuntime&) = delete;

  Runtime& cpp() const { return *runtime_; }
  spRuntime_t c() const { return runtime_->c(); }
  const CompatConfig& config() const { return config_; }
  int device_count() const { return config_.device_count; }
  // Unique across the process's implicit runtimes, so per-thread state made
  // for a runtime that was reset is recognised as stale.
  uint64_t generation() const { return generation_; }

  Fault fault() const { return fault_->load(std::memory_order_acquire); }
  // The cell kernel bodies write their failure to. Shared, not a pointer to
  // this object: a pending kernel must not keep the runtime alive.
  std::shared_ptr<std::atomic<Fault>> fault_cell() const { return fault_; }

  // Peer access as cudaDeviceEnablePeerAccess tracks it (bookkeeping only:
  // pool access follows spMemPoolSetAccess). Returns the previous state.
  bool SetPeerEnabled(int device, int peer, bool enabled);

  // The host's pinned pools as a face's memory-location calls see them
  // (cudaMemGetDefaultMemPool, cudaMemSetMemPool): the sp* runtime keeps a
  // default and a current pool per device only. 0 = none yet.
  uint64_t host_default_pool() const;
  // Keeps `pool` as the host's default pool unless another call kept one
  // first (the caller made it without this lock held); returns the one kept.
  uint64_t KeepHostDefaultPool(uint64_t pool);
  // The pool made current for the host; 0 means the default.
  uint64_t host_current_pool() const;
  void set_host_current_pool(uint64_t pool);

  // Managed allocations (cudaMallocManaged) are pinned host memory, which
  // every device reaches here; the face frees them with its device free, not
  // its host one, so it has to know them apart. Take returns whether ptr was
  // one, and forgets it.
  void AddManaged(void* ptr);
  bool TakeManaged(void* ptr);

 private:
  std::unique_ptr<Runtime> runtime_;
  const CompatConfig config_;
  const uint64_t generation_;
  std::shared_ptr<std::atomic<Fault>> fault_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> peer_enabled_ ABSL_GUARDED_BY(mu_);  // bit p of [d]: d -> p enabled
  uint64_t host_default_pool_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t host_current_pool_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<void*> managed_ ABSL_GUARDED_BY(mu_);
};

// A host thread's state in one face.
struct ThreadState {
  int device = 0;  // the current device (cudaSetDevice)
  // Whether the thread chose `device` itself: faces whose "current device"
  // query fails until then (aclrtGetDevice) read it.
  bool device_set = false;
  int last_error = 0;  // the face's code of the last failed call; 0 = none
  // The thread's own default stream per device, made on first use for the
  // runtime of this generation.
  uint64_t streams_generation = 0;
  std::vector<StreamId> per_thread_streams;
};

// One face's implicit runtime and its threads' state. Process-wide and never
// destroyed (a face holds one in a leaked static), so threads that exit late
// in the process still find it; the runtime inside it is destroyed at exit.
class STREAMPOOL_COMPAT_EXPORT Context {
 public:
  // env_prefix: "STREAMPOOL_CUDA_" reads STREAMPOOL_CUDA_DEVICES, ...
  explicit Context(std::string env_prefix);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // The implicit runtime, created from the environment on first use (problems
  // with the environment go to stderr, once per creation). kFailedPrecondition
  // once the process is exiting, after the runtime was destroyed.
  absl::StatusOr<std::shared_ptr<ProcessRuntime>> Acquire();
  // The runtime if one exists; never creates one.
  std::shared_ptr<ProcessRuntime> Current() const;
  // Destroys the runtime (once calls in flight return); the next call makes a
  // new one, reading the environment again.
  void Reset();
  // The calling thread's state in this face.
  ThreadState& Thread();
  // The calling thread's blocking default stream on `device`, created on
  // first use and destroyed when the thread exits.
  absl::StatusOr<StreamId> PerThreadStream(ProcessRuntime& runtime, int device);

  const std::string& env_prefix() const { return env_prefix_; }

  // Destroys the runtimes of every context (at exit); later Acquire calls fail.
  static void ShutdownAll();

 private:
  friend class ThreadStates;
  // Destroys a thread's per-thread streams if their runtime still lives.
  void ReleaseThreadStreams(ThreadState& state);

  const std::string env_prefix_;
  mutable absl::Mutex mu_;
  std::shared_ptr<ProcessRuntime> runtime_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace streampool::internal::compat

#endif  // STREAMPOOL_SRC_COMPAT_CONTEXT_H_
