"""Energy distance (Székely & Rizzo) and its permutation test, for multivariate samples.

The energy distance between the distributions of X and Y is

    E = 2 E|X - Y| - E|X - X'| - E|Y - Y'|     (Euclidean norms),

which is >= 0 and zero only when the distributions are equal. With pooled pairwise
distances D and within/between sums s_xx, s_yy, s_xy over ordered pairs:

* V-statistic: 2 s_xy/(n_x n_y) - s_xx/n_x^2 - s_yy/n_y^2 (what scipy and dcor compute;
  scipy.stats.energy_distance returns its square root in 1-D);
* U-statistic: 2 s_xy/(n_x n_y) - s_xx/(n_x(n_x-1)) - s_yy/(n_y(n_y-1)), unbiased for E.

The permutation test never permutes D. For a label vector a (1 for "x") and b = 1 - a,
with row sums r = D 1 and S = 1'D1: s_xx = a'Da, s_xy = a'r - s_xx, s_yy = S - 2a'r + s_xx.
So all B permutations need only diag(A' D A) for the n x B label matrix A: one matrix
product D A, evaluated block by block over the upper triangle of D (D_IJ is computed on
the fly, used for I<=J with weight 2 off the diagonal, then discarded), and in chunks of
permutations, drawn chunk by chunk, so peak memory is bounded whatever n and B are.

Paired (within-pair swap) relabellings have a smaller exact form. With m pairs, X_i paired
with Y_i, a relabelling is a sign vector s in {+1, -1}^m (s_i = +1: pair i unswapped, X_i
labelled x; -1: swapped). With the m x m blocks D^XX, D^YY, D^XY (D^XY_ij = |X_i - Y_j|),
the within-sample sums of the labelling are, pair of pairs by pair of pairs,

    s_xx + s_yy = sum_ij [(1 + s_i s_j)/2 (D^XX + D^YY)_ij + (1 - s_i s_j)/2 (D^XY + D^XY')_ij]
                = T/2 + Q/2,   Q = s'Cs,   C = D^XX + D^YY - D^XY - D^XY',

where T = 1'(D^XX + D^YY + D^XY + D^XY')1 is the pooled total (the same for every
labelling), and s_xy = (T - s_xx - s_yy)/2 = (T - Q)/4. With n_x = n_y = m:

    V = 2 s_xy/m^2 - (s_xx + s_yy)/m^2            = -Q/m^2,
    U = 2 s_xy/m^2 - (s_xx + s_yy)/(m(m - 1))     = -(T + (2m - 1) Q)/(2 m^2 (m - 1)).

So each swap relabelling costs one m x m quadratic form (the upper-triangle blocks of the
symmetric C against a chunk of sign vectors: S_J C_IJ', then a row-wise dot with S_I)
instead of the pooled 2m x 2m one: a quarter of the multiply-adds, the same 2m^2
distances. C is built from the same Euclidean distances (``cdist``) of the same prepared
data, kept (upper-triangle blocks, at most 64 MiB: m up to ~3,600) across chunks and
across the batches of the sequential test, else recomputed per chunk. The statistics
equal the pooled core's to rounding (a few 1e-14 of the mean distance, far inside the
tie tolerance), so the p-values are the same.

Magnitudes: data whose largest magnitude is outside [2**-400, 2**400) are scaled by a
power of two before any distance (exact; the statistic is homogeneous of degree 1 and is
scaled back, the p-value is unchanged), so squared distances neither overflow (NaN) nor
underflow (0); a statistic that is non-finite or beyond float64 is a ValueError, never a
p-value. Ordinary data are not touched.

Exact test: where the relabelling group is small (``method="auto"``: at most 2**28
multiply-adds, classes x size**2, i.e. up to 20 differing pairs, or two samples while
C(n, n_x) n**2 <= 2**28, halved at n_x = n_y: every split of up to 21 points, of 22 all but
10 vs 12, and uneven larger ones such as 4 vs 40) every relabelling is evaluated, one per
class of relabellings with the same statistic (s and -s; a labelling and its complement
when n_x = n_y), and p = #{T_g >= T_obs}/#classes, the observed one included: no Monte
Carlo error. Its ``min_attainable_p`` is the smallest p any relabelling of these data gets
(the share of classes tying the largest statistic), at least the group's floor.

Layout: this module holds the public functions and results; the data preparation, the
scaling, the pooled-label core and the exact test's subsets and count are in
:mod:`._energy_core`, the swap form and its enumeration in :mod:`._energy_swap`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import cdist

from kvstats._checks import SeedLike, as_generator, check_int, check_real

from ._base import _FrameMixin
# The internals live in ._energy_core (preparation, scaling, the pooled-label core) and
# ._energy_swap (within-pair swaps); the tests import some of them from here, their path
# before the split (hence the re-exports).
from ._energy_core import (_BLOCK, KINDS, XSample, YSample, _combine,  # noqa: F401
                           _exact_classes, _exact_floor, _exact_pvalue, _free_labels,
                           _permutation_statistics, _pooled_blocking, _prepare,
                           _random_subsets, _subset_batches, _tie_tolerance, _unit_scale,
                           _unscale)
# the energy tests' ``method``: "auto", "exact" (every relabelling), "permutation" (drawn)
from ._energy_core import METHODS as ENERGY_METHODS
from ._energy_swap import (_check_paired, _differing, _exact_swap_statistics,  # noqa: F401
                           _paired_min_p, _random_keeps, _random_swaps, _swap_statistics,
                           _SwapForms)
from .family_resolution import monte_carlo_resolution

__all__ = ["EnergyDistanceResult", "EnergyTestResult", "energy_distance", "energy_test",
           "ENERGY_METHODS"]



@dataclass(frozen=True)
class EnergyDistanceResult(_FrameMixin):
    """Result of :func:`energy_distance` (float64 throughout).

    Attributes
    ----------
    statistic : float
        Energy distance 2 mean_xy - mean_xx - mean_yy (V- or U-statistic per ``kind``).
    mean_xy, mean_xx, mean_yy : float
        Mean between-sample distance and mean within-sample distances (within means
        over n^2 ordered pairs for "V", over n(n-1) distinct pairs for "U").
    kind : str
        "V" or "U".
    standardize : bool
        Whether each column was divided by its pooled standard deviation first.
    n_x, n_y, dim : int
        Sample sizes and dimension.

    ``float(result)`` is the statistic.
    """

    statistic: float
    mean_xy: float
    mean_xx: float
    mean_yy: float
    kind: str
    standardize: bool
    n_x: int
    n_y: int
    dim: int
    _test_name = "energy_distance"

    def __float__(self) -> float:
        return self.statistic


@dataclass(frozen=True, eq=False)   # holds an array: identity equality and hash
class EnergyTestResult(_FrameMixin):
    """Result of :func:`energy_test`.

    Attributes
    ----------
    statistic : float
        Observed energy distance (same value as :func:`energy_distance` with the same
        ``kind`` and ``standardize``).
    pvalue : float
        (1 + #{null_distribution >= T_obs}) / (1 + len(null_distribution)) for both
        methods (">=" within the tie tolerance of :func:`energy_test`'s Notes): with B
        draws (``method`` "permutation"), (1 + #{T_perm >= T_obs}) / (1 + B); "exact",
        #{relabelling classes g: T_g >= T_obs} / #classes, the observed one included.
    test_statistic : float
        n_x n_y / (n_x + n_y) * statistic, the scaling of Székely & Rizzo (2004) and of
        ``dcor.homogeneity.energy_test``.
    null_distribution : ndarray of shape (B,), "exact": (n_resamples - 1,)
        Energy distances of the B permuted labellings; "exact": of every relabelling but
        the observed one, one per class of relabellings that give the same statistic by
        symmetry (a swap vector and its negation; a labelling and its complement when
        n_x = n_y). Neither holds the observed statistic, so the formula of ``pvalue``
        gives p for both.
    n_resamples : int
        B; "exact": the number of those classes, the observed one included (2**(m - 1)
        for m differing pairs, C(n_x + n_y, n_x), halved when n_x = n_y).
    kind, standardize, n_x, n_y, dim :
        As for :class:`EnergyDistanceResult`.
    paired : bool
        Whether the relabellings were within-pair swaps (``energy_test(paired=True)``).
    min_attainable_p : float
        The test's resolution: the p-value that data at the relabelling group's extreme
        get at least half the time. The group's floor is 2**(1 - m) for the m pairs that
        differ when paired, 1/C(n_x + n_y, n_x), or 2/C(2n, n) for n vs n, otherwise.
        "exact": the smallest p-value any relabelling of these data gets, the share of
        classes whose statistic ties the largest one (same tie rule as ``pvalue``): the
        floor when nothing ties, more with tied points (4 values against 4 can give 0.2,
        not 2/70). "permutation":
        :func:`kvstats.stats.family_resolution.monte_carlo_resolution` of the floor and
        B, which is 1/(1 + B) when (1 - floor)**B >= 1/2 and larger otherwise (each draw
        ties the observed statistic with probability floor); with tied points the floor
        is only a lower bound (the tied relabellings are not enumerated), so this is too. Inside a corrected family it
        must be <= the first step's level (alpha/m for Holm) for the test to be able to
        reject: see :meth:`resolvable`.
    method : str
        "exact" (every relabelling enumerated) or "permutation" (B random ones).
    """

    statistic: float
    pvalue: float
    test_statistic: float
    null_distribution: np.ndarray = field(repr=False)   # B floats: a print shows the rest
    n_resamples: int
    kind: str
    standardize: bool
    n_x: int
    n_y: int
    dim: int
    paired: bool = False
    min_attainable_p: float = math.nan
    method: str = "permutation"
    _test_name = "energy_test"

    def resolvable(self, alpha_needed: float) -> bool:
        """Whether this design could have returned p <= ``alpha_needed`` (e.g. alpha/m).

        A property of B and the sample sizes only: True when data at the relabelling
        group's extreme give p <= ``alpha_needed`` (exact), or do so with probability at
        least 1/2 (Monte Carlo). With B = 999 (the default) a Monte Carlo test cannot
        reject in a Holm family of more than 50 at alpha = 0.05; such a test must be
        reported as not resolvable, never as "no significant difference".

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.stats import energy_test
        >>> rng = np.random.default_rng(0)
        >>> res = energy_test(rng.normal(size=(30, 6)), rng.normal(3, 1, size=(30, 6)))
        >>> res.pvalue, res.resolvable(0.05 / 10), res.resolvable(0.05 / 1140)
        (0.001, True, False)
        """
        alpha_needed = check_real(alpha_needed, "alpha_needed", low=0.0, high=1.0,
                                  low_open=True)
        return self.min_attainable_p <= alpha_needed

    def pvalue_interval(self, confidence: float = 0.99) -> tuple[float, float]:
        """Monte Carlo error: the Clopper–Pearson interval for the permutation p-value
        u = P(T_perm >= T_obs) from the #{T_perm >= T_obs} exceedances of the B draws.

        Each limit holds with probability >= (1 + confidence)/2. With no exceedance the
        interval is [0, 1 - ((1 - confidence)/2)**(1/B)], about [0, 5.3/B] at 99%. An
        exact p-value has no Monte Carlo error: (p, p).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.stats import energy_test
        >>> rng = np.random.default_rng(0)
        >>> res = energy_test(rng.normal(size=(30, 6)), rng.normal(0.5, 1, size=(30, 6)))
        >>> res.pvalue, [round(v, 4) for v in res.pvalue_interval()]   # 9 of 999 exceed
        (0.01, [0.0031, 0.0199])
        """
        from ._base import monte_carlo_pvalue_interval

        confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True,
                                high_open=True)
        if self.method == "exact":
            return self.pvalue, self.pvalue
        exceed = int(round(self.pvalue * (1 + self.n_resamples))) - 1
        return monte_carlo_pvalue_interval(exceed, self.n_resamples, False, confidence)



def _pair_sum(A: np.ndarray, B: np.ndarray) -> float:
    """Sum of Euclidean distances over all pairs (a, b), blocked to bound memory."""
    total = 0.0
    for i in range(0, len(A), _BLOCK):
        for j in range(0, len(B), _BLOCK):
            total += cdist(A[i:i + _BLOCK], B[j:j + _BLOCK]).sum()
    return total


def _pair_sums_1d(x: np.ndarray, y: np.ndarray):
    """s_xx, s_yy, s_xy (ordered pairs) in O(n log n) for 1-D samples.

    For sorted values v_1..v_n, sum_{i<j} (v_j - v_i) = sum_k (2k - n - 1) v_k.
    """
    def within(v):
        v = np.sort(v)
        k = np.arange(1, v.size + 1)
        return 2.0 * float(((2 * k - v.size - 1) * v).sum())

    s_xx, s_yy = within(x), within(y)
    s_all = within(np.concatenate([x, y]))
    return s_xx, s_yy, 0.5 * (s_all - s_xx - s_yy)


def energy_distance(X: XSample, Y: YSample, standardize: bool = False,
                    kind: str = "V") -> EnergyDistanceResult:
    """Energy distance between two multivariate samples.

    Parameters
    ----------
    X : array_like of shape (n_x, dim) or (n_x,)
    Y : array_like of shape (n_y, dim) or (n_y,)
        Samples (rows are observations); 1-D input is one-dimensional data. NaN and inf
        are rejected. Computed in float64.
    standardize : bool
        Divide each column by its standard deviation over the pooled sample (X and Y
        together, ddof=1) before measuring distances, so that columns in different units
        (dB and radians in the 6D profile) weigh alike. Pooling keeps the scaling the same
        for every relabelling, which :func:`energy_test` needs. Constant columns are left
        as they are.
    kind : {"V", "U"}
        V-statistic (biased, >= 0; scipy/dcor) or U-statistic (unbiased, can be < 0).

    Returns
    -------
    EnergyDistanceResult
        ``statistic`` and the three mean distances. In 1-D, the V-statistic equals
        ``scipy.stats.energy_distance(x, y) ** 2``.

    Notes
    -----
    Memory is bounded (distances in blocks of 2048 x 2048); 1-D data use an exact
    O(n log n) sorting formula instead of pairwise distances.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats import energy_distance
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(300, 6)), rng.normal(0.5, 1, size=(300, 6))
    >>> energy_distance(X, Y).statistic > energy_distance(X, rng.normal(size=(300, 6))).statistic
    True
    """
    X, Y, standardize = _prepare(X, Y, standardize, kind)
    n_x, n_y, dim = len(X), len(Y), X.shape[1]
    Z, e = _unit_scale(np.concatenate([X, Y]))
    X, Y = Z[:n_x], Z[n_x:]
    if dim == 1:
        s_xx, s_yy, s_xy = _pair_sums_1d(X[:, 0], Y[:, 0])
    else:
        s_xx, s_yy, s_xy = _pair_sum(X, X), _pair_sum(Y, Y), _pair_sum(X, Y)
    values = _combine(s_xx, s_yy, s_xy, n_x, n_y, kind)
    if not np.isfinite(values).all():   # e.g. > 2**200 distances: refuse, never a NaN
        raise ValueError(f"X and Y: the energy statistic is not finite ({values[0]}); the "
                         f"mean distances overflow float64")
    stat, mxy, mxx, myy = (float(v) for v in _unscale(np.array(values), e, "energy distance"))
    stat = max(stat, 0.0) if kind == "V" else stat  # V >= 0; rounding (~eps * mean dist.) can dip below
    return EnergyDistanceResult(statistic=stat, mean_xy=mxy, mean_xx=mxx,
                                mean_yy=myy, kind=kind, standardize=standardize,
                                n_x=n_x, n_y=n_y, dim=dim)


def _unpaired_min_p(n_x: int, n_y: int) -> float:
    """1/C(n_x + n_y, n_x), and 2/C(2n, n) when n_x = n_y = n (exchanging the two samples
    gives the same statistic): the smallest exact p-value of the free relabellings, reached
    when no other labelling ties with the observed one (repeated rows can only raise it)."""
    n = n_x + n_y
    if math.lgamma(n + 1) - math.lgamma(n_x + 1) - math.lgamma(n_y + 1) > 750.0:
        return 0.0      # 1/C < 1e-325 underflows anyway; the exact C(n, n_x) would cost seconds
    return min(1.0, (2 if n_x == n_y else 1) / math.comb(n, n_x))


def _relabelling_group(method: str, X: np.ndarray, Y: np.ndarray, paired: bool,
                       ) -> tuple[int | None, float]:
    """(classes, floor) of the energy tests' relabelling group: the classes the exact test
    enumerates (None: draw at random, see :func:`._energy_core._exact_classes`) and the
    smallest exact p-value, 2**(1 - m) over the m pairs that differ (paired) or
    :func:`_unpaired_min_p`."""
    n_x, n_y = len(X), len(Y)
    if paired:
        differing = int(np.count_nonzero(_differing(X, Y)))
        return _exact_classes(method, n_x, n_y, differing), _paired_min_p(X, Y)
    return _exact_classes(method, n_x, n_y, None), _unpaired_min_p(n_x, n_y)


def _scaled_group(method: str, X: np.ndarray, Y: np.ndarray, paired: bool,
                  ) -> tuple[bool, np.ndarray, int, int | None, float]:
    """(paired, Z, e, classes, floor): what energy_test and energy_test_sequential start from.

    ``paired`` checked; the pooled Z = [X; Y] scaled by 2**-e (exact; e = 0 for ordinary
    magnitudes: the p-value is scale invariant, the statistics are rescaled at the end);
    and :func:`_relabelling_group` of the scaled data, the ones the relabellings move (a
    difference the scaling underflows to 0 is no difference to them).
    """
    n_x = len(X)
    paired = _check_paired(paired, n_x, len(Y))
    Z, e = _unit_scale(np.concatenate([X, Y]))
    classes, floor = _relabelling_group(method, Z[:n_x], Z[n_x:], paired)
    return paired, Z, e, classes, floor


def _exact_statistics(Z: np.ndarray, n_x: int, kind: str, paired: bool):
    """(statistic of every relabelling class, the observed one first; pooled distance total)."""
    if paired:
        return _exact_swap_statistics(Z[:n_x], Z[n_x:], kind)
    return _permutation_statistics(Z, _free_labels(n_x, len(Z) - n_x), kind)


def _batch_bounds(chunk: int, n_resamples: int) -> np.ndarray:
    """Draw boundaries 0, chunk - 1, 2 chunk - 1, ..., B: with the observed labelling as row
    0, each batch is one chunk of the B + 1 rows."""
    return np.unique(np.r_[0, np.arange(chunk - 1, n_resamples, chunk), n_resamples])


def energy_test(X: XSample, Y: YSample, n_resamples: int = 999, seed: SeedLike = 0,
                standardize: bool = False, kind: str = "V", *,
                paired: bool = False, method: str = "auto") -> EnergyTestResult:
    """Permutation test of equal distributions based on the energy distance.

    Parameters
    ----------
    X, Y : array_like of shape (n, dim) or (n,)
        The two samples (NaN/inf rejected).
    n_resamples : int >= 1
        Number B of random relabellings.
    seed : int, numpy SeedSequence, Generator or None
        Randomness of the relabellings. Same seed, same p-value.
    standardize, kind :
        As in :func:`energy_distance`.
    paired : bool
        False (default): the relabellings are uniformly random n_x-subsets of the pooled
        rows (X and Y independent samples). True: row i of X is paired with row i of Y
        (``len(X) == len(Y)``, else ``ValueError``), and each relabelling swaps the two
        rows of every pair independently with probability 1/2: the exact randomization
        null of exchangeability within pairs, valid whatever the dependence between X_i
        and Y_i. Same statistic, pooled standardisation and tie rule.
    method : {"auto", "exact", "permutation"}
        "exact" enumerates every relabelling (2**(m - 1) swap classes of the m differing
        pairs; the C(n_x + n_y, n_x) subsets, half of them when n_x = n_y) and returns the
        exact p-value #{T_g >= T_obs}/#relabellings, without Monte Carlo error: ``seed``
        and ``n_resamples`` do not matter. "permutation" draws B random relabellings.
        "auto" (default) is "exact" when that costs at most 2**28 multiply-adds (classes
        x size**2: up to 20 differing pairs; two samples while C(n, n_x) n**2 <= 2**28,
        halved at n_x = n_y: every split of up to 21 points, of 22 all but 10 vs 12, and
        uneven larger ones such as 4 vs 40), "permutation" otherwise; "exact" is refused
        (``ValueError``) beyond 2**30.

    Returns
    -------
    EnergyTestResult
        ``statistic`` (the observed energy distance), ``pvalue`` =
        (1 + #{T_perm >= T_obs}) / (1 + B), ``test_statistic`` (n_x n_y/(n_x+n_y) times
        the statistic, as in dcor), the permutation ``null_distribution`` and
        ``min_attainable_p`` (the design's resolution; ``resolvable(alpha/m)`` says
        whether the test could reject in a Holm family of m) and ``method`` (the one used).

    Notes
    -----
    Cost: n^2 dim / 2 for the distances plus about n^2 (B + 1) / 2 multiply-adds for one blocked
    matrix product (n = n_x + n_y). Memory: the B + 1 statistics plus at most about
    130 MB of working memory whatever n and B are: the pooled distance matrix is never
    stored whole, and the relabellings are drawn and evaluated chunk by chunk (the same
    generator calls and arithmetic as all B + 1 at once, so the same p-value bit for
    bit). Paired (m = n/2 pairs): each swap is one m x m quadratic form s'Cs (module
    docstring), about m^2 (B + 1)/2 multiply-adds, a quarter of the pooled form's, for
    the same distances and the same p-value. Ties count as >= (two constant samples give
    p = 1), and so do permuted statistics within a relative 1e-10 of the observed one,
    relative to the mean pooled distance (the scale of the rounding error of a difference
    of mean distances): rounding can only make the p-value larger.

    Paired resolution: the swap group of m pairs has 2**m labellings, and the observed
    one and the full swap give the same statistic, so the exact p-value is at least
    2**(1 - m), with m counting only the pairs whose rows differ (an equal pair swaps into
    itself); data at the group's extreme get exactly that from the exact test. A Monte
    Carlo p-value (1 + #exceed)/(1 + B) can be as small as 1/(1 + B) only by luck: on
    such data each draw reaches T_obs with probability 2**(1 - m), so it returns
    1/(1 + B) with probability (1 - 2**(1 - m))**B (0.50 for m = 16, B = 22799). Hence
    the exact enumeration wherever it is cheap, and ``min_attainable_p`` (here and in
    ``energy_test_sequential``) is the least p-value of these data's relabellings (the
    floor, or more with ties) for an exact test and the median p-value on data at the
    floor for a Monte Carlo one (:func:`kvstats.stats.family_resolution.monte_carlo_resolution`).
    With few pairs (m <= 6, 2**(1 - m) > 0.03) the test cannot reject at 0.05 after a
    correction.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats import energy_test
    >>> rng = np.random.default_rng(0)
    >>> res = energy_test(rng.normal(size=(100, 6)), rng.normal(0.5, 1, size=(100, 6)),
    ...                   n_resamples=199, seed=1)
    >>> res.pvalue
    0.005
    >>> Z = rng.normal(size=(100, 6))                       # paired rows share Z
    >>> res = energy_test(Z + rng.normal(0.3, 0.2, size=(100, 6)),
    ...                   Z + rng.normal(0.0, 0.2, size=(100, 6)), n_resamples=199, seed=1,
    ...                   paired=True)
    >>> res.pvalue, res.paired
    (0.005, True)
    """
    X, Y, standardize = _prepare(X, Y, standardize, kind)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    rng = as_generator(seed)
    n_x, n_y, dim = len(X), len(Y), X.shape[1]
    paired, Z, e, classes, floor = _scaled_group(method, X, Y, paired)
    n = n_x + n_y
    if classes is not None:
        with np.errstate(over="ignore", invalid="ignore"):   # refused just below
            stats_all, total = _exact_statistics(Z, n_x, kind, paired)
        return _exact_result(stats_all, total, e, kind=kind, standardize=standardize,
                             n_x=n_x, n_y=n_y, dim=dim, paired=paired, floor=floor)
    # Row 0 is the observed labelling, rows 1..B the relabellings, drawn and evaluated batch
    # by batch on the chunks the cores cut from all B + 1 rows at once: the same generator
    # calls in the same order and the same arithmetic as one (B + 1)-row array (a row's
    # statistic can differ in the last bits with its place in a chunk), so the same
    # statistics bit for bit, in memory bounded whatever B is. Batch i holds draws
    # bounds[i]:bounds[i + 1]; the first has one draw fewer to make room for row 0.
    if paired:
        # each swap is one m x m quadratic form (module docstring); row 0 keeps every pair
        forms = _SwapForms(Z[:n_x], Z[n_x:])
        observed, chunk = np.ones((1, n_x), dtype=bool), forms.chunk
        bounds = _batch_bounds(chunk, n_resamples)
        batches = ((start, _random_keeps(rng, stop - start, n_x))
                   for start, stop in zip(bounds[:-1], bounds[1:]))

        def statistics(rows):
            q = forms.forms(rows)
            return _swap_statistics(q, forms.total, n_x, kind), forms.total
    else:
        observed, chunk = np.arange(n)[None, :] < n_x, _pooled_blocking(n)[1]
        batches = _subset_batches(rng, _batch_bounds(chunk, n_resamples), n, n_x)

        def statistics(rows):
            return _permutation_statistics(Z, rows, kind)
    stats_all = np.empty(n_resamples + 1)
    with np.errstate(over="ignore", invalid="ignore"):   # refused just below
        for start, rows in batches:
            if start == 0:
                rows = np.concatenate([observed, rows])
            else:
                start += 1                                  # draw i is row i + 1
            stats_all[start:start + len(rows)], total = statistics(rows)
    if not (np.isfinite(stats_all).all() and np.isfinite(total)):
        # a NaN statistic compares False with everything: it must never become a p-value
        raise ValueError(f"X and Y: the energy statistics are not finite (observed "
                         f"{stats_all[0]}, pooled distance sum {total}); the distances "
                         f"overflow float64")
    t_obs, null = float(stats_all[0]), stats_all[1:]
    # ties count as >= (a constant pooled sample gives p = 1), within _tie_tolerance
    pvalue = ((1.0 + np.count_nonzero(null >= t_obs - _tie_tolerance(total, n)))
              / (1.0 + n_resamples))
    if e:
        t_obs = float(_unscale(t_obs, e, "energy statistic"))
        null = _unscale(null, e, "permutation statistic")
    return EnergyTestResult(statistic=t_obs, pvalue=float(pvalue),
                            test_statistic=n_x * n_y / n * t_obs, null_distribution=null,
                            n_resamples=n_resamples, kind=kind, standardize=standardize,
                            n_x=n_x, n_y=n_y, dim=dim, paired=paired,
                            min_attainable_p=monte_carlo_resolution(floor, n_resamples))


def _exact_result(stats_all, total, e, *, floor, **fields) -> EnergyTestResult:
    """energy_test's result from the statistics of every relabelling class (row 0 observed)."""
    n_x, n_y = fields["n_x"], fields["n_y"]
    pvalue, _ = _exact_pvalue(stats_all, total, n_x + n_y)
    floor = _exact_floor(stats_all, total, n_x + n_y, floor)
    if e:   # the observed statistic first: its overflow is the one to name
        _unscale(stats_all[0], e, "energy statistic")
        stats_all = _unscale(stats_all, e, "permutation statistic")
    t_obs = float(stats_all[0])
    return EnergyTestResult(statistic=t_obs, pvalue=pvalue,
                            test_statistic=n_x * n_y / (n_x + n_y) * t_obs,
                            null_distribution=stats_all[1:], n_resamples=len(stats_all),
                            min_attainable_p=floor, method="exact", **fields)
