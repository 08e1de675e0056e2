// A reserve-then-map upstream written the way an embedder writes one over a
// device SDK's virtual memory management: once over CANN (aclrtReserveMemAddress,
// aclrtMallocPhysical, aclrtMapMem, ...) behind the C API's spUpstreamVmm, and
// once over the CUDA driver API (cuMemAddressReserve, cuMemCreate, cuMemMap,
// ...) behind the C++ API's VmmCallbacks. The SDK functions are stand-ins
// (examples/vmm_standins.h, over mmap and memfd), so neither SDK is needed.
//
// What the pool asks of the upstream, and how each SDK answers it:
//  * reserve(bytes, alignment): one address range per pool, sized by the
//    pool's maxSize, no memory behind it. aclrtReserveMemAddress takes no
//    alignment (the argument is reserved), so an upstream asked for more than
//    CANN's granularity over-reserves and hands out an aligned part.
//  * map(addr, bytes): memory behind a 2 MiB-aligned run of granules. The pool
//    later unmaps any granule-aligned part of a run it mapped (release frees
//    whole granules inside free blocks), but aclrtUnmapMem and cuMemUnmap take
//    back only whole mappings. So the upstream maps every granule on its own
//    physical allocation, and unmap can then take back any set of granules.
//    On failure half-way it undoes what it mapped: the pool's contract is
//    "nothing of the range stays mapped".
//  * unmap(addr, bytes): each granule's mapping goes. CANN's physical memory
//    is freed after its unmap (aclrtFreePhysical), so the upstream keeps a
//    handle per granule; CUDA's cuMemRelease may come right after cuMemMap
//    (the mapping keeps the memory alive and cuMemUnmap frees it), so the
//    CUDA upstream keeps no handles at all.
//  * release(addr, bytes): the address range goes, once nothing in it is
//    mapped.
//
// Each part allocates and frees on two streams, synchronizes with the release
// threshold at 0 (so the sync unmaps the granules of free memory), prints
// every upstream call with the SDK calls it made, and checks the counts:
// every map is of whole 2 MiB granules, every map is undone by the end, every
// physical allocation is freed, every reservation released.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/vmm_standins.h"
#include "streampool/physical_memory.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace {

int failures = 0;

#define EXPECT(cond)                                                                         \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "vmm_upstream: %s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                            \
    }                                                                                        \
  } while (0)

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGranule = 2 * kMiB;  // the pool's granule (docs/design.md "Block lifecycle")

// What an upstream was asked to do, in granules, for the checks at the end.
struct UpstreamTally {
  int reserves = 0;
  int releases = 0;
  int maps = 0;
  int unmaps = 0;
  int failed_maps = 0;
  int64_t granules_mapped = 0;
  int64_t granules_unmapped = 0;
  int not_whole_granules = 0;  // map or unmap calls not on 2 MiB boundaries
};

bool WholeGranules(const void* addr, size_t bytes) {
  return bytes != 0 && bytes % kGranule == 0 && reinterpret_cast<uintptr_t>(addr) % kGranule == 0;
}

// Names addresses "r<k>+<offset> MiB": reservation k is the k-th one the
// upstream handed out. Raw addresses differ from run to run; these do not.
class ReservationNames {
 public:
  void Add(const void* base, size_t bytes) {
    live_[reinterpret_cast<uintptr_t>(base)] = Range{next_++, bytes};
  }
  void Remove(const void* base) { live_.erase(reinterpret_cast<uintptr_t>(base)); }
  std::string Name(const void* p) const {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto it = live_.upper_bound(addr);
    if (it == live_.begin()) return "?";
    --it;
    if (addr >= it->first + it->second.bytes) return "?";
    char buf[48];
    std::snprintf(buf, sizeof buf, "r%d+%zu MiB", it->second.index, (addr - it->first) / kMiB);
    return buf;
  }

 private:
  struct Range {
    int index;
    size_t bytes;
  };
  std::map<uintptr_t, Range> live_;
  int next_ = 0;
};

// ============================================================ CANN, C API

// The upstream's state, passed to every function as `user`.
struct AclUpstream {
  aclrtPhysicalMemProp prop{};
  size_t granularity = 0;
  // Each mapped granule's physical memory, freed when the granule is unmapped.
  std::map<uintptr_t, aclrtDrvMemHandle> granules;
  // Reservation as handed to the pool -> as CANN gave it (they differ when
  // the pool asked for more alignment than CANN's own).
  std::map<uintptr_t, void*> reservations;
  ReservationNames names;
  UpstreamTally tally;
};

void* AclReserve(size_t bytes, size_t alignment, void* user) {
  auto* up = static_cast<AclUpstream*>(user);
  ++up->tally.reserves;
  const size_t slack = alignment > up->granularity ? alignment : 0;
  void* raw = nullptr;
  // flags 1: huge pages, matching ACL_HBM_MEM_HUGE of the physical memory.
  if (aclrtReserveMemAddress(&raw, bytes + slack, /*alignment=*/0, /*expectPtr=*/nullptr,
                             /*flags=*/1) != ACL_SUCCESS) {
    std::printf("  reserve %zu MiB: aclrtReserveMemAddress failed\n", bytes / kMiB);
    return nullptr;
  }
  uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  if (slack != 0) base = (base + alignment - 1) & ~(uintptr_t{alignment} - 1);
  up->reservations[base] = raw;
  up->names.Add(reinterpret_cast<void*>(base), bytes);
  std::printf("  reserve %zu MiB, alignment %zu MiB: aclrtReserveMemAddress -> %s\n", bytes / kMiB,
              alignment / kMiB, up->names.Name(reinterpret_cast<void*>(base)).c_str());
  return reinterpret_cast<void*>(base);
}

// Unmaps and frees the granules [addr, addr + bytes) that this upstream
// mapped; the SDK calls it makes are the caller's to print.
void AclUnmapGranules(AclUpstream* up, uintptr_t addr, size_t bytes) {
  for (uintptr_t g = addr; g < addr + bytes; g += up->granularity) {
    auto it = up->granules.find(g);
    if (it == up->granules.end()) continue;
    if (aclrtUnmapMem(reinterpret_cast<void*>(g)) != ACL_SUCCESS ||
        aclrtFreePhysical(it->second) != ACL_SUCCESS) {
      std::fprintf(stderr, "vmm_upstream: CANN refused to unmap or free a granule\n");
      ++failures;
    }
    up->granules.erase(it);
  }
}

int AclMap(void* addr, size_t bytes, void* user) {
  auto* up = static_cast<AclUpstream*>(user);
  ++up->tally.maps;
  if (!WholeGranules(addr, bytes)) ++up->tally.not_whole_granules;
  const auto start = reinterpret_cast<uintptr_t>(addr);
  for (uintptr_t g = start; g < start + bytes; g += up->granularity) {
    aclrtDrvMemHandle handle = nullptr;
    if (aclrtMallocPhysical(&handle, up->granularity, &up->prop, 0) != ACL_SUCCESS) {
      AclUnmapGranules(up, start, g - start);
      ++up->tally.failed_maps;
      std::printf("  map     %s, %zu MiB: aclrtMallocPhysical failed; undone\n",
                  up->names.Name(addr).c_str(), bytes / kMiB);
      return -1;
    }
    if (aclrtMapMem(reinterpret_cast<void*>(g), up->granularity, 0, handle, 0) != ACL_SUCCESS) {
      aclrtFreePhysical(handle);
      AclUnmapGranules(up, start, g - start);
      ++up->tally.failed_maps;
      std::printf("  map     %s, %zu MiB: aclrtMapMem failed; undone\n",
                  up->names.Name(addr).c_str(), bytes / kMiB);
      return -1;
    }
    up->granules[g] = handle;
  }
  const size_t n = bytes / up->granularity;
  up->tally.granules_mapped += n;
  std::printf("  map     %s, %zu MiB: %zu x (aclrtMallocPhysical, aclrtMapMem)\n",
              up->names.Name(addr).c_str(), bytes / kMiB, n);
  return 0;
}

void AclUnmap(void* addr, size_t bytes, void* user) {
  auto* up = static_cast<AclUpstream*>(user);
  ++up->tally.unmaps;
  if (!WholeGranules(addr, bytes)) ++up->tally.not_whole_granules;
  AclUnmapGranules(up, reinterpret_cast<uintptr_t>(addr), bytes);
  const size_t n = bytes / up->granularity;
  up->tally.granules_unmapped += n;
  std::printf("  unmap   %s, %zu MiB: %zu x (aclrtUnmapMem, aclrtFreePhysical)\n",
              up->names.Name(addr).c_str(), bytes / kMiB, n);
}

void AclRelease(void* addr, size_t bytes, void* user) {
  auto* up = static_cast<AclUpstream*>(user);
  ++up->tally.releases;
  auto it = up->reservations.find(reinterpret_cast<uintptr_t>(addr));
  if (it == up->reservations.end() || aclrtReleaseMemAddress(it->second) != ACL_SUCCESS) {
    std::fprintf(stderr, "vmm_upstream: CANN refused to release a reservation\n");
    ++failures;
  }
  std::printf("  release %s, %zu MiB: aclrtReleaseMemAddress\n", up->names.Name(addr).c_str(),
              bytes / kMiB);
  if (it != up->reservations.end()) up->reservations.erase(it);
  up->names.Remove(addr);
}

#define CHECK(call)                                                                       \
  do {                                                                                    \
    const spError_t err_ = (call);                                                        \
    if (err_ != spSuccess) {                                                              \
      std::fprintf(stderr, "vmm_upstream: %s failed: %s\n", #call, spGetErrorName(err_)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

spMemPoolStats Stats(spMemPool_t pool) {
  spMemPoolStats s;
  std::memset(&s, 0, sizeof s);
  if (spMemPoolGetStats(pool, &s) != spSuccess) ++failures;
  return s;
}

int RunCann() {
  std::printf("== CANN upstream (spUpstreamVmm, C API) ==\n");
  AclUpstream acl;
  acl.prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  acl.prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  acl.prop.memAttr = ACL_HBM_MEM_HUGE;
  acl.prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  acl.prop.location.id = 0;
  if (aclrtMemGetAllocationGranularity(&acl.prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
                                       &acl.granularity) != ACL_SUCCESS ||
      kGranule % acl.granularity != 0) {
    // Per-granule mappings need CANN's granularity to divide the pool's.
    std::fprintf(stderr, "vmm_upstream: CANN granularity does not divide 2 MiB\n");
    return 1;
  }

  spRuntime_t rt;
  CHECK(spRuntimeCreate(&rt, nullptr));
  spUpstreamVmm up;
  std::memset(&up, 0, sizeof up);
  up.reserve = AclReserve;
  up.map = AclMap;
  up.unmap = AclUnmap;
  up.release = AclRelease;
  up.user = &acl;
  up.touchable = 1;  // the stand-ins' memory is host memory
  spMemPoolProps props;
  std::memset(&props, 0, sizeof props);
  props.allocType = spMemAllocationTypeDevice;
  props.maxSize = 32 * kMiB;  // the reservation's size
  spMemPool_t pool;
  CHECK(spMemPoolCreateWithVmmUpstream(&pool, rt, &props, &up));
  int growth = 0;
  CHECK(spMemPoolGetAttribute(pool, spMemPoolAttrGrowth, &growth));
  EXPECT(growth == spPoolGrowthExpandable);
  uint64_t threshold = 0;  // every sync gives back the granules of free memory
  CHECK(spMemPoolSetAttribute(pool, spMemPoolAttrReleaseThreshold, &threshold));

  spStream_t s0, s1;
  CHECK(spStreamCreate(&s0, rt, 0, spStreamNonBlocking));
  CHECK(spStreamCreate(&s1, rt, 0, spStreamNonBlocking));

  std::printf("s0: x = 3 MiB\n");
  void* x = nullptr;
  CHECK(spMallocFromPoolAsync(&x, 3 * kMiB, pool, s0));
  std::printf("s1: y = 5 MiB\n");
  void* y = nullptr;
  CHECK(spMallocFromPoolAsync(&y, 5 * kMiB, pool, s1));
  // Real bytes through the stand-ins' mappings: filled on the streams, read
  // back after the syncs below.
  CHECK(spMemsetAsync(x, 0x5a, 3 * kMiB, s0));
  CHECK(spMemsetAsync(y, 0xa5, 5 * kMiB, s1));
  static unsigned char x_back[4096], y_back[4096];
  CHECK(spMemcpyAsync(x_back, static_cast<char*>(x) + 3 * kMiB - sizeof x_back, sizeof x_back, s0));
  CHECK(spMemcpyAsync(y_back, y, sizeof y_back, s1));
  const spAccess x_use = {x, 3 * kMiB, 1};
  const spAccess y_use = {y, 5 * kMiB, 1};
  CHECK(spLaunchKernel(s0, 10000, &x_use, 1));
  CHECK(spLaunchKernel(s1, 20000, &y_use, 1));
  std::printf("s0: free x; s1: free y\n");
  CHECK(spFreeAsync(x, s0));
  CHECK(spFreeAsync(y, s1));
  const spMemPoolStats grown = Stats(pool);

  std::printf("sync s0\n");
  CHECK(spStreamSynchronize(s0));
  const spMemPoolStats after_s0 = Stats(pool);
  std::printf("sync s1\n");
  CHECK(spStreamSynchronize(s1));
  const spMemPoolStats after_s1 = Stats(pool);
  EXPECT(x_back[0] == 0x5a && x_back[sizeof x_back - 1] == 0x5a);
  EXPECT(y_back[0] == 0xa5 && y_back[sizeof y_back - 1] == 0xa5);

  std::printf("s0: z = 2 MiB; free z; sync s0\n");
  void* z = nullptr;
  CHECK(spMallocFromPoolAsync(&z, 2 * kMiB, pool, s0));
  CHECK(spMemsetAsync(z, 0, 2 * kMiB, s0));
  CHECK(spFreeAsync(z, s0));
  CHECK(spStreamSynchronize(s0));
  const spMemPoolStats end = Stats(pool);

  CHECK(spStreamDestroy(s0));
  CHECK(spStreamDestroy(s1));
  std::printf("destroy the pool\n");
  CHECK(spMemPoolDestroy(pool));
  std::printf("destroy the runtime\n");
  CHECK(spRuntimeDestroy(rt));

  std::printf("reserved: %" PRIu64 " MiB after the frees, %" PRIu64 " after sync s0, %" PRIu64
              " after sync s1, %" PRIu64 " at the end; high %" PRIu64 " MiB\n",
              grown.reservedBytes / kMiB, after_s0.reservedBytes / kMiB,
              after_s1.reservedBytes / kMiB, end.reservedBytes / kMiB, end.reservedHigh / kMiB);

  // x maps two granules; y, 1 MiB short above x, maps two more and spans
  // both growths.
  EXPECT(grown.reservedBytes == 8 * kMiB);
  EXPECT(grown.upstreamMaps == 2);
  // Sync s0 makes x's [0, 3 MiB) READY: granule 0 lies wholly inside it and
  // goes; granule 1 still holds pending bytes of y.
  EXPECT(after_s0.reservedBytes == 6 * kMiB);
  // Sync s1 frees the rest: [0, 8 MiB) is one READY block, all unmapped. A
  // reservation with nothing mapped goes back to CANN at once (the pool
  // treats every upstream's address space as it must DVPP's shared window),
  // so z maps its granule into a new one; the next sync unmaps it again.
  EXPECT(after_s1.reservedBytes == 0);
  EXPECT(end.reservedBytes == 0);
  EXPECT(end.upstreamMaps == 3);
  EXPECT(end.reservedHigh == 8 * kMiB);

  const UpstreamTally& t = acl.tally;
  EXPECT(t.reserves >= 1 && t.releases == t.reserves);
  EXPECT(t.not_whole_granules == 0);
  EXPECT(t.failed_maps == 0);
  EXPECT(t.granules_mapped == 5);
  EXPECT(t.granules_unmapped == t.granules_mapped);
  EXPECT(acl.granules.empty() && acl.reservations.empty());
  EXPECT(vmm_standin::CallsTo("aclrtMallocPhysical") == t.granules_mapped);
  EXPECT(vmm_standin::CallsTo("aclrtMapMem") == t.granules_mapped);
  EXPECT(vmm_standin::CallsTo("aclrtUnmapMem") == t.granules_mapped);
  EXPECT(vmm_standin::CallsTo("aclrtFreePhysical") == t.granules_mapped);
  EXPECT(vmm_standin::CallsTo("aclrtReserveMemAddress") ==
         vmm_standin::CallsTo("aclrtReleaseMemAddress"));
  return 0;
}

// ============================================================ CUDA, C++ API

// The CUDA upstream as a class: VmmCallbacks are std::functions, so they can
// capture it.
class CudaUpstream {
 public:
  explicit CudaUpstream(int device) {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device;
    access_.location = prop_.location;
    access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cuMemGetAllocationGranularity(&granularity_, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
        CUDA_SUCCESS) {
      granularity_ = 0;
    }
  }

  // Per-granule mappings need CUDA's granularity to divide the pool's.
  bool ok() const { return granularity_ != 0 && kGranule % granularity_ == 0; }
  const UpstreamTally& tally() const { return tally_; }

  streampool::VmmCallbacks Callbacks() {
    streampool::VmmCallbacks cb;
    cb.reserve = [this](uint64_t bytes, uint64_t alignment) { return Reserve(bytes, alignment); };
    cb.map = [this](void* addr, uint64_t bytes) { return Map(addr, bytes); };
    cb.unmap = [this](void* addr, uint64_t bytes) { Unmap(addr, bytes); };
    cb.release = [this](void* base, uint64_t bytes) { Release(base, bytes); };
    cb.touchable = true;  // the stand-ins' memory is host memory
    return cb;
  }

 private:
  void* Reserve(uint64_t bytes, uint64_t alignment) {
    ++tally_.reserves;
    CUdeviceptr base = 0;
    // CUDA honours the alignment: no over-reservation needed.
    if (cuMemAddressReserve(&base, bytes, alignment, 0, 0) != CUDA_SUCCESS) {
      std::printf("  reserve %" PRIu64 " MiB: cuMemAddressReserve failed\n", bytes / kMiB);
      return nullptr;
    }
    void* p = reinterpret_cast<void*>(static_cast<uintptr_t>(base));
    names_.Add(p, bytes);
    std::printf("  reserve %" PRIu64 " MiB, alignment %" PRIu64 " MiB: cuMemAddressReserve -> %s\n",
                bytes / kMiB, alignment / kMiB, names_.Name(p).c_str());
    return p;
  }

  bool Map(void* addr, uint64_t bytes) {
    ++tally_.maps;
    if (!WholeGranules(addr, bytes)) ++tally_.not_whole_granules;
    const auto start = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(addr));
    for (CUdeviceptr g = start; g < start + bytes; g += granularity_) {
      CUmemGenericAllocationHandle handle = 0;
      if (cuMemCreate(&handle, granularity_, &prop_, 0) != CUDA_SUCCESS) {
        return Undo(addr, bytes, g - start, "cuMemCreate");
      }
      const bool mapped = cuMemMap(g, granularity_, 0, handle, 0) == CUDA_SUCCESS;
      // The mapping holds the memory from here on; cuMemUnmap frees it.
      cuMemRelease(handle);
      if (!mapped) return Undo(addr, bytes, g - start, "cuMemMap");
    }
    if (cuMemSetAccess(start, bytes, &access_, 1) != CUDA_SUCCESS) {
      return Undo(addr, bytes, bytes, "cuMemSetAccess");
    }
    const uint64_t n = bytes / granularity_;
    tally_.granules_mapped += static_cast<int64_t>(n);
    std::printf("  map     %s, %" PRIu64 " MiB: %" PRIu64
                " x (cuMemCreate, cuMemMap, cuMemRelease), cuMemSetAccess\n",
                names_.Name(addr).c_str(), bytes / kMiB, n);
    return true;
  }

  // A failed map undoes the `done` bytes it mapped, so that nothing of the
  // range stays mapped (the pool's contract), and fails.
  bool Undo(void* addr, uint64_t bytes, uint64_t done, const char* failed) {
    UnmapGranules(reinterpret_cast<uintptr_t>(addr), done);
    ++tally_.failed_maps;
    std::printf("  map     %s, %" PRIu64 " MiB: %s failed after %" PRIu64 " MiB; undone\n",
                names_.Name(addr).c_str(), bytes / kMiB, failed, done / kMiB);
    return false;
  }

  void UnmapGranules(uintptr_t addr, uint64_t bytes) {
    for (uintptr_t g = addr; g < addr + bytes; g += granularity_) {
      if (cuMemUnmap(g, granularity_) != CUDA_SUCCESS) {
        std::fprintf(stderr, "vmm_upstream: CUDA refused to unmap a granule\n");
        ++failures;
      }
    }
  }

  void Unmap(void* addr, uint64_t bytes) {
    ++tally_.unmaps;
    if (!WholeGranules(addr, bytes)) ++tally_.not_whole_granules;
    UnmapGranules(reinterpret_cast<uintptr_t>(addr), bytes);
    const uint64_t n = bytes / granularity_;
    tally_.granules_unmapped += static_cast<int64_t>(n);
    std::printf("  unmap   %s, %" PRIu64 " MiB: %" PRIu64 " x cuMemUnmap\n",
                names_.Name(addr).c_str(), bytes / kMiB, n);
  }

  void Release(void* base, uint64_t bytes) {
    ++tally_.releases;
    if (cuMemAddressFree(reinterpret_cast<uintptr_t>(base), bytes) != CUDA_SUCCESS) {
      std::fprintf(stderr, "vmm_upstream: CUDA refused to free a reservation\n");
      ++failures;
    }
    std::printf("  release %s, %" PRIu64 " MiB: cuMemAddressFree\n", names_.Name(base).c_str(),
                bytes / kMiB);
    names_.Remove(base);
  }

  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
  size_t granularity_ = 0;
  ReservationNames names_;
  UpstreamTally tally_;
};

// Unwraps a StatusOr or ends the program with its error.
template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "vmm_upstream: %s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}
void Must(const absl::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "vmm_upstream: %s: %s\n", what, st.ToString().c_str());
    std::exit(1);
  }
}

int RunCuda() {
  std::printf("\n== CUDA upstream (VmmCallbacks, C++ API) ==\n");
  // A device with 8 MiB, so that the fourth granule cannot be had.
  vmm_standin::SetDeviceMemory(8 * kMiB);
  CudaUpstream cuda(/*device=*/0);
  if (!cuda.ok()) {
    std::fprintf(stderr, "vmm_upstream: CUDA granularity does not divide 2 MiB\n");
    return 1;
  }
  streampool::PoolStats at_failure, before_failure, grown, end;
  {
    auto rt = Must(streampool::Runtime::Create(), "Runtime::Create");
    streampool::PoolProps props;
    props.max_size = 16 * kMiB;
    props.release_threshold = 0;  // every sync gives back the granules of free memory
    const streampool::PoolId pool = Must(
        rt->CreatePool(props, streampool::NewVmmCallbackMemory(cuda.Callbacks())), "CreatePool");
    EXPECT(Must(rt->GetPoolAttribute(pool, streampool::PoolAttr::kGrowth), "kGrowth") ==
           static_cast<uint64_t>(streampool::PoolGrowth::kExpandable));
    const streampool::StreamId producer = Must(rt->CreateStream(0), "producer");
    const streampool::StreamId consumer = Must(rt->CreateStream(0), "consumer");
    const streampool::EventId produced = Must(rt->CreateEvent(), "event");

    std::printf("producer: a = 4 MiB, 20 us kernel, free a, record E\n");
    void* a = Must(rt->MallocFromPoolAsync(4 * kMiB, pool, producer), "a").ptr;
    Must(rt->MemsetAsync(a, 1, 4 * kMiB, producer), "fill a");
    const streampool::Access a_use{a, 4 * kMiB, true};
    Must(rt->LaunchKernel(producer, 20000, {&a_use, 1}), "kernel on a");
    Must(rt->FreeAsync(a, producer), "free a");
    Must(rt->RecordEvent(produced, producer), "record E");

    std::printf("consumer: wait E, b = 4 MiB (a's bytes, no map)\n");
    Must(rt->StreamWaitEvent(consumer, produced), "wait E");
    const streampool::AllocInfo b = Must(rt->MallocFromPoolAsync(4 * kMiB, pool, consumer), "b");
    EXPECT(b.rule == streampool::ReuseRule::kEventDependency);
    EXPECT(b.ptr == a);

    std::printf("consumer: c = 6 MiB (three granules; the device has two left)\n");
    before_failure = Must(rt->GetPoolStats(pool), "stats");
    absl::StatusOr<streampool::AllocInfo> c = rt->MallocFromPoolAsync(6 * kMiB, pool, consumer);
    EXPECT(absl::IsResourceExhausted(c.status()));
    at_failure = Must(rt->GetPoolStats(pool), "stats");
    // Only b's two granules are still mapped.
    const vmm_standin::Held held = vmm_standin::Live();
    EXPECT(held.mappings == 2 && held.physical_allocations == 2);

    std::printf("consumer: d = 4 MiB\n");
    void* d = Must(rt->MallocFromPoolAsync(4 * kMiB, pool, consumer), "d").ptr;
    Must(rt->MemsetAsync(b.ptr, 2, 4 * kMiB, consumer), "fill b");
    Must(rt->MemsetAsync(d, 3, 4 * kMiB, consumer), "fill d");
    Must(rt->FreeAsync(b.ptr, consumer), "free b");
    Must(rt->FreeAsync(d, consumer), "free d");
    grown = Must(rt->GetPoolStats(pool), "stats");
    std::printf("sync consumer\n");
    Must(rt->StreamSynchronize(consumer), "sync consumer");
    end = Must(rt->GetPoolStats(pool), "stats");
    EXPECT(rt->CheckReports().empty());
    std::printf("destroy the runtime\n");
  }

  std::printf("reserved: %" PRIu64 " MiB before c, %" PRIu64 " MiB after c failed, %" PRIu64
              " MiB with d, %" PRIu64 " MiB after the sync\n",
              before_failure.reserved_bytes / kMiB, at_failure.reserved_bytes / kMiB,
              grown.reserved_bytes / kMiB, end.reserved_bytes / kMiB);

  // The failed growth left nothing behind: same reserved bytes and maps, one
  // failed allocation more. (The pool tries the map in its reservation, then
  // in a new one in case address space was what ran out, and gives that back.)
  EXPECT(at_failure.reserved_bytes == before_failure.reserved_bytes);
  EXPECT(at_failure.upstream_maps == before_failure.upstream_maps);
  EXPECT(at_failure.failed_alloc_count == before_failure.failed_alloc_count + 1);
  EXPECT(grown.reserved_bytes == 8 * kMiB);
  EXPECT(end.reserved_bytes == 0);

  const UpstreamTally& t = cuda.tally();
  EXPECT(t.reserves >= 1 && t.releases == t.reserves);
  EXPECT(t.not_whole_granules == 0);
  EXPECT(t.failed_maps >= 1);
  EXPECT(t.granules_mapped == 4);
  EXPECT(t.granules_unmapped == t.granules_mapped);
  // Each failed map created and mapped two granules before the third failed,
  // and unmapped them again.
  EXPECT(vmm_standin::CallsTo("cuMemCreate") == t.granules_mapped + 3 * t.failed_maps);
  EXPECT(vmm_standin::CallsTo("cuMemMap") == t.granules_mapped + 2 * t.failed_maps);
  EXPECT(vmm_standin::CallsTo("cuMemRelease") == vmm_standin::CallsTo("cuMemMap"));
  EXPECT(vmm_standin::CallsTo("cuMemUnmap") == vmm_standin::CallsTo("cuMemMap"));
  EXPECT(vmm_standin::CallsTo("cuMemAddressReserve") == vmm_standin::CallsTo("cuMemAddressFree"));
  return 0;
}

}  // namespace

int main() {
  if (RunCann() != 0 || RunCuda() != 0) return 1;

  std::printf("\nSDK calls made:\n");
  for (const auto& [name, calls] : vmm_standin::Calls()) {
    std::printf("  %-34s %d\n", name.c_str(), calls);
  }
  // Nothing is left behind in either SDK.
  const vmm_standin::Held held = vmm_standin::Live();
  EXPECT(held.reservations == 0);
  EXPECT(held.mappings == 0);
  EXPECT(held.physical_allocations == 0);

  if (failures != 0) {
    std::fprintf(stderr, "vmm_upstream: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("vmm_upstream: OK\n");
  return 0;
}
