// libFuzzer target: arbitrary bytes drive the C API as a little instruction
// stream — including destroyed and forged handles, double and interior frees,
// absurd sizes — and after every instruction every pool's invariants must
// hold. Crashes and sanitizer reports are the fuzzer's findings.
//
// Build: cmake -DSTREAMPOOL_BUILD_FUZZERS=ON with clang; run: ./run.sh fuzz.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "streampool/runtime.h"
#include "streampool/streampool.h"

namespace {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ >= end_; }
  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | Byte();
    return v;
  }
  // Mostly small sizes, sometimes absurd ones.
  uint64_t Size() {
    switch (Byte() % 8) {
      case 0:
        return 0;
      case 1:
        return U64();  // anything, SIZE_MAX included
      case 2:
        return UINT64_MAX - (Byte() % 512);
      case 3:
        return uint64_t{1} << (Byte() % 48);
      default:
        return (uint64_t{Byte()} << 8 | Byte()) * (1 + Byte() % 64);
    }
  }
  template <typename T>
  T Pick(const std::vector<T>& v) {
    return v.empty() ? T{} : v[Byte() % v.size()];
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

struct World {
  spRuntime_t rt[2] = {};
  std::unique_ptr<streampool::Runtime> view[2];
  std::vector<spStream_t> streams;  // live, destroyed and forged alike
  std::vector<spEvent_t> events;
  std::vector<spMemPool_t> pools;
  std::vector<void*> ptrs;  // live, freed, interior and foreign
  char host[4096];
};

void CheckAllPools(World& w) {
  for (spMemPool_t pool : w.pools) {
    for (int r = 0; r < 2; ++r) {
      absl::Status s = w.view[r]->CheckPoolInvariants(
          streampool::PoolId{static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pool))});
      // Handles of the other runtime or destroyed pools are NotFound, a NULL
      // handle (a creation that failed) InvalidArgument; any other error is a
      // broken invariant.
      if (s.ok() || s.code() == absl::StatusCode::kNotFound) continue;
      if (pool == nullptr && s.code() == absl::StatusCode::kInvalidArgument) continue;
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  World w;
  for (int r = 0; r < 2; ++r) {
    spRuntimeConfig cfg;
    spRuntimeConfigInit(&cfg);
    cfg.deviceCount = 2;
    cfg.deviceCapacity = uint64_t{64} << 20;
    cfg.backing = r == 0 ? spBackingHost : spBackingAddressOnly;
    if (spRuntimeCreate(&w.rt[r], &cfg) != spSuccess) std::abort();
    spCheckerEnable(w.rt[r], 1);
    w.view[r] = *streampool::Runtime::FromC(w.rt[r]);
    spMemPool_t pool;
    spDeviceGetDefaultMemPool(&pool, w.rt[r], 0);
    w.pools.push_back(pool);
  }
  w.ptrs.push_back(w.host);
  int steps = 0;
  while (!in.done() && steps++ < 2000) {
    spRuntime_t rt = w.rt[in.Byte() % 2];
    const uint8_t op = in.Byte();
    switch (op % 24) {
      case 0: {
        spStream_t s;
        if (spStreamCreate(&s, rt, in.Byte() % 3 - 0, in.Byte() % 3) == spSuccess) {
          w.streams.push_back(s);
        }
        break;
      }
      case 1:
        spStreamDestroy(in.Pick(w.streams));
        break;
      case 2: {
        spStream_t s;
        if (spStreamGetLegacy(&s, rt, in.Byte() % 3) == spSuccess) w.streams.push_back(s);
        break;
      }
      case 3: {
        spEvent_t e;
        if (spEventCreate(&e, rt) == spSuccess) w.events.push_back(e);
        break;
      }
      case 4:
        spEventDestroy(in.Pick(w.events));
        break;
      case 5:
        spEventRecord(in.Pick(w.events), in.Pick(w.streams));
        break;
      case 6:
        spStreamWaitEvent(in.Pick(w.streams), in.Pick(w.events));
        break;
      case 7: {
        void* p = nullptr;
        if (spMallocAsync(&p, in.Size(), in.Pick(w.streams)) == spSuccess && p) w.ptrs.push_back(p);
        break;
      }
      case 8: {
        void* p = nullptr;
        if (spMallocFromPoolAsync(&p, in.Size(), in.Pick(w.pools), in.Pick(w.streams)) ==
                spSuccess &&
            p) {
          w.ptrs.push_back(p);
          w.ptrs.push_back(static_cast<char*>(p) + 1);  // interior pointer
        }
        break;
      }
      case 9:
        spFreeAsync(in.Pick(w.ptrs), in.Pick(w.streams));
        break;
      case 10:
        spFree(rt, in.Pick(w.ptrs));
        break;
      case 11: {
        void* p = nullptr;
        if (spMalloc(&p, in.Size() % (uint64_t{8} << 20), rt, in.Byte() % 3) == spSuccess && p) {
          w.ptrs.push_back(p);
        }
        break;
      }
      case 12:
        spStreamSynchronize(in.Pick(w.streams));
        break;
      case 13:
        spStreamQuery(in.Pick(w.streams));
        break;
      case 14:
        spEventSynchronize(in.Pick(w.events));
        spEventQuery(in.Pick(w.events));
        break;
      case 15:
        spDeviceSynchronize(rt, in.Byte() % 3);
        break;
      case 16:
        spHostAdvance(rt, in.Byte() * 100);
        break;
      case 17: {
        spAccess acc{in.Pick(w.ptrs), in.Byte() * 16u, in.Byte() & 1};
        spLaunchKernel(in.Pick(w.streams), in.Byte() * 10, &acc, in.Byte() % 2);
        break;
      }
      case 18: {
        // Copies and fills only into memory that is really writable: a live
        // allocation of the Host runtime (checked) or the fuzzer's buffer.
        void* dst = in.Pick(w.ptrs);
        spPointerAttributes a;
        const size_t n = in.Byte() % 64;
        const bool ours = spPointerGetAttributes(&a, dst) == spSuccess &&
                          static_cast<char*>(dst) + n <= static_cast<char*>(a.base) + a.size;
        if (ours || dst == w.host) spMemsetAsync(dst, in.Byte(), n, in.Pick(w.streams));
        break;
      }
      case 19: {
        spMemPool_t pool;
        spMemPoolProps props{};
        props.allocType = static_cast<spMemAllocationType>(in.Byte() % 6);
        props.device = in.Byte() % 3;
        props.maxSize = in.Size() % (uint64_t{32} << 20);
        props.pagePolicy = static_cast<spPagePolicy>(in.Byte() % 4);
        props.handleTypes = in.Byte() % 5 == 0;
        if (spMemPoolCreate(&pool, rt, &props) == spSuccess) w.pools.push_back(pool);
        break;
      }
      case 20:
        spMemPoolDestroy(in.Pick(w.pools));
        break;
      case 21: {
        uint64_t v64 = in.Byte() % 3 == 0 ? UINT64_MAX : in.Size();
        int v32 = static_cast<int>(in.Byte()) - 1;
        // Every value up to CUDA's last, an unknown one, and streampool's own
        // (0x1000 up).
        const uint8_t pick = in.Byte() % 19;
        const auto attr = static_cast<spMemPoolAttr>(pick < 16 ? pick : 0x1000 + (pick - 16));
        spMemPool_t pool = in.Pick(w.pools);
        const bool u64 = (attr >= 4 && attr <= 8) || attr == 13;
        void* value = u64 ? static_cast<void*>(&v64) : &v32;
        if (in.Byte() & 1) {
          spMemPoolSetAttribute(pool, attr, value);
        } else {
          spMemPoolGetAttribute(pool, attr, value);
        }
        break;
      }
      case 22:
        spMemPoolTrimTo(in.Pick(w.pools), in.Size());
        break;
      case 23: {
        // Forged handles: arbitrary numbers where handles are expected.
        const uint64_t forged = in.U64();
        w.streams.push_back(reinterpret_cast<spStream_t>(static_cast<uintptr_t>(forged)));
        w.events.push_back(reinterpret_cast<spEvent_t>(static_cast<uintptr_t>(forged ^ 1)));
        w.pools.push_back(reinterpret_cast<spMemPool_t>(static_cast<uintptr_t>(forged ^ 2)));
        spMemPoolStats st;
        spMemPoolGetStats(in.Pick(w.pools), &st);
        break;
      }
    }
    CheckAllPools(w);
  }
  w.view[0].reset();
  w.view[1].reset();
  spRuntimeDestroy(w.rt[0]);
  spRuntimeDestroy(w.rt[1]);
  return 0;
}
