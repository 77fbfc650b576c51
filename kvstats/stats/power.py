"""Power of the Mann–Whitney test by simulation, of the paired sign test exactly, and the
trials (pairs) needed for a given power.

Mann–Whitney's data-generating model (documented in docs/statistics.md): x ~ N(delta, 1)
(n_x draws), y ~ N(0, 1) (n_y draws), independent. A rank-biserial effect r corresponds to
theta = P(X > Y) = (1 + r)/2 = Phi(delta / sqrt(2)), i.e. delta = sqrt(2) Phi^-1((1 + r)/2).
The rank test's power depends on the data only through the ranks, so for any continuous
location-shift family with the same theta the power is close to (not equal to) this
normal-shift power.

The sign test (the report's paired location test) needs no model: its power depends only on
the dominance P(a > b | a != b) - P(a < b | a != b) and the share of tied pairs, and is
a finite binomial sum (:func:`power_sign_test`, :func:`pairs_for_power`). Those two and
their result types live in :mod:`._power_sign` (they share nothing with the simulation
here) and are imported from this module as always.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from kvstats._checks import SeedLike, as_generator, check_choice, check_int, check_real

from ._base import _FrameMixin
from ._power_sign import (SignTestPairsResult, SignTestPowerResult, pairs_for_power,
                          power_sign_test)
from .rank import ALTERNATIVES, _auto_exact_without_ties, _mwu_asymptotic, _mwu_exact_cdf

__all__ = ["PowerResult", "SampleSizeResult", "SignTestPowerResult", "SignTestPairsResult",
           "power_mann_whitney", "trials_for_power", "power_sign_test", "pairs_for_power"]

EFFECT_TYPES = ("r", "shift")


@dataclass(frozen=True)
class PowerResult(_FrameMixin):
    """Result of :func:`power_mann_whitney`.

    Attributes
    ----------
    power : float
        Fraction of simulated tests rejecting at ``alpha``.
    standard_error : float
        Monte-Carlo standard error sqrt(p(1-p)/n_sim).
    rank_biserial, shift : float
        The effect as rank-biserial r and as the normal shift delta (same effect).
    n_x, n_y, n_sim : int
    alpha : float
    alternative : str
    """

    power: float
    standard_error: float
    rank_biserial: float
    shift: float
    n_x: int
    n_y: int
    n_sim: int
    alpha: float
    alternative: str
    _test_name = "power_mann_whitney"


@dataclass(frozen=True)
class SampleSizeResult(_FrameMixin):
    """Result of :func:`trials_for_power`.

    Attributes
    ----------
    n_x, n_y : int
        Smallest simulated sample sizes reaching ``target_power`` (n_y = round(ratio n_x)).
    achieved_power : float
        Simulated power at (n_x, n_y).
    noether_n_x : int
        Noether's (1987) normal-approximation sample size for x, for comparison.
    target_power, rank_biserial, shift, alpha : float
    n_sim : int
    alternative : str
    """

    n_x: int
    n_y: int
    achieved_power: float
    noether_n_x: int
    target_power: float
    rank_biserial: float
    shift: float
    alpha: float
    n_sim: int
    alternative: str
    _test_name = "trials_for_power"


def _effect(effect: float, effect_type: str) -> tuple[float, float]:
    check_choice(effect_type, "effect_type", EFFECT_TYPES)
    if effect_type == "r":
        r = check_real(effect, "effect", low=-1.0, high=1.0, low_open=True, high_open=True)
        return r, math.sqrt(2.0) * float(special.ndtri((1.0 + r) / 2.0))
    delta = check_real(effect, "effect")
    return 2.0 * float(special.ndtr(delta / math.sqrt(2.0))) - 1.0, delta


def _simulated_power(delta: float, n_x: int, n_y: int, alpha: float, alternative: str,
                     n_sim: int, rng: np.random.Generator, chunk_elems: int = 4_000_000) -> float:
    rejections = 0
    exact = _auto_exact_without_ties(n_x, n_y)   # mann_whitney's default on continuous data
    chunk = max(1, chunk_elems // (n_x + n_y))
    for start in range(0, n_sim, chunk):
        m = min(chunk, n_sim - start)
        x = rng.standard_normal((m, n_x)) + delta
        y = rng.standard_normal((m, n_y))
        u1, pvalue = _mwu_asymptotic(x, y, alternative)
        if exact:
            pvalue = _mwu_exact_pvalues(u1, n_x, n_y, alternative)
        rejections += int(np.count_nonzero(pvalue <= alpha))
    return rejections / n_sim


def _mwu_exact_pvalues(u1: np.ndarray, n_x: int, n_y: int, alternative: str) -> np.ndarray:
    """Exact p-values of an array of U statistics: ``_mwu_exact_pvalue`` vectorised."""
    cdf = _mwu_exact_cdf(n_x, n_y)
    mn = n_x * n_y
    u1 = np.asarray(u1, dtype=np.float64)
    if alternative == "greater":          # P(U >= u) = P(U <= mn - u)
        return cdf[np.rint(mn - u1).astype(np.int64)]
    if alternative == "less":
        return cdf[np.rint(u1).astype(np.int64)]
    far = np.maximum(u1, mn - u1)
    return np.minimum(2.0 * cdf[np.rint(mn - far).astype(np.int64)], 1.0)


def power_mann_whitney(effect: float, n_x: int, n_y: int | None = None, alpha: float = 0.05,
                       effect_type: str = "r", alternative: str = "two-sided",
                       n_sim: int = 2000, seed: SeedLike = 0) -> PowerResult:
    """Power of the Mann–Whitney test that :func:`mann_whitney` runs by default, by simulation.

    Parameters
    ----------
    effect : float
        Rank-biserial r in (-1, 1) (``effect_type="r"``; positive: x larger) or the
        normal location shift delta of x relative to y in units of the common SD
        (``effect_type="shift"``).
    n_x, n_y : int
        Sample sizes (n_y defaults to n_x), each >= 1.
    alpha : float in (0, 1)
    effect_type : {"r", "shift"}
    alternative : {"two-sided", "less", "greater"}
    n_sim : int >= 1
        Simulated experiments; Monte-Carlo SE <= 0.5 / sqrt(n_sim).
    seed : int, SeedSequence, Generator or None

    Returns
    -------
    PowerResult

    Notes
    -----
    Model: x ~ N(delta, 1), y ~ N(0, 1); r = 2 Phi(delta / sqrt 2) - 1. Vectorised over
    simulations: ``scipy.stats.mannwhitneyu(axis=-1)`` tests a chunk of them at once. The
    test is ``mann_whitney(method="auto")``'s: the exact distribution of U when
    min(n_x, n_y) <= 8 (the model's data have no ties), else the asymptotic one with tie
    and continuity correction. (Up to 2026-12-02 the asymptotic test was simulated at
    every n, which understated the power of the exact test run at n <= 8: 0.711 instead
    of 0.754 at r = 0.7, n = 8, ``power_mann_whitney(0.7, 8, n_sim=20000, seed=1)``.)

    Examples
    --------
    >>> from kvstats.stats import power_mann_whitney
    >>> res = power_mann_whitney(0.5, n_x=30, n_sim=2000, seed=0)
    >>> 0.8 < res.power < 0.95
    True
    """
    r, delta = _effect(effect, effect_type)
    n_x = check_int(n_x, "n_x", low=1)
    n_y = n_x if n_y is None else check_int(n_y, "n_y", low=1)
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice(alternative, "alternative", ALTERNATIVES)
    n_sim = check_int(n_sim, "n_sim", low=1)
    rng = as_generator(seed)
    power = _simulated_power(delta, n_x, n_y, alpha, alternative, n_sim, rng)
    return PowerResult(power=power, standard_error=math.sqrt(power * (1 - power) / n_sim),
                       rank_biserial=r, shift=delta, n_x=n_x, n_y=n_y, n_sim=n_sim,
                       alpha=alpha, alternative=alternative)


def trials_for_power(effect: float, power: float = 0.8, alpha: float = 0.05,
                     effect_type: str = "r", ratio: float = 1.0,
                     alternative: str = "two-sided", n_sim: int = 2000, seed: SeedLike = 0,
                     max_n: int = 100_000) -> SampleSizeResult:
    """Smallest number of trials for the Mann–Whitney test to reach a given power.

    Starts from Noether's (1987) formula N = (z_a + z_b)^2 / (12 c (1-c) (theta - 1/2)^2),
    c = n_x / N, then bisects on n_x with simulated power (same model as
    :func:`power_mann_whitney`; each n is simulated with the same seed, i.e. common random
    numbers, so the estimated power curve is smooth in n).

    Parameters
    ----------
    effect, effect_type, alpha, alternative, n_sim, seed :
        As in :func:`power_mann_whitney`.
    power : float in (0, 1)
        Target power.
    ratio : float > 0
        n_y / n_x.
    max_n : int
        Largest n_x tried; a ``ValueError`` if even that is not enough. Checked at once
        against Noether's approximation: when it already exceeds ``max_n`` the
        ``ValueError`` (naming ``max_n`` and the approximate n_x needed) comes before
        any simulation.

    Returns
    -------
    SampleSizeResult

    Examples
    --------
    >>> from kvstats.stats import trials_for_power
    >>> res = trials_for_power(0.5, power=0.8, n_sim=1000, seed=0)
    >>> 15 <= res.n_x <= 30
    True
    """
    r, delta = _effect(effect, effect_type)
    if r == 0:
        raise ValueError("effect must be nonzero to reach a power above alpha; received 0")
    if (alternative == "greater" and r < 0) or (alternative == "less" and r > 0):
        raise ValueError(f"effect must point the way of alternative={alternative!r} "
                         f"(r > 0 for 'greater', r < 0 for 'less'); received r={r}")
    target = check_real(power, "power", low=0.0, high=1.0, low_open=True, high_open=True)
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    ratio = check_real(ratio, "ratio", low=0.0, low_open=True)
    check_choice(alternative, "alternative", ALTERNATIVES)
    n_sim = check_int(n_sim, "n_sim", low=1)
    max_n = check_int(max_n, "max_n", low=2)
    base_seed = seed if seed is not None else int(np.random.SeedSequence().entropy % 2**63)
    if isinstance(base_seed, np.random.Generator):
        base_seed = int(base_seed.integers(2**63))

    def sim(n: int) -> float:
        n_y = max(1, round(ratio * n))
        return _simulated_power(delta, n, n_y, alpha, alternative, n_sim, as_generator(base_seed))

    theta = (1 + r) / 2
    c = 1.0 / (1.0 + ratio)
    side = 1 if alternative != "two-sided" else 2
    z = float(special.ndtri(1 - alpha / side) + special.ndtri(target))
    noether = max(1, math.ceil(c * z**2 / (12 * c * (1 - c) * (theta - 0.5) ** 2)))
    if noether > max_n:
        # Noether's approximation is within a few percent at such n: simulating up to
        # max_n (minutes for a large max_n) could only confirm that it falls short
        raise ValueError(f"target power {target} not reached with n_x <= max_n={max_n}: "
                         f"Noether's approximation needs n_x ≈ {noether:,} for r = {r:.4g}; "
                         "raise max_n or the effect")
    # bracket [lo, hi] with power(lo) < target <= power(hi)
    hi = min(max(2, noether), max_n)
    while sim(hi) < target:
        if hi == max_n:
            raise ValueError(f"target power {target} not reached with n_x <= max_n={max_n}; "
                             "raise max_n or the effect")
        hi = min(2 * hi, max_n)
    lo = max(1, hi // 2)
    while lo > 1 and sim(lo) >= target:
        lo = max(1, lo // 2)
    if sim(lo) >= target:
        hi = lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sim(mid) >= target:
            hi = mid
        else:
            lo = mid
    return SampleSizeResult(n_x=hi, n_y=max(1, round(ratio * hi)), achieved_power=sim(hi),
                            noether_n_x=noether, target_power=target, rank_biserial=r,
                            shift=delta, alpha=alpha, n_sim=n_sim, alternative=alternative)
