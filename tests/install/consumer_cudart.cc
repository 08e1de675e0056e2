// A CUDA program that uses an installed streampool through its CUDA face:
// `#include <cuda_runtime.h>` resolves to include/streampool/cuda/ (from
// streampool::cudart, or pkg-config streampool-cudart), one kernel launch is
// written as spcudaLaunchKernel, and the rest is CUDA as written for a GPU.
// Exit status 0 on success.
#include <cuda_runtime.h>

#include <cstdio>

#include "streampool/cuda/interop.h"

__global__ void Square(int* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = i * i;
}

int main() {
  constexpr int n = 1000;
  int* d = nullptr;
  int host[n];
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) return 1;
  if (cudaMallocAsync(&d, n * sizeof(int), s) != cudaSuccess) return 2;
  // Square<<<(n + 127) / 128, 128, 0, s>>>(d, n);
  if (spcudaLaunchKernel(Square, (n + 127) / 128, 128, 0, s, {{d, n * sizeof(int), 1}}, d, n) !=
      cudaSuccess) {
    return 3;
  }
  if (cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, s) != cudaSuccess) return 4;
  if (cudaFreeAsync(d, s) != cudaSuccess) return 5;
  if (cudaStreamSynchronize(s) != cudaSuccess) return 6;
  for (int i = 0; i < n; ++i) {
    if (host[i] != i * i) return 7;
  }
  spRuntime_t rt = nullptr;
  size_t reports = 1;
  if (spcudaGetRuntime(&rt) != cudaSuccess) return 8;
  if (spCheckerGetReports(rt, nullptr, 0, &reports) != spSuccess || reports != 0) return 9;
  if (cudaStreamDestroy(s) != cudaSuccess || cudaGetLastError() != cudaSuccess) return 10;
  std::printf("consumer_cudart: %s\n", cudaGetErrorName(cudaSuccess));
  return 0;
}
