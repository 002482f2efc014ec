"""The thread-scaling table (issue 38 item 4): one writer for a single run of
bench/thread_scaling.py and for the rows merged over the suite's takes (bench_takes.py), so the
table in docs/BENCHMARKS.md has the same columns and the same summary line however many takes ran.

A row is a dict: name, unit ("ms" a call, or "tok/s" for the training step), one and two (the
figure at 1 and at 2 threads) and speedup (2-thread throughput over 1-thread: one / two for a
time, two / one for a rate). A merged row also has speedup_min, speedup_max and take."""

TARGET = 1.7  # issue 38 item 4: a second thread gives at least this much


def speedup(unit, one, two):
    """Throughput at 2 threads over 1 thread: time one / two, or rate two / one."""
    if unit == "tok/s":
        return two / one if one > 0 else float("nan")
    return one / two if two > 0 else float("nan")


def thread_table_lines(rows):
    """rows in table order -> markdown lines: the table, then how many rows reach TARGET and the lowest."""
    merged = any("speedup_min" in r for r in rows)
    head = "| row | 1 thread | 2 threads | 2 threads / 1 |" + (" range | take |" if merged else "")
    lines = [head, "|---|--:|--:|--:|" + ("--:|--:|" if merged else "")]
    for r in rows:
        unit = r["unit"]
        fmt = (lambda x: f"{x:,.0f} tok/s") if unit == "tok/s" else (lambda x: f"{x:.4g} ms")
        line = f"| {r['name']} | {fmt(r['one'])} | {fmt(r['two'])} | {r['speedup']:.2f}× |"
        if merged:
            line += f" {r['speedup_min']:.2f}–{r['speedup_max']:.2f}× | {r['take']} |"
        lines.append(line)
    if rows:
        reached = [r for r in rows if r["speedup"] >= TARGET]
        low = min(rows, key=lambda r: r["speedup"])
        lines += ["", f"At 2 threads ≥ {TARGET}× the 1-thread throughput: {len(reached)} of {len(rows)} rows. "
                      f"Lowest: {low['name']}, {low['speedup']:.2f}×."]
    return lines
