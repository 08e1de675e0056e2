#include "src/memory/memfd_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/memory/page_backing.h"
#include "src/memory/sys_mmap.h"
#include "src/util/check.h"

namespace streampool::internal {
namespace {

absl::Status Errno(const char* what) {
  return absl::ResourceExhaustedError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

PoolToken NewToken() {
  PoolToken t{};
  size_t got = 0;
  while (got < t.size()) {
    const ssize_t n = getrandom(t.data() + got, t.size() - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < t.size()) {
    // No random source (an old kernel or a seccomp filter): tokens only need
    // to differ between pools, which pid, time and an address give.
    const uint64_t a =
        static_cast<uint64_t>(getpid()) ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    static int counter = 0;
    const uint64_t b = reinterpret_cast<uintptr_t>(&t) ^ static_cast<uint64_t>(++counter);
    std::memcpy(t.data(), &a, 8);
    std::memcpy(t.data() + 8, &b, 8);
  }
  return t;
}

absl::StatusOr<std::unique_ptr<MemfdMemory>> MemfdMemory::Create(int device, int alloc_type,
                                                                 uint64_t granule) {
  const int fd = memfd_create("streampool-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Errno("memfd_create");
  PoolFileHeader h;
  h.token = NewToken();
  h.device = device;
  h.alloc_type = alloc_type;
  h.granule = granule;
  if (ftruncate(fd, static_cast<off_t>(PoolFileHeader::kBytes)) != 0 ||
      pwrite(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    absl::Status st = Errno("preparing the pool's memfd");
    close(fd);
    return st;
  }
  return std::unique_ptr<MemfdMemory>(new MemfdMemory(fd, h));
}

MemfdMemory::~MemfdMemory() { close(fd_); }

absl::StatusOr<uint64_t> MemfdMemory::TakeFileRange(uint64_t bytes) {
  const uint64_t offset = next_offset_;
  if (offset > static_cast<uint64_t>(INT64_MAX) - bytes) {
    return absl::ResourceExhaustedError("the pool's file offsets are exhausted");
  }
  next_offset_ = offset + bytes;
  return offset;
}

absl::StatusOr<Mapping> MemfdMemory::Map(uint64_t bytes) {
  if (bytes == 0 || bytes % 4096 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("map size ", bytes, " is not whole pages"));
  }
  if (next_offset_ > static_cast<uint64_t>(INT64_MAX) - bytes) {
    return absl::ResourceExhaustedError("the pool's file offsets are exhausted");
  }
  const uint64_t offset = next_offset_;
  // Growing never loses data and the file only grows, so a failed map below
  // leaves at worst a sparse tail that the next Map reuses.
  if (offset + bytes > file_size_) {
    if (ftruncate(fd_, static_cast<off_t>(offset + bytes)) != 0) return Errno("ftruncate");
    file_size_ = offset + bytes;
  }
  void* p =
      SysMmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return Errno("mmap of the pool's memfd");
  next_offset_ = offset + bytes;
  ranges_.emplace(reinterpret_cast<uintptr_t>(p), Range{bytes, offset});
  return Mapping::OfNormalPages(p, bytes);
}

void MemfdMemory::Unmap(const Mapping& mapping) {
  ranges_.erase(reinterpret_cast<uintptr_t>(mapping.base));
  SP_CHECK(munmap(mapping.base, mapping.size) == 0);
}

absl::StatusOr<void*> MemfdMemory::Reserve(uint64_t bytes, uint64_t alignment) {
  absl::StatusOr<void*> p = ReserveAddressRange(bytes, alignment);
  if (!p.ok()) return p;
  absl::StatusOr<uint64_t> offset = TakeFileRange(bytes);
  if (!offset.ok()) {
    ReleaseAddressRange(*p, bytes);
    return offset.status();
  }
  ranges_.emplace(reinterpret_cast<uintptr_t>(*p), Range{bytes, *offset});
  return p;
}

absl::StatusOr<Mapping> MemfdMemory::MapAt(void* addr, uint64_t bytes) {
  const std::optional<uint64_t> offset = FileOffsetOf(reinterpret_cast<uintptr_t>(addr));
  SP_CHECK(offset.has_value());
  if (*offset + bytes > file_size_) {
    if (ftruncate(fd_, static_cast<off_t>(*offset + bytes)) != 0) return Errno("ftruncate");
    file_size_ = *offset + bytes;
  }
  void* p = SysMmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
                    static_cast<off_t>(*offset));
  if (p == MAP_FAILED) return Errno("mmap of the pool's memfd");
  return Mapping::OfNormalPages(p, bytes);
}

void MemfdMemory::UnmapAt(const Mapping& mapping) {
  UnmapToReservation(mapping.base, mapping.size);
}

void MemfdMemory::ReleaseReservation(void* base, uint64_t bytes) {
  ranges_.erase(reinterpret_cast<uintptr_t>(base));
  ReleaseAddressRange(base, bytes);
}

std::optional<uint64_t> MemfdMemory::FileOffsetOf(uintptr_t addr) const {
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (addr >= it->first + it->second.size) return std::nullopt;
  return it->second.file_offset + (addr - it->first);
}

absl::StatusOr<PoolFileHeader> ReadPoolFileHeader(int fd) {
  const auto invalid = [](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("not an exported streampool pool: ", why));
  };
  if (fd < 0) return invalid("negative file descriptor");
  struct stat st;
  if (fstat(fd, &st) != 0) return invalid("not an open file descriptor");
  if (!S_ISREG(st.st_mode)) return invalid("not a regular file");
  if (static_cast<uint64_t>(st.st_size) < PoolFileHeader::kBytes) return invalid("too short");
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) return invalid("not sealed against shrinking");
  PoolFileHeader h;
  if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return invalid("unreadable");
  if (h.magic != PoolFileHeader::kMagic) return invalid("bad magic");
  if (h.version != PoolFileHeader::kVersion || h.header_bytes != PoolFileHeader::kBytes) {
    return invalid("unknown version");
  }
  if (h.granule < 32 || (h.granule & (h.granule - 1)) != 0 || h.granule > PoolFileHeader::kBytes) {
    return invalid("bad granule");
  }
  return h;
}

}  // namespace streampool::internal
