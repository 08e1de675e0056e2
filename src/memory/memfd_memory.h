// MemfdMemory: the upstream of an exportable (IPC) pool.
//
// One memfd per pool. Its first page is a header naming the file as an
// exported streampool pool (a magic, a version, a random token and the pool's
// placement); every chunk after it is MAP_SHARED at its own file offset, so a
// process that receives the fd maps the same physical pages. File offsets are
// handed out in increasing order and never reused, so a (token, offset) pair
// names one chunk for the life of the file: an importer's cache keyed by
// offset can never alias two chunks.
//
// The file is sealed against shrinking (F_SEAL_SHRINK) once created, so no
// process holding the fd can truncate it under another's mappings (which
// would turn their accesses into SIGBUS); an importer refuses files without
// that seal. Pages live as long as any process holds the fd or a mapping, as
// shared memory does: an exporter that exits does not take them away from an
// importer.
#ifndef STREAMPOOL_SRC_MEMORY_MEMFD_MEMORY_H_
#define STREAMPOOL_SRC_MEMORY_MEMFD_MEMORY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "streampool/physical_memory.h"

namespace streampool::internal {

// Identifies one exported pool across processes (and its pointers' export
// data). Random: it is an identity, not a secret, and decides nothing.
using PoolToken = std::array<uint8_t, 16>;

// The header page at offset 0 of an exportable pool's memfd.
struct PoolFileHeader {
  static constexpr uint64_t kMagic = 0x4350494c4f4f5053;  // "SPOOLIPC", little endian
  static constexpr uint32_t kVersion = 1;
  // Chunks start after it; a page, so every chunk offset is page aligned.
  static constexpr uint64_t kBytes = 4096;

  uint64_t magic = kMagic;
  uint32_t version = kVersion;
  uint32_t header_bytes = kBytes;
  PoolToken token{};
  int32_t device = 0;      // the pool's resident device (-1: pinned host)
  int32_t alloc_type = 1;  // streampool::AllocationType
  uint64_t granule = 256;  // block starts and sizes are multiples of it
};

class MemfdMemory final : public PhysicalMemory {
 public:
  // A new memfd named "streampool-pool" holding only the header.
  static absl::StatusOr<std::unique_ptr<MemfdMemory>> Create(int device, int alloc_type,
                                                             uint64_t granule);
  ~MemfdMemory() override;  // closes the fd; mappings still alive are the pool's to unmap
  MemfdMemory(const MemfdMemory&) = delete;
  MemfdMemory& operator=(const MemfdMemory&) = delete;

  // Grows the file by `bytes` and maps the new range MAP_SHARED.
  absl::StatusOr<Mapping> Map(uint64_t bytes) override;
  // Unmaps; the file range is not reused (see above).
  void Unmap(const Mapping& mapping) override;
  bool touchable() const override { return true; }
  const char* name() const override { return "memfd"; }

  // Expandable exportable pools: a reservation owns a file range as long as
  // itself (offset in the file = its file base + offset in the reservation),
  // so a granule always has the same file offset and export data stay valid
  // however the pool grows. Unmapping leaves the file's pages alone: an
  // importer may still map them.
  bool can_reserve() const override { return true; }
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override;
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override;
  void UnmapAt(const Mapping& mapping) override;
  void ReleaseReservation(void* base, uint64_t bytes) override;

  int fd() const { return fd_; }
  const PoolFileHeader& header() const { return header_; }
  // The file offset of the byte at `addr`, inside a chunk or a reservation.
  std::optional<uint64_t> FileOffsetOf(uintptr_t addr) const;

 private:
  MemfdMemory(int fd, const PoolFileHeader& header) : fd_(fd), header_(header) {}
  // Hands out [offset, offset + bytes) of the file, never to be reused.
  absl::StatusOr<uint64_t> TakeFileRange(uint64_t bytes);

  struct Range {
    uint64_t size;
    uint64_t file_offset;
  };
  const int fd_;
  const PoolFileHeader header_;
  uint64_t next_offset_ = PoolFileHeader::kBytes;
  uint64_t file_size_ = PoolFileHeader::kBytes;
  absl::btree_map<uintptr_t, Range> ranges_;  // chunk or reservation base -> its file range
};

// Checks that `fd` is an exported pool's memfd: a regular file sealed against
// shrinking, at least a header long, whose header has our magic and version.
// InvalidArgument for anything else.
absl::StatusOr<PoolFileHeader> ReadPoolFileHeader(int fd);

// 16 bytes from the system's random source (getrandom), or, where that is
// unavailable, from the pid, a clock and an address: tokens must differ, not
// be unguessable.
PoolToken NewToken();

static_assert(kIsPhysicalMemory<MemfdMemory>);

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_MEMORY_MEMFD_MEMORY_H_
