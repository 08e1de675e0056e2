// The CUDA face's graphs (src/cuda/graph.cc) in CUDA's spellings: capture of
// stream-ordered allocations into memory nodes, kernel nodes of registered
// kernels, the codes of misuse, and the device's graph memory figures.
//
// Every test resets the implicit runtime when it ends (see
// cuda_runtime_test.cc).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace {

#define CUDA_ASSERT_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define CUDA_EXPECT_OK(expr) EXPECT_EQ((expr), cudaSuccess) << #expr

constexpr uint64_t kGranule = uint64_t{2} << 20;

void Fill(float* out, float value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

void Unregistered(int) {}

class CudaGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CUDA_ASSERT_OK(cudaSetDevice(0));
    CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    cudaGetLastError();
  }

  static uint64_t Used() {
    uint64_t v = 0;
    EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &v), cudaSuccess);
    return v;
  }

  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaGraphTest, CapturedMallocAndFreeBecomeMemoryNodes) {
  CUDA_ASSERT_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_ASSERT_OK(cudaStreamIsCapturing(stream_, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  void* p = nullptr;
  CUDA_ASSERT_OK(cudaMallocAsync(&p, 1000, stream_));
  CUDA_ASSERT_OK(cudaFreeAsync(p, stream_));
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT_OK(cudaStreamEndCapture(stream_, &graph));

  size_t count = 0;
  CUDA_ASSERT_OK(cudaGraphGetNodes(graph, nullptr, &count));
  ASSERT_EQ(count, 2u);
  std::vector<cudaGraphNode_t> nodes(count);
  CUDA_ASSERT_OK(cudaGraphGetNodes(graph, nodes.data(), &count));
  cudaGraphNodeType type;
  CUDA_ASSERT_OK(cudaGraphNodeGetType(nodes[0], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeMemAlloc);
  CUDA_ASSERT_OK(cudaGraphNodeGetType(nodes[1], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeMemFree);
  cudaMemAllocNodeParams params{};
  CUDA_ASSERT_OK(cudaGraphMemAllocNodeGetParams(nodes[0], &params));
  EXPECT_EQ(params.dptr, p);
  EXPECT_EQ(params.bytesize, 1000u);
  EXPECT_EQ(params.poolProps.location.type, cudaMemLocationTypeDevice);
  void* freed = nullptr;
  CUDA_ASSERT_OK(cudaGraphMemFreeNodeGetParams(nodes[1], &freed));
  EXPECT_EQ(freed, p);
  cudaGraphNode_t from = nullptr;
  cudaGraphNode_t to = nullptr;
  cudaGraphEdgeData edge;
  edge.type = 7;
  count = 1;
  CUDA_ASSERT_OK(cudaGraphGetEdges(graph, &from, &to, &edge, &count));
  EXPECT_EQ(from, nodes[0]);
  EXPECT_EQ(to, nodes[1]);
  EXPECT_EQ(edge.type, 0);

  EXPECT_EQ(Used(), 0u) << "nothing is mapped before a launch";
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream_));
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(Used(), kGranule) << "graph memory is 2 MiB-granular";
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  CUDA_ASSERT_OK(cudaDeviceGraphMemTrim(0));
  EXPECT_EQ(Used(), 0u);
}

TEST_F(CudaGraphTest, KernelNodesRunRegisteredKernelsWithCopiedArguments) {
  float* out = nullptr;
  CUDA_ASSERT_OK(cudaMallocHost(&out, 64 * sizeof(float)));
  CUDA_ASSERT_OK(spcudaRegisterKernel(Fill));
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT_OK(cudaGraphCreate(&graph, 0));
  float value = 3;
  int n = 64;
  void* args[] = {&out, &value, &n};
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void*>(Fill);
  params.gridDim = dim3(2);
  params.blockDim = dim3(32);
  params.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  CUDA_ASSERT_OK(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &params));
  value = 5;  // copied when the node was made

  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));  // the executable graph keeps the node
  CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream_));
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[63], 3.0f);
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaFreeHost(out));
}

TEST_F(CudaGraphTest, KernelsLaunchedWhileCapturingBecomeKernelNodes) {
  float* out = nullptr;
  CUDA_ASSERT_OK(cudaMallocHost(&out, 32 * sizeof(float)));
  CUDA_ASSERT_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  CUDA_ASSERT_OK(spcudaLaunchKernel(Fill, 1, 32, 0, stream_, {}, out, 2.0f, 32));
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT_OK(cudaStreamEndCapture(stream_, &graph));
  EXPECT_NE(out[0], 2.0f) << "captured, not run";
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream_));
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(out[31], 2.0f);
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  CUDA_ASSERT_OK(cudaFreeHost(out));
}

TEST_F(CudaGraphTest, ForkedCaptureWithEventsAndStreamsMadeWhileCapturing) {
  CUDA_ASSERT_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  cudaStream_t other = nullptr;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t forked = nullptr;
  cudaEvent_t joined = nullptr;
  CUDA_ASSERT_OK(cudaEventCreate(&forked));
  CUDA_ASSERT_OK(cudaEventCreate(&joined));
  void* p = nullptr;
  CUDA_ASSERT_OK(cudaMallocAsync(&p, 4096, stream_));
  CUDA_ASSERT_OK(cudaEventRecord(forked, stream_));
  CUDA_ASSERT_OK(cudaStreamWaitEvent(other, forked, 0));
  CUDA_ASSERT_OK(cudaFreeAsync(p, other));
  CUDA_ASSERT_OK(cudaEventRecord(joined, other));
  CUDA_ASSERT_OK(cudaStreamWaitEvent(stream_, joined, 0));
  CUDA_ASSERT_OK(cudaStreamDestroy(other));
  CUDA_ASSERT_OK(cudaEventDestroy(forked));
  CUDA_ASSERT_OK(cudaEventDestroy(joined));
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT_OK(cudaStreamEndCapture(stream_, &graph));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));
}

// cudaEventRecordExternal and cudaEventWaitExternal make event record and
// wait nodes of a capture; other flag bits are cudaErrorInvalidValue.
TEST_F(CudaGraphTest, ExternalEventFlagsMakeEventNodes) {
  cudaEvent_t e = nullptr;
  CUDA_ASSERT_OK(cudaEventCreate(&e));
  EXPECT_EQ(cudaEventRecordWithFlags(e, stream_, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamWaitEvent(stream_, e, 2), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaEventRecordWithFlags(e, stream_, cudaEventRecordDefault));
  CUDA_ASSERT_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  CUDA_ASSERT_OK(cudaStreamWaitEvent(stream_, e, cudaEventWaitExternal));
  CUDA_ASSERT_OK(cudaEventRecordWithFlags(e, stream_, cudaEventRecordExternal));
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT_OK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphNode_t nodes[4];
  size_t count = 4;
  CUDA_ASSERT_OK(cudaGraphGetNodes(graph, nodes, &count));
  ASSERT_EQ(count, 2u);
  cudaGraphNodeType type;
  CUDA_ASSERT_OK(cudaGraphNodeGetType(nodes[0], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeWaitEvent);
  CUDA_ASSERT_OK(cudaGraphNodeGetType(nodes[1], &type));
  EXPECT_EQ(type, cudaGraphNodeTypeEventRecord);
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream_));
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));
  CUDA_EXPECT_OK(cudaEventQuery(e));
  CUDA_EXPECT_OK(cudaGraphExecDestroy(exec));
  CUDA_EXPECT_OK(cudaGraphDestroy(graph));
  CUDA_EXPECT_OK(cudaEventDestroy(e));
}

TEST_F(CudaGraphTest, MisuseGivesCudasCodes) {
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorInvalidValue) << "not capturing";
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  CUDA_ASSERT_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  // Synchronizing a capturing stream is not allowed, and ends the capture's
  // chances.
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);

  CUDA_ASSERT_OK(cudaGraphCreate(&graph, 0));
  cudaKernelNodeParams kernel{};
  kernel.func = reinterpret_cast<void*>(Unregistered);
  kernel.gridDim = dim3(1);
  kernel.blockDim = dim3(1);
  cudaGraphNode_t node = nullptr;
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &kernel),
            cudaErrorInvalidDeviceFunction);
  cudaMemAllocNodeParams alloc{};
  alloc.poolProps.allocType = cudaMemAllocationTypePinned;
  alloc.poolProps.location = {cudaMemLocationTypeDevice, 0};
  alloc.bytesize = 0;
  EXPECT_EQ(cudaGraphAddMemAllocNode(&node, graph, nullptr, 0, &alloc), cudaErrorInvalidValue);
  alloc.poolProps.location.id = 99;
  alloc.bytesize = 100;
  EXPECT_EQ(cudaGraphAddMemAllocNode(&node, graph, nullptr, 0, &alloc), cudaErrorInvalidDevice);
  int not_graph_memory = 0;
  EXPECT_EQ(cudaGraphAddMemFreeNode(&node, graph, nullptr, 0, &not_graph_memory),
            cudaErrorInvalidValue);
  cudaGraphEdgeData programmatic{};
  programmatic.type = 1;
  cudaGraphNode_t a = nullptr;
  cudaGraphNode_t b = nullptr;
  CUDA_ASSERT_OK(cudaGraphAddEmptyNode(&a, graph, nullptr, 0));
  CUDA_ASSERT_OK(cudaGraphAddEmptyNode(&b, graph, nullptr, 0));
  EXPECT_EQ(cudaGraphAddDependencies(graph, &a, &b, &programmatic, 1), cudaErrorNotSupported);
  CUDA_EXPECT_OK(cudaGraphAddDependencies(graph, &a, &b, nullptr, 1));
  EXPECT_EQ(cudaGraphAddDependencies(graph, &b, &a, nullptr, 1), cudaErrorInvalidValue)
      << "a cycle";
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagDeviceLaunch),
            cudaErrorNotSupported);
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 1u << 20), cudaErrorInvalidValue);
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));

  uint64_t value = 1;
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &value),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(7, cudaGraphMemAttrUsedMemCurrent, &value),
            cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, nullptr),
            cudaErrorInvalidValue);
}

TEST_F(CudaGraphTest, UnfreedAllocationsHoldMemoryUntilFreedAndTrimmed) {
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT_OK(cudaGraphCreate(&graph, 0));
  cudaMemAllocNodeParams alloc{};
  alloc.poolProps.allocType = cudaMemAllocationTypePinned;
  alloc.poolProps.location = {cudaMemLocationTypeDevice, 0};
  alloc.bytesize = 3 << 20;
  cudaGraphNode_t node = nullptr;
  CUDA_ASSERT_OK(cudaGraphAddMemAllocNode(&node, graph, nullptr, 0, &alloc));
  cudaGraphExec_t exec = nullptr;
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream_));
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(Used(), 2 * kGranule);
  EXPECT_EQ(cudaGraphLaunch(exec, stream_), cudaErrorInvalidValue)
      << "the previous launch's allocation is not freed";

  cudaPointerAttributes attr{};
  CUDA_ASSERT_OK(cudaPointerGetAttributes(&attr, alloc.dptr));
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  CUDA_ASSERT_OK(cudaDeviceGraphMemTrim(0));
  EXPECT_EQ(Used(), 2 * kGranule) << "held by the live allocation";
  CUDA_ASSERT_OK(cudaFree(alloc.dptr));
  EXPECT_EQ(Used(), 2 * kGranule) << "freed, not yet trimmed";
  uint64_t high = 0;
  CUDA_ASSERT_OK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &high));
  EXPECT_EQ(high, 2 * kGranule);
  CUDA_ASSERT_OK(cudaDeviceGraphMemTrim(0));
  EXPECT_EQ(Used(), 0u);
  uint64_t zero = 0;
  CUDA_ASSERT_OK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
  CUDA_ASSERT_OK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &high));
  EXPECT_EQ(high, 0u);
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));
}

TEST_F(CudaGraphTest, ManagedMemoryIsFreedWithCudaFree) {
  bool* flag = nullptr;
  CUDA_ASSERT_OK(cudaMallocManaged(reinterpret_cast<void**>(&flag), sizeof(bool)));
  *flag = true;
  CUDA_ASSERT_OK(cudaFree(flag));
  EXPECT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&flag), 8, 0x10), cudaErrorInvalidValue);
}

}  // namespace
