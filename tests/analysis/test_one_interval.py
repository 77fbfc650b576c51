"""One quantity, one interval: a mean shown in two tables of a report carries one bootstrap
interval, and identical values get identical intervals whatever their row.

Before 2026-12-02 each table seeded its resampling by the row's place (the summary by
seed + 1000·group + metric, the theory table by seed + n, the bound rows by seed + 300), so
the quick sweep's report gave KV's snr_k at n = 2 two intervals ([9.433, 9.501] in the
scheme table, [9.432, 9.503] beside its prediction), and two schemes with the same trials
two intervals.
"""

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.analysis import summary_table, theory_table

ENDS = ["measured", "ci_low", "ci_high"]


@pytest.fixture(scope="module")
def frame():
    config = {"schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
              "dims": [64], "n_keys": [32], "n_trials": 20, "seed": 11}
    return kvstats.run_sweep(config, executor="serial", progress=False).frame


def _summary(frame, **kw):
    s = summary_table(frame, n_resamples=199, seed=7, **kw)
    return s.set_index(["budget", "scheme", "metric"])[["mean", "ci_low", "ci_high"]].sort_index()


def test_a_mean_in_the_summary_and_the_theory_table_has_one_interval(frame):
    summary = _summary(frame)
    theory = theory_table(frame, n_resamples=199, seed=7)
    shown = {"k_snr_db": "snr_k", "k_snr_bound": "snr_k_pooled", "v_snr_bound": "snr_v_pooled"}
    rows = theory[theory["quantity"].isin(shown)]
    assert len(rows) == 3 * 2 + 2 * 3 * 2          # the k_snr_db rows, the bound rows
    for r in rows.itertuples():
        want = summary.loc[(r.budget, r.scheme, shown[r.quantity])].to_numpy()
        assert [r.measured, r.ci_low, r.ci_high] == pytest.approx(want, rel=1e-12), r
        assert r.ci_low < r.ci_high
    # the gap to a synthetic case's one bound mirrors the pooled SNR's interval
    bound = rows[rows["quantity"] != "k_snr_db"]
    np.testing.assert_allclose(bound[["gap_db", "gap_low", "gap_high"]].to_numpy(),
                               (bound["predicted"].to_numpy()[:, None]
                                - bound[["measured", "ci_high", "ci_low"]].to_numpy()),
                               rtol=1e-12)


def test_identical_values_get_identical_intervals_in_any_row(frame):
    """A scheme's trials copied under another label, and the frame's rows shuffled: every
    metric of the copy has the original's interval (not a draw of its own)."""
    copy = frame[frame["scheme"] == "KQV"].assign(scheme="KQV_copy")
    both = pd.concat([frame, copy]).sample(frac=1.0, random_state=1)
    summary = _summary(both)
    original = summary.xs("KQV", level="scheme")
    assert original.shape[0] == 2 * 11 and (original["ci_low"] < original["ci_high"]).all()
    pd.testing.assert_frame_equal(summary.xs("KQV_copy", level="scheme"), original)
    pd.testing.assert_frame_equal(original, _summary(frame).xs("KQV", level="scheme"))
    # the copy's ratio to the same denominator: the same interval as the original's
    theory = theory_table(both, n_resamples=199, seed=7).set_index(["quantity", "budget"])
    plain = theory_table(frame, n_resamples=199, seed=7).set_index(["quantity", "budget"])
    ratio = ("ip_var_ratio_same_budget", 3.0)
    assert theory.loc[ratio, ENDS].tolist() == plain.loc[ratio, ENDS].tolist()


def test_another_seed_draws_other_resamples(frame):
    """The seed still matters: the intervals are the seed's and the data's, not the data's alone."""
    a, b = (summary_table(frame, n_resamples=199, seed=s).set_index(["budget", "scheme", "metric"])
            for s in (7, 8))
    # a fraction's 0/1 sample has the exact Clopper-Pearson interval, seed-free
    drawn = a.index.get_level_values("metric") != "argmax_shift"
    assert (a["ci_low"] != b["ci_low"])[drawn].mean() > 0.9
