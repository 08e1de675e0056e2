#!/usr/bin/env python3
"""The streampool-replay command line: its JSON parses, its SVG is XML, --growth
sweeps like --threshold and expandable growth holds less than chunked on a real
trace, bad input exits non-zero with the file and line, and a bad flag is a
usage error. --min-capacity's answer replays without a failed allocation and
one granule less fails; --policy-report's JSON has its schema's fields.
--compare-executor=threads agrees with the simulator on a program no timing
can change, and =cuda without a GPU reports each trace skipped.

Run by CTest with STREAMPOOL_REPLAY naming the binary (tests/CMakeLists.txt);
reads the bundled traces from the source tree's traces/.
"""

import json
import os
import re
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "traces")
INFERENCE = os.path.join(TRACES, "torch-medium-512-inference.trace")
SVG_NS = "{http://www.w3.org/2000/svg}"
GRANULE = 2 << 20
POLICY_ROW_KEYS = {
    "setting", "allocator", "reuse", "threshold", "growth", "pool_growth", "recorded_pools", "fits",
    "peak_reserved_bytes",
    "makespan_ns_unconstrained", "min_capacity_bytes", "min_capacity_granules",
    "peak_reserved_bytes_at_min_capacity", "makespan_ns_at_min_capacity", "waits_inserted",
    "synchronizes", "reuse_counts", "one_granule_below", "lower_fits_found", "replays"}


# Every decision is made by stream order, an event or a synchronize, so a
# real-time replay decides each as the simulator does (2 MiB blocks fill
# their granules: no READY remainder serves an allocation first).
ORDERED_TRACE = """# streampool trace v1
alloc 1 2097152 1
kernel 1 2000000
free 1 1
alloc 2 2097152 1
record 1 1
wait 2 1
kernel 2 1000000
free 2 2
record 2 2
wait 1 2
alloc 3 2097152 1
sync 1
sync 2
alloc 4 4096 2
free 3 1
free 4 2
dsync
"""


def replay(*args):
    tool = os.environ.get("STREAMPOOL_REPLAY")
    if not tool:
        raise unittest.SkipTest("STREAMPOOL_REPLAY not set")
    return subprocess.run([tool, *args], capture_output=True, text=True, check=False)


def header_number(path, key):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(f"# {key} "):
                return int(line.split()[2])
    return None


def nonzero_allocs(path):
    """Allocations of more than 0 bytes: each is served by one reuse rule."""
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.startswith("alloc ") and line.split()[2] != "0")


class ReplayToolTest(unittest.TestCase):
    def test_json_compares_with_pytorch(self):
        r = replay("--json", "--threshold=0,max", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")  # no progress bar when stderr is not a terminal
        doc = json.loads(r.stdout)
        (trace,) = doc["traces"]
        self.assertEqual(trace["format"], "streampool-v1")
        self.assertEqual(trace["peak_live_bytes"], header_number(INFERENCE, "peak_live_bytes"))
        torch_reserved = header_number(INFERENCE, "torch_peak_reserved_bytes")
        self.assertEqual(trace["torch"]["peak_reserved_bytes"], torch_reserved)
        self.assertEqual([run["release_threshold"] for run in trace["runs"]], [0, "max"])
        for run in trace["runs"]:
            self.assertEqual(run["failed_allocs"], 0)
            self.assertEqual(run["checker_reports"], 0)
            self.assertEqual(run["pool"], "device")
            self.assertEqual(run["backing"], "address_only")
            self.assertEqual(run["capacity"], 80 << 30)
            self.assertAlmostEqual(run["utilization"],
                                   run["peak_used_bytes"] / run["peak_reserved_bytes"], places=5)
            self.assertAlmostEqual(run["vs_torch_peak_reserved"],
                                   run["peak_reserved_bytes"] / torch_reserved, places=5)
            counts = run["reuse_counts"]
            self.assertEqual(sum(counts.values()), run["alloc_count"])
            self.assertEqual(run["host_cost"]["alloc"]["calls"], trace["allocs"])
            self.assertLessEqual(run["host_cost"]["alloc"]["p50_ns"],
                                 run["host_cost"]["alloc"]["p99_ns"])

    def test_default_growth_is_expandable_and_unlabelled(self):
        r = replay("--json", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        (run,) = json.loads(r.stdout)["traces"][0]["runs"]
        self.assertEqual(run["growth"], "default")
        self.assertEqual(run["pool_growth"], "expandable")
        self.assertEqual(run["setting"], "event+opportunistic+internal, threshold 0")

    def test_one_growth_other_than_default_is_labelled(self):
        r = replay("--json", "--growth=chunked", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        (run,) = json.loads(r.stdout)["traces"][0]["runs"]
        self.assertEqual(run["growth"], "chunked")
        self.assertEqual(run["pool_growth"], "chunked")
        self.assertEqual(run["setting"], "event+opportunistic+internal, threshold 0, growth chunked")

    def test_growth_sweep_crosses_thresholds(self):
        r = replay("--json", "--threshold=0,max", "--growth=default,chunked", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        runs = json.loads(r.stdout)["traces"][0]["runs"]
        # Thresholds outer, growths inner; with two growths every row names its own.
        self.assertEqual([(run["release_threshold"], run["growth"]) for run in runs],
                         [(0, "default"), (0, "chunked"), ("max", "default"), ("max", "chunked")])
        self.assertEqual([run["setting"].split(", ")[-1] for run in runs],
                         ["growth default", "growth chunked"] * 2)
        self.assertEqual([run["pool_growth"] for run in runs], ["expandable", "chunked"] * 2)

    def test_expandable_reserves_less_than_chunked(self):
        # Chunks never coalesce across growths, so on a real trace free bytes
        # stranded in half-used chunks make chunked growth hold more; an
        # expandable pool maps only the shortfall above its topmost free block.
        r = replay("--json", "--growth=chunked,expandable", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        chunked, expandable = json.loads(r.stdout)["traces"][0]["runs"]
        self.assertEqual((chunked["growth"], expandable["growth"]), ("chunked", "expandable"))
        for run in (chunked, expandable):
            self.assertEqual(run["failed_allocs"], 0)
            self.assertEqual(run["checker_reports"], 0)
            self.assertEqual(run["peak_used_bytes"], chunked["peak_used_bytes"])
        self.assertLess(expandable["peak_reserved_bytes"], chunked["peak_reserved_bytes"])
        self.assertGreater(expandable["utilization"], chunked["utilization"])

        text = replay("--growth=chunked,expandable", INFERENCE)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("threshold 0, growth chunked ", text.stdout)
        self.assertIn("threshold 0, growth expandable ", text.stdout)

    def test_all_policies_and_an_svg(self):
        with tempfile.TemporaryDirectory() as d:
            svg = os.path.join(d, "out.svg")
            r = replay("--policies=all", "--svg", svg, INFERENCE, INFERENCE)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.count("threshold 0 "), 16)  # 8 settings x 2 traces
            root = ET.parse(svg).getroot()
            self.assertEqual(root.tag, SVG_NS + "svg")
            # Per trace panel, a reserved and a used line per setting.
            self.assertEqual(len(root.findall(SVG_NS + "polyline")), 2 * 8 * 2)
            legend = [t.text for t in root.iter(SVG_NS + "text")]
            self.assertIn("none, threshold 0", legend)
            self.assertIn("virtual time (ms)", legend)

    def test_malformed_trace_names_file_and_line(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.trace")
            with open(bad, "w", encoding="utf-8") as f:
                f.write("alloc 0 8 0\nbogus 1\n")
            r = replay(INFERENCE, bad)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr, f"streampool-replay: {bad}:2: unknown op 'bogus'\n")
            self.assertEqual(r.stdout, "")  # nothing is replayed before every trace parsed

    def test_missing_file(self):
        r = replay("/nonexistent.trace")
        self.assertEqual(r.returncode, 1)
        self.assertIn("/nonexistent.trace: cannot open", r.stderr)

    def test_usage_errors(self):
        for args in (["--reuse=sometimes", INFERENCE], ["--pool=gpu", INFERENCE],
                     ["--threshold=lots", INFERENCE], ["--capacity=0", INFERENCE],
                     ["--growth=sometimes", INFERENCE], ["--growth=chunked,", INFERENCE],
                     ["--frobnicate", INFERENCE], [], ["--svg"],
                     ["--min-capacity", "--policy-report", INFERENCE],
                     ["--policy-report", "--timeline=/dev/null", INFERENCE],
                     ["--min-capacity", "--threads=-1", INFERENCE]):
            r = replay(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("usage: streampool-replay", r.stderr)

    def test_help_lists_every_flag(self):
        for flag in ("--help", "-h"):
            r = replay(flag)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("usage: streampool-replay [flags] TRACE...", r.stdout)
            for name in ("reuse", "policies", "threshold", "growth", "pool", "backing",
                         "capacity", "check", "min_capacity", "policy_report", "threads", "json",
                         "svg", "timeline"):
                self.assertIn(f"--{name} (", r.stdout)

    def test_short_names_and_no_check_still_work(self):
        r = replay("--json", "--no-check", "--pool=pinned", "--backing=address", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        (run,) = json.loads(r.stdout)["traces"][0]["runs"]
        self.assertEqual((run["pool"], run["backing"]), ("pinned_host", "address_only"))
        self.assertIn("checker off", replay("--nocheck", INFERENCE).stdout)

    def test_binary_file_is_refused_without_echoing_its_bytes(self):
        with tempfile.TemporaryDirectory() as d:
            binary = os.path.join(d, "a.out")
            with open(binary, "wb") as f:
                f.write(b"\x7fELF\x02\x01\x1b[2J\x9b" + bytes(range(256)) * 64)
            r = replay(binary)
            self.assertEqual(r.returncode, 1)
            self.assertTrue(
                r.stderr.startswith(f"streampool-replay: {binary}: not a trace (binary data"),
                r.stderr)
            message = r.stderr.rstrip("\n")
            self.assertTrue(message.isprintable(), repr(message))
            self.assertLess(len(message), len(binary) + 200)

    def test_empty_file_is_not_a_trace(self):
        with tempfile.TemporaryDirectory() as d:
            empty = os.path.join(d, "empty.trace")
            open(empty, "w", encoding="utf-8").close()
            r = replay(empty)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr, f"streampool-replay: {empty}: not a trace (the file is empty)\n")

    def test_out_of_memory_is_a_result(self):
        r = replay("--json", "--capacity=1GiB", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        run = json.loads(r.stdout)["traces"][0]["runs"][0]
        self.assertGreater(run["failed_allocs"], 0)
        self.assertLessEqual(run["peak_reserved_bytes"], 1 << 30)
        self.assertIsNone(run["live_utilization"])

    def test_min_capacity_fits_and_one_granule_less_fails(self):
        r = replay("--min-capacity", "--json", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")  # no progress bar when stderr is not a terminal
        doc = json.loads(r.stdout)
        self.assertEqual(doc["schema"], "streampool-policy-report/1")
        self.assertEqual(doc["granule_bytes"], GRANULE)
        (trace,) = doc["traces"]
        (row,) = trace["rows"]
        self.assertEqual(set(row), POLICY_ROW_KEYS)
        self.assertTrue(row["fits"])
        self.assertEqual(row["setting"], "event+opportunistic+internal, threshold 0")
        capacity = row["min_capacity_bytes"]
        self.assertEqual(capacity, row["min_capacity_granules"] * GRANULE)
        self.assertGreaterEqual(capacity, trace["peak_live_bytes"])
        self.assertLessEqual(capacity, -(-row["peak_reserved_bytes"] // GRANULE) * GRANULE)
        self.assertLessEqual(row["peak_reserved_bytes_at_min_capacity"], capacity)
        self.assertEqual(sum(row["reuse_counts"].values()), nonzero_allocs(INFERENCE))
        # The plain report at that capacity and one granule below.
        fit = json.loads(replay("--json", f"--capacity={capacity}", INFERENCE).stdout)
        (run,) = fit["traces"][0]["runs"]
        self.assertEqual(run["failed_allocs"], 0)
        self.assertEqual(run["peak_reserved_bytes"], row["peak_reserved_bytes_at_min_capacity"])
        below = json.loads(replay("--json", f"--capacity={capacity - GRANULE}", INFERENCE).stdout)
        self.assertGreater(below["traces"][0]["runs"][0]["failed_allocs"], 0)

    def test_min_capacity_table_and_a_trace_that_does_not_fit(self):
        r = replay("--min-capacity", "--threshold=0,max", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("min capacity", r.stdout)
        self.assertIn("granules", r.stdout)
        self.assertIn("best: ", r.stdout)  # two rows: which is better is said
        r = replay("--min-capacity", "--capacity=1GiB", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("does not fit", r.stdout)
        doc = json.loads(replay("--min-capacity", "--json", "--capacity=1GiB", INFERENCE).stdout)
        (row,) = doc["traces"][0]["rows"]
        self.assertFalse(row["fits"])
        self.assertIsNone(row["min_capacity_bytes"])
        self.assertEqual(doc["search_capacity_bytes"], 1 << 30)

    def test_a_given_capacity_holds_for_a_recording_at_its_settings(self):
        # Recorded on a 1 GiB device: replayed at its own settings, but on the
        # device the command line asks for.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "recorded.trace")
            with open(path, "w", encoding="utf-8") as f:
                f.write("# device_capacity 1073741824\n"
                        "pool 0 0 type=device reuse=none threshold=max growth=chunked default=1\n"
                        "alloc 0 4194304 1 0\nalloc 1 4194304 1 0\n")
            runs = {}
            for flags in ((), ("--capacity=6MiB",)):
                r = replay("--json", *flags, path)
                self.assertEqual(r.returncode, 0, r.stderr)
                runs[flags] = json.loads(r.stdout)["traces"][0]["runs"][0]
            self.assertEqual(runs[()]["failed_allocs"], 0)
            self.assertEqual(runs[("--capacity=6MiB",)]["failed_allocs"], 1)

    def test_a_recorded_trace_is_searched_at_its_settings_unless_a_setting_is_given(self):
        # Stream 2 reuses stream 1's granule through an event, which the
        # recorded pool's rules (none) do not allow: two granules recorded,
        # one with every rule on.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "recorded.trace")
            with open(path, "w", encoding="utf-8") as f:
                f.write("# device_capacity 1073741824\n"
                        "pool 0 0 type=device reuse=none threshold=max growth=chunked default=1\n"
                        "alloc 0 2097152 1 0\nkernel 1 1000\nfree 0 1\nrecord 5 1\n"
                        "wait 2 5\nalloc 1 2097152 2 0\nfree 1 2\n")

            def row(*flags):
                r = replay("--min-capacity", "--json", *flags, path)
                self.assertEqual(r.returncode, 0, r.stderr)
                return json.loads(r.stdout)["traces"][0]["rows"][0]  # every rule on first

            recorded = row()
            self.assertEqual(recorded["recorded_pools"], 1)
            self.assertEqual(recorded["setting"], "none, threshold max, growth chunked")
            self.assertEqual(recorded["min_capacity_granules"], 2)
            for flag in ("--reuse=all", "--threshold=0", "--growth=default", "--policies=all"):
                swept = row(flag)
                self.assertEqual(swept["recorded_pools"], 0, flag)
                self.assertEqual(swept["reuse"], "event+opportunistic+internal", flag)
                self.assertEqual(swept["min_capacity_granules"], 1, flag)
            r = replay("--policy-report", "--json", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = json.loads(r.stdout)["traces"][0]["rows"]
            self.assertEqual({row["recorded_pools"] for row in rows}, {0})

    def test_policy_report_json_and_svg(self):
        with tempfile.TemporaryDirectory() as d:
            svg = os.path.join(d, "lab.svg")
            r = replay("--policy-report", "--json", "--svg", svg, "--threads=2", INFERENCE,
                       INFERENCE)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual(doc["schema"], "streampool-policy-report/1")
            self.assertEqual(len(doc["traces"]), 2)
            for trace in doc["traces"]:
                rows = trace["rows"]
                # All 8 policy sets at threshold 0 and max, the default thresholds.
                self.assertEqual(len(rows), 16)
                self.assertEqual([row["threshold"] for row in rows], [0] * 8 + ["max"] * 8)
                self.assertEqual(rows[0]["reuse"], "event+opportunistic+internal")
                self.assertEqual(rows[7]["reuse"], "none")
                for row in rows:
                    self.assertEqual(set(row), POLICY_ROW_KEYS)
                    self.assertTrue(row["fits"])
                    self.assertEqual(row["min_capacity_bytes"] % GRANULE, 0)
                best = trace["best"]
                self.assertEqual(best["min_capacity_bytes"],
                                 min(row["min_capacity_bytes"] for row in rows))
                self.assertEqual(rows[best["row"]]["setting"], best["setting"])
                none = trace["vs_none"]
                self.assertEqual(rows[none["row"]]["reuse"], "none")
                self.assertEqual(none["saved_bytes"],
                                 none["min_capacity_bytes"] - best["min_capacity_bytes"])
                cuda = trace["vs_cuda_defaults"]
                self.assertIsNone(cuda["row"])  # default growth is not CUDA's: searched apart
                self.assertEqual(cuda["setting"],
                                 "event+opportunistic+internal, threshold 0, growth chunked")
                self.assertGreaterEqual(cuda["saved_bytes"], 0)
            # The same trace twice, searched on two threads, gives the same rows.
            # (CUDA's defaults are left out: chunked growth's decisions can
            # depend on where the address space puts each chunk.)
            for key in ("rows", "best", "vs_none"):
                self.assertEqual(doc["traces"][0][key], doc["traces"][1][key], key)
            root = ET.parse(svg).getroot()
            self.assertEqual(root.tag, SVG_NS + "svg")
            texts = [t.text for t in root.iter(SVG_NS + "text")]
            self.assertEqual(texts.count("torch-medium-512-inference.trace"), 2)  # a panel each
            # A label per place, shared by the settings there; the one to ship
            # marked once per panel; CUDA's defaults named (in a label or the
            # place's title).
            self.assertEqual(sum(1 for t in texts if t and t.endswith(" ship")), 2)
            titles = [t.text for t in root.iter(SVG_NS + "title")]
            self.assertEqual(sum(1 for t in titles if "CUDA defaults" in t), 2)
            self.assertIn("makespan at that capacity (ms)", texts)

    def test_policy_report_text_and_explicit_sweep(self):
        r = replay("--policy-report", "--threshold=0", "--growth=chunked", INFERENCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("best: ", r.stdout)
        self.assertIn("against all reuse off (none, threshold 0, growth chunked)", r.stdout)
        self.assertNotIn("\n  CUDA defaults: ", r.stdout)  # in the sweep, not searched apart
        doc = json.loads(replay("--policy-report", "--json", "--threshold=0", "--growth=chunked",
                                INFERENCE).stdout)
        trace = doc["traces"][0]
        self.assertEqual(len(trace["rows"]), 8)
        self.assertEqual(trace["vs_cuda_defaults"]["row"], 0)


class CompareExecutorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.trace = os.path.join(self.dir.name, "ordered.trace")
        with open(self.trace, "w", encoding="utf-8") as f:
            f.write(ORDERED_TRACE)

    def tearDown(self):
        self.dir.cleanup()

    def test_threads_agrees_with_the_simulator_on_an_ordered_program(self):
        r = replay("--compare-executor=threads", "--json", self.trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["schema"], "streampool-executor-compare/1")
        (c,) = doc["comparisons"]
        self.assertEqual(c["executor"], "threads")
        self.assertIsNone(c["skipped"])
        self.assertEqual((c["compared"], c["equal"]), (4, 4))
        self.assertIsNone(c["first_difference"])
        self.assertIsNone(c["first_observation_difference"])
        self.assertTrue(c["equal_before_observation"])
        text = replay("--compare-executor", "threads", self.trace).stdout
        self.assertIn("ordered.trace: simulator vs threads (", text)
        self.assertIn("\n  decisions equal: 4 of 4\n", text)

    def test_cuda_without_a_gpu_is_skipped_per_trace(self):
        r = replay("--compare-executor=cuda", self.trace, self.trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        if "skipped:" not in r.stdout:
            self.assertEqual(r.stdout.count("\n  decisions equal: 4 of 4\n"), 2)  # a GPU
            return
        self.assertEqual(len(re.findall(r"\n  skipped: no CUDA device \(.+\)\n", r.stdout)), 2,
                         r.stdout)

    def test_executor_threads_replays_in_real_time(self):
        r = replay("--executor=threads", "--json", self.trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        (run,) = json.loads(r.stdout)["traces"][0]["runs"]
        self.assertEqual(run["failed_allocs"], 0)
        self.assertGreaterEqual(run["makespan_ns"], 3000000)  # its kernels ran for real

    def test_bad_combinations_are_usage_errors(self):
        for args in (["--compare-executor=simulator"], ["--compare-executor=gpu"],
                     ["--compare-executor=threads", "--verify"],
                     ["--compare-executor=threads", "--executor=threads"],
                     ["--compare-executor=threads", "--min-capacity"],
                     ["--executor=threads", "--policy-report"]):
            r = replay(*args, self.trace)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))


if __name__ == "__main__":
    unittest.main()
