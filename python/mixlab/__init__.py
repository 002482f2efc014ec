"""mixlab for PyTorch users: causal token mixers and their kernels, from mixlab's C++ library.

Everything runs on the LibTorch that the imported ``torch`` runs on (Debian's python3-torch is
built on the same libraries as libtorch-dev), so tensors cross without copies and every op records
into torch's autograd graph like a built-in op.

    import torch, mixlab
    layer = mixlab.mixer("resolvent:pow2", d_model=64, n_heads=4)   # a torch.nn.Module
    y = layer(torch.randn(2, 128, 64))                              # (B,T,C) -> (B,T,C)
    opt = torch.optim.AdamW(layer.parameters())

Functions: resolvent, toeplitz, diag_decay_chunked / diag_decay_recurrent, delta_rule_chunked /
delta_rule_recurrent, analyze, mixer, mixer_families, check_mixer_spec, mixer_layer_specs (a
model's per-layer list, e.g. "ssm*3|attention", as one spec per layer). Classes: Pattern, Mixer,
MixerState. Caller errors raise mixlab.Error (a ValueError) with the C++ message.

Shapes use mixlab's letters: B batch, T time, H heads, D head dim, C model width, W pattern width.
CPU only, float32 or float64.
"""

import os

import torch  # first: loads LibTorch and registers torch's Python types that _mixlab returns

from . import _mixlab
from ._mixlab import (  # noqa: F401  (re-exported)
    Error,
    InternalError,
    MixerState,
    Pattern,
    analyze,
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
    "Error", "InternalError", "Mixer", "MixerState", "Pattern", "analyze", "causal_attention", "check_mixer_spec",
    "delta_rule_chunked", "delta_rule_recurrent", "diag_decay_chunked", "diag_decay_recurrent",
    "fused_affine_isa", "mixer", "mixer_families", "mixer_layer_specs", "resolvent", "selective_scan", "toeplitz", "use_cpu_block_cache",
    "cpu_block_cache_stats",
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
        for name, tensor in self._impl.named_parameters():
            owner, leaf = self._owner(name)
            # The C++ tensor itself becomes the Parameter: nn.Parameter(tensor) would make a
            # detached alias whose .grad the C++ forward never fills. Its Python class is set in
            # place (torch's `_is_param` mark is not enough: isinstance would then also report it
            # as an UninitializedParameter, which DistributedDataParallel rejects).
            tensor.__class__ = torch.nn.Parameter
            owner.register_parameter(leaf, tensor)
        for name, tensor in self._impl.named_buffers():
            owner, leaf = self._owner(name)
            owner.register_buffer(leaf, tensor)
        self._impl.train(self.training)

    def _owner(self, dotted):
        """The (sub)module that holds C++ name 'a.b.weight', created on demand, and 'weight'."""
        *path, leaf = dotted.split(".")
        owner = self
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, _Tensors())
            owner = owner._modules[part]
        return owner, leaf

    def forward(self, x):
        """x (B,T,C) -> (B,T,C), causal; differentiable in x and every parameter."""
        return self._impl.forward(x)

    def init_state(self, batch):
        """A fresh decode state (mixlab.MixerState) for `batch` sequences, at position 0."""
        return self._impl.init_state(batch)

    def step(self, state, x_t):
        """x_t (B,C) -> y_t (B,C): one decode token; advances `state` by one position."""
        return self._impl.step(state, x_t)

    def prefill(self, state, x):
        """x (B,T,C) -> y (B,T,C): a chunk of T tokens at once, equal to T steps (and to forward
        over the same positions); advances `state` by T positions."""
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
        self._impl.save_state_file(state, os.fspath(path))
        return None

    def load_state(self, source):
        """A state saved by save_state from a mixer of the same spec: `source` is the bytes or a
        path. A corrupt, truncated or mismatched state raises mixlab.Error naming what is wrong."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            return self._impl.load_state(bytes(source))
        return self._impl.load_state_file(os.fspath(source))

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
