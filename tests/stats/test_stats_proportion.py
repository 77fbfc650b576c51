"""Binomial proportions (kvstats.stats.proportion): references and bad input.

Values: statsmodels.stats.proportion.proportion_confint(k, n, alpha, method="wilson") and
scipy.stats.binomtest(k, n, 0.5, alternative).pvalue (the same rule as R's binom.test).
"""

import numpy as np
import pytest
from scipy import stats

from kvstats.stats.proportion import binom_test_half, wilson_interval


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_wilson_equals_statsmodels_and_covers(confidence):
    from statsmodels.stats.proportion import proportion_confint

    n = 40
    k = np.arange(n + 1)
    lo, hi = wilson_interval(k, n, confidence)
    ref_lo, ref_hi = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-12, atol=1e-15)
    # exact coverage at p = 0.3 (a binomial sum, no simulation): near nominal at n = 40
    # (0.774, 0.944, 0.991 at 80, 95, 99%), within 0.03 of it at every level here
    covered = (lo <= 0.3) & (0.3 <= hi)
    assert abs(stats.binom.pmf(k[covered], n, 0.3).sum() - confidence) < 0.03


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_binom_test_half_equals_scipy_binomtest(alternative):
    for n in (1, 2, 7, 20, 61):
        for k in range(n + 1):
            ref = stats.binomtest(k, n, 0.5, alternative=alternative).pvalue
            assert binom_test_half(k, n, alternative) == pytest.approx(ref, rel=1e-12, abs=1e-300)


def test_bad_input_is_an_error_never_a_nan():
    # n = inf passed every check: (0, 0) for k = 3 (an interval without k/n), NaN for k = inf
    for k, n in ((3, np.inf), (np.inf, np.inf), (np.nan, 5), (2, np.nan), (6, 5), (-1, 5),
                 (1.5, 4), (0, 0)):
        with pytest.raises(ValueError, match=r"k and n must be finite counts .* received k="):
            wilson_interval(k, n)
    with pytest.raises(ValueError, match=r"confidence must be in \(0.0, 1.0\)"):
        wilson_interval(1, 2, confidence=1.0)
    for k, n in ((True, 3), (1, True)):             # a bool is not a count
        with pytest.raises(ValueError, match="k and n must be integer counts"):
            binom_test_half(k, n)
