"""bench/ab_takes.py: takes are paired by index and divided before / after, names missing from a
take are skipped, the table has one line per benchmark, the two sides alternate in running first,
and a binary that is not executable is refused with the argument's name.
Run: /usr/bin/python3 -m unittest discover -s tests/scripts
"""
import importlib.util
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "ab_takes.py")
spec = importlib.util.spec_from_file_location("ab_takes", SCRIPT)
ab_takes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab_takes)

# A stand-in benchmark binary: logs its name to LOG, prints Google Benchmark JSON with one row
# whose time (in microseconds) is its first argument-free constant.
FAKE = """#!/bin/sh
echo "{name}" >> "{log}"
cat <<JSON
{{"benchmarks": [{{"name": "BM_x", "run_type": "iteration", "real_time": {us}, "time_unit": "us"}}]}}
JSON
"""


class AbTakesTest(unittest.TestCase):
    def test_pairs_by_take_and_divides_before_by_after(self):
        rows = ab_takes.summarise([{"a": 2.0, "b": 1.0}, {"a": 4.0, "b": 1.0, "only_before": 1.0}],
                                  [{"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}])
        self.assertEqual([r["name"] for r in rows], ["a", "b"])
        self.assertAlmostEqual(rows[0]["pairwise_median"], 3.0)  # median of 2 and 4
        self.assertAlmostEqual(rows[1]["pairwise_median"], 0.5)

    def test_unequal_take_counts_are_refused(self):
        with self.assertRaisesRegex(ValueError, "same, non-zero number of takes"):
            ab_takes.summarise([{"a": 1.0}], [])

    def test_markdown_has_a_line_per_row(self):
        text = ab_takes.markdown(ab_takes.summarise([{"a": 2.0}], [{"a": 1.0}]))
        lines = text.splitlines()
        self.assertEqual(len(lines), 3)
        self.assertEqual(lines[-1], "| a | 2.000 | 1.000 | 2.000 | 1.000 | 2.00× |")

    def test_end_to_end_alternates_sides_and_reads_microseconds(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "order.log")
            bins = {}
            for name, us in (("before", 3000), ("after", 1500)):
                path = os.path.join(d, name)
                with open(path, "w") as fh:
                    fh.write(FAKE.format(name=name, log=log, us=us))
                os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
                bins[name] = path
            out_json = os.path.join(d, "takes.json")
            out = subprocess.run([sys.executable, SCRIPT, "--before", bins["before"], "--after", bins["after"],
                                  "--filter", "BM_x", "--takes", "3", "--json", out_json],
                                 check=True, capture_output=True, text=True).stdout
            self.assertIn("| BM_x | 3.000 | 1.500 | 3.000 | 1.500 | 2.00× |", out)
            with open(log) as fh:
                order = fh.read().split()
            self.assertEqual(order, ["before", "after", "after", "before", "before", "after"])
            with open(out_json) as fh:
                self.assertEqual(json.load(fh)["rows"][0]["before"], [3.0, 3.0, 3.0])

    def test_a_missing_binary_is_named(self):
        out = subprocess.run([sys.executable, SCRIPT, "--before", "/nonexistent/bench", "--after", "/bin/true",
                              "--filter", "x"], capture_output=True, text=True)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("--before: expected an executable benchmark binary, got '/nonexistent/bench'", out.stderr)


if __name__ == "__main__":
    unittest.main()
