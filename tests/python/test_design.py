"""mixlab.design (the `mixlab design` search) and the parameterised pattern families from Python:
the ranked table as a list of dicts, budgets honoured, errors as mixlab.Error, the CLI's JSON
table equal to the Python one. Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest discover -s tests/python
"""
import json
import os
import subprocess
import unittest

import mixlab


class DesignTest(unittest.TestCase):
    def test_table_is_a_list_of_dicts_within_the_budget(self):
        rows = mixlab.design(T=128, max_time=8, max_cache=64)
        self.assertIsInstance(rows, list)
        self.assertGreater(len(rows), 0)
        for row in rows:
            self.assertIsInstance(row, dict)
            self.assertLessEqual(row["time_max"], 8)
            self.assertLessEqual(row["cache_max"], 64)
            self.assertTrue(row["within_budget"])
            self.assertIn("--mixer resolvent:" + row["spec"], row["train"])
        # Ranked by path: the max path never decreases down the table.
        paths = [float("inf") if r["path_max"] == "inf" else r["path_max"] for r in rows]
        self.assertEqual(paths, sorted(paths))
        self.assertTrue(any(r["on_front"] for r in rows))

    def test_objectives_and_extra_specs(self):
        rows = mixlab.design(T=64, max_time=6, objective="cost", also=["offsets:1,3,9"])
        times = [r["time_max"] for r in rows]
        self.assertEqual(times, sorted(times))
        self.assertIn("offsets:1,3,9", [r["spec"] for r in rows])

    def test_errors(self):
        with self.assertRaisesRegex(mixlab.Error, "--T must be in"):
            mixlab.design(T=1)
        with self.assertRaisesRegex(mixlab.Error, "max_time must be a positive integer"):
            mixlab.design(T=64, max_time=0)
        with self.assertRaisesRegex(mixlab.Error, "objective must be one of"):
            mixlab.design(T=64, objective="speed")
        with self.assertRaisesRegex(mixlab.Error, "nothing fits"):
            mixlab.design(T=128, max_time=3, max_path=1)

    def test_new_pattern_kinds(self):
        self.assertEqual(mixlab.Pattern("geom:1.5").offsets(40), [1, 2, 3, 4, 6, 8, 12, 18, 26, 39])
        self.assertEqual(mixlab.Pattern("geom:2").rows(40), mixlab.Pattern("pow2").rows(40))
        self.assertEqual(mixlab.Pattern("power:2").rows(40), mixlab.Pattern("square").rows(40))
        self.assertEqual(mixlab.Pattern("band:2+pow2").offsets(20), [1, 2, 4, 8, 16])
        self.assertEqual(mixlab.Pattern("fib+cache").spec, "fib+cache")
        r = mixlab.analyze("order:4+geom:1.5+cache", 64)
        self.assertEqual(r["spec"], "order:4+geom:1.5+cache")

    def test_resolvent_mixer_decodes_the_new_kinds(self):
        # Decode (bounded windows for finite lists, +cache eviction) equals the parallel forward.
        import torch
        for pattern in ["ruler:8", "band:3+ruler:10", "geom:1.5+cache", "order:2+power:1.5", "fib+cache",
                        "band:2+pow2+cache"]:
            with self.subTest(pattern=pattern):
                torch.manual_seed(0)
                m = mixlab.mixer("resolvent:" + pattern, 16, 2, max_len=64)
                m.eval()
                x = torch.randn(2, 40, 16)
                with torch.no_grad():
                    y = m(x)
                    state = m.init_state(2)
                    steps = torch.stack([m.step(state, x[:, t]) for t in range(40)], 1)
                torch.testing.assert_close(steps, y, rtol=1e-4, atol=1e-4)

    def test_equals_the_cli_json(self):
        cli = os.environ.get("MIXLAB_CLI", "")
        if not os.path.exists(cli):
            self.skipTest("the mixlab CLI is not built (MIXLAB_CLI)")
        out = subprocess.run([cli, "design", "--T", "96", "--max-time", "10", "--json"], check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual(json.loads(out)["table"], mixlab.design(T=96, max_time=10))


if __name__ == "__main__":
    unittest.main()
