"""The headline of a baselines table (bench/baselines/run.py, bench.sh --takes N): per kernel and
mode, how many rows and the range of their ratios over every B, T and thread count. One writer for
the single-take table (run.py) and the merged one (bench_takes.py), so the README's and
BENCHMARKS' ranges are read off the same lines however many takes ran, not by hand."""


def ratio_summary_lines(rows):
    """rows: dicts with kernel, mode and ratio, in table order -> markdown lines (groups in first-seen order)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["kernel"], r["mode"]), []).append(r["ratio"])
    lines = ["Per kernel and mode, the range of the rows' ratios above (every B, T and thread count):", "",
             "| kernel | mode | rows | ratios |", "|---|---|---:|---:|"]
    for (kernel, mode), ratios in groups.items():
        lines.append(f"| {kernel} | {mode} | {len(ratios)} | {min(ratios):.2f}–{max(ratios):.2f}× |")
    if rows:
        low = min(rows, key=lambda r: r["ratio"])
        lines += ["", f"Lowest row: {low['kernel']} {low['mode']}, B {low['B']}, T {low['T']}, "
                      f"{low['threads']} thread{'s' if low['threads'] != 1 else ''}: {low['ratio']:.2f}×."]
    return lines
