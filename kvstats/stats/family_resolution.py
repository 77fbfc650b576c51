"""The permutations a test needs to be able to reject inside a corrected family.

A Monte Carlo permutation test with B relabellings cannot return a p-value below
1/(1 + B); inside a family of m tests the correction's first (most demanding) step asks
for about alpha/m (each correction's step in closed form: :mod:`kvstats.stats.catalog`).
:func:`required_resolution` gives that level and the smallest B that reaches it, read by
the report's header and by :func:`kvstats.analysis.compare_schemes`, which runs the
sequential tests of :mod:`kvstats.stats.sequential` up to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvstats._checks import check_choice, check_int, check_real

from ._base import _FrameMixin
from .catalog import CORRECTIONS  # each one's first (most demanding) step in closed form
from .multitest import adjust_pvalues

__all__ = ["Resolution", "required_resolution", "monte_carlo_resolution"]


@dataclass(frozen=True)
class Resolution(_FrameMixin):
    """Result of :func:`required_resolution`.

    Attributes
    ----------
    p_needed : float
        Smallest per-test p-value the correction can reject at ``alpha`` in the worst
        case (the test is the family's most significant one and every other p is large).
    n_permutations : int
        Smallest B whose most extreme p-value 1/(1 + B) the correction rejects in the worst
        case, as :func:`kvstats.stats.adjust_pvalues` computes it (adjusted p <= alpha): the
        smallest B with 1/(1 + B) <= ``p_needed`` up to float rounding (one B either way).
    min_attainable_p : float
        1/(1 + ``n_permutations``).
    n_tests, alpha, correction :
        The family.
    """

    p_needed: float
    n_permutations: int
    min_attainable_p: float
    n_tests: int
    alpha: float
    correction: str
    _test_name = "required_resolution"


def _first_step_level(n_tests: int, alpha: float, correction: str) -> float:
    if correction in ("sidak", "holm-sidak"):
        return float(-np.expm1(np.log1p(-alpha) / n_tests))
    if correction == "fdr_by":
        return alpha / (n_tests * float(np.sum(1.0 / np.arange(1, n_tests + 1))))
    return alpha / n_tests


def _rejects_first(b: int, n_tests: int, alpha: float, correction: str) -> bool:
    """Whether the family's correction rejects p = 1/(1 + b) when the other m - 1 p-values
    are 1 (the worst case), by :func:`adjust_pvalues` itself: the float path the report
    decides with (a closed form such as p m rounds differently from statsmodels' p/(1/m))."""
    if b < 1:
        return False   # p = 1 (b = 0) is never below alpha < 1
    p = np.ones(n_tests)
    p[0] = 1.0 / (1 + b)
    res = adjust_pvalues(p, method=correction, alpha=alpha)
    return bool(res.reject[0]) and bool(res.pvalues_adjusted[0] <= alpha)


def _smallest_rejecting(b0: int, rejects) -> int:
    """Smallest b with ``rejects(b)``, monotone in b, starting near b0 (the closed form's
    answer, at most a few float roundings off): bracket by doubling steps, then bisect."""
    lo, hi, step = b0 - 1, b0, 1
    while not rejects(hi):
        lo, hi, step = hi, hi + step, 2 * step
    step = 1
    while lo >= 1 and rejects(lo):
        hi, lo, step = lo, max(lo - step, 0), 2 * step
    while hi - lo > 1:   # rejects(hi); not rejects(lo) (or lo < 1: never)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rejects(mid) else (mid, hi)
    return hi


def _permutations_for(p_needed: float) -> int:
    """Smallest B with 1/(1 + B) <= p_needed, both sides in float as a test's p-value is
    compared (rounding-safe). A bisection, not a walk up from 1/p_needed: past 2^53 one
    more permutation no longer moves 1/(1 + B), and a walk would never end."""
    def attains(b: int) -> bool:
        return 1.0 / (1 + b) <= p_needed

    hi = max(0, math.ceil(1.0 / p_needed) - 1)
    while not attains(hi):   # rounding: a few steps up at most
        hi = 2 * hi + 1
    lo = -1   # attains(-1) is 1/0: never
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mid >= 0 and attains(mid) else (mid, hi)
    return hi


def required_resolution(n_tests: int, alpha: float = 0.05, correction: str = "holm") -> Resolution:
    """Permutations a test needs to be able to reject inside a corrected family.

    Parameters
    ----------
    n_tests : int >= 1
        Size m of the family (every p-value the correction sees).
    alpha : float in (0, 1)
        Family-wise error rate (false-discovery rate for "fdr_*").
    correction : str
        One of ``CORRECTIONS``. Holm, Bonferroni, Hommel and BH all need alpha/m for the
        first rejection in the worst case (BH with a single true effect); BY needs
        alpha/(m H_m); Šidák and Holm–Šidák 1 - (1 - alpha)^(1/m).

    Returns
    -------
    Resolution
        ``p_needed`` and ``n_permutations``: the smallest B for which
        ``adjust_pvalues([1/(1 + B), 1, ..., 1], correction, alpha)`` rejects the first
        p-value (adjusted <= alpha), the float path the report decides with. It starts
        from the smallest B with 1/(1 + B) <= p_needed and moves (by one, rarely) where
        rounding differs: e.g. BH at m = 49 needs B = 980, not 979 (1/980 adjusts to
        0.05000000000000001).

    Examples
    --------
    >>> from kvstats.stats.family_resolution import required_resolution
    >>> r = required_resolution(1140)          # the quick report's family
    >>> r.n_permutations, round(r.p_needed, 8)
    (22799, 4.386e-05)
    """
    n_tests = check_int(n_tests, "n_tests", low=1)
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice(correction, "correction", CORRECTIONS)
    p_needed = _first_step_level(n_tests, alpha, correction)
    b = _smallest_rejecting(_permutations_for(p_needed),
                            lambda b: _rejects_first(b, n_tests, alpha, correction))
    return Resolution(p_needed=p_needed, n_permutations=b, min_attainable_p=1.0 / (1 + b),
                      n_tests=n_tests, alpha=alpha, correction=correction)


def monte_carlo_resolution(floor: float, n_permutations: int, h: int | None = None) -> float:
    """The p-value a Monte Carlo permutation test returns at least half the time on data at
    its relabelling group's extreme: the test's resolution.

    On such data a share ``floor`` of the relabellings gives the observed statistic (or
    more), so each of the B = ``n_permutations`` draws is an exceedance with probability
    ``floor``. The fixed-B p-value (1 + K)/(1 + B), K ~ Bin(B, floor), has median
    (1 + k)/(1 + B) with k the median of K. With the sequential rule (stop at the h-th
    exceedance, :func:`kvstats.stats.sequential.sequential_permutation_test`) a p-value of
    h/L has P(p <= h/l) = P(Bin(l - 1, floor) <= h - 1). The result is the smallest
    attainable p-value a with P(p <= a) >= 1/2, so ``result <= alpha`` says exactly that the
    most extreme data reject at alpha with probability at least 1/2. It is 1/(1 + B) when
    (1 - floor)^B >= 1/2 (floor below about ln 2/B), above it otherwise: a test that rejects
    on the most extreme data only by luck is not counted as able to reject.

    Parameters
    ----------
    floor : float in [0, 1]
        The exact permutation p-value of the most extreme data (the group's floor: 2**(1 - m)
        for m pairs swapped within pairs, 2/C(2n, n) for n against n).
    n_permutations : int >= 1
        B (B_max for the sequential test).
    h : int >= 1, optional
        The sequential test's stopping count; None (or h > B): the fixed-B test.

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.stats.family_resolution import monte_carlo_resolution
    >>> monte_carlo_resolution(2.0**-20, 22799) == 1 / 22800      # 21 pairs: (1 - f)^B = 0.98
    True
    >>> monte_carlo_resolution(2.0**-15, 22799) == 2 / 22800      # 16 pairs: (1 - f)^B = 0.499
    True
    >>> round(monte_carlo_resolution(2.0**-7, 999, h=5), 5)       # 8 pairs: stops after ~h/f draws
    0.00836
    """
    from scipy.stats import binom

    floor = check_real(floor, "floor", low=0.0, high=1.0)
    b = check_int(n_permutations, "n_permutations", low=1)
    h = b + 1 if h is None else check_int(h, "h", low=1)
    if h > b or binom.cdf(h - 1, b, floor) >= 0.5:
        # not stopped at least half the time: the median of (1 + K)/(1 + B), K ~ Bin(B, floor)
        return float((1.0 + binom.ppf(0.5, b, floor)) / (1.0 + b))
    # stopped more than half the time: the largest l with P(Bin(l - 1, floor) <= h - 1) >= 1/2
    # (it decreases in l; it is 1 at l = h), and p = h/l
    lo, hi = h, b + 1   # attains at lo; not at hi (Bin(B, floor): the case just excluded)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if binom.cdf(h - 1, mid - 1, floor) >= 0.5 else (lo, mid)
    return h / lo
