#include "src/pool/names.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace streampool::internal {
namespace {

template <typename E>
struct Table {
  const char* what;
  absl::Span<const NamedValue<E>> names;
  absl::Span<const NamedValue<E>> aliases;
};

constexpr NamedValue<AllocationType> kAllocationTypes[] = {
    {AllocationType::kDevice, "device"},
    {AllocationType::kPinnedHost, "pinned_host"},
    {AllocationType::kHugePage, "huge_page"},
    {AllocationType::kDvpp, "dvpp"},
};
constexpr NamedValue<AllocationType> kAllocationTypeAliases[] = {
    {AllocationType::kPinnedHost, "pinned"},
    {AllocationType::kHugePage, "hugepage"},
};

constexpr NamedValue<PagePolicy> kPagePolicies[] = {
    {PagePolicy::kHugeFirst, "huge_first"},
    {PagePolicy::kHugeOnly, "huge_only"},
    {PagePolicy::kNormalOnly, "normal_only"},
};

constexpr NamedValue<PoolGrowth> kGrowths[] = {
    {PoolGrowth::kDefault, "default"},
    {PoolGrowth::kChunked, "chunked"},
    {PoolGrowth::kExpandable, "expandable"},
};

constexpr NamedValue<ReuseRule> kReuseRules[] = {
    {ReuseRule::kFresh, "fresh"},
    {ReuseRule::kSameStream, "same_stream"},
    {ReuseRule::kEventDependency, "event_dependency"},
    {ReuseRule::kOpportunistic, "opportunistic"},
    {ReuseRule::kAfterSync, "after_sync"},
    {ReuseRule::kInternalDependency, "internal_dependency"},
};

constexpr NamedValue<Backing> kBackings[] = {
    {Backing::kHost, "host"},
    {Backing::kAddressOnly, "address_only"},
};
constexpr NamedValue<Backing> kBackingAliases[] = {
    {Backing::kAddressOnly, "address"},
};

constexpr NamedValue<ExecutorKind> kExecutors[] = {
    {ExecutorKind::kSimulator, "simulator"},
    {ExecutorKind::kThreads, "threads"},
    {ExecutorKind::kCuda, "cuda"},
};

constexpr NamedValue<CheckKind> kCheckKinds[] = {
    {CheckKind::kOutOfBounds, "out_of_bounds"},
    {CheckKind::kUseAfterFree, "use_after_free"},
    {CheckKind::kUseBeforeReady, "use_before_ready"},
    {CheckKind::kOverlappingLifetimes, "overlapping_lifetimes"},
    {CheckKind::kNoAccess, "no_access"},
    {CheckKind::kFreeWhileRegistered, "free_while_registered"},
};

constexpr NamedValue<streampool::BlockState> kBlockStates[] = {
    {streampool::BlockState::kLive, "live"},
    {streampool::BlockState::kPending, "pending"},
    {streampool::BlockState::kReady, "ready"},
    {streampool::BlockState::kCached, "cached"},
    {streampool::BlockState::kAwaitingUses, "awaiting_uses"},
};

constexpr NamedValue<OpKind> kOpKinds[] = {
    {OpKind::kKernel, "kernel"},
    {OpKind::kCopy, "copy"},
    {OpKind::kFill, "fill"},
    {OpKind::kHostFunc, "host_func"},
    {OpKind::kRecord, "record"},
    {OpKind::kWait, "wait"},
    {OpKind::kInternalWait, "internal_wait"},
    {OpKind::kAllocMarker, "alloc"},
    {OpKind::kFreeMarker, "free"},
};

constexpr NamedValue<CaptureMode> kCaptureModes[] = {
    {CaptureMode::kGlobal, "global"},
    {CaptureMode::kThreadLocal, "thread_local"},
    {CaptureMode::kRelaxed, "relaxed"},
};

constexpr NamedValue<CaptureStatus> kCaptureStatuses[] = {
    {CaptureStatus::kNone, "none"},
    {CaptureStatus::kActive, "active"},
    {CaptureStatus::kInvalidated, "invalidated"},
};

constexpr NamedValue<GraphNodeType> kGraphNodeTypes[] = {
    {GraphNodeType::kKernel, "kernel"},        {GraphNodeType::kMemcpy, "memcpy"},
    {GraphNodeType::kMemset, "memset"},        {GraphNodeType::kHost, "host"},
    {GraphNodeType::kGraph, "graph"},          {GraphNodeType::kEmpty, "empty"},
    {GraphNodeType::kWaitEvent, "wait_event"}, {GraphNodeType::kEventRecord, "event_record"},
    {GraphNodeType::kMemAlloc, "mem_alloc"},   {GraphNodeType::kMemFree, "mem_free"},
};

template <typename E>
Table<E> TableOf();
template <>
Table<AllocationType> TableOf() {
  return {"pool type", kAllocationTypes, kAllocationTypeAliases};
}
template <>
Table<PagePolicy> TableOf() {
  return {"page policy", kPagePolicies, {}};
}
template <>
Table<PoolGrowth> TableOf() {
  return {"growth", kGrowths, {}};
}
template <>
Table<ReuseRule> TableOf() {
  return {"reuse rule", kReuseRules, {}};
}
template <>
Table<Backing> TableOf() {
  return {"backing", kBackings, kBackingAliases};
}
template <>
Table<ExecutorKind> TableOf() {
  return {"executor", kExecutors, {}};
}
template <>
Table<CheckKind> TableOf() {
  return {"check kind", kCheckKinds, {}};
}
template <>
Table<streampool::BlockState> TableOf() {
  return {"block state", kBlockStates, {}};
}
template <>
Table<OpKind> TableOf() {
  return {"op kind", kOpKinds, {}};
}

template <>
Table<CaptureMode> TableOf() {
  return {"capture mode", kCaptureModes, {}};
}
template <>
Table<CaptureStatus> TableOf() {
  return {"capture status", kCaptureStatuses, {}};
}
template <>
Table<GraphNodeType> TableOf() {
  return {"graph node type", kGraphNodeTypes, {}};
}

template <typename E>
const char* NameIn(E value) {
  for (const NamedValue<E>& row : TableOf<E>().names) {
    if (row.value == value) return row.name;
  }
  return "unknown";
}

}  // namespace

const char* EnumName(AllocationType value) { return NameIn(value); }
const char* EnumName(PagePolicy value) { return NameIn(value); }
const char* EnumName(PoolGrowth value) { return NameIn(value); }
const char* EnumName(ReuseRule value) { return NameIn(value); }
const char* EnumName(Backing value) { return NameIn(value); }
const char* EnumName(ExecutorKind value) { return NameIn(value); }
const char* EnumName(CheckKind value) { return NameIn(value); }
const char* EnumName(OpKind value) { return NameIn(value); }
const char* EnumName(streampool::BlockState value) { return NameIn(value); }
const char* EnumName(CaptureMode value) { return NameIn(value); }
const char* EnumName(CaptureStatus value) { return NameIn(value); }
const char* EnumName(GraphNodeType value) { return NameIn(value); }

template <typename E>
absl::Span<const NamedValue<E>> EnumNames() {
  return TableOf<E>().names;
}

template <typename E>
std::optional<E> ParseEnumName(absl::string_view name) {
  const Table<E> table = TableOf<E>();
  for (absl::Span<const NamedValue<E>> rows : {table.names, table.aliases}) {
    for (const NamedValue<E>& row : rows) {
      if (name == row.name) return row.value;
    }
  }
  return std::nullopt;
}

template <typename E>
absl::StatusOr<E> ParseEnumNameOrError(absl::string_view name) {
  if (std::optional<E> value = ParseEnumName<E>(name)) return *value;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", EnumWhat<E>(), " '", name, "' (one of ", EnumNameList<E>(), ")"));
}

template <typename E>
const char* EnumWhat() {
  return TableOf<E>().what;
}

template <typename E>
std::string EnumNameList() {
  std::string out;
  for (const NamedValue<E>& row : TableOf<E>().names) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", "'", row.name, "'");
  }
  return out;
}

#define STREAMPOOL_ENUM_NAMES(E)                                         \
  template absl::Span<const NamedValue<E>> EnumNames<E>();               \
  template std::optional<E> ParseEnumName<E>(absl::string_view);         \
  template absl::StatusOr<E> ParseEnumNameOrError<E>(absl::string_view); \
  template const char* EnumWhat<E>();                                    \
  template std::string EnumNameList<E>();

STREAMPOOL_ENUM_NAMES(AllocationType)
STREAMPOOL_ENUM_NAMES(PagePolicy)
STREAMPOOL_ENUM_NAMES(PoolGrowth)
STREAMPOOL_ENUM_NAMES(ReuseRule)
STREAMPOOL_ENUM_NAMES(Backing)
STREAMPOOL_ENUM_NAMES(ExecutorKind)
STREAMPOOL_ENUM_NAMES(CheckKind)
STREAMPOOL_ENUM_NAMES(OpKind)
STREAMPOOL_ENUM_NAMES(streampool::BlockState)
STREAMPOOL_ENUM_NAMES(CaptureMode)
STREAMPOOL_ENUM_NAMES(CaptureStatus)
STREAMPOOL_ENUM_NAMES(GraphNodeType)

#undef STREAMPOOL_ENUM_NAMES

}  // namespace streampool::internal
