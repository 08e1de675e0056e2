// NativeWork: the work an executor over a real device runtime launches
// natively (kernels, copies, fills, host functions, timed records), beside
// the markers of its StreamAdapter. The simulator and the threads executor
// run work themselves; an embedder's adapter runs none (its work is native
// already); the CUDA executor runs all of it on CUstreams.
#ifndef STREAMPOOL_SRC_EXEC_NATIVE_WORK_H_
#define STREAMPOOL_SRC_EXEC_NATIVE_WORK_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "streampool/stream_adapter.h"

namespace streampool::internal {

class NativeWork {
 public:
  using NativeStream = StreamAdapter::NativeStream;
  using Marker = StreamAdapter::Marker;

  virtual ~NativeWork() = default;

  // Each launches after everything enqueued on `stream` so far; on error
  // nothing was enqueued.
  virtual absl::Status Kernel(NativeStream stream, uint64_t duration_ns) = 0;
  virtual absl::Status Copy(NativeStream stream, void* dst, const void* src, uint64_t bytes) = 0;
  virtual absl::Status Fill(NativeStream stream, void* dst, int value, uint64_t bytes) = 0;
  virtual absl::Status HostFunc(NativeStream stream, std::function<void()> fn) = 0;
  // A marker that also records when it was reached (event records), for
  // ElapsedMs; released through the adapter's Release like any marker.
  virtual Marker RecordTimed(NativeStream stream) = 0;
  virtual absl::StatusOr<float> ElapsedMs(Marker start, Marker end) = 0;
  // What the embedder's code sees as the stream (the CUstream), and the way
  // back for a stream the embedder made: its wrapper, and whether it is
  // non-blocking. The wrapper is given back through DestroyStream, which
  // leaves an adopted stream itself alone.
  virtual void* UserStream(NativeStream stream) = 0;
  virtual absl::StatusOr<NativeStream> Adopt(int device, void* user_stream, bool* non_blocking) = 0;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_EXEC_NATIVE_WORK_H_
