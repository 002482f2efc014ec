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


if __name__ == "__main__":
    unittest.main()
