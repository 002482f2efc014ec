"""scripts/bench_takes.py (bench.sh --takes N): per case its median take over whole-suite takes with
the range, the baselines merged per row with a summary, text tables kept per take, and a binary
missing from a take named and refused (exit 1).
Run: /usr/bin/python3 -m unittest discover -s tests/scripts
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "bench_takes.py")


def gbench(cases, repetitions=True):
    """A Google Benchmark document: cases is {name: (real_time, cpu_time, counter)}."""
    runs = []
    for name, (real, cpu, counter) in cases.items():
        if repetitions:
            # Two repetitions around the median, then the aggregates bench.sh asks for.
            for r in (real * 0.9, real * 1.1):
                runs.append({"name": name, "run_name": name, "run_type": "iteration", "real_time": r,
                             "cpu_time": cpu, "time_unit": "ms", "bytes": counter})
            for agg, value in (("mean", real * 1.5), ("median", real), ("stddev", 0.1)):
                runs.append({"name": f"{name}_{agg}", "run_name": name, "run_type": "aggregate", "aggregate_name": agg,
                             "real_time": value, "cpu_time": cpu, "time_unit": "ms", "bytes": counter})
        else:
            runs.append({"name": name, "run_name": name, "run_type": "iteration", "real_time": real, "cpu_time": cpu,
                         "time_unit": "ms", "bytes": counter, "label": "L"})
    return {"context": {"threads": 2}, "benchmarks": runs}


class BenchTakesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = self.dir.name
        self.takes = []

    def tearDown(self):
        self.dir.cleanup()

    def take(self, files):
        d = os.path.join(self.out, f"take-{len(self.takes) + 1}")
        os.mkdir(d)
        for name, content in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(json.dumps(content) if name.endswith(".json") else content)
        self.takes.append(d)

    def run_script(self):
        return subprocess.run([sys.executable, SCRIPT, self.out, *self.takes], capture_output=True, text=True)

    def merged(self, name):
        return {b["name"]: b for b in json.load(open(os.path.join(self.out, name)))["benchmarks"]}

    def test_median_over_takes_with_range(self):
        for real, counter in ((10.0, 100), (30.0, 300), (12.0, 120)):
            self.take({"bench_x.json": gbench({"BM_A/1024": (real, real / 2, counter), "BM_B": (1.0, 1.0, 7)}),
                       "bench_psm_decode.md": f"Threads 2\n\n| T | time |\n|--:|--:|\n| 8 | {real} |\n"})
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        a = self.merged("bench_x.json")["BM_A/1024"]
        # The median aggregate of each take (not the mean, not a repetition), then the median of those.
        self.assertEqual((a["real_time"], a["cpu_time"], a["bytes"]), (12.0, 6.0, 120))
        self.assertEqual((a["time_min"], a["time_max"], a["takes"]), (10.0, 30.0, 3))
        self.assertEqual(a["time_unit"], "ms")
        self.assertEqual(json.load(open(os.path.join(self.out, "bench_x.json")))["context"], {"threads": 2})
        md = open(os.path.join(self.out, "bench_psm_decode.md")).read()
        for k, real in ((1, 10.0), (2, 30.0), (3, 12.0)):
            self.assertIn(f"### take {k}", md)
            self.assertIn(f"| 8 | {real} |", md)

    def test_quick_runs_without_aggregates(self):
        for real in (5.0, 7.0):
            self.take({"bench_q.json": gbench({"BM_Q": (real, real, 1)}, repetitions=False)})
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        q = self.merged("bench_q.json")["BM_Q"]
        # Two takes: the faster one (the lower middle), not their mean (6.0, which no take measured).
        self.assertEqual((q["real_time"], q["time_min"], q["time_max"], q["takes"], q["label"], q["take"]),
                         (5.0, 5.0, 7.0, 2, "L", 1))

    def test_counters_come_from_the_chosen_take(self):
        # cpu_time and counters belong to the take whose time is the median, never a mix of takes.
        for real, cpu, counter in ((20.0, 1.0, 5), (10.0, 9.0, 7), (30.0, 2.0, 1), (15.0, 3.0, 9)):
            self.take({"bench_c.json": gbench({"BM_C": (real, cpu, counter)})})
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        c = self.merged("bench_c.json")["BM_C"]
        self.assertEqual((c["real_time"], c["cpu_time"], c["bytes"], c["take"]), (15.0, 3.0, 9, 4))
        self.assertEqual((c["time_min"], c["time_max"], c["takes"]), (10.0, 30.0, 4))

    def test_baselines_merged_per_row_with_a_summary(self):
        def row(kernel, mode, T, ratio, threads=1):
            return {"kernel": kernel, "B": 1, "H": 4, "T": T, "D": 64, "threads": threads, "mode": mode,
                    "baseline_ms": 10.0 * ratio, "mixlab_ms": 10.0, "ratio": ratio, "max_abs_diff": 1e-6,
                    "mixlab_gflops": None, "sgemm_gflops": 100.0}

        takes = (
            [row("gla", "fwd", 1024, 4.0), row("gla", "fwd", 4096, 8.0), row("gla", "fwd+bwd", 1024, 7.0),
             row("attention", "fwd", 1024, 3.0, threads=2)],
            [row("gla", "fwd", 1024, 5.0), row("gla", "fwd", 4096, 6.0), row("gla", "fwd+bwd", 1024, 9.0),
             row("attention", "fwd", 1024, 3.5, threads=2), row("gla", "fwd", 16384, 11.0)],
        )
        for k, rows in enumerate(takes, 1):
            doc = {"sgemm_gflops": {"1": 100.0 + k, "2": 190.0 + k}, "isa": "avx512", "block_cache": "on",
                   "rows": rows}
            self.take({"baselines.json": doc, "baselines.md": f"take {k}'s own table\n"})
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.load(open(os.path.join(self.out, "baselines.json")))
        rows = {(x["kernel"], x["mode"], x["T"], x["threads"]): x for x in doc["rows"]}
        self.assertEqual(len(rows), 4)  # T 16384 ran in take 2 only: left out
        # The lower ratio of two takes, with that take's times and the range over both takes.
        g = rows[("gla", "fwd", 4096, 1)]
        self.assertEqual((g["ratio"], g["baseline_ms"], g["take"], g["ratio_min"], g["ratio_max"], g["takes"]),
                         (6.0, 60.0, 2, 6.0, 8.0, 2))
        self.assertEqual(rows[("gla", "fwd", 1024, 1)]["take"], 1)
        self.assertEqual(doc["sgemm_gflops_per_take"], [{"1": 101.0, "2": 191.0}, {"1": 102.0, "2": 192.0}])
        md = open(os.path.join(self.out, "baselines.md")).read()
        self.assertNotIn("own table", md)  # the takes' tables stay in their folders
        self.assertIn("take 1: 101.0 GF/s at 1 thread, 191.0 GF/s at 2 threads", md)
        self.assertIn("| gla | 1 | 4096 | 1 | fwd | 60 | 10 | **6.00×** | 6.00–8.00× | 2 | 1.0e-06 |", md)
        # The summary: per kernel and mode, the range over the rows' chosen ratios.
        self.assertIn("| gla | fwd | 2 | 4.00–6.00× |", md)
        self.assertIn("| gla | fwd+bwd | 1 | 7.00–7.00× |", md)
        self.assertIn("| attention | fwd | 1 | 3.00–3.00× |", md)
        self.assertIn("Lowest row: attention fwd, B 1, T 1024, 2 threads: 3.00×.", md)
        self.assertIn("Cases not in every take, left out: 1.", md)

    def test_malformed_baselines_rows(self):
        good = {"kernel": "gla", "B": 1, "H": 4, "T": 1024, "D": 64, "threads": 1, "mode": "fwd", "ratio": 2.0,
                "baseline_ms": 2.0, "mixlab_ms": 1.0, "max_abs_diff": 0.0}
        missing_time = dict(good)
        del missing_time["mixlab_ms"]
        for bad in (dict(good, ratio="fast"), dict(good, ratio=True), missing_time, {k: good[k] for k in good if k != "T"}):
            with self.subTest(bad=bad):
                for d in self.takes:
                    shutil.rmtree(d)
                self.takes = []
                self.take({"baselines.json": {"rows": [good]}, "baselines.md": ""})
                self.take({"baselines.json": {"rows": [bad]}, "baselines.md": ""})
                r = self.run_script()
                self.assertEqual(r.returncode, 2)
                self.assertIn("baselines.json of take 2", r.stderr)
                self.assertIn("expected rows with kernel", r.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.out, "baselines.json")))

    def test_thread_rows_merged_by_speedup(self):
        def row(name, one, two, unit="ms"):
            speedup = two / one if unit == "tok/s" else one / two
            return {"name": name, "unit": unit, "one": one, "two": two, "speedup": speedup}

        takes = ([row("BM_a/fwd", 1.0, 0.5), row("BM_b/fwd", 1.0, 1.25), row("step", 100.0, 190.0, "tok/s")],
                 [row("BM_a/fwd", 1.0, 0.8), row("BM_b/fwd", 1.0, 0.9), row("step", 100.0, 150.0, "tok/s")],
                 [row("BM_a/fwd", 1.0, 0.55), row("BM_b/fwd", 1.0, 1.0), row("step", 100.0, 180.0, "tok/s"),
                  row("BM_only_here", 1.0, 1.0)])
        for rows in takes:
            self.take({"threads.json": {"rows": rows}, "threads.md": "a take's own table\n"})
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.load(open(os.path.join(self.out, "threads.json")))
        rows = {x["name"]: x for x in doc["rows"]}
        self.assertEqual(sorted(rows), ["BM_a/fwd", "BM_b/fwd", "step"])
        a = rows["BM_a/fwd"]  # speedups 2.0, 1.25, 1.82: the median take is take 3, with its times
        self.assertEqual((a["two"], a["take"], a["speedup_min"], a["speedup_max"]), (0.55, 3, 1.25, 2.0))
        self.assertAlmostEqual(rows["step"]["speedup"], 1.8)
        md = open(os.path.join(self.out, "threads.md")).read()
        self.assertNotIn("own table", md)
        self.assertIn("| BM_b/fwd | 1 ms | 1 ms | 1.00× | 0.80–1.11× | 3 |", md)
        self.assertIn("| step | 100 tok/s | 180 tok/s | 1.80× | 1.50–1.90× | 3 |", md)
        self.assertIn("At 2 threads ≥ 1.7× the 1-thread throughput: 2 of 3 rows. Lowest: BM_b/fwd, 1.00×.", md)
        self.assertIn("Rows not in every take, left out: 1.", md)

    def test_malformed_thread_rows(self):
        good = {"name": "BM_a", "unit": "ms", "one": 1.0, "two": 0.5, "speedup": 2.0}
        for bad in (dict(good, unit="s"), dict(good, speedup=None), {k: good[k] for k in good if k != "name"}, 3):
            with self.subTest(bad=bad):
                for d in self.takes:
                    shutil.rmtree(d)
                self.takes = []
                self.take({"threads.json": {"rows": [good]}})
                self.take({"threads.json": {"rows": [bad]}})
                r = self.run_script()
                self.assertEqual(r.returncode, 2)
                self.assertIn("threads.json of take 2", r.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.out, "threads.json")))

    def test_a_case_or_binary_missing_from_a_take(self):
        self.take({"bench_x.json": gbench({"BM_A": (1.0, 1.0, 1), "BM_only_here": (2.0, 2.0, 2)}),
                   "bench_y.json": gbench({"BM_Y": (1.0, 1.0, 1)})})
        self.take({"bench_x.json": gbench({"BM_A": (3.0, 3.0, 1)})})  # bench_y failed in this take
        r = self.run_script()
        self.assertEqual(r.returncode, 1)
        self.assertIn("bench_y.json (absent from", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "bench_y.json")))
        self.assertEqual(list(self.merged("bench_x.json")), ["BM_A"])  # a case of one take only is left out

    def test_bad_arguments(self):
        r = subprocess.run([sys.executable, SCRIPT, self.out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage", r.stderr)
        r = subprocess.run([sys.executable, SCRIPT, self.out, os.path.join(self.out, "nope")], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("is not a directory", r.stderr)


if __name__ == "__main__":
    unittest.main()
