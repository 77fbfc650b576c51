"""Edge samples of the intervals and tests of a mean or a ratio of means: data far from 1
(beyond ~1e38 or below ~1e-38) give the numbers of the same data at ordinary magnitude,
and a constant sample is treated alike whatever its value.

These statistics are homogeneous in the data, so data times 2**k (exact) must give the
same ratios, t statistics and p-values, and means, limits and standard errors times 2**k.
Before the power-of-two rescaling (kvstats.stats._base._scale_exponent) they over- or
underflowed in higher powers of the data: tost_ratio's Fieller search raised scipy's
"function value is NaN" from about 2**265 and its other methods returned p = 0.5 or 1
silently, with RuntimeWarnings; every method read data below about 2**-260 as
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
from kvstats.stats.equivalence import SkewedPairsWarning

SHIFTS = (-900, -600, -300, 300, 600, 900)


@pytest.fixture(scope="module")
def samples():
    rng = np.random.default_rng(7)
    return rng.exponential(1.0, 40), rng.exponential(1.1, 40)


def _quiet(fn, *args, **kwargs):
    """fn's result, any warning an error (over/underflow warnings were part of the defect),
    but tost_ratio's SkewedPairsWarning, about the pairs' spread of log ratios (the same at
    any magnitude, as the test below checks of the values)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", SkewedPairsWarning)
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
    with pytest.raises(ValueError, match=r"every value is 2\.0\b"):
        cluster_bootstrap_ci(np.full(12, 2.0), np.arange(12) % 3, n_resamples=99)
    with pytest.raises(ValueError, match=r"every value is 1\.0715086071862673e\+301"):
        cluster_bootstrap_ci(np.full(12, 2.0**1000), np.arange(12) % 3, n_resamples=99)
    # not constant, but every cluster has the mean 2**1001: every resample gives it
    x = np.ldexp([1.0, 3.0, 2.0, 2.0, 0.0, 4.0], 1000)
    with pytest.raises(ValueError, match=r"every resample gives 2\.1430172143725346e\+301"):
        cluster_bootstrap_ci(x, [0, 0, 1, 1, 2, 2], n_resamples=99)


def test_constant_samples_whatever_the_value():
    """A constant sample's bootstrap distribution is one value, the estimate, whatever the
    constant: BCa and studentized intervals are refused, percentile and basic give the
    estimate as both limits. Before, which of these happened (or limits an ulp apart,
    low > high for 2% of constants) depended on the constant's last bits."""
    rng = np.random.default_rng(11)
    for v in [0.1, 1 / 3, 2.0, *rng.uniform(0, 10, 40)]:
        for n in (7, 30):
            x = np.full(n, v)
            for method in ("BCa", "studentized"):
                with pytest.raises(ValueError, match="degenerate|standard error is 0.0"):
                    bootstrap_ci(x, n_resamples=99, method=method)
                with pytest.raises(ValueError, match="degenerate|standard error is 0.0"):
                    bootstrap_ratio_ci(x, np.full(n, 2 * v), n_resamples=99, method=method)
            for method in ("percentile", "basic"):
                res = bootstrap_ci(x, n_resamples=99, method=method)
                assert res.low == res.high == res.estimate == np.mean(x), (v, n, method)
                assert res.standard_error == 0.0
                res = bootstrap_ratio_ci(x, np.full(n, 2 * v), n_resamples=99, method=method)
                assert res.low == res.high == res.estimate, (v, n, method)
            for method in ("BCa", "percentile"):
                with pytest.raises(ValueError, match="degenerate"):
                    cluster_bootstrap_ci(x, np.arange(n) % 3, n_resamples=99, method=method)
                with pytest.raises(ValueError, match="degenerate"):
                    cluster_bootstrap_ratio_ci(x, np.arange(n) % 3, np.full(n, 2 * v),
                                               np.arange(n) % 3, n_resamples=99, method=method)
