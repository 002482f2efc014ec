#!/usr/bin/python3
"""Overhead of calling mixlab.resolvent from Python against the same call in a C++ loop.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--T 4096] [--threads 2]

Both timings are taken in one process on the same tensors, interleaved in rounds (so machine
load hits both alike); the C++ side is mixlab._mixlab._time_resolvent_cpp, a loop over
mixlab::resolvent_forward with the GIL released. Reports the median per-call time of each and
the overhead (python / cpp - 1), forward with autograd recording (inputs require grad) and
forward only under torch.no_grad().
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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    p = mixlab.Pattern(args.pattern)
    W = p.max_width(args.T)
    shape = (args.B, args.H, args.T)
    alpha = (torch.rand(*shape, W + 1) / (W + 1)).requires_grad_()
    beta = (torch.rand(*shape, W) / (2 * W)).requires_grad_()
    x = torch.randn(*shape, args.D).requires_grad_()

    def python_loop():
        start = time.perf_counter()
        for _ in range(args.iters):
            mixlab.resolvent(alpha, beta, x, p)
        return (time.perf_counter() - start) / args.iters

    def cpp_loop():
        return _mixlab._time_resolvent_cpp(alpha, beta, x, p, None, args.iters)

    print(f"resolvent {args.pattern} B={args.B} H={args.H} T={args.T} D={args.D} W={W}, "
          f"{args.threads} threads, {args.rounds} rounds x {args.iters} calls, median per call")
    for label, ctx in [("autograd", torch.enable_grad), ("no_grad", torch.no_grad)]:
        with ctx():
            python_loop(), cpp_loop()  # warm-up (pattern index, allocator)
            py, cpp = [], []
            for _ in range(args.rounds):
                py.append(python_loop())
                cpp.append(cpp_loop())
        mp, mc = statistics.median(py), statistics.median(cpp)
        print(f"  {label:9s} python {mp * 1e3:8.3f} ms   c++ {mc * 1e3:8.3f} ms   overhead {100 * (mp / mc - 1):+6.2f} %"
              f"   (per-round overhead min {100 * min(a / b - 1 for a, b in zip(py, cpp)):+.2f} %,"
              f" max {100 * max(a / b - 1 for a, b in zip(py, cpp)):+.2f} %)")


if __name__ == "__main__":
    main()
