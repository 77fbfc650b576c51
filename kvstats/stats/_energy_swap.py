"""Energy test internals: the within-pair swap relabellings of ``energy_test(paired=True)``.

Each swap labelling of m pairs is a sign vector s, and its statistic follows from one m x m
quadratic form Q = s'Cs with C = D^XX + D^YY - D^XY - D^XY' and the pooled distance total T
(derivation in :mod:`kvstats.stats.energy`'s module docstring). Also the exact test's
enumeration of the swap group, the paired argument check and the group's smallest exact
p-value, shared with :func:`kvstats.stats.sequential.energy_test_sequential`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial.distance import cdist

from ._base import check_bool
from ._energy_core import _BLOCK, _CHUNK_BYTES, _DRAW_BYTES


def _random_keeps(rng: np.random.Generator, k: int, m: int,
                  out: np.ndarray | None = None) -> np.ndarray:
    """(k, m) bool: True where pair i keeps its order (no swap), each with probability 1/2.

    One uniform per pair, drawn row-major in row chunks (``rng.random``), so drawing k1
    rows then k2 gives the same rows as drawing k1 + k2 at once (what the sequential test
    relies on). These are the generator calls of every paired relabelling.
    """
    if out is None:
        out = np.empty((k, m), dtype=bool)
    rows_per_draw = max(1, _DRAW_BYTES // (8 * m))
    for start in range(0, k, rows_per_draw):
        stop = min(k, start + rows_per_draw)
        out[start:stop] = rng.random((stop - start, m)) < 0.5
    return out


def _random_swaps(rng: np.random.Generator, k: int, m: int,
                  out: np.ndarray | None = None) -> np.ndarray:
    """(k, 2m) bool pooled labellings of the swaps :func:`_random_keeps` draws (same calls).

    Row i of X is pooled position i, its partner in Y position m + i; a labelling marks x
    at i (no swap) or at m + i (swap). The tests' reference for the pooled-label core.
    """
    if out is None:
        out = np.empty((k, 2 * m), dtype=bool)
    keep = _random_keeps(rng, k, m)
    out[:, :m] = keep
    out[:, m:] = ~keep
    return out


class _SwapForms:
    """Q = s'Cs for sign vectors s of the m pairs (X_i, Y_i); C = D^XX + D^YY - D^XY - D^XY'.

    The blocks C_IJ (I <= J; C is exactly symmetric) are built from ``cdist`` of the
    given rows, kept when their upper triangle fits in ``cache_bytes`` (else recomputed
    for each chunk of sign vectors), and ``total`` (the pooled distance sum T) is summed
    on the first pass. The formula is derived in :mod:`kvstats.stats.energy`'s docstring.
    """

    def __init__(self, X: np.ndarray, Y: np.ndarray, block: int | None = None,
                 cache_bytes: int = _CHUNK_BYTES):
        m = len(X)
        if block is None:
            # as the pooled core: blocks of at most _BLOCK rows, at least 4 when m allows,
            # so little work is spent below the diagonal
            n_blocks = max(-(-m // _BLOCK), min(4, -(-m // 256)))
            block = -(-m // n_blocks)
        self.X, self.Y, self.m, self.block = X, Y, m, block
        # sign vectors per chunk: a chunk's (chunk, m) signs and one (chunk, block) product,
        # float64, within _CHUNK_BYTES
        self.chunk = max(1, _CHUNK_BYTES // (8 * (m + min(block, m))))
        self.starts = range(0, m, block)
        cached = sum(min(block, m - i0) * min(block, m - j0)
                     for i0 in self.starts for j0 in self.starts if j0 >= i0)
        self._cache: dict[tuple[int, int], np.ndarray] | None = (
            {} if 8 * cached <= cache_bytes else None)
        self.total = math.nan
        self._total = 0.0

    def _c_block(self, i0: int, j0: int, first: bool) -> np.ndarray:
        if self._cache is not None and (i0, j0) in self._cache:
            return self._cache[i0, j0]
        b = self.block
        xi, yi, xj, yj = (a[o:o + b] for a, o in ((self.X, i0), (self.Y, i0),
                                                   (self.X, j0), (self.Y, j0)))
        same = cdist(xi, xj)
        same += cdist(yi, yj)
        cross = cdist(xi, yj)        # D^XY_IJ
        cross += cdist(yi, xj)       # (D^XY')_IJ = D^XY_JI'
        if first:
            w = 1.0 if i0 == j0 else 2.0
            self._total += w * (same.sum() + cross.sum())
        same -= cross
        if self._cache is not None:
            self._cache[i0, j0] = same
        return same

    def forms(self, keep: np.ndarray, chunk: int | None = None) -> np.ndarray:
        """Q for each row of ``keep`` (k, m) bool (True: s_i = +1); sets ``total``."""
        k, m, b = len(keep), self.m, self.block
        chunk = max(1, min(k, self.chunk if chunk is None else chunk))
        q = np.empty(k)
        for c0 in range(0, k, chunk):
            s = keep[c0:c0 + chunk].astype(np.float64)     # (chunk, m): rows are s, +-1
            s *= 2.0
            s -= 1.0
            first = c0 == 0 and math.isnan(self.total)
            acc = np.zeros(len(s))
            for i0 in self.starts:
                for j0 in self.starts:
                    if j0 < i0:
                        continue
                    c_ij = self._c_block(i0, j0, first)
                    # s_I' C_IJ s_J for every row at once: (S_J C_IJ') row-wise dot S_I
                    contrib = np.einsum("ki,ki->k", s[:, i0:i0 + b], s[:, j0:j0 + b] @ c_ij.T)
                    acc += contrib if j0 == i0 else 2.0 * contrib
            if first:
                self.total = self._total
            q[c0:c0 + chunk] = acc
        return q


def _swap_statistics(q: np.ndarray, total: float, m: int, kind: str) -> np.ndarray:
    """Energy distance of each swap labelling from Q = s'Cs and the pooled total T.

    V = -Q/m^2, U = -(T + (2m - 1) Q)/(2 m^2 (m - 1)) (:mod:`kvstats.stats.energy`'s docstring): the statistic
    :func:`._energy_core._permutation_statistics` gives the same labelling, to rounding.
    """
    if kind == "V":
        return -q / float(m * m)
    return -(total + (2 * m - 1) * q) / (2.0 * m * m * (m - 1))


def _check_paired(paired: bool, n_x: int, n_y: int) -> bool:
    """``paired`` as a bool; a ``ValueError`` naming X and Y when paired rows do not match."""
    paired = check_bool(paired, "paired")
    if paired and n_x != n_y:
        raise ValueError(f"paired=True needs X and Y of the same length (row i of X is paired "
                         f"with row i of Y); received len(X)={n_x}, len(Y)={n_y}")
    return paired


def _differing(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """(m,) bool: the pairs whose rows differ. A pair with X_i = Y_i swaps into itself (its
    row and column of C are exactly 0), so only these pairs' swaps change the statistic."""
    return (X != Y).any(axis=1)


def _all_keeps(m: int) -> np.ndarray:
    """(2**(m - 1), m) bool: every swap vector s of m pairs with s_1 = +1 (True: kept), the
    observed one (all kept) first. s and -s give the same Q = s'Cs bit for bit (negation is
    exact), so these are one representative per pair of swaps; m = 0: the one empty row."""
    if m == 0:
        return np.ones((1, 0), dtype=bool)
    k = np.arange(2 ** (m - 1), dtype="<u4")
    bits = np.unpackbits(k.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    keep = np.ones((len(k), m), dtype=bool)
    keep[:, 1:] = bits[:, :m - 1] == 0
    return keep


def _exact_swap_statistics(X: np.ndarray, Y: np.ndarray, kind: str) -> tuple[np.ndarray, float]:
    """(statistic of every swap class, the observed one first; pooled distance total T)."""
    m = len(X)
    forms = _SwapForms(X, Y)
    q = forms.forms(np.ones((1, m), dtype=bool))    # the observed Q; sets the total T
    differ = _differing(X, Y)
    if differ.all():
        q = forms.forms(_all_keeps(m))
    elif differ.any():
        # an equal pair's row and column of C are exactly 0: its swap changes nothing, so
        # only the differing pairs' swaps are enumerated, on their own (smaller) form
        q = _SwapForms(X[differ], Y[differ]).forms(_all_keeps(int(differ.sum())))
    return _swap_statistics(q, forms.total, m, kind), forms.total


def _paired_min_p(X: np.ndarray, Y: np.ndarray) -> float:
    """min(1, 2**(1 - m)), m the pairs whose rows differ: the smallest exact p-value of the
    within-pair swap group.

    Of the 2**m swaps of the differing pairs, the observed labelling and the full swap give
    the same energy statistic (it is symmetric in X and Y when n_x = n_y), so no data give
    an exact p-value below 2/2**m; a pair with X_i = Y_i swaps into itself and adds nothing
    (no differing pair: every relabelling is the observed one, p = 1).
    """
    m = int(np.count_nonzero(_differing(X, Y)))
    return min(1.0, float(np.ldexp(1.0, 1 - m)))
