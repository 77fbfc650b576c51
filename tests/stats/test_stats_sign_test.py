"""Sign test of paired samples: R and scipy reference values, exact size under the null
(computed from the binomial and simulated on correlated, anti-correlated and quantized
pairs), power under a shift, the Clopper–Pearson dominance interval (coverage, agreement
with the test), the skewed
example where it and the signed-rank test disagree, bad input.

Run as a script for the calibration and coverage tables of docs/statistics.md:
``nice -n 10 .venv/bin/python tests/stats/test_stats_sign_test.py --reps 10000``.
"""

import argparse
import functools
import math
import os
import time

import numpy as np
import pytest
from scipy import stats

from kvstats._checks import replicate_scale
from statsmodels.stats.proportion import proportion_confint

from kvstats.stats import SignTestResult, sign_test, wilcoxon_signed_rank
from kvstats.stats.proportion import binom_test_half, clopper_pearson_interval, wilson_interval


def _wilson_reference(k, n, confidence):
    """statsmodels' Wilson interval (independent code) for the proportion k / n."""
    return proportion_confint(k, n, alpha=1 - confidence, method="wilson")


def _cp_reference(k, n, confidence):
    """statsmodels' Clopper–Pearson interval (its "beta" method: independent code)."""
    return proportion_confint(k, n, alpha=1 - confidence, method="beta")

ALTS = ("two-sided", "greater", "less")


def _signs(k, n, zeros=0):
    """Paired data with k positive and n - k negative differences, plus ``zeros`` ties."""
    x = np.concatenate([np.full(k, 2.0), np.full(n - k, -1.5), np.full(zeros, 0.25)])
    y = np.concatenate([np.zeros(n), np.full(zeros, 0.25)])
    return x, y


# R 4.2.2: sprintf("%.17g", binom.test(k, n, 0.5, alternative = ALT)$p.value), ALT =
# "two.sided" / "greater" / "less" (k, n in the first two columns).
R_BINOM_TEST = [
    (0, 1, "two-sided", 1.0), (0, 1, "greater", 1.0), (0, 1, "less", 0.5),
    (1, 1, "two-sided", 1.0), (1, 1, "greater", 0.5), (1, 1, "less", 1.0),
    (5, 5, "two-sided", 0.0625), (5, 5, "greater", 0.03125), (5, 5, "less", 1.0),
    (0, 5, "two-sided", 0.0625), (0, 5, "greater", 1.0), (0, 5, "less", 0.03125),
    (2, 10, "two-sided", 0.10937499999999994), (2, 10, "greater", 0.9892578125),
    (2, 10, "less", 0.054687499999999972),
    (7, 9, "two-sided", 0.17968750000000006), (7, 9, "greater", 0.089843750000000028),
    (7, 9, "less", 0.98046875),
    (6, 8, "two-sided", 0.28906250000000011), (6, 8, "greater", 0.14453125000000006),
    (6, 8, "less", 0.96484375),
    (12, 25, "two-sided", 1.0), (12, 25, "greater", 0.65498101711273204),
    (12, 25, "less", 0.49999999999999989),
    (13, 25, "two-sided", 1.0), (13, 25, "greater", 0.50000000000000011),
    (13, 25, "less", 0.65498101711273204),
    (20, 60, "two-sided", 0.013489293731191905), (20, 60, "greater", 0.9968911986703366),
    (20, 60, "less", 0.0067446468655959525),
    (30, 60, "two-sided", 1.0), (30, 60, "greater", 0.55128908650428488),
    (30, 60, "less", 0.55128908650428488),
    (40, 60, "two-sided", 0.013489293731191905), (40, 60, "greater", 0.0067446468655959525),
    (40, 60, "less", 0.9968911986703366),
    (17, 60, "two-sided", 0.0010657657791434388), (17, 60, "greater", 0.99980297837863696),
    (17, 60, "less", 0.00053288288957171939),
    (560, 1000, "two-sided", 0.00016504987055045308),
    (560, 1000, "greater", 8.252493527522654e-05), (560, 1000, "less", 0.99993611784083791),
    # R's dbinom is good to ~1e-13 relative here: 2^-999 = 1.8665272370064378e-301
    (1000, 1000, "two-sided", 1.8665272370065119e-301),
    (1000, 1000, "greater", 9.3326361850325597e-302), (1000, 1000, "less", 1.0),
    (0, 1000, "two-sided", 1.8665272370065119e-301), (0, 1000, "greater", 1.0),
    (0, 1000, "less", 9.3326361850325597e-302),
]


@pytest.mark.parametrize("k, n, alternative, p", R_BINOM_TEST)
@pytest.mark.parametrize("zeros", [0, 3])
def test_matches_r_binom_test(k, n, alternative, p, zeros):
    res = sign_test(*_signs(k, n, zeros), alternative=alternative)
    assert res.pvalue == pytest.approx(p, rel=1e-12, abs=0)
    assert (res.statistic, res.n_positive, res.n_negative) == (k, k, n - k)
    assert (res.n_nonzero, res.n_pairs) == (n, n + zeros)


def test_far_tail_is_exact_not_underflowed():
    # n = 1,000 all positive: 2 * 2^-1000 = 2^-999 (~1.9e-301, a normal float64)
    x, y = np.ones(1000), np.zeros(1000)
    assert sign_test(x, y).pvalue == pytest.approx(math.ldexp(1.0, -999), rel=1e-13)
    assert sign_test(x, y, alternative="greater").pvalue == pytest.approx(
        math.ldexp(1.0, -1000), rel=1e-13)
    assert sign_test(x, y).pvalue > 0


def test_zeros_and_tied_differences():
    # the signed-rank test's "zeros10" data: d = 0, 1, -2, 2, 0, -1, 0, 3, 1, 2
    # (3 zeros, tied |d|): 5 positive, 2 negative; R: binom.test(5, 7, 0.5)
    x = [3, 5, 2, 7, 7, 1, 4, 6, 2, 8]
    y = [3, 4, 4, 5, 7, 2, 4, 3, 1, 6]
    res = sign_test(x, y)
    assert (res.n_pairs, res.n_nonzero, res.n_positive, res.n_negative) == (10, 7, 5, 2)
    assert res.pvalue == pytest.approx(0.45312500000000022, rel=1e-12)
    assert res.dominance == pytest.approx(3 / 7)


def test_matches_scipy_binomtest_on_a_grid():
    for n in range(1, 41):
        for k in range(n + 1):
            x, y = _signs(k, n)
            for alt in ALTS:
                ref = stats.binomtest(k, n, 0.5, alternative=alt).pvalue
                assert sign_test(x, y, alternative=alt).pvalue == pytest.approx(
                    ref, rel=1e-12), (k, n, alt)


def test_all_differences_zero():
    res = sign_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], alternative="greater")
    assert (res.pvalue, res.statistic, res.n_nonzero, res.n_pairs) == (1.0, 0.0, 0, 3)
    assert (res.dominance, res.dominance_low, res.dominance_high) == (0.0, -1.0, 1.0)
    assert "every difference is zero" in res.note


def test_dominance_sign_interval_and_symmetry():
    x, y = _signs(7, 10, zeros=2)
    res, rev = sign_test(x, y), sign_test(y, x)
    assert res.dominance == pytest.approx(0.4)             # (7 - 3) / 10: x larger more often
    assert rev.dominance == pytest.approx(-0.4)
    assert (rev.dominance_low, rev.dominance_high) == pytest.approx(
        (-res.dominance_high, -res.dominance_low), rel=1e-12)
    assert res.note == ""
    # the interval is Clopper–Pearson's for theta = 7/10 mapped by 2 theta - 1
    # (statsmodels' proportion_confint, independent code)
    lo, hi = _cp_reference(7, 10, 0.9)
    res90 = sign_test(x, y, confidence=0.9)
    assert (res90.dominance_low, res90.dominance_high) == pytest.approx(
        (2 * lo - 1, 2 * hi - 1), rel=1e-12)
    assert res90.dominance_high - res90.dominance_low < res.dominance_high - res.dominance_low
    assert -1 < res.dominance_low < res.dominance < res.dominance_high < 1
    # one-sided alternatives mirror each other
    g = sign_test(x, y, alternative="greater").pvalue
    assert sign_test(y, x, alternative="less").pvalue == g
    # every difference of one sign: the interval is not degenerate
    one = sign_test(np.ones(8), np.zeros(8))
    assert one.dominance == 1.0 and one.dominance_high == 1.0 and 0 < one.dominance_low < 1


def test_interval_stays_inside_minus_one_one_when_every_sign_agrees():
    # Wilson's limit at k = 0 or n is 0 or 1 exactly only in exact arithmetic: unclipped,
    # rounding puts it 1e-17 outside at e.g. n = 16 (upper) and n = 27 (lower)
    for n in range(1, 200):
        pos, neg = sign_test(np.ones(n), np.zeros(n)), sign_test(np.zeros(n), np.ones(n))
        assert pos.dominance_high == 1.0 and -1.0 < pos.dominance_low
        assert neg.dominance_low == -1.0 and neg.dominance_high < 1.0


def test_wilson_interval_equals_statsmodels_and_is_the_models_one():
    import kvstats.models.retrieval as retrieval

    assert retrieval.wilson_interval is wilson_interval   # one implementation
    _every_k_equals(wilson_interval, _wilson_reference, rtol=1e-12)


def _every_k_equals(interval, reference, rtol):
    """``interval`` at every k of n = 1, 2, 5, 17, 100 equals ``reference`` (95%), with exact
    ends (0 at k = 0, 1 at k = n, not 1e-16 off); the k = n/2 limits, for further checks."""
    middles = {}
    for n in (1, 2, 5, 17, 100):
        k = np.arange(n + 1)
        lo, hi = interval(k, np.full(n + 1, n), 0.95)
        ref_lo, ref_hi = reference(k, n, 0.95)
        np.testing.assert_allclose(lo, ref_lo, rtol=rtol, atol=1e-15)
        np.testing.assert_allclose(hi, ref_hi, rtol=rtol, atol=1e-15)
        assert lo[0] == 0.0 and hi[-1] == 1.0
        middles[n] = (lo[n // 2], hi[n // 2])
    return middles


def test_clopper_pearson_equals_references_and_agrees_with_the_test():
    # statsmodels' "beta" interval and scipy's binomtest(...).proportion_ci("exact")
    # (independent code); R: binom.test(8, 10)$conf.int = 0.4439045 0.9747893
    lo, hi = clopper_pearson_interval(8, 10)
    assert (round(float(lo), 7), round(float(hi), 7)) == (0.4439045, 0.9747893)
    for n, middle in _every_k_equals(clopper_pearson_interval, _cp_reference, rtol=1e-10).items():
        ci = stats.binomtest(n // 2, n).proportion_ci(0.95, method="exact")
        assert middle == pytest.approx((ci.low, ci.high), rel=1e-10)
    # the dominance interval excludes 0 exactly when the two-sided sign test rejects at
    # 1 - confidence (a referee found Wilson's excluding 0 in 188 of 20300 (k, n), n <= 200,
    # where the test did not reject: 4 of 4 pairs of one sign, p = 0.125)
    for n in range(1, 201):
        k = np.arange(n + 1)
        p = np.array([binom_test_half(int(j), n) for j in k])
        for conf in (0.9, 0.95):
            lo, hi = clopper_pearson_interval(k, np.full(n + 1, n), conf)
            excludes = (lo > 0.5) | (hi < 0.5)
            np.testing.assert_array_equal(excludes, p < 1 - conf, err_msg=f"n={n}, c={conf}")
    res = sign_test(np.ones(4), np.zeros(4))
    assert res.pvalue == 0.125 and res.dominance_low < 0 < res.dominance_high


def test_binom_test_half_is_mcnemar_and_checks_its_input():
    from kvstats.models.retrieval import mcnemar_exact

    # McNemar's exact test is the sign test of the discordant pairs (b vs c)
    ref = [1] * 9 + [0] * 3 + [1] * 5
    other = [0] * 9 + [1] * 3 + [1] * 5
    assert mcnemar_exact(ref, other).pvalue == binom_test_half(9, 12) == pytest.approx(0.14599609375)
    for bad in ((3, 2), (-1, 4), (1.5, 4), (0, 0)):
        with pytest.raises(ValueError, match="k and n must be integer counts"):
            binom_test_half(*bad)
    with pytest.raises(ValueError, match="alternative must be one of"):
        binom_test_half(1, 2, "both")


def test_values_beyond_float64_range_keep_their_sign():
    res = sign_test([1e308, -1e308, 5.0], [-1e308, 1e308, 5.0])
    assert (res.n_positive, res.n_negative, res.n_nonzero) == (1, 1, 2)


def test_result_frame_columns():
    frame = sign_test([1.0, 2.0], [0.0, 3.0]).to_frame()
    assert list(frame.columns) == [
        "test", "statistic", "pvalue", "alternative", "n_pairs", "n_nonzero", "n_positive",
        "n_negative", "dominance", "dominance_low", "dominance_high", "confidence", "note"]
    assert frame["test"].iloc[0] == "sign_test"
    assert isinstance(sign_test([1.0], [2.0]), SignTestResult)


def test_bad_input():
    good = np.arange(5.0)
    with pytest.raises(ValueError, match=r"x and y must be paired .* len\(x\)=5, len\(y\)=4"):
        sign_test(good, good[:4])
    with pytest.raises(ValueError, match="x must not be empty"):
        sign_test([], [])
    with pytest.raises(ValueError, match="y must not contain NaN"):
        sign_test(good, [1.0, np.nan, 2, 3, 4])
    with pytest.raises(ValueError, match="x must be a 1-D sample"):
        sign_test(np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="alternative must be one of"):
        sign_test(good, good + 1, alternative="two.sided")
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="confidence must be in"):
            sign_test(good, good + 1, confidence=bad)
    with pytest.raises(TypeError):
        sign_test(good, good, "greater")     # options are keyword-only


# --- the skewed differences: the sign test and the signed rank disagree ----------------

def test_infinities_are_values_ordered_within_their_pair():
    """Only the order within a pair is read: +inf beats any finite value, equal infinities
    tie, so the result equals that of finite stand-ins with the same orders."""
    inf = np.inf
    x = [inf, 1.0, inf, -inf, 3.0, -inf, 2.0]
    y = [inf, 0.0, 2.0, 0.0, 1.0, -inf, 5.0]
    stand_in_x = [9.0, 1.0, 9.0, -9.0, 3.0, -9.0, 2.0]
    stand_in_y = [9.0, 0.0, 2.0, 0.0, 1.0, -9.0, 5.0]
    res, ref = sign_test(x, y), sign_test(stand_in_x, stand_in_y)
    assert (res.n_positive, res.n_negative, res.n_nonzero) == (3, 2, 5)
    assert (res.pvalue, res.dominance, res.dominance_low) == (
        ref.pvalue, ref.dominance, ref.dominance_low)


def test_sign_test_and_signed_rank_point_opposite_ways_on_skewed_differences():
    # the docstring's example
    d = np.array([1.0, 2.0, 3.0, -20.0, -30.0])
    assert sign_test(d, np.zeros(5)).dominance == pytest.approx(0.2)
    assert wilcoxon_signed_rank(d, np.zeros(5)).rank_biserial == pytest.approx(-0.2)
    # the report's case in miniature: x is smaller on 120 of 200 pairs (small margins),
    # larger on 80 by far (rare catastrophes). The sign test: x smaller more often
    # (R: binom.test(80, 200, 0.5): p = 0.0056851559967503245); the signed rank: x larger
    d = np.concatenate([-0.01 * np.arange(1, 121), 100.0 + np.arange(1, 81)])
    st, sr = sign_test(d, np.zeros(200)), wilcoxon_signed_rank(d, np.zeros(200))
    assert st.dominance == pytest.approx(-0.2) and st.dominance_high < 0
    assert st.pvalue == pytest.approx(0.0056851559967503245, rel=1e-12)
    assert st.pvalue < 0.01
    assert sr.rank_biserial > 0.25 and sr.rank_biserial_low > 0 and sr.pvalue < 0.01


# --- exact size under the null ----------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _rejection_region(n, alpha, alternative):
    """k with binomtest p <= alpha (scipy: independent of sign_test), as a boolean mask."""
    return np.array([stats.binomtest(k, n, 0.5, alternative=alternative).pvalue <= alpha
                     for k in range(n + 1)])


def _rejection_probability(n, alpha, alternative, theta=0.5):
    return float(stats.binom.pmf(np.arange(n + 1), n, theta)[
        _rejection_region(n, alpha, alternative)].sum())


@pytest.mark.parametrize("alternative", ALTS)
def test_exact_size_equals_the_attainable_level(alternative):
    # For every n <= 60 and every attainable p-value a of the test, P_null(p <= a) = a
    # exactly (the binomial pmf summed over the k with p(k) <= a): the defining property
    # of an exact test; and at alpha = 0.05 the size is the largest attainable a <= 0.05
    for n in range(1, 61):
        pvals = np.array([sign_test(*_signs(k, n), alternative=alternative).pvalue
                          for k in range(n + 1)])
        pmf = stats.binom.pmf(np.arange(n + 1), n, 0.5)
        for a in np.unique(pvals):
            assert pmf[pvals <= a].sum() == pytest.approx(a, rel=1e-10), (n, a)
        attain = pvals[pvals <= 0.05]
        size = pmf[pvals <= 0.05].sum()
        assert size == pytest.approx(attain.max() if attain.size else 0.0, rel=1e-10, abs=0)
        assert size <= 0.05


def _pairs(rng, n, rho, quantize=False):
    """n exchangeable pairs: bivariate normal with correlation rho (rounded if quantize)."""
    z = rng.normal(size=(n, 2))
    x = z[:, 0]
    y = rho * z[:, 0] + math.sqrt(1 - rho**2) * z[:, 1]
    return (np.round(x), np.round(y)) if quantize else (x, y)


NULL_DESIGNS = {
    # name: (n, rho, quantize)
    "independent-40": (40, 0.0, False),
    "correlated+0.95-200": (200, 0.95, False),
    "anti-correlated-0.66-200": (200, -0.66, False),
    "quantized+0.9-100 (about 65% of the differences zero)": (100, 0.9, True),
}


@pytest.mark.parametrize("design", list(NULL_DESIGNS))
@pytest.mark.parametrize("alternative", ["two-sided", "greater"])
def test_null_rejection_rate_is_the_exact_size(design, alternative):
    # 1,000 null replicates: the rejection rate at alpha = 0.05 is compared with its exact
    # expectation, the mean over replicates of the test's size at that replicate's
    # n_nonzero (conditional test: zeros change n, not the validity), within 3.5 sd
    n, rho, quantize = NULL_DESIGNS[design]
    rng = np.random.default_rng(list(NULL_DESIGNS).index(design) + 10 * len(alternative))
    reps, alpha = 1000, 0.05
    rejected, expected = 0, 0.0
    for _ in range(reps):
        res = sign_test(*_pairs(rng, n, rho, quantize), alternative=alternative)
        rejected += res.pvalue <= alpha
        expected += _rejection_probability(res.n_nonzero, alpha, alternative)
    expected /= reps
    assert 0.02 < expected <= alpha
    sd = math.sqrt(expected * (1 - expected) / reps)
    assert abs(rejected / reps - expected) <= 3.5 * sd, (rejected / reps, expected)


# --- power and interval coverage ---------------------------------------------------------

@pytest.mark.parametrize("alternative", ["two-sided", "greater"])
def test_power_under_a_shift(alternative):
    # d ~ N(0.5, 1) at n = 30: theta = P(D > 0) = Phi(0.5) = 0.691; the exact power is the
    # Bin(30, theta) probability of the rejection region (0.59 two-sided, 0.71 greater);
    # 600 simulated replicates within 3.5 sd of it, and a null shift of the other sign
    # is (almost) never declared
    rng = np.random.default_rng(3)
    n, reps = 30, 600
    theta = stats.norm.cdf(0.5)
    exact = _rejection_probability(n, 0.05, alternative, theta)
    assert exact > 0.5
    hits = 0
    for _ in range(reps):
        z = rng.normal(0, 3, n)          # a shared trial effect: it cancels in the pairs
        x = z + rng.normal(0.5, 1, n)
        hits += sign_test(x, z, alternative=alternative).pvalue <= 0.05
    assert abs(hits / reps - exact) <= 3.5 * math.sqrt(exact * (1 - exact) / reps)
    # the same data swapped: "greater" sees no effect in the wrong direction
    if alternative == "greater":
        wrong = sum(sign_test(z, z + rng.normal(0.5, 1, n), alternative="greater").pvalue
                    <= 0.05 for _ in range(200))
        assert wrong <= 2


def _exact_coverage(n, theta, confidence):
    """P(theta in the sign test's Clopper–Pearson interval) under Bin(n, theta), from
    statsmodels' interval (independent code)."""
    k = np.arange(n + 1)
    lo, hi = _cp_reference(k, n, confidence)
    inside = (lo <= theta) & (theta <= hi)
    return float(stats.binom.pmf(k, n, theta)[inside].sum())


COVERAGE_DESIGNS = {
    # name: (draw of the differences, P(D > 0 | D != 0))
    "normal+0.5, n=30": (lambda rng: rng.normal(0.5, 1, 30), stats.norm.cdf(0.5)),
    # rounded N(0.3, 1): d > 0 iff v >= 0.5, d < 0 iff v < -0.5; about 37% zeros
    "rounded normal+0.3, n=80": (
        lambda rng: np.round(rng.normal(0.3, 1, 80)),
        stats.norm.sf(0.2) / (stats.norm.sf(0.2) + stats.norm.cdf(-0.8))),
}


@pytest.mark.parametrize("design", list(COVERAGE_DESIGNS))
def test_interval_coverage(design):
    # 1,000 replicates: coverage of the true dominance 2 theta - 1 within 3.5 sd of its
    # exact expectation (mean over replicates of the interval's exact coverage at that
    # replicate's n_nonzero), which itself lies at or above the nominal 0.95
    draw, theta = COVERAGE_DESIGNS[design]
    rng = np.random.default_rng(7)
    reps, hits, expected = 1000, 0, 0.0
    for _ in range(reps):
        d = draw(rng)
        res = sign_test(d, np.zeros(d.size))
        hits += res.dominance_low <= 2 * theta - 1 <= res.dominance_high
        expected += _exact_coverage(res.n_nonzero, theta, 0.95)
    expected /= reps
    assert 0.95 <= expected <= 0.98, expected
    sd = math.sqrt(expected * (1 - expected) / reps)
    assert abs(hits / reps - expected) <= 3.5 * sd, (hits / reps, expected)


# --- larger runs: the slow tests and the docs' tables ------------------------------------

def _null_rate(design, alternative, reps, seed):
    """(rejection rate at 0.05, its exact expectation, mean n_nonzero) over ``reps``."""
    n, rho, quantize = NULL_DESIGNS[design]
    rng = np.random.default_rng(seed)
    rejected, expected, nonzero = 0, 0.0, 0
    for _ in range(reps):
        res = sign_test(*_pairs(rng, n, rho, quantize), alternative=alternative)
        rejected += res.pvalue <= 0.05
        expected += _rejection_probability(res.n_nonzero, 0.05, alternative)
        nonzero += res.n_nonzero
    return rejected / reps, expected / reps, nonzero / reps


def _coverage(design, reps, seed):
    """(coverage of the true dominance, its exact expectation) over ``reps``."""
    draw, theta = COVERAGE_DESIGNS[design]
    rng = np.random.default_rng(seed)
    hits, expected = 0, 0.0
    for _ in range(reps):
        d = draw(rng)
        res = sign_test(d, np.zeros(d.size))
        hits += res.dominance_low <= 2 * theta - 1 <= res.dominance_high
        expected += _exact_coverage(res.n_nonzero, theta, 0.95)
    return hits / reps, expected / reps


@pytest.mark.slow
@pytest.mark.parametrize("design", list(NULL_DESIGNS))
def test_null_rejection_rate_large(design):
    reps = 2000 if replicate_scale() == "ci" else 40000
    for alternative in ("two-sided", "less"):
        rate, expected, _ = _null_rate(design, alternative, reps, seed=len(design))
        sd = math.sqrt(expected * (1 - expected) / reps)
        assert abs(rate - expected) <= 3.5 * sd, (design, alternative, rate, expected)


@pytest.mark.slow
@pytest.mark.parametrize("design", list(COVERAGE_DESIGNS))
def test_interval_coverage_large(design):
    reps = 2000 if replicate_scale() == "ci" else 40000
    cov, expected = _coverage(design, reps, seed=11)
    assert abs(cov - expected) <= 3.5 * math.sqrt(expected * (1 - expected) / reps)


def _main():
    parser = argparse.ArgumentParser(description="Sign test: null rejection rates and "
                                     "interval coverage against their exact expectations "
                                     "(the tables of docs/statistics.md).")
    parser.add_argument("--reps", type=int, default=10000, help="replicates per design")
    parser.add_argument("--seed", type=int, default=100, help="first seed (one per design)")
    args = parser.parse_args()
    start = time.time()
    print("| design | alternative | mean n_nonzero | p <= 0.05 | exact expectation | z |")
    print("|---|---|---|---|---|---|")
    for i, design in enumerate(NULL_DESIGNS):
        for alternative in ("two-sided", "greater"):
            rate, expected, nonzero = _null_rate(design, alternative, args.reps, args.seed + i)
            z = (rate - expected) / math.sqrt(expected * (1 - expected) / args.reps)
            print(f"| {design} | {alternative} | {nonzero:.1f} | {rate:.4f} | {expected:.4f} "
                  f"| {z:+.2f} |")
    print("\n| differences | coverage | exact expectation |\n|---|---|---|")
    for design in COVERAGE_DESIGNS:
        cov, expected = _coverage(design, args.reps, args.seed - 95)
        print(f"| {design} | {cov:.4f} | {expected:.4f} |")
    print("\n| n | exact coverage over theta = 0.05..0.95: min | mean | max |\n|---|---|---|---|")
    for n in (10, 20, 30, 60, 100, 400):
        covs = [_exact_coverage(n, t, 0.95) for t in np.linspace(0.05, 0.95, 91)]
        print(f"| {n} | {min(covs):.3f} | {np.mean(covs):.3f} | {max(covs):.3f} |")
    theta = stats.norm.cdf(0.5)
    print("\nexact power, d ~ N(0.5, 1), n = 30, alpha = 0.05: two-sided "
          f"{_rejection_probability(30, 0.05, 'two-sided', theta):.3f}, greater "
          f"{_rejection_probability(30, 0.05, 'greater', theta):.3f}")
    print(f"\n{time.time() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    _main()


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_min_attainable_p_is_the_smallest_p_any_signs_give(alternative):
    # every sign pattern of k nonzero differences (and zeros beside them): the floor is the
    # minimum of their exact p-values, reached; resolvable(a) is floor <= a
    from itertools import product

    from kvstats.stats import sign_test, sign_test_floor

    for k in range(0, 7):
        ps = []
        for signs in product([-1.0, 1.0], repeat=k):
            res = sign_test(np.r_[signs, 0.0, 0.0], np.zeros(k + 2), alternative=alternative)
            assert res.min_attainable_p == sign_test_floor(k, alternative)
            ps.append(res.pvalue)
        floor = sign_test_floor(k, alternative)
        assert min(ps, default=1.0) == floor
        assert res.resolvable(floor) and not res.resolvable(floor * (1 - 1e-9))
