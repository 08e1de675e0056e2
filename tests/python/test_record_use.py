"""Multi-stream frees from Python: record_use() in the spirit of PyTorch's
record_stream, seen through the checker and the pool's snapshot."""

import pytest

import streampool as sp
from conftest import MiB


def _state(pool, alloc):
    for seg in pool.snapshot()["segments"]:
        for b in seg["blocks"]:
            if b["address"] == alloc.ptr:
                return b["state"]
    return None


def test_a_block_another_stream_used_waits_for_both():
    with sp.Runtime(capacity=64 * MiB) as rt:
        rt.enable_checker()
        s1, s2, s3 = rt.create_stream(), rt.create_stream(), rt.create_stream()
        pool = rt.create_pool(release_threshold="max")
        a = rt.malloc_async(2 * MiB, s1, pool=pool)
        e = rt.create_event()
        e.record(s1)
        s2.wait_event(e)
        rt.launch_kernel(s2, duration_ns=1_000_000, accesses=[a])
        rt.record_use(a, s2)
        rt.free_async(a, s1)
        assert rt.checker_reports() == []
        assert _state(pool, a) == "awaiting_uses"
        b = rt.malloc_async(2 * MiB, s1, pool=pool)
        assert b.ptr != a.ptr
        s1.synchronize()
        assert _state(pool, a) == "awaiting_uses"
        s2.synchronize()
        assert _state(pool, a) == "ready"
        c = rt.malloc_async(2 * MiB, s3, pool=pool)
        assert c.ptr == a.ptr and c.rule == "after_sync"
        # PyTorch's viewer sees the block as pending free meanwhile.
        for x in (b, c):
            rt.free_async(x, s3)


def test_memory_snapshot_names_awaiting_blocks_pending_free():
    with sp.Runtime(capacity=64 * MiB) as rt:
        s1, s2 = rt.create_stream(), rt.create_stream()
        a = rt.malloc_async(2 * MiB, s1)
        rt.launch_kernel(s2, duration_ns=1000)
        rt.record_use(a, s2)
        rt.free_async(a, s1)
        states = [b["state"] for seg in rt.memory_snapshot()["segments"] for b in seg["blocks"]
                  if b["address"] == a.ptr]
        assert states == ["active_pending_free"]


def test_record_use_refuses_what_is_not_a_live_allocation():
    with sp.Runtime(capacity=64 * MiB) as rt:
        s1, s2 = rt.create_stream(), rt.create_stream()
        a = rt.malloc_async(4096, s1)
        with pytest.raises(sp.Error):
            rt.record_use(a.ptr + 1, s2)
        rt.free_async(a, s1)
        with pytest.raises(sp.Error):
            rt.record_use(a, s2)
