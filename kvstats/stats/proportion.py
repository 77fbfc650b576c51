"""Binomial proportions: the Wilson and Clopper–Pearson intervals and the exact test of p = ½.

One home for the two pieces the sign test (:func:`kvstats.stats.sign_test`), McNemar's
exact test and the retrieval accuracies (:mod:`kvstats.models.retrieval`) share.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Int
from scipy import special, stats

from kvstats._checks import _describe, check_choice, check_real

__all__ = ["wilson_interval", "clopper_pearson_interval", "binom_test_half"]

ALTERNATIVES = ("two-sided", "greater", "less")


def wilson_interval(k: Int[np.ndarray, "*batch"] | int, n: Int[np.ndarray, "*batch"] | int,
                    confidence: float = 0.95
                    ) -> tuple[Float[np.ndarray, "*batch"], Float[np.ndarray, "*batch"]]:
    """Wilson score interval for a binomial proportion ``k / n`` (vectorised).

    At k = 0 (k = n) the lower (upper) limit is exactly 0 (1): the formula gives it up to
    rounding, ~1e-16 on either side. Every limit lies in [0, 1].

    Examples
    --------
    >>> from kvstats.stats.proportion import wilson_interval
    >>> lo, hi = wilson_interval(8, 10)
    >>> round(float(lo), 4), round(float(hi), 4)
    (0.4902, 0.9433)
    >>> [float(v) for v in wilson_interval(0, 5)][0], [float(v) for v in wilson_interval(5, 5)][1]
    (0.0, 1.0)
    """
    k, n, confidence = _check_counts(k, n, confidence)
    z = special.ndtri(0.5 + confidence / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = np.where(k == 0, 0.0, np.clip(centre - half, 0, 1))
    high = np.where(k == n, 1.0, np.clip(centre + half, 0, 1))
    return low, high


def clopper_pearson_interval(k: Int[np.ndarray, "*batch"] | int, n: Int[np.ndarray, "*batch"] | int,
                             confidence: float = 0.95
                             ) -> tuple[Float[np.ndarray, "*batch"], Float[np.ndarray, "*batch"]]:
    """Clopper–Pearson (exact) interval for a binomial proportion ``k / n`` (vectorised).

    The set of p that the equal-tailed exact binomial test does not reject at level
    1 − ``confidence``: its limits are Beta quantiles, Beta((1 − c)/2; k, n − k + 1) and
    Beta((1 + c)/2; k + 1, n − k), with 0 at k = 0 and 1 at k = n. So it contains ½ exactly
    when the two-sided :func:`binom_test_half` p-value exceeds 1 − ``confidence`` (up to
    equality at the boundary): the interval never contradicts the two-sided test (a one-sided
    test can reject with ½ inside it).
    Coverage is at least ``confidence`` at every p (conservative; Wilson's is closer to
    nominal on average but dips below it).

    Examples
    --------
    >>> from kvstats.stats.proportion import clopper_pearson_interval
    >>> lo, hi = clopper_pearson_interval(8, 10)   # R: binom.test(8, 10)$conf.int
    >>> round(float(lo), 4), round(float(hi), 4)
    (0.4439, 0.9748)
    >>> [float(v) for v in clopper_pearson_interval(0, 5)][0], [float(v) for v in clopper_pearson_interval(5, 5)][1]
    (0.0, 1.0)
    """
    k, n, confidence = _check_counts(k, n, confidence)
    tail = (1 - confidence) / 2
    with np.errstate(invalid="ignore", divide="ignore"):   # the k = 0 and k = n ends are set below
        low = np.where(k == 0, 0.0, special.betaincinv(np.maximum(k, 1), n - k + 1, tail))
        # the upper tail's own inverse: betaincinv(..., 1 - tail) loses tail's digits to the
        # rounding of 1 - tail (a relative 5e-9 in the limit at confidence 1 - 1e-9)
        high = np.where(k == n, 1.0, special.betainccinv(k + 1, np.maximum(n - k, 1), tail))
    return low, high


def _check_counts(k, n, confidence) -> tuple[np.ndarray, np.ndarray, float]:
    """k and n as float arrays that broadcast, with 0 <= k <= n, n >= 1 whole; confidence in (0, 1)."""
    k, n = _counts(k, "k"), _counts(n, "n")
    try:
        np.broadcast_shapes(k.shape, n.shape)
    except ValueError:
        raise ValueError(f"k and n must broadcast together (one count of each per proportion); "
                         f"received k of shape {k.shape} and n of shape {n.shape}") from None
    # open: confidence 1 has z = inf (NaN bounds), 0 an empty interval
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True, high_open=True)
    # finite first: n = inf passed every other check and gave (0, 0) for k = 3, (NaN, 1)
    # for k = inf; NaN fails the integrality check
    if (not (np.isfinite(k).all() and np.isfinite(n).all()) or np.any(n < 1) or np.any(k < 0)
            or np.any(k > n) or np.any(k != np.round(k))):
        raise ValueError(f"k and n must be finite counts with 0 <= k <= n and n >= 1; received "
                         f"k={k}, n={n}")
    return k, n, confidence


def _counts(x, name: str) -> np.ndarray:
    """``x`` as a float array of counts (their values are checked by the caller)."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":     # a bool is no count (as in binom_test_half)
        raise TypeError(f"{name} must be numeric counts (int or float, not bool); received "
                        f"{_describe(arr)}")
    return arr.astype(float)


def binom_test_half(k: int, n: int, alternative: str = "two-sided") -> float:
    """Exact p-value of k successes in n trials against p = ½, as R's ``binom.test(k, n, 0.5)``.

    "greater": P(X >= k); "less": P(X <= k); "two-sided": R's rule (the outcomes no more
    likely than k), which for the symmetric Bin(n, ½) is twice the smaller tail, capped
    at 1, and exactly 1 when |2k − n| <= 1 (the two tails then cover every outcome;
    doubling a rounded ½ would give 1 − 2⁻⁵³). scipy's binomial cdf/sf are
    incomplete-beta evaluations, accurate in the far tails (k = n = 1,000 gives 2⁻⁹⁹⁹).

    Examples
    --------
    >>> from kvstats.stats.proportion import binom_test_half
    >>> binom_test_half(6, 6), binom_test_half(6, 6, "greater"), binom_test_half(7, 15)
    (0.03125, 0.015625, 1.0)
    """
    alternative = check_choice(alternative, "alternative", ALTERNATIVES)
    # a bool is an int to isinstance, never a count
    if not (isinstance(n, (int, np.integer)) and isinstance(k, (int, np.integer))
            and not isinstance(n, bool) and not isinstance(k, bool) and 0 <= k <= n and n >= 1):
        raise ValueError(f"k and n must be integer counts with 0 <= k <= n and n >= 1; received k={k!r}, n={n!r}")
    upper = float(stats.binom.sf(k - 1, n, 0.5))   # P(X >= k)
    lower = float(stats.binom.cdf(k, n, 0.5))      # P(X <= k)
    if alternative == "greater":
        p = upper
    elif alternative == "less":
        p = lower
    else:
        p = 1.0 if abs(2 * k - n) <= 1 else 2.0 * min(upper, lower)
    return min(max(p, 0.0), 1.0)
