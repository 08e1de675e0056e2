// An AscendCL-style operator call on stream-ordered memory.
//
// CANN operators are called in two phases:
//
//   aclnnAddGetWorkspaceSize(x, y, out, &workspace_size, &executor);
//   aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST);
//   aclnnAdd(workspace, workspace_size, executor, stream);
//   aclrtSynchronizeStream(stream);  // before the workspace may be freed
//   aclrtFree(workspace);
//
// With a stream-ordered pool the synchronize goes away: the workspace is freed
// on the stream right after the launch, and the stream's next operator gets
// the same bytes back at once (same-stream reuse), while other streams cannot
// touch them until the free is known complete. Inputs are media buffers from
// a DVPP pool (128-B aligned, ALIGN_UP(ALIGN_UP(len,32)+32,128) bytes each),
// as a JPEG/video decoder would produce them. Three streams each run four
// operator calls; the example checks every result and every reuse decision.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "streampool/raii.h"
#include "streampool/runtime.h"

namespace {

int failures = 0;

#define EXPECT(cond)                                                                         \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "acl_operator: %s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                            \
    }                                                                                        \
  } while (0)

// Unwraps a StatusOr or ends the program with its error.
template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "acl_operator: %s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}
void Must(absl::Status st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "acl_operator: %s: %s\n", what, st.ToString().c_str());
    std::exit(1);
  }
}

// A toy "aclnnAdd": out[i] = x[i] + y[i], staged through a workspace of one
// partial sum per 4 KiB tile (the size depends on the inputs, as real
// operators' workspaces do).
struct AddOp {
  uint64_t n;  // elements (bytes; uint8_t, saturating)

  uint64_t GetWorkspaceSize() const { return (n + 4095) / 4096 * sizeof(uint64_t) + 64 * 1024; }

  // Enqueues the operator: the kernel declares what it reads and writes, so
  // the stream-order checker can verify every buffer is used in order.
  void Launch(streampool::Runtime& rt, streampool::StreamId s, const uint8_t* x, const uint8_t* y,
              uint8_t* out, void* workspace, uint64_t workspace_size) const {
    const streampool::Access accesses[] = {
        {x, n, false}, {y, n, false}, {out, n, true}, {workspace, workspace_size, true}};
    const uint64_t n_copy = n;
    Must(rt.LaunchWork(
             s,
             [=] {
               auto* tiles = static_cast<uint64_t*>(workspace);
               for (uint64_t i = 0; i < n_copy; ++i) {
                 const unsigned sum = x[i] + y[i];
                 out[i] = static_cast<uint8_t>(sum > 255 ? 255 : sum);
                 tiles[i / 4096] += out[i];
               }
             },
             accesses, /*duration_ns=*/20000),
         "aclnnAdd");
  }
};

}  // namespace

int main() {
  using streampool::AsyncPtr;
  using streampool::ReuseRule;

  auto rt = Must(streampool::Runtime::Create(), "Runtime::Create");

  // Workspaces: a device pool sized by aclrtMalloc's rule, ALIGN_UP(len,32)+32.
  streampool::PoolProps ws_props;
  ws_props.acl_rounding = true;
  auto ws_pool = Must(streampool::MemPool::Create(*rt, ws_props), "workspace pool");
  // Decoder output: a DVPP pool.
  streampool::PoolProps dvpp_props;
  dvpp_props.alloc_type = streampool::AllocationType::kDvpp;
  auto dvpp_pool = Must(streampool::MemPool::Create(*rt, dvpp_props), "DVPP pool");
  // Results: the device's default pool.
  const streampool::PoolId out_pool = Must(rt->DefaultPool(0), "DefaultPool");

  constexpr int kStreams = 3;
  constexpr int kCalls = 4;
  constexpr uint64_t kImage = 96 * 1024;  // one "decoded frame"

  std::vector<streampool::Stream> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.push_back(Must(streampool::Stream::Create(*rt), "stream"));

  // Results stay alive until checked: owners declared after the streams, so
  // they are freed before the streams are destroyed.
  std::vector<AsyncPtr> outputs;
  std::vector<AsyncPtr> inputs;
  int same_stream_workspaces = 0;

  std::printf("stream call  workspace  served by\n");
  for (int call = 0; call < kCalls; ++call) {
    for (int k = 0; k < kStreams; ++k) {
      const streampool::StreamId s = streams[k].id();
      // Two decoded frames on this stream, filled by the "decoder" (the host:
      // the buffers are fresh and nothing on the stream touches them yet).
      AsyncPtr x = Must(AsyncPtr::AllocateFromPool(*rt, kImage, dvpp_pool.id(), s), "DVPP x");
      AsyncPtr y = Must(AsyncPtr::AllocateFromPool(*rt, kImage, dvpp_pool.id(), s), "DVPP y");
      EXPECT(reinterpret_cast<uintptr_t>(x.get()) % 128 == 0);  // DVPP start alignment
      std::memset(x.get(), 10 * k + call, kImage);
      std::memset(y.get(), 100, kImage);
      AsyncPtr out = Must(AsyncPtr::AllocateFromPool(*rt, kImage, out_pool, s), "output");

      // Phase 1: how much workspace? Phase 2: allocate it from the pool, run,
      // and free it on the stream at once: no synchronize.
      const AddOp op{kImage};
      const uint64_t ws_size = op.GetWorkspaceSize();
      streampool::AllocInfo ws =
          Must(rt->MallocFromPoolAsync(ws_size, ws_pool.id(), s), "workspace");
      // Zeroed on the stream, not by the host: a reused workspace may still be
      // in use by this stream's previous operator until the stream gets here.
      Must(rt->MemsetAsync(ws.ptr, 0, ws_size, s), "zero workspace");
      op.Launch(*rt, s, x.as<uint8_t>(), y.as<uint8_t>(), out.as<uint8_t>(), ws.ptr, ws_size);
      Must(rt->FreeAsync(ws.ptr, s), "free workspace");

      std::printf("%6d %4d  %9llu  %s\n", k, call, static_cast<unsigned long long>(ws_size),
                  streampool::ReuseRuleName(ws.rule));
      // Every call after a stream's first gets that stream's own workspace back.
      if (call > 0) {
        EXPECT(ws.rule == ReuseRule::kSameStream);
        same_stream_workspaces += ws.rule == ReuseRule::kSameStream;
      }
      outputs.push_back(std::move(out));
      inputs.push_back(std::move(x));  // freed after the check, on stream k
      inputs.push_back(std::move(y));
    }
  }

  Must(rt->DeviceSynchronize(0), "DeviceSynchronize");
  for (int call = 0; call < kCalls; ++call) {
    for (int k = 0; k < kStreams; ++k) {
      const auto* out = outputs[call * kStreams + k].as<uint8_t>();
      const uint8_t want = static_cast<uint8_t>(10 * k + call + 100);
      EXPECT(out[0] == want && out[kImage - 1] == want);
    }
  }

  const streampool::PoolStats ws_stats = Must(ws_pool.Stats(), "workspace stats");
  const streampool::PoolStats dvpp_stats = Must(dvpp_pool.Stats(), "DVPP stats");
  std::printf("workspace pool: %llu allocations, %llu same-stream reuses, reserved high %llu B\n",
              static_cast<unsigned long long>(ws_stats.alloc_count),
              static_cast<unsigned long long>(ws_stats.reuse_same_stream),
              static_cast<unsigned long long>(ws_stats.reserved_high));
  std::printf("DVPP pool: %llu allocations, used high %llu B (rule size %llu B per frame)\n",
              static_cast<unsigned long long>(dvpp_stats.alloc_count),
              static_cast<unsigned long long>(dvpp_stats.used_high),
              static_cast<unsigned long long>((kImage + 32 + 127) / 128 * 128));
  EXPECT(same_stream_workspaces == kStreams * (kCalls - 1));
  EXPECT(ws_stats.alloc_count == kStreams * kCalls);
  // All three streams' workspaces live in one 2 MiB granule. Stream 0's first
  // workspace maps it; its free leaves a block PENDING on stream 0 next to
  // the READY rest of the granule, and a pending block does not absorb READY
  // neighbours (docs/design.md "Block lifecycle": that would hide bytes nobody
  // uses from the other streams). So streams 1 and 2 carve their first
  // workspaces out of that READY rest -- fresh bytes, no growth -- and from
  // then on each stream gets its own pending workspace back.
  EXPECT(ws_stats.reserved_high == 2u << 20);
  EXPECT(ws_stats.upstream_maps == 1);
  EXPECT(ws_stats.fresh_allocs == kStreams);
  EXPECT(dvpp_stats.used_high == 2 * kStreams * kCalls * ((kImage + 32 + 127) / 128 * 128));

  // Checker: the suite runs examples with STREAMPOOL_CHECK_STREAM_ORDER=fatal,
  // which would have aborted at the first out-of-order access.
  EXPECT(rt->CheckReports().empty());

  outputs.clear();
  inputs.clear();
  if (failures != 0) {
    std::fprintf(stderr, "acl_operator: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("acl_operator: OK\n");
  return 0;
}
