"""The paired design of compare_schemes (pairing="trial"): matching, errors, size and power.

Every scheme of a case sees the same trials, so the two samples of a comparison are
paired. Under a negative correlation of the paired values the two-sample Mann–Whitney
test rejects a true null far more often than its level; the sign test on the matched
pairs keeps it. Reference sizes: the simulation below (ρ = −0.96, 30 pairs):
Mann–Whitney ≈ 0.17 (400 replicates, seed 1); the sign test's exact attainable level
at 30 pairs is 0.0428 = 2·P(Bin(30, ½) ≤ 9), computed in the tests. Its winner is the
scheme better on more pairs, which on skewed differences need not be the signed-rank
test's (test_skewed_differences_...).
"""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from kvstats._checks import replicate_scale
from kvstats.analysis import METRICS, aggregate_clusters, compare_schemes, find_crossovers
from kvstats.analysis.compare import LOCATION_TESTS, PAIRINGS
from kvstats.analysis.resolution import extreme_pvalue, not_resolvable_text
from kvstats.stats import sign_test, wilcoxon_signed_rank

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


def _two_sided_level(n, alpha=0.05, theta=0.5):
    """P(the exact two-sided sign test on n nonzero differences rejects at ``alpha``) when
    P(a > b) = ``theta``: its attainable level at theta = ½, its power otherwise."""
    k = np.arange(n + 1)
    p = np.minimum(1.0, 2 * np.minimum(sps.binom.cdf(k, n, 0.5), sps.binom.sf(k - 1, n, 0.5)))
    return float(sps.binom.pmf(k, n, theta)[p <= alpha].sum())


def test_pairings_and_location_tests():
    assert PAIRINGS == ("none", "trial")
    assert LOCATION_TESTS == {"none": "mann_whitney", "trial": "sign"}
    # the reference levels used below, from the binomial (R: 2 * pbinom(9, 30, 0.5))
    assert _two_sided_level(30) == pytest.approx(0.042774, abs=1e-6)
    assert _two_sided_level(12) == pytest.approx(158 / 4096, rel=1e-12)   # P(X <= 2) doubled


def test_rows_are_the_sign_test_on_the_trial_matched_pairs():
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.4}, n=30, seed=5)
    t = compare_schemes(f, PAIR, metrics=["kl", "snr_k"], energy=False, pairing="trial")
    assert t.attrs["pairing"] == "trial" and set(t.test) == {"sign"}   # no KS under pairing
    a, b = (f[f.scheme == s].set_index("trial").sort_index() for s in ("KQV", "QKQV"))
    for metric in ("kl", "snr_k"):
        ref = sign_test(a[metric].to_numpy(), b[metric].to_numpy())
        row = t.set_index("metric").loc[metric]
        assert (row.statistic, row.pvalue, row.effect, row.effect_low, row.effect_high) == (
            ref.n_positive, ref.pvalue, ref.dominance, ref.dominance_low, ref.dominance_high)
        assert row.n_a == row.n_b == 30
        assert row.note == (f"sign test, 30 nonzero of 30 paired differences "
                            f"({ref.n_positive} a > b, {ref.n_negative} a < b)")
    # rows in another order (each scheme's trials shuffled) pair the same trials
    shuffled = f.sample(frac=1.0, random_state=3)
    again = compare_schemes(shuffled, PAIR, metrics=["kl", "snr_k"], energy=False, pairing="trial")
    cols = ["statistic", "pvalue", "effect", "effect_low", "effect_high", "min_attainable_p"]
    pd.testing.assert_frame_equal(again[cols], t[cols])
    # pairing by row position instead would give another statistic: the matching matters
    pos = sign_test(shuffled[shuffled.scheme == "KQV"]["kl"].to_numpy(),
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
    ref = sign_test(a_.to_numpy(), b_.to_numpy())
    assert t.loc[0, "statistic"] == ref.statistic == 0 and t.loc[0, "pvalue"] == ref.pvalue
    assert t.loc[0, "n_a"] == 12 and t.loc[0, "effect"] == -1.0   # every text: a's KL smaller
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
    assert len(compare_schemes(missing, PAIR, energy=False, pairing="none"))
    with pytest.raises(ValueError, match=r"pairing must be one of \['none', 'trial'\]; received 'pairs'"):
        compare_schemes(f, PAIR, pairing="pairs")
    with pytest.raises(ValueError, match="ks=True needs pairing='none'"):
        compare_schemes(f, PAIR, pairing="trial", ks=True)


def test_trial_is_the_default_and_none_the_unpaired_table_as_before():
    # the default is the report's design ([report] pairing = "trial"); "none" is the
    # two-sample table that was the default before 2026-12-01
    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.3, ("KQV", 4): 0.0, ("QKQV", 4): 0.3}, n=20)
    default = compare_schemes(f, PAIR, energy_resamples=99, equivalence={"kl": 0.2})
    trial = compare_schemes(f, PAIR, energy_resamples=99, equivalence={"kl": 0.2}, pairing="trial")
    assert default.equals(trial) and default.attrs["pairing"] == "trial"
    assert set(default.test) == {"sign", "energy", "equivalence"}
    none = compare_schemes(f, PAIR, energy_resamples=99, equivalence={"kl": 0.2}, pairing="none")
    assert none.attrs["pairing"] == "none"
    assert set(none.test) == {"mann_whitney", "ks", "energy", "equivalence"}
    assert "paired" not in " ".join(none[none.test == "equivalence"].note)
    assert compare_schemes(f, PAIR, energy=False, ks=False, pairing="none").test.eq("mann_whitney").all()


def test_negative_correlation_inflates_mann_whitney_and_the_paired_design_holds_its_size():
    """400 null replicates, 30 pairs with ρ = −0.96: Mann–Whitney rejects above the
    binomial(400, 0.05) 99.9% band; the sign test stays inside the two-sided 99.8% band
    of its exact attainable level 0.0428."""
    f = _replicates(np.random.default_rng(1), 400, 30, sign=-1.0, shift=0.0, z_sd=1.0, e_sd=0.2)
    band = sps.binom.ppf([0.001, 0.999], 400, _two_sided_level(30))
    unpaired, n = _rejections(f, "none")
    paired, _ = _rejections(f, "trial")
    assert n == 400
    assert unpaired > sps.binom.ppf(0.999, 400, 0.05)   # measured 69 (0.17)
    assert band[0] <= paired <= band[1]                 # measured 13 (0.033)


def test_power_under_a_paired_shift():
    """A shift of 0.3 on trials whose values spread with sd 3 (ρ ≈ 0.99): the difference
    a − b = e − e' − 0.3 is negative with probability θ = Φ(0.3/(0.3√2)) = 0.760, so the
    sign test's exact power at 30 pairs is P(Bin(30, 0.240) ≤ 9) = 0.84 (computed below);
    its rejections fall in the 99.8% binomial band of that power, the two-sample test's
    at most at its level."""
    f = _replicates(np.random.default_rng(2), 200, 30, sign=1.0, shift=0.3, z_sd=3.0, e_sd=0.3)
    paired, n = _rejections(f, "trial")
    unpaired, _ = _rejections(f, "none")
    power = _two_sided_level(30, theta=sps.norm.cdf(-0.3 / (0.3 * np.sqrt(2))))
    assert power == pytest.approx(0.839, abs=0.001)
    lo, hi = sps.binom.ppf([0.001, 0.999], n, power)
    assert lo <= paired <= hi                      # measured 166 of 200 (0.83)
    assert unpaired <= sps.binom.ppf(0.999, n, 0.05)
    # the winner of a rejecting replicate (the metrics hold the same values; SNR: higher is better)
    dim = compare_schemes(f, PAIR, metrics=["kl"], energy=False, pairing="trial") \
        .sort_values("pvalue").dim.iloc[0]
    t = compare_schemes(f[f.dim == dim], PAIR, metrics=["snr_k", "kl"], energy=False, pairing="trial")
    row = t.set_index("metric")
    assert (row.effect < 0).all()                  # b = a + 0.3: a's values smaller, dominance < 0
    assert row.loc["snr_k", "winner"] == "QKQV" and row.loc["kl", "winner"] == "KQV"


def _skewed(rng, reps, n, p_a):
    """``reps`` cases of ``n`` pairs: with probability ``p_a`` a pair hugely favours KQV
    (its KL 10–20 lower), otherwise it slightly favours QKQV (its KL 0–1 lower)."""
    base = rng.normal(30.0, 1.0, (reps, n))
    a_wins = rng.random((reps, n)) < p_a
    d = np.where(a_wins, -rng.uniform(10.0, 20.0, (reps, n)), rng.uniform(0.0, 1.0, (reps, n)))
    parts = [pd.DataFrame({m: v.ravel() for m in METRICS}).assign(
        distribution="gaussian", params="-", dim=8 + np.repeat(np.arange(reps), n), n_keys=128,
        budget=4.0, scheme=scheme, bits_nominal=4.0, bits_total=4.25, trial=np.tile(np.arange(n), reps))
        for scheme, v in (("KQV", base + d), ("QKQV", base))]
    return pd.concat(parts, ignore_index=True), d


def test_skewed_differences_the_winner_is_better_on_more_pairs():
    """Most pairs slightly favour b (QKQV: lower KL), a few pairs hugely favour a (KQV).
    The sign test's winner is b, the scheme better on more trials; the Wilcoxon signed-rank
    test on the same pairs (computed here) points to a, because a's few wins hold the
    largest ranks of |a − b| (they need only a share above 1 − 1/√2 = 0.29 of the pairs
    to outweigh the rest), and so does the mean.

    One fixed case first (120 of 200 pairs favour b: dominance +0.2, exact p 0.0057; the
    80 others hold the top ranks, T− = 12,840 > T+ = 7,260), then 100 replicates with
    P(a wins a pair) = 0.38, 400 pairs: the sign test's exact power (two-sided, 0.05) to
    name b is P(reject | Bin(400, 0.62)) ≈ 0.998, and its rejections lie in the 99.8%
    binomial band of that power; the signed-rank test names a in each replicate where it
    rejects (expected z ≈ −4)."""
    rng = np.random.default_rng(31)
    f, _ = _skewed(rng, 1, 200, 0.0)
    d = np.where(np.arange(200) % 5 < 2, -10.0 - np.arange(200) / 20, np.arange(200) / 400 + 0.01)
    f.loc[f.scheme == "KQV", "kl"] = f.loc[f.scheme == "QKQV", "kl"].to_numpy() + d
    row = compare_schemes(f, PAIR, metrics=["kl"], energy=False, pairing="trial").iloc[0]
    assert (row.n_a, row.statistic, row.effect) == (200, 120, pytest.approx(0.2))
    assert row.pvalue == pytest.approx(2 * sps.binom.sf(119, 200, 0.5), rel=1e-12)
    assert row.significant and row.winner == "QKQV"               # lower KL on 120 of 200 trials
    a, b = (f[f.scheme == s]["kl"].to_numpy() for s in ("KQV", "QKQV"))
    wsr = wilcoxon_signed_rank(a, b)
    assert wsr.pvalue < 0.05 and wsr.rank_biserial == pytest.approx((7260 - 12840) / 20100)
    assert a.mean() < b.mean()                                     # the mean, too, says KQV

    reps, n, p_a = 100, 400, 0.38
    f, d = _skewed(rng, reps, n, p_a)
    t = compare_schemes(f, PAIR, metrics=["kl"], energy=False, pairing="trial")
    assert len(t) == reps and set(t.test) == {"sign"}
    named_b = int(((t.pvalue <= 0.05) & (t.effect > 0)).sum())
    power = _two_sided_level(n, theta=1 - p_a)
    lo, hi = sps.binom.ppf([0.001, 0.999], reps, power)
    assert lo <= named_b <= hi and not ((t.pvalue <= 0.05) & (t.effect < 0)).any()
    signed = [wilcoxon_signed_rank(d[i], np.zeros(n)) for i in range(reps)]
    rejected = [r for r in signed if r.pvalue <= 0.05]
    assert len(rejected) >= sps.binom.ppf(0.001, reps, 0.9)        # it rejects, the other way
    assert all(r.rank_biserial < 0 for r in rejected)


@pytest.mark.slow
def test_paired_design_size_at_scale():
    """As above with 2,000 (ci) / 10,000 (full) replicates and 12 pairs (exact binomial
    null): the sign test's size within the binomial 99.9% band of its attainable level.
    Reference: with 12 nonzero differences the two-sided exact test rejects at p <= 0.05
    when n+ <= 2 or n+ >= 10, with probability 2·(1 + 12 + 66)/2^12 = 0.0386
    (2 * pbinom(2, 12, 0.5) in R). The band needs the replicates (±0.014 at 2,000); Mann–
    Whitney's inflation does not: its rate, 0.15 on 1,000 replicates, lies 4.7 Monte Carlo
    sd (0.015 at 600) above the edge 49/600 = 0.082 of the band on the first 600 (0.175
    there); 2,000 gave 11 sd and took 60% of the test's time."""
    reps = 2000 if replicate_scale() == "ci" else 10000
    f = _replicates(np.random.default_rng(7), reps, 12, sign=-1.0, shift=0.0, z_sd=1.0, e_sd=0.2)
    paired, n = _rejections(f, "trial")
    level = 2 * (1 + 12 + 66) / 2**12
    assert level == pytest.approx(_two_sided_level(12), rel=1e-12)
    lo, hi = sps.binom.ppf([0.0005, 0.9995], n, level)
    assert lo <= paired <= hi
    unpaired, n = _rejections(f[f.dim < 8 + 600], "none")
    assert n == 600 and unpaired > sps.binom.ppf(0.9995, n, 0.05)


def test_extreme_pvalue_of_the_sign_test():
    # k nonzero differences all of one sign: the exact two-sided binomial p, 2 / 2^k
    x, y = np.arange(1.0, 9.0), np.array([0, 0, 0, 0, 0, 0, 20.0, 8.0])   # d = 1..6, -13, 0
    assert extreme_pvalue("sign", x, y) == 2 / 2**7
    # in general: the sign test itself on |d| (zeros dropped as on the row), for every k
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 80, 1200):
        x, y = rng.integers(0, 4, n).astype(float), rng.integers(0, 4, n).astype(float)
        d = np.abs(x - y)
        assert extreme_pvalue("sign", x, y) == pytest.approx(sign_test(d, np.zeros(n)).pvalue,
                                                             rel=1e-12, abs=1e-300)
        assert extreme_pvalue("sign", x, y) <= sign_test(x, y).pvalue
    assert extreme_pvalue("sign", [1.0], [2.0]) == 1.0                # one difference: 2/2 = 1
    assert extreme_pvalue("sign", [1.0, 2.0], [1.0, 2.0]) == 1.0      # all pairs tied
    assert extreme_pvalue("sign", [np.inf, 1.0], [np.inf, 0.0]) == 1.0   # inf = inf is a tie
    with pytest.raises(ValueError, match="paired"):
        extreme_pvalue("sign", [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        extreme_pvalue("sign", [1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="'mann_whitney', 'ks' or 'sign'"):
        extreme_pvalue("wilcoxon", [1.0], [2.0])                     # not the report's test
    assert not_resolvable_text("sign", 0, 5, 5, 0.5) == \
        "not resolvable at n = 5 pairs (smallest attainable adjusted p 0.5)"


def test_few_pairs_are_not_resolvable_and_said_so():
    """5 pairs: the most extreme signs give p = 2/32 = 0.0625 > 0.05 even alone (Holm over the
    9 metrics: 0.5625)."""
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 5.0}, n=5, seed=8)
    t = compare_schemes(f, PAIR, energy=False, pairing="trial")
    assert (t.min_attainable_p == 0.0625).all() and not t.resolvable.any()
    assert set(t.verdict) == {"not resolvable at n = 5 pairs (smallest attainable adjusted p 0.562): all 5 pairs "
                              "differ: the limit is the number of pairs, 5, itself"}
    assert set(t.winner) == set(t.verdict)


def test_infinite_values_pair_as_ties_or_by_their_sign():
    inf = np.inf
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.0}, n=12, seed=9)
    a, b = f.scheme == "KQV", f.scheme == "QKQV"
    f.loc[a & (f.trial < 2), "snr_k"] = inf            # both exact at trials 0, 1: zero differences
    f.loc[b & (f.trial < 2), "snr_k"] = inf
    f.loc[a & (f.trial == 2), "snr_k"] = inf           # only a exact at trial 2: a's largest win
    t = compare_schemes(f, PAIR, metrics=["snr_k"], energy=False, pairing="trial")
    x, y = (f[s].set_index("trial").sort_index()["snr_k"].to_numpy() for s in (a, b))
    # hand-made signs: trials 0, 1 tie (inf = inf), trial 2 is a's win, the rest finite
    d = np.zeros(12)
    d[2], d[3:] = 1.0, x[3:] - y[3:]
    ref = sign_test(d, np.zeros(12))
    assert (t.loc[0, "statistic"], t.loc[0, "pvalue"], t.loc[0, "effect"]) == (
        ref.statistic, ref.pvalue, ref.dominance)
    assert ref.n_nonzero == 10 and "10 nonzero of 12" in t.loc[0, "note"]
    assert t.loc[0, "min_attainable_p"] == 2 / 2**10


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
    assert eq.loc[2.0, "verdict"] == "different"      # the sign row rejects, the TOST does not
    c = find_crossovers(t)
    assert len(c) == 1 and c.loc[0, "winners"] == "n = 2: QKQV; n = 3: KQV" and c.loc[0, "crossover"]


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
                               energy_resolution="fixed", seed=4, pairing="none")
    assert "within-pair" not in unpaired[unpaired.test == "energy"].iloc[0].note
    # 4 pairs: 2^4 swap patterns, half of them mirror images: p >= 2^-3 whatever B
    g = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 5.0}, n=4, seed=11)
    e = compare_schemes(g, PAIR, metrics=["kl"], energy_resamples=999, energy_resolution="fixed",
                        pairing="trial").query("test == 'energy'").iloc[0]
    assert e.min_attainable_p == 0.125 and not e.resolvable and e.verdict.startswith("not resolvable")


@pytest.mark.slow
def test_paired_energy_test_holds_its_size_under_negative_correlation():
    """Null replicates (300 ci / 1,500 full), 20 pairs, ρ = −0.96 in every profile metric,
    B = 99 fixed (unused: 20 pairs are enumerated exactly): the within-pair swap test rejects
    at p <= 0.05 within the binomial 99.9% band of 0.05 (exact at 20 pairs: P(p <= 0.05) <=
    0.05 under exchangeability, about 0.05 for continuous data); the freely relabelled test
    above that band."""
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
                        energy_resolution="fixed", energy_stop=1000, pairing="none")
    e = t[t.test == "energy"]
    assert int((e.pvalue <= 0.05).sum()) > hi                     # measured 42 of 300


def test_n_informative_is_the_sign_tests_count_of_pairs_that_differ():
    """``n_informative``: the nonzero differences of a sign row (its resolution's count),
    the pairs whose profiles differ on a paired energy row, NaN on the other rows (an
    unpaired energy row's 0, all pooled points one: test_degenerate_resolution.py);
    min_attainable_p as extreme_pvalue recounts it."""
    from kvstats.analysis.compare import _COLUMNS

    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 0.3}, n=20, seed=6)
    f["argmax_shift"] = 0.0
    f.loc[(f.scheme == "KQV") & (f.trial < 4), "argmax_shift"] = 1.0       # 4 of 20 pairs differ
    f.loc[(f.scheme == "QKQV") & (f.trial == 0), "argmax_shift"] = 1.0     # ... but pair 0 ties
    t = compare_schemes(f, PAIR, metrics=["kl", "argmax_shift"], energy_resamples=19,
                        equivalence={"kl": 0.5}, pairing="trial")
    a, b = (f[f.scheme == s].set_index("trial").sort_index() for s in ("KQV", "QKQV"))
    sign = t[t.test == "sign"].set_index("metric")
    for metric in ("kl", "argmax_shift"):
        x, y = a[metric].to_numpy(), b[metric].to_numpy()
        k = int(np.count_nonzero(x != y))
        assert sign.loc[metric, "n_informative"] == k == sign_test(x, y).n_nonzero
        assert f" {k} nonzero of 20 " in sign.loc[metric, "note"]
        assert sign.loc[metric, "min_attainable_p"] == extreme_pvalue("sign", x, y)
    assert sign.loc["argmax_shift", "n_informative"] == 3
    assert set(t.test) == {"sign", "energy", "equivalence"}
    # the paired energy row counts the pairs whose 6D profiles differ (all 20 here)
    assert t.loc[t.test == "equivalence", "n_informative"].isna().all()
    assert (t.loc[t.test == "energy", "n_informative"] == 20).all()
    unpaired = compare_schemes(f, PAIR, metrics=["kl"], energy_resamples=19, pairing="none")
    assert set(unpaired.test) == {"mann_whitney", "ks", "energy"}
    assert unpaired["n_informative"].isna().all()
    # declared: the column sits with the counts, in every table (an empty one too)
    assert _COLUMNS.index("n_informative") == _COLUMNS.index("n_b") + 1
    empty = compare_schemes(f, [], metrics=["kl"], pairing="trial")
    assert empty.empty and "n_informative" in empty.columns


def test_sign_extreme_pvalue_takes_the_count():
    from kvstats.analysis.resolution import sign_extreme_pvalue

    assert [sign_extreme_pvalue(k) for k in (0, 1, 2, 7, 1100)] == [1.0, 1.0, 0.5, 2 / 2**7,
                                                                     2.0**-1099]
    assert sign_extreme_pvalue(np.int64(5)) == 0.0625
    with pytest.raises(ValueError, match=r"n_nonzero must be an integer in \[0, inf\]; received -1"):
        sign_extreme_pvalue(-1)
    with pytest.raises(TypeError, match="n_nonzero must be an integer"):
        sign_extreme_pvalue(2.0)
    with pytest.raises(TypeError, match="n_nonzero must be an integer"):
        sign_extreme_pvalue(True)


def test_an_unresolvable_rows_smallest_p_is_never_printed_at_or_below_alpha():
    """5 pairs, Holm over 9 metrics: the smallest attainable adjusted p is 9 · 2/32 = 0.5625,
    which three significant digits wrote "0.562". At α = 0.5624 that printed a number below α
    beside "not resolvable" (a contradiction a reader can check); the text now takes the
    digits that keep it above α, and is unchanged where no side of α is at stake."""
    f = make_frame({("KQV", 4): 0.0, ("QKQV", 4): 5.0}, n=5, seed=8)
    t = compare_schemes(f, PAIR, energy=False, pairing="trial", alpha=0.5624)
    assert not t.resolvable.any()
    assert set(t.verdict) == {"not resolvable at n = 5 pairs (smallest attainable adjusted p 0.5625): all 5 pairs "
                              "differ: the limit is the number of pairs, 5, itself"}
    t = compare_schemes(f, PAIR, energy=False, pairing="trial", alpha=0.05)
    assert set(t.verdict) == {"not resolvable at n = 5 pairs (smallest attainable adjusted p 0.562): all 5 pairs "
                              "differ: the limit is the number of pairs, 5, itself"}
