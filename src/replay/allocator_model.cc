#include "src/replay/allocator_model.h"

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/replay/rmm_model.h"
#include "src/replay/torch_model.h"
#include "src/replay/trace.h"

namespace streampool::replay {

namespace {

constexpr AllocatorKind kAllocators[] = {AllocatorKind::kStreampool, AllocatorKind::kPytorch,
                                         AllocatorKind::kRmmPool, AllocatorKind::kCuda};

constexpr uint64_t kMiB = uint64_t{1} << 20;

absl::Status BadConf(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("PYTORCH_CUDA_ALLOC_CONF: ", what));
}

// roundup_power2_divisions' value: "N" for every interval, or
// "[<MiB>:<N>,...,>:<N>]", a power-of-two size in MiB naming its interval
// (the first entry also covers the intervals below it, ">" those above the
// last).
absl::Status ParseDivisions(absl::string_view text, TorchOptions* options) {
  auto division = [](absl::string_view v) -> std::optional<uint32_t> {
    std::optional<uint64_t> n = ParseUint(v);
    if (!n || *n > 1024 || (*n != 0 && !std::has_single_bit(*n))) return std::nullopt;
    return static_cast<uint32_t>(*n);
  };
  auto& d = options->roundup_divisions;
  if (!absl::ConsumePrefix(&text, "[")) {
    std::optional<uint32_t> n = division(text);
    if (!n || *n == 0)
      return BadConf("roundup_power2_divisions is a power of two (up to 1024) or a list");
    d.fill(*n);
    return absl::OkStatus();
  }
  if (!absl::ConsumeSuffix(&text, "]")) return BadConf("roundup_power2_divisions' list has no ]");
  bool first = true;
  size_t last = 0;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(entry, ':');
    std::optional<uint32_t> n = kv.size() == 2 ? division(kv[1]) : std::nullopt;
    if (!n) return BadConf(absl::StrCat("bad roundup_power2_divisions entry '", entry, "'"));
    if (kv[0] == ">") {
      for (size_t i = last + 1; i < d.size(); ++i) d[i] = *n;
      continue;
    }
    std::optional<uint64_t> mib = ParseUint(kv[0]);
    if (!mib || *mib == 0 || !std::has_single_bit(*mib)) {
      return BadConf(absl::StrCat("'", kv[0], "' is not a power-of-two size in MiB"));
    }
    const size_t index =
        std::min<size_t>(static_cast<size_t>(std::countr_zero(*mib)), d.size() - 1);
    if (first) {
      for (size_t i = 0; i < index; ++i) d[i] = *n;
      first = false;
    }
    d[index] = *n;
    last = index;
  }
  return absl::OkStatus();
}

}  // namespace

const char* AllocatorName(AllocatorKind kind) {
  switch (kind) {
    case AllocatorKind::kStreampool:
      return "streampool";
    case AllocatorKind::kPytorch:
      return "pytorch";
    case AllocatorKind::kRmmPool:
      return "rmm-pool";
    case AllocatorKind::kCuda:
      return "cuda";
  }
  return "?";
}

absl::StatusOr<AllocatorKind> ParseAllocator(absl::string_view name) {
  for (AllocatorKind k : kAllocators) {
    if (name == AllocatorName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown allocator '", name, "' (streampool, pytorch, rmm-pool, cuda, or all)"));
}

absl::StatusOr<std::vector<AllocatorKind>> ParseAllocatorList(absl::string_view list) {
  if (list == "all")
    return std::vector<AllocatorKind>(std::begin(kAllocators), std::end(kAllocators));
  std::vector<AllocatorKind> out;
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    absl::StatusOr<AllocatorKind> k = ParseAllocator(name);
    if (!k.ok()) return k.status();
    for (AllocatorKind seen : out) {
      if (seen == *k)
        return absl::InvalidArgumentError(absl::StrCat("allocator '", name, "' twice"));
    }
    out.push_back(*k);
  }
  return out;
}

std::string TorchOptions::ToString() const {
  std::vector<std::string> parts;
  if (max_split_size != UINT64_MAX) {
    parts.push_back(absl::StrCat("max_split_size_mb:", max_split_size / kMiB));
  }
  bool any = false, same = true;
  for (uint32_t d : roundup_divisions) {
    any = any || d > 1;
    same = same && d == roundup_divisions[0];
  }
  if (any && same) {
    parts.push_back(absl::StrCat("roundup_power2_divisions:", roundup_divisions[0]));
  } else if (any) {
    std::vector<std::string> entries;
    for (size_t i = 0; i < roundup_divisions.size(); ++i) {
      entries.push_back(absl::StrCat(uint64_t{1} << i, ":", roundup_divisions[i]));
    }
    parts.push_back(absl::StrCat("roundup_power2_divisions:[", absl::StrJoin(entries, ","), "]"));
  }
  if (expandable_segments) parts.emplace_back("expandable_segments:True");
  if (garbage_collection_threshold > 0) {
    parts.push_back(absl::StrCat("garbage_collection_threshold:", garbage_collection_threshold));
  }
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<TorchOptions> ParseTorchConf(absl::string_view conf) {
  TorchOptions options;
  conf = absl::StripAsciiWhitespace(conf);
  if (conf.empty()) return options;
  // Split on commas outside brackets.
  std::vector<absl::string_view> items;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= conf.size(); ++i) {
    if (i == conf.size() || (conf[i] == ',' && depth == 0)) {
      items.push_back(conf.substr(start, i - start));
      start = i + 1;
    } else if (conf[i] == '[') {
      ++depth;
    } else if (conf[i] == ']') {
      --depth;
    }
  }
  for (absl::string_view item : items) {
    const size_t colon = item.find(':');
    if (colon == absl::string_view::npos) {
      return BadConf(absl::StrCat("'", item, "' is not key:value"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(item.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      std::optional<uint64_t> mb = ParseUint(value);
      // PyTorch refuses splits at or below a large segment (20 MiB).
      if (!mb || *mb <= 20) return BadConf("max_split_size_mb must be a number above 20");
      options.max_split_size = *mb > (UINT64_MAX >> 20) ? UINT64_MAX : *mb * kMiB;
    } else if (key == "roundup_power2_divisions") {
      if (absl::Status st = ParseDivisions(value, &options); !st.ok()) return st;
    } else if (key == "expandable_segments") {
      if (value != "True" && value != "False") {
        return BadConf("expandable_segments is True or False");
      }
      options.expandable_segments = value == "True";
    } else if (key == "garbage_collection_threshold") {
      double t = 0;
      if (!absl::SimpleAtod(value, &t) || !(t > 0 && t < 1)) {
        return BadConf("garbage_collection_threshold is between 0 and 1, both excluded");
      }
      options.garbage_collection_threshold = t;
    } else if (key == "backend" || key == "release_lock_on_cudamalloc" ||
               absl::StartsWith(key, "pinned_")) {
      // Settings that do not change where device blocks go.
    } else {
      return BadConf(absl::StrCat("unknown option '", key, "'"));
    }
  }
  return options;
}

absl::StatusOr<std::unique_ptr<AllocatorModel>> MakeAllocatorModel(AllocatorKind kind,
                                                                   const ModelConfig& config,
                                                                   ModelStreams* streams) {
  switch (kind) {
    case AllocatorKind::kPytorch:
      return MakeTorchModel(config, streams);
    case AllocatorKind::kRmmPool:
      return MakeRmmModel(config, streams);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(AllocatorName(kind), " is streampool's own pool, not a model"));
  }
}

}  // namespace streampool::replay
