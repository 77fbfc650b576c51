"""Tests that kill mutants of the analysis code the suite let survive (referee RJ3, F1 F2 F4 F5 F7).

Each test pins a value a user sees, with the expected value written from the
definition (a hand count or the frame's own means), not read back from the code.
"""

import warnings

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.analysis import METRICS, summary_table, theory_table
from kvstats.analysis.clustered import TrialsAsUnitsWarning, warn_if_trials_share_clusters
from kvstats.analysis.crossover import agreed_rows, find_crossovers

CONFIG = {"schemes": ["KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
          "dims": [64], "n_keys": [32], "n_trials": 12, "seed": 4}


@pytest.fixture(scope="module")
def sweep_frame():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kvstats.run_sweep(CONFIG, executor="serial", progress=False).frame


def _same_budget_row(frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = theory_table(frame, n_resamples=199, seed=5)
    rows = t[(t["quantity"] == "ip_var_ratio_same_budget") & (t["budget"] == 3)]
    assert len(rows) == 1
    return rows.iloc[0]


def _cell(frame, scheme, budget):
    return frame[(frame["scheme"] == scheme) & (frame["budget"] == budget)]


def test_trial_only_frame_with_other_trials_is_resampled_apart(sweep_frame):
    """F1 (theory.py _paired_units, the ``isin`` clause): without a cluster column, two
    cells of 12 trials each whose trial labels do not match (KQV@3's moved by +1000, as a
    frame joined from another run) are not pairs. Expected: paired False and the ratio of
    the two cells' means, computed here from the frame (ratio of means, ratio_ci's
    definition); the mutant pairs them by position after reindexing to NaN."""
    other = sweep_frame.drop(columns="cluster")
    moved = (other["scheme"] == "KQV") & (other["budget"] == 3)
    other.loc[moved, "trial"] += 1000
    row = _same_budget_row(other)
    expected = (_cell(other, "QKQV", 3)["ip_var"].mean() / _cell(other, "KQV", 3)["ip_var"].mean())
    assert not row["paired"]
    assert np.isfinite([row["measured"], row["ci_low"], row["ci_high"]]).all()
    assert row["measured"] == pytest.approx(expected, rel=1e-12)
    assert row["n_units"] == 12 and row["n_trials"] == 12


def test_ratio_row_counts_the_smaller_cell(sweep_frame):
    """F5 (theory.py, ``n_trials`` of a ratio row): KQV@3 loses trials 0-4 of 12, so the
    ratio has min(12, 7) = 7 trials (hand count); the mutant reports the numerator's 12."""
    drop = (sweep_frame["scheme"] == "KQV") & (sweep_frame["budget"] == 3) & (sweep_frame["trial"] < 5)
    row = _same_budget_row(sweep_frame[~drop])
    assert len(_cell(sweep_frame[~drop], "KQV", 3)) == 7
    assert row["n_trials"] == 7
    assert row["n_units"] == 7


def _clustered_frame(per_cluster, n_clusters=10):
    n = per_cluster * n_clusters
    rng = np.random.default_rng(0)
    return pd.DataFrame({m: rng.random(n) for m in METRICS}).assign(
        distribution="real", params="-", dim=64, n_keys=32, budget=4.0, scheme="KQV",
        bits_nominal=4.0, bits_total=4.25, trial=np.arange(n),
        cluster=np.repeat(np.arange(n_clusters), per_cluster))


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if issubclass(w.category, TrialsAsUnitsWarning)]


@pytest.mark.parametrize("call", ["warn", "summary"])
def test_two_trials_per_text_warns(call):
    """F2 (clustered.py, ``sizes > 1``): 10 texts of exactly 2 trials each are correlated
    trials, so the warning must fire (the mutant ``sizes > 2`` stays silent); one trial per
    text is the control that must not warn."""
    def run(frame):
        if call == "warn":
            return lambda: warn_if_trials_share_clusters(frame, "summary_table")
        return lambda: summary_table(frame, n_resamples=99)
    two = _caught(run(_clustered_frame(2)))
    assert len(two) == 1
    assert "20 rows come from 10 (cell, cluster) groups" in str(two[0].message)
    assert _caught(run(_clustered_frame(1))) == []


def test_crossover_winners_follow_the_budget_not_the_rows():
    """F4 (crossover.py, the budget sort): rows at budgets 4, 2, 3 read in budget order.
    Expected strings written by hand from the sorted budgets 2 (QKQV), 3 (KQV), 4 (KQV)."""
    t = pd.DataFrame({"distribution": "gaussian", "params": "-", "dim": 64, "n_keys": 128,
                      "budget": [4.0, 2.0, 3.0], "budget_b": [4.0, 2.0, 3.0], "scheme_a": "KQV",
                      "scheme_b": "QKQV", "metric": "phi_k", "test": "mann_whitney",
                      "winner": ["KQV", "QKQV", "KQV"]})
    r = find_crossovers(t).iloc[0]
    assert r["winners"] == "n = 2: QKQV; n = 3: KQV; n = 4: KQV"
    assert r["crossover"]
    assert "KQV wins at n = 3, 4; QKQV wins at n = 2." in r["description"]


def test_one_informative_pair_is_not_agreed():
    """F7 (crossover.py agreed_rows, ``n_informative == 0``): a row is "equal on every
    unit" only when no pair differs; with 1 informative pair of 9 it is not (the mutant
    ``<= 1`` reads it as agreed)."""
    verdict = ("not resolvable at n = 9 pairs (smallest attainable adjusted p 1): "
               "only 1 of the 9 pairs differ")
    t = pd.DataFrame({"test": ["sign"] * 3, "n_informative": [0, 1, 2], "winner": [verdict] * 3})
    assert agreed_rows(t).tolist() == [True, False, False]
