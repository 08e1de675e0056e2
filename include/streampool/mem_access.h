/// \file
/// Who may access a pool's memory: locations and the access a pool grants
/// them (Runtime::SetPoolAccess; CUDA guide F.10).
#ifndef STREAMPOOL_MEM_ACCESS_H_
#define STREAMPOOL_MEM_ACCESS_H_

namespace streampool {

/// Where memory can be accessed from (CUDA guide F.10; C: spMemLocationType).
enum class MemLocationType { kDevice = 1, kHost = 2 };
/// A device or the host (C: spMemLocation).
struct MemLocation {
  MemLocationType type = MemLocationType::kDevice;  ///< device or host
  int id = 0;                                       ///< the device (ignored for the host)
};
/// Access a location has to a pool's allocations (C: spMemAccessFlags).
enum class MemAccessFlags { kProtNone = 0, kProtRead = 1, kProtReadWrite = 3 };
/// One grant of spMemPoolSetAccess (C: spMemAccessDesc).
struct MemAccessDesc {
  MemLocation location;                                   ///< who
  MemAccessFlags flags = MemAccessFlags::kProtReadWrite;  ///< what access
};

}  // namespace streampool

#endif  // STREAMPOOL_MEM_ACCESS_H_
