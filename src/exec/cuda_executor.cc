#include "src/exec/cuda_executor.h"

#include <dlfcn.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/util/mutex.h"
#include "streampool/errors.h"
#include "streampool/streampool.h"

#if defined(STREAMPOOL_WITH_CUDA_HEADERS)
#include <cuda.h>
#endif

namespace streampool::internal {
namespace {

absl::Status WithCode(absl::Status st, spError_t code) {
  st.SetPayload(kCErrorPayload, absl::Cord(std::to_string(static_cast<int>(code))));
  return st;
}

absl::Status NoDriver(absl::string_view why) {
  return WithCode(absl::FailedPreconditionError(absl::StrCat("no usable CUDA driver: ", why)),
                  spErrorInsufficientDriver);
}

}  // namespace

#if !defined(STREAMPOOL_WITH_CUDA_HEADERS)

absl::StatusOr<std::shared_ptr<CudaDriver>> CudaDriver::Open(int) {
  return NoDriver("streampool was built without the CUDA toolkit's headers");
}

#else

namespace {

// The 2 MiB granule every pool maps in (Chunk::kGranule).
constexpr uint64_t kGranule = uint64_t{2} << 20;

// A device kernel that spins until `ns` nanoseconds of the GPU's global timer
// have passed: spLaunchKernel's duration on a real device. PTX, so the
// driver compiles it for whatever device it finds (no nvcc at build time).
constexpr char kWaitKernelPtx[] = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry streampool_wait_ns(.param .u64 ns)
{
  .reg .pred %p;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [ns];
  mov.u64 %rd2, %globaltimer;
  add.u64 %rd3, %rd2, %rd1;
LOOP:
  mov.u64 %rd4, %globaltimer;
  setp.lt.u64 %p, %rd4, %rd3;
  @%p bra LOOP;
  ret;
}
)";

// The driver's entry points this library calls, by their cuda.h types.
struct Api {
#define SP_CUDA_FN(name) decltype(&::name) name = nullptr;
  SP_CUDA_FN(cuInit)
  SP_CUDA_FN(cuDriverGetVersion)
  SP_CUDA_FN(cuGetErrorName)
  SP_CUDA_FN(cuDeviceGetCount)
  SP_CUDA_FN(cuDeviceGet)
  SP_CUDA_FN(cuDeviceGetAttribute)
  SP_CUDA_FN(cuDeviceTotalMem)
  SP_CUDA_FN(cuDevicePrimaryCtxRetain)
  SP_CUDA_FN(cuDevicePrimaryCtxRelease)
  SP_CUDA_FN(cuCtxGetCurrent)
  SP_CUDA_FN(cuCtxSetCurrent)
  SP_CUDA_FN(cuMemGetInfo)
  SP_CUDA_FN(cuStreamCreate)
  SP_CUDA_FN(cuStreamDestroy)
  SP_CUDA_FN(cuStreamGetFlags)
  SP_CUDA_FN(cuStreamGetCtx)
  SP_CUDA_FN(cuStreamSynchronize)
  SP_CUDA_FN(cuStreamWaitEvent)
  SP_CUDA_FN(cuEventCreate)
  SP_CUDA_FN(cuEventDestroy)
  SP_CUDA_FN(cuEventRecord)
  SP_CUDA_FN(cuEventQuery)
  SP_CUDA_FN(cuEventSynchronize)
  SP_CUDA_FN(cuEventElapsedTime)
  SP_CUDA_FN(cuMemcpyAsync)
  SP_CUDA_FN(cuMemsetD8Async)
  SP_CUDA_FN(cuLaunchHostFunc)
  SP_CUDA_FN(cuLaunchKernel)
  SP_CUDA_FN(cuModuleLoadData)
  SP_CUDA_FN(cuModuleUnload)
  SP_CUDA_FN(cuModuleGetFunction)
  SP_CUDA_FN(cuMemAlloc)
  SP_CUDA_FN(cuMemFree)
  SP_CUDA_FN(cuMemHostAlloc)
  SP_CUDA_FN(cuMemFreeHost)
  SP_CUDA_FN(cuMemAddressReserve)
  SP_CUDA_FN(cuMemAddressFree)
  SP_CUDA_FN(cuMemCreate)
  SP_CUDA_FN(cuMemRelease)
  SP_CUDA_FN(cuMemMap)
  SP_CUDA_FN(cuMemUnmap)
  SP_CUDA_FN(cuMemSetAccess)
  SP_CUDA_FN(cuMemGetAllocationGranularity)
#undef SP_CUDA_FN
};

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

// Every entry point of Api, by name (the driver picks the version for
// `version`, as cudart does).
absl::Status LoadApi(GetProcAddress get, int version, Api& api) {
  struct Entry {
    const char* name;
    void** slot;
  };
#define SP_CUDA_ENTRY(name) {#name, reinterpret_cast<void**>(&api.name)},
  const Entry entries[] = {
      SP_CUDA_ENTRY(cuInit) SP_CUDA_ENTRY(cuDriverGetVersion) SP_CUDA_ENTRY(
          cuGetErrorName) SP_CUDA_ENTRY(cuDeviceGetCount) SP_CUDA_ENTRY(cuDeviceGet)
          SP_CUDA_ENTRY(cuDeviceGetAttribute) SP_CUDA_ENTRY(cuDeviceTotalMem) SP_CUDA_ENTRY(
              cuDevicePrimaryCtxRetain) SP_CUDA_ENTRY(cuDevicePrimaryCtxRelease)
              SP_CUDA_ENTRY(cuCtxGetCurrent) SP_CUDA_ENTRY(cuCtxSetCurrent) SP_CUDA_ENTRY(
                  cuMemGetInfo) SP_CUDA_ENTRY(cuStreamCreate) SP_CUDA_ENTRY(cuStreamDestroy)
                  SP_CUDA_ENTRY(cuStreamGetFlags) SP_CUDA_ENTRY(cuStreamGetCtx) SP_CUDA_ENTRY(
                      cuStreamSynchronize) SP_CUDA_ENTRY(cuStreamWaitEvent)
                      SP_CUDA_ENTRY(cuEventCreate) SP_CUDA_ENTRY(cuEventDestroy)
                          SP_CUDA_ENTRY(cuEventRecord) SP_CUDA_ENTRY(cuEventQuery) SP_CUDA_ENTRY(
                              cuEventSynchronize) SP_CUDA_ENTRY(cuEventElapsedTime)
                              SP_CUDA_ENTRY(cuMemcpyAsync) SP_CUDA_ENTRY(cuMemsetD8Async)
                                  SP_CUDA_ENTRY(cuLaunchHostFunc) SP_CUDA_ENTRY(cuLaunchKernel)
                                      SP_CUDA_ENTRY(cuModuleLoadData) SP_CUDA_ENTRY(cuModuleUnload)
                                          SP_CUDA_ENTRY(cuModuleGetFunction) SP_CUDA_ENTRY(
                                              cuMemAlloc) SP_CUDA_ENTRY(cuMemFree)
                                              SP_CUDA_ENTRY(cuMemHostAlloc) SP_CUDA_ENTRY(
                                                  cuMemFreeHost) SP_CUDA_ENTRY(cuMemAddressReserve)
                                                  SP_CUDA_ENTRY(cuMemAddressFree) SP_CUDA_ENTRY(
                                                      cuMemCreate) SP_CUDA_ENTRY(cuMemRelease)
                                                      SP_CUDA_ENTRY(cuMemMap) SP_CUDA_ENTRY(
                                                          cuMemUnmap) SP_CUDA_ENTRY(cuMemSetAccess)
                                                          SP_CUDA_ENTRY(
                                                              cuMemGetAllocationGranularity)};
#undef SP_CUDA_ENTRY
  for (const Entry& e : entries) {
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (get(e.name, e.slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        found != CU_GET_PROC_ADDRESS_SUCCESS || *e.slot == nullptr) {
      return NoDriver(absl::StrCat("the driver has no ", e.name));
    }
  }
  return absl::OkStatus();
}

// A stream as the executor holds it: the CUstream and its device. The legacy
// stream is CU_STREAM_LEGACY of the device's primary context.
struct CudaStream {
  CUstream stream;
  int device;
  bool owned;
};

// A marker: a CUevent of the stream's device, recycled through the device's
// free list (events are created once, not per free).
struct CudaMarker {
  CUevent event;
  int device;
  bool timed;
};

// What a marker that could not be recorded stands for: the stream was
// synchronized instead, so it is reached already.
CudaMarker kReachedMarker{nullptr, -1, false};

struct DeviceState {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  uint64_t total = 0;
  bool vmm = false;
  CUmodule module = nullptr;  // the wait kernel, loaded at its first launch
  CUfunction wait_kernel = nullptr;
  std::vector<CudaMarker*> free_markers;
  std::vector<CudaMarker*> free_timed;
};

class Driver;

// One device's memory: cuMemAlloc chunks, and VMM reservations mapped one
// 2 MiB granule per allocation handle (cuMemUnmap takes back whole mappings
// only, and pools give back any granule-aligned part).
class DeviceMemory final : public PhysicalMemory {
 public:
  DeviceMemory(std::shared_ptr<Driver> driver, int device)
      : driver_(std::move(driver)), device_(device) {}
  ~DeviceMemory() override;
  absl::StatusOr<Mapping> Map(uint64_t bytes) override;
  void Unmap(const Mapping& mapping) override;
  bool touchable() const override { return false; }
  const char* name() const override { return "cuda-device"; }
  bool can_reserve() const override;
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override;
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override;
  void UnmapAt(const Mapping& mapping) override;
  void ReleaseReservation(void* base, uint64_t bytes) override;

  absl::Status Grant(int peer);

 private:
  struct Range {
    uintptr_t base;
    uint64_t bytes;
  };
  absl::Status SetAccess(uintptr_t base, uint64_t bytes, const std::vector<int>& devices);
  // Pools may outlive the runtime's reference to the driver (teardown order).
  const std::shared_ptr<Driver> driver_;
  const int device_;
  // Devices with read-write access to every mapped granule, this one first.
  std::vector<int> access_{device_};
  std::vector<Range> mapped_;  // what MapAt mapped and UnmapAt has not taken back
};

static_assert(kIsPhysicalMemory<DeviceMemory>);

class PinnedMemory final : public PhysicalMemory {
 public:
  explicit PinnedMemory(std::shared_ptr<Driver> driver) : driver_(std::move(driver)) {}
  absl::StatusOr<Mapping> Map(uint64_t bytes) override;
  void Unmap(const Mapping& mapping) override;
  bool touchable() const override { return true; }
  const char* name() const override { return "cuda-pinned-host"; }

 private:
  const std::shared_ptr<Driver> driver_;
};

static_assert(kIsPhysicalMemory<PinnedMemory>);

class Driver final : public CudaDriver, public std::enable_shared_from_this<Driver> {
 public:
  Driver(void* library, Api api, std::vector<DeviceState> devices)
      : library_(library), api_(api), devices_(std::move(devices)) {}
  ~Driver() override {
    for (size_t d = 0; d < devices_.size(); ++d) {
      DeviceState& ds = devices_[d];
      Ctx ctx(*this, static_cast<int>(d));
      for (CudaMarker* m : ds.free_markers) api_.cuEventDestroy(m->event), delete m;
      for (CudaMarker* m : ds.free_timed) api_.cuEventDestroy(m->event), delete m;
      if (ds.module != nullptr) api_.cuModuleUnload(ds.module);
    }
    for (DeviceState& ds : devices_) api_.cuDevicePrimaryCtxRelease(ds.dev);
    // The library stays loaded: the driver keeps threads of its own that
    // may still run (host functions), and dlclose under them would unmap
    // their code.
    (void)library_;
  }

  const Api& api() const { return api_; }
  DeviceState& device(int d) { return devices_[d]; }

  // Makes `device`'s primary context current for a scope, and restores the
  // caller's (an embedder's thread may have its own current context).
  class Ctx {
   public:
    Ctx(Driver& driver, int device) : api_(driver.api_) {
      api_.cuCtxGetCurrent(&saved_);
      CUcontext want = driver.devices_[device].ctx;
      if (saved_ != want) {
        api_.cuCtxSetCurrent(want);
        switched_ = true;
      }
    }
    ~Ctx() {
      if (switched_) api_.cuCtxSetCurrent(saved_);
    }

   private:
    const Api& api_;
    CUcontext saved_ = nullptr;
    bool switched_ = false;
  };

  std::string Describe(CUresult r) const {
    const char* name = nullptr;
    if (api_.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR";
    return absl::StrCat(name, " (", static_cast<int>(r), ")");
  }
  absl::Status Fail(absl::string_view what, CUresult r) const {
    const std::string msg = absl::StrCat(what, " failed: ", Describe(r));
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(msg);
    if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) {
      return absl::NotFoundError(msg);
    }
    if (r == CUDA_ERROR_NOT_SUPPORTED) return absl::UnimplementedError(msg);
    if (r == CUDA_ERROR_INVALID_VALUE) return absl::InvalidArgumentError(msg);
    return absl::InternalError(msg);
  }

  // CudaDriver.
  int device_count() const override { return static_cast<int>(devices_.size()); }
  uint64_t total_memory(int d) const override { return devices_[d].total; }
  absl::StatusOr<uint64_t> free_memory(int d) override {
    Ctx ctx(*this, d);
    size_t free = 0, total = 0;
    if (CUresult r = api_.cuMemGetInfo(&free, &total); r != CUDA_SUCCESS) {
      return Fail("cuMemGetInfo", r);
    }
    return free;
  }
  std::unique_ptr<PhysicalMemory> NewDeviceMemory(int d) override {
    return std::make_unique<DeviceMemory>(shared_from_this(), d);
  }
  std::unique_ptr<PhysicalMemory> NewPinnedHostMemory() override {
    return std::make_unique<PinnedMemory>(shared_from_this());
  }
  absl::Status GrantAccess(PhysicalMemory& memory, int peer) override {
    if (peer < 0 || peer >= device_count()) return absl::OutOfRangeError("no such peer device");
    auto* dm = dynamic_cast<DeviceMemory*>(&memory);
    if (dm == nullptr) return absl::InvalidArgumentError("not this driver's device memory");
    return dm->Grant(peer);
  }

  // StreamAdapter.
  absl::StatusOr<NativeStream> CreateStream(int device, bool legacy, bool non_blocking) override {
    if (legacy) return new CudaStream{CU_STREAM_LEGACY, device, false};
    Ctx ctx(*this, device);
    CUstream s = nullptr;
    if (CUresult r = api_.cuStreamCreate(&s, non_blocking ? CU_STREAM_NON_BLOCKING : 0);
        r != CUDA_SUCCESS) {
      return Fail("cuStreamCreate", r);
    }
    return new CudaStream{s, device, true};
  }
  void DestroyStream(NativeStream stream) override {
    auto* cs = static_cast<CudaStream*>(stream);
    if (cs->owned) {
      Ctx ctx(*this, cs->device);
      api_.cuStreamDestroy(cs->stream);
    }
    delete cs;
  }
  Marker Record(NativeStream stream) override { return RecordOn(stream, /*timed=*/false); }
  bool Done(Marker marker) override {
    auto* m = static_cast<CudaMarker*>(marker);
    if (m == &kReachedMarker) return true;
    // Any answer but "not ready" ends the wait: a failed context fails every
    // later call anyway, and a wait that never ends would hide it.
    return api_.cuEventQuery(m->event) != CUDA_ERROR_NOT_READY;
  }
  void Wait(NativeStream stream, Marker marker) override {
    auto* m = static_cast<CudaMarker*>(marker);
    if (m == &kReachedMarker) return;
    auto* cs = static_cast<CudaStream*>(stream);
    Ctx ctx(*this, cs->device);
    if (api_.cuStreamWaitEvent(cs->stream, m->event, 0) != CUDA_SUCCESS) {
      // The wait could not be enqueued: the host waits instead, which is
      // later than the stream would have, never earlier.
      api_.cuEventSynchronize(m->event);
    }
  }
  void Synchronize(Marker marker) override {
    auto* m = static_cast<CudaMarker*>(marker);
    if (m != &kReachedMarker) api_.cuEventSynchronize(m->event);
  }
  void Release(Marker marker) override {
    auto* m = static_cast<CudaMarker*>(marker);
    if (m == &kReachedMarker) return;
    MutexLock lock(&free_mu_);
    DeviceState& ds = devices_[m->device];
    (m->timed ? ds.free_timed : ds.free_markers).push_back(m);
  }

  // NativeWork.
  absl::Status Kernel(NativeStream stream, uint64_t duration_ns) override {
    if (duration_ns == 0) return absl::OkStatus();  // nothing to wait for
    auto* cs = static_cast<CudaStream*>(stream);
    absl::StatusOr<CUfunction> fn = WaitKernel(cs->device);
    if (!fn.ok()) return fn.status();
    Ctx ctx(*this, cs->device);
    void* args[] = {&duration_ns};
    if (CUresult r = api_.cuLaunchKernel(*fn, 1, 1, 1, 1, 1, 1, 0, cs->stream, args, nullptr);
        r != CUDA_SUCCESS) {
      return Fail("cuLaunchKernel", r);
    }
    return absl::OkStatus();
  }
  absl::Status Copy(NativeStream stream, void* dst, const void* src, uint64_t bytes) override {
    auto* cs = static_cast<CudaStream*>(stream);
    Ctx ctx(*this, cs->device);
    if (CUresult r = api_.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                        reinterpret_cast<CUdeviceptr>(src), bytes, cs->stream);
        r != CUDA_SUCCESS) {
      return Fail("cuMemcpyAsync", r);
    }
    return absl::OkStatus();
  }
  absl::Status Fill(NativeStream stream, void* dst, int value, uint64_t bytes) override {
    auto* cs = static_cast<CudaStream*>(stream);
    Ctx ctx(*this, cs->device);
    if (CUresult r = api_.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst),
                                          static_cast<unsigned char>(value), bytes, cs->stream);
        r != CUDA_SUCCESS) {
      return Fail("cuMemsetD8Async", r);
    }
    return absl::OkStatus();
  }
  absl::Status HostFunc(NativeStream stream, std::function<void()> fn) override {
    auto* cs = static_cast<CudaStream*>(stream);
    auto* heap = new std::function<void()>(std::move(fn));
    Ctx ctx(*this, cs->device);
    CUresult r = api_.cuLaunchHostFunc(
        cs->stream,
        [](void* data) {
          auto* f = static_cast<std::function<void()>*>(data);
          (*f)();
          delete f;
        },
        heap);
    if (r != CUDA_SUCCESS) {
      delete heap;
      return Fail("cuLaunchHostFunc", r);
    }
    return absl::OkStatus();
  }
  Marker RecordTimed(NativeStream stream) override { return RecordOn(stream, /*timed=*/true); }
  absl::StatusOr<float> ElapsedMs(Marker start, Marker end) override {
    auto* a = static_cast<CudaMarker*>(start);
    auto* b = static_cast<CudaMarker*>(end);
    if (a == &kReachedMarker || b == &kReachedMarker || !a->timed || !b->timed) {
      return absl::NotFoundError("a record without timing (its event could not be recorded)");
    }
    float ms = 0;
    CUresult r = api_.cuEventElapsedTime(&ms, a->event, b->event);
    if (r == CUDA_ERROR_NOT_READY)
      return absl::UnavailableError("event's record has not completed");
    if (r != CUDA_SUCCESS) return Fail("cuEventElapsedTime", r);
    return ms;
  }
  void* UserStream(NativeStream stream) override {
    auto* cs = static_cast<CudaStream*>(stream);
    return cs->stream == CU_STREAM_LEGACY ? nullptr : cs->stream;
  }
  absl::StatusOr<NativeStream> Adopt(int device, void* user_stream, bool* non_blocking) override {
    CUstream s = static_cast<CUstream>(user_stream);
    Ctx ctx(*this, device);
    CUcontext owner = nullptr;
    if (CUresult r = api_.cuStreamGetCtx(s, &owner); r != CUDA_SUCCESS) {
      return Fail("cuStreamGetCtx (is it a live CUstream?)", r);
    }
    if (owner != devices_[device].ctx) {
      return absl::InvalidArgumentError(
          "the stream belongs to another device or to a context other than the primary one");
    }
    unsigned flags = 0;
    if (CUresult r = api_.cuStreamGetFlags(s, &flags); r != CUDA_SUCCESS) {
      return Fail("cuStreamGetFlags", r);
    }
    *non_blocking = (flags & CU_STREAM_NON_BLOCKING) != 0;
    return new CudaStream{s, device, false};
  }

 private:
  Marker RecordOn(NativeStream stream, bool timed) {
    auto* cs = static_cast<CudaStream*>(stream);
    CudaMarker* m = nullptr;
    {
      MutexLock lock(&free_mu_);
      auto& list = timed ? devices_[cs->device].free_timed : devices_[cs->device].free_markers;
      if (!list.empty()) {
        m = list.back();
        list.pop_back();
      }
    }
    Ctx ctx(*this, cs->device);
    if (m == nullptr) {
      CUevent e = nullptr;
      if (api_.cuEventCreate(&e, timed ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING) !=
          CUDA_SUCCESS) {
        // No event to be had: the host waits for the stream now, so the point
        // is reached when the marker is asked about.
        api_.cuStreamSynchronize(cs->stream);
        return &kReachedMarker;
      }
      m = new CudaMarker{e, cs->device, timed};
    }
    if (api_.cuEventRecord(m->event, cs->stream) != CUDA_SUCCESS) {
      api_.cuStreamSynchronize(cs->stream);
      Release(m);
      return &kReachedMarker;
    }
    return m;
  }

  absl::StatusOr<CUfunction> WaitKernel(int device) {
    MutexLock lock(&free_mu_);
    DeviceState& ds = devices_[device];
    if (ds.wait_kernel != nullptr) return ds.wait_kernel;
    Ctx ctx(*this, device);
    if (CUresult r = api_.cuModuleLoadData(&ds.module, kWaitKernelPtx); r != CUDA_SUCCESS) {
      return Fail("loading the wait kernel (cuModuleLoadData)", r);
    }
    if (CUresult r = api_.cuModuleGetFunction(&ds.wait_kernel, ds.module, "streampool_wait_ns");
        r != CUDA_SUCCESS) {
      return Fail("cuModuleGetFunction", r);
    }
    return ds.wait_kernel;
  }

  friend class DeviceMemory;
  friend class PinnedMemory;
  void* const library_;
  const Api api_;
  std::vector<DeviceState> devices_;
  // The marker free lists and the wait kernel's first load. Taken under the
  // executor's state (markers are released there).
  Mutex free_mu_{LockRank::kExecDone};
};

static_assert(kIsStreamAdapter<Driver>);

DeviceMemory::~DeviceMemory() = default;

absl::StatusOr<Mapping> DeviceMemory::Map(uint64_t bytes) {
  Driver::Ctx ctx(*driver_, device_);
  CUdeviceptr p = 0;
  if (CUresult r = driver_->api().cuMemAlloc(&p, bytes); r != CUDA_SUCCESS) {
    return driver_->Fail(absl::StrCat("cuMemAlloc of ", bytes, " bytes"), r);
  }
  return Mapping::OfNormalPages(reinterpret_cast<void*>(p), bytes);
}

void DeviceMemory::Unmap(const Mapping& m) {
  Driver::Ctx ctx(*driver_, device_);
  driver_->api().cuMemFree(reinterpret_cast<CUdeviceptr>(m.base));
}

bool DeviceMemory::can_reserve() const { return driver_->device(device_).vmm; }

absl::StatusOr<void*> DeviceMemory::Reserve(uint64_t bytes, uint64_t alignment) {
  if (!can_reserve()) {
    return absl::UnimplementedError(
        "the device does not map virtual memory in 2 MiB granules: pools on it grow in chunks");
  }
  Driver::Ctx ctx(*driver_, device_);
  CUdeviceptr p = 0;
  if (CUresult r = driver_->api().cuMemAddressReserve(&p, bytes, alignment, 0, 0);
      r != CUDA_SUCCESS) {
    return driver_->Fail(absl::StrCat("cuMemAddressReserve of ", bytes, " bytes"), r);
  }
  return reinterpret_cast<void*>(p);
}

absl::Status DeviceMemory::SetAccess(uintptr_t base, uint64_t bytes,
                                     const std::vector<int>& devices) {
  std::vector<CUmemAccessDesc> desc(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    desc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[i].location.id = devices[i];
    desc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  if (CUresult r = driver_->api().cuMemSetAccess(static_cast<CUdeviceptr>(base), bytes, desc.data(),
                                                 desc.size());
      r != CUDA_SUCCESS) {
    return driver_->Fail("cuMemSetAccess", r);
  }
  return absl::OkStatus();
}

absl::StatusOr<Mapping> DeviceMemory::MapAt(void* addr, uint64_t bytes) {
  const Api& api = driver_->api();
  Driver::Ctx ctx(*driver_, device_);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  const auto base = reinterpret_cast<uintptr_t>(addr);
  uint64_t done = 0;
  absl::Status failed;
  for (; done < bytes; done += kGranule) {
    CUmemGenericAllocationHandle h = 0;
    if (CUresult r = api.cuMemCreate(&h, kGranule, &prop, 0); r != CUDA_SUCCESS) {
      failed = driver_->Fail(absl::StrCat("cuMemCreate of ", kGranule, " bytes"), r);
      break;
    }
    CUresult r = api.cuMemMap(static_cast<CUdeviceptr>(base + done), kGranule, 0, h, 0);
    // The mapping holds the memory from here on; unmapping frees it.
    api.cuMemRelease(h);
    if (r != CUDA_SUCCESS) {
      failed = driver_->Fail("cuMemMap", r);
      break;
    }
  }
  if (failed.ok()) failed = SetAccess(base, bytes, access_);
  if (!failed.ok()) {
    for (uint64_t off = 0; off < done; off += kGranule) {
      api.cuMemUnmap(static_cast<CUdeviceptr>(base + off), kGranule);
    }
    return failed;
  }
  mapped_.push_back(Range{base, bytes});
  return Mapping::OfNormalPages(addr, bytes);
}

void DeviceMemory::UnmapAt(const Mapping& m) {
  Driver::Ctx ctx(*driver_, device_);
  const auto base = reinterpret_cast<uintptr_t>(m.base);
  for (uint64_t off = 0; off < m.size; off += kGranule) {
    driver_->api().cuMemUnmap(static_cast<CUdeviceptr>(base + off), kGranule);
  }
  // Keep the record of mapped ranges exact: split what this cut out of.
  std::vector<Range> kept;
  for (const Range& r : mapped_) {
    const uintptr_t end = r.base + r.bytes, cut_end = base + m.size;
    if (cut_end <= r.base || base >= end) {
      kept.push_back(r);
      continue;
    }
    if (r.base < base) kept.push_back(Range{r.base, base - r.base});
    if (cut_end < end) kept.push_back(Range{cut_end, end - cut_end});
  }
  mapped_ = std::move(kept);
}

void DeviceMemory::ReleaseReservation(void* base, uint64_t bytes) {
  Driver::Ctx ctx(*driver_, device_);
  driver_->api().cuMemAddressFree(reinterpret_cast<CUdeviceptr>(base), bytes);
}

absl::Status DeviceMemory::Grant(int peer) {
  if (std::find(access_.begin(), access_.end(), peer) != access_.end()) return absl::OkStatus();
  std::vector<int> with = access_;
  with.push_back(peer);
  Driver::Ctx ctx(*driver_, device_);
  for (const Range& r : mapped_) {
    if (absl::Status st = SetAccess(r.base, r.bytes, with); !st.ok()) return st;
  }
  access_ = std::move(with);
  return absl::OkStatus();
}

absl::StatusOr<Mapping> PinnedMemory::Map(uint64_t bytes) {
  Driver::Ctx ctx(*driver_, 0);
  void* p = nullptr;
  if (CUresult r = driver_->api().cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE);
      r != CUDA_SUCCESS) {
    return driver_->Fail(absl::StrCat("cuMemHostAlloc of ", bytes, " bytes"), r);
  }
  return Mapping::OfNormalPages(p, bytes);
}

void PinnedMemory::Unmap(const Mapping& m) {
  Driver::Ctx ctx(*driver_, 0);
  driver_->api().cuMemFreeHost(m.base);
}

}  // namespace

absl::StatusOr<std::shared_ptr<CudaDriver>> CudaDriver::Open(int device_count) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    return NoDriver(err != nullptr ? err : "libcuda.so.1 not found");
  }
  // From here on every error leaves the library loaded but unused: the
  // driver may have started threads at cuInit that dlclose would pull the
  // code from under.
  auto get = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (get == nullptr) return NoDriver("the driver predates CUDA 12 (no cuGetProcAddress_v2)");
  Api api;
  decltype(&::cuDriverGetVersion) get_version = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get("cuDriverGetVersion", reinterpret_cast<void**>(&get_version), 2020,
          CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
      get_version == nullptr) {
    return NoDriver("cuDriverGetVersion missing");
  }
  int version = 0;
  if (get_version(&version) != CUDA_SUCCESS || version < 12000) {
    return NoDriver(absl::StrCat("driver version ", version, " is older than CUDA 12.0"));
  }
  if (absl::Status st = LoadApi(get, std::min(version, CUDA_VERSION), api); !st.ok()) return st;
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NO_DEVICE) {
      return WithCode(absl::FailedPreconditionError("cuInit: no CUDA device"), spErrorNoDevice);
    }
    return NoDriver(absl::StrCat("cuInit returned ", static_cast<int>(r)));
  }
  int count = 0;
  if (api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    return WithCode(absl::FailedPreconditionError("the CUDA driver sees no device"),
                    spErrorNoDevice);
  }
  if (device_count > count) {
    return absl::OutOfRangeError(
        absl::StrCat(device_count, " devices asked for; the machine has ", count));
  }
  const int n = device_count == 0 ? count : device_count;
  std::vector<DeviceState> devices(n);
  auto release = [&](int upto) {
    for (int d = 0; d < upto; ++d) api.cuDevicePrimaryCtxRelease(devices[d].dev);
  };
  for (int d = 0; d < n; ++d) {
    DeviceState& ds = devices[d];
    size_t total = 0;
    int vmm = 0;
    if (api.cuDeviceGet(&ds.dev, d) != CUDA_SUCCESS ||
        api.cuDevicePrimaryCtxRetain(&ds.ctx, ds.dev) != CUDA_SUCCESS) {
      release(d);
      return NoDriver(absl::StrCat("cannot open device ", d, "'s primary context"));
    }
    if (api.cuDeviceTotalMem(&total, ds.dev) != CUDA_SUCCESS) {
      release(d + 1);
      return NoDriver(absl::StrCat("cannot read device ", d, "'s memory size"));
    }
    ds.total = total;
    api.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, ds.dev);
    if (vmm != 0) {
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = d;
      size_t granularity = 0;
      ds.vmm = api.cuMemGetAllocationGranularity(
                   &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
               granularity != 0 && kGranule % granularity == 0;
    }
  }
  return std::shared_ptr<CudaDriver>(std::make_shared<Driver>(lib, api, std::move(devices)));
}

#endif  // STREAMPOOL_WITH_CUDA_HEADERS

}  // namespace streampool::internal
