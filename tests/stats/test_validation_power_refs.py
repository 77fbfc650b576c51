"""Power of the KS and energy tests against reference values, at stated alternatives.

KS (two-sided and each direction, equal sizes n): the exact Smirnov test rejects iff the
integer gap n·D reaches the smallest k whose null tail is ≤ α. For n_x = n_y = n the tail
is a finite alternating sum of binomial coefficients (the reflection-principle count of
lattice paths, Gnedenko–Korolyuk):

    P(D+ ≥ k/n) = C(2n, n − k) / C(2n, n),
    P(D  ≥ k/n) = 2 Σ_{j ≥ 1} (−1)^{j+1} C(2n, n − jk) / C(2n, n),

checked here against a complete enumeration of the relabellings at small n. On normal
samples with a location shift, ``ks_2samp`` must decide exactly as this rejection region
(and as ``scipy.stats.ks_2samp``), sample by sample, so its power is the region's.

KS exact under ties: on three-level data every count configuration of the two samples is
enumerated with its multinomial probability, and each one's conditional p-value computed
by brute force over the relabellings; ``ks_2samp_exact`` must give the same p-values, so
its power is the exact sum of the probabilities of the rejected configurations.

Energy (unpaired, and paired within-pair swaps): at small sizes every relabelling is
enumerated and the statistic written out as direct double sums over the distance matrix,
which gives each sample's exact permutation p-value q. At these sizes ``energy_test``
enumerates by default and returns q itself (checked on the first samples); with
``method="permutation"`` it draws B relabellings uniformly and independently, so its count of exceedances is Binomial(B, q) and it rejects
with probability π = P(Binomial(B, q) ≤ K), K the largest count with (1 + K)/(1 + B) ≤ α.
Over R independent samples its number of rejections has mean Σπ and variance Σπ(1 − π)
(a Poisson-binomial law): the reference value of its power at that alternative.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import cdist

from kvstats.stats import energy_test, ks_2samp

ALPHA = 0.05


# ---------------------------------------------------------------- KS: Gnedenko–Korolyuk

def _smirnov_tail(k: int, n: int, alternative: str) -> float:
    """P(n·D ≥ k) under H0 for two continuous samples of n each (k ≥ 1), exact rationals."""
    total = math.comb(2 * n, n)
    if alternative != "two-sided":
        return math.comb(2 * n, n - k) / total
    terms = sum((-1) ** (j + 1) * math.comb(2 * n, n - j * k) for j in range(1, n // k + 1))
    return 2 * terms / total


def _critical_gap(n: int, alternative: str, alpha: float = ALPHA) -> int:
    """The smallest k with P(n·D ≥ k) ≤ alpha, and no tail within 1e-6 of alpha (so that
    the p-value's rounding cannot flip a decision)."""
    tails = np.array([_smirnov_tail(k, n, alternative) for k in range(1, n + 1)])
    assert np.all(np.abs(tails / alpha - 1) > 1e-6)
    return int(np.argmax(tails <= alpha)) + 1


def _integer_gaps(x: np.ndarray, y: np.ndarray):
    """n·(F_x − F_y) along the pooled order, per row of the (R, n) samples x, y (no ties):
    its maximum is n·D+, minus its minimum n·D−."""
    order = np.argsort(np.concatenate([x, y], axis=1), axis=1)
    steps = np.where(order < x.shape[1], 1, -1)
    walk = np.cumsum(steps, axis=1)
    return walk.max(axis=1), -walk.min(axis=1)


@pytest.mark.parametrize("n", [5, 6])
def test_smirnov_tail_formula_equals_complete_enumeration(n):
    # every one of the C(2n, n) labellings of 2n distinct values is equally likely under H0
    walk = np.cumsum(np.where(_labellings_unpaired(n, n), 1, -1), axis=1)
    plus, minus = walk.max(axis=1), -walk.min(axis=1)
    for k in range(1, n + 1):
        assert _smirnov_tail(k, n, "greater") == pytest.approx(np.mean(plus >= k), abs=1e-15)
        assert _smirnov_tail(k, n, "two-sided") == pytest.approx(
            np.mean(np.maximum(plus, minus) >= k), abs=1e-15)


def test_ks_power_under_a_location_shift_is_the_exact_rejection_region(calib):
    # x ~ N(−0.6, 1), y ~ N(0, 1), n = 30 each (scipy's "exact" method, its default at
    # this size). F_x > F_y: "greater" (D+) and "two-sided" have power, "less" (D−) ≤ α.
    # The region (seed 31, 1,000 samples, 2026-12-02): two-sided n·D ≥ 11 (exact size
    # 0.0346), power 0.465; "greater" n·D+ ≥ 10 (size 0.0354), 0.581; "less" 0.000.
    # kvstats and scipy must make the region's decision on every sample.
    reps, n = calib.replicates(1000, 6000), 30
    rng = np.random.default_rng(31)
    x, y = rng.normal(-0.6, 1.0, (reps, n)), rng.normal(0.0, 1.0, (reps, n))
    plus, minus = _integer_gaps(x, y)
    gap = {"two-sided": np.maximum(plus, minus), "greater": plus, "less": minus}
    for alternative, g in gap.items():
        region = g >= _critical_gap(n, alternative)
        ours = np.array([ks_2samp(a, b, alternative=alternative).pvalue <= ALPHA
                         for a, b in zip(x, y)])
        scipys = np.array([stats.ks_2samp(a, b, alternative=alternative).pvalue <= ALPHA
                           for a, b in zip(x, y)])
        assert np.array_equal(ours, region), (alternative, ours.mean(), region.mean())
        assert np.array_equal(scipys, region), (alternative, scipys.mean(), region.mean())
        if alternative == "less":
            assert region.mean() <= ALPHA
        else:   # the comparison decides something: power well inside (0, 1)
            assert 0.3 < region.mean() < 0.8, (alternative, region.mean())


# ---------------------------------------------------------------- energy: enumeration

def _labellings_unpaired(n_x: int, n_y: int) -> np.ndarray:
    """Every n_x-subset of the n_x + n_y pooled rows as a bool row (True: labelled x)."""
    n = n_x + n_y
    rows = np.zeros((math.comb(n, n_x), n), dtype=bool)
    for i, subset in enumerate(itertools.combinations(range(n), n_x)):
        rows[i, list(subset)] = True
    return rows


def _labellings_paired(m: int) -> np.ndarray:
    """Every within-pair swap of m pairs (pooled rows X_1..X_m, Y_1..Y_m) as a bool row."""
    keep = ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1).astype(bool)
    return np.concatenate([keep, ~keep], axis=1)


def _exact_pvalues(X: np.ndarray, Y: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Exact permutation p-values of the V energy statistic, per sample (X: (R, n_x, d),
    Y: (R, n_y, d)): the share of the labellings whose statistic is ≥ the observed one.

    The statistic is written out: 2 mean_xy − mean_xx − mean_yy over ordered pairs of the
    Euclidean distance matrix, each mean a direct double sum over its block.
    """
    n_x, n_y = X.shape[1], Y.shape[1]
    a = labels.astype(float)
    b = 1.0 - a
    observed = np.flatnonzero((labels == (np.arange(n_x + n_y) < n_x)).all(axis=1))
    assert observed.size == 1
    out = np.empty(len(X))
    for r, pooled in enumerate(np.concatenate([X, Y], axis=1)):
        d = cdist(pooled, pooled)
        s_xx = np.einsum("li,ij,lj->l", a, d, a, optimize=True)
        s_yy = np.einsum("li,ij,lj->l", b, d, b, optimize=True)
        s_xy = np.einsum("li,ij,lj->l", a, d, b, optimize=True)
        t = 2 * s_xy / (n_x * n_y) - s_xx / n_x ** 2 - s_yy / n_y ** 2
        # equal in exact arithmetic (e.g. exchanging two equal-size samples) but summed in
        # another order: a tolerance far below any real difference, far above rounding
        tol = 1e-9 * d.mean()
        out[r] = np.mean(t >= t[observed[0]] - tol)
    return out


def _rejection_probability(q: np.ndarray, n_resamples: int) -> np.ndarray:
    """P(energy_test rejects at ALPHA | data): K exceedances among B uniform draws, each
    ≥ T_obs with probability q, and (1 + K)/(1 + B) ≤ ALPHA."""
    counts = np.arange(n_resamples + 1)
    k_max = counts[(1 + counts) / (1 + n_resamples) <= ALPHA].max()
    return stats.binom.cdf(k_max, n_resamples, q)


def _check_poisson_binomial(rejected: np.ndarray, pi: np.ndarray, level: float = 0.99):
    """The number of rejections against its mean Σπ, within z·sd + 1 (continuity)."""
    z = stats.norm.isf((1 - level) / 2)
    mean, sd = pi.sum(), math.sqrt(float(np.sum(pi * (1 - pi))))
    assert abs(rejected.sum() - mean) <= z * sd + 1, (
        f"rejection rate {rejected.mean():.4f}, reference {mean / pi.size:.4f} ± "
        f"{z * sd / pi.size:.4f} (n={pi.size})")


def _check_exact_path(X: np.ndarray, Y: np.ndarray, q: np.ndarray, paired: bool, k: int = 200):
    """At these sizes the default (method="auto") enumerates: its p-value is q itself."""
    for a, b, q_r in zip(X[:k], Y[:k], q[:k]):
        res = energy_test(a, b, paired=paired)
        assert res.method == "exact" and res.pvalue == q_r, (res.method, res.pvalue, q_r)


def test_energy_power_under_a_shift_is_the_exact_permutation_reference(calib):
    # 6 against 8 points in 2-D, X shifted by 1.3 in its first coordinate; the 3,003
    # labellings enumerated. B = 99. Measured 2026-12-02 (seed 41, 3,000 samples):
    # reference 0.461, energy_test 0.464; 20,000: 0.472 and 0.476.
    reps, n_x, n_y, B = calib.replicates(3000, 20000), 6, 8, 99
    rng = np.random.default_rng(41)
    X = rng.normal(size=(reps, n_x, 2)) + np.array([1.3, 0.0])
    Y = rng.normal(size=(reps, n_y, 2))
    q = _exact_pvalues(X, Y, _labellings_unpaired(n_x, n_y))
    pi = _rejection_probability(q, B)
    rejected = np.array([energy_test(a, b, n_resamples=B, seed=rng,
                                     method="permutation").pvalue <= ALPHA
                         for a, b in zip(X, Y)])
    assert 0.3 < pi.mean() < 0.7, pi.mean()
    _check_poisson_binomial(rejected, pi)
    _check_exact_path(X, Y, q, paired=False)


def test_paired_energy_power_under_a_shift_is_the_exact_swap_reference(calib):
    # 9 pairs in 2-D sharing Z (X = Z + e + shift, Y = Z + e', e, e' ~ N(0, 0.5²)), shift
    # 0.65 in the first coordinate; the 512 swaps enumerated. B = 99. Measured 2026-12-02
    # (seed 43, 3,000 samples): reference 0.477, energy_test 0.481; 20,000: 0.470, 0.473.
    reps, m, B = calib.replicates(3000, 20000), 9, 99
    rng = np.random.default_rng(43)
    Z = rng.normal(size=(reps, m, 2))
    X = Z + 0.5 * rng.normal(size=(reps, m, 2)) + np.array([0.65, 0.0])
    Y = Z + 0.5 * rng.normal(size=(reps, m, 2))
    q = _exact_pvalues(X, Y, _labellings_paired(m))
    pi = _rejection_probability(q, B)
    rejected = np.array([energy_test(a, b, n_resamples=B, seed=rng, paired=True,
                                     method="permutation").pvalue <= ALPHA
                         for a, b in zip(X, Y)])
    assert 0.3 < pi.mean() < 0.7, pi.mean()
    _check_poisson_binomial(rejected, pi)
    _check_exact_path(X, Y, q, paired=True)


# ---------------------------------------------------------------- KS exact under ties

def _compositions(n: int, parts: int) -> np.ndarray:
    """Every vector of `parts` nonnegative counts summing to n (rows)."""
    grid = np.array(list(itertools.product(range(n + 1), repeat=parts - 1)))
    grid = grid[grid.sum(axis=1) <= n]
    return np.column_stack([grid, n - grid.sum(axis=1)])


# (n_x, n_y): exact power two-sided, "greater"; scipy's continuous p-value's two-sided power
KS_EXACT_POWER = {(6, 8): (0.3455, 0.3674, 0.2264), (8, 6): (0.3514, 0.3693, 0.2249)}


@pytest.mark.parametrize("n_x, n_y", list(KS_EXACT_POWER))
def test_ks_exact_power_on_three_level_data_is_the_exhaustive_sum(n_x, n_y):
    # x, y take the values 0, 1, 2 with probabilities (0.6, 0.3, 0.1) and (0.15, 0.35, 0.5)
    # (x smaller: F_x > F_y), n_x = 6, n_y = 8 and the reverse (the exact walk mirrors the
    # samples when n_x > n_y). Every one of the 28 × 45 count
    # configurations is tested: its exact conditional p-value by brute force over the
    # 3,003 relabellings (the ECDF gap in integer units, read at the ends of the tie
    # blocks) must equal ks_2samp_exact's, so the test's power is the sum of the
    # configurations' probabilities where p ≤ α: exact, no simulation. Values (2026-12-02)
    # in KS_EXACT_POWER, beside scipy's continuous Smirnov p-value's (conservative under
    # ties) two-sided power on the same configurations; "less" ≤ 0.0002.
    from kvstats.stats import ks_2samp_exact

    prob_x, prob_y = np.array([0.6, 0.3, 0.1]), np.array([0.15, 0.35, 0.5])
    labels = _labellings_unpaired(n_x, n_y)          # in the pooled sorted order
    walks = np.cumsum(np.where(labels, n_y, -n_x), axis=1)
    power = {"two-sided": 0.0, "greater": 0.0, "less": 0.0}
    smirnov_power = 0.0
    for a in _compositions(n_x, 3):
        for b in _compositions(n_y, 3):
            sizes = a + b
            ends = np.cumsum(sizes)[sizes > 0] - 1   # last pooled position of each tie block
            observed = (np.cumsum(a) * n_y - np.cumsum(b) * n_x)[sizes > 0]
            gaps = {"greater": (np.max(walks[:, ends], axis=1).clip(0), max(observed.max(), 0)),
                    "less": (np.max(-walks[:, ends], axis=1).clip(0), max(-observed.min(), 0))}
            gaps["two-sided"] = (np.maximum(gaps["greater"][0], gaps["less"][0]),
                                 max(gaps["greater"][1], gaps["less"][1]))
            weight = stats.multinomial.pmf(a, n_x, prob_x) * stats.multinomial.pmf(b, n_y, prob_y)
            x, y = np.repeat([0.0, 1.0, 2.0], a), np.repeat([0.0, 1.0, 2.0], b)
            for alternative, (perm, obs) in gaps.items():
                brute = float(np.mean(perm >= obs))
                assert abs(brute / ALPHA - 1) > 1e-9          # no decision on a rounding edge
                ours = ks_2samp_exact(x, y, alternative=alternative).pvalue
                assert ours == pytest.approx(brute, rel=1e-9, abs=1e-15), (a, b, alternative)
                power[alternative] += weight * (brute <= ALPHA)
            smirnov_power += weight * (stats.ks_2samp(x, y).pvalue <= ALPHA)
    two_sided, greater, smirnov = KS_EXACT_POWER[n_x, n_y]
    assert power["two-sided"] == pytest.approx(two_sided, abs=5e-5)
    assert power["greater"] == pytest.approx(greater, abs=5e-5)
    assert power["less"] <= 2e-4
    assert smirnov_power == pytest.approx(smirnov, abs=5e-5)
