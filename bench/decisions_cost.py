#!/usr/bin/env python3
"""What saving and checking decisions cost: streampool-replay on each trace
plain, with --save-decisions, with --check-decisions of that file (every
decision agrees) and of the file with its tenth-last placed decision moved
256 bytes (the check runs to near the end and exits 3 there). Prints CPU
(user + sys) and wall seconds, best of --runs, and each figure as a ratio to
the plain replay: the goal is at most 1.2 for saving and checking, and the
edited check under a second on a 100 000-op trace.

With no trace given, measures the bundled traces' largest and a generated
multi-stream program of --ops ops (seeded: --seed).

  bench/decisions_cost.py --replay build/release/tools/streampool-replay
"""

import argparse
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def generated_trace(seed, ops):
    """Four streams allocating and freeing in equal measure (some frees on
    another stream), kernels, event handoffs and host time: about `ops` ops
    with a bounded live set."""
    rng = random.Random(seed)
    out = ["# streampool trace v1"]
    live = []
    next_id = 1
    while len(out) <= ops:
        s = 1 + rng.randrange(4)
        k = rng.randrange(8)
        if k < 2 or not live:
            size = (1 + rng.randrange(64)) * 4096 * (1 + rng.randrange(16))
            out.append(f"alloc {next_id} {size} {s}")
            live.append((next_id, s))
            next_id += 1
        elif k < 4:
            i, owner = live.pop(rng.randrange(len(live)) if rng.random() < 0.3 else 0)
            out.append(f"free {i} {owner if rng.random() < 0.8 else s}")
        elif k < 6:
            out.append(f"kernel {s} {1000 + rng.randrange(50000)}")
        elif k == 6:
            out.append(f"record {s} {s}")
            out.append(f"wait {1 + s % 4} {s}")
        else:
            out.append(f"advance {rng.randrange(20000)}")
    out.extend(f"free {i} {owner}" for i, owner in live)
    return "\n".join(out) + "\n"


def best(replay, args, runs):
    """(CPU s, wall s, exit status), each the best of `runs`."""
    cpu = wall = float("inf")
    rc = None
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        rc = subprocess.run([replay, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, check=False).returncode
        wall = min(wall, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return cpu, wall, rc


def edited(saved, path):
    """saved with its tenth-last placed decision 256 bytes further on; its op."""
    with open(saved, encoding="utf-8") as f:
        lines = f.readlines()
    k = max(i for i, line in enumerate(lines[:-9]) if re.match(r"^\d.* \d+\+\d+ ", line))
    fields = lines[k].split()
    chunk, offset = fields[6].split("+")
    fields[6] = f"{chunk}+{int(offset) + 256}"
    lines[k] = " ".join(fields) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return fields[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replay", required=True, help="the streampool-replay binary")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--ops", type=int, default=100000)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("traces", nargs="*")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        traces = a.traces
        if not traces:
            generated = os.path.join(tmp, f"generated-{a.ops}-seed{a.seed}.trace")
            with open(generated, "w", encoding="utf-8") as f:
                f.write(generated_trace(a.seed, a.ops))
            traces = [os.path.join(ROOT, "traces", "torch-medium-512-training.trace"),
                      os.path.join(ROOT, "traces", "lab", "server.trace"), generated]
        for trace in traces:
            saved, changed = os.path.join(tmp, "saved"), os.path.join(tmp, "edited")
            subprocess.run([a.replay, f"--save-decisions={saved}", trace],
                           stdout=subprocess.DEVNULL, check=True)
            op = edited(saved, changed)
            with open(trace, encoding="utf-8") as f:
                ops = sum(1 for _ in f)
            with open(saved, encoding="utf-8") as f:
                decisions = sum(1 for line in f if line[:1].isdigit())
            rows = [("plain", [trace]), ("save", [f"--save-decisions={saved}", trace]),
                    ("check", [f"--check-decisions={saved}", trace]),
                    (f"check, op {op} edited", [f"--check-decisions={changed}", trace])]
            print(f"{os.path.basename(trace)}: {ops} lines, {decisions} decisions")
            base = None
            for name, args in rows:
                cpu, wall, rc = best(a.replay, args, a.runs)
                base = base or cpu
                print(f"  {name:24s} cpu {cpu * 1e3:8.1f} ms  wall {wall * 1e3:8.1f} ms  "
                      f"exit {rc}  x{cpu / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
