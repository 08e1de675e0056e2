// IPC memory pools and interprocess events, CUDA guide F.11, through
// streampool.h. An exportable pool lives in a memfd; its fd travels to
// another process over a Unix socket (SCM_RIGHTS), as F.11.1 asks ("the
// handle must be sent to the importing process with the appropriate OS
// specific APIs"); the importer maps the same physical pages.
//
// Fork-based tests run the importer (or exporter) in a child process. A
// child never uses gtest: it returns a non-zero code, naming the failing
// line on stderr, and the parent expects exit status 0. Each child arms an
// alarm so that a broken test fails instead of hanging, and so does the
// parent around calls that block on the child. Both sides create their
// runtimes after fork, so no worker thread is ever forked, and both run under
// the test suite's STREAMPOOL_CHECK_STREAM_ORDER=fatal, so a checker report in
// either process fails the test.
#include "src/runtime/ipc.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

#define SP_ASSERT_OK(expr) ASSERT_EQ((expr), spSuccess) << #expr
#define SP_EXPECT_OK(expr) EXPECT_EQ((expr), spSuccess) << #expr

// In a child: fail with a code naming the line.
#define CHILD_CHECK(cond)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "child check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      return 1 + __LINE__ % 250;                                                            \
    }                                                                                       \
  } while (false)
#define CHILD_OK(expr) CHILD_CHECK((expr) == spSuccess)

// ------------------------------------------------------------ processes

// A connected pair of Unix stream sockets: [0] for the parent, [1] for the
// child.
struct Channel {
  int fd[2] = {-1, -1};
  Channel() {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0) std::abort();
  }
  ~Channel() {
    for (int f : fd) {
      if (f >= 0) close(f);
    }
  }
  // The parent's side: closes the child's end.
  int Parent() {
    close(fd[1]);
    fd[1] = -1;
    return fd[0];
  }
};

// Fails the test process (SIGALRM) rather than hanging it if the other
// process never answers; disarmed when the test's scope ends.
struct AlarmGuard {
  explicit AlarmGuard(unsigned seconds) { alarm(seconds); }
  ~AlarmGuard() { alarm(0); }
};

bool SendAll(int sock, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = send(sock, c, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool RecvAll(int sock, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = recv(sock, c, n, 0);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// One byte of payload carries the descriptor (SCM_RIGHTS).
bool SendFd(int sock, int fd) {
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1;
}

int RecvFd(int sock) {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

bool SendByte(int sock, char b = '!') { return SendAll(sock, &b, 1); }
bool RecvByte(int sock, char want = '!') {
  char b = 0;
  return RecvAll(sock, &b, 1) && b == want;
}

// Runs `body` in a child process, which exits with its result.
pid_t Spawn(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    const int code = body();
    std::fflush(nullptr);
    _exit(code);
  }
  return pid;
}

// The child's exit code, or 1000 + the signal that killed it.
int Reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return -2;
}

// What crosses the socket besides the fd: the guide's "shmem" contents.
struct Shared {
  spMemPoolPtrExportData ptr_data;
  spIpcEventHandle ready;
  spIpcEventHandle finished;
  uint64_t size;
};

// ------------------------------------------------------------- runtimes

spRuntime_t NewRuntime(spExecutorKind executor = spExecutorSimulator,
                       spBacking backing = spBackingHost, int devices = 1) {
  spRuntimeConfig cfg;
  spRuntimeConfigInit(&cfg);
  cfg.executor = executor;
  cfg.backing = backing;
  cfg.deviceCount = devices;
  spRuntime_t rt = nullptr;
  if (spRuntimeCreate(&rt, &cfg) != spSuccess) return nullptr;
  return rt;
}

spStream_t NewStream(spRuntime_t rt, int device = 0) {
  spStream_t s = nullptr;
  if (spStreamCreate(&s, rt, device, spStreamNonBlocking) != spSuccess) return nullptr;
  return s;
}

// F.11.1: "Setting handleTypes to a non zero value will make the pool
// exportable".
spMemPool_t NewExportablePool(spRuntime_t rt,
                              spMemAllocationType type = spMemAllocationTypeDevice) {
  spMemPoolProps props{};
  props.allocType = type;
  props.device = 0;
  props.handleTypes = spMemHandleTypePosixFileDescriptor;
  spMemPool_t pool = nullptr;
  if (spMemPoolCreate(&pool, rt, &props) != spSuccess) return nullptr;
  return pool;
}

int ExportFd(spMemPool_t pool) {
  int fd = -1;
  if (spMemPoolExportToShareableHandle(&fd, pool, spMemHandleTypePosixFileDescriptor, 0) !=
      spSuccess) {
    return -1;
  }
  return fd;
}

spMemPool_t Import(spRuntime_t rt, int fd) {
  spMemPool_t pool = nullptr;
  if (spMemPoolImportFromShareableHandle(&pool, rt, reinterpret_cast<void*>(intptr_t{fd}),
                                         spMemHandleTypePosixFileDescriptor, 0) != spSuccess) {
    return nullptr;
  }
  return pool;
}

spMemPoolStats Stats(spMemPool_t pool) {
  spMemPoolStats s;
  std::memset(&s, 0xff, sizeof s);
  EXPECT_EQ(spMemPoolGetStats(pool, &s), spSuccess);
  return s;
}

bool AllBytes(const void* p, size_t n, unsigned char v) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (c[i] != v) return false;
  }
  return true;
}

// Two runtimes of this process stand for exporter and importer where no
// second process is needed: the importer maps the memfd at its own address.
class IpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    exp_rt_ = NewRuntime();
    imp_rt_ = NewRuntime();
    ASSERT_NE(exp_rt_, nullptr);
    ASSERT_NE(imp_rt_, nullptr);
    exp_s_ = NewStream(exp_rt_);
    imp_s_ = NewStream(imp_rt_);
    exp_pool_ = NewExportablePool(exp_rt_);
    ASSERT_NE(exp_pool_, nullptr);
    fd_ = ExportFd(exp_pool_);
    ASSERT_GE(fd_, 0);
    imp_pool_ = Import(imp_rt_, fd_);
    ASSERT_NE(imp_pool_, nullptr);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    EXPECT_EQ(spRuntimeDestroy(imp_rt_), spSuccess);
    EXPECT_EQ(spRuntimeDestroy(exp_rt_), spSuccess);
  }

  // An allocation of the exportable pool, ready for the host.
  void* ExpAlloc(size_t size) {
    void* p = nullptr;
    EXPECT_EQ(spMallocFromPoolAsync(&p, size, exp_pool_, exp_s_), spSuccess);
    EXPECT_EQ(spStreamSynchronize(exp_s_), spSuccess);
    return p;
  }
  spMemPoolPtrExportData ExportPtr(void* p) {
    spMemPoolPtrExportData d;
    EXPECT_EQ(spMemPoolExportPointer(&d, p), spSuccess);
    return d;
  }
  void* ImportPtr(spMemPoolPtrExportData d) {
    void* p = nullptr;
    EXPECT_EQ(spMemPoolImportPointer(&p, imp_pool_, &d), spSuccess);
    return p;
  }

  spRuntime_t exp_rt_ = nullptr;
  spRuntime_t imp_rt_ = nullptr;
  spStream_t exp_s_ = nullptr;
  spStream_t imp_s_ = nullptr;
  spMemPool_t exp_pool_ = nullptr;
  spMemPool_t imp_pool_ = nullptr;
  int fd_ = -1;
};

// ------------------------------------------------------ creating, exporting

TEST_F(IpcTest, ExportReturnsANewCloseOnExecDescriptorOfAMemfd) {
  const int fd = ExportFd(exp_pool_);
  ASSERT_GE(fd, 0);
  EXPECT_NE(fd, fd_) << "every export is a new descriptor the caller owns";
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  struct stat a, b;
  ASSERT_EQ(fstat(fd, &a), 0);
  ASSERT_EQ(fstat(fd_, &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino) << "the same pool file";
  EXPECT_TRUE(S_ISREG(a.st_mode));
  EXPECT_NE(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK, 0) << "no process can shrink it";
  close(fd);
}

TEST_F(IpcTest, ExportRejectsEveryBadArgument) {
  spMemPool_t dflt, plain;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&dflt, exp_rt_, 0));
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  SP_ASSERT_OK(spMemPoolCreate(&plain, exp_rt_, &props));
  int fd = -7;
  const int kFd = spMemHandleTypePosixFileDescriptor;
  // F.5: default pools do not support IPC; a pool made without handleTypes
  // is not exportable either.
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, dflt, kFd, 0), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, plain, kFd, 0), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, imp_pool_, kFd, 0), spErrorInvalidValue)
      << "an imported pool is not re-exported";
  for (int type : {int{spMemHandleTypeNone}, 2, -1}) {
    EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, exp_pool_, type, 0), spErrorInvalidValue)
        << type;
  }
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, exp_pool_, kFd, 1), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolExportToShareableHandle(nullptr, exp_pool_, kFd, 0), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, nullptr, kFd, 0), spErrorInvalidValue);
  SP_ASSERT_OK(spMemPoolDestroy(plain));
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, plain, kFd, 0), spErrorInvalidResourceHandle);
  EXPECT_EQ(fd, -7) << "no failed call wrote it";
}

TEST(IpcPoolCreationTest, WhichPoolsCanBeExportable) {
  spRuntime_t host = NewRuntime();
  spRuntime_t address_only = NewRuntime(spExecutorSimulator, spBackingAddressOnly);
  ASSERT_NE(host, nullptr);
  ASSERT_NE(address_only, nullptr);
  spMemPoolProps props{};
  props.handleTypes = spMemHandleTypePosixFileDescriptor;
  spMemPool_t pool = nullptr;
  for (spMemAllocationType t : {spMemAllocationTypeDevice, spMemAllocationTypePinnedHost}) {
    props.allocType = t;
    SP_EXPECT_OK(spMemPoolCreate(&pool, host, &props)) << t;
    // Nothing to export without real, shareable pages.
    EXPECT_EQ(spMemPoolCreate(&pool, address_only, &props), spErrorNotSupported) << t;
  }
  for (spMemAllocationType t : {spMemAllocationTypeHugePage, spMemAllocationTypeDvpp}) {
    props.allocType = t;
    EXPECT_EQ(spMemPoolCreate(&pool, host, &props), spErrorNotSupported) << t;
  }
  props.allocType = spMemAllocationTypeDevice;
  for (unsigned types : {2u, 3u, 0x80000000u}) {
    props.handleTypes = types;
    EXPECT_EQ(spMemPoolCreate(&pool, host, &props), spErrorInvalidValue) << types;
  }
  // An exportable pool's memory is the runtime's memfd, not a caller's.
  props.handleTypes = spMemHandleTypePosixFileDescriptor;
  spUpstream up{[](size_t, void*) -> void* { return nullptr; }, [](void*, size_t, void*) {},
                nullptr, 1};
  EXPECT_EQ(spMemPoolCreateWithUpstream(&pool, host, &props, &up), spErrorNotSupported);
  // AddressOnly runtimes cannot import either.
  spMemPool_t exportable = NewExportablePool(host);
  const int fd = ExportFd(exportable);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(
      spMemPoolImportFromShareableHandle(&pool, address_only, reinterpret_cast<void*>(intptr_t{fd}),
                                         spMemHandleTypePosixFileDescriptor, 0),
      spErrorNotSupported);
  close(fd);
  SP_EXPECT_OK(spRuntimeDestroy(address_only));
  SP_EXPECT_OK(spRuntimeDestroy(host));
}

// ------------------------------------------------------------- importing

TEST_F(IpcTest, ImportRejectsEveryDescriptorThatIsNotAnExportedPool) {
  auto import = [&](int fd) {
    spMemPool_t pool = reinterpret_cast<spMemPool_t>(uintptr_t{0x5eed});
    const spError_t e =
        spMemPoolImportFromShareableHandle(&pool, imp_rt_, reinterpret_cast<void*>(intptr_t{fd}),
                                           spMemHandleTypePosixFileDescriptor, 0);
    EXPECT_EQ(pool, reinterpret_cast<spMemPool_t>(uintptr_t{0x5eed})) << "not written";
    return e;
  };
  const spMemPoolStats before = Stats(imp_pool_);
  EXPECT_EQ(import(-1), spErrorInvalidValue) << "negative";
  const int closed = dup(fd_);
  close(closed);
  EXPECT_EQ(import(closed), spErrorInvalidValue) << "not open";
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  EXPECT_EQ(import(devnull), spErrorInvalidValue) << "not a regular file";
  close(devnull);
  int pipefd[2];
  ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
  EXPECT_EQ(import(pipefd[0]), spErrorInvalidValue) << "a pipe";
  close(pipefd[0]);
  close(pipefd[1]);
  // A memfd carrying a perfect copy of the header, but which anyone could
  // shrink under our mappings: refused.
  char header[4096];
  ASSERT_EQ(pread(fd_, header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  const int unsealed = memfd_create("copy", MFD_CLOEXEC);
  ASSERT_EQ(pwrite(unsealed, header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  EXPECT_EQ(import(unsealed), spErrorInvalidValue) << "not sealed";
  // Sealed, but not our magic.
  const int alien = memfd_create("alien", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(alien, 2 * kMiB), 0);
  ASSERT_EQ(fcntl(alien, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(import(alien), spErrorInvalidValue) << "bad magic";
  // Sealed, our header, too short to be one.
  const int shortf = memfd_create("short", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(pwrite(shortf, header, 100, 0), 100);
  ASSERT_EQ(fcntl(shortf, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(import(shortf), spErrorInvalidValue) << "too short";
  close(unsealed);
  close(alien);
  close(shortf);

  spMemPool_t pool;
  const auto h = reinterpret_cast<void*>(intptr_t{fd_});
  const int kFd = spMemHandleTypePosixFileDescriptor;
  EXPECT_EQ(spMemPoolImportFromShareableHandle(&pool, imp_rt_, h, spMemHandleTypeNone, 0),
            spErrorInvalidValue);
  EXPECT_EQ(spMemPoolImportFromShareableHandle(&pool, imp_rt_, h, 2, 0), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolImportFromShareableHandle(&pool, imp_rt_, h, kFd, 1), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolImportFromShareableHandle(nullptr, imp_rt_, h, kFd, 0), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolImportFromShareableHandle(&pool, imp_rt_,
                                               reinterpret_cast<void*>(intptr_t{1} << 40), kFd, 0),
            spErrorInvalidValue)
      << "not an int";
  EXPECT_EQ(spMemPoolImportFromShareableHandle(&pool, nullptr, h, kFd, 0), spErrorInvalidValue);
  const spMemPoolStats after = Stats(imp_pool_);
  EXPECT_EQ(std::memcmp(&before, &after, sizeof before), 0);
  // The real descriptor still imports, and the caller keeps owning it.
  SP_EXPECT_OK(spMemPoolImportFromShareableHandle(&pool, imp_rt_, h, kFd, 0));
  EXPECT_EQ(fcntl(fd_, F_GETFD) >= 0, true) << "the caller's fd stays open";
}

TEST_F(IpcTest, ImportedPoolsCannotAllocateOrBecomeCurrent) {
  void* p = reinterpret_cast<void*>(uintptr_t{0x5eed});
  // F.11.5: "imported pools cannot be set as current, nor used in the
  // cudaMallocFromPoolAsync API".
  EXPECT_EQ(spMallocFromPoolAsync(&p, 256, imp_pool_, imp_s_), spErrorInvalidValue);
  EXPECT_EQ(spMallocFromPoolAsync(&p, 0, imp_pool_, imp_s_), spErrorInvalidValue);
  EXPECT_EQ(spDeviceSetMemPool(imp_rt_, 0, imp_pool_), spErrorInvalidValue);
  spMemPool_t current;
  SP_ASSERT_OK(spDeviceGetMemPool(&current, imp_rt_, 0));
  EXPECT_NE(current, imp_pool_);
  // Reuse attributes have no effect but read back; stats attributes work.
  int on = 0;
  SP_EXPECT_OK(spMemPoolSetAttribute(imp_pool_, spMemPoolReuseAllowOpportunistic, &on));
  on = 1;
  SP_EXPECT_OK(spMemPoolGetAttribute(imp_pool_, spMemPoolReuseAllowOpportunistic, &on));
  EXPECT_EQ(on, 0);
  uint64_t v = 5;
  EXPECT_EQ(spMemPoolSetAttribute(imp_pool_, spMemPoolAttrUsedMemCurrent, &v), spErrorInvalidValue);
  SP_EXPECT_OK(spMemPoolGetAttribute(imp_pool_, spMemPoolAttrReservedMemCurrent, &v));
  EXPECT_EQ(v, 0u);
  SP_EXPECT_OK(spMemPoolTrimTo(imp_pool_, 0));
  const spMemPoolStats s = Stats(imp_pool_);
  EXPECT_EQ(s.failedAllocCount, 0u) << "refusals are bad input, not failed allocations";
  EXPECT_EQ(s.allocCount, 0u);
}

// ------------------------------------------------------------- pointers

TEST_F(IpcTest, BytesWrittenThroughOneMappingAreReadThroughTheOther) {
  auto* ep = static_cast<unsigned char*>(ExpAlloc(1000));
  std::memset(ep, 0x5a, 1000);
  auto* ip = static_cast<unsigned char*>(ImportPtr(ExportPtr(ep)));
  ASSERT_NE(ip, nullptr);
  EXPECT_NE(ip, ep) << "the importer maps the pages at its own address";
  EXPECT_TRUE(AllBytes(ip, 1000, 0x5a));
  std::memset(ip + 500, 0xa5, 500);
  EXPECT_TRUE(AllBytes(ep, 500, 0x5a));
  EXPECT_TRUE(AllBytes(ep + 500, 500, 0xa5));
  // Copies on the importer's streams move real bytes too.
  SP_ASSERT_OK(spMemsetAsync(ip, 0x11, 100, imp_s_));
  SP_ASSERT_OK(spStreamSynchronize(imp_s_));
  EXPECT_TRUE(AllBytes(ep, 100, 0x11));
  SP_ASSERT_OK(spFreeAsync(ip, imp_s_));
  SP_ASSERT_OK(spFreeAsync(ep, exp_s_));
}

TEST_F(IpcTest, PointerAttributesInTheImporterNameTheImportedPool) {
  void* ep = ExpAlloc(1000);
  auto* ip = static_cast<char*>(ImportPtr(ExportPtr(ep)));
  spPointerAttributes a;
  SP_ASSERT_OK(spPointerGetAttributes(&a, ip + 999));
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.pool, imp_pool_);
  EXPECT_EQ(a.base, ip);
  EXPECT_EQ(a.size, 1000u) << "the size the exporter's caller asked for";
  SP_ASSERT_OK(spFree(imp_rt_, ip));
  EXPECT_EQ(spPointerGetAttributes(&a, ip), spErrorInvalidValue) << "unmapped with its import";
  SP_ASSERT_OK(spFree(exp_rt_, ep));
}

TEST_F(IpcTest, ExportPointerRejectsEveryBadPointer) {
  auto* ep = static_cast<char*>(ExpAlloc(1000));
  spMemPoolPtrExportData d;
  std::memset(&d, 0x77, sizeof d);
  const spMemPoolPtrExportData untouched = d;
  int local = 0;
  void* plain = nullptr;
  SP_ASSERT_OK(spMallocAsync(&plain, 256, exp_s_));  // the default pool: not exportable
  void* malloced = nullptr;
  SP_ASSERT_OK(spMalloc(&malloced, 4096, exp_rt_, 0));
  EXPECT_EQ(spMemPoolExportPointer(nullptr, ep), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolExportPointer(&d, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolExportPointer(&d, &local), spErrorInvalidValue) << "not runtime memory";
  EXPECT_EQ(spMemPoolExportPointer(&d, ep + 256), spErrorInvalidValue) << "inside, not start";
  EXPECT_EQ(spMemPoolExportPointer(&d, plain), spErrorInvalidValue) << "not exportable";
  EXPECT_EQ(spMemPoolExportPointer(&d, malloced), spErrorInvalidValue) << "spMalloc memory";
  void* ip = ImportPtr(ExportPtr(ep));
  EXPECT_EQ(spMemPoolExportPointer(&d, ip), spErrorInvalidValue) << "an import";
  SP_ASSERT_OK(spFree(imp_rt_, ip));
  SP_ASSERT_OK(spFreeAsync(ep, exp_s_));
  EXPECT_EQ(spMemPoolExportPointer(&d, ep), spErrorInvalidValue) << "freed";
  EXPECT_EQ(std::memcmp(&d, &untouched, sizeof d), 0) << "no failed call wrote it";
  SP_ASSERT_OK(spFree(exp_rt_, malloced));
}

TEST_F(IpcTest, ImportPointerRejectsEveryBadExportData) {
  using streampool::internal::PtrExportData;
  void* ep = ExpAlloc(1000);
  const spMemPoolPtrExportData good = ExportPtr(ep);
  PtrExportData g;
  std::memcpy(static_cast<void*>(&g), &good, sizeof g);
  auto import = [&](const PtrExportData& bad) {
    spMemPoolPtrExportData d;
    std::memcpy(&d, &bad, sizeof d);
    void* p = reinterpret_cast<void*>(uintptr_t{0x5eed});
    const spError_t e = spMemPoolImportPointer(&p, imp_pool_, &d);
    EXPECT_EQ(p, reinterpret_cast<void*>(uintptr_t{0x5eed})) << "not written";
    return e;
  };
  const spMemPoolStats before = Stats(imp_pool_);
  PtrExportData zero;
  std::memset(static_cast<void*>(&zero), 0, sizeof zero);
  EXPECT_EQ(import(zero), spErrorInvalidValue) << "all zero";
  PtrExportData b = g;
  b.token[3] ^= 1;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "another pool's token";
  b = g;
  b.chunk_offset += 64 * kMiB;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "chunk beyond the file";
  b = g;
  b.chunk_offset = 0;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "the header page";
  b = g;
  b.chunk_offset += 100;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "unaligned chunk";
  b = g;
  b.offset_in_chunk = b.chunk_size;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "block beyond the chunk";
  b = g;
  b.block_size = b.chunk_size + 256;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "block larger than the chunk";
  b = g;
  b.block_size = 100;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "not whole granules";
  b = g;
  b.requested = 0;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "nothing requested";
  b = g;
  b.requested = b.block_size + 1;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "more requested than the block";
  b = g;
  b.version = 2;
  EXPECT_EQ(import(b), spErrorInvalidValue) << "unknown version";
  // Data of a different exported pool.
  spMemPool_t other = NewExportablePool(exp_rt_);
  void* op = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&op, 256, other, exp_s_));
  spMemPoolPtrExportData od = ExportPtr(op);
  void* p = nullptr;
  EXPECT_EQ(spMemPoolImportPointer(&p, imp_pool_, &od), spErrorInvalidValue);
  const spMemPoolStats after = Stats(imp_pool_);
  EXPECT_EQ(std::memcmp(&before, &after, sizeof before), 0);
  // Not an imported pool; NULL arguments.
  spMemPoolPtrExportData gd = good;
  spMemPool_t dflt;
  SP_ASSERT_OK(spDeviceGetDefaultMemPool(&dflt, imp_rt_, 0));
  EXPECT_EQ(spMemPoolImportPointer(&p, dflt, &gd), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolImportPointer(nullptr, imp_pool_, &gd), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolImportPointer(&p, imp_pool_, nullptr), spErrorInvalidValue);
  EXPECT_EQ(spMemPoolImportPointer(&p, nullptr, &gd), spErrorInvalidValue);
  // The good data imports once; again while live is refused; again after the
  // importer's free it works.
  void* ip = nullptr;
  SP_ASSERT_OK(spMemPoolImportPointer(&ip, imp_pool_, &gd));
  EXPECT_EQ(spMemPoolImportPointer(&p, imp_pool_, &gd), spErrorInvalidValue);
  SP_ASSERT_OK(spFree(imp_rt_, ip));
  SP_ASSERT_OK(spMemPoolImportPointer(&ip, imp_pool_, &gd));
  SP_ASSERT_OK(spFree(imp_rt_, ip));
}

// ------------------------------------------- statistics and the free rule

TEST_F(IpcTest, ImporterStatisticsCoverOnlyItsOwnImports) {
  void* a = ExpAlloc(1000);  // 1024 bytes
  void* b = ExpAlloc(3000);  // 3072 bytes, same chunk
  void* c = ExpAlloc(100);
  (void)c;
  const spMemPoolStats exp_before = Stats(exp_pool_);
  EXPECT_EQ(exp_before.usedBytes, 1024u + 3072u + 256u);
  void* ia = ImportPtr(ExportPtr(a));
  void* ib = ImportPtr(ExportPtr(b));
  spMemPoolStats s = Stats(imp_pool_);
  // F.11.5: "resource usage stat attribute queries only reflect the
  // allocations imported into the process and their associated physical
  // memory": one 2 MiB chunk mapped, two imports live.
  EXPECT_EQ(s.reservedBytes, 2 * kMiB);
  EXPECT_EQ(s.usedBytes, 1024u + 3072u);
  EXPECT_EQ(s.usedHigh, 1024u + 3072u);
  EXPECT_EQ(s.allocCount, 2u);
  EXPECT_EQ(s.upstreamMaps, 1u) << "one mapping per chunk";
  // A stream-ordered free drops used at once and the mapping once the free
  // is known complete; spFree drops both at once.
  SP_ASSERT_OK(spFreeAsync(ia, imp_s_));
  s = Stats(imp_pool_);
  EXPECT_EQ(s.usedBytes, 3072u);
  EXPECT_EQ(s.reservedBytes, 2 * kMiB);
  SP_ASSERT_OK(spFree(imp_rt_, ib));
  EXPECT_EQ(Stats(imp_pool_).reservedBytes, 2 * kMiB) << "ia's free is not known complete yet";
  SP_ASSERT_OK(spStreamSynchronize(imp_s_));
  s = Stats(imp_pool_);
  EXPECT_EQ(s.reservedBytes, 0u);
  EXPECT_EQ(s.usedBytes, 0u);
  EXPECT_EQ(s.reservedHigh, 2 * kMiB);
  EXPECT_EQ(s.freeCount, 2u);
  EXPECT_EQ(s.upstreamUnmaps, 1u);
  uint64_t zero = 0;
  SP_ASSERT_OK(spMemPoolSetAttribute(imp_pool_, spMemPoolAttrReservedMemHigh, &zero));
  EXPECT_EQ(Stats(imp_pool_).reservedHigh, 0u);
  // None of it touched the exporter.
  const spMemPoolStats exp_after = Stats(exp_pool_);
  EXPECT_EQ(std::memcmp(&exp_before, &exp_after, sizeof exp_before), 0);
}

TEST_F(IpcTest, FreeingAnImportDoesNotFreeTheExportersAllocation) {
  auto* ep = static_cast<unsigned char*>(ExpAlloc(4096));
  std::memset(ep, 0x3c, 4096);
  void* ip = ImportPtr(ExportPtr(ep));
  // F.11.3: the free happens in the importing process first ...
  SP_ASSERT_OK(spFreeAsync(ip, imp_s_));
  SP_ASSERT_OK(spStreamSynchronize(imp_s_));
  // ... and does not stop the exporting process from using the allocation.
  EXPECT_EQ(Stats(exp_pool_).usedBytes, 4096u);
  EXPECT_TRUE(AllBytes(ep, 4096, 0x3c));
  void* again = ExpAlloc(4096);
  EXPECT_NE(again, ep) << "the exporter's block is still live";
  spPointerAttributes a;
  SP_ASSERT_OK(spPointerGetAttributes(&a, ep));
  EXPECT_EQ(a.pool, exp_pool_);
  SP_ASSERT_OK(spFreeAsync(ep, exp_s_));
  SP_ASSERT_OK(spFreeAsync(again, exp_s_));
  EXPECT_EQ(Stats(exp_pool_).usedBytes, 0u);
}

TEST_F(IpcTest, ExportablePoolsNeverReleaseMemoryToTheSystem) {
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  spMemPool_t plain;
  SP_ASSERT_OK(spMemPoolCreate(&plain, exp_rt_, &props));
  void *e = nullptr, *p = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&e, kMiB, exp_pool_, exp_s_));
  SP_ASSERT_OK(spMallocFromPoolAsync(&p, kMiB, plain, exp_s_));
  SP_ASSERT_OK(spFreeAsync(e, exp_s_));
  SP_ASSERT_OK(spFreeAsync(p, exp_s_));
  // Release threshold 0 (the default, read back): a sync releases the plain
  // pool's chunk, not the exportable pool's (F.11.4).
  uint64_t threshold = 1;
  SP_ASSERT_OK(spMemPoolGetAttribute(exp_pool_, spMemPoolAttrReleaseThreshold, &threshold));
  EXPECT_EQ(threshold, 0u);
  SP_ASSERT_OK(spStreamSynchronize(exp_s_));
  EXPECT_EQ(Stats(plain).reservedBytes, 0u);
  EXPECT_EQ(Stats(exp_pool_).reservedBytes, 2 * kMiB);
  // "cudaMemPoolTrimTo acts as a no-op".
  SP_ASSERT_OK(spMemPoolTrimTo(exp_pool_, 0));
  const spMemPoolStats s = Stats(exp_pool_);
  EXPECT_EQ(s.reservedBytes, 2 * kMiB);
  EXPECT_EQ(s.upstreamUnmaps, 0u);
  // The freed bytes are reused, not remapped.
  SP_ASSERT_OK(spMallocFromPoolAsync(&e, kMiB, exp_pool_, exp_s_));
  EXPECT_EQ(Stats(exp_pool_).upstreamMaps, 1u);
  SP_ASSERT_OK(spFreeAsync(e, exp_s_));
}

TEST_F(IpcTest, PinnedHostPoolsExportToo) {
  spMemPool_t pinned = NewExportablePool(exp_rt_, spMemAllocationTypePinnedHost);
  ASSERT_NE(pinned, nullptr);
  const int fd = ExportFd(pinned);
  spMemPool_t imported = Import(imp_rt_, fd);
  close(fd);
  ASSERT_NE(imported, nullptr);
  void* ep = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&ep, 100, pinned, exp_s_));
  std::memset(ep, 0x42, 100);
  spMemPoolPtrExportData d = ExportPtr(ep);
  void* ip = nullptr;
  SP_ASSERT_OK(spMemPoolImportPointer(&ip, imported, &d));
  EXPECT_TRUE(AllBytes(ip, 100, 0x42));
  spPointerAttributes a;
  SP_ASSERT_OK(spPointerGetAttributes(&a, ip));
  EXPECT_EQ(a.device, -1) << "host memory";
  EXPECT_EQ(Stats(imported).usedBytes, 128u) << "64-B rule of pinned host pools";
  SP_ASSERT_OK(spFree(imp_rt_, ip));
  SP_ASSERT_OK(spFree(exp_rt_, ep));
}

// ------------------------------------------------ access and the checker

TEST(IpcAccessTest, ImportedPoolsStartWithTheirResidentDeviceOnly) {
  spRuntime_t exp_rt = NewRuntime(spExecutorSimulator, spBackingHost, 2);
  spRuntime_t imp_rt = NewRuntime(spExecutorSimulator, spBackingHost, 2);
  SP_ASSERT_OK(spCheckerEnable(imp_rt, 1));  // collect, not fatal
  spMemPool_t pool = NewExportablePool(exp_rt);
  spMemAccessDesc grant{{spMemLocationTypeDevice, 1}, spMemAccessFlagsProtReadWrite};
  SP_ASSERT_OK(spMemPoolSetAccess(pool, &grant, 1));
  const int fd = ExportFd(pool);
  spMemPool_t imported = Import(imp_rt, fd);
  close(fd);
  // F.11.2: "the imported memory pool does not inherit any accessibility set
  // by the exporting process".
  spMemLocation dev1{spMemLocationTypeDevice, 1};
  spMemLocation dev0{spMemLocationTypeDevice, 0};
  spMemAccessFlags f;
  SP_ASSERT_OK(spMemPoolGetAccess(&f, imported, &dev1));
  EXPECT_EQ(f, spMemAccessFlagsProtNone);
  SP_ASSERT_OK(spMemPoolGetAccess(&f, imported, &dev0));
  EXPECT_EQ(f, spMemAccessFlagsProtReadWrite);

  spStream_t es = NewStream(exp_rt);
  void* ep = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&ep, 512, pool, es));
  spMemPoolPtrExportData d;
  SP_ASSERT_OK(spMemPoolExportPointer(&d, ep));
  void* ip = nullptr;
  SP_ASSERT_OK(spMemPoolImportPointer(&ip, imported, &d));
  spStream_t s1 = NewStream(imp_rt, 1);
  spAccess a{ip, 512, 1};
  SP_ASSERT_OK(spLaunchKernel(s1, 10, &a, 1));
  size_t n = 0;
  SP_ASSERT_OK(spCheckerGetReports(imp_rt, nullptr, 0, &n));
  ASSERT_EQ(n, 1u);
  spCheckReport r;
  SP_ASSERT_OK(spCheckerGetReports(imp_rt, &r, 1, &n));
  EXPECT_EQ(r.kind, spCheckNoAccess);
  // "The importing process needs to enable access (with
  // cudaMemPoolSetAccess) from any GPU it plans to access the memory from."
  SP_ASSERT_OK(spCheckerClearReports(imp_rt));
  SP_ASSERT_OK(spMemPoolSetAccess(imported, &grant, 1));
  SP_ASSERT_OK(spLaunchKernel(s1, 10, &a, 1));
  // The import is checked like an allocation: beyond it is out of bounds,
  // after its free is use after free.
  spAccess beyond{static_cast<char*>(ip) + 512, 16, 0};
  SP_ASSERT_OK(spLaunchKernel(s1, 10, &beyond, 1));
  SP_ASSERT_OK(spFreeAsync(ip, s1));
  SP_ASSERT_OK(spLaunchKernel(s1, 10, &a, 1));
  std::vector<spCheckReport> rs(4);
  SP_ASSERT_OK(spCheckerGetReports(imp_rt, rs.data(), rs.size(), &n));
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(rs[0].kind, spCheckOutOfBounds);
  EXPECT_EQ(rs[1].kind, spCheckUseAfterFree);
  SP_EXPECT_OK(spRuntimeDestroy(imp_rt));
  SP_EXPECT_OK(spRuntimeDestroy(exp_rt));
}

TEST_F(IpcTest, DestroyingAnImportedPoolKeepsLiveImportsUntilFreed) {
  auto* ep = static_cast<unsigned char*>(ExpAlloc(256));
  std::memset(ep, 0x99, 256);
  void* ip = ImportPtr(ExportPtr(ep));
  SP_ASSERT_OK(spMemPoolDestroy(imp_pool_));
  spMemPoolStats s;
  EXPECT_EQ(spMemPoolGetStats(imp_pool_, &s), spErrorInvalidResourceHandle);
  EXPECT_TRUE(AllBytes(ip, 256, 0x99)) << "still mapped";
  spPointerAttributes a;
  SP_ASSERT_OK(spPointerGetAttributes(&a, ip));
  SP_ASSERT_OK(spFreeAsync(ip, imp_s_));
  SP_ASSERT_OK(spStreamSynchronize(imp_s_));
  EXPECT_EQ(spPointerGetAttributes(&a, ip), spErrorInvalidValue) << "gone with its last import";
}

// ----------------------------------------------------- interprocess events

TEST(IpcEventTest, FlagsAreValidated) {
  spRuntime_t rt = NewRuntime();
  spEvent_t e = nullptr;
  for (unsigned flags : {0u, 2u, 6u}) {
    SP_EXPECT_OK(spEventCreateWithFlags(&e, rt, flags)) << flags;
    SP_EXPECT_OK(spEventDestroy(e));
  }
  // Interprocess needs DisableTiming, as in CUDA; unknown bits are refused.
  for (unsigned flags : {4u, 1u, 8u, 0x80000000u}) {
    EXPECT_EQ(spEventCreateWithFlags(&e, rt, flags), spErrorInvalidValue) << flags;
  }
  EXPECT_EQ(spEventCreateWithFlags(nullptr, rt, 0), spErrorInvalidValue);
  EXPECT_EQ(spEventCreateWithFlags(&e, nullptr, 0), spErrorInvalidValue);
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

TEST(IpcEventTest, EventsWithoutTimingHaveNoElapsedTime) {
  spRuntime_t rt = NewRuntime();
  spStream_t s = NewStream(rt);
  spEvent_t timed, untimed;
  SP_ASSERT_OK(spEventCreate(&timed, rt));
  SP_ASSERT_OK(spEventCreateWithFlags(&untimed, rt, spEventDisableTiming));
  SP_ASSERT_OK(spEventRecord(timed, s));
  SP_ASSERT_OK(spEventRecord(untimed, s));
  SP_ASSERT_OK(spStreamSynchronize(s));
  float ms = -1;
  EXPECT_EQ(spEventElapsedTime(&ms, timed, untimed), spErrorInvalidResourceHandle);
  EXPECT_EQ(spEventElapsedTime(&ms, untimed, timed), spErrorInvalidResourceHandle);
  SP_EXPECT_OK(spEventElapsedTime(&ms, timed, timed));
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

TEST(IpcEventTest, HandlesAreGivenOnlyForInterprocessEvents) {
  spRuntime_t rt = NewRuntime();
  spEvent_t plain, ipc;
  SP_ASSERT_OK(spEventCreate(&plain, rt));
  SP_ASSERT_OK(spEventCreateWithFlags(&ipc, rt, spEventDisableTiming | spEventInterprocess));
  spIpcEventHandle h;
  EXPECT_EQ(spIpcGetEventHandle(&h, plain), spErrorInvalidResourceHandle);
  EXPECT_EQ(spIpcGetEventHandle(nullptr, ipc), spErrorInvalidValue);
  SP_EXPECT_OK(spIpcGetEventHandle(&h, ipc));
  SP_ASSERT_OK(spEventDestroy(ipc));
  EXPECT_EQ(spIpcGetEventHandle(&h, ipc), spErrorInvalidResourceHandle);
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

TEST(IpcEventTest, OpenRejectsEveryBadHandle) {
  spRuntime_t rt = NewRuntime();
  spEvent_t ipc, opened;
  SP_ASSERT_OK(spEventCreateWithFlags(&ipc, rt, spEventDisableTiming | spEventInterprocess));
  spIpcEventHandle good;
  SP_ASSERT_OK(spIpcGetEventHandle(&good, ipc));
  spIpcEventHandle h{};
  EXPECT_EQ(spIpcOpenEventHandle(&opened, rt, h), spErrorInvalidValue) << "all zero";
  std::memset(h.reserved, 0xab, sizeof h.reserved);
  EXPECT_EQ(spIpcOpenEventHandle(&opened, rt, h), spErrorInvalidValue) << "garbage";
  // Layout (src/runtime/ipc.cc): magic, version, 16-byte token, 40-byte name.
  h = good;
  h.reserved[24] = 'X';  // the name no longer starts with "/spev-"
  EXPECT_EQ(spIpcOpenEventHandle(&opened, rt, h), spErrorInvalidValue) << "foreign name";
  h = good;
  h.reserved[30] ^= 1;  // a well-formed name that no event has
  EXPECT_EQ(spIpcOpenEventHandle(&opened, rt, h), spErrorInvalidValue) << "no such event";
  h = good;
  h.reserved[8] ^= 1;  // the right name, another token
  EXPECT_EQ(spIpcOpenEventHandle(&opened, rt, h), spErrorInvalidValue) << "token mismatch";
  EXPECT_EQ(spIpcOpenEventHandle(nullptr, rt, good), spErrorInvalidValue);
  EXPECT_EQ(spIpcOpenEventHandle(&opened, nullptr, good), spErrorInvalidValue);
  SP_EXPECT_OK(spIpcOpenEventHandle(&opened, rt, good));
  SP_EXPECT_OK(spEventDestroy(opened));
  // A handle can be opened while the creating event lives.
  SP_ASSERT_OK(spEventDestroy(ipc));
  EXPECT_EQ(spIpcOpenEventHandle(&opened, rt, good), spErrorInvalidValue) << "creator gone";
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

// Two simulator runtimes of one process: what the simulator supports
// (streampool.h): record, query, synchronize on a completed record, and a
// stream wait once the record has completed.
TEST(IpcEventTest, SimulatorRecordQueryAndSynchronizeAcrossRuntimes) {
  spRuntime_t a = NewRuntime();
  spRuntime_t b = NewRuntime();
  spStream_t sa = NewStream(a), sb = NewStream(b);
  spEvent_t ea, eb;
  SP_ASSERT_OK(spEventCreateWithFlags(&ea, a, spEventDisableTiming | spEventInterprocess));
  spIpcEventHandle h;
  SP_ASSERT_OK(spIpcGetEventHandle(&h, ea));
  SP_ASSERT_OK(spIpcOpenEventHandle(&eb, b, h));
  EXPECT_EQ(spEventQuery(eb), spSuccess) << "never recorded";
  // A record on an idle stream completes at once.
  SP_ASSERT_OK(spEventRecord(ea, sa));
  EXPECT_EQ(spEventQuery(eb), spSuccess);
  // A record behind 1000 virtual ns of kernel completes when a's host
  // observes it.
  SP_ASSERT_OK(spLaunchKernel(sa, 1000, nullptr, 0));
  SP_ASSERT_OK(spEventRecord(ea, sa));
  EXPECT_EQ(spEventQuery(eb), spErrorNotReady);
  EXPECT_EQ(spEventQuery(ea), spErrorNotReady);
  EXPECT_EQ(spStreamWaitEvent(sb, eb), spErrorNotSupported)
      << "a simulated stream cannot wait for another process's pending record";
  SP_ASSERT_OK(spHostAdvance(a, 999));
  EXPECT_EQ(spEventQuery(eb), spErrorNotReady);
  SP_ASSERT_OK(spHostAdvance(a, 1));
  EXPECT_EQ(spEventQuery(eb), spSuccess);
  SP_EXPECT_OK(spEventSynchronize(eb));
  SP_EXPECT_OK(spStreamWaitEvent(sb, eb)) << "complete: nothing to wait for";
  // The latest record decides, whoever made it: b records on its own stream,
  // behind its own kernel.
  SP_ASSERT_OK(spLaunchKernel(sb, 500, nullptr, 0));
  SP_ASSERT_OK(spEventRecord(eb, sb));
  EXPECT_EQ(spEventQuery(ea), spErrorNotReady) << "a sees b's pending record";
  EXPECT_EQ(spEventQuery(eb), spErrorNotReady);
  SP_ASSERT_OK(spEventSynchronize(eb));  // b's own record: b's virtual time
  EXPECT_EQ(spEventQuery(ea), spSuccess);
  uint64_t now = 0;
  SP_ASSERT_OK(spHostNow(b, &now));
  EXPECT_EQ(now, 500u);
  SP_EXPECT_OK(spRuntimeDestroy(b));
  SP_EXPECT_OK(spRuntimeDestroy(a));
}

// ---------------------------------------------------------------- handles

TEST(IpcHandleTest, NewEntryPointsRejectWrongKindDestroyedAndHostFunctionCalls) {
  spRuntime_t rt = NewRuntime();
  spStream_t s = NewStream(rt);
  spMemPool_t pool = NewExportablePool(rt);
  spEvent_t ev;
  SP_ASSERT_OK(spEventCreateWithFlags(&ev, rt, spEventDisableTiming | spEventInterprocess));
  spIpcEventHandle h;
  SP_ASSERT_OK(spIpcGetEventHandle(&h, ev));
  void* p = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&p, 256, pool, s));

  // Host functions must not call sp* functions (streampool.h): the new ones
  // refuse too.
  struct FromHost {
    void* p;
    spMemPool_t pool;
    spError_t export_ptr = spSuccess, set_access = spSuccess, export_fd = spSuccess;
  } from_host{p, pool};
  SP_ASSERT_OK(spLaunchHostFunc(
      s,
      [](void* u) {
        auto* f = static_cast<FromHost*>(u);
        spMemPoolPtrExportData d;
        f->export_ptr = spMemPoolExportPointer(&d, f->p);
        const spMemAccessDesc a{{spMemLocationTypeDevice, 0}, spMemAccessFlagsProtReadWrite};
        f->set_access = spMemPoolSetAccess(f->pool, &a, 1);
        int fd;
        f->export_fd =
            spMemPoolExportToShareableHandle(&fd, f->pool, spMemHandleTypePosixFileDescriptor, 0);
      },
      &from_host));
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(from_host.export_ptr, spErrorNotSupported);
  EXPECT_EQ(from_host.set_access, spErrorNotSupported);
  EXPECT_EQ(from_host.export_fd, spErrorNotSupported);

  // A handle of the wrong kind is never taken for another.
  const auto as_pool = reinterpret_cast<spMemPool_t>(s);
  const auto as_event = reinterpret_cast<spEvent_t>(pool);
  const auto as_runtime = reinterpret_cast<spRuntime_t>(s);
  const spMemAccessDesc d{{spMemLocationTypeDevice, 0}, spMemAccessFlagsProtReadWrite};
  const spMemLocation loc{spMemLocationTypeDevice, 0};
  spMemAccessFlags f;
  int fd = -1, can = -1;
  spMemPoolPtrExportData data{};
  spMemPool_t out_pool;
  spEvent_t out_event;
  const spError_t kBad = spErrorInvalidResourceHandle;
  EXPECT_EQ(spMemPoolSetAccess(as_pool, &d, 1), kBad);
  EXPECT_EQ(spMemPoolGetAccess(&f, as_pool, &loc), kBad);
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, as_pool, spMemHandleTypePosixFileDescriptor, 0),
            kBad);
  EXPECT_EQ(spMemPoolImportPointer(&p, as_pool, &data), kBad);
  EXPECT_EQ(spIpcGetEventHandle(&h, as_event), kBad);
  EXPECT_EQ(spEventCreateWithFlags(&out_event, as_runtime, 0), kBad);
  EXPECT_EQ(spIpcOpenEventHandle(&out_event, as_runtime, h), kBad);
  EXPECT_EQ(spRuntimeSetPeerAccessible(as_runtime, 0, 0, 1), kBad);
  EXPECT_EQ(spDeviceCanAccessPeer(&can, as_runtime, 0, 0), kBad);
  EXPECT_EQ(spMemPoolImportFromShareableHandle(&out_pool, as_runtime, nullptr,
                                               spMemHandleTypePosixFileDescriptor, 0),
            kBad);

  // Every handle of a destroyed runtime is dead.
  fd = ExportFd(pool);
  SP_ASSERT_OK(spRuntimeDestroy(rt));
  EXPECT_EQ(spMemPoolSetAccess(pool, &d, 1), kBad);
  EXPECT_EQ(spMemPoolGetAccess(&f, pool, &loc), kBad);
  EXPECT_EQ(spMemPoolExportToShareableHandle(&fd, pool, spMemHandleTypePosixFileDescriptor, 0),
            kBad);
  EXPECT_EQ(spIpcGetEventHandle(&h, ev), kBad);
  EXPECT_EQ(spEventCreateWithFlags(&out_event, rt, 0), kBad);
  EXPECT_EQ(spRuntimeSetPeerAccessible(rt, 0, 0, 1), kBad);
  EXPECT_EQ(spMemPoolImportFromShareableHandle(&out_pool, rt, reinterpret_cast<void*>(intptr_t{fd}),
                                               spMemHandleTypePosixFileDescriptor, 0),
            kBad);
  EXPECT_EQ(spMemPoolExportPointer(&data, p), spErrorInvalidValue) << "no longer runtime memory";
  close(fd);
}

// ----------------------------------------------------------- two processes

// F.11.1 and F.11.3 as two processes running the guide's snippets with the
// sp* names: the exporter shares its pool (fd over SCM_RIGHTS), an allocation
// and a "ready" IPC event; the importer waits for it, uses the allocation,
// frees it first, and records "finished", which the exporter waits for
// before its own use and free. Both run the simulator, so the importer
// synchronizes on "ready" (blocking for the exporter in real time) before
// its stream waits, and the exporter does the same with "finished".
TEST(IpcProcessTest, GuideF11ShareAnAllocationBetweenTwoProcesses) {
  Channel ch;
  const pid_t child = Spawn([&]() -> int {
    close(ch.fd[0]);
    const int sock = ch.fd[1];
    // in importing process
    int fdHandle = RecvFd(sock);
    CHILD_CHECK(fdHandle >= 0);
    Shared shmem;
    CHILD_CHECK(RecvAll(sock, &shmem, sizeof shmem));
    spRuntime_t rt = NewRuntime();
    CHILD_CHECK(rt != nullptr);
    spStream_t stream = NewStream(rt);
    // Create an imported pool from the shareable handle.
    // Note that the handle is passed by value here.
    spMemPool_t importedMemPool;
    CHILD_OK(spMemPoolImportFromShareableHandle(&importedMemPool, rt,
                                                reinterpret_cast<void*>(intptr_t{fdHandle}),
                                                spMemHandleTypePosixFileDescriptor, 0));
    close(fdHandle);  // the pool holds its own descriptor
    // Importing an allocation
    spMemPoolPtrExportData* importData = &shmem.ptr_data;
    spEvent_t readyIpcEvent, finishedIpcEvent;
    CHILD_OK(spIpcOpenEventHandle(&readyIpcEvent, rt, shmem.ready));
    CHILD_OK(spIpcOpenEventHandle(&finishedIpcEvent, rt, shmem.finished));
    // import the allocation. The operation does not block on the allocation
    // being ready.
    void* ptr = nullptr;
    CHILD_OK(spMemPoolImportPointer(&ptr, importedMemPool, importData));
    CHILD_CHECK(SendByte(sock));  // imported: the exporter may now complete "ready"
    // Wait for the prior stream operations in the allocating stream to
    // complete before using the allocation in the importing process.
    CHILD_OK(spEventSynchronize(readyIpcEvent));  // blocks for the exporter
    CHILD_OK(spStreamWaitEvent(stream, readyIpcEvent));
    CHILD_CHECK(AllBytes(ptr, shmem.size, 0x5a));
    spAccess use{ptr, static_cast<size_t>(shmem.size), 1};
    CHILD_OK(spLaunchKernel(stream, 1000, &use, 1));
    CHILD_OK(spMemsetAsync(static_cast<char*>(ptr) + shmem.size / 2, 0xa5, shmem.size / 2, stream));
    // The free must happen in importing process before the exporting process
    CHILD_OK(spFreeAsync(ptr, stream));  // Last access in importing process
    // Access not allowed in the importing process after the free
    CHILD_OK(spEventRecord(finishedIpcEvent, stream));
    CHILD_CHECK(SendByte(sock));            // "finished" is recorded (not yet complete)
    CHILD_OK(spStreamSynchronize(stream));  // now it completes
    spMemPoolStats s;
    CHILD_OK(spMemPoolGetStats(importedMemPool, &s));
    CHILD_CHECK(s.usedBytes == 0 && s.reservedBytes == 0 && s.allocCount == 1);
    CHILD_OK(spRuntimeDestroy(rt));
    return 0;
  });
  ASSERT_GT(child, 0);
  close(ch.fd[1]);
  ch.fd[1] = -1;
  const int sock = ch.fd[0];
  AlarmGuard guard(60);

  // in exporting process
  spRuntime_t rt = NewRuntime();
  spStream_t stream = NewStream(rt);
  // create an exportable IPC capable pool on device 0
  spMemPoolProps poolProps = {};
  poolProps.allocType = spMemAllocationTypeDevice;
  poolProps.device = 0;
  // Setting handleTypes to a non zero value will make the pool exportable (IPC capable)
  poolProps.handleTypes = spMemHandleTypePosixFileDescriptor;
  spMemPool_t memPool;
  SP_ASSERT_OK(spMemPoolCreate(&memPool, rt, &poolProps));
  // FD based handles are integer types
  int fdHandle = 0;
  // Retrieve an OS native handle to the pool.
  // Note that a pointer to the handle memory is passed in here.
  SP_ASSERT_OK(
      spMemPoolExportToShareableHandle(&fdHandle, memPool, spMemHandleTypePosixFileDescriptor, 0));
  // The handle must be sent to the importing process with the appropriate
  // OS specific APIs.
  ASSERT_TRUE(SendFd(sock, fdHandle));
  close(fdHandle);

  // preparing an allocation in the exporting process
  Shared shmem{};
  shmem.size = 4096;
  spEvent_t readyIpcEvent, finishedIpcEvent;
  // spEventInterprocess flag makes the event an IPC event
  // spEventDisableTiming is set for performance reasons
  SP_ASSERT_OK(
      spEventCreateWithFlags(&readyIpcEvent, rt, spEventDisableTiming | spEventInterprocess));
  SP_ASSERT_OK(
      spEventCreateWithFlags(&finishedIpcEvent, rt, spEventDisableTiming | spEventInterprocess));
  // allocate from the exporting mem pool
  void* ptr = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&ptr, shmem.size, memPool, stream));
  SP_ASSERT_OK(spLaunchKernel(stream, 2000, nullptr, 0));  // keeps "ready" pending a while
  SP_ASSERT_OK(spMemsetAsync(ptr, 0x5a, shmem.size, stream));
  // event for sharing when the allocation is ready.
  SP_ASSERT_OK(spEventRecord(readyIpcEvent, stream));
  SP_ASSERT_OK(spMemPoolExportPointer(&shmem.ptr_data, ptr));
  SP_ASSERT_OK(spIpcGetEventHandle(&shmem.ready, readyIpcEvent));
  SP_ASSERT_OK(spIpcGetEventHandle(&shmem.finished, finishedIpcEvent));
  // Share IPC event and pointer export data with the importing process
  ASSERT_TRUE(SendAll(sock, &shmem, sizeof shmem));
  ASSERT_TRUE(RecvByte(sock));  // the importer has imported
  EXPECT_EQ(spEventQuery(readyIpcEvent), spErrorNotReady);
  SP_ASSERT_OK(spStreamSynchronize(stream));  // the memset lands; "ready" completes

  ASSERT_TRUE(RecvByte(sock));  // the importer recorded "finished"
  // The exporting process needs to coordinate its free with the stream order
  // of the importing process's free.
  SP_ASSERT_OK(spEventSynchronize(finishedIpcEvent));  // blocks for the importer
  SP_ASSERT_OK(spStreamWaitEvent(stream, finishedIpcEvent));
  spAccess use{ptr, static_cast<size_t>(shmem.size), 0};
  SP_ASSERT_OK(spLaunchKernel(stream, 1000, &use, 1));
  // The free in the importing process doesn't stop the exporting process
  // from using the allocation: the importer's bytes are here.
  EXPECT_TRUE(AllBytes(ptr, shmem.size / 2, 0x5a));
  EXPECT_TRUE(AllBytes(static_cast<char*>(ptr) + shmem.size / 2, shmem.size / 2, 0xa5));
  EXPECT_EQ(Stats(memPool).usedBytes, 4096u);
  SP_ASSERT_OK(spFreeAsync(ptr, stream));
  EXPECT_EQ(Reap(child), 0);
  EXPECT_EQ(Stats(memPool).usedBytes, 0u);
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

// With the threads executor a stream really waits for another process's
// record: the importer's stream waits on "ready" while the exporter's stream
// is held back (its host function waits for the importer's go-ahead), so the
// wait is enqueued before the record can complete, and the importer's host
// function, behind the wait, sees the exporter's bytes. The importer's host
// thread then synchronizes on the same record.
TEST(IpcProcessTest, ThreadsExecutorStreamWaitsForAnotherProcesssRecord) {
  Channel ch, go;
  const pid_t child = Spawn([&]() -> int {
    close(ch.fd[0]);
    close(go.fd[0]);
    const int fd = RecvFd(ch.fd[1]);
    CHILD_CHECK(fd >= 0);
    Shared shmem;
    CHILD_CHECK(RecvAll(ch.fd[1], &shmem, sizeof shmem));
    spRuntime_t rt = NewRuntime(spExecutorThreads);
    spStream_t s = NewStream(rt);
    spMemPool_t pool = Import(rt, fd);
    CHILD_CHECK(pool != nullptr);
    close(fd);
    spEvent_t ready;
    CHILD_OK(spIpcOpenEventHandle(&ready, rt, shmem.ready));
    void* ptr = nullptr;
    CHILD_OK(spMemPoolImportPointer(&ptr, pool, &shmem.ptr_data));
    CHILD_CHECK(spEventQuery(ready) == spErrorNotReady);  // held back by our go-ahead
    CHILD_OK(spStreamWaitEvent(s, ready));
    struct Probe {
      const void* ptr;
      size_t size;
      int seen = -1;
    } probe{ptr, static_cast<size_t>(shmem.size)};
    CHILD_OK(spLaunchHostFunc(
        s,
        [](void* u) {
          auto* p = static_cast<Probe*>(u);
          p->seen = AllBytes(p->ptr, p->size, 0x5a) ? 1 : 0;
        },
        &probe));
    CHILD_OK(spFreeAsync(ptr, s));
    CHILD_CHECK(SendByte(go.fd[1]));  // now the exporter's stream may proceed
    // Synchronizing on the other process's record blocks until it completes.
    CHILD_OK(spEventSynchronize(ready));
    CHILD_OK(spStreamSynchronize(s));
    CHILD_CHECK(probe.seen == 1);
    CHILD_CHECK(spEventQuery(ready) == spSuccess);
    CHILD_OK(spRuntimeDestroy(rt));
    return 0;
  });
  ASSERT_GT(child, 0);
  close(ch.fd[1]);
  ch.fd[1] = -1;
  close(go.fd[1]);
  go.fd[1] = -1;
  AlarmGuard guard(60);

  spRuntime_t rt = NewRuntime(spExecutorThreads);
  spStream_t s = NewStream(rt);
  spMemPool_t pool = NewExportablePool(rt);
  const int fd = ExportFd(pool);
  ASSERT_TRUE(SendFd(ch.fd[0], fd));
  close(fd);
  spEvent_t ready;
  SP_ASSERT_OK(spEventCreateWithFlags(&ready, rt, spEventDisableTiming | spEventInterprocess));
  Shared shmem{};
  shmem.size = 64 * 1024;
  void* ptr = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&ptr, shmem.size, pool, s));
  int go_sock = go.fd[0];
  SP_ASSERT_OK(spLaunchHostFunc(
      s, [](void* u) { RecvByte(*static_cast<int*>(u)); }, &go_sock));
  SP_ASSERT_OK(spMemsetAsync(ptr, 0x5a, shmem.size, s));
  SP_ASSERT_OK(spEventRecord(ready, s));
  SP_ASSERT_OK(spMemPoolExportPointer(&shmem.ptr_data, ptr));
  SP_ASSERT_OK(spIpcGetEventHandle(&shmem.ready, ready));
  ASSERT_TRUE(SendAll(ch.fd[0], &shmem, sizeof shmem));
  SP_ASSERT_OK(spStreamSynchronize(s));
  EXPECT_EQ(Reap(child), 0);
  SP_ASSERT_OK(spFreeAsync(ptr, s));
  SP_EXPECT_OK(spRuntimeDestroy(rt));
  // The calling thread's runtime cache (Registry::FindCached) keeps the
  // destroyed runtime, and so its worker threads, alive until this thread's
  // next lookup of another runtime. A process forked before that would
  // inherit the object without its threads and hang joining them when its own
  // first call drops the cache; a later test in this binary forks, so drop it
  // here.
  spRuntime_t fresh = NewRuntime();
  ASSERT_NE(NewStream(fresh), nullptr);
  SP_EXPECT_OK(spRuntimeDestroy(fresh));
}

// The free-order rule across processes with spFree: the importer frees
// synchronously; the exporter's allocation, bytes and statistics are intact
// and it frees afterwards.
// Blocks of an exportable pool in several granules, one of them spanning two,
// shared with another process in either growth mode. Expandable (the
// default for exportable pools): one reservation whose file offsets are its
// own, each block exported with the granule-aligned range around it, so the
// importer maps overlapping ranges of the file for A and B. Chunked: a chunk
// per growth. Either way the importer reads what the exporter wrote and the
// exporter what the importer wrote.
struct GranuleBlocks {
  static constexpr int kCount = 4;
  spMemPoolPtrExportData data[kCount];
  uint64_t size[kCount];
  unsigned char fill[kCount];
};

void ShareBlocksInSeveralGranules(int growth) {
  Channel ch;
  const pid_t child = Spawn([&]() -> int {
    close(ch.fd[0]);
    const int sock = ch.fd[1];
    const int fd = RecvFd(sock);
    CHILD_CHECK(fd >= 0);
    GranuleBlocks b;
    CHILD_CHECK(RecvAll(sock, &b, sizeof b));
    spRuntime_t rt = NewRuntime();
    CHILD_CHECK(rt != nullptr);
    spMemPool_t pool = Import(rt, fd);
    close(fd);
    CHILD_CHECK(pool != nullptr);
    unsigned char* p[GranuleBlocks::kCount];
    for (int i = 0; i < GranuleBlocks::kCount; ++i) {
      void* q = nullptr;
      CHILD_OK(spMemPoolImportPointer(&q, pool, &b.data[i]));
      p[i] = static_cast<unsigned char*>(q);
      CHILD_CHECK(AllBytes(p[i], b.size[i], b.fill[i]));
    }
    spMemPoolStats s;
    CHILD_OK(spMemPoolGetStats(pool, &s));
    CHILD_CHECK(s.allocCount == GranuleBlocks::kCount);
    // The physical memory behind the imports, each byte once: in an
    // expandable pool A's and B's granule ranges overlap in granule 0.
    CHILD_CHECK(s.reservedBytes == 8 * kMiB);
    // The upper half of B (its second granule in an expandable pool), and
    // all of C.
    std::memset(p[1] + b.size[1] / 2, 0xc3, b.size[1] / 2);
    std::memset(p[2], 0x3c, b.size[2]);
    for (unsigned char* q : p) CHILD_OK(spFree(rt, q));
    CHILD_OK(spMemPoolGetStats(pool, &s));
    CHILD_CHECK(s.usedBytes == 0 && s.reservedBytes == 0);
    CHILD_CHECK(SendByte(sock));
    CHILD_OK(spRuntimeDestroy(rt));
    return 0;
  });
  ASSERT_GT(child, 0);
  const int sock = ch.Parent();
  AlarmGuard guard(60);

  spRuntime_t rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  spStream_t s = NewStream(rt);
  spMemPoolProps props{};
  props.allocType = spMemAllocationTypeDevice;
  props.handleTypes = spMemHandleTypePosixFileDescriptor;
  props.growth = growth;
  spMemPool_t pool = nullptr;
  SP_ASSERT_OK(spMemPoolCreate(&pool, rt, &props));
  int mode = -1;
  SP_ASSERT_OK(spMemPoolGetAttribute(pool, spMemPoolAttrGrowth, &mode));
  EXPECT_EQ(mode, growth == spPoolGrowthChunked ? spPoolGrowthChunked : spPoolGrowthExpandable);

  // Expandable: A = [0, 1 MiB), B = [1 MiB, 4 MiB) over granules 0 and 1,
  // C = granule 2, D = 4 KiB in granule 3. Chunked: A, B and C each grow a
  // chunk, D goes into a remainder.
  GranuleBlocks b{};
  const uint64_t sizes[GranuleBlocks::kCount] = {kMiB, 3 * kMiB, 2 * kMiB, 4096};
  unsigned char* p[GranuleBlocks::kCount];
  for (int i = 0; i < GranuleBlocks::kCount; ++i) {
    void* q = nullptr;
    SP_ASSERT_OK(spMallocFromPoolAsync(&q, sizes[i], pool, s));
    p[i] = static_cast<unsigned char*>(q);
    b.size[i] = sizes[i];
    b.fill[i] = static_cast<unsigned char>(0x11 * (i + 1));
    std::memset(p[i], b.fill[i], sizes[i]);
    SP_ASSERT_OK(spMemPoolExportPointer(&b.data[i], p[i]));
  }
  if (mode == spPoolGrowthExpandable) {
    EXPECT_EQ(p[1], p[0] + kMiB);
    EXPECT_EQ(p[2], p[0] + 4 * kMiB);
    EXPECT_EQ(p[3], p[0] + 6 * kMiB);
    EXPECT_EQ(Stats(pool).reservedBytes, 8 * kMiB);
  } else {
    // D in the lower of the two 1 MiB remainders, A's or B's.
    EXPECT_TRUE(p[3] == p[0] + kMiB || p[3] == p[1] + 3 * kMiB);
    EXPECT_EQ(Stats(pool).reservedBytes, 8 * kMiB);  // chunks of 2, 4 and 2 MiB
  }
  const int fd = ExportFd(pool);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendFd(sock, fd));
  close(fd);
  ASSERT_TRUE(SendAll(sock, &b, sizeof b));
  ASSERT_TRUE(RecvByte(sock));  // the importer has read, written and freed

  EXPECT_TRUE(AllBytes(p[0], sizes[0], b.fill[0]));
  EXPECT_TRUE(AllBytes(p[1], sizes[1] / 2, b.fill[1]));
  EXPECT_TRUE(AllBytes(p[1] + sizes[1] / 2, sizes[1] / 2, 0xc3));
  EXPECT_TRUE(AllBytes(p[2], sizes[2], 0x3c));
  EXPECT_TRUE(AllBytes(p[3], sizes[3], b.fill[3]));
  for (unsigned char* q : p) SP_EXPECT_OK(spFreeAsync(q, s));
  EXPECT_EQ(Reap(child), 0);
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

TEST(IpcProcessTest, BlocksInSeveralGranulesOfAnExpandablePoolCrossProcesses) {
  ShareBlocksInSeveralGranules(spPoolGrowthDefault);
}

TEST(IpcProcessTest, BlocksInSeveralChunksOfAChunkedPoolCrossProcesses) {
  ShareBlocksInSeveralGranules(spPoolGrowthChunked);
}

TEST(IpcProcessTest, TheImportersFreeComesFirstAndLeavesTheExportersAllocation) {
  Channel ch;
  const pid_t child = Spawn([&]() -> int {
    close(ch.fd[0]);
    const int fd = RecvFd(ch.fd[1]);
    spMemPoolPtrExportData d;
    CHILD_CHECK(fd >= 0 && RecvAll(ch.fd[1], &d, sizeof d));
    spRuntime_t rt = NewRuntime();
    spMemPool_t pool = Import(rt, fd);
    CHILD_CHECK(pool != nullptr);
    void* p = nullptr;
    CHILD_OK(spMemPoolImportPointer(&p, pool, &d));
    CHILD_CHECK(AllBytes(p, 8192, 0x77));
    std::memset(p, 0x88, 100);
    CHILD_OK(spFree(rt, p));
    CHILD_CHECK(spFree(rt, p) == spErrorInvalidValue);  // freed once
    CHILD_CHECK(SendByte(ch.fd[1]));
    CHILD_OK(spRuntimeDestroy(rt));
    return 0;
  });
  ASSERT_GT(child, 0);
  close(ch.fd[1]);
  ch.fd[1] = -1;
  AlarmGuard guard(60);
  spRuntime_t rt = NewRuntime();
  spStream_t s = NewStream(rt);
  spMemPool_t pool = NewExportablePool(rt);
  void* p = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&p, 8192, pool, s));
  SP_ASSERT_OK(spMemsetAsync(p, 0x77, 8192, s));
  SP_ASSERT_OK(spStreamSynchronize(s));
  spMemPoolPtrExportData d;
  SP_ASSERT_OK(spMemPoolExportPointer(&d, p));
  const int fd = ExportFd(pool);
  ASSERT_TRUE(SendFd(ch.fd[0], fd));
  close(fd);
  ASSERT_TRUE(SendAll(ch.fd[0], &d, sizeof d));
  ASSERT_TRUE(RecvByte(ch.fd[0]));
  EXPECT_EQ(Reap(child), 0);
  const spMemPoolStats st = Stats(pool);
  EXPECT_EQ(st.usedBytes, 8192u);
  EXPECT_EQ(st.freeCount, 0u) << "the importer's free is not the exporter's";
  EXPECT_TRUE(AllBytes(p, 100, 0x88)) << "the importer's write landed";
  EXPECT_TRUE(AllBytes(static_cast<char*>(p) + 100, 8092, 0x77));
  SP_ASSERT_OK(spFreeAsync(p, s));
  EXPECT_EQ(Stats(pool).usedBytes, 0u);
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

// An importer killed while it holds an import (never freed, mapping live)
// changes nothing in the exporter: its pool passes its invariant check, the
// bytes are there, it frees and allocates, and exports to a second importer.
TEST(IpcProcessTest, AnImporterThatDiesMidUseLeavesTheExportersPoolIntact) {
  auto importer = [](int sock, unsigned char expect, bool die) -> int {
    const int fd = RecvFd(sock);
    spMemPoolPtrExportData d;
    CHILD_CHECK(fd >= 0 && RecvAll(sock, &d, sizeof d));
    spRuntime_t rt = NewRuntime();
    spMemPool_t pool = Import(rt, fd);
    CHILD_CHECK(pool != nullptr);
    void* p = nullptr;
    CHILD_OK(spMemPoolImportPointer(&p, pool, &d));
    CHILD_CHECK(AllBytes(p, 1 << 16, expect));
    std::memset(p, 0xdd, 1 << 16);
    CHILD_CHECK(SendByte(sock));
    if (die) raise(SIGKILL);  // mid-use: no free, no teardown
    CHILD_OK(spFree(rt, p));
    CHILD_OK(spRuntimeDestroy(rt));
    return 0;
  };
  Channel first, second;
  const pid_t victim = Spawn([&] {
    close(first.fd[0]);
    return importer(first.fd[1], 0x11, /*die=*/true);
  });
  ASSERT_GT(victim, 0);
  close(first.fd[1]);
  first.fd[1] = -1;
  AlarmGuard guard(60);
  spRuntime_t rt = NewRuntime();
  spStream_t s = NewStream(rt);
  spMemPool_t pool = NewExportablePool(rt);
  auto cpp = streampool::Runtime::FromC(rt).value();
  void* p = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&p, 1 << 16, pool, s));
  SP_ASSERT_OK(spMemsetAsync(p, 0x11, 1 << 16, s));
  SP_ASSERT_OK(spStreamSynchronize(s));
  spMemPoolPtrExportData d;
  SP_ASSERT_OK(spMemPoolExportPointer(&d, p));
  int fd = ExportFd(pool);
  ASSERT_TRUE(SendFd(first.fd[0], fd) && SendAll(first.fd[0], &d, sizeof d));
  close(fd);
  ASSERT_TRUE(RecvByte(first.fd[0]));
  EXPECT_EQ(Reap(victim), 1000 + SIGKILL);
  const spMemPoolStats before = Stats(pool);
  EXPECT_TRUE(cpp->CheckPoolInvariants(streampool::PoolId{reinterpret_cast<uintptr_t>(pool)}).ok());
  EXPECT_TRUE(AllBytes(p, 1 << 16, 0xdd)) << "the dead importer's writes";
  EXPECT_EQ(before.usedBytes, uint64_t{1} << 16);
  // Still a working pool: free, reuse, export again.
  SP_ASSERT_OK(spFreeAsync(p, s));
  void* q = nullptr;
  SP_ASSERT_OK(spMallocFromPoolAsync(&q, 1 << 16, pool, s));
  EXPECT_EQ(q, p) << "same-stream reuse of the freed block";
  SP_ASSERT_OK(spMemsetAsync(q, 0x22, 1 << 16, s));
  SP_ASSERT_OK(spStreamSynchronize(s));
  SP_ASSERT_OK(spMemPoolExportPointer(&d, q));
  const pid_t survivor = Spawn([&] {
    close(second.fd[0]);
    return importer(second.fd[1], 0x22, /*die=*/false);
  });
  ASSERT_GT(survivor, 0);
  close(second.fd[1]);
  second.fd[1] = -1;
  fd = ExportFd(pool);
  ASSERT_TRUE(SendFd(second.fd[0], fd) && SendAll(second.fd[0], &d, sizeof d));
  close(fd);
  ASSERT_TRUE(RecvByte(second.fd[0]));
  EXPECT_EQ(Reap(survivor), 0);
  EXPECT_TRUE(AllBytes(q, 1 << 16, 0xdd));
  SP_ASSERT_OK(spFreeAsync(q, s));
  const spMemPoolStats after = Stats(pool);
  EXPECT_EQ(after.usedBytes, 0u);
  EXPECT_EQ(after.reservedBytes, 2 * kMiB);
  EXPECT_EQ(after.upstreamMaps, 1u);
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

// The pages belong to whoever still holds the file: an exporter that has
// exited (runtime destroyed, process gone) leaves an importer its bytes.
TEST(IpcProcessTest, AnImporterKeepsThePagesOfAnExporterThatExited) {
  Channel ch;
  const pid_t exporter = Spawn([&]() -> int {
    close(ch.fd[0]);
    spRuntime_t rt = NewRuntime();
    spStream_t s = NewStream(rt);
    spMemPool_t pool = NewExportablePool(rt);
    CHILD_CHECK(pool != nullptr);
    void* p = nullptr;
    CHILD_OK(spMallocFromPoolAsync(&p, 1000, pool, s));
    CHILD_OK(spMemsetAsync(p, 0x6b, 1000, s));
    CHILD_OK(spStreamSynchronize(s));
    spMemPoolPtrExportData d;
    CHILD_OK(spMemPoolExportPointer(&d, p));
    const int fd = ExportFd(pool);
    CHILD_CHECK(SendFd(ch.fd[1], fd) && SendAll(ch.fd[1], &d, sizeof d));
    CHILD_OK(spRuntimeDestroy(rt));
    return 0;
  });
  ASSERT_GT(exporter, 0);
  close(ch.fd[1]);
  ch.fd[1] = -1;
  AlarmGuard guard(60);
  const int fd = RecvFd(ch.fd[0]);
  ASSERT_GE(fd, 0);
  spMemPoolPtrExportData d;
  ASSERT_TRUE(RecvAll(ch.fd[0], &d, sizeof d));
  EXPECT_EQ(Reap(exporter), 0);
  spRuntime_t rt = NewRuntime();
  spMemPool_t pool = Import(rt, fd);
  close(fd);
  ASSERT_NE(pool, nullptr);
  void* p = nullptr;
  SP_ASSERT_OK(spMemPoolImportPointer(&p, pool, &d));
  EXPECT_TRUE(AllBytes(p, 1000, 0x6b));
  SP_ASSERT_OK(spFree(rt, p));
  SP_EXPECT_OK(spRuntimeDestroy(rt));
}

}  // namespace
