// Graphs through streampool.h alone: capture, hand-built graphs and graph
// memory, each test a sentence of docs/graphs.md (which follows the CUDA
// guide's graph memory nodes) with the decision it pins.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/streampool.h"

namespace {

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr
#define SP_EXPECT_OK(expr) EXPECT_EQ((expr), spSuccess) << #expr

constexpr uint64_t kMiB = uint64_t{1} << 20;

class GraphTest : public ::testing::TestWithParam<spExecutorKind> {
 protected:
  void SetUp() override {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.executor = GetParam();
    SP_ASSERT_OK(spRuntimeCreate(&rt_, &cfg));
    SP_ASSERT_OK(spStreamCreate(&s_, rt_, 0, spStreamNonBlocking));
    SP_ASSERT_OK(spStreamCreate(&s2_, rt_, 0, spStreamNonBlocking));
  }
  void TearDown() override { SP_EXPECT_OK(spRuntimeDestroy(rt_)); }

  uint64_t Footprint(spGraphMemAttributeType attr = spGraphMemAttrUsedMemCurrent) {
    uint64_t v = 0;
    EXPECT_EQ(spDeviceGetGraphMemAttribute(rt_, 0, attr, &v), spSuccess);
    return v;
  }
  spMemAllocNodeParams AllocParams(size_t bytes) {
    spMemAllocNodeParams p;
    std::memset(&p, 0, sizeof p);
    p.poolProps.allocType = spMemAllocationTypeDevice;
    p.poolProps.device = 0;
    p.bytesize = bytes;
    return p;
  }
  // alloc -> kernel(duration) -> free, instantiated; the graph destroyed.
  spGraphExec_t AllocKernelFree(size_t bytes, uint64_t kernel_ns, void** dptr, bool free = true) {
    spGraph_t g;
    EXPECT_EQ(spGraphCreate(&g, rt_, 0), spSuccess);
    spMemAllocNodeParams p = AllocParams(bytes);
    spGraphNode_t a, k, f;
    EXPECT_EQ(spGraphAddMemAllocNode(&a, g, nullptr, 0, &p), spSuccess);
    *dptr = p.dptr;
    spAccess acc{p.dptr, bytes, 1};
    spKernelNodeParams kp{kernel_ns, &acc, 1, nullptr, nullptr, nullptr};
    EXPECT_EQ(spGraphAddKernelNode(&k, g, &a, 1, &kp), spSuccess);
    if (free) {
      EXPECT_EQ(spGraphAddMemFreeNode(&f, g, &k, 1, p.dptr), spSuccess);
    }
    spGraphExec_t e;
    EXPECT_EQ(spGraphInstantiate(&e, g, 0), spSuccess);
    EXPECT_EQ(spGraphDestroy(g), spSuccess);
    return e;
  }

  spRuntime_t rt_ = nullptr;
  spStream_t s_ = nullptr;
  spStream_t s2_ = nullptr;
};

// "When cudaGraphAddMemAllocNode creates an allocation node, it returns the
// address of the allocation in nodeParams.dptr. The allocation's address
// remains fixed across instantiations and launches."
TEST_P(GraphTest, AllocationAddressIsFixedAcrossLaunches) {
  void* d = nullptr;
  spGraphExec_t e = AllocKernelFree(4 * kMiB, 1000, &d);
  ASSERT_NE(d, nullptr);
  for (int i = 0; i < 3; ++i) SP_ASSERT_OK(spGraphLaunch(e, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(Footprint(), 4 * kMiB);
  SP_EXPECT_OK(spGraphExecDestroy(e));
}

// An allocation ordered after another's free node in the same graph gets the
// same address (the footprint sample: "d_a and d_b share a virtual address").
TEST_P(GraphTest, AllocationAfterFreeInTheGraphSharesTheAddress) {
  spGraph_t g;
  SP_ASSERT_OK(spGraphCreate(&g, rt_, 0));
  spMemAllocNodeParams p = AllocParams(64 * kMiB);
  spGraphNode_t a, fa, b, fb;
  SP_ASSERT_OK(spGraphAddMemAllocNode(&a, g, nullptr, 0, &p));
  void* da = p.dptr;
  SP_ASSERT_OK(spGraphAddMemFreeNode(&fa, g, &a, 1, da));
  SP_ASSERT_OK(spGraphAddMemAllocNode(&b, g, &fa, 1, &p));
  EXPECT_EQ(p.dptr, da);
  SP_ASSERT_OK(spGraphAddMemFreeNode(&fb, g, &b, 1, p.dptr));
  // Not ordered after a free: a new address.
  spMemAllocNodeParams q = AllocParams(64 * kMiB);
  spGraphNode_t c;
  SP_ASSERT_OK(spGraphAddMemAllocNode(&c, g, nullptr, 0, &q));
  EXPECT_NE(q.dptr, da);
  spGraphExec_t e;
  SP_ASSERT_OK(spGraphInstantiate(&e, g, spGraphInstantiateFlagAutoFreeOnLaunch));
  SP_ASSERT_OK(spGraphLaunch(e, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(Footprint(), 128 * kMiB);
  SP_EXPECT_OK(spGraphExecDestroy(e));
  SP_EXPECT_OK(spGraphDestroy(g));
}

// "Creating the graph execs does not reserve any physical memory"; "the first
// graph launched reserves the memory it needs"; later launches of it and of
// other graphs in the same stream reuse it.
TEST_P(GraphTest, GraphsLaunchedInOneStreamShareMemory) {
  std::vector<spGraphExec_t> execs(4);
  std::vector<void*> ptrs(4);
  for (int i = 0; i < 4; ++i) execs[i] = AllocKernelFree(64 * kMiB, 5000, &ptrs[i]);
  EXPECT_EQ(Footprint(), 0u);
  SP_ASSERT_OK(spGraphLaunch(execs[0], s_));
  EXPECT_EQ(Footprint(), 64 * kMiB);
  SP_ASSERT_OK(spGraphLaunch(execs[0], s_));
  EXPECT_EQ(Footprint(), 64 * kMiB);
  for (int i = 1; i < 4; ++i) {
    SP_ASSERT_OK(spGraphLaunch(execs[i], s_));
    EXPECT_EQ(Footprint(), 64 * kMiB) << i;
    EXPECT_EQ(Footprint(spGraphMemAttrReservedMemCurrent), 64 * kMiB) << i;
  }
  SP_ASSERT_OK(spStreamSynchronize(s_));
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) EXPECT_NE(ptrs[i], ptrs[j]);
  }
  for (spGraphExec_t e : execs) SP_EXPECT_OK(spGraphExecDestroy(e));
  SP_ASSERT_OK(spDeviceGraphMemTrim(rt_, 0));
  EXPECT_EQ(Footprint(spGraphMemAttrReservedMemCurrent), 0u);
  EXPECT_EQ(Footprint(spGraphMemAttrUsedMemHigh), 64 * kMiB);
}

// "Graphs that can run concurrently need separate physical memory": launched
// on streams that nothing orders, each grows the footprint while the others
// still run.
TEST_P(GraphTest, ConcurrentGraphsNeedTheirOwnMemory) {
  if (GetParam() != spExecutorSimulator) GTEST_SKIP() << "timing: the simulator's alone";
  void* d0;
  void* d1;
  spGraphExec_t e0 = AllocKernelFree(64 * kMiB, 1000000, &d0);
  spGraphExec_t e1 = AllocKernelFree(64 * kMiB, 1000000, &d1);
  SP_ASSERT_OK(spGraphLaunch(e0, s_));
  SP_ASSERT_OK(spGraphLaunch(e1, s2_));
  EXPECT_EQ(Footprint(), 128 * kMiB);
  SP_ASSERT_OK(spStreamSynchronize(s_));
  SP_ASSERT_OK(spStreamSynchronize(s2_));
  // Once a launch is observed complete, its memory goes to the next anywhere.
  SP_ASSERT_OK(spGraphLaunch(e0, s2_));
  EXPECT_EQ(Footprint(), 128 * kMiB);
  SP_EXPECT_OK(spGraphExecDestroy(e0));
  SP_EXPECT_OK(spGraphExecDestroy(e1));
}

// "CUDA cannot reuse physical memory from graphs which do not free their
// allocations"; "trimming does not impact the memory footprint since the
// un-freed allocations are still holding onto the memory"; freeing does not
// shrink it; a trim after the frees does.
TEST_P(GraphTest, UnfreedAllocationsHoldTheirMemoryUntilFreedAndTrimmed) {
  std::vector<spGraphExec_t> execs(3);
  std::vector<void*> ptrs(3);
  for (int i = 0; i < 3; ++i) execs[i] = AllocKernelFree(64 * kMiB, 1000, &ptrs[i], false);
  for (int i = 0; i < 3; ++i) {
    SP_ASSERT_OK(spGraphLaunch(execs[i], s_));
    EXPECT_EQ(Footprint(), (i + 1) * 64 * kMiB);
  }
  SP_ASSERT_OK(spStreamSynchronize(s_));
  SP_ASSERT_OK(spDeviceGraphMemTrim(rt_, 0));
  EXPECT_EQ(Footprint(), 3 * 64 * kMiB);
  for (void* p : ptrs) SP_ASSERT_OK(spFree(rt_, p));
  EXPECT_EQ(Footprint(), 3 * 64 * kMiB);
  SP_ASSERT_OK(spDeviceGraphMemTrim(rt_, 0));
  EXPECT_EQ(Footprint(), 0u);
  for (spGraphExec_t e : execs) SP_EXPECT_OK(spGraphExecDestroy(e));
}

// "A graph whose earlier launch still holds an allocation it did not free
// cannot be launched again unless instantiated with auto-free-on-launch."
TEST_P(GraphTest, RelaunchWithAnUnfreedAllocationNeedsAutoFree) {
  void* d;
  spGraphExec_t e = AllocKernelFree(2 * kMiB, 1000, &d, false);
  SP_ASSERT_OK(spGraphLaunch(e, s_));
  EXPECT_EQ(spGraphLaunch(e, s_), spErrorInvalidValue);
  // A stream-ordered free outside the graph, before the next launch.
  SP_ASSERT_OK(spFreeAsync(d, s_));
  SP_ASSERT_OK(spGraphLaunch(e, s_));
  SP_ASSERT_OK(spFreeAsync(d, s_));
  SP_EXPECT_OK(spGraphExecDestroy(e));

  spGraph_t g;
  SP_ASSERT_OK(spGraphCreate(&g, rt_, 0));
  spMemAllocNodeParams p = AllocParams(2 * kMiB);
  spGraphNode_t a;
  SP_ASSERT_OK(spGraphAddMemAllocNode(&a, g, nullptr, 0, &p));
  SP_ASSERT_OK(spGraphInstantiate(&e, g, spGraphInstantiateFlagAutoFreeOnLaunch));
  SP_ASSERT_OK(spGraphLaunch(e, s_));
  SP_ASSERT_OK(spGraphLaunch(e, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(Footprint(), 2 * kMiB);
  SP_ASSERT_OK(spFree(rt_, p.dptr));
  SP_EXPECT_OK(spGraphExecDestroy(e));
  SP_EXPECT_OK(spGraphDestroy(g));
}

// "If graph contains any allocation or free nodes, there can be at most one
// executable graph in existence for that graph at a time", and such a graph
// cannot be cloned or be a child graph.
TEST_P(GraphTest, RestrictionsOfGraphsWithMemoryNodes) {
  spGraph_t g, child, clone;
  SP_ASSERT_OK(spGraphCreate(&g, rt_, 0));
  spMemAllocNodeParams p = AllocParams(kMiB);
  spGraphNode_t a, n;
  SP_ASSERT_OK(spGraphAddMemAllocNode(&a, g, nullptr, 0, &p));
  spGraphExec_t e, e2;
  SP_ASSERT_OK(spGraphInstantiate(&e, g, 0));
  EXPECT_EQ(spGraphInstantiate(&e2, g, 0), spErrorInvalidValue);
  EXPECT_EQ(spGraphClone(&clone, g), spErrorNotSupported);
  SP_ASSERT_OK(spGraphCreate(&child, rt_, 0));
  EXPECT_EQ(spGraphAddChildGraphNode(&n, child, nullptr, 0, g), spErrorNotSupported);
  SP_ASSERT_OK(spGraphExecDestroy(e));
  SP_ASSERT_OK(spGraphInstantiate(&e2, g, 0));
  SP_EXPECT_OK(spGraphExecDestroy(e2));
  // A free node must name a graph allocation, once.
  SP_ASSERT_OK(spGraphAddMemFreeNode(&n, g, &a, 1, p.dptr));
  EXPECT_EQ(spGraphAddMemFreeNode(&n, g, &a, 1, p.dptr), spErrorInvalidValue);
  int host = 0;
  EXPECT_EQ(spGraphAddMemFreeNode(&n, g, nullptr, 0, &host), spErrorInvalidValue);
  SP_EXPECT_OK(spGraphDestroy(child));
  SP_EXPECT_OK(spGraphDestroy(g));
}

// A hand-built graph runs its nodes in dependency order, and its copies move
// bytes; queries give back what was built.
TEST_P(GraphTest, HandBuiltGraphRunsInDependencyOrder) {
  std::vector<unsigned char> src(4096, 7), mid(4096, 0), dst(4096, 0);
  spGraph_t g;
  SP_ASSERT_OK(spGraphCreate(&g, rt_, 0));
  spGraphNode_t c1, c2, e;
  SP_ASSERT_OK(spGraphAddMemcpyNode1D(&c1, g, nullptr, 0, mid.data(), src.data(), 4096));
  SP_ASSERT_OK(spGraphAddEmptyNode(&e, g, &c1, 1));
  SP_ASSERT_OK(spGraphAddMemcpyNode1D(&c2, g, &e, 1, dst.data(), mid.data(), 4096));
  size_t count = 0;
  SP_ASSERT_OK(spGraphGetNodes(g, nullptr, &count));
  EXPECT_EQ(count, 3u);
  SP_ASSERT_OK(spGraphGetEdges(g, nullptr, nullptr, &count));
  EXPECT_EQ(count, 2u);
  spGraphNodeType type;
  SP_ASSERT_OK(spGraphNodeGetType(e, &type));
  EXPECT_EQ(type, spGraphNodeTypeEmpty);
  spGraphExec_t x;
  SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
  SP_ASSERT_OK(spGraphLaunch(x, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(dst[4095], 7);
  SP_EXPECT_OK(spGraphExecDestroy(x));
  SP_EXPECT_OK(spGraphDestroy(g));
}

// Stream capture: ops become nodes; a second stream joins through an event
// and must be joined back; the captured graph replays the work.
TEST_P(GraphTest, CaptureWithAForkAndAJoin) {
  std::vector<unsigned char> a(256, 1), b(256, 0), c(256, 0);
  spEvent_t fork, join;
  SP_ASSERT_OK(spEventCreate(&fork, rt_));
  SP_ASSERT_OK(spEventCreate(&join, rt_));
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  spStreamCaptureStatus st;
  SP_ASSERT_OK(spStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, spStreamCaptureStatusActive);
  SP_ASSERT_OK(spMemcpyAsync(b.data(), a.data(), 256, s_));
  SP_ASSERT_OK(spEventRecord(fork, s_));
  SP_ASSERT_OK(spStreamWaitEvent(s2_, fork));
  SP_ASSERT_OK(spStreamIsCapturing(s2_, &st));
  EXPECT_EQ(st, spStreamCaptureStatusActive);
  SP_ASSERT_OK(spMemcpyAsync(c.data(), b.data(), 256, s2_));
  EXPECT_EQ(spEventQuery(fork), spErrorCapturedEvent);
  spGraph_t g = nullptr;
  // Not joined back yet.
  SP_ASSERT_OK(spEventRecord(join, s2_));
  SP_ASSERT_OK(spStreamWaitEvent(s_, join));
  SP_ASSERT_OK(spStreamEndCapture(s_, &g));
  ASSERT_NE(g, nullptr);
  SP_ASSERT_OK(spStreamIsCapturing(s2_, &st));
  EXPECT_EQ(st, spStreamCaptureStatusNone);
  EXPECT_EQ(c[0], 0);  // nothing ran while capturing
  size_t count = 0;
  SP_ASSERT_OK(spGraphGetNodes(g, nullptr, &count));
  EXPECT_EQ(count, 2u);
  spGraphExec_t x;
  SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
  SP_ASSERT_OK(spGraphLaunch(x, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(c[255], 1);
  SP_EXPECT_OK(spGraphExecDestroy(x));
  SP_EXPECT_OK(spGraphDestroy(g));
  SP_EXPECT_OK(spEventDestroy(fork));
  SP_EXPECT_OK(spEventDestroy(join));
}

TEST_P(GraphTest, CaptureUnjoinedAndInvalidated) {
  spEvent_t fork;
  SP_ASSERT_OK(spEventCreate(&fork, rt_));
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  EXPECT_EQ(spStreamBeginCapture(s_, spStreamCaptureModeGlobal), spErrorIllegalState);
  SP_ASSERT_OK(spEventRecord(fork, s_));
  SP_ASSERT_OK(spStreamWaitEvent(s2_, fork));
  SP_ASSERT_OK(spLaunchKernel(s2_, 100, nullptr, 0));
  spGraph_t g;
  EXPECT_EQ(spStreamEndCapture(s2_, &g), spErrorStreamCaptureUnmatched);
  EXPECT_EQ(spStreamEndCapture(s_, &g), spErrorStreamCaptureUnjoined);
  EXPECT_EQ(g, nullptr);

  // A synchronize of a capturing stream fails and invalidates the capture.
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  EXPECT_EQ(spStreamSynchronize(s_), spErrorStreamCaptureUnsupported);
  spStreamCaptureStatus st;
  SP_ASSERT_OK(spStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, spStreamCaptureStatusInvalidated);
  EXPECT_EQ(spLaunchKernel(s_, 100, nullptr, 0), spErrorStreamCaptureInvalidated);
  EXPECT_EQ(spStreamEndCapture(s_, &g), spErrorStreamCaptureInvalidated);

  // Global mode forbids unsafe calls (spMalloc) on the capturing thread;
  // Relaxed does not.
  void* p = nullptr;
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  EXPECT_EQ(spMalloc(&p, 4096, rt_, 0), spErrorStreamCaptureUnsupported);
  EXPECT_EQ(spStreamEndCapture(s_, &g), spErrorStreamCaptureInvalidated);
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeRelaxed));
  SP_ASSERT_OK(spMalloc(&p, 4096, rt_, 0));
  SP_ASSERT_OK(spFree(rt_, p));
  SP_ASSERT_OK(spStreamEndCapture(s_, &g));
  SP_EXPECT_OK(spGraphDestroy(g));
  // The thread's own mode can relax a Global capture's rule.
  spStreamCaptureMode mode = spStreamCaptureModeRelaxed;
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  SP_ASSERT_OK(spThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, spStreamCaptureModeGlobal);
  SP_ASSERT_OK(spMalloc(&p, 4096, rt_, 0));
  SP_ASSERT_OK(spFree(rt_, p));
  SP_ASSERT_OK(spThreadExchangeStreamCaptureMode(&mode));
  SP_ASSERT_OK(spStreamEndCapture(s_, &g));
  SP_EXPECT_OK(spGraphDestroy(g));
  SP_EXPECT_OK(spEventDestroy(fork));
}

// cudaMallocAsync and cudaFreeAsync in a capture become memory nodes: the
// pool is untouched and the graph's launches map graph memory.
TEST_P(GraphTest, CapturedMallocAndFreeAreMemoryNodes) {
  spMemPool_t pool;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&pool, rt_, 0));
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  void* p = nullptr;
  SP_ASSERT_OK(spMallocAsync(&p, 3 * kMiB, s_));
  SP_ASSERT_OK(spMemsetAsync(p, 1, 3 * kMiB, s_));
  SP_ASSERT_OK(spFreeAsync(p, s_));
  spGraph_t g;
  SP_ASSERT_OK(spStreamEndCapture(s_, &g));
  spMemPoolStats stats;
  SP_ASSERT_OK(spMemPoolGetStats(pool, &stats));
  EXPECT_EQ(stats.usedHigh, 0u);
  spGraphNode_t nodes[3];
  size_t count = 3;
  SP_ASSERT_OK(spGraphGetNodes(g, nodes, &count));
  ASSERT_EQ(count, 3u);
  spGraphNodeType type;
  SP_ASSERT_OK(spGraphNodeGetType(nodes[0], &type));
  EXPECT_EQ(type, spGraphNodeTypeMemAlloc);
  spMemAllocNodeParams params;
  SP_ASSERT_OK(spGraphMemAllocNodeGetParams(nodes[0], &params));
  EXPECT_EQ(params.dptr, p);
  EXPECT_EQ(params.bytesize, 3 * kMiB);
  void* freed = nullptr;
  SP_ASSERT_OK(spGraphMemFreeNodeGetParams(nodes[2], &freed));
  EXPECT_EQ(freed, p);
  spGraphExec_t x;
  SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
  SP_ASSERT_OK(spGraphLaunch(x, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(Footprint(), 4 * kMiB);  // 2 MiB pages
  SP_EXPECT_OK(spGraphExecDestroy(x));
  SP_EXPECT_OK(spGraphDestroy(g));
}

// Replaying a launch many times grows nothing.
TEST_P(GraphTest, RelaunchingGrowsNothing) {
  void* d;
  spGraphExec_t e = AllocKernelFree(2 * kMiB, 10, &d);
  for (int i = 0; i < 2000; ++i) {
    SP_ASSERT_OK(spGraphLaunch(e, s_));
    if (i % 500 == 0) {
      SP_ASSERT_OK(spStreamSynchronize(s_));
    }
  }
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(Footprint(spGraphMemAttrReservedMemHigh), 2 * kMiB);
  SP_EXPECT_OK(spGraphExecDestroy(e));
}

// A recording writes the capture, its allocation (as graph memory), the
// instantiation and the launch beside the pool allocations
// (tests/replay/record_graphs_test.cc replays such a file).
TEST_P(GraphTest, RecordingWritesGraphOps) {
  char path[] = "/tmp/graph_recording_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  SP_ASSERT_OK(spRuntimeStartRecording(rt_, path));
  void* p = nullptr;
  void* q = nullptr;
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  SP_ASSERT_OK(spMallocAsync(&p, kMiB, s_));
  SP_ASSERT_OK(spFreeAsync(p, s_));
  spGraph_t g;
  SP_ASSERT_OK(spStreamEndCapture(s_, &g));
  spGraphExec_t x;
  SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
  SP_ASSERT_OK(spGraphLaunch(x, s_));
  SP_ASSERT_OK(spMallocAsync(&q, 4096, s_));
  SP_ASSERT_OK(spFreeAsync(q, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  SP_ASSERT_OK(spRuntimeStopRecording(rt_));
  FILE* f = fopen(path, "r");
  ASSERT_NE(f, nullptr);
  int allocs = 0, graph_allocs = 0, graph_ops = 0;
  char line[512];
  while (fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "alloc ", 6) == 0) {
      ++(std::strstr(line, "# graph") != nullptr ? graph_allocs : allocs);
    }
    for (const char* op : {"capture ", "endcapture ", "ginst ", "glaunch "}) {
      if (std::strncmp(line, op, std::strlen(op)) == 0) ++graph_ops;
    }
  }
  fclose(f);
  unlink(path);
  EXPECT_EQ(allocs, 1);
  EXPECT_EQ(graph_allocs, 1);
  EXPECT_EQ(graph_ops, 4);
  SP_EXPECT_OK(spGraphExecDestroy(x));
  SP_EXPECT_OK(spGraphDestroy(g));
}

// The checker sees every node's accesses: a kernel after the free node of
// the allocation it writes is a use after free, as on a stream; the same
// kernel before the free is not.
TEST(GraphCheckerTest, AGraphAllocationUsedAfterItsFreeNodeIsReported) {
  spRuntime_t rt;
  spStream_t s;
  SP_ASSERT_OK(spRuntimeCreate(&rt, nullptr));
  SP_ASSERT_OK(spCheckerEnable(rt, 1));
  SP_ASSERT_OK(spStreamCreate(&s, rt, 0, spStreamNonBlocking));
  for (bool after_free : {false, true}) {
    spGraph_t g;
    SP_ASSERT_OK(spGraphCreate(&g, rt, 0));
    spMemAllocNodeParams p;
    std::memset(&p, 0, sizeof p);
    p.poolProps.allocType = spMemAllocationTypeDevice;
    p.bytesize = kMiB;
    spGraphNode_t a, f, k;
    SP_ASSERT_OK(spGraphAddMemAllocNode(&a, g, nullptr, 0, &p));
    spAccess acc{p.dptr, kMiB, 1};
    spKernelNodeParams kp{100, &acc, 1, nullptr, nullptr, nullptr};
    if (after_free) {
      SP_ASSERT_OK(spGraphAddMemFreeNode(&f, g, &a, 1, p.dptr));
      SP_ASSERT_OK(spGraphAddKernelNode(&k, g, &f, 1, &kp));
    } else {
      SP_ASSERT_OK(spGraphAddKernelNode(&k, g, &a, 1, &kp));
      SP_ASSERT_OK(spGraphAddMemFreeNode(&f, g, &k, 1, p.dptr));
    }
    spGraphExec_t x;
    SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
    SP_ASSERT_OK(spGraphLaunch(x, s));
    SP_ASSERT_OK(spStreamSynchronize(s));
    size_t n = 0;
    SP_ASSERT_OK(spCheckerGetReports(rt, nullptr, 0, &n));
    EXPECT_EQ(n, after_free ? 1u : 0u);
    if (n == 1) {
      spCheckReport r;
      SP_ASSERT_OK(spCheckerGetReports(rt, &r, 1, &n));
      EXPECT_EQ(r.kind, spCheckUseAfterFree) << r.message;
    }
    SP_EXPECT_OK(spGraphExecDestroy(x));
    SP_EXPECT_OK(spGraphDestroy(g));
  }
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

// "cudaErrorStreamCaptureImplicit: the operation would have resulted in a
// disallowed implicit dependency on a current capture sequence from
// cudaStreamLegacy." An op on the legacy stream waits for every blocking
// stream, so while one captures the op is refused and that capture is
// invalidated; a non-blocking stream's capture is no business of the legacy
// stream's.
TEST_P(GraphTest, TheLegacyStreamCannotDependOnACapture) {
  spStream_t legacy;
  SP_ASSERT_OK(spStreamGetLegacy(&legacy, rt_, 0));
  spStream_t blocking;
  SP_ASSERT_OK(spStreamCreate(&blocking, rt_, 0, spStreamDefault));
  for (bool is_blocking : {true, false}) {
    spStream_t s = is_blocking ? blocking : s_;
    // The fast path has served the legacy stream before the capture.
    void* p = nullptr;
    SP_ASSERT_OK(spMallocAsync(&p, 4096, legacy));
    SP_ASSERT_OK(spFreeAsync(p, legacy));
    SP_ASSERT_OK(spStreamBeginCapture(s, spStreamCaptureModeRelaxed));
    SP_ASSERT_OK(spLaunchKernel(s, 100, nullptr, 0));
    const spError_t want = is_blocking ? spErrorStreamCaptureImplicit : spSuccess;
    EXPECT_EQ(spLaunchKernel(legacy, 100, nullptr, 0), want);
    EXPECT_EQ(spMallocAsync(&p, 4096, legacy), want);
    if (!is_blocking) {
      SP_EXPECT_OK(spFreeAsync(p, legacy));
    }
    spGraph_t g = nullptr;
    EXPECT_EQ(spStreamEndCapture(s, &g), is_blocking ? spErrorStreamCaptureInvalidated : spSuccess);
    if (g != nullptr) {
      SP_EXPECT_OK(spGraphDestroy(g));
    }
    // Once the capture is over the legacy stream works again.
    SP_EXPECT_OK(spLaunchKernel(legacy, 100, nullptr, 0));
    SP_EXPECT_OK(spMallocAsync(&p, 4096, legacy));
    SP_EXPECT_OK(spFreeAsync(p, legacy));
  }
  SP_EXPECT_OK(spStreamSynchronize(legacy));
  SP_EXPECT_OK(spStreamDestroy(blocking));
}

// "cudaEventRecordExternal: Event is captured in the graph as an external
// event node when performing stream capture", and cudaEventWaitExternal
// likewise for a wait: such a record is a node that records the event at
// each launch, and such a wait a node that waits for the event's latest
// record then, made outside the graph or not. Without the flags a record in
// a capture is only a dependency, and a wait on an outside record breaks the
// capture's isolation.
TEST_P(GraphTest, ExternalEventRecordsAndWaitsAreNodes) {
  spEvent_t inside, outside;
  SP_ASSERT_OK(spEventCreate(&inside, rt_));
  SP_ASSERT_OK(spEventCreate(&outside, rt_));
  EXPECT_EQ(spEventRecordWithFlags(inside, s_, 2), spErrorInvalidValue);
  EXPECT_EQ(spStreamWaitEventWithFlags(s_, inside, 2), spErrorInvalidValue);
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  SP_ASSERT_OK(spStreamWaitEventWithFlags(s_, outside, spEventWaitExternal));
  SP_ASSERT_OK(spLaunchKernel(s_, 100, nullptr, 0));
  SP_ASSERT_OK(spEventRecordWithFlags(inside, s_, spEventRecordExternal));
  SP_ASSERT_OK(spLaunchKernel(s_, 100, nullptr, 0));
  spGraph_t g;
  SP_ASSERT_OK(spStreamEndCapture(s_, &g));
  spGraphNode_t nodes[8];
  size_t count = 8;
  SP_ASSERT_OK(spGraphGetNodes(g, nodes, &count));
  ASSERT_EQ(count, 4u);
  const spGraphNodeType want[] = {spGraphNodeTypeWaitEvent, spGraphNodeTypeKernel,
                                  spGraphNodeTypeEventRecord, spGraphNodeTypeKernel};
  for (size_t i = 0; i < count; ++i) {
    spGraphNodeType type;
    SP_ASSERT_OK(spGraphNodeGetType(nodes[i], &type));
    EXPECT_EQ(type, want[i]) << i;
  }
  spGraphExec_t x;
  SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
  // The wait node waits for the record made before the launch: the graph's
  // kernels run after s2's long kernel.
  SP_ASSERT_OK(spLaunchKernel(s2_, 1000000, nullptr, 0));
  SP_ASSERT_OK(spEventRecord(outside, s2_));
  uint64_t before = 0;
  SP_ASSERT_OK(spHostNow(rt_, &before));
  SP_ASSERT_OK(spGraphLaunch(x, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  uint64_t after = 0;
  SP_ASSERT_OK(spHostNow(rt_, &after));
  if (GetParam() == spExecutorSimulator) {
    EXPECT_GE(after - before, 1000000u + 200u);
  }
  EXPECT_EQ(spStreamQuery(s2_), spSuccess);  // s_ waited for all of s2's kernel
  // The record node recorded `inside` on the graph's lane: a wait on it
  // outside any capture is a plain wait, complete once the launch is.
  SP_EXPECT_OK(spEventQuery(inside));
  SP_EXPECT_OK(spStreamWaitEvent(s2_, inside));
  SP_EXPECT_OK(spStreamSynchronize(s2_));
  // Without the flag, the same wait breaks the capture's isolation.
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  EXPECT_EQ(spStreamWaitEvent(s_, outside), spErrorStreamCaptureIsolation);
  spGraph_t broken = nullptr;
  EXPECT_EQ(spStreamEndCapture(s_, &broken), spErrorStreamCaptureInvalidated);
  SP_EXPECT_OK(spGraphExecDestroy(x));
  SP_EXPECT_OK(spGraphDestroy(g));
  SP_EXPECT_OK(spEventDestroy(inside));
  SP_EXPECT_OK(spEventDestroy(outside));
}

// A launch enqueues a lane's kernels, copies and fills between two points
// others can order against as one op: their effects still land in node
// order, and its duration is theirs summed.
TEST_P(GraphTest, NodesOfALaneRunInTheirOrder) {
  constexpr size_t kBytes = 4096;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  SP_ASSERT_OK(spMalloc(&a, kBytes, rt_, 0));
  SP_ASSERT_OK(spMalloc(&b, kBytes, rt_, 0));
  SP_ASSERT_OK(spMalloc(&c, kBytes, rt_, 0));
  SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
  SP_ASSERT_OK(spMemsetAsync(a, 1, kBytes, s_));
  SP_ASSERT_OK(spMemcpyAsync(b, a, kBytes, s_));
  const spAccess acc{a, kBytes, 1};
  SP_ASSERT_OK(spLaunchKernel(s_, 300, &acc, 1));
  SP_ASSERT_OK(spMemsetAsync(a, 2, kBytes, s_));
  SP_ASSERT_OK(spLaunchKernel(s_, 700, &acc, 1));
  SP_ASSERT_OK(spMemcpyAsync(c, a, kBytes, s_));
  spGraph_t g;
  SP_ASSERT_OK(spStreamEndCapture(s_, &g));
  spGraphExec_t x;
  SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
  for (int launch = 0; launch < 2; ++launch) {
    std::memset(b, 0, kBytes);
    std::memset(c, 0, kBytes);
    uint64_t before = 0;
    uint64_t after = 0;
    SP_ASSERT_OK(spHostNow(rt_, &before));
    SP_ASSERT_OK(spGraphLaunch(x, s_));
    SP_ASSERT_OK(spStreamSynchronize(s_));
    SP_ASSERT_OK(spHostNow(rt_, &after));
    EXPECT_GE(after - before, 1000u);  // the two kernels, one after the other
    EXPECT_EQ(static_cast<unsigned char*>(b)[kBytes - 1], 1);
    EXPECT_EQ(static_cast<unsigned char*>(c)[0], 2);
    EXPECT_EQ(static_cast<unsigned char*>(c)[kBytes - 1], 2);
  }
  SP_EXPECT_OK(spGraphExecDestroy(x));
  SP_EXPECT_OK(spGraphDestroy(g));
  for (void* p : {a, b, c}) SP_EXPECT_OK(spFree(rt_, p));
}

// The checker sees the accesses of every node of a lane enqueued together:
// a kernel in the middle of a captured chain that uses an allocation of
// another stream before that stream's allocation is ordered before it is
// reported; after a wait on that stream it is not.
TEST(GraphCheckerTest, ANodeInTheMiddleOfAChainIsChecked) {
  for (bool ordered : {false, true}) {
    spRuntime_t rt;
    spStream_t s, s2;
    SP_ASSERT_OK(spRuntimeCreate(&rt, nullptr));
    SP_ASSERT_OK(spCheckerEnable(rt, 1));
    SP_ASSERT_OK(spStreamCreate(&s, rt, 0, spStreamNonBlocking));
    SP_ASSERT_OK(spStreamCreate(&s2, rt, 0, spStreamNonBlocking));
    void* p = nullptr;
    SP_ASSERT_OK(spMallocAsync(&p, kMiB, s2));
    spEvent_t e;
    SP_ASSERT_OK(spEventCreate(&e, rt));
    SP_ASSERT_OK(spEventRecord(e, s2));
    SP_ASSERT_OK(spStreamBeginCapture(s, spStreamCaptureModeGlobal));
    const spAccess use{p, kMiB, 1};
    SP_ASSERT_OK(spLaunchKernel(s, 100, nullptr, 0));
    SP_ASSERT_OK(spLaunchKernel(s, 100, &use, 1));
    SP_ASSERT_OK(spLaunchKernel(s, 100, nullptr, 0));
    spGraph_t g;
    SP_ASSERT_OK(spStreamEndCapture(s, &g));
    spGraphExec_t x;
    SP_ASSERT_OK(spGraphInstantiate(&x, g, 0));
    if (ordered) {
      SP_ASSERT_OK(spStreamWaitEvent(s, e));
    }
    SP_ASSERT_OK(spGraphLaunch(x, s));
    SP_ASSERT_OK(spStreamSynchronize(s));
    size_t n = 0;
    SP_ASSERT_OK(spCheckerGetReports(rt, nullptr, 0, &n));
    EXPECT_EQ(n, ordered ? 0u : 1u);
    if (n == 1) {
      spCheckReport r;
      SP_ASSERT_OK(spCheckerGetReports(rt, &r, 1, &n));
      EXPECT_EQ(r.kind, spCheckUseBeforeReady) << r.message;
    }
    SP_EXPECT_OK(spGraphExecDestroy(x));
    SP_EXPECT_OK(spGraphDestroy(g));
    SP_EXPECT_OK(spEventDestroy(e));
    SP_EXPECT_OK(spRuntimeDestroy(rt));
  }
}

// A forked stream may be destroyed while the capture is open, as CUDA's
// graphMemoryNodes sample does: its work stays, and must have been joined
// back by the end.
TEST_P(GraphTest, CaptureOutlivesADestroyedForkedStream) {
  spEvent_t fork, join;
  SP_ASSERT_OK(spEventCreate(&fork, rt_));
  SP_ASSERT_OK(spEventCreate(&join, rt_));
  for (bool joined : {true, false}) {
    spStream_t forked;
    SP_ASSERT_OK(spStreamCreate(&forked, rt_, 0, spStreamNonBlocking));
    SP_ASSERT_OK(spStreamBeginCapture(s_, spStreamCaptureModeGlobal));
    SP_ASSERT_OK(spEventRecord(fork, s_));
    SP_ASSERT_OK(spStreamWaitEvent(forked, fork));
    SP_ASSERT_OK(spLaunchKernel(forked, 100, nullptr, 0));
    SP_ASSERT_OK(spEventRecord(join, forked));
    if (joined) {
      SP_ASSERT_OK(spStreamWaitEvent(s_, join));
    }
    SP_ASSERT_OK(spStreamDestroy(forked));
    spGraph_t g = nullptr;
    if (joined) {
      SP_ASSERT_OK(spStreamEndCapture(s_, &g));
      size_t n = 0;
      SP_ASSERT_OK(spGraphGetNodes(g, nullptr, &n));
      EXPECT_EQ(n, 1u);
      SP_EXPECT_OK(spGraphDestroy(g));
    } else {
      EXPECT_EQ(spStreamEndCapture(s_, &g), spErrorStreamCaptureUnjoined);
    }
  }
  SP_EXPECT_OK(spEventDestroy(fork));
  SP_EXPECT_OK(spEventDestroy(join));
}

// A kernel node's userData lives as long as any copy of the node: its graph,
// a clone, an executable graph. A failed add leaves it the caller's.
TEST_P(GraphTest, KernelNodeUserDataIsDestroyedWithTheLastCopy) {
  static int runs = 0;
  static int destroyed = 0;
  runs = destroyed = 0;
  spKernelNodeParams kp{100, nullptr, 0, [](void*) { ++runs; }, &runs, [](void*) { ++destroyed; }};
  spGraph_t g, clone;
  SP_ASSERT_OK(spGraphCreate(&g, rt_, 0));
  spGraphNode_t k;
  SP_ASSERT_OK(spGraphAddKernelNode(&k, g, nullptr, 0, &kp));
  const spGraphNode_t twice[] = {k, k};
  spGraphNode_t refused;
  EXPECT_EQ(spGraphAddKernelNode(&refused, g, twice, 2, &kp), spErrorInvalidValue);
  EXPECT_EQ(destroyed, 0);
  SP_ASSERT_OK(spGraphClone(&clone, g));
  spGraphExec_t e;
  SP_ASSERT_OK(spGraphInstantiate(&e, g, 0));
  SP_ASSERT_OK(spGraphDestroy(g));
  SP_ASSERT_OK(spGraphDestroy(clone));
  EXPECT_EQ(destroyed, 0);
  SP_ASSERT_OK(spGraphLaunch(e, s_));
  SP_ASSERT_OK(spStreamSynchronize(s_));
  EXPECT_EQ(runs, 1);
  SP_ASSERT_OK(spGraphExecDestroy(e));
  EXPECT_EQ(destroyed, 1);
}

// Destroying a capture's origin ends it for good: the streams that joined
// leave it and allocate from their pools again.
TEST_P(GraphTest, DestroyingTheOriginEndsTheCapture) {
  spStream_t origin;
  spEvent_t fork;
  SP_ASSERT_OK(spStreamCreate(&origin, rt_, 0, spStreamNonBlocking));
  SP_ASSERT_OK(spEventCreate(&fork, rt_));
  SP_ASSERT_OK(spStreamBeginCapture(origin, spStreamCaptureModeRelaxed));
  SP_ASSERT_OK(spEventRecord(fork, origin));
  SP_ASSERT_OK(spStreamWaitEvent(s2_, fork));
  SP_ASSERT_OK(spStreamDestroy(origin));
  spStreamCaptureStatus st;
  SP_ASSERT_OK(spStreamIsCapturing(s2_, &st));
  EXPECT_EQ(st, spStreamCaptureStatusNone);
  void* p = nullptr;
  SP_ASSERT_OK(spMallocAsync(&p, 4096, s2_));
  spPointerAttributes attr;
  SP_ASSERT_OK(spPointerGetAttributes(&attr, p));
  EXPECT_NE(attr.pool, nullptr);  // a pool allocation, not graph memory
  SP_ASSERT_OK(spFreeAsync(p, s2_));
  SP_EXPECT_OK(spEventDestroy(fork));
}

INSTANTIATE_TEST_SUITE_P(Executors, GraphTest,
                         ::testing::Values(spExecutorSimulator, spExecutorThreads),
                         [](const auto& info) {
                           return info.param == spExecutorSimulator ? "Simulator" : "Threads";
                         });

}  // namespace
