// PoolResource: std::pmr over MallocFromPoolAsync / FreeAsync on one stream.
#include "streampool/pool_resource.h"

#include <bit>
#include <cstdint>
#include <new>

#include "absl/base/internal/raw_logging.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/pool/pool_config.h"

namespace streampool {

namespace {

bool IsValidPoolAlignment(std::size_t a) {
  return std::has_single_bit(a) && a >= PoolResource::kMinPoolAlignment;
}

}  // namespace

std::size_t PoolResource::PoolAlignment(const PoolProps& props) {
  // Block starts are multiples of the size rule's granule
  // (src/pool/pool_config.h, the pools' own table).
  if (!internal::VariantConfig(props.alloc_type)) return kMinPoolAlignment;
  return static_cast<std::size_t>(internal::RuleOf(props).granule);
}

PoolResource::PoolResource(Runtime& runtime, PoolId pool, StreamId stream,
                           std::size_t pool_alignment)
    : runtime_(&runtime),
      pool_(pool),
      stream_(stream),
      pool_alignment_(IsValidPoolAlignment(pool_alignment) ? pool_alignment : kMinPoolAlignment) {}

void* PoolResource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (!std::has_single_bit(alignment)) throw std::bad_alloc();
  // allocate(0) must still return a pointer the caller may deallocate; the
  // pool answers size 0 with null, so ask for one byte.
  const uint64_t want = bytes == 0 ? 1 : bytes;
  if (alignment <= pool_alignment_) {
    absl::StatusOr<AllocInfo> a = runtime_->MallocFromPoolAsync(want, pool_, stream_);
    if (!a.ok()) throw std::bad_alloc();
    if (reinterpret_cast<uintptr_t>(a->ptr) % alignment != 0) {
      // The pool keeps less than pool_alignment_ promised: give the block back
      // rather than hand out misaligned memory.
      runtime_->FreeAsync(a->ptr, stream_).IgnoreError();
      throw std::bad_alloc();
    }
    return a->ptr;
  }
  // Over-aligned: the block starts at a multiple of pool_alignment_, so the
  // first multiple of `alignment` inside it is at most this far in.
  const uint64_t pad = alignment - pool_alignment_;
  if (want > UINT64_MAX - pad) throw std::bad_alloc();
  absl::StatusOr<AllocInfo> a = runtime_->MallocFromPoolAsync(want + pad, pool_, stream_);
  if (!a.ok()) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(a->ptr);
  const uintptr_t aligned = (base + alignment - 1) & ~(uintptr_t{alignment} - 1);
  if (aligned - base > pad) {
    runtime_->FreeAsync(a->ptr, stream_).IgnoreError();
    throw std::bad_alloc();
  }
  return reinterpret_cast<void*>(aligned);
}

void PoolResource::do_deallocate(void* p, std::size_t /*bytes*/, std::size_t alignment) {
  if (p == nullptr) return;
  void* block = p;
  // Any allocation with an alignment above what every pool keeps may have been
  // over-allocated (by this resource or an equal one told a smaller pool
  // alignment), so its block may start before p: ask the runtime where.
  if (alignment > kMinPoolAlignment) {
    absl::StatusOr<PointerAttributes> attr = runtime_->GetPointerAttributes(p);
    if (attr.ok()) block = attr->base;
  }
  const absl::Status st = runtime_->FreeAsync(block, stream_);
  if (!st.ok()) {
    ABSL_RAW_LOG(FATAL,
                 "streampool::PoolResource: FreeAsync(%p) on stream %llu failed: %s (was the "
                 "stream destroyed, or the pointer not from this resource?)",
                 block, static_cast<unsigned long long>(stream_.value), st.ToString().c_str());
  }
}

bool PoolResource::do_is_equal(const std::pmr::memory_resource& other) const noexcept {
  if (this == &other) return true;
  const auto* o = dynamic_cast<const PoolResource*>(&other);
  // Runtime objects are compared by their C handle: a FromC view and the
  // owner are the same runtime.
  return o != nullptr && o->runtime_->c() == runtime_->c() && o->pool_ == pool_ &&
         o->stream_.value == stream_.value;
}

}  // namespace streampool
