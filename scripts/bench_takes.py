#!/usr/bin/python3
"""Merges several whole runs of the benchmark suite into one (bench.sh --takes N, issue 38 item 5).

    /usr/bin/python3 scripts/bench_takes.py OUT TAKE_DIR [TAKE_DIR ...]

Why: on these VMs one take of a case can differ from the next by 30-100 % (docs/BENCHMARKS.md),
while Google Benchmark's repetitions inside one process agree closely, so a single suite run
hides the spread a reader needs to trust a ratio. bench.sh --takes N runs the whole suite N
times, one take after the other, each into OUT/take-<k>/, and this script writes what one run
would have written into OUT:

- OUT/<binary>.json for each Google Benchmark binary present in every take: one entry per case
  (its median aggregate, or its single run with --quick) whose real_time, cpu_time and numeric
  counters are the medians over the takes, with the range of the time as counters
  time_min / time_max and the number of takes as takes. The context is the first take's.
- OUT/<name>.md for the binaries that print their own table (bench_psm_decode) and for the
  baselines: each take's table under a "### take k" heading, since their rows are text.

A binary missing from some take (it failed there) is left out and named on stderr; the exit
status is then 1, so bench.sh reports the run as incomplete. Every file is written next to its
name, flushed to disk and renamed.
"""
import glob
import json
import os
import statistics
import sys

from write_whole import write_whole

# Fields of a Google Benchmark entry that are not counters (bench.sh's table skips the same).
NOT_COUNTERS = {"iterations", "real_time", "cpu_time", "time_unit", "name", "run_name", "run_type", "repetitions",
                "repetition_index", "threads", "family_index", "per_family_instance_index", "aggregate_name",
                "aggregate_unit", "label"}


def fail(msg):
    print(f"bench_takes: {msg}", file=sys.stderr)
    sys.exit(2)


def cases(doc):
    """One entry per case: the median aggregate when the run had repetitions, else the run."""
    runs = doc.get("benchmarks", [])
    medians = [b for b in runs if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
    if medians:
        return {b["run_name"]: b for b in medians}
    return {b["name"]: b for b in runs if b.get("run_type") != "aggregate"}


def merge_json(docs):
    """docs: one Google Benchmark document per take -> one document of per-case medians."""
    per_take = [cases(d) for d in docs]
    names = [n for n in per_take[0] if all(n in t for t in per_take)]
    merged = []
    for name in names:
        entries = [t[name] for t in per_take]
        first = entries[0]
        out = {"name": name, "run_name": name, "run_type": "iteration", "time_unit": first.get("time_unit", ""),
               "label": first.get("label", "")}
        times = [e["real_time"] for e in entries]
        out["real_time"] = statistics.median(times)
        out["cpu_time"] = statistics.median(e["cpu_time"] for e in entries)
        for key in first:
            if key in NOT_COUNTERS or not isinstance(first[key], (int, float)) or isinstance(first[key], bool):
                continue
            values = [e[key] for e in entries if isinstance(e.get(key), (int, float))]
            if len(values) == len(entries):
                out[key] = statistics.median(values)
        out["time_min"] = min(times)
        out["time_max"] = max(times)
        out["takes"] = len(entries)
        merged.append(out)
    return {"context": docs[0].get("context", {}), "benchmarks": merged}


def main():
    if len(sys.argv) < 3:
        fail("usage: bench_takes.py OUT TAKE_DIR [TAKE_DIR ...]")
    out, takes = sys.argv[1], sys.argv[2:]
    for t in takes:
        if not os.path.isdir(t):
            fail(f"TAKE_DIR '{t}' is not a directory")
    names = set()
    for t in takes:
        names |= {os.path.basename(p) for p in glob.glob(os.path.join(t, "*.json")) + glob.glob(os.path.join(t, "*.md"))}
    names -= {"machine.json", "tables.md"}
    missing = []
    for name in sorted(names):
        paths = [os.path.join(t, name) for t in takes]
        absent = [t for t, p in zip(takes, paths) if not os.path.exists(p)]
        if absent:
            missing.append(f"{name} (absent from {', '.join(absent)})")
            continue
        target = os.path.join(out, name)
        if name.endswith(".json") and name != "baselines.json":
            try:
                docs = [json.load(open(p)) for p in paths]
            except ValueError as e:
                fail(f"'{name}' of a take is not JSON: {e}")
            write_whole(target, json.dumps(merge_json(docs), indent=1))
        elif name.endswith(".md"):
            parts = [f"### take {k}\n\n" + open(p).read().strip() + "\n" for k, p in enumerate(paths, 1)]
            write_whole(target, "\n".join(parts))
        # baselines.json: its rows are baselines.md's; the takes keep their own copies.
    if missing:
        print("bench_takes: left out, not in every take: " + "; ".join(missing), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
