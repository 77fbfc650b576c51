"""Referee pass: compare_schemes' table is a function of the data, not of the frame's row
order. Before, pair i's permutations used seed + i with i its place in the frame (first
appearance of its case), and an unpaired sample's energy test and means read the rows in
frame order: shuffling the rows changed energy p-values (0.185 -> 0.25 on one pair here)
and the means' last bits."""

import pandas as pd
import pytest

from kvstats.analysis import compare_schemes

from _sweep_frames import make_frame

KEY = ["distribution", "params", "dim", "n_keys", "budget", "budget_b", "scheme_a", "scheme_b",
       "metric", "test"]


@pytest.fixture(scope="module")
def frame():
    # two cases, two budgets, near-null pairs (energy p-values away from their floor)
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.05, ("KQV", 3): 0.0, ("QKQV", 3): 0.1}, n=20)
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.05}, n=20, case=("student_t", "nu=3", 64, 128))
    return pd.concat([f, g], ignore_index=True)


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_shuffled_rows_give_the_same_table(frame, pairing):
    def table(f):
        t = compare_schemes(f, [("KQV", "QKQV")], pairing=pairing, energy_resamples=99,
                            energy_resolution="fixed", equivalence={"kl": 0.5}, seed=1)
        return t.set_index(KEY).sort_index()

    ref = table(frame)
    assert (ref.loc[ref.index.get_level_values("test") == "energy", "pvalue"] > 0.05).all()
    for state in (1, 2):
        # every number bit for bit (the draws, the sums), every verdict
        pd.testing.assert_frame_equal(table(frame.sample(frac=1.0, random_state=state)), ref,
                                      check_exact=True)
    # and the same call twice is the same table
    pd.testing.assert_frame_equal(table(frame), ref, check_exact=True)


def test_shuffled_rows_give_the_same_cluster_means():
    """aggregate_clusters' rows: before, a cluster mean's last bits followed the row order,
    and its row kept the trial (layer, head) of whichever of its rows came first."""
    from kvstats.analysis import aggregate_clusters

    from _sweep_frames import clustered_frame

    keys = ["distribution", "params", "dim", "n_keys", "budget", "scheme", "cluster"]
    c = clustered_frame(n_texts=6, per_text=7)

    def means(f):
        return aggregate_clusters(f).set_index(keys).sort_index()

    ref = means(c)
    for state in (1, 2):
        pd.testing.assert_frame_equal(means(c.sample(frac=1.0, random_state=state)), ref,
                                      check_exact=True)
    # the row of the cluster's smallest trial (texts of 7 trials numbered in order)
    assert (ref["trial"] == 7 * ref.index.get_level_values("cluster")).all()
