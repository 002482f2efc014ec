"""Gloo on this machine: its ring all-reduce against a point-to-point exchange of the same buffer.

Why mixlab's data-parallel trainer exchanges whole gradient buffers point to point (up to 4 ranks,
DataParallel::kExchangeMaxRanks) instead of calling Gloo's all-reduce: on two local processes the
ring's segments and worker-thread hand-offs cost more than the bytes. Same LibTorch (Debian's
python3-torch 1.13.1) and Gloo as mixlab links.

    /usr/bin/python3 bench/allreduce_latency.py [--rounds 200]
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, rounds, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    peer = 1 - rank

    def timed(fn):
        for _ in range(5):
            fn()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(rounds):
            fn()
        return (time.perf_counter() - t0) / rounds * 1e3

    for numel in (4, 25_000, 100_000, 400_000, 1_500_000):
        buf = torch.randn(numel)
        other = torch.empty_like(buf)

        def exchange():
            # Both messages in flight at once, then the rank-order sum (what mixlab does).
            reqs = [dist.isend(buf, peer), dist.irecv(other, peer)]
            for r in reqs:
                r.wait()
            return (buf + other) if rank == 0 else (other + buf)

        ring = timed(lambda: dist.all_reduce(buf.clone()))
        ex = timed(exchange)
        if rank == 0:
            print(f"| {numel:>9,} | {numel * 4 / 1024:>8.0f} | {ring:7.3f} | {ex:7.3f} | {ring / ex:5.1f}x |")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--port", type=int, default=0, help="rendezvous port (default: a free one)")
    a = ap.parse_args()
    if a.port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            a.port = s.getsockname()[1]
    print("| floats | KiB | Gloo all-reduce ms | exchange + sum ms | ratio |")
    print("|---:|---:|---:|---:|---:|")
    mp.spawn(worker, args=(a.rounds, a.port), nprocs=2)


if __name__ == "__main__":
    main()
