"""Clopper–Pearson's upper limit at extreme confidence, and bool counts (critic_exact20 #6).

The upper limit was betaincinv(k + 1, n − k, 1 − tail): 1 − tail rounds away tail's digits,
a relative error of 5e-9 in the limit at confidence 1 − 1e-9 (k = 0, n = 17).
"""

import numpy as np
import pytest
from scipy import special, stats

from kvstats.stats.proportion import clopper_pearson_interval, wilson_interval

LEVELS = (0.95, 0.999, 1 - 1e-6, 1 - 1e-9, 1 - 1e-12)


@pytest.mark.parametrize("confidence", LEVELS)
def test_upper_limit_keeps_its_digits_at_extreme_confidence(confidence):
    tail = (1 - confidence) / 2
    n = np.array([1, 2, 5, 17, 40, 200, 1000])
    # closed forms: Beta(1, n) and Beta(n, 1) quantiles, for k = 0 and k = n - 1
    # P(Beta(1, n) > x) = (1 - x)^n = tail  ->  x = 1 - tail^(1/n)
    hi0 = clopper_pearson_interval(np.zeros_like(n), n, confidence)[1]
    np.testing.assert_allclose(hi0, -np.expm1(np.log(tail) / n), rtol=1e-13)
    # P(Beta(n, 1) > x) = 1 - x^n = tail  ->  x = (1 - tail)^(1/n)
    hi1 = clopper_pearson_interval(n - 1, n, confidence)[1]
    np.testing.assert_allclose(hi1, np.exp(np.log1p(-tail) / n), rtol=1e-13)
    # every k: the limit puts ``tail`` in Beta(k + 1, n - k)'s upper tail (a forward
    # evaluation, scipy's betaincc, independent of the inverse), up to what a rounding of the
    # limit itself moves that tail (a few ulps of hi times the density there)
    for m in (5, 17, 200):
        k = np.arange(m)
        hi = clopper_pearson_interval(k, m, confidence)[1]
        slack = 4 * np.finfo(float).eps * hi * stats.beta.pdf(hi, k + 1, m - k)
        assert np.all(np.abs(special.betaincc(k + 1, m - k, hi) - tail) <= 1e-12 * tail + slack)


def test_matches_scipy_binomtest_at_ordinary_levels():
    # scipy.stats.binomtest(k, n).proportion_ci("exact"), the reference at 95% and 99%; its
    # own beta inverses differ from scipy.special's in the 11th digit (lower limit, k = 1)
    for confidence in (0.95, 0.99):
        for n in (1, 7, 40):
            for k in range(n + 1):
                ci = stats.binomtest(k, n).proportion_ci(confidence, method="exact")
                lo, hi = clopper_pearson_interval(k, n, confidence)
                assert (float(lo), float(hi)) == pytest.approx((ci.low, ci.high), rel=1e-9,
                                                               abs=1e-15)


@pytest.mark.parametrize("func", [clopper_pearson_interval, wilson_interval])
def test_bool_counts_are_refused(func):
    for k, n in ((True, 1), (0, True), (np.array([True, False]), 3)):
        with pytest.raises(TypeError, match=r"(k|n) must be numeric counts .*not bool"):
            func(k, n)
