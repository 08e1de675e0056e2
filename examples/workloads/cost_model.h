// The cost model every workload takes its kernel durations from: one
// accelerator of roughly the current generation, a PCIe link to the host and
// a collective interconnect to its peers. The figures are round numbers on
// purpose: the workloads exist to produce realistic *shapes* of allocation
// and stream traffic, so what matters is the ratio between compute, memory
// traffic and transfers, not any one device's datasheet.
//
//   compute           100 TFLOP/s   (dense bf16 matmul rate)
//   HBM               2 TB/s        (memory-bound kernels)
//   PCIe              25 GB/s       (host <-> device copies, pinned memory)
//   interconnect      100 GB/s      (per-rank bandwidth of ring collectives)
//   kernel floor      2 us          (launch and tail of the smallest kernel)
//   collective floor  10 us         (latency of one collective)
//
// A kernel lasts max(flops / compute, bytes / HBM, floor): the roofline.
#ifndef STREAMPOOL_EXAMPLES_WORKLOADS_COST_MODEL_H_
#define STREAMPOOL_EXAMPLES_WORKLOADS_COST_MODEL_H_

#include <algorithm>
#include <cstdint>

namespace workloads::cost {

inline constexpr double kFlopsPerNs = 100e12 / 1e9;
inline constexpr double kHbmBytesPerNs = 2e12 / 1e9;
inline constexpr double kPcieBytesPerNs = 25e9 / 1e9;
inline constexpr double kLinkBytesPerNs = 100e9 / 1e9;
inline constexpr uint64_t kKernelFloorNs = 2000;
inline constexpr uint64_t kCollectiveFloorNs = 10000;

// What cudaMemcpyAsync costs on the CUDA face by itself: its implicit
// runtime copies at spRuntimeConfig's default copyBytesPerUs (1,000,000
// bytes per microsecond, i.e. 1 TB/s, about device-to-device speed). A host
// copy at that rate would be forty times too fast for PCIe, so PcieNs minus
// this is added as a kernel on the copy stream (see PcieCopyAsync in
// workload.h).
inline constexpr double kFaceCopyBytesPerNs = 1e6 / 1e3;

inline uint64_t Ns(double ns) { return static_cast<uint64_t>(ns + 0.5); }

// A kernel doing `flops` arithmetic and moving `bytes` through HBM.
inline uint64_t KernelNs(double flops, double bytes) {
  return std::max({Ns(flops / kFlopsPerNs), Ns(bytes / kHbmBytesPerNs), kKernelFloorNs});
}

// Matmul of (m x k) by (k x n) in 2-byte elements: 2mnk flops, and the
// three operands through HBM once.
inline uint64_t MatmulNs(double m, double n, double k) {
  return KernelNs(2 * m * n * k, 2 * (m * k + k * n + m * n));
}

// An elementwise or normalisation kernel reading `in` bytes and writing `out`.
inline uint64_t ElementwiseNs(double in, double out) { return KernelNs(0, in + out); }

// One direction of a pinned host <-> device copy.
inline uint64_t PcieNs(double bytes) {
  return std::max(Ns(bytes / kPcieBytesPerNs), kKernelFloorNs);
}

// The part of a PCIe copy cudaMemcpyAsync does not already take.
inline uint64_t PciePadNs(double bytes) {
  const uint64_t face = Ns(bytes / kFaceCopyBytesPerNs);
  const uint64_t pcie = PcieNs(bytes);
  return pcie > face ? pcie - face : 0;
}

// Ring collectives over `ranks` peers: each rank sends and receives
// (ranks - 1) / ranks of the full buffer per phase; an all-reduce is a
// reduce-scatter plus an all-gather.
inline uint64_t AllGatherNs(double full_bytes, int ranks) {
  if (ranks <= 1) return kKernelFloorNs;
  return kCollectiveFloorNs + Ns(full_bytes * (ranks - 1) / ranks / kLinkBytesPerNs);
}
inline uint64_t ReduceScatterNs(double full_bytes, int ranks) {
  return AllGatherNs(full_bytes, ranks);
}
inline uint64_t AllReduceNs(double bytes, int ranks) {
  if (ranks <= 1) return kKernelFloorNs;
  return kCollectiveFloorNs + Ns(2 * bytes * (ranks - 1) / ranks / kLinkBytesPerNs);
}

// A point-to-point send of `bytes` to a neighbour (pipeline stages).
inline uint64_t SendNs(double bytes) { return kCollectiveFloorNs + Ns(bytes / kLinkBytesPerNs); }

}  // namespace workloads::cost

#endif  // STREAMPOOL_EXAMPLES_WORKLOADS_COST_MODEL_H_
