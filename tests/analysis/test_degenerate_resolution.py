"""Rows whose test could not have concluded what its verdict's words suggest.

- A two-sample energy test whose pooled 6D profiles are all one point: every relabelling
  gives the observed statistic, so its p-value is 1 whatever B. It read "no significant
  difference" (resolvable at 1/C(2n, n)); now "not resolvable … all 2n pooled points are
  identical" (the paired test already had p = 1 as its floor; it now says why as well).
- An equivalence (TOST) row said ``resolvable`` True whatever its n and margin (below).
"""

import numpy as np
import pandas as pd
import pytest

from kvstats.analysis import METRICS, compare_schemes
from kvstats.analysis.compare import NO_DIFFERENCE
from kvstats.analysis.resolution import permutation_floor, tied_permutation_floor

from _sweep_frames import make_frame

PAIR = [("KQV", "QKQV")]


def _constant_pair(n=8, value=0.5, rounding=False):
    """Two schemes whose every metric is ``value`` in every trial (b off by rounding if asked)."""
    a = pd.DataFrame({m: np.full(n, value) for m in METRICS}).assign(
        distribution="gaussian", params="-", dim=64, n_keys=128, budget=4.0, scheme="KQV",
        bits_nominal=4.0, bits_total=4.25, trial=np.arange(n))
    b = a.assign(scheme="QKQV")
    if rounding:
        b[list(METRICS)] = b[list(METRICS)] * (1 + 2.0 ** -52)   # one ulp: equal up to rounding
    return pd.concat([a, b], ignore_index=True)


@pytest.mark.parametrize("rounding", [False, True])
def test_two_sample_energy_of_identical_points_is_not_resolvable(rounding):
    """All 16 pooled profiles one point: p = 1 for every seed and B (each relabelling gives
    the observed statistic), so the floor is 1, not 2/C(16, 8); said, with the reason."""
    from kvstats.stats.sequential import energy_test_sequential

    f = _constant_pair(rounding=rounding)
    X = f.loc[f.scheme == "KQV", ["snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t"]].to_numpy()
    Y = f.loc[f.scheme == "QKQV", ["snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t"]].to_numpy()
    if not rounding:   # the premise: no relabelling can reject, whatever the seed and B
        for seed in range(5):
            assert energy_test_sequential(X, Y, max_permutations=999, seed=seed,
                                          standardize=True).pvalue == 1.0
    t = compare_schemes(f, PAIR, pairing="none", energy_resamples=999)
    e = t[t.test == "energy"].iloc[0]
    assert e.pvalue == 1.0 and not e.significant        # one ulp is no difference
    assert e.min_attainable_p == 1.0 and not e.resolvable and e.n_informative == 0
    assert e.verdict == ("not resolvable at n = 8 vs 8 (smallest attainable adjusted p 1): all 16 "
                         "pooled points are identical, so every relabelling gives the observed "
                         "statistic")
    assert NO_DIFFERENCE not in set(t.verdict)


def test_two_sample_energy_counts_the_relabellings_of_tied_points():
    """One profile of 16 differs: only where the odd point goes changes the statistic, so no
    p-value is below 2·C(15, 7)/C(16, 8) = 1 (it was 2/C(16, 8), resolvable, "no significant
    difference"); all distinct, the distinct-point floor. Separated samples are unaffected."""
    f = _constant_pair()
    f.loc[0, "snr_k"] = 0.6
    t = compare_schemes(f, PAIR, pairing="none", energy_resamples=999)
    e = t[t.test == "energy"].iloc[0]
    assert e.min_attainable_p == 1.0 and not e.resolvable and np.isnan(e.n_informative)
    assert e.verdict == "not resolvable at n = 8 vs 8 (smallest attainable adjusted p 1)"
    f[list(METRICS)] = np.random.default_rng(0).random((16, len(METRICS)))   # all distinct
    e = compare_schemes(f, PAIR, pairing="none", energy_resamples=999).query("test == 'energy'").iloc[0]
    assert e.min_attainable_p == permutation_floor(8, 8, False)   # 8 vs 8: enumerated, exact
    t = compare_schemes(make_frame({("KQV", 4): 0.0, ("QKQV", 4): 3.0}, n=20, seed=1), PAIR,
                        pairing="none", metrics=["kl"])
    e = t[t.test == "energy"].iloc[0]
    assert e.resolvable and e.significant and np.isnan(e.n_informative)


def test_tied_permutation_floor_is_the_least_share_of_one_split():
    """Against enumeration: every labelling of N points (multiplicities ``counts``) into n_a
    and the rest; a labelling's p-value is at least the share of labellings with its split
    (k_j copies of point j), or with its complement when n_a = n_b."""
    from itertools import combinations
    from math import comb

    rng = np.random.default_rng(0)
    for _ in range(120):
        counts = rng.integers(1, 4, rng.integers(1, 5))
        n = int(counts.sum())
        if n < 2:
            continue
        n_a = int(rng.integers(1, n))
        point = np.repeat(np.arange(counts.size), counts)
        splits = {}
        for chosen in combinations(range(n), n_a):
            k = tuple(np.bincount(point[list(chosen)], minlength=counts.size))
            splits[k] = splits.get(k, 0) + 1
        twin = lambda k: tuple(counts - np.array(k))   # noqa: E731
        least = min(splits[k] + (splits[twin(k)] if 2 * n_a == n and twin(k) != k else 0)
                    for k in splits) / comb(n, n_a)
        assert tied_permutation_floor(counts, n_a) == pytest.approx(least, rel=1e-12)
    assert tied_permutation_floor([1] * 9, 4) == permutation_floor(4, 5, False)
    with pytest.raises(ValueError, match="n_a"):
        tied_permutation_floor([2, 2], 4)


@pytest.mark.parametrize("rounding", [False, True])
def test_paired_energy_says_how_many_pairs_differ_where_its_units_bind(rounding):
    """Paired: no pair differs (beyond rounding: the standardised test once blew a one-ulp
    spread up to "distributions differ"), floor 1 ('none of the 8 pairs differs'); 3 of 8
    differ, floor 2^(1−3) = 1/4, read from n_informative; where B binds, no count (B is the
    remedy)."""
    t = compare_schemes(_constant_pair(rounding=rounding), PAIR, pairing="trial",
                        energy_resamples=999)
    e = t[t.test == "energy"].iloc[0]
    assert e.pvalue == 1.0 and e.n_informative == 0 and e.min_attainable_p == 1.0
    assert not e.resolvable and not e.significant
    assert e.verdict.endswith("(smallest attainable adjusted p 1): none of the 8 pairs differs")
    f = _constant_pair()
    f.loc[[0, 1, 2], "snr_k"] = [0.1, 0.2, 0.3]       # trials 0-2 of KQV: 3 pairs differ
    e = compare_schemes(f, PAIR, pairing="trial", energy_resamples=999).query("test == 'energy'").iloc[0]
    assert e.n_informative == 3 and e.min_attainable_p == 0.25
    assert e.verdict.startswith("not resolvable at n = 8 pairs") and \
        e.verdict.endswith(": only 3 of the 8 pairs differ")
    # 200 pairs, all differing, B = 19: B binds, the count would send the reader astray
    g = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.0}, n=200, seed=3)
    e = compare_schemes(g, PAIR, pairing="trial", metrics=["kl"], energy_resamples=19,
                        energy_resolution="fixed").query("test == 'energy'").iloc[0]
    assert e.n_informative == 200 and e.verdict.startswith("not resolvable at B = 19 (")
    assert "pairs differ" not in e.verdict


def _equivalence_rows(n, margin, test, pairing, seed=0):
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.0}, n=n, seed=seed)
    t = compare_schemes(f, PAIR, metrics=["kl"], energy=False, equivalence={"kl": margin},
                        equivalence_test=test, pairing=pairing)
    return t[t.test == "equivalence"].iloc[0], t


def test_ratio_tost_can_always_conclude_equivalence_from_two_units():
    """Its infimum p is 0: two arms of equal means and vanishing spread (n = 2 each) give p
    below any level, so ``resolvable`` True is a fact, not a default."""
    from kvstats.stats.equivalence import tost_ratio

    for paired in (False, True):
        p = [tost_ratio(1 + s * np.array([1.0, -1.0]), 1 + s * np.array([-1.0, 1.0]),
                        margin=0.01, paired=paired).pvalue for s in (1e-6, 1e-10)]
        assert p[1] < 1e-8 and p[1] < 1e-3 * p[0]        # toward 0 with the spread (df 1: ~ s)
    for pairing in ("none", "trial"):
        e, _ = _equivalence_rows(3, 0.01, "ratio", pairing)
        assert e.min_attainable_p == 0.0 and e.resolvable and not e.significant


@pytest.mark.parametrize("pairing", ["none", "trial"])
def test_rank_tost_of_few_units_is_not_shown_resolvable(pairing):
    """4 units, δ = 0.1: no data of this size known to kvstats reaches p <= 0.05 even alone
    (smallest 0.297 two-sample, 0.329 paired); the row said resolvable True. 300 random
    small-integer data sets of this size (the search that found the witness family) do no
    better than the row's min_attainable_p."""
    from kvstats.stats.equivalence import tost_rank

    e, t = _equivalence_rows(4, 0.1, "rank", pairing)
    assert not e.resolvable and e.min_attainable_p > 0.25
    assert e.min_attainable_p <= e.pvalue
    rng = np.random.default_rng(7)
    searched = min(tost_rank(*(rng.integers(0, rng.integers(2, 5), (2, 4)) * 1.0), delta=0.1,
                             paired=pairing == "trial").pvalue for _ in range(300))
    assert searched >= e.min_attainable_p
    assert e.verdict.startswith("inconclusive")      # the verdict's words are unchanged


@pytest.mark.parametrize("pairing", ["none", "trial"])
def test_rank_tost_resolvable_where_data_of_its_size_reach_the_level(pairing):
    """60 units, δ = 0.25: arms of that size reach far below α/m (a witness), so resolvable;
    the same at 60 units and δ = 0.005 is not shown (smallest known p above 0.05)."""
    e, t = _equivalence_rows(60, 0.25, "rank", pairing)
    assert e.resolvable and e.min_attainable_p < 1e-4
    assert e.min_attainable_p_adjusted <= 0.05
    e, _ = _equivalence_rows(60, 0.005, "rank", pairing)
    assert not e.resolvable and e.min_attainable_p > 0.05
