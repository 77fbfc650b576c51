"""A fraction's sample of 0s and 1s is a proportion: its interval is Clopper–Pearson's
(referee RS, F6).

``argmax_shift`` with one query per trial is 0 or 1 per trial. Its mean's bootstrap
interval read [0, 0.05] for one shift in 100 trials (a lower end the data rule out) and
the mean was marked ‡ as a sparse mean. The exact interval exists: Clopper–Pearson of the
count. Reference values: scipy.stats.binomtest(k, n).proportion_ci(c, "exact").
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from kvstats.analysis.intervals import few_nonzero, mean_ci


def _sample(k, n):
    return np.r_[np.ones(k), np.zeros(n - k)]


@pytest.mark.parametrize("k,n,c", [(1, 100, 0.95), (3, 100, 0.95), (50, 100, 0.9), (99, 100, 0.95),
                                   (2, 7, 0.95), (5, 40, 0.99)])
def test_a_zero_one_fraction_gets_the_exact_interval(k, n, c):
    ref = stats.binomtest(k, n).proportion_ci(c, "exact")
    mean, low, high = mean_ci(_sample(k, n)[::-1], c, 199, 0, unit_interval=True)
    assert mean == k / n
    assert low == pytest.approx(ref.low, rel=1e-9) and high == pytest.approx(ref.high, rel=1e-9)


def test_its_coverage_is_at_least_nominal_at_every_p():
    # exact coverage, no simulation: the binomial probability of the counts whose interval
    # covers p; the bootstrap's undercovered or overcovered by sample
    n, c = 100, 0.95
    bounds = np.array([mean_ci(_sample(k, n), c, 199, 0, unit_interval=True)[1:] for k in range(n + 1)])
    for p in np.linspace(0.001, 0.999, 199):
        covers = (bounds[:, 0] <= p) & (p <= bounds[:, 1])
        assert stats.binom.pmf(np.arange(n + 1), n, p)[covers].sum() >= c - 1e-12


def test_a_lone_success_of_a_fraction_is_not_marked_but_of_other_metrics_is():
    x = _sample(1, 100)
    assert not few_nonzero(x, "argmax_shift")
    assert few_nonzero(x, "kl") and few_nonzero(x)
    # a fraction with other values (four queries per trial) is screened as before
    assert few_nonzero(np.r_[np.zeros(97), 0.25, 0.5, 0.75], "argmax_shift")


def test_a_text_mean_of_ones_counts_as_one():
    x = np.r_[np.zeros(98), 1.0, 1.0000000000000002]
    ref = stats.binomtest(2, 100).proportion_ci(0.95, "exact")
    assert mean_ci(x, 0.95, 199, 0, unit_interval=True)[1:] == pytest.approx((ref.low, ref.high), rel=1e-9)
