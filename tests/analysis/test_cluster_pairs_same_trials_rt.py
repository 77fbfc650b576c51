"""Two cluster means pair only over as many trials (referee RT, F1).

A frame joined from two sweeps of other ``n_trials`` held text 5 as a 13-trial mean for
one scheme and a 5-trial mean for the other; ``compare_schemes`` and the theory table's
paired ratios paired them silently, where unmatched synthetic trials are a named error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import METRICS, aggregate_clusters, compare_schemes
from kvstats.analysis.theory import _paired_units


def _cell(scheme, n, rng):
    return pd.DataFrame({m: rng.random(n) for m in METRICS}).assign(
        distribution="real", params="layer=0", dim=64, n_keys=128, budget=4.0, scheme=scheme,
        bits_nominal=4.0, bits_total=4.25, trial=np.arange(n), cluster=np.arange(n) // 13)


def test_cluster_means_of_other_trial_counts_are_no_pair():
    rng = np.random.default_rng(0)
    frame = aggregate_clusters(pd.concat([_cell("A", 78, rng), _cell("B", 70, rng)], ignore_index=True))
    with pytest.raises(ValueError, match=r"cluster 5 the mean of other trial counts \(13 trials in A's "
                                         r"rows, 5 in B's for the first\)"):
        compare_schemes(frame, [("A", "B")], energy=False)
    # the same counts pair as before
    same = aggregate_clusters(pd.concat([_cell("A", 78, rng), _cell("B", 78, rng)], ignore_index=True))
    assert compare_schemes(same, [("A", "B")], energy=False)["n_a"].iloc[0] == 6


def test_the_theory_tables_paired_units_fall_back_to_two_samples():
    rng = np.random.default_rng(1)
    a, b = _cell("A", 78, rng), _cell("B", 70, rng)
    xa, xb, paired = _paired_units(a, b, "kl")
    assert not paired and len(xa) == 6 and len(xb) == 6
    assert _paired_units(a, _cell("B", 78, rng), "kl")[2]
