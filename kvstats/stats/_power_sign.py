"""Exact power of the paired sign test and the pairs needed for a given power
(:func:`power_sign_test`, :func:`pairs_for_power`; import them from :mod:`kvstats.stats.power`).

The sign test (the report's paired location test) needs no model: its power depends only on
the dominance P(a > b | a != b) - P(a < b | a != b) and the share of tied pairs, and is
a finite binomial sum over the number of untied pairs. A module of its own because it
shares nothing with the Mann–Whitney simulation in :mod:`kvstats.stats.power` but the
result base class and the alternatives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from kvstats._checks import check_choice, check_int, check_real

from ._base import _FrameMixin
from .rank import ALTERNATIVES

__all__ = ["SignTestPowerResult", "SignTestPairsResult", "power_sign_test", "pairs_for_power"]


@dataclass(frozen=True)
class SignTestPowerResult(_FrameMixin):
    """Result of :func:`power_sign_test` (exact, no simulation).

    Attributes
    ----------
    power : float
        P(the sign test rejects at ``alpha``) for ``n_pairs`` pairs under the effect.
    size : float
        The same probability at dominance 0: the test's exact size at this design
        (<= ``alpha``; the binomial is discrete, so usually below it).
    dominance, p_zero : float
        The effect: P(a > b | a != b) - P(a < b | a != b), and P(a = b) per pair.
    n_pairs : int
    alpha : float
    alternative : str
    """

    power: float
    size: float
    dominance: float
    p_zero: float
    n_pairs: int
    alpha: float
    alternative: str
    _test_name = "power_sign_test"


@dataclass(frozen=True)
class SignTestPairsResult(_FrameMixin):
    """Result of :func:`pairs_for_power`.

    Attributes
    ----------
    n_pairs : int
        Smallest number of pairs whose exact power reaches ``target_power``.
    achieved_power : float
        The power at ``n_pairs``.
    n_pairs_all_above : int
        Smallest n from which every n' in [n, 2n] reaches the target too: the power of a
        discrete test is a saw-tooth in n, and a design one pair larger than ``n_pairs``
        can fall short (two-sided, no zeros: an odd n often has more power than n + 1).
    target_power, dominance, p_zero, alpha : float
    alternative : str
    """

    n_pairs: int
    achieved_power: float
    n_pairs_all_above: int
    target_power: float
    dominance: float
    p_zero: float
    alpha: float
    alternative: str
    _test_name = "pairs_for_power"


def _binom_half_pvalues(j: np.ndarray, k: np.ndarray, alternative: str, side: str
                        ) -> np.ndarray:
    """:func:`kvstats.stats.proportion.binom_test_half` for arrays (the same expressions),
    for j on one ``side`` of k/2 ("greater": j >= k/2, "less": j <= k/2).

    There the two-sided min(upper, lower) is the tail of that side: the other tail is
    above 1/2 by at least a binomial probability, far more than rounding.
    """
    from scipy import stats

    if (side if alternative == "two-sided" else alternative) == "greater":
        p = stats.binom.sf(j - 1, k, 0.5)        # P(X >= j)
    else:
        p = stats.binom.cdf(j, k, 0.5)           # P(X <= j)
    if alternative == "two-sided":
        p = np.where(np.abs(2 * j - k) <= 1, 1.0, 2.0 * p)
    return np.clip(p, 0.0, 1.0)


def _sign_rejection_bounds(k: np.ndarray, alpha: float, alternative: str
                           ) -> tuple[np.ndarray, np.ndarray]:
    """For k nonzero pairs (an int array): (c_hi, c_lo), the sign test rejects exactly when
    n_positive >= c_hi or n_positive <= c_lo (c_hi = k + 1 / c_lo = -1: never).

    Found by bisection on the test's own p-value expressions
    (:func:`_binom_half_pvalues`), which fall monotonically away from k/2, so the region
    is that of :func:`kvstats.stats.sign_test` to the bit. The bracket starts at k/2 and
    ends where Hoeffding's bound exp(-2t^2/k) on a tail already puts p below alpha.
    """
    side = 1.0 if alternative != "two-sided" else 2.0
    reach = np.ceil(np.sqrt(k * math.log(side / alpha) / 2.0)).astype(np.int64) + 1

    def search(tail: str) -> np.ndarray:
        # smallest j in [ceil(k/2), k] with p_tail(j) <= alpha (tail "greater": P(X >= j);
        # the "less" side is its mirror j -> k - j), else k + 1
        # (a one-sided alpha >= 1/2 can reject below k/2: search from 0 then)
        lo = (k + 1) // 2 if (alternative == "two-sided" or alpha < 0.5) else 0 * k
        hi = np.minimum(k + 1, k // 2 + reach)
        while np.any(lo < hi):
            mid = (lo + hi) // 2
            j = np.minimum(mid, k) if tail == "greater" else k - np.minimum(mid, k)
            ok = (mid <= k) & (_binom_half_pvalues(j, k, alternative, tail) <= alpha)
            hi = np.where(ok, mid, hi)
            lo = np.where(ok, lo, np.minimum(mid + 1, hi))
        return hi

    never = k + 1
    c_hi = never if alternative == "less" else search("greater")
    c_lo = np.full(k.size, -1) if alternative == "greater" else k - search("less")
    return c_hi, c_lo


def _sign_conditional_power(k: np.ndarray, theta: float, alpha: float, alternative: str
                            ) -> np.ndarray:
    """P(reject | k nonzero pairs), k an int array, with P(a > b | a != b) = theta."""
    from scipy import stats

    c_hi, c_lo = _sign_rejection_bounds(k, alpha, alternative)
    # k = 0 (no nonzero pair, p = 1) has the empty region c_hi = 1, c_lo = -1: power 0
    return stats.binom.sf(c_hi - 1, k, theta) + stats.binom.cdf(c_lo, k, theta)


def _sign_power_curve(n_max: int, theta: float, p_zero: float, alpha: float,
                      alternative: str, n_min: int = 1) -> np.ndarray:
    """Exact power for n = n_min..n_max pairs: E over k ~ Bin(n, 1 - p_zero) of the above."""
    from scipy import stats

    ns = np.arange(n_min, n_max + 1)
    # k outside n(1 - p_zero) +- (6 sqrt(n) + 5) has probability < 2 exp(-72) (Hoeffding):
    # each n sums its window of k, all n of a chunk at once
    width = 2 * math.ceil(6.0 * math.sqrt(n_max) + 5.0) + 1
    # the conditional power only where it is used: k = n without zeros, else the windows
    if p_zero == 0.0:
        need = ns
    elif n_min == n_max:
        need = np.clip(math.floor(n_max * (1.0 - p_zero) - (width - 1) / 2)
                       + np.arange(width), 0, n_max)
    else:
        need = np.arange(n_max + 1)
    cond = np.zeros(n_max + 1)
    cond[need] = _sign_conditional_power(need, theta, alpha, alternative)
    if p_zero == 0.0:
        return cond[ns]
    out = np.empty(ns.size)
    step = max(1, 2_000_000 // width)
    for s0 in range(0, ns.size, step):
        n = ns[s0:s0 + step, None]
        k = np.floor(n * (1.0 - p_zero) - (width - 1) / 2).astype(np.int64) + np.arange(width)
        inside = (k >= 0) & (k <= n)
        kc = np.clip(k, 0, n_max)
        pmf = np.where(inside, stats.binom.pmf(kc, n, 1.0 - p_zero), 0.0)
        out[s0:s0 + step] = np.einsum("ij,ij->i", pmf, cond[kc])
    return out


def _check_sign_effect(dominance: float, p_zero: float, alpha: float, alternative: str):
    d = check_real(dominance, "dominance", low=-1.0, high=1.0)
    p0 = check_real(p_zero, "p_zero", low=0.0, high=1.0, high_open=True)
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice(alternative, "alternative", ALTERNATIVES)
    return d, p0, alpha


def power_sign_test(dominance: float, n_pairs: int, alpha: float = 0.05,
                    alternative: str = "two-sided", p_zero: float = 0.0) -> SignTestPowerResult:
    """Exact power of the paired sign test (:func:`kvstats.stats.sign_test`).

    Parameters
    ----------
    dominance : float in [-1, 1]
        The effect as the sign test's own ``dominance``: P(a > b) - P(a < b) among the
        pairs that differ (positive: a larger), i.e. P(a > b | a != b) = (1 + dominance)/2.
    n_pairs : int >= 1
        Pairs (trials, or clusters when the text is the unit).
    alpha : float in (0, 1)
        Level at which the test's p-value is compared (alpha/m for the first Holm step
        of a family of m).
    alternative : {"two-sided", "greater", "less"}
    p_zero : float in [0, 1)
        Probability that a pair's two values are equal (quantized metrics: recall@k,
        argmax shift); such pairs are dropped by the test, so n_nonzero ~ Bin(n, 1 - p_zero).

    Returns
    -------
    SignTestPowerResult
        ``power`` and ``size`` (the same at dominance 0), exact: the binomial law of
        n_positive given n_nonzero summed over the test's rejection region, which is
        found from the test's own p-value expressions (so ``power`` is the probability
        that ``sign_test(...).pvalue <= alpha``, not an approximation of it).

    Notes
    -----
    Only the signs count, so the power depends on the data only through ``dominance``
    and ``p_zero``: it is the same for every distribution of the pairs. For a paired
    difference d ~ N(delta, sigma^2), dominance = 2 Phi(delta / sigma) - 1.

    Examples
    --------
    >>> from kvstats.stats.power import power_sign_test
    >>> res = power_sign_test(0.5, n_pairs=30)
    >>> round(res.power, 4), round(res.size, 4)
    (0.8034, 0.0428)
    >>> round(power_sign_test(0.5, 30, p_zero=0.4).power, 4)      # 40% of the pairs tie
    0.5018
    >>> round(power_sign_test(1.0, 5).power, 4)   # all of one sign: p = 2/32 > 0.05
    0.0
    """
    d, p0, alpha = _check_sign_effect(dominance, p_zero, alpha, alternative)
    n = check_int(n_pairs, "n_pairs", low=1)
    power = float(_sign_power_curve(n, (1.0 + d) / 2.0, p0, alpha, alternative, n_min=n)[0])
    size = float(_sign_power_curve(n, 0.5, p0, alpha, alternative, n_min=n)[0])
    return SignTestPowerResult(power=min(max(power, 0.0), 1.0), size=min(max(size, 0.0), 1.0),
                               dominance=d, p_zero=p0, n_pairs=n, alpha=alpha,
                               alternative=alternative)


def pairs_for_power(dominance: float, power: float = 0.8, alpha: float = 0.05,
                    alternative: str = "two-sided", p_zero: float = 0.0,
                    max_n: int = 100_000) -> SignTestPairsResult:
    """Fewest pairs for the paired sign test to reach a given power (exact).

    The report's paired design tests each metric with the sign test; this is its sample
    size, as :func:`trials_for_power` is Mann–Whitney's.

    Parameters
    ----------
    dominance, alpha, alternative, p_zero :
        As in :func:`power_sign_test` (dominance nonzero, pointing the way of a one-sided
        ``alternative``).
    power : float in (0, 1)
        Target power.
    max_n : int >= 1
        Largest n tried; a ``ValueError`` when the normal approximation of the needed n
        already exceeds it, or when no n <= max_n reaches the target.

    Returns
    -------
    SignTestPairsResult
        ``n_pairs`` (the smallest n reaching the target), its ``achieved_power``, and
        ``n_pairs_all_above`` (from there on, up to twice it, every n does).

    Examples
    --------
    >>> from kvstats.stats.power import pairs_for_power
    >>> res = pairs_for_power(0.5, power=0.8)
    >>> res.n_pairs, round(res.achieved_power, 4), res.n_pairs_all_above
    (30, 0.8034, 35)
    >>> pairs_for_power(0.5, power=0.8, alpha=0.05 / 1140).n_pairs  # Holm's first step, m = 1,140
    92
    """
    d, p0, alpha = _check_sign_effect(dominance, p_zero, alpha, alternative)
    target = check_real(power, "power", low=0.0, high=1.0, low_open=True, high_open=True)
    max_n = check_int(max_n, "max_n", low=1)
    if d == 0:
        raise ValueError("dominance must be nonzero to reach a power above alpha; received 0")
    if (alternative == "greater" and d < 0) or (alternative == "less" and d > 0):
        raise ValueError(f"dominance must point the way of alternative={alternative!r} "
                         f"(> 0 for 'greater', < 0 for 'less'); received {d}")
    theta = (1.0 + d) / 2.0
    # normal approximation of the n needed (the binomial's z-test on the nonzero pairs)
    side = 1 if alternative != "two-sided" else 2
    z_a, z_b = float(special.ndtri(1 - alpha / side)), float(special.ndtri(target))
    k_need = ((0.5 * z_a + z_b * math.sqrt(theta * (1 - theta))) / abs(theta - 0.5)) ** 2
    approx = max(1, math.ceil(k_need / (1.0 - p0)))
    if approx > max_n:
        raise ValueError(f"target power {target} not reached with n_pairs <= max_n={max_n}: "
                         f"the normal approximation needs about {approx:,} pairs; raise max_n "
                         "or the effect")
    hi = min(max_n, 2 * approx + 20)
    curve = _sign_power_curve(hi, theta, p0, alpha, alternative)          # n = 1..hi
    while not (curve >= target).any() and hi < max_n:
        hi = min(max_n, 2 * hi)
        curve = _sign_power_curve(hi, theta, p0, alpha, alternative)
    if not (curve >= target).any():
        raise ValueError(f"target power {target} not reached with n_pairs <= max_n={max_n}; "
                         "raise max_n or the effect")
    first = int(np.argmax(curve >= target)) + 1
    # the saw-tooth: move past every n in [stable, 2 stable] that falls short (the curve
    # is extended beyond max_n for this check when needed)
    stable = first
    while True:
        if 2 * stable > curve.size:
            curve = _sign_power_curve(2 * stable, theta, p0, alpha, alternative)
        short = np.flatnonzero(curve[stable - 1:2 * stable] < target)
        if short.size == 0:
            break
        stable += int(short[-1]) + 1
    return SignTestPairsResult(n_pairs=first, achieved_power=float(curve[first - 1]),
                               n_pairs_all_above=stable, target_power=target, dominance=d,
                               p_zero=p0, alpha=alpha, alternative=alternative)
