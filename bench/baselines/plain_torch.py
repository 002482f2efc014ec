"""Plain-PyTorch baselines, written from the papers' equations: the code a PyTorch user writes
instead of calling mixlab (issue 17 item 5). No custom kernels, no tricks beyond the standard
chunked forms of the papers; every function here is checked against mixlab's output by run.py.

Shapes follow mixlab: q, k (B,H,T,Dk), v (B,H,T,Dv), log decays g <= 0.
"""
import torch


def gla_recurrent(q, k, v, g):
    """Gated linear attention as the token loop: S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,
    o_t = S_t^T q_t (g per key: (B,H,T,Dk); a scalar gate is g expanded over Dk)."""
    B, H, T, Dk = q.shape
    S = q.new_zeros(B, H, Dk, v.shape[-1])
    out = []
    for t in range(T):
        S = g[:, :, t].exp().unsqueeze(-1) * S + k[:, :, t].unsqueeze(-1) * v[:, :, t].unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, :, t], S))
    return torch.stack(out, 2)


def _chunks(t, C):
    B, H, T, D = t.shape
    return t.reshape(B, H, T // C, C, D)


def simple_gla_chunked(q, k, v, g, C=64):
    """Scalar-gate linear attention (RetNet, simple GLA, mLSTM-style decays) in the chunked form:
    per chunk an intra-chunk (C,C) decay mask exp(b_i - b_j) and a carried state. g (B,H,T)."""
    B, H, T, Dk = q.shape
    qc, kc, vc = _chunks(q, C), _chunks(k, C), _chunks(v, C)
    b = g.reshape(B, H, T // C, C).cumsum(-1)  # log decay from the chunk start
    mask = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    decay = (b.unsqueeze(-1) - b.unsqueeze(-2)).masked_fill(~mask, float("-inf")).exp()
    o = ((qc @ kc.transpose(-1, -2)) * decay) @ vc
    bC = b[..., -1:]
    k_tail = kc * (bC - b).exp().unsqueeze(-1)  # k_j exp(b_C - b_j)
    q_head = qc * b.exp().unsqueeze(-1)  # q_i exp(b_i)
    S = q.new_zeros(B, H, Dk, v.shape[-1])
    outs = []
    for c in range(T // C):
        outs.append(o[:, :, c] + q_head[:, :, c] @ S)
        S = bC[:, :, c].exp().unsqueeze(-1) * S + k_tail[:, :, c].transpose(-1, -2) @ vc[:, :, c]
    return torch.stack(outs, 2).reshape(B, H, T, -1)


def gla_chunked(q, k, v, g, C=64):
    """Gated linear attention (per-key decay) in the chunked form of Yang et al. 2024, first
    level: q_i exp(b_i) and k_j exp(-b_j) inside a chunk (b = cumulative log decay from the chunk
    start). Stable while |b| stays below float range, as in the paper's reference; g (B,H,T,Dk)."""
    B, H, T, Dk = q.shape
    qc, kc, vc = _chunks(q, C), _chunks(k, C), _chunks(v, C)
    b = _chunks(g, C).cumsum(-2)
    mask = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    A = ((qc * b.exp()) @ (kc * (-b).exp()).transpose(-1, -2)).masked_fill(~mask, 0)
    o = A @ vc
    bC = b[:, :, :, -1:]
    k_tail = kc * (bC - b).exp()
    q_head = qc * b.exp()
    S = q.new_zeros(B, H, Dk, v.shape[-1])
    outs = []
    for c in range(T // C):
        outs.append(o[:, :, c] + q_head[:, :, c] @ S)
        S = bC[:, :, c].transpose(-1, -2).exp() * S + k_tail[:, :, c].transpose(-1, -2) @ vc[:, :, c]
    return torch.stack(outs, 2).reshape(B, H, T, -1)


def deltanet_chunked(q, k, v, beta, C=64):
    """DeltaNet (S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t) in the
    chunked WY / UT form of Yang et al. 2024 (DeltaNet): per chunk
    T = (I + tril(diag(beta) K K^T, -1))^-1 diag(beta), W = T K, U = T V, then a loop over chunks.
    k must be L2-normalised; beta (B,H,T)."""
    B, H, Tn, Dk = q.shape
    qc, kc, vc = _chunks(q, C), _chunks(k, C), _chunks(v, C)
    bc = beta.reshape(B, H, Tn // C, C)
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
    A = ((bc.unsqueeze(-1) * kc) @ kc.transpose(-1, -2)).masked_fill(~strict, 0)
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    Tm = torch.linalg.solve_triangular(eye + A, torch.diag_embed(bc), upper=False)
    W, U = Tm @ kc, Tm @ vc
    incl = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    QK = (qc @ kc.transpose(-1, -2)).masked_fill(~incl, 0)
    S = q.new_zeros(B, H, Dk, v.shape[-1])
    outs = []
    for c in range(Tn // C):
        u = U[:, :, c] - W[:, :, c] @ S
        outs.append(qc[:, :, c] @ S + QK[:, :, c] @ u)
        S = S + kc[:, :, c].transpose(-1, -2) @ u
    return torch.stack(outs, 2).reshape(B, H, Tn, -1)


def toeplitz_fft(t, x):
    """Causal Toeplitz mixing y_i = sum_{j<=i} t[i-j] x_j by zero-padded FFT. t (H,T), x (B,H,T,D)."""
    T = x.shape[2]
    n = 2 * T
    tf = torch.fft.rfft(t[:, :T], n=n).unsqueeze(0).unsqueeze(-1)  # (1,H,n/2+1,1)
    xf = torch.fft.rfft(x, n=n, dim=2)
    return torch.fft.irfft(tf * xf, n=n, dim=2)[:, :, :T]


def selective_scan(u, delta, a, b, c, d):
    """Mamba's selective scan (Gu & Dao 2023, eq. 2 with the ZOH/Euler discretisation of S6) as the
    reference implementations write it: exp(delta a) and delta b u as (B,T,C,N) tensors up front,
    then a loop over t carrying the (B,C,N) state. u, delta (B,T,C); a (C,N); b, c (B,T,N); d (C)."""
    decay = torch.exp(delta.unsqueeze(-1) * a)                       # (B,T,C,N)
    inp = (delta * u).unsqueeze(-1) * b.unsqueeze(2)                 # (B,T,C,N)
    h = torch.zeros(u.shape[0], u.shape[2], a.shape[1], dtype=u.dtype)
    ys = []
    for t in range(u.shape[1]):
        h = decay[:, t] * h + inp[:, t]
        ys.append(torch.einsum("bcn,bn->bc", h, c[:, t]))
    return torch.stack(ys, dim=1) + u * d


def local_attention(q, k, v, window):
    """Sliding-window causal attention as a PyTorch 1.13 user writes it: the causal scores with a
    band mask, query i seeing keys i-window..i. q, k, v (B,H,T,D)."""
    T, D = q.shape[2], q.shape[3]
    scores = q @ k.transpose(-1, -2) / D**0.5
    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T).unsqueeze(0)
    mask = (j > i) | (j < i - window)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def causal_attention(q, k, v):
    """Causal softmax attention as a PyTorch 1.13 user writes it (no fused SDPA before 2.0): the
    (T,T) scores, -inf above the diagonal, softmax, product. q, k, v (B,H,T,D)."""
    T, D = q.shape[2], q.shape[3]
    scores = q @ k.transpose(-1, -2) / D**0.5
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
