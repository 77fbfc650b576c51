"""Shared by the code-reading attention tests: random K/V/queries and the dense reference."""

import torch


def random_kv(b, h, n, d, seed):
    """Keys (with a few large channels, as real keys have: qjl's outliers, KIVI's reason for
    per-channel keys), values, and queries for 2·h attention heads (GQA over h KV heads)."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.ones(d)
    scale[:3] = 6.0
    return (torch.randn(b, h, n, d, generator=g) * scale, torch.randn(b, h, n, d, generator=g),
            torch.randn(b, 2 * h, n, d, generator=g))


def dense_attention(q, K, V, mask, n_rep):
    """softmax(q Kᵀ/√d + mask) V over repeat_kv'd K, V: the decoded-cache reference (float64)."""
    K, V = K.repeat_interleave(n_rep, 1).double(), V.repeat_interleave(n_rep, 1).double()
    s = q.double() @ K.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        s = s + mask.double()
    return (torch.softmax(s, -1) @ V).transpose(1, 2)
