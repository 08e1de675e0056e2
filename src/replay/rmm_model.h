// RMM's pool_memory_resource (stream_ordered_memory_resource over a
// coalescing free list, as in RMM 21.10 and later), as a replay model:
//
// - Sizes round up to 256 B. Each stream has its own free list, sorted by
//   address; a freed block joins its neighbours in that list unless the
//   later one starts an upstream allocation (those never merge).
// - An allocation takes the best fit of its stream's list (smallest that
//   fits, lowest address on ties) and the front of it; any remainder stays.
// - When its own list has none, it takes the best fit of the first other
//   list that has one, after its stream waits on that list's event (the
//   remainder stays in that list); then it merges the other lists into its
//   own one by one, waiting on each, until one block fits.
// - Every free re-records the freeing stream's one event.
// - When nothing fits, the pool grows from upstream by the larger of the
//   request and the pool's size (or by half the room left under a maximum),
//   halving on failure down to the request; memory goes back only at the
//   end.
//
// Lists are visited in the order their streams were first seen (RMM orders
// them by event handle, which has no meaning a trace could give).
#ifndef STREAMPOOL_SRC_REPLAY_RMM_MODEL_H_
#define STREAMPOOL_SRC_REPLAY_RMM_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "src/replay/allocator_model.h"

namespace streampool::replay {

inline constexpr uint64_t kRmmAlignment = 256;

// InvalidArgument for sizes that are not multiples of 256 or an initial size
// above the maximum; ResourceExhausted when the initial pool does not fit.
absl::StatusOr<std::unique_ptr<AllocatorModel>> MakeRmmModel(const ModelConfig& config,
                                                             ModelStreams* streams);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_RMM_MODEL_H_
