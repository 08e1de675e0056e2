// A CUDA program with stream-ordered allocation, built unchanged against
// streampool's <cuda_runtime.h> (docs/cuda.md) except for its
// kernel launches: each `kernel<<<grid, block, shared, stream>>>(args...)`
// becomes one spcudaLaunchKernel call that also says which bytes the kernel
// reads and writes, for the stream-order checker. The original line is kept
// in a comment above each launch.
//
// The program: a producer stream fills two temporary vectors, a kernel adds
// them into a third; the temporaries are freed on the producer stream, an
// event hands them to a consumer stream, whose allocations of the same size
// reuse them without any synchronize (the pool follows the event), and the
// result is checked on the host. Exit status 0 when every check holds.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                             \
  do {                                                                          \
    cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorName(err_));                                     \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

#define EXPECT(cond)                                                       \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "cudart_stream_ordered: expected %s\n", #cond); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

__global__ void Fill(float* v, float value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = value * i;
}

__global__ void Add(const float* a, const float* b, float* c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  // Whole 2 MiB granules, so that a reuse is visibly the same bytes.
  constexpr int n = (2 << 20) / sizeof(float);
  constexpr size_t bytes = n * sizeof(float);
  const dim3 block(256);
  const dim3 grid((n + block.x - 1) / block.x);

  int pools = 0;
  CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0));
  EXPECT(pools == 1);
  cudaStream_t producer, consumer;
  CHECK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  cudaEvent_t freed;
  CHECK(cudaEventCreateWithFlags(&freed, cudaEventDisableTiming));
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t threshold = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));

  float *a, *b, *c;
  CHECK(cudaMallocAsync(&a, bytes, producer));
  CHECK(cudaMallocAsync(&b, bytes, producer));
  CHECK(cudaMallocAsync(&c, bytes, producer));
  // Fill<<<grid, block, 0, producer>>>(a, 1.0f, n);
  CHECK(spcudaLaunchKernel(Fill, grid, block, 0, producer, {{a, bytes, 1}}, a, 1.0f, n));
  // Fill<<<grid, block, 0, producer>>>(b, 2.0f, n);
  CHECK(spcudaLaunchKernel(Fill, grid, block, 0, producer, {{b, bytes, 1}}, b, 2.0f, n));
  // Add<<<grid, block, 0, producer>>>(a, b, c, n);
  CHECK(spcudaLaunchKernel(Add, grid, block, 0, producer,
                           {{a, bytes, 0}, {b, bytes, 0}, {c, bytes, 1}}, a, b, c, n));
  CHECK(cudaFreeAsync(a, producer));
  CHECK(cudaFreeAsync(b, producer));
  CHECK(cudaEventRecord(freed, producer));

  // The consumer waits for the frees, so the pool may hand it their bytes.
  CHECK(cudaStreamWaitEvent(consumer, freed, 0));
  float *x, *y;
  CHECK(cudaMallocAsync(&x, bytes, consumer));
  CHECK(cudaMallocAsync(&y, bytes, consumer));
  EXPECT((x == a || x == b) && (y == a || y == b) && x != y);
  // Add<<<grid, block, 0, consumer>>>(c, c, x, n): c is ready, through the event.
  CHECK(spcudaLaunchKernel(Add, grid, block, 0, consumer, {{c, bytes, 0}, {x, bytes, 1}}, c, c, x,
                           n));

  std::vector<float> host(n);
  CHECK(cudaMemcpyAsync(host.data(), x, bytes, cudaMemcpyDeviceToHost, consumer));
  CHECK(cudaFreeAsync(x, consumer));
  CHECK(cudaFreeAsync(y, consumer));
  CHECK(cudaFreeAsync(c, consumer));
  CHECK(cudaStreamSynchronize(consumer));
  for (int i = 0; i < n; i += 997) EXPECT(host[i] == 6.0f * i);

  uint64_t reserved = 0;
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  EXPECT(reserved == 3 * bytes);  // three buffers' worth served five allocations
  CHECK(cudaMemPoolTrimTo(pool, 0));
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  EXPECT(reserved == 0);
  CHECK(cudaEventDestroy(freed));
  CHECK(cudaStreamDestroy(producer));
  CHECK(cudaStreamDestroy(consumer));
  CHECK(cudaGetLastError());
  std::printf("cudart_stream_ordered: 5 allocations from 3 buffers of %zu bytes, sum checked\n",
              bytes);
  return 0;
}
