"""The CUDA programming guide's stream-ordered allocator scenarios (F.3,
F.7, F.8, F.9.1-F.9.3, F.12) in Python, one test each: the decision the guide
describes, the rule that made it (Allocation.rule) and the bytes that follow.
The C++ conformance suite (tests/pool/scenarios_test.cc) pins the same
decisions for every pool variant; these pin that the binding reports them.
"""

import pytest

import streampool as sp
from conftest import CHUNK, MiB, rule_counts


def kernel(rt, stream, ns, alloc):
    rt.launch_kernel(stream, duration_ns=ns, accesses=[alloc])


def used_then_freed(rt, stream, pool=None):
    """A whole chunk used by a 1000-ns kernel and freed, all on `stream`."""
    a = rt.malloc_async(CHUNK, stream, pool=pool)
    kernel(rt, stream, 1000, a)
    rt.free_async(a, stream)
    return a


def ordered_after(rt, other, original):
    """other waits for an event recorded on original (the guide's F.9.1)."""
    e = rt.create_event()
    e.record(original)
    other.wait_event(e)


def test_f3_same_stream_reuses_its_own_free_at_once(rt):
    s = rt.create_stream()
    pool = rt.default_pool()
    a = rt.malloc_async(CHUNK, s)
    assert a.rule == "fresh" and a.size == CHUNK and a.ptr != 0
    assert a.pool == pool and a.stream == s
    kernel(rt, s, 1000, a)
    rt.free_async(a, s)
    b = rt.malloc_async(CHUNK, s)
    assert (b.ptr, b.rule) == (a.ptr, "same_stream")
    assert pool.reserved_current == CHUNK
    rt.free_async(b, s)


def test_f91_event_dependency_reuses_before_the_kernel_ends(rt):
    original, other = rt.create_stream(), rt.create_stream()
    a = used_then_freed(rt, original)
    ordered_after(rt, other, original)
    # Host time 0: only the event order can justify the reuse.
    assert rt.host_now == 0
    b = rt.malloc_async(CHUNK, other)
    assert (b.ptr, b.rule) == (a.ptr, "event_dependency")
    pool = rt.default_pool()
    assert pool.stats()["waits_inserted"] == 0
    kernel(rt, other, 10, b)
    other.synchronize()
    assert rt.host_now == 1010  # other's kernel ran after original's
    rt.free_async(b, other)


def test_f91_policy_off_grows_despite_the_wait(rt):
    pool = rt.default_pool()
    pool.reuse_follow_event_dependencies = False
    pool.wait_before_growth = False  # CUDA's order: growth before any wait
    assert pool.reuse_follow_event_dependencies is False
    original, other = rt.create_stream(), rt.create_stream()
    a = used_then_freed(rt, original)
    ordered_after(rt, other, original)
    b = rt.malloc_async(CHUNK, other)
    assert b.ptr != a.ptr and b.rule == "fresh"
    assert pool.reserved_current == 2 * CHUNK
    rt.free_async(b, other)


def test_f92_opportunistic_once_the_kernel_has_finished(rt):
    original, other = rt.create_stream(), rt.create_stream()
    a = used_then_freed(rt, original)
    rt.host_advance(999)
    assert not original.query()  # one nanosecond early: still running
    rt.host_advance(1)
    b = rt.malloc_async(CHUNK, other)
    assert (b.ptr, b.rule) == (a.ptr, "opportunistic")
    assert rule_counts(rt.default_pool()) == {
        "same_stream": 0, "event_dependency": 0, "opportunistic": 1, "after_sync": 0,
        "internal_dependency": 0, "fresh": 1}
    rt.free_async(b, other)


def test_f91_policy_off_the_default_waits_where_it_delays_nothing(rt):
    # Beyond the guide: waiting before growth (on by default). other's next
    # op starts after original's free anyway, so the pool waits rather than
    # grow, and says so.
    pool = rt.default_pool()
    pool.reuse_follow_event_dependencies = False
    assert pool.wait_before_growth is True
    original, other = rt.create_stream(), rt.create_stream()
    a = used_then_freed(rt, original)
    ordered_after(rt, other, original)
    b = rt.malloc_async(CHUNK, other)
    assert (b.ptr, b.rule) == (a.ptr, "internal_dependency")
    assert pool.reserved_current == CHUNK
    stats = pool.stats()
    assert (stats["waits_inserted"], stats["waits_before_growth"]) == (1, 1)
    rt.free_async(b, other)


def test_f92_policy_off_grows_until_a_sync(rt):
    pool = rt.default_pool()
    pool.reuse_allow_opportunistic = False
    pool.wait_before_growth = False  # CUDA's order
    pool.release_threshold = "max"  # keep what the sync makes free
    assert pool.release_threshold == sp.MAX
    original, other = rt.create_stream(), rt.create_stream()
    a = used_then_freed(rt, original)
    rt.host_advance(2000)
    b = rt.malloc_async(CHUNK, other)
    assert b.ptr != a.ptr and b.rule == "fresh"
    original.synchronize()
    c = rt.malloc_async(CHUNK, other)
    assert (c.ptr, c.rule) == (a.ptr, "after_sync")
    rt.free_async(b, other)
    rt.free_async(c, other)


def test_f93_internal_dependency_when_max_size_blocks_growth(rt):
    pool = rt.create_pool(max_size=CHUNK)
    original, other = rt.create_stream(), rt.create_stream()
    a = rt.malloc_async(CHUNK, original, pool=pool)  # the pool is now full
    kernel(rt, original, 1000, a)
    rt.free_async(a, original)
    b = rt.malloc_async(CHUNK, other, pool=pool)
    assert (b.ptr, b.rule) == (a.ptr, "internal_dependency")
    assert pool.stats()["waits_inserted"] == 1
    kernel(rt, other, 10, b)
    rt.host_advance(1005)
    assert not other.query()  # other's kernel waits for the free: [1000, 1010)
    other.synchronize()
    assert rt.host_now == 1010
    rt.free_async(b, other)


def test_f93_policy_off_fails_with_out_of_memory(rt):
    pool = rt.create_pool(max_size=CHUNK, reuse_allow_internal_dependencies=False)
    original, other = rt.create_stream(), rt.create_stream()
    a = used_then_freed(rt, original, pool=pool)
    with pytest.raises(sp.OutOfMemoryError) as err:
        rt.malloc_async(CHUNK, other, pool=pool)
    assert err.value.code == "spErrorMemoryAllocation"
    assert pool.stats()["failed_alloc_count"] == 1
    assert pool.stats()["waits_inserted"] == 0


def test_f7_threshold_zero_releases_at_sync_and_max_keeps(rt):
    s = rt.create_stream()
    pool = rt.default_pool()
    a = rt.malloc_async(CHUNK, s)
    rt.free_async(a, s)
    s.synchronize()
    assert pool.reserved_current == 0 and pool.reserved_high == CHUNK

    pool.release_threshold = "max"
    a = rt.malloc_async(CHUNK, s)
    rt.free_async(a, s)
    s.synchronize()
    assert pool.reserved_current == CHUNK
    pool.trim_to(0)
    assert pool.reserved_current == 0


def test_f8_four_attributes_and_watermark_reset(rt):
    s = rt.create_stream()
    pool = rt.default_pool()
    pool.release_threshold = "max"
    a = rt.malloc_async(3 * MiB, s)
    b = rt.malloc_async(1 * MiB, s)
    assert pool.used_current == 4 * MiB
    rt.free_async(a, s)
    s.synchronize()
    assert (pool.used_current, pool.used_high) == (1 * MiB, 4 * MiB)
    assert pool.reserved_current == pool.reserved_high >= 4 * MiB
    pool.reset_high()
    assert pool.used_high == 1 * MiB
    stats = pool.stats()
    assert stats["used_bytes"] == pool.used_current
    assert stats["reserved_bytes"] == pool.reserved_current
    rt.free_async(b, s)


def test_f12_device_synchronize_makes_frees_reusable_regardless_of_policies(rt):
    pool = rt.create_pool(reuse_follow_event_dependencies=False, reuse_allow_opportunistic=False,
                          reuse_allow_internal_dependencies=False, release_threshold="max")
    original, other = rt.create_stream(), rt.create_stream()
    a = used_then_freed(rt, original, pool=pool)
    rt.device_synchronize()
    b = rt.malloc_async(CHUNK, other, pool=pool)
    assert (b.ptr, b.rule) == (a.ptr, "after_sync")
    rt.free_async(b, other)


def test_current_pool_serves_malloc_async(rt):
    pool = rt.create_pool(max_size=4 * MiB)
    rt.set_current_pool(pool)
    assert rt.current_pool() == pool
    s = rt.create_stream()
    a = rt.malloc_async(CHUNK, s)
    assert a.pool == pool
    assert pool.used_current == CHUNK and rt.default_pool().used_current == 0
    rt.free_async(a, s)


def test_pool_kinds_and_growth(rt):
    chunked = rt.create_pool(growth="chunked")
    assert chunked.growth == "chunked" and chunked.kind == "device"
    assert rt.default_pool().growth == "expandable"
    pinned = rt.create_pool(kind="pinned_host")
    s = rt.create_stream()
    a = rt.malloc_async(4096, s, pool=pinned)
    assert a.pool.kind == "pinned_host"
    rt.free_async(a, s)
    s.synchronize()
