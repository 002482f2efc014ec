"""The model of `mixlab train` in PyTorch (mixlab.Model, mixlab.load): a CLI checkpoint's logits
in Python equal the C++ model's (tests/python/cpp_reference.cpp --model), decode equals forward,
Python and the CLI generate the same text from the same checkpoint and seed, a checkpoint saved
from Python is read by `mixlab eval`, `generate` and `train --init-from`, and bad input is a
mixlab.Error that names the problem.
"""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import torch

import mixlab
from test_parity import read_records

ROOT = os.environ.get("MIXLAB_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("MIXLAB_CLI", "")
REFERENCE = os.environ.get("MIXLAB_PY_REFERENCE", "")
TINY = ["--set", "length=32", "--set", "d_model=16", "--set", "heads=2", "--set", "mlp_ratio=2", "--set", "batch=4",
        "--set", "warmup=1", "--set", "eval_tokens=200", "--quiet", "--threads", "1"]


def cli(*args, check=True):
    """Runs the CLI; stdout as str with invalid UTF-8 replaced, as Model.generate returns it (a few
    steps of training sample bytes that are not UTF-8)."""
    env = dict(os.environ, MIXLAB_DATA_DIR=os.path.join(ROOT, "data", "sample"),
               MIXLAB_GPT2_DIR=os.path.join(ROOT, "data", "gpt2"))
    run = subprocess.run([CLI, *args], capture_output=True, env=env, timeout=300)
    run.stdout = run.stdout.decode("utf-8", errors="replace")
    run.stderr = run.stderr.decode("utf-8", errors="replace")
    if check and run.returncode != 0:
        raise AssertionError(f"mixlab {' '.join(args)} failed ({run.returncode}): {run.stderr}")
    return run


class ModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(CLI):
            raise unittest.SkipTest("MIXLAB_CLI (the built mixlab binary) is not set")
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory()
        os.environ["MIXLAB_CACHE_DIR"] = os.path.join(cls.tmp.name, "cache")
        os.environ["MIXLAB_DATA_DIR"] = os.path.join(ROOT, "data", "sample")
        # A two-layer lm run of a few steps on the Brown sample, through the CLI.
        cls.ckpt = os.path.join(cls.tmp.name, "run", "checkpoint.pt")
        cli("train", "--task", "lm", "--mixer", "resolvent:pow2", "--steps", "5", "--out",
            os.path.join(cls.tmp.name, "run"), *TINY)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_logits_equal_the_cpp_model(self):
        if not os.path.exists(REFERENCE):
            self.skipTest("MIXLAB_PY_REFERENCE is not set")
        out = os.path.join(self.tmp.name, "ref.bin")
        subprocess.run([REFERENCE, "--model", self.ckpt, "2", "24", "5", out], check=True)
        ref = read_records(out)
        model = mixlab.load(self.ckpt).eval()
        self.assertIsInstance(model, torch.nn.Module)
        self.assertEqual(model.completed_steps, 5)
        tokens = ref["tokens"].to(torch.int64).reshape(2, 24)
        with torch.no_grad():
            logits = model(tokens)
        self.assertEqual(tuple(logits.shape), (2, 24, 256))
        self.assertTrue(torch.equal(logits.flatten(), ref["logits"]), "Python's logits are not the C++ model's")

    def test_decode_equals_forward_and_state_forks(self):
        model = mixlab.load(self.ckpt).eval()
        tokens = torch.randint(0, 256, (2, 20))
        with torch.no_grad():
            full = model(tokens)
            state = model.init_state(2)
            steps = torch.stack([model.step(state, tokens[:, t]) for t in range(12)], 1)
            other = model.fork(state)
            rest = model.prefill(state, tokens[:, 12:])
            again = model.prefill(other, tokens[:, 12:])
        self.assertEqual(state.position, 20)
        self.assertGreater(state.bytes, 0)
        torch.testing.assert_close(steps, full[:, :12], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(rest, full[:, 12:], rtol=1e-4, atol=1e-4)
        self.assertTrue(torch.equal(rest, again))

    def test_generate_matches_the_cli(self):
        model = mixlab.load(self.ckpt)
        for seed, temperature in ((3, "1"), (0, "0")):
            with self.subTest(seed=seed, temperature=temperature):
                run = cli("generate", "--checkpoint", self.ckpt, "--prompt", "The jury", "--max-tokens", "24",
                          "--seed", str(seed), "--temperature", temperature, "--threads", "1")
                text = model.generate("The jury", max_tokens=24, seed=seed, temperature=float(temperature))
                self.assertEqual(text, run.stdout)

    def test_ctrl_c_interrupts_generate(self):
        """SIGINT during a long Model.generate raises KeyboardInterrupt within a moment, and the
        model generates as before afterwards (the C++ loop, run without the GIL, used to go on to
        max_tokens with the signal pending)."""
        code = textwrap.dedent("""
            import sys, mixlab
            model = mixlab.load(sys.argv[1])
            print("generating", flush=True)
            try:
                model.generate("The", max_tokens=1 << 24, seed=1)
                print("finished", flush=True)
            except KeyboardInterrupt:
                print("KeyboardInterrupt", flush=True)
                same = model.generate("The", max_tokens=8, seed=1) == mixlab.load(sys.argv[1]).generate(
                    "The", max_tokens=8, seed=1)
                print("same text afterwards" if same else "other text afterwards", flush=True)
                sys.exit(3)
        """)
        child = subprocess.Popen([sys.executable, "-c", code, self.ckpt], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        try:
            self.assertEqual(child.stdout.readline().strip(), b"generating")
            time.sleep(0.5)  # well inside generate (16M tokens take minutes)
            sent = time.monotonic()
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=20)
            elapsed = time.monotonic() - sent
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            self.fail("Model.generate went on for 20 s after SIGINT")
        self.assertEqual(child.returncode, 3, err.decode(errors="replace"))
        self.assertEqual(out.decode().split("\n")[:2], ["KeyboardInterrupt", "same text afterwards"])
        self.assertLess(elapsed, 5.0)

    def test_a_python_trained_checkpoint_is_a_cli_checkpoint(self):
        config = {"task": "lm", "mixer": "gla", "length": 32, "d_model": 16, "heads": 2, "mlp_ratio": 2,
                  "batch": 4, "steps": 10, "warmup": 1, "eval_tokens": 200, "seed": 3}
        before = torch.random.get_rng_state()
        model = mixlab.Model(config)
        self.assertTrue(torch.equal(torch.random.get_rng_state(), before), "Model() changed torch's generator")
        self.assertEqual(model.config["mixer"], "gla")
        # The same config builds the same initial weights as the CLI (the config's seed).
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                                mixlab.Model(config).state_dict().values())))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        data = torch.tensor(list(b"the cat sat on the mat. " * 40))
        for step in range(20):
            starts = torch.randint(0, len(data) - 33, (4,))
            x = torch.stack([data[s:s + 33] for s in starts.tolist()])
            loss = torch.nn.functional.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        path = os.path.join(self.tmp.name, "py", "checkpoint.pt")
        os.makedirs(os.path.dirname(path))
        model.save(path)
        # The CLI reads it: eval, generate (the same text as Python's), --init-from.
        self.assertIn("perplexity", cli("eval", "--checkpoint", path, "--threads", "1").stdout)
        run = cli("generate", "--checkpoint", path, "--prompt", "the", "--max-tokens", "16", "--seed", "7",
                  "--threads", "1")
        self.assertEqual(run.stdout, model.generate("the", max_tokens=16, seed=7))
        self.assertEqual(mixlab.load(path).generate("the", max_tokens=16, seed=7), run.stdout)
        cli("train", "--task", "lm", "--mixer", "gla", "--steps", "2", "--init-from", path, "--out",
            os.path.join(self.tmp.name, "from_py"), *TINY)

    def test_bad_input_is_a_clear_error(self):
        with self.assertRaisesRegex(mixlab.Error, "unknown key 'bogus'"):
            mixlab.Model({"bogus": 1})
        with self.assertRaisesRegex(mixlab.Error, "key 'mixer'"):
            mixlab.Model({"mixer": ""})
        with self.assertRaisesRegex(mixlab.Error, "config must be a dict"):
            mixlab.Model("attention")
        with self.assertRaisesRegex(mixlab.Error, "missing.pt"):
            mixlab.load(os.path.join(self.tmp.name, "missing.pt"))
        foreign = os.path.join(self.tmp.name, "foreign.pt")
        torch.save({"weights": torch.zeros(3)}, foreign)  # a PyTorch file, not a mixlab checkpoint
        with self.assertRaisesRegex(mixlab.Error, "foreign.pt"):
            mixlab.load(foreign)
        copy_model = mixlab.Model({"task": "copy", "d_model": 16, "heads": 2})
        with self.assertRaisesRegex(mixlab.Error, "not a language model"):
            copy_model.generate("x")
        with self.assertRaisesRegex(mixlab.Error, "tokens"):
            mixlab.load(self.ckpt).forward(torch.zeros(2, 3))  # float tokens


if __name__ == "__main__":
    unittest.main()
