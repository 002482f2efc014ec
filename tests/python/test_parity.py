"""The Python path is the C++ path: the same mixer, seed and input through `mixlab` (in this
process) and through the C++ API only (tests/python/cpp_reference.cpp, another process) give
bitwise equal outputs, input gradients, parameter gradients and decode steps.
"""
import os
import subprocess
import tempfile
import unittest

import torch

import mixlab

C, H, B, T = 16, 2, 2, 11


def read_records(path):
    records = {}
    with open(path, "rb") as f:
        while True:
            header = f.readline()
            if not header:
                return records
            name, numel = header.decode().split()
            records[name] = torch.frombuffer(bytearray(f.read(4 * int(numel))), dtype=torch.float32)


def python_side(spec, seed):
    torch.manual_seed(seed)
    m = mixlab.mixer(spec, C, H, max_len=T)
    x = torch.randn(B, T, C).requires_grad_()
    y = m(x)
    (y * y).sum().backward()  # the same ops as the C++ side
    out = {"y": y.detach().flatten(), "dx": x.grad.flatten()}
    for name, p in m.named_parameters():
        out["grad:" + name] = (p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
    with torch.no_grad():
        state = m.init_state(B)
        out["steps"] = torch.stack([m.step(state, x.detach()[:, t]) for t in range(T)], 1).flatten()
    return out


class ParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.exe = os.environ.get("MIXLAB_PY_REFERENCE", "")
        if not os.path.exists(cls.exe):
            raise unittest.SkipTest("MIXLAB_PY_REFERENCE (the built mixlab_py_reference) is not set")
        torch.set_num_threads(1)  # the C++ side runs on one thread too

    def cpp_side(self, spec, seed):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "out.bin")
            subprocess.run([self.exe, spec, str(C), str(H), str(B), str(T), str(seed), path], check=True)
            return read_records(path)

    def test_bitwise_equal(self):
        for spec in ["resolvent:pow2+cache", "gla", "deltanet", "toeplitz", "attention", "ssm"]:
            with self.subTest(spec=spec):
                cpp, py = self.cpp_side(spec, 7), python_side(spec, 7)
                self.assertEqual(sorted(cpp), sorted(py))
                for name in cpp:
                    self.assertTrue(torch.equal(cpp[name], py[name]), f"{spec}: {name} differs")
                self.assertGreater(py["dx"].abs().sum().item(), 0)

    def test_a_different_seed_differs(self):
        # The comparison above can fail: other weights give other bits.
        cpp, py = self.cpp_side("gla", 7), python_side("gla", 8)
        self.assertFalse(torch.equal(cpp["y"], py["y"]))


if __name__ == "__main__":
    unittest.main()
