#!/usr/bin/env python3
"""tools/torch_snapshot_to_trace.py on small synthetic snapshots made here.

Run by CTest (tests/CMakeLists.txt). When STREAMPOOL_REPLAY names the
streampool-replay binary, the converted trace is also replayed by it, so the
converter's output is checked against the C++ parser too.
"""

import collections
import contextlib
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import torch_snapshot_to_trace as conv  # noqa: E402

MiB = 1 << 20


def synthetic_snapshot():
    """One 20 MiB segment from before the trace holding two active blocks, and
    a 2 MiB segment the trace allocated. The trace allocates on the default
    stream and on a side stream, frees one of its own allocations and one
    pre-trace allocation, and loses nothing."""
    seg1 = {
        "device": 0, "address": 0x10000000, "total_size": 20 * MiB, "stream": 0,
        "blocks": [
            # Live since before the trace: emitted as a pre-trace alloc.
            {"address": 0x10000000, "size": 512, "requested_size": 500,
             "state": "active_allocated", "frames": []},
            # Allocated by the trace (event 0), still live at the end.
            {"address": 0x10000200, "size": 1024, "requested_size": 1000,
             "state": "active_allocated", "frames": []},
            {"address": 0x10000600, "size": 20 * MiB - 1536, "requested_size": 0,
             "state": "inactive", "frames": []},
        ],
    }
    seg2 = {"device": 0, "address": 0x40000000, "total_size": 2 * MiB, "stream": 0,
            "blocks": [{"address": 0x40000000, "size": 2 * MiB, "requested_size": 0,
                        "state": "inactive", "frames": []}]}
    side = 0x7F00AA
    events = [
        {"action": "alloc", "addr": 0x10000200, "size": 1000, "stream": 0, "time_us": 10,
         "frames": [{"filename": "x.py", "line": 1, "name": "f"}]},
        {"action": "alloc", "addr": 0x20000000, "size": 4096, "stream": side, "time_us": 12},
        {"action": "free_requested", "addr": 0x20000000, "size": 4096, "stream": side,
         "time_us": 14},
        {"action": "free_completed", "addr": 0x20000000, "size": 4096, "stream": side,
         "time_us": 15},
        # Never allocated in the trace: a pre-trace allocation of 2048 bytes.
        {"action": "free_requested", "addr": 0x30000000, "size": 2048, "stream": 0,
         "time_us": 20},
        {"action": "free_completed", "addr": 0x30000000, "size": 2048, "stream": 0,
         "time_us": 20},
        {"action": "segment_alloc", "addr": 0x40000000, "size": 2 * MiB, "stream": 0,
         "time_us": 21},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 22},
    ]
    return {"segments": [seg1, seg2], "device_traces": [events]}


def ops_of(text):
    """The ops, without their comments."""
    return [line.split("#")[0].rstrip() for line in text.splitlines()
            if line and not line.startswith("#")]


def header_of(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("# "):
            parts = line[2:].split(" ", 1)
            out.setdefault(parts[0].rstrip(":"), parts[1] if len(parts) > 1 else "")
    return out



class Evil:
    """Unpickling this runs os.system(command): the attack a snapshot loader
    must refuse."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class ConvertTest(unittest.TestCase):
    def test_synthetic_snapshot(self):
        text = conv.convert(conv.load_snapshot(pickle.dumps(synthetic_snapshot())),
                            source="synthetic")
        # Pre-trace allocations first, in address order (the segment's live
        # block, then the address the trace freed without allocating), then
        # the trace; the side stream is stream 1; time in ns.
        self.assertEqual(ops_of(text), [
            "alloc 0 500 0",
            "alloc 1 2048 0",
            "alloc 2 1000 0",
            "advance 2000",
            "alloc 3 4096 1",
            "advance 3000",
            "free 3 1",
            "advance 5000",
            "free 1 0",
            "advance 2000",  # to the last event
        ])
        h = header_of(text)
        self.assertEqual(text.splitlines()[0], "# streampool trace v1")
        self.assertEqual(h["source"], "synthetic")
        self.assertEqual(h["allocs"], "4")
        self.assertEqual(h["frees"], "2")
        self.assertEqual(h["pretrace_live_bytes"], "2548")
        # 500 + 2048 + 1000 + 4096 live at once.
        self.assertEqual(h["peak_live_bytes"], "7644")
        self.assertEqual(h["live_at_end_bytes"], "1500")
        # 22 MiB at the end, 2 MiB of it grown in the trace: 20 MiB at the
        # start, and the peak is the end.
        self.assertTrue(h["torch_peak_reserved_bytes"].startswith(str(22 * MiB) + " "))
        self.assertEqual(h["torch_reserved_at_trace_start"], str(20 * MiB))
        self.assertEqual(h["duration_ns"], "12000")
        self.assertEqual(h["streams"], "2")
        self.assertEqual(h["actions"], "alloc=2 free_completed=2 free_requested=2 "
                                       "segment_alloc=1 snapshot=1")

    def test_keeps_pytorchs_segments_and_their_history(self):
        text = conv.convert(conv.load_snapshot(pickle.dumps(synthetic_snapshot())),
                            source="synthetic")
        lines = text.splitlines()
        # The 20 MiB segment was there at the start; the 2 MiB one came in
        # the trace, where its event stands.
        self.assertEqual([l for l in lines if l.startswith("# torch_segment ")],
                         [f"# torch_segment {0x10000000} {20 * MiB} 0 large"])
        self.assertEqual([l for l in lines if l.startswith("# segment_")],
                         [f"# segment_alloc {0x40000000} {2 * MiB} 0"])
        # The pre-trace block in that segment is placed; the one freed at an
        # address no known segment holds is not.
        self.assertIn(f"alloc 0 500 0  # torch_block {0x10000000} 512", lines)
        self.assertIn("alloc 1 2048 0", lines)
        # The segment event comes after the last free and before the end.
        self.assertLess(lines.index("free 1 0"), lines.index(f"# segment_alloc {0x40000000} "
                                                             f"{2 * MiB} 0"))

    def test_segment_freed_inside_the_trace_counts_at_its_peak(self):
        snap = {"segments": [{"device": 0, "address": 0, "total_size": 4 * MiB,
                              "stream": 0, "blocks": []}],
                "device_traces": [[
                    {"action": "segment_alloc", "addr": 1 << 30, "size": 8 * MiB, "stream": 0},
                    {"action": "segment_free", "addr": 1 << 30, "size": 8 * MiB, "stream": 0},
                ]]}
        h = header_of(conv.convert(snap))
        self.assertTrue(h["torch_peak_reserved_bytes"].startswith(str(12 * MiB) + " "))

    def test_old_snapshots_without_block_addresses(self):
        # Blocks tile their segment in order.
        snap = {"segments": [{"address": 4096, "total_size": 3072, "stream": 0, "blocks": [
                    {"size": 1024, "state": "inactive"},
                    {"size": 2048, "requested_size": 2000, "state": "active_allocated"}]}],
                "device_traces": [[
                    {"action": "free_completed", "addr": 4096 + 1024, "size": 2000,
                     "stream": 0}]]}
        # The block at 5120 is freed by the trace, so it is a pre-trace
        # allocation found by its free, not a second one from the segment.
        self.assertEqual(ops_of(conv.convert(snap)), ["alloc 0 2000 0", "free 0 0"])

    def test_a_lost_free_ends_the_old_allocation(self):
        snap = {"segments": [], "device_traces": [[
            {"action": "alloc", "addr": 64, "size": 8, "stream": 0},
            {"action": "alloc", "addr": 64, "size": 16, "stream": 0},
        ]]}
        text = conv.convert(snap)
        self.assertEqual(ops_of(text), ["alloc 0 8 0", "free 0 0", "alloc 1 16 0"])
        self.assertEqual(header_of(text)["alloc_at_live_address"], "1")

    def test_malformed_snapshots_are_refused_with_where(self):
        with self.assertRaisesRegex(conv.ConversionError, "a snapshot is a dict"):
            conv.convert([1, 2])
        with self.assertRaisesRegex(conv.ConversionError, "no 'device_traces'"):
            conv.convert({"segments": []})
        with self.assertRaisesRegex(conv.ConversionError,
                                    r"device_traces\[0\]\[1\]: 'addr' must be a non-negative "
                                    "integer, got -5"):
            conv.convert({"device_traces": [[
                {"action": "alloc", "addr": 8, "size": 1},
                {"action": "alloc", "addr": -5, "size": 1}]]})
        with self.assertRaisesRegex(conv.ConversionError, r"device_traces\[0\]\[0\]: an event"):
            conv.convert({"device_traces": [["alloc"]]})
        with self.assertRaisesRegex(conv.ConversionError, r"no device_traces\[3\]"):
            conv.convert({"device_traces": [[]]}, device=3)
        with self.assertRaisesRegex(conv.ConversionError, "not a readable pickle"):
            conv.load_snapshot(b"\x80\x04not a pickle")


class SafeLoadTest(unittest.TestCase):
    def test_a_pickle_naming_os_system_is_refused_and_nothing_runs(self):
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "pwned")
            payload = pickle.dumps({"device_traces": [[]], "x": Evil(f"touch {marker}")})
            with self.assertRaisesRegex(conv.ConversionError,
                                        r"refusing to load global (os|posix)\.system"):
                conv.load_snapshot(payload)
            self.assertFalse(os.path.exists(marker))

    def test_any_global_is_refused_even_a_harmless_one(self):
        for obj in (complex(1, 2), range(3), collections.OrderedDict()):
            with self.assertRaisesRegex(conv.ConversionError, "refusing to load global"):
                conv.load_snapshot(pickle.dumps(obj))

    def test_the_command_line_refuses_too(self):
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "pwned")
            path = os.path.join(d, "evil.pickle")
            with open(path, "wb") as f:
                pickle.dump(Evil(f"touch {marker}"), f)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(conv.main([path]), 1)
            self.assertIn("evil.pickle: not a safe snapshot pickle: refusing to load global",
                          err.getvalue())
            self.assertFalse(os.path.exists(marker))


class CommandLineTest(unittest.TestCase):
    def test_writes_the_trace_and_streampool_replay_reads_it(self):
        with tempfile.TemporaryDirectory() as d:
            snap = os.path.join(d, "snap.pickle")
            out = os.path.join(d, "snap.trace")
            with open(snap, "wb") as f:
                pickle.dump(synthetic_snapshot(), f)
            self.assertEqual(conv.main([snap, "-o", out, "--source", "synthetic\nsnapshot"]), 0)
            with open(out, encoding="utf-8") as f:
                text = f.read()
            self.assertEqual(header_of(text)["source"], "synthetic snapshot")

            replay = os.environ.get("STREAMPOOL_REPLAY")
            if not replay:
                self.skipTest("STREAMPOOL_REPLAY not set")
            r = subprocess.run([replay, "--json", out], capture_output=True, text=True,
                               check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            report = json.loads(r.stdout)["traces"][0]
            self.assertEqual(report["allocs"], 4)
            self.assertEqual(report["frees"], 2)
            self.assertEqual(report["streams"], 2)
            self.assertEqual(report["peak_live_bytes"], 7644)
            self.assertEqual(report["torch"]["peak_reserved_bytes"], 22 * MiB)
            self.assertEqual(report["torch"]["peak_live_bytes"], 7644)
            run = report["runs"][0]
            self.assertEqual(run["failed_allocs"], 0)
            # 256-B rule sizes: 512 + 2048 + 1024 + 4096.
            self.assertEqual(run["peak_used_bytes"], 7680)

    def test_missing_input(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(conv.main(["/nonexistent/snap.pickle"]), 1)
        self.assertIn("/nonexistent/snap.pickle", err.getvalue())


if __name__ == "__main__":
    unittest.main()
