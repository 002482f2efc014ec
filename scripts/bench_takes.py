#!/usr/bin/python3
"""Merges several whole runs of the benchmark suite into one (bench.sh --takes N, issue 38 item 5).

    /usr/bin/python3 scripts/bench_takes.py OUT TAKE_DIR [TAKE_DIR ...]

Why: on these VMs one take of a case can differ from the next by 30-100 % (docs/BENCHMARKS.md),
while Google Benchmark's repetitions inside one process agree closely, so a single suite run
hides the spread a reader needs to trust a ratio. bench.sh --takes N runs the whole suite N
times, one take after the other, each into OUT/take-<k>/, and this script writes what one run
would have written into OUT:

- OUT/<binary>.json for each Google Benchmark binary present in every take: one entry per case
  (its median aggregate, or its single run with --quick) taken from the case's median take by
  real time, with that take's cpu_time and counters (one take's coherent figures, never a mix),
  the range of the time over the takes as counters time_min / time_max, the number of takes as
  takes and the take chosen as take. The context is the first take's.
- OUT/baselines.{json,md} (bench/baselines/run.py): one row per case (kernel, B, H, T, D,
  threads, mode) from the row's median take by ratio, with ratio_min / ratio_max over the
  takes; the table ends with a summary, per kernel and mode, of the range of ratios over its
  rows (the README's and BENCHMARKS' headline). Each take's own table stays in its folder.
- OUT/threads.{json,md} (bench/thread_scaling.py, 1 thread against 2): one row per kernel row
  and for the training step, from the row's median take by speedup, with speedup_min /
  speedup_max; the table (scripts/thread_table.py) ends with how many rows reach issue 38's 1.7x.
- OUT/<name>.md for the binaries that print their own table (bench_psm_decode): each take's table
  under a "### take k" heading, since its rows are text.

"The median take" of an even number of takes is the lower of the two middle ones
(statistics.median_low): for a time the faster take, since a VM's noise only slows a run, and
for a ratio the lower one, so that a claim drawn from it is the cautious one. A mean of two
takes would be a figure no run measured, moved halfway by one slowed take.

A binary missing from some take (it failed there) is left out and named on stderr; the exit
status is then 1, so bench.sh reports the run as incomplete. Every file is written next to its
name, flushed to disk and renamed.
"""
import glob
import json
import os
import statistics
import sys

from baseline_summary import ratio_summary_lines
from thread_table import thread_table_lines
from write_whole import write_whole

# Fields of a Google Benchmark entry that are not counters (bench.sh's table skips the same).
NOT_COUNTERS = {"iterations", "real_time", "cpu_time", "time_unit", "name", "run_name", "run_type", "repetitions",
                "repetition_index", "threads", "family_index", "per_family_instance_index", "aggregate_name",
                "aggregate_unit", "label"}


def fail(msg):
    print(f"bench_takes: {msg}", file=sys.stderr)
    sys.exit(2)


def is_number(value):
    """A JSON number (bool is an int to Python, not a figure)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cases(doc):
    """One entry per case: the median aggregate when the run had repetitions, else the run."""
    runs = doc.get("benchmarks", [])
    medians = [b for b in runs if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
    if medians:
        return {b["run_name"]: b for b in medians}
    return {b["name"]: b for b in runs if b.get("run_type") != "aggregate"}


def median_take(values):
    """Index of the median take of values (the lower middle one for an even count)."""
    chosen = statistics.median_low(values)
    return values.index(chosen)


def merge_json(docs):
    """docs: one Google Benchmark document per take -> one document of the cases' median takes."""
    per_take = [cases(d) for d in docs]
    names = [n for n in per_take[0] if all(n in t for t in per_take)]
    merged = []
    for name in names:
        entries = [t[name] for t in per_take]
        times = [e["real_time"] for e in entries]
        k = median_take(times)
        chosen = entries[k]
        out = {"name": name, "run_name": name, "run_type": "iteration", "time_unit": chosen.get("time_unit", ""),
               "label": chosen.get("label", ""), "real_time": chosen["real_time"], "cpu_time": chosen["cpu_time"]}
        for key, value in chosen.items():
            if key in NOT_COUNTERS or not is_number(value):
                continue
            out[key] = value
        out["time_min"] = min(times)
        out["time_max"] = max(times)
        out["takes"] = len(entries)
        out["take"] = k + 1
        merged.append(out)
    return {"context": docs[0].get("context", {}), "benchmarks": merged}


def merge_rows(per_take, figure):
    """per_take: {key: row} per take -> (rows, how many keys were missing from some take). Each row
    present in every take is its median take by `figure`, with <figure>_min / <figure>_max over the
    takes, the number of takes and the take chosen, in the first take's order."""
    keys = [key for key in per_take[0] if all(key in t for t in per_take)]
    dropped = len(set().union(*per_take)) - len(keys)
    rows = []
    for key in keys:
        entries = [t[key] for t in per_take]
        values = [e[figure] for e in entries]
        k = median_take(values)
        row = dict(entries[k])
        row.update({f"{figure}_min": min(values), f"{figure}_max": max(values), "takes": len(entries), "take": k + 1})
        rows.append(row)
    return rows, dropped


BASELINE_KEY = ("kernel", "B", "H", "T", "D", "threads", "mode")
BASELINE_NUMBERS = ("ratio", "baseline_ms", "mixlab_ms", "max_abs_diff")  # the table's numeric cells


def merge_baselines(docs):
    """docs: one bench/baselines/run.py JSON per take -> (merged document, markdown table)."""
    per_take = []
    for k, d in enumerate(docs, 1):
        rows = {}
        for r in d.get("rows", []):
            if not isinstance(r, dict) or any(f not in r for f in BASELINE_KEY) or \
                    not all(is_number(r.get(f)) for f in BASELINE_NUMBERS):
                fail(f"baselines.json of take {k}: expected rows with {', '.join(BASELINE_KEY)} and numbers "
                     f"{', '.join(BASELINE_NUMBERS)}, got {r!r}")
            rows[tuple(r[f] for f in BASELINE_KEY)] = r
        per_take.append(rows)
    rows, dropped = merge_rows(per_take, "ratio")
    sgemm = [d.get("sgemm_gflops", {}) for d in docs]
    doc = {"sgemm_gflops_per_take": sgemm, "isa": docs[0].get("isa"),
           "block_cache": docs[0].get("block_cache"), "takes": len(docs), "rows": rows}
    lines = ["sgemm roofline per take (torch.matmul, 256 products of 64x64 @ 64x64): " +
             "; ".join(f"take {k}: " + ", ".join(f"{float(v):.1f} GF/s at {t} thread{'s' if str(t) != '1' else ''}"
                                                  for t, v in s.items()) for k, s in enumerate(sgemm, 1)),
              f"CPU block cache (both sides): {doc['block_cache']}",
              f"Each row is its median take by ratio of {len(docs)} (the lower middle one for an even count); "
              "the range is the ratio over every take.", "",
              "| kernel | B | T | threads | mode | plain torch ms | mixlab ms | ratio | ratio range | take "
              "| max abs diff |",
              "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['B']} | {r['T']} | {r['threads']} | {r['mode']} | "
                     f"{r['baseline_ms']:.3g} | {r['mixlab_ms']:.3g} | **{r['ratio']:.2f}×** | "
                     f"{r['ratio_min']:.2f}–{r['ratio_max']:.2f}× | {r['take']} | {r['max_abs_diff']:.1e} |")
    lines += [""] + ratio_summary_lines(rows)
    if dropped:
        lines += ["", f"Cases not in every take, left out: {dropped}."]
    return doc, "\n".join(lines) + "\n"


THREAD_NUMBERS = ("one", "two", "speedup")


def merge_threads(docs):
    """docs: one bench/thread_scaling.py JSON per take -> (merged document, markdown table)."""
    per_take = []
    for k, d in enumerate(docs, 1):
        rows = {}
        for r in d.get("rows", []) if isinstance(d, dict) else [None]:
            if not isinstance(r, dict) or not isinstance(r.get("name"), str) or r.get("unit") not in ("ms", "tok/s") \
                    or not all(is_number(r.get(f)) for f in THREAD_NUMBERS):
                fail(f"threads.json of take {k}: expected rows with a name, unit ms or tok/s and numbers "
                     f"{', '.join(THREAD_NUMBERS)}, got {r!r}")
            rows[r["name"]] = r
        per_take.append(rows)
    rows, dropped = merge_rows(per_take, "speedup")
    lines = [f"Each row is its median take by speedup of {len(docs)} (the lower middle one for an even count); "
             "the range is the speedup over every take.", ""] + thread_table_lines(rows)
    if dropped:
        lines += ["", f"Rows not in every take, left out: {dropped}."]
    return {"takes": len(docs), "rows": rows}, "\n".join(lines) + "\n"


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
        if name in ("baselines.md", "threads.md"):
            continue  # written with baselines.json / threads.json, from their rows
        if name.endswith(".json"):
            try:
                docs = [json.load(open(p)) for p in paths]
            except ValueError as e:
                fail(f"'{name}' of a take is not JSON: {e}")
            if name == "baselines.json":
                doc, table = merge_baselines(docs)
                write_whole(target, json.dumps(doc, indent=1))
                write_whole(os.path.join(out, "baselines.md"), table)
            elif name == "threads.json":
                doc, table = merge_threads(docs)
                write_whole(target, json.dumps(doc, indent=1))
                write_whole(os.path.join(out, "threads.md"), table)
            else:
                write_whole(target, json.dumps(merge_json(docs), indent=1))
        elif name.endswith(".md"):
            parts = [f"### take {k}\n\n" + open(p).read().strip() + "\n" for k, p in enumerate(paths, 1)]
            write_whole(target, "\n".join(parts))
    if missing:
        print("bench_takes: left out, not in every take: " + "; ".join(missing), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
