"""Data far from 1 (beyond ~1e38 or below ~1e-38): the tests and intervals of a mean or a
ratio of means give the numbers of the same data at ordinary magnitude.

These statistics are homogeneous in the data, so data times 2**k (exact) must give the
same ratios, t statistics and p-values, and means, limits and standard errors times 2**k.
Before the power-of-two rescaling (kvstats.stats._base._scale_exponent) they over- or
underflowed in higher powers of the data: tost_ratio's Fieller search raised scipy's
"function value is NaN" from about 2**255 and its other methods returned p = 0.5 or 1
silently, with RuntimeWarnings; every method read data below about 2**-255 as
"degenerate" (p = 1); bootstrap_ci refused a BCa interval of data near 1e150 as
"degenerate (e.g. all values equal)"; cluster_bootstrap_ci raised ZeroDivisionError or
OverflowError, or gave a standard error of 0.
"""

import warnings

import numpy as np
import pytest

from kvstats.stats import (bootstrap_ci, bootstrap_ratio_ci, cluster_bootstrap_ci,
                           cluster_bootstrap_ratio_ci, tost_ratio)
from kvstats.stats._base import SAFE_EXPONENT, _scale_exponent

SHIFTS = (-900, -600, -300, 300, 600, 900)


@pytest.fixture(scope="module")
def samples():
    rng = np.random.default_rng(7)
    return rng.exponential(1.0, 40), rng.exponential(1.1, 40)


def _quiet(fn, *args, **kwargs):
    """fn's result, any warning an error (over/underflow warnings were part of the defect)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def test_scale_exponent_window():
    # largest magnitude in [2**(e-1), 2**e): |e| <= SAFE_EXPONENT keeps the data as it is
    top = 2.0 ** (SAFE_EXPONENT - 1)
    assert _scale_exponent(np.array([top, 1.0])) == 0
    assert _scale_exponent(np.array([2 * top])) == SAFE_EXPONENT + 1
    assert _scale_exponent(np.array([2.0 ** -(SAFE_EXPONENT + 1)])) == 0
    assert _scale_exponent(np.array([2.0 ** -(SAFE_EXPONENT + 2)])) == -SAFE_EXPONENT - 1
    assert _scale_exponent(np.zeros(3), np.array([1e-300])) == 0      # the larger sample rules
    assert _scale_exponent(np.zeros(3)) == 0
    assert SAFE_EXPONENT == 128


@pytest.mark.parametrize("method,paired", [("fieller", False), ("fieller", True), ("delta", False),
                                           ("delta", True), ("bootstrap-t", False),
                                           ("bootstrap-t", True)])
def test_tost_ratio_same_at_any_magnitude(samples, method, paired):
    x, y = samples
    kw = dict(method=method, paired=paired, n_resamples=399, margin=0.2)
    ref = tost_ratio(x, y, **kw)
    assert np.isfinite(ref.high) and ref.method != "degenerate"
    fields = ("statistic", "pvalue", "estimate", "low", "high", "pvalue_low", "pvalue_high",
              "pvalue_difference", "standard_error", "df")
    for k in SHIFTS:
        res = _quiet(tost_ratio, np.ldexp(x, k), np.ldexp(y, k), **kw)
        assert res.method == ref.method, k
        for f in fields:
            np.testing.assert_allclose(getattr(res, f), getattr(ref, f), rtol=1e-9,
                                       err_msg=f"{f} at 2**{k}")


@pytest.mark.parametrize("method", ["BCa", "percentile", "studentized"])
def test_bootstrap_ci_of_a_mean_scales(samples, method):
    x = samples[0]
    ref = bootstrap_ci(x, n_resamples=499, method=method, seed=3)
    for k in SHIFTS:
        res = _quiet(bootstrap_ci, np.ldexp(x, k), n_resamples=499, method=method, seed=3)
        for f in ("estimate", "low", "high", "standard_error"):
            np.testing.assert_allclose(np.ldexp(getattr(res, f), -k), getattr(ref, f),
                                       rtol=1e-12, err_msg=f"{f} at 2**{k}")


@pytest.mark.parametrize("method,paired", [("BCa", False), ("studentized", False),
                                           ("studentized", True)])
def test_bootstrap_ratio_ci_same_at_any_magnitude(samples, method, paired):
    x, y = samples
    ref = bootstrap_ratio_ci(x, y, n_resamples=499, method=method, paired=paired, seed=3)
    for k in SHIFTS:
        res = _quiet(bootstrap_ratio_ci, np.ldexp(x, k), np.ldexp(y, k), n_resamples=499,
                     method=method, paired=paired, seed=3)
        for f in ("estimate", "low", "high", "standard_error"):
            np.testing.assert_allclose(getattr(res, f), getattr(ref, f), rtol=1e-12,
                                       err_msg=f"{f} at 2**{k}")


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_cluster_bootstrap_ci_scales(samples, method):
    x = samples[0]
    clusters = np.arange(x.size) % 8
    ref = cluster_bootstrap_ci(x, clusters, n_resamples=499, method=method, seed=3)
    ratio = cluster_bootstrap_ratio_ci(x, clusters, samples[1], clusters, n_resamples=499,
                                       method=method, seed=3)
    for k in SHIFTS:
        res = _quiet(cluster_bootstrap_ci, np.ldexp(x, k), clusters, n_resamples=499,
                     method=method, seed=3)
        for f in ("estimate", "low", "high", "standard_error"):
            np.testing.assert_allclose(np.ldexp(getattr(res, f), -k), getattr(ref, f),
                                       rtol=1e-12, err_msg=f"{f} at 2**{k}")
        # the ratio was already scale-free (its statistics are ratios): kept so
        res = _quiet(cluster_bootstrap_ratio_ci, np.ldexp(x, k), clusters, np.ldexp(samples[1], k),
                     clusters, n_resamples=499, method=method, seed=3)
        np.testing.assert_allclose([res.low, res.high], [ratio.low, ratio.high], rtol=1e-12)


def test_cluster_degenerate_message_in_data_units():
    with pytest.raises(ValueError, match=r"every resample gives 2\.0\b"):
        cluster_bootstrap_ci(np.full(12, 2.0), np.arange(12) % 3, n_resamples=99)
    with pytest.raises(ValueError, match=r"every resample gives 1\.0715086071862673e\+301"):
        cluster_bootstrap_ci(np.full(12, 2.0**1000), np.arange(12) % 3, n_resamples=99)
