// The pool attributes' table (src/pool/pool_attrs.def) as data: what each
// attribute's value is, who may write it and the name a recording gives it.
#ifndef STREAMPOOL_SRC_POOL_POOL_ATTRS_H_
#define STREAMPOOL_SRC_POOL_POOL_ATTRS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "streampool/pool_attr.h"

namespace streampool::internal {

enum class AttrKind {
  kSwitch,        // an int in C; any non-zero value turns it on
  kStrictSwitch,  // an int in C, exactly 0 or 1
  kInt,           // an int in C (read-only)
  kU64,           // a uint64_t
};

enum class AttrAccess {
  kReadWrite,
  kReadOnly,
  kResetOnly,  // a watermark: setting 0 resets it, any other value is an error
};

struct PoolAttrInfo {
  PoolAttr attr;
  const char* name;  // snake_case: messages, Python
  AttrKind kind;
  AttrAccess access;
  const char* trace_name;  // nullptr: not recorded
  const char* doc;
};

// Every attribute, in the order of their values.
absl::Span<const PoolAttrInfo> PoolAttrs();

// The attribute of that value; nullptr for a value no attribute has.
const PoolAttrInfo* FindPoolAttr(int value);

// The attribute a recording's `attr` line names; nullptr for another name.
const PoolAttrInfo* FindPoolAttrByTraceName(absl::string_view name);

// The recorded names, in the table's order: "reuse_event, ... or soft_limit".
std::string PoolAttrTraceNames();

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_POOL_POOL_ATTRS_H_
