"""The theory table's ratio rows resample the two schemes' values as pairs of one trial.

A sweep codes each trial's K, V, q with every scheme and budget of its case
(kvstats.sweep.plan.data_seed), so QKQV's and KQV's ip_var on one trial are a pair; the
rows resampled them as independent samples before 2026-12-02.
"""

import numpy as np
import pytest

import kvstats
from kvstats.analysis import theory_table
from kvstats.analysis.intervals import ratio_ci


@pytest.fixture(scope="module")
def sweep_frame():
    config = {"schemes": ["KQV", "QKQV"], "budgets": [2, 3], "distributions": ["gaussian"],
              "dims": [64], "n_keys": [32], "n_trials": 40, "seed": 4}
    return kvstats.run_sweep(config, executor="serial", progress=False).frame


def _cell(frame, scheme, budget):
    return frame[(frame["scheme"] == scheme) & (frame["budget"] == budget)].sort_values("trial")


def test_ratio_rows_pair_the_trials_and_equal_the_paired_bootstrap(sweep_frame):
    # rows in another order: the pairs are matched on the unit, not on the row; the unit
    # is the cluster column where the frame has one (= the trial for synthetic data), the
    # trial otherwise
    shuffled = sweep_frame.sample(frac=1.0, random_state=0)
    for frame in (shuffled, shuffled.drop(columns="cluster")):
        _check_ratio_rows(sweep_frame, theory_table(frame, n_resamples=199, seed=5))


def _check_ratio_rows(sweep_frame, table):
    is_ratio = table["quantity"].str.startswith("ip_var_ratio")
    assert is_ratio.sum() == 3 and table.loc[is_ratio, "paired"].all()
    assert not table.loc[~is_ratio, "paired"].any()          # one-sample rows
    ratios = table[is_ratio & (table["budget"] == 3)].set_index("quantity")
    q = _cell(sweep_frame, "QKQV", 3)["ip_var"].to_numpy()
    for quantity, den in (("ip_var_ratio_same_budget", _cell(sweep_frame, "KQV", 3)),
                          ("ip_var_ratio_residual", _cell(sweep_frame, "KQV", 2))):
        want = ratio_ci(q, den["ip_var"].to_numpy(), 199, 5, paired=True)
        row = ratios.loc[quantity]
        assert (row["measured"], row["ci_low"], row["ci_high"]) == pytest.approx(
            (want["measured"], want["ci_low"], want["ci_high"]), rel=1e-12)
        assert row["n_units"] == row["n_trials"] == 40


def test_a_shared_trial_effect_cancels_in_the_paired_ratio(sweep_frame):
    """A trial effect that scales both schemes' ip_var (as a text or a query norm does on
    real data; on these Gaussian trials the two schemes' ip_var hardly correlate, 0.08)
    moves both means together: the paired row's interval stays within 1.5 times its
    width without the effect (the effect reweights the trials, so not exactly), while
    resampling the two samples apart (the rows before 2026-12-02) is about twice as wide
    (1.95 to 2.5 times over bootstrap seeds 0 to 7 since the schemes' streams became a
    branch of their own, 2026-12-03; 2.6 to 3.9 on the codes before; 1.75 allows for the
    draw)."""
    scaled = sweep_frame.copy()
    scaled["ip_var"] *= np.exp(np.random.default_rng(2).normal(0, 1, 40))[scaled["trial"]]
    rows = [t[(t["quantity"] == "ip_var_ratio_same_budget") & (t["budget"] == 3)].iloc[0]
            for t in (theory_table(f, n_resamples=199, seed=5) for f in (sweep_frame, scaled))]
    assert rows[1]["paired"]
    width = [r["ci_high"] - r["ci_low"] for r in rows]
    assert width[1] < 1.5 * width[0]
    q = _cell(scaled, "QKQV", 3)["ip_var"].to_numpy()
    apart = ratio_ci(q, _cell(scaled, "KQV", 3)["ip_var"].to_numpy(), 199, 5)
    assert apart["ci_high"] - apart["ci_low"] > 1.75 * width[1]


def test_unmatched_trials_are_resampled_apart_and_say_so(sweep_frame):
    # one scheme's cell lost trials (a frame filtered by hand): no one-to-one pairs, so
    # the samples are resampled apart, as before, and the row says paired = False
    drop = (sweep_frame["scheme"] == "KQV") & (sweep_frame["budget"] == 3) & (sweep_frame["trial"] < 5)
    table = theory_table(sweep_frame[~drop], n_resamples=199, seed=5)
    rows = table[table["budget"] == 3].set_index("quantity")
    same = rows.loc["ip_var_ratio_same_budget"]
    assert not same["paired"] and same["n_units"] == 35
    want = ratio_ci(_cell(sweep_frame, "QKQV", 3)["ip_var"].to_numpy(),
                    _cell(sweep_frame[~drop], "KQV", 3)["ip_var"].to_numpy(), 199, 5)
    assert (same["ci_low"], same["ci_high"]) == pytest.approx((want["ci_low"], want["ci_high"]),
                                                              rel=1e-12)
    assert rows.loc["ip_var_ratio_residual", "paired"]      # its two cells still match
    # as many trials, other ones (another run's): not pairs either
    other = sweep_frame.copy()
    moved = (other["scheme"] == "KQV") & (other["budget"] == 3)
    other.loc[moved, ["trial", "cluster"]] += 1000
    row = theory_table(other, n_resamples=199, seed=5).set_index(["quantity", "budget"]).loc[
        ("ip_var_ratio_same_budget", 3.0)]
    assert not row["paired"] and row["n_units"] == 40


def test_a_proportional_pair_is_an_exact_ratio():
    y = np.random.default_rng(0).exponential(size=30)
    r = ratio_ci(3 * y, y, 99, 0, paired=True)           # BCa would raise: degenerate
    assert (r["measured"], r["ci_low"], r["ci_high"], r["paired"]) == (3.0, 3.0, 3.0, True)
    with pytest.raises(ValueError, match="paired=True needs x and y of equal length"):
        ratio_ci(y, y[:-1], 99, 0, paired=True)
