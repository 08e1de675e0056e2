// The process's PyTorch allocator: its settings, its one runtime over the
// machine's CUDA devices, and PyTorch's streams adopted into that runtime.
//
// PyTorch calls in from any thread, and frees tensors until the process
// ends, some from static destructors. So the state is made once and never
// destroyed, the runtime likewise, and adopted streams are never ended: an
// adoption, once made, stays right for the process's life, which is what lets
// each thread memoize its adoptions without invalidation.
//
// Paths. An allocation or free (the fast path) reads the runtime from an
// atomic and the stream from the calling thread's memo, then calls
// spMallocAsync or spFreeAsync; the lock below is taken only to make the
// runtime, to adopt a stream the thread has not seen, and by the reports.
#ifndef STREAMPOOL_SRC_TORCH_ALLOCATOR_STATE_H_
#define STREAMPOOL_SRC_TORCH_ALLOCATOR_STATE_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "src/torch/settings.h"
#include "streampool/streampool.h"

namespace streampool::internal::torch {

// What a state makes its runtime from. The process's state makes a CUDA
// runtime from the process environment; tests make others (a simulator
// runtime serves the legacy stream as a CUDA one does).
struct AllocatorOptions {
  // The runtime made at the first allocation.
  spRuntimeConfig runtime;
  // Where the settings come from when Configure was not called.
  EnvLookup env;
  // Whether allocations stop once the process begins to exit (exiting()):
  // the process's state only, whose runtime outlives every destructor.
  bool watch_exit = false;
};

class AllocatorState {
 public:
  // The process's one state (never destroyed): every CUDA device, the
  // process environment.
  static AllocatorState& Instance();

  explicit AllocatorState(AllocatorOptions options) : options_(std::move(options)) {}
  // Destroys the runtime (a test's state; the process's is never destroyed).
  ~AllocatorState();
  AllocatorState(const AllocatorState&) = delete;
  AllocatorState& operator=(const AllocatorState&) = delete;

  // streampool_torch_configure: settings nullptr forgets the configured ones
  // (the environment applies again).
  spError_t Configure(const char* settings, std::string* error) ABSL_LOCKS_EXCLUDED(mu_);

  // The runtime, made now if it is not yet; nullptr with the reason when it
  // cannot be (remembered until Configure).
  spRuntime_t GetOrCreateRuntime(spError_t* code, std::string* error) ABSL_LOCKS_EXCLUDED(mu_);
  // The runtime, or nullptr before it is made.
  spRuntime_t runtime() const { return runtime_.load(std::memory_order_acquire); }
  // What the reports answer before the runtime exists: spErrorNotReady, or
  // the reason its creation failed.
  spError_t NoRuntimeError(std::string* error) const ABSL_LOCKS_EXCLUDED(mu_);

  // The entry points of PyTorch's pluggable allocator (torch_allocator.h).
  void* Allocate(ssize_t size, int device, void* native, std::string* error);
  void Free(void* ptr, int device, void* native);
  void RecordStream(void* ptr, void* native);

  // How many streams of `device` have been adopted.
  int StreamCount(int device) const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the process has begun to exit (its atexit handlers run): from then
  // on allocations fail and frees are no-ops, so that the static destructors
  // that free tensors call into nothing that may be gone already.
  bool exiting() const { return exiting_.load(std::memory_order_relaxed); }

 private:
  static void MarkExiting();

  // The stream of `rt` over PyTorch's `native` stream of `device`: this
  // thread's memo, else the shared map, else a new adoption.
  spStream_t StreamFor(spRuntime_t rt, int device, void* native, std::string* error)
      ABSL_LOCKS_EXCLUDED(mu_);
  spStream_t AdoptLocked(spRuntime_t rt, int device, void* native, std::string* error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  spError_t CreateRuntimeLocked(std::string* error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AllocatorOptions options_;
  mutable absl::Mutex mu_;
  // Configure's settings; unset, the environment's are read at creation.
  std::optional<TorchSettings> configured_ ABSL_GUARDED_BY(mu_);
  // Why the last creation failed (spSuccess: none failed since Configure).
  spError_t creation_error_ ABSL_GUARDED_BY(mu_) = spSuccess;
  std::string creation_message_ ABSL_GUARDED_BY(mu_);
  // Written once, under mu_; read without it.
  std::atomic<spRuntime_t> runtime_{nullptr};
  std::atomic<bool> exiting_{false};
  // (device, native stream) -> the adopted stream.
  absl::flat_hash_map<std::pair<int, uintptr_t>, spStream_t> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streampool::internal::torch

#endif  // STREAMPOOL_SRC_TORCH_ALLOCATOR_STATE_H_
