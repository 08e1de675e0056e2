// HugePageMemory and DvppMemory: upstreams whose chunks are 2 MiB-page backed
// per a PagePolicy; DVPP chunks additionally live in the process's window.
#include <sys/mman.h>

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/memory/sys_mmap.h"
#include "src/memory/upstreams.h"
#include "src/util/check.h"
#include "src/util/mutex.h"

namespace streampool::internal {
namespace {

class HugePageMemory final : public PhysicalMemory {
 public:
  HugePageMemory(PagePolicy policy, bool touchable, HugePageBudget* budget)
      : policy_(policy), touchable_(touchable), budget_(budget) {}

  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    if (bytes == 0 || bytes % kHugePageSize != 0) {
      return absl::InvalidArgumentError(absl::StrCat(bytes, " is not whole 2 MiB pages"));
    }
    return MapPages(PageRequest{bytes, nullptr, policy_, touchable_, budget_});
  }
  void Unmap(const Mapping& m) override { UnmapPages(m, /*keep_reserved=*/false, budget_); }
  bool touchable() const override { return touchable_; }
  const char* name() const override { return "huge-page"; }

  // Each MapAt gets its pages by the policy, so one reservation may hold
  // explicit huge, transparent huge and normal pages side by side.
  bool can_reserve() const override { return true; }
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override {
    return ReserveAddressRange(bytes, alignment);
  }
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override {
    return MapPages(PageRequest{bytes, addr, policy_, touchable_, budget_});
  }
  void UnmapAt(const Mapping& m) override { UnmapPages(m, /*keep_reserved=*/true, budget_); }
  void ReleaseReservation(void* base, uint64_t bytes) override { ReleaseAddressRange(base, bytes); }

 private:
  const PagePolicy policy_;
  const bool touchable_;
  HugePageBudget* const budget_;
};

static_assert(kIsPhysicalMemory<HugePageMemory>);

class DvppMemory final : public PhysicalMemory {
 public:
  DvppMemory(PagePolicy policy, bool touchable, HugePageBudget* budget, DvppWindow& window)
      : policy_(policy), touchable_(touchable), budget_(budget), window_(window) {}

  absl::StatusOr<Mapping> Map(uint64_t bytes) override {
    if (bytes == 0 || bytes % DvppWindow::kGranule != 0) {
      return absl::InvalidArgumentError(absl::StrCat(bytes, " is not whole 2 MiB granules"));
    }
    DvppWindow& window = window_;
    void* at = window.Take(bytes);
    if (at == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the 16 GiB DVPP window has no free range of ", bytes, " bytes (",
                       window.free_bytes(), " free in all)"));
    }
    absl::StatusOr<Mapping> m = MapPages(PageRequest{bytes, at, policy_, touchable_, budget_});
    if (!m.ok()) window.Give(at, bytes);
    return m;
  }
  void Unmap(const Mapping& m) override {
    if (touchable_) {
      UnmapPages(m, /*keep_reserved=*/true, budget_);
    } else if (budget_ != nullptr) {
      budget_->Give(m.huge_page_bytes + m.transparent_huge_page_bytes);
    }
    window_.Give(m.base, m.size);
  }
  bool touchable() const override { return touchable_; }
  const char* name() const override { return "dvpp"; }

  // Reservations are ranges of the window itself (already PROT_NONE address
  // space), so a pool may hold several and never needs the whole window.
  bool can_reserve() const override { return true; }
  absl::StatusOr<void*> Reserve(uint64_t bytes, uint64_t alignment) override {
    if (bytes == 0 || bytes % DvppWindow::kGranule != 0 || alignment > DvppWindow::kGranule) {
      return absl::InvalidArgumentError(
          absl::StrCat(bytes, " bytes aligned to ", alignment, " is no DVPP window range"));
    }
    DvppWindow& window = window_;
    void* at = window.Take(bytes);
    if (at == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the 16 GiB DVPP window has no free range of ", bytes, " bytes (",
                       window.free_bytes(), " free in all)"));
    }
    return at;
  }
  absl::StatusOr<Mapping> MapAt(void* addr, uint64_t bytes) override {
    return MapPages(PageRequest{bytes, addr, policy_, touchable_, budget_});
  }
  void UnmapAt(const Mapping& m) override {
    if (touchable_) {
      UnmapPages(m, /*keep_reserved=*/true, budget_);
    } else if (budget_ != nullptr) {
      budget_->Give(m.huge_page_bytes + m.transparent_huge_page_bytes);
    }
  }
  void ReleaseReservation(void* base, uint64_t bytes) override { window_.Give(base, bytes); }

 private:
  const PagePolicy policy_;
  const bool touchable_;
  HugePageBudget* const budget_;
  DvppWindow& window_;
};

static_assert(kIsPhysicalMemory<DvppMemory>);

}  // namespace

struct DvppWindow::State {
  mutable Mutex mu{LockRank::kDvppWindow};
  std::vector<bool> used ABSL_GUARDED_BY(mu);
  uint64_t free_granules ABSL_GUARDED_BY(mu) = 0;
  // The whole reservation, unaligned (null until the first Take).
  void* raw ABSL_GUARDED_BY(mu) = nullptr;
};

DvppWindow::DvppWindow() : state_(std::make_unique<State>()) {
  MutexLock lock(&state_->mu);
  state_->used.assign(kSize / kGranule, false);
  state_->free_granules = kSize / kGranule;
}

// The owner outlives every upstream over the window, so nothing is mapped in
// it by now; the address space goes back with it.
DvppWindow::~DvppWindow() {
  MutexLock lock(&state_->mu);
  if (state_->raw != nullptr) munmap(state_->raw, kSize + kGranule);
}

// Called by Take with state_->mu held (State is private to this file, so the
// header cannot name the lock).
bool DvppWindow::ReserveLocked() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (base_.load(std::memory_order_relaxed) != 0) return true;
  // Address space only: reserving costs no memory, and what is mapped into
  // it later replaces parts of this reservation in place. Reserved on first
  // use, so a process that cannot get 16 GiB of address space sees DVPP
  // allocations fail, not the process.
  const uint64_t span = kSize + kGranule;
  void* raw = SysMmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return false;
  state_->raw = raw;
  const auto r = reinterpret_cast<uintptr_t>(raw);
  base_.store((r + kGranule - 1) & ~(kGranule - 1), std::memory_order_release);
  return true;
}

void* DvppWindow::Take(uint64_t bytes) {
  const uint64_t n = bytes / kGranule;
  MutexLock lock(&state_->mu);
  if (n == 0 || !ReserveLocked()) return nullptr;
  std::vector<bool>& used = state_->used;
  uint64_t run = 0;
  for (uint64_t i = 0; i < used.size(); ++i) {
    run = used[i] ? 0 : run + 1;
    if (run == n) {
      const uint64_t first = i + 1 - n;
      for (uint64_t j = first; j <= i; ++j) used[j] = true;
      state_->free_granules -= n;
      return reinterpret_cast<void*>(base_.load(std::memory_order_relaxed) + first * kGranule);
    }
  }
  return nullptr;
}

void DvppWindow::Give(void* p, uint64_t bytes) {
  const uint64_t first = (reinterpret_cast<uintptr_t>(p) - base()) / kGranule;
  const uint64_t n = bytes / kGranule;
  MutexLock lock(&state_->mu);
  for (uint64_t j = first; j < first + n; ++j) {
    SP_CHECK(state_->used[j]);
    state_->used[j] = false;
  }
  state_->free_granules += n;
}

uint64_t DvppWindow::free_bytes() const {
  MutexLock lock(&state_->mu);
  return state_->free_granules * kGranule;
}

std::unique_ptr<PhysicalMemory> NewHugePageUpstream(PagePolicy policy, bool touchable,
                                                    HugePageBudget* budget) {
  return std::make_unique<HugePageMemory>(policy, touchable, budget);
}

std::unique_ptr<PhysicalMemory> NewDvppUpstream(PagePolicy policy, bool touchable,
                                                HugePageBudget* budget, DvppWindow& window) {
  return std::make_unique<DvppMemory>(policy, touchable, budget, window);
}

}  // namespace streampool::internal

namespace streampool {

std::unique_ptr<PhysicalMemory> NewHugePageMemory(PagePolicy policy, bool touchable) {
  return internal::NewHugePageUpstream(policy, touchable, nullptr);
}

}  // namespace streampool
