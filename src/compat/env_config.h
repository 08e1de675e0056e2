// The configuration of an implicit process runtime, read from environment
// variables under one prefix per API face ("STREAMPOOL_CUDA_",
// "STREAMPOOL_ACL_"): a program written for another runtime API never calls
// spRuntimeCreate, so the environment is the only place to say how many
// devices to simulate, how large they are and how streams run.
//
// A malformed value must never stop the program: the parser keeps the default
// and explains the problem in one line, which the caller prints to stderr.
#ifndef STREAMPOOL_SRC_COMPAT_ENV_CONFIG_H_
#define STREAMPOOL_SRC_COMPAT_ENV_CONFIG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/compat/export.h"
#include "streampool/runtime.h"

namespace streampool::internal::compat {

// Everything a face's implicit runtime is made from. The suffixes below are
// appended to the face's prefix; the checker is not here because the runtime
// itself reads STREAMPOOL_CHECK_STREAM_ORDER for every runtime.
struct STREAMPOOL_COMPAT_EXPORT CompatConfig {
  // <prefix>DEVICES: simulated devices, 1..64.
  int device_count = 1;
  // <prefix>CAPACITY: bytes per device; digits with an optional K, M or G
  // suffix (powers of 1024).
  uint64_t device_capacity = uint64_t{1} << 30;
  // <prefix>BACKING: "host" (touchable memory) or "address" (address space
  // only, for workloads larger than the machine).
  Backing backing = Backing::kHost;
  // <prefix>EXECUTOR: "simulator" (virtual time) or "threads".
  ExecutorKind executor = ExecutorKind::kSimulator;
  // <prefix>KERNEL_NS: virtual duration of one emulated kernel launch.
  uint64_t kernel_ns = 1000;
  // <prefix>OOM_RECLAIM: "1" (the default) or "0", RuntimeConfig::oom_reclaim.
  bool oom_reclaim = true;
  // <prefix>LEAK_CHECK: "0" (the default), "report" or "1",
  // RuntimeConfig::leak_check (STREAMPOOL_LEAK_CHECK, read by every runtime,
  // takes precedence).
  LeakCheck leak_check = LeakCheck::kOff;

  // The runtime configuration these values describe.
  RuntimeConfig ToRuntimeConfig() const;
};

// Looks a variable up; nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
STREAMPOOL_COMPAT_EXPORT EnvLookup ProcessEnv();

// Reads <prefix>DEVICES, ... through `lookup`. A value that does not parse
// keeps its default and adds one message to `problems`, naming the variable,
// the value, what was expected and the default used.
STREAMPOOL_COMPAT_EXPORT CompatConfig ParseConfig(absl::string_view prefix, const EnvLookup& lookup,
                                                  std::vector<std::string>* problems);

// A byte count: digits with an optional K, M or G suffix; nullopt if malformed
// or beyond 64 bits.
STREAMPOOL_COMPAT_EXPORT std::optional<uint64_t> ParseBytes(absl::string_view text);

}  // namespace streampool::internal::compat

#endif  // STREAMPOOL_SRC_COMPAT_ENV_CONFIG_H_
