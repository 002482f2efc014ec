#!/usr/bin/env python3
"""How one run scales from 1 to 2 intra-op threads (issue 38 item 4): every fast row of the kernel
table (bench_kernels, wall time per call, forward and forward+backward) and a training step
(`mixlab train --task lm`, tokens/s), each measured at 1 and at 2 threads in the same invocation.

Usage: /usr/bin/python3 bench/thread_scaling.py [--build build] [--min-time 0.3] [--steps 40]
                                               [--no-train] [--json FILE]
Prints a markdown table (scripts/thread_table.py): speedup = time at 1 thread / time at 2 threads
(throughput ratio for the training step), then how many rows reach issue 38's 1.7x and the lowest.
--json writes the rows too (flushed, renamed); bench.sh runs this as its `threads` step, and
bench.sh --takes N merges the takes per row (scripts/bench_takes.py). Run it on an idle machine:
two threads on two cores leave nothing for anyone else.

       /usr/bin/python3 bench/thread_scaling.py --training-steps [--takes 3] [--steps 40] [--models lm,pow2]
The training steps only: the LM step above and the main job's recall model (d 64, 2 layers,
T 64, batch 32) for several mixers, each at 1 thread, at 2 threads with every operation split
over both (`row_groups=1`), and at 2 threads with the batch's rows in 2 groups (the default,
mixlab/train/row_groups.h); interleaved takes, medians of each run's per-step rates.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from thread_table import speedup, thread_table_lines  # noqa: E402
from write_whole import write_whole  # noqa: E402


def kernel_times(build, threads, min_time):
    """Wall ms per call of every fast kernel-table row at `threads` threads: {name: ms}."""
    env = dict(os.environ, MIXLAB_THREADS=str(threads))
    # bench_kernels prints through its own reporter (it ignores --benchmark_format); the JSON
    # comes from Google Benchmark's file reporter.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernels.json")
        subprocess.run(
            [os.path.join(build, "bench", "bench_kernels"), "--benchmark_filter=/fast/",
             f"--benchmark_min_time={min_time}", f"--benchmark_out={path}", "--benchmark_out_format=json"],
            env=env, check=True, capture_output=True, text=True)
        with open(path) as f:
            doc = json.load(f)
    # Every fast row measures the process's CPU time beside the wall time; the suffix says so in
    # each name alike, so the table drops it.
    return {b["name"].removesuffix("/process_time"): float(b["real_time"])
            for b in doc["benchmarks"] if b.get("run_type") == "iteration"}


LM_STEP = ["--task", "lm", "--mixer", "attention", "--set", "d_model=64", "--set", "layers=2", "--set", "length=128",
           "--set", "batch=16"]
# The main job's recall runs (the default preset): vocabulary 32, T 64, 8 pairs, batch 32.
RECALL_STEP = ["--task", "recall", "--set", "vocab=32", "--set", "length=64", "--set", "pairs=8", "--set", "batch=32",
               "--set", "d_model=64", "--set", "layers=2", "--set", "heads=4", "--set", "curriculum=false"]
STEP_MODELS = [("lm attention d64 L2 T128 B16", LM_STEP)] + [
    (f"recall {m} d64 L2 T64 B32", RECALL_STEP + ["--mixer", m])
    for m in ["attention", "local:8", "ssm", "resolvent:pow2", "resolvent:dense", "gla", "deltanet"]]


def train_tokens_per_s(build, threads, steps, model=LM_STEP, extra=()):
    """Median tokens/s of a training step (default: a 2-layer d 64 attention LM step, T 128,
    batch 16, bytes) over steps >= 5; `extra` are more `--set KEY=VALUE` strings."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [os.path.join(build, "mixlab"), "--threads", str(threads), "train"] + list(model) + [
            "--set", "log_every=1", "--set", f"eval_every={steps + 1}", "--steps", str(steps), "--quiet", "--out", out]
        for kv in extra:
            cmd += ["--set", kv]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        rates = []
        with open(os.path.join(out, "metrics.jsonl")) as f:
            for line in f:
                row = json.loads(line)
                if "tokens_per_s" in row and row.get("step", 0) >= 5:
                    rates.append(float(row["tokens_per_s"]))
    return statistics.median(rates)


LM_STEP_LABEL = "train step, lm attention d64 L2 T128 B16"


def scaling_rows(one, two, train=None):
    """Table rows (scripts/thread_table.py) for the kernel names both runs have, by name, then the
    training step's row when `train` = (tokens/s at 1 thread, at 2 threads) is given."""
    rows = [{"name": name, "unit": "ms", "one": one[name], "two": two[name],
             "speedup": speedup("ms", one[name], two[name])} for name in sorted(set(one) & set(two))]
    if train:
        t1, t2 = train
        rows.append({"name": LM_STEP_LABEL, "unit": "tok/s", "one": t1, "two": t2, "speedup": speedup("tok/s", t1, t2)})
    return rows


def markdown(rows):
    return "\n".join(thread_table_lines(rows))


STEP_SETTINGS = [("1 thread", 1, ()), ("2 threads, row_groups=1", 2, ("row_groups=1",)),
                 ("2 threads, 2 row groups", 2, ("row_groups=2",))]


def select_models(words, models=STEP_MODELS):
    """The (label, args) of `models` whose label contains one of the comma-separated `words`
    (all of them for an empty string)."""
    wanted = [w.strip() for w in words.split(",") if w.strip()]
    if not wanted:
        return list(models)
    return [(label, m) for label, m in models if any(w in label for w in wanted)]


def training_steps(build, steps, takes, models=STEP_MODELS, measure=train_tokens_per_s):
    """[(label, [median tok/s per STEP_SETTINGS entry])]: every setting of a model in each take,
    in turn, so that a drift of the machine's speed hits all of them alike."""
    rows = []
    for label, model in models:
        rates = [[] for _ in STEP_SETTINGS]
        for _ in range(takes):
            for i, (_, threads, extra) in enumerate(STEP_SETTINGS):
                rates[i].append(measure(build, threads, steps, model, extra))
        rows.append((label, [statistics.median(r) for r in rates]))
    return rows


def steps_markdown(rows):
    head = " | ".join(f"{name} tok/s" for name, _, _ in STEP_SETTINGS)
    lines = [f"| training step | {head} | 2 threads / 1, row_groups=1 | 2 threads / 1, row groups |",
             "|---|" + "--:|" * (len(STEP_SETTINGS) + 2)]
    for label, r in rows:
        cells = " | ".join(f"{x:,.0f}" for x in r)
        lines.append(f"| {label} | {cells} | {r[1] / r[0]:.2f}x | {r[2] / r[0]:.2f}x |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--no-train", action="store_true", help="kernels only")
    ap.add_argument("--json", help="also write the rows to this file (kernels and training step mode)")
    ap.add_argument("--training-steps", action="store_true",
                    help="the training steps only, with and without row groups (see the top)")
    ap.add_argument("--takes", type=int, default=3, help="--training-steps: interleaved takes")
    ap.add_argument("--models", default="",
                    help="--training-steps: only the models whose label contains one of these comma-separated "
                         "words (e.g. 'lm,local:8,pow2')")
    args = ap.parse_args()
    if args.training_steps:
        models = select_models(args.models)
        if not models:
            ap.error(f"--models {args.models!r} matches none of: " + "; ".join(label for label, _ in STEP_MODELS))
        print(steps_markdown(training_steps(args.build, args.steps, args.takes, models)))
        return 0
    one = kernel_times(args.build, 1, args.min_time)
    two = kernel_times(args.build, 2, args.min_time)
    train = None
    if not args.no_train:
        train = (train_tokens_per_s(args.build, 1, args.steps), train_tokens_per_s(args.build, 2, args.steps))
    rows = scaling_rows(one, two, train)
    if args.json:
        write_whole(args.json, json.dumps({"min_time": args.min_time, "steps": None if args.no_train else args.steps,
                                           "rows": rows}, indent=1))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
