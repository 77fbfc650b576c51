"""The exact energy permutation test (every relabelling enumerated where the group is small)
and the honest resolution of the Monte Carlo one.

A Monte Carlo test on data at a small relabelling group's extreme ties the observed
statistic on a share ``floor`` of its draws, so it reaches 1/(1 + B) only with probability
(1 - floor)^B: 0.50 for 16 pairs in the quick report's family of 1140 (B = 22799), which
then counted the row "resolvable". Now such groups are enumerated (p = floor on those data),
and a drawn test's ``min_attainable_p`` is the p-value those data get at least half the time.
"""

import math
import re

import numpy as np
import pytest
from scipy import stats

from kvstats.stats import energy_test
from kvstats.stats._energy_reference import exact_pvalue_brute_force
from kvstats.stats.family_resolution import monte_carlo_resolution
from kvstats.stats.sequential import energy_test_sequential, required_resolution


def _pairs(rng, m, dim=3, shift=0.0, neg=False):
    """m exchangeable pairs sharing Z (negatively correlated when ``neg``), X moved by shift."""
    z = rng.normal(size=(m, dim))
    return (z + 0.4 * rng.normal(size=(m, dim)) + shift,
            (-z if neg else z) + 0.4 * rng.normal(size=(m, dim)))


# ------------------------------------------------------------ exact = brute force


@pytest.mark.parametrize("kind", ["V", "U"])
@pytest.mark.parametrize("standardize", [False, True])
def test_paired_exact_pvalue_is_the_brute_force_enumeration(kind, standardize):
    # 6 pairs: all 64 swaps by brute force (plain distance means) against the 32 classes
    rng = np.random.default_rng(190 + 2 * standardize + (kind == "U"))
    for case in range(8):
        x, y = _pairs(rng, 6, shift=0.15 * case, neg=case % 2 == 1)
        if case >= 6:       # ties: a repeated pair, and a pair whose rows are equal
            x[1], y[1] = x[0], y[0]
            y[2] = x[2]
        res = energy_test(x, y, n_resamples=9, seed=case, paired=True, kind=kind,
                          standardize=standardize)
        ref = exact_pvalue_brute_force(x, y, paired=True, kind=kind, standardize=standardize)
        assert res.method == "exact" and res.pvalue == ref, (case, res.pvalue, ref)
        assert res.n_resamples == (16 if case >= 6 else 32) == len(res.null_distribution) + 1
        seq = energy_test_sequential(x, y, max_permutations=99, seed=case, paired=True,
                                     kind=kind, standardize=standardize)
        assert (seq.pvalue, seq.method, seq.n_permutations) == (ref, "exact", res.n_resamples)
        assert seq.pvalue == (1 + seq.n_exceed) / seq.n_permutations and not seq.stopped_early


@pytest.mark.parametrize("n_x,n_y", [(5, 6), (5, 5)])
@pytest.mark.parametrize("kind", ["V", "U"])
def test_two_sample_exact_pvalue_is_the_brute_force_enumeration(n_x, n_y, kind):
    # every subset (462 or 252) by brute force; 5 vs 5 is enumerated as the 126 classes
    # holding row 0 (a labelling and its complement give one statistic)
    rng = np.random.default_rng(n_x + n_y + (kind == "U"))
    for case in range(8):
        x = rng.normal(size=(n_x, 2)) + 0.3 * case
        y = rng.normal(size=(n_y, 2))
        if case >= 4:       # ties: repeated rows within and across the samples
            x[1] = x[0]
            y[0] = y[1] = x[2]
        if case >= 6:       # heavy ties: counts, as rounded metrics give
            x, y = np.round(x), np.round(y)
        res = energy_test(x, y, n_resamples=9, seed=case, kind=kind, standardize=case % 2 == 0)
        ref = exact_pvalue_brute_force(x, y, paired=False, kind=kind, standardize=case % 2 == 0)
        assert res.method == "exact" and res.pvalue == ref, (case, res.pvalue, ref)
        assert res.n_resamples == math.comb(n_x + n_y, n_x) // (2 if n_x == n_y else 1)
        assert res.pvalue_interval() == (res.pvalue, res.pvalue)     # no Monte Carlo error


def test_equal_pairs_are_left_out_of_the_enumeration():
    # 12 pairs, 8 of them equal: 2^3 classes of the 4 differing pairs, the p-value of all 4096
    rng = np.random.default_rng(7)
    x, y = _pairs(rng, 12, shift=0.5)
    y[4:] = x[4:]
    for kind in "VU":
        res = energy_test(x, y, paired=True, kind=kind, standardize=True)
        assert res.n_resamples == 8 and res.min_attainable_p == 2.0 ** -3
        assert res.pvalue == exact_pvalue_brute_force(x, y, paired=True, kind=kind,
                                                      standardize=True)
    same = energy_test(x, x.copy(), paired=True)            # no differing pair: p = 1
    assert (same.pvalue, same.n_resamples, same.min_attainable_p) == (1.0, 1, 1.0)


# ------------------------------------------------------------ the floor is reached


def test_extreme_data_get_the_floor_exactly():
    need = required_resolution(1140)
    z = np.random.default_rng(3).normal(size=(16, 6))
    for test in (lambda x, y: energy_test(x, y, seed=1, standardize=True, paired=True),
                 lambda x, y: energy_test_sequential(x, y, alpha_needed=need.p_needed, seed=1,
                                                     standardize=True, paired=True)):
        res = test(z + 10.0, z)
        assert res.pvalue == res.min_attainable_p == 2.0 ** -15 and res.method == "exact"
        assert res.resolvable(need.p_needed)
    rng = np.random.default_rng(4)
    for n_x, n_y, floor in ((6, 7, 1 / 1716), (6, 6, 2 / 924)):
        res = energy_test(rng.normal(size=(n_x, 3)) + 20.0, rng.normal(size=(n_y, 3)))
        assert res.pvalue == res.min_attainable_p == pytest.approx(floor, rel=1e-15)


def test_the_referees_reproducer_now_rejects_every_time():
    # critic_perm19: 16 pairs at the most extreme, family 1140. Drawn, P(p <= alpha/m) was
    # 0.488 over seeds (theory (1 - 2^-15)^22799 = 0.499) while "resolvable" said True.
    need = required_resolution(1140)
    z = np.random.default_rng(5).normal(size=(16, 6))
    runs = [energy_test_sequential(z + 10, z, alpha_needed=need.p_needed, seed=s,
                                   standardize=True, paired=True) for s in range(300, 340)]
    assert all(r.pvalue == 2.0 ** -15 <= need.p_needed and r.resolvable(need.p_needed)
               for r in runs)
    # the drawn test on the same data: about half reject, and it no longer claims it can
    drawn = [energy_test_sequential(z + 10, z, alpha_needed=need.p_needed, seed=s,
                                    standardize=True, paired=True, method="permutation")
             for s in range(300, 400)]
    rate = np.mean([r.pvalue <= need.p_needed for r in drawn])
    lo, hi = stats.binom.interval(0.999, 100, (1 - 2.0 ** -15) ** 22799)
    assert lo / 100 <= rate <= hi / 100
    assert all(r.min_attainable_p == 2 / 22800 and not r.resolvable(need.p_needed)
               for r in drawn)


# ------------------------------------------------------------ null calibration


def test_exact_pvalues_are_super_uniform_under_the_null(calib):
    # continuous data: p is uniform on k/|G| (P(p <= k/|G|) = k/|G| exactly); tied data:
    # P(p <= a) <= a. Small groups (32 swap classes, 126 subsets) make an off-by-one in
    # the count (the observed labelling left out) a shift of 1/32 or 1/126
    reps = calib.replicates(1500, 10000)
    rng = np.random.default_rng(19)
    designs = {
        "pairs": lambda: (*_pairs(rng, 6, neg=True), True),
        "samples": lambda: (rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), False),
        "tied pairs": lambda: (*(rng.poisson(0.8, (2, 8, 2)).astype(float)), True),
        "tied samples": lambda: (rng.poisson(0.8, (5, 2)).astype(float),
                                 rng.poisson(0.8, (6, 2)).astype(float), False),
    }
    for name, draw in designs.items():
        p = np.empty(reps)
        for i in range(reps):
            x, y, paired = draw()
            p[i] = energy_test(x, y, standardize=True, paired=paired).pvalue
        calib.discrete_validity(p, alphas=(0.05, 0.1, 0.25, 0.5))
        if name in ("pairs", "samples"):
            size = 32 if name == "pairs" else 126
            for k in (2, 6, 13):                    # the exact law at its support points
                lo, hi = calib.binom_interval(reps, k / size, level=0.999)
                assert lo <= np.mean(p <= k / size + 1e-12) <= hi, (name, k)


# ------------------------------------------------------------ above the bound: unchanged


def test_above_the_bound_the_drawn_test_is_unchanged_bit_for_bit():
    # 21 pairs (2^20 classes) and 12 vs 12 (1352078): drawn as before. The values are those
    # of kvstats before the exact test (HEAD 005527e, same calls)
    rng = np.random.default_rng(1919)
    z = rng.normal(size=(21, 4))
    x, y = z + 0.25 + 0.5 * rng.normal(size=(21, 4)), z + 0.5 * rng.normal(size=(21, 4))
    a, b = rng.normal(size=(12, 3)) + 0.4, rng.normal(size=(12, 3))
    r1 = energy_test(x, y, n_resamples=499, seed=3, paired=True, standardize=True)
    r2 = energy_test(a, b, n_resamples=499, seed=4, kind="U")
    assert (r1.method, r2.method) == ("permutation", "permutation")
    assert (r1.pvalue, r1.statistic.hex()) == (0.004, "0x1.069f0d15b0f2dp-2")
    assert float(np.sum(r1.null_distribution)).hex() == "0x1.0247d524abb22p+6"
    assert (r2.pvalue, r2.statistic.hex()) == (0.788, "-0x1.086c4383d71a0p-3")
    assert float(np.sum(r2.null_distribution)).hex() == "0x1.2b9a955c495a2p+3"
    s1 = energy_test_sequential(x, y, max_permutations=22799, seed=5, paired=True,
                                standardize=True)
    s2 = energy_test_sequential(a, b, max_permutations=22799, seed=6)
    assert (s1.pvalue, s1.n_permutations, s1.n_exceed) == (0.0009805844283192783, 10198, 10)
    assert (s2.pvalue, s2.n_permutations, s2.n_exceed) == (0.7142857142857143, 14, 10)
    # their resolution: 2^-20 B and 2/C(24, 12) B are far below ln 2, so 1/(1 + B)
    assert s1.min_attainable_p == s2.min_attainable_p == 1 / 22800
    for res, same in ((r1, energy_test(x, y, n_resamples=499, seed=3, paired=True,
                                       standardize=True, method="permutation")),
                      (r2, energy_test(a, b, n_resamples=499, seed=4, kind="U",
                                       method="permutation"))):
        assert np.array_equal(res.null_distribution, same.null_distribution)


# ------------------------------------------------------------ the drawn test's resolution


def test_monte_carlo_resolution_is_the_median_pvalue_on_extreme_data():
    # closed form: 1/(1 + B) exactly when (1 - f)^B >= 1/2
    for b in (99, 999, 22799):
        for f in np.geomspace(1e-7, 0.3, 60):
            r = monte_carlo_resolution(f, b)
            assert (r == 1 / (1 + b)) == ((1 - f) ** b >= 0.5), (b, f)
    assert monte_carlo_resolution(0.0, 9) == 0.1 and monte_carlo_resolution(1.0, 9) == 1.0
    assert monte_carlo_resolution(1.0, 9, h=3) == 1.0          # stops at draw 3: p = 3/3
    # the procedure itself: 8 pairs at the extreme (floor 2^-7), drawn. Fixed B = 200:
    # K ~ Bin(200, 1/128), median 1, so the resolution is 2/201
    z = np.random.default_rng(8).normal(size=(8, 3))
    f, b = 2.0 ** -7, 200
    p = np.array([energy_test(z + 5.0, z, n_resamples=b, seed=s, paired=True,
                              method="permutation").pvalue for s in range(400)])
    r = monte_carlo_resolution(f, b)
    assert r == 2 / 201
    k = np.rint(p * (1 + b) - 1).astype(int)          # the exceedances
    for at in (0, 1, 2):
        lo, hi = stats.binom.interval(0.999, 400, stats.binom.cdf(at, b, f))
        assert lo <= np.count_nonzero(k <= at) <= hi
    # sequential, h = 3, B = 999: it stops (at the 3rd tie) more often than not; the
    # resolution h/l has P(p <= h/l) = P(Bin(l - 1, f) <= 2) >= 1/2, the next smaller < 1/2
    h, b = 3, 999
    r = monte_carlo_resolution(f, b, h)
    l = round(h / r)
    assert stats.binom.cdf(h - 1, l - 1, f) >= 0.5 > stats.binom.cdf(h - 1, l, f)
    p = np.array([energy_test_sequential(z + 5.0, z, max_permutations=b, h=h, seed=s,
                                         paired=True, method="permutation").pvalue
                  for s in range(400)])
    lo, hi = stats.binom.interval(0.999, 400, stats.binom.cdf(h - 1, l - 1, f))
    assert lo <= np.count_nonzero(p <= r * (1 + 1e-12)) <= hi


# ------------------------------------------------------------ arguments


def test_method_is_checked():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    with pytest.raises(ValueError, match="method"):
        energy_test(x, y, method="enumerate")
    with pytest.raises(ValueError, match="method"):
        energy_test_sequential(x, y, max_permutations=9, method="Exact")
    with pytest.raises(ValueError, match=r"method='exact' would enumerate .*30 differing pairs"):
        energy_test(x, y, paired=True, method="exact")
    with pytest.raises(ValueError, match=r"method='exact' would enumerate .*3 vs 200"):
        energy_test_sequential(x[:3], rng.normal(size=(200, 2)), max_permutations=9,
                               method="exact")
    # forced exact beyond the automatic bound (21 pairs) and forced drawing below it
    assert energy_test(x[:21], y[:21], paired=True, method="exact").n_resamples == 2**20
    res = energy_test(x[:6], y[:6], n_resamples=99, paired=True, method="permutation")
    assert res.method == "permutation" and res.n_resamples == 99


def test_the_modules_public_names_are_exported_by_kvstats_stats():
    # monte_carlo_resolution and ENERGY_METHODS were in their modules' __all__ only
    import kvstats.stats as ks
    from kvstats.stats import energy, family_resolution
    for module in (energy, family_resolution):
        for name in module.__all__:
            assert getattr(ks, name) is getattr(module, name) and name in ks.__all__, name


def test_the_refusal_of_a_large_exact_test_prints_finite_counts():
    # above e**64 classes the count was math.inf ("inf relabellings"), and 2**(m - 1) for
    # m > 1024 pairs overflowed the float format (OverflowError instead of the ValueError)
    from kvstats.stats._energy_core import _exact_classes, _exp_text
    assert _exp_text(math.log(2**29)) == f"{2**29:.3g}" == "5.37e+08"
    assert _exp_text(math.log(9.9999e5)) == "1e+06"
    cases = ((100, 100, None, "4.53e+58 relabellings (100 vs 100), 1.81e+63 multiply-adds"),
             (1100, 1100, 1100, "6.79e+330 relabellings (1100 differing pairs), 8.22e+336"))
    for n_x, n_y, differing, text in cases:
        with pytest.raises(ValueError, match=re.escape(text)):
            _exact_classes("exact", n_x, n_y, differing)
        assert _exact_classes("auto", n_x, n_y, differing) is None
    # C(200, 100)/2 = 4.53e+58 (math.comb)
    with pytest.raises(ValueError, match=re.escape(f"{math.comb(200, 100) // 2:.3g} relab")):
        _exact_classes("exact", 100, 100, None)


def test_sequential_exact_counts_the_statistics_it_compared():
    # pair 0 differs only by 1e-310, which the scaling by 2**-997 flushes to 0: 2 classes
    # are compared, not the 4 counted on the unscaled rows (p = (1 + n_exceed)/n_permutations)
    X = np.array([[1e300, 1e-310], [2e300, 0.0], [3e300, 0.0]])
    Y = np.array([[1e300, 0.0], [-2e300, 0.0], [1e300, 0.0]])
    res = energy_test(X, Y, paired=True)
    seq = energy_test_sequential(X, Y, paired=True, max_permutations=9)
    assert seq.n_permutations == res.n_resamples == len(res.null_distribution) + 1 == 2
    assert seq.pvalue == res.pvalue == (1 + seq.n_exceed) / seq.n_permutations == 0.5


@pytest.mark.parametrize("paired", [False, True])
def test_one_formula_gives_the_pvalue_from_the_null_for_both_methods(paired):
    # the exact null held the observed statistic at index 0 and the drawn one did not, so
    # (1 + #{null >= T})/(1 + len(null)) was wrong for "exact"; now neither holds it
    rng = np.random.default_rng(19)
    for shift in (0.0, 0.3, 1.5):                  # null, moderate, at the group's extreme
        x, y = _pairs(rng, 7, shift=shift)
        for method in ("exact", "permutation"):
            res = energy_test(x, y, n_resamples=99, seed=1, paired=paired, method=method)
            null = res.null_distribution
            ties = null >= res.statistic - 1e-9     # ties within rounding (distances ~1)
            assert res.method == method and len(null) == res.n_resamples - (method == "exact")
            assert res.pvalue == (1 + np.count_nonzero(ties)) / (1 + len(null)), (shift, method)
