#!/usr/bin/env python3
"""Markdown summary of the benchmark JSON that `./run.sh bench` writes.

Reads every <name>.json in the results directory (Google Benchmark's
--benchmark_out format), takes each benchmark's median over repetitions when
there are repetitions (else its single run), and prints the ratios the issue
"Benchmarks" asks for:

  Pair         pool/glibc, pool/mimalloc, pool/upstream per size (goal <= 1.5x glibc)
  Holes        cost at H free holes relative to H = 1 000 (goal: 64 000 within 1.3x)
  Random       ns per step, pool/glibc
  Threads      items/s with 2 threads over 1 thread (goal >= 1.6x)
  CrossStream  ns per step and reuse by rule for each policy bitmask
  Policies     peak reserved, virtual makespan and waits for each policy bitmask

Single-thread figures use CPU time (the benchmark thread's own CPU time), which
is less disturbed than wall time when other processes share the machine; the
Threads table uses wall time (throughput) and shows how many cores each run
actually got. Every table also shows the spread of the pool's figure across
repetitions (cv, coefficient of variation) so that noise is visible.

Usage: bench_summary.py [RESULTS_DIR] [--out FILE] [--command TEXT]
RESULTS_DIR defaults to build/bench-results; the summary is written to
RESULTS_DIR/summary.md unless --out says otherwise, and printed. Standard
library only.
"""

import argparse
import glob
import json
import os
import platform
import sys

TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
POLICY_BITS = ("events", "opportunistic", "internal")


class Result:
    """One benchmark instance: the median (or only) run plus its spread."""

    def __init__(self, entry, cv=None, repetitions=1):
        self.entry = entry
        self.cv = cv  # {"cpu_time": fraction, "real_time": fraction} or None
        self.repetitions = repetitions

    def ns(self, which="cpu_time"):
        e = self.entry
        return e[which] * TIME_UNIT_NS[e.get("time_unit", "ns")]

    def counter(self, name, default=None):
        return self.entry.get(name, default)

    @property
    def error(self):
        return self.entry.get("error_occurred", False)

    def spread(self, which="cpu_time"):
        if self.cv is None or which not in self.cv:
            return ""
        return "%.0f%%" % (100.0 * self.cv[which])


def load(results_dir):
    """Every benchmark by run name, plus each file's context."""
    results = {}
    contexts = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print("skipping %s: %s" % (path, e), file=sys.stderr)
            continue
        name = os.path.splitext(os.path.basename(path))[0]
        contexts[name] = data.get("context", {})
        singles = {}
        medians = {}
        cvs = {}
        reps = {}
        for b in data.get("benchmarks", []):
            run = b.get("run_name", b["name"])
            reps[run] = b.get("repetitions", 1)
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    medians[run] = b
                elif b.get("aggregate_name") == "cv":
                    cvs[run] = {"cpu_time": b["cpu_time"], "real_time": b["real_time"]}
            else:
                singles.setdefault(run, b)
                if b.get("error_occurred"):
                    singles[run] = b  # an error in any repetition shows
        for run in set(singles) | set(medians):
            if run in singles and singles[run].get("error_occurred"):
                results[run] = Result(singles[run])
            elif run in medians:
                results[run] = Result(medians[run], cvs.get(run), reps.get(run, 1))
            else:
                results[run] = Result(singles[run], None, reps.get(run, 1))
    return results, contexts


# ----------------------------------------------------------------- formatting


def fmt_ns(ns):
    if ns is None:
        return "–"
    if ns >= 1e6:
        return "%.2f ms" % (ns / 1e6)
    if ns >= 1e3:
        return "%.2f µs" % (ns / 1e3)
    if ns >= 10:
        return "%.0f ns" % ns
    return "%.1f ns" % ns


def fmt_ratio(x):
    if x is None:
        return "–"
    if x >= 100:
        return "%.0f×" % x
    if x >= 10:
        return "%.1f×" % x
    return "%.2f×" % x


def fmt_bytes(b):
    if b is None:
        return "–"
    b = float(b)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return "%.1f %s" % (b / scale, unit)
    return "%.0f B" % b


def fmt_count(x):
    if x is None:
        return "–"
    return "%d" % round(x)


def fmt_size(n):
    n = int(n)
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return "%d %s" % (n // scale, unit)
    return "%d B" % n


def policy_name(mask):
    mask = int(mask)
    on = [POLICY_BITS[i] for i in range(3) if mask & (1 << i)]
    return "%d (%s)" % (mask, "+".join(on) if on else "none")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def goal(ok):
    if ok is None:
        return "–"
    return "met" if ok else "**missed**"


class Summary:
    def __init__(self, results):
        self.r = results
        self.sections = []

    def get(self, run):
        res = self.r.get(run)
        if res is None or res.error:
            return None
        return res

    def ns(self, run, which="cpu_time"):
        res = self.get(run)
        return res.ns(which) if res else None

    @staticmethod
    def ratio(a, b):
        if a is None or b is None or b == 0:
            return None
        return a / b

    def add(self, title, text):
        self.sections.append("## %s\n\n%s\n" % (title, text))

    # ------------------------------------------------------------ sections

    def pair(self):
        sizes = [64, 4096, 65536, 1048576]
        rows = []
        for s in sizes:
            run = lambda comp: "BM_%s_Pair/size:%d" % (comp, s)
            pool, cpp, mem = self.ns(run("Pool")), self.ns(run("Runtime")), self.ns(run("MemPool"))
            glibc, mi = self.ns(run("Glibc")), self.ns(run("Mimalloc"))
            up = self.ns(run("Upstream"))
            if all(x is None for x in (pool, cpp, glibc)):
                continue
            pool_res = self.get(run("Pool"))
            r_glibc = self.ratio(pool, glibc)
            rows.append([
                fmt_size(s), fmt_ns(pool), pool_res.spread() if pool_res else "",
                fmt_ns(cpp), fmt_ns(mem), fmt_ns(glibc), fmt_ns(mi), fmt_ns(up),
                fmt_ratio(r_glibc), fmt_ratio(self.ratio(cpp, glibc)),
                fmt_ratio(self.ratio(pool, mi)), fmt_ratio(self.ratio(pool, up)),
                fmt_ratio(self.ratio(mem, glibc)),
                goal(None if r_glibc is None else r_glibc <= 1.5),
            ])
        if not rows:
            return
        self.add("Pair: same-stream alloc + free (CPU time per pair)", table(
            ["size", "pool (C API)", "cv", "pool (C++)", "MemPool alone", "glibc", "mimalloc",
             "upstream", "C/glibc", "C++/glibc", "C/mimalloc", "C/upstream", "MemPool/glibc",
             "goal C ≤ 1.5× glibc"], rows) +
            "\n\n`MemPool alone` is the internal pool without the runtime (no lock, handle "
            "lookup, allocation map or stream marker op); pool (C API) minus it is the "
            "runtime's share. `upstream` is spMalloc/spFree (one mapping per allocation).")

    def holes(self):
        hs = [1000, 4000, 16000, 64000]
        comps = [("Pool", "pool (READY holes)"), ("Pool_HolesPending", "pool (PENDING holes)"),
                 ("Glibc", "glibc"), ("Mimalloc", "mimalloc"), ("Upstream", "upstream")]
        rows = []
        for comp, label in comps:
            name = ("BM_%s/free_blocks:%%d" % comp if comp.endswith("Pending")
                    else "BM_%s_Holes/free_blocks:%%d" % comp)
            vals = [self.ns(name % h) for h in hs]
            if all(v is None for v in vals):
                continue
            growth = self.ratio(vals[-1], vals[0])
            res = self.get(name % hs[-1])
            rows.append([label] + [fmt_ns(v) for v in vals] +
                        [res.spread() if res else "", fmt_ratio(growth),
                         goal(None if growth is None else growth <= 1.3)
                         if comp.startswith("Pool") else ""])
        if not rows:
            return
        self.add("Holes: 1 KiB pair with H free 1 KiB holes (CPU time per pair)", table(
            ["allocator"] + ["H = %d" % h for h in hs] +
            ["cv (H = 64000)", "H=64000 / H=1000", "goal ≤ 1.3×"], rows))

    def random(self):
        steps_of = lambda res: res.counter("steps") if res else None
        rows = []
        base = {}
        for comp in ("Pool", "Glibc", "Mimalloc"):
            res = self.get("BM_%s_Random" % comp)
            if res is None:
                continue
            per_step = res.ns() / steps_of(res) if steps_of(res) else None
            base[comp] = per_step
            rows.append([comp.lower(), fmt_ns(per_step), res.spread(),
                         fmt_bytes(res.counter("peak_live")),
                         fmt_bytes(res.counter("peak_reserved")),
                         fmt_bytes(res.counter("rss_at_end"))])
        if not rows:
            return
        text = table(["allocator", "CPU time per step", "cv", "peak live", "peak reserved",
                      "RSS at end"], rows)
        r = self.ratio(base.get("Pool"), base.get("Glibc"))
        rm = self.ratio(base.get("Pool"), base.get("Mimalloc"))
        text += ("\n\npool/glibc = **%s**, pool/mimalloc = %s (200 000 steps, seed 42, sizes "
                 "1 B..1 MiB, live bytes capped at 8 GiB; the pool on address-only backing, the "
                 "baselines on real memory nothing writes)." % (fmt_ratio(r), fmt_ratio(rm)))
        self.add("Random: one stream, 200 000 random steps", text)

    def threads(self):
        rows = []
        for bench in ("Pool_ThreadsPair", "Glibc_ThreadsPair", "Mimalloc_ThreadsPair",
                      "Pool_ThreadsRandom", "Glibc_ThreadsRandom"):
            runs = {}
            for t in (1, 2):
                runs[t] = self.get("BM_%s/process_time/real_time/threads:%d" % (bench, t))
            if runs[1] is None and runs[2] is None:
                continue
            ips = {t: (runs[t].counter("items_per_second") if runs[t] else None) for t in runs}
            # Process CPU time is divided by the thread count in the report,
            # real time too: threads x cpu / real = cores the run got.
            cores = {t: (t * runs[t].ns("cpu_time") / runs[t].ns("real_time")
                         if runs[t] else None) for t in runs}
            r = self.ratio(ips[2], ips[1])
            rows.append([
                bench.replace("_", " "),
                "%.2f M/s" % (ips[1] / 1e6) if ips[1] else "–",
                "%.2f M/s" % (ips[2] / 1e6) if ips[2] else "–",
                fmt_ratio(r),
                "%.2f / %.2f" % (cores[1] or 0, cores[2] or 0),
                (runs[2].spread("real_time") if runs[2] else ""),
                goal(None if r is None else r >= 1.6) if bench.startswith("Pool") else "",
            ])
        if not rows:
            return
        self.add("Threads: one shared runtime, a stream per host thread (wall-time throughput)",
                 table(["benchmark", "1 thread", "2 threads", "2/1", "cores got (1t / 2t)",
                        "cv (2t)", "goal ≥ 1.6×"], rows) +
                 "\n\n`cores got` = threads × process CPU time / wall time: below ~1.9 for the "
                 "2-thread run means the machine did not give the run two cores, and the "
                 "baselines' 2/1 ratio is then the ceiling any allocator could reach here.")

    def reuse_columns(self, res):
        return [fmt_count(res.counter(k)) for k in
                ("same_stream", "event_dep", "opportunistic", "internal_dep", "after_sync",
                 "fresh")]

    def cross_stream(self):
        rows = []
        for mask in range(8):
            res = self.get("BM_Pool_CrossStream/policies:%d" % mask)
            if res is None:
                continue
            steps = 100000
            rows.append([policy_name(mask), fmt_ns(res.ns() / steps), res.spread()] +
                        self.reuse_columns(res) +
                        [fmt_bytes(res.counter("peak_reserved")),
                         fmt_bytes(res.counter("peak_used")),
                         fmt_count(res.counter("waits_inserted"))])
        if not rows:
            return
        self.add("CrossStream: 4 streams, 100 000 steps, free on the next stream", table(
            ["policies", "CPU time per step", "cv", "same-stream", "event-dep", "opportunistic",
             "internal-dep", "after-sync", "fresh", "peak reserved", "peak used", "waits"],
            rows) +
            "\n\nNothing synchronizes and no event is recorded, and growth never fails, so "
            "rules 2 and 5 cannot apply: the masks differ only by rule 3. Peak reserved far "
            "above peak used is fragmentation: pending blocks of different streams never "
            "merge and, without a sync, never become READY.")

    def policies(self):
        rows = []
        for max_mib in (64, 1024):
            for mask in range(8):
                res = self.get("BM_Pool_ProducerConsumer/policies:%d/max_size_mib:%d"
                               % (mask, max_mib))
                if res is None:
                    continue
                make = res.counter("makespan_us")
                bound = res.counter("bound_us")
                rows.append([
                    "%d MiB" % max_mib, policy_name(mask),
                    fmt_bytes(res.counter("peak_reserved")), fmt_bytes(res.counter("peak_used")),
                    "%.1f ms" % (make / 1000.0) if make is not None else "–",
                    fmt_ratio(self.ratio(make, bound)),
                    fmt_count(res.counter("waits_inserted")), fmt_count(res.counter("oom_syncs")),
                ] + self.reuse_columns(res))
        if not rows:
            return
        self.add("Policies: producer/consumer pipeline in virtual time", table(
            ["max size", "policies", "peak reserved", "peak used", "virtual makespan",
             "makespan / device bound", "waits inserted", "OOM syncs", "same-stream",
             "event-dep", "opportunistic", "internal-dep", "after-sync", "fresh"], rows) +
            "\n\n1 producer and 3 consumer streams, 2 000 frames of 1..4 MiB, at most 8 in "
            "flight on the device (≤ 32 MiB); the device bound is every producer kernel back to "
            "back. Peak used counts LIVE allocations in host order: each frame is freed (in "
            "stream order) in the round that allocates it, so it is one frame. An OOM sync is "
            "a spDeviceSynchronize + retry after an allocation failed.")


def machine(contexts, command):
    lines = []
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ctx = next(iter(contexts.values()), {})
    lines.append("- machine: %s, %s CPUs (nproc %d), %s MHz, %s" % (
        cpu, ctx.get("num_cpus", "?"), os.cpu_count() or 0, ctx.get("mhz_per_cpu", "?"),
        platform.platform()))
    if command:
        lines.append("- command: `%s`" % command)
    for name, c in sorted(contexts.items()):
        load = c.get("load_avg")
        lines.append("- %s: %s, load average %s" % (
            name, c.get("date", "?"),
            " / ".join("%.1f" % x for x in load) if load else "?"))
    lines.append("- figures are medians over repetitions where the run had several; `cv` is "
                 "their coefficient of variation. The library under test is a Release build "
                 "(the JSON's `library_build_type` describes libbenchmark itself).")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", nargs="?", default="build/bench-results")
    ap.add_argument("--out", help="where to write the Markdown (default RESULTS_DIR/summary.md)")
    ap.add_argument("--command", help="the command that produced the results, for the record")
    args = ap.parse_args()

    results, contexts = load(args.results_dir)
    if not results:
        print("no benchmark results in %s" % args.results_dir, file=sys.stderr)
        return 1
    s = Summary(results)
    for section in (s.pair, s.holes, s.random, s.threads, s.cross_stream, s.policies):
        section()
    text = "# streampool benchmark summary\n\n%s\n\n%s" % (
        machine(contexts, args.command), "\n".join(s.sections))
    out = args.out or os.path.join(args.results_dir, "summary.md")
    with open(out, "w") as f:
        f.write(text)
    print(text)
    print("(written to %s)" % out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
