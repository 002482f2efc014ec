#!/usr/bin/python3
"""Writes multi-query associative recall (MQAR) data as zoology defines it, for `mixlab train --task file`.

The task (Arora, Eyuboglu et al., "Zoology: Measuring and improving recall in efficient language
models", 2023; zoology/data/multiquery_ar.py): a row of T tokens starts with n key-value pairs
k_1 v_1 ... k_n v_n (2n tokens), keys drawn without repetition from [1, V/2), values without
repetition from [V/2, V). The rest of the row, T - 2n positions, is cut into (T - 2n) / 2 slots of
two positions. Every key is asked once: key i goes to the first position of a slot g_i, the n slots
drawn without repetition with probability proportional to (g + 1)^(a - 1) (a power law: for a small
exponent a, queries tend to come soon after the context, as repeated bigrams do in text). The label
of that position is v_i (the model must answer with the value when it reads the key again); every
other label is -100 (not scored). The other query-region positions are filler: random tokens from
[0, V) (--no-random-non-queries: token 0).

This file is written from that description; it is not zoology's code and does not reproduce its
random stream, only its distribution. It needs NumPy only (Debian: python3-numpy).

Output: OUT/train.npz and OUT/test.npz, each with arrays `inputs` and `labels` of shape (N, T),
written whole to a temporary name and renamed, so a reader never sees a half-written file.

    python3 examples/zoology_mqar.py --out runs/mqar --vocab 128 --seq-len 64 --kv-pairs 8 \\
        --train-examples 4000 --test-examples 500
    mixlab train --task file --mixer attention --set data=runs/mqar/train.npz \\
        --set eval_data=runs/mqar/test.npz
"""
import argparse
import os
import sys

import numpy as np


def power_law_slots(rng, rows, slots, picks, power_a):
    """(rows, picks) distinct slots per row, weights (g + 1)^(a - 1), without replacement.

    Efraimidis-Spirakis: the picks largest of log(u) / w (u uniform) are a weighted sample without
    replacement, the same distribution as drawing one slot at a time from the remaining weights.
    """
    weights = np.arange(1, slots + 1, dtype=np.float64) ** (power_a - 1.0)
    keys = np.log(rng.random((rows, slots))) / weights
    return np.argsort(-keys, axis=1, kind="stable")[:, :picks]


def distinct_draws(rng, rows, low, high, picks):
    """(rows, picks) tokens from [low, high), distinct within a row, in random order."""
    out = np.empty((rows, picks), dtype=np.int64)
    width = high - low
    block = max(1, (1 << 22) // width)  # bound the (block, width) random matrix to 32 MiB
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        out[start:stop] = np.argsort(rng.random((stop - start, width)), axis=1)[:, :picks] + low
    return out


def mqar(rng, rows, vocab, seq_len, kv_pairs, power_a, random_non_queries):
    """inputs, labels: (rows, seq_len) int64; labels -100 where not scored."""
    context = 2 * kv_pairs
    keys = distinct_draws(rng, rows, 1, vocab // 2, kv_pairs)
    values = distinct_draws(rng, rows, vocab // 2, vocab, kv_pairs)
    inputs = np.zeros((rows, seq_len), dtype=np.int64)
    labels = np.full((rows, seq_len), -100, dtype=np.int64)
    inputs[:, 0:context:2] = keys
    inputs[:, 1:context:2] = values
    slots = power_law_slots(rng, rows, (seq_len - context) // 2, kv_pairs, power_a)
    query = context + 2 * slots  # (rows, kv_pairs) positions of the queried keys
    np.put_along_axis(inputs, query, keys, axis=1)
    np.put_along_axis(labels, query, values, axis=1)
    if random_non_queries:
        filler = np.ones((rows, seq_len), dtype=bool)
        filler[:, :context] = False
        np.put_along_axis(filler, query, False, axis=1)
        inputs[filler] = rng.integers(0, vocab, size=int(filler.sum()))
    return inputs, labels


def save(path, inputs, labels, compress):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        (np.savez_compressed if compress else np.savez)(f, inputs=inputs, labels=labels)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for train.npz and test.npz")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size V (> seq-len; zoology's default 8192)")
    p.add_argument("--seq-len", type=int, default=64, help="row length T (even)")
    p.add_argument("--kv-pairs", type=int, default=8, help="key-value pairs n per row (4n <= T)")
    p.add_argument("--train-examples", type=int, default=100000)
    p.add_argument("--test-examples", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0, help="train rows are drawn first, then test rows, from this seed")
    p.add_argument("--power-a", type=float, default=0.01, help="power-law exponent of the query spacing (1: uniform)")
    p.add_argument("--no-random-non-queries", action="store_true", help="filler token 0 instead of random tokens")
    p.add_argument("--dtype", choices=["int16", "int32", "int64"], default="int64", help="element type written")
    p.add_argument("--compress", action="store_true", help="np.savez_compressed (deflate) instead of np.savez")
    a = p.parse_args(argv)

    # zoology's own conditions on the task (multiquery_ar's asserts), as errors naming the option.
    problems = []
    if a.seq_len % 2:
        problems.append(f"--seq-len must be even, got {a.seq_len}")
    if a.vocab <= a.seq_len:
        problems.append(f"--vocab must be > --seq-len ({a.seq_len}), got {a.vocab}")
    if a.kv_pairs < 1 or 4 * a.kv_pairs > a.seq_len:
        problems.append(f"--kv-pairs must be in [1, seq-len / 4 = {a.seq_len // 4}], got {a.kv_pairs}")
    if a.kv_pairs > a.vocab // 2 - 1:
        problems.append(f"--kv-pairs must be <= vocab / 2 - 1 = {a.vocab // 2 - 1} (distinct keys), got {a.kv_pairs}")
    if a.train_examples < 1 or a.test_examples < 1:
        problems.append("--train-examples and --test-examples must be >= 1")
    if not 0 < a.power_a <= 1:
        problems.append(f"--power-a must be in (0, 1], got {a.power_a}")
    if a.dtype == "int16" and a.vocab > 32768:
        problems.append(f"--dtype int16 holds token ids below 32768, --vocab is {a.vocab}")
    if problems:
        for m in problems:
            print(f"zoology_mqar.py: {m}", file=sys.stderr)
        return 2

    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for name, rows in (("train", a.train_examples), ("test", a.test_examples)):
        inputs, labels = mqar(rng, rows, a.vocab, a.seq_len, a.kv_pairs, a.power_a, not a.no_random_non_queries)
        path = os.path.join(a.out, f"{name}.npz")
        save(path, inputs.astype(a.dtype), labels.astype(a.dtype), a.compress)
        print(f"wrote {path}: inputs and labels ({rows}, {a.seq_len}) {a.dtype}, {a.kv_pairs} scored positions per row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
