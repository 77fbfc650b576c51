"""The exact floor of an energy test on tied 6D profiles, by enumerating count vectors.

On pooled points with few distinct values the energy statistic of a relabelling depends
only on how many copies of each distinct point (two samples), or how many pairs of each
distinct pair (within-pair swaps), go to the first sample: a count vector k, shared by
Π C(m_j, k_j) relabellings. Enumerating the count vectors gives the least p-value any
relabelling of these data can get, exactly, where the enumeration of relabellings (which
a drawn row does not do) would be far too long. :func:`kvstats.analysis.resolution.
tied_permutation_floor` only bounds it from below (the least weight of one k, not the
weight of the most extreme k and of those that tie with it), up to 925 times too low on
6, 12, 6 copies of three collinear points, 12 against 12.
"""

from __future__ import annotations

import math

import numpy as np
from jaxtyping import Float
from scipy.spatial.distance import cdist
from scipy.special import gammaln

from kvstats._checks import check_int

#: Count vectors enumerated at most (beyond: None, and a report row keeps the floor of
#: distinct profiles in general position, ``tied_permutation_floor``).
MAX_COUNT_VECTORS = 10**6
_CHUNK = 2**15


def _n_vectors(m: np.ndarray, total: int | None) -> float:
    """How many count vectors 0 <= k_j <= m_j there are (with Σ k_j = ``total`` if given),
    as a float (inf when huge): the coefficient of z^total in Π (1 + z + … + z^m_j)."""
    if total is None:
        return float(np.exp(np.log1p(m).sum()))
    poly = np.zeros(total + 1)
    poly[0] = 1.0
    for mj in m:   # one convolution per distinct point, truncated at the degree needed
        c = np.cumsum(poly)
        poly = c - np.concatenate([np.zeros(mj + 1), c[:total - mj]]) if mj < total else c
        if poly[total] > MAX_COUNT_VECTORS * 1e3:
            return math.inf
    return float(poly[total])


def _count_vectors(m: np.ndarray, total: int | None) -> np.ndarray:
    """(V, J) int: every k with 0 <= k_j <= m_j (and Σ k_j = ``total`` if given), built one
    coordinate at a time, each prefix extended only by the values that can still reach
    ``total`` (so no intermediate array outgrows the result)."""
    k = np.zeros((1, 0), dtype=np.int32)
    rest = np.concatenate([np.cumsum(m[::-1])[::-1][1:], [0]])   # capacity after point j
    for j, mj in enumerate(m):
        s = k.sum(axis=1, dtype=np.int64)
        lo = np.zeros_like(s) if total is None else np.maximum(0, total - s - rest[j])
        hi = np.full_like(s, mj) if total is None else np.minimum(mj, total - s)
        n_new = hi - lo + 1                                   # >= 1: every prefix reaches total
        row = np.repeat(np.arange(len(k)), n_new)
        new = lo[row] + np.arange(len(row)) - np.repeat(np.cumsum(n_new) - n_new, n_new)
        k = np.concatenate([k[row], new[:, None].astype(np.int32)], axis=1)
    return k


def tied_energy_floor(X: Float[np.ndarray, "n_x d"], Y: Float[np.ndarray, "n_y d"], *,
                      paired: bool = False, standardize: bool = True,
                      max_vectors: int = MAX_COUNT_VECTORS) -> float | None:
    """The least p-value any relabelling of ``X`` and ``Y`` gets from the exact energy test
    (V-statistic, the report's), or None where that takes more than ``max_vectors`` count
    vectors to find.

    Two samples: k_j copies of distinct pooled point j go to the first sample (Σ k = n_x),
    weight Π C(m_j, k_j) of the C(N, n_x) relabellings. Paired: of the m_j pairs equal to
    the distinct pair (a_j, b_j) or (b_j, a_j), k_j put a_j in the first sample, weight
    Π C(m_j, k_j) of the 2^m swaps (pairs with equal rows swap into themselves). The floor
    is the weight of the count vectors whose statistic is within the energy tests' tie
    tolerance of the largest (``_energy_core._tie_tolerance``) over the total: the exact
    p-value of the most extreme relabelling. Points are compared after the test's pooled
    standardisation; the caller merges values equal up to rounding first, as the test does.

    Parameters
    ----------
    X, Y : array_like of shape (n, d)
        The two samples (paired: the same n, row i of each a pair), finite.
    paired : bool
    standardize : bool
        Scale each coordinate by its pooled spread first, as ``energy_test(standardize=True)``.
    max_vectors : int >= 1
        The most count vectors enumerated (Π (m_j + 1), with Σ k = n_x for two samples).

    Returns
    -------
    float or None
        None: too many count vectors to enumerate (many distinct points; a report row then
        keeps :func:`~kvstats.analysis.resolution.tied_permutation_floor`, which is exact
        unless distinct profiles tie by coincidence, as the untied floor assumes).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.analysis._tied_floor import tied_energy_floor
    >>> pts = np.repeat([0.0, 1.0, 2.0], [6, 12, 6])[:, None]   # B the midpoint of A, C
    >>> X, Y = pts[np.r_[0:12]], pts[np.r_[12:24]]              # 6 A + 6 B against 6 B + 6 C
    >>> round(tied_energy_floor(X, Y), 6)     # the bound tied_permutation_floor gives 7.4e-07
    0.000684
    >>> round(tied_energy_floor(np.arange(4.0), np.arange(4.0) + 9), 6)   # 2/C(8, 4)
    0.028571
    >>> round(tied_energy_floor([0.0, 1, 5], [10.0, 20, 40], paired=True), 6)   # 2**(1 - 3)
    0.25
    """
    from kvstats.stats._energy_core import _prepare, _tie_tolerance, _unit_scale

    X, Y, _ = _prepare(X, Y, standardize, "V")
    max_vectors = check_int(max_vectors, "max_vectors", low=1)
    n_x, n_y = len(X), len(Y)
    if paired and n_x != n_y:
        raise ValueError(f"X and Y must have the same number of rows when paired; received "
                         f"{n_x} and {n_y}")
    Z, _ = _unit_scale(np.concatenate([X, Y]))
    pts, inv = np.unique(Z, axis=0, return_inverse=True)
    inv = inv.ravel()
    size = len(pts)
    pooled = np.bincount(inv, minlength=size).astype(np.float64)
    if paired:
        a, b = inv[:n_x], inv[n_x:]
        differ = a != b
        base = np.bincount(a[~differ], minlength=size).astype(np.float64)   # equal pairs: both
        types, m = np.unique(np.sort(np.stack([a[differ], b[differ]], axis=1), axis=1), axis=0,
                             return_counts=True)
        total_vectors, log_all = _n_vectors(m, None), m.sum() * math.log(2)
    else:
        m, total_vectors = pooled.astype(np.int64), _n_vectors(pooled.astype(np.int64), n_x)
        log_all = gammaln(n_x + n_y + 1) - gammaln(n_x + 1) - gammaln(n_y + 1)
    if total_vectors > max_vectors:
        return None
    if m.size == 0 or log_all == 0.0:
        return 1.0          # no differing pair, or one relabelling: p = 1
    K = _count_vectors(m, None if paired else n_x)
    log_w = (gammaln(m + 1) - gammaln(K + 1) - gammaln(m - K + 1)).sum(axis=1)
    if paired:   # k_j pairs of type j put its first point in X, the m_j - k_j others its second
        lo = np.zeros((len(m), size))
        hi = np.zeros((len(m), size))
        lo[np.arange(len(m)), types[:, 0]] = 1.0
        hi[np.arange(len(m)), types[:, 1]] = 1.0
        cx = base + K @ lo + (m - K) @ hi
    else:
        cx = K.astype(np.float64)
    D = cdist(pts, pts)
    r = D @ pooled
    total = float(pooled @ r)
    stat = np.empty(len(K))
    for c0 in range(0, len(K), _CHUNK):   # the core's quadratic forms, on counts of points
        c = cx[c0:c0 + _CHUNK]
        s_xx = np.einsum("vi,vi->v", c @ D, c)
        t = c @ r
        s_yy = total - 2.0 * t + s_xx
        stat[c0:c0 + _CHUNK] = 2.0 * (t - s_xx) / (n_x * n_y) - s_xx / n_x**2 - s_yy / n_y**2
    top = stat >= stat.max() - _tie_tolerance(total, n_x + n_y)
    return float(min(1.0, np.exp(log_w[top] - log_all).sum()))
