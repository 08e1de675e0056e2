// A C++ program that uses an installed streampool through the C++ API: the
// Runtime, the RAII owners and a std::pmr container on pool memory. It proves
// the installed C++ headers compile and that their symbols are exported (with
// a shared build: that STREAMPOOL_EXPORT reached every class used here).
// Exit status 0 on success.
#include <cstdio>
#include <memory_resource>
#include <numeric>
#include <vector>

#include "streampool/pool_resource.h"
#include "streampool/raii.h"
#include "streampool/runtime.h"

namespace {

int Fail(const char* what, const absl::Status& st) {
  std::fprintf(stderr, "consumer_cpp: %s: %s\n", what, st.ToString().c_str());
  return 1;
}

}  // namespace

int main() {
  absl::StatusOr<std::unique_ptr<streampool::Runtime>> rt = streampool::Runtime::Create();
  if (!rt.ok()) return Fail("Runtime::Create", rt.status());
  absl::StatusOr<streampool::Stream> stream = streampool::Stream::Create(**rt);
  if (!stream.ok()) return Fail("Stream::Create", stream.status());
  absl::StatusOr<streampool::PoolId> pool = (*rt)->DefaultPool(0);
  if (!pool.ok()) return Fail("DefaultPool", pool.status());

  uint64_t sum = 0;
  {
    streampool::PoolResource mr(**rt, *pool, stream->id(), 256);
    std::pmr::vector<uint64_t> v(&mr);
    for (uint64_t i = 1; i <= 10000; ++i) v.push_back(i);
    sum = std::accumulate(v.begin(), v.end(), uint64_t{0});
  }  // every buffer freed on the stream
  if (sum != 10000ull * 10001 / 2) {
    std::fprintf(stderr, "consumer_cpp: wrong sum %llu\n", static_cast<unsigned long long>(sum));
    return 1;
  }
  if (absl::Status st = stream->Synchronize(); !st.ok()) return Fail("Synchronize", st);

  absl::StatusOr<streampool::PoolStats> st = (*rt)->GetPoolStats(*pool);
  if (!st.ok()) return Fail("GetPoolStats", st.status());
  std::printf(
      "consumer_cpp: %llu allocations (%llu same-stream reuses), used %llu, reserved %llu\n",
      static_cast<unsigned long long>(st->alloc_count),
      static_cast<unsigned long long>(st->reuse_same_stream),
      static_cast<unsigned long long>(st->used_bytes),
      static_cast<unsigned long long>(st->reserved_bytes));
  if (st->alloc_count == 0 || st->alloc_count != st->free_count || st->used_bytes != 0 ||
      st->reserved_bytes != 0) {
    std::fprintf(stderr, "consumer_cpp: unexpected pool statistics\n");
    return 1;
  }
  std::printf("consumer_cpp: %s OK\n",
              streampool::ReuseRuleName(streampool::ReuseRule::kSameStream));
  return 0;
}
