"""mixlab's kernels as torch functions: finite-difference gradients in float64 (torch.autograd.
gradcheck) on small, awkward shapes, equality of the chunked and recurrent affine forms, and the
Pattern / analyze views. Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest discover -s tests/python
"""
import json
import os
import subprocess
import unittest

import torch
from torch.autograd import gradcheck

import mixlab


def rand(*shape, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale).requires_grad_()


class ResolventTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def inputs(self, spec, B=2, H=1, T=7, D=3, gated=False):
        p = mixlab.Pattern(spec)
        W = p.max_width(T)
        alpha = rand(B, H, T, W + 1, scale=0.5)
        # Small beta keeps (I - B) well conditioned so finite differences are accurate.
        beta = rand(B, H, T, W if p.recurrent else 0, scale=0.3)
        x = rand(B, H, T, D)
        gate = torch.rand(B, H, T, D, dtype=torch.float64).requires_grad_() if gated else None
        return p, alpha, beta, x, gate

    def test_gradcheck_recurrent_patterns(self):
        for spec in ["pow2", "square+cache", "order:2"]:
            with self.subTest(spec=spec):
                p, alpha, beta, x, _ = self.inputs(spec)
                self.assertTrue(gradcheck(lambda a, b, v: mixlab.resolvent(a, b, v, p), (alpha, beta, x)))

    def test_gradcheck_gated(self):
        p, alpha, beta, x, gate = self.inputs("pow2", T=9, gated=True)
        self.assertTrue(gradcheck(lambda a, b, v, g: mixlab.resolvent(a, b, v, p, g), (alpha, beta, x, gate)))

    def test_gradcheck_non_recurrent_band(self):
        p, alpha, beta, x, _ = self.inputs("band:3")
        self.assertEqual(beta.shape[-1], 0)
        self.assertTrue(gradcheck(lambda a, v: mixlab.resolvent(a, beta, v, "band:3"), (alpha, x)))

    def test_matches_the_row_form(self):
        # y_i = alpha_i0 x_i + sum_s alpha_i,s+1 x_P(i)[s] + sum_s beta_is y_P(i)[s], written out
        # from Pattern.rows: ties the op to the documented formula and to the Pattern view.
        p, alpha, beta, x, _ = self.inputs("square", B=1, T=11)
        y = mixlab.resolvent(alpha, beta, x, p).detach()
        rows = p.rows(11)
        ref = torch.zeros_like(y)
        for i, past in enumerate(rows):
            acc = alpha[0, 0, i, 0] * x[0, 0, i]
            for s, j in enumerate(past):
                acc = acc + alpha[0, 0, i, s + 1] * x[0, 0, j] + beta[0, 0, i, s] * ref[0, 0, j]
            ref[0, 0, i] = acc.detach()
        torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)

    def test_inside_a_torch_graph(self):
        # Gradients reach torch parameters upstream and downstream of the op.
        p = mixlab.Pattern("pow2")
        proj = torch.nn.Linear(4, 4).double()
        x = torch.randn(1, 2, 8, 4, dtype=torch.float64)
        alpha = torch.full((1, 2, 8, p.max_width(8) + 1), 0.5, dtype=torch.float64)
        beta = torch.full((1, 2, 8, p.max_width(8)), 0.1, dtype=torch.float64)
        mixlab.resolvent(alpha, beta, proj(x), p).pow(2).sum().backward()
        self.assertGreater(proj.weight.grad.abs().sum().item(), 0)


class AffineTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(1)

    def test_gradcheck_diag_decay_chunked(self):
        B, H, T, Dk, Dv = 1, 2, 7, 3, 2  # T not a multiple of the chunk
        q, k, v = rand(B, H, T, Dk), rand(B, H, T, Dk), rand(B, H, T, Dv)
        g = (-torch.rand(B, H, T, Dk, dtype=torch.float64)).requires_grad_()
        s0 = rand(B, H, Dk, Dv)
        fn = lambda *a: mixlab.diag_decay_chunked(*a, chunk=4)  # noqa: E731
        self.assertTrue(gradcheck(fn, (q, k, v, g, s0)))

    def test_chunked_equals_recurrent(self):
        B, H, T, Dk, Dv = 2, 2, 13, 4, 3
        q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64) for d in (Dk, Dk, Dv))
        g = -torch.rand(B, H, T, Dk, dtype=torch.float64)
        out_c, s_c = mixlab.diag_decay_chunked(q, k, v, g, chunk=4)
        out_r, s_r = mixlab.diag_decay_recurrent(q, k, v, g)
        torch.testing.assert_close(out_c, out_r)
        torch.testing.assert_close(s_c, s_r)
        k = torch.nn.functional.normalize(k, dim=-1)
        beta = torch.rand(B, H, T, dtype=torch.float64)
        log_alpha = -torch.rand(B, H, T, dtype=torch.float64)
        out_c, s_c = mixlab.delta_rule_chunked(q, k, v, beta, log_alpha, chunk=5)
        out_r, s_r = mixlab.delta_rule_recurrent(q, k, v, beta, log_alpha)
        torch.testing.assert_close(out_c, out_r)
        torch.testing.assert_close(s_c, s_r)

    def test_cpu_block_cache_serves_torch_tensors(self):
        # Process-wide from here on: later tests of this file run on it too.
        self.assertTrue(mixlab.use_cpu_block_cache(64))
        self.assertTrue(mixlab.use_cpu_block_cache())  # idempotent
        before = mixlab.cpu_block_cache_stats()
        self.assertTrue(before["installed"])
        self.assertEqual(before["budget_bytes"], 64 << 20)
        a = torch.full((3 << 18,), 2.0)  # 3 MiB
        ptr = a.data_ptr()
        del a
        b = torch.ones(3 << 18)  # the same block, values written anew
        self.assertEqual(b.data_ptr(), ptr)
        self.assertEqual(b.sum().item(), float(3 << 18))
        after = mixlab.cpu_block_cache_stats()
        self.assertEqual(after["hits"], before["hits"] + 1)
        self.assertIsInstance(after["malloc_tuned"], bool)

    def test_blas_kernels_names_the_library(self):
        # Names the kernels of the process's BLAS, which torch's matmuls run; Debian's is OpenBLAS.
        name = mixlab.blas_kernels()
        self.assertTrue(name.startswith("OpenBLAS ") or name.startswith("not OpenBLAS"), name)
        if name.startswith("OpenBLAS "):
            self.assertIn(" kernels", name)

    def test_fused_kernels_from_python(self):
        # torch.no_grad() takes the fused forward, requires_grad the fused forward + backward; both
        # equal the double-precision reference path (gradcheck above runs through the fused one).
        self.assertIn(mixlab.fused_affine_isa(), ("avx512", "avx2", "generic"))
        B, H, T, Dk, Dv = 2, 2, 40, 5, 3  # T > 32: more than one checkpoint chunk
        q, k, v = (torch.randn(B, H, T, d) for d in (Dk, Dk, Dv))
        g = -torch.rand(B, H, T, Dk)
        with torch.no_grad():
            out_n, s_n = mixlab.diag_decay_chunked(q, k, v, g)
        qg = q.clone().requires_grad_()
        out_g, s_g = mixlab.diag_decay_chunked(qg, k, v, g)
        self.assertIsNotNone(out_g.grad_fn)
        torch.testing.assert_close(out_n, out_g.detach(), rtol=1e-5, atol=1e-5)
        d = lambda t: t.double()  # noqa: E731
        out_d, _ = mixlab.diag_decay_recurrent(d(q), d(k), d(v), d(g))
        torch.testing.assert_close(out_n.double(), out_d, rtol=1e-4, atol=1e-4)


class ToeplitzTest(unittest.TestCase):
    def test_gradcheck_both_paths(self):
        torch.manual_seed(2)
        t, x, bias = rand(2, 9), rand(1, 2, 6, 3), rand(2, 9)
        for path in ["fft", "materialized"]:
            with self.subTest(path=path):
                self.assertTrue(gradcheck(lambda a, b, c: mixlab.toeplitz(a, b, c, path=path), (t, x, bias)))

    def test_matches_the_definition(self):
        torch.manual_seed(3)
        t, x = torch.randn(1, 5, dtype=torch.float64), torch.randn(1, 1, 5, 2, dtype=torch.float64)
        y = mixlab.toeplitz(t, x)
        ref = torch.stack([sum(t[0, i - j] * x[0, 0, j] for j in range(i + 1)) for i in range(5)])
        torch.testing.assert_close(y[0, 0], ref)


class CausalAttentionTest(unittest.TestCase):
    """mixlab.causal_attention, full and with a window, against the written-out definition."""

    def setUp(self):
        torch.manual_seed(0)

    @staticmethod
    def definition(q, k, v, window):
        T, S = q.shape[2], k.shape[2] - q.shape[2]
        scores = q @ k.transpose(-1, -2) / q.shape[3] ** 0.5
        i = torch.arange(T).unsqueeze(1) + S
        j = torch.arange(S + T).unsqueeze(0)
        mask = j > i
        if window > 0:
            mask = mask | (j < i - window)
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v

    def test_forward_matches_definition(self):
        # D = 8: the native kernel in float64; D = 3: the composed form.
        for D in (8, 3):
            for window in (0, 1, 5, 40):
                with self.subTest(D=D, window=window):
                    q = torch.randn(2, 2, 70, D, dtype=torch.float64)
                    k = torch.randn(2, 2, 75, D, dtype=torch.float64)
                    v = torch.randn(2, 2, 75, D, dtype=torch.float64)
                    got = mixlab.causal_attention(q, k, v, window=window)
                    self.assertTrue(torch.allclose(got, self.definition(q, k, v, window), rtol=1e-10, atol=1e-12))

    def test_gradcheck_window(self):
        q, k, v = rand(1, 2, 6, 8), rand(1, 2, 8, 8), rand(1, 2, 8, 8)
        self.assertTrue(gradcheck(lambda a, b, c: mixlab.causal_attention(a, b, c, window=2), (q, k, v)))

    def test_negative_window_is_an_error(self):
        q = torch.randn(1, 1, 4, 16)
        with self.assertRaisesRegex(mixlab.Error, "window must be >= 0"):
            mixlab.causal_attention(q, q, q, window=-1)


class PatternTest(unittest.TestCase):
    def test_rows_and_offsets(self):
        p = mixlab.Pattern("pow2")
        self.assertEqual(p.row(20), [19, 18, 16, 12, 4])
        self.assertEqual(p.offsets(20), [1, 2, 4, 8, 16])
        self.assertEqual(mixlab.Pattern("square").offsets(20), [1, 2, 5, 10, 17])
        # Cache-efficient 2^k at 1-based i = 20 reads S_20 = {8, 12, 16, 18, 19} (SPEC-NOTES §2).
        self.assertEqual(sorted(j + 1 for j in mixlab.Pattern("pow2+cache").row(19)), [8, 12, 16, 18, 19])
        self.assertEqual(mixlab.Pattern("band:2").rows(4), [[], [0], [1, 0], [2, 1]])
        self.assertFalse(mixlab.Pattern("causal").recurrent)
        self.assertEqual(mixlab.Pattern("pow2+cache").spec, "pow2+cache")
        self.assertEqual(repr(mixlab.Pattern("dense")), "mixlab.Pattern('dense')")

    def test_analyze_dict(self):
        r = mixlab.analyze("pow2", 64)
        self.assertIsInstance(r, dict)
        self.assertEqual(r["spec"], "pow2")
        self.assertEqual(r["T"], 64)
        # max |P(i)| for i < 64 is 1 + floor(log2 63) = 6 (Prop. 4.2, 0-based rows).
        self.assertEqual(r["time_per_token"]["past_reads_max"], 6)
        self.assertEqual(r["time_per_token"]["A_row_max"], 7)
        self.assertEqual(max(mixlab.Pattern("pow2").row_size(i) for i in range(64)), 6)

    def test_analyze_equals_the_cli_json(self):
        cli = os.environ.get("MIXLAB_CLI", "")
        if not os.path.exists(cli):
            self.skipTest("the mixlab CLI is not built (MIXLAB_CLI)")
        for spec, T in [("square+cache", 40), ("band:4", 17)]:
            out = subprocess.run([cli, "analyze", "--pattern", spec, "--T", str(T), "--json"], check=True,
                                 capture_output=True, text=True).stdout
            self.assertEqual(json.loads(out), mixlab.analyze(spec, T))


if __name__ == "__main__":
    unittest.main()
