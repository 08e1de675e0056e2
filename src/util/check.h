// Internal invariant checks.
//
// Debian's Abseil (20220623) predates absl/log/check.h, so the three tiers the
// style guide asks for are spelled on top of ABSL_RAW_CHECK, which is
// async-signal-safe and allocation-free:
//   SP_CHECK            cheap, always on;
//   SP_DCHECK           internal consistency, debug builds only;
//   SP_EXPENSIVE_CHECK  O(n) walks, only with STREAMPOOL_EXPENSIVE_CHECKS.
// Bad input from callers is never checked this way: it is an error value.
#ifndef STREAMPOOL_SRC_UTIL_CHECK_H_
#define STREAMPOOL_SRC_UTIL_CHECK_H_

#include "absl/base/internal/raw_logging.h"

#define SP_CHECK(cond) ABSL_RAW_CHECK(cond, #cond)

#ifndef NDEBUG
#define SP_DCHECK(cond) ABSL_RAW_CHECK(cond, #cond)
#else
#define SP_DCHECK(cond) \
  do {                  \
  } while (false && (cond))
#endif

#if defined(STREAMPOOL_EXPENSIVE_CHECKS) && STREAMPOOL_EXPENSIVE_CHECKS
#define SP_EXPENSIVE_CHECKS_ENABLED 1
#define SP_EXPENSIVE_CHECK(cond) ABSL_RAW_CHECK(cond, #cond)
#else
#define SP_EXPENSIVE_CHECKS_ENABLED 0
#define SP_EXPENSIVE_CHECK(cond) \
  do {                           \
  } while (false && (cond))
#endif

#endif  // STREAMPOOL_SRC_UTIL_CHECK_H_
