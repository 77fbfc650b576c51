"""Inputs an analysis script feeds the statistics beyond the usual: counts of mismatched
shapes, labels where counts belong, a KS statistic of exactly 0 read from the other side.

Before: wilson_interval raised numpy's "operands could not be broadcast together" for k
and n of mismatched shapes (naming neither) and numpy's "could not convert string to
float" for a label; ks_2samp(alternative="less") reported a statistic of -0.0.
"""

import math

import numpy as np
import pytest

from kvstats.stats import ks_2samp
from kvstats.stats.proportion import wilson_interval


def test_wilson_interval_names_mismatched_counts():
    with pytest.raises(ValueError, match=r"k and n must broadcast together .* k of shape \(2,\) "
                                         r"and n of shape \(3,\)"):
        wilson_interval(np.array([1, 2]), np.array([3, 3, 3]))
    with pytest.raises(TypeError, match=r"k must be numeric counts \(int or float, not bool\); received"):
        wilson_interval("a", 3)
    with pytest.raises(TypeError, match=r"n must be numeric counts \(int or float, not bool\); received"):
        wilson_interval(1, ["three"])
    # shapes that broadcast: each limit is the scalar call's
    low, high = wilson_interval([[1], [2]], [3, 4, 5])
    assert low.shape == high.shape == (2, 3)
    for i, k in enumerate((1, 2)):
        for j, n in enumerate((3, 4, 5)):
            assert (low[i, j], high[i, j]) == tuple(float(v) for v in wilson_interval(k, n))


def test_ks_zero_statistic_is_positive_zero():
    # x entirely below y: F_x >= F_y everywhere, so max(F_y − F_x) ("less") is exactly 0,
    # read from the side where F_y − F_x is taken (statistic_sign −1)
    res = ks_2samp([1.0, 2.0], [3.0, 4.0], alternative="less")
    assert res.statistic == 0.0 and res.statistic_sign == -1
    assert math.copysign(1.0, res.statistic) == 1.0
