#!/usr/bin/env python3
"""Before/after of two builds of one Google Benchmark binary at 1 and at 2 threads, interleaved.

bench/ab_takes.py compares two builds at one thread count; a change to how work items share the
threads (issue 38 item 4) needs both counts from the same takes: each take runs both binaries
(which goes first alternates) at MIXLAB_THREADS=1 and =2. Prints per benchmark the medians, each
build's scaling (pairwise median of 1-thread time / 2-thread time within a take) and the 2-thread
before/after ratio (pairwise median; above 1: the new build is faster).

  /usr/bin/python3 bench/ab_threads.py --before /tmp/bench_scan_before --after build/bench/bench_scan \\
      --filter '^BM_Kernel/[012]/0/(1024|4096)/[01]/64/0' --takes 7

--json PATH writes every take as well. Take it on an idle machine (no build running).
"""
import argparse
import json
import os
import statistics
import sys

import ab_takes  # bench/ab_takes.py, beside this file


def one_take(binary, filt, threads, min_time):
    """{benchmark name: real time in ms} of one run of `binary` at `threads` threads (ab_takes' take)."""
    os.environ["MIXLAB_THREADS"] = str(threads)  # the binaries read it (bench/bench_setup.h)
    return ab_takes.one_take(binary, filt, min_time)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the baseline build's benchmark binary")
    ap.add_argument("--after", required=True, help="the new build's benchmark binary")
    ap.add_argument("--filter", required=True, help="--benchmark_filter regex")
    ap.add_argument("--takes", type=int, default=7, help="takes (default 7)")
    ap.add_argument("--min-time", type=float, default=0.3, help="--benchmark_min_time per run (s)")
    ap.add_argument("--json", help="write every take to this file")
    args = ap.parse_args()
    if args.takes < 1:
        sys.exit(f"ab_threads: --takes must be at least 1, got {args.takes}")
    binaries = {"before": args.before, "after": args.after}
    runs = {}  # (name, side, threads) -> [ms per take]
    for take in range(args.takes):
        for side in (["before", "after"] if take % 2 == 0 else ["after", "before"]):
            for threads in (1, 2):
                for name, ms in one_take(binaries[side], args.filter, threads, args.min_time).items():
                    runs.setdefault((name, side, threads), []).append(ms)
        print(f"take {take + 1}/{args.takes}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"|".join(map(str, key)): v for key, v in runs.items()}, f, indent=1)

    def pairwise(a, b):
        return statistics.median(x / y for x, y in zip(a, b))

    print("| benchmark | before 1 thr ms | before 2 thr ms | before scaling | after 1 thr ms | after 2 thr ms |"
          " after scaling | 2 thr before/after |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for name in sorted({key[0] for key in runs}):
        r = {(side, t): runs.get((name, side, t), []) for side in binaries for t in (1, 2)}
        if any(not v for v in r.values()):
            continue  # a benchmark one of the builds does not have
        med = {key: statistics.median(v) for key, v in r.items()}
        print(f"| {name} | {med['before', 1]:.3f} | {med['before', 2]:.3f} | {pairwise(r['before', 1], r['before', 2]):.2f}× "
              f"| {med['after', 1]:.3f} | {med['after', 2]:.3f} | {pairwise(r['after', 1], r['after', 2]):.2f}× "
              f"| {pairwise(r['before', 2], r['after', 2]):.2f}× |")


if __name__ == "__main__":
    main()
