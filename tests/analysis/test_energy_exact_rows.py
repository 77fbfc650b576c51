"""Energy rows of compare_schemes with the exact test (a small relabelling group) and the
resolution of drawn rows (kvstats.stats.family_resolution.monte_carlo_resolution)."""

import numpy as np
import pandas as pd

from kvstats.analysis import METRICS, compare_schemes
from kvstats.analysis.resolution import tied_permutation_floor
from kvstats.stats.family_resolution import monte_carlo_resolution

from _sweep_frames import make_frame

PAIR = [("KQV", "QKQV")]


def test_exact_paired_row_is_limited_by_its_pairs_not_by_b():
    """6 pairs, all shifted one way: the 2^5 swap classes are enumerated, p = 1/32 exactly.
    In a family of 13 that cannot reject, and B (19 here) has nothing to do with it: the
    verdict names the pairs (it read "not resolvable at B = 19", and the row B = 32/19)."""
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 30.0}, n=6, seed=5)
    t = compare_schemes(f, PAIR, pairing="trial", energy_resamples=19, energy_resolution="fixed")
    e = t[t.test == "energy"].iloc[0]
    assert e.note == "standardised 6D profile, within-pair swaps, exact (32 relabellings)"
    assert e.n_permutations == e.max_permutations == 32 and e.n_informative == 6
    assert e.pvalue == e.min_attainable_p == 1 / 32 and not e.resolvable
    assert e.verdict.startswith("not resolvable at n = 6 pairs (smallest attainable adjusted p ")
    assert e.verdict.endswith(": all 6 pairs differ: the limit is the number of pairs, 6, itself")


def test_drawn_two_sample_row_with_ties_gets_the_monte_carlo_resolution():
    """12 vs 12 (drawn: 1352078 classes) whose 24 profiles are 8 distinct points and 16
    copies of one: the relabellings tie with the observed one's on a share f = 0.00135 at
    the extreme, so 999 draws tie it about 1.3 times and return 1/1000 only 26% of the time.
    The row's resolution is the p-value that data get at least half the time (2/1000), not
    f (it was max(f, the untied floor's resolution) = f)."""
    n = 12
    a = make_frame({("KQV", 4): 0.0}, n=n, seed=6)
    a[list(METRICS)] = 0.5
    f = pd.concat([a, a.assign(scheme="QKQV")], ignore_index=True)
    f.loc[:7, "snr_k"] = np.arange(8) + 1.0                  # 8 of a's profiles distinct
    t = compare_schemes(f, PAIR, pairing="none", energy_resamples=999, energy_resolution="fixed")
    e = t[t.test == "energy"].iloc[0]
    assert e.note.startswith("standardised 6D profile") and "exact" not in e.note
    assert e.max_permutations == 999
    floor = tied_permutation_floor([1] * 8 + [16], n)
    assert round(floor, 5) == 0.00135 and (1 - floor) ** 999 < 0.5
    assert e.min_attainable_p == monte_carlo_resolution(floor, 999, 10) == 2 / 1000
