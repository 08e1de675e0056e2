// Many streams through the C API: 16 000 blocking streams on one device, each
// with a little work, ordered with one another through the legacy stream.
// The ordering core's clocks must grow with the streams, not with their
// square (docs/design.md, "Clocks scale with interaction"). Checked with the clock
// footprint the introspection shows, never with time or resident memory.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "src/ordering/vector_clock.h"
#include "src/runtime/runtime_impl.h"
#include "streampool/streampool.h"

namespace streampool {
namespace {

// Sanitized builds run the same scenario smaller: every clock operation is
// many times slower there, and the point is the shape, not the size.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kStreams = 4000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr int kStreams = 4000;
#else
constexpr int kStreams = 16000;
#endif
#else
constexpr int kStreams = 16000;
#endif

TEST(ScaleTest, ManyBlockingStreamsKeepClocksLinear) {
  spRuntime_t rt = nullptr;
  ASSERT_EQ(spRuntimeCreate(&rt, nullptr), spSuccess);
  spStream_t legacy = nullptr;
  ASSERT_EQ(spStreamGetLegacy(&legacy, rt, 0), spSuccess);
  // The pool's used-bytes watermark first, so that the small allocations
  // below stay under it: each new high settles every stream's front cache,
  // a cost of the pool's, not of the clocks this test is about.
  void* warm = nullptr;
  ASSERT_EQ(spMallocAsync(&warm, 1 << 20, legacy), spSuccess);
  ASSERT_EQ(spFreeAsync(warm, legacy), spSuccess);
  ASSERT_EQ(spStreamSynchronize(legacy), spSuccess);

  std::vector<spStream_t> streams(kStreams);
  for (spStream_t& s : streams) {
    ASSERT_EQ(spStreamCreate(&s, rt, 0, spStreamDefault), spSuccess);
    ASSERT_EQ(spLaunchKernel(s, 1000, nullptr, 0), spSuccess);
  }
  // After every stream's first kernel; their next ops come after it.
  ASSERT_EQ(spLaunchKernel(legacy, 1000, nullptr, 0), spSuccess);
  for (spStream_t s : streams) {
    void* p = nullptr;
    ASSERT_EQ(spMallocAsync(&p, 256, s), spSuccess);
    ASSERT_EQ(spLaunchKernel(s, 1000, nullptr, 0), spSuccess);
    ASSERT_EQ(spFreeAsync(p, s), spSuccess);
  }
  void* q = nullptr;
  ASSERT_EQ(spMallocAsync(&q, 256, legacy), spSuccess);
  ASSERT_EQ(spLaunchKernel(legacy, 1000, nullptr, 0), spSuccess);
  ASSERT_EQ(spFreeAsync(q, legacy), spSuccess);
  ASSERT_EQ(spDeviceSynchronize(rt, 0), spSuccess);

  internal::RuntimeImpl* impl = internal::RuntimeImpl::FindFast(
      internal::Process::Default(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rt)));
  ASSERT_NE(impl, nullptr);
  const internal::RuntimeImpl::Introspection in = impl->Introspect();
  ASSERT_GT(in.clocks.size(), static_cast<size_t>(kStreams));

  // Each blocking stream is ordered after every other one's first kernel
  // (through the legacy stream), so read as dense vectors its clock spans
  // them all...
  size_t spanning = 0;
  for (const internal::VectorClock& c : in.clocks) spanning += c.width() >= kStreams ? 1 : 0;
  EXPECT_GE(spanning, static_cast<size_t>(kStreams));
  // ...but the clocks hold a few entries per stream: dense ones held over
  // kStreams² (256 million at 16 000 streams).
  internal::ClockFootprint footprint;
  for (const internal::VectorClock& c : in.clocks) footprint.Add(c);
  footprint.Add(in.done);
  EXPECT_LE(footprint.entries(), size_t{8} * in.clocks.size());

  // The device synchronize proved everything enqueued complete.
  for (size_t s = 0; s < in.clocks.size(); ++s) {
    EXPECT_EQ(in.done.Get(static_cast<StreamIndex>(s)), in.positions[s]) << "stream " << s;
  }

  // The runtime takes its streams with it.
  ASSERT_EQ(spRuntimeDestroy(rt), spSuccess);
}

}  // namespace
}  // namespace streampool
