"""The heavy-tail screen of a metric in dB or with negative values: both tails over the median.

Reference values: the vectorised screen of docs/statistics.md's table ("Heavy tails and the
bootstrap", two-tailed screen; 10,000 samples a cell, seed 2026), checked equal to
:func:`tail_alpha` sample by sample.
"""

import numpy as np
import pytest
from scipy import stats as sps

from kvstats.analysis import summary_table
from kvstats.analysis.intervals import SIGNED_TAIL_CONFIDENCE, ci_reliable, tail_alpha
from kvstats.stats.tail import heavy_tail_alpha, tail_index

from _sweep_frames import make_frame


POWER = 0.7106


def _flag_rate(samples, metric="snr_t"):
    return np.mean([tail_alpha(x, metric) < 2 for x in samples])


def _band(p, reps, level=0.999):
    """Two-sided binomial band of a rejection fraction p over reps samples."""
    return sps.binom.ppf([(1 - level) / 2, (1 + level) / 2], reps, p) / reps


def test_two_tailed_screen_is_the_smaller_bound_of_both_tails_over_the_median():
    rng = np.random.default_rng(0)
    x = np.r_[20.0 - rng.pareto(0.7, 150), 20.0 + rng.standard_normal(151)]   # odd n
    med = np.median(x)
    upper = tail_index(x[x > med] - med, confidence=0.975).upper_bound
    lower = tail_index(med - x[x < med], confidence=0.975).upper_bound
    assert SIGNED_TAIL_CONFIDENCE == 0.975 and lower < 2 < upper
    assert tail_alpha(x, "snr_t") == pytest.approx(lower, rel=1e-12)
    # no natural 0 in dB: the same at any level, and a mirrored sample has the mirrored tails
    assert tail_alpha(x - 30.0, "snr_t") == pytest.approx(lower, rel=1e-9)
    assert tail_alpha(-x, "snr_k") == pytest.approx(lower, rel=1e-9)
    # a metric that is not in dB is screened on both tails only where a value is negative;
    # all ≥ 0, its right tail from 0 (as before the two-tailed screen existed)
    assert x.min() < 0 and tail_alpha(x, "phi_t") == pytest.approx(lower, rel=1e-12)
    positive = x - x.min() + 1.0
    assert tail_alpha(positive, "snr_t") == pytest.approx(lower, rel=1e-9)
    assert tail_alpha(positive, "phi_t") == heavy_tail_alpha(positive) > 2


def test_two_tailed_screen_needs_ten_excesses_on_a_side():
    x = np.random.default_rng(1).normal(size=21)         # 10 values either side of the median
    assert np.isfinite(tail_alpha(x, "snr_v"))
    assert np.isnan(tail_alpha(x[:19], "snr_v"))          # 9 a side: not computed
    y = np.r_[np.zeros(15), np.arange(1.0, 12.0)]         # median 0: only the upper tail
    assert tail_alpha(y, "snr_v") == pytest.approx(
        tail_index(y, confidence=0.975).upper_bound, rel=1e-12)
    assert np.isnan(tail_alpha(np.r_[x, np.inf], "snr_v"))


def test_reviewer_case_the_same_left_tail_is_marked_in_db_as_in_a_nonnegative_metric():
    """A Pareto(0.7) error in snr_t (5 − it) and in phi_t (it): both marked ‡."""
    f = make_frame({("KQV", 2): 0.0}, n=200, seed=3)
    pareto = np.random.default_rng(2).pareto(0.7, len(f))
    f["snr_t"], f["phi_t"] = 5.0 - pareto, pareto
    s = summary_table(f, n_resamples=99).set_index("metric")
    assert s.loc["snr_t", "tail_index"] < 2 and not s.loc["snr_t", "ci_reliable"]
    assert s.loc["phi_t", "tail_index"] < 2 and not s.loc["phi_t", "ci_reliable"]
    # ci_reliable by name screens as the table does, also a dB sample all above 0
    assert not ci_reliable(50.0 - pareto, metrics=["snr_t"])
    assert ci_reliable(f["snr_k"].to_numpy(), metrics=["snr_k"])
    with pytest.raises(ValueError, match="metrics must name each of the 2 samples"):
        ci_reliable(pareto, pareto, metrics=["snr_t"])
    with pytest.raises(ValueError, match="at least one sample"):  # nothing screened: returned True before
        ci_reliable()


def _snr_like_db(rng, shape):
    return 10 * np.log10(rng.chisquare(4, shape) / rng.chisquare(4, shape))


@pytest.mark.parametrize("draw", [lambda rng, shape: rng.normal(20.0, 3.0, shape), _snr_like_db],
                         ids=["normal", "SNR-like dB"])
def test_light_tails_are_flagged_no_more_often_than_nonnegative_ones(draw):
    """At n = 20 (10 excesses a side, k = 3) the two-tailed screen flags 2.0% of normal and
    2.1% of log-χ² ratio samples (table), the one-tailed screen 8.0% of lognormal(0, 1) ones
    (1.7% of exponential); at n = 100 none. Bounded by 0.05 here, 2,000 samples."""
    rng = np.random.default_rng(11)
    reps = 2000
    assert _flag_rate(draw(rng, (reps, 20))) <= _band(0.05, reps)[1]
    assert _flag_rate(draw(rng, (500, 100))) == 0


def test_power_on_a_pareto_left_tail_is_the_measured_one():
    """5 − Lomax(α = 1) at n = 200: flagged in 0.7106 of 10,000 samples (table); a screen of
    the upper tail only flags none, and 95% a tail instead of 97.5% flags 0.76."""
    rng = np.random.default_rng(12)
    reps = 2000
    rate = _flag_rate(5.0 - rng.pareto(1.0, (reps, 200)))
    low, high = _band(POWER, reps)
    assert low <= rate <= high
