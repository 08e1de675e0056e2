// HostMemory and AddressOnly: the two upstreams built on anonymous mmap. They
// differ only in protection: address-only reservations are PROT_NONE with
// MAP_NORESERVE, so an 80 GiB replay costs page tables nothing.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
    void* p = mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("mmap of ", bytes, " bytes failed: ", std::strerror(errno)));
    }
    Mapping m;
    m.base = p;
    m.size = bytes;
    m.normal_page_bytes = bytes;
    return m;
  }

  void Unmap(const Mapping& mapping) override { SP_CHECK(munmap(mapping.base, mapping.size) == 0); }

  bool touchable() const override { return touchable_; }
  const char* name() const override { return touchable_ ? "host" : "address-only"; }

 private:
  const bool touchable_;
};

}  // namespace

std::unique_ptr<PhysicalMemory> NewHostMemory() { return std::make_unique<MmapMemory>(true); }
std::unique_ptr<PhysicalMemory> NewAddressOnlyMemory() {
  return std::make_unique<MmapMemory>(false);
}

}  // namespace streampool
