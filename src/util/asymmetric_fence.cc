#include "src/util/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

namespace streampool::internal {
namespace {

long Membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

}  // namespace

void AsymmetricFence::Init() {
  static std::once_flag once;
  std::call_once(once, [] {
    const long supported = Membarrier(MEMBARRIER_CMD_QUERY);
    const bool ok = supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                    Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    cheap_.store(ok, std::memory_order_relaxed);
  });
}

void AsymmetricFence::Heavy() {
  // Registered, the command cannot fail but for a kernel bug; the local fence
  // is then the best that can be done, as it is where the light half fences.
  if (!cheap() || Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

}  // namespace streampool::internal
