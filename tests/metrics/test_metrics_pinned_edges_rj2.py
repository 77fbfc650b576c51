"""Pinned edges of kvstats.metrics.profile that mutation testing (referee RJ2) found
untested: F4 (summarize_profile keeps a group whose label is NaN/None), F6 (ip_slope is
+inf when every q·k is 0 and the q·k̂ are <= 0, not all 0), F7 (a column without a known
direction has worst = max). References are stated per test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import kvstats


def test_summarize_profile_keeps_rows_with_a_missing_group_label():
    """by="scheme" with None on 2 of 4 rows: those rows form their own group; no row is
    dropped. Reference: the groups, counts and means computed by hand from the frame."""
    df = pd.DataFrame({"scheme": ["a", "a", None, None], "kl": [0.1, 0.2, 5.0, 6.0]})
    s = kvstats.summarize_profile(df, by="scheme", metrics=["kl"])
    assert int(s["n"].sum()) == len(df)
    assert len(s) == 2
    named = s[s["scheme"] == "a"].iloc[0]
    missing = s[s["scheme"].isna()].iloc[0]
    assert (named["n"], missing["n"]) == (2, 2)
    assert named["mean"] == np.mean([0.1, 0.2])
    assert missing["mean"] == np.mean([5.0, 6.0])


def test_summarize_profile_keeps_nan_in_one_of_two_keys():
    """Two grouping columns, NaN in the numeric one: 3 groups of (label, bits), counted by hand."""
    df = pd.DataFrame({"scheme": ["a", "a", "a", "b"], "bits": [4.0, np.nan, np.nan, 4.0],
                       "kl": [1.0, 2.0, 3.0, 4.0]})
    s = kvstats.summarize_profile(df, by=["scheme", "bits"], metrics="kl")
    assert int(s["n"].sum()) == 4 and len(s) == 3
    nan_group = s[s["bits"].isna()].iloc[0]
    assert (nan_group["scheme"], nan_group["n"], nan_group["mean"]) == ("a", 2, 2.5)


def test_worst_of_a_column_without_a_direction_is_its_max():
    """The docstring: "Columns without a known direction ... have worst = max"; a column
    named "custom" with values [3, 1, 2, 4] has max 4 (by hand)."""
    df = pd.DataFrame({"custom": [3.0, 1.0, 2.0, 4.0], "other": [-1.0, -5.0, -2.0, -3.0]})
    w = kvstats.summarize_profile(df, metrics=["custom", "other"]).set_index("metric")
    assert w.loc["custom", "worst"] == 4.0
    assert w.loc["other", "worst"] == -1.0


def test_ip_slope_is_inf_when_nonpositive_inner_products_change():
    """K = 0 (every q·k is 0), K̂ with q·k̂ = (0, -|q|², 0, 0): the inner products were not
    reproduced, so the documented value is +inf (as ‖x̂‖/‖x‖ at x = 0); K̂ = 0 gives 1.
    The q·k̂ are computed here with numpy to confirm they are <= 0 with zeros among them."""
    t = kvstats.sample("gaussian", 1, 4, 8, seed=5, n_queries=1)
    K = np.zeros_like(t.K)
    K_hat = np.zeros_like(t.K)
    K_hat[0, 1] = -t.q[0, 0]
    ip_hat = np.einsum("cqd,ckd->cqk", t.q, K_hat)
    assert (ip_hat <= 0).all() and (ip_hat == 0).any() and (ip_hat < 0).any()
    z = kvstats.Trials(K, t.V, t.q)
    assert kvstats.error_profile(z, K_hat, t.V, k=2)["ip_slope"].tolist() == [np.inf]
    assert kvstats.error_profile(z, K, t.V, k=2)["ip_slope"].tolist() == [1.0]
    # and the mirror, q·k̂ >= 0 with zeros: +inf as well
    assert kvstats.error_profile(z, -K_hat, t.V, k=2)["ip_slope"].tolist() == [np.inf]
