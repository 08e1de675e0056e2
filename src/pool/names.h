// The names the library's enums go by outside C++: in the tools' flags and
// reports, the Python package, timelines. One table per enum, read both ways,
// so that a name a parser accepts is the name printed back.
//
// A name is its enumerator in snake_case: AllocationType::kPinnedHost is
// "pinned_host", ReuseRule::kSameStream "same_stream". Parsing is exact
// (case and all), and also takes a few aliases: the short spellings the
// replay tool has always accepted ("pinned", "hugepage", "address").
#ifndef STREAMPOOL_SRC_POOL_NAMES_H_
#define STREAMPOOL_SRC_POOL_NAMES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "streampool/checker.h"
#include "streampool/executor.h"
#include "streampool/graph.h"
#include "streampool/pool_props.h"
#include "streampool/reuse_rule.h"
#include "streampool/runtime_config.h"
#include "streampool/snapshot.h"

namespace streampool::internal {

// One row of a table.
template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

// The name of `value`; "unknown" for a value outside its enum.
const char* EnumName(AllocationType value);
const char* EnumName(PagePolicy value);
const char* EnumName(PoolGrowth value);
const char* EnumName(ReuseRule value);
const char* EnumName(Backing value);
const char* EnumName(ExecutorKind value);
const char* EnumName(CheckKind value);
const char* EnumName(OpKind value);
// The public snapshot state (internal::BlockState is the pool's own).
const char* EnumName(streampool::BlockState value);
const char* EnumName(CaptureMode value);
const char* EnumName(CaptureStatus value);
const char* EnumName(GraphNodeType value);

// The functions below are defined for the enums EnumName takes.

// Every value with its name, in the enum's order; aliases are not listed.
template <typename E>
absl::Span<const NamedValue<E>> EnumNames();

// The value a name or an alias stands for; nullopt for any other string.
template <typename E>
std::optional<E> ParseEnumName(absl::string_view name);

// As ParseEnumName, but an unknown name is an InvalidArgument error that
// says what was expected: "unknown growth 'sideways' (one of 'default',
// 'chunked', 'expandable')".
template <typename E>
absl::StatusOr<E> ParseEnumNameOrError(absl::string_view name);

// What the enum's values are, for messages: "growth", "pool type".
template <typename E>
const char* EnumWhat();

// The names, quoted and comma-separated: "'default', 'chunked', 'expandable'".
template <typename E>
std::string EnumNameList();

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_NAMES_H_
