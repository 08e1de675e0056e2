// CallbackMemory and VmmCallbackMemory: memory from user functions, so an
// embedder can back a pool with aclrtMalloc or cudaMalloc (chunks), or with
// cuMemAddressReserve + cuMemMap / aclrtReserveMemAddress + aclrtMapMem
// (reserve-then-map). Also the defaults of PhysicalMemory's optional
// reserve-then-map methods.
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "streampool/physical_memory.h"

namespace streampool {
namespace {

std::string Address(const void* p) {
  return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p)));
}

class CallbackMemory final : public PhysicalMemory {
 public:
  explicit CallbackMemory(UpstreamCallbacks cb) : cb_(std::move(cb)) {}

  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    void* p = cb_.map(bytes);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the upstream refused to map ", bytes, " bytes"));
    }
    return Mapping::OfNormalPages(p, bytes);
  }
  void Unmap(const Mapping& m) override { cb_.unmap(m.base, m.size); }
  bool touchable() const override { return cb_.touchable; }
  const char* name() const override { return "callback"; }

 private:
  UpstreamCallbacks cb_;
};

static_assert(kIsPhysicalMemory<CallbackMemory>);

// VmmCallbackMemory: an embedder's reserve-then-map functions (cuMemMap,
// aclrtMapMem and friends) behind an expandable pool. It cannot hand out
// chunks: pools over it always reserve.
class VmmCallbackMemory final : public PhysicalMemory {
 public:
  explicit VmmCallbackMemory(VmmCallbacks cb) : cb_(std::move(cb)) {}

  absl::StatusOr<Mapping> Map(uint64_t) override {
    return absl::UnimplementedError("a VMM upstream maps into reservations only");
  }
  void Unmap(const Mapping&) override {}
  bool touchable() const override { return cb_.touchable; }
  const char* name() const override { return "vmm-callback"; }

  bool can_reserve() const override { return true; }
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override {
    void* p = cb_.reserve(bytes, alignment);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the upstream refused a reservation of ", bytes, " bytes"));
    }
    if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
      // A contract break of the user's function fails the allocation, not
      // the process; the message says whose break it is.
      cb_.release(p, bytes);
      return absl::ResourceExhaustedError(
          absl::StrCat("the upstream's reservation is not aligned to ", alignment, " (it returned ",
                       Address(p), "): its reserve function broke the contract"));
    }
    return p;
  }
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override {
    if (!cb_.map(addr, bytes)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the upstream refused to map ", bytes, " bytes at ", Address(addr)));
    }
    return Mapping::OfNormalPages(addr, bytes);
  }
  void UnmapAt(const Mapping& m) override { cb_.unmap(m.base, m.size); }
  void ReleaseReservation(void* base, uint64_t bytes) override { cb_.release(base, bytes); }

 private:
  VmmCallbacks cb_;
};

static_assert(kIsPhysicalMemory<VmmCallbackMemory>);

}  // namespace

absl::StatusOr<void*> PhysicalMemory::Reserve(uint64_t, uint64_t) {
  return absl::UnimplementedError(absl::StrCat("the ", name(), " upstream cannot reserve"));
}
absl::StatusOr<Mapping> PhysicalMemory::MapAt(void*, uint64_t) {
  return absl::UnimplementedError(absl::StrCat("the ", name(), " upstream cannot reserve"));
}
void PhysicalMemory::UnmapAt(const Mapping&) {}
void PhysicalMemory::ReleaseReservation(void*, uint64_t) {}

std::unique_ptr<PhysicalMemory> NewCallbackMemory(UpstreamCallbacks callbacks) {
  if (!callbacks.map || !callbacks.unmap) return nullptr;
  return std::make_unique<CallbackMemory>(std::move(callbacks));
}

std::unique_ptr<PhysicalMemory> NewVmmCallbackMemory(VmmCallbacks callbacks) {
  if (!callbacks.reserve || !callbacks.map || !callbacks.unmap || !callbacks.release) {
    return nullptr;
  }
  return std::make_unique<VmmCallbackMemory>(std::move(callbacks));
}

}  // namespace streampool
