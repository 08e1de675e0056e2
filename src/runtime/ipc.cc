#include "src/runtime/ipc.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/memory/sys_mmap.h"
#include "src/util/check.h"

namespace streampool::internal {

// ---------------------------------------------------------- imported pool

ImportedPool::ImportedPool(int fd, const PoolFileHeader& header, Hooks hooks)
    : fd_(fd), header_(header), hooks_(std::move(hooks)) {}

ImportedPool::~ImportedPool() {
  for (auto& [offset, c] : chunks_) {
    if (hooks_.unmapped) hooks_.unmapped(c.base, c.size);
    SP_CHECK(munmap(reinterpret_cast<void*>(c.base), c.size) == 0);
  }
  close(fd_);
}

absl::StatusOr<ImportedPool::Import> ImportedPool::ImportPointer(const PtrExportData& d) {
  const auto invalid = [](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("pointer export data rejected: ", why));
  };
  if (d.magic != PtrExportData::kMagic || d.version != PtrExportData::kVersion) {
    return invalid("not streampool export data");
  }
  if (d.token != header_.token) return invalid("it belongs to another pool");
  constexpr uint64_t kPage = 4096;
  if (d.chunk_offset < PoolFileHeader::kBytes || d.chunk_offset % kPage != 0 || d.chunk_size == 0 ||
      d.chunk_size % kPage != 0 ||
      d.chunk_offset > static_cast<uint64_t>(INT64_MAX) - d.chunk_size) {
    return invalid("bad chunk");
  }
  const uint64_t g = header_.granule;
  if (d.block_size == 0 || d.block_size % g != 0 || d.offset_in_chunk % g != 0 ||
      d.offset_in_chunk > d.chunk_size || d.block_size > d.chunk_size - d.offset_in_chunk ||
      d.requested == 0 || d.requested > d.block_size) {
    return invalid("bad block");
  }
  // The file never shrinks (it is sealed), so a chunk inside it now stays
  // inside it for as long as it is mapped.
  struct stat st;
  if (fstat(fd_, &st) != 0 || d.chunk_offset + d.chunk_size > static_cast<uint64_t>(st.st_size)) {
    return invalid("the chunk lies outside the pool's file");
  }
  const ChunkKey key(d.chunk_offset, d.chunk_size);
  auto cit = chunks_.find(key);
  const bool fresh = cit == chunks_.end();
  if (!fresh) {
    const uintptr_t base = cit->second.base + d.offset_in_chunk;
    const uintptr_t end = base + d.block_size;
    auto next = live_.lower_bound(base);
    if (next != live_.end() && next->first < end) return invalid("the block is already imported");
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.block_size > base) {
        return invalid("the block is already imported");
      }
    }
  }
  if (fresh) {
    void* p = SysMmap(nullptr, d.chunk_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                      static_cast<off_t>(d.chunk_offset));
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("mapping the imported chunk failed: ", std::strerror(errno)));
    }
    ChunkMap c;
    c.base = reinterpret_cast<uintptr_t>(p);
    c.size = d.chunk_size;
    cit = chunks_.emplace(key, c).first;
    Cover(d.chunk_offset, d.chunk_size, +1);
    stats_.reserved_high = std::max(stats_.reserved_high, stats_.reserved_bytes);
    ++stats_.upstream_maps;
    if (hooks_.mapped) hooks_.mapped(c.base, c.size);
  }
  ChunkMap& c = cit->second;
  ++c.holds;
  Import imp;
  imp.base = c.base + d.offset_in_chunk;
  imp.block_size = d.block_size;
  imp.requested = d.requested;
  imp.chunk_offset = d.chunk_offset;
  imp.chunk_size = d.chunk_size;
  live_.emplace(imp.base, imp);
  stats_.used_bytes += imp.block_size;
  stats_.used_high = std::max(stats_.used_high, stats_.used_bytes);
  ++stats_.alloc_count;
  return imp;
}

const ImportedPool::Import* ImportedPool::LiveAt(uintptr_t base) const {
  auto it = live_.find(base);
  return it == live_.end() ? nullptr : &it->second;
}

const ImportedPool::Import* ImportedPool::LiveContaining(uintptr_t addr) const {
  auto it = live_.upper_bound(addr);
  if (it == live_.begin()) return nullptr;
  --it;
  return addr < it->first + it->second.block_size ? &it->second : nullptr;
}

void ImportedPool::FreeAsync(uintptr_t base, StreamIndex s, Position f) {
  auto it = live_.find(base);
  SP_CHECK(it != live_.end());
  pending_.push_back(PendingFree{s, f, {it->second.chunk_offset, it->second.chunk_size}});
  stats_.used_bytes -= it->second.block_size;
  ++stats_.free_count;
  live_.erase(it);
}

void ImportedPool::FreeNow(uintptr_t base) {
  auto it = live_.find(base);
  SP_CHECK(it != live_.end());
  const ChunkKey chunk(it->second.chunk_offset, it->second.chunk_size);
  stats_.used_bytes -= it->second.block_size;
  ++stats_.free_count;
  live_.erase(it);
  Drop(chunk);
}

void ImportedPool::Retire(const VectorClock& done) {
  // Few frees are pending at a time (each is one import); a linear pass is
  // cheaper than any index.
  std::vector<ChunkKey> drop;
  auto keep = std::remove_if(pending_.begin(), pending_.end(), [&](const PendingFree& p) {
    if (done.Get(p.stream) < p.position) return false;
    drop.push_back(p.chunk);
    return true;
  });
  pending_.erase(keep, pending_.end());
  for (const ChunkKey& chunk : drop) Drop(chunk);
}

void ImportedPool::Cover(uint64_t offset, uint64_t size, int delta) {
  // Pieces of an expandable exporter's file may overlap (the granules around
  // two blocks): reserved counts each byte of the file once, as the physical
  // memory behind the imports.
  auto bump = [this](uint64_t at, int d) {
    if ((edges_[at] += d) == 0) edges_.erase(at);
  };
  bump(offset, delta);
  bump(offset + size, -delta);
  uint64_t covered = 0, start = 0;
  int depth = 0;
  for (const auto& [at, d] : edges_) {
    if (depth == 0 && d > 0) start = at;
    depth += d;
    if (depth == 0) covered += at - start;
  }
  stats_.reserved_bytes = covered;
  stats_.normal_page_bytes = covered;
}

void ImportedPool::Drop(const ChunkKey& chunk) {
  auto it = chunks_.find(chunk);
  SP_CHECK(it != chunks_.end() && it->second.holds > 0);
  if (--it->second.holds != 0) return;
  const ChunkMap c = it->second;
  chunks_.erase(it);
  if (hooks_.unmapped) hooks_.unmapped(c.base, c.size);
  SP_CHECK(munmap(reinterpret_cast<void*>(c.base), c.size) == 0);
  Cover(chunk.first, chunk.second, -1);
  ++stats_.upstream_unmaps;
}

PoolStats ImportedPool::Stats() const {
  PoolStats s = stats_;
  s.upstream_bytes_mapped = 0;
  return s;
}

// ------------------------------------------------------ interprocess event

namespace {

// The handle's layout (64 bytes).
struct EventHandleData {
  static constexpr uint32_t kMagic = 0x56455053;  // "SPEV"
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kNameBytes = 40;
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  PoolToken token{};
  char name[kNameBytes] = {};  // NUL-terminated, "/spev-..."
};
static_assert(sizeof(EventHandleData) == 64);

constexpr char kNamePrefix[] = "/spev-";

long Futex(const void* addr, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, addr, op, val, timeout, nullptr, 0);
}

}  // namespace

// Lives in the shared mapping: only address-free lock-free atomics.
struct IpcEventSegment::Shared {
  static constexpr uint64_t kMagic = 0x5645504f4f4c5053;  // "SPLOOPEV"
  uint64_t magic;
  PoolToken token;
  std::atomic<uint64_t> recorded;
  std::atomic<uint64_t> completed;
  // Bumped at every completion; waiters sleep on it (futex words are 32-bit).
  std::atomic<uint32_t> wake;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

absl::StatusOr<std::shared_ptr<IpcEventSegment>> IpcEventSegment::Create() {
  const PoolToken token = NewToken();
  // A name no other live segment has: the pid, and random bits against a
  // name left behind by a process that died without unlinking.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const PoolToken salt = attempt == 0 ? token : NewToken();
    uint64_t r;
    std::memcpy(&r, salt.data(), sizeof r);
    char name[EventHandleData::kNameBytes];
    std::snprintf(name, sizeof name, "%s%x-%016llx", kNamePrefix, static_cast<unsigned>(getpid()),
                  static_cast<unsigned long long>(r));
    const int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      return absl::ResourceExhaustedError(absl::StrCat("shm_open: ", std::strerror(errno)));
    }
    void* p = MAP_FAILED;
    if (ftruncate(fd, sizeof(Shared)) == 0) {
      p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    const int err = errno;
    close(fd);
    if (p == MAP_FAILED) {
      shm_unlink(name);
      return absl::ResourceExhaustedError(
          absl::StrCat("preparing the event's shared memory: ", std::strerror(err)));
    }
    auto* s = new (p) Shared{Shared::kMagic, token, {0}, {0}, {0}};
    return std::shared_ptr<IpcEventSegment>(new IpcEventSegment(name, s, /*creator=*/true));
  }
  return absl::ResourceExhaustedError("no free name for the event's shared memory");
}

absl::StatusOr<std::shared_ptr<IpcEventSegment>> IpcEventSegment::Open(
    const unsigned char handle[64]) {
  const auto invalid = [](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("IPC event handle rejected: ", why));
  };
  EventHandleData h;
  std::memcpy(&h, handle, sizeof h);
  if (h.magic != EventHandleData::kMagic || h.version != EventHandleData::kVersion) {
    return invalid("not a streampool IPC event handle");
  }
  // Only names we make: a forged handle must not open arbitrary shared memory.
  const size_t len = strnlen(h.name, sizeof h.name);
  if (len == sizeof h.name || len <= sizeof kNamePrefix - 1 ||
      std::strncmp(h.name, kNamePrefix, sizeof kNamePrefix - 1) != 0 ||
      std::strchr(h.name + 1, '/') != nullptr) {
    return invalid("bad name");
  }
  const int fd = shm_open(h.name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return invalid("the event no longer exists");
  struct stat st;
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= sizeof(Shared)) {
    p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (p == MAP_FAILED) return invalid("the event's shared memory cannot be mapped");
  auto* s = static_cast<Shared*>(p);
  if (s->magic != Shared::kMagic || s->token != h.token) {
    munmap(p, sizeof(Shared));
    return invalid("the name belongs to another event");
  }
  return std::shared_ptr<IpcEventSegment>(new IpcEventSegment(h.name, s, /*creator=*/false));
}

IpcEventSegment::~IpcEventSegment() {
  munmap(shared_, sizeof(Shared));
  if (creator_) shm_unlink(name_.c_str());
}

void IpcEventSegment::WriteHandle(unsigned char handle[64]) const {
  EventHandleData h;
  h.token = shared_->token;
  std::snprintf(h.name, sizeof h.name, "%s", name_.c_str());
  std::memcpy(handle, &h, sizeof h);
}

uint64_t IpcEventSegment::BeginRecord() {
  return shared_->recorded.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void IpcEventSegment::Complete(uint64_t seq) {
  uint64_t cur = shared_->completed.load(std::memory_order_acquire);
  while (cur < seq &&
         !shared_->completed.compare_exchange_weak(cur, seq, std::memory_order_acq_rel)) {
  }
  shared_->wake.fetch_add(1, std::memory_order_acq_rel);
  Futex(&shared_->wake, FUTEX_WAKE, INT32_MAX, nullptr);
}

uint64_t IpcEventSegment::recorded() const {
  return shared_->recorded.load(std::memory_order_acquire);
}

uint64_t IpcEventSegment::completed() const {
  return shared_->completed.load(std::memory_order_acquire);
}

void IpcEventSegment::WaitComplete(uint64_t seq, const CallGate* cancel) const {
  for (;;) {
    const uint32_t w = shared_->wake.load(std::memory_order_acquire);
    if (completed() >= seq) return;
    if (cancel != nullptr && cancel->closed()) return;
    // The timeout bounds how long a missed wake-up (a completer that died
    // between its store and its wake) could delay us, and how long a
    // destroy waits for this call to see `cancel`.
    const timespec timeout{0, 50 * 1000 * 1000};
    Futex(&shared_->wake, FUTEX_WAIT, w, &timeout);
  }
}

}  // namespace streampool::internal
