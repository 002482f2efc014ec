"""mixlab.mixer as a torch.nn.Module: every registered family builds, decodes like its forward,
exposes its C++ parameters to torch (gradients, optimizers, state_dict, dtype moves), and a torch
model built from mixlab mixers trains.
"""
import copy
import io
import pathlib
import tempfile
import unittest

import torch

import mixlab

C, H = 16, 2


def family_spec(family):
    return "resolvent:pow2" if family == "resolvent" else family


class EveryFamilyTest(unittest.TestCase):
    def test_forward_step_and_parameters(self):
        families = [f["family"] for f in mixlab.mixer_families()]
        self.assertIn("resolvent", families)
        self.assertIn("gla", families)
        for family in families:
            spec = family_spec(family)
            with self.subTest(spec=spec):
                torch.manual_seed(0)
                m = mixlab.mixer(spec, C, H, max_len=32)
                self.assertIsInstance(m, torch.nn.Module)
                x = torch.randn(2, 9, C)
                y = m(x)
                self.assertEqual(tuple(y.shape), (2, 9, C))
                # Decode equals the parallel forward row by row (as in tests/mixers for C++).
                m.eval()
                with torch.no_grad():
                    y_eval = m(x)
                    state = m.init_state(2)
                    steps = torch.stack([m.step(state, x[:, t]) for t in range(9)], 1)
                self.assertEqual(state.position, 9)
                torch.testing.assert_close(steps, y_eval, rtol=1e-4, atol=1e-4)
                m.train()
                # The registered parameters are the tensors the C++ forward reads: gradients land
                # in p.grad, and each C++ parameter appears once under its C++ name.
                params = dict(m.named_parameters())
                self.assertEqual(sorted(params), sorted(n for n, _ in m._impl.named_parameters()))
                self.assertGreater(len(params), 0)
                y.pow(2).mean().backward()
                missing = [n for n, p in params.items() if p.grad is None]
                self.assertEqual(missing, [])
                self.assertTrue(any(p.grad.abs().sum() > 0 for p in params.values()))


class ModuleProtocolTest(unittest.TestCase):
    def test_optimizer_step_changes_the_cpp_forward(self):
        torch.manual_seed(1)
        m = mixlab.mixer("resolvent:square+cache", C, H, max_len=16)
        x = torch.randn(1, 8, C)
        before = m(x).detach()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(x).pow(2).sum().backward()
        opt.step()
        self.assertFalse(torch.equal(before, m(x).detach()))

    def test_state_dict_round_trip(self):
        torch.manual_seed(2)
        a, b = mixlab.mixer("gla", C, H), mixlab.mixer("gla", C, H)
        x = torch.randn(2, 5, C)
        self.assertFalse(torch.equal(a(x), b(x)))
        b.load_state_dict(a.state_dict())
        self.assertTrue(torch.equal(a(x), b(x)))

    def test_deepcopy_and_pickle(self):
        torch.manual_seed(5)
        model = torch.nn.Sequential(torch.nn.Linear(C, C), mixlab.mixer("resolvent:pow2", C, H, max_len=16))
        x = torch.randn(1, 7, C)
        buf = io.BytesIO()
        torch.save(model, buf)
        buf.seek(0)
        rng = torch.get_rng_state()
        for clone in (copy.deepcopy(model), torch.load(buf)):
            self.assertTrue(torch.equal(clone(x), model(x)))
            # An independent module: its parameters are new C++ tensors.
            self.assertFalse(any(a.data_ptr() == b.data_ptr() for a, b in zip(clone.parameters(), model.parameters())))
        self.assertTrue(torch.equal(rng, torch.get_rng_state()))

    def test_double(self):
        torch.manual_seed(3)
        m = mixlab.mixer("toeplitz", C, H, max_len=16)
        x = torch.randn(1, 6, C)
        y32 = m(x)
        m.double()
        self.assertTrue(all(p.dtype == torch.float64 for p in m.parameters()))
        y64 = m(x.double())
        self.assertEqual(y64.dtype, torch.float64)
        torch.testing.assert_close(y64.float(), y32, rtol=1e-4, atol=1e-5)

    def test_repr_and_properties(self):
        m = mixlab.mixer("local:4", C, H)
        self.assertEqual(m.spec, "local:4")
        self.assertIn("local:4", repr(m))
        self.assertTrue(m.cost_class.startswith("O("))


class TinyLM(torch.nn.Module):
    """Embedding -> [pre-LN mixlab mixer + MLP] x 2 -> logits: plain PyTorch around mixlab layers."""

    def __init__(self, vocab, specs, d=C, heads=H, max_len=64):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.mixers = torch.nn.ModuleList(mixlab.mixer(s, d, heads, max_len) for s in specs)
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in specs)
        self.mlps = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.Linear(d, 2 * d), torch.nn.GELU(),
                                torch.nn.Linear(2 * d, d)) for _ in specs)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, tokens):
        h = self.emb(tokens)
        for mix, norm, mlp in zip(self.mixers, self.norms, self.mlps):
            h = h + mix(norm(h))
            h = h + mlp(h)
        return self.head(h)


class TrainTest(unittest.TestCase):
    def test_loss_goes_down(self):
        # Next-token prediction on sequences that repeat their first half: the second half is
        # only predictable by mixing tokens across positions.
        torch.manual_seed(4)
        vocab, T = 8, 16
        model = TinyLM(vocab, ["resolvent:pow2", "gla"])
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(40):
            half = torch.randint(0, vocab, (16, T // 2))
            seq = torch.cat([half, half], 1)
            logits = model(seq[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), seq[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
        self.assertLess(last, first - 0.1, losses)


class DecodeStateTest(unittest.TestCase):
    """prefill / save_state / load_state / fork from Python (the C++ decode engine, issue 15)."""

    def test_every_family_saves_loads_and_forks_bitwise(self):
        for family in [f["family"] for f in mixlab.mixer_families()]:
            spec = family_spec(family)
            with self.subTest(spec=spec):
                torch.manual_seed(3)
                m = mixlab.mixer(spec, C, H, max_len=32).eval()
                x = torch.randn(2, 12, C)
                with torch.no_grad():
                    # Uninterrupted: prefill 7 tokens, then 5 steps.
                    state = m.init_state(2)
                    head = m.prefill(state, x[:, :7])
                    self.assertEqual(state.position, 7)
                    torch.testing.assert_close(head, m(x)[:, :7], rtol=1e-4, atol=1e-4)
                    saved = m.save_state(state)
                    self.assertIsInstance(saved, bytes)
                    branch = m.fork(state)
                    tail = torch.stack([m.step(state, x[:, t]) for t in range(7, 12)], 1)
                    # A fresh mixer with the same weights, state from the bytes.
                    other = mixlab.mixer(spec, C, H, max_len=32).eval()
                    other.load_state_dict(m.state_dict())
                    restored = other.load_state(saved)
                    self.assertEqual(restored.position, 7)
                    again = torch.stack([other.step(restored, x[:, t]) for t in range(7, 12)], 1)
                    self.assertTrue(torch.equal(tail, again))
                    # The fork was not moved by the steps of the original.
                    self.assertEqual(branch.position, 7)
                    forked = torch.stack([m.step(branch, x[:, t]) for t in range(7, 12)], 1)
                    self.assertTrue(torch.equal(tail, forked))

    def test_file_round_trip_and_bad_states(self):
        torch.manual_seed(4)
        m = mixlab.mixer("resolvent:pow2+cache", C, H, max_len=32).eval()
        x = torch.randn(1, 6, C)
        with torch.no_grad(), tempfile.TemporaryDirectory() as d:
            state = m.init_state(1)
            m.prefill(state, x[:, :4])
            path = pathlib.Path(d) / "state.bin"
            self.assertIsNone(m.save_state(state, path))
            self.assertEqual(path.read_bytes(), m.save_state(state))
            loaded = m.load_state(path)
            self.assertTrue(torch.equal(m.step(loaded, x[:, 4]), m.step(state, x[:, 4])))
            data = bytearray(m.save_state(state))
            data[-3] ^= 0x40  # one flipped bit in the payload
            with self.assertRaisesRegex(mixlab.Error, "checksum"):
                m.load_state(bytes(data))
            with self.assertRaisesRegex(mixlab.Error, "truncated|short|corrupt"):
                m.load_state(bytes(data[:20]))
            with self.assertRaisesRegex(mixlab.Error, "pow2"):
                mixlab.mixer("gla", C, H).load_state(m.save_state(state))
            with self.assertRaisesRegex(mixlab.Error, "missing"):
                m.load_state(pathlib.Path(d) / "missing.bin")


if __name__ == "__main__":
    unittest.main()
