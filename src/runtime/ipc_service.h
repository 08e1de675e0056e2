// IpcService: pools and pointers across processes (CUDA guide F.11) — an
// exportable pool's descriptor, a pool imported over one, a pointer's export
// data and its import. (Interprocess events are Events'; the shared
// segments and imported pools themselves are in ipc.h.)
#ifndef STREAMPOOL_SRC_RUNTIME_IPC_SERVICE_H_
#define STREAMPOOL_SRC_RUNTIME_IPC_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {

class IpcService {
 public:
  explicit IpcService(RuntimeCore& core) : c_(core) {}
  IpcService(const IpcService&) = delete;
  IpcService& operator=(const IpcService&) = delete;

  // A new close-on-exec descriptor of an exportable pool's memfd.
  absl::StatusOr<int> ExportPool(uint64_t pool);
  // An imported pool over `fd` (which stays the caller's).
  absl::StatusOr<uint64_t> ImportPool(int fd);
  absl::StatusOr<PtrExportData> ExportPointer(const void* ptr);
  absl::StatusOr<void*> ImportPointer(uint64_t pool, const PtrExportData& data);

 private:
  RuntimeCore& c_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_IPC_SERVICE_H_
