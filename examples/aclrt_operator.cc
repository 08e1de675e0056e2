// examples/acl_operator.cc written with AscendCL's own names, as a CANN
// program would be: built against streampool's "acl/acl.h" and
// libstreampool-acl, with only the kernel launch changed.
//
// An aclnn operator is called in two phases: ask for its workspace size,
// then run it with a workspace. Without a stream-ordered pool the workspace
// comes from aclrtMalloc and may only be freed after aclrtSynchronizeStream.
// With aclrtMemPool the workspace is freed on the stream right after the
// launch, and the stream's next operator gets the same bytes back at once,
// while other streams cannot touch them until the free is known complete.
// Inputs are decoded frames in DVPP memory (acldvppMalloc: 128-B aligned,
// ALIGN_UP(ALIGN_UP(len, 32) + 32, 128) bytes each), fed to the operator
// without a copy. Three streams each run four operator calls; the example
// checks every result, and the stream-order checker (fatal in the test
// suite) every access.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
#include "spacl.h"

namespace {

int failures = 0;

#define EXPECT(cond)                                                                           \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "aclrt_operator: %s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

// Ends the program at the first failing acl* call.
#define CHECK_ACL(call)                                                           \
  do {                                                                            \
    const aclError err_ = (call);                                                 \
    if (err_ != ACL_SUCCESS) {                                                    \
      std::fprintf(stderr, "aclrt_operator: %s failed: error %d\n", #call, err_); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

// A toy "aclnnAdd": out[i] = x[i] + y[i] (bytes, saturating), staged through
// a workspace of one partial sum per 4 KiB tile.
aclError aclnnAddGetWorkspaceSize(uint64_t n, uint64_t* workspace_size) {
  *workspace_size = (n + 4095) / 4096 * sizeof(uint64_t) + 64 * 1024;
  return ACL_SUCCESS;
}

__global__ __aicore__ void AddKernel(GM_ADDR x, GM_ADDR y, GM_ADDR out, uint64_t n,
                                     GM_ADDR workspace) {
  auto* tiles = reinterpret_cast<uint64_t*>(workspace);
  const uint64_t share = (n + GetBlockNum() - 1) / GetBlockNum();
  const uint64_t begin = GetBlockIdx() * share;
  for (uint64_t i = begin; i < n && i < begin + share; ++i) {
    const unsigned sum = x[i] + y[i];
    out[i] = static_cast<uint8_t>(sum > 255 ? 255 : sum);
    tiles[i / 4096] += out[i];
  }
}

aclError aclnnAdd(void* workspace, uint64_t workspace_size, void* x, void* y, void* out, uint64_t n,
                  aclrtStream stream) {
  auto* ws = static_cast<uint8_t*>(workspace);
  // AddKernel<<<8, nullptr, stream>>>(x, y, out, n, ws);
  return spaclLaunchKernel(
      AddKernel, 8, stream, {{x, n, 0}, {y, n, 0}, {out, n, 1}, {ws, workspace_size, 1}},
      static_cast<uint8_t*>(x), static_cast<uint8_t*>(y), static_cast<uint8_t*>(out), n, ws);
}

}  // namespace

int main() {
  constexpr int kStreams = 3;
  constexpr int kCalls = 4;
  constexpr uint64_t kImage = 96 * 1024;  // one "decoded frame"

  CHECK_ACL(aclInit(nullptr));
  CHECK_ACL(aclrtSetDevice(0));
  aclrtMemPoolProps props{};
  props.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  props.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  props.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  aclrtMemPool pool = nullptr;
  CHECK_ACL(aclrtMemPoolCreate(&pool, &props));

  aclrtStream streams[kStreams];
  for (aclrtStream& s : streams) CHECK_ACL(aclrtCreateStream(&s));

  std::vector<void*> frames;
  std::vector<void*> outputs;
  std::printf("stream call  workspace\n");
  for (int call = 0; call < kCalls; ++call) {
    for (int k = 0; k < kStreams; ++k) {
      aclrtStream s = streams[k];
      // Two decoded frames, written by the "decoder" on the stream.
      void* x = nullptr;
      void* y = nullptr;
      CHECK_ACL(acldvppMalloc(&x, kImage));
      CHECK_ACL(acldvppMalloc(&y, kImage));
      EXPECT(reinterpret_cast<uintptr_t>(x) % 128 == 0);
      CHECK_ACL(aclrtMemsetAsync(x, kImage, 10 * k + call, kImage, s));
      CHECK_ACL(aclrtMemsetAsync(y, kImage, 100, kImage, s));
      void* out = nullptr;
      CHECK_ACL(aclrtMemPoolMallocAsync(&out, kImage, pool, s));

      // Phase 1: how much workspace? Phase 2: take it from the pool, run,
      // and give it back on the stream at once: no synchronize.
      uint64_t ws_size = 0;
      CHECK_ACL(aclnnAddGetWorkspaceSize(kImage, &ws_size));
      void* ws = nullptr;
      CHECK_ACL(aclrtMemPoolMallocAsync(&ws, ws_size, pool, s));
      // Zeroed on the stream: a reused workspace may still be in use by
      // this stream's previous operator until the stream gets here.
      CHECK_ACL(aclrtMemsetAsync(ws, ws_size, 0, ws_size, s));
      CHECK_ACL(aclnnAdd(ws, ws_size, x, y, out, kImage, s));
      CHECK_ACL(aclrtMemPoolFreeAsync(ws, s));
      std::printf("%6d %4d  %9llu\n", k, call, static_cast<unsigned long long>(ws_size));
      frames.push_back(x);
      frames.push_back(y);
      outputs.push_back(out);
    }
  }

  CHECK_ACL(aclrtSynchronizeDevice());
  std::vector<uint8_t> host(kImage);
  for (int call = 0; call < kCalls; ++call) {
    for (int k = 0; k < kStreams; ++k) {
      void* out = outputs[call * kStreams + k];
      CHECK_ACL(aclrtMemcpy(host.data(), kImage, out, kImage, ACL_MEMCPY_DEVICE_TO_HOST));
      const uint8_t want = static_cast<uint8_t>(10 * k + call + 100);
      EXPECT(host[0] == want && host[kImage - 1] == want);
      CHECK_ACL(aclrtMemPoolFreeAsync(out, nullptr));
    }
  }
  for (void* f : frames) CHECK_ACL(acldvppFree(f));

  uint64_t reserved_high = 0, used = 0;
  CHECK_ACL(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH, &reserved_high));
  CHECK_ACL(aclrtSynchronizeDevice());
  CHECK_ACL(aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT, &used));
  std::printf("pool: reserved high %llu B, used after the run %llu B\n",
              static_cast<unsigned long long>(reserved_high),
              static_cast<unsigned long long>(used));
  EXPECT(used == 0);
  // Outputs (12 x 96 KiB + 32 B rule) and the streams' workspaces fit in one
  // growth's granules: workspaces are reused, not grown.
  EXPECT(reserved_high <= uint64_t{4} << 20);

  for (aclrtStream s : streams) CHECK_ACL(aclrtDestroyStream(s));
  CHECK_ACL(aclrtMemPoolDestroy(pool));
  CHECK_ACL(aclrtResetDevice(0));
  CHECK_ACL(aclFinalize());
  if (failures != 0) {
    std::fprintf(stderr, "aclrt_operator: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("aclrt_operator: OK\n");
  return 0;
}
