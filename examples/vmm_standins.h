// Stand-ins for the virtual memory management (VMM) calls of two device SDKs,
// so that examples/vmm_upstream.cc compiles and runs with neither installed:
//
//   CANN (AscendCL)              CUDA driver API
//   aclrtReserveMemAddress       cuMemAddressReserve
//   aclrtMallocPhysical          cuMemCreate
//   aclrtMapMem                  cuMemMap (+ cuMemSetAccess)
//   aclrtUnmapMem                cuMemUnmap
//   aclrtFreePhysical            cuMemRelease
//   aclrtReleaseMemAddress       cuMemAddressFree
//
// The declarations follow the SDKs' signatures and types (only the members and
// enumerators the example needs), so the example's upstream code reads as it
// would against acl/acl_rt.h or cuda.h. An embedder deletes this header and
// includes the SDK's instead.
//
// The behaviour is the SDKs' where the example depends on it, over mmap:
//  * a reservation is a PROT_NONE mapping of address space, aligned to the
//    2 MiB granularity;
//  * a physical allocation is a memfd of its size (memory the kernel hands out
//    on first touch);
//  * mapping puts the memfd at a fixed address inside a reservation
//    (MAP_FIXED); unmapping puts PROT_NONE address space back.
// And the rules the real drivers enforce are enforced here, each failing the
// call with an error code, so an upstream that breaks one fails visibly:
// sizes and addresses are multiples of the granularity; a map lands inside a
// reservation on unmapped address space; aclrtUnmapMem takes the address a
// mapping starts at and cuMemUnmap exactly one whole mapping (neither unmaps
// part of one); CUDA memory is inaccessible until cuMemSetAccess; CANN
// physical memory is freed only once unmapped, while CUDA's cuMemRelease may
// come first and the memory then goes with its last mapping; an address range
// is given back only with nothing mapped in it.
//
// Device memory is a budget (SetDeviceMemory) that physical allocations draw
// from, so an example can run a device out of memory. Calls are counted by
// name for the example to print and check (Calls, Live).
#ifndef STREAMPOOL_EXAMPLES_VMM_STANDINS_H_
#define STREAMPOOL_EXAMPLES_VMM_STANDINS_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

// ---------------------------------------------------------------- CANN types

typedef int aclError;
typedef void* aclrtDrvMemHandle;

static const int ACL_SUCCESS = 0;
static const int ACL_ERROR_RT_PARAM_INVALID = 107000;
static const int ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;

typedef enum aclrtMemAttr {
  ACL_DDR_MEM,
  ACL_HBM_MEM,
  ACL_DDR_MEM_HUGE,
  ACL_DDR_MEM_NORMAL,
  ACL_HBM_MEM_HUGE,
  ACL_HBM_MEM_NORMAL,
} aclrtMemAttr;

typedef enum aclrtMemLocationType {
  ACL_MEM_LOCATION_TYPE_HOST = 0,
  ACL_MEM_LOCATION_TYPE_DEVICE,
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
  uint32_t id;
  aclrtMemLocationType type;
} aclrtMemLocation;

typedef enum aclrtMemAllocationType {
  ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

typedef enum aclrtMemHandleType {
  ACL_MEM_HANDLE_TYPE_NONE = 0,
} aclrtMemHandleType;

typedef struct aclrtPhysicalMemProp {
  aclrtMemHandleType handleType;
  aclrtMemAllocationType allocationType;
  aclrtMemAttr memAttr;
  aclrtMemLocation location;
  uint64_t reserve;
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
  ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
  ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
} aclrtMemGranularityOptions;

// ---------------------------------------------------------------- CUDA types

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
} CUresult;

typedef unsigned long long CUdeviceptr;                   // NOLINT(runtime/int): the SDK's type
typedef unsigned long long CUmemGenericAllocationHandle;  // NOLINT(runtime/int)

typedef enum CUmemAllocationType_enum {
  CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
} CUmemAllocationHandleType;

typedef enum CUmemLocationType_enum {
  CU_MEM_LOCATION_TYPE_INVALID = 0x0,
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
} CUmemLocationType;

typedef struct CUmemLocation_st {
  CUmemLocationType type;
  int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;  // NOLINT(runtime/int)
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;

typedef enum CUmemAccess_flags_enum {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
} CUmemAccess_flags;

typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  CUmemAccess_flags flags;
} CUmemAccessDesc;

typedef enum CUmemAllocationGranularity_flags_enum {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
} CUmemAllocationGranularity_flags;

// ------------------------------------------------ the stand-ins' own state

namespace vmm_standin {

// Both SDKs' physical granularity on current devices (Ascend: fixed 2 MiB;
// CUDA: 2 MiB minimum on every GPU so far).
inline constexpr size_t kGranularity = size_t{2} << 20;

// One physical allocation: a memfd of `size` bytes.
struct Physical {
  int fd = -1;
  size_t size = 0;
  int mappings = 0;
  bool released = false;  // the handle was given back (CUDA: memory may outlive it)
};

struct MappingRec {
  size_t size = 0;
  Physical* physical = nullptr;
};

struct State {
  std::map<uintptr_t, size_t> reservations;  // base -> bytes
  std::map<uintptr_t, MappingRec> mappings;  // address -> mapping
  std::map<Physical*, bool> physicals;       // live allocations (handle or mapping)
  std::map<std::string, int> calls;          // SDK function -> calls, failed ones too
  size_t device_bytes = size_t{1} << 30;     // budget of physical memory
  size_t device_used = 0;
};

inline State& state() {
  static State s;
  return s;
}

// The device memory physical allocations draw from (default 1 GiB).
inline void SetDeviceMemory(size_t bytes) { state().device_bytes = bytes; }

// Calls made to each stand-in, by SDK function name.
inline const std::map<std::string, int>& Calls() { return state().calls; }
inline int CallsTo(const std::string& name) {
  auto it = state().calls.find(name);
  return it == state().calls.end() ? 0 : it->second;
}

// What is still held: reservations, mappings, physical allocations.
struct Held {
  size_t reservations = 0;
  size_t mappings = 0;
  size_t physical_allocations = 0;
};
inline Held Live() {
  return Held{state().reservations.size(), state().mappings.size(), state().physicals.size()};
}

inline bool Aligned(uintptr_t v) { return v % kGranularity == 0; }

// Address space of `bytes` aligned to `alignment` (a power of two, at least
// the granularity), with nothing behind it; 0 on failure.
inline uintptr_t ReserveRange(size_t bytes, size_t alignment) {
  if (bytes == 0 || !Aligned(bytes)) return 0;
  if (alignment < kGranularity) alignment = kGranularity;
  void* p = mmap(nullptr, bytes + alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return 0;
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = (raw + alignment - 1) & ~(uintptr_t{alignment} - 1);
  // Trim the slack on both sides, so that the reservation is exactly
  // [base, base + bytes).
  if (base > raw) munmap(p, base - raw);
  const uintptr_t end = raw + bytes + alignment;
  if (end > base + bytes) munmap(reinterpret_cast<void*>(base + bytes), end - (base + bytes));
  state().reservations[base] = bytes;
  return base;
}

// Whether [addr, addr + bytes) lies in one reservation and touches no mapping.
inline bool FreeInReservation(uintptr_t addr, size_t bytes) {
  State& s = state();
  auto r = s.reservations.upper_bound(addr);
  if (r == s.reservations.begin()) return false;
  --r;
  if (addr + bytes > r->first + r->second) return false;
  auto m = s.mappings.lower_bound(addr);
  if (m != s.mappings.end() && m->first < addr + bytes) return false;
  if (m != s.mappings.begin()) {
    --m;
    if (m->first + m->second.size > addr) return false;
  }
  return true;
}

inline bool GiveBackRange(uintptr_t base) {
  State& s = state();
  auto r = s.reservations.find(base);
  if (r == s.reservations.end()) return false;
  auto m = s.mappings.lower_bound(base);
  if (m != s.mappings.end() && m->first < base + r->second) return false;  // still mapped
  munmap(reinterpret_cast<void*>(base), r->second);
  s.reservations.erase(r);
  return true;
}

inline Physical* NewPhysical(size_t bytes) {
  State& s = state();
  if (bytes == 0 || !Aligned(bytes)) return nullptr;
  if (s.device_used + bytes > s.device_bytes) return nullptr;
  const int fd = memfd_create("vmm-standin", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return nullptr;
  }
  auto* p = new Physical{fd, bytes};
  s.physicals[p] = true;
  s.device_used += bytes;
  return p;
}

// The memory goes once nothing holds it: neither a handle nor a mapping.
inline void MaybeFreePhysical(Physical* p) {
  if (!p->released || p->mappings > 0) return;
  close(p->fd);
  state().device_used -= p->size;
  state().physicals.erase(p);
  delete p;
}

inline bool IsPhysical(Physical* p) { return p != nullptr && state().physicals.count(p) != 0; }

inline bool MapPhysical(uintptr_t addr, size_t bytes, size_t offset, Physical* p, int prot) {
  if (!IsPhysical(p) || p->released || !Aligned(addr) || bytes == 0 || !Aligned(bytes) ||
      !Aligned(offset) || offset + bytes > p->size || !FreeInReservation(addr, bytes)) {
    return false;
  }
  void* at = mmap(reinterpret_cast<void*>(addr), bytes, prot, MAP_SHARED | MAP_FIXED, p->fd,
                  static_cast<off_t>(offset));
  if (at == MAP_FAILED) return false;
  state().mappings[addr] = MappingRec{bytes, p};
  ++p->mappings;
  return true;
}

// Unmaps the mapping that starts at addr, if it is `bytes` long (any length
// when bytes is 0), and puts PROT_NONE address space back.
inline bool UnmapPhysical(uintptr_t addr, size_t bytes) {
  State& s = state();
  auto m = s.mappings.find(addr);
  if (m == s.mappings.end() || (bytes != 0 && m->second.size != bytes)) return false;
  const size_t size = m->second.size;
  mmap(reinterpret_cast<void*>(addr), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  Physical* p = m->second.physical;
  s.mappings.erase(m);
  --p->mappings;
  MaybeFreePhysical(p);
  return true;
}

inline void Count(const char* name) { ++state().calls[name]; }

}  // namespace vmm_standin

// ------------------------------------------------------------ CANN functions

inline aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                                 aclrtMemGranularityOptions option,
                                                 size_t* granularity) {
  vmm_standin::Count("aclrtMemGetAllocationGranularity");
  (void)option;
  if (prop == nullptr || granularity == nullptr) return ACL_ERROR_RT_PARAM_INVALID;
  *granularity = vmm_standin::kGranularity;
  return ACL_SUCCESS;
}

// alignment and expectPtr are reserved (0 and nullptr): CANN picks the
// address, aligned to its granularity.
inline aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment,
                                       void* expectPtr, uint64_t flags) {
  vmm_standin::Count("aclrtReserveMemAddress");
  (void)flags;  // page kind: 0 normal, 1 huge; the stand-in has one kind
  if (virPtr == nullptr || alignment != 0 || expectPtr != nullptr) {
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  const uintptr_t base = vmm_standin::ReserveRange(size, vmm_standin::kGranularity);
  if (base == 0) return ACL_ERROR_RT_MEMORY_ALLOCATION;
  *virPtr = reinterpret_cast<void*>(base);
  return ACL_SUCCESS;
}

inline aclError aclrtReleaseMemAddress(void* virPtr) {
  vmm_standin::Count("aclrtReleaseMemAddress");
  return vmm_standin::GiveBackRange(reinterpret_cast<uintptr_t>(virPtr))
             ? ACL_SUCCESS
             : ACL_ERROR_RT_PARAM_INVALID;
}

inline aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                                    const aclrtPhysicalMemProp* prop, uint64_t flags) {
  vmm_standin::Count("aclrtMallocPhysical");
  if (handle == nullptr || prop == nullptr || flags != 0 ||
      prop->location.type != ACL_MEM_LOCATION_TYPE_DEVICE) {
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  vmm_standin::Physical* p = vmm_standin::NewPhysical(size);
  if (p == nullptr) return ACL_ERROR_RT_MEMORY_ALLOCATION;
  *handle = p;
  return ACL_SUCCESS;
}

// Only unmapped memory may be freed.
inline aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
  vmm_standin::Count("aclrtFreePhysical");
  auto* p = static_cast<vmm_standin::Physical*>(handle);
  if (!vmm_standin::IsPhysical(p) || p->released || p->mappings != 0) {
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  p->released = true;
  vmm_standin::MaybeFreePhysical(p);
  return ACL_SUCCESS;
}

// offset is reserved (0): a handle maps whole. The mapping is accessible at
// once.
inline aclError aclrtMapMem(void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                            uint64_t flags) {
  vmm_standin::Count("aclrtMapMem");
  auto* p = static_cast<vmm_standin::Physical*>(handle);
  if (offset != 0 || flags != 0 || !vmm_standin::IsPhysical(p) || size != p->size ||
      !vmm_standin::MapPhysical(reinterpret_cast<uintptr_t>(virPtr), size, 0, p,
                                PROT_READ | PROT_WRITE)) {
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  return ACL_SUCCESS;
}

// Takes the address a mapping starts at; the whole mapping goes.
inline aclError aclrtUnmapMem(void* virPtr) {
  vmm_standin::Count("aclrtUnmapMem");
  return vmm_standin::UnmapPhysical(reinterpret_cast<uintptr_t>(virPtr), 0)
             ? ACL_SUCCESS
             : ACL_ERROR_RT_PARAM_INVALID;
}

// ------------------------------------------------------------ CUDA functions

inline CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                              CUmemAllocationGranularity_flags option) {
  vmm_standin::Count("cuMemGetAllocationGranularity");
  (void)option;
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = vmm_standin::kGranularity;
  return CUDA_SUCCESS;
}

// addr (a hint) and flags are ignored here; alignment 0 means the
// granularity.
inline CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags) {  // NOLINT
  vmm_standin::Count("cuMemAddressReserve");
  (void)addr;
  (void)flags;
  if (ptr == nullptr || (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  const uintptr_t base = vmm_standin::ReserveRange(size, alignment);
  if (base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = base;
  return CUDA_SUCCESS;
}

inline CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  vmm_standin::Count("cuMemAddressFree");
  auto r = vmm_standin::state().reservations.find(ptr);
  if (r == vmm_standin::state().reservations.end() || r->second != size ||
      !vmm_standin::GiveBackRange(ptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

inline CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                            const CUmemAllocationProp* prop, unsigned long long flags) {  // NOLINT
  vmm_standin::Count("cuMemCreate");
  if (handle == nullptr || prop == nullptr || flags != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  vmm_standin::Physical* p = vmm_standin::NewPhysical(size);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

// May come before the memory is unmapped: the memory then lives until its
// last mapping goes.
inline CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  vmm_standin::Count("cuMemRelease");
  auto* p = reinterpret_cast<vmm_standin::Physical*>(static_cast<uintptr_t>(handle));
  if (!vmm_standin::IsPhysical(p) || p->released) return CUDA_ERROR_INVALID_VALUE;
  p->released = true;
  vmm_standin::MaybeFreePhysical(p);
  return CUDA_SUCCESS;
}

// The mapping starts with no access: cuMemSetAccess grants it.
inline CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {  // NOLINT
  vmm_standin::Count("cuMemMap");
  auto* p = reinterpret_cast<vmm_standin::Physical*>(static_cast<uintptr_t>(handle));
  if (flags != 0 || !vmm_standin::MapPhysical(ptr, size, offset, p, PROT_NONE)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Grants read/write access over whole mappings.
inline CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                               size_t count) {
  vmm_standin::Count("cuMemSetAccess");
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  auto& mappings = vmm_standin::state().mappings;
  for (uintptr_t at = ptr; at < ptr + size;) {
    auto m = mappings.find(at);
    if (m == mappings.end() || at + m->second.size > ptr + size) return CUDA_ERROR_INVALID_VALUE;
    at += m->second.size;
  }
  int prot = PROT_NONE;
  if (desc[0].flags == CU_MEM_ACCESS_FLAGS_PROT_READ) prot = PROT_READ;
  if (desc[0].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
  return mprotect(reinterpret_cast<void*>(ptr), size, prot) == 0 ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_VALUE;
}

// Exactly one whole mapping: never part of one.
inline CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  vmm_standin::Count("cuMemUnmap");
  return vmm_standin::UnmapPhysical(ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#endif  // STREAMPOOL_EXAMPLES_VMM_STANDINS_H_
