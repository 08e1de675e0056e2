// Streams: creating, destroying, synchronizing and querying streams and
// devices, and reusing a destroyed stream's slot once nothing can refer to
// its positions (src/ordering/ordering.h, "Slot reuse").
#ifndef STREAMPOOL_SRC_RUNTIME_STREAMS_H_
#define STREAMPOOL_SRC_RUNTIME_STREAMS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/runtime_core.h"
#include "src/runtime/sync_protocol.h"

namespace streampool::internal {

class Streams {
 public:
  Streams(RuntimeCore& core, SyncProtocol& sync) : c_(core), sync_(sync) {}
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;

  absl::StatusOr<uint64_t> CreateStream(int device, bool non_blocking);
  absl::StatusOr<uint64_t> CreateStreamFromNative(int device, void* native);
  absl::Status DestroyStream(uint64_t s);
  absl::StatusOr<uint64_t> LegacyStream(int device);
  absl::Status StreamSynchronize(uint64_t s);
  absl::Status StreamQuery(uint64_t s);
  absl::Status DeviceSynchronize(int device);
  absl::StatusOr<void*> NativeStream(uint64_t s);
  absl::StatusOr<StreamIndex> StreamIndexOf(uint64_t s);

 private:
  // Whether a destroyed stream's slot has no work running and no free
  // pending in any pool; and handing such slots back to the ordering core.
  bool SlotIdle(StreamIndex s);
  absl::StatusOr<uint64_t> NewStream(int device, bool non_blocking, bool adopt, void* native);
  void RecycleSlots();
  // A synchronize or query of s: refused while s captures (which
  // invalidates the capture) or while a capture forbids the thread's unsafe
  // calls.
  absl::Status RefuseIfCapturing(StreamIndex s);

  RuntimeCore& c_;
  SyncProtocol& sync_;
  // Destroyed streams' slots not yet reusable, and where RecycleSlots looks next.
  std::vector<StreamIndex> retired_slots_;
  size_t recycle_cursor_ = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_STREAMS_H_
