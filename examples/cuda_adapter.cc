// The shape of a StreamAdapter over CUDA: what an embedder writes to put
// streampool's pools under cudaStream_t / cudaEvent_t. Compiled only when the
// CUDA toolkit is found (STREAMPOOL_WITH_CUDA); the build needs no GPU, and
// this file is never run in CI.
#include <cstdio>

#if defined(STREAMPOOL_WITH_CUDA)
#include <cuda_runtime.h>

#include "streampool/stream_adapter.h"

namespace example {

class CudaStreams final : public streampool::StreamAdapter {
 public:
  absl::StatusOr<NativeStream> CreateStream(int device, bool legacy, bool non_blocking) override {
    if (legacy) return static_cast<NativeStream>(cudaStreamLegacy);
    cudaSetDevice(device);
    cudaStream_t s;
    const unsigned flags = non_blocking ? cudaStreamNonBlocking : cudaStreamDefault;
    if (cudaStreamCreateWithFlags(&s, flags) != cudaSuccess) {
      return absl::ResourceExhaustedError("cudaStreamCreateWithFlags failed");
    }
    return static_cast<NativeStream>(s);
  }
  void DestroyStream(NativeStream s) override {
    if (s != static_cast<NativeStream>(cudaStreamLegacy)) {
      cudaStreamDestroy(static_cast<cudaStream_t>(s));
    }
  }
  Marker Record(NativeStream s) override {
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventRecord(e, static_cast<cudaStream_t>(s));
    return e;
  }
  bool Done(Marker m) override {
    return cudaEventQuery(static_cast<cudaEvent_t>(m)) == cudaSuccess;
  }
  void Wait(NativeStream s, Marker m) override {
    cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(m), 0);
  }
  void Synchronize(Marker m) override { cudaEventSynchronize(static_cast<cudaEvent_t>(m)); }
  void Release(Marker m) override { cudaEventDestroy(static_cast<cudaEvent_t>(m)); }
};

static_assert(streampool::kIsStreamAdapter<CudaStreams>);

}  // namespace example

int main() {
  example::CudaStreams adapter;  // would go into RuntimeConfig::adapter
  std::puts("CUDA adapter compiled");
  return 0;
}
#else
int main() {
  std::puts("built without the CUDA toolkit: the CUDA adapter is a compile-time example");
  return 0;
}
#endif
