// Handle values shared by the C and C++ APIs.
//
// A handle is a 64-bit number, never a pointer, so a stale or forged one can
// be looked up and rejected but never dereferenced:
//
//   bits 60..63  kind (1 runtime, 2 stream, 3 event, 4 pool, 5 graph, 6 graph
//                node, 7 executable graph); 0 is never valid
//   bits 36..59  runtime id, unique per process
//   bits  0..35  object id, unique per runtime, never reused
#ifndef STREAMPOOL_SRC_RUNTIME_HANDLES_H_
#define STREAMPOOL_SRC_RUNTIME_HANDLES_H_

#include <cstdint>

namespace streampool::internal {

enum class HandleKind : uint8_t {
  kRuntime = 1,
  kStream = 2,
  kEvent = 3,
  kPool = 4,
  kGraph = 5,
  kGraphNode = 6,
  kGraphExec = 7,
};

inline constexpr uint64_t kMaxRuntimeId = (uint64_t{1} << 24) - 1;
inline constexpr uint64_t kMaxObjectId = (uint64_t{1} << 36) - 1;

constexpr uint64_t MakeHandle(HandleKind kind, uint64_t runtime_id, uint64_t object_id) {
  return (uint64_t{static_cast<uint8_t>(kind)} << 60) | (runtime_id << 36) | object_id;
}
constexpr HandleKind KindOf(uint64_t h) { return static_cast<HandleKind>(h >> 60); }
constexpr uint32_t RuntimeIdOf(uint64_t h) {
  return static_cast<uint32_t>((h >> 36) & kMaxRuntimeId);
}
constexpr uint64_t ObjectIdOf(uint64_t h) { return h & kMaxObjectId; }

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_HANDLES_H_
