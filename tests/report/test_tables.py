"""Report tables on synthetic frames whose truth is known by construction."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from kvstats._checks import replicate_scale
from kvstats.report.tables import (CASE_COLUMNS, METRICS, _mean_ci, check_frame, compare_schemes,
                                   find_crossovers, summary_table)

from _report_frames import make_frame


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
    assert t.loc["recall_at_5", ["ci_low", "ci_high"]].tolist() == [1.0, 1.0]
    assert not t[["mean", "ci_low", "ci_high"]].isna().any().any()


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
        _, lo, hi = _mean_ci(rng.normal(size=30), 0.95, 499, i)
        hits += lo <= 0 <= hi
    lo_b, hi_b = sps.binom.ppf([0.005, 0.995], reps, 0.95) / reps
    assert lo_b - 0.02 <= hits / reps <= hi_b


def test_compare_winner_rule_and_adjustment():
    # KQV has lower KL (better) and higher SNR (better); QKQV the opposite: known winners.
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 1.0, ("KV", 4): 0.0}, n=80)
    t = compare_schemes(f, [("KQV", "QKQV"), ("KQV", "KV")], energy_resamples=99)
    mw = t[t.test == "mann_whitney"].set_index(["scheme_b", "metric"])
    assert mw.loc[("QKQV", "kl"), "winner"] == "KQV"        # lower KL wins
    assert mw.loc[("QKQV", "snr_k"), "winner"] == "QKQV"    # higher SNR wins
    assert mw.loc[("QKQV", "kl"), "effect"] < 0             # r < 0: KQV's values smaller
    assert (t.pvalue_adjusted >= t.pvalue - 1e-15).all()
    # Holm over the whole table: the smallest p-value is multiplied by the number of tests
    i = t.pvalue.idxmin()
    assert t.loc[i, "pvalue_adjusted"] == pytest.approx(min(1.0, t.pvalue.min() * len(t)))
    # KQV vs KV: same distribution -> (with these seeds) no significant difference anywhere
    assert set(mw.loc["KV", "winner"]) == {"no significant difference"}
    assert set(t.test) == {"mann_whitney", "ks", "energy"}
    assert t[t.test == "energy"].metric.tolist() == ["profile_6d", "profile_6d"]


def test_compare_bh_option_is_less_strict():
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.3}, n=60)
    holm = compare_schemes(f, [("KQV", "QKQV")], energy=False)
    bh = compare_schemes(f, [("KQV", "QKQV")], energy=False, correction="fdr_bh")
    assert (bh.pvalue_adjusted <= holm.pvalue_adjusted + 1e-15).all()


@pytest.mark.slow
def test_null_familywise_error_is_controlled():
    """Under the null (identical distributions) Holm keeps P(any rejection) ≤ α.

    Replicates: 40 (ci) / 200 (full) reports of 2 budgets × 9 metrics × 2 tests each.
    Reference: Holm (1979) controls the FWER at α for any dependence. Tolerance: the
    count of reports with a rejection must not exceed the binomial(reps, 0.05) 99.9% quantile.
    """
    reps = 40 if replicate_scale() == "ci" else 200
    bad = 0
    for r in range(reps):
        f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.0, ("KQV", 4): 0.0, ("QKQV", 4): 0.0},
                       n=30, seed=100 + r)
        t = compare_schemes(f, [("KQV", "QKQV")], energy=False)
        bad += bool(t.significant.any())
    assert bad <= sps.binom.ppf(0.999, reps, 0.05)


def test_crossover_detected_and_described():
    # KL: QKQV better at n=2, KQV better at n=4, nothing at n=3 -> a crossover
    f = make_frame({("KQV", 2): 1.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0,
                    ("KQV", 4): 0.0, ("QKQV", 4): 1.0}, n=80, seed=3)
    t = compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False)
    c = find_crossovers(t).set_index("metric")
    assert bool(c.loc["kl", "crossover"])
    assert "CROSSOVER" in c.loc["kl", "description"] and "QKQV wins at n = 2" in c.loc["kl", "description"]
    assert c.loc["kl", "winners"].startswith("2:QKQV, 3:no significant difference, 4:KQV")


def test_no_crossover_when_one_side_wins():
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 1.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=60)
    c = find_crossovers(compare_schemes(f, [("KQV", "QKQV")], energy=False, ks=False))
    assert not c.crossover.any()
    assert c.set_index("metric").loc["kl", "description"].startswith("no crossover")


def test_fixed_budget_schemes_compared_directly():
    f = make_frame({("K4V2", 3): 0.0, ("K4V4", 4): -1.0}, n=40)
    t = compare_schemes(f, [("K4V2", "K4V4")], energy=False, ks=False)
    assert set(t.budget) == {3.0} and set(t.budget_b) == {4.0}
    assert t.set_index("metric").loc["kl", "winner"] == "K4V4"


def test_missing_pairs_are_skipped_and_errors_are_clear():
    f = make_frame({("KQV", 4): 0.0}, n=10)
    assert compare_schemes(f, [("KQV", "QKQV")]).empty
    with pytest.raises(ValueError, match="correction must be one of"):
        compare_schemes(f, correction="bonferroni-ish")
    with pytest.raises(ValueError, match="lacks the sweep column"):
        check_frame(f.drop(columns=["kl"]))
    with pytest.raises(TypeError, match="DataFrame"):
        summary_table({"kl": [1.0]})
    g = f.copy()
    g.loc[0, "phi_k"] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        summary_table(g)


def test_theory_predicts_key_snr_only_where_the_closed_form_holds():
    # d = 128: KV and KQV both get a prediction, and it matches within 0.5 dB on Gaussian
    # keys (closed form: -10 log10(d * D_n), kvstats.theory.unit_vector_mse). d = 96 is
    # padded to 128 by the Hadamard rotation: KQV gets no row, KV (unrotated) still does.
    import kvstats
    from kvstats.report.tables import theory_table

    config = {"schemes": ["KV", "KQV"], "budgets": [3], "distributions": ["gaussian"],
              "dims": [96, 128], "n_keys": [64], "n_trials": 30}
    table = theory_table(kvstats.run_sweep(config, executor="serial", progress=False).frame,
                         n_resamples=99)
    rows = table[table["quantity"] == "k_snr_db"]
    assert set(map(tuple, rows[["dim", "scheme"]].to_numpy().tolist())) == {
        (96, "KV"), (128, "KV"), (128, "KQV")}
    assert np.all(np.abs(rows["measured"] - rows["predicted"]) < 0.5)


def test_summary_flags_heavy_tailed_metrics():
    """Planted tails, n = 400 trials per scheme (default Hill k = 20).

    KQV's KL is Pareto(α = 1.0) (infinite variance): k·α/α̂ ~ Gamma(20) exactly, so
    P(α̂ ≥ 2) = P(Gamma(20) ≤ 10) ≈ 0.005. QKQV's KL is exponential (α = ∞; Hill reads
    3–4 at this n, below 2 in < 1% of samples). With these seeds: α̂ = 0.96 and 3.6.
    snr_k is N(0, 1) (negative values): tail index not computed (NaN), CI reliable.
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
    assert kl.loc["KQV", "tail_index"] == pytest.approx(
        tail_index(f.loc[heavy, "kl"].to_numpy()).estimate, rel=1e-12)
    assert kl.loc["KQV", "tail_index"] < 2 and not kl.loc["KQV", "ci_reliable"]
    assert kl.loc["QKQV", "tail_index"] > 2 and kl.loc["QKQV", "ci_reliable"]
    snr = t[t.metric == "snr_k"]
    assert snr.tail_index.isna().all() and snr.ci_reliable.all()
    assert t.ci_reliable.dtype == bool


def test_summary_tail_index_not_computed_for_few_positive_or_nonfinite():
    f = make_frame({("identity", 16): 0.0}, n=20)
    f["snr_k"] = np.inf
    f["kl"] = np.r_[np.zeros(11), np.arange(1.0, 10.0)]   # 9 positive values: too few
    t = summary_table(f, n_resamples=99).set_index("metric")
    assert np.isnan(t.loc["snr_k", "tail_index"]) and t.loc["snr_k", "ci_reliable"]
    assert np.isnan(t.loc["kl", "tail_index"]) and t.loc["kl", "ci_reliable"]
