// Work: what streams run besides allocations — kernels (declared accesses,
// an optional body), host functions, copies and fills (which really move
// touchable bytes, and only those) — and the host's own time.
#ifndef STREAMPOOL_SRC_RUNTIME_WORK_H_
#define STREAMPOOL_SRC_RUNTIME_WORK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "src/runtime/runtime_core.h"

namespace streampool::internal {

class Work {
 public:
  explicit Work(RuntimeCore& core) : c_(core) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  absl::Status LaunchKernel(uint64_t s, uint64_t duration_ns, absl::Span<const Access> accesses);
  absl::Status LaunchWork(uint64_t s, uint64_t duration_ns, std::function<void()> work,
                          absl::Span<const Access> accesses);
  absl::Status LaunchHostFunc(uint64_t s, std::function<void()> fn);
  absl::Status MemcpyAsync(void* dst, const void* src, uint64_t bytes, uint64_t s);
  absl::Status MemsetAsync(void* dst, int value, uint64_t bytes, uint64_t s);
  absl::Status HostAdvance(uint64_t ns);
  // Consecutive kernel, copy and fill nodes of a graph launch on stream s as
  // one op: their durations summed and their effects run in node order, the
  // checker seeing each node's accesses at the op. Nothing outside the
  // launch can order itself between them (only event, host and memory nodes
  // and edges to other lanes can, and those end a run), so one op is what
  // the nodes are to everyone else, and a launch costs per run, not per node.
  // A device runtime enqueues each node as its own native op instead.
  static bool Batchable(const NodeParams& params) {
    return std::holds_alternative<KernelNode>(params) ||
           std::holds_alternative<MemcpyNode>(params) || std::holds_alternative<MemsetNode>(params);
  }
  absl::Status EnqueueNodes(uint64_t s, absl::Span<const PlanStep> steps);

 private:
  // An op on a capturing stream becomes a node of the capture (true), with
  // the capture's error if it was invalidated; false when rec captures not.
  // The node is made only when it is captured: enqueueing builds none.
  template <typename MakeNode>
  absl::StatusOr<bool> Capture(const RuntimeCore::StreamRec& rec, MakeNode&& make) {
    if (absl::Status st = c_.CheckLegacyOp(rec); !st.ok()) return st;
    if (!rec.capturing.load(std::memory_order_relaxed)) return false;
    absl::StatusOr<NodeIndex> n = c_.captures.Add(rec.index, make());
    if (!n.ok()) return n.status();
    return true;
  }
  // Kernels with or without a body (LaunchKernel, LaunchWork).
  absl::Status EnqueueKernel(uint64_t s, uint64_t duration_ns, std::function<void()> body,
                             bool needs_body, absl::Span<const Access> accesses);
  // An effect that copies or fills, skipping bytes that are not touchable
  // (address-only memory, or runtime memory unmapped since the enqueue).
  std::function<void()> MemoryEffect(void* dst, const void* src, int value, uint64_t bytes);
  // How long a copy or fill of `bytes` lasts at the configured bandwidth.
  uint64_t TransferNs(uint64_t bytes) const;
  // The checker's view of a kernel's declared accesses at position p of s.
  void CheckKernelAccess(StreamIndex s, Position p, absl::Span<const Access> accesses, int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_.seq.mu());
  // Reports of accesses a copy or fill makes to memory of this runtime.
  void CheckCopyAccess(StreamIndex s, Position p, const void* ptr, uint64_t bytes, bool write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c_.seq.mu());

  RuntimeCore& c_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_WORK_H_
