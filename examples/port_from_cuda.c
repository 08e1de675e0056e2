/*
 * A small cudaMallocAsync program ported line by line to the sp* C API.
 * Each CUDA line is kept as a comment above its port.
 *
 * The program: a producer stream fills a temporary buffer, copies it to the
 * host and frees it; an event hands the freed bytes to a consumer stream,
 * which allocates the same size and gets the same bytes without any
 * synchronize (the pool follows the event dependency). The pool keeps its
 * memory across synchronizes (release threshold UINT64_MAX) until it is
 * trimmed. Exit status 0 when every step did what the comments say.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "streampool/streampool.h"

/* CUDA: #define CHECK(call) if ((call) != cudaSuccess) ... */
#define CHECK(call)                                                                    \
  do {                                                                                 \
    spError_t err_ = (call);                                                           \
    if (err_ != spSuccess) {                                                           \
      fprintf(stderr, "port_from_cuda: %s failed: %s\n", #call, spGetErrorName(err_)); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

#define EXPECT(cond)                                           \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "port_from_cuda: expected %s\n", #cond); \
      return 1;                                                \
    }                                                          \
  } while (0)

/* A whole 2 MiB granule: the consumer can get these bytes only by reusing the
 * producer's free, never from never-used memory beside it. */
enum { kBytes = 1 << 21 };

static unsigned char host_result[kBytes];

static int Run(spRuntime_t rt) {
  /* cudaStream_t producer, consumer; */
  spStream_t producer, consumer;
  /* cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking); */
  CHECK(spStreamCreate(&producer, rt, 0, spStreamNonBlocking));
  /* cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking); */
  CHECK(spStreamCreate(&consumer, rt, 0, spStreamNonBlocking));
  /* cudaEvent_t freed; cudaEventCreate(&freed); */
  spEvent_t freed;
  CHECK(spEventCreate(&freed, rt));

  /* cudaMemPool_t pool; cudaDeviceGetDefaultMemPool(&pool, 0); */
  spMemPool_t pool;
  CHECK(spDeviceGetDefaultMemPool(&pool, rt, 0));
  /* uint64_t threshold = UINT64_MAX; */
  uint64_t threshold = UINT64_MAX;
  /* cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold); */
  CHECK(spMemPoolSetAttribute(pool, spMemPoolAttrReleaseThreshold, &threshold));

  /* void* tmp; cudaMallocAsync(&tmp, kBytes, producer); */
  void* tmp;
  CHECK(spMallocAsync(&tmp, kBytes, producer));
  /* cudaMemsetAsync(tmp, 0x5a, kBytes, producer); */
  CHECK(spMemsetAsync(tmp, 0x5a, kBytes, producer));
  /* scale<<<grid, block, 0, producer>>>(tmp, kBytes);   (a 50 us kernel) */
  spAccess rw = {tmp, kBytes, 1};
  CHECK(spLaunchKernel(producer, 50000, &rw, 1));
  /* cudaMemcpyAsync(host_result, tmp, kBytes, cudaMemcpyDeviceToHost, producer); */
  CHECK(spMemcpyAsync(host_result, tmp, kBytes, producer));
  /* cudaFreeAsync(tmp, producer); */
  CHECK(spFreeAsync(tmp, producer));
  /* cudaEventRecord(freed, producer); */
  CHECK(spEventRecord(freed, producer));

  /* cudaStreamWaitEvent(consumer, freed, 0); */
  CHECK(spStreamWaitEvent(consumer, freed));
  /* void* buf; cudaMallocAsync(&buf, kBytes, consumer); */
  void* buf;
  CHECK(spMallocAsync(&buf, kBytes, consumer));
  /* The producer's kernel is still running (no synchronize yet), but the
   * consumer is ordered after the free by the event: same bytes. */
  EXPECT(buf == tmp);
  /* cudaMemsetAsync(buf, 0, kBytes, consumer); */
  CHECK(spMemsetAsync(buf, 0, kBytes, consumer));
  /* cudaFreeAsync(buf, consumer); */
  CHECK(spFreeAsync(buf, consumer));

  /* cudaStreamSynchronize(producer); */
  CHECK(spStreamSynchronize(producer));
  EXPECT(host_result[0] == 0x5a && host_result[kBytes - 1] == 0x5a);
  /* cudaStreamSynchronize(consumer); */
  CHECK(spStreamSynchronize(consumer));

  /* CUDA reports only the four attributes; streampool also tells which rule
   * served each allocation. */
  spMemPoolStats st;
  CHECK(spMemPoolGetStats(pool, &st));
  printf("allocations %" PRIu64 ", by event dependency %" PRIu64 ", fresh maps %" PRIu64 "\n",
         st.allocCount, st.reuseEventDependency, st.upstreamMaps);
  EXPECT(st.allocCount == 2 && st.reuseEventDependency == 1 && st.upstreamMaps == 1);

  /* uint64_t reserved; cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
   */
  uint64_t reserved;
  CHECK(spMemPoolGetAttribute(pool, spMemPoolAttrReservedMemCurrent, &reserved));
  printf("reserved after synchronize: %" PRIu64 " bytes (threshold keeps it)\n", reserved);
  EXPECT(reserved == 2u << 20);
  /* cudaMemPoolTrimTo(pool, 0); */
  CHECK(spMemPoolTrimTo(pool, 0));
  CHECK(spMemPoolGetAttribute(pool, spMemPoolAttrReservedMemCurrent, &reserved));
  printf("reserved after trim: %" PRIu64 " bytes\n", reserved);
  EXPECT(reserved == 0);

  /* cudaEventDestroy(freed); */
  CHECK(spEventDestroy(freed));
  /* cudaStreamDestroy(consumer); */
  CHECK(spStreamDestroy(consumer));
  /* cudaStreamDestroy(producer); */
  CHECK(spStreamDestroy(producer));
  return 0;
}

int main(void) {
  /* CUDA's runtime is implicit; streampool's is an object (one simulated
   * device with 1 GiB by default). */
  spRuntime_t rt;
  CHECK(spRuntimeCreate(&rt, NULL));
  int rc = Run(rt);
  CHECK(spRuntimeDestroy(rt));
  if (rc == 0) printf("port_from_cuda: OK\n");
  return rc;
}
