// streampool._core: the Python binding of the public C++ API
// (streampool::Runtime) and of the replay library (src/replay/).
//
// The binding owns nothing the library does not already own; it adds what
// Python users expect: objects for streams, events, pools and allocations
// that keep their runtime alive, keyword arguments, snake_case names, context
// managers, and exceptions (streampool._errors) instead of status values.
//
// The GIL is held for every call except the ones that can block (synchronize,
// host time under the threads executor, a replay): the library never calls
// back into Python, so a call that holds the GIL cannot wait on one that does
// not. Calls that hold the GIL are therefore also the ones that tell the
// timeline recorder what they did, in the order the runtime saw them, which
// is what the recorder needs (src/replay/timeline.h).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "python/pyacl_bindings.h"
#include "src/pool/names.h"
#include "src/pool/pool_attrs.h"
#include "src/replay/decisions.h"
#include "src/replay/policy_report.h"
#include "src/replay/replay.h"
#include "src/replay/report.h"
#include "src/replay/rmm_model.h"
#include "src/replay/timeline.h"
#include "src/replay/torch_validation.h"
#include "src/replay/trace.h"
#include "streampool/mem_pool.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace py = pybind11;

namespace streampool::python {
namespace {

// ------------------------------------------------------------------ errors

// The classes of streampool._errors, set once at import. Leaked on purpose:
// a py::object would be released after the interpreter finalized.
PyObject* g_error = nullptr;
PyObject* g_out_of_memory = nullptr;

[[noreturn]] void Raise(spError_t code, const std::string& message) {
  PyObject* cls = code == spErrorMemoryAllocation ? g_out_of_memory : g_error;
  py::object exc = py::reinterpret_borrow<py::object>(cls)(spGetErrorName(code), message);
  PyErr_SetObject(cls, exc.ptr());
  throw py::error_already_set();
}

// `.code` names what a C caller would have seen for the same failure.
[[noreturn]] void Raise(const absl::Status& st) {
  Raise(streampool::ToCError(st), std::string(st.message()));
}

void Check(const absl::Status& st) {
  if (!st.ok()) Raise(st);
}

template <typename T>
T Check(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return *std::move(v);
}

// ------------------------------------------------------------------- names

// The library's one table of names (src/pool/names.h): a name Python accepts
// is the name it prints back.
template <typename E>
E ParseName(const std::string& name) {
  return Check(internal::ParseEnumNameOrError<E>(name));
}

// ----------------------------------------------------------------- objects

// What a Python Runtime owns. Streams, events, pools and allocations hold it
// by shared_ptr, so the runtime lives while any of them does; close() drops
// the runtime itself, after which every call raises.
struct State {
  std::shared_ptr<Runtime> rt;
  bool recording = false;
  replay::TimelineRecorder recorder;
  // Pools whose bytes the timeline counts, with their counter names.
  std::map<uint64_t, std::string> pool_names;
  std::map<uint64_t, std::string> stream_labels;
  // device and kind of every pool this binding has seen, for Pool objects.
  std::map<uint64_t, std::pair<int, AllocationType>> pool_info;
  // Allocations and frees made while the timeline records, for the
  // device_traces of a memory snapshot (cleared when recording starts; grows
  // with history like the timeline itself).
  struct TraceEvent {
    bool alloc = false;
    uintptr_t ptr = 0;
    uint64_t size = 0;
    uint64_t stream = 0;
    int device = 0;
    uint64_t host_ns = 0;
  };
  std::vector<TraceEvent> trace;
  // A recording (start_recording) is on: the trace is kept as for a timeline.
  bool history = false;
  std::map<uintptr_t, std::pair<uint64_t, int>> trace_live;  // ptr -> size, device

  Runtime& Get() const {
    if (!rt) Raise(spErrorInvalidResourceHandle, "the runtime is closed");
    return *rt;
  }
  // A reference for a call made without the GIL, kept alive even if another
  // thread closes the runtime meanwhile.
  std::shared_ptr<Runtime> Share() const {
    Get();
    return rt;
  }

  // After a call that may change a pool's bytes.
  void CountBytes() {
    if (!recording || !rt) return;
    for (const auto& [pool, name] : pool_names) {
      absl::StatusOr<PoolStats> s = rt->GetPoolStats(PoolId{pool});
      if (s.ok()) recorder.PoolBytes(pool, name, rt->HostNow(), s->reserved_bytes, s->used_bytes);
    }
  }
};
using StatePtr = std::shared_ptr<State>;

struct Stream {
  StatePtr st;
  StreamId id;
  int device = 0;
  bool non_blocking = false;
  bool legacy = false;
  // The handle stays, so that later use is the runtime's
  // spErrorInvalidResourceHandle, not a null handle's spErrorInvalidValue.
  bool destroyed = false;
};

struct Event {
  StatePtr st;
  EventId id;
  bool destroyed = false;  // as Stream::destroyed
};

struct Pool {
  StatePtr st;
  PoolId id;
  int device = 0;
  AllocationType kind = AllocationType::kDevice;

  uint64_t Get(PoolAttr attr) const { return Check(st->Get().GetPoolAttribute(id, attr)); }
  void Set(PoolAttr attr, uint64_t value) const {
    Check(st->Get().SetPoolAttribute(id, attr, value));
  }
};

struct Allocation {
  uintptr_t ptr = 0;
  uint64_t size = 0;
  ReuseRule rule = ReuseRule::kFresh;
  std::optional<Stream> stream;
  std::optional<Pool> pool;
};

// Graphs, their nodes and executable graphs, as Stream and Event are: the
// handle stays after destroy() so that later use is the runtime's error.
struct Graph {
  StatePtr st;
  GraphId id;
  bool destroyed = false;
};

struct GraphNode {
  StatePtr st;
  GraphNodeId id;
  std::optional<uintptr_t> dptr = std::nullopt;  // an allocation node's address
};

struct GraphExec {
  StatePtr st;
  GraphExecId id;
  bool destroyed = false;
};

// A capture of a stream for a with block: begun on entry, ended on exit.
struct Capture {
  Stream stream;
  CaptureMode mode = CaptureMode::kGlobal;
  std::optional<Graph> graph;
};

Pool MakePool(const StatePtr& st, PoolId id) {
  auto it = st->pool_info.find(id.value);
  Pool p{st, id};
  if (it != st->pool_info.end()) {
    std::tie(p.device, p.kind) = it->second;
    return p;
  }
  // A pool made behind the binding (a face's allocator on acl_runtime()):
  // the runtime knows what it is.
  if (st->rt != nullptr) {
    absl::StatusOr<uint64_t> kind = st->rt->GetPoolAttribute(id, PoolAttr::kAllocationType);
    absl::StatusOr<uint64_t> device = st->rt->GetPoolAttribute(id, PoolAttr::kLocationId);
    if (kind.ok()) p.kind = static_cast<AllocationType>(*kind);
    if (device.ok()) p.device = static_cast<int>(static_cast<int64_t>(*device));
  }
  return p;
}

void TrackPool(State& st, PoolId id, int device, AllocationType kind, const std::string& name) {
  st.pool_info.emplace(id.value, std::make_pair(device, kind));
  st.pool_names.emplace(id.value, name);
}

uint64_t Threshold(const py::object& value) {
  if (py::isinstance<py::str>(value)) {
    if (value.cast<std::string>() == "max") return UINT64_MAX;
    Raise(spErrorInvalidValue, "a release threshold is a number of bytes or 'max'");
  }
  // A negative or too large number is a bad value, as C would answer it, not
  // a failed conversion.
  PyObject* index = py::isinstance<py::bool_>(value) ? nullptr : PyNumber_Index(value.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    Raise(spErrorInvalidValue, "a release threshold is a number of bytes or 'max'");
  }
  const py::int_ n = py::reinterpret_steal<py::int_>(index);
  if (n < py::int_(0) || n > py::int_(UINT64_MAX)) {
    Raise(spErrorInvalidValue,
          absl::StrCat("a release threshold is between 0 and 2**64 - 1 bytes, got ",
                       std::string(py::str(value))));
  }
  return n.cast<uint64_t>();
}

// A pointer argument: an Allocation, an allocation node or an int.
uintptr_t PtrOf(const py::handle& h) {
  if (py::isinstance<Allocation>(h)) return h.cast<const Allocation&>().ptr;
  if (py::isinstance<GraphNode>(h)) {
    const GraphNode& n = h.cast<const GraphNode&>();
    if (!n.dptr) Raise(spErrorInvalidValue, "the node is not an allocation node");
    return *n.dptr;
  }
  return h.cast<uintptr_t>();
}

void* Ptr(const py::handle& h) { return reinterpret_cast<void*>(PtrOf(h)); }

// launch_kernel's accesses: an Allocation (all of it, written) or a tuple
// (ptr or Allocation, size, write).
std::vector<Access> Accesses(const py::iterable& items) {
  std::vector<Access> out;
  for (py::handle item : items) {
    if (py::isinstance<Allocation>(item)) {
      const Allocation& a = item.cast<const Allocation&>();
      out.push_back(Access{reinterpret_cast<const void*>(a.ptr), a.size, true});
      continue;
    }
    py::tuple t = py::reinterpret_borrow<py::object>(item).cast<py::tuple>();
    if (t.size() != 3) {
      Raise(spErrorInvalidValue, "an access is an Allocation or a tuple (ptr, size, write)");
    }
    out.push_back(Access{Ptr(t[0]), t[1].cast<uint64_t>(), t[2].cast<bool>()});
  }
  return out;
}

py::dict StatsDict(const PoolStats& s) {
  py::dict d;
#define SP_POOL_STAT(c_name, cxx_name, ...) d[#cxx_name] = s.cxx_name;
#define SP_POOL_STAT_CXX(cxx_name, type, ...) d[#cxx_name] = s.cxx_name;
#include "src/pool/pool_stats.def"
  // The same figures under torch.cuda.memory_stats()'s names, where the
  // meaning is the same (allocated: block sizes of live allocations).
  d["allocated_bytes.all.current"] = s.used_bytes;
  d["allocated_bytes.all.peak"] = s.used_high;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.reserved_high;
  d["requested_bytes.all.current"] = s.requested_bytes;
  d["requested_bytes.all.peak"] = s.requested_high;
  d["segment.all.current"] = s.segments;
  d["segment.all.peak"] = s.segments_high;
  d["num_ooms"] = s.oom_count;
  d["num_alloc_retries"] = s.oom_retries;
  return d;
}

py::dict SnapshotDict(const PoolSnapshot& snap) {
  py::dict d;
  d["pool"] = snap.pool.value;
  d["device"] = snap.device;
  py::list segments;
  for (const SnapshotSegment& seg : snap.segments) {
    py::dict sd;
    sd["address"] = seg.address;
    sd["size"] = seg.size;
    sd["mapped_bytes"] = seg.mapped_bytes;
    sd["expandable"] = seg.expandable;
    py::list blocks;
    for (const SnapshotBlock& b : seg.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested"] = b.requested;
      bd["state"] = BlockStateName(b.state);
      bd["stream"] = b.stream.value;
      bd["free_point"] = b.free_point;
      bd["alloc_seq"] = b.alloc_seq;
      bd["unmapped_bytes"] = b.unmapped_bytes;
      blocks.append(bd);
    }
    sd["blocks"] = blocks;
    segments.append(sd);
  }
  d["segments"] = segments;
  d["stats"] = StatsDict(snap.stats);
  return d;
}

// Runs `call` on a shared reference to the runtime with the GIL released.
template <typename F>
auto Unlocked(const State& st, F&& call) {
  std::shared_ptr<Runtime> rt = st.Share();
  py::gil_scoped_release release;
  return call(*rt);
}

// A query's answer: kUnavailable is "not yet"; any other failure raises.
bool Ready(const absl::Status& st) {
  if (absl::IsUnavailable(st)) return false;
  Check(st);
  return true;
}

// A synchronize call without the GIL, then the pools' bytes, which its
// release thresholds may have changed.
template <typename F>
void Synchronize(State& st, F&& call) {
  Check(Unlocked(st, std::forward<F>(call)));
  st.CountBytes();
}

// ----------------------------------------------------------------- runtime

class PyRuntime {
 public:
  PyRuntime(int devices, uint64_t capacity, const std::string& backing, const std::string& executor,
            uint64_t api_call_ns, uint64_t copy_bytes_per_us, bool check_stream_order,
            bool timeline, bool oom_reclaim, const std::string& leak_check)
      : st_(std::make_shared<State>()) {
    RuntimeConfig config;
    config.device_count = devices;
    config.device_capacity = capacity;
    config.backing = ParseName<Backing>(backing);
    config.executor = ParseName<ExecutorKind>(executor);
    config.api_call_ns = api_call_ns;
    config.copy_bytes_per_us = copy_bytes_per_us;
    config.check_stream_order = check_stream_order;
    config.oom_reclaim = oom_reclaim;
    if (leak_check == "off") {
      config.leak_check = LeakCheck::kOff;
    } else if (leak_check == "report") {
      config.leak_check = LeakCheck::kReport;
    } else if (leak_check == "fail") {
      config.leak_check = LeakCheck::kFail;
    } else {
      Raise(spErrorInvalidValue,
            absl::StrCat("unknown leak_check '", leak_check, "' (one of 'off', 'report', 'fail')"));
    }
    st_->rt = Check(Runtime::Create(config));
    TrackDevices();
    if (timeline) RecordTimeline(true);
  }

  // A runtime someone else owns and shares (the AscendCL face's implicit
  // one): close() drops this object's reference, never the runtime.
  explicit PyRuntime(std::shared_ptr<Runtime> shared) : st_(std::make_shared<State>()) {
    st_->rt = std::move(shared);
    TrackDevices();
  }

  const StatePtr& state() const { return st_; }
  Runtime& rt() const { return st_->Get(); }

  void Close() {
    std::shared_ptr<Runtime> rt = std::move(st_->rt);
    // Destruction waits for the threads executor's workers, which may be
    // waiting for the GIL to run a graph's host node.
    py::gil_scoped_release release;
    rt.reset();
  }
  bool closed() const { return st_->rt == nullptr; }

  Stream CreateStream(int device, bool non_blocking) {
    return Stream{st_, Check(rt().CreateStream(device, non_blocking)), device, non_blocking, false};
  }
  Stream LegacyStream(int device) {
    return Stream{st_, Check(rt().LegacyStream(device)), device, false, true};
  }
  // A stream over a native one the caller made (a CUstream as an int); 0 on
  // a CUDA runtime is the device's legacy stream.
  Stream AdoptStream(uintptr_t native, int device) {
    const StreamId id = Check(rt().CreateStreamFromNative(device, reinterpret_cast<void*>(native)));
    const bool legacy = native == 0;
    return Stream{st_, id, device, !legacy, legacy};
  }
  uintptr_t NativeStream(const Stream& s) {
    return reinterpret_cast<uintptr_t>(Check(rt().NativeStream(s.id)));
  }
  Event CreateEvent(bool disable_timing, bool interprocess) {
    unsigned flags =
        (disable_timing ? kEventDisableTiming : 0) | (interprocess ? kEventInterprocess : 0);
    return Event{st_, Check(rt().CreateEvent(flags))};
  }

  Pool DefaultPool(int device) { return MakePool(st_, Check(rt().DefaultPool(device))); }
  Pool CurrentPool(int device) { return MakePool(st_, Check(rt().CurrentPool(device))); }
  void SetCurrentPool(const Pool& pool, std::optional<int> device) {
    Check(rt().SetCurrentPool(device.value_or(pool.device), pool.id));
  }

  Pool CreatePool(const std::string& kind, int device, uint64_t max_size,
                  const std::string& page_policy, const std::string& growth, bool acl_rounding,
                  bool exportable, bool reuse_follow_event_dependencies,
                  bool reuse_allow_opportunistic, bool reuse_allow_internal_dependencies,
                  const py::object& release_threshold, bool wait_before_growth,
                  const py::object& soft_reserved_limit) {
    PoolProps props;
    props.alloc_type = ParseName<AllocationType>(kind);
    props.device = device;
    props.max_size = max_size;
    props.page_policy = ParseName<PagePolicy>(page_policy);
    props.growth = ParseName<PoolGrowth>(growth);
    props.acl_rounding = acl_rounding;
    props.handle_types = exportable ? kHandleTypePosixFileDescriptor : 0;
    props.reuse_follow_event_dependencies = reuse_follow_event_dependencies;
    props.reuse_allow_opportunistic = reuse_allow_opportunistic;
    props.reuse_allow_internal_dependencies = reuse_allow_internal_dependencies;
    props.release_threshold = Threshold(release_threshold);
    props.wait_before_growth = wait_before_growth;
    props.soft_reserved_limit = Threshold(soft_reserved_limit);
    const PoolId id = Check(rt().CreatePool(props));
    TrackPool(*st_, id, device, props.alloc_type,
              absl::StrCat("pool ", st_->pool_names.size(), " (",
                           internal::EnumName(props.alloc_type), ", device ", device, ")"));
    st_->CountBytes();
    return MakePool(st_, id);
  }

  Allocation MallocAsync(uint64_t size, const Stream& s, const std::optional<Pool>& pool) {
    Runtime& r = rt();
    const PoolId pool_id = pool ? pool->id : Check(r.CurrentPool(s.device));
    const AllocInfo info =
        Check(pool ? r.MallocFromPoolAsync(size, pool->id, s.id) : r.MallocAsync(size, s.id));
    if ((st_->recording || st_->history) && size != 0) {
      const uint64_t now = r.HostNow();
      if (st_->recording) st_->recorder.Allocated(s.id, info.ptr, size, info.rule, now);
      const auto ptr = reinterpret_cast<uintptr_t>(info.ptr);
      st_->trace.push_back({true, ptr, size, s.id.value, s.device, now});
      st_->trace_live[ptr] = {size, s.device};
    }
    st_->CountBytes();
    return Allocation{reinterpret_cast<uintptr_t>(info.ptr), size, info.rule, s,
                      MakePool(st_, pool_id)};
  }

  void FreeAsync(const py::handle& allocation, const Stream& s) {
    void* ptr = Ptr(allocation);
    Runtime& r = rt();
    Check(r.FreeAsync(ptr, s.id));
    if ((st_->recording || st_->history) && ptr != nullptr) {
      const uint64_t now = r.HostNow();
      if (st_->recording) st_->recorder.Freed(s.id, ptr, now);
      // Frees of allocations made before recording began have no size here.
      if (auto it = st_->trace_live.find(reinterpret_cast<uintptr_t>(ptr));
          it != st_->trace_live.end()) {
        st_->trace.push_back(
            {false, it->first, it->second.first, s.id.value, it->second.second, now});
        st_->trace_live.erase(it);
      }
    }
    st_->CountBytes();
  }

  void RecordUse(const py::handle& allocation, const Stream& s) {
    Check(rt().RecordUse(Ptr(allocation), s.id));
  }

  uintptr_t HostRegister(const py::handle& ptr, uint64_t size, bool read_only) {
    void* dev = Check(rt().HostRegister(Ptr(ptr), size, read_only ? spHostRegisterReadOnly : 0));
    return reinterpret_cast<uintptr_t>(dev);
  }
  void HostUnregister(const py::handle& ptr) { Check(rt().HostUnregister(Ptr(ptr))); }
  uintptr_t HostDevicePointer(const py::handle& ptr) {
    return reinterpret_cast<uintptr_t>(Check(rt().HostDevicePointer(Ptr(ptr))));
  }

  void LaunchKernel(const Stream& s, uint64_t duration_ns, const py::iterable& accesses) {
    const std::vector<Access> a = Accesses(accesses);
    Check(rt().LaunchKernel(s.id, duration_ns, a));
  }

  void DeviceSynchronize(int device) {
    Synchronize(*st_, [device](Runtime& r) { return r.DeviceSynchronize(device); });
  }

  void HostAdvance(uint64_t ns) {
    Check(Unlocked(*st_, [ns](Runtime& r) { return r.HostAdvance(ns); }));
  }

  void RecordTimeline(bool on) {
    rt().RecordTimeline(on);
    if (on && !st_->recording && !st_->history) {
      st_->trace.clear();
      st_->trace_live.clear();
    }
    st_->recording = on;
    st_->CountBytes();
  }

  std::string TimelineJson() {
    Runtime& r = rt();
    replay::TimelineProcess p =
        st_->recorder.Finish("streampool runtime", r.Timeline(), r.HostNow());
    p.stream_labels = st_->stream_labels;
    return replay::FormatChromeTrace({p});
  }

 private:
  void TrackDevices() {
    for (int d = 0; d < st_->rt->config().device_count; ++d) {
      const PoolId pool = Check(st_->rt->DefaultPool(d));
      TrackPool(*st_, pool, d, AllocationType::kDevice,
                absl::StrCat("default pool (device ", d, ")"));
      const StreamId legacy = Check(st_->rt->LegacyStream(d));
      st_->stream_labels[legacy.value] = "legacy stream";
    }
  }

  StatePtr st_;
};

// ------------------------------------------------------------------ replay

// A trace that cannot be read raises what Python raises for a file it
// cannot open (FileNotFoundError, PermissionError, IsADirectoryError), with
// the file's name, rather than an Error code meant for handles.
[[noreturn]] void RaiseFileError(const std::string& path, const absl::Status& st) {
  int error = 0;
  if (absl::IsNotFound(st)) {
    error = ENOENT;
  } else if (absl::IsPermissionDenied(st)) {
    error = EACCES;
  } else if (absl::IsFailedPrecondition(st)) {
    error = EISDIR;
  }
  if (error == 0) Raise(st);
  errno = error;
  PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
  throw py::error_already_set();
}

// Text from the library as a Python str; bytes that are not UTF-8 (a file
// name, say) survive as surrogates, as os.fsdecode keeps them.
py::str Str(const std::string& text) {
  PyObject* s =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

// A JSON document of the library as the Python objects json.loads would make.
py::object ToPython(const nlohmann::ordered_json& j) {
  using Type = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case Type::boolean:
      return py::bool_(j.get<bool>());
    case Type::number_integer:
      return py::int_(j.get<int64_t>());
    case Type::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case Type::number_float:
      return py::float_(j.get<double>());
    case Type::string:
      return Str(j.get_ref<const std::string&>());
    case Type::array: {
      py::list out;
      for (const nlohmann::ordered_json& item : j) out.append(ToPython(item));
      return out;
    }
    case Type::object: {
      py::dict out;
      for (const auto& [key, value] : j.items()) out[Str(key)] = ToPython(value);
      return out;
    }
    case Type::null:
    case Type::binary:
    case Type::discarded:
      break;
  }
  return py::none();
}

// The sweep sp.replay's arguments describe, in the command-line tool's row
// order. Arguments come normalized from __init__.py.
std::vector<replay::ReplaySettings> Sweep(const std::string& reuse, bool all_policies,
                                          const std::vector<uint64_t>& thresholds,
                                          const std::vector<std::string>& growth_names,
                                          const std::string& pool, const std::string& backing,
                                          uint64_t capacity, bool check, bool recorded,
                                          const std::vector<std::string>& allocator_names,
                                          const std::string& torch_conf, uint64_t rmm_initial,
                                          uint64_t rmm_max, bool record_timeline,
                                          replay::ReplaySettings* base_out = nullptr) {
  std::vector<replay::AllocatorKind> allocators;
  for (const std::string& name : allocator_names) {
    absl::StatusOr<std::vector<replay::AllocatorKind>> kinds = replay::ParseAllocatorList(name);
    Check(kinds.status());
    for (replay::AllocatorKind k : *kinds) {
      if (std::find(allocators.begin(), allocators.end(), k) == allocators.end()) {
        allocators.push_back(k);
      }
    }
  }
  absl::StatusOr<replay::TorchOptions> torch = replay::ParseTorchConf(torch_conf);
  Check(torch.status());
  if (rmm_initial % replay::kRmmAlignment != 0 || rmm_max % replay::kRmmAlignment != 0 ||
      (rmm_max != 0 && rmm_initial > rmm_max)) {
    Raise(
        spErrorInvalidValue,
        "rmm_initial and rmm_max are multiples of 256, the initial size no more than the maximum");
  }
  replay::ReplaySettings base;
  Check(replay::ParseReuse(reuse, &base));
  base.pool_type = ParseName<AllocationType>(pool);
  base.backing = ParseName<Backing>(backing);
  base.device_capacity = capacity;
  base.check_stream_order = check;
  base.record_timeline = record_timeline;
  base.use_recorded = recorded;
  base.torch = *torch;
  base.rmm.initial_pool_size = rmm_initial;
  base.rmm.maximum_pool_size = rmm_max;
  std::vector<PoolGrowth> growths;
  for (const std::string& g : growth_names) growths.push_back(ParseName<PoolGrowth>(g));
  if (base_out != nullptr) *base_out = base;
  return replay::AllocatorRows(allocators,
                               replay::SweepSettings(base, thresholds, growths, all_policies));
}

// sp.replay's engine: the command-line tool's sweep, with the GIL released
// while traces replay, and its JSON document as Python objects. `rows`, when
// not empty, replays only those rows of the sweep (indices in its order): a
// distributed sweep sends each worker a trace and a row, and a row keeps the
// label it has in the whole sweep (a growth named because several are swept).
py::object ReplayTraces(const std::vector<std::string>& files, const std::string& reuse,
                        bool all_policies, const std::vector<uint64_t>& thresholds,
                        const std::vector<std::string>& growth_names, const std::string& pool,
                        const std::string& backing, uint64_t capacity, bool check,
                        const std::string& timeline_path, bool recorded, const std::string& report,
                        const std::vector<std::string>& allocator_names,
                        const std::string& torch_conf, uint64_t rmm_initial, uint64_t rmm_max,
                        const std::vector<size_t>& rows) {
  if (report != "runs" && report != "policy" && report != "torch_validation") {
    Raise(spErrorInvalidValue, absl::StrCat("report is 'runs', 'policy' or 'torch_validation', "
                                            "not '",
                                            report, "'"));
  }
  replay::ReplaySettings base;
  const std::vector<replay::ReplaySettings> sweep =
      Sweep(reuse, all_policies, thresholds, growth_names, pool, backing, capacity, check, recorded,
            allocator_names, torch_conf, rmm_initial, rmm_max,
            /*record_timeline=*/!timeline_path.empty() && report == "runs", &base);
  std::vector<replay::ReplaySettings> settings;
  for (size_t row : rows) {
    if (row >= sweep.size()) {
      Raise(spErrorInvalidValue,
            absl::StrCat("row ", row, " of a sweep of ", sweep.size(), " settings"));
    }
    settings.push_back(sweep[row]);
  }
  if (rows.empty()) settings = sweep;

  absl::Status failed;
  size_t unreadable = files.size();
  std::vector<replay::Trace> traces;
  std::vector<replay::TraceReport> reports;
  nlohmann::ordered_json policy_json;
  std::vector<replay::TorchValidation> validations;
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < files.size(); ++i) {
      absl::StatusOr<replay::Trace> t = replay::LoadTrace(files[i]);
      if (!t.ok()) {
        failed = t.status();
        unreadable = i;
        break;
      }
      traces.push_back(*std::move(t));
    }
    for (size_t i = 0; failed.ok() && report == "torch_validation" && i < traces.size(); ++i) {
      absl::StatusOr<replay::TorchValidation> v = replay::ValidateTorch(traces[i], base);
      if (!v.ok()) {
        failed = v.status();
      } else {
        validations.push_back(*std::move(v));
      }
    }
    if (failed.ok() && report == "policy") {
      absl::StatusOr<std::vector<replay::TracePolicyReport>> policy =
          replay::BuildPolicyReports(traces, settings, /*with_cuda_defaults=*/true);
      if (!policy.ok()) {
        failed = policy.status();
      } else {
        policy_json = replay::PolicyReportJson(*policy);
      }
    }
    for (size_t i = 0; failed.ok() && report == "runs" && i < traces.size(); ++i) {
      replay::TraceReport rep;
      rep.trace = &traces[i];
      for (const replay::ReplaySettings& s : settings) {
        absl::StatusOr<replay::ReplayResult> r = replay::Replay(traces[i], s);
        if (!r.ok()) {
          failed = r.status();
          break;
        }
        rep.runs.push_back(*std::move(r));
      }
      reports.push_back(std::move(rep));
    }
  }
  if (unreadable < files.size()) RaiseFileError(files[unreadable], failed);
  Check(failed);
  if (report == "policy") return ToPython(policy_json);
  if (report == "torch_validation") return ToPython(replay::ValidationJson(validations));
  if (!timeline_path.empty()) {
    std::vector<replay::TimelineProcess> processes;
    for (const replay::TraceReport& rep : reports) {
      for (const replay::ReplayResult& r : rep.runs) processes.push_back(*r.timeline);
    }
    std::ofstream out(timeline_path, std::ios::binary | std::ios::trunc);
    out << replay::FormatChromeTrace(processes);
    out.close();
    if (!out) Raise(spErrorInvalidValue, absl::StrCat("cannot write ", timeline_path));
  }
  return ToPython(replay::ReportJson(reports));
}

// --------------------------------------------------------------- decisions

// One setting of sp.decisions and its kin: sp.replay's sweep, which must
// have one row; opaque to Python.
struct DecisionSetting {
  replay::ReplaySettings settings;
};

DecisionSetting OneSetting(const std::string& reuse, uint64_t threshold, const std::string& growth,
                           const std::string& pool, const std::string& backing, uint64_t capacity,
                           bool check, bool recorded, const std::string& allocator,
                           const std::string& torch_conf, uint64_t rmm_initial, uint64_t rmm_max) {
  const std::vector<replay::ReplaySettings> sweep =
      Sweep(reuse, /*all_policies=*/false, {threshold}, {growth}, pool, backing, capacity, check,
            recorded, {allocator}, torch_conf, rmm_initial, rmm_max, /*record_timeline=*/false);
  if (sweep.size() != 1) {
    Raise(spErrorInvalidValue, "decisions are of one setting: one allocator, not a list or 'all'");
  }
  return DecisionSetting{sweep.front()};
}

replay::Trace LoadOrRaise(const std::string& file) {
  absl::StatusOr<replay::Trace> t;
  {
    py::gil_scoped_release release;
    t = replay::LoadTrace(file);
  }
  if (!t.ok()) RaiseFileError(file, t.status());
  return *std::move(t);
}

// A decision as streampool.Decision's fields, the trace's own numbers for
// streams and pools (None: the replay's own pool, or a model's).
py::tuple DecisionTuple(const replay::Trace& trace, const replay::ReplayDecision& d) {
  auto stream_number = [&](uint32_t s) {
    return s < trace.stream_ids.size() ? trace.stream_ids[s] : uint64_t{s};
  };
  const char* rule = d.failed ? "failed" : d.model ? "model" : ReuseRuleName(d.rule);
  py::object pool = py::none();
  if (!d.model && d.pool != replay::TraceOp::kNoPool && d.pool < trace.pools.size()) {
    pool = py::int_(trace.pools[d.pool].pool);
  }
  const bool placed = !d.failed && !d.model && d.chunk != 0;
  py::list waits;
  for (const replay::DecisionWait& w : d.waits) {
    waits.append(py::make_tuple(stream_number(w.stream), w.position));
  }
  return py::make_tuple(
      d.op, d.line, stream_number(d.stream), d.size, rule, pool,
      placed ? py::object(py::int_(d.chunk)) : py::object(py::none()),
      placed ? py::object(py::int_(d.offset)) : py::object(py::none()), py::tuple(waits), d.failed,
      d.model && !d.failed ? py::object(py::int_(d.address)) : py::object(py::none()));
}

// A replay of `trace` that keeps every decision, with the GIL released.
replay::ReplayResult ReplayDecisions(const replay::Trace& trace, const DecisionSetting& setting) {
  replay::ReplaySettings s = setting.settings;
  s.keep_decisions = true;
  s.measure_host_cost = false;
  absl::StatusOr<replay::ReplayResult> r;
  {
    py::gil_scoped_release release;
    r = replay::Replay(trace, s);
  }
  Check(r.status());
  return *std::move(r);
}

py::list DecisionsOf(const std::string& file, const DecisionSetting& setting) {
  const replay::Trace trace = LoadOrRaise(file);
  py::list out;
  for (const replay::ReplayDecision& d : ReplayDecisions(trace, setting).decisions) {
    out.append(DecisionTuple(trace, d));
  }
  return out;
}

size_t SaveDecisions(const std::string& file, const std::string& path,
                     const DecisionSetting& setting) {
  const replay::Trace trace = LoadOrRaise(file);
  const replay::ReplayResult r = ReplayDecisions(trace, setting);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << replay::FormatDecisions(trace, replay::DecisionSettingLabel(r.settings), r.decisions);
  out.close();
  if (!out) Raise(spErrorInvalidValue, absl::StrCat("cannot write ", path));
  return r.decisions.size();
}

py::dict DifferenceDict(const replay::Trace& trace, const replay::DecisionDifference& d) {
  py::dict out;
  out["op"] = d.op;
  out["line"] = d.line;
  out["a"] = d.a ? py::object(DecisionTuple(trace, *d.a)) : py::object(py::none());
  out["b"] = d.b ? py::object(DecisionTuple(trace, *d.b)) : py::object(py::none());
  return out;
}

py::dict CheckDecisionsFile(const std::string& file, const std::string& path,
                            const DecisionSetting& setting) {
  const replay::Trace trace = LoadOrRaise(file);
  absl::StatusOr<replay::DecisionFile> saved;
  absl::StatusOr<replay::DecisionCheck> check;
  {
    py::gil_scoped_release release;
    saved = replay::LoadDecisions(path, trace);
    if (saved.ok()) check = replay::CheckDecisions(trace, setting.settings, *saved);
  }
  if (!saved.ok()) RaiseFileError(path, saved.status());
  Check(check.status());
  py::dict out;
  out["saved"] = check->saved;
  out["agreed"] = check->agreed;
  out["saved_setting"] = Str(check->saved_setting);
  out["replayed_setting"] = Str(check->replayed_setting);
  out["difference"] = check->difference ? py::object(DifferenceDict(trace, *check->difference))
                                        : py::object(py::none());
  out["message"] = Str(replay::FormatCheck(trace, *check));
  return out;
}

py::dict DiffDecisions(const std::string& file, const DecisionSetting& a,
                       const DecisionSetting& b) {
  const replay::Trace trace = LoadOrRaise(file);
  absl::StatusOr<replay::SettingsDiff> diff;
  {
    py::gil_scoped_release release;
    diff = replay::DiffSettings(trace, a.settings, b.settings);
  }
  Check(diff.status());
  py::dict out;
  out["a_setting"] = Str(diff->a_setting);
  out["b_setting"] = Str(diff->b_setting);
  out["compared"] = diff->compared;
  out["differing"] = diff->differing;
  out["differing_bytes"] = diff->differing_bytes;
  out["same_rule_elsewhere"] = diff->same_rule_elsewhere;
  out["other_rule"] = diff->other_rule;
  out["failed_a_only"] = diff->failed_a_only;
  out["failed_b_only"] = diff->failed_b_only;
  py::list by_rule;
  for (const replay::RuleChange& c : diff->by_rule) {
    py::dict row;
    row["a_rule"] = c.a_rule;
    row["b_rule"] = c.b_rule;
    row["decisions"] = c.decisions;
    row["bytes"] = c.bytes;
    by_rule.append(row);
  }
  out["by_rule"] = by_rule;
  out["first"] =
      diff->first ? py::object(DifferenceDict(trace, *diff->first)) : py::object(py::none());
  out["message"] = Str(replay::FormatSettingsDiff(trace, *diff));
  return out;
}

// ----------------------------------------------------------------- helpers

template <typename T>
void AddContextManager(py::class_<T>& cls, void (*close)(T&)) {
  cls.def(
      "__enter__", [](T& self) -> T& { return self; }, py::return_value_policy::reference);
  cls.def("__exit__", [close](T& self, py::args) {
    close(self);
    return false;
  });
}

// Destroying twice (say, destroy() inside a with block) is not an error; the
// legacy stream's refusal is the runtime's.
void DestroyStream(Stream& s) {
  if (s.st->rt && !s.destroyed) Check(s.st->rt->DestroyStream(s.id));
  s.destroyed = true;
}
void DestroyEvent(Event& e) {
  if (e.st->rt && !e.destroyed) Check(e.st->rt->DestroyEvent(e.id));
  e.destroyed = true;
}

// A settable attribute as a property: a switch as a bool, bytes as an int
// or 'max'.
void BindPoolAttribute(py::class_<Pool>& cls, const internal::PoolAttrInfo& a) {
  const PoolAttr attr = a.attr;
  if (a.kind != internal::AttrKind::kU64) {
    cls.def_property(
        a.name, [attr](const Pool& p) { return p.Get(attr) != 0; },
        [attr](const Pool& p, bool on) { p.Set(attr, on ? 1 : 0); }, a.doc);
  } else {
    cls.def_property(
        a.name, [attr](const Pool& p) { return p.Get(attr); },
        [attr](const Pool& p, const py::object& v) {
          p.Set(attr, Threshold(v));
          p.st->CountBytes();
        },
        a.doc);
  }
}

void DestroyGraph(Graph& g) {
  if (g.st->rt && !g.destroyed) Check(g.st->rt->DestroyGraph(g.id));
  g.destroyed = true;
}
void DestroyGraphExec(GraphExec& x) {
  if (x.st->rt && !x.destroyed) Check(x.st->rt->DestroyGraphExec(x.id));
  x.destroyed = true;
}

Capture MakeCapture(const Stream& s, const std::string& mode) {
  return Capture{s, ParseName<CaptureMode>(mode), std::nullopt};
}

// The classes that name one another in their methods' signatures, declared
// before any method is, so that each signature names the others by their
// Python names.
struct Classes {
  py::class_<Stream> stream;
  py::class_<Event> event;
  py::class_<Capture> capture;
  py::class_<Graph> graph;
  py::class_<GraphNode> node;
  py::class_<GraphExec> exec;
};

void BindStreamsAndEvents(Classes& c) {
  py::class_<Stream>& stream = c.stream;
  py::class_<Event>& event = c.event;
  stream
      .def_property_readonly(
          "id", [](const Stream& s) { return s.id.value; },
          "The handle's number (the C API's spStream_t).")
      .def_readonly("device", &Stream::device, "The device the stream belongs to.")
      .def_readonly("non_blocking", &Stream::non_blocking,
                    "Made with non_blocking=True: it does not wait for the legacy stream.")
      .def_readonly("legacy", &Stream::legacy, "The device's legacy default stream.")
      .def(
          "synchronize",
          [](const Stream& s) {
            const StreamId id = s.id;
            Synchronize(*s.st, [id](Runtime& r) { return r.StreamSynchronize(id); });
          },
          "Waits for the stream's work, then makes what that proves complete reusable and "
          "applies the pools' release thresholds.")
      .def(
          "query", [](const Stream& s) { return Ready(s.st->Get().StreamQuery(s.id)); },
          "True when all of the stream's work has completed.")
      .def(
          "wait_event",
          [](const Stream& s, const Event& e, bool external) {
            Check(s.st->Get().StreamWaitEvent(
                s.id, e.id, external ? EventWaitFlag::kExternal : EventWaitFlag::kDefault));
          },
          py::arg("event"), py::kw_only(), py::arg("external") = false,
          "Later work on the stream waits for the event's latest record. external=True "
          "(cudaEventWaitExternal): in a capture, an event wait node instead of a join.")
      .def("capture", &MakeCapture, py::kw_only(), py::arg("mode") = "global",
           "A capture of the stream for a with block (cudaStreamBeginCapture on entry, "
           "cudaStreamEndCapture on exit): work enqueued on it inside becomes the nodes of "
           "the Capture's graph instead of running. mode 'global', 'thread_local' or "
           "'relaxed': which other calls the capture refuses.")
      .def_property_readonly(
          "capture_status",
          [](const Stream& s) {
            return internal::EnumName(Check(s.st->Get().CaptureStatusOf(s.id)));
          },
          "'none', 'active' or 'invalidated' (cudaStreamIsCapturing).")
      .def("destroy", &DestroyStream, "Destroys the stream; its enqueued work still completes.")
      .def("__eq__", [](const Stream& a, const Stream& b) { return a.id.value == b.id.value; })
      .def("__hash__", [](const Stream& s) { return py::hash(py::int_(s.id.value)); })
      .def("__repr__", [](const Stream& s) {
        return absl::StrCat("<streampool.Stream ", s.legacy ? "legacy" : absl::StrCat(s.id.value),
                            " device=", s.device, s.non_blocking ? " non_blocking" : "", ">");
      });
  AddContextManager(stream, &DestroyStream);

  event
      .def_property_readonly(
          "id", [](const Event& e) { return e.id.value; },
          "The handle's number (the C API's spEvent_t).")
      .def(
          "record",
          [](const Event& e, const Stream& s, bool external) {
            Check(e.st->Get().RecordEvent(
                e.id, s.id, external ? EventRecordFlag::kExternal : EventRecordFlag::kDefault));
          },
          py::arg("stream"), py::kw_only(), py::arg("external") = false,
          "Captures the work enqueued on the stream so far. external=True "
          "(cudaEventRecordExternal): in a capture, an event record node, which records the "
          "event at each launch.")
      .def(
          "synchronize",
          [](const Event& e) {
            const EventId id = e.id;
            Synchronize(*e.st, [id](Runtime& r) { return r.EventSynchronize(id); });
          },
          "Waits for the latest record; a synchronize action like Stream.synchronize.")
      .def(
          "query", [](const Event& e) { return Ready(e.st->Get().EventQuery(e.id)); },
          "True when the latest record completed (or the event was never recorded).")
      .def(
          "elapsed_ms",
          [](const Event& start, const Event& end) {
            return Check(start.st->Get().EventElapsedMs(start.id, end.id));
          },
          py::arg("end"), "Milliseconds from this event's record to end's.")
      .def("destroy", &DestroyEvent,
           "Destroys the event; a wait already enqueued on it still holds. Destroying twice "
           "is not an error.")
      .def("__repr__",
           [](const Event& e) { return absl::StrCat("<streampool.Event ", e.id.value, ">"); });
  AddContextManager(event, &DestroyEvent);
}

std::vector<GraphNodeId> Ids(const std::vector<GraphNode>& nodes) {
  std::vector<GraphNodeId> out;
  for (const GraphNode& n : nodes) out.push_back(n.id);
  return out;
}

py::list NodeList(const StatePtr& st, const std::vector<GraphNodeId>& ids) {
  py::list out;
  for (GraphNodeId id : ids) out.append(GraphNode{st, id});
  return out;
}

// A Python callable as a host node's function: it runs with the GIL taken,
// and what it raises is reported as unraisable (nothing can catch it there).
// The runtime may drop the function on any thread, with the GIL or not.
std::function<void()> HostFunction(const py::function& fn) {
  std::shared_ptr<py::object> held(new py::object(fn), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [held] {
    py::gil_scoped_acquire gil;
    try {
      (*held)();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("streampool graph host node");
    }
  };
}

// Graphs built by hand or captured, their nodes, executable graphs.
void BindGraphs(Classes& c) {
  // Any sequence of nodes of the graph.
  const py::arg_v deps_arg = py::arg("deps") = py::tuple();
  c.capture
      .def(
          "__enter__",
          [](Capture& self) -> Capture& {
            Check(self.stream.st->Get().BeginCapture(self.stream.id, self.mode));
            return self;
          },
          py::return_value_policy::reference)
      .def("__exit__",
           [](Capture& self, const py::object& type, py::args) {
             absl::StatusOr<GraphId> g = self.stream.st->Get().EndCapture(self.stream.id);
             if (g.ok()) self.graph = Graph{self.stream.st, *g};
             // An exception from the block wins over the capture's own error.
             if (!g.ok() && type.is_none()) Raise(g.status());
             return false;
           })
      .def_readonly("stream", &Capture::stream, "The stream captured.")
      .def_readonly("graph", &Capture::graph,
                    "The captured Graph once the with block has ended; None before.");

  c.graph
      .def_property_readonly(
          "id", [](const Graph& g) { return g.id.value; },
          "The handle's number (the C API's spGraph_t).")
      .def(
          "add_kernel",
          [](const Graph& g, uint64_t duration_ns, const py::iterable& accesses,
             const std::vector<GraphNode>& deps) {
            const std::vector<Access> a = Accesses(accesses);
            return GraphNode{g.st,
                             Check(g.st->Get().AddKernelNode(g.id, Ids(deps), duration_ns, a))};
          },
          py::arg("duration_ns") = 0, py::kw_only(), py::arg("accesses") = py::tuple(), deps_arg,
          "A kernel node of duration_ns touching accesses (as launch_kernel's) after the "
          "nodes deps.")
      .def(
          "add_memcpy",
          [](const Graph& g, const py::handle& dst, const py::handle& src, uint64_t nbytes,
             const std::vector<GraphNode>& deps) {
            return GraphNode{g.st, Check(g.st->Get().AddMemcpyNode(g.id, Ids(deps), Ptr(dst),
                                                                   Ptr(src), nbytes))};
          },
          py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::kw_only(), deps_arg,
          "A copy node (as memcpy_async's).")
      .def(
          "add_memset",
          [](const Graph& g, const py::handle& dst, int value, uint64_t nbytes,
             const std::vector<GraphNode>& deps) {
            return GraphNode{
                g.st, Check(g.st->Get().AddMemsetNode(g.id, Ids(deps), Ptr(dst), value, nbytes))};
          },
          py::arg("dst"), py::arg("value"), py::arg("nbytes"), py::kw_only(), deps_arg,
          "A fill node (as memset_async's).")
      .def(
          "add_host",
          [](const Graph& g, const py::function& fn, const std::vector<GraphNode>& deps) {
            return GraphNode{g.st,
                             Check(g.st->Get().AddHostNode(g.id, Ids(deps), HostFunction(fn)))};
          },
          py::arg("fn"), py::kw_only(), deps_arg,
          "A host node: fn() runs, with the GIL, once the host observes the node's turn come "
          "(the simulator) or on a worker thread (threads). It must not call the runtime; what "
          "it raises is reported as unraisable.")
      .def(
          "add_event_record",
          [](const Graph& g, const Event& e, const std::vector<GraphNode>& deps) {
            return GraphNode{g.st, Check(g.st->Get().AddEventRecordNode(g.id, Ids(deps), e.id))};
          },
          py::arg("event"), py::kw_only(), deps_arg, "A node that records event.")
      .def(
          "add_event_wait",
          [](const Graph& g, const Event& e, const std::vector<GraphNode>& deps) {
            return GraphNode{g.st, Check(g.st->Get().AddEventWaitNode(g.id, Ids(deps), e.id))};
          },
          py::arg("event"), py::kw_only(), deps_arg, "A node that waits for event's latest record.")
      .def(
          "add_empty",
          [](const Graph& g, const std::vector<GraphNode>& deps) {
            return GraphNode{g.st, Check(g.st->Get().AddEmptyNode(g.id, Ids(deps)))};
          },
          py::kw_only(), deps_arg, "A node that only orders others.")
      .def(
          "add_child",
          [](const Graph& g, const Graph& child, const std::vector<GraphNode>& deps) {
            return GraphNode{g.st, Check(g.st->Get().AddChildGraphNode(g.id, Ids(deps), child.id))};
          },
          py::arg("graph"), py::kw_only(), deps_arg,
          "A node running a copy of graph, taken now (one without memory nodes).")
      .def(
          "add_mem_alloc",
          [](const Graph& g, uint64_t nbytes, int device, const std::vector<GraphNode>& deps) {
            const GraphAllocNode a =
                Check(g.st->Get().AddMemAllocNode(g.id, Ids(deps), device, nbytes));
            return GraphNode{g.st, a.node, reinterpret_cast<uintptr_t>(a.dptr)};
          },
          py::arg("nbytes"), py::kw_only(), py::arg("device") = 0, deps_arg,
          "An allocation node of nbytes of the device's graph memory; its .dptr is the "
          "address, the same for the graph's life.")
      .def(
          "add_mem_free",
          [](const Graph& g, const py::handle& dptr, const std::vector<GraphNode>& deps) {
            return GraphNode{g.st, Check(g.st->Get().AddMemFreeNode(g.id, Ids(deps), Ptr(dptr)))};
          },
          py::arg("dptr"), py::kw_only(), deps_arg,
          "A node freeing dptr (an address or an allocation node): an allocation of this "
          "graph, after its node, or a live graph allocation made elsewhere.")
      .def(
          "add_dependencies",
          [](const Graph& g, const std::vector<std::pair<GraphNode, GraphNode>>& edges) {
            std::vector<GraphEdge> e;
            for (const auto& [from, to] : edges) e.push_back(GraphEdge{from.id, to.id});
            Check(g.st->Get().AddDependencies(g.id, e));
          },
          py::arg("edges"),
          "Adds each (from, to) edge, or none of them if one exists or makes a cycle.")
      .def(
          "nodes",
          [](const Graph& g) { return NodeList(g.st, Check(g.st->Get().GraphNodes(g.id))); },
          "The nodes in the order they were added.")
      .def(
          "root_nodes",
          [](const Graph& g) { return NodeList(g.st, Check(g.st->Get().GraphRootNodes(g.id))); },
          "The nodes that depend on none.")
      .def(
          "edges",
          [](const Graph& g) {
            py::list out;
            for (const GraphEdge& e : Check(g.st->Get().GraphEdges(g.id))) {
              out.append(py::make_tuple(GraphNode{g.st, e.from}, GraphNode{g.st, e.to}));
            }
            return out;
          },
          "Every edge as a (from, to) tuple of nodes.")
      .def(
          "clone",
          [](const Graph& g) {
            return Graph{g.st, Check(g.st->Get().CloneGraph(g.id))};
          },
          "A copy of the graph (one without memory nodes).")
      .def(
          "instantiate",
          [](const Graph& g, bool auto_free_on_launch) {
            const uint64_t flags = auto_free_on_launch ? kGraphInstantiateAutoFreeOnLaunch : 0;
            return GraphExec{g.st, Check(g.st->Get().Instantiate(g.id, flags))};
          },
          py::kw_only(), py::arg("auto_free_on_launch") = false,
          "An executable graph of the graph as it is now (cudaGraphInstantiate); a graph with "
          "memory nodes has one at a time. auto_free_on_launch: a launch first frees what the "
          "previous one allocated and did not free.")
      .def("destroy", &DestroyGraph,
           "Destroys the graph; its executable graphs and live allocations stay. Destroying "
           "twice is not an error.")
      .def("__eq__", [](const Graph& a, const Graph& b) { return a.id.value == b.id.value; })
      .def("__hash__", [](const Graph& g) { return py::hash(py::int_(g.id.value)); })
      .def("__repr__",
           [](const Graph& g) { return absl::StrCat("<streampool.Graph ", g.id.value, ">"); });
  AddContextManager(c.graph, &DestroyGraph);

  c.node
      .def_property_readonly(
          "id", [](const GraphNode& n) { return n.id.value; },
          "The handle's number (the C API's spGraphNode_t).")
      .def_property_readonly(
          "type",
          [](const GraphNode& n) { return internal::EnumName(Check(n.st->Get().NodeType(n.id))); },
          "'kernel', 'memcpy', 'memset', 'host', 'graph' (a child graph), 'empty', "
          "'wait_event', 'event_record', 'mem_alloc' or 'mem_free'.")
      .def_readonly("dptr", &GraphNode::dptr,
                    "An allocation node's address (from add_mem_alloc), else None.")
      .def(
          "dependencies",
          [](const GraphNode& n) {
            return NodeList(n.st, Check(n.st->Get().NodeDependencies(n.id)));
          },
          "The nodes this one depends on.")
      .def(
          "dependents",
          [](const GraphNode& n) {
            return NodeList(n.st, Check(n.st->Get().NodeDependents(n.id)));
          },
          "The nodes that depend on this one.")
      .def("__eq__",
           [](const GraphNode& a, const GraphNode& b) { return a.id.value == b.id.value; })
      .def("__hash__", [](const GraphNode& n) { return py::hash(py::int_(n.id.value)); })
      .def("__repr__", [](const GraphNode& n) {
        return absl::StrCat("<streampool.GraphNode ", n.id.value, ">");
      });

  c.exec
      .def_property_readonly(
          "id", [](const GraphExec& x) { return x.id.value; },
          "The handle's number (the C API's spGraphExec_t).")
      .def(
          "launch",
          [](const GraphExec& x, const Stream& s) { Check(x.st->Get().LaunchGraph(x.id, s.id)); },
          py::arg("stream"),
          "Runs the graph as one op of stream: after its earlier work and the previous "
          "launch, before its later work (cudaGraphLaunch).")
      .def(
          "upload",
          [](const GraphExec& x, const Stream& s) { Check(x.st->Get().UploadGraph(x.id, s.id)); },
          py::arg("stream"), "Accepted (cudaGraphUpload): nothing needs uploading here.")
      .def(
          "update",
          [](const GraphExec& x, const Graph& g) {
            Check(x.st->Get().UpdateGraphExec(x.id, g.id));
          },
          py::arg("graph"),
          "Takes graph's node parameters, whose topology and node kinds must be this one's "
          "(cudaGraphExecUpdate; else Error spErrorGraphExecUpdateFailure).")
      .def("destroy", &DestroyGraphExec,
           "Destroys the executable graph. Destroying twice is not an error.")
      .def("__repr__", [](const GraphExec& x) {
        return absl::StrCat("<streampool.GraphExec ", x.id.value, ">");
      });
  AddContextManager(c.exec, &DestroyGraphExec);
}

// Pools, their attributes and statistics, and the allocations they hand out.
void BindPools(py::module_& m) {
  py::class_<Pool> pool(m, "Pool", "A memory pool of a Runtime (cudaMemPool_t).");
  pool.def_property_readonly(
          "id", [](const Pool& p) { return p.id.value; },
          "The handle's number (the C API's spMemPool_t).")
      .def_readonly("device", &Pool::device, "The pool's device; -1 for a pinned host pool.")
      .def_property_readonly(
          "kind", [](const Pool& p) { return internal::EnumName(p.kind); },
          "What the pool allocates: 'device', 'pinned_host', 'huge_page' or 'dvpp'.")
      .def_property_readonly(
          "growth",
          [](const Pool& p) {
            return internal::EnumName(static_cast<PoolGrowth>(p.Get(PoolAttr::kGrowth)));
          },
          "'chunked' or 'expandable'.");
  for (const internal::PoolAttrInfo& a : internal::PoolAttrs()) {
    if (a.access == internal::AttrAccess::kReadWrite) BindPoolAttribute(pool, a);
  }
  pool.def_property_readonly(
          "reserved_current", [](const Pool& p) { return p.Get(PoolAttr::kReservedMemCurrent); },
          "Bytes the pool holds from its upstream (cudaMemPoolAttrReservedMemCurrent).")
      .def_property_readonly(
          "reserved_high", [](const Pool& p) { return p.Get(PoolAttr::kReservedMemHigh); },
          "The most bytes reserved since the pool was made or reset_high() "
          "(cudaMemPoolAttrReservedMemHigh).")
      .def_property_readonly(
          "used_current", [](const Pool& p) { return p.Get(PoolAttr::kUsedMemCurrent); },
          "Bytes of live allocations, by their block sizes (cudaMemPoolAttrUsedMemCurrent).")
      .def_property_readonly(
          "used_high", [](const Pool& p) { return p.Get(PoolAttr::kUsedMemHigh); },
          "The most bytes used since the pool was made or reset_high() "
          "(cudaMemPoolAttrUsedMemHigh).")
      .def(
          "reset_high",
          [](const Pool& p) {
            p.Set(PoolAttr::kReservedMemHigh, 0);
            p.Set(PoolAttr::kUsedMemHigh, 0);
          },
          "Resets both watermarks to the current values.")
      .def(
          "stats", [](const Pool& p) { return StatsDict(Check(p.st->Get().GetPoolStats(p.id))); },
          "The pool's statistics as a dict: spMemPoolStats' fields in snake_case "
          "(reserved_bytes, reuse_same_stream, waits_inserted, ...), and the same figures under "
          "torch.cuda.memory_stats()'s names where they mean the same; every key is listed in "
          "docs/python.md.")
      .def(
          "trim_to",
          [](const Pool& p, uint64_t keep) {
            Check(p.st->Get().TrimTo(p.id, keep));
            p.st->CountBytes();
          },
          py::arg("min_bytes_to_keep"), "Releases free memory while more than this stays reserved.")
      .def(
          "snapshot", [](const Pool& p) { return SnapshotDict(Check(p.st->Get().Snapshot(p.id))); },
          "Every segment (reservation or chunk) of the pool with its blocks at this moment, "
          "as dicts: address, size, requested, state ('live', 'pending', 'ready', 'cached'), "
          "stream, free_point, alloc_seq, unmapped_bytes; and the pool's stats.")
      .def(
          "check_invariants", [](const Pool& p) { Check(p.st->Get().CheckPoolInvariants(p.id)); },
          "The pool's O(n) self-check; raises Error naming what broke.")
      .def(
          "destroy",
          [](const Pool& p) {
            Check(p.st->Get().DestroyPool(p.id));
            p.st->pool_names.erase(p.id.value);
          },
          "Destroys a pool made by create_pool; live allocations stay valid.")
      .def("__eq__", [](const Pool& a, const Pool& b) { return a.id.value == b.id.value; })
      .def("__hash__", [](const Pool& p) { return py::hash(py::int_(p.id.value)); })
      .def("__repr__", [](const Pool& p) {
        return absl::StrCat("<streampool.Pool ", p.id.value, " ", internal::EnumName(p.kind),
                            " device=", p.device, ">");
      });

  py::class_<Allocation>(m, "Allocation",
                         "Memory from malloc_async: its address, size and the rule that served it.")
      .def_readonly("ptr", &Allocation::ptr, "The device address, an int.")
      .def_readonly("size", &Allocation::size, "The bytes asked for.")
      .def_property_readonly(
          "rule", [](const Allocation& a) { return internal::EnumName(a.rule); },
          "'same_stream', 'event_dependency', 'opportunistic', 'internal_dependency', "
          "'after_sync' or 'fresh'.")
      .def_readonly("stream", &Allocation::stream, "The stream it was allocated on.")
      .def_readonly("pool", &Allocation::pool, "The pool it came from.")
      .def("__int__", [](const Allocation& a) { return a.ptr; })
      .def("__index__", [](const Allocation& a) { return a.ptr; })
      .def("__repr__", [](const Allocation& a) {
        return absl::StrCat("<streampool.Allocation ptr=0x", absl::Hex(a.ptr), " size=", a.size,
                            " rule=", internal::EnumName(a.rule), ">");
      });
}

// The runtime: its life, its streams, events and pools, allocation.
void BindRuntimeObjects(py::class_<PyRuntime>& runtime) {
  runtime
      .def(py::init<int, uint64_t, const std::string&, const std::string&, uint64_t, uint64_t, bool,
                    bool, bool, const std::string&>(),
           py::kw_only(), py::arg("devices") = 1, py::arg("capacity") = uint64_t{1} << 30,
           py::arg("backing") = "host", py::arg("executor") = "simulator",
           py::arg("api_call_ns") = 0, py::arg("copy_bytes_per_us") = 1000000,
           py::arg("check_stream_order") = false, py::arg("timeline") = false,
           py::arg("oom_reclaim") = true, py::arg("leak_check") = "off",
           "devices of capacity bytes each; backing 'host' (real memory) or 'address_only' "
           "(addresses only, nothing touched); executor 'simulator' (virtual time), 'threads' "
           "or 'cuda'; api_call_ns of host time per call and copy_bytes_per_us of copy "
           "bandwidth (simulator); check_stream_order: the stream-order checker; timeline: "
           "record_timeline() from the start; oom_reclaim: an allocation that finds no memory "
           "first has the device's pools release their free memory; leak_check at close: "
           "'off', 'report' or 'fail'.")
      .def("close", &PyRuntime::Close,
           "Destroys the runtime and everything it owns; later calls raise Error.")
      .def_property_readonly("closed", &PyRuntime::closed, "True after close().")
      .def(
          "__enter__", [](PyRuntime& self) -> PyRuntime& { return self; },
          py::return_value_policy::reference)
      .def("__exit__",
           [](PyRuntime& self, py::args) {
             self.Close();
             return false;
           })
      .def_property_readonly(
          "devices", [](const PyRuntime& r) { return r.rt().config().device_count; },
          "How many devices the runtime has.")
      .def_property_readonly(
          "capacity", [](const PyRuntime& r) { return r.rt().config().device_capacity; },
          "Each device's memory in bytes.")
      .def_property_readonly(
          "executor",
          [](const PyRuntime& r) { return internal::EnumName(r.rt().config().executor); },
          "What runs the streams: 'simulator', 'threads' or 'cuda'.")
      .def("create_stream", &PyRuntime::CreateStream, py::kw_only(), py::arg("device") = 0,
           py::arg("non_blocking") = false,
           "A new stream of the device (cudaStreamCreateWithFlags); non_blocking: it does not "
           "wait for the legacy stream.")
      .def("legacy_stream", &PyRuntime::LegacyStream, py::kw_only(), py::arg("device") = 0,
           "The device's legacy default stream (stream 0).")
      .def("adopt_stream", &PyRuntime::AdoptStream, py::arg("native"), py::kw_only(),
           py::arg("device") = 0,
           "A stream over a native stream the caller made and keeps (a CUstream's value "
           "on executor='cuda', e.g. torch.cuda.Stream().cuda_stream; 0 is the legacy stream).")
      .def("native_stream", &PyRuntime::NativeStream, py::arg("stream"),
           "The native stream behind a stream (the CUstream's value on executor='cuda').")
      .def("create_event", &PyRuntime::CreateEvent, py::kw_only(),
           py::arg("disable_timing") = false, py::arg("interprocess") = false,
           "A new event (cudaEventCreateWithFlags).")
      .def("default_pool", &PyRuntime::DefaultPool, py::kw_only(), py::arg("device") = 0,
           "The device's default pool (cudaDeviceGetDefaultMemPool).")
      .def("current_pool", &PyRuntime::CurrentPool, py::kw_only(), py::arg("device") = 0,
           "The pool malloc_async takes from on the device (cudaDeviceGetMemPool).")
      .def("set_current_pool", &PyRuntime::SetCurrentPool, py::arg("pool"), py::kw_only(),
           py::arg("device") = py::none(),
           "Makes pool the device's current pool (the pool's own device when device is None).")
      .def("create_pool", &PyRuntime::CreatePool, py::kw_only(), py::arg("kind") = "device",
           py::arg("device") = 0, py::arg("max_size") = 0, py::arg("page_policy") = "huge_first",
           py::arg("growth") = "default", py::arg("acl_rounding") = false,
           py::arg("exportable") = false, py::arg("reuse_follow_event_dependencies") = true,
           py::arg("reuse_allow_opportunistic") = true,
           py::arg("reuse_allow_internal_dependencies") = true,
           py::arg("release_threshold") = py::int_(0), py::arg("wait_before_growth") = true,
           py::arg("soft_reserved_limit") = py::str("max"),
           "A new pool (cudaMemPoolCreate): kind 'device', 'pinned_host', 'huge_page' or "
           "'dvpp'; max_size bytes (0: the device bounds it); page_policy (huge pages); "
           "growth 'default', 'chunked' or 'expandable'; acl_rounding: AscendCL's size "
           "rounding; exportable: for IPC; the three reuse rules, release_threshold (bytes "
           "or 'max'), wait_before_growth (a chunked pool starts without it) and "
           "soft_reserved_limit (bytes or 'max') as the attributes of the same names "
           "(docs/names.md).")
      .def("malloc_async", &PyRuntime::MallocAsync, py::arg("size"), py::arg("stream"),
           py::kw_only(), py::arg("pool") = py::none(),
           "size bytes in stream order; raises OutOfMemoryError when no memory is found.")
      .def("free_async", &PyRuntime::FreeAsync, py::arg("allocation"), py::arg("stream"),
           "Frees an Allocation (or address) in stream order of stream.")
      .def("host_register", &PyRuntime::HostRegister, py::arg("ptr"), py::arg("size"),
           py::kw_only(), py::arg("read_only") = false,
           "Makes host memory at address ptr (a numpy array's ctypes.data, ...) "
           "device-accessible; returns its device address (the same address). The memory "
           "must outlive the registration.")
      .def("host_unregister", &PyRuntime::HostUnregister, py::arg("ptr"),
           "Ends the registration that starts at ptr.")
      .def("host_device_pointer", &PyRuntime::HostDevicePointer, py::arg("ptr"),
           "The device address of registered host memory.")
      .def("record_use", &PyRuntime::RecordUse, py::arg("allocation"), py::arg("stream"),
           "Declares that stream uses the allocation too (PyTorch's record_stream): its "
           "free_async is then also ordered after stream's work up to the free, and its bytes "
           "are reused by no stream before both are complete.")
      .def(
          "malloc",
          [](PyRuntime& r, uint64_t size, int device) {
            return reinterpret_cast<uintptr_t>(Check(r.rt().Malloc(size, device)));
          },
          py::arg("size"), py::kw_only(), py::arg("device") = 0,
          "size bytes of device memory outside any pool (cudaMalloc); returns the address.")
      .def(
          "free", [](PyRuntime& r, const py::handle& ptr) { Check(r.rt().Free(Ptr(ptr))); },
          py::arg("ptr"), "Frees memory from malloc (cudaFree); it synchronizes the device.")
      .def(
          "malloc_host",
          [](PyRuntime& r, uint64_t size) {
            return reinterpret_cast<uintptr_t>(Check(r.rt().MallocHost(size)));
          },
          py::arg("size"), "size bytes of pinned host memory (cudaMallocHost); the address.")
      .def(
          "free_host",
          [](PyRuntime& r, const py::handle& ptr) { Check(r.rt().FreeHost(Ptr(ptr))); },
          py::arg("ptr"), "Frees memory from malloc_host (cudaFreeHost).");
}

// Work on streams, synchronization, host time, pointers and peers.
void BindRuntimeWork(py::class_<PyRuntime>& runtime) {
  runtime
      .def("launch_kernel", &PyRuntime::LaunchKernel, py::arg("stream"), py::kw_only(),
           py::arg("duration_ns") = 0, py::arg("accesses") = py::tuple(),
           "Enqueues a kernel of duration_ns on stream that touches accesses: Allocations "
           "(all of each, written) or (ptr, size, write) tuples, which the checker checks.")
      .def(
          "memcpy_async",
          [](PyRuntime& r, const py::handle& dst, const py::handle& src, uint64_t nbytes,
             const Stream& s) { Check(r.rt().MemcpyAsync(Ptr(dst), Ptr(src), nbytes, s.id)); },
          py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("stream"),
          "Copies nbytes from src to dst in stream order (cudaMemcpyAsync); it lasts what "
          "copy_bytes_per_us says.")
      .def(
          "memset_async",
          [](PyRuntime& r, const py::handle& dst, int value, uint64_t nbytes, const Stream& s) {
            Check(r.rt().MemsetAsync(Ptr(dst), value, nbytes, s.id));
          },
          py::arg("dst"), py::arg("value"), py::arg("nbytes"), py::arg("stream"),
          "Sets nbytes at dst to the byte value in stream order (cudaMemsetAsync).")
      .def("device_synchronize", &PyRuntime::DeviceSynchronize, py::kw_only(),
           py::arg("device") = 0,
           "Waits for all of the device's streams, then makes what that proves complete "
           "reusable and applies the pools' release thresholds (cudaDeviceSynchronize).")
      .def("host_advance", &PyRuntime::HostAdvance, py::arg("ns"),
           "Lets ns of host time pass (the host doing other work); virtual with the "
           "simulator, a sleep otherwise.")
      .def_property_readonly(
          "host_now", [](const PyRuntime& r) { return r.rt().HostNow(); },
          "Host time in ns (virtual with the simulator).")
      .def(
          "mem_get_info",
          [](const PyRuntime& r, int device) {
            const DeviceMemInfo info = Check(r.rt().MemGetInfo(device));
            return std::make_pair(info.free, info.total);
          },
          py::kw_only(), py::arg("device") = 0, "(free, total) bytes of the device.")
      .def(
          "pointer_attributes",
          [](const PyRuntime& r, const py::handle& ptr) {
            const PointerAttributes a = Check(r.rt().GetPointerAttributes(Ptr(ptr)));
            py::dict d;
            d["device"] = a.device;
            d["pool"] =
                a.pool.value == 0 ? py::object(py::none()) : py::cast(MakePool(r.state(), a.pool));
            d["base"] = reinterpret_cast<uintptr_t>(a.base);
            d["size"] = a.size;
            return d;
          },
          py::arg("ptr"),
          "What the runtime knows of an address, as a dict: device (-1: host), pool (a Pool, "
          "or None outside pools), base and size of the allocation holding it.")
      .def(
          "set_peer_access",
          [](PyRuntime& r, int device, int peer, bool on) {
            Check(r.rt().SetPeerAccessible(device, peer, on));
          },
          py::arg("device"), py::arg("peer"), py::arg("accessible") = true,
          "Lets device's pools be read and written from peer, or stops it.")
      .def(
          "can_access_peer",
          [](const PyRuntime& r, int device, int peer) {
            return Check(r.rt().CanAccessPeer(device, peer));
          },
          py::arg("device"), py::arg("peer"),
          "Whether peer can be given access to device's memory (cudaDeviceCanAccessPeer).");
}

// Graphs and each device's graph memory.
void BindRuntimeGraphs(py::class_<PyRuntime>& runtime) {
  runtime
      .def(
          "create_graph",
          [](PyRuntime& r) {
            return Graph{r.state(), Check(r.rt().CreateGraph())};
          },
          "A new, empty graph to build by hand (cudaGraphCreate).")
      .def(
          "capture",
          [](PyRuntime& r, const Stream& s, const std::string& mode) {
            r.rt();  // a closed runtime refuses
            return MakeCapture(s, mode);
          },
          py::arg("stream"), py::kw_only(), py::arg("mode") = "global",
          "stream.capture(mode=mode): a capture of stream for a with block.")
      .def(
          "graph_memory",
          [](PyRuntime& r, int device) {
            const GraphMemStats m = Check(r.rt().GraphMemoryStats(device));
            py::dict d;
            d["used_current"] = m.used_current;
            d["used_high"] = m.used_high;
            d["reserved_current"] = m.reserved_current;
            d["reserved_high"] = m.reserved_high;
            return d;
          },
          py::kw_only(), py::arg("device") = 0,
          "The device's graph memory as a dict (cudaDeviceGetGraphMemAttribute): "
          "used_current, used_high (memory backing graph allocations), reserved_current, "
          "reserved_high (all the device holds for graphs).")
      .def(
          "trim_graph_memory",
          [](PyRuntime& r, int device) { Check(r.rt().TrimGraphMemory(device)); }, py::kw_only(),
          py::arg("device") = 0,
          "Gives back graph memory that no allocation holds and no launch uses "
          "(cudaDeviceGraphMemTrim).")
      .def(
          "reset_graph_memory_high",
          [](PyRuntime& r, int device, const std::string& which) {
            if (which != "used" && which != "reserved") {
              Raise(spErrorInvalidValue,
                    absl::StrCat("which is 'used' or 'reserved', not '", which, "'"));
            }
            Check(r.rt().ResetGraphMemoryHigh(
                device, which == "used" ? GraphMemHigh::kUsed : GraphMemHigh::kReserved));
          },
          py::kw_only(), py::arg("device") = 0, py::arg("which") = "used",
          "Resets used_high or reserved_high to its current value.");
}

// What a runtime shows of itself: the checker, out-of-memory handling,
// recordings, live allocations and pools, timelines.
void BindRuntimeObservation(py::class_<PyRuntime>& runtime) {
  runtime
      .def(
          "enable_checker", [](PyRuntime& r, bool on) { r.rt().EnableChecker(on); },
          py::arg("on") = true, "Turns the stream-order checker on (collecting reports) or off.")
      .def(
          "checker_reports",
          [](const PyRuntime& r) {
            py::list out;
            for (const CheckReport& c : r.rt().CheckReports()) {
              py::dict d;
              d["kind"] = internal::EnumName(c.kind);
              d["stream"] = c.stream.value;
              d["op_position"] = c.op_position;
              d["ptr"] = reinterpret_cast<uintptr_t>(c.ptr);
              d["size"] = c.size;
              d["other_stream"] = c.other_stream.value;
              d["other_position"] = c.other_position;
              d["message"] = c.message;
              out.append(d);
            }
            return out;
          },
          "The checker's findings, oldest first, as dicts: kind, stream and op_position of "
          "the op that broke stream order, ptr and size it touched, other_stream and "
          "other_position of the op it raced with, and message.")
      .def(
          "clear_checker_reports", [](PyRuntime& r) { r.rt().ClearCheckReports(); },
          "Forgets the checker's findings so far.")
      .def(
          "set_oom_handler",
          [](PyRuntime& r, const py::object& fn) {
            if (fn.is_none()) {
              r.rt().SetOomHandler(nullptr);
              return;
            }
            if (!PyCallable_Check(fn.ptr())) {
              Raise(spErrorInvalidValue, "an out-of-memory handler is a callable or None");
            }
            // The runtime may drop the handler on any thread: the reference
            // goes with the GIL held.
            std::shared_ptr<py::object> held(new py::object(fn), [](py::object* o) {
              py::gil_scoped_acquire gil;
              delete o;
            });
            // Weak: the runtime holds the handler, and the state holds the
            // runtime.
            std::weak_ptr<State> weak = r.state();
            r.rt().SetOomHandler([held, weak](PoolId pool, uint64_t size) {
              py::gil_scoped_acquire gil;
              const StatePtr st = weak.lock();
              if (st == nullptr) return false;
              try {
                return py::bool_((*held)(MakePool(st, pool), size)).cast<bool>();
              } catch (py::error_already_set& e) {
                // Raised inside an allocation: reported, and the allocation
                // fails as it would have without the handler.
                e.discard_as_unraisable("streampool out-of-memory handler");
                return false;
              }
            });
          },
          py::arg("handler"),
          "Sets the out-of-memory handler: handler(pool, size) is called when an allocation "
          "still finds no memory after the runtime's reclaim; it may free, trim or "
          "synchronize, and a true return asks for one more try. None removes it.")
      .def(
          "start_recording",
          [](PyRuntime& r, const py::object& path) {
            const std::string file = py::str(py::module_::import("os").attr("fspath")(path));
            Check(r.rt().StartRecording(file));
            const StatePtr& st = r.state();
            if (!st->recording && !st->history) {
              st->trace.clear();
              st->trace_live.clear();
            }
            st->history = true;
          },
          py::arg("path"),
          "Writes the runtime's history from now on to path as a streampool trace v1, which "
          "replay() replays (at the recorded settings, every decision as it was taken).")
      .def(
          "stop_recording",
          [](PyRuntime& r) {
            Check(r.rt().StopRecording());
            r.state()->history = false;
          },
          "Completes the recording's file (closing the runtime does too).")
      .def(
          "live_allocations",
          [](const PyRuntime& r) {
            py::list out;
            for (const LiveAllocation& a : Check(r.rt().LiveAllocations())) {
              py::dict d;
              d["ptr"] = reinterpret_cast<uintptr_t>(a.ptr);
              d["size"] = a.size;
              d["block_size"] = a.block_size;
              d["stream"] = a.stream.value;
              d["pool"] = a.pool.value;
              d["device"] = a.device;
              d["seq"] = a.seq;
              out.append(d);
            }
            return out;
          },
          "Every allocation not freed, as dicts (ptr, size, block_size, stream, pool, device, "
          "seq): the pools' by pool and address, then synchronous ones (pool and stream 0).")
      .def(
          "pools",
          [](PyRuntime& r) {
            const StatePtr& st = r.state();
            std::vector<uint64_t> ids;
            for (int d = 0; d < r.rt().config().device_count; ++d) {
              ids.push_back(Check(r.rt().DefaultPool(d)).value);
              ids.push_back(Check(r.rt().CurrentPool(d)).value);
            }
            for (const auto& [id, info] : st->pool_info) ids.push_back(id);
            // Pools made behind the binding's back (a face's allocators on
            // acl_runtime()) show up through their live memory.
            for (const LiveAllocation& a : Check(r.rt().LiveAllocations())) {
              if (a.pool.value != 0) ids.push_back(a.pool.value);
            }
            std::sort(ids.begin(), ids.end());
            ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
            py::list out;
            for (uint64_t id : ids) {
              // Destroyed pools are gone from the list.
              if (r.rt().GetPoolStats(PoolId{id}).ok()) out.append(MakePool(st, PoolId{id}));
            }
            return out;
          },
          "The runtime's live pools this binding knows: each device's default and current "
          "pool, every pool made or imported through it, and every pool holding a live "
          "allocation.")
      .def(
          "_trace_events",
          [](const PyRuntime& r) {
            py::list out;
            for (const State::TraceEvent& e : r.state()->trace) {
              py::dict d;
              d["alloc"] = e.alloc;
              d["ptr"] = e.ptr;
              d["size"] = e.size;
              d["stream"] = e.stream;
              d["device"] = e.device;
              d["host_ns"] = e.host_ns;
              out.append(d);
            }
            return out;
          },
          "Allocations and frees made while the timeline or a recording was on "
          "(memory_snapshot's device_traces).")
      .def("record_timeline", &PyRuntime::RecordTimeline, py::arg("on") = true,
           "Records every op's schedule, allocation lifetimes and pool bytes from now on.")
      .def(
          "timeline",
          [](const PyRuntime& r) {
            py::list out;
            for (const TimelineEntry& e : r.rt().Timeline()) {
              py::dict d;
              d["stream"] = e.stream.value;
              d["stream_index"] = e.stream_index;
              d["device"] = e.device;
              d["position"] = e.position;
              d["kind"] = internal::EnumName(e.kind);
              d["enqueued_ns"] = e.enqueued_ns;
              d["start_ns"] = e.start_ns;
              d["end_ns"] = e.end_ns;
              out.append(d);
            }
            return out;
          },
          "The recorded ops in enqueue order, as dicts: stream, stream_index, device, "
          "position (on its stream), kind ('kernel', 'copy', 'record', 'wait', ...), and "
          "enqueued_ns, start_ns and end_ns in virtual time.")
      .def("timeline_json", &PyRuntime::TimelineJson,
           "The recorded timeline as Chrome trace-event JSON text.");
}

// Replays of traces and the decisions they make.
void BindReplay(py::module_& m) {
  m.def("replay", &ReplayTraces, py::arg("files"), py::kw_only(), py::arg("reuse"),
        py::arg("all_policies"), py::arg("thresholds"), py::arg("growths"), py::arg("pool"),
        py::arg("backing"), py::arg("capacity"), py::arg("check"), py::arg("timeline_path"),
        py::arg("recorded") = false, py::arg("report") = "runs",
        py::arg("allocators") = std::vector<std::string>{"streampool"}, py::arg("torch_conf") = "",
        py::arg("rmm_initial") = 0, py::arg("rmm_max") = 0,
        py::arg("rows") = std::vector<size_t>{});
  // Decisions as data: streampool.decisions() and its kin wrap these.
  py::class_<DecisionSetting>(m, "_DecisionSetting", "One replay setting (internal).");
  m.def("_decision_setting", &OneSetting, py::kw_only(), py::arg("reuse"), py::arg("threshold"),
        py::arg("growth"), py::arg("pool"), py::arg("backing"), py::arg("capacity"),
        py::arg("check"), py::arg("recorded"), py::arg("allocator"), py::arg("torch_conf"),
        py::arg("rmm_initial"), py::arg("rmm_max"));
  m.def("_decisions", &DecisionsOf, py::arg("file"), py::arg("setting"));
  m.def("_save_decisions", &SaveDecisions, py::arg("file"), py::arg("path"), py::arg("setting"));
  m.def("_check_decisions", &CheckDecisionsFile, py::arg("file"), py::arg("path"),
        py::arg("setting"));
  m.def("_diff_decisions", &DiffDecisions, py::arg("file"), py::arg("a"), py::arg("b"));
  m.def(
      "_sweep_size",
      [](const std::string& reuse, bool all_policies, const std::vector<uint64_t>& thresholds,
         const std::vector<std::string>& growths, const std::string& pool,
         const std::string& backing, uint64_t capacity, bool check, bool recorded,
         const std::vector<std::string>& allocators, const std::string& torch_conf,
         uint64_t rmm_initial, uint64_t rmm_max) {
        return Sweep(reuse, all_policies, thresholds, growths, pool, backing, capacity, check,
                     recorded, allocators, torch_conf, rmm_initial, rmm_max,
                     /*record_timeline=*/false)
            .size();
      },
      py::kw_only(), py::arg("reuse"), py::arg("all_policies"), py::arg("thresholds"),
      py::arg("growths"), py::arg("pool"), py::arg("backing"), py::arg("capacity"),
      py::arg("check"), py::arg("recorded"), py::arg("allocators"), py::arg("torch_conf"),
      py::arg("rmm_initial"), py::arg("rmm_max"),
      "How many settings replay() with these arguments runs per trace.");
  py::list reuse_switches;
  for (const replay::ReuseSwitch& r : replay::ReuseSwitches()) reuse_switches.append(r.name);
  m.attr("REUSE_RULES") = py::tuple(reuse_switches);
}

}  // namespace

void Bind(py::module_& m) {
  m.doc() = "The compiled half of streampool; import streampool instead.";
  py::module_ errors = py::module_::import("streampool._errors");
  g_error = py::object(errors.attr("Error")).release().ptr();
  g_out_of_memory = py::object(errors.attr("OutOfMemoryError")).release().ptr();

  Classes classes{
      py::class_<Stream>(m, "Stream", "A stream of a Runtime (cudaStream_t)."),
      py::class_<Event>(m, "Event", "An event of a Runtime (cudaEvent_t)."),
      py::class_<Capture>(m, "Capture",
                          "A stream's capture into a graph, for a with block (Stream.capture)."),
      py::class_<Graph>(m, "Graph", "A graph of a Runtime (cudaGraph_t)."),
      py::class_<GraphNode>(m, "GraphNode", "A node of a Graph (cudaGraphNode_t)."),
      py::class_<GraphExec>(m, "GraphExec", "An executable graph (cudaGraphExec_t)."),
  };
  BindStreamsAndEvents(classes);
  BindGraphs(classes);
  BindPools(m);
  py::class_<PyRuntime> runtime(m, "Runtime",
                                "Simulated devices with their streams, events and pools.");
  BindRuntimeObjects(runtime);
  BindRuntimeWork(runtime);
  BindRuntimeGraphs(runtime);
  BindRuntimeObservation(runtime);
  m.def(
      "_acl_runtime", [] { return PyRuntime(Check(AclFaceRuntime())); },
      "A Runtime over the AscendCL face's implicit runtime (streampool.acl_runtime).");
  BindPyAcl(m);
  BindReplay(m);
}

}  // namespace streampool::python

PYBIND11_MODULE(_core, m) { streampool::python::Bind(m); }
