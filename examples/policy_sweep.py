#!/usr/bin/env python3
"""Notebook-style sweep: how the release threshold and the reuse policies
change what the bundled PyTorch traces need, printed as a table and, when
matplotlib is installed (Debian: python3-matplotlib), drawn as a chart.

    PYTHONPATH=build/release/python python3 examples/policy_sweep.py
    python3 examples/policy_sweep.py --thresholds 0,1GiB,max --plot sweep.png

Each trace is replayed once per (threshold, reuse combination) with sp.replay,
the engine of streampool-replay; its JSON is the data.
"""

import argparse
import glob
import os

import streampool as sp

GiB = 1 << 30
TRACES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces")


def parse_bytes(text):
    if text == "max":
        return "max"
    for suffix, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if text.endswith(suffix):
            return int(text[:-len(suffix)]) << shift
    return int(text)


# %% Sweep: every trace under every threshold and all 8 reuse combinations.
def sweep(traces, thresholds):
    doc = sp.replay(traces, policies="all", threshold=thresholds)
    rows = []
    for trace in doc["traces"]:
        for run in trace["runs"]:
            rows.append({
                "trace": os.path.basename(trace["file"]).removesuffix(".trace"),
                "reuse": "+".join(k for k, on in run["reuse"].items() if on) or "none",
                "threshold": run["release_threshold"],
                "peak_reserved_gib": run["peak_reserved_bytes"] / GiB,
                "vs_torch": run["vs_torch_peak_reserved"],
                "utilization": run["utilization"],
                "waits": run["waits_inserted"],
                "failed": run["failed_allocs"],
                "maps": run["upstream_maps"],
            })
    return rows


# %% Table: one line per run, the best setting of each trace marked.
def print_table(rows):
    best = {}
    for r in rows:
        if r["failed"] == 0:
            key = r["trace"]
            if key not in best or r["peak_reserved_gib"] < best[key]["peak_reserved_gib"]:
                best[key] = r
    print(f"{'trace':34} {'reuse':29} {'threshold':>10} {'peak GiB':>9} {'vs torch':>8} "
          f"{'util':>6} {'waits':>5} {'maps':>6} {'fail':>4}")
    for r in rows:
        vs = "-" if r["vs_torch"] is None else f"{r['vs_torch']:.4f}"
        mark = " *" if best.get(r["trace"]) is r else ""
        print(f"{r['trace']:34} {r['reuse']:29} {str(r['threshold']):>10} "
              f"{r['peak_reserved_gib']:9.3f} {vs:>8} {r['utilization']:6.3f} {r['waits']:5} "
              f"{r['maps']:6} {r['failed']:4}{mark}")
    print("* the lowest peak reserved of the trace without failed allocations; "
          "maps = upstream maps (growths), which a higher threshold saves")


# %% Chart: peak reserved against PyTorch's, per trace and reuse setting.
def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (Debian: python3-matplotlib); no chart")
        return
    traces = sorted({r["trace"] for r in rows})
    fig, axes = plt.subplots(1, len(traces), figsize=(4 * len(traces), 4), squeeze=False)
    for ax, trace in zip(axes[0], traces):
        mine = [r for r in rows if r["trace"] == trace]
        for threshold in sorted({str(r["threshold"]) for r in mine}):
            runs = [r for r in mine if str(r["threshold"]) == threshold]
            ax.plot([r["reuse"] for r in runs], [r["vs_torch"] or 0 for r in runs], "o-",
                    label=f"threshold {threshold}")
        ax.axhline(1.0, color="grey", linestyle=":")
        ax.set_title(trace, fontsize=8)
        ax.tick_params(axis="x", labelrotation=90, labelsize=6)
    axes[0][0].set_ylabel("peak reserved / PyTorch's")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path)
    print(f"chart: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", nargs="*",
                        default=sorted(glob.glob(os.path.join(TRACES_DIR, "*.trace"))))
    parser.add_argument("--thresholds", default="0,max",
                        help="comma-separated bytes (K/M/GiB suffixes) or max")
    parser.add_argument("--plot", default="policy_sweep.png", help="chart file ('' for none)")
    args = parser.parse_args()
    rows = sweep(args.traces, [parse_bytes(t) for t in args.thresholds.split(",")])
    print_table(rows)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
