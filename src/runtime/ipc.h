// Interprocess pieces of the runtime (CUDA guide F.11): the export data of a
// pointer, an imported pool, and the shared-memory segment behind an
// interprocess event.
//
// An exported pool is a memfd (src/memory/memfd_memory.h). Its pointers
// travel as 64 bytes naming the pool (its token), the chunk (file offset and
// size) and the block in it; the importer maps the chunk MAP_SHARED on first
// use and sees the exporter's bytes. Nothing the importer does changes the
// exporter's pool: its frees only drop its own mappings and statistics.
//
// An interprocess event is a small POSIX shared-memory object holding two
// counters: how many records were made (by any process) and the highest
// record known complete. Recording takes the next number; the recording
// process marks it complete when its executor completes the record op.
#ifndef STREAMPOOL_SRC_RUNTIME_IPC_H_
#define STREAMPOOL_SRC_RUNTIME_IPC_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "src/memory/memfd_memory.h"
#include "src/ordering/vector_clock.h"
#include "src/util/call_gate.h"
#include "streampool/executor.h"
#include "streampool/mem_pool.h"

namespace streampool::internal {

// The layout of spMemPoolPtrExportData (64 bytes).
struct PtrExportData {
  static constexpr uint32_t kMagic = 0x58504453;  // "SDPX"
  static constexpr uint32_t kVersion = 1;
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  PoolToken token{};
  uint64_t chunk_offset = 0;  // file offset of the chunk holding the block
  uint64_t chunk_size = 0;
  uint64_t offset_in_chunk = 0;
  uint64_t requested = 0;   // the size the exporter's caller asked for
  uint64_t block_size = 0;  // the bytes the block occupies
};
static_assert(sizeof(PtrExportData) == 64);
static_assert(std::is_trivially_copyable_v<PtrExportData>);

// A pool imported from another process's (or this process's) exported pool.
// It never allocates; it maps the chunks its imports lie in, MAP_SHARED, and
// keeps a chunk mapped while an import in it is live or its free is not yet
// known complete. Not thread-safe: the owning runtime serializes calls.
class ImportedPool {
 public:
  // Called for every range mapped or unmapped (the runtime keeps its registry
  // of address ranges and its checker in step).
  struct Hooks {
    std::function<void(uintptr_t base, uint64_t size)> mapped;
    std::function<void(uintptr_t base, uint64_t size)> unmapped;
  };
  struct Import {
    uintptr_t base = 0;
    uint64_t block_size = 0;
    uint64_t requested = 0;
    uint64_t chunk_offset = 0;
    uint64_t chunk_size = 0;
  };

  // Takes ownership of `fd` (a descriptor of its own, close-on-exec).
  ImportedPool(int fd, const PoolFileHeader& header, Hooks hooks);
  ~ImportedPool();  // unmaps every chunk and closes the fd
  ImportedPool(const ImportedPool&) = delete;
  ImportedPool& operator=(const ImportedPool&) = delete;

  // Validates `data` against this pool and the file, maps its chunk if need
  // be, and returns the block's address here. InvalidArgument for data of
  // another pool, ranges outside the file or chunk, or a block that overlaps
  // a live import.
  absl::StatusOr<Import> ImportPointer(const PtrExportData& data);
  // The live import starting exactly at base, or null.
  const Import* LiveAt(uintptr_t base) const;
  // The live import containing addr, or null.
  const Import* LiveContaining(uintptr_t addr) const;
  // Ends a live import in stream order at (s, f): its chunk stays mapped until
  // that free is known complete (Retire).
  void FreeAsync(uintptr_t base, StreamIndex s, Position f);
  // Ends a live import now (spFree: the caller promises all access is done).
  void FreeNow(uintptr_t base);
  // Drops the frees `done` proves complete; unmaps chunks nothing holds.
  void Retire(const VectorClock& done);

  const PoolFileHeader& header() const { return header_; }
  // Statistics of this process's imports only: reserved = bytes mapped,
  // used = block bytes of live imports, alloc/free counts = imports / frees.
  PoolStats Stats() const;
  void ResetReservedHigh() { stats_.reserved_high = stats_.reserved_bytes; }
  void ResetUsedHigh() { stats_.used_high = stats_.used_bytes; }
  bool empty() const { return live_.empty() && pending_.empty(); }
  uint64_t mapped_bytes() const { return stats_.reserved_bytes; }

  // Attributes an imported pool stores but never acts on (it cannot allocate
  // or release), so that they read back as set; the names match MemPool's so
  // one attribute switch serves both.
  bool reuse_follow_event_dependencies() const { return follow_events_; }
  bool reuse_allow_opportunistic() const { return opportunistic_; }
  bool reuse_allow_internal_dependencies() const { return internal_deps_; }
  void set_reuse_follow_event_dependencies(bool on) { follow_events_ = on; }
  void set_reuse_allow_opportunistic(bool on) { opportunistic_ = on; }
  void set_reuse_allow_internal_dependencies(bool on) { internal_deps_ = on; }
  uint64_t release_threshold() const { return release_threshold_; }
  void set_release_threshold(uint64_t v) { release_threshold_ = v; }
  bool wait_before_growth() const { return wait_before_growth_; }
  void set_wait_before_growth(bool on) { wait_before_growth_ = on; }
  uint64_t soft_reserved_limit() const { return soft_reserved_limit_; }
  void set_soft_reserved_limit(uint64_t v) { soft_reserved_limit_ = v; }
  uint64_t reserved() const { return stats_.reserved_bytes; }
  uint64_t used() const { return stats_.used_bytes; }
  uint64_t reserved_high() const { return stats_.reserved_high; }
  uint64_t used_high() const { return stats_.used_high; }
  // An imported pool never grows: it maps the exporter's pieces per import.
  PoolGrowth growth() const { return PoolGrowth::kChunked; }
  // Kept so that it reads back; an imported pool caches nothing.
  bool front_cache() const { return front_cache_; }
  void set_front_cache(bool on) { front_cache_ = on; }

 private:
  bool front_cache_ = true;
  bool wait_before_growth_ = true;
  uint64_t soft_reserved_limit_ = UINT64_MAX;
  bool follow_events_ = true;
  bool opportunistic_ = true;
  bool internal_deps_ = true;
  uint64_t release_threshold_ = 0;

  struct ChunkMap {
    uintptr_t base = 0;
    uint64_t size = 0;
    uint64_t holds = 0;  // live imports plus frees not yet known complete
  };
  struct PendingFree {
    StreamIndex stream;
    Position position;
    std::pair<uint64_t, uint64_t> chunk;
  };
  // A mapped piece of the file by (offset, size): an expandable exporter
  // names the granules around each block, so pieces of one file may overlap.
  using ChunkKey = std::pair<uint64_t, uint64_t>;
  void Drop(const ChunkKey& chunk);
  // Adds (+1) or removes (-1) a mapped file range and recounts reserved bytes
  // as the file bytes at least one mapping covers.
  void Cover(uint64_t offset, uint64_t size, int delta);

  const int fd_;
  const PoolFileHeader header_;
  Hooks hooks_;
  absl::flat_hash_map<ChunkKey, ChunkMap> chunks_;
  // Mapped file ranges as +1 / -1 edges by file offset (see Cover).
  absl::btree_map<uint64_t, int> edges_;
  absl::btree_map<uintptr_t, Import> live_;  // by base address
  std::vector<PendingFree> pending_;
  PoolStats stats_;
};

// The shared-memory segment of an interprocess event.
class IpcEventSegment {
 public:
  // A new segment under a fresh name; the name is unlinked when this object
  // (the creating process's) is destroyed.
  static absl::StatusOr<std::shared_ptr<IpcEventSegment>> Create();
  // Opens the segment a 64-byte handle names. InvalidArgument for a handle
  // that is not one of ours or names no live segment.
  static absl::StatusOr<std::shared_ptr<IpcEventSegment>> Open(const unsigned char handle[64]);
  ~IpcEventSegment();
  IpcEventSegment(const IpcEventSegment&) = delete;
  IpcEventSegment& operator=(const IpcEventSegment&) = delete;

  void WriteHandle(unsigned char handle[64]) const;
  // The number of a new record (1, 2, ...), shared by every process.
  uint64_t BeginRecord();
  // Record `seq` has completed.
  void Complete(uint64_t seq);
  uint64_t recorded() const;
  uint64_t completed() const;
  // Blocks the calling thread until completed() >= seq.
  // Returns once record `seq` has completed, or once `cancel` is closed
  // (seen at the next poll).
  void WaitComplete(uint64_t seq, const CallGate* cancel = nullptr) const;

 private:
  struct Shared;
  IpcEventSegment(std::string name, Shared* shared, bool creator)
      : name_(std::move(name)), shared_(shared), creator_(creator) {}

  const std::string name_;
  Shared* const shared_;
  const bool creator_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_IPC_H_
