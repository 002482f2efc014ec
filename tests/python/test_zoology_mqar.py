"""examples/zoology_mqar.py writes MQAR rows as zoology defines them, and `mixlab train --task file` reads
the files NumPy wrote (stored and deflated .npz, every dtype the script offers)."""
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # Debian's python3-numpy (scripts/setup.sh installs it)
    np = None

ROOT = os.environ.get("MIXLAB_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "zoology_mqar.py")


def generate(out, *extra, vocab=64, seq_len=32, kv=4, train=50, test=10, seed=3):
    cmd = [sys.executable, SCRIPT, "--out", out, "--vocab", str(vocab), "--seq-len", str(seq_len), "--kv-pairs",
           str(kv), "--train-examples", str(train), "--test-examples", str(test), "--seed", str(seed), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@unittest.skipIf(np is None, "NumPy is not installed (apt-get install python3-numpy)")
class ZoologyMqarTest(unittest.TestCase):
    def test_rows_follow_the_definition(self):
        with tempfile.TemporaryDirectory() as out:
            run = generate(out)
            self.assertEqual(run.returncode, 0, run.stderr)
            for name, rows in (("train", 50), ("test", 10)):
                with np.load(os.path.join(out, f"{name}.npz")) as d:
                    self.assertEqual(sorted(d.files), ["inputs", "labels"])
                    x, y = d["inputs"], d["labels"]
                self.assertEqual(x.shape, (rows, 32))
                self.assertEqual(y.shape, (rows, 32))
                self.assertEqual(x.dtype, np.int64)
                self.assertTrue(((x >= 0) & (x < 64)).all())
                for r in range(rows):
                    keys, values = x[r, 0:8:2], x[r, 1:8:2]
                    self.assertEqual(len(set(keys)), 4)  # distinct keys, from the lower half (never 0)
                    self.assertTrue(((keys >= 1) & (keys < 32)).all())
                    self.assertEqual(len(set(values)), 4)  # distinct values, from the upper half
                    self.assertTrue(((values >= 32) & (values < 64)).all())
                    self.assertTrue((y[r, :8] == -100).all())  # the context is never scored
                    scored = np.nonzero(y[r] != -100)[0]
                    self.assertEqual(len(scored), 4)  # each key asked once
                    self.assertTrue(((scored - 8) % 2 == 0).all())  # on the first position of a slot
                    value_of = dict(zip(keys.tolist(), values.tolist()))
                    self.assertEqual(sorted(x[r, scored].tolist()), sorted(keys.tolist()))
                    for p in scored:
                        self.assertEqual(y[r, p], value_of[int(x[r, p])])
            # Same seed, same rows; another seed, other rows.
            with tempfile.TemporaryDirectory() as again, tempfile.TemporaryDirectory() as other:
                generate(again)
                generate(other, seed=4)
                a, b, c = (np.load(os.path.join(d, "train.npz"))["inputs"] for d in (out, again, other))
                self.assertTrue((a == b).all())
                self.assertFalse((a == c).all())

    def test_queries_follow_the_power_law(self):
        # a = 0.01: slot weights (g+1)^-0.99, so the first slot is asked far more often than the last.
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(generate(out, vocab=128, seq_len=64, kv=4, train=2000, test=1).returncode, 0)
            y = np.load(os.path.join(out, "train.npz"))["labels"]
            slots = (np.nonzero(y != -100)[1] - 8) // 2
            counts = np.bincount(slots, minlength=28)
            self.assertGreater(counts[0], 4 * counts[-1])
            self.assertTrue(((slots >= 0) & (slots < 28)).all())

    def test_bad_options_name_the_option(self):
        with tempfile.TemporaryDirectory() as out:
            for args, fragment in (({"seq_len": 31}, "--seq-len must be even"),
                                   ({"vocab": 16}, "--vocab must be > --seq-len"),
                                   ({"kv": 9}, "--kv-pairs must be in [1, seq-len / 4 = 8]")):
                run = generate(out, **args)
                self.assertEqual(run.returncode, 2)
                self.assertIn(fragment, run.stderr)

    @unittest.skipUnless(os.environ.get("MIXLAB_CLI"), "MIXLAB_CLI (the mixlab binary) is not set")
    def test_mixlab_trains_on_the_files(self):
        cli = os.environ["MIXLAB_CLI"]
        with tempfile.TemporaryDirectory() as out:
            for dtype, compress in (("int32", ["--compress"]), ("int16", [])):
                data = os.path.join(out, dtype)
                self.assertEqual(generate(data, "--dtype", dtype, *compress).returncode, 0)
                run = subprocess.run([cli, "--threads", "1", "train", "--task", "file", "--mixer", "attention",
                                      "--steps", "2", "--quiet", "--set", "data=" + os.path.join(data, "train.npz"),
                                      "--set", "eval_data=" + os.path.join(data, "test.npz"), "--set", "d_model=16",
                                      "--set", "heads=2", "--set", "layers=1", "--set", "batch=8", "--set", "warmup=1",
                                      "--out", os.path.join(out, "run-" + dtype)],
                                     capture_output=True, text=True, timeout=300)
                self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
                self.assertIn("(10 answers)", run.stdout)  # every test row, one answer each


if __name__ == "__main__":
    unittest.main()
