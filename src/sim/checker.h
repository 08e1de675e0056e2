// The stream-order checker: watches what kernels declare they touch and what
// the pool hands out, and reports every access or reuse that stream order
// does not make safe.
//
//   out of bounds     an access outside any allocation ever made;
//   use after free    an access to an allocation whose FreeAsync was already
//                     called (so the access is issued after the free point),
//                     or a FreeAsync that an earlier access on another stream
//                     is not ordered before (the free may complete, and the
//                     bytes be reused, while that access still runs);
//   use before ready  stream T touches an allocation made on S at (S, a) while
//                     VC(T)[S] < a: nothing orders the access after the
//                     allocation;
//   overlap           self-check of the pool: a new allocation shares bytes
//                     with an earlier one whose free is neither ordered before
//                     the allocating stream's next op nor observed complete
//                     (the safety invariant, checked with any executor), or —
//                     in virtual time — had not completed when the new one
//                     became usable;
//   no access         a kernel on device D touches an allocation of a pool
//                     that has not granted D access (or writes one D may
//                     only read): spMemPoolSetAccess decides, for every
//                     allocation of the pool, past and future; or a kernel
//                     writes read-only registered host memory;
//   free while        pinned host memory is freed while a range of it is
//   registered        registered (spHostRegister): devices may still be told
//                     its device address.
//
// Registered host memory is the host's, not an allocation: kernels may touch
// it while it is registered, with no lifetime to check beyond that.
//
// Checks run at enqueue, when the ordering core knows the op's clock and the
// simulator its times. Cost: a btree lookup per allocation, free and access.
#ifndef STREAMPOOL_SRC_SIM_CHECKER_H_
#define STREAMPOOL_SRC_SIM_CHECKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "src/ordering/oracle.h"
#include "src/ordering/ordering.h"
#include "streampool/executor.h"

namespace streampool::internal {

enum class CheckKind {
  kOutOfBounds,
  kUseAfterFree,
  kUseBeforeReady,
  kOverlappingLifetimes,
  kNoAccess,
  kFreeWhileRegistered,
};

// A registered range of host memory (spHostRegister), by base address: the
// runtime's table, which the checker reads.
struct RegisteredRange {
  uint64_t size;
  bool read_only;
};
using RegisteredRanges = absl::btree_map<uintptr_t, RegisteredRange>;

// Which devices may touch the allocations of one pool, shared by the pool
// (which changes it) and the checker's records (which read it), so a change
// applies to allocations already made.
struct AccessRights {
  static constexpr uint8_t kNone = 0;
  static constexpr uint8_t kRead = 1;
  static constexpr uint8_t kReadWrite = 3;
  // By device index; devices beyond the vector have no access.
  std::vector<uint8_t> flags;
  uint8_t Get(int device) const {
    return device >= 0 && static_cast<size_t>(device) < flags.size() ? flags[device] : kNone;
  }
};

const char* CheckKindName(CheckKind kind);

struct CheckReport {
  CheckKind kind;
  StreamIndex stream;  // the offending op's stream and position
  Position position;
  uintptr_t ptr;
  uint64_t size;
  // The other op involved: the allocation (use before ready), its free (use
  // after free, overlap), or none (out of bounds: kNoStream).
  StreamIndex other_stream = kNoStream;
  Position other_position = 0;
  std::string message = {};
};

class StreamOrderChecker {
 public:
  // A block handed out at (stream, position); it may be used from `ready_ns`
  // (the end of the allocating stream's last op, inserted waits included; 0
  // when time is not virtual). `order` answers for the allocating stream
  // (null: skip the order-based check, e.g. for synchronous Malloc).
  // `rights` says which devices may touch it (null: every device).
  void OnAlloc(uintptr_t base, uint64_t size, StreamIndex stream, Position position,
               TimeNs ready_ns, const OrderOracle* order,
               std::shared_ptr<const AccessRights> rights = nullptr);
  // Its FreeAsync at (stream, position), whose clock is `clock`, completing at
  // end_ns. `uses`: other streams that used it (RecordUse), each up to its
  // point at the free; the free then covers their work too (`clock` joins
  // their clocks, end_ns their ends) and its bytes may be reused only once
  // every use, as well as the free, is ordered before or observed complete.
  void OnFree(uintptr_t base, StreamIndex stream, Position position, const VectorClock& clock,
              TimeNs end_ns, absl::Span<const std::pair<StreamIndex, Position>> uses = {});
  // A synchronous free: the caller promised all access had completed.
  void OnFreeNow(uintptr_t base, TimeNs now_ns);
  // An access by the op at (stream, position), whose clock is `clock`, made
  // from `device` (-1: do not check access rights, e.g. copies).
  void OnAccess(StreamIndex stream, Position position, const VectorClock& clock, uintptr_t ptr,
                uint64_t size, bool write, int device = -1);
  // Forgets records inside [base, base + size): the memory went back upstream.
  void OnUnmap(uintptr_t base, uint64_t size);

  // What synchronize calls and queries have proven complete (owned by the
  // caller, outliving the checker): a proven-complete allocation is ready for
  // every stream, and a proven-complete access is ordered before any free.
  void set_done(const VectorClock* done) { done_ = done; }
  // The registered host ranges (owned by the caller, outliving the checker).
  void set_registered(const RegisteredRanges* registered) { registered_ = registered; }
  // [base, base + size) was registered: records of freed allocations inside
  // it are stale (the host has reused those bytes) and are forgotten.
  void OnHostRegister(uintptr_t base, uint64_t size);
  // Pinned host memory [base, base + size) is freed (now_ns) while
  // [reg, reg + reg_size) of it is registered.
  void OnFreeRegistered(uintptr_t base, uint64_t size, uintptr_t reg, uint64_t reg_size);

  const std::vector<CheckReport>& reports() const { return reports_; }
  void ClearReports() { reports_.clear(); }

 private:
  struct Record {
    uint64_t size;
    StreamIndex alloc_stream;
    Position alloc_position;
    bool freed = false;
    StreamIndex free_stream = kNoStream;
    Position free_position = 0;
    TimeNs free_end = 0;
    // The free's other streams (RecordUse) and their points.
    absl::InlinedVector<std::pair<StreamIndex, Position>, 1> uses;
    std::shared_ptr<const AccessRights> rights;
    // The latest access per stream, to check the free is ordered after them.
    absl::InlinedVector<std::pair<StreamIndex, Position>, 2> last_access;
  };
  void Report(CheckReport r);
  // The registered range holding all of [ptr, ptr + size), or null.
  const std::pair<const uintptr_t, RegisteredRange>* RegisteredContaining(uintptr_t ptr,
                                                                          uint64_t size) const;
  Position Done(StreamIndex s) const { return done_ != nullptr ? done_->Get(s) : 0; }

  // By base address; records of freed allocations stay until their bytes are
  // handed out again or unmapped, so late accesses are still recognised.
  absl::btree_map<uintptr_t, Record> records_;
  std::vector<CheckReport> reports_;
  const VectorClock* done_ = nullptr;
  const RegisteredRanges* registered_ = nullptr;
  static constexpr size_t kMaxReports = 10000;  // a buggy loop must not eat memory
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_SIM_CHECKER_H_
