"""SkewedPairsWarning: tost_ratio warns where its paired difference test is liberal.

Reference values: docs/statistics.md, "Ratio of means" (experiments/
calibrate_ratio_difference.py): on paired log-normal σ 1 trials times log-normal noise σ 1,
n = 100, pvalue_difference rejects a true ratio 1 in 0.073 of samples at α = 0.05; with
noise σ 0.5, and on normal pairs, within α. The warning must fire on the former design and
not on the latter, and among the samples it leaves unwarned the size must hold.
"""

import warnings

import numpy as np
import pytest

from kvstats.stats._equivalence_ratio import _FiellerT, _log_ratio_spread
from kvstats.stats.equivalence import SKEWED_PAIRS_LOG_SD, SkewedPairsWarning, tost_ratio


def _pairs(rng, reps, n, noise):
    y = rng.lognormal(-0.5, 1, (reps, n))
    return y * rng.lognormal(-noise**2 / 2, noise, (reps, n)), y


def _warns(x, y, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = tost_ratio(x, y, **kw)
    return res, any(issubclass(w.category, SkewedPairsWarning) for w in caught)


def test_warns_on_the_liberal_design_and_not_on_calibrated_ones():
    rng = np.random.default_rng(11)
    x, y = _pairs(rng, 1, 100, 1.0)
    with pytest.warns(SkewedPairsWarning, match="pvalue_difference"):
        tost_ratio(x[0], y[0], paired=True)
    # the same numbers unpaired, or by another method: not this test, no warning
    assert not _warns(x[0], y[0])[1]
    assert not _warns(x[0], y[0], paired=True, method="delta")[1]
    # noise σ 0.5 (calibrated, 0.046 at α = 0.05): sd of log ratios ≈ 0.5, 3 SE below 0.7
    x5, y5 = _pairs(rng, 1, 100, 0.5)
    assert not _warns(x5[0], y5[0], paired=True)[1]
    c = rng.normal(size=30)
    xn, yn = (1 + 0.2 * c + 0.2 * rng.normal(size=30) for _ in range(2))
    assert not _warns(xn, yn, paired=True)[1]


def test_warning_finds_the_liberal_samples_statistically():
    # 8,000 samples per design, n = 100, α = 0.05, binomial SE ≈ 0.0024.
    rng = np.random.default_rng(2026)
    reps, alpha = 8000, 0.05
    bound = alpha + 3 * np.sqrt(alpha * (1 - alpha) / reps)
    spread = {}
    for noise in (0.5, 1.0):
        x, y = _pairs(rng, reps, 100, noise)
        p = _FiellerT(x, y, True).p_difference()
        s = np.array([_log_ratio_spread(a, b) for a, b in zip(x, y)])
        spread[noise] = np.mean(s >= SKEWED_PAIRS_LOG_SD)
        if noise == 1.0:
            # the design is liberal (0.073 documented): the warning is needed here ...
            assert np.mean(p <= alpha) > bound
        else:
            # ... and the unwarned samples of the calibrated design hold the size
            assert np.mean(p[s < SKEWED_PAIRS_LOG_SD] <= alpha) <= bound
    assert spread[1.0] > 0.99 and spread[0.5] < 0.01


def test_spread_ignores_zero_pairs_and_needs_three():
    x = np.array([0.0, 1.0, 2.0, 4.0])
    y = np.array([1.0, 1.0, 1.0, 1.0])
    assert _log_ratio_spread(x, y) == pytest.approx(np.std(np.log([1, 2, 4]), ddof=1))
    assert np.isnan(_log_ratio_spread(x[:3], y[:3]))
    # identical pairs: no spread, no warning
    assert not _warns(y * np.arange(1, 5), y * np.arange(1, 5), paired=True)[1]


def test_a_reports_equivalence_row_does_not_warn_about_a_p_value_it_never_reads():
    # the report's paired ratio TOSTs take their difference test from the row's own location
    # test (analysis/verdicts.py), never from pvalue_difference: the warning would mislead there
    from kvstats.analysis.pair_tests import _equivalence_row

    x, y = _pairs(np.random.default_rng(11), 1, 100, 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row = _equivalence_row(x[0], y[0], 0.2, "ratio", 0.05, paired=True)
    assert np.isfinite(row["pvalue"])
    assert not [w for w in caught if issubclass(w.category, SkewedPairsWarning)]


def test_warning_importable_from_the_package():
    """The warning is filtered by class, so it is reachable where tost_ratio is: kvstats.stats."""
    import kvstats.stats

    assert kvstats.stats.SkewedPairsWarning is SkewedPairsWarning
    assert "SkewedPairsWarning" in kvstats.stats.__all__
