"""Sequential (Besag–Clifford) permutation p-values: the resolution a family needs,
validity under the null (continuous and tied data), power at the report's family size,
early stopping on null pairs, equality with the fixed-B test when h is never reached."""

import math

import numpy as np
import pytest
from scipy import stats

from kvstats.stats import adjust_pvalues, energy_test
from kvstats.stats.sequential import (CORRECTIONS, energy_test_sequential,
                                      expected_null_permutations, required_resolution,
                                      sequential_permutation_test)

QUICK_FAMILY = 1140      # tests in the quick report's family (issue #12); 1,710 at d = 128


def _mean_diff(z, n_x):
    """|mean(x) - mean(y)| for every relabelling (row of perm) of the pooled z."""
    return lambda perm: np.abs(z[perm[:, :n_x]].mean(1) - z[perm[:, n_x:]].mean(1))


# ---------------------------------------------------------------- required resolution

def test_required_resolution_read_from_sequential_is_family_resolution_s():
    """kvstats.stats.family_resolution is its home; compare, the report and the command
    read it from kvstats.stats.sequential, which must give the same objects."""
    from kvstats.stats import family_resolution, sequential

    assert all(getattr(sequential, n) is getattr(family_resolution, n)
               for n in ("Resolution", "required_resolution", "_permutations_for"))
    assert set(family_resolution.__all__) <= set(sequential.__all__)


@pytest.mark.parametrize("m,correction,b", [
    # B = m/alpha - 1: the smallest B with 1/(1 + B) <= alpha/m (hand arithmetic)
    (QUICK_FAMILY, "holm", 22799), (1710, "holm", 34199), (QUICK_FAMILY, "bonferroni", 22799),
    (QUICK_FAMILY, "fdr_bh", 22799), (200, "hommel", 3999), (1, "holm", 19), (3, "holm", 59),
    # BY: alpha/(m H_m), H_1140 = 7.6158...; Sidak: 1 - 0.95**(1/1140) = 4.4993e-5
    (QUICK_FAMILY, "fdr_by", 173654), (QUICK_FAMILY, "sidak", 22225),
    (QUICK_FAMILY, "holm-sidak", 22225)])
def test_required_resolution_is_the_smallest_b_that_can_reject(m, correction, b):
    r = required_resolution(m, alpha=0.05, correction=correction)
    assert r.n_permutations == b
    assert r.min_attainable_p == 1 / (1 + b) <= r.p_needed < 1 / b
    # the worst case for the first step, through the very procedure a report uses: one
    # test at the smallest attainable p, every other p large
    family = np.full(m, 0.99)
    family[0] = r.min_attainable_p
    res = adjust_pvalues(family, method=correction)
    assert res.reject[0] and res.pvalues_adjusted[0] <= 0.05
    family[0] = 1 / b          # one permutation fewer cannot reject
    assert not adjust_pvalues(family, method=correction).reject[0]


def test_required_resolution_covers_the_rounding_of_the_adjusted_pvalue():
    # m = 195 at alpha = 0.03: 1/(1 + B) <= alpha/m first holds at B = 6499, where
    # 1/6500 = alpha/m, but the Holm-adjusted value 195 * (1/6500) rounds to
    # 0.030000000000000002 > alpha in float64; one more permutation brings it to <= alpha
    r = required_resolution(195, alpha=0.03)
    assert r.n_permutations == 6500 and r.p_needed == 0.03 / 195
    family = np.full(195, 0.99)
    family[0] = 1 / 6500
    assert adjust_pvalues(family, alpha=0.03).pvalues_adjusted[0] > 0.03
    family[0] = r.min_attainable_p
    assert adjust_pvalues(family, alpha=0.03).pvalues_adjusted[0] <= 0.03


def test_required_resolution_frame_and_issue_example():
    r = required_resolution(QUICK_FAMILY)
    assert r.p_needed == pytest.approx(0.05 / 1140, rel=1e-15)
    row = r.to_frame().iloc[0]
    assert row["test"] == "required_resolution" and row["n_permutations"] == 22799
    # issue #12: B = 499 gives p >= 1/500, which Holm over 1,140 tests makes >= 0.45
    assert min(1.0, 1140 / 500) > 0.45 and 499 < r.n_permutations


def test_permutations_for_is_the_smallest_b_and_ends_at_tiny_p():
    # smallest B with 1/(1 + B) <= p in float (as a p-value is compared): the bisection
    # agrees with a walk up from 1/p on every p where such a walk ends quickly, and ends
    # where it would not (past 2^53 a step of one no longer moves 1/(1 + B); the report
    # at --alpha 1e-20 hung there)
    from kvstats.stats.family_resolution import _permutations_for

    def walk(p):
        b = max(0, math.ceil(1.0 / p) - 2)
        while 1.0 / (1 + b) > p:
            b += 1
        return b

    rng = np.random.default_rng(5)
    ps = [*10 ** rng.uniform(-9, -0.05, 2000), *(0.05 / m for m in range(1, 2000)), 0.5, 0.99, 1.0]
    assert [_permutations_for(p) for p in ps] == [walk(p) for p in ps]
    for p in (2.5e-22, 1e-300):
        b = _permutations_for(p)
        assert 1.0 / (1 + b) <= p < 1.0 / b
    assert required_resolution(40, 1e-19).n_permutations > 3.9e20


def test_expected_null_permutations_formula():
    # E[N] = sum_{l=0}^{B-1} min(1, h/(l + 1)) (derivation in the docstring), summed directly
    for h, b in [(10, 22799), (10, 999), (5, 50), (1, 100)]:
        direct = sum(min(1.0, h / (l + 1)) for l in range(b))
        assert expected_null_permutations(h, b) == pytest.approx(direct, rel=1e-10)
    assert expected_null_permutations(20, 10) == 10.0


# ---------------------------------------------------------------- validity under the null

@pytest.mark.parametrize("data", ["continuous", "tied"])
def test_sequential_null_calibration(calib, data):
    # the stopping rule is exact on its support for continuous statistics:
    # P(p <= h/l) = h/l and P(p <= (g+1)/(B+1)) = (g+1)/(B+1) (Besag & Clifford 1991), so
    # with h = 10, B_max = 999 the levels 0.01, 0.05 and 0.10 are attained exactly
    reps = calib.replicates(4000, 40000)
    rng = np.random.default_rng({"continuous": 41, "tied": 42}[data])
    pvals = np.empty(reps)
    used = np.empty(reps)
    for i in range(reps):
        if data == "continuous":
            z, n_x = rng.normal(size=25), 10
        else:                               # 3 levels: most relabellings tie
            z, n_x = rng.integers(0, 3, size=35).astype(float), 15
        res = sequential_permutation_test(_mean_diff(z, n_x), z.size, max_permutations=999,
                                          h=10, seed=rng)
        pvals[i], used[i] = res.pvalue, res.n_permutations
    # measured 2026-12-01, P(p <= .01, .05, .10): continuous 0.0107, 0.0462, 0.0983 (CI,
    # 4,000 reps), 0.0098, 0.0496, 0.0997 (full, 40,000); tied 0.0065, 0.0375, 0.0735 (CI),
    # 0.0066, 0.0372, 0.0764 (full): conservative, as ties counted as >= make it
    for alpha in (0.01, 0.05, 0.1):
        calib.rejection_rate(pvals, alpha=alpha, upper_only=data == "tied")
    calib.discrete_validity(pvals)
    assert used.max() <= 999


@pytest.mark.parametrize("data", ["continuous-6d", "tied-2d"])
def test_energy_sequential_null_calibration(calib, data):
    reps = calib.replicates(2000, 20000)
    rng = np.random.default_rng({"continuous-6d": 51, "tied-2d": 52}[data])
    pvals = np.empty(reps)
    for i in range(reps):
        if data == "tied-2d":               # Poisson(0.7) counts, as in test_stats_energy
            X, Y = rng.poisson(0.7, (15, 2)), rng.poisson(0.7, (20, 2))
        else:
            X = rng.normal(size=(12, 6)) * [1, 10, 0.1, 1, 1, 1]
            Y = rng.normal(size=(18, 6)) * [1, 10, 0.1, 1, 1, 1]
        pvals[i] = energy_test_sequential(X, Y, max_permutations=999, seed=rng,
                                          standardize=True).pvalue
    # measured 2026-12-01, P(p <= .01, .05, .10): 6-D 0.007, 0.0475, 0.098 (CI, 2,000 reps),
    # 0.0107, 0.0505, 0.1009 (full, 20,000); Poisson 0.010, 0.045, 0.0985 (CI), 0.0097,
    # 0.0499, 0.1003 (full)
    for alpha in (0.01, 0.05, 0.1):
        calib.rejection_rate(pvals, alpha=alpha, upper_only=data == "tied-2d")
    calib.discrete_validity(pvals)


# ---------------------------------------------------------------- power at the family's size

def test_separated_samples_reach_the_resolution_and_are_rejected_under_holm():
    need = required_resolution(QUICK_FAMILY)
    rng = np.random.default_rng(61)
    # every component separates completely (like QKQV vs KV at n = 2 in issue #12),
    # 100 trials per scheme as in experiments/quick.toml
    X, Y = rng.uniform(0, 1, (100, 6)), rng.uniform(2, 3, (100, 6))
    res = energy_test_sequential(X, Y, alpha_needed=need.p_needed, seed=1, standardize=True)
    assert res.pvalue == res.min_attainable_p == 1 / 22800
    assert (res.n_exceed, res.n_permutations, res.stopped_early) == (0, 22799, False)
    assert res.resolvable(need.p_needed)
    # inside a family of 1,140 where every other test is null (uniform p): rejected
    family = np.concatenate([[res.pvalue], rng.uniform(size=QUICK_FAMILY - 1)])
    assert adjust_pvalues(family, method="holm").reject[0]
    # the fixed B = 499 test of today's report cannot: adjusted p = 1140/500 -> 1
    fixed = energy_test(X, Y, n_resamples=499, seed=1, standardize=True)
    family[0] = fixed.pvalue
    assert fixed.pvalue == 1 / 500 and not adjust_pvalues(family, method="holm").reject[0]


@pytest.mark.slow
def test_energy_sequential_power_at_quick_family_size(calib):
    # 6-D N(0, I) vs N(delta, I), 30 vs 30, rejection at the Holm first-step level
    # alpha/1140; measured 2026-12-01 (experiments/bench_sequential.py --power, 200 reps):
    # delta = 0.5 -> 0.37, 0.75 -> 0.935, 1.0 -> 1.000. Here: at least 0.9 at delta = 1.
    reps = calib.replicates(40, 200)
    need = required_resolution(QUICK_FAMILY).p_needed
    rng = np.random.default_rng(62)
    hits = sum(energy_test_sequential(rng.normal(size=(30, 6)), rng.normal(1.0, 1, (30, 6)),
                                      alpha_needed=need, seed=rng).pvalue <= need
               for _ in range(reps))
    assert hits / reps >= 0.9, hits


# ---------------------------------------------------------------- early stopping

def _null_permutation_law(h, b_max):
    """Survival P(N > l) = min(1, h/(l + 1)), l = 0..B-1, of the permutations N a sequential
    test uses under a continuous null (expected_null_permutations' derivation), with the
    mean and the standard deviation it implies."""
    surv = np.minimum(1.0, h / (np.arange(b_max) + 1.0))
    mean = surv.sum()
    return surv, mean, math.sqrt(((2 * np.arange(b_max) + 1) * surv).sum() - mean**2)


def test_null_pairs_stop_early():
    # continuous null: E[N] = h (1 + H_B - H_h) = 86.8 for h = 10, B = 22,799, i.e. 260x
    # fewer than the fixed-B test with the same resolution. N's right tail is heavy
    # (P(N > l) = 10/(l + 1) up to B: SD 669.5), so the sample SD understates the Monte
    # Carlo error of the mean (measured 2026-12-01 on the 50 vs 50 pairs of the docs: mean
    # 59.6, sample SE 12.2, exact SE 38.7): the mean is compared on the exact SD, and the
    # law itself at l = 20 and 100 within 99% binomial bands
    b_max = required_resolution(QUICK_FAMILY).n_permutations
    surv, expected, sd = _null_permutation_law(10, b_max)
    assert expected == pytest.approx(expected_null_permutations(10, b_max), rel=1e-10)
    assert (round(expected, 1), round(sd, 1)) == (86.8, 669.5)
    rng = np.random.default_rng(71)
    reps = 1500
    # (10 vs 10 would be enumerated exactly: the law is the drawn test's)
    used = np.array([energy_test_sequential(rng.normal(size=(10, 6)), rng.normal(size=(10, 6)),
                                            max_permutations=b_max, seed=rng,
                                            method="permutation").n_permutations
                     for _ in range(reps)])
    assert abs(used.mean() - expected) < 4 * sd / math.sqrt(reps), used.mean()
    for l in (20, 100):
        lo, hi = stats.binom.interval(0.99, reps, surv[l])
        assert lo <= np.count_nonzero(used > l) <= hi, (l, np.mean(used > l), surv[l])
    assert used.mean() < b_max / 100 and np.median(used) < 40


def test_stopping_rule_applied_draw_by_draw():
    # record every drawn statistic; the p-value is h/L for the h-th exceedance at draw L
    rng = np.random.default_rng(72)
    z = rng.normal(size=30)
    seen = []

    def stat(perm):
        out = _mean_diff(z, 12)(perm)
        seen.append(out)
        return out

    res = sequential_permutation_test(stat, 30, max_permutations=5000, h=7, seed=3)
    obs, draws = seen[0][0], np.concatenate(seen[1:])
    hits = np.flatnonzero(draws >= obs - 1e-10 * abs(obs))
    assert res.stopped_early and res.n_exceed == 7
    assert res.n_permutations == hits[6] + 1 and res.pvalue == 7 / (hits[6] + 1)
    # batching groups work only: the same relabellings give the same answer
    for batch in (1, 5, 1000):
        other = sequential_permutation_test(_mean_diff(z, 12), 30, max_permutations=5000, h=7,
                                            seed=3, batch=batch)
        assert (other.pvalue, other.n_permutations) == (res.pvalue, res.n_permutations)


def test_hth_exceedance_on_the_last_draw_of_a_batch():
    # a scripted statistic: draws 6, 12, ..., 54 and 64 (1-based) exceed the observed 0.5,
    # so the 10th exceedance is the last draw of the first batch of 64: p = 10/64 exactly
    hits = set(range(5, 54, 6)) | {63}
    count = [0]

    def stat(perm):
        if perm.shape[0] == 1 and (perm[0] == np.arange(perm.shape[1])).all() and count[0] == 0:
            count[0] = -1                      # the observed statistic, asked for first
            return np.array([0.5])
        start = max(count[0], 0)
        count[0] = start + len(perm)
        return np.array([1.0 if i in hits else 0.0 for i in range(start, start + len(perm))])

    assert len(hits) == 10
    res = sequential_permutation_test(stat, 8, max_permutations=1000, h=10, batch=64)
    assert (res.pvalue, res.n_permutations, res.n_exceed) == (10 / 64, 64, 10)


# ---------------------------------------------------------------- the fixed-B limit

def test_pvalue_is_the_fixed_b_formula_when_h_is_not_reached():
    rng = np.random.default_rng(81)
    z = np.concatenate([rng.normal(size=15), rng.normal(1.2, 1, size=15)])
    seen = []

    def stat(perm):
        out = _mean_diff(z, 15)(perm)
        seen.append(out)
        return out

    res = sequential_permutation_test(stat, 30, max_permutations=2000, h=50, seed=4)
    obs, draws = seen[0][0], np.concatenate(seen[1:])[:2000]
    count = int(np.count_nonzero(draws >= obs - 1e-10 * abs(obs)))
    assert not res.stopped_early and 0 < count < 50
    assert (res.n_exceed, res.n_permutations) == (count, 2000)
    assert res.pvalue == (1 + count) / 2001


@pytest.mark.parametrize("shift,standardize,kind", [(0.0, False, "V"), (0.5, True, "V"),
                                                    (0.7, True, "U")])
def test_energy_sequential_equals_energy_test_without_early_stop(shift, standardize, kind):
    # h > B_max: the same relabellings as energy_test with the same seed, the same p
    rng = np.random.default_rng(82)
    X, Y = rng.normal(size=(25, 6)), rng.normal(shift, 1, (20, 6))
    ref = energy_test(X, Y, n_resamples=999, seed=5, standardize=standardize, kind=kind)
    for batch in (64, 7):
        res = energy_test_sequential(X, Y, max_permutations=999, h=1000, seed=5,
                                     standardize=standardize, kind=kind, batch=batch)
        assert res.pvalue == ref.pvalue and res.n_permutations == 999
        assert res.statistic == pytest.approx(ref.statistic, rel=1e-12)
        assert res.test_statistic == pytest.approx(ref.test_statistic, rel=1e-12)



def test_energy_sequential_statistics_at_extreme_magnitudes():
    # data beyond 2**400 run scaled by 2**-e: statistic and test_statistic are scaled back
    # (test_statistic = n_x n_y/(n_x + n_y) statistic, as energy_test's)
    rng = np.random.default_rng(83)
    X, Y = rng.normal(size=(12, 3)) * 1e150, rng.normal(0.5, 1, (10, 3)) * 1e150
    ref = energy_test(X, Y, n_resamples=99, seed=2)
    res = energy_test_sequential(X, Y, max_permutations=99, h=1000, seed=2)
    assert res.pvalue == ref.pvalue and res.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert res.test_statistic == pytest.approx(12 * 10 / 22 * res.statistic, rel=1e-15)
    assert res.test_statistic == pytest.approx(ref.test_statistic, rel=1e-12)


# ---------------------------------------------------------------- degenerate and bad input

def test_constant_samples_give_p_one():
    res = energy_test_sequential(np.full((20, 6), 3.0), np.full((15, 6), 3.0),
                                 alpha_needed=0.05 / 1140, seed=0, standardize=True)
    assert (res.pvalue, res.n_permutations, res.stopped_early) == (1.0, 10, True)
    res = sequential_permutation_test(lambda perm: np.zeros(len(perm)), 9, max_permutations=99)
    assert (res.pvalue, res.n_permutations) == (1.0, 10)
    # the same (tied) value in both samples: every relabelling ties the observed one
    z = np.full(12, 2.5)
    assert sequential_permutation_test(_mean_diff(z, 5), 12, max_permutations=99).pvalue == 1.0
    # equal in real arithmetic, scattered by rounding: the n vertices of a rotated simplex
    # (all distances equal; see test_stats_energy's tie test). The energy test's tolerance
    # (1e-10 x the mean pooled distance) counts the ~1e-15 scatter as ties: p = 1 at once.
    # (compared exactly, about half of the relabellings fall below: p would be ~0.5)
    q, _ = np.linalg.qr(np.random.default_rng(20).normal(size=(20, 20)))
    res = energy_test_sequential(3.7 * q[:10], 3.7 * q[10:], max_permutations=199, seed=1,
                                 method="permutation")
    assert (res.pvalue, res.n_permutations) == (1.0, 10)
    # enumerated (10 vs 10: the 92378 classes of C(20, 10)): every one a tie, p = 1 exactly
    res = energy_test_sequential(3.7 * q[:10], 3.7 * q[10:], max_permutations=199, seed=1)
    assert (res.pvalue, res.n_permutations, res.method) == (1.0, 92378, "exact")


def test_tie_tolerance_rtol_and_atol():
    # t counts when t >= observed - (rtol |observed| + atol). Every relabelling here gives
    # a statistic 1e-12 below the observed one: with atol = 1e-9 all are ties (the test
    # stops at the h-th draw, p = h/h = 1); with atol = 0 and observed = 0 none is (fixed-B
    # p = 1/(1 + B)); with observed = 1 and the default rtol (1e-10 >> 1e-12) all are again.
    def stat(offset):
        return lambda perm: np.where((perm == np.arange(6)).all(axis=1), offset, offset - 1e-12)

    tied = sequential_permutation_test(stat(0.0), 6, max_permutations=99, h=5, atol=1e-9)
    assert (tied.pvalue, tied.n_permutations, tied.stopped_early) == (1.0, 5, True)
    strict = sequential_permutation_test(stat(0.0), 6, max_permutations=99, h=5)
    assert (strict.pvalue, strict.n_exceed) == (0.01, 0)
    relative = sequential_permutation_test(stat(1.0), 6, max_permutations=99, h=5)
    assert relative.pvalue == 1.0
    assert sequential_permutation_test(stat(1.0), 6, max_permutations=99, h=5,
                                       rtol=0.0).pvalue == 0.01


def test_non_finite_statistic_is_never_a_pvalue():
    rng = np.random.default_rng(91)
    X, Y = rng.normal(size=(20, 6)), rng.normal(size=(20, 6))
    # huge magnitudes are tested on data scaled by a power of two (exact): same p-value,
    # statistic scaled back; beyond float64 a ValueError, never a p-value
    small = energy_test_sequential(X, Y, max_permutations=99)
    big = energy_test_sequential(X * 2.0 ** 600, Y * 2.0 ** 600, max_permutations=99)
    assert big.pvalue == small.pvalue and big.statistic == small.statistic * 2.0 ** 600
    # the same message as energy_test's (one rescaling, _energy_core._unscale)
    with pytest.raises(ValueError, match="X and Y: the energy statistic exceeds the float64"):
        energy_test_sequential(X * 1e300, Y * 1e300 + 1e308, max_permutations=99)
    with pytest.raises(ValueError, match="non-finite statistic"):
        sequential_permutation_test(lambda p: np.full(len(p), np.nan), 5, max_permutations=9)

    def nan_after_observed(perm):
        return np.zeros(1) if len(perm) == 1 and (perm[0] == np.arange(5)).all() else \
            np.full(len(perm), np.nan)

    with pytest.raises(ValueError, match="stat returned NaN or inf for 9 of 9"):
        sequential_permutation_test(nan_after_observed, 5, max_permutations=9)
    # an infinite permuted statistic too (it was counted: +inf as an exceedance, -inf as
    # none, so -inf gave p = 1/10 here instead of an error)
    for value in (np.inf, -np.inf):
        def inf_after_observed(perm, value=value):
            return np.zeros(1) if len(perm) == 1 and (perm[0] == np.arange(5)).all() else \
                np.full(len(perm), value)

        with pytest.raises(ValueError, match="stat returned NaN or inf for 9 of 9"):
            sequential_permutation_test(inf_after_observed, 5, max_permutations=9)


def test_result_frame_and_resolvable():
    res = sequential_permutation_test(_mean_diff(np.arange(10.0), 5), 10, max_permutations=199,
                                      seed=0)
    assert res.min_attainable_p == 1 / 200
    assert res.resolvable(0.005) and not res.resolvable(0.0049)
    row = res.to_frame()
    assert list(row.columns) == ["test", "statistic", "pvalue", "n_permutations", "n_exceed",
                                 "stopped_early", "min_attainable_p", "max_permutations", "h"]
    e = energy_test_sequential(np.zeros((3, 2)), np.ones((4, 2)), max_permutations=34)
    assert e.to_frame()["test"].iloc[0] == "energy_test_sequential"
    assert {"test_statistic", "kind", "n_x", "dim"} <= set(e.to_frame().columns)
    with pytest.raises(TypeError, match="alpha_needed must be a finite real"):
        res.resolvable("0.05")


def test_bad_input():
    stat = _mean_diff(np.arange(6.0), 3)
    with pytest.raises(ValueError, match="exactly one of max_permutations and alpha_needed"):
        sequential_permutation_test(stat, 6)
    with pytest.raises(ValueError, match="exactly one of max_permutations and alpha_needed"):
        energy_test_sequential(np.zeros((3, 2)), np.ones((3, 2)), max_permutations=9,
                               alpha_needed=0.01)
    with pytest.raises(ValueError, match=r"h must be an integer in \[1, inf\]"):
        sequential_permutation_test(stat, 6, max_permutations=9, h=0)
    with pytest.raises(ValueError, match="alpha_needed must be in"):
        sequential_permutation_test(stat, 6, alpha_needed=0.0)
    with pytest.raises(TypeError, match="stat must be callable"):
        sequential_permutation_test("mean", 6, max_permutations=9)
    with pytest.raises(ValueError, match="stat must return shape"):
        sequential_permutation_test(lambda p: np.zeros(3), 6, max_permutations=9)
    with pytest.raises(ValueError, match="n_tests must be an integer in"):
        required_resolution(0)
    with pytest.raises(ValueError, match="correction must be one of"):
        required_resolution(10, correction="fdr_tsbh")
    with pytest.raises(ValueError, match="alpha must be in"):
        required_resolution(10, alpha=1.0)
    with pytest.raises(ValueError, match="X must be finite"):
        energy_test_sequential(np.array([[np.inf, 0.0]]), np.zeros((3, 2)), max_permutations=9)
    assert "fdr_tsbh" not in CORRECTIONS


# ---------------------------------------------------------------- Monte Carlo error

def _known_u_stat(n, k):
    """A statistic whose exceedance probability over uniform permutations of range(n) is
    exactly u = k/n: T = -1 when perm[0] >= k, else 0 (the identity gives T_obs = 0)."""
    return lambda perm: -(perm[:, 0] >= k).astype(float)


def test_pvalue_interval_formulas():
    from statsmodels.stats.proportion import proportion_confint

    # not stopped: Clopper-Pearson for n_exceed of n_permutations (statsmodels "beta")
    res = sequential_permutation_test(_known_u_stat(500, 1), 500, max_permutations=999,
                                      h=10, seed=3)
    assert not res.stopped_early and res.n_exceed < 10
    ref = proportion_confint(res.n_exceed, 999, alpha=0.01, method="beta")
    np.testing.assert_allclose(res.pvalue_interval(0.99), ref, rtol=1e-10, atol=1e-15)
    # stopped at the h-th exceedance on draw L: the inverse-binomial limits solve
    # P(Bin(L - 1, high) <= h - 1) = 0.005 and P(Bin(L, low) >= h) = 0.005
    res = sequential_permutation_test(_known_u_stat(50, 3), 50, max_permutations=999, h=10,
                                      seed=4)
    assert res.stopped_early
    low, high = res.pvalue_interval(0.99)
    L, h = res.n_permutations, res.h
    assert stats.binom.cdf(h - 1, L - 1, high) == pytest.approx(0.005, rel=1e-8)
    assert stats.binom.sf(h - 1, L, low) == pytest.approx(0.005, rel=1e-8)
    assert low < res.pvalue < high
    # the energy test's fixed B: Clopper-Pearson on its count
    rng = np.random.default_rng(5)
    e = energy_test(rng.normal(size=(20, 3)), rng.normal(0.5, 1, (20, 3)), n_resamples=499,
                    seed=0)
    g = round(e.pvalue * 500) - 1
    np.testing.assert_allclose(e.pvalue_interval(0.95),
                               proportion_confint(g, 499, alpha=0.05, method="beta"),
                               rtol=1e-10, atol=1e-15)
    with pytest.raises(ValueError, match="confidence must be in"):
        res.pvalue_interval(1.0)


@pytest.mark.parametrize("n, k, reps", [(250, 1, 300), (50, 1, 600), (10, 3, 600)])
def test_pvalue_interval_covers_the_permutation_pvalue(n, k, reps):
    # u = k/n = 0.004 (the test rarely stops), 0.02 (stops after ~500 draws), 0.3 (stops
    # after ~33): each one-sided 99% limit misses u with probability <= 0.005, whichever
    # way the test ended; at most the 99.9% binomial quantile of misses
    u = k / n
    rng = np.random.default_rng(n + k)
    miss_low = miss_high = stopped = 0
    for _ in range(reps):
        res = sequential_permutation_test(_known_u_stat(n, k), n, max_permutations=999, h=10,
                                          seed=rng)
        low, high = res.pvalue_interval(0.99)
        miss_low += low > u
        miss_high += high < u
        stopped += res.stopped_early
    bound = stats.binom.ppf(0.999, reps, 0.005)
    assert miss_low <= bound and miss_high <= bound, (miss_low, miss_high, stopped)
    assert stopped < reps / 10 if u < 0.01 else (stopped == reps) if u == 0.3 else True
