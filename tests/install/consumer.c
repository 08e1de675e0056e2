/*
 * A C program that uses an installed streampool through the C API only: it
 * proves the installed headers compile as C and the installed library links
 * (through find_package and through pkg-config). Exit status 0 on success.
 */
#include <inttypes.h>
#include <stdio.h>

#include "streampool/streampool.h"

#define CHECK(call)                                                                  \
  do {                                                                               \
    spError_t err_ = (call);                                                         \
    if (err_ != spSuccess) {                                                         \
      fprintf(stderr, "consumer: %s failed: %s (%s)\n", #call, spGetErrorName(err_), \
              spGetErrorString(err_));                                               \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

#define EXPECT(cond)                                     \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "consumer: expected %s\n", #cond); \
      return 1;                                          \
    }                                                    \
  } while (0)

enum { kAllocBytes = 1 << 20 };

static void PrintStats(const spMemPoolStats* st) {
  printf("default pool stats:\n");
  printf("  reservedBytes=%" PRIu64 " reservedHigh=%" PRIu64 "\n", st->reservedBytes,
         st->reservedHigh);
  printf("  usedBytes=%" PRIu64 " usedHigh=%" PRIu64 "\n", st->usedBytes, st->usedHigh);
  printf("  allocCount=%" PRIu64 " freeCount=%" PRIu64 " failedAllocCount=%" PRIu64 "\n",
         st->allocCount, st->freeCount, st->failedAllocCount);
  printf("  upstreamMaps=%" PRIu64 " upstreamUnmaps=%" PRIu64 " largestFreeBlock=%" PRIu64 "\n",
         st->upstreamMaps, st->upstreamUnmaps, st->largestFreeBlock);
}

/* Everything between runtime creation and destruction. */
static int Exercise(spRuntime_t rt) {
  /* The history goes nowhere: what is checked is that the entry points are
   * exported and answer as documented. */
  EXPECT(spRuntimeStopRecording(rt) == spErrorInvalidValue); /* not recording */
  CHECK(spRuntimeStartRecording(rt, "/dev/null"));
  EXPECT(spRuntimeStartRecording(rt, "/dev/null") == spErrorInvalidValue); /* already */

  spStream_t stream = NULL;
  CHECK(spStreamCreate(&stream, rt, 0, spStreamNonBlocking));

  void* ptr = NULL;
  CHECK(spMallocAsync(&ptr, kAllocBytes, stream));
  EXPECT(ptr != NULL);
  CHECK(spFreeAsync(ptr, stream));
  CHECK(spStreamSynchronize(stream));

  spMemPool_t pool = NULL;
  CHECK(spDeviceGetDefaultMemPool(&pool, rt, 0));
  spMemPoolStats st;
  CHECK(spMemPoolGetStats(pool, &st));
  PrintStats(&st);
  EXPECT(st.allocCount >= 1);
  EXPECT(st.freeCount >= 1);
  EXPECT(st.failedAllocCount == 0);
  EXPECT(st.usedBytes == 0);
  EXPECT(st.usedHigh >= kAllocBytes);

  CHECK(spStreamDestroy(stream));
  CHECK(spRuntimeStopRecording(rt));
  return 0;
}

int main(void) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  spRuntime_t rt = NULL;
  CHECK(spRuntimeCreate(&rt, &cfg));

  int rc = Exercise(rt);

  CHECK(spRuntimeDestroy(rt));
  if (rc == 0) printf("consumer: OK\n");
  return rc;
}
