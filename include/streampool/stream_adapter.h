/// \file
/// StreamAdapter: how an embedder whose streams and events live in another
/// runtime (CUDA, CANN, a task runtime) lets streampool's pools reason about
/// them.
///
/// streampool needs only three things from a stream runtime: put a marker on a
/// stream after everything enqueued so far, tell whether a marker has been
/// reached, and make a stream wait for a marker. With CUDA these are
/// cudaEventRecord, cudaEventQuery and cudaStreamWaitEvent; with AscendCL,
/// aclrtRecordEvent, aclrtQueryEventStatus and aclrtStreamWaitEvent.
///
/// A runtime created with an adapter (RuntimeConfig::adapter) runs no work
/// itself. Each streampool stream is bound to a native stream; the embedder
/// launches its kernels and copies natively (Runtime::NativeStream), and calls
/// streampool for allocations, frees and the event records and waits that
/// order its streams (Runtime::RecordEvent / StreamWaitEvent record and wait
/// natively too), so the pools' reuse policies see the same dependencies the
/// native runtime enforces. Host functions enqueued through streampool run on
/// the host when a synchronize or query observes them complete;
/// Runtime::LaunchKernel declares the kernel's accesses to the checker and
/// runs nothing (the embedder's kernels are its own), and Runtime::HostAdvance
/// sleeps. A stream the embedder made is adopted with
/// Runtime::CreateStreamFromNative (taken as non-blocking: streampool assumes
/// no order with the legacy stream that the embedder's runtime may not keep).
/// The CUDA executor (ExecutorKind::kCuda) is this interface over CUstreams and
/// CUevents, plus the work it launches itself.
///
/// When streampool calls the adapter: a marker is recorded only when someone
/// must learn where a stream is (an event record, a wait on a free no marker
/// covers yet, a query, a synchronize, the observation of reuse rule 3, a
/// stream's destruction); allocations and frees on one stream make no call.
///
/// Marker lifetime: Release(marker) comes only after Done(marker) returned
/// true or Synchronize(marker) returned, and after every stream that Waited on
/// the marker was seen past that wait (a later marker of it reached); at
/// runtime destruction, after every stream was synchronized. An adapter may
/// free its marker in Release.
///
/// Stream lifetime: DestroyStream comes once the streampool stream is
/// destroyed and the marker recorded at its destruction was reached (or at
/// runtime destruction), never for an adopted stream. After the streampool
/// stream is destroyed no call names its native stream again.
///
/// Every method may be called from any host thread, never concurrently for the
/// same marker, and never while the caller holds a lock of the adapter's.
#ifndef STREAMPOOL_STREAM_ADAPTER_H_
#define STREAMPOOL_STREAM_ADAPTER_H_

#include <type_traits>

#include "absl/status/statusor.h"
#include "streampool/export.h"

namespace streampool {

/// The interface an embedder implements to put streampool's pools over its
/// own runtime's streams and events (see the file comment).
class STREAMPOOL_EXPORT StreamAdapter {
 public:
  /// The embedder's stream (cudaStream_t, aclrtStream, ...).
  using NativeStream = void*;
  /// The embedder's marker of a point in a stream (an event).
  using Marker = void*;

  virtual ~StreamAdapter() = default;

  /// The native stream behind a new streampool stream on `device`. For the
  /// device's legacy stream (legacy == true) this is typically the native
  /// default stream. An error fails the stream's creation.
  virtual absl::StatusOr<NativeStream> CreateStream(int device, bool legacy, bool non_blocking) = 0;
  /// Called once the streampool stream is destroyed and all its work observed
  /// complete (or at runtime destruction).
  virtual void DestroyStream(NativeStream stream) = 0;

  /// A marker placed after everything enqueued on `stream` so far.
  virtual Marker Record(NativeStream stream) = 0;
  /// Whether the marker has been reached. Must not block.
  virtual bool Done(Marker marker) = 0;
  /// Work enqueued on `stream` from now on waits until `marker` is reached.
  virtual void Wait(NativeStream stream, Marker marker) = 0;
  /// Blocks the calling host thread until `marker` is reached.
  virtual void Synchronize(Marker marker) = 0;
  /// The marker is no longer needed.
  virtual void Release(Marker marker) = 0;
};

/// Whether T implements StreamAdapter: derived from it, with every pure
/// function defined. Each adapter is checked against it where it is
/// defined: static_assert(kIsStreamAdapter<MyAdapter>).
template <typename T>
inline constexpr bool kIsStreamAdapter =
    std::is_base_of_v<StreamAdapter, T> && !std::is_abstract_v<T>;

}  // namespace streampool

#endif  // STREAMPOOL_STREAM_ADAPTER_H_
