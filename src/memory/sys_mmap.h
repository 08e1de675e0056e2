// The memory layer's one way to call mmap, so tests can make the n-th call
// fail (src/util/fault.h) and see every caller turn it into a clean error.
#ifndef STREAMPOOL_SRC_MEMORY_SYS_MMAP_H_
#define STREAMPOOL_SRC_MEMORY_SYS_MMAP_H_

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>

#include "src/util/fault.h"

namespace streampool::internal {

inline void* SysMmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) {
  if (FaultInjection::ShouldFail(Fault::kMmap)) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  return mmap(addr, len, prot, flags, fd, offset);
}

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_MEMORY_SYS_MMAP_H_
