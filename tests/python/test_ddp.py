"""mixlab mixers under torch.nn.parallel.DistributedDataParallel (gloo, 2 local processes): a
2-process run on halves of a batch reaches the same parameters as one process on the whole batch,
and both ranks hold equal parameters after every step.
"""
import os
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import mixlab

C, H, T, B, STEPS, SPEC = 16, 2, 12, 4, 3, "resolvent:pow2"


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(C, C), mixlab.mixer(SPEC, C, H, max_len=T), torch.nn.Linear(C, 1))


def data(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(B, T, C, generator=g), torch.randn(B, T, 1, generator=g)


def train(model, rank=0, world=1):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(STEPS):
        x, y = data(step)
        x, y = x.chunk(world)[rank], y.chunk(world)[rank]  # equal shards: DDP's mean = full-batch mean
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def worker(rank, world, store_path, out_dir):
    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # local ranks; no need for a resolvable hostname
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(make_model())
        params = train(ddp, rank, world)
        torch.save(params, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


class DdpTest(unittest.TestCase):
    def test_two_processes_equal_one(self):
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(worker, args=(2, os.path.join(d, "store"), d), nprocs=2, join=True)
            rank0, rank1 = (torch.load(os.path.join(d, f"rank{r}.pt")) for r in (0, 1))
        torch.set_num_threads(1)
        single = train(make_model())
        self.assertEqual(len(rank0), len(single))
        before = [p.detach() for p in make_model().parameters()]
        for p0, p1, p, b in zip(rank0, rank1, single, before):
            self.assertTrue(torch.equal(p0, p1))  # DDP keeps the replicas identical
            # Float32 all-reduce of half-batch gradients vs one full-batch gradient: rounding only.
            torch.testing.assert_close(p0, p, rtol=1e-5, atol=1e-5)
        self.assertTrue(any(not torch.equal(p, b) for p, b in zip(single, before)))


if __name__ == "__main__":
    unittest.main()
