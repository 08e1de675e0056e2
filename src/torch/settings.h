// The settings of the PyTorch allocator's runtime (include/streampool/
// torch_allocator.h lists them): what the pools of each device are made or set
// with. They arrive as one "key=value,key=value" string
// (streampool_torch_configure, which must refuse anything it does not
// understand) or as one environment variable per key, where a bad value must
// never stop an unchanged program: it keeps its default and is reported.
#ifndef STREAMPOOL_SRC_TORCH_SETTINGS_H_
#define STREAMPOOL_SRC_TORCH_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "streampool/streampool.h"

namespace streampool::internal::torch {

// Each field unset keeps the pool's own default, except the release
// threshold (see kDefaultReleaseThreshold).
struct TorchSettings {
  // release_threshold: spMemPoolAttrReleaseThreshold.
  std::optional<uint64_t> release_threshold;
  // follow_event_dependencies, opportunistic, internal_dependencies: the
  // reuse rules 2, 3 and 5 (spMemPoolReuse*), 0 or 1.
  std::optional<bool> follow_event_dependencies;
  std::optional<bool> opportunistic;
  std::optional<bool> internal_dependencies;
  // growth: a pool property, so setting it (or max_size) makes each device a
  // pool of its own instead of the default one.
  std::optional<spPoolGrowth> growth;
  // max_size: spMemPoolProps.maxSize; 0 is the device's memory.
  std::optional<uint64_t> max_size;

  // Whether the devices need pools of their own (growth and max_size are
  // properties, fixed when a pool is made).
  bool NeedsOwnPool() const { return growth.has_value() || max_size.has_value(); }
};

// A synchronize releases a pool down to its threshold; PyTorch's
// cudaMallocAsync backend sets it to "never" for the same reason: a training
// step synchronizes, and unmapping at each step only to map the same bytes
// again in the next costs driver calls and gains nothing the process keeps.
inline constexpr uint64_t kDefaultReleaseThreshold = UINT64_MAX;

// Parses "key=value,key=value" into *settings. Spaces around keys and values
// are ignored, and so are empty items ("" is no setting at all). An unknown or
// repeated key, an item without '=', or a value its key does not accept:
// spErrorInvalidValue, *error says which, and *settings is unchanged.
spError_t ParseSettings(absl::string_view text, TorchSettings* settings, std::string* error);

// Looks a variable up; nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

// The environment variable of each key: "STREAMPOOL_TORCH_" and the key
// upper-cased. A value that does not parse keeps its default and adds one
// line to *problems, naming the variable, the value and what was expected.
TorchSettings SettingsFromEnv(const EnvLookup& lookup, std::vector<std::string>* problems);

// The setting's names as the statistics print them.
const char* GrowthName(int growth);

}  // namespace streampool::internal::torch

#endif  // STREAMPOOL_SRC_TORCH_SETTINGS_H_
