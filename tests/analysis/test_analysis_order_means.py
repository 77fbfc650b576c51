"""summary_table and theory_table are functions of the data, not of the frame's row order.

Before, a mean was summed in the frame's row order (np.mean: pairwise summation, whose
last bits follow the order), so the same rows shuffled changed the means' last bits in
both tables (and a text's mean in the theory table). They now read each cell's rows in
trial order (analysis.frame._in_trial_order), the order a sweep writes, where the frame is
left as it is: a sweep's tables keep every bit they had."""

import numpy as np
import pandas as pd
import pytest

import kvstats
from kvstats.analysis import summary_table, theory_table
from kvstats.analysis.frame import _in_trial_order

SUMMARY_KEY = ["distribution", "params", "dim", "n_keys", "budget", "scheme", "metric"]
THEORY_KEY = ["distribution", "params", "dim", "n_keys", "budget", "quantity", "scheme"]


@pytest.fixture(scope="module")
def frame():
    return kvstats.run_sweep({"schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3],
                              "distributions": ["gaussian", "heavy_tailed"], "dims": [16],
                              "n_keys": [32], "n_trials": 24, "seed": 5},
                             executor="serial", progress=False).frame


def _tables(f):
    s = summary_table(f, n_resamples=99).set_index(SUMMARY_KEY).sort_index()
    t = theory_table(f, n_resamples=99).set_index(THEORY_KEY).sort_index()
    return s, t


def test_a_sweep_frame_is_read_as_it_is(frame):
    # the sweep's own order: no reordering, so no value changes
    assert _in_trial_order(frame) is frame


def test_shuffled_rows_give_the_same_means(frame):
    ref = _tables(frame)
    for state in (1, 2, 3):
        got = _tables(frame.sample(frac=1.0, random_state=state).reset_index(drop=True))
        for g, r in zip(got, ref):
            pd.testing.assert_frame_equal(g, r, check_exact=True)


def test_rows_sharing_a_trial_number_are_ordered_by_their_values(frame):
    """A hand-made frame whose cells hold a trial number twice: still one table."""
    f = frame[frame["distribution"] == "gaussian"]
    f = f.drop(columns="cluster")     # a synthetic trial is its own cluster: no warning
    twice = pd.concat([f, f.assign(**{m: f[m] * (1 + 1e-3 * np.sin(f["trial"]))
                                       for m in ("kl", "snr_k", "snr_k_pooled", "ip_var")})],
                      ignore_index=True)
    ref = summary_table(twice, n_resamples=99).set_index(SUMMARY_KEY).sort_index()
    for state in (1, 2, 3):
        got = summary_table(twice.sample(frac=1.0, random_state=state), n_resamples=99)
        pd.testing.assert_frame_equal(got.set_index(SUMMARY_KEY).sort_index(), ref, check_exact=True)


def test_cells_named_come_in_that_order(frame):
    """With the sweep's cell ids (its manifest's order) a shuffled frame is the sweep's frame."""
    ids = list(dict.fromkeys(frame["cell_id"]))
    shuffled = frame.sample(frac=1.0, random_state=4)
    pd.testing.assert_frame_equal(_in_trial_order(shuffled, ids), frame, check_exact=True)
    # without them the cells keep their order of first appearance, each in trial order
    got = _in_trial_order(shuffled)
    assert list(dict.fromkeys(got["cell_id"])) == list(dict.fromkeys(shuffled["cell_id"]))
    assert (got.groupby("cell_id", sort=False)["trial"].diff().dropna() > 0).all()
