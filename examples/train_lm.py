#!/usr/bin/python3
"""Train a small byte-level language model on the Brown corpus with a mixlab token mixer.

Plain PyTorch: an nn.Module decoder whose token-mixing layers are mixlab.mixer(...) modules,
torch.optim.AdamW, cross-entropy on the next byte. Everything else (embedding, LayerNorm, MLP,
training loop) is ordinary torch code: mixlab layers drop into a PyTorch model like nn layers.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_lm.py --mixer resolvent:pow2+cache --steps 300
    PYTHONPATH=build/python /usr/bin/python3 examples/train_lm.py --mixer "ssm*3|attention" --layers 4  # hybrid
    PYTHONPATH=build/python /usr/bin/python3 examples/train_lm.py --backbone mixlab --save runs/py/checkpoint.pt
    build/mixlab generate --checkpoint runs/py/checkpoint.pt --prompt "The jury said"

--backbone mixlab trains mixlab's own decoder (mixlab.Model: the model of `mixlab train`) instead
of the torch one below, with the same loop; --save then writes a mixlab checkpoint that
`mixlab eval`, `mixlab generate` and `mixlab train --init-from` read.

Data: data/brown (scripts/setup.sh fetches it) or the five-document sample in data/sample,
normalised like mixlab's C++ loader (include/mixlab/data/corpus.h): tags dropped, words joined by
single spaces, bytes as tokens (vocabulary 256); every 10th document (sorted by name, 0-based
index % 10 == 0) is held out for validation. Prints the loss and bits per byte, and a sample
decoded token by token through the mixers' step() (their decode state, no recomputation).
"""
import argparse
import math
import os
import re
import time

import torch

import mixlab

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_corpus(folder):
    """(train bytes, validation bytes) of the Brown documents c[a-r][0-9][0-9] in `folder`."""
    names = sorted(n for n in os.listdir(folder) if re.fullmatch(r"c[a-r][0-9][0-9]", n))
    if len(names) < 2:
        raise SystemExit(f"train_lm: no Brown documents (c[a-r]NN) in {folder}")
    train, valid = [], []
    for i, name in enumerate(names):
        with open(os.path.join(folder, name), "rb") as f:
            words = [tok[: tok.rfind(b"/")] if b"/" in tok else tok for tok in f.read().split()]
        text = b" ".join(w for w in words if w)
        (valid if i % 10 == 0 else train).append(text)
    return torch.tensor(list(b" ".join(train)), dtype=torch.long), torch.tensor(list(b" ".join(valid)),
                                                                                 dtype=torch.long)


class Block(torch.nn.Module):
    def __init__(self, spec, d, heads, max_len):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(d)
        self.mix = mixlab.mixer(spec, d, heads, max_len)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, h):
        h = h + self.mix(self.norm1(h))
        return h + self.mlp(self.norm2(h))

    def step(self, state, h_t):
        h_t = h_t + self.mix.step(state, self.norm1(h_t))
        return h_t + self.mlp(self.norm2(h_t))


class ByteLM(torch.nn.Module):
    def __init__(self, spec, d=64, heads=4, layers=2, max_len=256):
        super().__init__()
        self.emb = torch.nn.Embedding(256, d)
        # One spec for every block, or one per block (a hybrid stack, "ssm*3|attention"), as in mixlab's C++ model.
        specs = mixlab.mixer_layer_specs(spec, layers)
        self.blocks = torch.nn.ModuleList(Block(s, d, heads, max_len) for s in specs)
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, 256)

    def forward(self, tokens):  # (B,T) -> logits (B,T,256)
        h = self.emb(tokens)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))

    @torch.no_grad()
    def generate(self, prompt, n):
        """Greedy bytes after `prompt` (1-D tokens), decoded one token at a time with step()."""
        states = [b.mix.init_state(1) for b in self.blocks]
        out, logits = list(prompt.tolist()), None
        for t in range(len(prompt) + n - 1):
            h = self.emb(torch.tensor([out[t]]))
            for block, state in zip(self.blocks, states):
                h = block.step(state, h)
            if t >= len(prompt) - 1:
                logits = self.head(self.norm(h))
                out.append(int(logits.argmax(-1)))
        return bytes(out)


def batch(data, B, T, gen):
    starts = torch.randint(0, len(data) - T - 1, (B,), generator=gen)
    x = torch.stack([data[s:s + T + 1] for s in starts.tolist()])
    return x[:, :-1], x[:, 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mixer", default="resolvent:pow2+cache", help="mixlab mixer spec (mixlab.mixer_families())")
    ap.add_argument("--data", default="", help="Brown folder (default data/brown, else data/sample)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--T", type=int, default=128, help="training context length")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=60, help="bytes to generate at the end (0: none)")
    ap.add_argument("--backbone", choices=["torch", "mixlab"], default="torch",
                    help="torch: the nn.Module decoder of this file; mixlab: mixlab.Model (the CLI's decoder)")
    ap.add_argument("--save", default="", help="write a mixlab checkpoint here at the end (--backbone mixlab)")
    args = ap.parse_args()

    folder = args.data or next(
        (f for f in (os.path.join(ROOT, "data", "brown"), os.path.join(ROOT, "data", "sample"))
         if os.path.isdir(f) and any(re.fullmatch(r"c[a-r][0-9][0-9]", n) for n in os.listdir(f))), "")
    if not folder:
        raise SystemExit("train_lm: neither data/brown nor data/sample holds Brown documents (--data)")
    train, valid = load_corpus(folder)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    max_len = max(args.T, args.sample + 16)
    if args.save and args.backbone != "mixlab":
        raise SystemExit("train_lm: --save writes a mixlab checkpoint: use it with --backbone mixlab")
    if args.backbone == "mixlab":
        model = mixlab.Model({"task": "lm", "tokenizer": "bytes", "mixer": args.mixer, "d_model": args.d_model,
                              "heads": args.heads, "layers": args.layers, "length": args.T, "max_len": max_len,
                              "steps": args.steps, "batch": args.batch, "lr": args.lr, "seed": args.seed})
    else:
        model = ByteLM(args.mixer, args.d_model, args.heads, args.layers, max_len=max_len)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"train_lm: {folder}: {len(train)} train / {len(valid)} validation bytes; mixer {args.mixer}, "
          f"{n_params} parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    def evaluate():
        model.eval()
        with torch.no_grad():
            vgen = torch.Generator().manual_seed(1234)
            losses = [torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                      for x, y in (batch(valid, args.batch, args.T, vgen) for _ in range(4))]
        model.train()
        return sum(losses) / len(losses)

    start = time.time()
    for step in range(1, args.steps + 1):
        x, y = batch(train, args.batch, args.T, gen)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step == 1 or step % args.eval_every == 0 or step == args.steps:
            v = evaluate()
            print(f"step {step:5d}  train loss {loss.item():.4f}  validation loss {v:.4f} "
                  f"({v / math.log(2):.3f} bits/byte)  {time.time() - start:.1f} s", flush=True)
    if args.sample > 0:
        model.eval()
        if args.backbone == "mixlab":  # greedy, through the model's decode state
            print("sample:", "The jury said" + model.generate("The jury said", max_tokens=args.sample, temperature=0))
        else:
            text = model.generate(torch.tensor(list(b"The jury said")), args.sample)
            print("sample:", text.decode("utf-8", errors="replace"))
    if args.save:
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        model.save(args.save)
        print(f"saved {args.save} (mixlab eval / generate / train --init-from read it)")


if __name__ == "__main__":
    main()
