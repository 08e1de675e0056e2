/// \file
/// The rule that served an allocation (docs/design.md "Serving MallocAsync"):
/// what AllocInfo reports and PoolStats counts.
#ifndef STREAMPOOL_REUSE_RULE_H_
#define STREAMPOOL_REUSE_RULE_H_

#include "streampool/export.h"

namespace streampool {

/// How one successful non-zero allocation was served (docs/design.md "Serving
/// MallocAsync"); each counts exactly one.
enum class ReuseRule {
  kFresh,               ///< bytes never handed out before (growth is upstream_maps)
  kSameStream,          ///< the stream's own pending free
  kEventDependency,     ///< rule 2: a free ordered before by events or the legacy stream
  kOpportunistic,       ///< rule 3: a free observed complete
  kAfterSync,           ///< a READY block holding bytes handed out before
  kInternalDependency,  ///< rule 5: a wait inserted on the free
};

/// The rule's name, its enumerator in snake_case as the tools, reports and
/// the Python package print it: "same_stream", "event_dependency";
/// "unknown" for a value outside the enum.
STREAMPOOL_EXPORT const char* ReuseRuleName(ReuseRule rule);

}  // namespace streampool

#endif  // STREAMPOOL_REUSE_RULE_H_
