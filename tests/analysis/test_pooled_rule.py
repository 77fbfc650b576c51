"""One rule for a pooled SNR column that some rows lack (cells computed before it existed):
the summary, the comparisons and the rate–distortion rows all leave it out, each with the
same UserWarning (kvstats.analysis.frame.reported_pooled_snrs)."""

import warnings

import numpy as np
import pytest

from kvstats.analysis import aggregate_clusters, compare_schemes, summary_table, theory_table
from kvstats.analysis.compare import default_metrics

from _sweep_frames import clustered_frame, make_frame

PAIR = [("KQV", "QKQV")]
LEFT_OUT = r"snr_v_pooled is left out of the tables: 20 of the frame's 40 rows lack it"


def _resumed_frame():
    """KQV's cells from before the pooled SNR of values existed, QKQV's from after."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.3}, n=20)
    rng = np.random.default_rng(3)
    f = f.assign(snr_k_pooled=rng.normal(8, 1, len(f)), snr_v_pooled=rng.normal(8, 1, len(f)))
    f.loc[f.scheme == "KQV", "snr_v_pooled"] = np.nan
    return f


def test_summary_and_comparisons_report_the_same_pooled_columns_and_both_warn():
    f = _resumed_frame()
    with pytest.warns(UserWarning, match=LEFT_OUT):
        summary = summary_table(f, n_resamples=99)
    with pytest.warns(UserWarning, match=LEFT_OUT):
        comparisons = compare_schemes(f, PAIR, energy=False)
    pooled = {"snr_k_pooled", "snr_v_pooled"}
    assert set(summary.metric) & pooled == set(comparisons.metric) & pooled == {"snr_k_pooled"}
    assert summary["mean"].notna().all()            # no NaN mean for the cells that lack it
    with pytest.warns(UserWarning, match=LEFT_OUT):
        assert set(default_metrics(f)) & pooled == {"snr_k_pooled"}


def test_the_bound_rows_leave_it_out_too_and_a_complete_frame_warns_nowhere():
    f = _resumed_frame().assign(key_bits_total=2.25, value_bits_total=2.25)
    with pytest.warns(UserWarning, match=LEFT_OUT):
        theory = theory_table(f, n_resamples=99)
    # the key side keeps its rows for both schemes; the value side has none, not KQV's alone
    assert set(theory.quantity) >= {"k_snr_bound"} and "v_snr_bound" not in set(theory.quantity)
    complete = f.assign(snr_v_pooled=f["snr_k_pooled"] - 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "snr_v_pooled" in set(summary_table(complete, n_resamples=99).metric)
        assert "snr_v_pooled" in set(compare_schemes(complete, PAIR, energy=False).metric)
        assert (theory_table(complete, n_resamples=99).quantity == "v_snr_bound").sum() == 2


def test_a_cluster_with_a_trial_lacking_it_lacks_it_and_the_tables_leave_it_out():
    f = clustered_frame().assign(snr_k_pooled=1.0, snr_v_pooled=2.0)
    # three trials of text 0 and one of text 1 (KQV, n = 2: ten trials per text)
    f.loc[f.index[[0, 1, 2, 10]], "snr_v_pooled"] = np.nan
    g = aggregate_clusters(f)
    lacking = g["snr_v_pooled"].isna()
    assert g.loc[lacking, "cluster"].tolist() == [0, 1]
    # the others are their clusters' means (Σ x/n: equal up to rounding)
    assert np.allclose(g.loc[~lacking, "snr_v_pooled"], 2.0, rtol=1e-15, atol=0)
    assert np.allclose(g["snr_k_pooled"], 1.0, rtol=1e-15, atol=0)
    with pytest.warns(UserWarning, match=r"snr_v_pooled is left out of the tables: 2 of the frame's 48"):
        assert "snr_v_pooled" not in set(summary_table(g, n_resamples=99).metric)
    with pytest.raises(ValueError, match=r"NaN in metric column 'ip_bias'"):   # other columns: refused
        aggregate_clusters(f.assign(ip_bias=np.r_[np.nan, np.zeros(len(f) - 1)]))
