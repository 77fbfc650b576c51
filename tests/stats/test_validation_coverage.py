"""Coverage of tost_ratio's ratio interval, measured directly: P(low < true ratio < high).

test_stats_equivalence.py shows the interval is the inverted test; here the interval
attribute itself is checked against the true ratio of means, at two sample sizes, for the
Fieller (default), delta and bootstrap-t methods, unpaired and paired. The nominal level
is 1 − 2α (each one-sided miss α). The data are normal with means far from 0
(nonnegative in practice: the smallest mean is 6.7 standard deviations above 0), so each
reference is stated:

* paired Fieller: x_i − r y_i is normal at the true r, so each one-sided t-test has exact
  size α and the interval exact level 1 − 2α; the score-type half can only widen it,
  which shows at n ≤ 30 (coverage 0.913 at n = 30 over 4,000 replicates, above the
  band), so the paired sizes here are 100 and 300;
* unpaired Fieller: Welch's t with unequal spreads (x's sd 1.5 times y's), approximately;
* delta and bootstrap-t: log(x̄/ȳ) is normal to first order with CV 0.1–0.15,
  approximately.

Each one-sided miss rate and the two-sided coverage must lie in their binomial 99% bands.
"""

import numpy as np
import pytest

from kvstats.stats import tost_ratio

ALPHA = 0.05
RATIO = 1.05    # the true ratio of means E x / E y


def _samples(rng, n, paired):
    """One replicate: y ~ N(10, 1); x = RATIO (10 + 1.5 e), e ~ N(0, 1) independent of y,
    or (paired) correlated 0.6 with y within a trial."""
    y = 10 + rng.normal(size=n)
    e = 0.6 * (y - 10) + 0.8 * rng.normal(size=n) if paired else rng.normal(size=n)
    return RATIO * (10 + 1.5 * e), y


def _check_coverage(calib, low, high):
    """Each side's miss rate in its band around α, the coverage in its band around 1 − 2α."""
    low, high = np.asarray(low), np.asarray(high)
    reps = low.size
    for side, missed in (("low > ratio", low > RATIO), ("high < ratio", high < RATIO)):
        lo, hi = calib.binom_interval(reps, ALPHA)
        assert lo <= missed.mean() <= hi, (side, missed.mean(), (lo, hi), reps)
    covered = (low < RATIO) & (RATIO < high)
    lo, hi = calib.binom_interval(reps, 1 - 2 * ALPHA)
    assert lo <= covered.mean() <= hi, ("coverage", covered.mean(), (lo, hi), reps)


@pytest.mark.parametrize("paired, sizes", [(False, (30, 100)), (True, (100, 300))])
def test_fieller_interval_coverage(calib, paired, sizes):
    # Measured 2026-12-02 (seed 1/2, 1,200–1,500 replicates): unpaired coverage 0.909
    # (n = 30), 0.901 (n = 100); paired 0.900 (n = 100). At small n the score-type half
    # over-covers: unpaired 0.935 at n = 10, 0.925 at n = 20; paired 0.913 at n = 30 and
    # a lower miss of 0.040 at n = 10 (4,000 each). Each size is checked, and both pooled
    # (a sharper band).
    reps = calib.replicates(400, 4000)
    rng = np.random.default_rng(301 + paired)
    limits = np.array([[(r.low, r.high) for r in (
        tost_ratio(*_samples(rng, n, paired), margin=0.1, paired=paired) for _ in range(reps))]
        for n in sizes])
    for n_limits in limits:
        _check_coverage(calib, n_limits[:, 0], n_limits[:, 1])
    _check_coverage(calib, limits[..., 0].ravel(), limits[..., 1].ravel())


@pytest.mark.parametrize("paired", [False, True])
def test_delta_interval_coverage(calib, paired):
    # Measured 2026-12-02 (seed 1, 20,000 replicates): unpaired coverage 0.908 (n = 10),
    # 0.898 (n = 100); paired 0.903 and 0.902. The n = 10 tails are unequal (0.049 /
    # 0.042 unpaired, 0.054 / 0.043 paired), so the small size here is 20.
    reps = calib.replicates(3000, 20000)
    rng = np.random.default_rng(303 + paired)
    for n in (20, 200):
        results = [tost_ratio(*_samples(rng, n, paired), margin=0.1, paired=paired, method="delta")
                   for _ in range(reps)]
        _check_coverage(calib, [r.low for r in results], [r.high for r in results])


@pytest.mark.parametrize("paired", [False, True])
def test_bootstrap_t_interval_coverage(calib, paired):
    # 499 resamples. Measured 2026-12-02 (seed 7, 3,000 replicates): unpaired coverage
    # 0.913 at n = 30 (tails 0.043 / 0.044, hence n = 50 here), 0.901 at n = 200; paired
    # 0.897 (n = 30) and 0.904. This test's CI run: unpaired 0.897 (n = 50), 0.911
    # (n = 200; upper miss 0.036, near its band's edge by chance: 0.052 over the 3,000);
    # paired 0.907 and 0.895.
    reps = calib.replicates(1500, 10000)
    rng = np.random.default_rng(305 + paired)
    for n in (50, 200):
        results = [tost_ratio(*_samples(rng, n, paired), margin=0.1, paired=paired,
                              method="bootstrap-t", n_resamples=499, seed=rng)
                   for _ in range(reps)]
        _check_coverage(calib, [r.low for r in results], [r.high for r in results])
