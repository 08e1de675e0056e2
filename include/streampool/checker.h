/// \file
/// What the stream-order checker finds (Runtime::CheckReports; C:
/// spCheckReport), and the accesses a kernel declares to it.
#ifndef STREAMPOOL_CHECKER_H_
#define STREAMPOOL_CHECKER_H_

#include <cstdint>
#include <string>

#include "streampool/executor.h"
#include "streampool/ids.h"

namespace streampool {

/// What the stream-order checker found (C: spCheckKind).
enum class CheckKind {
  kOutOfBounds = 1,           ///< access outside any allocation
  kUseAfterFree = 2,          ///< access after the free, or a free not ordered after an access
  kUseBeforeReady = 3,        ///< access not ordered after the allocation
  kOverlappingLifetimes = 4,  ///< pool self-check: bytes handed out while still in use
  kNoAccess = 5,              ///< a kernel on a device the allocation's pool does not grant
  kFreeWhileRegistered = 6,   ///< FreeHost of memory holding a registered host range
};

/// One finding of the stream-order checker (C: spCheckReport).
struct CheckReport {
  CheckKind kind = CheckKind::kOutOfBounds;  ///< what went wrong
  StreamId stream;              ///< the offending op (value 0 if that stream is destroyed)
  Position op_position = 0;     ///< its position in the stream (1 = first op)
  const void* ptr = nullptr;    ///< the accessed (or allocated) range's start
  uint64_t size = 0;            ///< its bytes
  StreamId other_stream;        ///< the other op involved (allocation or free), if any
  Position other_position = 0;  ///< its position in other_stream
  std::string message;          ///< both ops, addresses and sizes in words
};

/// A byte range a kernel reads or writes, for the stream-order checker
/// (C: spAccess).
struct Access {
  const void* ptr = nullptr;  ///< first byte
  uint64_t size = 0;          ///< bytes
  bool write = false;         ///< written (else read)
};

}  // namespace streampool

#endif  // STREAMPOOL_CHECKER_H_
