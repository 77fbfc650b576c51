"""The metric table: one definition per metric, every view derived from it."""

import pytest

import kvstats
from kvstats.metrics import PROFILE_COLUMNS
from kvstats.metrics.table import (DESCRIPTORS, HIGHER_IS_BETTER, METRIC_DIRECTIONS,
                                   METRIC_TABLE, PROFILE_6D, REPORT_METRICS, Metric, metric)


def test_every_profile_column_is_in_the_table_in_order():
    t = kvstats.sample("gaussian", 2, 16, 8, seed=0)
    df = kvstats.error_profile(t, t.K, t.V)
    assert list(df.columns) == ["trial", *METRIC_TABLE, *DESCRIPTORS] == list(PROFILE_COLUMNS)


def test_views_agree_with_the_entries():
    assert REPORT_METRICS == ("snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t", "kl",
                              "recall_at_5", "argmax_shift")
    assert PROFILE_6D == ("snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t")
    assert set(PROFILE_6D) <= set(REPORT_METRICS)
    assert list(HIGHER_IS_BETTER) == list(REPORT_METRICS)
    for name, m in METRIC_TABLE.items():
        assert m.name == name and METRIC_DIRECTIONS[name] == m.worst
        # the winner rule and the worst case read the same direction
        assert m.higher_is_better is {"low": True, "high": False}.get(m.worst)
        if m.reported:
            assert isinstance(HIGHER_IS_BETTER[name], bool)


def test_report_and_analysis_use_the_table():
    import kvstats.analysis as analysis
    import kvstats.report as report

    assert analysis.METRICS is REPORT_METRICS and report.METRICS is REPORT_METRICS
    assert analysis.PROFILE_METRICS is PROFILE_6D and report.HIGHER_IS_BETTER is HIGHER_IS_BETTER


def test_labels_and_errors():
    assert metric("snr_k").axis_label == "SNR_k (dB)"
    assert metric("norm_ratio_k").axis_label == metric("norm_ratio_k").label   # unitless
    with pytest.raises(ValueError, match="metric must be one of"):
        metric("snr")
    with pytest.raises(ValueError, match="worst must be one of"):
        Metric("x", "up", "", "x", definition="x")
    with pytest.raises(ValueError, match="'x': definition must be a non-empty text; received ''"):
        Metric("x", "high", "", "x", definition="")
    with pytest.raises(TypeError, match="definition"):
        Metric("x", "high", "", "x")                   # required, keyword-only
    assert all(m.definition for m in METRIC_TABLE.values())
    with pytest.raises(TypeError):
        METRIC_TABLE["x"] = metric("kl")     # read-only: one definition


def test_pooled_snr_columns_are_plain_metrics_not_tested_by_the_report():
    # the energy-pooled SNRs feed the rate–distortion gap (kvstats.analysis.theory); they
    # are not 6D dimensions nor report metrics, so the report's family of tests is unchanged
    for name in ("snr_k_pooled", "snr_v_pooled"):
        m = metric(name)
        assert m.higher_is_better and m.unit == "dB" and not m.profile_6d and not m.reported
        assert name not in REPORT_METRICS
    assert list(METRIC_TABLE)[-2:] == ["snr_k_pooled", "snr_v_pooled"]   # appended: old columns keep their order


def test_each_metrics_bad_direction():
    # by definition: SNR and recall are worse low; angles, KL, argmax shift and the q·k
    # error variance worse high; norm ratios worse away from 1 (log scale), the bias away
    # from 0
    expected = {"snr_k": "low", "phi_k": "high", "norm_ratio_k": "one", "snr_v": "low",
                "phi_v": "high", "norm_ratio_v": "one", "snr_t": "low", "phi_t": "high",
                "norm_ratio_t": "one", "kl": "high", "recall_at_5": "low", "argmax_shift": "high",
                "ip_bias": "zero", "ip_var": "high", "ip_slope": "one", "snr_k_pooled": "low",
                "snr_v_pooled": "low"}
    assert dict(METRIC_DIRECTIONS) == expected
