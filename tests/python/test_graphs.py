"""CUDA graphs from Python: capture in a with block, graphs built by hand,
executable graphs, and each device's graph memory with the CUDA guide's
footprint rules (tests/capi/graph_capi_test.cc pins the same rules in C)."""

import numpy as np
import pytest

import streampool as sp
from conftest import MiB


@pytest.fixture
def rt():
    """A simulator runtime with one 1 GiB device (graph memory maps 2 MiB pages)."""
    with sp.Runtime(capacity=1 << 30) as runtime:
        yield runtime


def alloc_kernel_free(rt, nbytes, free=True):
    """alloc -> kernel -> free (or no free), instantiated; the graph destroyed."""
    with rt.create_graph() as g:
        a = g.add_mem_alloc(nbytes)
        k = g.add_kernel(1000, accesses=[(a.dptr, nbytes, True)], deps=[a])
        if free:
            g.add_mem_free(a, deps=[k])
        return g.instantiate(), a.dptr


def test_capture_in_a_with_block_records_instead_of_running(rt):
    s, t = rt.create_stream(), rt.create_stream(non_blocking=True)
    src, mid, dst = np.full(256, 7, np.uint8), np.zeros(256, np.uint8), np.zeros(256, np.uint8)
    fork, join = rt.create_event(), rt.create_event()
    with s.capture(mode="global") as cap:
        assert s.capture_status == "active"
        rt.memcpy_async(mid.ctypes.data, src.ctypes.data, 256, s)
        fork.record(s)
        t.wait_event(fork)  # t joins the capture
        assert t.capture_status == "active"
        rt.memcpy_async(dst.ctypes.data, mid.ctypes.data, 256, t)
        join.record(t)
        s.wait_event(join)  # and is joined back
    assert s.capture_status == t.capture_status == "none"
    assert dst[0] == 0  # nothing ran
    g = cap.graph
    assert [n.type for n in g.nodes()] == ["memcpy", "memcpy"]
    first, second = g.nodes()
    assert g.edges() == [(first, second)]
    with g.instantiate() as x:
        x.upload(s)
        x.launch(s)
        s.synchronize()
    assert dst[255] == 7


def test_runtime_capture_and_captured_memory_nodes(rt):
    s = rt.create_stream()
    pool = rt.default_pool()
    with rt.capture(s, mode="relaxed") as cap:
        a = rt.malloc_async(3 * MiB, s)
        rt.launch_kernel(s, duration_ns=100, accesses=[a])
        rt.free_async(a, s)
    assert [n.type for n in cap.graph.nodes()] == ["mem_alloc", "kernel", "mem_free"]
    assert pool.stats()["alloc_count"] == 0  # the pool is untouched
    x = cap.graph.instantiate()
    x.launch(s)
    s.synchronize()
    assert rt.graph_memory()["used_current"] == 4 * MiB  # 2 MiB pages


def test_hand_built_graph_with_a_memory_node(rt):
    s = rt.create_stream()
    ran = []
    with rt.create_graph() as g:
        a = g.add_mem_alloc(2 * MiB, device=0)
        assert a.type == "mem_alloc" and a.dptr
        k = g.add_kernel(500, accesses=[(a.dptr, 2 * MiB, True)], deps=[a])
        h = g.add_host(lambda: ran.append("host"), deps=[k])
        e = g.add_empty()
        f = g.add_mem_free(a, deps=[h])
        g.add_dependencies([(e, f)])
        assert f.type == "mem_free" and f.dptr is None
        assert g.root_nodes() == [a, e]
        assert set(f.dependencies()) == {h, e}
        assert k.dependents() == [h]
        assert len(g.edges()) == 4
        x = g.instantiate()
    x.launch(s)
    s.synchronize()
    assert ran == ["host"]
    x.destroy()
    x.destroy()  # twice is not an error


def test_every_other_node_kind(rt):
    s = rt.create_stream()
    buf = np.zeros(64, np.uint8)
    ev = rt.create_event()
    child = rt.create_graph()
    child.add_memset(buf.ctypes.data, 5, 64)
    g = rt.create_graph()
    c = g.add_child(child)
    r = g.add_event_record(ev, deps=[c])
    w = g.add_event_wait(ev, deps=[r])
    m = g.add_memcpy(buf.ctypes.data + 32, buf.ctypes.data, 16, deps=[w])
    assert [n.type for n in (c, r, w, m)] == ["graph", "event_record", "wait_event", "memcpy"]
    assert len(g.clone().nodes()) == 4
    g.instantiate().launch(s)
    s.synchronize()
    assert buf[63] == 5 and ev.query()


def test_external_records_and_waits_are_event_nodes(rt):
    s, other = rt.create_stream(), rt.create_stream(non_blocking=True)
    inside, outside = rt.create_event(), rt.create_event()
    with s.capture() as cap:
        s.wait_event(outside, external=True)  # no join: a node
        rt.launch_kernel(s, duration_ns=100)
        inside.record(s, external=True)
    assert [n.type for n in cap.graph.nodes()] == ["wait_event", "kernel", "event_record"]
    rt.launch_kernel(other, duration_ns=10_000)
    outside.record(other)
    cap.graph.instantiate().launch(s)
    s.synchronize()
    assert other.query() and inside.query()
    with pytest.raises(sp.Error):
        with s.capture():
            s.wait_event(outside)  # without the flag: outside the capture's isolation


# "The first graph launched reserves the memory it needs"; relaunches and
# other graphs launched after it in the same stream reuse it.
def test_launch_grows_the_footprint_once_and_relaunches_reuse_it(rt):
    s = rt.create_stream()
    execs = [alloc_kernel_free(rt, 64 * MiB)[0] for _ in range(3)]
    assert rt.graph_memory()["reserved_current"] == 0  # instantiating maps nothing
    execs[0].launch(s)
    assert rt.graph_memory()["used_current"] == 64 * MiB
    for x in execs + execs:
        x.launch(s)
        assert rt.graph_memory()["reserved_current"] == 64 * MiB
    s.synchronize()
    assert rt.graph_memory()["reserved_high"] == 64 * MiB
    # The memory snapshot shows graph memory beside the pools' segments.
    snap = rt.memory_snapshot()
    assert snap["graph_memory"][0]["reserved_current"] == 64 * MiB
    assert all(seg["total_size"] != 64 * MiB for seg in snap["segments"])


# "CUDA cannot reuse physical memory from graphs which do not free their
# allocations"; trimming does not shrink what unfreed allocations hold;
# freeing does not either, a trim after the frees does.
def test_an_unfreed_allocation_holds_its_memory_until_freed_and_trimmed(rt):
    s = rt.create_stream()
    made = [alloc_kernel_free(rt, 64 * MiB, free=False) for _ in range(2)]
    for i, (x, _) in enumerate(made):
        x.launch(s)
        assert rt.graph_memory()["used_current"] == (i + 1) * 64 * MiB
    s.synchronize()
    rt.trim_graph_memory()
    assert rt.graph_memory()["used_current"] == 128 * MiB
    with pytest.raises(sp.Error) as err:
        made[0][0].launch(s)  # its last launch's allocation is live
    assert err.value.code == "spErrorInvalidValue"
    for _, dptr in made:
        rt.free_async(dptr, s)
    s.synchronize()
    assert rt.graph_memory()["used_current"] == 128 * MiB
    for x, _ in made:
        x.destroy()
    rt.trim_graph_memory(device=0)
    stats = rt.graph_memory(device=0)
    assert stats["used_current"] == stats["reserved_current"] == 0
    assert stats["used_high"] == 128 * MiB
    rt.reset_graph_memory_high(which="used")
    assert rt.graph_memory()["used_high"] == 0
    assert rt.graph_memory()["reserved_high"] == 128 * MiB
    rt.reset_graph_memory_high(device=0, which="reserved")
    assert rt.graph_memory()["reserved_high"] == 0


def test_auto_free_on_launch_frees_the_last_launchs_allocation(rt):
    s = rt.create_stream()
    g = rt.create_graph()
    a = g.add_mem_alloc(2 * MiB)
    x = g.instantiate(auto_free_on_launch=True)
    x.launch(s)
    x.launch(s)
    s.synchronize()
    assert rt.graph_memory()["used_current"] == 2 * MiB
    rt.free(a)


def test_capture_errors_raise_the_modules_error_with_the_cuda_code(rt):
    s = rt.create_stream()
    with pytest.raises(sp.Error) as err:
        with s.capture():
            with pytest.raises(sp.Error) as inner:
                s.synchronize()
            assert inner.value.code == "spErrorStreamCaptureUnsupported"
            assert s.capture_status == "invalidated"
            with pytest.raises(sp.Error) as inner:
                rt.launch_kernel(s, duration_ns=1)
            assert inner.value.code == "spErrorStreamCaptureInvalidated"
    assert err.value.code == "spErrorStreamCaptureInvalidated"
    assert s.capture_status == "none"

    with pytest.raises(sp.Error) as err:
        with rt.legacy_stream().capture():
            pass
    assert err.value.code == "spErrorStreamCaptureUnsupported"

    cap = s.capture()
    with cap:
        with pytest.raises(sp.Error) as err:
            s.capture().__enter__()
        assert err.value.code == "spErrorIllegalState"

    t = rt.create_stream()
    e = rt.create_event()
    with pytest.raises(sp.Error) as err:
        with s.capture():
            e.record(s)
            t.wait_event(e)
            rt.launch_kernel(t, duration_ns=1)
    assert err.value.code == "spErrorStreamCaptureUnjoined"

    with pytest.raises(sp.Error) as err:
        s.capture(mode="sometimes")
    assert err.value.code == "spErrorInvalidValue"


def test_an_exception_in_the_block_wins_and_ends_the_capture(rt):
    s = rt.create_stream()
    with pytest.raises(ValueError):
        with s.capture():
            rt.launch_kernel(s, duration_ns=1)
            raise ValueError("not an Error of the capture's")
    assert s.capture_status == "none"


def test_destroyed_and_refused_graphs(rt):
    s = rt.create_stream()
    g = rt.create_graph()
    a = g.add_mem_alloc(MiB)
    x = g.instantiate()
    for call, code in [(g.instantiate, "spErrorInvalidValue"),
                       (g.clone, "spErrorNotSupported"),
                       (lambda: rt.create_graph().add_child(g), "spErrorNotSupported"),
                       (lambda: g.add_mem_free(a, deps=[a, a]), "spErrorInvalidValue"),
                       (lambda: g.add_empty(deps=[rt.create_graph().add_empty()]),
                        "spErrorInvalidValue"),
                       (lambda: rt.reset_graph_memory_high(which="both"), "spErrorInvalidValue"),
                       (lambda: rt.graph_memory(device=3), "spErrorInvalidDevice")]:
        with pytest.raises(sp.Error) as err:
            call()
        assert err.value.code == code, call
    x.destroy()
    g.destroy()
    g.destroy()  # twice is not an error
    for call in (g.nodes, lambda: g.add_empty(), lambda: a.type, g.instantiate,
                 lambda: x.launch(s)):
        with pytest.raises(sp.Error) as err:
            call()
        assert err.value.code == "spErrorInvalidResourceHandle"


def test_update_takes_new_parameters_of_the_same_topology(rt):
    s = rt.create_stream()
    buf = np.zeros(16, np.uint8)
    g, h = rt.create_graph(), rt.create_graph()
    g.add_memset(buf.ctypes.data, 1, 16)
    h.add_memset(buf.ctypes.data, 2, 16)
    x = g.instantiate()
    x.update(h)
    x.launch(s)
    s.synchronize()
    assert buf[0] == 2
    h.add_empty()
    with pytest.raises(sp.Error) as err:
        x.update(h)
    assert err.value.code == "spErrorGraphExecUpdateFailure"


@pytest.mark.parametrize("executor", ["simulator", "threads"])
def test_host_nodes_run_python_with_the_gil(executor):
    ran = []
    with sp.Runtime(executor=executor) as rt:
        s = rt.create_stream()
        g = rt.create_graph()
        first = g.add_host(lambda: ran.append(1))
        g.add_host(lambda: ran.append(2), deps=[first])
        x = g.instantiate()
        for _ in range(3):
            x.launch(s)
        s.synchronize()
        x.launch(s)  # still pending when the runtime closes
    assert ran[:6] == [1, 2] * 3
