"""scripts/baseline_summary.py: the per-kernel, per-mode ratio ranges and the lowest row that
bench/baselines/run.py prints under its single-take table and bench_takes.py under the merged one.
Run: /usr/bin/python3 -m unittest discover -s tests/scripts
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from baseline_summary import ratio_summary_lines  # noqa: E402


def row(kernel, mode, ratio, B=1, T=1024, threads=1):
    return {"kernel": kernel, "mode": mode, "ratio": ratio, "B": B, "T": T, "threads": threads}


class BaselineSummaryTest(unittest.TestCase):
    def test_ranges_per_kernel_and_mode_in_table_order(self):
        rows = [row("simple_gla", "fwd", 4.5), row("simple_gla", "fwd+bwd", 9.0),
                row("simple_gla", "fwd", 8.25, T=4096), row("attention", "fwd", 3.0, B=4, threads=2),
                row("simple_gla", "fwd", 6.0, threads=2)]
        lines = ratio_summary_lines(rows)
        table = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
        self.assertEqual(table, ["| simple_gla | fwd | 3 | 4.50–8.25× |",
                                 "| simple_gla | fwd+bwd | 1 | 9.00–9.00× |",
                                 "| attention | fwd | 1 | 3.00–3.00× |"])
        self.assertEqual(lines[-1], "Lowest row: attention fwd, B 4, T 1024, 2 threads: 3.00×.")

    def test_one_thread_is_singular_and_no_rows_no_lowest(self):
        self.assertEqual(ratio_summary_lines([row("gla", "fwd", 2.0)])[-1],
                         "Lowest row: gla fwd, B 1, T 1024, 1 thread: 2.00×.")
        lines = ratio_summary_lines([])
        self.assertFalse(any(line.startswith("Lowest") for line in lines))
        self.assertEqual(lines[-1], "|---|---|---:|---:|")


if __name__ == "__main__":
    unittest.main()
