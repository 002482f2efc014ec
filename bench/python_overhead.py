#!/usr/bin/python3
"""Overhead of calling mixlab.resolvent from Python against the same call in a C++ loop.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--T 4096] [--threads 2]

Both timings are taken in one process on the same tensors, interleaved in rounds (so machine
load hits both alike); the C++ side is mixlab._mixlab._time_resolvent_cpp, a loop over
mixlab::resolvent_forward with the GIL released. Reports per call, for forward with autograd
recording (inputs require grad) and forward only under torch.no_grad(): the fastest round of each
side (timeit's rule: the least disturbed run; the headline overhead python/cpp - 1 uses it) and
the medians. On a loaded machine the kernel time itself varies by tens of percent between rounds,
so the script also measures the fixed cost of the Python call at a tiny T (--tiny-T), where the
kernel is negligible: that absolute overhead over the T = 4096 kernel time is the second estimate.
"""
import argparse
import statistics
import time

import torch

import mixlab
from mixlab import _mixlab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--H", type=int, default=4)
    ap.add_argument("--D", type=int, default=32)
    ap.add_argument("--pattern", default="pow2")
    ap.add_argument("--iters", type=int, default=20, help="calls per timing")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tiny-T", type=int, default=16)
    ap.add_argument("--tiny-iters", type=int, default=2000)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    p = mixlab.Pattern(args.pattern)
    W = p.max_width(args.T)

    def inputs(T):
        W = p.max_width(T)
        shape = (args.B, args.H, T)
        alpha = (torch.rand(*shape, W + 1) / (W + 1)).requires_grad_()
        beta = (torch.rand(*shape, W) / (2 * W)).requires_grad_()
        return alpha, beta, torch.randn(*shape, args.D).requires_grad_()

    def measure(tensors, iters):
        def python_loop():
            start = time.perf_counter()
            for _ in range(iters):
                mixlab.resolvent(*tensors, p)
            return (time.perf_counter() - start) / iters

        def cpp_loop():
            return _mixlab._time_resolvent_cpp(*tensors, p, None, iters)

        python_loop(), cpp_loop()  # warm-up (pattern index, allocator)
        py, cpp = [], []
        for _ in range(args.rounds):
            py.append(python_loop())
            cpp.append(cpp_loop())
        return py, cpp

    big = inputs(args.T)
    print(f"resolvent {args.pattern} B={args.B} H={args.H} T={args.T} D={args.D} W={W}, "
          f"{args.threads} threads, {args.rounds} rounds x {args.iters} calls, per call")
    for label, ctx in [("autograd", torch.enable_grad), ("no_grad", torch.no_grad)]:
        with ctx():
            py, cpp = measure(big, args.iters)
            tiny_py, tiny_cpp = measure(inputs(args.tiny_T), args.tiny_iters)
        fixed = min(tiny_py) - min(tiny_cpp)
        print(f"  {label:9s} T={args.T}: python {min(py) * 1e3:8.3f} ms  c++ {min(cpp) * 1e3:8.3f} ms  "
              f"overhead {100 * (min(py) / min(cpp) - 1):+6.2f} %   (medians {statistics.median(py) * 1e3:.3f} / "
              f"{statistics.median(cpp) * 1e3:.3f} ms, {100 * (statistics.median(py) / statistics.median(cpp) - 1):+.2f} %)")
        print(f"  {label:9s} T={args.tiny_T}: python {min(tiny_py) * 1e6:8.2f} us  c++ {min(tiny_cpp) * 1e6:8.2f} us  "
              f"fixed cost of the Python call {fixed * 1e6:.2f} us = {100 * fixed / min(cpp):.3f} % of the T={args.T} call")

if __name__ == "__main__":
    main()
