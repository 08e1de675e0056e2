/// \file
/// PoolResource: a std::pmr::memory_resource over one pool and one stream.
///
/// Standard containers then allocate stream-ordered memory:
///
/// \code
/// streampool::PoolResource mr(*rt, pool, stream,
///                             streampool::PoolResource::PoolAlignment(props));
/// std::pmr::vector<float> v(&mr);   // MallocFromPoolAsync(..., pool, stream)
/// v.resize(1 << 20);                // the old buffer: FreeAsync(..., stream)
/// \endcode
///
/// Every allocation is MallocFromPoolAsync(bytes, pool, stream) and every
/// deallocation FreeAsync(ptr, stream): the memory is in stream order of that
/// one stream. The host may read and write it at once (with Host backing) as
/// long as no work enqueued earlier on the stream still touches the same bytes
/// — true when the stream's work never touches this resource's memory, or
/// after a StreamSynchronize; otherwise the memory is for the stream's work, as
/// in CUDA. Work on other streams must be ordered after the allocation (an
/// event) before it touches the memory, and the deallocation after their last
/// access.
///
/// Alignment. Pools hand out blocks that start at a multiple of their granule:
/// 256 B for Device and HugePage pools, 128 B for Dvpp, 64 B for PinnedHost,
/// 32 B with acl_rounding (PoolAlignment() below). The resource is told that
/// guarantee at construction (default kMinPoolAlignment, which every pool
/// keeps). A request with an alignment up to it is served as is; a larger one
/// over-allocates by (alignment - pool alignment) bytes and returns the first
/// aligned address inside the block (deallocation finds the block again with
/// GetPointerAttributes). A resource told a larger guarantee than its pool
/// keeps never returns misaligned memory: it throws std::bad_alloc instead.
///
/// Errors: allocation failures (the pool's maxSize or the device's capacity, a
/// destroyed pool or stream, a size that cannot be represented) throw
/// std::bad_alloc, as memory_resource requires. A deallocation the runtime
/// refuses (the stream was destroyed first, or the pointer was never handed
/// out) aborts the process with the runtime's message: it cannot be reported,
/// and leaking silently would hide the bug.
///
/// Lifetime: the Runtime must outlive the resource, and the stream must stay
/// alive until every allocation has been returned. The resource is thread-safe
/// (every call is one Runtime call).
#ifndef STREAMPOOL_POOL_RESOURCE_H_
#define STREAMPOOL_POOL_RESOURCE_H_

#include <cstddef>
#include <memory_resource>

#include "streampool/export.h"
#include "streampool/pool_props.h"
#include "streampool/runtime.h"

namespace streampool {

/// A std::pmr::memory_resource that allocates from pool `pool` in stream order
/// of stream `stream` (see the file comment for alignment, errors and
/// lifetime).
class STREAMPOOL_EXPORT PoolResource : public std::pmr::memory_resource {
 public:
  /// The alignment every pool keeps (the ACL rounding rule's 32 B granule).
  static constexpr std::size_t kMinPoolAlignment = 32;

  /// The alignment at which blocks of a pool created with `props` start:
  /// 256 (Device, HugePage), 128 (Dvpp), 64 (PinnedHost), 32 with
  /// acl_rounding. A pool over a custom upstream keeps the same guarantee
  /// (upstreams return memory aligned to at least 256 B).
  static std::size_t PoolAlignment(const PoolProps& props);

  /// Binds the resource to `runtime`, `pool` and `stream`; nothing is checked
  /// or allocated until the first allocation. `pool_alignment` (a power of two,
  /// at least kMinPoolAlignment) is the alignment the pool guarantees, best
  /// given as PoolAlignment(props); smaller values only cost over-allocation
  /// for over-aligned requests. Any other value (not a power of two, or below
  /// kMinPoolAlignment) is taken as kMinPoolAlignment.
  PoolResource(Runtime& runtime, PoolId pool, StreamId stream,
               std::size_t pool_alignment = kMinPoolAlignment);

  /// The runtime the resource allocates from.
  Runtime& runtime() const { return *runtime_; }
  /// The pool every allocation comes from.
  PoolId pool() const { return pool_; }
  /// The stream every allocation and deallocation is ordered on.
  StreamId stream() const { return stream_; }
  /// The alignment the resource relies on the pool to keep.
  std::size_t pool_alignment() const { return pool_alignment_; }

 protected:
  /// MallocFromPoolAsync(max(bytes, 1), pool, stream), over-allocating for
  /// alignments above pool_alignment(). Throws std::bad_alloc on failure
  /// (and for an alignment that is not a power of two).
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  /// FreeAsync(block, stream). Aborts if the runtime refuses the free.
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  /// True for a PoolResource of the same runtime (C handle), pool and stream:
  /// either can deallocate what the other allocated.
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override;

 private:
  Runtime* runtime_;
  PoolId pool_;
  StreamId stream_;
  std::size_t pool_alignment_;
};

}  // namespace streampool

#endif  // STREAMPOOL_POOL_RESOURCE_H_
