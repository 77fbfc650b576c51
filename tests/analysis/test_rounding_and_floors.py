"""Rounding is not a difference, and a permutation test's units limit it as much as its B.

Two defects found by recomputing a real-cache report (session 9, H5):

- a text's mean of recall@5 (multiples of 1/15 over three query heads) can come out as
  0.8 for one scheme and 0.8000000000000002 for the other: equal in exact arithmetic,
  but the sign test counted the pair as a win, so rounding chose some winners (22 of
  the 405 sign rows of results/real_sweep; two winners of recall@5 were missing);
- an energy test of few units said "not resolvable at B = …" when no B would help (the
  paired test's 2^(1−m), the two-sample test's 2/C(2n, n)), and a two-sample energy test
  of 4 units against 4 counted as resolvable at 1/(1 + B) that only luck reaches.

And (session 11) a mean of a rarely-nonzero metric rests on its few nonzero values: its
bootstrap interval is flagged (``few_nonzero``), as the heavy-tail screen, which needs 10
positive values, could not.
"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from kvstats.analysis import METRICS, compare_schemes
from kvstats.analysis.compare import NO_DIFFERENCE
from kvstats.analysis.intervals import MIN_NONZERO, ci_reliable, few_nonzero, mean_ci
from kvstats.analysis.resolution import (ROUNDING_RTOL, extreme_pvalue, permutation_floor,
                                         rounding_canonical, rounding_ties)

from _sweep_frames import make_frame


def _recall_means(rng, n_units, per_unit=3, heads=3):
    """Per-unit means of per-trial recall@5 means over ``heads`` queries, summed as the
    report's aggregation and the metric do (left to right, Σ x/n), in a random order."""
    hits = rng.integers(0, 6, size=(n_units, per_unit, heads)) / 5.0
    trial = hits.mean(axis=-1)
    return (trial * (1.0 / per_unit)).sum(axis=-1), hits


def _paired_frame(a, b):
    parts = []
    for scheme, v in (("KQV", a), ("QKQV", b)):
        data = {m: v for m in METRICS}
        parts.append(pd.DataFrame(data).assign(distribution="real", params="layer=0", dim=64,
                                               n_keys=256, budget=2.0, scheme=scheme,
                                               bits_nominal=2.0, bits_total=2.25,
                                               trial=np.arange(len(v)), cluster=np.arange(len(v))))
    return pd.concat(parts, ignore_index=True)


def test_values_equal_up_to_rounding_are_ties_of_the_sign_test():
    """The same hits in another order: equal means in exact arithmetic, so every
    difference is zero; rounding alone made about a third of them nonzero."""
    rng = np.random.default_rng(5)
    a, hits = _recall_means(rng, 200)
    perm = rng.permuted(hits.reshape(200, -1), axis=1).reshape(hits.shape)
    b = (perm.mean(axis=-1) * (1.0 / 3)).sum(axis=-1)
    assert (a != b).sum() > 10            # rounding broke ties (the defect's precondition)
    t = compare_schemes(_paired_frame(a, b), [("KQV", "QKQV")], metrics=["recall_at_5"],
                        energy=False)
    row = t.iloc[0]
    assert row["n_informative"] == 0 and row["pvalue"] == 1.0
    assert row["verdict"].startswith("not resolvable at n = 200 pairs")
    assert "equal up to rounding, counted as zero" in row["note"]
    assert extreme_pvalue("sign", a, b) == 1.0


def test_rounding_ties_keep_real_differences_and_the_sign_test_exact():
    """Genuine differences stay (one step of 1/45 is far above the tolerance); the tie rule
    is symmetric in the pair, so the sign test keeps its exact binomial p-value on the
    pairs that differ (checked against scipy's binomtest)."""
    rng = np.random.default_rng(6)
    a, _ = _recall_means(rng, 60)
    b, _ = _recall_means(rng, 60)
    exact = np.round(a * 45) != np.round(b * 45)          # differ in exact arithmetic
    assert (~rounding_ties(a, b) == exact).all()
    assert (rounding_ties(a, b) == rounding_ties(b, a)).all()
    t = compare_schemes(_paired_frame(a, b), [("KQV", "QKQV")], metrics=["recall_at_5"],
                        energy=False).iloc[0]
    k, pos = int(exact.sum()), int((np.round(a * 45) > np.round(b * 45)).sum())
    assert t["n_informative"] == k and t["statistic"] == pos
    assert t["pvalue"] == pytest.approx(stats.binomtest(pos, k).pvalue, rel=1e-12)
    # the edges: infinities and values ~1e308 apart are not ties; a relative gap just
    # above the tolerance is a difference
    x = np.array([np.inf, 1e308, 1.0, 1.0])
    y = np.array([1e300, -1e308, 1.0 + 4 * ROUNDING_RTOL, 1.0 + ROUNDING_RTOL / 4])
    assert rounding_ties(x, y).tolist() == [False, False, False, True]


def test_two_sample_rank_tests_tie_values_equal_up_to_rounding():
    """Mann–Whitney's mid-ranks and KS's tie handling see 0.8 and 0.8 + 2 ulp as one value:
    the same p-values as on the exactly rounded values."""
    rng = np.random.default_rng(7)
    exact_a = rng.integers(0, 16, 40) / 15.0
    exact_b = rng.integers(2, 16, 40) / 15.0
    noisy_b = exact_b * (1 + rng.choice([-2, 0, 2], 40) * 2.0**-53)
    assert (noisy_b != exact_b).any()
    ref = compare_schemes(_paired_frame(exact_a, exact_b), [("KQV", "QKQV")],
                          metrics=["recall_at_5"], energy=False, pairing="none")
    got = compare_schemes(_paired_frame(exact_a, noisy_b), [("KQV", "QKQV")],
                          metrics=["recall_at_5"], energy=False, pairing="none")
    assert got["pvalue"].tolist() == ref["pvalue"].tolist()
    assert got["min_attainable_p"].tolist() == ref["min_attainable_p"].tolist()
    # the canonical values depend on the pooled values only, not on which sample holds them
    x, y = rounding_canonical(exact_a, noisy_b)
    y2, x2 = rounding_canonical(noisy_b, exact_a)
    assert np.array_equal(np.sort(np.r_[x, y]), np.sort(np.r_[x2, y2]))


def test_permutation_floor_by_enumeration():
    """The share of relabellings tied with the observed one on completely separated data:
    2/C(2n, n) for two samples of n (the swap of the samples), 1/C(n_a + n_b, n_a)
    otherwise, 2/2^m for m pairs (the full swap); checked by enumerating every labelling."""
    from itertools import combinations, product

    from kvstats.stats import energy_distance as _energy

    def energy_distance(X, Y):
        return _energy(X, Y).statistic

    rng = np.random.default_rng(8)
    for n_a, n_b in ((3, 3), (2, 4), (4, 4)):
        pooled = np.r_[rng.normal(0, 1, (n_a, 2)), rng.normal(9, 1, (n_b, 2))]
        obs = energy_distance(pooled[:n_a], pooled[n_a:])
        stats_ = [energy_distance(pooled[list(c)], np.delete(pooled, list(c), axis=0))
                  for c in combinations(range(n_a + n_b), n_a)]
        share = np.mean(np.asarray(stats_) >= obs * (1 - 1e-12))
        assert permutation_floor(n_a, n_b, paired=False) == pytest.approx(share, rel=1e-12)
    m = 5
    X, Y = rng.normal(0, 1, (m, 2)), rng.normal(9, 1, (m, 2))
    obs = energy_distance(X, Y)
    stats_ = []
    for s in product([False, True], repeat=m):
        s = np.array(s)[:, None]
        stats_.append(energy_distance(np.where(s, Y, X), np.where(s, X, Y)))
    share = np.mean(np.asarray(stats_) >= obs * (1 - 1e-12))
    assert permutation_floor(m, m, paired=True) == pytest.approx(share, rel=1e-12)
    assert permutation_floor(100, 100, paired=False) == 2 / math.comb(200, 100)


def _separated(n, seed, clusters=False):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 10.0, ("KQV", 3): 0.0, ("QKQV", 3): 10.0},
                   n=n, seed=seed)
    return f.assign(cluster=f["trial"]) if clusters else f


def test_paired_energy_test_limited_by_its_pairs_names_them_not_b():
    """6 pairs: no labelling beats 2/2^6 = 1/32, far above alpha/m: "at n = 6 pairs"."""
    t = compare_schemes(_separated(6, 9), [("KQV", "QKQV")], energy_resamples=99)
    e = t[t["test"] == "energy"]
    assert (e["min_attainable_p"] == 1 / 32).all() and not e["resolvable"].any()
    assert e["verdict"].str.startswith("not resolvable at n = 6 pairs (").all()
    # where B limits (a fixed B of 9 with 40 pairs), the verdict names B as before
    t = compare_schemes(_separated(40, 10), [("KQV", "QKQV")], energy_resamples=9,
                        energy_resolution="fixed")
    e = t[t["test"] == "energy"]
    assert e["verdict"].str.startswith("not resolvable at B = 9 (").all()


def test_two_sample_energy_test_of_four_units_is_limited_by_them():
    """4 vs 4 completely separated: the exact permutation p-value is 2/70 whatever B; a
    Monte Carlo p of 1/(1 + B) happens only by luck. With 2 energy tests and the other
    tests' p-values (KL only, 2 Mann–Whitney rows: 2/70 each), Holm needs p <= 0.05/4."""
    f = _separated(4, 11)
    verdicts = set()
    for seed in range(6):
        t = compare_schemes(f, [("KQV", "QKQV")], metrics=["kl"], pairing="none", ks=False,
                            energy_resamples=99, seed=seed)
        e = t[t["test"] == "energy"]
        assert np.allclose(e["min_attainable_p"], 2 / 70, rtol=1e-12, atol=0)
        quiet = e[~e["significant"]]
        assert not (quiet["verdict"] == NO_DIFFERENCE).any()
        verdicts.update(quiet["verdict"].str.split(" \\(").str[0])
    assert verdicts == {"not resolvable at n = 4 vs 4"}


def test_rank_equivalence_counts_values_equal_up_to_rounding_as_ties():
    """θ = P(a > b) + ½P(a = b) over all values: rounding that breaks the ties between a's
    and b's (discrete, heavily tied) recall means moved θ by about ½·P(tie), from 0.5 to
    0.45 here, onto the margin; as the sign test and Mann–Whitney, the rank TOST must see
    them as ties (θ exactly ½, the same test as on the unrounded values)."""
    rng = np.random.default_rng(11)
    a, hits = _recall_means(rng, 300)
    perm = rng.permuted(hits.reshape(300, -1), axis=1).reshape(hits.shape)
    b = (perm.mean(axis=-1) * (1.0 / 3)).sum(axis=-1)
    assert (a != b).sum() > 30            # the defect's precondition: rounding broke ties
    for pairing in ("trial", "none"):
        t = compare_schemes(_paired_frame(a, b), [("KQV", "QKQV")], metrics=["recall_at_5"],
                            energy=False, equivalence={"recall_at_5": 0.05},
                            equivalence_test="rank", pairing=pairing)
        ref = compare_schemes(_paired_frame(a, a), [("KQV", "QKQV")], metrics=["recall_at_5"],
                              energy=False, equivalence={"recall_at_5": 0.05},
                              equivalence_test="rank", pairing=pairing)
        row = t[t["test"] == "equivalence"].iloc[0]
        want = ref[ref["test"] == "equivalence"].iloc[0]
        assert row["effect"] == 0.5, (pairing, row["effect"])
        assert row["pvalue"] == pytest.approx(want["pvalue"], rel=1e-12)


def test_paired_energy_test_of_equal_profiles_is_not_resolvable():
    """Every within-pair swap of two equal profiles is the observed labelling: p = 1 is the
    only p-value the test can return, so the row says not resolvable, not "no significant
    difference"; one pair that differs beyond rounding restores the floor 2^(1−1) = 1, and
    m differing pairs 2^(1−m), whatever the number of equal pairs beside them."""
    base = make_frame({("KQV", 3.0): 0.0}, n=12, seed=2)
    a = base[base["scheme"] == "KQV"].reset_index(drop=True)
    same = pd.concat([a, a.assign(scheme="QKQV")], ignore_index=True)
    row = compare_schemes(same, [("KQV", "QKQV")], energy_resamples=99).query("test == 'energy'").iloc[0]
    assert row["min_attainable_p"] == 1.0 and not row["resolvable"]
    assert row["verdict"].startswith("not resolvable at n = 12 pairs")
    # rounding-level differences leave the profiles equal
    nudged = same.copy()
    q = nudged["scheme"] == "QKQV"
    nudged.loc[q, "phi_t"] = nudged.loc[q, "phi_t"] * (1 + 1e-15)
    row = compare_schemes(nudged, [("KQV", "QKQV")], energy_resamples=99).query("test == 'energy'").iloc[0]
    assert row["min_attainable_p"] == 1.0
    # 7 of the 12 pairs differ: the floor is 2^(1−7), not 2^(1−12)
    moved = same.copy()
    idx = moved.index[q][:7]
    moved.loc[idx, "phi_t"] = moved.loc[idx, "phi_t"] * 1.5
    row = compare_schemes(moved, [("KQV", "QKQV")], energy_resamples=9999).query("test == 'energy'").iloc[0]
    assert row["min_attainable_p"] == pytest.approx(2.0 ** -6)


def test_sparse_means_whose_bootstrap_interval_undercovers_are_flagged():
    """Bernoulli(0.01) x Exp(1), n = 100 (a KL or argmax shift rarely nonzero). Given an
    interval (>= 1 nonzero value), mean_ci's BCa interval (B = 999) covered the mean 0.881
    of 611 and 0.906 of 630 (two runs of 1,000 samples, 2026-12-02, docs/statistics.md); 300 here:
    the coverage must fall below the binomial 99% band of 0.95 (a check that the flag is
    needed, MC SE ~0.02 at 0.88) and every such sample is flagged (none was before)."""
    rng = np.random.default_rng(7)
    covered = shown = flagged = 0
    for r in range(300):
        x = (rng.random(100) < 0.01) * rng.exponential(size=100)
        mean, low, high = mean_ci(x, 0.95, 999, r)
        if low == high:
            assert not np.any(x) and ci_reliable(x)          # no interval, nothing to flag
            continue
        shown += 1
        covered += low <= 0.01 <= high
        flagged += not ci_reliable(x)
    lo_band = stats.binom.ppf(0.005, shown, 0.95) / shown
    assert covered / shown < lo_band and flagged == shown


def test_few_nonzero_flags_only_sparse_nonnegative_samples():
    rng = np.random.default_rng(3)
    sparse = np.r_[np.zeros(95), rng.exponential(size=MIN_NONZERO - 5)]
    assert few_nonzero(sparse) and not ci_reliable(sparse, rng.random(50))
    assert few_nonzero(np.r_[np.zeros(99), 0.25])                 # one value carries the mean
    assert few_nonzero(np.r_[np.zeros(90), rng.exponential(size=MIN_NONZERO - 1)])
    for x in (np.r_[np.zeros(90), rng.exponential(size=MIN_NONZERO)],   # enough nonzeros
              np.r_[np.zeros(97), np.ones(3)],                       # a proportion
              np.zeros(100),                                       # no interval to flag
              rng.exponential(size=5),                             # no zeros
              np.r_[-1.0, np.zeros(98), 2.0],                      # not nonnegative
              np.r_[np.zeros(98), 1.0, np.inf]):                   # not finite: no interval
        assert not few_nonzero(x)
    # proportions at n = 100 (an argmax shift at rate 0.01, 0.03): the bootstrap interval,
    # given one, covered 0.992 and 0.988 of 1,000 samples, and they are not flagged
    x = (rng.random(100) < 0.03).astype(float)
    assert ci_reliable(x)


def test_paired_ratio_equivalence_counts_values_equal_up_to_rounding_as_equal():
    """The paired TOST of mean(a)/mean(b): two schemes with the same value on every unit up
    to the last bits (a text's mean summed in another order) got a spread of ~1e-16, an
    interval as narrow, and "equivalent within δ" (p 0.006 here) where the identical values
    give "inconclusive" (p 0.30, a bound: identical_pairs). As the sign test and the rank
    TOST, a pair equal up to rounding is one value; a pair that differs keeps its values."""
    a = make_frame({("KQV", 2.0): 0.0}, n=10, seed=5)
    cols = ["pvalue", "effect", "effect_low", "effect_high", "identical_pairs", "verdict"]

    def tost(kl_b):
        f = pd.concat([a, a.assign(scheme="QKQV", kl=kl_b)], ignore_index=True)
        t = compare_schemes(f, [("KQV", "QKQV")], metrics=["kl"], energy=False,
                            equivalence={"kl": 0.1})
        return t[t["test"] == "equivalence"].reset_index(drop=True)[cols]

    kl = a["kl"].to_numpy()
    same = tost(kl)
    assert same.loc[0, "identical_pairs"] and same.loc[0, "verdict"] == "inconclusive"
    pd.testing.assert_frame_equal(tost(kl * (1 + 1e-15)), same, check_exact=True)
    # four pairs differ for real, six by rounding only: as if those six were exact (and the
    # four kept: not identical pairs)
    moved = kl * np.r_[np.full(4, 1.02), np.ones(6)]
    want = tost(moved)
    assert not want.loc[0, "identical_pairs"]
    pd.testing.assert_frame_equal(tost(moved * np.r_[np.ones(4), np.full(6, 1 + 1e-15)]), want,
                                  check_exact=True)
