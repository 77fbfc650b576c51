"""The paired design of compare_schemes (pairing="trial"): matching, errors, size and power.

Every scheme of a case sees the same trials, so the two samples of a comparison are
paired. Under a negative correlation of the paired values the two-sample Mann–Whitney
test rejects a true null far more often than its level; the signed-rank test on the
matched pairs keeps it. Reference sizes: the simulation below (ρ = −0.96, 30 pairs):
Mann–Whitney ≈ 0.17, signed-rank ≈ 0.04–0.05 (400 replicates, seed 1, measured when
this test was written).
"""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from kvstats._checks import replicate_scale
from kvstats.analysis import METRICS, aggregate_clusters, compare_schemes, find_crossovers
from kvstats.analysis.compare import LOCATION_TESTS, PAIRINGS
from kvstats.analysis.resolution import extreme_pvalue, not_resolvable_text, paired_differences
from kvstats.stats import wilcoxon_signed_rank

from _sweep_frames import clustered_frame, make_frame

PAIR = [("KQV", "QKQV")]


def _replicates(rng, reps, n, sign, shift, z_sd, e_sd):
    """``reps`` cases (dim = 8 + replicate) of two schemes on the same ``n`` trials:
    a = z + e, b = sign·z + e' + shift, every metric alike (corr(a, b) = sign·z²/(z² + e²))."""
    z = rng.normal(0, z_sd, (reps, n))
    parts = []
    for scheme, s, sh in (("KQV", 1.0, 0.0), ("QKQV", sign, shift)):
        v = (s * z + rng.normal(0, e_sd, (reps, n)) + sh).ravel()
        parts.append(pd.DataFrame({m: v for m in METRICS}).assign(
            distribution="gaussian", params="-", dim=8 + np.repeat(np.arange(reps), n),
            n_keys=128, budget=4.0, scheme=scheme, bits_nominal=4.0, bits_total=4.25,
            trial=np.tile(np.arange(n), reps)))
    return pd.concat(parts, ignore_index=True)


def _rejections(frame, pairing):
    """Unadjusted rejections at 0.05 of the location test, one per replicate (case)."""
    t = compare_schemes(frame, PAIR, metrics=["snr_k"], energy=False,
                        ks=False if pairing == "none" else None, pairing=pairing)
    assert set(t.test) == {LOCATION_TESTS[pairing]}
    return int((t.pvalue <= 0.05).sum()), len(t)


def test_pairings_and_location_tests():
    assert PAIRINGS == ("none", "trial")
    assert LOCATION_TESTS == {"none": "mann_whitney", "trial": "wilcoxon"}


def test_rows_are_the_signed_rank_test_on_the_trial_matched_pairs():
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.4}, n=30, seed=5)
    t = compare_schemes(f, PAIR, metrics=["kl", "snr_k"], energy=False, pairing="trial")
    assert t.attrs["pairing"] == "trial" and set(t.test) == {"wilcoxon"}   # no KS under pairing
    a, b = (f[f.scheme == s].set_index("trial").sort_index() for s in ("KQV", "QKQV"))
    for metric in ("kl", "snr_k"):
        ref = wilcoxon_signed_rank(a[metric].to_numpy(), b[metric].to_numpy())
        row = t.set_index("metric").loc[metric]
        assert (row.statistic, row.pvalue, row.effect, row.effect_low, row.effect_high) == (
            ref.statistic, ref.pvalue, ref.rank_biserial, ref.rank_biserial_low,
            ref.rank_biserial_high)
        assert row.n_a == row.n_b == 30 and "30 nonzero of 30" in row.note
    # rows in another order (each scheme's trials shuffled) pair the same trials
    shuffled = f.sample(frac=1.0, random_state=3)
    again = compare_schemes(shuffled, PAIR, metrics=["kl", "snr_k"], energy=False, pairing="trial")
    cols = ["statistic", "pvalue", "effect", "effect_low", "effect_high", "min_attainable_p"]
    pd.testing.assert_frame_equal(again[cols], t[cols])
    # pairing by row position instead would give another statistic: the matching matters
    pos = wilcoxon_signed_rank(shuffled[shuffled.scheme == "KQV"]["kl"].to_numpy(),
                               shuffled[shuffled.scheme == "QKQV"]["kl"].to_numpy())
    assert pos.statistic != t.set_index("metric").loc["kl", "statistic"]


def test_matching_uses_the_cluster_when_the_frame_has_it():
    g = aggregate_clusters(clustered_frame(n_texts=12, per_text=10, seed=4))
    g = g[g.budget == 2.0]
    b = g.scheme == "QKQV"
    g.loc[b, "kl"] = g.loc[b, "kl"] * 1.5            # a clear paired effect
    # b's trial labels scrambled (its cluster labels kept): only the cluster can pair them
    g.loc[b, "trial"] = g.loc[b, "trial"].to_numpy()[::-1]
    g = g.sample(frac=1.0, random_state=1)
    t = compare_schemes(g, PAIR, metrics=["kl"], energy=False, pairing="trial")
    a_, b_ = (g[g.scheme == s].set_index("cluster").sort_index()["kl"] for s in ("KQV", "QKQV"))
    ref = wilcoxon_signed_rank(a_.to_numpy(), b_.to_numpy())
    assert t.loc[0, "statistic"] == ref.statistic and t.loc[0, "pvalue"] == ref.pvalue
    assert t.loc[0, "n_a"] == 12 and ref.rank_biserial == -1.0   # every text: a's KL smaller
    assert t.loc[0, "winner"] == "KQV"                              # lower KL is better


def test_units_that_do_not_match_one_to_one_are_an_error_naming_them():
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.0}, n=10, seed=6)
    missing = f.drop(index=f.index[(f.scheme == "QKQV") & (f.trial == 7)])
    with pytest.raises(ValueError, match=r"KQV and QKQV one-to-one on 'trial', but at "
                                         r"distribution = gaussian, params = -, dim = 64, "
                                         r"n_keys = 128, budget 4: trial 7 only in KQV's rows"):
        compare_schemes(missing, PAIR, energy=False, pairing="trial")
    twice = f.copy()
    twice.loc[(twice.scheme == "QKQV") & (twice.trial == 3), "trial"] = 2
    with pytest.raises(ValueError, match=r"trial 2 more than once in QKQV's rows; trial 3 only "
                                         r"in KQV's rows"):
        compare_schemes(twice, PAIR, energy=False, pairing="trial")
    # a clustered real frame not aggregated: its trials share clusters, said with the remedy
    raw = clustered_frame(n_texts=4, per_text=3)
    with pytest.raises(ValueError, match=r"on 'cluster'.*cluster 0, 1, 2, 3 more than once in "
                                         r"KQV's rows.*aggregate_clusters"):
        compare_schemes(raw, PAIR, energy=False, pairing="trial")
    # the unpaired design never needed a matching: the same frames pass
    assert len(compare_schemes(missing, PAIR, energy=False))
    with pytest.raises(ValueError, match=r"pairing must be one of \['none', 'trial'\]; received 'pairs'"):
        compare_schemes(f, PAIR, pairing="pairs")
    with pytest.raises(ValueError, match="ks=True needs pairing='none'"):
        compare_schemes(f, PAIR, pairing="trial", ks=True)


def test_none_is_the_unpaired_table_as_before():
    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.3, ("KQV", 4): 0.0, ("QKQV", 4): 0.3}, n=20)
    default = compare_schemes(f, PAIR, energy_resamples=99, equivalence={"kl": 0.2})
    none = compare_schemes(f, PAIR, energy_resamples=99, equivalence={"kl": 0.2}, pairing="none")
    assert default.equals(none) and none.attrs["pairing"] == "none"
    assert set(none.test) == {"mann_whitney", "ks", "energy", "equivalence"}
    assert "paired" not in " ".join(none[none.test == "equivalence"].note)
    assert compare_schemes(f, PAIR, energy=False, ks=False).test.eq("mann_whitney").all()


def test_negative_correlation_inflates_mann_whitney_and_the_paired_design_holds_its_size():
    """400 null replicates, 30 pairs with ρ = −0.96: Mann–Whitney rejects above the
    binomial(400, 0.05) 99.9% band; the signed-rank test stays inside its two-sided band."""
    f = _replicates(np.random.default_rng(1), 400, 30, sign=-1.0, shift=0.0, z_sd=1.0, e_sd=0.2)
    band = sps.binom.ppf([0.001, 0.999], 400, 0.05)
    unpaired, n = _rejections(f, "none")
    paired, _ = _rejections(f, "trial")
    assert n == 400
    assert unpaired > band[1]                      # measured 69 (0.17)
    assert band[0] <= paired <= band[1]            # measured 16 (0.04)


def test_power_under_a_paired_shift():
    """A shift of 0.3 on trials whose values spread with sd 3 (ρ ≈ 0.99): the paired test
    rejects in nearly every replicate (measured 0.98), the two-sample test almost never."""
    f = _replicates(np.random.default_rng(2), 200, 30, sign=1.0, shift=0.3, z_sd=3.0, e_sd=0.3)
    paired, n = _rejections(f, "trial")
    unpaired, _ = _rejections(f, "none")
    assert paired >= sps.binom.ppf(0.001, n, 0.9)
    assert unpaired <= sps.binom.ppf(0.999, n, 0.05)
    t = compare_schemes(f[f.dim == 8], PAIR, metrics=["snr_k", "kl"], energy=False, pairing="trial")
    row = t.set_index("metric")
    assert (row.effect < 0).all()                  # b = a + 0.3: a's values smaller, r < 0
    assert row.loc["snr_k", "winner"] == "QKQV" and row.loc["kl", "winner"] == "KQV"


@pytest.mark.slow
def test_paired_design_size_at_scale():
    """As above with 2,000 (ci) / 10,000 (full) replicates and 12 pairs (exact signed-rank
    null): its size within the binomial 99.9% band of its attainable level. Reference:
    with 12 untied nonzero differences the two-sided exact test rejects at p <= 0.05 with
    probability P(V <= 13 or V >= 65) = 0.0425 (psignrank(13, 12) * 2 in R)."""
    reps = 2000 if replicate_scale() == "ci" else 10000
    f = _replicates(np.random.default_rng(7), reps, 12, sign=-1.0, shift=0.0, z_sd=1.0, e_sd=0.2)
    paired, n = _rejections(f, "trial")
    # the exact null of V for 12 untied ranks, counted here: P(V <= 13) doubled (symmetric)
    counts = np.zeros(79)
    counts[0] = 1
    for r in range(1, 13):
        counts[r:] = counts[r:] + counts[:-r].copy()
    level = 2 * counts[:14].sum() / 2**12
    assert level == pytest.approx(0.0425, abs=5e-4)
    lo, hi = sps.binom.ppf([0.0005, 0.9995], n, level)
    assert lo <= paired <= hi
    unpaired, _ = _rejections(f, "none")
    assert unpaired > sps.binom.ppf(0.9995, n, 0.05)


def test_extreme_pvalue_of_the_signed_rank_test():
    # untied, no zeros, fewer than 50 pairs: exact, every difference of one sign: 2 / 2^n
    x, y = np.arange(1.0, 8.0), np.array([0, 0, 0, 0, 0, 0, 20.0])   # d = 1..6, -13
    assert extreme_pvalue("wilcoxon", x, y) == pytest.approx(2 / 2**7, abs=0, rel=1e-15)
    # in general: the test itself on |d| all positive (ties and zeros as on the row)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, 80).astype(float), rng.integers(0, 4, 80).astype(float)
    d = np.abs(x - y)
    assert extreme_pvalue("wilcoxon", x, y) == wilcoxon_signed_rank(d, np.zeros(80)).pvalue
    assert extreme_pvalue("wilcoxon", x, y) <= wilcoxon_signed_rank(x, y).pvalue
    assert extreme_pvalue("wilcoxon", [1.0, 2.0], [1.0, 2.0]) == 1.0     # all pairs tied
    with pytest.raises(ValueError, match="paired"):
        extreme_pvalue("wilcoxon", [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="'mann_whitney', 'ks' or 'wilcoxon'"):
        extreme_pvalue("sign", [1.0], [2.0])
    assert not_resolvable_text("wilcoxon", 0, 5, 5, 0.5) == \
        "not resolvable at n = 5 pairs (smallest attainable adjusted p 0.5)"


def test_few_pairs_are_not_resolvable_and_said_so():
    """5 pairs: the most extreme signs give p = 2/32 = 0.0625 > 0.05 even alone (Holm over the
    9 metrics: 0.5625)."""
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 5.0}, n=5, seed=8)
    t = compare_schemes(f, PAIR, energy=False, pairing="trial")
    assert (t.min_attainable_p == 0.0625).all() and not t.resolvable.any()
    assert set(t.verdict) == {"not resolvable at n = 5 pairs (smallest attainable adjusted p 0.562)"}
    assert set(t.winner) == set(t.verdict)


def test_infinite_values_pair_as_ties_or_as_the_largest_differences():
    inf = np.inf
    assert paired_differences([1.0, inf, inf, 2.0], [3.0, inf, 0.0, -inf]).tolist() == [-2, 0, 5, 5]
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.0}, n=12, seed=9)
    a, b = f.scheme == "KQV", f.scheme == "QKQV"
    f.loc[a & (f.trial < 2), "snr_k"] = inf            # both exact at trials 0, 1: zero differences
    f.loc[b & (f.trial < 2), "snr_k"] = inf
    f.loc[a & (f.trial == 2), "snr_k"] = inf           # only a exact at trial 2: a's largest win
    t = compare_schemes(f, PAIR, metrics=["snr_k"], energy=False, pairing="trial")
    x, y = (f[s].set_index("trial").sort_index()["snr_k"].to_numpy() for s in (a, b))
    d = np.where(np.isinf(x) & np.isinf(y), 0.0, x - np.where(np.isinf(y), 0.0, y))
    d[2] = 1e6                                         # any value larger than every finite |d|
    ref = wilcoxon_signed_rank(d, np.zeros(12))
    assert (t.loc[0, "statistic"], t.loc[0, "pvalue"], t.loc[0, "effect"]) == (
        ref.statistic, ref.pvalue, ref.rank_biserial)
    assert ref.n_nonzero == 10 and "10 nonzero of 12" in t.loc[0, "note"]


def test_paired_equivalence_and_crossovers():
    from kvstats.stats.equivalence import tost_ratio

    f = make_frame({("KQV", 2): 1.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 1.0}, n=40, seed=3)
    t = compare_schemes(f, PAIR, metrics=["kl"], energy=False, equivalence={"kl": 0.1},
                        pairing="trial")
    eq = t[t.test == "equivalence"].set_index("budget")
    a, b = (f[(f.scheme == s) & (f.budget == 2)].set_index("trial").sort_index()["kl"].to_numpy()
            for s in ("KQV", "QKQV"))
    ref = tost_ratio(a, b, margin=0.1, alpha=0.05, paired=True)
    assert eq.loc[2.0, "pvalue"] == ref.pvalue and "paired" in eq.loc[2.0, "note"]
    assert eq.loc[2.0, "verdict"] == "different"      # the Wilcoxon row rejects, the TOST does not
    c = find_crossovers(t)
    assert len(c) == 1 and c.loc[0, "winners"] == "2:QKQV, 3:KQV" and c.loc[0, "crossover"]


def test_paired_energy_rows_swap_within_pairs():
    from kvstats.analysis import PROFILE_METRICS
    from kvstats.stats.sequential import energy_test_sequential

    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.5}, n=25, seed=10).sample(frac=1.0, random_state=2)
    t = compare_schemes(f, PAIR, metrics=["kl"], energy_resamples=199, energy_resolution="fixed",
                        seed=4, pairing="trial")
    row = t[t.test == "energy"].iloc[0]
    X, Y = (f[f.scheme == s].set_index("trial").sort_index()[list(PROFILE_METRICS)].to_numpy()
            for s in ("KQV", "QKQV"))
    ref = energy_test_sequential(X, Y, max_permutations=199, h=10, seed=4, standardize=True,
                                 paired=True)
    assert (row.statistic, row.pvalue, row.n_permutations, row.min_attainable_p) == (
        ref.statistic, ref.pvalue, ref.n_permutations, ref.min_attainable_p)
    assert "within-pair swaps" in row.note
    unpaired = compare_schemes(f, PAIR, metrics=["kl"], energy_resamples=199,
                               energy_resolution="fixed", seed=4)
    assert "within-pair" not in unpaired[unpaired.test == "energy"].iloc[0].note
    # 4 pairs: 2^4 swap patterns, half of them mirror images: p >= 2^-3 whatever B
    g = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 5.0}, n=4, seed=11)
    e = compare_schemes(g, PAIR, metrics=["kl"], energy_resamples=999, energy_resolution="fixed",
                        pairing="trial").query("test == 'energy'").iloc[0]
    assert e.min_attainable_p == 0.125 and not e.resolvable and e.verdict.startswith("not resolvable")


@pytest.mark.slow
def test_paired_energy_test_holds_its_size_under_negative_correlation():
    """Null replicates (300 ci / 1,500 full), 20 pairs, ρ = −0.96 in every profile metric,
    B = 99 fixed: the within-pair swap test rejects at p <= 0.05 within the binomial 99.9%
    band of 0.05 (its p-values are (1 + #exceed)/(1 + B): P(p <= 0.05) = 5/100 exactly
    under exchangeability); the freely relabelled test above that band."""
    reps = 300 if replicate_scale() == "ci" else 1500
    f = _replicates(np.random.default_rng(12), reps, 20, sign=-1.0, shift=0.0, z_sd=1.0, e_sd=0.2)
    t = compare_schemes(f, PAIR, metrics=["kl"], energy_resamples=99, energy_resolution="fixed",
                        energy_stop=1000, pairing="trial")
    e = t[t.test == "energy"]
    assert len(e) == reps
    lo, hi = sps.binom.ppf([0.0005, 0.9995], reps, 0.05)
    assert lo <= int((e.pvalue <= 0.05).sum()) <= hi              # measured 17 of 300
    # free relabelling (the unpaired design) ignores the negative correlation: too many
    t = compare_schemes(f, PAIR, metrics=["kl"], ks=False, energy_resamples=99,
                        energy_resolution="fixed", energy_stop=1000)
    e = t[t.test == "energy"]
    assert int((e.pvalue <= 0.05).sum()) > hi                     # measured 42 of 300
