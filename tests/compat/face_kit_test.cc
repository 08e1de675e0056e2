// The face kit (src/compat/face.h) with a face of the test's own, whose
// codes are distinct numbers, so that each answer shows which rule gave it:
// the error tables, the guarded call and the last error, default streams,
// the sticky fault and the launch's ownership of the kernel's context.
//
// The face's implicit runtime is process-wide: every test resets it when it
// ends, so that the tests also pass when the binary runs them all in one
// process.
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "gtest/gtest.h"
#include "src/compat/face.h"
#include "streampool/streampool.h"

namespace streampool::internal::compat {
namespace {

enum TestError : int {
  kOk = 0,
  kBadValue = 1,
  kNoMemory = 2,
  kBadDevice = 3,
  kNoPeer = 4,
  kBadHandle = 5,
  kPending = 6,
  kUnsupported = 7,
  kSpUnknown = 8,
  kInternalError = 10,
  kHostOutOfMemory = 11,
  kGone = 12,
  kNoRuntime = 13,
  kFaulted = 14,
  kBadArgument = 15,
  kBadShape = 16,
  kAlreadyRegistered = 17,
  kNotRegistered = 18,
};

struct TestStreamTag;
using TestStream = TestStreamTag*;
const auto kLegacy = reinterpret_cast<TestStream>(uintptr_t{1});
const auto kPerThread = reinterpret_cast<TestStream>(uintptr_t{2});

struct TestFace {
  using Error = TestError;
  using Stream = TestStream;
  static constexpr char kEnvPrefix[] = "STREAMPOOL_KIT_TEST_";
  static constexpr Error kSuccess = kOk;
  static constexpr SpErrorCode<Error> kSpErrors[] = {
      {spSuccess, kOk},
      {spErrorInvalidValue, kBadValue},
      {spErrorMemoryAllocation, kNoMemory},
      {spErrorInvalidDevice, kBadDevice},
      {spErrorPeerAccessUnsupported, kNoPeer},
      {spErrorInvalidResourceHandle, kBadHandle},
      {spErrorNotReady, kPending},
      {spErrorNotSupported, kUnsupported},
      {spErrorUnknown, kSpUnknown},
      {spErrorHostMemoryAlreadyRegistered, kAlreadyRegistered},
      {spErrorHostMemoryNotRegistered, kNotRegistered},
  };
  static constexpr Error kInternal = kInternalError;
  static constexpr Error kOutOfHostMemory = kHostOutOfMemory;
  static constexpr Error kNotErrors[] = {kOk, kPending};
  static constexpr Error kUnloading = kGone;
  static constexpr Error kInitFailed = kNoRuntime;
  static constexpr Error kKernelFault = kFaulted;
  static constexpr Error kInvalidDevice = kBadDevice;
  static constexpr Error kInvalidArgument = kBadArgument;
  static DefaultStream Classify(TestStream s) {
    if (s == nullptr || s == kLegacy) return DefaultStream::kLegacy;
    if (s == kPerThread) return DefaultStream::kPerThread;
    return DefaultStream::kNone;
  }
};
static_assert(FaceTraits<TestFace>);

constexpr GuardedCall<TestFace> kApi;
constexpr RuntimeCall<TestFace> kWithRuntime;
constexpr SpErrorMap<TestFace> kFromSp;
constexpr StatusMap<TestFace> kFromStatus;

class FaceKitTest : public ::testing::Test {
 protected:
  void TearDown() override {
    FaceContext<TestFace>().Reset();
    LastError<TestFace>(/*clear=*/true);
  }
};

TEST_F(FaceKitTest, SpErrorsGoThroughTheFacesTable) {
  for (const SpErrorCode<TestError>& row : TestFace::kSpErrors) {
    EXPECT_EQ(kFromSp(row.sp), row.face) << row.sp;
  }
  // A value outside spError_t is no failure the table knows.
  EXPECT_EQ(kFromSp(static_cast<spError_t>(12345)), kInternalError);
}

TEST_F(FaceKitTest, StatusesReadAsTheCApiReadsThem) {
  EXPECT_EQ(kFromStatus(absl::OkStatus()), kOk);
  EXPECT_EQ(kFromStatus(absl::InvalidArgumentError("")), kBadValue);
  EXPECT_EQ(kFromStatus(absl::ResourceExhaustedError("")), kNoMemory);
  EXPECT_EQ(kFromStatus(absl::OutOfRangeError("")), kBadDevice);
  EXPECT_EQ(kFromStatus(absl::PermissionDeniedError("")), kNoPeer);
  EXPECT_EQ(kFromStatus(absl::NotFoundError("")), kBadHandle);
  EXPECT_EQ(kFromStatus(absl::UnavailableError("")), kPending);
  EXPECT_EQ(kFromStatus(absl::UnimplementedError("")), kUnsupported);
  EXPECT_EQ(kFromStatus(absl::InternalError("")), kSpUnknown);
  EXPECT_EQ(kFromStatus(absl::AlreadyExistsError("")), kAlreadyRegistered);
  // A payload names the C error where the code alone cannot.
  absl::Status not_registered = absl::NotFoundError("");
  not_registered.SetPayload(streampool::kCErrorPayload,
                            absl::Cord(std::to_string(spErrorHostMemoryNotRegistered)));
  EXPECT_EQ(kFromStatus(not_registered), kNotRegistered);
  // Codes streampool::ToCError does not list are spErrorInvalidValue, in
  // the C API and so in every face.
  for (const absl::Status& unlisted :
       {absl::FailedPreconditionError(""), absl::AbortedError(""), absl::CancelledError(""),
        absl::DataLossError(""), absl::DeadlineExceededError(""), absl::UnauthenticatedError(""),
        absl::UnknownError("")}) {
    EXPECT_EQ(kFromStatus(unlisted), kFromSp(ToCError(unlisted))) << unlisted;
    EXPECT_EQ(kFromStatus(unlisted), kBadValue) << unlisted;
  }
}

TEST_F(FaceKitTest, GuardedCallTurnsExceptionsIntoTheFacesCodes) {
  EXPECT_EQ(kApi([]() -> TestError { throw std::bad_alloc(); }), kHostOutOfMemory);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kHostOutOfMemory);
  EXPECT_EQ(kApi([]() -> TestError { throw std::runtime_error("x"); }), kInternalError);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kInternalError);
  EXPECT_EQ(kApi([]() -> TestError { throw 7; }), kInternalError);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kInternalError);
}

TEST_F(FaceKitTest, LastErrorSkipsWhatTheFaceDoesNotCountAndPeekKeepsIt) {
  EXPECT_EQ(kApi([] { return kBadValue; }), kBadValue);
  EXPECT_EQ(kApi([] { return kOk; }), kOk);
  EXPECT_EQ(kApi([] { return kPending; }), kPending);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/false), kBadValue);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kBadValue);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kOk);
}

TEST_F(FaceKitTest, CallResolvesTheFacesDefaultStreams) {
  spStream_t legacy = nullptr;
  spStream_t per_thread = nullptr;
  spStream_t again = nullptr;
  spStream_t plain = nullptr;
  ASSERT_EQ(GetStream<TestFace>(&legacy, kLegacy), kOk);
  ASSERT_EQ(GetStream<TestFace>(&per_thread, kPerThread), kOk);
  ASSERT_EQ(GetStream<TestFace>(&again, kPerThread), kOk);
  spRuntime_t rt = nullptr;
  ASSERT_EQ(GetRuntime<TestFace>(&rt), kOk);
  spStream_t want_legacy = nullptr;
  ASSERT_EQ(spStreamGetLegacy(&want_legacy, rt, 0), spSuccess);
  EXPECT_EQ(legacy, want_legacy);
  EXPECT_NE(per_thread, legacy);
  EXPECT_EQ(again, per_thread);
  // Any other handle is an spStream_t as it stands.
  const auto other = reinterpret_cast<TestStream>(uintptr_t{0x7777});
  ASSERT_EQ(GetStream<TestFace>(&plain, other), kOk);
  EXPECT_EQ(plain, reinterpret_cast<spStream_t>(other));
  EXPECT_EQ(GetStream<TestFace>(nullptr, kLegacy), kBadArgument);
  EXPECT_EQ(GetRuntime<TestFace>(nullptr), kBadArgument);
}

TEST_F(FaceKitTest, DeviceChecksUseTheFacesCode) {
  EXPECT_EQ(kWithRuntime([](Call<TestFace>& call) { return call.CheckDevice(1); }), kBadDevice);
  EXPECT_EQ(kWithRuntime([](Call<TestFace>& call) { return call.CheckDevice(-1); }), kBadDevice);
  EXPECT_EQ(kWithRuntime([](Call<TestFace>& call) { return call.CheckDevice(0); }), kOk);
}

// A kernel that counts its threads and its context's destruction.
struct Counts {
  int runs = 0;
  int destroyed = 0;
  bool fail = false;
};

using CountRun = void (*)(void* ctx);

void RunCounted(CountRun run, void* ctx, const KernelCoords&) { run(ctx); }

void Count(void* ctx) {
  auto* counts = static_cast<Counts*>(ctx);
  ++counts->runs;
  if (counts->fail) throw std::runtime_error("kernel failed");
}

void Destroyed(void* ctx) { ++static_cast<Counts*>(ctx)->destroyed; }

TestError Launch(Counts* counts, Dim3 grid, TestError shape, CountRun run = &Count,
                 std::vector<spAccess> accesses = {}, bool null_accesses = false) {
  return LaunchKernel(KernelLaunch<TestFace>{kLegacy, grid, Dim3{}, shape,
                                             null_accesses ? nullptr : accesses.data(),
                                             null_accesses ? 1 : accesses.size()},
                      FaceKernel<CountRun>{run, counts, &Destroyed, &RunCounted});
}

TestError Synchronize() {
  return kWithRuntime(
      [](Call<TestFace>& call) { return kFromSp(spDeviceSynchronize(call.c(), 0)); });
}

TEST_F(FaceKitTest, LaunchRunsTheGridAndDestroysTheContextOnce) {
  Counts counts;
  ASSERT_EQ(Launch(&counts, Dim3{2, 3, 1}, kOk), kOk);
  ASSERT_EQ(Synchronize(), kOk);
  EXPECT_EQ(counts.runs, 6);
  EXPECT_EQ(counts.destroyed, 1);
}

TEST_F(FaceKitTest, AFailedLaunchDestroysTheContextAtOnce) {
  Counts counts;
  // The arguments are checked before the extents.
  EXPECT_EQ(Launch(&counts, Dim3{}, kBadShape, /*run=*/nullptr), kBadArgument);
  EXPECT_EQ(Launch(&counts, Dim3{}, kBadShape, &Count, {}, /*null_accesses=*/true), kBadArgument);
  EXPECT_EQ(Launch(&counts, Dim3{}, kBadShape), kBadShape);
  EXPECT_EQ(counts.runs, 0);
  EXPECT_EQ(counts.destroyed, 3);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kBadShape);
}

TEST_F(FaceKitTest, AFailedKernelIsStickyUntilReset) {
  Counts counts;
  counts.fail = true;
  ASSERT_EQ(Launch(&counts, Dim3{}, kOk), kOk);
  EXPECT_EQ(Synchronize(), kFaulted);
  EXPECT_EQ(kWithRuntime([](Call<TestFace>&) { return kOk; }), kFaulted);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kFaulted);
  EXPECT_EQ(LastError<TestFace>(/*clear=*/true), kFaulted);
  EXPECT_EQ(counts.destroyed, 1);
  FaceContext<TestFace>().Reset();
  EXPECT_EQ(kWithRuntime([](Call<TestFace>&) { return kOk; }), kOk);
}

TEST_F(FaceKitTest, CallsAfterExitSayTheRuntimeIsGone) {
  EXPECT_EXIT(
      {
        // What the exit handler does, once the face has made its runtime.
        if (kWithRuntime([](Call<TestFace>&) { return kOk; }) != kOk) std::exit(2);
        Context::ShutdownAll();
        std::exit(kWithRuntime([](Call<TestFace>&) { return kOk; }) == kGone ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace streampool::internal::compat
