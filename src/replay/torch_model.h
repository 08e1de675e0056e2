// PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), as a
// replay model. What it follows:
//
// - Sizes round up to 512 B (or, with roundup_power2_divisions, to the next
//   of N equal steps between two powers of two). Rounded sizes up to 1 MiB
//   are served from the small pool, whose segments are 2 MiB; larger ones
//   from the large pool, whose segments are 20 MiB below 10 MiB and the
//   size rounded up to 2 MiB from there.
// - Best fit per pool, keyed by (stream, size, address): only a free block of
//   the allocating stream serves. A block at or above max_split_size serves
//   no request below it, and a request at or above it only from a block less
//   than 20 MiB larger.
// - A found block splits when the remainder is at least 512 B (small pool,
//   or expandable segments) or more than 1 MiB and the request is below
//   max_split_size (large pool); the request takes the front.
// - A freed block merges with free neighbours of its segment. A block used
//   on other streams (record_stream) is freed only once an event recorded on
//   each of them at the free has completed; pending ones are looked at at
//   the next allocation.
// - When no free block serves: garbage collection first, when its threshold
//   is set (blocks never split, oldest first, until reserved is below the
//   threshold); then cudaMalloc; if the device is full, release one cached
//   oversize block that fits (or several, largest first), retry; then
//   synchronize, release every cached unsplit segment of both pools, retry.
// - Expandable segments: one per stream and pool, mapped in 2 MiB (small) or
//   20 MiB (large) pages at its end; out of memory unmaps the free pages at
//   the end of each. Free pages inside a segment stay mapped (PyTorch also
//   unmaps those).
//
// Segments are placed at increasing addresses, never reused; only ties in
// best fit see addresses, and the order among a trace's own segments is
// kept when it seeds them (Seed).
#ifndef STREAMPOOL_SRC_REPLAY_TORCH_MODEL_H_
#define STREAMPOOL_SRC_REPLAY_TORCH_MODEL_H_

#include <cstdint>
#include <memory>

#include "src/replay/allocator_model.h"

namespace streampool::replay {

inline constexpr uint64_t kTorchMinBlock = 512;
inline constexpr uint64_t kTorchSmallSize = uint64_t{1} << 20;
inline constexpr uint64_t kTorchSmallBuffer = uint64_t{2} << 20;
inline constexpr uint64_t kTorchLargeBuffer = uint64_t{20} << 20;
inline constexpr uint64_t kTorchMinLargeAlloc = uint64_t{10} << 20;
inline constexpr uint64_t kTorchRoundLarge = uint64_t{2} << 20;

// The block size PyTorch rounds a request to.
uint64_t TorchRoundSize(uint64_t size, const TorchOptions& options);
// The segment size cudaMalloc is asked for, for a rounded size.
uint64_t TorchAllocationSize(uint64_t rounded);

std::unique_ptr<AllocatorModel> MakeTorchModel(const ModelConfig& config, ModelStreams* streams);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_TORCH_MODEL_H_
