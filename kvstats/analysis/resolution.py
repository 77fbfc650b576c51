"""What a test could have concluded: its smallest attainable p-value inside the family.

A test that could not have rejected says nothing about the difference it tests. Every
row of :func:`kvstats.analysis.compare_schemes` carries its resolution:

- ``min_attainable_p``: the smallest p-value the test could have returned with these
  data. Permutation tests (the energy test): the floor below, when the test enumerates
  its relabellings; when it draws B_max of them, the p-value data at the floor get at
  least half the time, ``monte_carlo_resolution(floor, B_max, h)`` (1/(1 + B_max) while
  (1 − floor)^B_max ≥ ½, more otherwise). Rank tests (Mann–Whitney,
  KS): the p-value of the most extreme relabelling of the pooled values (all of one
  sample below all of the other, either way round), which with few observations or
  many ties is far from 0 (e.g. 2/C(8, 4) = 0.029 for 4 clusters against 4). The sign
  test of paired data: the p-value of the most extreme signs of the observed differences
  (every nonzero difference of one sign: 2/2⁵ = 0.0625 for 5 nonzero differences), 1
  when every difference is zero (a difference within floating-point rounding,
  :func:`rounding_ties`, is zero). A permutation test cannot go below the share of its
  relabellings that give the observed statistic either: 2/C(8, 4) for an energy test of
  4 units against 4, 2^(1−m) for m pairs swapped within pairs (:func:`permutation_floor`;
  with tied points :func:`tied_permutation_floor`, a lower bound; an exact test reports
  the least p-value of every relabelling of its data, at least this, a drawn one on tied
  profiles the same by count vectors (:mod:`._tied_floor`), or NaN where there are too many:
  not known, never resolvable);
- ``min_attainable_p_adjusted``: the adjusted p-value the test would have had with
  that p-value, every other p-value of the family as observed;
- ``resolvable``: ``min_attainable_p_adjusted <= alpha``.

A non-significant test that is not resolvable is reported "not resolvable at B = …"
(or "at n = …" for a rank test, "at n = … pairs" for the sign test, and either for a
permutation test whose units, not its B, set the floor), never "no significant
difference". Values equal up to floating-point rounding are ties (:func:`rounding_ties`,
:func:`rounding_canonical`), as the report's tests count them.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings

import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe, check_choice, check_int
from kvstats.stats.paired import sign_test_floor

__all__ = ["extreme_pvalue", "sign_extreme_pvalue", "attainable_adjusted", "not_resolvable_text",
           "rounding_ties", "rounding_canonical", "permutation_floor", "tied_permutation_floor",
           "ROUNDING_RTOL"]

#: Relative gap under which two paired values are one value written twice: a difference of
#: |x − y| <= ROUNDING_RTOL · max(|x|, |y|) is floating-point rounding (a cluster mean summed
#: in another order, recall 0.8 as 0.8000000000000002), a zero difference of the sign test.
ROUNDING_RTOL = 1e-12


def rounding_ties(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "n"]) -> np.ndarray:
    """Which pairs are equal up to floating-point rounding: zero differences of the sign test.

    Two schemes' values on a unit can be equal in exact arithmetic and still differ in
    the last bits: a text's mean of recall@5 over its trials (multiples of 1/15) summed
    in another order, or a trial's mean over its queries. Counted as nonzero, such a
    difference gets a sign that rounding chose, and the sign test counts it as a win.
    A pair is a tie when x == y (equal infinities included) or both are finite and
    |x − y| <= :data:`ROUNDING_RTOL` · max(|x|, |y|). The rule depends on the pair only
    through |x − y| and max(|x|, |y|), which a swap of x and y leaves unchanged, so the
    sign test conditional on the remaining pairs stays exact under its null.

    Parameters
    ----------
    x, y : array_like, 1-D, same length
        Paired values (row i of each a pair), without NaN.

    Returns
    -------
    ndarray of bool
        True where the pair is a tie.

    Examples
    --------
    >>> from kvstats.analysis.resolution import rounding_ties
    >>> rounding_ties([0.8, 0.8, 0.0, float("inf")],
    ...               [0.8000000000000002, 0.8001, 1e-300, float("inf")]).tolist()
    [True, False, False, True]
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape:
        raise ValueError(f"x and y must be paired (the same shape); received shapes {x.shape} "
                         f"and {y.shape}")
    if np.isnan(x).any() or np.isnan(y).any():
        raise ValueError("x and y must not hold NaN (the sign of a pair would be undefined)")
    finite = np.isfinite(x) & np.isfinite(y)
    with np.errstate(over="ignore", invalid="ignore"):
        # x − y may overflow for finite values ~1e308 apart: inf > tol, not a tie, as it should be
        close = np.abs(x - y) <= ROUNDING_RTOL * np.maximum(np.abs(x), np.abs(y))
    return (x == y) | (finite & close)


def rounding_canonical(x: Float[np.ndarray, "n_x"], y: Float[np.ndarray, "n_y"]
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Two samples with the pooled values that differ only by rounding made equal.

    The two-sample analogue of :func:`rounding_ties`: the pooled values are sorted, and
    a value within :data:`ROUNDING_RTOL` · max(|·|) of the one before it (both finite)
    takes that value's run's first value, so that 0.8 and 0.8000000000000002 are one
    value, tied as Mann–Whitney's mid-ranks and KS's tie handling expect. The result
    depends only on the pooled values, not on which sample holds them, so a permutation
    (rank, KS) test of the two samples keeps its null distribution.

    Examples
    --------
    >>> from kvstats.analysis.resolution import rounding_canonical
    >>> x, y = rounding_canonical([0.8, 0.4], [0.8000000000000002, 0.9])
    >>> x.tolist(), y.tolist()
    ([0.8, 0.4], [0.8, 0.9])
    """
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    pooled = np.concatenate([x, y])
    if np.isnan(pooled).any():
        raise ValueError("x and y must not hold NaN (their ranks would be undefined)")
    order = np.argsort(pooled, kind="stable")
    v = pooled[order]
    with np.errstate(over="ignore", invalid="ignore"):
        gap = np.diff(v)
        close = (np.isfinite(v[1:]) & np.isfinite(v[:-1])
                 & (gap <= ROUNDING_RTOL * np.maximum(np.abs(v[1:]), np.abs(v[:-1]))))
    if not close.any():
        return x, y
    # each value takes the first value of its run of close neighbours
    start = np.concatenate([[True], ~close])
    v = v[np.flatnonzero(start)[np.cumsum(start) - 1]]
    out = np.empty_like(pooled)
    out[order] = v
    return out[:x.size], out[x.size:]


def permutation_floor(n_a: int, n_b: int, paired: bool) -> float:
    """The exact permutation p-value of the most extreme data: the share of relabellings
    that give the observed energy statistic at least.

    Paired (m = ``n_a`` pairs, each swapped or not): the observed labelling and the full
    swap give the same statistic, 2/2^m. Two samples: 1/C(n_a + n_b, n_a), and 2/C(2n, n)
    when n_a = n_b = n (exchanging the two samples gives the same statistic). A Monte
    Carlo p-value (1 + #exceed)/(1 + B) can fall below it only by luck: the test's
    resolution is this floor when it enumerates the relabellings and
    ``monte_carlo_resolution(floor, B_max, h)`` when it draws B_max of them.

    Examples
    --------
    >>> from kvstats.analysis.resolution import permutation_floor
    >>> permutation_floor(6, 6, paired=True), round(permutation_floor(4, 4, paired=False), 4)
    (0.03125, 0.0286)
    >>> permutation_floor(3, 5, paired=False) == 1 / 56
    True
    """
    n_a, n_b = check_int(n_a, "n_a", low=1), check_int(n_b, "n_b", low=1)
    if paired:
        return min(1.0, math.ldexp(1.0, 1 - n_a))
    return min(1.0, (2 if n_a == n_b else 1) / math.comb(n_a + n_b, n_a))


def tied_permutation_floor(counts: np.ndarray, n_a: int) -> float:
    """A lower bound of the two-sample permutation floor when the pooled points are tied.

    ``counts`` are the multiplicities of the distinct pooled points (summing to N), ``n_a``
    the size of the first sample. A relabelling that puts k_j copies of point j in the first
    sample gives the statistic of every relabelling with the same k (Π C(m_j, k_j) of them),
    and, when n_a = n_b, of the complementary k too. So no labelling's p-value is below
    min_k Π C(m_j, k_j) / C(N, n_a) (twice that when n_a = n_b, unless k is its own
    complement), the minimum over Σ k_j = n_a found by a dynamic programme over the tied
    points (distinct points contribute a factor 1). Without ties it is
    :func:`permutation_floor`; with every point one, 1.

    Parameters
    ----------
    counts : array_like of int >= 1
        Multiplicities of the distinct pooled points (``np.unique(..., axis=0,
        return_counts=True)[1]``).
    n_a : int in [1, N − 1]

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.analysis.resolution import permutation_floor, tied_permutation_floor
    >>> tied_permutation_floor([1] * 8, 4) == permutation_floor(4, 4, False)
    True
    >>> tied_permutation_floor([15, 1], 8), tied_permutation_floor([16], 8)  # one odd point
    (1.0, 1.0)
    >>> round(tied_permutation_floor([2] * 4, 4), 4)    # 4 points twice: 2 of 70 splits
    0.0286
    """
    from scipy.special import gammaln

    arr = np.asarray(counts)
    if arr.ndim != 1 or not arr.size or arr.dtype.kind not in "iu" or (arr < 1).any():
        raise ValueError(f"counts must be 1-D integers >= 1 (the multiplicities of the distinct "
                         f"pooled points); received {_describe(arr)}: {arr.tolist()!r:.80}")
    counts = arr.astype(np.int64)
    n = int(counts.sum())
    n_a = check_int(n_a, "n_a", low=1, high=n - 1)
    tied = counts[counts > 1]
    if not tied.size:
        return permutation_floor(n_a, n - n_a, False)
    log_comb = lambda m, k: gammaln(m + 1) - gammaln(k + 1) - gammaln(m - k + 1)  # noqa: E731
    # cost[t]: the least log Π C(m_j, k_j) with t points placed; the distinct points fill freely
    cost = np.where(np.arange(n_a + 1) <= counts.size - tied.size, 0.0, np.inf)
    for m in tied:   # one pass per tied point (a few), each vectorised over t and k
        k = np.arange(min(m, n_a) + 1)
        t = np.arange(n_a + 1)[:, None] - k[None, :]
        cost = np.where(t >= 0, cost[np.maximum(t, 0)] + log_comb(m, k)[None, :], np.inf).min(axis=1)
    least = cost[n_a]
    if 2 * n_a == n:
        # the complement's relabellings count too, unless k is its own complement (k = m/2)
        halves = (np.sum(log_comb(counts, counts // 2)) if not (counts % 2).any() else np.inf)
        least = min(least + math.log(2), halves)
    return float(min(1.0, math.exp(least - log_comb(n, n_a))))


def sign_extreme_pvalue(n_nonzero: int) -> float:
    """Smallest p-value the two-sided sign test can return with ``n_nonzero`` nonzero differences.

    Its null changes the signs of the differences, so the most extreme data are the
    ``n_nonzero`` differences all of one sign, whose exact two-sided binomial p-value
    (:func:`kvstats.stats.sign_test`, zeros dropped) is min(1, 2·2⁻ᵏ); 1 when every
    difference is zero. The count is the sign test's own ``n_nonzero``, so a caller that
    ran the test (:func:`kvstats.analysis.compare_schemes`) does not count again.

    Parameters
    ----------
    n_nonzero : int >= 0
        The pairs whose two values differ (:attr:`kvstats.stats.SignTestResult.n_nonzero`).

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.analysis.resolution import sign_extreme_pvalue
    >>> sign_extreme_pvalue(5), sign_extreme_pvalue(1), sign_extreme_pvalue(0)   # 2 / 2**5
    (0.0625, 1.0, 1.0)
    """
    return sign_test_floor(check_int(n_nonzero, "n_nonzero", low=0))


def _sign_pairs_needed(p_needed: float) -> int:
    """The fewest pairs that differ with which the two-sided sign test can reach
    ``p_needed``: its smallest p-value on k differing pairs is 2·2⁻ᵏ (all of one sign,
    :func:`kvstats.stats.sign_test_floor`), so what a "not resolvable … only k of the n
    pairs differ" row lacks.

    Parameters
    ----------
    p_needed : float in (0, 1]
        The p-value a test must be able to reach (the family's first step:
        :func:`kvstats.stats.sequential.required_resolution`).

    Returns
    -------
    int

    Examples
    --------
    >>> _sign_pairs_needed(0.05 / 104), _sign_pairs_needed(0.0625), _sign_pairs_needed(0.0624)
    (13, 5, 6)
    """
    if not 0 < p_needed <= 1:
        raise ValueError(f"p_needed must be in (0, 1]; received {p_needed!r}")
    k = max(1, math.ceil(1 - math.log2(p_needed)))
    # a need one ulp below 2·2⁻ᵏ has log2 rounded onto 1 − k: the floor itself decides
    while sign_test_floor(k) > p_needed:
        k += 1
    return k


def extreme_pvalue(test: str, x: Float[np.ndarray, "n_x"], y: Float[np.ndarray, "n_y"]) -> float:
    """Smallest p-value a rank test could return given the pooled values of ``x`` and ``y``.

    Two-sample tests ("mann_whitney", "ks"): the pooled sample is split at its order
    statistics (the ``len(x)`` smallest values to ``x``, then the largest); the smaller
    of the two p-values is returned. The same test function (and, for KS, the same tie
    handling) as the report's row is used. The sign test ("sign", ``x`` and ``y``
    paired): its null changes the signs of the differences x − y, so the most extreme
    data are the k nonzero differences all of one sign, whose exact two-sided binomial
    p-value (:func:`kvstats.stats.sign_test`, zeros dropped) is min(1, 2·2⁻ᵏ); 1 when
    every difference is zero (:func:`sign_extreme_pvalue` of the count, which a caller
    holding the sign test's ``n_nonzero`` calls directly).

    Parameters
    ----------
    test : {"mann_whitney", "ks", "sign"}
    x, y : array_like, 1-D
        The two samples (for "sign", of the same length, row i of each a pair).

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.analysis.resolution import extreme_pvalue
    >>> round(extreme_pvalue("mann_whitney", [1, 2, 3, 4], [5, 6, 7, 8]), 4)  # 2/C(8, 4)
    0.0286
    >>> extreme_pvalue("mann_whitney", [1, 1, 1], [1, 1])        # all tied: nothing to resolve
    1.0
    >>> extreme_pvalue("sign", [1, 2, 3, 4, 5, 6], [2, 0, 6, 0, 0, 6])  # 5 nonzero: 2 / 2**5
    0.0625
    """
    for v, name in ((x, "x"), (y, "y")):   # before pooling, which would move a NaN of x into y
        v = np.asarray(v, np.float64)
        if not v.size:
            raise ValueError(f"{name} must not be empty; received {_describe(v)}")
        if np.isnan(v).any():
            raise ValueError(f"{name} must not contain NaN; received {int(np.isnan(v).sum())} "
                             f"NaN of {v.size} values")
    if test == "sign":
        # the count of untied pairs (equal infinities are a tie, as in the sign test)
        x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
        if x.size != y.size:
            raise ValueError(f"x and y must be paired (the same length); received lengths "
                             f"{x.size} and {y.size}")
        # the pairs that differ beyond rounding, as the report's sign test counts them
        return sign_extreme_pvalue(int(np.count_nonzero(~rounding_ties(x, y))))
    pooled = np.sort(np.concatenate([np.asarray(x, np.float64).ravel(),
                                     np.asarray(y, np.float64).ravel()]))
    n_x = np.asarray(x).size
    n_y = pooled.size - n_x
    # the two most extreme relabellings: x takes the n_x smallest, or the n_x largest values
    xs = np.stack([pooled[:n_x], pooled[n_y:]])
    ys = np.stack([pooled[n_x:], pooled[:n_y]])
    if test == "mann_whitney":
        return _mann_whitney_extreme(xs, ys)
    if test == "ks":
        return min(_ks_pvalue(xs[0], ys[0]), _ks_pvalue(xs[1], ys[1]))
    raise ValueError(f"test must be 'mann_whitney', 'ks' or 'sign'; received {test!r}")


def _mann_whitney_extreme(xs: np.ndarray, ys: np.ndarray) -> float:
    """The smaller p-value :func:`kvstats.stats.mann_whitney` gives the two extreme
    relabellings (rows of ``xs``, ``ys``): its own method choice (``method="auto"``,
    :func:`kvstats.stats.rank._mwu_pvalue`), without its interval (the costly part). Under
    ties the conditional exact law is the same for both rows and for the observed data
    (one pooled sample), and computed once.
    """
    from kvstats.stats.rank import _mwu_pvalue

    return min(_mwu_pvalue(xs[k], ys[k], "two-sided", "auto")[1] for k in range(2))


def _ks_pvalue(x: np.ndarray, y: np.ndarray) -> float:
    """The KS p-value of the report's row: exact conditional on ties when tied."""
    from kvstats.stats import ks_2samp
    from kvstats.stats.ks_exact import ks_2samp_exact

    if np.unique(np.concatenate([x, y])).size < x.size + y.size:
        return float(ks_2samp_exact(x, y).pvalue)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(ks_2samp(x, y).pvalue)


def attainable_adjusted(pvalues: Float[np.ndarray, "m"], min_p: Float[np.ndarray, "m"],
                        method: str, alpha: float) -> Float[np.ndarray, "m"]:
    """Per test: its adjusted p-value had it returned ``min_p``, the others as observed.

    Parameters
    ----------
    pvalues : array of shape (m,)
        The family's p-values.
    min_p : array of shape (m,)
        Each test's smallest attainable p-value (values above the observed p-value are
        taken as the observed one); NaN: not known (a drawn energy row on too many tied
        profiles), whose result is NaN, never resolvable.
    method : str
        A correction of :data:`kvstats.stats.ADJUST_METHODS`.
    alpha : float

    Returns
    -------
    ndarray of shape (m,)

    Notes
    -----
    Holm and Bonferroni in closed form, O(m log m) for the family: lowering one p-value
    to q leaves the others' order, so Holm's adjusted value of q is
    max(max_{j<r} (m − j + 1) p_(j), (m − r + 1) q) with r − 1 the number of p-values
    below q. Other corrections: ``multipletests`` once per test, except that for Hommel
    (O(m²) per call) only the tests whose Holm value exceeds ``alpha`` are recomputed:
    Hommel's adjusted p-values never exceed Holm's, so elsewhere the Holm value (<= alpha)
    is returned, an upper bound that already shows the test resolvable.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.analysis.resolution import attainable_adjusted
    >>> p = np.array([1e-6, 1e-6, 0.5, 0.9])      # the last two: a permutation test with B = 9
    >>> attainable_adjusted(p, np.array([0, 0, 0.1, 0.1]), "holm", 0.05).round(3).tolist()
    [0.0, 0.0, 0.2, 0.2]
    """
    from kvstats.stats import ADJUST_METHODS

    check_choice(method, "method", ADJUST_METHODS)
    pvalues, min_p = np.asarray(pvalues, np.float64), np.asarray(min_p, np.float64)
    if pvalues.ndim != 1 or min_p.shape != pvalues.shape:
        raise ValueError(f"pvalues and min_p must be 1-D of the same shape; received shapes "
                         f"{pvalues.shape} and {min_p.shape}")
    if np.isnan(pvalues).any():
        raise ValueError(f"pvalues must not contain NaN (drop the untested rows); received "
                         f"{int(np.isnan(pvalues).sum())} NaN of {pvalues.size}")
    unknown = np.isnan(min_p)
    if unknown.any():   # each test's value takes the others as observed: the rest are unchanged
        out = attainable_adjusted(pvalues, np.where(unknown, pvalues, min_p), method, alpha)
        out[unknown] = np.nan
        return out
    q = np.minimum(min_p, pvalues)
    m = pvalues.size
    if method in ("holm", "bonferroni"):
        if method == "bonferroni":
            return np.minimum(1.0, m * q)
        ordered = np.sort(pvalues)
        prefix = np.concatenate([[0.0], np.maximum.accumulate((m - np.arange(m)) * ordered)])
        below = np.searchsorted(ordered, q, side="left")
        return np.minimum(1.0, np.maximum(prefix[below], (m - below) * q))
    from statsmodels.stats.multitest import multipletests

    out = np.empty_like(pvalues)
    todo = np.arange(m)
    if method == "hommel":
        out = attainable_adjusted(pvalues, q, "holm", alpha)
        todo = np.flatnonzero(out > alpha)
    work = pvalues.copy()
    for i in todo:
        work[i] = q[i]
        # sidak's log1p(−p) is −inf at p = 1 (adjusted value 1, correct): no warning for it
        with np.errstate(divide="ignore"):
            out[i] = multipletests(work, alpha=alpha, method=method)[1][i]
        work[i] = pvalues[i]
    return out


@functools.lru_cache(maxsize=256)
def _rank_tost_witness(n_a: int, n_b: int, margin: float, alpha: float, paired: bool) -> float:
    """The smallest rank-TOST p-value (``tost_rank``, margin 0.5 ± ``margin``) over a family
    of data sets of these sizes: an upper bound of the smallest attainable p (no closed form
    is known), so a row it makes resolvable could have concluded equivalence.

    The family (searches of random small-integer data at n = 4…32 found nothing better,
    docs/statistics.md):
    two samples, both arms of zeros and ones in about equal shares (θ̂ ≈ ½ with the least
    spread of placements); pairs, identical pairs on 1–4 values with 0–3 balanced
    discordant pairs, (a, b) and (b, a) for two of the values.
    """
    from kvstats.stats.equivalence import tost_rank

    def p(x, y):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(tost_rank(x, y, delta=margin, alpha=alpha, paired=paired).pvalue)

    if not paired:
        ones = np.unique(np.linspace(0, n_a, min(n_a, 50) + 1).round().astype(int))
        arm = lambda n, k: (np.arange(n) < k).astype(np.float64)   # noqa: E731
        return min(p(arm(n_a, k), arm(n_b, round(k * n_b / n_a))) for k in ones)
    best = 1.0
    for values in range(1, 5):
        same = (np.arange(n_a) % values).astype(np.float64)
        for low, high in itertools.combinations(range(max(values, 2)), 2):
            for discordant in range(min(3, n_a // 2) + 1):
                x, y = same.copy(), same.copy()
                x[:2 * discordant:2], y[:2 * discordant:2] = low, high
                x[1:2 * discordant:2], y[1:2 * discordant:2] = high, low
                best = min(best, p(x, y))
    return best


def differ_text(k: int, n: int) -> str:
    """How many of a sign test's ``n`` pairs differ (``k``), in words: what limits it.

    Examples
    --------
    >>> [differ_text(k, n) for k, n in ((3, 40), (1, 40), (0, 40), (5, 5), (1, 1))]
    ['only 3 of the 40 pairs differ', 'only 1 of the 40 pairs differs', 'none of the 40 pairs differs', 'all 5 pairs differ: the limit is the number of pairs, 5, itself', 'the 1 pair differs: the limit is the number of pairs, 1, itself']
    """
    if k >= n:
        return (f"{'the 1 pair differs' if n == 1 else f'all {n} pairs differ'}: the limit is "
                f"the number of pairs, {n}, itself")
    if k == 0:
        return f"none of the {n} pairs differs"
    return f"only {k} of the {n} pairs {'differs' if k == 1 else 'differ'}"


def not_resolvable_text(test: str, max_permutations: int, n_a: int, n_b: int,
                        min_p_adjusted: float, *, paired: bool = False,
                        units_bind: bool = False, alpha: float | None = None,
                        differing: int | None = None, identical: bool = False) -> str:
    """The wording of a test that could not have rejected, naming what limits it.

    A permutation test is limited by its B (``max_permutations``) unless its units bind
    (``units_bind``: its relabellings' floor, :func:`permutation_floor`, or a rank test's
    extreme split is above 1/(1 + B)); then, as for the rank and sign tests, by its
    units: "n = m pairs" (``paired``, or the sign test), else "n = a vs b". Saying
    "at B = …" where more permutations would not help would send the reader to the
    wrong remedy. With ``alpha``, the smallest attainable adjusted p (above α, or the test
    would be resolvable) takes the digits that keep it above α: 0.05004 reads "0.05004",
    not "0.05", a value that would have been a rejection. ``differing`` (a sign test's
    pairs whose values differ, what limits it; or a paired energy test's pairs whose
    profiles differ) adds how many of the n pairs differ (:func:`differ_text`): "at n = 40
    pairs" alone reads as if 40 pairs could not resolve. ``identical`` (two samples whose
    pooled points are all one) says so: no relabelling changes the statistic.

    Examples
    --------
    >>> from kvstats.analysis.resolution import not_resolvable_text
    >>> not_resolvable_text("energy", 499, 100, 100, 0.57)
    'not resolvable at B = 499 (smallest attainable adjusted p 0.57)'
    >>> not_resolvable_text("energy", 399, 6, 6, 0.45, paired=True, units_bind=True)
    'not resolvable at n = 6 pairs (smallest attainable adjusted p 0.45)'
    >>> not_resolvable_text("mann_whitney", 0, 4, 4, 1.0)
    'not resolvable at n = 4 vs 4 (smallest attainable adjusted p 1)'
    >>> not_resolvable_text("sign", 0, 5, 5, 0.3125)
    'not resolvable at n = 5 pairs (smallest attainable adjusted p 0.312)'
    >>> not_resolvable_text("sign", 0, 1, 1, 1.0)
    'not resolvable at n = 1 pair (smallest attainable adjusted p 1)'
    >>> not_resolvable_text("sign", 0, 9, 9, 0.05004, alpha=0.05)
    'not resolvable at n = 9 pairs (smallest attainable adjusted p 0.05004)'
    >>> not_resolvable_text("sign", 0, 40, 40, 1.0, differing=3)
    'not resolvable at n = 40 pairs (smallest attainable adjusted p 1): only 3 of the 40 pairs differ'
    >>> not_resolvable_text("energy", 499, 4, 4, 1.0, units_bind=True, identical=True)
    'not resolvable at n = 4 vs 4 (smallest attainable adjusted p 1): all 8 pooled points are identical, so every relabelling gives the observed statistic'
    """
    if max_permutations and not units_bind:
        where = f"B = {max_permutations}"
    elif test == "sign" or paired:
        where = f"n = {n_a} pair{'' if n_a == 1 else 's'}"
    else:
        where = f"n = {n_a} vs {n_b}"
    p = "–"
    if math.isfinite(min_p_adjusted):
        digits = 3
        p = f"{min_p_adjusted:.{digits}g}"
        while alpha is not None and float(p) <= alpha < min_p_adjusted and digits < 17:
            digits += 1
            p = f"{min_p_adjusted:.{digits}g}"
    why = "" if differing is None else ": " + differ_text(differing, n_a)
    if identical:
        why = (f": all {n_a + n_b} pooled points are identical, so every relabelling gives the "
               "observed statistic")
    return f"not resolvable at {where} (smallest attainable adjusted p {p}){why}"
