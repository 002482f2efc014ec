"""examples/train_lm.py runs (a few steps on the bundled Brown sample) and its loss goes down."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("MIXLAB_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class TrainLmTest(unittest.TestCase):
    def test_runs_and_learns(self):
        cmd = [sys.executable, os.path.join(ROOT, "examples", "train_lm.py"), "--data",
               os.path.join(ROOT, "data", "sample"), "--steps", "30", "--eval-every", "30", "--batch", "8",
               "--T", "64", "--d-model", "32", "--heads", "2", "--mixer", "resolvent:pow2+cache", "--sample", "20"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
        self.assertEqual(run.returncode, 0, run.stderr)
        losses = [float(v) for v in re.findall(r"validation loss ([0-9.]+)", run.stdout)]
        self.assertEqual(len(losses), 2, run.stdout)
        self.assertLess(losses[-1], losses[0] - 0.5, run.stdout)  # from ~ln 256 = 5.5 toward byte statistics
        self.assertIn("sample: The jury said", run.stdout)

    def test_mixlab_backbone_saves_a_cli_checkpoint(self):
        cli = os.environ.get("MIXLAB_CLI", "")
        if not os.path.exists(cli):
            self.skipTest("MIXLAB_CLI is not set")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "py", "checkpoint.pt")
            cmd = [sys.executable, os.path.join(ROOT, "examples", "train_lm.py"), "--data",
                   os.path.join(ROOT, "data", "sample"), "--steps", "4", "--eval-every", "4", "--batch", "4",
                   "--T", "32", "--d-model", "16", "--heads", "2", "--mixer", "gla", "--sample", "8",
                   "--backbone", "mixlab", "--save", path]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("sample: The jury said", run.stdout)
            env = dict(os.environ, MIXLAB_DATA_DIR=os.path.join(ROOT, "data", "sample"),
                       MIXLAB_CACHE_DIR=os.path.join(d, "cache"))
            gen = subprocess.run([cli, "generate", "--checkpoint", path, "--max-tokens", "8", "--threads", "1"],
                                 capture_output=True, env=env, timeout=120)  # bytes: 8 tokens of a barely
            self.assertEqual(gen.returncode, 0, gen.stderr)                   # trained model need not be UTF-8
    def test_hybrid_stack_runs(self):
        # A per-layer list (mixlab.mixer_layer_specs): one mixlab.mixer per block, a different family each.
        cmd = [sys.executable, os.path.join(ROOT, "examples", "train_lm.py"), "--data",
               os.path.join(ROOT, "data", "sample"), "--steps", "2", "--eval-every", "2", "--batch", "2",
               "--T", "32", "--d-model", "16", "--heads", "2", "--layers", "2", "--mixer", "ssm:4|local:8",
               "--sample", "5"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("mixer ssm:4|local:8", run.stdout)
        self.assertIn("sample: The jury said", run.stdout)

    def test_bad_mixer_is_a_clear_error(self):
        run = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_lm.py"), "--data",
                              os.path.join(ROOT, "data", "sample"), "--mixer", "resolvent:pwo2", "--steps", "1"],
                             capture_output=True, text=True, timeout=120)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("pwo2", run.stderr)


if __name__ == "__main__":
    unittest.main()
