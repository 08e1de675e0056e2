#!/usr/bin/env python3
"""The same training steps (tools/gpu/torch_step.py) under PyTorch's caching
allocator, its cudaMallocAsync backend and streampool, each in a process of
its own, and a table of what each cost:

    PYTHONPATH=build/release/python python3 tools/gpu/torch_compare.py --steps 20

    allocator        peak reserved  x default  step ms  x default  losses equal
    default               1.20 GiB       1.00    12.31       1.00  (reference)
    cudaMallocAsync       1.10 GiB       0.92    12.40       1.01  yes
    streampool            1.05 GiB       0.88    12.35       1.00  no (step 7)

"losses equal" compares each step's loss bit for bit with the default run's
and names the first step that differs. Arguments other than --json go to
torch_step.py (--steps, --warmup, --seed, --batch, ...). --json prints the
three runs' JSON objects as one list instead of the table. Without PyTorch or
without a GPU this prints torch_step.py's "skipped: <reason>" and exits 0.
"""

import json
import os
import subprocess
import sys

ALLOCATORS = ("default", "cudaMallocAsync", "streampool")
STEP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_step.py")


def run(allocator, args):
    """torch_step.py's result for one allocator: its JSON object, or
    ("skipped", reason), or ("failed", what it printed)."""
    r = subprocess.run([sys.executable, STEP, "--allocator", allocator] + args,
                       capture_output=True, text=True, check=False)
    lines = r.stdout.strip().splitlines()
    if r.returncode == 0 and lines and lines[-1].startswith("skipped:"):
        return ("skipped", lines[-1][len("skipped:"):].strip())
    if r.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-5:]
    return ("failed", f"exit status {r.returncode}: " + " | ".join(tail))


def gib(n):
    return f"{n / (1 << 30):.2f} GiB"


def losses_equal(run_losses, reference):
    if len(run_losses) != len(reference):
        return f"no ({len(run_losses)} steps, not {len(reference)})"
    for step, (a, b) in enumerate(zip(run_losses, reference), start=1):
        if a != b:
            return f"no (step {step})"
    return "yes"


def table(results):
    ref = results.get("default")
    rows = [("allocator", "peak reserved", "x default", "step ms", "x default", "losses equal")]
    for name in ALLOCATORS:
        r = results[name]
        if isinstance(r, tuple):
            rows.append((name, r[0], "", "", "", r[1]))
            continue
        if isinstance(ref, dict):
            mem = f"{r['peak_reserved_bytes'] / ref['peak_reserved_bytes']:.2f}" \
                if ref["peak_reserved_bytes"] else "-"
            step = f"{r['mean_step_ms'] / ref['mean_step_ms']:.2f}" if ref["mean_step_ms"] else "-"
            equal = "(reference)" if name == "default" else losses_equal(r["losses"],
                                                                         ref["losses"])
        else:
            mem = step = equal = "-"
        rows.append((name, gib(r["peak_reserved_bytes"]), mem, f"{r['mean_step_ms']:.2f}", step,
                     equal))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:5], widths[1:5])]
        cells.append(row[5])
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv):
    as_json = "--json" in argv
    args = [a for a in argv if a != "--json"]
    if "-h" in args or "--help" in args:
        print(__doc__)
        return 0
    results = {}
    for name in ALLOCATORS:
        results[name] = run(name, args)
        r = results[name]
        # No PyTorch or no GPU: every run would say the same.
        if isinstance(r, tuple) and r[0] == "skipped":
            print(f"skipped: {r[1]}")
            return 0
    if as_json:
        print(json.dumps([results[n] if isinstance(results[n], dict)
                          else {"allocator": n, results[n][0]: results[n][1]}
                          for n in ALLOCATORS], indent=1))
    else:
        first = next((r for r in results.values() if isinstance(r, dict)), None)
        if first is not None:
            print(f"{first['device']}, PyTorch {first['torch']}, {first['steps']} steps "
                  f"({first['warmup']} warm-up), model {first['model']}")
        print(table(results))
    failed = [n for n in ALLOCATORS if isinstance(results[n], tuple)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
