// Time arithmetic that cannot wrap. A virtual-time sum that wrapped would put
// an op's end before its start, and a wrapped end reads as "already complete":
// the pool would then reuse bytes the op still touches. Sums therefore stop at
// kTimeNever, the largest representable time, which stands for "not within
// representable time".
#ifndef STREAMPOOL_SRC_UTIL_SAT_TIME_H_
#define STREAMPOOL_SRC_UTIL_SAT_TIME_H_

#include <chrono>
#include <cstdint>
#include <limits>

namespace streampool::internal {

inline constexpr uint64_t kTimeNever = std::numeric_limits<uint64_t>::max();
// The latest host time reachable by spending time (HostAdvance, the per-call
// cost). Reaching kTimeNever would complete every op whose end saturated; only
// waiting for such an op may take the host there.
inline constexpr uint64_t kLatestAdvance = kTimeNever - 1;

// Whether the host at `now` may spend `ns` without passing kLatestAdvance.
constexpr bool AdvanceFits(uint64_t now, uint64_t ns) {
  return ns == 0 || (now <= kLatestAdvance && ns <= kLatestAdvance - now);
}

constexpr uint64_t SatAddNs(uint64_t a, uint64_t b) {
  return a > kTimeNever - b ? kTimeNever : a + b;
}

// floor(a * b / c), or kTimeNever when that does not fit; c > 0. Exact
// whenever the result fits, even where a * b alone does not (a copy of 2^60
// bytes at 1000 bytes/us lasts exactly 2^60 ns).
constexpr uint64_t SatMulDiv(uint64_t a, uint64_t b, uint64_t c) {
  if (b == 0 || a <= kTimeNever / b) return a * b / c;
  // a = q c + r with r < c, so a b / c = q b + r b / c.
  const uint64_t q = a / c;
  const uint64_t r = a % c;
  if (q != 0 && b > kTimeNever / q) return kTimeNever;
  // floor(r b / c) by binary long multiplication, keeping r k = quo c + rem
  // with rem < c for the prefix k of b's bits: every step stays below c, so
  // nothing overflows, and quo < b since r < c.
  uint64_t quo = 0;
  uint64_t rem = 0;
  for (int bit = 63; bit >= 0; --bit) {
    quo *= 2;
    if (rem >= c - rem) {
      ++quo;
      rem -= c - rem;
    } else {
      rem *= 2;
    }
    if ((b >> bit) & 1) {
      if (rem >= c - r) {
        ++quo;
        rem -= c - r;
      } else {
        rem += r;
      }
    }
  }
  return SatAddNs(q * b, quo);
}

// A duration for the standard library's sleeps, whose count is signed: a
// duration of 2^63 ns or more would turn negative there and not sleep at all.
constexpr std::chrono::nanoseconds ToChronoNs(uint64_t ns) {
  constexpr auto kMax = static_cast<uint64_t>(std::chrono::nanoseconds::max().count());
  return std::chrono::nanoseconds(
      static_cast<std::chrono::nanoseconds::rep>(ns > kMax ? kMax : ns));
}

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_UTIL_SAT_TIME_H_
