#include "src/compat/env_config.h"

#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace streampool::internal::compat {

RuntimeConfig CompatConfig::ToRuntimeConfig() const {
  RuntimeConfig config;
  config.device_count = device_count;
  config.device_capacity = device_capacity;
  config.backing = backing;
  config.executor = executor;
  config.oom_reclaim = oom_reclaim;
  config.leak_check = leak_check;
  return config;
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<uint64_t> ParseBytes(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return std::nullopt;
  uint64_t scale = 1;
  switch (absl::ascii_toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      scale = uint64_t{1} << 10;
      break;
    case 'M':
      scale = uint64_t{1} << 20;
      break;
    case 'G':
      scale = uint64_t{1} << 30;
      break;
    default:
      break;
  }
  if (scale != 1) text.remove_suffix(1);
  // SimpleAtoi accepts a sign; a byte count has none.
  if (text.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(text.front()))) {
    return std::nullopt;
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text, &n)) return std::nullopt;
  if (n > std::numeric_limits<uint64_t>::max() / scale) return std::nullopt;
  return n * scale;
}

namespace {

// One variable: `parse` turns the text into the field or fails.
template <class T, class Parse>
void Read(absl::string_view prefix, absl::string_view suffix, const EnvLookup& lookup,
          absl::string_view expected, absl::string_view default_text, Parse parse, T* field,
          std::vector<std::string>* problems) {
  const std::string name = absl::StrCat(prefix, suffix);
  const std::optional<std::string> value = lookup(name);
  if (!value.has_value()) return;
  if (std::optional<T> parsed = parse(*value); parsed.has_value()) {
    *field = *parsed;
    return;
  }
  if (problems != nullptr) {
    problems->push_back(absl::StrCat("streampool: ", name, "='", *value, "' is not ", expected,
                                     "; using the default ", default_text));
  }
}

// A parser of one of `choices`' names (any case, surrounding blanks ignored).
template <class T>
auto OneOf(std::vector<std::pair<std::string, T>> choices) {
  return [choices = std::move(choices)](const std::string& s) -> std::optional<T> {
    const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s));
    for (const auto& [name, value] : choices) {
      if (v == name) return value;
    }
    return std::nullopt;
  };
}

}  // namespace

CompatConfig ParseConfig(absl::string_view prefix, const EnvLookup& lookup,
                         std::vector<std::string>* problems) {
  CompatConfig config;
  Read(
      prefix, "DEVICES", lookup, "a device count from 1 to 64", "1",
      [](const std::string& s) -> std::optional<int> {
        int n = 0;
        if (!absl::SimpleAtoi(s, &n) || n < 1 || n > 64) return std::nullopt;
        return n;
      },
      &config.device_count, problems);
  Read(
      prefix, "CAPACITY", lookup, "a non-zero byte count (digits with an optional K, M or G)", "1G",
      [](const std::string& s) -> std::optional<uint64_t> {
        std::optional<uint64_t> n = ParseBytes(s);
        if (!n.has_value() || *n == 0) return std::nullopt;
        return n;
      },
      &config.device_capacity, problems);
  Read(prefix, "BACKING", lookup, "'host' or 'address'", "host",
       OneOf<Backing>({{"host", Backing::kHost}, {"address", Backing::kAddressOnly}}),
       &config.backing, problems);
  Read(prefix, "EXECUTOR", lookup, "'simulator' or 'threads'", "simulator",
       OneOf<ExecutorKind>(
           {{"simulator", ExecutorKind::kSimulator}, {"threads", ExecutorKind::kThreads}}),
       &config.executor, problems);
  Read(
      prefix, "KERNEL_NS", lookup, "a duration in nanoseconds", "1000",
      [](const std::string& s) -> std::optional<uint64_t> {
        const absl::string_view v = absl::StripAsciiWhitespace(s);
        uint64_t n = 0;
        if (v.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(v.front())) ||
            !absl::SimpleAtoi(v, &n)) {
          return std::nullopt;
        }
        return n;
      },
      &config.kernel_ns, problems);
  Read(prefix, "OOM_RECLAIM", lookup, "'1' or '0'", "1",
       OneOf<bool>({{"1", true}, {"0", false}, {"on", true}, {"off", false}}), &config.oom_reclaim,
       problems);
  Read(prefix, "LEAK_CHECK", lookup, "'0', 'report' or '1'", "0",
       OneOf<LeakCheck>({{"0", LeakCheck::kOff},
                         {"off", LeakCheck::kOff},
                         {"report", LeakCheck::kReport},
                         {"1", LeakCheck::kFail},
                         {"fail", LeakCheck::kFail}}),
       &config.leak_check, problems);
  return config;
}

}  // namespace streampool::internal::compat
