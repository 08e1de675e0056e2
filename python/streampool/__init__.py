"""streampool from Python: stream-ordered memory pools (cudaMallocAsync
semantics) over a deterministic stream simulator.

    import streampool as sp
    with sp.Runtime(devices=1, capacity=1 << 30) as rt:
        s = rt.create_stream()
        a = rt.malloc_async(2 << 20, s)
        rt.launch_kernel(s, duration_ns=1000, accesses=[a])
        rt.free_async(a, s)
        b = rt.malloc_async(2 << 20, s)
        assert b.rule == "same_stream"

The classes (Runtime, Stream, Event, Pool, Allocation, and the graphs'
Capture, Graph, GraphNode, GraphExec) come from the compiled
extension streampool._core, a binding of the C++ API (streampool::Runtime);
errors raise Error, and OutOfMemoryError (also a MemoryError) when an
allocation finds no memory. replay() runs the streampool-replay tool's sweep
and returns its JSON document as Python objects. acl_runtime() is a Runtime
over the runtime that AscendCL calls (the acl package, pyACL) use.
"""

import os as _os

from streampool._errors import Error, OutOfMemoryError
from streampool import _checked, _core, _sweep
from streampool._core import (Allocation, Capture, Event, Graph, GraphExec, GraphNode, Pool,
                              Runtime, Stream)

__all__ = [
    "Allocation",
    "Capture",
    "Error",
    "Event",
    "Graph",
    "GraphExec",
    "GraphNode",
    "MAX",
    "OutOfMemoryError",
    "Pool",
    "Runtime",
    "Stream",
    "acl_runtime",
    "replay",
    "REUSE_RULES",
]

# Decisions as data (streampool.testing turns them into tests).
from streampool._decisions import (Decision, DecisionCheck, DecisionDiff,  # noqa: E402
                                   check_decisions, decisions, diff_decisions, save_decisions)

__all__ += ["Decision", "DecisionCheck", "DecisionDiff", "check_decisions", "decisions",
            "diff_decisions", "save_decisions"]

#: A release threshold that never shrinks a pool (UINT64_MAX).
MAX = (1 << 64) - 1

#: The three reuse switches a pool has, by the names replay() takes:
#: ("event", "opportunistic", "internal").
REUSE_RULES = _core.REUSE_RULES


def _export_timeline(self, path):
    """Writes the recorded timeline (record_timeline() or Runtime(timeline=True))
    as Chrome trace-event JSON, which Perfetto and chrome://tracing open: a
    track per stream with its ops, an async slice per allocation from its
    alloc to its free point, and a counter per pool with its reserved and used
    bytes."""
    text = self.timeline_json()
    with open(_os.fspath(path), "w", encoding="utf-8") as f:
        f.write(text)


Runtime.export_timeline = _export_timeline

# A block's state as PyTorch's snapshot names it. PENDING, READY and CACHED
# blocks are all free to PyTorch's viewer ("inactive"); the state itself is
# kept under "streampool_state".
_TORCH_BLOCK_STATES = {"live": "active_allocated", "awaiting_uses": "active_pending_free"}


def _torch_segments(pool_snapshot):
    """One PyTorch segment per run of mapped blocks of each segment: an
    expandable reservation's unmapped bytes hold no memory."""
    out = []
    for seg in pool_snapshot["segments"]:
        run = []
        for b in seg["blocks"] + [None]:
            if b is not None and not b["unmapped_bytes"]:
                run.append(b)
                continue
            if run:
                blocks = [{
                    "address": x["address"],
                    "size": x["size"],
                    "requested_size": x["requested"] if x["state"] == "live" else 0,
                    "state": _TORCH_BLOCK_STATES.get(x["state"], "inactive"),
                    "streampool_state": x["state"],
                    "frames": [],
                } for x in run]
                allocated = sum(x["size"] for x in blocks if x["state"] == "active_allocated")
                out.append({
                    "device": pool_snapshot["device"],
                    "address": run[0]["address"],
                    "total_size": sum(x["size"] for x in run),
                    "allocated_size": allocated,
                    "active_size": allocated,
                    "requested_size": sum(x["requested_size"] for x in blocks),
                    "stream": 0,
                    "segment_type": "large",
                    "segment_pool_id": (0, pool_snapshot["pool"]),
                    "is_expandable": bool(seg["expandable"]),
                    "frames": [],
                    "blocks": blocks,
                })
            run = []
    return out


def _memory_snapshot(self, pools=None):
    """The runtime's memory in the layout of PyTorch's
    torch.cuda.memory._snapshot(), which PyTorch's memory viewer
    (pytorch.org/memory_viz, or torch/cuda/_memory_viz.py) opens once pickled
    (dump_snapshot):

    * "segments": every mapped range of the device pools (pools(), or the
      given ones) with its blocks: address, size, requested_size, and state
      "active_allocated" (live) or "inactive" (free; streampool's own state,
      pending, ready or cached, under "streampool_state");
    * "device_traces": per device, the allocations and frees made while the
      timeline recorded (record_timeline(), Runtime(timeline=True)) or a
      recording was on (start_recording()) as "alloc", "free_requested" and
      "free_completed" events with addr, size, stream and time_us (host
      time); empty lists otherwise.

    * "graph_memory" (streampool's own key, which the viewer ignores): per
      device, its graph memory figures as graph_memory() gives them (used
      and reserved, current and high), apart from the pools' segments.

    Not filled: "frames" (no stack traces are taken; empty lists), a
    segment's "stream" (segments are not per stream here; 0) and
    "segment_type" (always "large": there is no small pool),
    "allocator_settings", and the trace actions segment_alloc, segment_free,
    segment_map, segment_unmap, oom and snapshot. Pinned host pools are left
    out, as PyTorch's snapshot covers device memory only."""
    if pools is None:
        pools = self.pools()
    segments = []
    for pool in pools:
        snap = pool.snapshot()
        if snap["device"] >= 0:
            segments.extend(_torch_segments(snap))
    segments.sort(key=lambda s: (s["device"], s["address"]))
    traces = [[] for _ in range(self.devices)]
    for e in self._trace_events():
        common = {"addr": e["ptr"], "size": e["size"], "stream": e["stream"],
                  "time_us": e["host_ns"] // 1000, "frames": []}
        if e["alloc"]:
            traces[e["device"]].append(dict(common, action="alloc"))
        else:
            # A stream-ordered free reaches the pool when it is made, as a
            # PyTorch free without record_stream completes at once.
            traces[e["device"]].append(dict(common, action="free_requested"))
            traces[e["device"]].append(dict(common, action="free_completed"))
    graph_memory = [self.graph_memory(device=d) for d in range(self.devices)]
    return {"segments": segments, "device_traces": traces, "allocator_settings": {},
            "graph_memory": graph_memory}


def _dump_snapshot(self, path, pools=None):
    """Writes memory_snapshot() to path as a pickle, as PyTorch's
    torch.cuda.memory._dump_snapshot() does: drop the file on
    pytorch.org/memory_viz to browse it, or convert it to a trace with
    tools/torch_snapshot_to_trace.py."""
    import pickle
    with open(_os.fspath(path), "wb") as f:
        pickle.dump(self.memory_snapshot(pools), f)


Runtime.memory_snapshot = _memory_snapshot
Runtime.dump_snapshot = _dump_snapshot


def acl_runtime():
    """A Runtime over the AscendCL face's implicit runtime: the one that the
    acl package (pyACL programs) and the acl* C functions in this process
    use, made from the STREAMPOOL_ACL_* variables if no call made it yet.
    Memory from acl.rt.malloc, acl.media.dvpp_malloc or a pool of
    acl.rt.mem_pool_create is memory this Runtime sees: pointer_attributes(),
    live_allocations(), memory_snapshot() and checker_reports() cover it, and
    pools() lists the face's pools that hold live allocations.

    close() (or leaving a with block) drops this object's reference only; the
    face keeps its runtime. acl.finalize() and the last acl.rt.reset_device()
    make the face start a new runtime on its next call, while this object
    keeps the old one alive and usable until it is closed: call acl_runtime()
    again for the new one."""
    return _core._acl_runtime()


def _as_list(value):
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _reuse_list(reuse):
    """replay()'s reuse as the replay tool's --reuse value."""
    if reuse is None:
        return "none"
    if isinstance(reuse, str):
        return reuse
    return ",".join(sorted(reuse)) or "none"


def _threshold(value):
    if value == "max":
        return MAX
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX:
        raise Error("spErrorInvalidValue", f"bad release threshold {value!r} (bytes or 'max')")
    return value


def _bytes(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX:
        raise Error("spErrorInvalidValue", f"{name} is a number of bytes, not {value!r}")
    return value


class _Unset:
    """A setting replay() was not given (None already means "none" for reuse)."""

    def __repr__(self):
        return "<not given>"


_UNSET = _Unset()


def replay(traces, *, reuse=_UNSET, policies=None, threshold=_UNSET, growth=_UNSET, pool="device",
           backing="address_only", capacity=80 << 30, check=True, timeline=None, report="runs",
           allocator="streampool", torch_conf="", rmm_initial=0, rmm_max=0, executor=None):
    """Replays trace files (streampool trace v1 or RMM CSV logs) the way
    ``streampool-replay --json`` does and returns its JSON document as Python
    objects: ``{"traces": [{"file", "ops", ..., "runs": [{"setting",
    "peak_reserved_bytes", "reuse_counts", "makespan_ns", "recorded_decisions",
    ...}]}]}``.

    reuse: "all", "none" or a set of "event", "opportunistic", "internal".
    policies: "all" sweeps all 8 reuse combinations instead.
    threshold, growth: one value or a list; each threshold is combined with
    each growth and each reuse setting. A threshold is bytes or "max".
    With none of reuse, policies, threshold and growth given, a recording
    (Runtime.start_recording, STREAMPOOL_RECORD) replays at its own settings,
    and every run says how many of its decisions it compared with the
    recorded ones and how many differed; other traces replay with every reuse
    rule on, threshold 0, default growth.
    pool: "device", "pinned_host", "huge_page" or "dvpp" (create_pool's kinds;
    the replay tool's "pinned" and "hugepage" too).
    backing: "address_only" (nothing touched; also "address") or "host".
    capacity: device bytes. check: the stream-order checker. timeline: a path
    to also write every run as Chrome trace-event JSON (one process per run).
    allocator: "streampool", "pytorch", "rmm-pool", "cuda", a list of them or
    "all": each trace replays under each on identical inputs (streampool's
    rows are the settings above; every other allocator is one row; each run
    names it under "allocator" and gives "allocator_counts": segments made
    and freed, cross-stream reuses, waits, syncs, retries).
    torch_conf: the pytorch model's PYTORCH_CUDA_ALLOC_CONF
    ("max_split_size_mb:128,expandable_segments:True", ...).
    rmm_initial, rmm_max: the rmm-pool model's initial and maximum pool sizes
    (multiples of 256; 0: none).
    report: "runs" (the above), "torch_validation" (the pytorch model against
    the segment history a converted PyTorch snapshot carries:
    ``streampool-replay --validate-torch --json``), or "policy": for each trace and setting, the
    smallest device it runs on and the makespan, inserted waits and reuse by
    rule there, the best policy set and what it saves against all reuse off
    and CUDA's defaults, and what to ship against the recorded (or default)
    setting: "ship" (the setting, the maxSize or capacity that realises its
    saving, its peak reserved unconstrained and capped), "reference",
    "vs_allocators" and "warnings" (capacity searches that were not
    monotone) (``streampool-replay --policy-report --json``, schema
    "streampool-policy-report/1", with the same rows: all 8 policy sets at
    thresholds 0 and max unless threshold is given, and a row per other
    allocator).

    executor: a concurrent.futures.Executor (a ProcessPoolExecutor, a Dask
    distributed Client, ...) to run the sweep on: one task per trace and
    row of a "runs" report, one per trace of a "policy" (its capacity
    searches) or "torch_validation" report. The document is the one a
    serial replay gives, in the same order, every figure equal but the
    host cost (wall-clock time, different on every run). Each worker reads
    the traces by the paths given, so it must see them there; timeline is
    refused (the runs' timelines stay on the workers).

    A trace that cannot be read raises FileNotFoundError, PermissionError or
    IsADirectoryError; a malformed one raises Error naming its file and line.
    """
    if policies not in (None, "all"):
        raise Error("spErrorInvalidValue", "policies takes only 'all'")
    if report not in ("runs", "policy", "torch_validation"):
        raise Error("spErrorInvalidValue",
                    f"report is 'runs', 'policy' or 'torch_validation', not {report!r}")
    files = [_os.fspath(t) for t in _as_list(traces)]
    if not files:
        raise Error("spErrorInvalidValue", "no trace given")
    recorded = reuse is _UNSET and policies is None and threshold is _UNSET and growth is _UNSET
    if report == "policy":
        # streampool-replay --policy-report's rows: all 8 policy sets, at
        # thresholds 0 and max unless given; the recorded settings are the
        # report's reference, searched besides, never a row.
        policies, recorded = "all", False
        if threshold is _UNSET:
            threshold = [0, "max"]
    kwargs = dict(reuse=_reuse_list("all" if reuse is _UNSET else reuse),
                  all_policies=policies == "all",
                  thresholds=[_threshold(t) for t in _as_list(0 if threshold is _UNSET
                                                               else threshold)],
                  growths=[str(g) for g in _as_list("default" if growth is _UNSET else growth)],
                  pool=str(pool), backing=str(backing), capacity=_bytes("capacity", capacity),
                  check=bool(check),
                  timeline_path=_os.fspath(timeline) if timeline is not None else "",
                  recorded=recorded, report=report,
                  allocators=[str(a) for a in _as_list(allocator)],
                  torch_conf=str(torch_conf), rmm_initial=_bytes("rmm_initial", rmm_initial),
                  rmm_max=_bytes("rmm_max", rmm_max))
    if executor is not None:
        return _sweep.replay(executor, files, kwargs)
    return _core.replay(files, **kwargs)


# Last, over everything above: a bad argument to any public function or
# property is an Error (_checked.py).
for _cls in [v for v in vars(_core).values()
             if isinstance(v, type) and v.__module__ == _core.__name__]:
    _checked.check(_cls)
acl_runtime = _checked.function(acl_runtime)
replay = _checked.function(replay)
