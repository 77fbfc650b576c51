"""Energy test internals: data preparation, overflow scaling and the pooled-label core.

What :func:`kvstats.stats.energy_distance`, :func:`kvstats.stats.energy_test` and
:func:`kvstats.stats.sequential.energy_test_sequential` share: the checks, the pooled
standardisation and the power-of-two scaling of the samples, the V/U combination of the
distance sums, and the free (two-sample) relabelling core, which evaluates the statistic of
every label row a through s_xx = a'Da and a'r without ever holding the pooled distance
matrix D (formulas in :mod:`kvstats.stats.energy`'s module docstring). The within-pair swap
form is :mod:`._energy_swap`.
"""

from __future__ import annotations

import math

import numpy as np
from jaxtyping import Float
from scipy.spatial.distance import cdist

from kvstats._checks import _describe, as_float_array, check_choice
from kvstats._scaling import max_exponent, needs_scaling

from ._base import check_bool

# A sample: rows are observations, columns the p dimensions; 1-D input is p = 1.
XSample = Float[np.ndarray, "n_x p"] | Float[np.ndarray, "n_x"]
YSample = Float[np.ndarray, "n_y p"] | Float[np.ndarray, "n_y"]

KINDS = ("V", "U")
# ``method`` of the energy tests (energy.ENERGY_METHODS): "exact" enumerates every
# relabelling (up to the statistic's symmetry), "permutation" draws them at random, "auto"
# enumerates when that costs at most _EXACT_AUTO_WORK multiply-adds (relabellings x size^2,
# size the differing pairs or the pooled rows): every paired design up to 20 differing pairs
# (2**19 swap classes, ~0.1 s on one core); two samples while C(n, n_x) n**2 <= 2**28
# (halved at n_x = n_y): every split of up to 21 points, of 22 all but 10 vs 12 (11 vs 11:
# 352716 classes, ~0.1 s), and uneven larger ones (the largest n_y per n_x = 1..10: 644
# 150 67 40 28 21 17 15 13 11). "exact" asked for is refused beyond _EXACT_MAX_WORK
# (seconds, ~50 MB of labels).
METHODS = ("auto", "exact", "permutation")
_EXACT_AUTO_WORK = 2**28
_EXACT_MAX_WORK = 2**30
# Distance blocks are at most _BLOCK x _BLOCK float64 (32 MB); one chunk of permutation
# labels and its products stay within about _CHUNK_BYTES. Random keys are drawn
# _DRAW_BYTES at a time: smaller arrays than a chunk's are cheaper to fill and partition
# (experiments/bench_energy.py --versus-sequential), and the row count per draw does not
# change the stream (rng.random fills rows in order).
_BLOCK = 2048
_CHUNK_BYTES = 64 * 2**20
_DRAW_BYTES = 8 * 2**20


def _as_points(a: XSample | YSample, name: str) -> Float[np.ndarray, "n p"]:
    arr = as_float_array(a, name, min_ndim=1)  # rejects empty, NaN and inf with the name
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, dim); received {_describe(arr)}")
    return arr.astype(np.float64, copy=False)


def _prepare(X: XSample, Y: YSample, standardize: bool, kind: str,
             ) -> tuple[Float[np.ndarray, "n_x p"], Float[np.ndarray, "n_y p"], bool]:
    X, Y = _as_points(X, "X"), _as_points(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same number of columns (dimension); received "
                         f"X with {X.shape[1]} and Y with {Y.shape[1]}")
    standardize = check_bool(standardize, "standardize")
    check_choice(kind, "kind", KINDS)
    if kind == "U" and min(len(X), len(Y)) < 2:
        raise ValueError(f"kind='U' needs at least 2 points in each sample; received "
                         f"n_x={len(X)}, n_y={len(Y)}")
    if standardize:
        # Pooled over both samples, i.e. invariant under relabelling: the permutation test
        # stays exact. A constant column contributes no distance and is left unscaled.
        pooled = np.concatenate([X, Y])
        if needs_scaling(pooled):
            # the variance of data beyond ~1e120 (or below ~1e-120) over/underflows; each
            # column scaled by a power of two first (exact) gives the same z-scores
            col_exp = max_exponent(pooled, axis=0)
            X, Y, pooled = (np.ldexp(a, -col_exp) for a in (X, Y, pooled))
        # column-major whatever the input's layout: the sums (and so the last bits) then do
        # not depend on it; the report passes Fortran-ordered profiles, whose bits this keeps
        scale = (np.asfortranarray(pooled).std(axis=0, ddof=1) if len(pooled) > 1
                 else np.ones(X.shape[1]))
        scale = np.where(scale > 0, scale, 1.0)
        X, Y = X / scale, Y / scale
    return X, Y, standardize


def _unit_scale(Z: Float[np.ndarray, "n p"]) -> tuple[Float[np.ndarray, "n p"], int]:
    """``(Z * 2**-e, e)``: e = 0 for data of ordinary magnitude, else max|Z * 2**-e| ~ 1.

    The energy statistic is homogeneous of degree 1, so statistics of the scaled data
    times 2**e are those of Z, bit for bit when nothing over/underflowed (see
    :mod:`kvstats._scaling`); data beyond ~1e120 or below ~1e-120 would overflow
    or underflow the squared distances (NaN or 0 statistics) without it.
    """
    if not needs_scaling(Z):
        return Z, 0
    e = int(max_exponent(Z))
    return np.ldexp(Z, -e), e


def _unscale(values: np.ndarray | float, e: int, what: str) -> np.ndarray | float:
    """``values * 2**e``, or a ValueError when that leaves the float64 range."""
    with np.errstate(over="ignore"):       # refused just below
        out = np.ldexp(values, e)
    if not np.isfinite(out).all():
        raise ValueError(f"X and Y: the {what} exceeds the float64 range (data of magnitude "
                         f"~2**{e}); rescale X and Y (the energy test is scale invariant)")
    return out



def _combine(s_xx, s_yy, s_xy, n_x, n_y, kind):
    mean_xy = s_xy / (n_x * n_y)
    if kind == "V":
        mean_xx, mean_yy = s_xx / n_x**2, s_yy / n_y**2
    else:
        mean_xx, mean_yy = s_xx / (n_x * (n_x - 1)), s_yy / (n_y * (n_y - 1))
    return 2 * mean_xy - mean_xx - mean_yy, mean_xy, mean_xx, mean_yy



def _chunk_rows(block: int) -> int:
    """Label rows per chunk: their columns of two blocks (float64) plus the product, within
    _CHUNK_BYTES."""
    return max(1, _CHUNK_BYTES // (3 * 8 * block))


def _pooled_blocking(n: int) -> tuple[int, int]:
    """(block, chunk): the distance block size for n pooled points and the label rows per
    chunk of :func:`_label_quadratic_forms`, whose chunk boundaries energy_test's batches
    follow (a row's statistic can differ in the last bits with its place in a chunk)."""
    # equal blocks of at most _BLOCK rows, and at least 4 of them when n allows: only the
    # upper triangle is multiplied, so finer blocks waste less work on diagonal blocks
    n_blocks = max(-(-n // _BLOCK), min(4, -(-n // 512)))
    block = -(-n // n_blocks)
    return block, _chunk_rows(min(block, n))


def _label_quadratic_forms(Z: np.ndarray, labels: np.ndarray, block: int | None = None,
                           chunk: int | None = None):
    """s_xx = a'Da and t = a'r for every row a of ``labels`` (K, n) bool; r = D 1, S = 1'r.

    D (pooled distances of Z) is never held whole: the upper-triangle blocks D_IJ
    (I <= J) are computed on the fly, once per chunk of ``chunk`` label rows, and each
    contributes a_I' D_IJ a_J (twice off the diagonal) for all labellings at once via
    the product D_IJ @ A_J. Accumulation is in float64.
    """
    n = len(Z)
    k = len(labels)
    if block is None:
        block = _pooled_blocking(n)[0]
    if chunk is None:
        chunk = _chunk_rows(min(block, n))
    chunk = max(1, min(k, chunk))
    s_xx = np.zeros(k)
    t = np.zeros(k)
    r = np.zeros(n)
    starts = range(0, n, block)
    for c0 in range(0, k, chunk):
        lab = labels[c0:c0 + chunk]
        acc = np.zeros(len(lab))
        for i0 in starts:
            zi = Z[i0:i0 + block]
            a_i = lab[:, i0:i0 + block].T.astype(np.float64)
            for j0 in starts:
                if j0 < i0:
                    continue
                d_ij = cdist(zi, Z[j0:j0 + block])
                if c0 == 0:
                    r[i0:i0 + block] += d_ij.sum(axis=1)
                    if j0 != i0:
                        r[j0:j0 + block] += d_ij.sum(axis=0)
                a_j = a_i if j0 == i0 else lab[:, j0:j0 + block].T.astype(np.float64)
                contrib = np.einsum("ik,ik->k", a_i, d_ij @ a_j)
                acc += contrib if j0 == i0 else 2.0 * contrib
        s_xx[c0:c0 + chunk] = acc
        for j0 in starts:   # r is complete after chunk 0; column blocks keep memory bounded
            t[c0:c0 + chunk] += lab[:, j0:j0 + block].astype(np.float64) @ r[j0:j0 + block]
    return s_xx, t, r.sum()


def _permutation_statistics(Z: np.ndarray, labels: np.ndarray, kind: str, **blocking):
    """Energy distance for each labelling (rows of ``labels``, True = x) of the pooled Z.

    Returns (statistics, S = sum of all pooled distances), computed on Z as it is: data
    beyond ~1e154 overflow (inf/NaN, which the caller must refuse). :func:`energy_test`
    first scales Z by :func:`_unit_scale`; :mod:`kvstats.stats.sequential` refuses
    non-finite values.
    """
    n_x = int(labels[0].sum())
    n_y = len(Z) - n_x
    s_xx, t, total = _label_quadratic_forms(Z, labels, **blocking)   # t = a'r = s_xx + s_xy
    s_xy = t - s_xx
    s_yy = total - 2.0 * t + s_xx
    stat, *_ = _combine(s_xx, s_yy, s_xy, n_x, n_y, kind)
    return stat, total


def _all_subsets(n: int, k: int) -> np.ndarray:
    """(C(n, k), n) bool: every k-subset of range(n), in lexicographic order (the first k
    positions first), built column by column from the subsets of the last positions."""
    # tab[j]: the j-subsets of the positions added so far (the last i), kept only for the j
    # that can still reach k
    tab = {0: np.zeros((1, 0), dtype=bool)}
    for i in range(1, n + 1):
        new = {}
        for j in range(max(0, k - (n - i)), min(i, k) + 1):
            parts = [np.concatenate([np.full((len(tab[jj]), 1), bit), tab[jj]], axis=1)
                     for jj, bit in ((j - 1, True), (j, False)) if jj in tab]
            new[j] = np.concatenate(parts)
        tab = new
    return tab[k]


def _free_classes(n_x: int, n_y: int) -> int:
    """Relabellings the exact two-sample test evaluates: C(n, n_x), half that for n_x = n_y
    (a labelling and its complement give the same statistic, so one per pair of them)."""
    return math.comb(n_x + n_y, n_x) // (2 if n_x == n_y else 1)


def _free_labels(n_x: int, n_y: int) -> np.ndarray:
    """The :func:`_free_classes` labellings as (K, n) bool rows, the observed one (the first
    n_x pooled rows) first: every n_x-subset, or for n_x = n_y those holding row 0."""
    if n_x != n_y:
        return _all_subsets(n_x + n_y, n_x)
    rest = _all_subsets(n_x + n_y - 1, n_x - 1)
    return np.concatenate([np.ones((len(rest), 1), dtype=bool), rest], axis=1)


def _exact_classes(method: str, n_x: int, n_y: int, differing: int | None) -> int | None:
    """The relabelling classes the exact test enumerates, or None: draw at random.

    ``differing``: the pairs whose rows differ (paired), None for two samples. "auto"
    enumerates within _EXACT_AUTO_WORK, "exact" within _EXACT_MAX_WORK (a ValueError
    beyond), "permutation" never.
    """
    check_choice(method, "method", METHODS)
    if method == "permutation":
        return None
    if differing is not None:
        size, log_classes = differing, max(differing - 1, 0) * math.log(2)
    else:
        size = n_x + n_y
        log_classes = (math.lgamma(size + 1) - math.lgamma(n_x + 1) - math.lgamma(n_y + 1)
                       - (math.log(2) if n_x == n_y else 0.0))
    # beyond e**64 (6e27) classes, far past either bound, the count is neither computed (the
    # exact C(n, n_x) costs time) nor printed (it may not fit a float): only its logarithm
    big = log_classes > 64.0
    if not big:
        classes = 2 ** max(differing - 1, 0) if differing is not None else _free_classes(n_x, n_y)
        if classes * size**2 <= (_EXACT_AUTO_WORK if method == "auto" else _EXACT_MAX_WORK):
            return classes
    if method == "auto":
        return None
    what = f"{size} differing pairs" if differing is not None else f"{n_x} vs {n_y}"
    log_work = log_classes + 2 * math.log(size)
    raise ValueError(f"method='exact' would enumerate {_exp_text(log_classes)} relabellings "
                     f"({what}), {_exp_text(log_work)} multiply-adds, more than the limit "
                     f"{float(_EXACT_MAX_WORK):.3g}; use method='auto' or 'permutation' "
                     "(Monte Carlo)")


def _exp_text(log_value: float) -> str:
    """e**log_value written like f"{value:.3g}" (1.07e+09), for values beyond float64 too."""
    decade, rest = divmod(log_value / math.log(10), 1.0)
    mantissa = f"{10**rest:.3g}"
    if mantissa == "10":     # 9.9996 rounds up: 1e+(decade + 1)
        mantissa, decade = "1", decade + 1
    return f"{mantissa}e+{int(decade):02d}"


def _tie_tolerance(total: float, n: int) -> float:
    """The energy tests' tie rule: a relabelling's statistic counts as >= T_obs when within
    1e-10 of the mean pooled distance (``total`` over the n (n - 1) ordered pairs) below it.

    A statistic equal to T_obs in exact arithmetic can land a few ulps of the distances below
    it (another summation order), so the tolerance is relative to the scale of the distances,
    not to T_obs, which is ~0 exactly when ties matter (a constant pooled sample: p = 1).
    """
    return 1e-10 * total / (n * (n - 1)) if n > 1 else 0.0


def _exact_pvalue(stats_all: np.ndarray, total: float, n: int) -> tuple[float, int]:
    """(exact p, #exceed): the share of relabelling classes (row 0 the observed one) whose
    statistic is >= T_obs within energy_test's tie tolerance, and how many besides row 0
    are; a ValueError for non-finite statistics (never a p-value)."""
    if not (np.isfinite(stats_all).all() and np.isfinite(total)):
        raise ValueError(f"X and Y: the energy statistics are not finite (observed "
                         f"{stats_all[0]}, pooled distance sum {total}); the distances "
                         f"overflow float64")
    hits = int(np.count_nonzero(stats_all >= stats_all[0] - _tie_tolerance(total, n)))
    # row 0 included
    return hits / len(stats_all), hits - 1


def _exact_floor(stats_all: np.ndarray, total: float, n: int, floor: float) -> float:
    """The smallest exact p-value any relabelling of these data could get: the share of
    classes whose statistic ties the largest (the tie rule of :func:`_exact_pvalue`), never
    below ``floor`` (the group's floor without ties). Classes that tie the most extreme one
    (tied points, equal pairs in value) all count in its p-value, so this can be far above
    ``floor``. Call it after :func:`_exact_pvalue` has refused non-finite statistics."""
    hits = np.count_nonzero(stats_all >= stats_all.max() - _tie_tolerance(total, n))
    return max(floor, hits / len(stats_all))


def _draw_subsets(rng: np.random.Generator, k: int, n: int, m: int):
    """(rows, good): k rows of n uniform keys, drawn in order, marked at their m smallest;
    ``good`` is False where the m-th smallest key is tied (the row does not mark m)."""
    rows = np.empty((k, n), dtype=bool)
    good = np.empty(k, dtype=bool)
    rows_per_draw = max(1, _DRAW_BYTES // (8 * n))
    for start in range(0, k, rows_per_draw):
        stop = min(k, start + rows_per_draw)
        keys = rng.random((stop - start, n))
        # the m smallest of n i.i.d. uniform keys form a uniform random m-subset; a partial
        # sort finds them faster than shuffling the row
        kth = np.partition(keys, m - 1, axis=1)[:, m - 1:m]
        rows[start:stop] = keys <= kth
        good[start:stop] = rows[start:stop].sum(axis=1) == m
    return rows, good


def _subset_batches(rng: np.random.Generator, bounds, n: int, m: int):
    """Yield ``(start, rows)`` for the draws ``bounds[i]:bounds[i + 1]``: the rows
    ``_random_subsets(rng, bounds[-1], n, m)`` holds there, from the same generator calls.

    Every draw's keys come first, in order; a row whose threshold key is tied (probability
    about n 2**-53) is redrawn after all of them, so a batch holding one is kept back and
    yielded last, once its rows are complete. Batches bound the memory whatever the total.
    """
    pending: dict[int, np.ndarray] = {}
    redraw = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        rows, good = _draw_subsets(rng, stop - start, n, m)
        if good.all():
            yield start, rows
        else:
            pending[start] = rows
            redraw.append(start + np.flatnonzero(~good))
    todo = np.concatenate(redraw) if redraw else np.empty(0, dtype=np.intp)
    while todo.size:
        rows, good = _draw_subsets(rng, todo.size, n, m)
        for start, batch in pending.items():
            here = good & (todo >= start) & (todo < start + len(batch))
            batch[todo[here] - start] = rows[here]
        todo = todo[~good]
    yield from pending.items()


def _random_subsets(rng: np.random.Generator, k: int, n: int, m: int,
                    out: np.ndarray | None = None) -> np.ndarray:
    """(k, n) bool rows, each marking a uniformly random m-subset of range(n), independently.

    The rows of :func:`_subset_batches`: drawing k1 rows then k2 gives the same rows as
    drawing k1 + k2 at once unless a key ties (what the sequential test relies on).
    """
    if out is None:
        out = np.empty((k, n), dtype=bool)
    for start, rows in _subset_batches(rng, [0, k], n, m):
        out[start:start + len(rows)] = rows
    return out
