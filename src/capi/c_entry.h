// What every C entry point is made of: the exception shell, handle
// decoding, the runtime a handle names, status -> spError_t. Shared by the
// C API's files (streampool_c.cc, graph_c.cc); the semantics live in the
// runtime's parts.
#ifndef STREAMPOOL_SRC_CAPI_C_ENTRY_H_
#define STREAMPOOL_SRC_CAPI_C_ENTRY_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/runtime/guard.h"
#include "src/runtime/handles.h"
#include "src/runtime/process.h"
#include "src/runtime/runtime_impl.h"
#include "streampool/streampool.h"

namespace streampool::internal {

inline spError_t ToError(const absl::Status& s) {
  // ok() is inline; the table is streampool::ToCError (runtime.h).
  return s.ok() ? spSuccess : streampool::ToCError(s);
}

// Called from the catch-all of every entry point: resource exhaustion (no
// memory for a host structure, no thread, no descriptor) is
// spErrorMemoryAllocation; anything else spErrorUnknown.
spError_t CurrentExceptionToError() noexcept;

// The shell of every entry point that can fail: no exception crosses the C
// API; what escapes `body` is CurrentExceptionToError's. Always inlined, so
// that the allocation fast path costs what a try block in the function did.
// (spGetErrorName, spGetErrorString and spRuntimeConfigInit have none:
// nothing in them can throw.)
template <typename Body>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline spError_t Entry(Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return CurrentExceptionToError();
  }
}

template <typename H>
inline uint64_t Value(H h) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
}
template <typename H>
inline H ToHandle(uint64_t v) {
  return reinterpret_cast<H>(static_cast<uintptr_t>(v));
}

// The handle a call made or found, into the caller's out-parameter; on
// failure the out-parameter is left alone.
template <typename H>
inline spError_t SetHandle(const absl::StatusOr<uint64_t>& h, H* out) {
  if (!h.ok()) return ToError(h.status());
  *out = ToHandle<H>(*h);
  return spSuccess;
}

// Resolves the runtime a handle belongs to, refusing calls from host
// functions before any lock is taken.
#define SP_RESOLVE(rt_var, handle)                                                      \
  if (InHostCallback()) return spErrorNotSupported;                                     \
  if (Value(handle) == 0) return spErrorInvalidValue;                                   \
  RuntimeImpl* rt_var##_ptr = RuntimeImpl::FindFast(Process::Default(), Value(handle)); \
  if (rt_var##_ptr == nullptr) return spErrorInvalidResourceHandle;                     \
  RuntimeImpl& rt_var = *rt_var##_ptr

// The runtime whose memory holds ptr (a pointer names no handle), or null.
inline std::shared_ptr<RuntimeImpl> RuntimeOwning(const void* ptr) {
  const Registry& registry = Process::Default().registry();
  const uint32_t owner = registry.RuntimeOwning(reinterpret_cast<uintptr_t>(ptr));
  return owner == 0 ? nullptr : registry.Find(owner);
}

// The whole of an entry point that hands its handle's runtime one part
// operation and reports its status: resolve, run, map.
template <auto Op, typename H, typename... A>
spError_t RunOn(H handle, A&&... args) noexcept {
  return Entry([&]() -> spError_t {
    SP_RESOLVE(r, handle);
    return ToError(r.Run<Op>(std::forward<A>(args)...));
  });
}

// A runtime handle, before anything else is looked at: NULL is a bad value,
// any other non-runtime handle an invalid one.
#define SP_CHECK_RUNTIME_HANDLE(rt)               \
  if (Value(rt) == 0) return spErrorInvalidValue; \
  if (!IsRuntimeHandle(Value(rt))) return spErrorInvalidResourceHandle

// A C caller may store any int in an enum field or pass one as an enum
// argument; reading such a value as the enum type is undefined in C++. Enums
// from the caller are read as their bytes and range-checked as ints.
template <typename E>
inline int EnumInt(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Validates and converts the C pool properties.
inline bool ToPoolProps(const spMemPoolProps& in, streampool::PoolProps* out) {
  const int type = EnumInt(in.allocType);
  const int policy = EnumInt(in.pagePolicy);
  if (type < spMemAllocationTypeDevice || type > spMemAllocationTypeDvpp) return false;
  if (in.growth < spPoolGrowthDefault || in.growth > spPoolGrowthExpandable) return false;
  if (policy < spPageHugeFirst || policy > spPageNormalOnly) return false;
  out->alloc_type = static_cast<streampool::AllocationType>(type);
  out->device = in.device;
  out->max_size = in.maxSize;
  out->page_policy = static_cast<streampool::PagePolicy>(policy);
  out->handle_types = in.handleTypes;
  out->growth = static_cast<streampool::PoolGrowth>(in.growth);
  return true;
}

inline bool IsRuntimeHandle(uint64_t v) {
  return KindOf(v) == HandleKind::kRuntime && ObjectIdOf(v) == 0;
}

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_CAPI_C_ENTRY_H_
