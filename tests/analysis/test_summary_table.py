"""Summary table on synthetic frames whose truth is known by construction."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from kvstats._checks import replicate_scale
from kvstats.analysis import CASE_COLUMNS, METRICS, summary_table
from kvstats.analysis.intervals import mean_ci

from _sweep_frames import make_frame


def test_summary_table_columns_and_values():
    f = make_frame({("A", 3): 0.0, ("B", 3): 1.0}, n=40)
    t = summary_table(f, n_resamples=199)
    assert len(t) == 2 * len(METRICS)
    assert set(t.columns) >= {"mean", "ci_low", "ci_high", "median", "p99", "max", "n_trials",
                              "n_nonfinite", "bits_nominal", "bits_total", "metric", "scheme"}
    row = t[(t.scheme == "A") & (t.metric == "snr_k")].iloc[0]
    x = f[(f.scheme == "A")]["snr_k"]
    assert row["mean"] == pytest.approx(x.mean(), rel=1e-12)
    assert row["max"] == x.max() and row["p99"] == pytest.approx(np.quantile(x, 0.99))
    assert row["ci_low"] < row["mean"] < row["ci_high"]
    assert row["bits_total"] == 3.25


def test_summary_nonfinite_and_constant_samples():
    f = make_frame({("identity", 16): 0.0}, n=20)
    f["snr_k"] = np.inf
    f["recall_at_5"] = 1.0
    t = summary_table(f, n_resamples=99).set_index("metric")
    assert t.loc["snr_k", "mean"] == np.inf and t.loc["snr_k", "n_nonfinite"] == 20
    assert t.loc["snr_k", "ci_low"] == np.inf  # no interval for an infinite mean; documented
    assert t.loc["snr_k", "p99"] == np.inf and t.loc["snr_k", "median"] == np.inf
    # recall@5 all 1 of 20: the exact [0.025^(1/20), 1] (a fraction metric; see below)
    assert t.loc["recall_at_5", ["ci_low", "ci_high"]].tolist() == pytest.approx(
        [0.025 ** (1 / 20), 1.0], rel=1e-12)
    assert not t[["mean", "ci_low", "ci_high"]].isna().any().any()


def test_an_all_zero_fraction_gets_the_exact_bound_an_unbounded_metric_none():
    """20 trials: argmax shift all 0 -> [0, 1 − 0.025^(1/20)] = [0, 0.168], the upper end
    of the two-sided 95% Clopper–Pearson interval at 0 of 20 (reference:
    scipy.stats.binomtest(0, 20).proportion_ci(0.95, method="exact")); recall@5 all 1 its
    mirror; KL all 0 (unbounded): no interval, none is valid. Before
    2026-12-02 every such row printed the mean alone."""
    f = make_frame({("KQV", 8): 0.0}, n=20)
    f["argmax_shift"], f["recall_at_5"], f["kl"] = 0.0, 1.0, 0.0
    t = summary_table(f, n_resamples=99).set_index("metric")
    cp = sps.binomtest(0, 20).proportion_ci(0.95, method="exact")
    assert t.loc["argmax_shift", ["mean", "ci_low"]].tolist() == [0.0, 0.0]
    assert t.loc["argmax_shift", "ci_high"] == pytest.approx(cp.high, rel=1e-12)
    assert t.loc["recall_at_5", "ci_low"] == pytest.approx(1 - cp.high, rel=1e-12)
    assert t.loc["recall_at_5", "ci_high"] == 1.0
    assert t.loc["kl", ["mean", "ci_low", "ci_high"]].tolist() == [0.0, 0.0, 0.0]
    # at 90% the level reaches the bound; a fraction column holding values outside [0, 1]
    # (a hand-made frame) is not bounded: the mean alone, as before
    t90 = summary_table(f, confidence=0.9, n_resamples=99).set_index("metric")
    assert t90.loc["argmax_shift", "ci_high"] == pytest.approx(1 - 0.05 ** (1 / 20), rel=1e-12)
    f["argmax_shift"] = 2.0
    assert summary_table(f, n_resamples=99).set_index("metric").loc["argmax_shift", "ci_high"] == 2.0
    with pytest.raises(ValueError, match=r"x must lie in \[0, 1\] with unit_interval=True"):
        mean_ci(np.full(5, 2.0), 0.95, 99, 0, unit_interval=True)


def test_the_all_zero_bound_holds_for_any_metric_in_the_unit_interval():
    """P(n values of X ∈ [0, 1] all 0) ≤ (1 − μ)^n (X ≤ 1{X > 0}), so [0, 1 − u] misses μ
    with probability ≤ 0.025. n = 20, μ = 0.17 just above 1 − u = 0.168: a Bernoulli
    (the worst case, P = 0.83^20 = 0.0241) and a Bernoulli(0.34)·U(0, 1) (P = 0.66^20 =
    2.5e-4); 40,000 samples each, their all-zero rate below the binomial 99% upper limit
    of 0.025."""
    rng = np.random.default_rng(12)
    reps, n = 40_000, 20
    limit = sps.binom.isf(0.005, reps, 0.025) / reps
    for x in (rng.random((reps, n)) < 0.17,
              (rng.random((reps, n)) < 0.34) * rng.random((reps, n))):
        assert x.mean() == pytest.approx(0.17, abs=0.002)
        missed = ~x.any(axis=1)          # all 0: the interval [0, 0.168] misses 0.17
        assert missed.mean() <= limit, missed.mean()


def test_a_rare_proportion_is_covered_once_all_zero_samples_get_the_bound():
    """Bernoulli(0.01), n = 100 (an argmax shift at one query per trial): 37% of samples
    are all 0 (165 of these 400). With the bound, mean_ci covers p in 396 of 400 samples;
    with the mean alone for them (unit_interval=False, the summary table before
    2026-12-02) in 231, only where a bootstrap interval was drawn. B = 199."""
    rng = np.random.default_rng(9)
    hits = {True: 0, False: 0}
    for r in range(400):
        x = (rng.random(100) < 0.01).astype(float)
        for unit in (True, False):
            _, lo, hi = mean_ci(x, 0.95, 199, r, unit_interval=unit)
            hits[unit] += lo <= 0.01 <= hi
    lo_band = sps.binom.ppf(0.005, 400, 0.95) / 400
    assert hits[True] / 400 >= lo_band and hits[False] / 400 < lo_band, hits


@pytest.mark.slow
def test_bootstrap_interval_coverage():
    """95% intervals of the mean of N(0,1) samples (n=30) cover 0 at about 95%.

    Replicates: 300 (ci) / 2000 (full). Tolerance: the binomial 99% interval around 0.95
    widened by 0.02 for BCa's known small-sample undercoverage at n=30.
    """
    reps = 300 if replicate_scale() == "ci" else 2000
    rng = np.random.default_rng(1)
    hits = 0
    for i in range(reps):
        _, lo, hi = mean_ci(rng.normal(size=30), 0.95, 499, i)
        hits += lo <= 0 <= hi
    lo_b, hi_b = sps.binom.ppf([0.005, 0.995], reps, 0.95) / reps
    assert lo_b - 0.02 <= hits / reps <= hi_b


def test_summary_flags_heavy_tailed_metrics():
    """Planted tails, n = 400 trials per scheme (default Hill k = 20).

    KQV's KL is Pareto(α = 1.0) (infinite variance): k·α/α̂ ~ Gamma(20) exactly, so
    P(α̂ ≥ 2) = P(Gamma(20) ≤ 10) ≈ 0.005. QKQV's KL is exponential (α = ∞; Hill reads
    3–4 at this n, below 2 in < 1% of samples). The column is the 95% upper bound of α.
    snr_k is N(0, 1), in dB: both tails screened from the median (97.5% bounds, the smaller
    reported; tests/analysis/test_signed_tail_screen.py), light, CI reliable.
    """
    import warnings

    from kvstats.stats import HeavyTailWarning, tail_index

    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=400, seed=5)
    rng = np.random.default_rng(6)
    heavy = f.scheme == "KQV"
    f.loc[heavy, "kl"] = rng.pareto(1.0, heavy.sum())
    f.loc[~heavy, "kl"] = rng.exponential(1.0, (~heavy).sum())
    f.loc[0, "kl"] = -1e-17            # a rounding-negative KL does not stop the estimate
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeavyTailWarning)   # the table flags, never warns
        t = summary_table(f, n_resamples=199)
    assert list(t.columns[-2:]) == ["tail_index", "ci_reliable"]
    assert list(t.columns[:-2]) == list(CASE_COLUMNS) + [
        "budget", "scheme", "bits_nominal", "bits_total", "metric", "mean", "ci_low", "ci_high",
        "median", "p99", "max", "n_trials", "n_nonfinite"]
    kl = t[t.metric == "kl"].set_index("scheme")
    # the column is the screen's statistic: the 95% upper bound of Hill's α (kvstats.stats.tail)
    assert kl.loc["KQV", "tail_index"] == pytest.approx(
        tail_index(f.loc[heavy, "kl"].to_numpy()).upper_bound, rel=1e-12)
    assert kl.loc["KQV", "tail_index"] < 2 and not kl.loc["KQV", "ci_reliable"]
    assert kl.loc["QKQV", "tail_index"] > 2 and kl.loc["QKQV", "ci_reliable"]
    snr = t[t.metric == "snr_k"].set_index("scheme")
    x = f.loc[heavy, "snr_k"].to_numpy()
    excess = x - np.median(x)
    assert snr.loc["KQV", "tail_index"] == pytest.approx(min(
        tail_index(excess, confidence=0.975).upper_bound,
        tail_index(-excess, confidence=0.975).upper_bound), rel=1e-12)
    assert (snr.tail_index > 2).all() and snr.ci_reliable.all()
    assert t.ci_reliable.dtype == bool


def test_summary_tail_index_not_computed_for_few_positive_or_nonfinite():
    f = make_frame({("identity", 16): 0.0}, n=20)
    f["snr_k"] = np.inf
    f["kl"] = np.r_[np.zeros(11), np.arange(1.0, 10.0)]   # 9 positive values: too few
    f["argmax_shift"] = np.r_[np.zeros(17), np.ones(3)]   # a 0/1 proportion, 3 ones
    t = summary_table(f, n_resamples=99).set_index("metric")
    assert np.isnan(t.loc["snr_k", "tail_index"]) and t.loc["snr_k", "ci_reliable"]
    # too few positive values for the tail screen, and a mean carried by those few: flagged
    # as sparse (intervals.few_nonzero), not as heavy-tailed; a 0/1 proportion is not
    assert np.isnan(t.loc["kl", "tail_index"]) and not t.loc["kl", "ci_reliable"]
    assert np.isnan(t.loc["argmax_shift", "tail_index"]) and t.loc["argmax_shift", "ci_reliable"]
    f["kl"] = np.r_[np.zeros(10), np.arange(1.0, 11.0)]    # 10 positive values: screened, not sparse
    assert summary_table(f, n_resamples=99).set_index("metric").loc["kl", "ci_reliable"]


def test_interval_helpers_at_their_edges():
    """mean_ci: two values give no interval (the mean as both ends), neither a BCa bootstrap
    of two points nor [min, max] (a 50% interval, below); ci_reliable: Pareto α = 1.5 (a
    mean, no variance) is flagged, α = 4 is not."""
    from kvstats.analysis.intervals import ci_reliable, mean_ci

    assert mean_ci(np.array([1.0, 3.0]), 0.95, 99, 0) == (2.0, 2.0, 2.0)
    rng = np.random.default_rng(11)
    assert not ci_reliable(rng.pareto(1.5, 4000) + 1)
    assert ci_reliable(rng.pareto(4.0, 4000) + 1)


def test_fewer_than_three_units_get_no_interval():
    """Two texts: a bootstrap "95% CI" would be [min, max], which covers a symmetric
    population's mean with probability 1/2 (both draws on one side: 2 · 1/4); the table
    gives the mean alone (the degenerate interval), as for one unit. Three units get an
    interval."""
    from kvstats.analysis.intervals import mean_ci

    rng = np.random.default_rng(31)
    covered = [lo <= 0.0 <= hi for lo, hi in
               (sorted(rng.normal(0, 1, 2)) for _ in range(4000))]
    assert abs(np.mean(covered) - 0.5) < 0.03            # [min, max] of 2 is a 50% interval
    assert mean_ci(np.array([1.0, 3.0]), 0.95, 99, 0) == (2.0, 2.0, 2.0)
    f = pd.DataFrame({m: rng.random(2) for m in METRICS}).assign(
        distribution="gaussian", params="-", dim=64, n_keys=128, budget=4.0, scheme="KQV",
        bits_nominal=4.0, bits_total=4.25, trial=np.arange(2))
    s = summary_table(f, n_resamples=99)
    assert (s["ci_low"] == s["mean"]).all() and (s["ci_high"] == s["mean"]).all()
    mean, low, high = mean_ci(rng.random(3), 0.95, 99, 0)
    assert low < mean < high
