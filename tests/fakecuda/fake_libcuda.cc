// A scripted stand-in for the CUDA driver (libcuda.so.1), for testing the
// CUDA executor on machines without a GPU. It is not a GPU and does not
// pretend to be one: tests that use it say so in their names. It keeps the
// driver's contracts the executor relies on, strictly: streams run their work
// only when the test (or a synchronize) makes them; waits hold a stream until
// the event's record is reached; cuMemUnmap takes back only a whole mapping,
// as the real driver does; device memory is host memory mapped where the VMM
// calls say. It counts the driver objects alive, so churn tests can check
// nothing grows.
//
// Control from a test (looked up with dlsym): fakecuda_run(stream or null for
// all), fakecuda_live(kind), fakecuda_device_memory_mapped(),
// fakecuda_calls().
#include <cuda.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr size_t kGranularity = size_t{2} << 20;
constexpr uint64_t kTotal = uint64_t{8} << 30;

struct Event;
struct Item {
  enum Kind { kWork, kRecord, kWait } kind = kWork;
  std::function<void()> work;   // kWork
  Event* event = nullptr;       // kRecord, kWait
  uint64_t seq = 0;             // kRecord: the record's number; kWait: the one waited for
  struct Stream* on = nullptr;  // kWait: the stream of that record
};
struct Stream {
  int device = 0;
  unsigned flags = 0;
  std::deque<Item> items;
};
struct Event {
  unsigned flags = 0;
  Stream* stream = nullptr;  // of the latest record
  uint64_t recorded = 0;     // latest record's number
  uint64_t reached = 0;      // highest record number reached
  double at_ms = 0;
};
struct Ctx {
  int device;
};

std::recursive_mutex mu;
int device_count = 1;
Ctx contexts[8];
Stream legacy[8];
thread_local CUcontext current = nullptr;
std::set<Stream*> streams;
std::set<Event*> events;
std::vector<Event*> destroyed_events;
std::set<CUmemGenericAllocationHandle> handles;
std::map<uintptr_t, size_t> reservations;  // base -> bytes
std::map<uintptr_t, size_t> mappings;      // base -> bytes (exact cuMemMap ranges)
std::map<uintptr_t, size_t> allocs;        // cuMemAlloc / cuMemHostAlloc
uint64_t mapped_bytes = 0;
uint64_t calls = 0;
double clock_ms = 0;
int modules = 0;

Stream* Resolve(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY) {
    const int d = current != nullptr ? reinterpret_cast<Ctx*>(current)->device : 0;
    return &legacy[d];
  }
  return reinterpret_cast<Stream*>(s);
}
bool Live(CUstream s) {
  return s == nullptr || s == CU_STREAM_LEGACY || streams.count(reinterpret_cast<Stream*>(s));
}

// Runs `st` until `until` items are done or a wait cannot pass; returns
// whether it ran everything asked for.
bool Run(Stream* st, size_t until);
bool RunRecord(Event* e, uint64_t seq, Stream* st) {
  if (e->reached >= seq) return true;
  // Run the record's stream until the record is reached.
  while (e->reached < seq && !st->items.empty()) {
    if (!Run(st, 1)) return false;
  }
  return e->reached >= seq;
}
bool Run(Stream* st, size_t until) {
  for (size_t n = 0; n < until && !st->items.empty(); ++n) {
    Item& it = st->items.front();
    if (it.kind == Item::kWait && !RunRecord(it.event, it.seq, it.on)) return false;
    Item done = std::move(it);
    st->items.pop_front();
    clock_ms += 0.001;
    if (done.kind == Item::kWork && done.work) done.work();
    if (done.kind == Item::kRecord) {
      done.event->reached = std::max(done.event->reached, done.seq);
      done.event->at_ms = clock_ms;
    }
  }
  return true;
}
void RunAll() {
  for (int round = 0; round < 64; ++round) {
    bool any = false;
    for (int d = 0; d < device_count; ++d) any |= !legacy[d].items.empty();
    for (Stream* s : streams) any |= !s->items.empty();
    if (!any) return;
    for (int d = 0; d < device_count; ++d) Run(&legacy[d], SIZE_MAX);
    for (Stream* s : streams) Run(s, SIZE_MAX);
  }
}
void Enqueue(Stream* st, Item item) { st->items.push_back(std::move(item)); }

#define LOCK                                   \
  std::lock_guard<std::recursive_mutex> l(mu); \
  ++calls

CUresult Init(unsigned) {
  LOCK;
  const char* d = std::getenv("FAKECUDA_DEVICES");
  device_count = d != nullptr ? std::atoi(d) : 1;
  if (device_count <= 0) return CUDA_ERROR_NO_DEVICE;
  for (int i = 0; i < device_count; ++i) {
    contexts[i].device = i;
    legacy[i].device = i;
  }
  return CUDA_SUCCESS;
}
CUresult DriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult GetErrorName(CUresult r, const char** s) {
  *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult DeviceGetCount(int* n) {
  *n = device_count;
  return CUDA_SUCCESS;
}
CUresult DeviceGet(CUdevice* d, int i) {
  if (i < 0 || i >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *d = i;
  return CUDA_SUCCESS;
}
CUresult DeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult DeviceTotalMem(size_t* b, CUdevice) {
  *b = kTotal;
  return CUDA_SUCCESS;
}
CUresult PrimaryCtxRetain(CUcontext* c, CUdevice d) {
  *c = reinterpret_cast<CUcontext>(&contexts[d]);
  return CUDA_SUCCESS;
}
CUresult PrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CtxGetCurrent(CUcontext* c) {
  *c = current;
  return CUDA_SUCCESS;
}
CUresult CtxSetCurrent(CUcontext c) {
  current = c;
  return CUDA_SUCCESS;
}
CUresult MemGetInfo(size_t* free, size_t* total) {
  LOCK;
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *total = kTotal;
  *free = kTotal - mapped_bytes;
  return CUDA_SUCCESS;
}
CUresult StreamCreate(CUstream* s, unsigned flags) {
  LOCK;
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* st = new Stream{reinterpret_cast<Ctx*>(current)->device, flags, {}};
  streams.insert(st);
  *s = reinterpret_cast<CUstream>(st);
  return CUDA_SUCCESS;
}
CUresult StreamDestroy(CUstream s) {
  LOCK;
  auto* st = reinterpret_cast<Stream*>(s);
  if (!streams.count(st)) return CUDA_ERROR_INVALID_HANDLE;
  // As the driver: work still queued completes.
  Run(st, SIZE_MAX);
  streams.erase(st);
  delete st;
  return CUDA_SUCCESS;
}
CUresult StreamGetFlags(CUstream s, unsigned* f) {
  LOCK;
  if (!Live(s)) return CUDA_ERROR_INVALID_HANDLE;
  *f = Resolve(s)->flags;
  return CUDA_SUCCESS;
}
CUresult StreamGetCtx(CUstream s, CUcontext* c) {
  LOCK;
  if (!Live(s)) return CUDA_ERROR_INVALID_HANDLE;
  *c = reinterpret_cast<CUcontext>(&contexts[Resolve(s)->device]);
  return CUDA_SUCCESS;
}
CUresult StreamSynchronize(CUstream s) {
  LOCK;
  if (!Live(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (!Run(Resolve(s), SIZE_MAX)) RunAll();
  return CUDA_SUCCESS;
}
CUresult StreamWaitEvent(CUstream s, CUevent e, unsigned) {
  LOCK;
  auto* ev = reinterpret_cast<Event*>(e);
  if (!Live(s) || !events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->recorded == 0) return CUDA_SUCCESS;
  Enqueue(Resolve(s), Item{Item::kWait, nullptr, ev, ev->recorded, ev->stream});
  return CUDA_SUCCESS;
}
CUresult EventCreate(CUevent* e, unsigned flags) {
  LOCK;
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* ev = new Event{flags};
  events.insert(ev);
  *e = reinterpret_cast<CUevent>(ev);
  return CUDA_SUCCESS;
}
CUresult EventDestroy(CUevent e) {
  LOCK;
  auto* ev = reinterpret_cast<Event*>(e);
  if (!events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  // The driver defers the destruction of an event a queued wait names; this
  // stand-in keeps it until nothing queued names it.
  events.erase(ev);
  bool named = false;
  auto names = [&](Stream& st) {
    for (const Item& it : st.items) named |= it.event == ev;
  };
  for (int d = 0; d < device_count; ++d) names(legacy[d]);
  for (Stream* s : streams) names(*s);
  if (named) {
    destroyed_events.push_back(ev);  // freed with the process, as the driver would later
  } else {
    delete ev;
  }
  return CUDA_SUCCESS;
}
CUresult EventRecord(CUevent e, CUstream s) {
  LOCK;
  auto* ev = reinterpret_cast<Event*>(e);
  if (!Live(s) || !events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  Stream* st = Resolve(s);
  ev->stream = st;
  ++ev->recorded;
  Enqueue(st, Item{Item::kRecord, nullptr, ev, ev->recorded});
  return CUDA_SUCCESS;
}
CUresult EventQuery(CUevent e) {
  LOCK;
  auto* ev = reinterpret_cast<Event*>(e);
  if (!events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  return ev->reached >= ev->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult EventSynchronize(CUevent e) {
  LOCK;
  auto* ev = reinterpret_cast<Event*>(e);
  if (!events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->recorded > ev->reached && !RunRecord(ev, ev->recorded, ev->stream)) RunAll();
  return CUDA_SUCCESS;
}
CUresult EventElapsedTime(float* ms, CUevent a, CUevent b) {
  LOCK;
  auto* x = reinterpret_cast<Event*>(a);
  auto* y = reinterpret_cast<Event*>(b);
  if (!events.count(x) || !events.count(y)) return CUDA_ERROR_INVALID_HANDLE;
  if ((x->flags | y->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (x->reached < x->recorded || y->reached < y->recorded) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(y->at_ms - x->at_ms);
  return CUDA_SUCCESS;
}
bool Accessible(uintptr_t p, size_t n) {
  auto in = [&](const std::map<uintptr_t, size_t>& m) {
    auto it = m.upper_bound(p);
    if (it == m.begin()) return false;
    --it;
    return p >= it->first && p + n <= it->first + it->second;
  };
  if (in(allocs)) return true;
  // A range over several granule mappings: each byte must be mapped.
  for (uintptr_t q = p; q < p + n;) {
    auto it = mappings.upper_bound(q);
    if (it == mappings.begin()) return false;
    --it;
    if (q >= it->first + it->second) return false;
    q = it->first + it->second;
  }
  return true;
}
CUresult MemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  LOCK;
  if (!Live(s)) return CUDA_ERROR_INVALID_HANDLE;
  // Host memory the test owns is fine too (unified addressing).
  Enqueue(Resolve(s), Item{Item::kWork, [=] {
                             std::memmove(reinterpret_cast<void*>(dst),
                                          reinterpret_cast<void*>(src), n);
                           }});
  return CUDA_SUCCESS;
}
CUresult MemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  LOCK;
  if (!Live(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (!Accessible(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  Enqueue(Resolve(s), Item{Item::kWork, [=] { std::memset(reinterpret_cast<void*>(dst), v, n); }});
  return CUDA_SUCCESS;
}
CUresult LaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  LOCK;
  if (!Live(s)) return CUDA_ERROR_INVALID_HANDLE;
  Enqueue(Resolve(s), Item{Item::kWork, [=] { fn(data); }});
  return CUDA_SUCCESS;
}
int kernel_function = 0;
CUresult ModuleLoadData(CUmodule* m, const void* image) {
  LOCK;
  if (std::strstr(static_cast<const char*>(image), ".entry streampool_wait_ns") == nullptr) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  ++modules;
  *m = reinterpret_cast<CUmodule>(&kernel_function);
  return CUDA_SUCCESS;
}
CUresult ModuleUnload(CUmodule) {
  LOCK;
  --modules;
  return CUDA_SUCCESS;
}
CUresult ModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  if (std::strcmp(name, "streampool_wait_ns") != 0) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(&kernel_function);
  return CUDA_SUCCESS;
}
CUresult LaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, CUstream s, void** params, void**) {
  LOCK;
  if (f != reinterpret_cast<CUfunction>(&kernel_function) || !Live(s)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const uint64_t ns = *static_cast<uint64_t*>(params[0]);
  Enqueue(Resolve(s), Item{Item::kWork, [ns] { clock_ms += static_cast<double>(ns) / 1e6; }});
  return CUDA_SUCCESS;
}
CUresult MemAlloc(CUdeviceptr* p, size_t n) {
  LOCK;
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (mapped_bytes + n > kTotal) return CUDA_ERROR_OUT_OF_MEMORY;
  void* m = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (m == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  allocs[reinterpret_cast<uintptr_t>(m)] = n;
  mapped_bytes += n;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
CUresult MemFree(CUdeviceptr p) {
  LOCK;
  auto it = allocs.find(p);
  if (it == allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  mapped_bytes -= it->second;
  allocs.erase(it);
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult MemHostAlloc(void** p, size_t n, unsigned) {
  LOCK;
  if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  void* m = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (m == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  allocs[reinterpret_cast<uintptr_t>(m)] = n;
  *p = m;
  return CUDA_SUCCESS;
}
CUresult MemFreeHost(void* p) {
  LOCK;
  auto it = allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  allocs.erase(it);
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult MemAddressReserve(CUdeviceptr* p, size_t n, size_t align, CUdeviceptr,
                           unsigned long long) {
  LOCK;
  if (n == 0 || n % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if (align == 0) align = kGranularity;
  void* m = mmap(nullptr, n + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t base = (reinterpret_cast<uintptr_t>(m) + align - 1) / align * align;
  // Keep exactly [base, base + n): the rest goes back.
  if (base > reinterpret_cast<uintptr_t>(m)) munmap(m, base - reinterpret_cast<uintptr_t>(m));
  const uintptr_t end = reinterpret_cast<uintptr_t>(m) + n + align;
  if (end > base + n) munmap(reinterpret_cast<void*>(base + n), end - base - n);
  reservations[base] = n;
  *p = base;
  return CUDA_SUCCESS;
}
CUresult MemAddressFree(CUdeviceptr p, size_t n) {
  LOCK;
  auto it = reservations.find(p);
  if (it == reservations.end() || it->second != n) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& [b, sz] : mappings) {
    if (b >= p && b < p + n) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  }
  munmap(reinterpret_cast<void*>(p), n);
  reservations.erase(it);
  return CUDA_SUCCESS;
}
std::map<CUmemGenericAllocationHandle, size_t> handle_size;
std::map<CUmemGenericAllocationHandle, int> handle_refs;
CUmemGenericAllocationHandle next_handle = 1;
CUresult MemCreate(CUmemGenericAllocationHandle* h, size_t n, const CUmemAllocationProp* prop,
                   unsigned long long) {
  LOCK;
  if (n == 0 || n % kGranularity != 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
      prop->location.id >= device_count) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (mapped_bytes + n > kTotal) return CUDA_ERROR_OUT_OF_MEMORY;
  mapped_bytes += n;
  *h = next_handle++;
  handle_size[*h] = n;
  handle_refs[*h] = 1;
  handles.insert(*h);
  return CUDA_SUCCESS;
}
void Unref(CUmemGenericAllocationHandle h) {
  if (--handle_refs[h] == 0) {
    mapped_bytes -= handle_size[h];
    handle_size.erase(h);
    handle_refs.erase(h);
    handles.erase(h);
  }
}
CUresult MemRelease(CUmemGenericAllocationHandle h) {
  LOCK;
  if (!handles.count(h)) return CUDA_ERROR_INVALID_VALUE;
  Unref(h);
  return CUDA_SUCCESS;
}
std::map<uintptr_t, CUmemGenericAllocationHandle> mapping_handle;
CUresult MemMap(CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle h,
                unsigned long long) {
  LOCK;
  if (!handles.count(h) || offset != 0 || handle_size[h] != n) return CUDA_ERROR_INVALID_VALUE;
  bool inside = false;
  for (const auto& [b, sz] : reservations) inside |= p >= b && p + n <= b + sz;
  if (!inside) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& [b, sz] : mappings) {
    if (p < b + sz && b < p + n) return CUDA_ERROR_INVALID_VALUE;  // overlaps a mapping
  }
  // Mapped, not yet accessible: cuMemSetAccess makes it so.
  if (mmap(reinterpret_cast<void*>(p), n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
           0) == MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  mappings[p] = n;
  mapping_handle[p] = h;
  ++handle_refs[h];
  return CUDA_SUCCESS;
}
CUresult MemUnmap(CUdeviceptr p, size_t n) {
  LOCK;
  // The driver's rule: a whole mapping, never a part of one.
  auto it = mappings.find(p);
  if (it == mappings.end() || it->second != n) return CUDA_ERROR_INVALID_VALUE;
  mmap(reinterpret_cast<void*>(p), n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  Unref(mapping_handle[p]);
  mapping_handle.erase(p);
  mappings.erase(it);
  return CUDA_SUCCESS;
}
CUresult MemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc* desc, size_t count) {
  LOCK;
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
        desc[i].location.id >= device_count) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
  }
  for (uintptr_t q = p; q < p + n;) {
    auto it = mappings.find(q);
    if (it == mappings.end()) return CUDA_ERROR_INVALID_VALUE;  // not all mapped
    q += it->second;
  }
  mprotect(reinterpret_cast<void*>(p), n, PROT_READ | PROT_WRITE);
  return CUDA_SUCCESS;
}
CUresult MemGetAllocationGranularity(size_t* g, const CUmemAllocationProp*,
                                     CUmemAllocationGranularity_flags) {
  *g = kGranularity;
  return CUDA_SUCCESS;
}

const std::map<std::string, void*>& Table() {
  static const std::map<std::string, void*> table = {
      {"cuInit", reinterpret_cast<void*>(&Init)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&DriverGetVersion)},
      {"cuGetErrorName", reinterpret_cast<void*>(&GetErrorName)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&DeviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void*>(&DeviceGet)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&DeviceGetAttribute)},
      {"cuDeviceTotalMem", reinterpret_cast<void*>(&DeviceTotalMem)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&PrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&PrimaryCtxRelease)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&CtxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&CtxSetCurrent)},
      {"cuMemGetInfo", reinterpret_cast<void*>(&MemGetInfo)},
      {"cuStreamCreate", reinterpret_cast<void*>(&StreamCreate)},
      {"cuStreamDestroy", reinterpret_cast<void*>(&StreamDestroy)},
      {"cuStreamGetFlags", reinterpret_cast<void*>(&StreamGetFlags)},
      {"cuStreamGetCtx", reinterpret_cast<void*>(&StreamGetCtx)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&StreamSynchronize)},
      {"cuStreamWaitEvent", reinterpret_cast<void*>(&StreamWaitEvent)},
      {"cuEventCreate", reinterpret_cast<void*>(&EventCreate)},
      {"cuEventDestroy", reinterpret_cast<void*>(&EventDestroy)},
      {"cuEventRecord", reinterpret_cast<void*>(&EventRecord)},
      {"cuEventQuery", reinterpret_cast<void*>(&EventQuery)},
      {"cuEventSynchronize", reinterpret_cast<void*>(&EventSynchronize)},
      {"cuEventElapsedTime", reinterpret_cast<void*>(&EventElapsedTime)},
      {"cuMemcpyAsync", reinterpret_cast<void*>(&MemcpyAsync)},
      {"cuMemsetD8Async", reinterpret_cast<void*>(&MemsetD8Async)},
      {"cuLaunchHostFunc", reinterpret_cast<void*>(&LaunchHostFunc)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&LaunchKernel)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&ModuleLoadData)},
      {"cuModuleUnload", reinterpret_cast<void*>(&ModuleUnload)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&ModuleGetFunction)},
      {"cuMemAlloc", reinterpret_cast<void*>(&MemAlloc)},
      {"cuMemFree", reinterpret_cast<void*>(&MemFree)},
      {"cuMemHostAlloc", reinterpret_cast<void*>(&MemHostAlloc)},
      {"cuMemFreeHost", reinterpret_cast<void*>(&MemFreeHost)},
      {"cuMemAddressReserve", reinterpret_cast<void*>(&MemAddressReserve)},
      {"cuMemAddressFree", reinterpret_cast<void*>(&MemAddressFree)},
      {"cuMemCreate", reinterpret_cast<void*>(&MemCreate)},
      {"cuMemRelease", reinterpret_cast<void*>(&MemRelease)},
      {"cuMemMap", reinterpret_cast<void*>(&MemMap)},
      {"cuMemUnmap", reinterpret_cast<void*>(&MemUnmap)},
      {"cuMemSetAccess", reinterpret_cast<void*>(&MemSetAccess)},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&MemGetAllocationGranularity)},
  };
  return table;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  auto it = Table().find(symbol);
  if (it == Table().end()) {
    *pfn = nullptr;
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = it->second;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

// Test control.
__attribute__((visibility("default"))) void fakecuda_run(CUstream s) {
  std::lock_guard<std::recursive_mutex> l(mu);
  if (s == nullptr) {
    RunAll();
  } else {
    Run(Resolve(s), SIZE_MAX);
  }
}
__attribute__((visibility("default"))) size_t fakecuda_pending(CUstream s) {
  std::lock_guard<std::recursive_mutex> l(mu);
  return Resolve(s)->items.size();
}
// "streams", "events", "handles", "reservations", "mappings", "allocs", "modules".
__attribute__((visibility("default"))) long fakecuda_live(const char* kind) {
  std::lock_guard<std::recursive_mutex> l(mu);
  const std::string k = kind;
  if (k == "streams") return static_cast<long>(streams.size());
  if (k == "events") return static_cast<long>(events.size());
  if (k == "handles") return static_cast<long>(handles.size());
  if (k == "reservations") return static_cast<long>(reservations.size());
  if (k == "mappings") return static_cast<long>(mappings.size());
  if (k == "allocs") return static_cast<long>(allocs.size());
  if (k == "modules") return modules;
  return -1;
}
__attribute__((visibility("default"))) uint64_t fakecuda_device_memory_mapped() {
  std::lock_guard<std::recursive_mutex> l(mu);
  return mapped_bytes;
}
__attribute__((visibility("default"))) uint64_t fakecuda_calls() {
  std::lock_guard<std::recursive_mutex> l(mu);
  return calls;
}

}  // extern "C"
