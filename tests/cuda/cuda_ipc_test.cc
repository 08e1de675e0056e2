// IPC through the CUDA names across two processes: the guide's F.11 flow
// (export a pool's fd, share an allocation and interprocess events, free in
// the importer before the exporter). Source of the snippets: CUDA C++
// Programming Guide, appendix F.11, in the Chinese translation kept at
// ../shared/reference/cuda-stream-ordered-allocator.zh.txt (NVIDIA
// Corporation; quoted for testing); kernel launches rewritten as
// spcudaLaunchKernel, guide typos marked.
//
// The importer is a forked child with its own implicit runtime (the parent
// has none when it forks). It never uses gtest: it exits non-zero naming the
// failing line. Both processes run under the fatal stream-order checker. The
// simulator cannot make a stream wait for another process's record that is
// not complete yet, so each side completes its record before the other waits
// on it.
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "gtest/gtest.h"

namespace {

#define CHILD_CHECK(cond)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "child check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      return 1 + __LINE__ % 250;                                                            \
    }                                                                                       \
  } while (false)

constexpr size_t kSize = size_t{1} << 20;

// What crosses the socket besides the pool's fd: the guide's "shmem".
struct Shmem {
  cudaMemPoolPtrExportData ptrData;
  cudaIpcEventHandle_t readyIpcEventHandle;
  cudaIpcEventHandle_t finishedIpcEventHandle;
};

// Sends `n` bytes and, if fd >= 0, the descriptor with them (SCM_RIGHTS).
bool Send(int sock, const void* data, size_t n, int fd = -1) {
  iovec iov{const_cast<void*>(data), n};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

// Receives exactly `n` bytes (one message: they are small) and a descriptor
// into *fd if one came.
bool Recv(int sock, void* data, size_t n, int* fd = nullptr) {
  iovec iov{data, n};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(sock, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(n)) {
    return false;
  }
  if (fd != nullptr) {
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return false;
    std::memcpy(fd, CMSG_DATA(c), sizeof *fd);
  }
  return true;
}

// The importing process.
int Importer(int sock) {
  cudaMemPool_t importedMemPool;
  cudaStream_t stream;
  CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  int fdHandle = -1;
  Shmem shm;
  Shmem* shmem = &shm;
  CHILD_CHECK(Recv(sock, &shm, sizeof shm, &fdHandle));
  // --- guide F.11.1, importing process ---
  // Create an imported pool from the shareable handle.
  // Note that the handle is passed by value here.
  cudaMemPoolImportFromShareableHandle(&importedMemPool, (void*)(intptr_t)fdHandle,
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  // --- end ---
  close(fdHandle);
  CHILD_CHECK(cudaGetLastError() == cudaSuccess);
  void* ptr = nullptr;
  // --- guide F.11.3, importing an allocation ---
  cudaMemPoolPtrExportData* importData = &shmem->ptrData;  // guide typo: prtData
  cudaEvent_t readyIpcEvent;
  cudaIpcEventHandle_t* readyIpcEventHandle = &shmem->readyIpcEventHandle;
  // Need to retrieve the IPC event handle and the export data from the
  // exporting process using any mechanism. Here we are using shmem and just
  // need synchronization to make sure the shared memory is filled in.
  cudaIpcOpenEventHandle(&readyIpcEvent, *readyIpcEventHandle);  // guide typo: no '*'
  // import the allocation. The operation does not block on the allocation being ready.
  cudaMemPoolImportPointer(&ptr, importedMemPool, importData);
  // Wait for the prior stream operations in the allocating stream to complete before
  // using the allocation in the importing process.
  cudaStreamWaitEvent(stream, readyIpcEvent);
  // kernel<<<..., stream>>>(ptr, ...): checks the exporter's bytes and writes its own.
  int seen = -1;
  spcudaLaunchKernel(
      [](unsigned char* p, int* out) {
        *out = p[0] == 0x42 && p[kSize - 1] == 0x42;
        p[0] = 0x43;
      },
      1, 1, 0, stream, {{ptr, kSize, 1}}, static_cast<unsigned char*>(ptr), &seen);
  // --- end ---
  CHILD_CHECK(cudaGetLastError() == cudaSuccess);
  cudaEvent_t finishedIpcEvent;
  CHILD_CHECK(cudaEventCreate(&finishedIpcEvent, cudaEventDisableTiming | cudaEventInterprocess) ==
              cudaSuccess);
  // --- guide F.11.3, the free in the importing process ---
  // The free must happen in importing process before the exporting process
  // (the last access in the importing process is the kernel above)
  cudaFreeAsync(ptr, stream);
  // Access not allowed in the importing process after the free
  cudaEventRecord(finishedIpcEvent, stream);  // guide typo: cudaIpcEventRecord
  // --- end ---
  CHILD_CHECK(cudaGetLastError() == cudaSuccess);
  CHILD_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  CHILD_CHECK(seen == 1);
  CHILD_CHECK(cudaIpcGetEventHandle(&shm.finishedIpcEventHandle, finishedIpcEvent) == cudaSuccess);
  CHILD_CHECK(Send(sock, &shm, sizeof shm));
  // Stay until the exporter has opened the event: it lives while this one does.
  char done = 0;
  CHILD_CHECK(Recv(sock, &done, 1));
  CHILD_CHECK(cudaEventDestroy(finishedIpcEvent) == cudaSuccess);
  CHILD_CHECK(cudaMemPoolDestroy(importedMemPool) == cudaSuccess);
  return 0;
}

TEST(CudaIpcTest, GuideF11AcrossTwoProcesses) {
  // Neither process may inherit a runtime: the child makes its own.
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    alarm(30);
    close(sv[0]);
    const int code = Importer(sv[1]);
    std::fflush(nullptr);
    _exit(code);
  }
  close(sv[1]);
  alarm(60);  // a hung child fails the test instead of hanging it
  const int sock = sv[0];

  cudaMemPool_t memPool, exportMemPool;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // --- guide F.11.1, exporting process ---
  // create an exportable IPC capable pool on device 0
  cudaMemPoolProps poolProps = {};
  poolProps.allocType = cudaMemAllocationTypePinned;
  poolProps.location.id = 0;
  poolProps.location.type = cudaMemLocationTypeDevice;
  // Setting handleTypes to a non zero value will make the pool exportable (IPC capable)
  poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  cudaMemPoolCreate(&memPool, &poolProps);  // guide typo: one ')' too many
  // FD based handles are integer types
  int fdHandle = 0;
  // Retrieve an OS native handle to the pool.
  // Note that a pointer to the handle memory is passed in here.
  cudaMemPoolExportToShareableHandle(&fdHandle, memPool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                     0);
  // The handle must be sent to the importing process with the appropriate
  // OS specific APIs.
  // --- end ---
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  exportMemPool = memPool;
  void* ptr = nullptr;
  size_t size = kSize;
  Shmem shm{};
  Shmem* shmem = &shm;
  // --- guide F.11.3, preparing an allocation in the exporting process ---
  cudaMemPoolPtrExportData exportData;
  cudaEvent_t readyIpcEvent;
  cudaIpcEventHandle_t readyIpcEventHandle;
  // IPC event for coordinating between processes
  // cudaEventInterprocess flag makes the event an IPC event
  // cudaEventDisableTiming is set for performance reasons
  cudaEventCreate(&readyIpcEvent,
                  cudaEventDisableTiming | cudaEventInterprocess);  // guide typo: ';'
  // allocate from the exporting mem pool
  cudaMallocAsync(&ptr, size, exportMemPool, stream);
  // (the exporter fills it: a kernel in the guide's other snippets)
  cudaMemsetAsync(ptr, 0x42, size, stream);
  // event for sharing when the allocation is ready.
  cudaEventRecord(readyIpcEvent, stream);
  cudaMemPoolExportPointer(&exportData, ptr);
  cudaIpcGetEventHandle(&readyIpcEventHandle, readyIpcEvent);
  // Share IPC event and pointer export data with the importing process using
  // any mechanism. Here we copy the data into shared memory
  shmem->ptrData = exportData;
  shmem->readyIpcEventHandle = readyIpcEventHandle;
  // signal consumers data is ready
  // --- end ---
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);  // the record completes first
  ASSERT_TRUE(Send(sock, &shm, sizeof shm, fdHandle));
  close(fdHandle);

  ASSERT_TRUE(Recv(sock, &shm, sizeof shm));
  cudaEvent_t finishedIpcEvent;
  ASSERT_EQ(cudaIpcOpenEventHandle(&finishedIpcEvent, shm.finishedIpcEventHandle), cudaSuccess);
  ASSERT_TRUE(Send(sock, "!", 1));
  int first = -1;
  // --- guide F.11.3, exporting process ---
  // The exporting process needs to coordinate its free with the stream order
  // of the importing process's free.
  cudaStreamWaitEvent(stream, finishedIpcEvent);
  // kernel<<<..., stream>>>(ptrInExportingProcess, ...): sees the importer's write.
  void* ptrInExportingProcess = ptr;
  spcudaLaunchKernel([](const unsigned char* p, int* out) { *out = p[0]; }, 1, 1, 0, stream,
                     {{ptrInExportingProcess, kSize, 0}},
                     static_cast<const unsigned char*>(ptrInExportingProcess), &first);
  // The free in the importing process doesn't stop the exporting process
  // from using the allocation.
  cudaFreeAsync(ptrInExportingProcess, stream);  // guide typo: cudFreeAsync
  // --- end ---
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(first, 0x43);

  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  alarm(0);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  close(sock);
  EXPECT_EQ(cudaEventDestroy(readyIpcEvent), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(finishedIpcEvent), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(memPool), cudaSuccess);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
}

}  // namespace
