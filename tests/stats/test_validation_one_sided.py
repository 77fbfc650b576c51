"""One-sided tests of kvstats.stats: size under the null and power against a stated shift.

The existing calibration tests run the two-sided tests; the report and the
non-inferiority questions also use the one-sided ones. Here each direction is checked:
its size is α (binomial 99% band, the project's ``calib`` helpers), and its power
against a normal shift equals the large-sample closed form (Mann–Whitney, signed rank)
or, for KS, points the documented way (scipy's convention: "less" is F_x < F_y, x larger).
A direction swap, a doubled or halved one-sided p-value fails these.

Closed-form power (normal approximation to the statistic under the alternative, with its
exact mean and variance, as in Lehmann 1975, "Nonparametrics"): for U of
m values of N(δ, 1) against n of N(0, 1), θ = P(X > Y) = Φ(δ/√2) and p2 = P(X > Y, X > Y')
= Φ₂(δ/√2, δ/√2; ½), Var U = mn [θ(1 − θ) + (m + n − 2)(p2 − θ²)] (the two covariance
terms are equal under a shift of a symmetric law). For the signed-rank T⁺ of n differences
N(δ, 1): p1 = Φ(δ), p2 = Φ(√2 δ), p3 = P(D > 0, D + D' > 0), p4 = P(D + D' > 0, D + D'' > 0),
E T⁺ = n p1 + C(n, 2) p2 and Var T⁺ = n p1(1 − p1) + C(n, 2) p2(1 − p2) + 2n(n − 1)(p3 − p1 p2)
+ n(n − 1)(n − 2)(p4 − p2²). Checked 2026-12-02 against 100,000 simulated tests of scipy
(``stats.mannwhitneyu(x, y, alternative="greater", method="asymptotic", axis=1)`` on
N(δ, 1) vs N(0, 1) rows, seed 1; ``stats.wilcoxon(d, alternative="greater",
method="approx", correction=True, axis=1)`` on N(δ, 1) rows, seed 2): Mann–Whitney
δ = 0.5, 40 vs 40: formula 0.6922, simulated 0.6982 (30 vs 45: 0.6501 vs 0.6572); signed
rank δ = 0.3, n = 60: 0.7206 vs 0.7265 (δ = 0.35: 0.8348 vs 0.8351). Hence a slack of 0.02
beside the binomial band.
"""

import math

import numpy as np
import pytest
from scipy import stats

from kvstats.stats import ks_2samp, mann_whitney, wilcoxon_signed_rank
from kvstats.stats.ks_exact import ks_2samp_exact

ALPHA = 0.05
SLACK = 0.02   # the normal approximation's error in the power formulas (see the docstring)


def _bvn_cdf(a: float, b: float, rho: float) -> float:
    return float(stats.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf([a, b]))


def mann_whitney_power(delta: float, m: int, n: int, alpha: float = ALPHA) -> float:
    """Power of the one-sided asymptotic test (continuity ½) against a normal shift δ."""
    theta = stats.norm.cdf(delta / math.sqrt(2))
    p2 = _bvn_cdf(delta / math.sqrt(2), delta / math.sqrt(2), 0.5)
    var1 = m * n * (theta * (1 - theta) + (m + n - 2) * (p2 - theta ** 2))
    crit = m * n / 2 + 0.5 + stats.norm.isf(alpha) * math.sqrt(m * n * (m + n + 1) / 12)
    return float(stats.norm.sf((crit - m * n * theta) / math.sqrt(var1)))


def signed_rank_power(delta: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the one-sided normal-approximation signed-rank test (continuity ½)."""
    r2 = math.sqrt(2) * delta
    p1, p2 = stats.norm.cdf(delta), stats.norm.cdf(r2)
    p3, p4 = _bvn_cdf(delta, r2, 1 / math.sqrt(2)), _bvn_cdf(r2, r2, 0.5)
    pairs = n * (n - 1) / 2
    mean1 = n * p1 + pairs * p2
    var1 = (n * p1 * (1 - p1) + pairs * p2 * (1 - p2) + 2 * n * (n - 1) * (p3 - p1 * p2)
            + n * (n - 1) * (n - 2) * (p4 - p2 ** 2))
    crit = n * (n + 1) / 4 + 0.5 + stats.norm.isf(alpha) * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return float(stats.norm.sf((crit - mean1) / math.sqrt(var1)))


def test_power_formulas_at_the_null_are_the_tests_size():
    # at δ = 0 the alternative's mean and variance are the null's exactly (θ = ½,
    # p2 = Φ₂(0, 0; ½) = 1/3; p1 = p2 = ½, p3 = 3/8, p4 = 1/3), so each formula is the
    # normal test's size with its continuity correction: Φ̄(z_α + ½/σ0). A wrong term of
    # either variance moves it by more than the tolerance (the bivariate cdf's accuracy).
    for m, n in ((40, 40), (30, 45)):
        sd0 = math.sqrt(m * n * (m + n + 1) / 12)
        size = stats.norm.sf(stats.norm.isf(ALPHA) + 0.5 / sd0)
        assert mann_whitney_power(0.0, m, n) == pytest.approx(size, abs=1e-6)
    for n in (20, 60):
        sd0 = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        size = stats.norm.sf(stats.norm.isf(ALPHA) + 0.5 / sd0)
        assert signed_rank_power(0.0, n) == pytest.approx(size, abs=1e-6)


def _rates(pvalues):
    return {alt: float(np.mean(np.asarray(p) <= ALPHA)) for alt, p in pvalues.items()}


def test_mann_whitney_one_sided_size(calib):
    # 30 vs 40 normal values (asymptotic method); each direction alone has size α
    reps = calib.replicates(800, 10000)
    rng = np.random.default_rng(101)
    p = {"less": [], "greater": []}
    for _ in range(reps):
        x, y = rng.normal(size=30), rng.normal(size=40)
        for alt in p:
            p[alt].append(mann_whitney(x, y, alternative=alt).pvalue)
    for alt, rate in _rates(p).items():
        calib.rejection_rate(p[alt], alpha=ALPHA)
        assert rate > 0, alt


@pytest.mark.parametrize("alternative,sign", [("greater", 1.0), ("less", -1.0)])
def test_mann_whitney_one_sided_power_is_lehmanns(calib, alternative, sign):
    # x ~ N(±0.5, 1), 40 vs 40: power 0.692 (closed form above); the opposite direction
    # rejects almost never (below α)
    reps = calib.replicates(400, 6000)
    rng = np.random.default_rng(102 if alternative == "greater" else 103)
    right, wrong = [], []
    opposite = {"greater": "less", "less": "greater"}[alternative]
    for _ in range(reps):
        x, y = rng.normal(sign * 0.5, 1, 40), rng.normal(size=40)
        right.append(mann_whitney(x, y, alternative=alternative).pvalue)
        wrong.append(mann_whitney(x, y, alternative=opposite).pvalue)
    target = mann_whitney_power(0.5, 40, 40)
    lo, hi = calib.binom_interval(reps, target)
    rate = float(np.mean(np.array(right) <= ALPHA))
    assert lo - SLACK <= rate <= hi + SLACK, (rate, target)
    assert np.mean(np.array(wrong) <= ALPHA) <= calib.binom_interval(reps, ALPHA)[1]


def test_signed_rank_one_sided_size(calib):
    # 60 pairs (normal method), correlated 0.5 within a pair; each direction alone has size α
    # (the continuity correction makes it slightly conservative: slack 0.01 below)
    reps = calib.replicates(1500, 15000)
    rng = np.random.default_rng(104)
    p = {"less": [], "greater": []}
    for _ in range(reps):
        z = rng.normal(size=60)
        x, y = z + rng.normal(size=60), z + rng.normal(size=60)
        for alt in p:
            p[alt].append(wilcoxon_signed_rank(x, y, alternative=alt).pvalue)
    for alt in p:
        calib.rejection_rate(p[alt], alpha=ALPHA, slack_low=0.01)


@pytest.mark.parametrize("alternative,sign", [("greater", 1.0), ("less", -1.0)])
def test_signed_rank_one_sided_power_is_the_closed_form(calib, alternative, sign):
    # differences N(±0.3, 1), n = 60: power 0.721 (closed form above)
    reps = calib.replicates(800, 8000)
    rng = np.random.default_rng(105 if alternative == "greater" else 106)
    opposite = {"greater": "less", "less": "greater"}[alternative]
    right, wrong = [], []
    for _ in range(reps):
        d = rng.normal(sign * 0.3, 1, 60)
        right.append(wilcoxon_signed_rank(d, np.zeros(60), alternative=alternative).pvalue)
        wrong.append(wilcoxon_signed_rank(d, np.zeros(60), alternative=opposite).pvalue)
    target = signed_rank_power(0.3, 60)
    lo, hi = calib.binom_interval(reps, target)
    rate = float(np.mean(np.array(right) <= ALPHA))
    assert lo - SLACK <= rate <= hi + SLACK, (rate, target)
    assert np.mean(np.array(wrong) <= ALPHA) <= calib.binom_interval(reps, ALPHA)[1]


def test_ks_one_sided_size_without_ties(calib):
    # 30 vs 40 continuous values: scipy's exact one-sided distribution, discrete in steps of
    # 1/120; valid at every level and exact at the attainable level closest below α
    reps = calib.replicates(1000, 10000)
    rng = np.random.default_rng(107)
    p = {"less": [], "greater": []}
    for _ in range(reps):
        x, y = rng.normal(size=30), rng.normal(size=40)
        for alt in p:
            p[alt].append(ks_2samp(x, y, alternative=alt).pvalue)
    for alt, values in p.items():
        values = np.array(values)
        calib.discrete_validity(values)
        attain = np.unique(values)
        calib.rejection_rate(values, alpha=attain[attain <= ALPHA].max())


def test_ks_exact_one_sided_under_ties_is_valid_and_points_the_documented_way(calib):
    # 3-level data, 30 vs 30. Null: P(p <= a) <= a for each one-sided exact conditional test.
    # Shift: x on (0.2, 0.3, 0.5), y uniform on {0, 1, 2}, so x is stochastically larger
    # and F_x < F_y: "less" rejects, "greater" (below α) does not; and the exact
    # conditional p-value rejects far more often than the continuous Smirnov p-value
    # (ks_2samp, conservative under ties) on the same data (measured at 800 replicates,
    # 2026-12-02: 0.335 against 0.169).
    reps = calib.replicates(800, 8000)
    rng = np.random.default_rng(108)
    null = {"less": [], "greater": []}
    for _ in range(reps):
        x, y = rng.integers(0, 3, 30), rng.integers(0, 3, 30)
        for alt in null:
            null[alt].append(ks_2samp_exact(x, y, alternative=alt).pvalue)
    for values in null.values():
        calib.discrete_validity(np.array(values))
    shifted = {"less": [], "greater": [], "smirnov-less": []}
    with pytest.warns(UserWarning):
        for _ in range(reps):
            x, y = rng.choice(3, 30, p=[0.2, 0.3, 0.5]).astype(float), rng.integers(0, 3, 30).astype(float)
            shifted["less"].append(ks_2samp_exact(x, y, alternative="less").pvalue)
            shifted["greater"].append(ks_2samp_exact(x, y, alternative="greater").pvalue)
            shifted["smirnov-less"].append(ks_2samp(x, y, alternative="less").pvalue)
    rates = _rates(shifted)
    assert rates["greater"] <= calib.binom_interval(reps, ALPHA)[1], rates
    assert rates["less"] >= 1.5 * rates["smirnov-less"], rates
