"""A hostile Python API (issue 37 item 3): every public callable of `mixlab`, called with wrong
dtypes, ranks, sizes, devices, non-contiguous, zero-size and huge tensors, NaN/inf contents,
out-of-range and wrongly typed ints, floats and strings, raises ValueError, TypeError or
RuntimeError naming the argument, and never crashes the interpreter or returns a result for an
input it should refuse.

How it works:
- INVENTORY: every public name of `mixlab` (and every name of the compiled `mixlab._mixlab`), and
  every public method of its classes, must have an entry in TARGETS or be listed in EXEMPT with the
  reason. A function added without hostile cases fails `test_every_public_callable_is_covered`.
  Every registered mixer family must be in MIXER_SPECS.
- GENERATOR: each target lists its parameters with their kind (Tensor, Int, Float, Str, Path,
  State, Bool) and a valid value. A case changes ONE argument of a valid call to a hostile value
  drawn (seeded, random.Random(SEED)) from that kind's mutations; each mutation says what must
  happen:
    raise    an exception of type ValueError/TypeError/RuntimeError whose message names the
             argument (its parameter name or role); returning anything is a failure;
    raise*   the same, any message (an allocation the size makes impossible: torch's allocator
             speaks, not mixlab);
    same     the call succeeds and equals the call with the same values as a plain contiguous
             tensor without grad (non-contiguous, stride-0 expanded and requires_grad inputs
             are valid tensors: a kernel reading raw memory would give another result);
    either   success or a named exception (a value inside the documented range, a free dim that
             the function may legitimately take, NaN/inf contents).
  NaN/inf contents, decided per function: resolvent (but its gate), toeplitz, causal_attention,
  selective_scan, the affine kernels' q, k, v and initial_state, and the mixers propagate them into
  the result without a check (a pass over every input would cost what the op costs at small D).
  The affine kernels check their decay and strength inputs (g, beta, log_alpha) for finite values
  in range ("g (log decay ...) must be finite", "must lie in [-1e+30, 0]": the values:outside
  cases), and resolvent its gate, a probability ("gate must hold values in [0, 1]"), so
  the deltanet and gated_deltanet mixers refuse an x whose NaN reaches their beta, naming beta:
  for NaN/inf either outcome is accepted; a named refusal must say "finite" or name the argument.
- ISOLATION: the cases run in child interpreters, up to 1000 each; a child that dies (segfault,
  abort) or hangs (BATCH_TIMEOUT_S) is reported with the case it was running, then the rest of
  its cases run in a new child. A case that takes more than CASE_LIMIT_S fails too (a hostile
  size must be refused before the work, not after hours of it).

CTest (python.hostile) runs every (target, parameter, mutation) combination once (3682 cases,
21 s measured on the 2-core machine under load), seed 37 drawing the tensors' values. MIXLAB_HOSTILE_CASES=N runs N of them
instead (each (target, parameter) at least twice), MIXLAB_HOSTILE_SEED=S another seed,
MIXLAB_HOSTILE_ROUNDS=R the seeds S..S+R-1 one after the other (a longer run).
"""
import json
import math
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import unittest

import torch

import mixlab

SEED = int(os.environ.get("MIXLAB_HOSTILE_SEED", "37"))
CASES = int(os.environ.get("MIXLAB_HOSTILE_CASES", "0"))
ROUNDS = int(os.environ.get("MIXLAB_HOSTILE_ROUNDS", "1"))
BATCH_TIMEOUT_S = 120
CASE_LIMIT_S = 5  # one case's budget: hostile input is refused before the work, valid input is tiny
OK_ERRORS = (ValueError, TypeError, RuntimeError)
HUGE = 1 << 40  # a size that fits int64 but no machine's memory
C, H, L = 16, 2, 32  # mixer width, heads, max_len

# One valid spec per registered family (test_every_mixer_family_has_a_spec checks the list).
MIXER_SPECS = ["attention", "local:4", "ssm", "resolvent:pow2", "linear_attn", "retnet", "gla", "mamba", "mlstm",
               "gated_rfa", "deltanet", "gated_deltanet", "toeplitz", "tpsm", "brl"]
PATTERN_SPECS = ["pow2", "linear", "band:4", "pow2+cache", "fib"]
MODEL_CONFIG = {"task": "lm", "mixer": "gla", "length": 16, "d_model": 16, "heads": 2, "layers": 1, "mlp_ratio": 2}


# ---- parameter kinds -------------------------------------------------------------------------

class Tensor:
    """A tensor argument: `make(gen)` builds the valid one; dims in `free` may take other sizes
    (the call may then succeed); `optional` accepts None."""

    def __init__(self, name, shape, make=None, free=(), optional=False, dtype=torch.float32, roles=(), constant=False,
                 outside=None):
        self.name, self.shape, self.free, self.optional, self.dtype = name, tuple(shape), set(free), optional, dtype
        self.constant = constant  # documented to refuse requires_grad (no gradient flows to it)
        self.outside = outside  # a value outside the documented (and checked) range, e.g. g > 0
        self.make = make or (lambda g, shape: torch.randn(*shape, generator=g, dtype=dtype))
        self.roles = (name,) + tuple(roles)

    def mutations(self):
        out = ["dtype:int64", "dtype:float16", "dtype:bool", "dtype:complex64", "rank:+1", "noncontig:transpose",
               "noncontig:strided", "requires_grad", "meta", "py:list", "py:str", "py:None", "py:int"]
        if self.dtype == torch.int64:
            out = [m for m in out if m not in ("dtype:int64", "requires_grad")]
            out += ["dtype:float32", "ids:-1", "ids:vocab", "ids:huge"]
        else:
            out += ["dtype:other_float", "values:nan", "values:inf"]
        if self.outside is not None:
            out.append("values:outside")
        if len(self.shape) > 1:
            out.append("rank:-1")
        for d in range(len(self.shape)):
            out += [f"size:{d}", f"zero:{d}", f"huge:{d}"]
            if self.shape[d] > 1:
                out.append(f"expand:{d}")
        return out

    def expect(self, mutation):
        kind, _, arg = mutation.partition(":")
        if kind == "requires_grad" and self.constant or mutation == "values:outside":
            return "raise"
        if kind in ("noncontig", "requires_grad", "expand"):
            return "same"
        if kind == "values" or (mutation == "py:None" and self.optional):
            return "either"
        if kind in ("size", "zero"):
            return "either" if int(arg) in self.free else "raise"
        if kind == "huge":
            return "raise*" if int(arg) in self.free else "raise"
        return "raise"

    def hostile(self, mutation, g):
        kind, _, arg = mutation.partition(":")
        t = self.make(g, self.shape)
        if kind == "dtype":
            dtype = {"int64": torch.int64, "float16": torch.float16, "bool": torch.bool, "complex64": torch.complex64,
                     "float32": torch.float32,
                     "other_float": torch.float64 if self.dtype == torch.float32 else torch.float32}[arg]
            return t.to(dtype)
        if kind == "rank":
            return t.unsqueeze(0) if arg == "+1" else t[0]
        if kind in ("size", "zero"):
            shape = list(self.shape)
            shape[int(arg)] = 0 if kind == "zero" else shape[int(arg)] + 1
            return self.make(g, shape)
        if kind == "huge":
            shape = list(self.shape)
            one = [1] * len(shape)
            shape[int(arg)] = HUGE
            return self.make(g, one).expand(*shape)
        if kind == "expand":  # stride 0 along a dim of size > 1 (values repeated, no copy)
            return t.narrow(int(arg), 0, 1).expand(*self.shape)
        if mutation == "noncontig:transpose":
            if t.dim() < 2:
                return torch.stack([t, t], dim=-1)[..., 0]
            return t.transpose(-1, -2).contiguous().transpose(-1, -2)
        if mutation == "noncontig:strided":
            return torch.stack([t, torch.full_like(t, 7)], dim=-1)[..., 0]
        if mutation == "requires_grad":
            return t.detach().clone().requires_grad_(True)
        if mutation == "meta":
            return t.to("meta")
        if mutation == "values:nan":
            t = t.clone()
            t.view(-1)[0] = float("nan")
            return t
        if mutation == "values:outside":
            t = t.clone()
            t.view(-1)[0] = self.outside
            return t
        if mutation == "values:inf":
            t = t.clone()
            t.view(-1)[-1] = float("inf")
            return t
        if kind == "ids":
            t = t.clone()
            t.view(-1)[0] = {"-1": -1, "vocab": 1 << 20, "huge": HUGE}[arg]
            return t
        return {"py:list": t.tolist(), "py:str": "tensor", "py:None": None, "py:int": 3}[mutation]

    def valid(self, g):
        return self.make(g, self.shape)


class Int:
    """An int argument, valid in [lo, hi] (hi None: no upper bound is documented, a huge value may
    be taken; it must still answer within the batch timeout)."""

    def __init__(self, name, value, lo, hi=None, optional=False, roles=()):
        self.name, self.value, self.lo, self.hi, self.optional = name, value, lo, hi, optional
        self.roles = (name,) + tuple(roles)

    def mutations(self):
        return ["int:-1", "int:0", "int:huge", "int:2**63", "int:-2**63-1", "py:float", "py:bool", "py:None", "py:str"]

    def _inside(self, v):
        return v >= self.lo and (self.hi is None or v <= self.hi)

    def expect(self, mutation):
        v = {"int:-1": -1, "int:0": 0, "int:huge": 1 << 62}.get(mutation)
        if v is not None:
            return "either" if self._inside(v) else "raise"
        if mutation == "py:bool" or (mutation == "py:None" and self.optional):
            return "either"
        if mutation == "int:2**63" and self.hi is not None and self.hi >= 1 << 63:  # a uint64 (seed)
            return "either"
        return "raise"

    def hostile(self, mutation, g):
        return {"int:-1": -1, "int:0": 0, "int:huge": 1 << 62, "int:2**63": 1 << 63, "int:-2**63-1": -(1 << 63) - 1,
                "py:float": 1.5, "py:bool": True, "py:None": None, "py:str": "3"}[mutation]

    def valid(self, g):
        return self.value


class Float:
    def __init__(self, name, value, lo, hi, roles=()):
        self.name, self.value, self.lo, self.hi = name, value, lo, hi
        self.roles = (name,) + tuple(roles)

    def mutations(self):
        return ["float:nan", "float:inf", "float:-inf", "float:-1", "float:1e308", "py:None", "py:str"]

    def expect(self, mutation):
        if mutation.startswith("py:"):
            return "raise"
        v = self.hostile(mutation, None)
        return "either" if self.lo <= v <= self.hi else "raise"

    def hostile(self, mutation, g):
        return {"float:nan": math.nan, "float:inf": math.inf, "float:-inf": -math.inf, "float:-1": -1.0,
                "float:1e308": 1e308, "py:None": None, "py:str": "0.5"}[mutation]

    def valid(self, g):
        return self.value


class Str:
    """A spec-like string argument: anything but a valid spec is refused, naming it."""

    def __init__(self, name, value, roles=(), bad=("", "pwo2", "π∞", "x" * 100000, "x\0y"),
                 wrong_types=("py:int", "py:None", "py:list")):
        self.name, self.value, self.bad, self.wrong_types = name, value, list(bad), list(wrong_types)
        self.roles = (name,) + tuple(roles)

    def mutations(self):
        return [f"str:{i}" for i in range(len(self.bad))] + self.wrong_types

    def expect(self, mutation):
        return "raise"

    def hostile(self, mutation, g):
        kind, _, arg = mutation.partition(":")
        if kind == "str":
            return self.bad[int(arg)]
        return {"py:int": 3, "py:None": None, "py:list": [self.value]}[mutation]

    def valid(self, g):
        return self.value


class Path(Str):
    """A file path: empty, missing folder, too long, a folder, a device; a non-str."""

    def __init__(self, name, value, must_exist, extra_bad=(), roles=()):
        bad = ["", "/nonexistent-dir/x", "x" * 5000, "/"]
        if must_exist:
            bad += ["/dev/zero", "/etc/hostname"]
        super().__init__(name, value, roles=("path", "file", "folder", "director") + tuple(roles),
                         bad=bad + list(extra_bad),
                         wrong_types=("py:int", "py:list"))


class State:
    """A decode state: None, the wrong class, another mixer's state, another batch's state."""

    def __init__(self, name, make):
        self.name, self.make = name, make
        self.roles = (name, "State", "batch")

    def mutations(self):
        return ["py:None", "py:int", "state:foreign", "state:batch"]

    def expect(self, mutation):
        return "raise"

    def hostile(self, mutation, g):
        if mutation == "py:None":
            return None
        if mutation == "py:int":
            return 3
        return self.make(mutation)

    def valid(self, g):
        return self.make("valid")


class Bool:
    def __init__(self, name, value):
        self.name, self.value = name, value
        self.roles = (name,)

    def mutations(self):
        return ["py:str", "py:list"]

    def expect(self, mutation):
        return "raise"

    def hostile(self, mutation, g):
        return {"py:str": "yes", "py:list": [True]}[mutation]

    def valid(self, g):
        return self.value


# ---- the targets: each public callable, how to reach it, its parameters ----------------------

def rand_neg(g, shape, dtype=torch.float32):
    return -torch.rand(*shape, generator=g, dtype=dtype)


def rand_unit(g, shape, scale=1.0):
    return scale * torch.rand(*shape, generator=g)


W_POW2 = 3  # Pattern("pow2").max_width(8)


def affine_params(delta):
    common = [Tensor("q", (1, 2, 8, 4)),
              Tensor("k", (1, 2, 8, 4), make=lambda g, s: 0.5 * torch.randn(*s, generator=g)),
              Tensor("v", (1, 2, 8, 3), free=(3,))]
    if delta:
        return common + [Tensor("beta", (1, 2, 8), make=lambda g, s: rand_unit(g, s), outside=2.5),
                         Tensor("log_alpha", (1, 2, 8), make=lambda g, s: rand_neg(g, s), optional=True, outside=1.0),
                         Tensor("initial_state", (1, 2, 4, 3), optional=True)]
    return common + [Tensor("g", (1, 2, 8, 4), make=lambda g, s: rand_neg(g, s), outside=0.5),
                     Tensor("initial_state", (1, 2, 4, 3), optional=True)]


# A target: (how to call it, its parameters). `call(ctx, *args)` gets a context with the object.
TARGETS = {
    "resolvent": ("fn", [Tensor("alpha", (1, 2, 8, W_POW2 + 1)), Tensor("beta", (1, 2, 8, W_POW2),
                                                                        make=lambda g, s: 0.3 * rand_unit(g, s)),
                         Tensor("x", (1, 2, 8, 3)), Str("pattern", "pow2", roles=("Pattern", "spec")),
                         Tensor("gate", (1, 2, 8, 3), make=lambda g, s: rand_unit(g, s), optional=True,
                                outside=1.5)]),
    "diag_decay_chunked": ("fn", affine_params(False) + [Int("chunk", 4, 1)]),
    "diag_decay_recurrent": ("fn", affine_params(False)),
    "delta_rule_chunked": ("fn", affine_params(True) + [Int("chunk", 4, 1)]),
    "delta_rule_recurrent": ("fn", affine_params(True)),
    "toeplitz": ("fn", [Tensor("t", (2, 8), free=(1,), roles=("Tmax",)), Tensor("x", (1, 2, 8, 3), free=(0, 3)),
                        Tensor("bias", (2, 8), optional=True),
                        Str("path", "auto", bad=("", "dft", "π∞", "x" * 100000, "fft\0"))]),
    "causal_attention": ("fn", [Tensor("q", (1, 2, 4, 16), free=(2,)), Tensor("k", (1, 2, 6, 16)),
                                Tensor("v", (1, 2, 6, 16)), Int("window", 0, 0)]),
    "selective_scan": ("fn", [Tensor("u", (1, 8, 4)), Tensor("delta", (1, 8, 4), make=lambda g, s: rand_unit(g, s)),
                              Tensor("a", (4, 2), make=lambda g, s: rand_neg(g, s)), Tensor("b", (1, 8, 2)),
                              Tensor("c", (1, 8, 2)), Tensor("d", (4,)),
                              Tensor("h0", (1, 4, 2), optional=True, constant=True)]),
    "analyze": ("fn", [Str("spec", "pow2", roles=("pattern",)), Int("T", 16, 1, 1 << 20),
                       Bool("exact_congestion", False)]),
    "design": ("fn", [Int("T", 16, 1, 1 << 20), Int("max_time", 4, 1, optional=True),
                      Int("max_cache", 8, 1, optional=True), Int("max_path", 4, 1, optional=True),
                      Str("objective", "path", bad=("", "fastest", "π∞", "x" * 100000, "path\0")),
                      Str("also", ["pow2"], roles=("spec", "pattern"), bad=(["pwo2"], [""], "pow2", [3]))]),
    "mixer": ("fn", [Str("spec", "gla", roles=("mixer",)), Int("d_model", 16, 1, 1 << 16, roles=("dims",)),
                     Int("n_heads", 2, 1, 16, roles=("dims", "heads")),
                     Int("max_len", 32, 1, 1 << 24, roles=("dims",))]),
    "check_mixer_spec": ("fn", [Str("spec", "gla", roles=("mixer",)), Int("d_model", 16, 1, 1 << 16, roles=("dims",)),
                                Int("n_heads", 2, 1, 16, roles=("dims", "heads")),
                                Int("max_len", 32, 1, 1 << 24, roles=("dims",))]),
    # Checks the list's grammar only (documented): a member that is no mixer is check_mixer_spec's.
    "mixer_layer_specs": ("fn", [Str("spec", "ssm*2|attention", roles=("mixer", "list"),
                                     bad=("", "ssm||gla", "ssm*0", "*2", "ssm*2*2", "a|b|c|d", "ssm*x")),
                                 Int("layers", 3, 1, 1 << 16, roles=("layer",))]),
    "use_cpu_block_cache": ("fn", [Int("budget_mb", 0, -(1 << 62), 1 << 40)]),
    "load": ("fn", [Path("path", "<checkpoint>", must_exist=True)]),
    "mixer_families": ("fn", []),
    "cpu_block_cache_stats": ("fn", []),
    "fused_affine_isa": ("fn", []),
    "blas_kernels": ("fn", []),
    "Pattern": ("fn", [Str("spec", "pow2", roles=("pattern",))]),
    "Pattern.row": ("pattern", [Int("i", 5, 0, (1 << 24) - 1)]),
    "Pattern.rows": ("pattern", [Int("T", 5, 1, 1 << 24)]),
    "Pattern.offsets": ("pattern", [Int("max_offset", 9, 1, 1 << 24)]),
    "Pattern.row_size": ("pattern", [Int("i", 5, 0, (1 << 24) - 1)]),
    "Pattern.max_width": ("pattern", [Int("T", 9, 1, 1 << 24)]),
    "Mixer.forward": ("mixer", [Tensor("x", (2, 5, C), free=(0, 1))]),
    "Mixer.init_state": ("mixer", [Int("batch", 2, 1, 1 << 16)]),
    "Mixer.step": ("mixer", ["state", Tensor("x_t", (2, C))]),
    "Mixer.prefill": ("mixer", ["state", Tensor("x", (2, 3, C), free=(1,))]),
    "Mixer.fork": ("mixer", ["state"]),
    "Mixer.save_state": ("mixer", ["state", Path("path", "state.bin", must_exist=False)]),
    # source: a path, or the bytes save_state returned (empty, or a header and junk here).
    "Mixer.load_state": ("mixer", [Path("source", "<state-file>", must_exist=True, roles=("state",),
                                        extra_bad=(b"", b"MIXLABST 1 junk\n\x00\xff"))]),
    "Mixer.train": ("mixer", [Bool("mode", False)]),
    "Model": ("fn", [Str("config", dict(MODEL_CONFIG), roles=("key",),
                         bad=("gla", {"d_model": HUGE}, {"vocab": 1 << 62}, {"layers": 10 ** 9},
                              {"length": -1}, {"bogus": 1}, {"mixer": "pwo2"}, {"d_model": math.nan}),
                         wrong_types=("py:int", "py:list"))]),
    "Model.forward": ("model", [Tensor("tokens", (2, 5), make=lambda g, s: torch.randint(0, 200, s, generator=g),
                                       dtype=torch.int64, free=(0, 1))]),
    "Model.init_state": ("model", [Int("batch", 2, 1, 1 << 16)]),
    "Model.step": ("model", ["state", Tensor("tokens_t", (2,), make=lambda g, s: torch.randint(0, 200, s, generator=g),
                                             dtype=torch.int64)]),
    "Model.prefill": ("model", ["state", Tensor("tokens", (2, 3), free=(1,), dtype=torch.int64,
                                                make=lambda g, s: torch.randint(0, 200, s, generator=g))]),
    "Model.fork": ("model", ["state"]),
    "Model.generate": ("model", [Str("prompt", "The", bad=(3,)), Int("max_tokens", 4, 0, 1 << 20),
                                 Float("temperature", 1.0, 0.0, 1e308), Int("top_k", 0, 0),
                                 Float("top_p", 1.0, 1e-9, 1.0), Int("seed", 1, 0, (1 << 64) - 1)]),
    "Model.save": ("model", [Path("path", "model.pt", must_exist=False)]),
    "Model.train": ("model", [Bool("mode", False)]),
}

# Public names that take no hostile argument (the reason says why), checked by the inventory.
EXEMPT = {
    "Error": "an exception class", "InternalError": "an exception class",
    "Mixer": "constructed through mixlab.mixer (same arguments: TARGETS['mixer'])",
    "MixerState": "opaque state, no constructor from Python; its read-only properties take no argument",
    "ModelState": "opaque state, no constructor from Python; its read-only properties take no argument",
    "Model.config": "read-only property", "Model.completed_steps": "read-only property",
    "Mixer.spec": "read-only property", "Mixer.cost_class": "read-only property",
    "Mixer.pattern_spec": "read-only property",
    "Pattern.spec": "read-only property", "Pattern.recurrent": "read-only property",
    "Pattern.translation_invariant": "read-only property", "Pattern.cache_efficient": "read-only property",
    "Pattern.structure": "read-only property", "Pattern.time_class": "read-only property",
    "Pattern.cache_class": "read-only property",
    "MixerState.bytes": "read-only property", "MixerState.cached_positions": "read-only property",
    "MixerState.position": "read-only property", "ModelState.batch": "read-only property",
    "ModelState.bytes": "read-only property", "ModelState.position": "read-only property",
}
# Names of the compiled module that are reached through the package, not re-exported.
PRIVATE_REACHED = {
    "_Mixer": "mixlab.Mixer's implementation: Mixer.* targets", "_Model": "mixlab.Model's: Model.* targets",
    "_mixer_create": "mixlab.mixer", "_model_from_config": "mixlab.Model", "_model_load": "mixlab.load",
    "_time_resolvent_cpp": "the benchmark's C++ loop: same checks as resolvent (case below)",
}
# Per-function state substitution: Mixer/Model methods whose first parameter is a decode state.
STATE_PARAM = State("state", None)


def public_callables():
    """Every public callable of the package: module functions, classes and their public methods."""
    names = set()
    for name in dir(mixlab):
        if name.startswith("_"):
            continue
        obj = getattr(mixlab, name)
        if isinstance(obj, type(json)):  # mixlab's own submodules (none public today); not json, os, torch
            if obj.__name__.startswith("mixlab."):
                names.add(name)
            continue
        if not callable(obj):
            continue
        names.add(name)
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            own = set(vars(obj))
            if issubclass(obj, torch.nn.Module):  # only what mixlab adds to nn.Module
                own -= set(vars(torch.nn.Module))
                own |= {m for m in vars(obj) if m in ("forward", "train")}
            for m in own:
                if not m.startswith("_"):
                    names.add(f"{name}.{m}")
    return names


# ---- the worker: runs cases in a child interpreter --------------------------------------------

class Context:
    """What a case needs: mixers per family, a model, patterns, a checkpoint and state files."""

    def __init__(self, tmp):
        self.tmp, self.mixers, self.patterns, self.model_obj = tmp, {}, {}, None

    def mixer(self, spec):
        if spec not in self.mixers:
            torch.manual_seed(0)
            self.mixers[spec] = mixlab.mixer(spec, C, H, L).eval()
        return self.mixers[spec]

    def model(self):
        if self.model_obj is None:
            self.model_obj = mixlab.Model(dict(MODEL_CONFIG)).eval()
        return self.model_obj

    def checkpoint(self):
        path = os.path.join(self.tmp, "model.ckpt")
        if not os.path.exists(path):
            self.model().save(path)
        return path

    def state_file(self, spec):
        path = os.path.join(self.tmp, f"state-{spec.replace(':', '_')}.bin")
        if not os.path.exists(path):
            m = self.mixer(spec)
            m.save_state(m.init_state(2), path)
        return path


def build_call(ctx, case, mutate):
    """(callable, args) of a case; mutate=False builds the valid call it is compared with."""
    target, param_index, mutation = case["target"], case["param"], case["mutation"]
    how, params = TARGETS[target]
    obj, spec = None, case.get("spec")
    if how == "mixer":
        obj = ctx.mixer(spec)
    elif how == "model":
        obj = ctx.model()
    elif how == "pattern":
        obj = mixlab.Pattern(spec)

    def make_state(kind):
        if kind == "state:foreign":
            if how == "model":
                return ctx.mixer("gla").init_state(2)
            other = "ssm" if spec != "ssm" else "attention"
            return ctx.mixer(other).init_state(2)
        return obj.init_state(3 if kind == "state:batch" else 2)

    args = []
    for i, p in enumerate(params):
        if p == "state":
            p = State("state", make_state)
        g = torch.Generator().manual_seed(case["seed"] * 64 + i)  # each parameter its own stream
        valid = p.valid(g)
        if isinstance(p, Path):  # a real file (or a fresh name in the case's folder) for the valid call
            valid = {"<checkpoint>": lambda: ctx.checkpoint(), "<state-file>": lambda: ctx.state_file(spec)}.get(
                p.value, lambda: os.path.join(ctx.tmp, p.value))()
        args.append(p.hostile(mutation, g) if mutate and i == param_index else valid)
    name = target.split(".")[-1]
    fn = getattr(obj, name) if obj is not None else getattr(mixlab, target)
    if target == "mixer_families" and mutate or target in ("cpu_block_cache_stats", "fused_affine_isa", "blas_kernels") and mutate:
        args = ["unexpected"]
    return fn, args, params


def flatten(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in flatten(x)]
    return [out]


def same_result(a, b, none_ok=False):
    fa, fb = flatten(a), flatten(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if none_ok and (x is None or y is None):
            continue
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape:
                return False
            if not torch.allclose(x.detach(), y.detach(), rtol=1e-4, atol=1e-5, equal_nan=True):
                return False
        elif type(x) != type(y):  # states, bytes: same kind of object is enough
            return False
    return True


def describe_value(v):
    if isinstance(v, torch.Tensor):
        return f"tensor{tuple(v.shape)} {v.dtype} {v.device} stride={v.stride() if v.device.type != 'meta' else '-'}"
    r = repr(v)
    return r if len(r) < 60 else r[:57] + "..."


def names_for(p, mutation, value, params):
    """What a message may say to name the argument: its name (also spelt with '-', as the CLI's
    flags), its role; a string's own value (a bad spec or path is named by quoting it); for a
    size or batch that disagrees with another argument, any tensor argument of the call (the
    mismatch is between two of them, either may be reported)."""
    names = list(p.roles) + [r.replace("_", "-") for r in p.roles if "_" in r]
    if isinstance(value, str) and value:
        names.append("'" + value[:40])  # quoted: 'xxxx... or 'pwo2'
    if isinstance(value, dict):
        names += list(value) + ["'" + str(v)[:40] for v in value.values() if isinstance(v, str) and v]
    if mutation.split(":")[0] in ("size", "zero", "huge") or mutation == "state:batch":
        names += [q.name for q in params if isinstance(q, Tensor)]
    if mutation.startswith("huge:"):
        names.append("T")  # "T must be in [1, 2^24]": the length the tensors' T would mean
    if mutation.startswith("values:"):
        names.append("finite")  # a kernel that refuses non-finite values says so ("must be finite")
    return names


def names_in(names, msg):
    """Whether msg names one of `names` as a word (so 'x' is not found inside 'expected')."""
    def named(n):
        if n.startswith("'"):  # a quoted value
            return n in msg
        return re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", msg) is not None

    return any(named(n) for n in names)


def run_case(ctx, case):
    """'ok' or the reason this case failed."""
    fn, args, params = build_call(ctx, case, mutate=True)
    p = params[case["param"]] if params else None
    if p == "state":
        p = STATE_PARAM
    mutation = case["mutation"]
    expect = p.expect(mutation) if p is not None else "raise"
    if mutation == "state:batch" and not any(isinstance(q, Tensor) for q in params):
        expect = "either"  # fork/save of another batch's state of the same mixer: a valid state
    names = names_for(p, mutation, args[case["param"]], params) if p is not None else []
    try:
        out = fn(*args)
    except OK_ERRORS as e:
        msg = str(e)
        if expect == "same":
            return f"raised {type(e).__name__} for a valid input: {msg[:300]}"
        if expect == "raise*" or not names or names_in(names, msg):
            return "ok"
        return f"{type(e).__name__} does not name the argument (one of {names[:6]}): {msg[:300]}"
    except BaseException as e:  # noqa: B902  (IndexError, OverflowError, ...: not the promised types)
        return f"raised {type(e).__name__} (expected ValueError/TypeError/RuntimeError): {str(e)[:300]}"
    if expect in ("raise", "raise*"):
        return f"returned {describe_value(out)} instead of raising"
    if expect == "same":
        # The same values as a plain tensor (contiguous, no grad), other arguments rebuilt fresh
        # (a new decode state: the call above advanced its own).
        ref_fn, ref_args, _ = build_call(ctx, case, mutate=False)
        ref_args[case["param"]] = args[case["param"]].detach().contiguous()
        # selective_scan returns h_final only without a recorded gradient (documented): None then.
        if not same_result(out, ref_fn(*ref_args), none_ok=mutation == "requires_grad"):
            return "returned a result that differs from the same call with a contiguous, plain tensor"
    return "ok"


def case_text(case):
    how, params = TARGETS[case["target"]]
    p = params[case["param"]] if params else None
    pname = "state" if p == "state" else (p.name if p is not None else "-")
    where = f"[{case['spec']}]" if case.get("spec") else ""
    return f"{case['target']}{where}({pname} <- {case['mutation']}, seed {case['seed']})"


def worker():
    """Child interpreter: reads cases (JSON lines) on stdin, prints BEGIN i / END i verdict."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is reported, not dumped
    torch.set_num_threads(1)
    cases = [json.loads(line) for line in sys.stdin if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        ctx = Context(tmp)
        for case in cases:
            print(f"BEGIN {case['id']}", flush=True)
            if case.get("crash"):  # the harness's own test: a case that kills the interpreter
                os.abort()
            start = time.monotonic()
            try:
                verdict = run_case(ctx, case)
            except BaseException as e:  # noqa: B902  (a broken harness case, reported as such)
                verdict = f"harness error {type(e).__name__}: {e}"
            took = time.monotonic() - start
            if verdict == "ok" and took > CASE_LIMIT_S:
                verdict = f"took {took:.1f} s (limit {CASE_LIMIT_S} s): the input was not refused before the work"
            print(f"END {case['id']} {json.dumps(verdict)}", flush=True)


# ---- the generator and the parent --------------------------------------------------------------

def all_cases():
    """Every (target, parameter, mutation), with a family or pattern for methods."""
    out = []
    for target, (how, params) in sorted(TARGETS.items()):
        specs = MIXER_SPECS if how == "mixer" else PATTERN_SPECS if how == "pattern" else [None]
        plist = params if params else [None]
        for i, p in enumerate(plist):
            muts = ["py:extra"] if p is None else (STATE_PARAM if p == "state" else p).mutations()
            for m in muts:
                for spec in specs:
                    out.append({"target": target, "param": i, "mutation": m, "spec": spec})
    return out


def pick_cases(n, seed):
    rng = random.Random(seed)
    everything = all_cases()
    if n <= 0 or n >= len(everything):
        chosen = everything
    else:
        # Every (target, parameter) pair gets at least two cases, the rest are drawn at random.
        by_pair = {}
        for c in everything:
            by_pair.setdefault((c["target"], c["param"]), []).append(c)
        chosen = []
        for pair in sorted(by_pair):
            chosen += rng.sample(by_pair[pair], min(2, len(by_pair[pair])))
        rest = [c for c in everything if c not in chosen]
        chosen += rng.sample(rest, max(0, min(len(rest), n - len(chosen))))
    for i, c in enumerate(chosen):
        c["id"], c["seed"] = i, rng.randrange(1 << 30)
    return chosen


def run_batch(cases):
    """Runs cases in child interpreters; {id: verdict}. A child that dies or hangs fails its case."""
    # The children's temporary folders go into one the parent removes: a child that dies (the
    # harness's own crash case, or a case that kills the interpreter) cannot clean up its own,
    # and each such run left an empty folder in /tmp.
    with tempfile.TemporaryDirectory(prefix="mixlab-hostile-") as scratch:
        return run_batch_in(cases, scratch)


def run_batch_in(cases, scratch):
    """run_batch with the children's TMPDIR set to `scratch`."""
    verdicts, pending = {}, list(cases)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]), TMPDIR=scratch)
    while pending:
        stdin = "".join(json.dumps(c) + "\n" for c in pending)
        proc = subprocess.Popen([sys.executable, "-c", "import test_hostile; test_hostile.worker()"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        try:
            out, err = proc.communicate(stdin, timeout=BATCH_TIMEOUT_S)
            hung = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            hung = True
        running = None
        for line in out.splitlines():
            if line.startswith("BEGIN "):
                running = int(line.split()[1])
            elif line.startswith("END "):
                _, cid, verdict = line.split(" ", 2)
                verdicts[int(cid)] = json.loads(verdict)
                running = None
        if running is not None:
            how = (f"hung (no answer in {BATCH_TIMEOUT_S} s)" if hung else
                   f"killed the interpreter (exit {proc.returncode})")
            verdicts[running] = f"{how}; stderr: {err.strip()[-400:]}"
        elif proc.returncode != 0:
            missing = [c for c in pending if c["id"] not in verdicts]
            key = missing[0]["id"] if missing else "exit"  # "exit": it died after its last case
            verdicts[key] = f"the child failed outside a case (exit {proc.returncode}): {err.strip()[-400:]}"
        pending = [c for c in pending if c["id"] not in verdicts]
    return verdicts


def run_cases(cases, per_child=1000):
    """run_batch over chunks, each child with its own timeout."""
    verdicts = {}
    for start in range(0, len(cases), per_child):
        chunk = run_batch(cases[start:start + per_child])
        if "exit" in chunk:
            verdicts.setdefault("exit", chunk.pop("exit"))
        verdicts.update(chunk)
    return verdicts


class HostileApiTest(unittest.TestCase):
    def test_every_public_callable_is_covered(self):
        missing = sorted(n for n in public_callables() if n not in TARGETS and n not in EXEMPT)
        self.assertEqual(missing, [], "public callables without hostile cases (add them to TARGETS, or to EXEMPT "
                                      "with the reason)")
        stale = sorted(n for n in list(TARGETS) + list(EXEMPT) if n not in public_callables())
        self.assertEqual(stale, [], "TARGETS/EXEMPT name callables that no longer exist")
        compiled = {n for n in dir(mixlab._mixlab) if not n.startswith("__")}
        unreached = sorted(n for n in compiled
                           if not hasattr(mixlab, n) and n not in PRIVATE_REACHED and n not in EXEMPT)
        self.assertEqual(unreached, [], "names of mixlab._mixlab neither re-exported nor listed in PRIVATE_REACHED")

    def test_every_mixer_family_has_a_spec(self):
        families = {f["family"] for f in mixlab.mixer_families()}
        covered = {s.split(":")[0] for s in MIXER_SPECS}
        self.assertEqual(sorted(families - covered), [], "mixer families without a spec in MIXER_SPECS")

    def test_private_resolvent_timer_checks_like_resolvent(self):
        with self.assertRaisesRegex(ValueError, "alpha"):
            mixlab._mixlab._time_resolvent_cpp(torch.zeros(1, 1, 8, 2, dtype=torch.int64), torch.zeros(1, 1, 8, 3),
                                               torch.zeros(1, 1, 8, 3), "pow2", None, 1)
        with self.assertRaisesRegex(ValueError, "iters"):
            mixlab._mixlab._time_resolvent_cpp(torch.zeros(1, 1, 8, 4), torch.zeros(1, 1, 8, 3),
                                               torch.zeros(1, 1, 8, 3), "pow2", None, 0)

    def test_generator_is_deterministic_and_covers_every_parameter(self):
        self.assertEqual(W_POW2, mixlab.Pattern("pow2").max_width(8))
        a, b = pick_cases(CASES, SEED), pick_cases(CASES, SEED)
        self.assertEqual(a, b)
        pairs = {(c["target"], c["param"]) for c in a}
        for target, (_, params) in TARGETS.items():
            for i in range(max(1, len(params))):
                self.assertIn((target, i), pairs)

    def test_a_dead_child_fails_its_case_and_the_rest_still_run(self):
        cases = pick_cases(3, SEED)[:3]
        cases[1]["crash"] = True
        verdicts = run_batch(cases)
        self.assertIn("killed the interpreter", verdicts[cases[1]["id"]])
        self.assertEqual([verdicts[cases[0]["id"]], verdicts[cases[2]["id"]]], ["ok", "ok"])

    def test_hostile_arguments(self):
        failures, total = [], 0
        for seed in range(SEED, SEED + ROUNDS):
            cases = pick_cases(CASES, seed)
            verdicts = run_cases(cases)
            total += len(cases)
            failures += [f"{case_text(c)}: {verdicts.get(c['id'], 'no verdict')}" for c in cases
                         if verdicts.get(c["id"]) != "ok"]
            if "exit" in verdicts:
                failures.append(f"seed {seed}: {verdicts['exit']}")
        print(f"\n{total} hostile cases (seeds {SEED}..{SEED + ROUNDS - 1}), {len(failures)} failed", file=sys.stderr)
        self.assertEqual(failures, [], f"{len(failures)} of {total} hostile cases failed:\n" + "\n".join(failures))


if __name__ == "__main__":
    unittest.main()
