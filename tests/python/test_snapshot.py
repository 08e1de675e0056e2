"""Snapshots in PyTorch's format, read back by the repository's own snapshot
reader (tools/torch_snapshot_to_trace.py), and live allocations."""

import importlib.util
import os
import pickle
import subprocess
import sys

import pytest

import streampool as sp
from conftest import MiB

_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                     "torch_snapshot_to_trace.py")


def _converter():
    spec = importlib.util.spec_from_file_location("torch_snapshot_to_trace", _TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _live_blocks(snapshot):
    """(address, requested, size) of every allocated block, in address order."""
    return sorted((b["address"], b["requested_size"], b["size"])
                  for seg in snapshot["segments"] for b in seg["blocks"]
                  if b["state"] == "active_allocated")


def test_pool_snapshot_names_every_block():
    with sp.Runtime(capacity=256 * MiB) as rt:
        s1, s2 = rt.create_stream(), rt.create_stream()
        pool = rt.create_pool(release_threshold="max")
        live = rt.malloc_async(3 * MiB + 7, s1, pool=pool)
        pending = rt.malloc_async(2 * MiB, s2, pool=pool)
        rt.free_async(pending, s2)
        snap = pool.snapshot()
        blocks = {b["address"]: b for seg in snap["segments"] for b in seg["blocks"]}
        assert blocks[live.ptr]["state"] == "live"
        assert blocks[live.ptr]["requested"] == 3 * MiB + 7
        assert blocks[live.ptr]["stream"] == s1.id
        assert blocks[live.ptr]["alloc_seq"] > 0
        assert blocks[pending.ptr]["state"] == "pending"
        assert blocks[pending.ptr]["stream"] == s2.id
        assert blocks[pending.ptr]["free_point"] > 0
        for seg in snap["segments"]:
            assert sum(b["size"] for b in seg["blocks"]) == seg["size"]
        assert snap["stats"]["used_bytes"] == sum(
            b["size"] for b in blocks.values() if b["state"] == "live")
        rt.device_synchronize()
        states = {b["state"] for seg in pool.snapshot()["segments"] for b in seg["blocks"]}
        assert "pending" not in states
        rt.free_async(live, s1)


def test_pickle_without_history_reads_back_block_for_block(tmp_path):
    with sp.Runtime(capacity=256 * MiB) as rt:
        s1, s2 = rt.create_stream(), rt.create_stream()
        pool = rt.create_pool(growth="expandable", release_threshold="max")
        held = [rt.malloc_async(size, s, pool=pool)
                for size, s in [(1000, s1), (5 * MiB, s2), (3 * MiB + 1, s1), (512, s2)]]
        rt.free_async(held[1], s2)
        rt.device_synchronize()
        pool.trim_to(0)
        path = tmp_path / "memory.pickle"
        rt.dump_snapshot(path)
        with open(path, "rb") as f:
            snapshot = _converter().load_snapshot(f.read())
        assert snapshot == rt.memory_snapshot()
        assert snapshot["device_traces"] == [[]]
        # Unmapped granules of the expandable reservation hold no memory:
        # the PyTorch segments are its mapped runs.
        mapped = sum(seg["mapped_bytes"] for seg in pool.snapshot()["segments"])
        mapped += sum(seg["mapped_bytes"] for seg in rt.default_pool().snapshot()["segments"])
        assert sum(seg["total_size"] for seg in snapshot["segments"]) == mapped

        text = _converter().convert(snapshot)
        # Every live block is an allocation live before the (empty) trace:
        # emitted in address order with its requested size and its block.
        allocs = [line for line in text.splitlines() if line.startswith("alloc ")]
        expected = _live_blocks(snapshot)
        assert len(allocs) == len(expected) == 3
        for line, (address, requested, size) in zip(allocs, expected):
            op, _, comment = line.partition("# torch_block ")
            assert op.split()[2] == str(requested)
            assert comment.split() == [str(address), str(size)]
        segments = [line.split() for line in text.splitlines()
                    if line.startswith("# torch_segment ")]
        assert [(int(f[2]), int(f[3])) for f in segments] == sorted(
            (seg["address"], seg["total_size"]) for seg in snapshot["segments"])
        for a in (held[0], held[2], held[3]):
            rt.free_async(a, s1)


def test_pickle_with_history_replays_the_allocations(tmp_path):
    with sp.Runtime(capacity=256 * MiB, timeline=True) as rt:
        s1, s2 = rt.create_stream(), rt.create_stream()
        sizes = [4096, 2 * MiB, 777, 6 * MiB]
        allocs = []
        for i, size in enumerate(sizes):
            allocs.append((rt.malloc_async(size, s1 if i % 2 else s2), s1 if i % 2 else s2))
            rt.host_advance(3000)
        rt.free_async(*allocs[0])
        rt.free_async(*allocs[3])
        path = tmp_path / "history.pickle"
        rt.dump_snapshot(path)
        out = tmp_path / "history.trace"
        subprocess.run([sys.executable, _TOOL, str(path), "-o", str(out)], check=True)
        ops = [line.split() for line in out.read_text().splitlines()
               if line and not line.startswith("#")]
        trace_allocs = [op for op in ops if op[0] == "alloc"]
        assert [int(op[2]) for op in trace_allocs] == sizes
        frees = [op for op in ops if op[0] == "free"]
        assert [int(op[1]) for op in frees] == [0, 3]
        # Two streams, numbered in order of appearance.
        assert {op[3] for op in trace_allocs} == {"1", "2"}
        assert any(op[0] == "advance" for op in ops)
        # The replay tool reads it.
        for a, s in allocs[1:3]:
            rt.free_async(a, s)


def test_live_allocations_and_leak_report():
    with sp.Runtime(capacity=64 * MiB) as rt:
        s = rt.create_stream()
        a = rt.malloc_async(1234, s)
        b = rt.malloc_async(4 * MiB, s)
        rt.free_async(b, s)
        live = rt.live_allocations()
        assert [(x["ptr"], x["size"], x["stream"], x["pool"]) for x in live] == [
            (a.ptr, 1234, s.id, rt.default_pool().id)]
        assert live[0]["seq"] > 0 and live[0]["device"] == 0
        rt.free_async(a, s)
        assert rt.live_allocations() == []
    with pytest.raises(sp.Error):
        sp.Runtime(leak_check="sometimes")


def test_leak_check_fail_ends_the_interpreter_with_status_one():
    program = ("import streampool as sp\n"
               "rt = sp.Runtime(leak_check='fail')\n"
               "s = rt.create_stream()\n"
               "a = rt.malloc_async(999, s)\n"
               "rt.close()\n"
               "print('not reached')\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=dict(os.environ), check=False)
    assert done.returncode == 1
    assert "size 999" in done.stderr
    assert "not reached" not in done.stdout


def test_a_recording_also_fills_the_history(tmp_path):
    with sp.Runtime(capacity=64 * MiB) as rt:
        rt.start_recording(tmp_path / "run.trace")
        s = rt.create_stream()
        a = rt.malloc_async(4096, s)
        rt.free_async(a, s)
        traces = rt.memory_snapshot()["device_traces"][0]
        assert [e["action"] for e in traces] == ["alloc", "free_requested", "free_completed"]
        assert all(e["addr"] == a.ptr and e["size"] == 4096 for e in traces)
        rt.stop_recording()
