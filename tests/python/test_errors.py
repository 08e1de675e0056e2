"""Errors and exceptions: every failure is an sp.Error whose code is the C
API's name for it, an allocation without memory is also a MemoryError, and a
failed call changes nothing (stats equal before and after)."""

import pickle
import threading
import time

import pytest

import streampool as sp
from conftest import CHUNK, MiB


def test_error_classes():
    assert issubclass(sp.Error, Exception)
    assert issubclass(sp.OutOfMemoryError, sp.Error)
    assert issubclass(sp.OutOfMemoryError, MemoryError)
    e = sp.Error("spErrorInvalidValue", "bad")
    assert (e.code, e.message, str(e)) == ("spErrorInvalidValue", "bad", "spErrorInvalidValue: bad")
    copy = pickle.loads(pickle.dumps(sp.OutOfMemoryError("spErrorMemoryAllocation", "x")))
    assert isinstance(copy, sp.OutOfMemoryError) and copy.code == "spErrorMemoryAllocation"


def test_out_of_memory_is_a_memory_error_and_changes_nothing(rt):
    s = rt.create_stream()
    pool = rt.default_pool()
    before = pool.stats()
    with pytest.raises(MemoryError) as err:
        rt.malloc_async(1 << 40, s)  # beyond the 64 MiB device
    assert isinstance(err.value, sp.OutOfMemoryError)
    assert err.value.code == "spErrorMemoryAllocation"
    assert err.value.message
    after = pool.stats()
    assert after.pop("failed_alloc_count") == before.pop("failed_alloc_count") + 1
    assert after == before


def test_bad_device_is_invalid_device(rt):
    with pytest.raises(sp.Error) as err:
        rt.create_stream(device=3)
    assert err.value.code == "spErrorInvalidDevice"
    assert not isinstance(err.value, MemoryError)


def test_double_free_is_invalid_value_and_leaves_the_pool_unchanged(rt):
    s = rt.create_stream()
    pool = rt.default_pool()
    a = rt.malloc_async(MiB, s)
    rt.free_async(a, s)
    before = pool.stats()
    with pytest.raises(sp.Error) as err:
        rt.free_async(a, s)
    assert err.value.code == "spErrorInvalidValue"
    assert pool.stats() == before
    with pytest.raises(sp.Error) as err:
        rt.free_async(a.ptr + 4096, s)  # a foreign pointer
    assert err.value.code == "spErrorInvalidValue"
    assert pool.stats() == before


def test_destroyed_handles_are_invalid_resource_handles(rt):
    s = rt.create_stream()
    s.destroy()
    with pytest.raises(sp.Error) as err:
        rt.malloc_async(MiB, s)
    assert err.value.code == "spErrorInvalidResourceHandle"
    pool = rt.create_pool()
    pool.destroy()
    with pytest.raises(sp.Error) as err:
        pool.stats()
    assert err.value.code == "spErrorInvalidResourceHandle"
    with pytest.raises(sp.Error) as err:
        rt.default_pool().destroy()  # a default pool cannot be destroyed
    assert err.value.code == "spErrorInvalidValue"
    with pytest.raises(sp.Error):
        rt.legacy_stream().destroy()  # nor can the legacy stream
    rt.legacy_stream().synchronize()


def test_context_managers_destroy_and_close():
    with sp.Runtime() as rt:
        with rt.create_stream() as s:
            kept = s
            a = rt.malloc_async(MiB, s)
            rt.free_async(a, s)
        with pytest.raises(sp.Error):
            kept.synchronize()
        with rt.create_event() as e:
            e.record(rt.legacy_stream())
            assert e.query()
    assert rt.closed
    with pytest.raises(sp.Error) as err:
        rt.create_stream()
    assert err.value.code == "spErrorInvalidResourceHandle"
    with pytest.raises(sp.Error):
        kept.synchronize()


def test_bad_names_and_values(rt):
    for call in (lambda: rt.create_pool(kind="gpu"),
                 lambda: rt.create_pool(growth="sideways"),
                 lambda: rt.create_pool(page_policy="any"),
                 lambda: sp.Runtime(backing="disk"),
                 lambda: sp.Runtime(devices=0)):
        with pytest.raises(sp.Error) as err:
            call()
        assert err.value.code == "spErrorInvalidValue", err.value
    pool = rt.default_pool()
    with pytest.raises(sp.Error) as err:
        pool.release_threshold = "some"
    assert err.value.code == "spErrorInvalidValue"
    with pytest.raises(sp.Error) as err:
        rt.create_stream(0)  # keyword only, as documented
    assert err.value.code == "spErrorInvalidValue"
    with pytest.raises(sp.Error) as err:
        rt.launch_kernel(rt.legacy_stream(), accesses=[(1, 2)])
    assert err.value.code == "spErrorInvalidValue"


def test_read_only_attributes(rt):
    pool = rt.default_pool()
    with pytest.raises(AttributeError):
        pool.reserved_current = 0


def test_query_is_false_while_pending_and_true_after(rt):
    s = rt.create_stream()
    rt.launch_kernel(s, duration_ns=100)
    e = rt.create_event()
    e.record(s)
    assert not s.query() and not e.query()
    e.synchronize()
    assert s.query() and e.query() and rt.host_now == 100


def test_checker_reports_use_after_free_when_enabled():
    with sp.Runtime() as rt:
        rt.enable_checker()
        s, t = rt.create_stream(), rt.create_stream()
        a = rt.malloc_async(MiB, s)
        rt.free_async(a, s)
        rt.launch_kernel(t, duration_ns=10, accesses=[(a.ptr, 64, False)])
        (report,) = rt.checker_reports()
        assert report["kind"] == "use_after_free"
        assert report["stream"] == t.id and report["other_stream"] == s.id
        assert report["ptr"] == a.ptr and report["size"] == 64
        assert report["message"]
        rt.clear_checker_reports()
        assert rt.checker_reports() == []


def test_gil_is_released_while_synchronize_blocks():
    # Under the threads executor a kernel really lasts its duration. While one
    # Python thread waits in synchronize, another must keep running: it
    # records when it ran, and some of those times must fall well inside the
    # wait. Had synchronize held the GIL, none could.
    with sp.Runtime(executor="threads") as rt:
        s = rt.create_stream()
        rt.launch_kernel(s, duration_ns=300_000_000)
        window = {}

        def wait():
            window["enter"] = time.monotonic()
            s.synchronize()
            window["exit"] = time.monotonic()

        waiter = threading.Thread(target=wait)
        ran = []
        waiter.start()
        while waiter.is_alive():
            ran.append(time.monotonic())
            time.sleep(0.001)
        waiter.join()
        margin = 0.05
        inside = [t for t in ran if window["enter"] + margin < t < window["exit"] - margin]
        assert window["exit"] - window["enter"] >= 0.25
        assert inside, "no Python code ran while synchronize waited"
        assert s.query()


def test_out_of_memory_on_a_full_pool_keeps_earlier_allocations(rt):
    s = rt.create_stream()
    pool = rt.create_pool(max_size=CHUNK)
    a = rt.malloc_async(CHUNK, s, pool=pool)
    with pytest.raises(sp.OutOfMemoryError):
        rt.malloc_async(CHUNK, s, pool=pool)
    assert pool.used_current == CHUNK
    assert rt.pointer_attributes(a.ptr + 10)["base"] == a.ptr
    rt.free_async(a, s)


@pytest.mark.parametrize("value", [-1, 1 << 64, 1.5, True, "lots"])
def test_a_bad_release_threshold_is_an_sp_error(rt, value):
    with pytest.raises(sp.Error) as err:
        rt.create_pool(release_threshold=value)
    assert err.value.code == "spErrorInvalidValue"
    with pytest.raises(sp.Error):
        rt.default_pool().release_threshold = value
