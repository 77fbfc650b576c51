"""The number work inside one chunk of `kvstats.quant.mse.MSEQuantizer`.

mse.py decides what is coded: validation, norms, the chunk plan and the codes stored.
This module holds what a chunk then computes, from its codebook and rotation alone:

- `_centroids_of` and `_centroids_of_packed`: the codebook's centroid of every unpacked or
  packed code, through small cached tables (one gather per pair of codes, or per
  packed byte, instead of one per code);
- `_roundtrip_pieces`: scaling, rotation, coding, lookup, inverse rotation and rescaling
  of a chunk, run on cache-sized pieces of its rows, bit for bit the chunk-at-a-time
  steps (`MSEQuantizer._codes` and `_unrotate`).

Everything here is private to the MSE and Prod coders (docs/internals.md, mse.py).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from kvstats.quant.codebook import Codebook
from kvstats.quant.packing import pack_codes, unpack_codes
from kvstats.quant.rotation import _FWHT_BLOCK, Rotation, _butterfly_rows, _fwht

__all__: list[str] = []


@lru_cache(maxsize=64)
def _byte_table(codebook: Codebook, dtype: str) -> np.ndarray:
    """Centroids of the ``8 // bits`` codes packed in each byte value (little order)."""
    bits = codebook.bits
    shifts = np.arange(8 // bits) * bits
    idx = (np.arange(256)[:, None] >> shifts) & (2 ** bits - 1)
    return codebook.centroids.astype(dtype)[idx]


@lru_cache(maxsize=64)
def _pair_table(codebook: Codebook, dtype: str) -> np.ndarray:
    """Centroids of the two codes in each little-endian uint16 ``c0 + 256 c1`` (c < 2**bits)."""
    top = 2 ** codebook.bits - 1
    idx = np.arange(256 * top + top + 1)
    table = codebook.centroids.astype(dtype)[np.stack([np.minimum(idx % 256, top), idx // 256], -1)]
    table.setflags(write=False)
    return table


def _centroids_of(codebook: Codebook, codes: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Centroids of unpacked uint8 codes ``(..., n)``, in ``dtype``."""
    if codebook.bits <= 6 and codes.shape[-1] % 2 == 0 and codes.flags.c_contiguous:
        # one gather per pair of codes halves the gathers (~3x faster); the table
        # (<= 16192 pairs for 6 bits) stays small enough for the cache
        pairs = codes.view("<u2")
        table = _pair_table(codebook, dtype.char)  # .char: ~100x cheaper than .name
        return np.take(table, pairs, axis=0, mode="clip").reshape(codes.shape)
    return np.take(codebook.centroids.astype(dtype), codes, mode="clip")


def _centroids_of_packed(codebook: Codebook, packed: np.ndarray, n_coords: int,
                         dtype: np.dtype) -> np.ndarray:
    """Centroid of every code of ``packed`` (``n_coords`` per row), ``(..., n_coords)`` in ``dtype``."""
    if 8 % codebook.bits == 0:
        # whole codes per byte: one gather of a (256, 8/bits) table of centroids per
        # packed byte replaces unpacking
        table = _byte_table(codebook, dtype.name)
        y = np.take(table, packed, axis=0).reshape(packed.shape[:-1] + (-1,))
        return y[..., :n_coords]
    idx = unpack_codes(packed, codebook.bits, n_coords)
    return np.take(codebook.centroids.astype(dtype), idx, mode="clip")


def _roundtrip_pieces(codebook: Codebook, rotation: Rotation, xs: np.ndarray, inv: np.ndarray,
                      stored: np.ndarray, out: np.ndarray, packed: np.ndarray | None,
                      piece_rows: int) -> None:
    """Scaling, rotation, coding, lookup and the inverse rotation of a chunk ``xs``
    (inverse norms ``inv``, stored norms ``stored``, both in ``xs.dtype``) into ``out``,
    and its packed codes into ``packed`` when given, run on cache-sized pieces of its rows
    (each step on data still in the core's cache instead of one pass over the chunk per
    step). A Hadamard or identity ``rotation`` only.

    A Hadamard piece starts at a multiple of `_butterfly_rows` rows from the chunk's
    start and holds as many, so its fwht rounds as the fwht of the whole chunk
    (`kvstats.quant.rotation._fwht`): the numbers equal the chunk-at-a-time steps bit
    for bit. With draws a piece may span two draws; each row gets its draw's signs.
    Without a rotation a piece holds ``piece_rows`` rows.
    """
    d, d_pad, dtype, bits = rotation.dim, rotation.out_dim, xs.dtype, codebook.bits
    hadamard = rotation.kind == "hadamard"
    n = xs.shape[-2] if rotation.draws else 1  # rows per draw (one draw: any)
    x2, o2 = xs.reshape(-1, d), out.reshape(-1, d)
    inv2, st2 = inv.reshape(-1), stored.reshape(-1)
    p2 = None if packed is None else packed.reshape(-1, packed.shape[-1])
    if hadamard:
        step = _butterfly_rows(d_pad, min(_FWHT_BLOCK, d_pad))
        # the 1/sqrt(d_pad) normalisation folded into the signs, as Rotation._apply
        s_fwd = (rotation.signs / np.sqrt(d_pad)).astype(dtype, copy=False)
        s_inv = (rotation.signs[..., :d] / np.sqrt(d_pad)).astype(dtype, copy=False)
    else:
        step = piece_rows
    total = x2.shape[0]
    for a in range(0, total, step):
        b = min(a + step, total)
        u = x2[a:b] * inv2[a:b, None]
        if hadamard:
            if d_pad != d:
                y = np.zeros((b - a, d_pad), dtype)
                y[:, :d] = u
            else:
                y = u
            for j, lo, hi in _draw_runs(a, b, n, bool(rotation.draws)):
                np.multiply(y[lo:hi], s_fwd[j] if j is not None else s_fwd, out=y[lo:hi])
            y = _fwht(y)
        else:
            y = u
        codes = codebook._encode(y)
        if p2 is not None:
            p2[a:b] = pack_codes(codes, bits)
        z = _centroids_of(codebook, codes, dtype)
        if hadamard:
            z = _fwht(z)[:, :d]
            for j, lo, hi in _draw_runs(a, b, n, bool(rotation.draws)):
                z[lo:hi] *= s_inv[j] if j is not None else s_inv
        np.multiply(z, st2[a:b, None], out=o2[a:b])


def _draw_runs(a: int, b: int, n: int, draws: bool) -> list[tuple[int | None, int, int]]:
    """Rows ``[a, b)`` of a chunk of draws of ``n`` rows each, as ``(draw, lo, hi)`` runs
    relative to ``a`` (one run with draw None when the rotation has no draws)."""
    if not draws:
        return [(None, 0, b - a)]
    return [(j, max(a, j * n) - a, min(b, (j + 1) * n) - a) for j in range(a // n, (b - 1) // n + 1)]
