// What the workload programs share: error checking, command-line flags, a
// seeded random source, timed kernels on the stream behind a cudaStream_t,
// PCIe-timed copies, host time, and the one summary line each prints.
//
// Everything here is host-side plumbing; the programs themselves call the
// CUDA runtime API directly, so a recorder of the CUDA face sees exactly the
// calls a real program of the same shape would make.
#ifndef STREAMPOOL_EXAMPLES_WORKLOADS_WORKLOAD_H_
#define STREAMPOOL_EXAMPLES_WORKLOADS_WORKLOAD_H_

#include <cuda_runtime.h>

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "streampool/cuda/interop.h"

namespace workloads {

// ----------------------------------------------------------------- op tally

// How many ops of each kind the program issued: the size of the history a
// recorder captures, printed even when nothing records.
struct OpCounts {
  uint64_t alloc = 0;
  uint64_t free = 0;
  uint64_t kernel = 0;
  uint64_t copy = 0;
  uint64_t record = 0;
  uint64_t wait = 0;
  uint64_t sync = 0;
  uint64_t query = 0;
  uint64_t advance = 0;
  uint64_t Total() const {
    return alloc + free + kernel + copy + record + wait + sync + query + advance;
  }
};

inline OpCounts& Counts() {
  static OpCounts counts;
  return counts;
}

// Counts a successful call by the CUDA function it names, so that the
// programs can keep calling the runtime API directly inside CHECK.
inline void Tally(const char* call) {
  struct Prefix {
    const char* text;
    uint64_t OpCounts::*counter;
  };
  static constexpr Prefix kPrefixes[] = {
      {"cudaMallocAsync(", &OpCounts::alloc},      {"cudaFreeAsync(", &OpCounts::free},
      {"cudaMemcpyAsync(", &OpCounts::copy},       {"cudaMemsetAsync(", &OpCounts::copy},
      {"cudaEventRecord(", &OpCounts::record},     {"cudaStreamWaitEvent(", &OpCounts::wait},
      {"cudaStreamSynchronize(", &OpCounts::sync}, {"cudaEventSynchronize(", &OpCounts::sync},
      {"cudaDeviceSynchronize(", &OpCounts::sync},
  };
  for (const Prefix& p : kPrefixes) {
    if (std::strncmp(call, p.text, std::strlen(p.text)) == 0) {
      ++(Counts().*p.counter);
      return;
    }
  }
}

[[noreturn]] inline void Fail(const char* file, int line, const char* what, const char* why) {
  std::fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, why);
  std::exit(1);
}

inline void Check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) Fail(file, line, call, cudaGetErrorName(err));
  Tally(call);
}

inline void CheckSp(spError_t err, const char* call, const char* file, int line) {
  if (err != spSuccess) Fail(file, line, call, spGetErrorName(err));
}

#define CHECK(call) ::workloads::Check((call), #call, __FILE__, __LINE__)
#define CHECK_SP(call) ::workloads::CheckSp((call), #call, __FILE__, __LINE__)

// ------------------------------------------------------------------- flags

// `--name=value` flags with defaults; integers take a K, M or G suffix
// (powers of 1024). `--help` lists them. An unknown or malformed flag is an
// error: a sweep that mistypes a flag must not silently run the default.
class Flags {
 public:
  Flags(int argc, char** argv, const char* program, const char* about)
      : program_(program), about_(about) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        help_ = true;
        continue;
      }
      const size_t eq = arg.find('=');
      if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
        Usage(("expected --name=value, got '" + arg + "'").c_str());
      }
      given_[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
    }
  }

  int64_t Int(const char* name, int64_t def, const char* help, int64_t min = 1) {
    help_lines_ += "  --" + std::string(name) + "=" + std::to_string(def) + "  " + help + "\n";
    auto it = given_.find(name);
    if (it == given_.end()) return def;
    const std::string text = it->second;
    given_.erase(it);
    char* end = nullptr;
    long long value = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str()) Usage(("--" + std::string(name) + ": not a number").c_str());
    switch (*end) {
      case 'K':
      case 'k':
        value <<= 10;
        ++end;
        break;
      case 'M':
      case 'm':
        value <<= 20;
        ++end;
        break;
      case 'G':
      case 'g':
        value <<= 30;
        ++end;
        break;
      default:
        break;
    }
    if (*end != '\0' || value < min) {
      Usage(("--" + std::string(name) + "=" + text +
             ": expected an integer >= " + std::to_string(min))
                .c_str());
    }
    return value;
  }

  std::string Choice(const char* name, const char* def, std::initializer_list<const char*> options,
                     const char* help) {
    std::string list;
    for (const char* o : options) {
      if (!list.empty()) list += '|';
      list += o;
    }
    help_lines_ += "  --" + std::string(name) + "=" + def + "  " + help + " (" + list + ")\n";
    auto it = given_.find(name);
    if (it == given_.end()) return def;
    const std::string value = it->second;
    given_.erase(it);
    for (const char* o : options) {
      if (value == o) return value;
    }
    Usage(("--" + std::string(name) + "=" + value + ": expected one of " + list).c_str());
  }

  // After every flag was read: --help prints the list and exits 0; a flag no
  // one read is an error.
  void Done() {
    if (help_) {
      std::printf("%s: %s\n\nflags:\n%s", program_, about_, help_lines_.c_str());
      std::exit(0);
    }
    if (!given_.empty()) Usage(("unknown flag --" + given_.begin()->first).c_str());
  }

 private:
  [[noreturn]] void Usage(const char* problem) {
    std::fprintf(stderr, "%s: %s (--help lists the flags)\n", program_, problem);
    std::exit(2);
  }

  const char* program_;
  const char* about_;
  bool help_ = false;
  std::map<std::string, std::string> given_;
  std::string help_lines_;
};

// ------------------------------------------------------------------ random

// SplitMix64: the same sequence for a seed on every platform, which the
// standard distributions do not promise.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Exponentially distributed with the given mean (Poisson arrivals).
  double Exponential(double mean) { return -mean * std::log(1.0 - Unit()); }

 private:
  uint64_t state_;
};

// ------------------------------------------------------------- device work

inline spStream_t SpStream(cudaStream_t stream) {
  spStream_t s = nullptr;
  CHECK(spcudaGetStream(&s, stream));
  return s;
}

inline spRuntime_t Runtime() {
  spRuntime_t rt = nullptr;
  CHECK(spcudaGetRuntime(&rt));
  return rt;
}

// A kernel of `ns` virtual nanoseconds on `stream` touching `accesses`
// ({ptr, bytes, 1} written, {ptr, bytes, 0} read): what a real launch costs
// in the cost model, declared to the stream-order checker.
inline void Kernel(cudaStream_t stream, uint64_t ns, const spAccess* accesses, size_t count) {
  CHECK_SP(spLaunchKernel(SpStream(stream), ns, accesses, count));
  ++Counts().kernel;
}
inline void Kernel(cudaStream_t stream, uint64_t ns, std::initializer_list<spAccess> accesses) {
  Kernel(stream, ns, accesses.begin(), accesses.size());
}
inline void Kernel(cudaStream_t stream, uint64_t ns, const std::vector<spAccess>& accesses) {
  Kernel(stream, ns, accesses.data(), accesses.size());
}

// A pinned host <-> device copy at PCIe speed: cudaMemcpyAsync moves the
// bytes (and is the copy a recorder sees), then a kernel on the same stream
// that touches the device side takes the rest of the PCIe time, because the
// face's copies run at device-to-device speed (cost::kFaceCopyBytesPerNs).
inline void PcieCopyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                          cudaStream_t stream) {
  CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  const bool to_device = kind == cudaMemcpyHostToDevice;
  const void* device_side = to_device ? dst : src;
  const uint64_t pad = cost::PciePadNs(static_cast<double>(bytes));
  if (pad > 0) Kernel(stream, pad, {{device_side, bytes, to_device ? 1 : 0}});
}

// The host spends `ns` of virtual time (its own work between API calls).
inline void HostAdvance(uint64_t ns) {
  if (ns == 0) return;
  CHECK_SP(spHostAdvance(Runtime(), ns));
  ++Counts().advance;
}

inline uint64_t HostNow() {
  uint64_t ns = 0;
  CHECK_SP(spHostNow(Runtime(), &ns));
  return ns;
}

// cudaStreamQuery as a poll: true when all the stream's work has completed.
inline bool StreamIdle(cudaStream_t stream) {
  const cudaError_t err = cudaStreamQuery(stream);
  ++Counts().query;
  if (err == cudaSuccess) return true;
  if (err != cudaErrorNotReady) Fail(__FILE__, __LINE__, "cudaStreamQuery", cudaGetErrorName(err));
  return false;
}

// --------------------------------------------------------------- summary

inline double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The one line each program prints: what ran, its op counts, the default
// pool's watermarks and reuse, and the virtual time it took. Call after the
// final synchronize.
inline void PrintSummary(const char* program, const std::string& what) {
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t reserved_high = 0, used_high = 0;
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved_high));
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high));
  spMemPoolStats stats{};
  CHECK_SP(spMemPoolGetStats(reinterpret_cast<spMemPool_t>(pool), &stats));
  CHECK(cudaGetLastError());
  const OpCounts& c = Counts();
  std::printf("%s: %s | ops %" PRIu64 " (alloc %" PRIu64 ", free %" PRIu64 ", kernel %" PRIu64
              ", copy %" PRIu64 ", record %" PRIu64 ", wait %" PRIu64 ", sync %" PRIu64
              ", query %" PRIu64 ", advance %" PRIu64
              ") | reserved high %.1f MiB, used high %.1f MiB | reuse same-stream %" PRIu64
              ", event %" PRIu64 ", opportunistic %" PRIu64 ", after-sync %" PRIu64
              ", internal %" PRIu64 " | %.3f ms virtual\n",
              program, what.c_str(), c.Total(), c.alloc, c.free, c.kernel, c.copy, c.record, c.wait,
              c.sync, c.query, c.advance, MiB(reserved_high), MiB(used_high), stats.reuseSameStream,
              stats.reuseEventDependency, stats.reuseOpportunistic, stats.reuseAfterSync,
              stats.reuseInternalDependency, static_cast<double>(HostNow()) / 1e6);
}

}  // namespace workloads

#endif  // STREAMPOOL_EXAMPLES_WORKLOADS_WORKLOAD_H_
