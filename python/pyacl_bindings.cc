// The functions of pyACL's `acl` module over the AscendCL face's C functions
// (src/acl/). Every semantic is the face's: a binding converts its Python
// arguments, calls one acl* function and returns pyACL's shape, the bare
// aclError (`ret`) of an action, or the outputs followed by `ret`
// (`dev_ptr, ret = acl.rt.malloc(size, policy)`), the outputs 0 when ret is
// not ACL_SUCCESS.
//
// Python's rules and C's meet at the arguments. A wrong type (a float, a str,
// None where a pointer goes) raises TypeError, as any Python function does.
// A value of the right type that the C parameter cannot hold (a negative
// size, a pointer beyond 64 bits) never reaches C: the call returns
// ACL_ERROR_INVALID_PARAM, the acl layer's code for a value it refuses, or
// ACL_ERROR_RT_INVALID_DEVICEID for a device id beyond 32 bits, because an
// unchecked Python int must not crash a program CANN would have answered.
// Everything else (NULL pointers, size 0, unknown enumerators, stale
// handles) goes to C, whose answer is returned unchanged.
//
// The GIL is released around every C call: synchronize calls block, and a
// pyACL program may drive streams from several threads, each with its own
// current device as in CANN.
#include "python/pyacl_bindings.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
#include "src/acl/call.h"

namespace py = pybind11;

namespace streampool::python {
namespace {

// An argument the C parameter cannot hold: the call returns `code` instead
// of reaching C.
struct Refused {
  aclError code;
};

// The integer an argument stands for: anything with __index__ (int, bool,
// numpy integers).
py::int_ Index(const py::handle& arg, const char* name) {
  if (!PyIndex_Check(arg.ptr())) {
    throw py::type_error(absl::StrCat(name, " must be an int, not ", Py_TYPE(arg.ptr())->tp_name));
  }
  PyObject* value = PyNumber_Index(arg.ptr());
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::int_>(value);
}

// An integer argument as the C type T, or Refused{refused} when T cannot
// hold it.
template <class T>
T Int(const py::handle& arg, const char* name, aclError refused = ACL_ERROR_INVALID_PARAM) {
  static_assert(std::is_integral_v<T>);
  const py::int_ value = Index(arg, name);
  if constexpr (std::is_signed_v<T>) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (overflow != 0 || !std::in_range<T>(v)) throw Refused{refused};
    return static_cast<T>(v);
  } else {
    // Negative values and values beyond 64 bits raise OverflowError here.
    const unsigned long long v = PyLong_AsUnsignedLongLong(value.ptr());
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
      PyErr_Clear();
      throw Refused{refused};
    }
    if (!std::in_range<T>(v)) throw Refused{refused};
    return static_cast<T>(v);
  }
}

// A C enum argument: any value of its underlying type reaches C, which
// answers unknown enumerators itself. Stored through memcpy, as the face
// reads its enums (compat::Raw): C callers may pass any value.
template <class E>
E Enum(const py::handle& arg, const char* name) {
  using U = std::underlying_type_t<E>;
  const U raw = Int<U>(arg, name);
  E e;
  std::memcpy(&e, &raw, sizeof e);
  return e;
}

// Pointers and handles are ints (uintptr_t); 0 is NULL.
void* Ptr(const py::handle& arg, const char* name) {
  return reinterpret_cast<void*>(Int<uintptr_t>(arg, name));
}

size_t Size(const py::handle& arg, const char* name) { return Int<size_t>(arg, name); }

int32_t Device(const py::handle& arg, const char* name) {
  return Int<int32_t>(arg, name, ACL_ERROR_RT_INVALID_DEVICEID);
}

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Runs the C call without the GIL.
template <class F>
aclError Run(F&& call) {
  py::gil_scoped_release nogil;
  return call();
}

// What a binding returns besides ret, for the answer to a Refused argument.
enum class Outputs { kNone, kInt, kFloat, kTwoInts };

template <class Body>
py::object Guard(Outputs outputs, Body&& body) {
  try {
    return body();
  } catch (const Refused& r) {
    switch (outputs) {
      case Outputs::kNone:
        break;
      case Outputs::kInt:
        return py::make_tuple(0, r.code);
      case Outputs::kFloat:
        return py::make_tuple(0.0, r.code);
      case Outputs::kTwoInts:
        return py::make_tuple(0, 0, r.code);
    }
    return py::int_(r.code);
  }
}

py::object Ret(aclError ret) { return py::int_(ret); }

// (value, ret); value 0 unless the call succeeded.
template <class T>
py::object Out(T value, aclError ret) {
  return py::make_tuple(ret == ACL_SUCCESS ? value : T{}, ret);
}

py::object PtrOut(void* p, aclError ret) { return Out(Addr(p), ret); }

// Binds an action taking one handle or pointer: ret = f(x).
void DefHandleAction(py::module_& m, const char* name, aclError (*c)(void*), const char* arg,
                     const char* doc) {
  m.def(
      name,
      [c, arg](const py::object& x) {
        return Guard(Outputs::kNone, [&] {
          void* p = Ptr(x, arg);
          return Ret(Run([&] { return c(p); }));
        });
      },
      py::arg(arg), doc);
}

// Binds a constructor of a handle: handle, ret = f().
void DefCreate(py::module_& m, const char* name, aclError (*c)(void**), const char* doc) {
  m.def(
      name,
      [c] {
        void* h = nullptr;
        const aclError ret = Run([&] { return c(&h); });
        return PtrOut(h, ret);
      },
      doc);
}

// Binds one of aclrtMalloc's kin: dev_ptr, ret = f(size, policy).
void DefMalloc(py::module_& m, const char* name,
               aclError (*c)(void**, size_t, aclrtMemMallocPolicy), const char* doc) {
  m.def(
      name,
      [c](const py::object& size, const py::object& policy) {
        return Guard(Outputs::kInt, [&] {
          const size_t n = Size(size, "size");
          const auto p = Enum<aclrtMemMallocPolicy>(policy, "policy");
          void* out = nullptr;
          const aclError ret = Run([&] { return c(&out, n, p); });
          return PtrOut(out, ret);
        });
      },
      py::arg("size"), py::arg("policy"), doc);
}

// ------------------------------------------------------------------- pools

// aclrtMemPoolProps from pyACL's form of a struct: a dict keyed by the C
// field names, nested structs as dicts; a missing field is 0, as in a
// zero-initialised C struct.
void LocationFromDict(const py::handle& value, aclrtMemLocation* out) {
  if (!py::isinstance<py::dict>(value)) {
    throw py::type_error("location must be a dict {'id': ..., 'type': ...}");
  }
  for (const auto& [key, field] : py::reinterpret_borrow<py::dict>(value)) {
    const std::string k = py::isinstance<py::str>(key) ? key.cast<std::string>() : "";
    if (k == "id") {
      out->id = Int<uint32_t>(field, "location['id']", ACL_ERROR_RT_INVALID_DEVICEID);
    } else if (k == "type") {
      out->type = Enum<aclrtMemLocationType>(field, "location['type']");
    } else {
      throw py::type_error(absl::StrCat("location has the fields 'id' and 'type', not ",
                                        py::repr(key).cast<std::string>()));
    }
  }
}

aclrtMemPoolProps PoolPropsFromDict(const py::dict& d) {
  aclrtMemPoolProps props;
  std::memset(&props, 0, sizeof props);
  for (const auto& [key, value] : d) {
    const std::string k = py::isinstance<py::str>(key) ? key.cast<std::string>() : "";
    if (k == "allocType") {
      props.allocType = Enum<aclrtMemAllocationType>(value, "allocType");
    } else if (k == "handleType") {
      props.handleType = Enum<aclrtMemHandleType>(value, "handleType");
    } else if (k == "location") {
      LocationFromDict(value, &props.location);
    } else if (k == "maxSize") {
      props.maxSize = Size(value, "maxSize");
    } else if (k == "reserved") {
      if (!py::isinstance<py::iterable>(value)) {
        throw py::type_error("reserved must be bytes or a sequence of ints");
      }
      size_t i = 0;
      for (const py::handle byte : py::reinterpret_borrow<py::iterable>(value)) {
        if (i == sizeof props.reserved) throw Refused{ACL_ERROR_INVALID_PARAM};
        props.reserved[i++] = Int<unsigned char>(byte, "reserved[i]");
      }
    } else {
      throw py::type_error(absl::StrCat(
          "aclrtMemPoolProps has the fields allocType, handleType, location, maxSize and "
          "reserved, not ",
          py::repr(key).cast<std::string>()));
    }
  }
  return props;
}

// Pool attributes 1-3 are uint32_t switches, the others uint64_t byte counts
// (acl_rt_memory.h): the value travels in the width the face reads.
bool IsSwitchAttr(aclrtMemPoolAttr attr) {
  const auto a = internal::compat::Raw(attr);
  return a >= ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
         a <= ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

// --------------------------------------------------------------- constants

// Every ACL_* name of the face's headers with its value from there.
py::dict Constants() {
  py::dict c;
#define SP_PYACL_CONSTANT(name) c[#name] = static_cast<long long>(name)
  // acl_base.h
  SP_PYACL_CONSTANT(ACL_ERROR_NONE);
  SP_PYACL_CONSTANT(ACL_SUCCESS);
  SP_PYACL_CONSTANT(ACL_ERROR_INVALID_PARAM);
  SP_PYACL_CONSTANT(ACL_ERROR_UNINITIALIZE);
  SP_PYACL_CONSTANT(ACL_ERROR_REPEAT_INITIALIZE);
  SP_PYACL_CONSTANT(ACL_ERROR_INVALID_FILE);
  SP_PYACL_CONSTANT(ACL_ERROR_REPEAT_FINALIZE);
  SP_PYACL_CONSTANT(ACL_ERROR_BAD_ALLOC);
  SP_PYACL_CONSTANT(ACL_ERROR_API_NOT_SUPPORT);
  SP_PYACL_CONSTANT(ACL_ERROR_INVALID_DEVICE);
  SP_PYACL_CONSTANT(ACL_ERROR_MEMORY_ADDRESS_UNALIGNED);
  SP_PYACL_CONSTANT(ACL_ERROR_RESOURCE_NOT_MATCH);
  SP_PYACL_CONSTANT(ACL_ERROR_INVALID_RESOURCE_HANDLE);
  SP_PYACL_CONSTANT(ACL_ERROR_FEATURE_UNSUPPORTED);
  SP_PYACL_CONSTANT(ACL_ERROR_STORAGE_OVER_LIMIT);
  SP_PYACL_CONSTANT(ACL_ERROR_INTERNAL_ERROR);
  SP_PYACL_CONSTANT(ACL_ERROR_FAILURE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_FAILURE);
  SP_PYACL_CONSTANT(ACL_ERROR_DRV_FAILURE);
  // error_codes/rt_error_codes.h
  SP_PYACL_CONSTANT(ACL_RT_SUCCESS);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_PARAM_INVALID);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_INVALID_DEVICEID);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_CONTEXT_NULL);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_STREAM_CONTEXT);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_ADDR_UNALIGNED);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_INVALID_HANDLE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_INVALID_MALLOC_TYPE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_MEMORY_ALLOCATION);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_MEMORY_FREE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_NO_DEVICE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_NO_PERMISSION);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_OVER_LIMIT);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_INTERNAL_ERROR);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_STREAM_NOT_COMPLETE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_EVENT_NOT_COMPLETE);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_AICORE_EXCEPTION);
  SP_PYACL_CONSTANT(ACL_ERROR_RT_DEV_SETUP_ERROR);
  SP_PYACL_CONSTANT(ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  SP_PYACL_CONSTANT(ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
  // acl_rt.h
  SP_PYACL_CONSTANT(ACL_EVENT_RECORDED_STATUS_NOT_READY);
  SP_PYACL_CONSTANT(ACL_EVENT_RECORDED_STATUS_COMPLETE);
  SP_PYACL_CONSTANT(ACL_MEMCPY_HOST_TO_HOST);
  SP_PYACL_CONSTANT(ACL_MEMCPY_HOST_TO_DEVICE);
  SP_PYACL_CONSTANT(ACL_MEMCPY_DEVICE_TO_HOST);
  SP_PYACL_CONSTANT(ACL_MEMCPY_DEVICE_TO_DEVICE);
  SP_PYACL_CONSTANT(ACL_MEMCPY_DEFAULT);
  SP_PYACL_CONSTANT(ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE);
  SP_PYACL_CONSTANT(ACL_MEMCPY_INNER_DEVICE_TO_DEVICE);
  SP_PYACL_CONSTANT(ACL_MEMCPY_INTER_DEVICE_TO_DEVICE);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_HUGE_FIRST);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_HUGE_ONLY);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_NORMAL_ONLY);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_HUGE_FIRST_P2P);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_HUGE_ONLY_P2P);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_NORMAL_ONLY_P2P);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_HUGE1G_ONLY);
  SP_PYACL_CONSTANT(ACL_MEM_MALLOC_HUGE1G_ONLY_P2P);
  SP_PYACL_CONSTANT(ACL_MEM_TYPE_LOW_BAND_WIDTH);
  SP_PYACL_CONSTANT(ACL_MEM_TYPE_HIGH_BAND_WIDTH);
  SP_PYACL_CONSTANT(ACL_MEM_ACCESS_USER_SPACE_READONLY);
  SP_PYACL_CONSTANT(ACL_DDR_MEM);
  SP_PYACL_CONSTANT(ACL_HBM_MEM);
  SP_PYACL_CONSTANT(ACL_DDR_MEM_HUGE);
  SP_PYACL_CONSTANT(ACL_DDR_MEM_NORMAL);
  SP_PYACL_CONSTANT(ACL_HBM_MEM_HUGE);
  SP_PYACL_CONSTANT(ACL_HBM_MEM_NORMAL);
  SP_PYACL_CONSTANT(ACL_DDR_MEM_P2P_HUGE);
  SP_PYACL_CONSTANT(ACL_DDR_MEM_P2P_NORMAL);
  SP_PYACL_CONSTANT(ACL_HBM_MEM_P2P_HUGE);
  SP_PYACL_CONSTANT(ACL_HBM_MEM_P2P_NORMAL);
  SP_PYACL_CONSTANT(ACL_HBM_MEM_HUGE1G);
  SP_PYACL_CONSTANT(ACL_HBM_MEM_P2P_HUGE1G);
  SP_PYACL_CONSTANT(ACL_MEM_NORMAL);
  SP_PYACL_CONSTANT(ACL_MEM_HUGE);
  SP_PYACL_CONSTANT(ACL_MEM_HUGE1G);
  SP_PYACL_CONSTANT(ACL_MEM_P2P_NORMAL);
  SP_PYACL_CONSTANT(ACL_MEM_P2P_HUGE);
  SP_PYACL_CONSTANT(ACL_MEM_P2P_HUGE1G);
  SP_PYACL_CONSTANT(ACL_MEM_LOCATION_TYPE_HOST);
  SP_PYACL_CONSTANT(ACL_MEM_LOCATION_TYPE_DEVICE);
  SP_PYACL_CONSTANT(ACL_MEM_LOCATION_TYPE_UNREGISTERED);
  SP_PYACL_CONSTANT(ACL_MEM_LOCATION_TYPE_MANAGED);
  SP_PYACL_CONSTANT(ACL_MEM_LOCATION_TYPE_HOST_NUMA);
  SP_PYACL_CONSTANT(ACL_MEM_ALLOCATION_TYPE_PINNED);
  SP_PYACL_CONSTANT(ACL_MEM_HANDLE_TYPE_NONE);
  SP_PYACL_CONSTANT(ACL_MEM_HANDLE_TYPE_POSIX);
  SP_PYACL_CONSTANT(ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM);
  SP_PYACL_CONSTANT(ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  SP_PYACL_CONSTANT(ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF);
  SP_PYACL_CONSTANT(ACL_HOST_REGISTER_MAPPED);
  SP_PYACL_CONSTANT(ACL_HOST_REGISTER_IOMEMORY);
  SP_PYACL_CONSTANT(ACL_HOST_REGISTER_READONLY);
  SP_PYACL_CONSTANT(ACL_RT_THREAD_LEVEL);
  // acl_rt_memory.h
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES);
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC);
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD);
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT);
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH);
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT);
  SP_PYACL_CONSTANT(ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH);
#undef SP_PYACL_CONSTANT
  return c;
}

// ---------------------------------------------------------------- modules

void BindRt(py::module_& rt) {
  rt.doc() = "acl.rt: devices, contexts, streams, events and memory.";

  // Devices.
  rt.def(
      "set_device",
      [](const py::object& device_id) {
        return Guard(Outputs::kNone, [&] {
          const int32_t d = Device(device_id, "device_id");
          return Ret(Run([&] { return aclrtSetDevice(d); }));
        });
      },
      py::arg("device_id"), "ret = set_device(device_id): aclrtSetDevice.");
  rt.def(
      "reset_device",
      [](const py::object& device_id) {
        return Guard(Outputs::kNone, [&] {
          const int32_t d = Device(device_id, "device_id");
          return Ret(Run([&] { return aclrtResetDevice(d); }));
        });
      },
      py::arg("device_id"), "ret = reset_device(device_id): aclrtResetDevice.");
  rt.def(
      "get_device",
      [] {
        int32_t d = 0;
        const aclError ret = Run([&] { return aclrtGetDevice(&d); });
        return Out(d, ret);
      },
      "device_id, ret = get_device(): aclrtGetDevice.");
  rt.def(
      "get_device_count",
      [] {
        uint32_t n = 0;
        const aclError ret = Run([&] { return aclrtGetDeviceCount(&n); });
        return Out(n, ret);
      },
      "count, ret = get_device_count(): aclrtGetDeviceCount.");
  rt.def(
      "synchronize_device", [] { return Ret(Run([] { return aclrtSynchronizeDevice(); })); },
      "ret = synchronize_device(): aclrtSynchronizeDevice.");

  // Contexts.
  rt.def(
      "create_context",
      [](const py::object& device_id) {
        return Guard(Outputs::kInt, [&] {
          const int32_t d = Device(device_id, "device_id");
          aclrtContext ctx = nullptr;
          const aclError ret = Run([&] { return aclrtCreateContext(&ctx, d); });
          return PtrOut(ctx, ret);
        });
      },
      py::arg("device_id"), "context, ret = create_context(device_id): aclrtCreateContext.");
  DefHandleAction(rt, "destroy_context", aclrtDestroyContext, "context",
                  "ret = destroy_context(context): aclrtDestroyContext.");
  DefHandleAction(rt, "set_context", aclrtSetCurrentContext, "context",
                  "ret = set_context(context): aclrtSetCurrentContext.");
  DefCreate(rt, "get_context", aclrtGetCurrentContext,
            "context, ret = get_context(): aclrtGetCurrentContext.");

  // Streams. Stream 0 is the default stream, as NULL is in C.
  DefCreate(rt, "create_stream", aclrtCreateStream,
            "stream, ret = create_stream(): aclrtCreateStream.");
  DefHandleAction(rt, "destroy_stream", aclrtDestroyStream, "stream",
                  "ret = destroy_stream(stream): aclrtDestroyStream.");
  DefHandleAction(rt, "synchronize_stream", aclrtSynchronizeStream, "stream",
                  "ret = synchronize_stream(stream): aclrtSynchronizeStream (0: the default "
                  "stream).");

  // Events.
  DefCreate(rt, "create_event", aclrtCreateEvent, "event, ret = create_event(): aclrtCreateEvent.");
  DefHandleAction(rt, "destroy_event", aclrtDestroyEvent, "event",
                  "ret = destroy_event(event): aclrtDestroyEvent.");
  DefHandleAction(rt, "synchronize_event", aclrtSynchronizeEvent, "event",
                  "ret = synchronize_event(event): aclrtSynchronizeEvent.");
  rt.def(
      "record_event",
      [](const py::object& event, const py::object& stream) {
        return Guard(Outputs::kNone, [&] {
          void* e = Ptr(event, "event");
          void* s = Ptr(stream, "stream");
          return Ret(Run([&] { return aclrtRecordEvent(e, s); }));
        });
      },
      py::arg("event"), py::arg("stream"), "ret = record_event(event, stream): aclrtRecordEvent.");
  rt.def(
      "stream_wait_event",
      [](const py::object& stream, const py::object& event) {
        return Guard(Outputs::kNone, [&] {
          void* s = Ptr(stream, "stream");
          void* e = Ptr(event, "event");
          return Ret(Run([&] { return aclrtStreamWaitEvent(s, e); }));
        });
      },
      py::arg("stream"), py::arg("event"),
      "ret = stream_wait_event(stream, event): aclrtStreamWaitEvent.");
  rt.def(
      "query_event_status",
      [](const py::object& event) {
        return Guard(Outputs::kInt, [&] {
          void* e = Ptr(event, "event");
          aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
          const aclError ret = Run([&] { return aclrtQueryEventStatus(e, &status); });
          return Out(static_cast<int>(status), ret);
        });
      },
      py::arg("event"),
      "status, ret = query_event_status(event): aclrtQueryEventStatus "
      "(ACL_EVENT_RECORDED_STATUS_NOT_READY or _COMPLETE).");
  rt.def(
      "event_elapsed_time",
      [](const py::object& start, const py::object& end) {
        return Guard(Outputs::kFloat, [&] {
          void* a = Ptr(start, "start");
          void* b = Ptr(end, "end");
          float ms = 0;
          const aclError ret = Run([&] { return aclrtEventElapsedTime(&ms, a, b); });
          return Out(static_cast<double>(ms), ret);
        });
      },
      py::arg("start"), py::arg("end"),
      "ms, ret = event_elapsed_time(start, end): aclrtEventElapsedTime.");

  // Memory.
  DefMalloc(rt, "malloc", aclrtMalloc, "dev_ptr, ret = malloc(size, policy): aclrtMalloc.");
  DefMalloc(rt, "malloc_cached", aclrtMallocCached,
            "dev_ptr, ret = malloc_cached(size, policy): aclrtMallocCached.");
  DefMalloc(rt, "malloc_align32", aclrtMallocAlign32,
            "dev_ptr, ret = malloc_align32(size, policy): aclrtMallocAlign32.");
  DefHandleAction(rt, "free", aclrtFree, "dev_ptr", "ret = free(dev_ptr): aclrtFree.");
  rt.def(
      "malloc_host",
      [](const py::object& size) {
        return Guard(Outputs::kInt, [&] {
          const size_t n = Size(size, "size");
          void* out = nullptr;
          const aclError ret = Run([&] { return aclrtMallocHost(&out, n); });
          return PtrOut(out, ret);
        });
      },
      py::arg("size"), "host_ptr, ret = malloc_host(size): aclrtMallocHost.");
  DefHandleAction(rt, "free_host", aclrtFreeHost, "host_ptr",
                  "ret = free_host(host_ptr): aclrtFreeHost.");
  rt.def(
      "memcpy",
      [](const py::object& dst, const py::object& dest_max, const py::object& src,
         const py::object& count, const py::object& kind) {
        return Guard(Outputs::kNone, [&] {
          void* d = Ptr(dst, "dst");
          const size_t max = Size(dest_max, "dest_max");
          const void* s = Ptr(src, "src");
          const size_t n = Size(count, "count");
          const auto k = Enum<aclrtMemcpyKind>(kind, "kind");
          return Ret(Run([&] { return aclrtMemcpy(d, max, s, n, k); }));
        });
      },
      py::arg("dst"), py::arg("dest_max"), py::arg("src"), py::arg("count"), py::arg("kind"),
      "ret = memcpy(dst, dest_max, src, count, kind): aclrtMemcpy.");
  rt.def(
      "memcpy_async",
      [](const py::object& dst, const py::object& dest_max, const py::object& src,
         const py::object& count, const py::object& kind, const py::object& stream) {
        return Guard(Outputs::kNone, [&] {
          void* d = Ptr(dst, "dst");
          const size_t max = Size(dest_max, "dest_max");
          const void* s = Ptr(src, "src");
          const size_t n = Size(count, "count");
          const auto k = Enum<aclrtMemcpyKind>(kind, "kind");
          void* st = Ptr(stream, "stream");
          return Ret(Run([&] { return aclrtMemcpyAsync(d, max, s, n, k, st); }));
        });
      },
      py::arg("dst"), py::arg("dest_max"), py::arg("src"), py::arg("count"), py::arg("kind"),
      py::arg("stream"),
      "ret = memcpy_async(dst, dest_max, src, count, kind, stream): aclrtMemcpyAsync.");
  rt.def(
      "memset",
      [](const py::object& dev_ptr, const py::object& max_count, const py::object& value,
         const py::object& count) {
        return Guard(Outputs::kNone, [&] {
          void* d = Ptr(dev_ptr, "dev_ptr");
          const size_t max = Size(max_count, "max_count");
          const int32_t v = Int<int32_t>(value, "value");
          const size_t n = Size(count, "count");
          return Ret(Run([&] { return aclrtMemset(d, max, v, n); }));
        });
      },
      py::arg("dev_ptr"), py::arg("max_count"), py::arg("value"), py::arg("count"),
      "ret = memset(dev_ptr, max_count, value, count): aclrtMemset.");
  rt.def(
      "memset_async",
      [](const py::object& dev_ptr, const py::object& max_count, const py::object& value,
         const py::object& count, const py::object& stream) {
        return Guard(Outputs::kNone, [&] {
          void* d = Ptr(dev_ptr, "dev_ptr");
          const size_t max = Size(max_count, "max_count");
          const int32_t v = Int<int32_t>(value, "value");
          const size_t n = Size(count, "count");
          void* st = Ptr(stream, "stream");
          return Ret(Run([&] { return aclrtMemsetAsync(d, max, v, n, st); }));
        });
      },
      py::arg("dev_ptr"), py::arg("max_count"), py::arg("value"), py::arg("count"),
      py::arg("stream"), "ret = memset_async(dev_ptr, max_count, value, count, stream).");
  rt.def(
      "get_mem_info",
      [](const py::object& attr) {
        return Guard(Outputs::kTwoInts, [&] {
          const auto a = Enum<aclrtMemAttr>(attr, "attr");
          size_t free = 0;
          size_t total = 0;
          const aclError ret = Run([&] { return aclrtGetMemInfo(a, &free, &total); });
          const bool ok = ret == ACL_SUCCESS;
          return py::object(py::make_tuple(ok ? free : 0, ok ? total : 0, ret));
        });
      },
      py::arg("attr"), "free, total, ret = get_mem_info(attr): aclrtGetMemInfo.");

  // Host memory registration.
  rt.def(
      "host_register",
      [](const py::object& ptr, const py::object& size, const py::object& type) {
        return Guard(Outputs::kInt, [&] {
          void* p = Ptr(ptr, "ptr");
          const auto n = Int<uint64_t>(size, "size");
          const auto t = Enum<aclrtHostRegisterType>(type, "type");
          void* dev = nullptr;
          const aclError ret = Run([&] { return aclrtHostRegister(p, n, t, &dev); });
          return PtrOut(dev, ret);
        });
      },
      py::arg("ptr"), py::arg("size"), py::arg("type"),
      "dev_ptr, ret = host_register(ptr, size, type): aclrtHostRegister.");
  DefHandleAction(rt, "host_unregister", aclrtHostUnregister, "ptr",
                  "ret = host_unregister(ptr): aclrtHostUnregister.");
  rt.def(
      "host_get_device_pointer",
      [](const py::object& ptr_host, const py::object& flag) {
        return Guard(Outputs::kInt, [&] {
          void* p = Ptr(ptr_host, "ptr_host");
          const auto f = Int<uint32_t>(flag, "flag");
          void* dev = nullptr;
          const aclError ret = Run([&] { return aclrtHostGetDevicePointer(p, &dev, f); });
          return PtrOut(dev, ret);
        });
      },
      py::arg("ptr_host"), py::arg("flag"),
      "ptr_device, ret = host_get_device_pointer(ptr_host, flag): aclrtHostGetDevicePointer.");

  // Stream-ordered pools: the C face's aclrtMemPool* functions under pyACL's
  // naming, which pyACL itself does not have.
  rt.def(
      "mem_pool_create",
      [](const py::object& props) {
        return Guard(Outputs::kInt, [&] {
          aclrtMemPoolProps p;
          const aclrtMemPoolProps* in = nullptr;
          if (!props.is_none()) {
            if (!py::isinstance<py::dict>(props)) {
              throw py::type_error("props must be a dict (aclrtMemPoolProps' fields) or None");
            }
            p = PoolPropsFromDict(props.cast<py::dict>());
            in = &p;
          }
          aclrtMemPool pool = nullptr;
          const aclError ret = Run([&] { return aclrtMemPoolCreate(&pool, in); });
          return PtrOut(pool, ret);
        });
      },
      py::arg("props"),
      "pool, ret = mem_pool_create(props): aclrtMemPoolCreate. props is a dict of "
      "aclrtMemPoolProps' fields: {'allocType': ACL_MEM_ALLOCATION_TYPE_PINNED, "
      "'handleType': ACL_MEM_HANDLE_TYPE_NONE, 'location': {'id': 0, 'type': "
      "ACL_MEM_LOCATION_TYPE_DEVICE}, 'maxSize': 0, 'reserved': b''}; a missing field is 0, "
      "None is a NULL props.");
  DefHandleAction(rt, "mem_pool_destroy", aclrtMemPoolDestroy, "pool",
                  "ret = mem_pool_destroy(pool): aclrtMemPoolDestroy.");
  rt.def(
      "mem_pool_set_attr",
      [](const py::object& pool, const py::object& attr, const py::object& value) {
        return Guard(Outputs::kNone, [&] {
          void* p = Ptr(pool, "pool");
          const auto a = Enum<aclrtMemPoolAttr>(attr, "attr");
          uint64_t storage = 0;
          if (IsSwitchAttr(a)) {
            const auto v = Int<uint32_t>(value, "value");
            std::memcpy(&storage, &v, sizeof v);
          } else {
            storage = Int<uint64_t>(value, "value");
          }
          return Ret(Run([&] { return aclrtMemPoolSetAttr(p, a, &storage); }));
        });
      },
      py::arg("pool"), py::arg("attr"), py::arg("value"),
      "ret = mem_pool_set_attr(pool, attr, value): aclrtMemPoolSetAttr; value is an int "
      "(uint32_t for the reuse switches, uint64_t for byte counts).");
  rt.def(
      "mem_pool_get_attr",
      [](const py::object& pool, const py::object& attr) {
        return Guard(Outputs::kInt, [&] {
          void* p = Ptr(pool, "pool");
          const auto a = Enum<aclrtMemPoolAttr>(attr, "attr");
          uint64_t storage = 0;
          const aclError ret = Run([&] { return aclrtMemPoolGetAttr(p, a, &storage); });
          uint64_t value = storage;
          if (IsSwitchAttr(a)) {
            uint32_t v = 0;
            std::memcpy(&v, &storage, sizeof v);
            value = v;
          }
          return Out(value, ret);
        });
      },
      py::arg("pool"), py::arg("attr"),
      "value, ret = mem_pool_get_attr(pool, attr): aclrtMemPoolGetAttr.");
  rt.def(
      "mem_pool_malloc_async",
      [](const py::object& size, const py::object& pool, const py::object& stream) {
        return Guard(Outputs::kInt, [&] {
          const size_t n = Size(size, "size");
          void* p = Ptr(pool, "pool");
          void* s = Ptr(stream, "stream");
          void* out = nullptr;
          const aclError ret = Run([&] { return aclrtMemPoolMallocAsync(&out, n, p, s); });
          return PtrOut(out, ret);
        });
      },
      py::arg("size"), py::arg("pool"), py::arg("stream"),
      "ptr, ret = mem_pool_malloc_async(size, pool, stream): aclrtMemPoolMallocAsync "
      "(size 0: ptr 0, ACL_SUCCESS).");
  rt.def(
      "mem_pool_free_async",
      [](const py::object& ptr, const py::object& stream) {
        return Guard(Outputs::kNone, [&] {
          void* p = Ptr(ptr, "ptr");
          void* s = Ptr(stream, "stream");
          return Ret(Run([&] { return aclrtMemPoolFreeAsync(p, s); }));
        });
      },
      py::arg("ptr"), py::arg("stream"),
      "ret = mem_pool_free_async(ptr, stream): aclrtMemPoolFreeAsync.");
  rt.def(
      "mem_pool_trim_to",
      [](const py::object& pool, const py::object& min_bytes_to_keep) {
        return Guard(Outputs::kNone, [&] {
          void* p = Ptr(pool, "pool");
          const size_t keep = Size(min_bytes_to_keep, "min_bytes_to_keep");
          return Ret(Run([&] { return aclrtMemPoolTrimTo(p, keep); }));
        });
      },
      py::arg("pool"), py::arg("min_bytes_to_keep"),
      "ret = mem_pool_trim_to(pool, min_bytes_to_keep): aclrtMemPoolTrimTo.");
}

void BindMedia(py::module_& media) {
  media.doc() = "acl.media: DVPP memory (acldvppMalloc, acldvppFree).";
  media.def(
      "dvpp_malloc",
      [](const py::object& size) {
        return Guard(Outputs::kInt, [&] {
          const size_t n = Size(size, "size");
          void* out = nullptr;
          const aclError ret = Run([&] { return acldvppMalloc(&out, n); });
          return PtrOut(out, ret);
        });
      },
      py::arg("size"), "dev_ptr, ret = dvpp_malloc(size): acldvppMalloc.");
  DefHandleAction(media, "dvpp_free", acldvppFree, "dev_ptr",
                  "ret = dvpp_free(dev_ptr): acldvppFree.");
}

void BindHimpi(py::module_& himpi) {
  himpi.doc() =
      "acl.himpi: hi_mpi_dvpp_malloc and hi_mpi_dvpp_free, served by acldvppMalloc's pool.";
  himpi.def(
      "dvpp_malloc",
      [](const py::object& dev_id, const py::object& size) {
        return Guard(Outputs::kInt, [&] {
          const int32_t d = Device(dev_id, "dev_id");
          const size_t n = Size(size, "size");
          void* out = nullptr;
          const aclError ret = Run([&] {
            // dev_id is reserved in pyACL; an id naming no device is still
            // an error, answered as the face answers one. The memory is the
            // calling thread's current device's, as acldvppMalloc's.
            uint32_t count = 0;
            if (aclError e = aclrtGetDeviceCount(&count); e != ACL_SUCCESS) return e;
            if (d < 0 || static_cast<uint32_t>(d) >= count) return ACL_ERROR_RT_INVALID_DEVICEID;
            return acldvppMalloc(&out, n);
          });
          return PtrOut(out, ret);
        });
      },
      py::arg("dev_id"), py::arg("size"),
      "dev_ptr, ret = dvpp_malloc(dev_id, size): hi_mpi_dvpp_malloc, memory of acldvppMalloc's "
      "pool on the current device.");
  DefHandleAction(himpi, "dvpp_free", acldvppFree, "dev_ptr",
                  "ret = dvpp_free(dev_ptr): hi_mpi_dvpp_free (acldvppFree).");
}

void BindUtil(py::module_& util) {
  util.doc() = "acl.util's compiled helpers; the functions are python/pyacl/acl/util.py's.";
  util.def(
      "buffer_address",
      [](const py::object& data) {
        Py_buffer view;
        // PyBUF_SIMPLE: a contiguous buffer, read-only ones (bytes) included,
        // as pyACL programs copy device output into a bytes object.
        if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) {
          throw py::error_already_set();
        }
        const uintptr_t address = Addr(view.buf);
        PyBuffer_Release(&view);
        return address;
      },
      py::arg("data"), "The address of a contiguous buffer's first byte.");
}

}  // namespace

absl::StatusOr<std::shared_ptr<Runtime>> AclFaceRuntime() {
  absl::StatusOr<std::shared_ptr<internal::compat::ProcessRuntime>> proc =
      internal::acl::AclContext().Acquire();
  if (!proc.ok()) return proc.status();
  // Aliased: the Runtime lives inside the ProcessRuntime, which this pointer
  // keeps alive.
  std::shared_ptr<internal::compat::ProcessRuntime> owner = *std::move(proc);
  Runtime* runtime = &owner->cpp();
  return std::shared_ptr<Runtime>(std::move(owner), runtime);
}

void BindPyAcl(py::module_& m) {
  py::module_ face = m.def_submodule(
      "pyacl", "The compiled half of the acl package (pyACL over the AscendCL face).");
  face.def(
      "init",
      [](const py::object& config_path) {
        if (config_path.is_none()) return Ret(Run([] { return aclInit(nullptr); }));
        // str, bytes or os.PathLike, as open() takes; anything else raises.
        const std::string path =
            py::module_::import("os").attr("fsencode")(config_path).cast<std::string>();
        // A path with a NUL byte names no file; C would read a shorter one.
        if (path.find('\0') != std::string::npos) return Ret(ACL_ERROR_INVALID_FILE);
        return Ret(Run([&] { return aclInit(path.c_str()); }));
      },
      py::arg("config_path") = py::none(),
      "ret = init(config_path=None): aclInit (None or '' is no configuration file).");
  face.def(
      "finalize", [] { return Ret(Run([] { return aclFinalize(); })); },
      "ret = finalize(): aclFinalize.");
  face.attr("constants") = Constants();

  py::module_ rt = face.def_submodule("rt");
  BindRt(rt);
  py::module_ media = face.def_submodule("media");
  BindMedia(media);
  py::module_ himpi = face.def_submodule("himpi");
  BindHimpi(himpi);
  py::module_ util = face.def_submodule("util");
  BindUtil(util);
}

}  // namespace streampool::python
