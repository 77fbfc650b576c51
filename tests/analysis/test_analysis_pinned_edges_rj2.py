"""Pinned edges of kvstats.analysis.intervals that mutation testing (referee RJ2) found
untested: F2 (ratio_ci screens the denominator too), F8 (n_trials is the smaller sample),
F9 (mean_ci clips a fraction's mean to [0, 1]). References are stated per test.
"""

from __future__ import annotations

import numpy as np

from kvstats.analysis.intervals import mean_ci, ratio_ci


def _light_and_heavy(seed=2, n=200):
    rng = np.random.default_rng(seed)
    # 1 + Exp(1): all moments finite; 1 + Pareto(0.7): tail index 0.7 < 2 by construction
    # (infinite variance), which is what ci_reliable's Hill screen flags
    return 1 + rng.exponential(size=n), 1 + rng.pareto(0.7, size=n)


def test_ratio_ci_reliability_screens_both_samples():
    """ci_reliable of the ratio is False when either sample is heavy-tailed (the docstring:
    ":func:`ci_reliable` of both samples"). The light sample alone screens reliable, so a
    flag computed from the numerator only would read True for (light, heavy)."""
    light, heavy = _light_and_heavy()
    assert ratio_ci(light, light[::-1].copy(), 999, 0)["ci_reliable"] is True
    assert ratio_ci(light, heavy, 999, 0)["ci_reliable"] is False
    assert ratio_ci(heavy, light, 999, 0)["ci_reliable"] is False
    assert ratio_ci(light, heavy, 999, 0, paired=True)["ci_reliable"] is False


def test_ratio_ci_n_trials_is_the_smaller_sample():
    """Unpaired samples of 20 and 50 values: n_trials is 20 (the docstring's "the smaller
    sample"), in either order."""
    rng = np.random.default_rng(0)
    x, y = rng.exponential(size=20), rng.exponential(size=50) + 1
    assert ratio_ci(x, y, 999, 0)["n_trials"] == 20
    assert ratio_ci(y, x, 999, 0)["n_trials"] == 20


def test_mean_ci_of_a_fraction_is_clipped_to_one():
    """Text means of a fraction that is 1 everywhere can read 1 + 2**-52 after rounding;
    the mean of values in [0, 1] is in [0, 1] (the docstring: "its mean is clipped to
    [0, 1]"), so the reported mean is exactly 1.0 and never above it. Unclipped, np.mean
    of these values is 1 + 2**-52 (3 of 5 values one ulp above 1), checked here so the
    test is seen to need the clip."""
    ones = np.full(5, 1.0) + np.r_[2.0**-52, 2.0**-52, 2.0**-52, 0, 0]
    assert float(np.mean(ones)) > 1.0
    mean, low, high = mean_ci(ones, 0.95, 999, 0, unit_interval=True)
    assert mean == 1.0
    assert high == 1.0 and low < 1.0
    zeros = np.r_[-1e-17, -1e-17, 0.0, 0.0, 0.0]         # text means of zeros, rounded below 0
    assert float(np.mean(zeros)) < 0.0
    assert mean_ci(zeros, 0.95, 999, 0, unit_interval=True)[0] == 0.0
