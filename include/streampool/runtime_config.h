/// \file
/// A runtime's configuration (Runtime::Create; C: spRuntimeConfig): every
/// option with its type and default, in one struct.
#ifndef STREAMPOOL_RUNTIME_CONFIG_H_
#define STREAMPOOL_RUNTIME_CONFIG_H_

#include <cstdint>
#include <memory>

#include "streampool/stream_adapter.h"

namespace streampool {

/// What memory Device pools and Malloc get from the system (C: spBacking).
enum class Backing {
  kHost = 0,         ///< real, touchable memory
  kAddressOnly = 1,  ///< address space reserved, never touched
};

/// How a runtime's streams run (C: spExecutorKind).
enum class ExecutorKind {
  kSimulator = 0,  ///< deterministic virtual time (the default)
  kThreads = 1,    ///< a worker thread per stream; real time, real blocking
  kCuda = 2,       ///< the machine's CUDA devices (C: spExecutorCuda)
};

/// What destroying a runtime does with live allocations (RuntimeConfig::leak_check).
enum class LeakCheck {
  kOff = 0,     ///< nothing
  kReport = 1,  ///< lists them on stderr
  kFail = 2,    ///< lists them, then exits the process with status 1
};

/// A runtime's configuration (C: spRuntimeConfig), with every default.
struct RuntimeConfig {
  /// Simulated devices, 1..64.
  int device_count = 1;
  /// Bytes per device shared by its pools' reservations and Malloc.
  uint64_t device_capacity = uint64_t{1} << 30;
  /// Memory behind Device pools and Malloc.
  Backing backing = Backing::kHost;
  /// Virtual host time charged per successful call that creates or destroys a
  /// stream or event, enqueues work, synchronizes, queries, allocates or frees
  /// (before the work it enqueues). Failed calls and pure getters cost nothing.
  uint64_t api_call_ns = 0;
  /// Bandwidth of async copies and fills (1 TB/s by default).
  uint64_t copy_bytes_per_us = 1000000;
  /// The stream-order checker (Runtime::CheckReports). Off by default: it costs
  /// a lookup per allocation, free and declared access. The environment
  /// variable STREAMPOOL_CHECK_STREAM_ORDER=1 turns it on for every runtime,
  /// and =fatal also aborts the process at the first report (the test suite
  /// runs that way).
  bool check_stream_order = false;
  /// How streams run. The pools, ordering and API are the same for both.
  ExecutorKind executor = ExecutorKind::kSimulator;
  /// Out-of-memory handling: before an allocation fails for lack of memory,
  /// the pools of its device (its own first) flush their front caches and
  /// release every whole granule or chunk they hold READY, and the
  /// allocation is tried once more. Nothing PENDING is touched, so stream
  /// order holds. Counted in PoolStats (reclaims, oom_retries, oom_count).
  bool oom_reclaim = true;
  /// What destroying the runtime does with allocations never freed (pool
  /// and synchronous ones): kOff nothing, kReport prints them to stderr
  /// (pointer, size, stream, pool, device, sequence number), kFail prints
  /// them and ends the process with exit status 1 once the runtime is gone.
  /// The environment variable STREAMPOOL_LEAK_CHECK=report|1 sets it for
  /// every runtime of a process (0 turns it off), the CUDA and AscendCL
  /// faces' included; their own STREAMPOOL_CUDA_LEAK_CHECK and
  /// STREAMPOOL_ACL_LEAK_CHECK set it for their implicit runtime.
  LeakCheck leak_check = LeakCheck::kOff;
  /// Streams and events of another runtime (see stream_adapter.h). When set,
  /// it decides how streams run and `executor` is ignored.
  std::shared_ptr<StreamAdapter> adapter;
};

}  // namespace streampool

#endif  // STREAMPOOL_RUNTIME_CONFIG_H_
