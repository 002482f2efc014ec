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
        self.assertEqual([r[0] for r in rows], ["BM_a/fast/fwd/x", "BM_b/fast/fwd/x"])
        self.assertAlmostEqual(rows[0][3], 2.0)
        self.assertAlmostEqual(rows[1][3], 1.0)

    def test_markdown_has_one_line_per_row_and_the_training_ratio(self):
        text = thread_scaling.markdown([("BM_a", 4.0, 2.0, 2.0)], (1000.0, 1800.0))
        lines = text.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertIn("| BM_a | 4.000 | 2.000 | 2.00x |", lines)
        self.assertTrue(lines[-1].endswith("| 1.80x |"), lines[-1])

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
