"""Timelines as Chrome trace-event JSON (what Perfetto and chrome://tracing
open), from Python (Runtime.export_timeline), from streampool-replay
--timeline and from streampool-demo: parsed back and checked for the
structure the viewers need and for the schedule the simulator ran."""

import collections
import json
import subprocess

import streampool as sp
from conftest import CHUNK, INFERENCE_TRACE, MiB, tool

METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def well_formed(doc):
    """Checks what a viewer relies on and returns the events by phase."""
    assert doc["displayTimeUnit"] == "ns"
    by_phase = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        assert isinstance(e["pid"], int) and isinstance(e["name"], str), e
        by_phase[e["ph"]].append(e)
        if e["ph"] == "M":
            assert e["name"] in METADATA
        elif e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["tid"], int)
        elif e["ph"] in "be":
            assert e["cat"] == "allocation" and isinstance(e["id"], int)
        elif e["ph"] == "C":
            assert set(e["args"]) == {"reserved", "used"}
        else:
            raise AssertionError(f"unexpected phase {e['ph']}")
    # Every allocation slice opens and closes once, never before it opens.
    begins = {e["id"]: e for e in by_phase["b"]}
    ends = {e["id"]: e for e in by_phase["e"]}
    assert len(begins) == len(by_phase["b"]) and begins.keys() == ends.keys()
    for i, b in begins.items():
        assert ends[i]["ts"] >= b["ts"] and ends[i]["pid"] == b["pid"]
    return by_phase


def thread_names(by_phase, pid=1):
    return {e["tid"]: e["args"]["name"] for e in by_phase["M"]
            if e["name"] == "thread_name" and e["pid"] == pid}


def test_export_timeline_from_python(tmp_path):
    with sp.Runtime(timeline=True) as rt:
        producer, consumer = rt.create_stream(), rt.create_stream(non_blocking=True)
        pool = rt.create_pool(max_size=CHUNK)
        a = rt.malloc_async(CHUNK, producer, pool=pool)                 # at 0
        rt.launch_kernel(producer, duration_ns=1000, accesses=[a])      # [0, 1000)
        rt.free_async(a, producer)                                      # at 1000
        # The pool is full: the consumer takes a's bytes behind an inserted wait.
        b = rt.malloc_async(CHUNK, consumer, pool=pool)
        assert b.rule == "internal_dependency"
        rt.memset_async(b, 0, 1_000_000, consumer)                      # 1 us at 1 TB/s
        e = rt.create_event()
        e.record(consumer)
        producer.wait_event(e)
        rt.free_async(b, producer)
        c = rt.malloc_async(MiB, rt.legacy_stream())                    # never freed
        rt.device_synchronize()
        path = tmp_path / "timeline.json"
        rt.export_timeline(path)
        reserved, used = pool.reserved_current, pool.used_current
        ops = rt.timeline()

    doc = json.loads(path.read_text())
    by_phase = well_formed(doc)
    names = thread_names(by_phase)
    assert sorted(names.values()) == ["legacy stream (device 0)", "stream 1 (device 0)",
                                      "stream 2 (device 0)"]
    tid = {v.split(" (")[0]: k for k, v in names.items()}

    # One complete event per op of Runtime.timeline(), on its stream's track.
    assert len(by_phase["X"]) == len(ops)
    kinds = collections.Counter(e["name"] for e in by_phase["X"])
    assert kinds == collections.Counter(op["kind"] for op in ops)
    assert {"kernel", "fill", "wait", "internal_wait", "record", "alloc", "free"} <= set(kinds)
    (kernel,) = [e for e in by_phase["X"] if e["name"] == "kernel"]
    assert (kernel["tid"], kernel["ts"], kernel["dur"]) == (tid["stream 1"], 0, 1.0)
    (fill,) = [e for e in by_phase["X"] if e["name"] == "fill"]
    assert (fill["tid"], fill["ts"], fill["dur"]) == (tid["stream 2"], 1.0, 1.0)
    (inserted,) = [e for e in by_phase["X"] if e["name"] == "internal_wait"]
    assert inserted["tid"] == tid["stream 2"]

    # Allocation lifetimes in stream order: b begins once the inserted wait
    # let it, and ends at its free on the producer, after the consumer's fill.
    spans = {e["args"]["ptr"]: e for e in by_phase["b"]}
    ends = {e["id"]: e for e in by_phase["e"]}
    assert len(spans) == 2  # a and b share an address; one slice each
    slices = sorted(by_phase["b"], key=lambda e: e["id"])
    assert [s["args"]["rule"] for s in slices] == ["fresh", "internal_dependency", "fresh"]
    assert [s["args"]["size"] for s in slices] == [CHUNK, CHUNK, MiB]
    assert [(s["ts"], ends[s["id"]]["ts"]) for s in slices[:2]] == [(0, 1.0), (1.0, 2.0)]
    assert slices[0]["args"]["freed"] and not slices[2]["args"]["freed"]
    assert int(slices[2]["args"]["ptr"], 16) == c.ptr
    assert slices[1]["args"]["stream"] == consumer.id
    assert slices[1]["args"]["free_stream"] == producer.id

    # A counter per pool; the last values are the pool's.
    counters = collections.defaultdict(list)
    for e in by_phase["C"]:
        counters[e["name"]].append(e)
    assert set(counters) == {"default pool (device 0)", "pool 1 (device, device 0)"}
    last = counters["pool 1 (device, device 0)"][-1]["args"]
    assert (last["reserved"], last["used"]) == (reserved, used)
    assert max(e["args"]["used"] for e in counters["pool 1 (device, device 0)"]) == CHUNK


def test_recording_off_by_default_and_switchable():
    with sp.Runtime() as rt:
        s = rt.create_stream()
        rt.free_async(rt.malloc_async(MiB, s), s)
        assert rt.timeline() == []
        rt.record_timeline()
        rt.free_async(rt.malloc_async(MiB, s), s)
        doc = json.loads(rt.timeline_json())
        assert [e["name"] for e in doc["traceEvents"] if e["ph"] == "X"] == ["alloc", "free"]
        (b,) = [e for e in doc["traceEvents"] if e["ph"] == "b"]
        assert b["args"]["rule"] == "same_stream" and b["args"]["freed"]


def test_replay_tool_writes_one_process_per_run(tmp_path):
    path = tmp_path / "replay.json"
    r = subprocess.run([tool("STREAMPOOL_REPLAY"), "--json", "--threshold=0,max", "--timeline",
                        str(path), INFERENCE_TRACE], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    (trace,) = json.loads(r.stdout)["traces"]
    by_phase = well_formed(json.loads(path.read_text()))
    processes = {e["pid"]: e["args"]["name"] for e in by_phase["M"]
                 if e["name"] == "process_name"}
    assert list(processes.values()) == [f"{INFERENCE_TRACE}: {run['setting']}"
                                        for run in trace["runs"]]
    for pid, run in zip(processes, trace["runs"]):
        slices = [e for e in by_phase["b"] if e["pid"] == pid]
        assert len(slices) == trace["allocs"]
        rules = collections.Counter(e["args"]["rule"] for e in slices)
        assert rules == {k: v for k, v in run["reuse_counts"].items() if v}
        peak = max(e["args"]["reserved"] for e in by_phase["C"] if e["pid"] == pid)
        assert peak == run["peak_reserved_bytes"]
        assert thread_names(by_phase, pid) == {1: "legacy stream (device 0)"}
    # Slices of the two runs never share an id: viewers pair by id file-wide.
    assert len({e["id"] for e in by_phase["b"]}) == len(by_phase["b"])


def test_same_timeline_through_python_replay(tmp_path):
    path = tmp_path / "py.json"
    doc = sp.replay(INFERENCE_TRACE, timeline=path)
    by_phase = well_formed(json.loads(path.read_text()))
    assert len(by_phase["b"]) == doc["traces"][0]["allocs"]


def test_demo_timeline(tmp_path):
    r = subprocess.run([tool("STREAMPOOL_DEMO"), f"--traces_dir={tool('STREAMPOOL_TRACES_DIR')}",
                        f"--output_dir={tmp_path}"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "timeline.json"
    by_phase = well_formed(json.loads(path.read_text()))
    names = thread_names(by_phase)
    assert sorted(names.values()) == ["consumer (device 0)", "legacy stream (device 0)",
                                      "producer (device 0)"]
    tid = {v.split(" (")[0]: k for k, v in names.items()}
    slices = sorted(by_phase["b"], key=lambda e: e["id"])
    # The decisions part (a) prints, with where each allocation begins: the
    # consumer's only after the producer's event (40 us).
    assert [(names[s["tid"]].split(" (")[0], s["ts"], s["args"]["rule"]) for s in slices] == [
        ("producer", 0, "fresh"),
        ("consumer", 40.0, "event_dependency"),
        ("legacy stream", 5.0, "event_dependency"),
        ("producer", 80.0, "after_sync"),
        ("producer", 100.0, "same_stream"),
    ]
    kernels = sorted((e["tid"], e["ts"], e["dur"]) for e in by_phase["X"] if e["name"] == "kernel")
    assert (tid["consumer"], 40.0, 30.0) in kernels and (tid["legacy stream"], 70.0, 10.0) in kernels
    assert {e["name"] for e in by_phase["C"]} == {"default pool"}
