#include "src/torch/settings.h"

#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace streampool::internal::torch {
namespace {

constexpr absl::string_view kEnvPrefix = "STREAMPOOL_TORCH_";

// Digits with an optional K, M or G suffix (powers of 1024), as the faces'
// STREAMPOOL_*_CAPACITY reads; no sign, nothing beyond 64 bits.
std::optional<uint64_t> ParseBytes(absl::string_view text) {
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
  // SimpleAtoi accepts a sign and spaces; a byte count has neither.
  if (text.empty()) return std::nullopt;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text, &n)) return std::nullopt;
  if (n > std::numeric_limits<uint64_t>::max() / scale) return std::nullopt;
  return n * scale;
}

std::optional<bool> ParseSwitch(absl::string_view text) {
  if (text == "0") return false;
  if (text == "1") return true;
  return std::nullopt;
}

// One key: its name, what it accepts (in words, for the messages), and how a
// value is stored; Store returns false for a value the key does not accept.
struct Key {
  const char* name;
  const char* expected;
  bool (*store)(absl::string_view value, TorchSettings* settings);
};

template <std::optional<bool> TorchSettings::*kField>
bool StoreSwitch(absl::string_view value, TorchSettings* settings) {
  std::optional<bool> v = ParseSwitch(value);
  if (!v) return false;
  settings->*kField = v;
  return true;
}

constexpr Key kKeys[] = {
    {"release_threshold", "bytes (digits, optional K, M or G suffix) or max",
     [](absl::string_view value, TorchSettings* settings) {
       std::optional<uint64_t> v =
           value == "max" ? std::optional<uint64_t>(UINT64_MAX) : ParseBytes(value);
       if (!v) return false;
       settings->release_threshold = v;
       return true;
     }},
    {"follow_event_dependencies", "0 or 1",
     &StoreSwitch<&TorchSettings::follow_event_dependencies>},
    {"opportunistic", "0 or 1", &StoreSwitch<&TorchSettings::opportunistic>},
    {"internal_dependencies", "0 or 1", &StoreSwitch<&TorchSettings::internal_dependencies>},
    {"growth", "expandable or chunked",
     [](absl::string_view value, TorchSettings* settings) {
       if (value == "expandable") {
         settings->growth = spPoolGrowthExpandable;
       } else if (value == "chunked") {
         settings->growth = spPoolGrowthChunked;
       } else {
         return false;
       }
       return true;
     }},
    {"max_size", "bytes (digits, optional K, M or G suffix); 0 is the device's memory",
     [](absl::string_view value, TorchSettings* settings) {
       std::optional<uint64_t> v = ParseBytes(value);
       if (!v) return false;
       settings->max_size = v;
       return true;
     }},
};

const Key* FindKey(absl::string_view name) {
  for (const Key& key : kKeys) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

std::string KeyList() {
  std::string out;
  for (const Key& key : kKeys) absl::StrAppend(&out, out.empty() ? "" : ", ", key.name);
  return out;
}

}  // namespace

spError_t ParseSettings(absl::string_view text, TorchSettings* settings, std::string* error) {
  TorchSettings parsed;
  std::vector<absl::string_view> seen;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      *error = absl::StrCat("'", item, "' is not key=value");
      return spErrorInvalidValue;
    }
    const absl::string_view name = absl::StripAsciiWhitespace(item.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(item.substr(eq + 1));
    const Key* key = FindKey(name);
    if (key == nullptr) {
      *error = absl::StrCat("unknown setting '", name, "' (known: ", KeyList(), ")");
      return spErrorInvalidValue;
    }
    for (absl::string_view s : seen) {
      if (s == name) {
        *error = absl::StrCat("setting '", name, "' given twice");
        return spErrorInvalidValue;
      }
    }
    seen.push_back(name);
    if (!key->store(value, &parsed)) {
      *error = absl::StrCat(name, "=", value, ": expected ", key->expected);
      return spErrorInvalidValue;
    }
  }
  *settings = std::move(parsed);
  return spSuccess;
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

TorchSettings SettingsFromEnv(const EnvLookup& lookup, std::vector<std::string>* problems) {
  TorchSettings settings;
  for (const Key& key : kKeys) {
    const std::string variable = absl::StrCat(kEnvPrefix, absl::AsciiStrToUpper(key.name));
    const std::optional<std::string> value = lookup(variable);
    if (!value) continue;
    if (!key.store(absl::StripAsciiWhitespace(*value), &settings)) {
      problems->push_back(
          absl::StrCat(variable, "=", *value, ": expected ", key.expected, "; using the default"));
    }
  }
  return settings;
}

const char* GrowthName(int growth) {
  switch (growth) {
    case spPoolGrowthChunked:
      return "chunked";
    case spPoolGrowthExpandable:
      return "expandable";
    default:
      return "default";
  }
}

}  // namespace streampool::internal::torch
