// An AscendCL program that uses an installed streampool through its AscendCL
// face: `#include "acl/acl.h"` resolves to include/streampool/acl/ (from
// streampool::acl, or pkg-config streampool-acl), one kernel launch is
// written as spaclLaunchKernel, and the rest is AscendCL as written for an
// NPU: a stream-ordered pool serves an operator's workspace. Exit status 0
// on success.
#include <cstdint>

#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
#include "spacl.h"

__global__ __aicore__ void Square(GM_ADDR v, uint32_t n) {
  auto* out = reinterpret_cast<uint32_t*>(v);
  for (uint32_t i = GetBlockIdx(); i < n; i += GetBlockNum()) out[i] = i * i;
}

int main() {
  constexpr uint32_t n = 1000;
  if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 1;
  aclrtStream s = nullptr;
  if (aclrtCreateStream(&s) != ACL_SUCCESS) return 2;
  aclrtMemPoolProps props{};
  props.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  aclrtMemPool pool = nullptr;
  if (aclrtMemPoolCreate(&pool, &props) != ACL_SUCCESS) return 3;
  void* d = nullptr;
  if (aclrtMemPoolMallocAsync(&d, n * sizeof(uint32_t), pool, s) != ACL_SUCCESS) return 4;
  // Square<<<8, nullptr, s>>>(d, n);
  if (spaclLaunchKernel(Square, 8, s, {{d, n * sizeof(uint32_t), 1}}, static_cast<uint8_t*>(d),
                        n) != ACL_SUCCESS) {
    return 5;
  }
  uint32_t host[n];
  if (aclrtMemcpyAsync(host, sizeof host, d, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST, s) !=
      ACL_SUCCESS) {
    return 6;
  }
  if (aclrtMemPoolFreeAsync(d, s) != ACL_SUCCESS) return 7;
  if (aclrtSynchronizeStream(s) != ACL_SUCCESS) return 8;
  for (uint32_t i = 0; i < n; ++i) {
    if (host[i] != i * i) return 9;
  }
  void* frame = nullptr;
  if (acldvppMalloc(&frame, 4096) != ACL_SUCCESS || acldvppFree(frame) != ACL_SUCCESS) return 10;
  if (aclrtMemPoolDestroy(pool) != ACL_SUCCESS || aclrtDestroyStream(s) != ACL_SUCCESS) return 11;
  if (aclrtResetDevice(0) != ACL_SUCCESS || aclFinalize() != ACL_SUCCESS) return 12;
  return 0;
}
