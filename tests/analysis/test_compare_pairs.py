"""compare_schemes' pair selection (grouped once, rows by position) against the plain definition.

The reference is what ``scheme_pairs`` meant before 2026-12-02, written out with boolean
masks over each case's rows: the rows, their order and every number of a table must be
those of that definition, bit for bit, however the frame's rows are ordered or labelled.
"""

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import CASE_COLUMNS, PROFILE_METRICS, compare_schemes
from kvstats.analysis.compare import scheme_pairs
from kvstats.stats.sequential import energy_test_sequential

from _sweep_frames import make_frame

PAIRS = [("KQV", "QKQV"), ("K4V2", "K4V4"), ("QKQV", "KV")]


def _reference_pairs(frame, comparisons):
    """The plain definition: per case (first appearance), per pair, per common budget."""
    for case, grp in frame.groupby(list(CASE_COLUMNS), sort=False):
        for a, b in comparisons:
            ga, gb = grp[grp.scheme == a], grp[grp.scheme == b]
            if ga.empty or gb.empty:
                continue
            ba, bb = list(dict.fromkeys(ga.budget)), list(dict.fromkeys(gb.budget))
            if len(ba) == 1 and len(bb) == 1 and ba != bb:
                yield case, ba[0], bb[0], a, b, ga, gb
                continue
            for bud in (x for x in ba if x in bb):
                yield case, bud, bud, a, b, ga[ga.budget == bud], gb[gb.budget == bud]


@pytest.fixture(scope="module")
def frame():
    """Two cases (a pair absent from one), fixed-budget schemes, rows shuffled, labels repeated."""
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.5, ("KV", 2): 0.1, ("KQV", 3): 0.0,
                    ("QKQV", 3): 0.2, ("K4V2", 3): 0.3, ("K4V4", 4): 0.0}, n=100, seed=7)
    g = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.4, ("QKQV", 3): 0.0}, n=100, seed=8,
                   case=("student_t", "nu=3", 32, 64))
    return pd.concat([f, g]).sample(frac=1.0, random_state=5)     # index labels repeat


def test_scheme_pairs_are_the_plain_definition(frame):
    got, ref = list(scheme_pairs(frame, PAIRS)), list(_reference_pairs(frame, PAIRS))
    assert [p[:5] for p in got] == [p[:5] for p in ref] and len(got) == 5
    for p, q in zip(got, ref):
        for x, y in zip(p[5:], q[5:]):
            pd.testing.assert_frame_equal(x, y)      # same rows, order and index labels
    # pairs given as a one-pass iterator count for every case, not only the first
    assert [p[:5] for p in scheme_pairs(frame, iter(PAIRS))] == [p[:5] for p in ref]


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_each_row_reads_the_pairs_values(frame, pairing):
    t = compare_schemes(frame, PAIRS, metrics=["kl", "snr_k"], energy=False, pairing=pairing)
    loc = t[t.test != "ks"].set_index([*CASE_COLUMNS, "budget", "scheme_a", "scheme_b", "metric"])
    n = 0
    for case, bud, _, a, b, ga, gb in _reference_pairs(frame, PAIRS):
        # matched on the trial, or two samples each read in trial order (as the summary)
        ga, gb = ga.sort_values("trial"), gb.sort_values("trial")
        for metric in ("kl", "snr_k"):
            row = loc.loc[(*case, bud, a, b, metric)]
            x, y = ga[metric].to_numpy(), gb[metric].to_numpy()
            assert (row.n_a, row.n_b) == (len(x), len(y))
            assert (row.mean_a, row.mean_b, row.median_a, row.median_b) == (
                np.mean(x), np.mean(y), np.median(x), np.median(y))
            n += 1
    assert n == len(loc) == 10


@pytest.mark.parametrize("pairing", ["trial", "none"])
def test_energy_rows_are_the_test_on_the_frames_own_arrays(frame, pairing):
    # X and Y as DataFrame.to_numpy gives them (column-major): the same bits, not only the
    # same values (a row-major copy sums the standardisation in another order)
    t = compare_schemes(frame, PAIRS, metrics=["kl"], energy_resamples=49,
                        energy_resolution="fixed", seed=3, pairing=pairing)
    energy = t[t.test == "energy"].reset_index(drop=True)
    assert len(energy) == 5
    pairs = list(_reference_pairs(frame, PAIRS))
    # pair i's seed: 3 + its place among the pairs' keys sorted as text, not in the frame
    keys = [tuple(map(str, (*p[0], *p[1:5]))) for p in pairs]
    place = {key: r for r, key in enumerate(sorted(keys))}
    for i, (case, bud, _, a, b, ga, gb) in enumerate(pairs):
        # matched on the trial, or two samples each read in trial order (as the summary)
        ga, gb = ga.sort_values("trial"), gb.sort_values("trial")
        X, Y = (g[list(PROFILE_METRICS)].to_numpy(np.float64) for g in (ga, gb))
        ref = energy_test_sequential(X, Y, max_permutations=49, h=10, seed=3 + place[keys[i]],
                                     standardize=True, **({"paired": True} if pairing == "trial" else {}))
        assert (energy.statistic[i], energy.pvalue[i]) == (ref.statistic, ref.pvalue)
