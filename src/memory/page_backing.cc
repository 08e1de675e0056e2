#include "src/memory/page_backing.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/memory/sys_mmap.h"
#include "src/util/check.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace streampool::internal {
namespace {

constexpr int kAnon = MAP_PRIVATE | MAP_ANONYMOUS;

// An `alignment`-aligned anonymous range of `bytes` with protection `prot`
// (THP needs 2 MiB alignment). Over-reserves by the alignment and trims the
// ends.
void* MapAligned(uint64_t bytes, int prot, int extra_flags, uint64_t alignment = kHugePageSize) {
  if (bytes > UINT64_MAX - alignment) return nullptr;
  const uint64_t span = bytes + alignment;
  void* raw = SysMmap(nullptr, span, prot, kAnon | extra_flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto r = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (r + alignment - 1) & ~(alignment - 1);
  if (start > r) munmap(raw, start - r);
  const uintptr_t end = start + bytes;
  if (r + span > end) munmap(reinterpret_cast<void*>(end), r + span - end);
  return reinterpret_cast<void*>(start);
}

// Touches every page now so a shortage is an error here, never a fault later.
bool Prefault(void* p, uint64_t bytes) {
  if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return true;
  if (errno != EINVAL) return false;  // EINVAL: kernel without POPULATE_WRITE
  for (uint64_t off = 0; off < bytes; off += 4096) static_cast<volatile char*>(p)[off] = 0;
  return true;
}

// Explicit huge pages (hugetlbfs pool). Returns null where the system has none.
void* MapHugeTlb(const PageRequest& req) {
  const int flags = kAnon | MAP_HUGETLB | MAP_POPULATE | (req.fixed ? MAP_FIXED : 0);
  void* p = SysMmap(req.fixed, req.bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  // MAP_POPULATE does not report a shortage; the kernel's reservation at mmap
  // time does (MAP_HUGETLB without MAP_NORESERVE reserves the pages).
  return p;
}

void* MapNormal(const PageRequest& req) {
  if (req.fixed != nullptr) {
    void* p = SysMmap(req.fixed, req.bytes, PROT_READ | PROT_WRITE, kAnon | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  return MapAligned(req.bytes, PROT_READ | PROT_WRITE, 0);
}

void ReleaseRange(void* p, uint64_t bytes, bool keep_reserved) {
  if (keep_reserved) {
    void* q = mmap(p, bytes, PROT_NONE, kAnon | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (q == MAP_FAILED) {
      // Splitting the mapping would pass vm.max_map_count: give the pages
      // back without changing the mapping (the range stays accessible, as
      // zero pages on next touch, but holds no memory).
      SP_CHECK(madvise(p, bytes, MADV_DONTNEED) == 0);
      return;
    }
    SP_CHECK(q == p);
  } else {
    SP_CHECK(munmap(p, bytes) == 0);
  }
}

}  // namespace

absl::StatusOr<void*> ReserveAddressRange(uint64_t bytes, uint64_t alignment) {
  if (bytes == 0 || bytes % kHugePageSize != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reservation of ", bytes, " bytes is not whole 2 MiB granules"));
  }
  if (alignment < kHugePageSize) alignment = kHugePageSize;
  if ((alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError("reservation alignment is not a power of two");
  }
  void* p = MapAligned(bytes, PROT_NONE, MAP_NORESERVE, alignment);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "reserving ", bytes, " bytes of address space failed: ", std::strerror(errno)));
  }
  return p;
}

void ReleaseAddressRange(void* base, uint64_t bytes) { SP_CHECK(munmap(base, bytes) == 0); }

absl::StatusOr<Mapping> MapAnonymousAt(void* addr, uint64_t bytes, bool touchable) {
  Mapping m = Mapping::OfNormalPages(addr, bytes);
  if (!touchable) return m;  // address space only: the reservation is the memory
  void* p = SysMmap(addr, bytes, PROT_READ | PROT_WRITE, kAnon | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of ", bytes, " bytes in a reservation failed: ", std::strerror(errno)));
  }
  return m;
}

void UnmapToReservation(void* addr, uint64_t bytes) { ReleaseRange(addr, bytes, true); }

uint64_t TransparentHugeBytes(const void* base, uint64_t bytes) {
  // smaps reports per VMA, and ours may have merged with a neighbour of the
  // same flags; a temporary protection change makes it a VMA of its own.
  void* p = const_cast<void*>(base);
  if (mprotect(p, bytes, PROT_READ) != 0) return 0;
  uint64_t huge_kb = 0;
  if (FILE* f = std::fopen("/proc/self/smaps", "r")) {
    char line[512];
    bool ours = false;
    const auto want = reinterpret_cast<uintptr_t>(base);
    while (std::fgets(line, sizeof line, f) != nullptr) {
      uintptr_t lo, hi;
      if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2) {
        ours = lo == want;
        continue;
      }
      uint64_t kb;
      if (ours && std::sscanf(line, "AnonHugePages: %" SCNu64 " kB", &kb) == 1) {
        huge_kb = kb;
        break;
      }
    }
    std::fclose(f);
  }
  SP_CHECK(mprotect(p, bytes, PROT_READ | PROT_WRITE) == 0);
  return std::min<uint64_t>(huge_kb * 1024, bytes);
}

absl::StatusOr<Mapping> MapPages(const PageRequest& req) {
  SP_CHECK(req.bytes > 0 && req.bytes % kHugePageSize == 0);
  // Huge pages are taken from the budget up front, so that two pools of a
  // device mapping at once cannot both pass; what was not used goes back.
  const bool huge_allowed = req.policy != PagePolicy::kNormalOnly &&
                            (req.budget == nullptr || req.budget->TryTake(req.bytes));
  auto settle = [&](uint64_t huge_used) {
    if (req.budget != nullptr && huge_allowed) req.budget->Give(req.bytes - huge_used);
  };
  if (req.policy == PagePolicy::kHugeOnly && !huge_allowed) {
    return absl::ResourceExhaustedError("huge-page budget of the device exhausted");
  }
  Mapping m;
  m.size = req.bytes;

  if (!req.touchable) {
    // Address space only: the reservation is the mapping, counted under the
    // first kind the policy and budget allow.
    void* p = req.fixed != nullptr ? req.fixed : MapAligned(req.bytes, PROT_NONE, MAP_NORESERVE);
    if (p == nullptr) {
      settle(0);
      return absl::ResourceExhaustedError("address-space reservation failed");
    }
    m.base = p;
    if (huge_allowed) {
      m.huge_page_bytes = req.bytes;
    } else {
      m.normal_page_bytes = req.bytes;
    }
    settle(m.huge_page_bytes);
    return m;
  }

  if (huge_allowed) {
    if (void* p = MapHugeTlb(req)) {
      m.base = p;
      m.huge_page_bytes = req.bytes;
      settle(m.huge_page_bytes);
      return m;
    }
    if (req.policy == PagePolicy::kHugeOnly) {
      settle(0);
      return absl::ResourceExhaustedError(absl::StrCat(
          "no explicit huge pages for ", req.bytes, " bytes (HugeOnly): ", std::strerror(errno)));
    }
  }
  void* p = MapNormal(req);
  if (p == nullptr) {
    settle(0);
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of ", req.bytes, " bytes failed: ", std::strerror(errno)));
  }
  madvise(p, req.bytes, huge_allowed ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  if (!Prefault(p, req.bytes)) {
    ReleaseRange(p, req.bytes, req.fixed != nullptr);
    settle(0);
    return absl::ResourceExhaustedError(absl::StrCat("cannot fault in ", req.bytes, " bytes"));
  }
  m.base = p;
  m.transparent_huge_page_bytes = huge_allowed ? TransparentHugeBytes(p, req.bytes) : 0;
  m.normal_page_bytes = req.bytes - m.transparent_huge_page_bytes;
  settle(m.transparent_huge_page_bytes);
  return m;
}

void UnmapPages(const Mapping& m, bool keep_reserved, HugePageBudget* budget) {
  if (budget != nullptr) budget->Give(m.huge_page_bytes + m.transparent_huge_page_bytes);
  ReleaseRange(m.base, m.size, keep_reserved);
}

}  // namespace streampool::internal
