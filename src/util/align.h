// Size arithmetic shared by every layer. All rounding is overflow-checked:
// callers hand us sizes up to SIZE_MAX and must get an error, not a wrap.
#ifndef STREAMPOOL_SRC_UTIL_ALIGN_H_
#define STREAMPOOL_SRC_UTIL_ALIGN_H_

#include <cstdint>
#include <optional>

namespace streampool::internal {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// The chunk granularity of every pool: growth maps multiples of it, so that
// reserved bytes follow demand in steps a device MMU could map.
inline constexpr uint64_t kChunkGranularity = 2 * kMiB;

// ALIGN_UP(len, k) = ((len - 1) / k + 1) * k for len > 0; nullopt on overflow.
// k need not be a power of two (the DVPP rule is not expressed in one).
constexpr std::optional<uint64_t> CheckedAlignUp(uint64_t len, uint64_t k) {
  if (len == 0) return 0;
  const uint64_t units = (len - 1) / k + 1;
  if (units > UINT64_MAX / k) return std::nullopt;
  return units * k;
}

constexpr std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  if (a > UINT64_MAX - b) return std::nullopt;
  return a + b;
}

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_ALIGN_H_
