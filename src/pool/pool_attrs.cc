#include "src/pool/pool_attrs.h"

#include "absl/strings/str_cat.h"
#include "streampool/streampool.h"

namespace streampool::internal {
namespace {

#define SP_POOL_ATTR(name, value, cxx_name, snake_name, kind, access, trace_name, doc)  \
  static_assert(sp##name == (value) && static_cast<int>(PoolAttr::cxx_name) == (value), \
                "sp" #name " or PoolAttr::" #cxx_name                                   \
                " has not the value src/pool/pool_attrs.def gives it");
#include "src/pool/pool_attrs.def"

constexpr PoolAttrInfo kAttrs[] = {
#define SP_POOL_ATTR(name, value, cxx_name, snake_name, kind, access, trace_name, doc) \
  {PoolAttr::cxx_name, #snake_name, AttrKind::kind, AttrAccess::access, trace_name, doc},
#include "src/pool/pool_attrs.def"
};

}  // namespace

absl::Span<const PoolAttrInfo> PoolAttrs() { return kAttrs; }

const PoolAttrInfo* FindPoolAttr(int value) {
  for (const PoolAttrInfo& a : kAttrs) {
    if (static_cast<int>(a.attr) == value) return &a;
  }
  return nullptr;
}

const PoolAttrInfo* FindPoolAttrByTraceName(absl::string_view name) {
  for (const PoolAttrInfo& a : kAttrs) {
    if (a.trace_name != nullptr && a.trace_name == name) return &a;
  }
  return nullptr;
}

std::string PoolAttrTraceNames() {
  std::string out;
  const char* last = nullptr;
  for (const PoolAttrInfo& a : kAttrs) {
    if (a.trace_name == nullptr) continue;
    if (last != nullptr) absl::StrAppend(&out, out.empty() ? "" : ", ", last);
    last = a.trace_name;
  }
  return absl::StrCat(out, " or ", last);
}

}  // namespace streampool::internal
