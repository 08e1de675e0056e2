// Instruction-stream programs for the reference-model property tests.
//
// A program is a header (runtime config, pools, stream slots, events) and a
// list of instructions, each one line of text:
//
//   config devices=2 capacity=33554432 backing=address api-ns=0 copy-bytes-per-us=1000000
//   pool p0 device device=0 max=8388608 follow=1 opportunistic=1 internal=1 threshold=0
//   growth=chunked pool p1 dvpp device=1 max=0 follow=0 opportunistic=1 internal=0 threshold=max
//   growth=default stream s0 legacy device=0 stream s1 blocking device=0 stream s2 nonblocking
//   device=1 events 3 alloc a0 p0 s1 4096            MallocFromPoolAsync(4096, p0, s1), named a0
//   kernel s1 500 w:a0+0+256       500 ns, writes a0[0, 256)
//   fill s1 a0+0+4096              MemsetAsync
//   record e0 s1 / wait s2 e0
//   free a0 s2 / freenow a0        FreeAsync on s2 / spFree
//   use a0 s2                      RecordUse: s2 uses a0 too
//   sync-stream s1 / sync-event e0 / sync-device 0
//   query-stream s1 / query-event e0
//   advance 1000 / trim p0 0
//   set p0 follow 0                also opportunistic, internal, threshold,
//                                  reset-reserved-high, reset-used-high
//   destroy-stream s2 / create-stream s2   (re-creates the slot as declared)
//   grant p0 1 r                   SetPoolAccess: device 1 gets none, r or rw
//
// A pool's growth= is default, chunked or expandable (PoolProps::growth); a
// line without it means default, which is expandable on every built-in
// upstream.
//
// Names are symbolic, so deleting instructions (the minimiser) keeps a
// program well formed: the executor skips an instruction whose names are not
// bound (an allocation that failed or was never made, a destroyed stream) or
// that would break the stream-order contract (an access not ordered after
// its allocation or not granted to the stream's device, a free not ordered
// after an access, an spFree of memory still in use); such programs mean the
// same to the runtime and the model.
#ifndef STREAMPOOL_TESTS_MODEL_PROGRAM_H_
#define STREAMPOOL_TESTS_MODEL_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/trace/ops.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"
#include "tests/model/reference_model.h"

namespace streampool::model {

struct AllocOp {
  int id;
  int pool;
  int stream;
  uint64_t size;
};
// The instructions a trace has too are its ops (src/trace/ops.h), their
// numbers the program's slots: pN, sN, eN, aN are N.
using FreeOp = internal::trace::Free;
using UseOp = internal::trace::Use;
using RecordOp = internal::trace::Record;
using WaitOp = internal::trace::Wait;
using SyncStreamOp = internal::trace::Sync;
using SyncEventOp = internal::trace::EventSync;
using SyncDeviceOp = internal::trace::DeviceSync;
using QueryStreamOp = internal::trace::Query;
using QueryEventOp = internal::trace::EventQuery;
using AdvanceOp = internal::trace::Advance;
using TrimOp = internal::trace::Trim;
using FreeNowOp = internal::trace::Release;  // spFree
// A program's slot as a trace op's number.
inline uint64_t Slot(int n) { return static_cast<uint64_t>(n); }

struct AccessDecl {
  int id;
  uint64_t offset;
  uint64_t size;
  bool write;
};
struct KernelOp {
  int stream;
  uint64_t duration_ns;
  std::vector<AccessDecl> accesses;
};
struct FillOp {
  int stream;
  int id;
  uint64_t offset;
  uint64_t size;
};
enum class SetAttrKind {
  kFollow,
  kOpportunistic,
  kInternal,
  kThreshold,
  kResetReservedHigh,
  kResetUsedHigh,
  kFrontCache,
  kWaitBeforeGrowth,
  kSoftLimit,
};
// The pool attribute a kind sets (the resets set a watermark to 0).
PoolAttr PoolAttrOf(SetAttrKind kind);
constexpr SetAttrKind kLastSetAttrKind = SetAttrKind::kSoftLimit;
struct SetAttrOp {
  int pool;
  SetAttrKind attr;
  uint64_t value;
};
struct DestroyStreamOp {
  int stream;
};
struct CreateStreamOp {
  int stream;
};
// SetPoolAccess for one device: flags 0 (none), 1 (read) or 3 (read-write).
struct GrantOp {
  int pool;
  int device;
  int flags;
};

using Instruction =
    std::variant<AllocOp, FreeOp, FreeNowOp, KernelOp, FillOp, RecordOp, WaitOp, SyncStreamOp,
                 SyncEventOp, SyncDeviceOp, QueryStreamOp, QueryEventOp, AdvanceOp, TrimOp,
                 SetAttrOp, DestroyStreamOp, CreateStreamOp, GrantOp, UseOp>;

struct PoolDecl {
  ModelPoolProps props;
};
struct StreamDecl {
  int device = 0;
  StreamKind kind = StreamKind::kBlocking;
};

struct Program {
  int device_count = 1;
  uint64_t device_capacity = uint64_t{1} << 30;
  Backing backing = Backing::kAddressOnly;
  uint64_t api_call_ns = 0;
  uint64_t copy_bytes_per_us = 1000000;
  // The stream-order checker. Off, the runtime serves allocations and frees
  // on its lock-free fast path and its pool-lock path (no runtime lock), which
  // the checker's records otherwise turn off: the model then pins those
  // paths' decisions too.
  bool checker = true;
  // RuntimeConfig::oom_reclaim: before an allocation fails for lack of
  // memory, the device's pools release what they hold READY and it is tried
  // once more (the config line's oom-reclaim=1; off without it).
  bool oom_reclaim = false;
  std::vector<PoolDecl> pools;
  std::vector<StreamDecl> streams;
  int events = 0;
  std::vector<Instruction> code;
};

std::string ToString(const Instruction& ins);
std::string ToString(const Program& program);
// Parses what ToString prints ('#' starts a comment; blank lines are skipped).
absl::StatusOr<Program> ParseProgram(absl::string_view text);

// ---------------------------------------------------------------- generator

// How a generated program's pools grow.
enum class GrowthChoice {
  kChunked,     // every pool growth=chunked
  kExpandable,  // every pool expandable, half of them spelled growth=default
  kMixed,       // each pool at random
};
const char* GrowthChoiceName(GrowthChoice g);

struct GeneratorOptions {
  uint64_t seed = 1;
  size_t length = 2000;
  int max_streams = 8;  // legacy streams included
  int max_pools = 3;
  // Initial reuse switches of every pool: bit 0 follow event dependencies,
  // bit 1 opportunistic, bit 2 internal dependencies.
  int policy_mask = 7;
  // Release threshold UINT64_MAX for every pool, instead of 0 for most and
  // a few MiB for some.
  bool threshold_max = false;
  Backing backing = Backing::kAddressOnly;
  GrowthChoice growth = GrowthChoice::kExpandable;
  bool checker = true;  // Program::checker
};

// A random program; the same options give the same program. Besides single
// instructions it sometimes drains: frees much of what is live, synchronizes
// every device and perhaps trims, so that releases meet many READY blocks and
// stop part-way at the bound.
Program Generate(const GeneratorOptions& options);

// ----------------------------------------------------------------- executor

struct ExecuteResult {
  bool ok = true;
  // Index of the failing instruction; code.size() for a setup failure.
  size_t failed_at = 0;
  // "category: detail"; the category names what broke.
  std::string failure;
  size_t executed = 0;  // instructions run, skipped ones included
  size_t skipped = 0;
  size_t double_frees = 0;  // rejected FreeAsync of a freed allocation
  Coverage coverage;
  // Every pool's statistics after the last instruction run (for frozen
  // programs to pin).
  std::vector<PoolStats> stats;
  std::string category() const { return failure.substr(0, failure.find(':')); }
};

struct ExecuteOptions {
  // ModelConfig::strict_fresh.
  bool strict_fresh = true;
};

// Runs the program against a fresh Runtime (stream-order checker on,
// non-fatal) and the reference model side by side, checking after every
// instruction: no checker report, every pool's invariants, the model's view of
// each pool's statistics and attributes, host time, clocks and op ends.
// Stops at the first discrepancy.
ExecuteResult Execute(const Program& program, const ExecuteOptions& options = {});

// Delta debugging: the smallest program found that still fails with the same
// category, by dropping chunks of instructions (halving down to single ones),
// then declarations the failure does not need; allocation names are then
// renumbered a0, a1, ... At most `max_runs` runs of `run` (Execute unless a
// test substitutes its own).
Program Minimise(
    const Program& program, const ExecuteResult& failure, size_t max_runs = 3000,
    const std::function<ExecuteResult(const Program&)>& run = [](const Program& p) {
      return Execute(p);
    });

}  // namespace streampool::model

#endif  // STREAMPOOL_TESTS_MODEL_PROGRAM_H_
