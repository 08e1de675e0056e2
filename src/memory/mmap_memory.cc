// HostMemory and AddressOnly: the two upstreams built on anonymous mmap. They
// differ only in protection: address-only reservations are PROT_NONE with
// MAP_NORESERVE, so an 80 GiB replay costs page tables nothing.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/memory/page_backing.h"
#include "src/memory/sys_mmap.h"
#include "src/util/check.h"
#include "streampool/physical_memory.h"

namespace streampool {
namespace {

class MmapMemory final : public PhysicalMemory {
 public:
  explicit MmapMemory(bool touchable) : touchable_(touchable) {}

  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    if (bytes == 0 || bytes % 4096 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("map size ", bytes, " is not whole pages"));
    }
    const int prot = touchable_ ? PROT_READ | PROT_WRITE : PROT_NONE;
    void* p =
        internal::SysMmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("mmap of ", bytes, " bytes failed: ", std::strerror(errno)));
    }
    return Mapping::OfNormalPages(p, bytes);
  }

  void Unmap(const Mapping& mapping) override { SP_CHECK(munmap(mapping.base, mapping.size) == 0); }

  bool touchable() const override { return touchable_; }
  const char* name() const override { return touchable_ ? "host" : "address-only"; }

  // Expandable pools: a PROT_NONE reservation whose granules are mapped in
  // place (address-only memory leaves them PROT_NONE: nothing to map).
  bool can_reserve() const override { return true; }
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override {
    return internal::ReserveAddressRange(bytes, alignment);
  }
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override {
    return internal::MapAnonymousAt(addr, bytes, touchable_);
  }
  void UnmapAt(const Mapping& m) override {
    if (touchable_) internal::UnmapToReservation(m.base, m.size);
  }
  void ReleaseReservation(void* base, uint64_t bytes) override {
    internal::ReleaseAddressRange(base, bytes);
  }

 private:
  const bool touchable_;
};

static_assert(kIsPhysicalMemory<MmapMemory>);

}  // namespace

std::unique_ptr<PhysicalMemory> NewHostMemory() { return std::make_unique<MmapMemory>(true); }
std::unique_ptr<PhysicalMemory> NewAddressOnlyMemory() {
  return std::make_unique<MmapMemory>(false);
}

}  // namespace streampool
