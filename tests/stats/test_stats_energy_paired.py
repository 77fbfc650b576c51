"""The paired energy permutation test (within-pair swaps): the swap draws, size under
exchangeable pairs (positively and negatively correlated), power, the small-n exact
behaviour of the swap group, and energy_test == energy_test_sequential when h > B_max."""

import itertools

import numpy as np
import pytest

from kvstats.stats import energy_test
from kvstats.stats.energy import _permutation_statistics, _random_swaps
from kvstats.stats.sequential import energy_test_sequential


def _design(rng, m, kind, shift=0.0, dim=3):
    """m pairs (X_i, Y_i) sharing Z_i: "pos" X = Z + e, Y = Z + e'; "neg" Y = -Z + e'.

    Both are exchangeable within pairs (Z is symmetric), so the paired null holds; "neg"
    makes X_i and Y_i negatively correlated (-0.92), which the unpaired test mistakes
    for a difference. ``shift`` moves X.
    """
    z = rng.normal(size=(m, dim))
    x = z + 0.3 * rng.normal(size=(m, dim)) + shift
    y = (z if kind == "pos" else -z) + 0.3 * rng.normal(size=(m, dim))
    return x, y


def test_swap_labels():
    rng = np.random.default_rng(0)
    m, k = 50, 4000
    lab = _random_swaps(rng, k, m)
    assert lab.shape == (k, 2 * m) and lab.dtype == bool
    assert np.array_equal(lab[:, :m], ~lab[:, m:])       # exactly one of each pair is "x"
    keep = lab[:, :m].mean()                               # P(no swap) = 1/2
    assert abs(keep - 0.5) < 4 * np.sqrt(0.25 / (k * m))
    # independent across pairs: correlation of neighbouring pairs' swaps ~ 0
    c = np.corrcoef(lab[:, 0], lab[:, 1])[0, 1]
    assert abs(c) < 4 / np.sqrt(k)
    # drawing in two batches gives the same labellings as one draw (the sequential test)
    a = _random_swaps(np.random.default_rng(5), 300, 7)
    g = np.random.default_rng(5)
    b = np.concatenate([_random_swaps(g, 64, 7), _random_swaps(g, 236, 7)])
    assert np.array_equal(a, b)


def test_paired_statistic_and_fields():
    rng = np.random.default_rng(1)
    X, Y = _design(rng, 30, "pos", shift=0.2)
    p = energy_test(X, Y, n_resamples=199, seed=3, paired=True, standardize=True)
    u = energy_test(X, Y, n_resamples=199, seed=3, standardize=True)
    assert p.paired and not u.paired
    assert p.statistic == pytest.approx(u.statistic, rel=1e-12)   # same statistic
    assert p.null_distribution.shape == (199,)
    again = energy_test(X, Y, n_resamples=199, seed=3, paired=True, standardize=True)
    assert again.pvalue == p.pvalue                                # seeded, reproducible
    assert np.array_equal(again.null_distribution, p.null_distribution)
    assert "paired" in p.to_frame().columns


def test_paired_bad_input():
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"paired=True needs X and Y of the same length.*"
                                         r"len\(X\)=5, len\(Y\)=4"):
        energy_test(X, np.ones((4, 2)), paired=True)
    with pytest.raises(ValueError, match=r"len\(X\)=5, len\(Y\)=6"):
        energy_test_sequential(X, np.ones((6, 2)), max_permutations=9, paired=True)
    with pytest.raises(TypeError, match="paired must be True or False"):
        energy_test(X, np.ones((5, 2)), paired="yes")
    with pytest.raises(TypeError):
        energy_test(X, np.ones((5, 2)), 9, 0, False, "V", True)    # paired is keyword-only


def _rates(kind, reps, m=30, b=99, shift=0.0, seed=0, unpaired=True):
    """p-values of the paired test (and of the unpaired one on the same data, or NaN)."""
    rng = np.random.default_rng(seed)
    pp, pu = np.empty(reps), np.full(reps, np.nan)
    for i in range(reps):
        X, Y = _design(rng, m, kind, shift)
        pp[i] = energy_test(X, Y, n_resamples=b, seed=i, standardize=True, paired=True).pvalue
        if unpaired:
            pu[i] = energy_test(X, Y, n_resamples=b, seed=i, standardize=True).pvalue
    return pp, pu


@pytest.mark.parametrize("kind", ["pos", "neg"])
def test_size_under_exchangeable_pairs(calib, kind):
    # B = 99: p = (1 + #exceed)/100 is exactly uniform on {0.01, ..., 1} under the null,
    # so P(p <= 0.05) = 0.05 and P(p <= 0.01) = 0.01
    reps = 2000
    pp, pu = _rates(kind, reps, seed={"pos": 1, "neg": 2}[kind])
    calib.rejection_rate(pp, alpha=0.05)
    calib.rejection_rate(pp, alpha=0.01)
    calib.discrete_validity(pp)
    hi = calib.binom_interval(reps, 0.05, level=0.999)[1]
    if kind == "pos":
        # shared Z: the unpaired test is valid too, and very conservative (measured 0.000)
        assert np.mean(pu <= 0.05) <= hi
    else:
        # negatively correlated pairs: the unpaired test is anti-conservative (measured
        # 0.215 at 0.05) where the paired one holds its size
        assert np.mean(pu <= 0.05) > hi


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pos", "neg"])
def test_size_under_exchangeable_pairs_large(calib, kind):
    reps = calib.replicates(10000, 50000)
    pp, _ = _rates(kind, reps, m=40, b=199, seed={"pos": 11, "neg": 12}[kind], unpaired=False)
    calib.rejection_rate(pp, alpha=0.05)
    calib.rejection_rate(pp, alpha=0.01)
    calib.discrete_validity(pp)


def test_power_under_a_shift():
    # X shifted by 0.15 per coordinate against pair noise of sd 0.3 (shared Z of sd 1):
    # the paired test sees it (measured 0.68 at 0.05), the unpaired one drowns in Z (0.0)
    pp, pu = _rates("pos", 200, shift=0.15, seed=3)
    assert np.mean(pp <= 0.05) >= 0.5
    assert np.mean(pu <= 0.05) <= 0.05


@pytest.mark.parametrize("kind,standardize", [("V", False), ("U", True)])
@pytest.mark.parametrize("batch", [1, 64, 5000])
def test_agrees_with_sequential_when_nothing_stops(kind, standardize, batch):
    rng = np.random.default_rng(4)
    X, Y = _design(rng, 25, "pos", shift=0.05)
    ref = energy_test(X, Y, n_resamples=3000, seed=7, paired=True, kind=kind,
                      standardize=standardize)
    res = energy_test_sequential(X, Y, max_permutations=3000, h=4000, seed=7, paired=True,
                                 kind=kind, standardize=standardize, batch=batch)
    assert res.pvalue == ref.pvalue and res.paired and not res.stopped_early
    assert res.n_permutations == 3000
    assert res.n_exceed == round(ref.pvalue * 3001) - 1
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-12)


def _exact_swap_pvalue(X, Y):
    """Exact p over all 2^m within-pair swaps (each labelling once): #{T >= T_obs}/2^m."""
    m = len(X)
    Z = np.concatenate([X, Y])
    keep = np.array(list(itertools.product([True, False], repeat=m)))
    labels = np.concatenate([keep, ~keep], axis=1)            # row 0: no swap (observed)
    t, total = _permutation_statistics(Z, labels, "V")
    tol = 1e-10 * total / (2 * m * (2 * m - 1))
    return np.mean(t >= t[0] - tol), t


def test_small_n_exact_behaviour():
    rng = np.random.default_rng(6)
    m, b = 6, 20000
    X, Y = _design(rng, m, "pos", shift=0.3)
    p_exact, t = _exact_swap_pvalue(X, Y)
    # the full swap (last row) gives the observed statistic: the group's p is >= 2/2^m
    assert t[-1] == pytest.approx(t[0], rel=1e-12)
    assert p_exact >= 2.0 ** (1 - m)
    # the exact test (method "auto" enumerates the 32 swap classes) gives p_exact itself
    assert energy_test(X, Y, paired=True).pvalue == p_exact
    # Monte Carlo: E p = (1 + B p_exact)/(1 + B); within 4.5 standard errors
    res = energy_test(X, Y, n_resamples=b, seed=1, paired=True, method="permutation")
    expect = (1 + b * p_exact) / (1 + b)
    assert abs(res.pvalue - expect) <= 4.5 * np.sqrt(p_exact * (1 - p_exact) / b)
    # data at the group's extreme: only the observed labelling and the full swap reach
    # T_obs, exact p = 2^(1 - m) = 1/32, and the Monte Carlo p sits there, not at 1/(1 + B)
    Xe = Y + 5.0
    p_extreme, _ = _exact_swap_pvalue(Xe, Y)
    assert p_extreme == 2.0 ** (1 - m)
    res = energy_test(Xe, Y, n_resamples=b, seed=2, paired=True, method="permutation")
    assert abs(res.pvalue - 2.0 ** (1 - m)) <= 4.5 * np.sqrt(2.0 ** (1 - m) / b)
    assert res.pvalue > 10 / (1 + b)
    seq = energy_test_sequential(Xe, Y, max_permutations=999, seed=2, paired=True)
    assert seq.min_attainable_p == 2.0 ** (1 - m)               # the group's floor, not 1/1000
    assert not seq.resolvable(0.01) and seq.resolvable(0.05)
    # unpaired, 6 vs 6: the free relabellings' own floor 2/C(12, 6) = 1/462 > 1/1000 (it
    # said 1/1000 before 2026-12-02), reached exactly by these separated samples
    unpaired = energy_test_sequential(Xe, Y, max_permutations=999, seed=2)
    assert unpaired.min_attainable_p == 2 / 924 == _exact_free_pvalue(Xe, Y)
    assert not unpaired.resolvable(0.002) and unpaired.resolvable(0.0022)


def _exact_free_pvalue(X, Y):
    """Exact p over all C(n_x + n_y, n_x) free relabellings: #{T >= T_obs}/C."""
    n_x, n = len(X), len(X) + len(Y)
    Z = np.concatenate([X, Y])
    rows = [np.isin(np.arange(n), c) for c in itertools.combinations(range(n), n_x)]
    labels = np.array(rows)                                    # row 0: the observed labelling
    t, total = _permutation_statistics(Z, labels, "V")
    return np.mean(t >= t[0] - 1e-10 * total / (n * (n - 1)))


@pytest.mark.parametrize("n_x, n_y", [(3, 5), (5, 5), (2, 7)])
def test_unpaired_floor_is_the_exact_pvalue_of_separated_samples(n_x, n_y):
    # separated samples: the observed labelling (and, for equal sizes, the exchanged one)
    # alone reach T_obs, so the exact p is the floor min_attainable_p reports
    rng = np.random.default_rng(n_x + 10 * n_y)
    X, Y = rng.normal(size=(n_x, 3)) + 20.0, rng.normal(size=(n_y, 3))
    res = energy_test_sequential(X, Y, max_permutations=999, seed=0)
    assert res.min_attainable_p == pytest.approx(_exact_free_pvalue(X, Y), rel=1e-12)
    assert res.min_attainable_p > 1 / 1000


def test_paired_floor_counts_only_the_pairs_that_differ():
    # 8 pairs, 3 of them equal (X_i = Y_i): a swap of an equal pair leaves every statistic
    # as it is, so the group has 2^5 distinct labellings and the extreme p is 2^(1 - 5)
    # (it said 2^(1 - 8) before 2026-12-02); the exact enumeration over all 2^8 swaps agrees
    rng = np.random.default_rng(12)
    Y = rng.normal(size=(8, 3))
    X = Y + 5.0
    X[[1, 4, 6]] = Y[[1, 4, 6]]
    p_exact, _ = _exact_swap_pvalue(X, Y)
    seq = energy_test_sequential(X, Y, max_permutations=999, seed=0, paired=True)
    assert seq.min_attainable_p == 2.0 ** -4 == p_exact
    assert not seq.resolvable(0.05)
    # standardize divides both rows of a pair by the same scale: still equal
    assert energy_test_sequential(X, Y, max_permutations=99, seed=0, paired=True,
                                  standardize=True).min_attainable_p == 2.0 ** -4
    # every pair equal: every relabelling is the observed one
    same = energy_test_sequential(Y, Y.copy(), max_permutations=99, seed=0, paired=True)
    assert same.min_attainable_p == 1.0 and same.pvalue == 1.0


def test_one_pair_can_never_reject():
    # m = 1: both labellings give the same statistic, so every draw ties: p = 1
    res = energy_test([[0.0, 1.0]], [[3.0, 4.0]], n_resamples=99, paired=True)
    assert res.pvalue == 1.0
    seq = energy_test_sequential([[0.0, 1.0]], [[3.0, 4.0]], max_permutations=99, paired=True)
    assert seq.min_attainable_p == 1.0 and seq.pvalue == 1.0


def test_resolution_with_many_pairs_is_the_monte_carlo_one():
    # 21 pairs: 2^20 swap classes, beyond the exact enumeration's automatic bound
    rng = np.random.default_rng(9)
    X, Y = _design(rng, 21, "pos", shift=1.0)
    seq = energy_test_sequential(X, Y, max_permutations=999, seed=0, paired=True)
    assert seq.method == "permutation"
    assert seq.min_attainable_p == 1 / 1000                     # 2^-20 B = 0.001: (1 - f)^B ~ 1
    assert seq.pvalue == 1 / 1000 and not seq.stopped_early
    # 20 pairs are enumerated: their floor 2^-19, not 1/1000, is what the test reaches
    seq = energy_test_sequential(X[:20], Y[:20], max_permutations=999, seed=0, paired=True)
    assert seq.method == "exact" and seq.pvalue == seq.min_attainable_p == 2.0 ** -19
