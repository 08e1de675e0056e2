// CallbackMemory: chunks from user functions, so an embedder can back a pool
// with aclrtMalloc, cudaMalloc or cuMemCreate + cuMemMap.
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "streampool/physical_memory.h"

namespace streampool {
namespace {

class CallbackMemory final : public PhysicalMemory {
 public:
  explicit CallbackMemory(UpstreamCallbacks cb) : cb_(std::move(cb)) {}

  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    void* p = cb_.map(bytes);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("upstream map of ", bytes, " bytes failed"));
    }
    Mapping m;
    m.base = p;
    m.size = bytes;
    m.normal_page_bytes = bytes;
    return m;
  }
  void Unmap(const Mapping& m) override { cb_.unmap(m.base, m.size); }
  bool touchable() const override { return cb_.touchable; }
  const char* name() const override { return "callback"; }

 private:
  UpstreamCallbacks cb_;
};

}  // namespace

std::unique_ptr<PhysicalMemory> NewCallbackMemory(UpstreamCallbacks callbacks) {
  if (!callbacks.map || !callbacks.unmap) return nullptr;
  return std::make_unique<CallbackMemory>(std::move(callbacks));
}

}  // namespace streampool
