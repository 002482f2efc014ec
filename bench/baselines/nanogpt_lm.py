#!/usr/bin/python3
"""The training step of `mixlab train --task lm --mixer attention` written the nanoGPT way in plain
PyTorch (issue 38 item 2): the peer that mixlab's whole training step is measured against.

    /usr/bin/python3 bench/baselines/nanogpt_lm.py [--threads N] [--steps 40] [--warmup-steps 10]
        [--data bytes|random] [--mixlab build/mixlab --takes 3] [--mixlab-variant row_groups=1]

What it is: exactly the model mixlab's trainer builds at its defaults (src/model/model.cpp,
src/attention/attention.cpp, src/train/trainer.cpp): byte tokens (V 256), d 64, 2 layers, 4 heads,
T 128, batch 16; no positional embedding (RoPE on q and k inside attention, pairs (d, d + D/2));
pre-LayerNorm blocks (LayerNorm with bias, eps 1e-5), attention projections without bias, GELU
(exact) MLP of width 4 d with biases, a final LayerNorm and the head tied to the embedding; no
dropout. Attention is nanoGPT's manual form: q kᵀ / √D, a T × T causal mask, softmax, @ v.
Training: cross-entropy (mean), AdamW (betas 0.9 / 0.98, eps 1e-8, weight decay 0.1 on the
tensors of dim >= 2, none on the others), clip_grad_norm_ to 1.0, linear warmup (30 steps) then
cosine decay of lr 3e-3 (mixlab's config_lr_at), zero_grad(set_to_none=True). It prints the
parameter count (115968, as `mixlab train` prints for this model) and refuses to time another.

What it is not: a copy of mixlab's initialisation of the attention weights (LibTorch's default
there, nanoGPT's N(0, 0.02) here; timing does not depend on it) or of its data split: --data
bytes (default) draws random windows from the Brown corpus files concatenated (data/brown, raw
bytes), not mixlab's 80/10/10 document split; --data random draws uniform bytes. Timing does
not depend on which.

With --mixlab, each take runs this loop and then `mixlab train --task lm` with the same settings
(as a child process, --threads N), and prints both rates, their ratio and the load average
(uptime) before each: interleaved takes, so a load from elsewhere hits both alike.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# mixlab's TrainConfig defaults for task lm with bytes, and the batch.
VOCAB, D_MODEL, LAYERS, HEADS, MLP_RATIO, T, BATCH = 256, 64, 2, 4, 4, 128, 16
LR, WARMUP, BETAS, EPS, WEIGHT_DECAY, GRAD_CLIP = 3e-3, 30, (0.9, 0.98), 1e-8, 0.1, 1.0
MIXLAB_PARAMETERS = 115968  # DecoderModel::parameter_count() of this config (printed by `mixlab train`)


class Rope(nn.Module):
    """Rotary embedding as mixlab's rope_apply: channel pairs (d, d + D/2) of position t rotated by
    t · 10000^(-2d/D); the tables computed once (mixlab caches them too)."""

    def __init__(self, D, T_max, base=10000.0):
        super().__init__()
        inv = torch.tensor([base ** (-d * 2.0 / D) for d in range(D // 2)], dtype=torch.float64)
        angle = torch.arange(T_max, dtype=torch.float64).unsqueeze(1) * inv
        self.register_buffer("cos", angle.cos().float(), persistent=False)
        self.register_buffer("sin", angle.sin().float(), persistent=False)

    def forward(self, x):  # (B,H,T,D)
        T_, half = x.size(2), x.size(3) // 2
        cos, sin = self.cos[:T_], self.sin[:T_]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, C, H, T_max):
        super().__init__()
        self.n_head = H
        self.c_attn = nn.Linear(C, 3 * C, bias=False)
        self.c_proj = nn.Linear(C, C, bias=False)
        self.rope = Rope(C // H, T_max)
        self.register_buffer("bias", torch.tril(torch.ones(T_max, T_max)).view(1, 1, T_max, T_max), persistent=False)

    def forward(self, x):
        B, T_, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T_, self.n_head, C // self.n_head).transpose(1, 2)  # (B,H,T,D)
        q = q.view(B, T_, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T_, self.n_head, C // self.n_head).transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T_, :T_] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B,H,T,D)
        y = y.transpose(1, 2).contiguous().view(B, T_, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C, r):
        super().__init__()
        self.c_fc = nn.Linear(C, r * C)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(r * C, C)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, C, H, r, T_max):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, H, T_max)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = MLP(C, r)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, V=VOCAB, C=D_MODEL, L=LAYERS, H=HEADS, r=MLP_RATIO, T_max=T):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.h = nn.ModuleList([Block(C, H, r, T_max) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * L))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def lr_at(step, steps):
    """mixlab's config_lr_at, schedule cosine."""
    if WARMUP > 0 and step < WARMUP:
        return LR * (step + 1) / WARMUP
    span = max(1, steps - WARMUP)
    progress = min(1.0, (step - WARMUP) / span)
    return LR * 0.5 * (1.0 + math.cos(math.pi * progress))


def stream(kind):
    if kind == "random":
        return None
    folder = os.path.join(ROOT, "data", "brown")
    names = sorted(n for n in os.listdir(folder) if len(n) == 4 and n[0] == "c")
    data = b"".join(open(os.path.join(folder, n), "rb").read() for n in names)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int64)


def batch(data, gen):
    if data is None:
        x = torch.randint(0, VOCAB, (BATCH, T + 1), generator=gen)
        return x[:, :-1].contiguous(), x[:, 1:].contiguous()
    ix = torch.randint(0, len(data) - T - 1, (BATCH,), generator=gen)
    x = torch.stack([data[i:i + T] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + 1 + T] for i in ix.tolist()])
    return x, y


def train_rate(threads, steps, warmup_steps, data_kind, quiet=False):
    """tokens/s of `steps` training steps after `warmup_steps` untimed ones."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT()
    n_params = sum(p.numel() for p in model.parameters())  # the tied head counted once
    if not quiet:
        print(f"nanoGPT-style model: {n_params} parameters (mixlab: {MIXLAB_PARAMETERS})")
    if n_params != MIXLAB_PARAMETERS:
        raise SystemExit(f"nanogpt_lm.py: the model has {n_params} parameters, expected mixlab's {MIXLAB_PARAMETERS}")
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS)
    data = stream(data_kind)
    gen = torch.Generator().manual_seed(1)
    total = warmup_steps + steps
    model.train()
    t0 = None
    for step in range(total):
        if step == warmup_steps:
            t0 = time.perf_counter()
        lr = lr_at(step, total)
        for g in optimizer.param_groups:
            g["lr"] = lr
        x, y = batch(data, gen)
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        if step % 10 == 0 or step == total - 1:
            last = loss.item()  # nanoGPT reads the loss at its log interval only
    seconds = time.perf_counter() - t0
    return steps * BATCH * T / seconds, last


def mixlab_rate(binary, threads, steps, warmup_steps, settings=()):
    """tokens/s of `mixlab train --task lm` at the same settings (plus `settings`, config
    KEY=VALUE strings): the windows after the first `warmup_steps` steps (log_every =
    warmup_steps), from its metrics file."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [binary, "train", "--task", "lm", "--mixer", "attention", "--threads", str(threads),
               "--steps", str(warmup_steps + steps), "--out", out,
               "--set", f"batch={BATCH}", "--set", f"length={T}", "--set", f"d_model={D_MODEL}",
               "--set", f"layers={LAYERS}", "--set", f"heads={HEADS}", "--set", f"log_every={warmup_steps}",
               "--set", "eval_tokens=512"]
        for kv in settings:
            cmd += ["--set", kv]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        lines = [json.loads(s) for s in open(os.path.join(out, "metrics.jsonl"))]
    windows = [j for j in lines if "tokens_per_s" in j and j["step"] > warmup_steps]
    # Every window after the first has warmup_steps steps: the mean rate is tokens over seconds.
    return len(windows) * warmup_steps * BATCH * T / sum(warmup_steps * BATCH * T / j["tokens_per_s"] for j in windows)


def load():
    return open("/proc/loadavg").read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--steps", type=int, default=40, help="timed steps (after --warmup-steps)")
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--data", choices=["bytes", "random"], default="bytes")
    ap.add_argument("--mixlab", default=None, help="the mixlab binary: time `mixlab train --task lm` beside it")
    ap.add_argument("--takes", type=int, default=1, help="interleaved takes per thread count")
    ap.add_argument("--mixlab-variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                    help="also time mixlab with these config keys in every take (repeatable), "
                         "e.g. row_groups=1 for the step without row groups")
    args = ap.parse_args()
    print(f"B {BATCH}, T {T}, d {D_MODEL}, {LAYERS} layers, {HEADS} heads, V {VOCAB}, data {args.data}, "
          f"torch {torch.__version__}")
    for threads in args.threads:
        rates, ours = [], []
        variants = {v: [] for v in args.mixlab_variant}
        for take in range(args.takes):
            la = load()
            rate, loss = train_rate(threads, args.steps, args.warmup_steps, args.data, quiet=take > 0 or threads != args.threads[0])
            rates.append(rate)
            line = f"threads {threads} take {take + 1}: nanoGPT-style {rate:,.0f} tok/s (loss {loss:.3f}, load {la})"
            if args.mixlab:
                la2 = load()
                m = mixlab_rate(args.mixlab, threads, args.steps, args.warmup_steps)
                ours.append(m)
                line += f"; mixlab {m:,.0f} tok/s (load {la2}); ratio {m / rate:.2f}x"
                for v in args.mixlab_variant:
                    mv = mixlab_rate(args.mixlab, threads, args.steps, args.warmup_steps, v.split(","))
                    variants[v].append(mv)
                    line += f"; mixlab [{v}] {mv:,.0f} tok/s, ratio {mv / rate:.2f}x"
            print(line, flush=True)
        summary = f"threads {threads}: nanoGPT-style median {statistics.median(rates):,.0f} tok/s"
        if ours:
            summary += (f", mixlab median {statistics.median(ours):,.0f} tok/s, "
                        f"ratio of medians {statistics.median(ours) / statistics.median(rates):.2f}x")
        for v, rs in variants.items():
            if rs:
                summary += (f"; mixlab [{v}] median {statistics.median(rs):,.0f} tok/s, "
                            f"ratio {statistics.median(rs) / statistics.median(rates):.2f}x")
        print(summary, flush=True)


if __name__ == "__main__":
    sys.exit(main())
