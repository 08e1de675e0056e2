#include "src/torch/allocator_state.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"

namespace streampool::internal::torch {
namespace {

// CUDA's special stream handles (driver_types.h): cudaStreamLegacy names the
// legacy default stream, as NULL does; cudaStreamPerThread names a different
// stream on each host thread, which one adopted stream cannot stand for.
constexpr uintptr_t kCudaStreamLegacy = 0x1;
constexpr uintptr_t kCudaStreamPerThread = 0x2;

// Devices probed for their pools: the C API has no device count, so the
// runtime's devices are those whose default pool exists. CUDA enumerates far
// fewer devices than this.
constexpr int kMaxDevices = 1024;

std::string Describe(absl::string_view call, spError_t e) {
  return absl::StrCat(call, " failed: ", spGetErrorName(e), " (", spGetErrorString(e), ")");
}

// This thread's adoptions, looked up before the shared map: a thread
// allocates on a handful of streams (the current one and a side stream or
// two), so a few entries, replaced in turn, hold them all. Entries never go
// stale (allocator_state.h), so nothing invalidates them; they name their
// runtime, as a test makes several states one after another (a runtime's
// handle is never reused).
struct StreamMemo {
  static constexpr int kEntries = 4;
  struct Entry {
    spRuntime_t rt;
    int device;
    uintptr_t native;
    spStream_t stream;
  };

  spStream_t Find(spRuntime_t rt, int device, uintptr_t native) const {
    for (int i = 0; i < size; ++i) {
      const Entry& e = entries[i];
      if (e.rt == rt && e.device == device && e.native == native) return e.stream;
    }
    return nullptr;
  }
  void Insert(spRuntime_t rt, int device, uintptr_t native, spStream_t stream) {
    if (size < kEntries) {
      entries[size++] = {rt, device, native, stream};
      return;
    }
    entries[next] = {rt, device, native, stream};
    next = (next + 1) % kEntries;
  }

  Entry entries[kEntries];
  int size = 0;
  int next = 0;
};

thread_local StreamMemo t_memo;

// The pool `device` allocates from, with the settings applied: the default
// pool, or one made with the settings' properties and made current.
spError_t ApplySettings(spRuntime_t rt, int device, const TorchSettings& settings,
                        std::string* error) {
  spMemPool_t pool = nullptr;
  if (settings.NeedsOwnPool()) {
    spMemPoolProps props = {};
    props.allocType = spMemAllocationTypeDevice;
    props.device = device;
    props.maxSize = static_cast<size_t>(settings.max_size.value_or(0));
    props.growth = settings.growth.value_or(spPoolGrowthDefault);
    if (spError_t e = spMemPoolCreate(&pool, rt, &props); e != spSuccess) {
      *error = Describe(absl::StrCat("spMemPoolCreate (device ", device, ")"), e);
      return e;
    }
    if (spError_t e = spDeviceSetMemPool(rt, device, pool); e != spSuccess) {
      *error = Describe(absl::StrCat("spDeviceSetMemPool (device ", device, ")"), e);
      return e;
    }
  } else if (spError_t e = spDeviceGetDefaultMemPool(&pool, rt, device); e != spSuccess) {
    *error = Describe(absl::StrCat("spDeviceGetDefaultMemPool (device ", device, ")"), e);
    return e;
  }
  uint64_t threshold = settings.release_threshold.value_or(kDefaultReleaseThreshold);
  if (spError_t e = spMemPoolSetAttribute(pool, spMemPoolAttrReleaseThreshold, &threshold);
      e != spSuccess) {
    *error = Describe("spMemPoolSetAttribute (release_threshold)", e);
    return e;
  }
  const struct {
    const std::optional<bool>& value;
    spMemPoolAttr attr;
    const char* name;
  } switches[] = {
      {settings.follow_event_dependencies, spMemPoolReuseFollowEventDependencies,
       "follow_event_dependencies"},
      {settings.opportunistic, spMemPoolReuseAllowOpportunistic, "opportunistic"},
      {settings.internal_dependencies, spMemPoolReuseAllowInternalDependencies,
       "internal_dependencies"},
  };
  for (const auto& s : switches) {
    if (!s.value) continue;
    int on = *s.value ? 1 : 0;
    if (spError_t e = spMemPoolSetAttribute(pool, s.attr, &on); e != spSuccess) {
      *error = Describe(absl::StrCat("spMemPoolSetAttribute (", s.name, ")"), e);
      return e;
    }
  }
  return spSuccess;
}

}  // namespace

AllocatorState& AllocatorState::Instance() {
  static AllocatorState* const state = [] {
    AllocatorOptions options;
    spRuntimeConfigInit(&options.runtime);
    options.runtime.executor = spExecutorCuda;
    options.runtime.deviceCount = 0;     // every visible device
    options.runtime.deviceCapacity = 0;  // each device's memory
    options.env = ProcessEnv();
    options.watch_exit = true;
    return new AllocatorState(std::move(options));
  }();
  return *state;
}

AllocatorState::~AllocatorState() {
  if (spRuntime_t rt = runtime()) spRuntimeDestroy(rt);
}

void AllocatorState::MarkExiting() { Instance().exiting_.store(true, std::memory_order_relaxed); }

spError_t AllocatorState::Configure(const char* settings, std::string* error) {
  TorchSettings parsed;
  if (settings != nullptr) {
    if (spError_t e = ParseSettings(settings, &parsed, error); e != spSuccess) return e;
  }
  absl::MutexLock lock(&mu_);
  if (runtime_.load(std::memory_order_relaxed) != nullptr) {
    *error =
        "the runtime exists already (made at the first allocation): settings apply only before "
        "it is made";
    return spErrorNotSupported;
  }
  if (settings != nullptr) {
    configured_ = std::move(parsed);
  } else {
    configured_.reset();
  }
  creation_error_ = spSuccess;
  creation_message_.clear();
  return spSuccess;
}

spRuntime_t AllocatorState::GetOrCreateRuntime(spError_t* code, std::string* error) {
  if (spRuntime_t rt = runtime()) return rt;
  absl::MutexLock lock(&mu_);
  if (spRuntime_t rt = runtime_.load(std::memory_order_relaxed)) return rt;
  if (creation_error_ == spSuccess) {
    creation_error_ = CreateRuntimeLocked(&creation_message_);
    if (creation_error_ != spSuccess) {
      // Said once per failure: every allocation fails from now on, and PyTorch
      // would otherwise report only the allocation that failed.
      std::fprintf(stderr, "streampool-torch: no runtime, allocations fail: %s\n",
                   creation_message_.c_str());
    }
  }
  if (creation_error_ != spSuccess) {
    *code = creation_error_;
    *error = creation_message_;
    return nullptr;
  }
  *code = spSuccess;
  return runtime_.load(std::memory_order_relaxed);
}

spError_t AllocatorState::CreateRuntimeLocked(std::string* error) {
  TorchSettings settings;
  if (configured_) {
    settings = *configured_;
  } else {
    std::vector<std::string> problems;
    settings = SettingsFromEnv(options_.env, &problems);
    for (const std::string& p : problems) std::fprintf(stderr, "streampool-torch: %s\n", p.c_str());
  }
  spRuntime_t rt = nullptr;
  if (spError_t e = spRuntimeCreate(&rt, &options_.runtime); e != spSuccess) {
    *error =
        Describe(options_.runtime.executor == spExecutorCuda ? "spRuntimeCreate (spExecutorCuda)"
                                                             : "spRuntimeCreate",
                 e);
    return e;
  }
  for (int device = 0; device < kMaxDevices; ++device) {
    spMemPool_t pool = nullptr;
    const spError_t probe = spDeviceGetDefaultMemPool(&pool, rt, device);
    if (probe == spErrorInvalidDevice) break;
    spError_t e = probe == spSuccess ? ApplySettings(rt, device, settings, error) : probe;
    if (e != spSuccess) {
      if (probe != spSuccess) *error = Describe("spDeviceGetDefaultMemPool", e);
      spRuntimeDestroy(rt);
      return e;
    }
  }
  runtime_.store(rt, std::memory_order_release);
  if (options_.watch_exit) std::atexit(&AllocatorState::MarkExiting);
  return spSuccess;
}

spError_t AllocatorState::NoRuntimeError(std::string* error) const {
  absl::MutexLock lock(&mu_);
  if (creation_error_ != spSuccess) {
    *error = creation_message_;
    return creation_error_;
  }
  *error = "no runtime yet: nothing has been allocated (streampool_torch_init makes it)";
  return spErrorNotReady;
}

void* AllocatorState::Allocate(ssize_t size, int device, void* native, std::string* error) {
  if (size <= 0 || exiting()) return nullptr;
  spError_t code = spSuccess;
  spRuntime_t rt = GetOrCreateRuntime(&code, error);
  if (rt == nullptr) return nullptr;
  spStream_t stream = StreamFor(rt, device, native, error);
  if (stream == nullptr) return nullptr;
  void* ptr = nullptr;
  if (spError_t e = spMallocAsync(&ptr, static_cast<size_t>(size), stream); e != spSuccess) {
    *error = Describe(absl::StrCat("spMallocAsync (", size, " bytes, device ", device, ")"), e);
    return nullptr;
  }
  return ptr;
}

void AllocatorState::Free(void* ptr, int device, void* native) {
  if (ptr == nullptr || exiting()) return;
  spRuntime_t rt = runtime();
  if (rt == nullptr) return;
  if (device < 0) {
    spPointerAttributes attr;
    if (spPointerGetAttributes(&attr, ptr) != spSuccess) return;
    device = attr.device;
  }
  // The allocation adopted this stream, so it is found; should it not be,
  // leaking the block is safe where freeing it on another stream is not.
  std::string ignored;
  spStream_t stream = StreamFor(rt, device, native, &ignored);
  if (stream == nullptr) return;
  // A pointer this runtime does not hold is refused, which is all a free of
  // one can do.
  spFreeAsync(ptr, stream);
}

void AllocatorState::RecordStream(void* ptr, void* native) {
  if (ptr == nullptr || exiting()) return;
  spRuntime_t rt = runtime();
  if (rt == nullptr) return;
  spPointerAttributes attr;
  if (spPointerGetAttributes(&attr, ptr) != spSuccess || attr.device < 0) return;
  std::string ignored;
  spStream_t stream = StreamFor(rt, attr.device, native, &ignored);
  if (stream == nullptr) return;
  spMemRecordUse(ptr, stream);
}

int AllocatorState::StreamCount(int device) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, stream] : streams_) n += key.first == device ? 1 : 0;
  return n;
}

spStream_t AllocatorState::StreamFor(spRuntime_t rt, int device, void* native, std::string* error) {
  uintptr_t key = reinterpret_cast<uintptr_t>(native);
  if (key == kCudaStreamLegacy) key = 0;
  StreamMemo& memo = t_memo;
  if (spStream_t s = memo.Find(rt, device, key)) return s;
  spStream_t s = nullptr;
  {
    absl::MutexLock lock(&mu_);
    s = AdoptLocked(rt, device, key == 0 ? nullptr : native, error);
  }
  if (s != nullptr) memo.Insert(rt, device, key, s);
  return s;
}

spStream_t AllocatorState::AdoptLocked(spRuntime_t rt, int device, void* native,
                                       std::string* error) {
  const uintptr_t key = reinterpret_cast<uintptr_t>(native);
  if (auto it = streams_.find(std::make_pair(device, key)); it != streams_.end()) {
    return it->second;
  }
  if (key == kCudaStreamPerThread) {
    *error =
        "cudaStreamPerThread is a different stream on each thread; allocate on a stream of "
        "its own";
    return nullptr;
  }
  spStream_t s = nullptr;
  const spError_t e = key == 0 ? spStreamGetLegacy(&s, rt, device)
                               : spStreamCreateFromNative(&s, rt, device, native);
  if (e != spSuccess) {
    *error = Describe(absl::StrCat(key == 0 ? "spStreamGetLegacy" : "spStreamCreateFromNative",
                                   " (device ", device, ")"),
                      e);
    return nullptr;
  }
  streams_.emplace(std::make_pair(device, key), s);
  return s;
}

}  // namespace streampool::internal::torch
