"""What each comparison could have concluded: resolution fields, "not resolvable" wording,
the family's energy resolution, KS under ties and the equivalence verdicts."""

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps
from statsmodels.stats.multitest import multipletests

from kvstats.analysis import METRICS, compare_schemes
from kvstats.analysis.compare import DIFFERENT, DISTRIBUTIONS_DIFFER, NO_DIFFERENCE
from kvstats.analysis.resolution import attainable_adjusted, extreme_pvalue
from kvstats.stats.ks_exact import ks_2samp_exact
from kvstats.stats.sequential import required_resolution

from _sweep_frames import make_frame

RESOLUTION_COLUMNS = ["n_permutations", "max_permutations", "min_attainable_p",
                      "min_attainable_p_adjusted", "resolvable", "verdict"]


def _wording_is_honest(t):
    """No row says "no significant difference" unless it could have rejected."""
    quiet = ~t.significant & (t.test != "equivalence")
    assert (t.loc[quiet & t.resolvable, "verdict"] == NO_DIFFERENCE).all()
    assert t.loc[quiet & ~t.resolvable, "verdict"].str.startswith("not resolvable at ").all()
    assert not (t.loc[~t.resolvable, "winner"] == NO_DIFFERENCE).any()


def test_fixed_resolution_energy_test_is_not_resolvable_in_a_large_family():
    """The issue's case: B = 499 in a family of hundreds of tests, completely separated pairs.

    With B = 19 fixed, min p = 1/20 = 0.05 > alpha/m for m = 4 budgets x (9 metrics x 2 + 1)
    = 76 tests: the old report said "no significant difference"; it must say "not resolvable".
    The same data with the family's resolution reject (every component separates: r = ±1).
    """
    spec = {(s, b): (3.0 if s == "KQV" else 0.0) for b in (2, 3, 4, 5) for s in ("KQV", "QKQV")}
    f = make_frame(spec, n=20, seed=1)
    fixed = compare_schemes(f, [("KQV", "QKQV")], energy_resamples=19, energy_resolution="fixed",
                            pairing="none")
    energy = fixed[fixed.test == "energy"]
    assert len(energy) == 4 and not energy.significant.any() and not energy.resolvable.any()
    assert energy.verdict.str.startswith("not resolvable at B = 19 ").all()
    assert (energy.min_attainable_p == 1 / 20).all() and (energy.max_permutations == 19).all()
    _wording_is_honest(fixed)

    family = compare_schemes(f, [("KQV", "QKQV")], energy_resamples=19, pairing="none")
    energy = family[family.test == "energy"]
    need = required_resolution(family.attrs["n_tests"], 0.05, "holm")
    assert family.attrs["n_tests"] == len(family) == 76
    assert (energy.max_permutations == need.n_permutations).all()
    assert (energy.verdict == DISTRIBUTIONS_DIFFER).all() and energy.resolvable.all()
    assert (energy.pvalue == need.min_attainable_p).all()     # all B permutations drawn, none exceeds
    _wording_is_honest(family)


def test_null_energy_tests_stop_early_and_say_no_difference():
    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=40, seed=2)
    t = compare_schemes(f, [("KQV", "QKQV")], pairing="none")
    e = t[t.test == "energy"].iloc[0]
    assert e.n_permutations < e.max_permutations      # Besag–Clifford stop at 10 exceedances
    assert e.resolvable and e.verdict == NO_DIFFERENCE and "stopped early" in e.note


def test_rank_tests_with_few_units_are_not_resolvable():
    """3 vs 3 units: the most extreme split has Mann–Whitney p = 2/C(6, 3) = 0.1 > alpha."""
    f = make_frame({("KQV", 3): 5.0, ("QKQV", 3): 0.0}, n=3, seed=3)
    t = compare_schemes(f, [("KQV", "QKQV")], energy=False, pairing="none")
    mw = t[t.test == "mann_whitney"]
    assert np.allclose(mw.min_attainable_p, 2 / math.comb(6, 3))
    assert (mw.effect.abs() == 1).all()                 # completely separated, and still:
    assert (mw.winner.str.startswith("not resolvable at n = 3 vs 3")).all()
    _wording_is_honest(t)


def test_resolution_columns_present_and_consistent(frame_factory):
    f = frame_factory({("KQV", 3): 0.3, ("QKQV", 3): 0.0, ("KV", 3): 0.0}, n=30, seed=4)
    t = compare_schemes(f, [("KQV", "QKQV"), ("KQV", "KV")], energy_resamples=99,
                        equivalence={"kl": 0.5}, pairing="none")
    for col in RESOLUTION_COLUMNS + ["margin_low", "margin_high"]:
        assert col in t.columns
    assert not t[RESOLUTION_COLUMNS].isna().any().any()
    perm = t[t.test == "energy"]
    assert (perm.n_permutations <= perm.max_permutations).all()
    assert np.allclose(perm.min_attainable_p, 1 / (1 + perm.max_permutations))
    rank = t[t.test.isin(["mann_whitney", "ks"])]
    assert (rank.max_permutations == 0).all() and (rank.min_attainable_p <= rank.pvalue).all()
    assert (t.min_attainable_p_adjusted <= t.pvalue_adjusted.fillna(1) + 1e-15).all()
    assert (t.significant <= t.resolvable).all()        # a rejection is always resolvable


@pytest.mark.parametrize("method", ["holm", "bonferroni", "fdr_bh", "hommel"])
def test_attainable_adjusted_is_the_adjustment_with_one_p_lowered(method, monkeypatch):
    import gc

    monkeypatch.setattr(gc, "collect", lambda *args: 0)   # statsmodels' holm collects per call
    rng = np.random.default_rng(5)
    for _ in range(20):
        m = int(rng.integers(1, 25))
        p = rng.random(m) ** rng.choice([1, 6])
        q = p * rng.random(m) * (rng.random(m) < 0.8)
        got = attainable_adjusted(p, q, method, 0.05)
        ref = np.array([multipletests(np.where(np.arange(m) == i, q[i], p), method=method)[1][i]
                        for i in range(m)])
        if method == "hommel":   # exact where Holm's value exceeds alpha, else Holm's bound <= alpha
            holm = attainable_adjusted(p, q, "holm", 0.05)
            np.testing.assert_allclose(got[holm > 0.05], ref[holm > 0.05], rtol=1e-12, atol=0)
            assert ((got[holm <= 0.05] >= ref[holm <= 0.05] - 1e-15) & (got[holm <= 0.05] <= 0.05)).all()
            assert ((got <= 0.05) == (ref <= 0.05)).all()
            continue
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


def test_extreme_pvalue_matches_the_reports_tests_on_the_extreme_split():
    from kvstats.stats import mann_whitney

    rng = np.random.default_rng(6)
    for n_x, n_y, tied in [(4, 4, False), (8, 11, False), (30, 25, False), (30, 30, True)]:
        x, y = rng.normal(size=n_x), rng.normal(size=n_y)
        if tied:
            x, y = np.round(x), np.round(y)
        pooled = np.sort(np.r_[x, y])
        ref = min(mann_whitney(pooled[:n_x], pooled[n_x:]).pvalue,
                  mann_whitney(pooled[n_y:], pooled[:n_y]).pvalue)
        assert extreme_pvalue("mann_whitney", x, y) == pytest.approx(ref, rel=1e-12)
    x, y = [1, 2, 2, 3], [2, 3, 4]
    ref = min(ks_2samp_exact([1, 2, 2, 2], [3, 3, 4]).pvalue, ks_2samp_exact([2, 3, 3, 4], [1, 2, 2]).pvalue)
    assert extreme_pvalue("ks", x, y) == pytest.approx(ref, rel=1e-12)
    assert extreme_pvalue("mann_whitney", [1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0


def test_mann_whitney_extreme_follows_the_tests_choice_on_both_sides_of_its_cost_limit(monkeypatch):
    """Under ties mann_whitney's "auto" is the conditional exact test while its law is cheap
    and the asymptotic test beyond (kvstats.stats.rank._mwu_pvalue, one rule): the smallest
    attainable p follows it either way. References: 2/C(24, 12) exact on 0/1 data (the
    separating split is the only one at its extreme); scipy's asymptotic test beyond."""
    import kvstats.stats.rank as rank
    from kvstats.stats import mann_whitney

    x, y = np.r_[np.ones(6), np.zeros(6)], np.r_[np.ones(5), np.zeros(7)]   # 11 ones of 24
    sep = (np.r_[np.ones(11), np.zeros(1)], np.zeros(12))
    assert mann_whitney(x, y).method == "exact"
    enumerated = 2 * math.comb(13, 1) / math.comb(24, 12)    # x holds the 11 ones and one zero
    assert extreme_pvalue("mann_whitney", x, y) == pytest.approx(enumerated, rel=1e-12)
    monkeypatch.setattr(rank, "_TIED_AUTO_WORK_LIMIT", 10)
    assert mann_whitney(x, y).method == "asymptotic"
    ref = sps.mannwhitneyu(*sep, use_continuity=True, method="asymptotic").pvalue
    assert extreme_pvalue("mann_whitney", x, y) == pytest.approx(ref, rel=1e-12)


def test_extreme_split_with_ties_at_one_end_is_the_other_way_round():
    """Pooled [0, 0, 0, 0, 0, 1, 2, 3], 3 vs 5: x taking the 3 smallest values (all 0) does not
    separate the samples; x taking the 3 largest does, and is the extreme. Both relabellings
    must be tried, for either test. References: scipy's exact permutation test of U on the
    separating split (the report's Mann–Whitney is exact conditional on these ties: 2/C(8, 3),
    where the asymptotic test it used before 2026-12-02 claimed 0.0168), scipy for KS."""
    x, y = [0.0, 2.0, 0.0], [1.0, 0.0, 3.0, 0.0, 0.0]
    sep_x, sep_y = [1.0, 2.0, 3.0], [0.0] * 5
    ref_mw = sps.permutation_test(
        (sep_x, sep_y), lambda a, b, axis: sps.mannwhitneyu(a, b, axis=axis).statistic,
        permutation_type="independent", n_resamples=np.inf, vectorized=True).pvalue
    assert ref_mw == pytest.approx(2 / math.comb(8, 3), rel=1e-12)
    assert extreme_pvalue("mann_whitney", x, y) == pytest.approx(ref_mw, rel=1e-12)
    assert extreme_pvalue("mann_whitney", y, x) == pytest.approx(ref_mw, rel=1e-12)
    ref_ks = ks_2samp_exact(sep_x, sep_y).pvalue    # D = 1 (R: ks.test(exact = TRUE) on the ties)
    assert ks_2samp_exact([0.0] * 3, [0.0, 0.0, 1.0, 2.0, 3.0]).pvalue > ref_ks
    assert extreme_pvalue("ks", x, y) == pytest.approx(ref_ks, rel=1e-12)


def test_attainable_adjusted_takes_a_min_p_above_the_observed_p_as_the_observed_p():
    p = np.array([0.01, 0.04, 0.5])
    for method in ("holm", "bonferroni", "fdr_bh"):
        adjusted = multipletests(p, method=method)[1]
        np.testing.assert_allclose(attainable_adjusted(p, np.array([0.2, 0.9, 1.0]), method, 0.05),
                                   adjusted, rtol=1e-12)


def test_a_permutation_ks_row_cannot_attain_less_than_one_over_b_plus_one(monkeypatch):
    """Beyond the exact method's work limit (here lowered) the tied KS p-value is a Monte
    Carlo one with B = 9999 permutations: the row says so and its resolution is 1/(B + 1)."""
    import kvstats.stats.ks_exact as ks_exact

    monkeypatch.setattr(ks_exact, "_EXACT_WORK_LIMIT", 10)
    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.4}, n=40, seed=7)
    f["argmax_shift"] = np.clip(np.round(f["argmax_shift"]), -1, 1)
    t = compare_schemes(f, [("KQV", "QKQV")], metrics=["argmax_shift"], energy=False, pairing="none")
    ks = t[t.test == "ks"].iloc[0]
    assert ks.note == "ties: permutation p-value (B = 9999)" and ks.max_permutations == 9999
    assert ks.min_attainable_p == 1 / 10000


def test_ks_rows_on_tied_data_are_exact_conditional_on_ties():
    """3-level data: the report's KS p-value is ks_2samp_exact's (R's ks.test(exact = TRUE))."""
    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.4}, n=40, seed=7)
    f["argmax_shift"] = np.clip(np.round(f["argmax_shift"]), -1, 1)
    t = compare_schemes(f, [("KQV", "QKQV")], metrics=["argmax_shift", "kl"], energy=False, pairing="none")
    ks = t[t.test == "ks"].set_index("metric")
    x, y = (f.loc[f.scheme == s, "argmax_shift"].to_numpy() for s in ("KQV", "QKQV"))
    assert ks.loc["argmax_shift", "pvalue"] == ks_2samp_exact(x, y).pvalue
    assert ks.loc["argmax_shift", "note"] == "ties: exact conditional test"
    assert ks.loc["kl", "note"] == ""                     # continuous: the classical test
    assert not t.note.str.contains("conservative").any()


def _equivalence_frame(shift, n, seed):
    rng = np.random.default_rng(seed)
    parts = []
    for scheme, s in (("K4V2", shift), ("K4V4", 0.0)):
        data = {m: rng.normal(0, 1, n) for m in METRICS}
        data["kl"] = rng.exponential(1.0, n) * math.exp(s)
        parts.append(pd.DataFrame(data).assign(
            distribution="gaussian", params="-", dim=64, n_keys=128,
            budget=3.0 if scheme == "K4V2" else 4.0, scheme=scheme, bits_nominal=3.0,
            bits_total=3.25, trial=np.arange(n)))
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("shift, n, verdict", [
    (0.0, 4000, "equivalent within δ"),     # same law, many trials: ratio CI inside [1/1.1, 1.1]
    (1.0, 400, "different"),                # mean ratio e = 2.7: far outside the margin
    (0.0, 15, "inconclusive"),              # same law, too few trials to show either
])
def test_equivalence_verdicts_on_constructed_frames(shift, n, verdict):
    f = _equivalence_frame(shift, n, seed=8)
    t = compare_schemes(f, [("K4V2", "K4V4")], metrics=["kl"], energy=False,
                        equivalence={"kl": 0.1}, pairing="none")
    eq = t[t.test == "equivalence"].iloc[0]
    assert eq.verdict == verdict
    assert (eq.margin_low, eq.margin_high) == pytest.approx((1 / 1.1, 1.1))
    assert eq.effect == pytest.approx(eq.mean_a / eq.mean_b)
    mw = t[t.test == "mann_whitney"].iloc[0]
    # "≈" is never read off the difference test: an inconclusive pair is not "equal"
    if verdict == "inconclusive":
        assert mw.winner == NO_DIFFERENCE and not eq.significant
    if verdict == "different":
        assert mw.verdict == DIFFERENT


def test_equivalence_with_a_zero_mean_is_inconclusive_and_outside_the_family():
    f = _equivalence_frame(0.0, 30, seed=9)
    f["argmax_shift"] = 0.0
    t = compare_schemes(f, [("K4V2", "K4V4")], metrics=["argmax_shift"], energy=False,
                        equivalence={"argmax_shift": 0.1}, pairing="none")
    eq = t[t.test == "equivalence"].iloc[0]
    assert math.isnan(eq.pvalue) and eq.verdict.startswith("inconclusive (no equivalence test:")
    assert t.attrs["n_tests"] == 2                       # MW and KS only
    assert (eq.margin_low, eq.margin_high) == pytest.approx((1 / 1.1, 1.1))  # the declared region


def test_rank_equivalence_margin():
    f = _equivalence_frame(0.0, 2000, seed=10)
    t = compare_schemes(f, [("K4V2", "K4V4")], metrics=["snr_k"], energy=False, ks=False,
                        equivalence={"snr_k": 0.05}, equivalence_test="rank", pairing="none")
    eq = t[t.test == "equivalence"].iloc[0]
    assert eq.verdict == "equivalent within δ" and (eq.margin_low, eq.margin_high) == (0.45, 0.55)
    with pytest.raises(ValueError, match=r"equivalence\['snr_k'\]"):
        compare_schemes(f, [("K4V2", "K4V4")], metrics=["snr_k"], energy=False,
                        equivalence={"snr_k": 0.6}, equivalence_test="rank", pairing="none")


def test_energy_family_resolution_power_and_null_calibration():
    """The report's energy test at a family of 76 tests (B = 1519):

    - null (same law): P(reject) <= alpha/m per test; over 30 null pairs no rejection is
      expected (P(any) <= 30 x 0.05/76 = 0.02);
    - separated by 1 SD in every component at n = 20: rejected in every replicate
      (energy distance power ~1 at this effect; the family's B makes it attainable).
    Replicates: 8 (ci) / 30 (full).
    """
    from kvstats._checks import replicate_scale

    rejections, powered = 0, 0
    reps = 8 if replicate_scale() == "ci" else 30
    for r in range(reps):
        spec = {("KQV", b): (1.0 if b == 2 else 0.0) for b in (2, 3, 4, 5)}
        spec.update({("QKQV", b): 0.0 for b in (2, 3, 4, 5)})
        t = compare_schemes(make_frame(spec, n=20, seed=200 + r), [("KQV", "QKQV")], pairing="none")
        e = t[t.test == "energy"].set_index("budget")
        powered += bool(e.loc[2.0, "significant"])
        rejections += int(e.loc[[3.0, 4.0, 5.0], "significant"].sum())
    assert rejections <= sps.binom.ppf(0.999, 3 * reps, 0.05 / 76)
    assert powered >= reps - 1


def test_the_energy_test_reads_the_standardised_profile():
    """One 6D component (snr_k) is noise at 1e4 times the others' scale, the same law in both
    schemes; another (phi_k) differs by one standard deviation. Standardised, the energy
    test sees the difference; on raw values snr_k's noise would drown it."""
    rng = np.random.default_rng(12)
    f = make_frame({("KQV", 3): 0.0, ("QKQV", 3): 0.0}, n=60, seed=12)
    f["snr_k"] = 1e4 * rng.standard_normal(len(f))
    f.loc[f.scheme == "QKQV", "phi_k"] += 1.0
    t = compare_schemes(f, [("KQV", "QKQV")], metrics=["kl"], ks=False, pairing="none")
    energy = t[t.test == "energy"].iloc[0]
    assert energy.significant and energy.verdict == DISTRIBUTIONS_DIFFER


@pytest.mark.parametrize("method", ["sidak", "holm-sidak"])
def test_attainable_adjusted_gives_no_warning_for_a_pvalue_of_one(method):
    """A p-value of 1 is common (all differences zero); Šidák's log1p(−1) = −inf gives the
    correct adjusted value 1 and must not warn once per test of a report."""
    import warnings

    p = np.array([1.0, 0.5, 1e-4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = attainable_adjusted(p, np.array([0.5, 0.1, 1e-4]), method, 0.05)
    ref = []
    for i, q in enumerate([0.5, 0.1, 1e-4]):
        work = p.copy()
        work[i] = q
        with np.errstate(divide="ignore"):
            ref.append(multipletests(work, alpha=0.05, method=method)[1][i])
    assert got.tolist() == ref


def test_equivalence_verdict_reads_the_family_adjusted_tost_pvalue():
    """A TOST whose raw p is below α but whose Holm-adjusted p (a family of three: MW, KS,
    TOST) is above it is not "equivalent" (mutation run RJ: the raw p survived the suite)."""
    f = _equivalence_frame(0.0, 800, seed=0)
    t = compare_schemes(f, [("K4V2", "K4V4")], metrics=["kl"], energy=False,
                        equivalence={"kl": 0.1}, pairing="none")
    eq = t[t.test == "equivalence"].iloc[0]
    assert eq.pvalue <= 0.05 < eq.pvalue_adjusted      # else this data tests nothing
    assert eq.verdict == "inconclusive"
