"""The fused affine kernels' forward + backward at several head dims, through the Python module.

    /usr/bin/python3 bench/affine_head_dims.py [MODULE_DIR]     # default build/python

Prints, per head dim D, the best of 7 x 5 calls of `diag_decay_chunked` (per-key gate) and of
`delta_rule_chunked` (forward, then backward of the outputs' and the final state's sum), 1 thread.
D 8 and 24 at MAD's batch (B 32, H 16, T 64): head dims that are not whole 64-byte vectors, the
kernels' narrower-vector tiers; D 64 at B 4, H 4, T 1024 as a control. Run it with two module
directories in turn (a build before a change and one after) to compare them in one sitting.
"""
import sys
import time

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "build/python")
import torch  # noqa: E402
import mixlab  # noqa: E402

torch.set_num_threads(1)
torch.manual_seed(0)
for D, (B, H, T) in ((8, (32, 16, 64)), (24, (32, 16, 64)), (64, (4, 4, 1024))):
    q = torch.randn(B, H, T, D, requires_grad=True)
    k = (torch.randn(B, H, T, D) / D**0.5).requires_grad_(True)
    v = torch.randn(B, H, T, D, requires_grad=True)
    g = (-torch.rand(B, H, T, D) * 0.5).requires_grad_(True)
    beta = torch.rand(B, H, T).requires_grad_(True)
    k_unit = torch.nn.functional.normalize(k.detach(), dim=-1).requires_grad_(True)

    def diag():
        o, s = mixlab.diag_decay_chunked(q, k, v, g)
        (o.sum() + s.sum()).backward()

    def delta():
        o, s = mixlab.delta_rule_chunked(q, k_unit, v, beta)
        (o.sum() + s.sum()).backward()

    for name, f in (("diag_decay", diag), ("delta_rule", delta)):
        for _ in range(3):
            f()
        best = float("inf")
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(5):
                f()
            best = min(best, (time.perf_counter() - t0) / 5)
        print(f"{name} D={D} B={B} H={H} T={T} fwd+bwd {best * 1e3:.2f} ms")
