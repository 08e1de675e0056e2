#!/usr/bin/env python3
"""streampool-replay's decisions as data: --save-decisions writes the
streampool-decisions/1 file, --check-decisions agrees with it (exit 0) under
the setting that wrote it and, under a flipped setting or against an edited
file, exits 3 naming the op where the decisions first part, with both
decisions, the rule behind each and the blocks around them. --diff counts the
differences of two settings by rule and bytes and exits 3; every new flag
takes --flag=value and --flag value, and --help lists them.

Run by CTest with STREAMPOOL_REPLAY naming the binary (tests/CMakeLists.txt);
reads the bundled traces from the source tree's traces/.
"""

import os
import re
import subprocess
import tempfile
import unittest

TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "traces")
FSDP = os.path.join(TRACES, "lab", "fsdp.trace")

# Stream 2 allocates after waiting on an event recorded behind stream 1's
# free (4 MiB: past a front cache), so with reuse it may take stream 1's
# block and with none it cannot.
CROSS_STREAM = """alloc 1 4194304 1
kernel 1 1000000
free 1 1
record 1 1
wait 2 1
alloc 2 4194304 2
alloc 3 4096 1
free 2 2
free 3 1
"""


def replay(*args):
    tool = os.environ.get("STREAMPOOL_REPLAY")
    if not tool:
        raise unittest.SkipTest("STREAMPOOL_REPLAY not set")
    return subprocess.run([tool, *args], capture_output=True, text=True, check=False)


def data_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line[:1].isdigit()]


class DecisionsToolTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.trace = os.path.join(self.dir.name, "cross.trace")
        with open(self.trace, "w", encoding="utf-8") as f:
            f.write(CROSS_STREAM)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_save_writes_one_line_per_allocation(self):
        out = self.path("d")
        r = replay(f"--save-decisions={out}", self.trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            self.assertEqual(f.readline(), "streampool-decisions/1\n")
        lines = data_lines(out)
        self.assertEqual([int(f[0]) for f in lines], [1, 6, 7])  # the alloc ops
        self.assertEqual([int(f[2]) for f in lines], [1, 2, 1])  # their streams
        for f in lines:
            self.assertEqual(len(f), 8, f)
            self.assertRegex(f[6], r"^\d+\+\d+$")  # chunk+offset, never an address

    def test_check_agrees_under_the_same_setting(self):
        out = self.path("d")
        self.assertEqual(replay("--save-decisions", out, FSDP).returncode, 0)
        r = replay(f"--check-decisions={out}", FSDP)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"all \d+ decisions agree")

    def test_a_flipped_setting_exits_3_at_the_first_op_that_differs(self):
        saved, other = self.path("all"), self.path("none")
        self.assertEqual(replay("--reuse=all", f"--save-decisions={saved}", self.trace)
                         .returncode, 0)
        self.assertEqual(replay("--reuse=none", f"--save-decisions={other}", self.trace)
                         .returncode, 0)
        a, b = data_lines(saved), data_lines(other)
        first = next((x[0] for x, y in zip(a, b) if x != y), None)
        self.assertIsNotNone(first, "all and no reuse decide alike: the trace tests nothing")
        r = replay("--reuse=none", "--check-decisions", saved, self.trace)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn(f"the decision at op {first} differs", r.stderr)
        self.assertRegex(r.stderr, r"saved: +%s " % first)
        self.assertRegex(r.stderr, r"replayed: +%s " % first)
        self.assertIn("rule behind the saved one", r.stderr)
        self.assertIn("rule behind the replayed one", r.stderr)
        self.assertIn("blocks around the replayed place", r.stderr)
        self.assertRegex(r.stderr, r"> \+\d+ +\d+ +live +stream 2")

    def test_an_edited_decision_is_named_by_its_op(self):
        saved, edited = self.path("d"), self.path("edited")
        self.assertEqual(replay(f"--save-decisions={saved}", FSDP).returncode, 0)
        with open(saved, encoding="utf-8") as f:
            lines = f.readlines()
        # The tenth-last decision with a block moves by 256 bytes.
        k = max(i for i, line in enumerate(lines[:-9]) if re.match(r"^\d.* \d+\+\d+ ", line))
        fields = lines[k].split()
        chunk, offset = fields[6].split("+")
        fields[6] = f"{chunk}+{int(offset) + 256}"
        lines[k] = " ".join(fields) + "\n"
        with open(edited, "w", encoding="utf-8") as f:
            f.writelines(lines)
        r = replay(f"--check-decisions={edited}", FSDP)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn(f"the decision at op {fields[0]} differs", r.stderr)

    def test_diff_summarises_by_rule_and_bytes(self):
        r = replay("--reuse=all", "--diff=reuse=none", self.trace)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        m = re.search(r"(\d+) of 3 decisions differ \((\d+) bytes asked\)", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        rows = re.findall(r"^  (\w+) +(\w+) +(\d+) +(\d+)$", r.stdout, re.M)
        self.assertEqual(sum(int(x[2]) for x in rows), int(m.group(1)), r.stdout)
        self.assertEqual(sum(int(x[3]) for x in rows), int(m.group(2)), r.stdout)
        self.assertIn("first difference", r.stdout)
        same = replay("--reuse=all", "--diff", "reuse=all", self.trace)
        self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
        self.assertIn("all 3 decisions are the same", same.stdout)

    def test_diff_against_an_allocator_model(self):
        r = replay("--diff=allocator=rmm-pool", self.trace)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("b = rmm-pool", r.stdout)
        self.assertRegex(r.stdout, r" model +\d+")

    def test_bad_uses_are_usage_errors(self):
        out = self.path("d")
        for args in (["--save-decisions", out, "--check-decisions", out, self.trace],
                     ["--save-decisions", out, "--threshold=0,max", self.trace],
                     ["--save-decisions", out, self.trace, self.trace],
                     ["--diff=colour=blue", self.trace]):
            r = replay(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
        with open(out, "w", encoding="utf-8") as f:
            f.write("something else\n")
        r = replay(f"--check-decisions={out}", self.trace)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"{out}:1: not a decisions file", r.stderr)

    def test_help_lists_the_flags(self):
        r = replay("--help")
        self.assertEqual(r.returncode, 0)
        for flag in ("--save_decisions", "--check_decisions", "--diff"):
            self.assertIn(flag, r.stdout)
        self.assertIn("--save-decisions=FILE", r.stdout)


if __name__ == "__main__":
    unittest.main()
