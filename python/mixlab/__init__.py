"""mixlab for PyTorch users: causal token mixers and their kernels, from mixlab's C++ library.

Everything runs on the LibTorch that the imported ``torch`` runs on (Debian's python3-torch is
built on the same libraries as libtorch-dev), so tensors cross without copies and every op records
into torch's autograd graph like a built-in op.

    import torch, mixlab
    layer = mixlab.mixer("resolvent:pow2", d_model=64, n_heads=4)   # a torch.nn.Module
    y = layer(torch.randn(2, 128, 64))                              # (B,T,C) -> (B,T,C)
    opt = torch.optim.AdamW(layer.parameters())

The whole model of ``mixlab train`` (embedding, blocks of mixer + MLP, tied head) and its
checkpoints:

    model = mixlab.load("runs/train/lm-attention/checkpoint.pt")   # a torch.nn.Module
    logits = model(tokens)                                          # (B,T) int64 -> (B,T,V)
    print(model.generate("The jury said", max_tokens=64, seed=1))
    model.save("mine.pt")                                           # mixlab eval/generate/train read it

Functions: resolvent, toeplitz, design (a pattern for a budget), diag_decay_chunked / diag_decay_recurrent, delta_rule_chunked /
delta_rule_recurrent, analyze, mixer, mixer_families, check_mixer_spec, mixer_layer_specs (a
model's per-layer list, e.g. "ssm*3|attention", as one spec per layer), load. Classes: Pattern,
Mixer, MixerState, Model, ModelState. Caller errors raise mixlab.Error (a ValueError) with the C++ message.

Shapes use mixlab's letters: B batch, T time, H heads, D head dim, C model width, W pattern width.
CPU only, float32 or float64.
"""

import json
import os

import torch  # first: loads LibTorch and registers torch's Python types that _mixlab returns

from . import _mixlab
from ._mixlab import (  # noqa: F401  (re-exported)
    Error,
    InternalError,
    MixerState,
    ModelState,
    Pattern,
    analyze,
    blas_kernels,
    design,
    causal_attention,
    check_mixer_spec,
    cpu_block_cache_stats,
    delta_rule_chunked,
    delta_rule_recurrent,
    diag_decay_chunked,
    diag_decay_recurrent,
    fused_affine_isa,
    mixer_families,
    mixer_layer_specs,
    resolvent,
    selective_scan,
    toeplitz,
    use_cpu_block_cache,
)

__version__ = _mixlab.__version__

__all__ = [
    "Error", "InternalError", "Mixer", "MixerState", "Model", "ModelState", "Pattern", "load", "analyze", "design", "causal_attention", "check_mixer_spec",
    "delta_rule_chunked", "delta_rule_recurrent", "diag_decay_chunked", "diag_decay_recurrent",
    "fused_affine_isa", "mixer", "mixer_families", "mixer_layer_specs", "resolvent", "selective_scan", "toeplitz", "use_cpu_block_cache",
    "cpu_block_cache_stats", "blas_kernels",
]


class _Tensors(torch.nn.Module):
    """A submodule of a Mixer: holds C++ tensors under their C++ names (no forward of its own)."""

    def _apply(self, fn):
        # nn.Module._apply swaps buffers for new tensors; the C++ module would keep the old ones.
        # Assigning .data instead keeps every tensor the very object the C++ forward reads
        # (parameters already take this path in torch; buffers need it too), so .double() works.
        for child in self.children():
            child._apply(fn)
        with torch.no_grad():
            for t in list(self._parameters.values()) + list(self._buffers.values()):
                if t is None:
                    continue
                t.data = fn(t)
                if t.grad is not None:
                    t.grad.data = fn(t.grad)
        return self


def _path_arg(value, where, name):
    """os.fspath(value), or a TypeError naming the argument (os.fspath's own names none)."""
    try:
        return os.fspath(value)
    except TypeError:
        raise TypeError(f"{where}: {name} must be a str or os.PathLike path, got {type(value).__name__}") from None


def _owner(module, dotted):
    """The (sub)module of `module` that holds C++ name 'a.b.weight', created on demand, and 'weight'."""
    *path, leaf = dotted.split(".")
    owner = module
    for part in path:
        if part not in owner._modules:
            owner.add_module(part, _Tensors())
        owner = owner._modules[part]
    return owner, leaf


def _adopt_tensors(module, impl):
    """Registers the C++ module `impl`'s parameters and buffers in `module` under their C++ names."""
    for name, tensor in impl.named_parameters():
        owner, leaf = _owner(module, name)
        # The C++ tensor itself becomes the Parameter: nn.Parameter(tensor) would make a
        # detached alias whose .grad the C++ forward never fills. Its Python class is set in
        # place (torch's `_is_param` mark is not enough: isinstance would then also report it
        # as an UninitializedParameter, which DistributedDataParallel rejects).
        tensor.__class__ = torch.nn.Parameter
        owner.register_parameter(leaf, tensor)
    for name, tensor in impl.named_buffers():
        owner, leaf = _owner(module, name)
        owner.register_buffer(leaf, tensor)
    impl.train(module.training)


class Mixer(_Tensors):
    """A registered mixlab mixer as a torch.nn.Module: x (B,T,C) -> y (B,T,C), causal.

    Its parameters are the C++ module's own tensors (same storage and the same autograd leaves:
    gradients of the C++ forward land in ``p.grad``), registered under the C++ names, so
    ``parameters()``, optimizers, ``state_dict()`` / ``load_state_dict()``, ``.double()``,
    ``train()`` / ``eval()`` and DistributedDataParallel see them like any torch module's.

    Decode: ``state = m.init_state(B)``, then ``y_t = m.step(state, x_t)`` with x_t (B,C) per
    token; step t equals ``forward(x)[:, t]``. No gradient flows through step. ``prefill(state,
    x)`` feeds a chunk at once; ``save_state(state[, path])`` / ``load_state(bytes_or_path)`` keep
    a state in mixlab's checked state format (the CLI's and C++'s); ``fork(state)`` copies one.

    ``copy.deepcopy`` and pickling (``torch.save(model)``) rebuild the mixer from its spec and
    dims and copy the weights (not the gradients).
    """

    def __init__(self, spec, d_model, n_heads, max_len=4096):
        super().__init__()
        self._impl = _mixlab._mixer_create(spec, d_model, n_heads, max_len)
        self._dims = (d_model, n_heads, max_len)
        _adopt_tensors(self, self._impl)

    def forward(self, x):
        """x (B,T,C) -> (B,T,C), causal; differentiable in x and every parameter."""
        self._check_x("Mixer.forward", x)
        return self._impl.forward(x)

    def _check_x(self, where, x):
        # The dims this mixer was made for, which only the Python side knows: max_len is the
        # longest sequence it accepts (past it one family allocated T-sized tables: a stride-0 x
        # of T = 2^40 raised std::bad_alloc), and C is d_model (the default prefill, a loop of
        # step, reported a wrong C as its own x_t's). Dtype, device, B and rank: C++ checks them.
        d_model, _, max_len = self._dims
        if isinstance(x, torch.Tensor) and x.dim() == 3 and (x.size(1) > max_len or x.size(2) != d_model):
            raise Error(f"{where}: x must have shape (B,T,C) with T <= max_len = {max_len} and C = d_model = "
                        f"{d_model}, got {list(x.shape)}")

    def init_state(self, batch):
        """A fresh decode state (mixlab.MixerState) for `batch` sequences, at position 0."""
        return self._impl.init_state(batch)

    def step(self, state, x_t):
        """x_t (B,C) -> y_t (B,C): one decode token; advances `state` by one position."""
        return self._impl.step(state, x_t)

    def prefill(self, state, x):
        """x (B,T,C) -> y (B,T,C): a chunk of T tokens at once, equal to T steps (and to forward
        over the same positions); advances `state` by T positions."""
        self._check_x("Mixer.prefill", x)
        return self._impl.prefill(state, x)

    def fork(self, state):
        """A deep copy of `state`: two continuations that do not affect each other."""
        return self._impl.fork(state)

    def save_state(self, state, path=None):
        """Writes `state` in mixlab's state format (header with this mixer's spec, a version and
        a checksum). With `path` (str or os.PathLike) the file is written atomically (write,
        fsync, rename) and None is returned; without, the bytes are returned."""
        if path is None:
            return self._impl.save_state(state)
        self._impl.save_state_file(state, _path_arg(path, "Mixer.save_state", "path"))
        return None

    def load_state(self, source):
        """A state saved by save_state from a mixer of the same spec: `source` is the bytes or a
        path. A corrupt, truncated or mismatched state raises mixlab.Error naming what is wrong."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            return self._impl.load_state(bytes(source))
        return self._impl.load_state_file(_path_arg(source, "Mixer.load_state", "source"))

    def train(self, mode=True):
        super().train(mode)
        self._impl.train(mode)
        return self

    @property
    def spec(self):
        """The canonical spec string this mixer was created from."""
        return self._impl.spec

    @property
    def cost_class(self):
        """Asymptotic decode cost per token, e.g. 'O(log2 n)'."""
        return self._impl.cost_class

    @property
    def pattern_spec(self):
        """The sparsity pattern this mixer realises in the Y = (I-B)^-1 A X view, or ''."""
        return self._impl.pattern_spec

    def __reduce__(self):
        # copy.deepcopy and pickling (torch.save of a whole model) rebuild the C++ module from its
        # spec and dims and load the weights; the C++ object itself cannot be pickled.
        return (_rebuild_mixer, (self.spec, *self._dims, self.state_dict(), self.training))

    def extra_repr(self):
        d_model, n_heads, max_len = self._dims
        return f"'{self.spec}', d_model={d_model}, n_heads={n_heads}, max_len={max_len}"


def _rebuild_mixer(spec, d_model, n_heads, max_len, state_dict, training):
    with torch.random.fork_rng(devices=[]):  # the throw-away initial weights leave torch's RNG alone
        m = Mixer(spec, d_model, n_heads, max_len)
    m.load_state_dict(state_dict)
    return m.train(training)


def mixer(spec, d_model, n_heads, max_len=4096):
    """Creates a registered mixer (see mixer_families()) as a torch.nn.Module (mixlab.Mixer).

    spec: e.g. 'attention', 'local:8', 'resolvent:pow2+cache', 'toeplitz', 'gla', 'tpsm:c=4'.
    d_model: model width C; n_heads: heads H; max_len: the longest sequence forward/step accept.
    Weights are drawn from torch's default generator (torch.manual_seed makes them reproducible).
    A bad spec or dims raise mixlab.Error with the C++ message.
    """
    return Mixer(spec, d_model, n_heads, max_len)


class Model(_Tensors):
    """The decoder of ``mixlab train`` as a torch.nn.Module: tokens (B,T) int64 -> logits (B,T,V).

    ``Model(config)`` builds it from a config dict with the keys of ``mixlab train``'s JSON
    configs (mixlab/train/config.h: task, vocab, d_model, layers, heads, mixer, seed, ...; every
    key optional, an unknown key or bad value raises mixlab.Error): the same dims, mixers and
    initial weights (drawn from the config's seed; torch's generator is left as it was) as the
    CLI. ``mixlab.load(path)`` returns the model of a checkpoint; ``save(path)`` writes one that
    ``mixlab eval``, ``generate``, ``train --resume`` and ``--init-from`` read.

    Parameters are the C++ model's own tensors (as for Mixer), so torch optimizers train it in
    place. Decode: ``state = model.init_state(B)``, ``logits_t = model.step(state, tokens_t)``
    with tokens_t (B) int64 per token (equal to ``forward(tokens)[:, t]`` to float rounding),
    ``prefill(state, tokens)`` for a chunk, ``fork(state)`` to branch. ``generate(prompt, ...)``
    samples text like ``mixlab generate`` (task lm only).
    """

    def __init__(self, config=None, *, _impl=None):
        super().__init__()
        if _impl is None:
            if config is None:
                config = {}
            if not isinstance(config, dict):
                raise Error(f"Model: config must be a dict of mixlab train config keys, got {type(config).__name__}")
            _impl = _mixlab._model_from_config(json.dumps(config))
        self._impl = _impl
        _adopt_tensors(self, self._impl)

    def forward(self, tokens):
        """tokens (B,T) int64 -> logits (B,T,V) float32; differentiable in every parameter."""
        return self._impl.forward(tokens)

    def init_state(self, batch):
        """A fresh decode state (mixlab.ModelState) for `batch` sequences."""
        return self._impl.init_state(batch)

    def step(self, state, tokens_t):
        """tokens_t (B) int64 -> logits (B,V): one token; advances `state` by one position."""
        return self._impl.step(state, tokens_t)

    def prefill(self, state, tokens):
        """tokens (B,T) int64 -> logits (B,T,V): T tokens at once; advances `state` by T."""
        return self._impl.prefill(state, tokens)

    def fork(self, state):
        """A deep copy of `state`: two continuations that do not affect each other."""
        return self._impl.fork(state)

    def generate(self, prompt="", max_tokens=256, temperature=1.0, top_k=0, top_p=1.0, seed=0):
        """Text after `prompt`, sampled as ``mixlab generate`` samples it (same options, same seed
        -> same text): temperature 0 is greedy, top_k 0 and top_p 1 are off. Returns str (bytes
        that are not UTF-8, possible when max_tokens cuts a character, are replaced). Ctrl-C
        (SIGINT) stops it within a token or two with KeyboardInterrupt."""
        raw = self._impl.generate(prompt, max_tokens, temperature, top_k, top_p, seed)
        return raw.decode("utf-8", errors="replace")

    def save(self, path):
        """Writes a checkpoint (mixlab's format: header, checksum, config, weights, optimizer
        state) atomically to `path`."""
        self._impl.save(_path_arg(path, "Model.save", "path"))

    def train(self, mode=True):
        super().train(mode)
        self._impl.train(mode)
        return self

    @property
    def config(self):
        """The resolved config (dict): every key with its value, as ``config.json`` of a run."""
        return json.loads(self._impl.config)

    @property
    def completed_steps(self):
        """Training steps the checkpoint had completed (0 for a new model)."""
        return self._impl.completed_steps

    def __reduce__(self):
        return (_rebuild_model, (self.config, self.state_dict(), self.training))

    def extra_repr(self):
        c = self.config
        return f"mixer='{c['mixer']}', task='{c['task']}', vocab={c['vocab']}, d_model={c['d_model']}, layers={c['layers']}"


def _rebuild_model(config, state_dict, training):
    m = Model(config)
    m.load_state_dict(state_dict)
    return m.train(training)


def load(path):
    """The model of a checkpoint written by ``mixlab train`` or Model.save (mixlab.Model). A
    missing, corrupt or foreign file raises mixlab.Error naming the file and the problem."""
    return Model(_impl=_mixlab._model_load(_path_arg(path, "load", "path")))
