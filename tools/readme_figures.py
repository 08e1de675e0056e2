#!/usr/bin/env python3
"""Prints docs/performance.md's "Real workloads" table from replays of the bundled traces.

    /usr/bin/python3 tools/readme_figures.py
    /usr/bin/python3 tools/readme_figures.py --prose
    /usr/bin/python3 tools/readme_figures.py --check docs/performance.md

It runs the built streampool-replay once over traces/*.trace with

    --json --threshold=0,max --growth=chunked,expandable

(device pool, all reuse rules on, the replay's default capacity and backing)
and prints the Markdown table, header included, exactly as docs/performance.md has it
(--prose: the figures the paragraph under the table quotes). Replays run in
virtual time, so the output is the same on every machine and every run.

A figure is bold where the default growth meets its goal: peak reserved no
more than PyTorch's (ratio <= 1) and utilization >= 0.95. The table gives
threshold 0; the script fails if threshold max gives any other figure, since
the docs say the threshold makes no difference on these traces.

--check FILE exits 1 (printing a diff) unless FILE contains the table as
printed, so a change that moves a figure cannot leave the docs behind.
Standard library only.
"""

import argparse
import difflib
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 1 << 30
MIB = 1 << 20
UTIL_GOAL = 0.95

HEADER = [
    "| trace | PyTorch peak reserved | chunked | ratio | util "
    "| **expandable (default)** | **ratio** | **util** | PyTorch's util |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
]


def replay(binary, traces):
    cmd = [binary, "--json", "--threshold=0,max", "--growth=chunked,expandable", *traces]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)["traces"]


def runs_by_growth(trace):
    """{growth: run at threshold 0}, after checking threshold max agrees."""
    by_key = {(r["growth"], r["release_threshold"]): r for r in trace["runs"]}
    runs = {}
    for growth in ("chunked", "expandable"):
        zero, top = by_key[(growth, 0)], by_key[(growth, "max")]
        for field in ("peak_reserved_bytes", "peak_used_bytes"):
            if zero[field] != top[field]:
                sys.exit(f"{trace['file']}, growth {growth}: {field} is {zero[field]} at "
                         f"threshold 0 but {top[field]} at max; the docs say the threshold "
                         "makes no difference")
        runs[growth] = zero
    return runs


def short_name(path):
    name = os.path.basename(path)
    name = name.removesuffix(".trace")
    return name.removeprefix("torch-")


def gib(n):
    return f"{n / GIB:.2f} GiB"


def bold_if(met, text):
    return f"**{text}**" if met else text


def table(traces):
    lines = list(HEADER)
    for t in traces:
        runs = runs_by_growth(t)
        c, e = runs["chunked"], runs["expandable"]
        torch = t["torch"]
        e_ratio, e_util = e["vs_torch_peak_reserved"], e["utilization"]
        cells = [
            short_name(t["file"]),
            gib(torch["peak_reserved_bytes"]),
            gib(c["peak_reserved_bytes"]),
            f"{c['vs_torch_peak_reserved']:.3f}",
            f"{c['utilization']:.3f}",
            gib(e["peak_reserved_bytes"]),
            bold_if(e_ratio <= 1.0, f"{e_ratio:.3f}"),
            bold_if(e_util >= UTIL_GOAL, f"{e_util:.3f}"),
            f"{torch['utilization']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def prose_figures(traces):
    """What the paragraph under the table quotes, from the same replays."""
    out = []
    savings, short = [], []
    for t in traces:
        e = runs_by_growth(t)["expandable"]
        savings.append(1.0 - e["vs_torch_peak_reserved"])
        if e["utilization"] < UTIL_GOAL:
            need = t["peak_live_bytes"] / UTIL_GOAL
            short.append(f"{short_name(t['file'])}: utilization {e['utilization']:.4f}, "
                         f"{UTIL_GOAL - e['utilization']:.4f} short of {UTIL_GOAL}, "
                         f"{(e['peak_reserved_bytes'] - need) / MIB:.1f} MiB more reserved than "
                         f"{t['peak_live_bytes'] / GIB:.3f} GiB / {UTIL_GOAL}")
    less = sum(s > 0 for s in savings)
    out.append(f"expandable holds less than PyTorch on {less} of {len(traces)} traces, "
               f"by {100 * min(savings):.1f}-{100 * max(savings):.1f} %")
    out.append(f"utilization >= {UTIL_GOAL} on {len(traces) - len(short)} of {len(traces)}")
    out.extend(short)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replay", default=os.path.join(ROOT, "build/release/tools/streampool-replay"),
                    help="the streampool-replay binary (default: %(default)s)")
    ap.add_argument("--traces", default=os.path.join(ROOT, "traces"),
                    help="directory of *.trace files (default: %(default)s)")
    ap.add_argument("--prose", action="store_true",
                    help="print the figures the paragraph under the table quotes instead")
    ap.add_argument("--check", metavar="FILE",
                    help="exit 1 unless FILE contains the table as printed")
    args = ap.parse_args()

    files = sorted(glob.glob(os.path.join(args.traces, "*.trace")))
    if not files:
        sys.exit(f"no *.trace files in {args.traces}")
    if not os.access(args.replay, os.X_OK):
        sys.exit(f"{args.replay} is not built (./run.sh build, or pass --replay)")
    traces = replay(args.replay, files)
    lines = table(traces)

    if args.check:
        with open(args.check, encoding="utf-8") as f:
            text = f.read()
        block = "\n".join(lines) + "\n"
        if block in text:
            return 0
        have = [l for l in text.splitlines() if l.startswith("| ") and
                any(short_name(t["file"]) in l for t in traces)]
        sys.stdout.writelines(difflib.unified_diff(
            [l + "\n" for l in have], [l + "\n" for l in lines[2:]],
            f"{args.check} (table rows)", "tools/readme_figures.py"))
        print(f"{args.check}: the Real workloads table is not what the replays give; "
              "regenerate it with /usr/bin/python3 tools/readme_figures.py", file=sys.stderr)
        return 1

    print("\n".join(prose_figures(traces) if args.prose else lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
