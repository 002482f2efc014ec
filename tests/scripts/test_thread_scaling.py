"""bench/thread_scaling.py: the speedup table pairs the 1- and 2-thread runs by name, divides the
right way round, skips names only one run has, and adds the training row as a throughput ratio.
Run: /usr/bin/python3 -m unittest discover -s tests/scripts
"""
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("thread_scaling",
                                              os.path.join(HERE, "..", "..", "bench", "thread_scaling.py"))
thread_scaling = importlib.util.module_from_spec(spec)
spec.loader.exec_module(thread_scaling)


class ThreadScalingTest(unittest.TestCase):
    def test_rows_pair_by_name_and_divide_one_by_two(self):
        rows = thread_scaling.scaling_rows({"BM_a/fast/fwd/x": 4.0, "BM_b/fast/fwd/x": 3.0, "only_one": 1.0},
                                           {"BM_a/fast/fwd/x": 2.0, "BM_b/fast/fwd/x": 3.0, "only_two": 1.0})
        self.assertEqual([r["name"] for r in rows], ["BM_a/fast/fwd/x", "BM_b/fast/fwd/x"])
        self.assertAlmostEqual(rows[0]["speedup"], 2.0)
        self.assertAlmostEqual(rows[1]["speedup"], 1.0)
        self.assertEqual({r["unit"] for r in rows}, {"ms"})

    def test_the_training_row_is_a_throughput_ratio(self):
        rows = thread_scaling.scaling_rows({"BM_a": 4.0}, {"BM_a": 2.0}, train=(1000.0, 1800.0))
        self.assertEqual(rows[-1]["unit"], "tok/s")
        self.assertAlmostEqual(rows[-1]["speedup"], 1.8)

    def test_markdown_has_one_line_per_row_and_counts_the_rows_at_the_target(self):
        rows = thread_scaling.scaling_rows({"BM_a": 4.0, "BM_b": 1.0}, {"BM_a": 2.0, "BM_b": 1.25},
                                           train=(1000.0, 1800.0))
        lines = thread_scaling.markdown(rows).splitlines()
        self.assertIn("| BM_a | 4 ms | 2 ms | 2.00× |", lines)
        self.assertIn("| BM_b | 1 ms | 1.25 ms | 0.80× |", lines)
        self.assertIn("| train step, lm attention d64 L2 T128 B16 | 1,000 tok/s | 1,800 tok/s | 1.80× |", lines)
        self.assertEqual(lines[-1], "At 2 threads ≥ 1.7× the 1-thread throughput: 2 of 3 rows. Lowest: BM_b, 0.80×.")

    def test_training_steps_interleave_the_settings_and_take_medians(self):
        calls = []

        def fake(build, threads, steps, model, extra):
            calls.append((model[0], threads, tuple(extra)))
            return {1: 100.0, 2: 150.0}[threads] + (30.0 if extra == ("row_groups=2",) else 0.0) + len(calls)

        rows = thread_scaling.training_steps("b", 10, 3, models=[("m", ["x"])], measure=fake)
        # Each take runs every setting in turn.
        self.assertEqual([c[1:] for c in calls[:3]],
                         [(1, ()), (2, ("row_groups=1",)), (2, ("row_groups=2",))])
        self.assertEqual(len(calls), 9)
        self.assertEqual(rows, [("m", [100.0 + 4, 150.0 + 5, 180.0 + 6])])
        text = thread_scaling.steps_markdown(rows)
        self.assertIn("| m | 104 | 155 | 186 | 1.49x | 1.79x |", text.splitlines())

    def test_select_models_matches_words_in_labels(self):
        labels = [label for label, _ in thread_scaling.select_models("lm, local:8")]
        self.assertEqual(labels, ["lm attention d64 L2 T128 B16", "recall local:8 d64 L2 T64 B32"])
        self.assertEqual(len(thread_scaling.select_models("")), len(thread_scaling.STEP_MODELS))
        self.assertEqual(thread_scaling.select_models("no-such-mixer"), [])


if __name__ == "__main__":
    unittest.main()
