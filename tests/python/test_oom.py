"""Out of memory, handled: the runtime's reclaim of READY memory before an
allocation fails, the embedder's handler (which may free and ask for one
more try), and the statistics under torch.cuda.memory_stats()'s names."""

import pytest

import streampool as sp
from conftest import MiB


def test_handler_frees_and_the_allocation_succeeds():
    with sp.Runtime(capacity=64 * MiB) as rt:
        s = rt.create_stream()
        held = [rt.malloc_async(40 * MiB, s)]
        calls = []

        def handler(pool, size):
            calls.append((pool, size))
            if not held:
                return False
            rt.free_async(held.pop(), s)  # the API, from inside the handler
            rt.device_synchronize()
            return True

        rt.set_oom_handler(handler)
        a = rt.malloc_async(40 * MiB, s)
        assert len(calls) == 1
        assert calls[0][0] == rt.default_pool() and calls[0][1] == 40 * MiB
        stats = rt.default_pool().stats()
        assert stats["oom_retries"] == stats["num_alloc_retries"] == 1
        assert stats["oom_count"] == stats["num_ooms"] == 0
        rt.free_async(a, s)


def test_a_handler_that_gives_up_or_raises_lets_the_allocation_fail():
    with sp.Runtime(capacity=16 * MiB) as rt:
        s = rt.create_stream()
        held = rt.malloc_async(12 * MiB, s)
        rt.set_oom_handler(lambda pool, size: False)
        with pytest.raises(sp.OutOfMemoryError):
            rt.malloc_async(8 * MiB, s)

        def broken(pool, size):
            raise RuntimeError("the handler's own bug")

        rt.set_oom_handler(broken)
        with pytest.raises(sp.OutOfMemoryError):
            rt.malloc_async(8 * MiB, s)
        assert rt.default_pool().stats()["num_ooms"] == 2
        rt.set_oom_handler(None)
        with pytest.raises(sp.Error):
            rt.set_oom_handler(42)
        rt.free_async(held, s)


def test_reclaim_is_on_by_default_and_can_be_turned_off():
    for reclaim in (True, False):
        with sp.Runtime(capacity=64 * MiB, oom_reclaim=reclaim) as rt:
            s = rt.create_stream()
            keep = rt.create_pool(release_threshold="max")
            other = rt.create_pool(release_threshold="max")
            a = rt.malloc_async(40 * MiB, s, pool=keep)
            rt.free_async(a, s)
            rt.device_synchronize()
            if reclaim:
                b = rt.malloc_async(40 * MiB, s, pool=other)
                assert keep.stats()["reclaims"] == 1
                assert keep.stats()["reserved_bytes.all.current"] == 0
                rt.free_async(b, s)
            else:
                with pytest.raises(sp.OutOfMemoryError):
                    rt.malloc_async(40 * MiB, s, pool=other)
                assert keep.stats()["reserved_bytes"] == 40 * MiB


def test_stats_under_torch_names():
    with sp.Runtime(capacity=64 * MiB) as rt:
        s = rt.create_stream()
        a = rt.malloc_async(1000, s)
        st = rt.default_pool().stats()
        assert st["requested_bytes.all.current"] == st["requested_bytes"] == 1000
        assert st["allocated_bytes.all.current"] == st["used_bytes"]
        assert st["segment.all.current"] == st["segments"] == 1
        assert st["segment.all.peak"] == 1
        rt.free_async(a, s)
