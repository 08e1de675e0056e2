#include "src/acl/vmm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace streampool::internal::acl::vmm {

namespace {

struct Physical {
  int fd = -1;
  int device = 0;
  size_t size = 0;
  int mappings = 0;
};

struct Mapping {
  size_t size = 0;
  Physical* physical = nullptr;
};

class Vmm {
 public:
  aclError Reserve(size_t size, void** out) {
    // Over-reserve, then trim both ends: mmap only promises page alignment.
    const size_t span = size + kGranularity;
    void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    const auto raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t base = (raw + kGranularity - 1) & ~(uintptr_t{kGranularity} - 1);
    if (base > raw) munmap(p, base - raw);
    if (raw + span > base + size) {
      munmap(reinterpret_cast<void*>(base + size), raw + span - (base + size));
    }
    absl::MutexLock lock(&mu_);
    reservations_[base] = size;
    *out = reinterpret_cast<void*>(base);
    return ACL_SUCCESS;
  }

  aclError Release(void* ptr) {
    const auto base = reinterpret_cast<uintptr_t>(ptr);
    absl::MutexLock lock(&mu_);
    auto r = reservations_.find(base);
    if (r == reservations_.end()) return ACL_ERROR_RT_PARAM_INVALID;
    auto m = mappings_.lower_bound(base);
    if (m != mappings_.end() && m->first < base + r->second) return ACL_ERROR_RT_PARAM_INVALID;
    munmap(ptr, r->second);
    reservations_.erase(r);
    return ACL_SUCCESS;
  }

  aclError MallocPhysical(int device, size_t size, uint64_t capacity, void** handle) {
    absl::MutexLock lock(&mu_);
    uint64_t& used = used_[device];
    if (size > capacity || used > capacity - size) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    const int fd = memfd_create("streampool-acl-physical", MFD_CLOEXEC);
    if (fd < 0) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      close(fd);
      return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    auto* p = new Physical{fd, device, size, 0};
    physicals_.emplace(p, true);
    used += size;
    *handle = p;
    return ACL_SUCCESS;
  }

  aclError FreePhysical(void* handle) {
    absl::MutexLock lock(&mu_);
    auto* p = static_cast<Physical*>(handle);
    if (physicals_.count(p) == 0 || p->mappings != 0) return ACL_ERROR_RT_PARAM_INVALID;
    close(p->fd);
    used_[p->device] -= p->size;
    physicals_.erase(p);
    delete p;
    return ACL_SUCCESS;
  }

  aclError Map(void* ptr, size_t size, void* handle) {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    absl::MutexLock lock(&mu_);
    auto* p = static_cast<Physical*>(handle);
    if (physicals_.count(p) == 0 || size != p->size || addr % kGranularity != 0 ||
        !FreeInReservation(addr, size)) {
      return ACL_ERROR_RT_PARAM_INVALID;
    }
    void* at = mmap(ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd, 0);
    if (at == MAP_FAILED) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    mappings_[addr] = Mapping{size, p};
    ++p->mappings;
    return ACL_SUCCESS;
  }

  aclError Unmap(void* ptr) {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    absl::MutexLock lock(&mu_);
    auto m = mappings_.find(addr);
    if (m == mappings_.end()) return ACL_ERROR_RT_PARAM_INVALID;
    // Address space goes back to PROT_NONE: the reservation stays whole.
    mmap(ptr, m->second.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
         -1, 0);
    --m->second.physical->mappings;
    mappings_.erase(m);
    return ACL_SUCCESS;
  }

  uint64_t PhysicalBytes(int device) {
    absl::MutexLock lock(&mu_);
    auto it = used_.find(device);
    return it == used_.end() ? 0 : it->second;
  }

 private:
  // [addr, addr + size) lies in one reservation and overlaps no mapping.
  bool FreeInReservation(uintptr_t addr, size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto r = reservations_.upper_bound(addr);
    if (r == reservations_.begin()) return false;
    --r;
    if (addr + size > r->first + r->second) return false;
    auto m = mappings_.lower_bound(addr);
    if (m != mappings_.end() && m->first < addr + size) return false;
    if (m != mappings_.begin()) {
      --m;
      if (m->first + m->second.size > addr) return false;
    }
    return true;
  }

  absl::Mutex mu_;
  std::map<uintptr_t, size_t> reservations_ ABSL_GUARDED_BY(mu_);
  std::map<uintptr_t, Mapping> mappings_ ABSL_GUARDED_BY(mu_);
  // Live handles; a handle not here is not dereferenced.
  std::map<Physical*, bool> physicals_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> used_ ABSL_GUARDED_BY(mu_);
};

// Leaked: reservations outlive every runtime, up to the process's end.
Vmm& Instance() {
  static Vmm* vmm = new Vmm;
  return *vmm;
}

}  // namespace

aclError Reserve(size_t size, void** out) { return Instance().Reserve(size, out); }
aclError Release(void* base) { return Instance().Release(base); }
aclError MallocPhysical(int device, size_t size, uint64_t capacity, void** handle) {
  return Instance().MallocPhysical(device, size, capacity, handle);
}
aclError FreePhysical(void* handle) { return Instance().FreePhysical(handle); }
aclError Map(void* addr, size_t size, void* handle) { return Instance().Map(addr, size, handle); }
aclError Unmap(void* addr) { return Instance().Unmap(addr); }
uint64_t PhysicalBytes(int device) { return Instance().PhysicalBytes(device); }

}  // namespace streampool::internal::acl::vmm
