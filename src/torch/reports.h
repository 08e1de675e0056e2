// The PyTorch allocator's reports as JSON (the layouts are documented in
// include/streampool/torch_allocator.h): the devices' current pools'
// statistics and settings, their snapshots, and the live allocations. Each
// reads the runtime through the C API only, at one moment per pool.
#ifndef STREAMPOOL_SRC_TORCH_REPORTS_H_
#define STREAMPOOL_SRC_TORCH_REPORTS_H_

#include <string>

#include "src/torch/allocator_state.h"
#include "streampool/streampool.h"

namespace streampool::internal::torch {

// Each writes the document for `device` (-1: every device of `rt`) into *out,
// or returns why it cannot (spErrorInvalidDevice, or a call that failed) with
// *error saying so.
spError_t StatsJson(const AllocatorState& state, spRuntime_t rt, int device, std::string* out,
                    std::string* error);
spError_t SnapshotJson(spRuntime_t rt, int device, std::string* out, std::string* error);
spError_t LeakReportJson(spRuntime_t rt, int device, std::string* out, std::string* error);

}  // namespace streampool::internal::torch

#endif  // STREAMPOOL_SRC_TORCH_REPORTS_H_
