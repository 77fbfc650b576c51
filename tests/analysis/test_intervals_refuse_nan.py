"""analysis.intervals refuses NaN (referee F3): mean_ci and ratio_ci returned NaN
intervals, ci_reliable called a sample with NaN reliable, and unit_interval_bound took a
NaN confidence. ±inf stays allowed (an exact reconstruction's SNR: no interval)."""

import math

import numpy as np
import pytest

from kvstats.analysis.intervals import ci_reliable, mean_ci, ratio_ci, unit_interval_bound

X = np.r_[1.0, 2.0, 3.0, np.nan, np.arange(5.0, 13.0)]
Y = np.arange(1.0, 13.0)


def test_mean_ci_refuses_nan():
    with pytest.raises(ValueError, match=r"x must not contain NaN .*received 1 NaN of 12 values"):
        mean_ci(X, 0.95, 99, 0)
    with pytest.raises(ValueError, match="x must not contain NaN"):
        mean_ci(np.r_[0.0, 1.0, np.nan], 0.95, 99, 0, unit_interval=True)


def test_ratio_ci_refuses_nan_and_names_the_sample():
    with pytest.raises(ValueError, match="x must not contain NaN"):
        ratio_ci(X, Y, 99, 0)
    with pytest.raises(ValueError, match="y must not contain NaN"):
        ratio_ci(Y, X, 99, 0, paired=True)


def test_ci_reliable_refuses_nan_and_names_the_sample():
    with pytest.raises(ValueError, match=r"samples\[0\] must not contain NaN"):
        ci_reliable(X)
    with pytest.raises(ValueError, match=r"samples\[1\] must not contain NaN"):
        ci_reliable(Y, X, metrics=["kl", "kl"])


def test_empty_samples_are_refused():
    for call in (lambda: mean_ci(np.array([]), 0.95, 99, 0),
                 lambda: ratio_ci(np.array([]), Y, 99, 0),
                 lambda: ci_reliable(np.array([]))):
        with pytest.raises(ValueError, match="must hold at least one value"):
            call()


def test_infinite_values_still_get_no_interval():
    x = np.r_[np.arange(1.0, 10.0), np.inf]
    assert mean_ci(x, 0.95, 99, 0) == (math.inf, math.inf, math.inf)
    r = ratio_ci(x, Y[:10], 99, 0)
    assert r["measured"] == r["ci_low"] == r["ci_high"] == math.inf
    assert isinstance(ci_reliable(x), bool)


@pytest.mark.parametrize("confidence", [float("nan"), 0.0, 1.0, -0.5, math.inf])
def test_unit_interval_bound_refuses_a_bad_confidence(confidence):
    with pytest.raises(ValueError, match="confidence"):
        unit_interval_bound(10, confidence)


@pytest.mark.parametrize("n, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError),
                                      (True, TypeError)])
def test_unit_interval_bound_refuses_a_bad_count(n, error):
    with pytest.raises(error, match="n must be an integer"):
        unit_interval_bound(n, 0.95)


def test_unit_interval_bound_closed_form():
    # ((1 - c)/2)^(1/n): 0 of 100 bounds a [0, 1] mean by 1 - 0.025^(1/100) = 0.036217...
    assert unit_interval_bound(100, 0.95) == 0.025 ** 0.01
    assert unit_interval_bound(np.int64(1), 0.9) == pytest.approx(0.05, rel=1e-15)
