// The graph functions of cuda_runtime_api.h over the sp* API's graphs, and
// the registry of kernels that kernel nodes name by address.
//
// Handles are the sp* API's (cudaGraph_t is an spGraph_t, and so on). What
// CUDA 13 adds to its prototypes beyond the sp* calls is edge data: the sp*
// graphs know default edges only, so any other edge is cudaErrorNotSupported.
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "src/cuda/call.h"
#include "src/cuda/launch.h"
#include "src/cuda/locations.h"
#include "streampool/cuda/cuda_runtime.h"
#include "streampool/streampool.h"

using streampool::internal::compat::Raw;
using streampool::internal::cuda::Call;
using streampool::internal::cuda::CheckConfiguration;
using streampool::internal::cuda::FromSp;
using streampool::internal::cuda::FromStatus;
using streampool::internal::cuda::RunFn;
using streampool::internal::cuda::RunThread;
using streampool::internal::cuda::WithRuntime;
namespace compat = streampool::internal::compat;

namespace {

spGraph_t Sp(cudaGraph_t g) { return reinterpret_cast<spGraph_t>(g); }
spGraphNode_t Sp(cudaGraphNode_t n) { return reinterpret_cast<spGraphNode_t>(n); }
spGraphExec_t Sp(cudaGraphExec_t e) { return reinterpret_cast<spGraphExec_t>(e); }
spEvent_t Sp(cudaEvent_t e) { return reinterpret_cast<spEvent_t>(e); }
const spGraphNode_t* Sp(const cudaGraphNode_t* n) {
  return reinterpret_cast<const spGraphNode_t*>(n);
}
spGraphNode_t* Out(cudaGraphNode_t* n) { return reinterpret_cast<spGraphNode_t*>(n); }

// Whether every one of n edges (none when edges is NULL) is a default edge.
bool DefaultEdges(const cudaGraphEdgeData* edges, size_t n) {
  if (edges == nullptr) return true;
  static constexpr cudaGraphEdgeData kDefault{};
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&edges[i], &kDefault, sizeof kDefault) != 0) return false;
  }
  return true;
}

// A query that copies up to *count handles: the edge data, where asked
// for, of the ones copied is default.
template <class Query>
cudaError_t QueryWithEdges(size_t* count, bool copies, cudaGraphEdgeData* edges, Query query) {
  if (count == nullptr || (edges != nullptr && !copies)) return cudaErrorInvalidValue;
  const size_t asked = *count;
  if (cudaError_t e = FromSp(query()); e != cudaSuccess) return e;
  if (edges != nullptr) {
    for (size_t i = 0; i < asked && i < *count; ++i) edges[i] = cudaGraphEdgeData{};
  }
  return cudaSuccess;
}

// The kernels kernel nodes may name, for the process: a program registers
// each kernel once, so the table grows with the program's kernels, not with
// its history.
class KernelRegistry {
 public:
  static KernelRegistry& Get() {
    // Leaked: static destruction must not race a late node's creation.
    static KernelRegistry* const registry = new KernelRegistry;
    return *registry;
  }
  void Put(const void* func, const spcudaKernelInvoker& invoker) {
    absl::MutexLock lock(&mu_);
    kernels_[func] = invoker;
  }
  bool Find(const void* func, spcudaKernelInvoker* out) const {
    absl::MutexLock lock(&mu_);
    auto it = kernels_.find(func);
    if (it == kernels_.end()) return false;
    *out = it->second;
    return true;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const void*, spcudaKernelInvoker> kernels_ ABSL_GUARDED_BY(mu_);
};

// The node's body: the registered kernel with a copy of its arguments, run
// over the grid; the sp* node owns it and destroys it with its last copy.
cudaError_t KernelBodyOf(Call& call, const cudaKernelNodeParams& p, compat::NodeBody* out) {
  spcudaKernelInvoker invoker{};
  if (!KernelRegistry::Get().Find(p.func, &invoker)) return cudaErrorInvalidDeviceFunction;
  if (cudaError_t e = CheckConfiguration(p.gridDim, p.blockDim); e != cudaSuccess) return e;
  if (invoker.arity != 0) {
    if (p.kernelParams == nullptr) return cudaErrorInvalidValue;
    for (size_t i = 0; i < invoker.arity; ++i) {
      if (p.kernelParams[i] == nullptr) return cudaErrorInvalidValue;
    }
  }
  void* ctx = invoker.copy(p.func, p.kernelParams);
  if (ctx == nullptr) return cudaErrorMemoryAllocation;
  auto* kernel =
      new (std::nothrow) compat::FaceKernel<RunFn>{invoker.run, ctx, invoker.destroy, &RunThread};
  if (kernel == nullptr) {
    invoker.destroy(ctx);
    return cudaErrorMemoryAllocation;
  }
  absl::StatusOr<compat::NodeBody> body = compat::KernelNodeBody(
      call.rt(), compat::Dim3{p.gridDim.x, p.gridDim.y, p.gridDim.z},
      compat::Dim3{p.blockDim.x, p.blockDim.y, p.blockDim.z},
      compat::KernelBody{&compat::RunFaceKernel<RunFn>, kernel, &compat::DestroyFaceKernel<RunFn>});
  if (!body.ok()) return FromStatus(body.status());
  *out = *body;
  return cudaSuccess;
}

constexpr unsigned long long kInstantiateFlags =  // NOLINT(runtime/int)
    cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
    cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;

cudaError_t CheckGraphMemDevice(Call& call, int device, void* value) {
  if (value == nullptr) return cudaErrorInvalidValue;
  return call.CheckDevice(device);
}

}  // namespace

extern "C" {

cudaError_t spcudaRegisterKernelInvoker(const void* func,
                                        const spcudaKernelInvoker* invoker) noexcept {
  return streampool::internal::cuda::Api([&] {
    if (func == nullptr || invoker == nullptr || invoker->copy == nullptr ||
        invoker->run == nullptr || invoker->destroy == nullptr) {
      return cudaErrorInvalidValue;
    }
    KernelRegistry::Get().Put(func, *invoker);
    return cudaSuccess;
  });
}

// ----------------------------------------------------------------- capture

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) noexcept {
  return WithRuntime([&](Call& call) {
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spStreamBeginCapture(s, static_cast<spStreamCaptureMode>(Raw(mode))));
  });
}

cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                          const cudaGraphNode_t* dependencies,
                                          const cudaGraphEdgeData* dependencyData,
                                          size_t numDependencies,
                                          cudaStreamCaptureMode mode) noexcept {
  return WithRuntime([&](Call& call) {
    if (!DefaultEdges(dependencyData, numDependencies)) return cudaErrorNotSupported;
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spStreamBeginCaptureToGraph(s, Sp(graph), Sp(dependencies), numDependencies,
                                              static_cast<spStreamCaptureMode>(Raw(mode))));
  });
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) noexcept {
  return WithRuntime([&](Call& call) {
    if (pGraph == nullptr) return cudaErrorInvalidValue;
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spStreamEndCapture(s, reinterpret_cast<spGraph_t*>(pGraph)));
  });
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  cudaStreamCaptureStatus* pCaptureStatus) noexcept {
  return cudaStreamGetCaptureInfo(stream, pCaptureStatus);
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     cudaStreamCaptureStatus* captureStatus_out,
                                     unsigned long long* id_out,  // NOLINT(runtime/int)
                                     cudaGraph_t* graph_out,
                                     const cudaGraphNode_t** dependencies_out,
                                     const cudaGraphEdgeData** edgeData_out,
                                     size_t* numDependencies_out) noexcept {
  return WithRuntime([&](Call& call) {
    if (captureStatus_out == nullptr) return cudaErrorInvalidValue;
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    spStreamCaptureStatus status = spStreamCaptureStatusNone;
    const spGraphNode_t* deps = nullptr;
    if (cudaError_t e = FromSp(spStreamGetCaptureInfo(s, &status, id_out,
                                                      reinterpret_cast<spGraph_t*>(graph_out),
                                                      &deps, numDependencies_out));
        e != cudaSuccess) {
      return e;
    }
    *captureStatus_out = static_cast<cudaStreamCaptureStatus>(status);
    if (dependencies_out != nullptr) {
      *dependencies_out = reinterpret_cast<const cudaGraphNode_t*>(deps);
    }
    if (edgeData_out != nullptr) *edgeData_out = nullptr;  // all default
    return cudaSuccess;
  });
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) noexcept {
  return streampool::internal::cuda::Api([&] {
    if (mode == nullptr) return cudaErrorInvalidValue;
    auto m = static_cast<spStreamCaptureMode>(Raw(*mode));
    if (cudaError_t e = FromSp(spThreadExchangeStreamCaptureMode(&m)); e != cudaSuccess) return e;
    *mode = static_cast<cudaStreamCaptureMode>(m);
    return cudaSuccess;
  });
}

// ---------------------------------------------------------- graphs, nodes

cudaError_t cudaGraphCreate(cudaGraph_t* pGraph, unsigned int flags) noexcept {
  return WithRuntime([&](Call& call) {
    if (pGraph == nullptr) return cudaErrorInvalidValue;
    return FromSp(spGraphCreate(reinterpret_cast<spGraph_t*>(pGraph), call.c(), flags));
  });
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) noexcept {
  return WithRuntime([&](Call&) { return FromSp(spGraphDestroy(Sp(graph))); });
}

cudaError_t cudaGraphClone(cudaGraph_t* pGraphClone, cudaGraph_t originalGraph) noexcept {
  return WithRuntime([&](Call&) {
    if (pGraphClone == nullptr) return cudaErrorInvalidValue;
    return FromSp(spGraphClone(reinterpret_cast<spGraph_t*>(pGraphClone), Sp(originalGraph)));
  });
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                   const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                   const cudaKernelNodeParams* pNodeParams) noexcept {
  return WithRuntime([&](Call& call) {
    if (pGraphNode == nullptr || pNodeParams == nullptr) return cudaErrorInvalidValue;
    // Arguments packed in CUDA's "extra" buffer carry no types to copy by.
    if (pNodeParams->extra != nullptr) return cudaErrorNotSupported;
    compat::NodeBody body;
    if (cudaError_t e = KernelBodyOf(call, *pNodeParams, &body); e != cudaSuccess) return e;
    const spKernelNodeParams params{
        call.rt().config().kernel_ns, nullptr, 0, body.fn, body.user_data, body.destroy};
    const spError_t e = spGraphAddKernelNode(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                             numDependencies, &params);
    if (e != spSuccess) body.destroy(body.user_data);
    return FromSp(e);
  });
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                     const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                     void* dst, const void* src, size_t count,
                                     cudaMemcpyKind kind) noexcept {
  return WithRuntime([&](Call&) {
    const int k = static_cast<int>(Raw(kind));
    if (k < cudaMemcpyHostToHost || k > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
    return FromSp(spGraphAddMemcpyNode1D(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                         numDependencies, dst, src, count));
  });
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                   const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                   const cudaMemsetParams* pMemsetParams) noexcept {
  return WithRuntime([&](Call&) {
    if (pMemsetParams == nullptr) return cudaErrorInvalidValue;
    const cudaMemsetParams& p = *pMemsetParams;
    const unsigned size = p.elementSize;
    if ((size != 1 && size != 2 && size != 4) || p.width == 0 || p.height == 0) {
      return cudaErrorInvalidValue;
    }
    const size_t row = p.width * size;
    if (p.width > SIZE_MAX / size || p.height > SIZE_MAX / row) return cudaErrorInvalidValue;
    if (p.height > 1 && p.pitch < row) return cudaErrorInvalidValue;
    if (p.height > 1 && p.pitch != row) return cudaErrorNotSupported;
    const unsigned byte = p.value & 0xFFu;
    for (unsigned i = 1; i < size; ++i) {
      if (((p.value >> (8 * i)) & 0xFFu) != byte) return cudaErrorNotSupported;
    }
    return FromSp(spGraphAddMemsetNode(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                       numDependencies, p.dst, static_cast<int>(byte),
                                       row * p.height));
  });
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                 const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                 const cudaHostNodeParams* pNodeParams) noexcept {
  return WithRuntime([&](Call&) {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    return FromSp(spGraphAddHostNode(Out(pGraphNode), Sp(graph), Sp(pDependencies), numDependencies,
                                     pNodeParams->fn, pNodeParams->userData));
  });
}

cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                        const cudaGraphNode_t* pDependencies,
                                        size_t numDependencies, cudaEvent_t event) noexcept {
  return WithRuntime([&](Call&) {
    return FromSp(spGraphAddEventRecordNode(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                            numDependencies, Sp(event)));
  });
}

cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                      const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                      cudaEvent_t event) noexcept {
  return WithRuntime([&](Call&) {
    return FromSp(spGraphAddEventWaitNode(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                          numDependencies, Sp(event)));
  });
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                  const cudaGraphNode_t* pDependencies,
                                  size_t numDependencies) noexcept {
  return WithRuntime([&](Call&) {
    return FromSp(
        spGraphAddEmptyNode(Out(pGraphNode), Sp(graph), Sp(pDependencies), numDependencies));
  });
}

cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                       const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                       cudaGraph_t childGraph) noexcept {
  return WithRuntime([&](Call&) {
    return FromSp(spGraphAddChildGraphNode(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                           numDependencies, Sp(childGraph)));
  });
}

cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                     const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                     cudaMemAllocNodeParams* nodeParams) noexcept {
  return WithRuntime([&](Call& call) {
    if (nodeParams == nullptr) return cudaErrorInvalidValue;
    const cudaMemPoolProps& props = nodeParams->poolProps;
    if (Raw(props.allocType) != cudaMemAllocationTypePinned) return cudaErrorInvalidValue;
    // Graph memory is device memory of no exportable kind here.
    if (Raw(props.location.type) != cudaMemLocationTypeDevice) return cudaErrorNotSupported;
    if (Raw(props.handleTypes) != cudaMemHandleTypeNone) return cudaErrorNotSupported;
    if (cudaError_t e = call.CheckDevice(props.location.id); e != cudaSuccess) return e;
    std::vector<spMemAccessDesc> access;
    if (cudaError_t e = streampool::internal::cuda::ToSpAccessDescs(
            nodeParams->accessDescs, nodeParams->accessDescCount, &access);
        e != cudaSuccess) {
      return e;
    }
    spMemAllocNodeParams params{};
    params.poolProps.allocType = spMemAllocationTypeDevice;
    params.poolProps.device = props.location.id;
    params.accessDescs = access.data();
    params.accessDescCount = access.size();
    params.bytesize = nodeParams->bytesize;
    if (cudaError_t e = FromSp(spGraphAddMemAllocNode(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                                      numDependencies, &params));
        e != cudaSuccess) {
      return e;
    }
    nodeParams->dptr = params.dptr;
    return cudaSuccess;
  });
}

cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                    const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                    void* dptr) noexcept {
  return WithRuntime([&](Call&) {
    return FromSp(spGraphAddMemFreeNode(Out(pGraphNode), Sp(graph), Sp(pDependencies),
                                        numDependencies, dptr));
  });
}

cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node,
                                           cudaMemAllocNodeParams* params_out) noexcept {
  return WithRuntime([&](Call&) {
    if (params_out == nullptr) return cudaErrorInvalidValue;
    spMemAllocNodeParams p{};
    if (cudaError_t e = FromSp(spGraphMemAllocNodeGetParams(Sp(node), &p)); e != cudaSuccess) {
      return e;
    }
    // Valid until the thread's next call, as the sp* call's own copy is.
    thread_local std::vector<cudaMemAccessDesc> descs;
    descs.clear();
    for (size_t i = 0; i < p.accessDescCount; ++i) {
      const spMemAccessDesc& d = p.accessDescs[i];
      descs.push_back(cudaMemAccessDesc{
          cudaMemLocation{static_cast<cudaMemLocationType>(d.location.type), d.location.id},
          static_cast<cudaMemAccessFlags>(d.flags)});
    }
    *params_out = cudaMemAllocNodeParams{};
    params_out->poolProps.allocType = cudaMemAllocationTypePinned;
    params_out->poolProps.location = cudaMemLocation{cudaMemLocationTypeDevice, p.poolProps.device};
    params_out->accessDescs = descs.empty() ? nullptr : descs.data();
    params_out->accessDescCount = descs.size();
    params_out->bytesize = p.bytesize;
    params_out->dptr = p.dptr;
    return cudaSuccess;
  });
}

cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void* dptr_out) noexcept {
  return WithRuntime([&](Call&) {
    if (dptr_out == nullptr) return cudaErrorInvalidValue;
    return FromSp(spGraphMemFreeNodeGetParams(Sp(node), static_cast<void**>(dptr_out)));
  });
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                     const cudaGraphNode_t* to, const cudaGraphEdgeData* edgeData,
                                     size_t numDependencies) noexcept {
  return WithRuntime([&](Call&) {
    if (!DefaultEdges(edgeData, numDependencies)) return cudaErrorNotSupported;
    return FromSp(spGraphAddDependencies(Sp(graph), Sp(from), Sp(to), numDependencies));
  });
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes,
                              size_t* numNodes) noexcept {
  return WithRuntime(
      [&](Call&) { return FromSp(spGraphGetNodes(Sp(graph), Out(nodes), numNodes)); });
}

cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* pRootNodes,
                                  size_t* pNumRootNodes) noexcept {
  return WithRuntime([&](Call&) {
    return FromSp(spGraphGetRootNodes(Sp(graph), Out(pRootNodes), pNumRootNodes));
  });
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                              cudaGraphEdgeData* edgeData, size_t* numEdges) noexcept {
  return WithRuntime([&](Call&) {
    return QueryWithEdges(numEdges, from != nullptr, edgeData,
                          [&] { return spGraphGetEdges(Sp(graph), Out(from), Out(to), numEdges); });
  });
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* pType) noexcept {
  return WithRuntime([&](Call&) {
    if (pType == nullptr) return cudaErrorInvalidValue;
    spGraphNodeType type = spGraphNodeTypeEmpty;
    if (cudaError_t e = FromSp(spGraphNodeGetType(Sp(node), &type)); e != cudaSuccess) return e;
    *pType = static_cast<cudaGraphNodeType>(type);
    return cudaSuccess;
  });
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* pDependencies,
                                         cudaGraphEdgeData* edgeData,
                                         size_t* pNumDependencies) noexcept {
  return WithRuntime([&](Call&) {
    return QueryWithEdges(pNumDependencies, pDependencies != nullptr, edgeData, [&] {
      return spGraphNodeGetDependencies(Sp(node), Out(pDependencies), pNumDependencies);
    });
  });
}

cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* pDependentNodes,
                                           cudaGraphEdgeData* edgeData,
                                           size_t* pNumDependentNodes) noexcept {
  return WithRuntime([&](Call&) {
    return QueryWithEdges(pNumDependentNodes, pDependentNodes != nullptr, edgeData, [&] {
      return spGraphNodeGetDependentNodes(Sp(node), Out(pDependentNodes), pNumDependentNodes);
    });
  });
}

// -------------------------------------------------------------- execution

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags) noexcept {  // NOLINT(runtime/int)
  return WithRuntime([&](Call&) {
    if ((flags & ~kInstantiateFlags) != 0) return cudaErrorInvalidValue;
    // A device-side launch needs device code; node priorities mean nothing
    // where every stream has the one priority.
    if ((flags & cudaGraphInstantiateFlagDeviceLaunch) != 0) return cudaErrorNotSupported;
    const unsigned long long sp_flags =  // NOLINT(runtime/int)
        flags & (cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload);
    return FromSp(
        spGraphInstantiate(reinterpret_cast<spGraphExec_t*>(pGraphExec), Sp(graph), sp_flags));
  });
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                          unsigned long long flags) noexcept {  // NOLINT
  return cudaGraphInstantiate(pGraphExec, graph, flags);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spGraphUpload(Sp(graphExec), s));
  });
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) noexcept {
  return WithRuntime([&](Call& call) {
    spStream_t s = nullptr;
    if (cudaError_t e = call.Stream(stream, &s); e != cudaSuccess) return e;
    return FromSp(spGraphLaunch(Sp(graphExec), s));
  });
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) noexcept {
  return WithRuntime([&](Call&) { return FromSp(spGraphExecDestroy(Sp(graphExec))); });
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                cudaGraphExecUpdateResultInfo* resultInfo) noexcept {
  return WithRuntime([&](Call&) {
    if (resultInfo == nullptr) return cudaErrorInvalidValue;
    spGraphExecUpdateResult result = spGraphExecUpdateError;
    const cudaError_t e = FromSp(spGraphExecUpdate(Sp(hGraphExec), Sp(hGraph), &result));
    *resultInfo = cudaGraphExecUpdateResultInfo{static_cast<cudaGraphExecUpdateResult>(result),
                                                nullptr, nullptr};
    return e;
  });
}

// ------------------------------------------------------------ graph memory

cudaError_t cudaDeviceGraphMemTrim(int device) noexcept {
  return WithRuntime([&](Call& call) {
    if (cudaError_t e = call.CheckDevice(device); e != cudaSuccess) return e;
    return FromSp(spDeviceGraphMemTrim(call.c(), device));
  });
}

cudaError_t cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                           void* value) noexcept {
  return WithRuntime([&](Call& call) {
    if (cudaError_t e = CheckGraphMemDevice(call, device, value); e != cudaSuccess) return e;
    return FromSp(spDeviceGetGraphMemAttribute(call.c(), device,
                                               static_cast<spGraphMemAttributeType>(Raw(attr)),
                                               static_cast<uint64_t*>(value)));
  });
}

cudaError_t cudaDeviceSetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                           void* value) noexcept {
  return WithRuntime([&](Call& call) {
    if (cudaError_t e = CheckGraphMemDevice(call, device, value); e != cudaSuccess) return e;
    return FromSp(spDeviceSetGraphMemAttribute(call.c(), device,
                                               static_cast<spGraphMemAttributeType>(Raw(attr)),
                                               static_cast<const uint64_t*>(value)));
  });
}

}  // extern "C"
