// Other allocators than streampool's pools, as replay models: what PyTorch's
// CUDA caching allocator and RMM's pool_memory_resource would do with the
// same trace. A model keeps its own address space and counts what it took
// from the device; the replay still runs the trace's streams, events and
// kernels on the simulator, and a model asks it, through ModelStreams, for
// what it needs of stream order (events recorded, queried and waited on).
//
// The models follow the published algorithms, not their code: the sizing,
// pool and split rules, best fit and its tie-breaks, the stream rules and
// the out-of-memory paths are the documented ones (torch_model.h and
// rmm_model.h say which, and what they leave out).
#ifndef STREAMPOOL_SRC_REPLAY_ALLOCATOR_MODEL_H_
#define STREAMPOOL_SRC_REPLAY_ALLOCATOR_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/replay/trace.h"

namespace streampool::replay {

// Which allocator a replay runs. kCuda is streampool's pool with the
// settings CUDA's own pool has by default: chunked growth, every reuse rule,
// release threshold 0.
enum class AllocatorKind { kStreampool, kPytorch, kRmmPool, kCuda };
const char* AllocatorName(AllocatorKind kind);
// "streampool", "pytorch", "rmm-pool" or "cuda".
absl::StatusOr<AllocatorKind> ParseAllocator(absl::string_view name);
// A comma-separated list of names ("all": every allocator, in enum order).
absl::StatusOr<std::vector<AllocatorKind>> ParseAllocatorList(absl::string_view list);
inline bool IsModel(AllocatorKind kind) {
  return kind == AllocatorKind::kPytorch || kind == AllocatorKind::kRmmPool;
}

// PYTORCH_CUDA_ALLOC_CONF's options that change placement.
struct TorchOptions {
  // max_split_size_mb, in bytes; UINT64_MAX: unlimited (PyTorch's default).
  uint64_t max_split_size = UINT64_MAX;
  // roundup_power2_divisions: per power-of-two interval of the size, from
  // [1 MiB, 2 MiB) (index 0) to [32 GiB, 64 GiB) and up (index 15); 0 or 1
  // rounds to 512 B only. Sizes below 1 MiB use index 0.
  std::array<uint32_t, 16> roundup_divisions{};
  bool expandable_segments = false;
  // garbage_collection_threshold (0: off). PyTorch applies it only with a
  // per-process memory fraction set; a replay's device capacity is that limit.
  double garbage_collection_threshold = 0;

  // The options as PYTORCH_CUDA_ALLOC_CONF writes them; "" for the defaults.
  std::string ToString() const;
};
// PYTORCH_CUDA_ALLOC_CONF's syntax: "key:value,key:value", where
// roundup_power2_divisions takes N or "[256:1,512:2,>:8]" (sizes in MiB).
// Options that do not change placement (pinned_*, release_lock_on_cudamalloc,
// backend) are accepted and ignored; anything else is InvalidArgument.
absl::StatusOr<TorchOptions> ParseTorchConf(absl::string_view conf);

// RMM pool_memory_resource's construction arguments.
struct RmmOptions {
  uint64_t initial_pool_size = 0;  // taken from upstream at construction
  uint64_t maximum_pool_size = 0;  // 0: no maximum (the device's capacity)
};

// What a model needs of stream order; the replay implements it over the
// simulator. Markers are events recorded on a trace stream (a dense trace
// stream index).
class ModelStreams {
 public:
  virtual ~ModelStreams() = default;
  // Records a marker on `stream` now.
  virtual absl::StatusOr<uint64_t> Record(uint32_t stream) = 0;
  // Whether the marker's work has completed (at the host's virtual now).
  virtual absl::StatusOr<bool> Done(uint64_t marker) = 0;
  // Makes `stream` wait for the marker.
  virtual absl::Status Wait(uint32_t stream, uint64_t marker) = 0;
  virtual absl::Status Synchronize(uint64_t marker) = 0;
  virtual void Forget(uint64_t marker) = 0;
  virtual absl::Status SynchronizeDevice() = 0;
};

struct ModelCounters {
  uint64_t segments_made = 0;   // cudaMalloc / upstream allocations / maps
  uint64_t segments_freed = 0;  // cudaFree / unmaps
  uint64_t segments_high = 0;   // most segments held at once
  uint64_t cross_stream_reuses = 0;
  uint64_t waits = 0;        // event waits the allocator inserted
  uint64_t syncs = 0;        // device synchronizations it forced
  uint64_t oom_retries = 0;  // allocations retried after freeing cache
  uint64_t failed = 0;
};

class AllocatorModel {
 public:
  virtual ~AllocatorModel() = default;
  // The block's address, or ResourceExhausted when the device cannot give
  // what the model needs; any other error is the replay's.
  virtual absl::StatusOr<uint64_t> Allocate(uint64_t size, uint32_t stream, uint32_t line) = 0;
  virtual absl::Status Free(uint64_t address, uint32_t stream, uint32_t line) = 0;
  // The block at `address` is used on `stream` too (record_stream).
  virtual absl::Status RecordUse(uint64_t address, uint32_t stream) = 0;
  // Starts from segments that already exist, with `blocks` live in them.
  // Only before the first Allocate; Unimplemented where a model has no such
  // state. Returns each block's address in `blocks` order.
  virtual absl::Status Seed(const std::vector<InitialSegment>& segments,
                            const std::vector<InitialBlock>& blocks) {
    (void)segments;
    (void)blocks;
    return absl::UnimplementedError("this allocator model starts empty");
  }
  virtual uint64_t reserved() const = 0;
  virtual uint64_t reserved_high() const = 0;
  virtual uint64_t used() const = 0;  // block sizes of live allocations
  virtual uint64_t used_high() const = 0;
  virtual uint64_t segments() const = 0;
  virtual const ModelCounters& counters() const = 0;
  // Every segment event so far, when the model was made with history on.
  virtual const std::vector<SegmentEvent>& history() const = 0;
  // Checks the model's own bookkeeping (tests): blocks tile segments, the
  // free sets hold exactly the free blocks, the byte counts add up.
  virtual absl::Status CheckInvariants() const = 0;
  // One line: the state a divergence report shows.
  virtual std::string Describe(uint32_t stream) const = 0;
};

struct ModelConfig {
  uint64_t device_capacity = 0;
  bool keep_history = false;
  TorchOptions torch;
  RmmOptions rmm;
};

// kPytorch or kRmmPool; `streams` must outlive the model.
absl::StatusOr<std::unique_ptr<AllocatorModel>> MakeAllocatorModel(AllocatorKind kind,
                                                                   const ModelConfig& config,
                                                                   ModelStreams* streams);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_ALLOCATOR_MODEL_H_
