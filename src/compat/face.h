// The face kit: what every runtime API face (CUDA's cuda*, AscendCL's acl*)
// does around each of its calls, written once and parametrised by the face's
// error codes.
//
// A face describes itself in a traits struct (the FaceTraits concept below):
// its error and stream types, its environment prefix, its code for each
// spError_t and for the few failures the kit detects itself. From that the
// kit gives it
//
//   GuardedCall<F>    an entry point's shell: no exception crosses it, and
//                     its result becomes the thread's last error
//   RuntimeCall<F>    the same around a Call<F>, which holds the implicit
//                     runtime for the call; a failed kernel's fault is sticky
//   SpErrorMap<F>     an sp* call's spError_t in the face's codes
//   StatusMap<F>      a C++ API call's status in the face's codes
//   LastError<F>      the thread's last error, taken or peeked at
//   GetRuntime<F>, GetStream<F>   the interop accessors
//   GetDeviceCount<F>, SynchronizeDevice<F>, SynchronizeStream<F>,
//   LaunchHostFunc<F>, NotSupported<F>   entry points that mean the same in
//                     every face
//   LaunchKernel<F>   an emulated kernel launch
//
// How the runtime's errors reach a face. An spError_t goes through the face's
// table (F::kSpErrors); a value the table does not list is F::kInternal. A
// status goes through streampool::ToCError first, the C API's own mapping,
// so that a failure reads the same whichever of the two APIs the face called
// for it: a status code ToCError does not list (kFailedPrecondition,
// kAborted, ...) is spErrorInvalidValue there, hence the face's code for an
// invalid value (cudaErrorInvalidValue, ACL_ERROR_RT_PARAM_INVALID), and
// kInternal is spErrorUnknown, hence the face's F::kInternal.
//
// These are templates, instantiated in each face's library for its traits;
// what does not depend on a face (contexts, thread states, the kernel runner)
// is compiled once, into libstreampool-compat.
#ifndef STREAMPOOL_SRC_COMPAT_FACE_H_
#define STREAMPOOL_SRC_COMPAT_FACE_H_

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/compat/context.h"
#include "src/compat/kernel.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace streampool::internal::compat {

// An enumerator as the integer a C caller stored: in C++ a load of an enum
// outside its range is undefined, and C callers may pass any value as an
// enum argument or field. Read every caller's enum through this.
template <class E>
std::underlying_type_t<E> Raw(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// One row of a face's table of the runtime's errors.
template <class Error>
struct SpErrorCode {
  spError_t sp;
  Error face;
};

// Which of a face's default streams a stream handle names, if any.
enum class DefaultStream {
  kNone,       // none: the handle is an spStream_t
  kLegacy,     // the current device's legacy stream
  kPerThread,  // the calling thread's own blocking stream on the current device
};

// What a face tells the kit about itself:
//
//   Error, Stream       its error code and stream handle types
//   kEnvPrefix          "STREAMPOOL_CUDA_": the variables of its implicit runtime
//   kSuccess            its success code
//   kSpErrors[]         its code for each spError_t it lists (the rest: kInternal)
//   kInternal           an exception other than std::bad_alloc, an unlisted spError_t
//   kOutOfHostMemory    a std::bad_alloc escaping a call
//   kNotErrors[]        codes that never become the thread's last error (kSuccess among them)
//   kUnloading          a call after the exit handler destroyed the runtime
//   kInitFailed         the implicit runtime could not be made
//   kKernelFault        every call while a failed kernel poisons the runtime
//   kInvalidDevice      a device index out of range
//   kInvalidArgument    the kit's own argument checks (a null out-pointer, ...)
//   Classify(stream)    which default stream, if any, a handle names
template <class F>
concept FaceTraits = requires(typename F::Stream stream) {
  typename F::Error;
  { F::kEnvPrefix } -> std::convertible_to<const char*>;
  { F::kSuccess } -> std::convertible_to<typename F::Error>;
  { F::kSpErrors[0] } -> std::convertible_to<SpErrorCode<typename F::Error>>;
  { F::kInternal } -> std::convertible_to<typename F::Error>;
  { F::kOutOfHostMemory } -> std::convertible_to<typename F::Error>;
  { F::kNotErrors[0] } -> std::convertible_to<typename F::Error>;
  { F::kUnloading } -> std::convertible_to<typename F::Error>;
  { F::kInitFailed } -> std::convertible_to<typename F::Error>;
  { F::kKernelFault } -> std::convertible_to<typename F::Error>;
  { F::kInvalidDevice } -> std::convertible_to<typename F::Error>;
  { F::kInvalidArgument } -> std::convertible_to<typename F::Error>;
  { F::Classify(stream) } -> std::same_as<DefaultStream>;
};

// The face's context: its implicit runtime and its threads' state.
template <FaceTraits F>
Context& FaceContext() {
  // Leaked: threads exiting after static destruction still find it.
  static Context* const context = new Context(F::kEnvPrefix);
  return *context;
}

// Makes `e` the thread's last error unless the face does not count it as one.
template <FaceTraits F>
typename F::Error Record(typename F::Error e) noexcept {
  for (const typename F::Error not_error : F::kNotErrors) {
    if (e == not_error) return e;
  }
  try {
    FaceContext<F>().Thread().last_error = e;
  } catch (...) {
    // No memory for the thread's state: the code still reaches the caller.
  }
  return e;
}

template <FaceTraits F>
struct SpErrorMap {
  constexpr typename F::Error operator()(spError_t e) const {
    for (const SpErrorCode<typename F::Error>& code : F::kSpErrors) {
      if (code.sp == e) return code.face;
    }
    return F::kInternal;
  }
};

template <FaceTraits F>
struct StatusMap {
  typename F::Error operator()(const absl::Status& status) const {
    return SpErrorMap<F>{}(ToCError(status));
  }
};

// Runs `body` (returning F::Error), turning exceptions into codes and
// recording the result.
template <FaceTraits F>
struct GuardedCall {
  template <class Body>
  typename F::Error operator()(Body&& body) const noexcept {
    typename F::Error e;
    try {
      e = body();
    } catch (const std::bad_alloc&) {
      e = F::kOutOfHostMemory;
    } catch (...) {
      e = F::kInternal;
    }
    return Record<F>(e);
  }
};

// A call that needs the runtime: it holds a reference to it for the call's
// duration, so a concurrent reset (cudaDeviceReset, aclFinalize) destroys it
// only afterwards.
template <FaceTraits F>
class Call {
 public:
  using Error = typename F::Error;

  // Acquires (creating if needed) the runtime: F::kUnloading at exit,
  // F::kInitFailed if it cannot be made, F::kKernelFault while a failed
  // kernel poisons it.
  Error Begin() {
    absl::StatusOr<std::shared_ptr<ProcessRuntime>> rt = FaceContext<F>().Acquire();
    if (!rt.ok()) {
      return rt.status().code() == absl::StatusCode::kFailedPrecondition ? F::kUnloading
                                                                         : F::kInitFailed;
    }
    rt_ = *std::move(rt);
    thread_ = &FaceContext<F>().Thread();
    if (rt_->fault() != Fault::kNone) return F::kKernelFault;
    return F::kSuccess;
  }

  ProcessRuntime& rt() const { return *rt_; }
  spRuntime_t c() const { return rt_->c(); }
  ThreadState& thread() const { return *thread_; }

  Error CheckDevice(int device) const {
    return device >= 0 && device < rt_->device_count() ? F::kSuccess : F::kInvalidDevice;
  }
  // The thread's current device, which may be out of range after a reset
  // with fewer devices.
  Error Device(int* device) const {
    *device = thread_->device;
    return CheckDevice(*device);
  }
  // The spStream_t `stream` stands for on this thread (F::Classify).
  Error Stream(typename F::Stream stream, spStream_t* out) const {
    const DefaultStream kind = F::Classify(stream);
    if (kind == DefaultStream::kNone) {
      *out = reinterpret_cast<spStream_t>(stream);
      return F::kSuccess;
    }
    int device = 0;
    if (Error e = Device(&device); e != F::kSuccess) return e;
    if (kind == DefaultStream::kPerThread) {
      absl::StatusOr<StreamId> s = FaceContext<F>().PerThreadStream(*rt_, device);
      if (!s.ok()) return StatusMap<F>{}(s.status());
      *out = s->c();
      return F::kSuccess;
    }
    return SpErrorMap<F>{}(spStreamGetLegacy(out, c(), device));
  }

 private:
  std::shared_ptr<ProcessRuntime> rt_;
  ThreadState* thread_ = nullptr;
};

// Runs `body(call)` with a begun Call<F> (see GuardedCall); a kernel that
// failed while the call ran turns its result into F::kKernelFault.
template <FaceTraits F>
struct RuntimeCall {
  template <class Body>
  typename F::Error operator()(Body&& body) const noexcept {
    return GuardedCall<F>{}([&]() -> typename F::Error {
      Call<F> call;
      if (const typename F::Error e = call.Begin(); e != F::kSuccess) return e;
      const typename F::Error e = body(call);
      if (call.rt().fault() != Fault::kNone) return F::kKernelFault;
      return e;
    });
  }
};

// The thread's last error (cudaGetLastError, aclrtGetLastError), cleared if
// `clear`. While a failed kernel poisons the runtime, its fault is the answer
// instead: only a reset clears it.
template <FaceTraits F>
typename F::Error LastError(bool clear) noexcept {
  try {
    std::shared_ptr<ProcessRuntime> rt = FaceContext<F>().Current();
    if (rt != nullptr && rt->fault() != Fault::kNone) return F::kKernelFault;
    ThreadState& thread = FaceContext<F>().Thread();
    const auto e = static_cast<typename F::Error>(thread.last_error);
    if (clear) thread.last_error = F::kSuccess;
    return e;
  } catch (...) {
    return F::kInternal;
  }
}

// The implicit runtime, created if it does not exist yet.
template <FaceTraits F>
typename F::Error GetRuntime(spRuntime_t* runtime) noexcept {
  return RuntimeCall<F>{}([&](Call<F>& call) -> typename F::Error {
    if (runtime == nullptr) return F::kInvalidArgument;
    *runtime = call.c();
    return F::kSuccess;
  });
}

// The spStream_t `stream` stands for on the calling thread.
template <FaceTraits F>
typename F::Error GetStream(spStream_t* out, typename F::Stream stream) noexcept {
  return RuntimeCall<F>{}([&](Call<F>& call) -> typename F::Error {
    if (out == nullptr) return F::kInvalidArgument;
    return call.Stream(stream, out);
  });
}

// Entry points that mean the same in every face.

// The number of devices (cudaGetDeviceCount, aclrtGetDeviceCount), in the
// face's integer type.
template <FaceTraits F, class Count>
typename F::Error GetDeviceCount(Count* count) noexcept {
  return RuntimeCall<F>{}([&](Call<F>& call) -> typename F::Error {
    if (count == nullptr) return F::kInvalidArgument;
    *count = static_cast<Count>(call.rt().device_count());
    return F::kSuccess;
  });
}

// Waits for the current device (cudaDeviceSynchronize, aclrtSynchronizeDevice).
template <FaceTraits F>
typename F::Error SynchronizeDevice() noexcept {
  return RuntimeCall<F>{}([](Call<F>& call) -> typename F::Error {
    int device = 0;
    if (const typename F::Error e = call.Device(&device); e != F::kSuccess) return e;
    return SpErrorMap<F>{}(spDeviceSynchronize(call.c(), device));
  });
}

// Waits for `stream` (cudaStreamSynchronize, aclrtSynchronizeStream).
template <FaceTraits F>
typename F::Error SynchronizeStream(typename F::Stream stream) noexcept {
  return RuntimeCall<F>{}([&](Call<F>& call) -> typename F::Error {
    spStream_t s = nullptr;
    if (const typename F::Error e = call.Stream(stream, &s); e != F::kSuccess) return e;
    return SpErrorMap<F>{}(spStreamSynchronize(s));
  });
}

// Runs fn(user_data) on the host in `stream`'s order (cudaLaunchHostFunc,
// aclrtLaunchHostFunc).
template <FaceTraits F>
typename F::Error LaunchHostFunc(typename F::Stream stream, void (*fn)(void*),
                                 void* user_data) noexcept {
  return RuntimeCall<F>{}([&](Call<F>& call) -> typename F::Error {
    if (fn == nullptr) return F::kInvalidArgument;
    spStream_t s = nullptr;
    if (const typename F::Error e = call.Stream(stream, &s); e != F::kSuccess) return e;
    return SpErrorMap<F>{}(spLaunchHostFunc(s, fn, user_data));
  });
}

// What a face's function streampool does not provide answers: the face's
// code for spErrorNotSupported, which becomes the thread's last error.
template <FaceTraits F>
typename F::Error NotSupported() noexcept {
  return Record<F>(SpErrorMap<F>{}(spErrorNotSupported));
}

// A kernel as a face's launch received it: `run` has the face's signature,
// and `run_thread` calls it for one emulated thread, in the face's terms.
template <class Run>
struct FaceKernel {
  Run run = nullptr;
  void* ctx = nullptr;
  void (*destroy)(void* ctx) = nullptr;
  void (*run_thread)(Run run, void* ctx, const KernelCoords& coords) = nullptr;
};

// Where a face launches, with extents in the core's terms.
template <FaceTraits F>
struct KernelLaunch {
  typename F::Stream stream;
  Dim3 grid;
  Dim3 block;
  // F::kSuccess, or the face's code for extents it refuses: checked after
  // the arguments, as the faces' launches always have.
  typename F::Error shape_error;
  const spAccess* accesses = nullptr;
  size_t access_count = 0;
};

template <class Run>
void RunFaceKernel(void* p, const KernelCoords& coords) {
  const auto* kernel = static_cast<const FaceKernel<Run>*>(p);
  kernel->run_thread(kernel->run, kernel->ctx, coords);
}

template <class Run>
void DestroyFaceKernel(void* p) {
  auto* kernel = static_cast<FaceKernel<Run>*>(p);
  if (kernel->destroy != nullptr) kernel->destroy(kernel->ctx);
  delete kernel;
}

// Enqueues `kernel` on `launch.stream` (compat::LaunchEmulatedKernel).
// kernel.ctx belongs to the launch from the call on: it is destroyed once,
// when the kernel has run or as soon as the launch fails.
template <FaceTraits F, class Run>
typename F::Error LaunchKernel(const KernelLaunch<F>& launch,
                               const FaceKernel<Run>& kernel) noexcept {
  using Error = typename F::Error;
  auto* owned = new (std::nothrow) FaceKernel<Run>(kernel);
  if (owned == nullptr) {
    if (kernel.destroy != nullptr) kernel.destroy(kernel.ctx);
    return Record<F>(F::kOutOfHostMemory);
  }
  const KernelBody body{&RunFaceKernel<Run>, owned, &DestroyFaceKernel<Run>};
  bool handed_over = false;
  const Error e = RuntimeCall<F>{}([&](Call<F>& call) -> Error {
    if (kernel.run == nullptr || (launch.accesses == nullptr && launch.access_count != 0)) {
      return F::kInvalidArgument;
    }
    if (launch.shape_error != F::kSuccess) return launch.shape_error;
    spStream_t s = nullptr;
    if (Error err = call.Stream(launch.stream, &s); err != F::kSuccess) return err;
    const std::vector<Access> accesses = AccessesFromC(launch.accesses, launch.access_count);
    handed_over = true;
    return StatusMap<F>{}(LaunchEmulatedKernel(call.rt(), StreamId{reinterpret_cast<uintptr_t>(s)},
                                               launch.grid, launch.block, accesses, body));
  });
  if (!handed_over) DestroyFaceKernel<Run>(owned);
  return e;
}

}  // namespace streampool::internal::compat

#endif  // STREAMPOOL_SRC_COMPAT_FACE_H_
