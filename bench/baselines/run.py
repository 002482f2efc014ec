#!/usr/bin/python3
"""mixlab's kernels against the plain-PyTorch baselines of plain_torch.py, in one process, on the
same tensors, interleaved in rounds (machine load hits both alike); medians of the rounds.

    PYTHONPATH=build/python /usr/bin/python3 bench/baselines/run.py [--quick] [--threads 1 2]
        [--filter RE] [--rounds N] [--max-bwd-T 4096] [--json FILE] [--no-block-cache]

Prints one markdown table: kernel, shape, threads, mode, baseline and mixlab milliseconds and
ratio = baseline / mixlab (> 1: mixlab is faster), the fused affine forward's GF/s beside the
sgemm rate of the chunked form's 64x64 blocks (its roofline), and the largest output difference
(every case is checked: a kernel that disagrees with its baseline is reported as an error, not
timed). After the table: per kernel and mode, the range of the ratios and the lowest row
(scripts/baseline_summary.py, the same lines bench.sh --takes N writes for its merged table).
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import plain_torch as pt  # noqa: E402
from baseline_summary import ratio_summary_lines  # noqa: E402
from write_whole import write_whole  # noqa: E402

import mixlab  # noqa: E402


def inputs(kind, B, H, T, D, grad):
    g = torch.Generator().manual_seed(B * 1000 + T)
    q = torch.randn(B, H, T, D, generator=g)
    k = torch.randn(B, H, T, D, generator=g) / D**0.5
    v = torch.randn(B, H, T, D, generator=g)
    out = {"q": q, "k": k, "v": v}
    if kind in ("gla", "gla_recurrent"):
        # Gates as GLA makes them: logsigmoid(x) / 16, so a 64-token chunk decays by at most ~e^-8
        # (the plain chunked form's exp(-b) stays in float range).
        out["g"] = torch.nn.functional.logsigmoid(torch.randn(B, H, T, D, generator=g)) / 16
    elif kind == "simple_gla":
        out["g"] = torch.nn.functional.logsigmoid(torch.randn(B, H, T, generator=g)) / 16
    elif kind == "deltanet":
        out["k"] = k / k.norm(dim=-1, keepdim=True)
        out["beta"] = torch.rand(B, H, T, generator=g)
    elif kind == "toeplitz":
        out = {"t": torch.randn(H, T, generator=g) / T**0.5, "x": v}
    elif kind == "selective_scan":
        # Mamba's S6 at d_inner = H D channels, state size N = 16, its usual initialisation:
        # step sizes softplus(.) * 0.1, a = -exp(.) < 0.
        C, N = H * D, 16
        out = {"u": torch.randn(B, T, C, generator=g),
               "delta": torch.nn.functional.softplus(torch.randn(B, T, C, generator=g)) * 0.1,
               "a": -torch.exp(torch.randn(C, N, generator=g) * 0.5),
               "b": torch.randn(B, T, N, generator=g), "c": torch.randn(B, T, N, generator=g),
               "d": torch.randn(C, generator=g)}
    if grad:
        for t in out.values():
            t.requires_grad_(True)
    return out


def pair(kind, a):
    """(baseline, mixlab) callables returning the output tensor."""
    if kind == "gla":
        return (lambda: pt.gla_chunked(a["q"], a["k"], a["v"], a["g"]),
                lambda: mixlab.diag_decay_chunked(a["q"], a["k"], a["v"], a["g"], chunk=64)[0])
    if kind == "gla_recurrent":
        return (lambda: pt.gla_recurrent(a["q"], a["k"], a["v"], a["g"]),
                lambda: mixlab.diag_decay_recurrent(a["q"], a["k"], a["v"], a["g"])[0])
    if kind == "simple_gla":
        def ours():
            q = a["q"]
            gk = a["g"].unsqueeze(-1).expand(*q.shape)  # stride 0 over Dk: the scalar-gate path
            return mixlab.diag_decay_chunked(q, a["k"], a["v"], gk, chunk=64)[0]
        return (lambda: pt.simple_gla_chunked(a["q"], a["k"], a["v"], a["g"]), ours)
    if kind == "deltanet":
        return (lambda: pt.deltanet_chunked(a["q"], a["k"], a["v"], a["beta"]),
                lambda: mixlab.delta_rule_chunked(a["q"], a["k"], a["v"], a["beta"], chunk=64)[0])
    if kind == "toeplitz":
        return (lambda: pt.toeplitz_fft(a["t"], a["x"]), lambda: mixlab.toeplitz(a["t"], a["x"], path="fft"))
    if kind == "attention":
        return (lambda: pt.causal_attention(a["q"], a["k"], a["v"]),
                lambda: mixlab.causal_attention(a["q"], a["k"], a["v"]))
    if kind == "local_attention":  # local:64, the sliding-window transformer's mixer
        return (lambda: pt.local_attention(a["q"], a["k"], a["v"], 64),
                lambda: mixlab.causal_attention(a["q"], a["k"], a["v"], window=64))
    if kind == "selective_scan":
        args = [a[n] for n in ("u", "delta", "a", "b", "c", "d")]
        return (lambda: pt.selective_scan(*args), lambda: mixlab.selective_scan(*args)[0])
    raise ValueError(kind)


def timed(fn, backward):
    t0 = time.perf_counter()
    if backward:
        fn().sum().backward()
    else:
        with torch.no_grad():
            fn()
    return time.perf_counter() - t0


# Floating-point operations the fused token loops execute per token, head and state entry
# (Dk Dv entries): diagonal decay = decay multiply + write FMA + read FMA (1 + 2 + 2); delta rule
# = two read FMAs (S^T k, S^T q) + decay multiply + write FMA (2 + 2 + 1 + 2).
FUSED_FLOPS_PER_ENTRY = {"simple_gla": 5, "gla": 5, "gla_recurrent": 5, "deltanet": 7}


def sgemm_rate(threads, block=64, n=256, rounds=11):
    """GF/s of torch.matmul (OpenBLAS sgemm) on n independent (block x block) @ (block x block)
    products: the chunked form's block shapes, the roofline its GEMMs can reach on this machine.
    The output is preallocated and the first calls are discarded: a fresh 4 MB output per call
    page-faults, which halved the rate measured at first (36-39 instead of 85-94 GF/s)."""
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, block, block, generator=g), torch.randn(n, block, block, generator=g)
    c = torch.empty(n, block, block)
    for _ in range(5):
        torch.matmul(a, b, out=c)
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        torch.matmul(a, b, out=c)
        ts.append(time.perf_counter() - t0)
    return 2 * n * block**3 / statistics.median(ts) / 1e9


def case(kind, B, H, T, D, threads, backward, rounds):
    torch.set_num_threads(threads)
    a = inputs(kind, B, H, T, D, backward)
    base, ours = pair(kind, a)
    with torch.no_grad():
        yb, yo = base(), ours()
        diff = (yb - yo).abs().max().item()
        scale = yb.abs().max().item()
    if not diff <= 1e-3 * max(scale, 1.0):
        raise RuntimeError(f"{kind} B{B} T{T}: mixlab and the baseline differ by {diff:.3g} (scale {scale:.3g})")
    for _ in range(3):  # warm-up: the first calls after a thread-count change pay for the team
        timed(base, backward), timed(ours, backward)
    tb, to = [], []
    for _ in range(rounds):
        tb.append(timed(base, backward))
        to.append(timed(ours, backward))
    mb, mo = statistics.median(tb), statistics.median(to)
    per_entry = FUSED_FLOPS_PER_ENTRY.get(kind) if not backward else None
    gflops = per_entry * B * H * T * D * D / mo / 1e9 if per_entry else None
    return {"kernel": kind, "B": B, "H": H, "T": T, "D": D, "threads": threads,
            "mode": "fwd+bwd" if backward else "fwd", "baseline_ms": 1e3 * mb, "mixlab_ms": 1e3 * mo,
            "ratio": mb / mo, "max_abs_diff": diff, "mixlab_gflops": gflops}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="T = 1024 only, 3 rounds")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--filter", default=".", help="regular expression over kernel names")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--max-bwd-T", type=int, default=4096, help="longest T timed with backward")
    ap.add_argument("--no-block-cache", action="store_true",
                    help="leave LibTorch's allocator alone (default: mixlab.use_cpu_block_cache() for both sides)")
    args = ap.parse_args()
    # Both sides allocate their outputs and temporaries afresh on every call. On this VM a page
    # touched for the first time costs ~3.8 ms/MiB and that cost swings with the host, so without
    # the block cache the figures measure page faults more than code (docs/log/benchmarks-2026-11.md).
    cache = "off" if args.no_block_cache else ("on" if mixlab.use_cpu_block_cache() else "off")
    rounds = args.rounds or (3 if args.quick else 5)
    Ts = [1024] if args.quick else [1024, 4096, 16384]
    H, D = 4, 64
    plan = []
    for kind in ("simple_gla", "gla", "deltanet", "toeplitz", "gla_recurrent", "selective_scan", "attention",
                 "local_attention"):
        if not re.search(args.filter, kind):
            continue
        # The selective scan's plain backward is autograd through a T-step Python loop (9 s a call at
        # B 1, T 1024; 31 s at B 4): it is timed at T = 256 only, where it takes about 2 s.
        kind_Ts = ([256] + Ts) if kind == "selective_scan" else Ts
        for B in (1, 4):
            for T in kind_Ts:
                if kind == "gla_recurrent" and T > 1024:
                    continue  # a token loop: T = 1024 shows the per-token cost
                if kind in ("attention", "local_attention") and T > 4096:
                    continue  # the baseline's (T,T) scores: 4 GiB per (batch, head) set at T 16384
                if kind == "selective_scan" and T > 4096:
                    continue  # the baseline's (B,T,C,N) tensors: 1 GiB each at B 4, T 16384
                for threads in args.threads:
                    # Backward up to --max-bwd-T: above it the baselines' autograd through a Python
                    # loop over T/64 chunks takes 5-30 s a call (simple GLA, B 1, T 16384: 4.9 s).
                    if kind == "selective_scan":
                        modes = (True,) if T == 256 else (False,)
                    else:
                        modes = (False,) if kind == "gla_recurrent" or T > args.max_bwd_T else (False, True)
                    for backward in modes:
                        plan.append((kind, B, H, T, D, threads, backward))
    rows = []
    sgemm = {t: sgemm_rate(t) for t in args.threads}
    print("sgemm roofline (torch.matmul, 256 products of 64x64 @ 64x64): " +
          ", ".join(f"{sgemm[t]:.1f} GF/s at {t} thread{'s' if t > 1 else ''}" for t in args.threads))
    print(f"CPU block cache (both sides): {cache}")
    print()
    print("| kernel | B | T | threads | mode | plain torch ms | mixlab ms | ratio | mixlab GF/s (% of sgemm) "
          "| max abs diff |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for c in plan:
        r = case(*c, rounds)
        r["sgemm_gflops"] = sgemm[r["threads"]]
        rows.append(r)
        gf = r["mixlab_gflops"]
        gf_cell = f"{gf:.1f} ({100 * gf / r['sgemm_gflops']:.0f} %)" if gf else "—"
        print(f"| {r['kernel']} | {r['B']} | {r['T']} | {r['threads']} | {r['mode']} | {r['baseline_ms']:.3g} | "
              f"{r['mixlab_ms']:.3g} | **{r['ratio']:.2f}×** | {gf_cell} | {r['max_abs_diff']:.1e} |", flush=True)
    print()
    print("\n".join(ratio_summary_lines(rows)))
    if args.json:
        write_whole(args.json, json.dumps({"sgemm_gflops": sgemm, "isa": mixlab.fused_affine_isa(),
                                           "block_cache": cache, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
