"""Energy distance and the permutation energy test: exactness against direct computations,
unbiasedness of the U-statistic, the blocked fast path, bounded memory, calibration, power."""

import math
import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import stats

from kvstats.stats import energy_distance, energy_test
from kvstats.stats.energy import _permutation_statistics


def _direct(X, Y, kind="V"):
    """Plain pairwise computation with broadcasting (reference for the 6-D cases)."""
    X = np.atleast_2d(np.asarray(X, float).reshape(len(X), -1))
    Y = np.atleast_2d(np.asarray(Y, float).reshape(len(Y), -1))

    def dist(A, B):
        return np.sqrt(((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    nx, ny = len(X), len(Y)
    cx = nx * nx if kind == "V" else nx * (nx - 1)
    cy = ny * ny if kind == "V" else ny * (ny - 1)
    return 2 * dist(X, Y).mean() - dist(X, X).sum() / cx - dist(Y, Y).sum() / cy


@pytest.mark.parametrize("n1,n2,seed", [(1, 1, 0), (5, 9, 1), (200, 150, 2), (40, 40, 3)])
def test_energy_distance_1d_equals_scipy_squared(n1, n2, seed):
    # reference: scipy.stats.energy_distance (V-statistic, square root of ours in 1-D)
    rng = np.random.default_rng(seed)
    x, y = rng.standard_t(3, n1), rng.normal(0.3, 2, n2)
    res = energy_distance(x, y)
    assert res.statistic == pytest.approx(stats.energy_distance(x, y) ** 2, rel=1e-10, abs=1e-14)
    assert res.statistic == pytest.approx(_direct(x, y), rel=1e-10, abs=1e-14)
    if min(n1, n2) >= 2:
        assert energy_distance(x, y, kind="U").statistic == pytest.approx(_direct(x, y, "U"),
                                                                          rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("kind", ["V", "U"])
def test_energy_distance_6d_equals_direct(kind):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(130, 6)) * [1, 2, 3, 0.1, 5, 1]
    Y = rng.normal(0.2, 1, size=(170, 6))
    res = energy_distance(X, Y, kind=kind)
    assert res.statistic == pytest.approx(_direct(X, Y, kind), rel=1e-10)
    assert res.statistic == pytest.approx(2 * res.mean_xy - res.mean_xx - res.mean_yy, rel=1e-12)
    assert float(res) == res.statistic


def test_energy_distance_blocks_and_float32():
    # more rows than one distance block (2048): the blocked sums equal the direct sums
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(2100, 2)), rng.normal(0.1, 1, size=(300, 2))
    ref = _direct(X[:700], Y)
    assert energy_distance(X[:700], Y).statistic == pytest.approx(ref, rel=1e-10)
    big = energy_distance(X, Y).statistic
    # reference: the same sums accumulated over explicit row chunks
    from scipy.spatial.distance import cdist
    sxx = sum(cdist(X[i:i + 500], X).sum() for i in range(0, 2100, 500))
    direct = 2 * cdist(X, Y).mean() - sxx / 2100**2 - cdist(Y, Y).mean()
    assert big == pytest.approx(direct, rel=1e-10)
    # float32 input is computed in float64: same result as the float64 copy of the data
    X32 = X[:100].astype(np.float32)
    assert energy_distance(X32, Y).statistic == energy_distance(X32.astype(np.float64), Y).statistic


def test_standardize_uses_pooled_column_sd():
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(50, 3)), rng.normal(0.5, 1, size=(60, 3))
    scale = np.array([10.0, 0.01, 3.0])          # e.g. dB next to radians
    res = energy_distance(X * scale, Y * scale, standardize=True)
    pooled_sd = np.concatenate([X, Y]).std(axis=0, ddof=1)
    assert res.statistic == pytest.approx(_direct(X / pooled_sd, Y / pooled_sd), rel=1e-10)
    assert res.statistic == pytest.approx(energy_distance(X, Y, standardize=True).statistic,
                                          rel=1e-10)
    # a constant column is left alone (it adds no distance)
    Xc = np.column_stack([X, np.full(50, 7.0)])
    Yc = np.column_stack([Y, np.full(60, 7.0)])
    assert energy_distance(Xc, Yc, standardize=True).statistic == pytest.approx(
        energy_distance(X, Y, standardize=True).statistic, rel=1e-12)
    # columns at 1e200 next to 1e-200: each column is scaled by its own power of two before
    # its SD (one scale for all would flush the small column to 0, a constant column)
    wide = np.array([1e200, 1e-200, 1.0])
    assert energy_distance(X * wide, Y * wide, standardize=True).statistic == pytest.approx(
        energy_distance(X, Y, standardize=True).statistic, rel=1e-12)


def _population_energy_normal(mu_x, sd_x, mu_y, sd_y):
    """Closed form of 2E|X-Y| - E|X-X'| - E|Y-Y'| for independent 1-D normals.

    E|Z| for Z ~ N(m, s^2) is s sqrt(2/pi) exp(-m^2 / 2 s^2) + m (1 - 2 Phi(-m/s)).
    """
    def abs_mean(m, s):
        return s * math.sqrt(2 / math.pi) * math.exp(-m * m / (2 * s * s)) + m * (1 - 2 * stats.norm.cdf(-m / s))

    exy = abs_mean(mu_x - mu_y, math.hypot(sd_x, sd_y))
    return 2 * exy - abs_mean(0, math.sqrt(2) * sd_x) - abs_mean(0, math.sqrt(2) * sd_y)


@pytest.mark.slow
def test_u_statistic_unbiased_v_biased(calib):
    reps = calib.replicates(4000, 40000)
    rng = np.random.default_rng(8)
    truth = _population_energy_normal(0.0, 1.0, 0.5, 2.0)
    u = np.empty(reps)
    v = np.empty(reps)
    for i in range(reps):   # tiny samples, where the V-statistic's bias is large
        x, y = rng.normal(0.0, 1.0, 4), rng.normal(0.5, 2.0, 5)
        u[i] = energy_distance(x, y, kind="U").statistic
        v[i] = energy_distance(x, y, kind="V").statistic
    se = u.std(ddof=1) / math.sqrt(reps)
    assert abs(u.mean() - truth) < 4 * se, (u.mean(), truth, se)
    # the same test applied to V fails (it can fail): V overestimates by E|X-X'|/n_x + ...
    assert v.mean() - truth > 4 * v.std(ddof=1) / math.sqrt(reps)


@pytest.mark.parametrize("kind", ["V", "U"])
def test_fast_permutation_statistics_equal_brute_force(kind):
    # reference: energy_distance on each explicitly relabelled split of the pooled sample
    rng = np.random.default_rng(9)
    Z = rng.normal(size=(37, 4))
    n_x = 15
    labels = np.zeros((12, 37), dtype=bool)
    for k in range(12):
        labels[k, rng.permutation(37)[:n_x]] = True
    brute = [energy_distance(Z[lab], Z[~lab], kind=kind).statistic for lab in labels]
    fast, _ = _permutation_statistics(Z, labels, kind)
    np.testing.assert_allclose(fast, brute, rtol=1e-10)
    # several distance blocks and permutation chunks give the same numbers
    blocked, _ = _permutation_statistics(Z, labels, kind, block=8, chunk=5)
    np.testing.assert_allclose(blocked, brute, rtol=1e-10)


def test_energy_test_observed_statistic_and_pvalue_formula():
    rng = np.random.default_rng(10)
    X, Y = rng.normal(size=(40, 6)), rng.normal(0.3, 1, size=(35, 6))
    for kind in ("V", "U"):
        for standardize in (False, True):
            res = energy_test(X, Y, n_resamples=199, seed=3, kind=kind, standardize=standardize)
            ref = energy_distance(X, Y, kind=kind, standardize=standardize).statistic
            assert res.statistic == pytest.approx(ref, rel=1e-10)
            assert res.test_statistic == pytest.approx(40 * 35 / 75 * ref, rel=1e-10)
            count = np.count_nonzero(res.null_distribution >= res.statistic)
            assert res.pvalue == (1 + count) / 200
            assert res.null_distribution.shape == (199,)
    # same seed, same p-value; different seed, different null draws
    a = energy_test(X, Y, n_resamples=99, seed=1)
    assert a.pvalue == energy_test(X, Y, n_resamples=99, seed=1).pvalue
    assert not np.array_equal(a.null_distribution,
                              energy_test(X, Y, n_resamples=99, seed=2).null_distribution)
    assert energy_test(X, Y, n_resamples=1).pvalue in (0.5, 1.0)


@pytest.mark.parametrize("dim,kind,standardize", [(1, "V", False), (6, "V", False),
                                                (6, "U", True)])
def test_energy_test_of_two_constant_samples_has_pvalue_one(dim, kind, standardize):
    # Every relabelling of a constant pooled sample has the observed statistic (0), and
    # ties count as >=: p = (1 + B) / (1 + B) = 1. Counting only T_perm > T_obs (the
    # mutation this guards against) gives 1 / (1 + B), the most significant value.
    X, Y = np.full((10, dim), 0.3), np.full((12, dim), 0.3)
    res = energy_test(X, Y, n_resamples=99, seed=0, kind=kind, standardize=standardize)
    assert res.statistic == 0.0
    assert res.pvalue == 1.0


@pytest.mark.parametrize("n", [8, 20])
def test_energy_test_counts_ties_up_to_rounding(n):
    # The n vertices of a regular simplex, randomly rotated and scaled: all pairwise
    # distances are equal, so every relabelling has the observed statistic exactly in real
    # arithmetic, while in floating point the permuted values scatter ~1e-15 (relative) on
    # both sides of it. The relative tolerance (1e-10 x the mean pooled distance) counts
    # them as ties: p = 1. Compared exactly (tolerance 0), p is 0.35 (n = 8), 0.985 (n = 20).
    rng = np.random.default_rng(n)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    points = 3.7 * q
    res = energy_test(points[: n // 2], points[n // 2:], n_resamples=199, seed=1)
    assert np.count_nonzero(res.null_distribution != res.statistic) > 0   # rounding did scatter
    assert res.pvalue == 1.0


def test_energy_test_tie_tolerance_is_relative_to_the_mean_distance():
    # ... and not wider: X = {0, 1, 2}, Y = {2 + eta, 3, 4}. Relabelling 2 <-> 2 + eta gives
    # a statistic 1.03 eta x the mean pooled distance below the observed one: a real
    # difference at eta = 1e-9 (10x the tolerance, 1e6x float rounding), never a tie.
    # (A tolerance of 1e-10 x the pooled distance *sum*, 30x wider here, counts it.)
    x, y = np.array([0.0, 1.0, 2.0]), np.array([2.0 + 1e-9, 3.0, 4.0])
    res = energy_test(x, y, n_resamples=999, seed=3, method="permutation")   # draws
    near = energy_distance(np.array([0.0, 1.0, 2.0 + 1e-9]), np.array([2.0, 3.0, 4.0])).statistic
    z = np.r_[x, y]
    gap = (res.statistic - near) / (np.abs(z[:, None] - z[None, :]).sum() / 30)
    assert 5e-10 < gap < 2e-9
    null = res.null_distribution
    assert np.count_nonzero(np.isclose(null, near, rtol=1e-13, atol=0)) > 20   # drawn
    assert res.pvalue == (1 + np.count_nonzero(null >= res.statistic - 1e-12)) / 1000
    # the exact test (3 vs 3: the 10 classes of C(6, 3) = 20 labellings) has the same rule
    exact = energy_test(x, y)
    assert exact.method == "exact" and exact.n_resamples == 10
    assert exact.pvalue == (1 + np.count_nonzero(exact.null_distribution >= exact.statistic - 1e-12)) / 10
    assert exact.pvalue == 0.1             # only the observed labelling is as extreme


def test_energy_test_matches_dcor_statistic():
    rng = np.random.default_rng(11)
    X, Y = rng.normal(size=(60, 6)), rng.normal(0.2, 1, size=(45, 6))
    ours = energy_test(X, Y, n_resamples=9)
    # reference: dcor 0.7, float(dcor.homogeneity.energy_test_statistic(X, Y)) on this data
    # (n m / (n + m) times the V-statistic); hard-coded because importing dcor compiles
    # numba code for ~15 s. experiments/bench_energy.py re-checks it live.
    assert ours.test_statistic == pytest.approx(4.360105952264691, rel=1e-10)


def test_energy_test_memory_is_bounded():
    # 6,000 pooled points: the full distance matrix alone would be 288 MB of float64
    rng = np.random.default_rng(12)
    X, Y = rng.normal(size=(3000, 6)), rng.normal(size=(3000, 6))
    tracemalloc.start()
    try:
        energy_test(X, Y, n_resamples=5, seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 120 * 2**20, f"peak {peak / 2**20:.0f} MB"
    # many permutations: working memory is capped at ~64 MB per stage (measured ~88 MB in
    # all); a float64 copy of the (B+1) x n labels would add 48 MB, the distance matrix 72 MB
    X, Y = X[:1500], Y[:1500]
    tracemalloc.start()
    try:
        energy_test(X, Y, n_resamples=1999, seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 115 * 2**20, f"peak {peak / 2**20:.0f} MB"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["continuous-6d", "tied-2d", "standardized-U"])
def test_energy_test_null_calibration(calib, kind):
    reps = calib.replicates(1000, 10000)
    rng = np.random.default_rng({"continuous-6d": 31, "tied-2d": 32, "standardized-U": 33}[kind])
    pvals = np.empty(reps)
    for i in range(reps):
        if kind == "tied-2d":      # Poisson(0.7) counts: most values 0 or 1
            X, Y = rng.poisson(0.7, (15, 2)), rng.poisson(0.7, (20, 2))
            pvals[i] = energy_test(X, Y, n_resamples=99, seed=rng).pvalue
        else:
            X = rng.normal(size=(12, 6)) * [1, 10, 0.1, 1, 1, 1]
            Y = rng.normal(size=(18, 6)) * [1, 10, 0.1, 1, 1, 1]
            std = kind == "standardized-U"
            pvals[i] = energy_test(X, Y, n_resamples=99, seed=rng, standardize=std,
                                   kind="U" if std else "V").pvalue
    # permutation p-values are discrete (multiples of 1/100) and valid by construction;
    # with continuous data P(p <= k/100) = k/100 exactly
    if kind == "tied-2d":
        calib.rejection_rate(pvals, alpha=0.05, upper_only=True)
    else:
        calib.rejection_rate(pvals, alpha=0.05)
    calib.discrete_validity(pvals)


def test_energy_test_power_on_clear_shift():
    rng = np.random.default_rng(13)
    pvals = [energy_test(rng.normal(size=(30, 6)), rng.normal(0.8, 1, size=(30, 6)),
                         n_resamples=99, seed=rng).pvalue for _ in range(40)]
    assert np.mean(np.array(pvals) <= 0.05) >= 0.95


def test_bad_input():
    X = np.zeros((5, 3))
    with pytest.raises(ValueError, match="X must not be empty"):
        energy_distance(np.zeros((0, 3)), X)
    with pytest.raises(ValueError, match="Y must be finite"):
        energy_distance(X, np.array([[1.0, np.nan, 0.0]]))
    with pytest.raises(ValueError, match="X must be finite"):
        energy_test(np.array([[np.inf, 0.0, 0.0]]), X)
    with pytest.raises(ValueError, match="same number of columns"):
        energy_distance(X, np.zeros((4, 2)))
    with pytest.raises(ValueError, match="X must be 1-D"):
        energy_distance(np.zeros((2, 2, 2)), X)
    with pytest.raises(ValueError, match="kind must be one of"):
        energy_distance(X, X, kind="W")
    with pytest.raises(ValueError, match="kind='U' needs at least 2"):
        energy_distance(X[:1], X, kind="U")
    with pytest.raises(ValueError, match="n_resamples must be an integer in"):
        energy_test(X, X, n_resamples=0)
    with pytest.raises(TypeError, match="n_resamples must be an integer"):
        energy_test(X, X, n_resamples=9.5)
    with pytest.raises(TypeError, match="standardize must be True or False"):
        energy_test(X, X, standardize="yes")
    with pytest.raises(TypeError, match="seed must be"):
        energy_test(X, X, seed="abc")


def test_random_subsets_are_uniform():
    # all C(6, 2) = 15 subsets equally likely: chi-square goodness of fit over 30,000 draws
    from kvstats.stats.energy import _random_subsets
    rows = _random_subsets(np.random.default_rng(14), 30000, 6, 2)
    assert (rows.sum(axis=1) == 2).all()
    codes = (rows * (1 << np.arange(6))).sum(axis=1)
    _, counts = np.unique(codes, return_counts=True)
    assert counts.size == 15
    assert stats.chisquare(counts).pvalue > 1e-3


# --- magnitudes across the float range (issue #12, point 5) -------------------------------

@pytest.mark.parametrize("scale", [2.0**-1000, 2.0**-700, 2.0**520, 2.0**660])
@pytest.mark.parametrize("standardize", [False, True])
def test_energy_test_is_scale_invariant_over_the_float_range(scale, standardize):
    # Before the fix: NaN statistic and p = 1/(B+1) at 1e160-1e200, p = 1 with standardize,
    # statistic 0 and p = 1 at 1e-200. A power-of-two scale is exact, so the statistic
    # must be the reference times the scale bit for bit, and the p-value the same.
    rng = np.random.default_rng(20)
    X, Y = rng.normal(size=(30, 3)), rng.normal(0.3, 1, size=(25, 3))
    ref = energy_test(X, Y, n_resamples=99, seed=1, standardize=standardize)
    res = energy_test(X * scale, Y * scale, n_resamples=99, seed=1, standardize=standardize)
    assert res.pvalue == ref.pvalue
    factor = 1.0 if standardize else scale
    assert res.statistic == ref.statistic * factor
    np.testing.assert_array_equal(res.null_distribution, ref.null_distribution * factor)
    dist = energy_distance(X * scale, Y * scale, standardize=standardize)
    assert dist.statistic == energy_distance(X, Y, standardize=standardize).statistic * factor


@pytest.mark.parametrize("scale", [1e160, 1e200, 1e-200])
def test_energy_at_the_issue_magnitudes(scale):
    rng = np.random.default_rng(21)
    X, Y = rng.normal(size=(30, 3)), rng.normal(size=(30, 3))
    ref = energy_test(X, Y, n_resamples=99, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no RuntimeWarning either
        res = energy_test(X * scale, Y * scale, n_resamples=99, seed=0)
        std = energy_test(X * scale, Y * scale, n_resamples=99, seed=0, standardize=True)
    assert res.pvalue == ref.pvalue and 0.1 < ref.pvalue < 0.9
    assert res.statistic == pytest.approx(ref.statistic * scale, rel=1e-12)
    assert std.pvalue == energy_test(X, Y, n_resamples=99, seed=0, standardize=True).pvalue
    # 1-D goes through the sorting formula: scaled too
    assert energy_distance(X[:, 0] * scale, Y[:, 0] * scale).statistic == pytest.approx(
        energy_distance(X[:, 0], Y[:, 0]).statistic * scale, rel=1e-12)


def test_energy_statistic_beyond_the_float_range_is_an_error():
    x, y = np.array([1.7e308, 1e308]), np.array([-1.7e308, -1e308])
    for f in (energy_distance, energy_test):
        with pytest.raises(ValueError, match="X and Y: the energy .* exceeds the float64 range"):
            f(x, y)


def test_non_finite_statistic_is_never_a_pvalue(monkeypatch):
    # the guard behind the scaling: with the scaling disabled, the overflowed (NaN)
    # statistics of 1e200 data must raise, not give p = 1/(B+1)
    from kvstats.stats import energy as energy_mod
    monkeypatch.setattr(energy_mod, "_unit_scale", lambda Z: (Z, 0))
    rng = np.random.default_rng(22)
    with pytest.raises(ValueError, match="energy statistics are not finite"):
        energy_test(rng.normal(size=(20, 3)) * 1e200, rng.normal(size=(20, 3)) * 1e200,
                    n_resamples=19)


def test_min_attainable_p_and_resolvable():
    # the design's resolution. Exact (small groups): the group's own floor (6 vs 6:
    # 2/C(12, 6) = 1/462; 5 vs 6: 1/C(11, 5), also 1/462; 6 pairs: 2^-5), whatever B.
    # Drawn: the median p-value on data at the group's extreme, 1/(1 + B) only while
    # (1 - floor)^B >= 1/2 (B = 99: 0.81); B = 999 and 9999 tie ~2.2 and ~21.6 times
    # (median 2 and 21: 3/1000 and 22/10000). The same value as energy_test_sequential reports.
    from kvstats.stats.family_resolution import monte_carlo_resolution
    from kvstats.stats.sequential import energy_test_sequential

    rng = np.random.default_rng(31)
    X, Y = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    for b, mc in ((99, 1 / 100), (999, 3 / 1000), (9999, 22 / 10000)):
        res = energy_test(X, Y, n_resamples=b, seed=0)
        seq = energy_test_sequential(X, Y, max_permutations=b, h=b + 1, seed=0)
        assert res.min_attainable_p == 2 / 924 == seq.min_attainable_p
        assert res.pvalue == seq.pvalue and res.method == seq.method == "exact"
        res = energy_test(X, Y, n_resamples=b, seed=0, method="permutation")
        seq = energy_test_sequential(X, Y, max_permutations=b, h=b + 1, seed=0,
                                     method="permutation")
        assert res.min_attainable_p == monte_carlo_resolution(2 / 924, b) == seq.min_attainable_p
        assert res.min_attainable_p == pytest.approx(mc, rel=1e-12)
        assert res.pvalue == seq.pvalue
    assert energy_test(X[:5], Y, n_resamples=9999).min_attainable_p == 1 / 462
    res = energy_test(X, Y, n_resamples=9999, paired=True)
    assert res.min_attainable_p == 2.0 ** -5
    # the default B = 999 cannot reject in a Holm family of 1,140 (issue #12), and says so
    big = energy_test(rng.normal(size=(40, 6)), rng.normal(3, 1, size=(40, 6)))
    assert big.pvalue == big.min_attainable_p == 1 / 1000
    assert big.resolvable(0.05 / 50) and not big.resolvable(0.05 / 51)
    assert "min_attainable_p" in big.to_frame().columns
    with pytest.raises(ValueError, match="alpha_needed must be in"):
        big.resolvable(0.0)
