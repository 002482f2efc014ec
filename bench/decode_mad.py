"""Decode latency at MAD's model (2 layers, d_model 128, 16 heads, vocab 32), B 1.

    /usr/bin/python3 bench/decode_mad.py [MODULE_DIR [SPECS [REPS]]]
    # defaults: build/python, brl,brl:hist=32,local:8, 40

For each mixer spec: 64 tokens stepped from a fresh state, the best of REPS runs, in µs per
token (1 thread, no autograd). Run it with two module directories in turn to compare builds.
"""
import sys
import time

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "build/python")
import torch  # noqa: E402
import mixlab  # noqa: E402

torch.set_num_threads(1)
specs = sys.argv[2] if len(sys.argv) > 2 else "brl,brl:hist=32,local:8"
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 40
for spec in specs.split(","):
    m = mixlab.Model({"task": "induction", "d_model": 128, "heads": 16, "layers": 2, "mixer": spec, "vocab": 32})
    m.eval()
    toks = torch.randint(4, 32, (1, 64), generator=torch.Generator().manual_seed(0))
    best = float("inf")
    with torch.no_grad():
        for _ in range(reps):
            s = m.init_state(1)
            t0 = time.perf_counter()
            for t in range(64):
                m.step(s, toks[:, t])
            best = min(best, (time.perf_counter() - t0) / 64)
    print(f"{spec} {best * 1e6:.1f} us/token, state {s.bytes} bytes")
