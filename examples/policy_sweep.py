#!/usr/bin/env python3
"""Notebook-style sweep: how the release threshold and the reuse policies
change what the bundled PyTorch traces need, and what the policy lab's
multi-stream workloads (traces/lab/) need at the smallest device each fits
on, printed as tables and, when matplotlib is installed (Debian:
python3-matplotlib), drawn as charts.

    PYTHONPATH=build/release/python python3 examples/policy_sweep.py
    python3 examples/policy_sweep.py --thresholds 0,1GiB,max --plot sweep.png

Each trace is replayed once per (threshold, reuse combination) with sp.replay,
the engine of streampool-replay; its JSON is the data. The suite goes through
sp.replay(..., report="policy"), streampool-replay --policy-report's engine.
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


# %% The policy lab: each workload's smallest device per policy set, and the
# makespan there.
def lab(traces, thresholds):
    doc = sp.replay(traces, policies="all", threshold=thresholds, report="policy")
    rows = []
    for trace in doc["traces"]:
        name = os.path.basename(trace["file"]).removesuffix(".trace")
        best = trace["best"]
        for i, row in enumerate(trace["rows"]):
            rows.append({
                "trace": name,
                "reuse": row["reuse"],
                "threshold": row["threshold"],
                "fits": row["fits"],
                "min_mib": (row["min_capacity_bytes"] or 0) / (1 << 20),
                "makespan_ms": (row["makespan_ns_at_min_capacity"] or 0) / 1e6,
                "waits": row["waits_inserted"],
                "best": best is not None and best["row"] == i,
            })
    return doc, rows


def print_lab(doc, rows):
    print(f"\n{'workload':12} {'reuse':29} {'threshold':>9} {'min MiB':>8} {'makespan ms':>11} "
          f"{'waits':>6}")
    for r in rows:
        mark = " *" if r["best"] else ""
        cap = f"{r['min_mib']:8.0f}" if r["fits"] else f"{'-':>8}"
        print(f"{r['trace']:12} {r['reuse']:29} {str(r['threshold']):>9} {cap} "
              f"{r['makespan_ms']:11.3f} {r['waits'] or 0:6}{mark}")
    print("* the workload's best policy set (smallest device; ties: shorter makespan)")
    for trace in doc["traces"]:
        best, cuda = trace["best"], trace["vs_cuda_defaults"]
        if best and cuda and cuda["saved_bytes"] is not None:
            print(f"  {os.path.basename(trace['file'])}: {best['setting']} saves "
                  f"{cuda['saved_bytes'] / (1 << 20):.0f} MiB against CUDA's defaults")


def plot_lab(rows, path):
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
        for r in (r for r in rows if r["trace"] == trace and r["fits"]):
            ax.plot(r["min_mib"], r["makespan_ms"], "o" if r["threshold"] == 0 else "s",
                    color="tab:red" if r["best"] else "tab:blue")
            ax.annotate(r["reuse"], (r["min_mib"], r["makespan_ms"]), fontsize=5)
        ax.set_title(trace, fontsize=8)
        ax.set_xlabel("minimum capacity (MiB)", fontsize=7)
    axes[0][0].set_ylabel("makespan at that capacity (ms)")
    fig.tight_layout()
    fig.savefig(path)
    print(f"chart: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", nargs="*",
                        default=sorted(glob.glob(os.path.join(TRACES_DIR, "*.trace"))))
    parser.add_argument("--thresholds", default="0,max",
                        help="comma-separated bytes (K/M/GiB suffixes) or max")
    parser.add_argument("--lab", nargs="*",
                        default=sorted(glob.glob(os.path.join(TRACES_DIR, "lab", "*.trace"))),
                        help="the policy lab's recordings")
    parser.add_argument("--plot", default="policy_sweep.png",
                        help="chart file ('' for none); the lab's goes beside it, *_lab.png")
    args = parser.parse_args()
    thresholds = [parse_bytes(t) for t in args.thresholds.split(",")]
    rows = sweep(args.traces, thresholds)
    print_table(rows)
    if args.plot:
        plot(rows, args.plot)
    if args.lab:
        doc, lab_rows = lab(args.lab, thresholds)
        print_lab(doc, lab_rows)
        if args.plot:
            root, ext = os.path.splitext(args.plot)
            plot_lab(lab_rows, f"{root}_lab{ext or '.png'}")


if __name__ == "__main__":
    main()
