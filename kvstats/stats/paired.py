"""Tests for paired samples: the Wilcoxon signed-rank test and the sign test.

Both take x[i] paired with y[i] (two schemes on the same trial or text) and test the
signs of the differences d = x − y, zero differences dropped as R does. The sign test is
the report's paired location test (its dominance P(x > y) − P(x < y) is the paired
analogue of Mann–Whitney's r, :mod:`kvstats.stats.rank`); the signed-rank test weights
each pair by the rank of |d| (docs/statistics.md, "Paired designs").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float
from scipy import special, stats

from kvstats._checks import check_choice, check_int, check_real

from ._base import _FrameMixin, as_sample
from .proportion import binom_test_half, clopper_pearson_interval
from .rank import ALTERNATIVES

__all__ = ["SignedRankResult", "SignTestResult", "wilcoxon_signed_rank", "sign_test"]


# --------------------------------------------------------------------------------------
# Paired samples: the Wilcoxon signed-rank test
# --------------------------------------------------------------------------------------

SIGNRANK_METHODS = ("auto", "exact", "normal")
# R's rule (wilcox.test, R 4.2): the exact distribution by default when fewer than 50
# non-zero differences remain and there are neither zeros nor ties.
_SIGNRANK_AUTO_EXACT_BELOW = 50
# method="exact" builds the distribution by dynamic programming over n non-zero
# differences: O(n^3) operations (n = 1,000: ~1 s); beyond this it is refused.
_SIGNRANK_EXACT_MAX = 1000


@dataclass(frozen=True)
class SignedRankResult(_FrameMixin):
    """Result of :func:`wilcoxon_signed_rank`.

    Attributes
    ----------
    statistic : float
        V = sum of the ranks of |d| (mid-ranks for ties) over the positive differences
        d = x - y, zero differences dropped (R's ``wilcox.test(x, y, paired = TRUE)``).
    pvalue : float
        p-value for ``alternative``; 1 when every difference is zero.
    method : str
        "exact" or "normal" (the one actually used).
    alternative : str
        "two-sided", "greater" (x tends to exceed y) or "less".
    n_pairs : int
        Number of pairs.
    n_nonzero : int
        Pairs with x != y (the ones ranked).
    ties : bool
        Whether the non-zero |d| contain tied values.
    rank_biserial : float
        Matched-pairs rank-biserial correlation r = (T+ - T-)/(T+ + T-) over the
        non-zero pairs, in [-1, 1], positive when x tends to exceed y (0 when every
        difference is zero).
    rank_biserial_low, rank_biserial_high : float
        Confidence interval for r at level ``confidence`` (score interval, see
        :func:`wilcoxon_signed_rank`; [-1, 1] when every difference is zero).
    confidence : float
        Level of the interval.
    note : str
        Empty, or why the result is degenerate ("every difference is zero ...").
    """

    statistic: float
    pvalue: float
    method: str
    alternative: str
    n_pairs: int
    n_nonzero: int
    ties: bool
    rank_biserial: float
    rank_biserial_low: float
    rank_biserial_high: float
    confidence: float
    note: str = ""
    _test_name = "wilcoxon_signed_rank"


@functools.lru_cache(maxsize=64)
def _signrank_counts_untied(n: int) -> tuple[np.ndarray, int]:
    """Null counts of 2V for ranks 1..n without ties (see :func:`_signrank_counts`)."""
    counts, e = _signrank_counts(tuple(range(2, 2 * n + 1, 2)))
    counts.flags.writeable = False            # cached: shared by every call
    return counts, e


def _signrank_counts(weights: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """Counts c and exponent e with P(2V = s) = c[s] * 2**e under the null.

    ``weights`` are the doubled ranks 2 r_i (integers: mid-ranks are multiples of 1/2).
    Under the null each of the 2^n sign vectors is equally likely, so the counts are the
    coefficients of prod_i (1 + q^(w_i)): one shifted addition per difference. Up to 52
    weights they are integers below 2^53, exact in float64 (e = -n), and so are their
    tail sums: the p-value is exact. Beyond, each step halves (probabilities, e = 0,
    relative rounding error below n 2^-53).
    """
    c = np.zeros(int(sum(weights)) + 1)
    c[0] = 1.0
    top = 0
    halve = len(weights) > 52
    for w in weights:
        c[w:top + w + 1] += c[:top + 1].copy() if w <= top else c[:top + 1]
        top += w
        if halve:
            c[:top + 1] *= 0.5
    return c, (0 if halve else -len(weights))


def _signrank_exact_pvalue(v: float, ranks: np.ndarray, ties: bool, alternative: str) -> float:
    """Exact conditional p-value of V given |d| (the 2^n equally likely sign vectors)."""
    n = ranks.size
    if ties:
        counts, e = _signrank_counts(tuple(int(w) for w in np.rint(2 * ranks)))
    else:
        counts, e = _signrank_counts_untied(n)
    s = int(round(2 * v))
    if alternative == "greater":
        tail = counts[s:].sum()                                 # P(V >= v)
    elif alternative == "less":
        tail = counts[:s + 1].sum()                             # P(V <= v)
    else:  # R: the tail on the side of V away from the centre n(n+1)/4, doubled
        tail = 2.0 * (counts[s:].sum() if 4 * v > n * (n + 1) else counts[:s + 1].sum())
    return min(max(float(np.ldexp(tail, e)), 0.0), 1.0)


def _signrank_normal_pvalue(v: float, n: int, tie_term: float, alternative: str) -> float:
    """R's normal approximation: tie-corrected variance, continuity correction 1/2."""
    z = v - n * (n + 1) / 4.0
    sigma = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0 - tie_term / 48.0)
    corr = {"two-sided": 0.5 * float(np.sign(z)), "greater": 0.5, "less": -0.5}[alternative]
    z = (z - corr) / sigma
    if alternative == "less":
        return float(special.ndtr(z))
    if alternative == "greater":
        return float(special.ndtr(-z))
    return float(2.0 * min(special.ndtr(z), special.ndtr(-z)))


# The interval's variance: the model's covariance term is raised to the data's own
# estimate when that is larger (heavy tails), by at most this factor, from this many
# non-zero differences on (fewer: the estimate is too noisy to use).
_ZETA_INFLATION_MAX = 4.0
_ZETA_MIN_N = 10


def _zeta1_model(theta: float) -> float:
    """Hanley-McNeil model of zeta_1 = Cov(h(D1, D2), h(D1, D3)), h = 1[D + D' > 0].

    theta(1 - theta)/2 [(1 - theta)/(2 - theta) + theta/(1 + theta)] (the symmetrised
    form of Newcombe's method 5): 1/12 under the null, as it must be, and zero at
    theta = 0 and 1.
    """
    return 0.5 * theta * (1.0 - theta) * ((1.0 - theta) / (2.0 - theta) + theta / (1.0 + theta))


def _zeta1_inflation(d: Float[np.ndarray, "n"], theta: float) -> float:
    """max(1, zeta1_hat / zeta1_model(theta_hat)), at most _ZETA_INFLATION_MAX.

    zeta1_hat is the sample variance of the placements h1(d_i) = #{j != i : d_i + d_j > 0}
    (+ half the zero sums) / (n - 1): the consistent estimate of zeta_1. Heavy-tailed
    differences have a larger zeta_1 than the model near |r| = 1 (t_2 + 1.5: the model's
    interval covers 0.932 at n = 400); the inflation restores it, and never narrows the
    model's interval. 1 below _ZETA_MIN_N differences or when theta_hat is 0 or 1.
    """
    n = d.size
    model = _zeta1_model(theta)
    if n < _ZETA_MIN_N or model <= 0.0:
        return 1.0
    s = np.sort(d)
    right = np.searchsorted(s, -d, side="right")
    above = n - right                                    # j with d_j > -d_i
    equal = right - np.searchsorted(s, -d, side="left")  # j with d_j = -d_i (never i itself)
    h1 = (above + 0.5 * equal - (d > 0)) / (n - 1)       # j = i counted in above iff d_i > 0
    return min(max(float(h1.var(ddof=1)) / model, 1.0), _ZETA_INFLATION_MAX)


def _signrank_theta_variance(theta: float, n: int, inflation: float = 1.0) -> float:
    """Variance of theta_hat = T+/(n(n+1)/2) at theta = P(D + D' > 0), for the interval.

    theta_hat is (up to its O(1/n) diagonal) the U-statistic of the kernel
    1[d_i + d_j > 0], whose variance is [4(n-2) zeta_1 + 2 theta(1 - theta)] / (n(n-1)),
    with zeta_1 = ``inflation`` x :func:`_zeta1_model` (theta). n = 1: theta(1 - theta).
    """
    pq = theta * (1.0 - theta)
    if n < 2:
        return pq
    return (4.0 * (n - 2) * inflation * _zeta1_model(theta) + 2.0 * pq) / (n * (n - 1))


def _score_interval(theta: float, n: int, z: float, inflation: float) -> tuple[float, float]:
    """{t in [0, 1] : (theta - t)^2 <= z^2 V(t)} by bisection on each side of theta.

    Scalar Python floats: 2 x 60 evaluations of a closed form cost ~0.1 ms, far less
    than the same loop over numpy arrays (the test runs hundreds of times per report).
    """
    z2 = z * z

    def inside(t: float) -> bool:
        return (theta - t) ** 2 <= z2 * _signrank_theta_variance(t, n, inflation)

    # lower limit in [0, theta] (0 is outside or on the boundary, theta inside) ...
    a, b = 0.0, theta
    for _ in range(60):
        mid = 0.5 * (a + b)
        a, b = (a, mid) if inside(mid) else (mid, b)
    low = b
    # ... upper limit in [theta, 1]
    a, b = theta, 1.0
    for _ in range(60):
        mid = 0.5 * (a + b)
        a, b = (mid, b) if inside(mid) else (a, mid)
    return low, a


def wilcoxon_signed_rank(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "n"], *,
                         alternative: str = "two-sided", confidence: float = 0.95,
                         method: str = "auto") -> SignedRankResult:
    """Wilcoxon signed-rank test of paired samples, with the matched-pairs rank-biserial r.

    Parameters
    ----------
    x, y : array_like, 1-D, same length >= 1
        Paired values: x[i] goes with y[i] (e.g. two schemes on the same trial). Finite.
    alternative : {"two-sided", "greater", "less"}
        "greater": x tends to exceed y (the differences d = x - y tend to be positive).
    confidence : float in (0, 1)
        Level of the interval for the rank-biserial correlation.
    method : {"auto", "exact", "normal"}
        "exact": the exact permutation distribution of V given |d| (each non-zero
        difference's sign flipped with probability 1/2). Without zeros or ties it is
        R's ``psignrank``; with ties (mid-ranks) or zeros it is still the exact
        conditional distribution (R's ``exact = TRUE`` falls back to the normal
        approximation there). At most 1,000 non-zero differences.
        "normal": R's normal approximation, tie-corrected variance
        n(n+1)(2n+1)/24 - sum(t^3 - t)/48 and continuity correction 1/2.
        "auto": R's default rule, exact when fewer than 50 non-zero differences remain
        and there are no zeros and no ties, normal otherwise.

    Returns
    -------
    SignedRankResult
        ``statistic`` V (R's V: ranks of the positive differences), ``pvalue``,
        ``method`` used, ``n_pairs``, ``n_nonzero``, ``ties``, ``rank_biserial``
        r = (T+ - T-)/(T+ + T-) and its interval, ``note``.

    Notes
    -----
    Zero differences are dropped before ranking (R's default; scipy's
    ``zero_method="wilcox"``). When every difference is zero there is nothing to test:
    p = 1, V = 0, ``n_nonzero`` = 0, r = 0 with the interval [-1, 1], and ``note`` says so.

    The interval for r: with T+ + T- = n(n+1)/2, theta_hat = (r + 1)/2 = T+/(n(n+1)/2)
    estimates theta = P(D + D' > 0) (+ half the zero sums) for two independent non-zero
    differences. The score-type interval {theta : (theta_hat - theta)^2 <= z^2 V(theta)}
    is mapped to r = 2 theta - 1, with V the variance of the U-statistic whose covariance
    term zeta_1 follows a Hanley-McNeil model (Newcombe's method 5 carried over to one
    sample), raised to the data's placement estimate of zeta_1 when that is larger
    (heavy tails; at most 4x, from 10 differences on). It stays inside [-1, 1] and is not
    degenerate when every difference has the same sign. Coverage measured in
    docs/statistics.md (0.946-0.972 at 95% on normal, t_2 and exponential differences,
    n = 20-400); ties make it conservative.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.stats import wilcoxon_signed_rank
    >>> x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
    >>> y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]
    >>> res = wilcoxon_signed_rank(x, y, alternative="greater")   # R: V = 40, p = 0.01953
    >>> res.statistic, round(res.pvalue, 5), res.method
    (40.0, 0.01953, 'exact')
    >>> round(res.rank_biserial, 3)
    0.778
    """
    x = as_sample(x, "x")
    y = as_sample(y, "y")
    if x.size != y.size:
        raise ValueError(f"x and y must be paired (the same length); received len(x)={x.size}, "
                         f"len(y)={y.size}")
    check_choice(alternative, "alternative", ALTERNATIVES)
    check_choice(method, "method", SIGNRANK_METHODS)
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True,
                            high_open=True)
    with np.errstate(over="ignore"):      # handled just below
        d = x - y
    if not np.isfinite(d).all():
        # finite values ~1e308 apart overflow; halving first keeps every order and tie
        # (exact for normal numbers), which is all the ranks use
        d = 0.5 * x - 0.5 * y
    d = d[d != 0]
    n_pairs, n = x.size, d.size
    if n == 0:
        used = "exact" if method == "exact" else "normal"
        return SignedRankResult(statistic=0.0, pvalue=1.0, method=used, alternative=alternative,
                                n_pairs=n_pairs, n_nonzero=0, ties=False, rank_biserial=0.0,
                                rank_biserial_low=-1.0, rank_biserial_high=1.0,
                                confidence=confidence,
                                note="every difference is zero: no sign to test (p = 1)")
    ranks = stats.rankdata(np.abs(d))
    v = float(ranks[d > 0].sum())
    counts = np.unique(np.abs(d), return_counts=True)[1].astype(np.float64)
    tie_term = float(np.sum(counts**3 - counts))
    ties = tie_term > 0
    if method == "exact":
        if n > _SIGNRANK_EXACT_MAX:
            raise ValueError(f"method='exact' is limited to {_SIGNRANK_EXACT_MAX} non-zero "
                             f"differences; received {n}; use method='normal'")
        used = "exact"
    elif method == "normal":
        used = "normal"
    else:
        used = ("exact" if n < _SIGNRANK_AUTO_EXACT_BELOW and not ties and n == n_pairs
                else "normal")
    if used == "exact":
        pvalue = _signrank_exact_pvalue(v, ranks, ties, alternative)
    else:
        pvalue = _signrank_normal_pvalue(v, n, tie_term, alternative)
    half_total = n * (n + 1) / 2.0            # T+ + T-, mid-ranks included
    theta = v / half_total
    zq = float(special.ndtri(0.5 + confidence / 2))
    lo, hi = _score_interval(theta, n, zq, _zeta1_inflation(d, theta))
    return SignedRankResult(statistic=v, pvalue=pvalue, method=used, alternative=alternative,
                            n_pairs=n_pairs, n_nonzero=n, ties=bool(ties),
                            rank_biserial=2.0 * theta - 1.0, rank_biserial_low=2.0 * lo - 1.0,
                            rank_biserial_high=2.0 * hi - 1.0, confidence=confidence)


# --------------------------------------------------------------------------------------
# Paired samples: the sign test
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignTestResult(_FrameMixin):
    """Result of :func:`sign_test`.

    Attributes
    ----------
    statistic : float
        The number of positive differences d = x - y (R's ``binom.test`` "number of
        successes"), as a float like every result's statistic; equals ``n_positive``.
    pvalue : float
        Exact binomial p-value of ``n_positive`` ~ Bin(``n_nonzero``, 1/2) for
        ``alternative``; 1 when every difference is zero.
    alternative : str
        "two-sided", "greater" (x tends to exceed y) or "less".
    n_pairs : int
        Number of pairs.
    n_nonzero : int
        Pairs with x != y (the ones tested): ``n_positive + n_negative``.
    n_positive, n_negative : int
        Pairs with x > y and with x < y.
    dominance : float
        (n_positive - n_negative) / n_nonzero = 2 theta_hat - 1 with
        theta_hat = n_positive / n_nonzero, in [-1, 1]: an estimate of
        P(X > Y) - P(X < Y) within a pair given X != Y, positive when x tends to exceed
        y (0 when every difference is zero).
    dominance_low, dominance_high : float
        Confidence interval for the dominance at level ``confidence``: the Clopper–Pearson
        interval of theta mapped by 2 theta - 1 ([-1, 1] when every difference is zero).
    confidence : float
        Level of the interval.
    note : str
        Empty, or why the result is degenerate ("every difference is zero ...").

    Examples
    --------
    >>> res = sign_test([3.0, 2.0, 5.0, 4.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0])   # 4 of 4 positive
    >>> res.pvalue, res.min_attainable_p, res.resolvable(0.05), res.resolvable(0.05 / 10)
    (0.125, 0.125, False, False)
    """

    statistic: float
    pvalue: float
    alternative: str
    n_pairs: int
    n_nonzero: int
    n_positive: int
    n_negative: int
    dominance: float
    dominance_low: float
    dominance_high: float
    confidence: float
    note: str = ""
    _test_name = "sign_test"

    @property
    def min_attainable_p(self) -> float:
        """The smallest p-value the test could return on these ``n_nonzero`` differences
        (every sign alike: :func:`sign_test_floor`), whatever their signs."""
        return sign_test_floor(self.n_nonzero, self.alternative)

    def resolvable(self, alpha_needed: float) -> bool:
        """Whether the test could reject at ``alpha_needed`` (a Holm step's α/m, say) on
        these ``n_nonzero`` differences: if not, a p-value above it says nothing."""
        return self.min_attainable_p <= alpha_needed


def sign_test_floor(n_nonzero: int, alternative: str = "two-sided") -> float:
    """Smallest p-value of the exact sign test on ``n_nonzero`` nonzero differences: all of
    one sign, min(1, 2·2⁻ᵏ) two-sided, 2⁻ᵏ one-sided (1 when k = 0).

    Parameters
    ----------
    n_nonzero : int >= 0
        The number k of nonzero differences (a bool is refused, not read as 0 or 1).
    alternative : {"two-sided", "less", "greater"}
        As in :func:`sign_test`.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        ``n_nonzero`` is not an integer (2.7, NaN, True).
    ValueError
        ``n_nonzero`` is negative, or ``alternative`` is not one of the three.

    Examples
    --------
    >>> sign_test_floor(5), sign_test_floor(5, "greater"), sign_test_floor(0)
    (0.0625, 0.03125, 1.0)
    """
    n_nonzero = check_int(n_nonzero, "n_nonzero", low=0)
    check_choice(alternative, "alternative", ALTERNATIVES)
    return min(1.0, math.ldexp(1.0, int(alternative == "two-sided") - n_nonzero))


def sign_test(x: Float[np.ndarray, "n"], y: Float[np.ndarray, "n"], *,
              alternative: str = "two-sided", confidence: float = 0.95) -> SignTestResult:
    """Exact sign test of paired samples, with the within-pair dominance and its interval.

    Parameters
    ----------
    x, y : array_like, 1-D, same length >= 1
        Paired values: x[i] goes with y[i] (e.g. two schemes on the same trial). NaN is
        refused; +-inf is allowed, since only the order within a pair is read (+inf > 1,
        and two equal infinities are a tie), unlike :func:`wilcoxon_signed_rank`, which
        ranks the differences.
    alternative : {"two-sided", "greater", "less"}
        "greater": x tends to exceed y within a pair (P(X > Y) > P(X < Y)); "less": the
        reverse.
    confidence : float in (0, 1)
        Level of the interval for the dominance.

    Returns
    -------
    SignTestResult
        ``statistic`` = ``n_positive``, ``pvalue``, ``n_pairs``, ``n_nonzero``,
        ``n_positive``, ``n_negative``, ``dominance`` (n_positive - n_negative)/n_nonzero
        and its interval, ``note``.

    Notes
    -----
    Only the sign of each difference d = x - y counts. Zero differences are dropped and
    the test is conditional on their number: under the null (a pair is as likely to have
    x > y as x < y) ``n_positive`` ~ Bin(``n_nonzero``, 1/2). The p-value is that
    binomial's exact tail, P(X >= k) for "greater", P(X <= k) for "less" and, as R's
    ``binom.test(k, n, 0.5)``, min(1, 2 min of the two) for "two-sided". The signs are
    read from comparisons of x and y, so values ~1e308 apart cannot overflow.

    The dominance 2 theta_hat - 1, theta_hat = n_positive / n_nonzero, is the paired
    analogue of the Mann–Whitney rank-biserial r = P(X > Y) - P(X < Y): on the same
    pair rather than on independent draws. Its interval is the Clopper–Pearson interval
    of theta mapped by 2 theta - 1: the inversion of the exact test, so it excludes 0
    exactly when the two-sided p-value is below 1 - ``confidence`` (a one-sided test can
    reject with 0 inside it; the Wilson interval, used before 2026-12-03, excluded 0 at 4
    of 4 pairs of one sign, p = 0.125). When every difference is zero there is nothing to
    test: p = 1, dominance 0 with the interval [-1, 1], and ``note`` says so.

    Unlike :func:`wilcoxon_signed_rank`, which weights each pair by the rank of |d|,
    every pair here counts once. The two can point opposite ways when the differences
    are skewed: with d = (1, 2, 3, -20, -30), x is larger in 3 of the 5 pairs
    (dominance +0.2) but the two negative differences hold the largest ranks
    (T+ = 6, T- = 9, r = -0.2). The sign test answers "which is larger on more pairs";
    the signed-rank test, roughly, "is d symmetric about 0".

    Examples
    --------
    >>> from kvstats.stats import sign_test, wilcoxon_signed_rank
    >>> d = [1.0, 2.0, 3.0, -20.0, -30.0]
    >>> res = sign_test(d, [0.0] * 5)
    >>> res.n_positive, res.n_negative, round(res.dominance, 3), res.pvalue   # R: p = 1
    (3, 2, 0.2, 1.0)
    >>> round(wilcoxon_signed_rank(d, [0.0] * 5).rank_biserial, 3)
    -0.2
    >>> res = sign_test([5, 6, 7, 8, 9, 9], [1, 2, 3, 4, 5, 9], alternative="greater")
    >>> res.n_nonzero, res.pvalue          # R: binom.test(5, 5, 0.5, "greater"): 0.03125
    (5, 0.03125)
    """
    # only the order within each pair matters, so +-inf is a value like any other (the SNR of
    # an exact reconstruction is +inf); equal infinities are a tie
    x = as_sample(x, "x", allow_inf=True)
    y = as_sample(y, "y", allow_inf=True)
    if x.size != y.size:
        raise ValueError(f"x and y must be paired (the same length); received len(x)={x.size}, "
                         f"len(y)={y.size}")
    check_choice(alternative, "alternative", ALTERNATIVES)
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True,
                            high_open=True)
    n_pairs = int(x.size)
    n_pos = int(np.count_nonzero(x > y))
    n_neg = int(np.count_nonzero(x < y))
    n = n_pos + n_neg
    if n == 0:
        return SignTestResult(statistic=0.0, pvalue=1.0, alternative=alternative,
                              n_pairs=n_pairs, n_nonzero=0, n_positive=0, n_negative=0,
                              dominance=0.0, dominance_low=-1.0, dominance_high=1.0,
                              confidence=confidence,
                              note="every difference is zero: no sign to test (p = 1)")
    pvalue = binom_test_half(n_pos, n, alternative)
    lo, hi = (float(v) for v in clopper_pearson_interval(n_pos, n, confidence))
    return SignTestResult(statistic=float(n_pos), pvalue=pvalue, alternative=alternative,
                          n_pairs=n_pairs, n_nonzero=n, n_positive=n_pos, n_negative=n_neg,
                          dominance=(n_pos - n_neg) / n, dominance_low=2.0 * lo - 1.0,
                          dominance_high=2.0 * hi - 1.0, confidence=confidence)
