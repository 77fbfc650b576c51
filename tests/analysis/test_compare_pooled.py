"""The energy-pooled SNRs among compare_schemes' default metrics, and the metrics argument's checks."""

import warnings

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.analysis import METRICS, compare_schemes
from kvstats.analysis.compare import TESTABLE_METRICS, default_metrics

from _sweep_frames import make_frame

PAIR = [("KQV", "QKQV")]
POOLED = ("snr_k_pooled", "snr_v_pooled")


def _with_pooled(frame, seed=0):
    rng = np.random.default_rng(seed)
    return frame.assign(snr_k_pooled=rng.normal(8, 1, len(frame)), snr_v_pooled=rng.normal(8, 1, len(frame)))


def test_default_adds_the_pooled_snrs_and_leaves_the_other_rows_as_they_were():
    f = _with_pooled(make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.3, ("KQV", 3): 0.0, ("QKQV", 3): 0.3}, n=30))
    old = compare_schemes(f, PAIR, metrics=METRICS, energy=False)
    new = compare_schemes(f, PAIR, energy=False)
    assert default_metrics(f) == METRICS + POOLED == TESTABLE_METRICS
    assert new.attrs["n_tests"] == old.attrs["n_tests"] + 2 * 2       # 2 pooled SNRs x 2 budgets
    assert set(new.metric) == set(METRICS) | set(POOLED)
    kept = new[new.metric.isin(METRICS)].reset_index(drop=True)
    cols = ["statistic", "pvalue", "effect", "effect_low", "effect_high", "mean_a", "median_b"]
    pd.testing.assert_frame_equal(kept[cols], old[cols])              # the unadjusted numbers
    # a frame without the columns (sweeps from before them) is tested as before, silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert default_metrics(f.drop(columns=list(POOLED))) == METRICS


def test_a_pooled_snr_has_the_winner_rule_of_an_snr():
    # a windowed scheme: a's per-vector mean of dB higher on every trial, its pooled SNR lower
    f = _with_pooled(make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.0}, n=20, seed=2))
    a = (f.scheme == "KQV").to_numpy()
    f.loc[a, "snr_k"] += 10.0
    f.loc[a, "snr_k_pooled"] = f.loc[~a, "snr_k_pooled"].to_numpy() - 1.0
    t = compare_schemes(f, PAIR, metrics=["snr_k", "snr_k_pooled"], energy=False).set_index("metric")
    assert t.loc["snr_k", "winner"] == "KQV" and t.loc["snr_k_pooled", "winner"] == "QKQV"
    assert t.loc["snr_k_pooled", "statistic"] == 0 and t.loc["snr_k_pooled", "effect"] == -1.0


def test_kivis_window_wins_on_the_mean_of_db_and_loses_on_the_pooled_snr():
    # docs/measurement.md: kivi keeps 32 keys in float16; at n = 2 its mean of per-vector dB
    # is far above turboquant_mse's while its pooled SNR, the trial's error energy, is below
    res = kvstats.run_sweep({"schemes": ["kivi", "turboquant_mse"], "budgets": [2],
                             "distributions": ["gaussian"], "dims": [64], "n_keys": [256],
                             "n_trials": 12, "comparisons": [["kivi", "turboquant_mse"]]},
                            executor="serial", progress=False)
    t = compare_schemes(res.frame, [("kivi", "turboquant_mse")], energy=False).set_index("metric")
    assert {"snr_k_pooled", "snr_v_pooled"} <= set(t.index)
    assert t.loc["snr_k", "winner"] == t.loc["snr_v", "winner"] == "kivi"
    assert t.loc["snr_k_pooled", "winner"] == t.loc["snr_v_pooled", "winner"] == "turboquant_mse"


def test_a_pooled_column_with_nan_is_left_out_with_a_warning_or_refused_by_name():
    f = _with_pooled(make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=10))
    f.loc[f.index[:3], "snr_v_pooled"] = np.nan          # cells from before the column, resumed
    with pytest.warns(UserWarning, match=r"snr_v_pooled is left out of the tables: 3 of the frame's 20 rows lack it"):
        t = compare_schemes(f, PAIR, energy=False)
    assert "snr_k_pooled" in set(t.metric) and "snr_v_pooled" not in set(t.metric)
    with pytest.raises(ValueError, match=r"metrics has 'snr_v_pooled', but 3 of the frame's 20 rows lack it"):
        compare_schemes(f, PAIR, metrics=["snr_v_pooled"], energy=False)
    with pytest.raises(ValueError, match=r"metrics has 'snr_k_pooled', which the frame lacks"):
        compare_schemes(f.drop(columns="snr_k_pooled"), PAIR, metrics=["kl", "snr_k_pooled"], energy=False)
    with pytest.raises(ValueError, match=r"metrics must be one of .*received 'ip_bias'"):
        compare_schemes(f, PAIR, metrics=["ip_bias"], energy=False)


def test_metrics_are_read_once_and_named_once():
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5}, n=20)
    listed = compare_schemes(f, PAIR, metrics=["kl", "phi_k"], energy=False)
    once = compare_schemes(f, PAIR, metrics=iter(["kl", "phi_k"]), energy=False)   # a one-pass iterator
    pd.testing.assert_frame_equal(once, listed)
    with pytest.raises(ValueError, match=r"each metric once .*repeating \['kl'\]"):
        compare_schemes(f, PAIR, metrics=["kl", "phi_k", "kl"], energy=False)
    with pytest.raises(TypeError, match="list of metric names"):
        compare_schemes(f, PAIR, metrics="kl", energy=False)


@pytest.mark.parametrize("metric", ["snr_k", "snr_t", "snr_v_pooled"])
def test_a_ratio_margin_on_a_db_metric_is_refused_as_the_reports_options_refuse_it(metric):
    # mean(a)/mean(b) of dB values depends on the 0 dB reference (and flips sign across it)
    f = _with_pooled(make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0}, n=10))
    with pytest.raises(ValueError, match=rf"equivalence\['{metric}'\]: {metric} is in dB .*'rank'"):
        compare_schemes(f, PAIR, energy=False, equivalence={metric: 0.1})
    t = compare_schemes(f, PAIR, energy=False, equivalence={metric: 0.1}, equivalence_test="rank")
    assert (t.test == "equivalence").sum() == 1
