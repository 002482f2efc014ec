#!/usr/bin/env python3
"""Before/after of two builds of one Google Benchmark binary, in interleaved takes.

A single take on a small shared VM moves by 30-50 % between runs of the same binary, so one
before and one after prove nothing. This runs the two binaries alternately, N takes each, on the
same filter (which side goes first alternates), and prints per benchmark the median and minimum of each side and the median of the
pairwise ratios (before / after: above 1 means the new build is faster).

  python3 bench/ab_takes.py --before /tmp/old/build/bench/bench_resolvent \
      --after build/bench/bench_resolvent --filter '^BM_OpForwardPlain/pow2/16384/' --takes 15

--json PATH writes every take as well. Take it on an idle machine (no build running).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def one_take(binary, filt, min_time, field="real_time"):
    cmd = [binary, f"--benchmark_filter={filt}", f"--benchmark_min_time={min_time}", "--benchmark_format=json"]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ab_takes: {binary} exited with {out.returncode}: {out.stderr.strip()[-400:]}")
    rows = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        unit = b.get("time_unit", "ns")
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
        rows[b["name"]] = b[field] * scale  # milliseconds
    if not rows:
        sys.exit(f"ab_takes: the filter {filt!r} matched no benchmark of {binary}")
    return rows


def summarise(before, after):
    """Rows {name, before, after, pairwise_median} for the names every take of both sides has;
    take i of one side is paired with take i of the other (they ran next to each other)."""
    if len(before) != len(after) or not before:
        raise ValueError(f"expected the same, non-zero number of takes per side, got {len(before)} and {len(after)}")
    names = [n for n in before[0] if all(n in t for t in before + after)]
    rows = []
    for n in names:
        b = [t[n] for t in before]
        f = [t[n] for t in after]
        rows.append({"name": n, "before": b, "after": f,
                     "pairwise_median": statistics.median(x / y for x, y in zip(b, f))})
    return rows


def markdown(rows):
    lines = ["| benchmark | before median ms | after median ms | before min | after min "
             "| before/after (pairwise median) |", "|---|--:|--:|--:|--:|--:|"]
    for r in rows:
        b, f = r["before"], r["after"]
        lines.append(f"| {r['name']} | {statistics.median(b):.3f} | {statistics.median(f):.3f} | {min(b):.3f} "
                     f"| {min(f):.3f} | {r['pairwise_median']:.2f}× |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the baseline build's benchmark binary")
    ap.add_argument("--after", required=True, help="the new build's benchmark binary")
    ap.add_argument("--filter", required=True, help="--benchmark_filter regex")
    ap.add_argument("--takes", type=int, default=9, help="takes per side (default 9)")
    ap.add_argument("--min-time", type=float, default=0.3, help="--benchmark_min_time per take (s)")
    ap.add_argument("--json", help="write every take to this file")
    ap.add_argument("--cpu-time", action="store_true",
                    help="compare the processes' CPU time instead of wall time (when another process shares the cores)")
    a = ap.parse_args()
    for name, path in (("--before", a.before), ("--after", a.after)):
        if not os.access(path, os.X_OK):
            sys.exit(f"ab_takes: {name}: expected an executable benchmark binary, got {path!r}")
    if a.takes < 1:
        sys.exit(f"ab_takes: --takes: expected at least 1, got {a.takes}")
    takes = {"before": [], "after": []}
    for i in range(a.takes):
        # Alternate which side goes first, so that a drift inside a pair (a cache or frequency
        # state the first run leaves) does not favour one side.
        sides = (("before", a.before), ("after", a.after))
        for side, binary in sides if i % 2 == 0 else sides[::-1]:
            takes[side].append(one_take(binary, a.filter, a.min_time, "cpu_time" if a.cpu_time else "real_time"))
        print(f"take {i + 1}/{a.takes}", file=sys.stderr, flush=True)
    rows = summarise(takes["before"], takes["after"])
    print(markdown(rows))
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"before": a.before, "after": a.after, "filter": a.filter, "rows": rows}, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
