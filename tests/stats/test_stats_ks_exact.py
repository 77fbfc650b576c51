"""KS exact under ties: agreement with R's ks.test(exact = TRUE), complete enumeration,
scipy's exact Smirnov p-value without ties, closed forms, the Monte Carlo fallback and
calibration on 3-level data."""

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from kvstats.stats import ks_2samp
from kvstats.stats import ks_exact
from kvstats.stats.ks_exact import KSExactResult, ks_2samp_exact, smirnov_sf

# Reference values from R 4.2.2 (Debian r-base-core 4.2.2.20221110), stats::ks.test with
# exact = TRUE, which for tied data uses psmirnov(..., z = c(x, y)): the permutation
# distribution conditional on the pooled sample's ties. Each call was
#   suppressWarnings(ks.test(x, y, exact = TRUE, alternative = alt))$p.value
# printed with 17 digits. R 4.2.2's alternative = "less" applies the distribution of
# D+ to D- (wrong when the tie pattern is not symmetric), so the "less" references are
#   ks.test(y, x, exact = TRUE, alternative = "greater")
# (the same statistic max(F_y - F_x) with its own distribution); case E and F show the
# difference, and a 400,000-permutation Monte Carlo run agrees with ours, not R 4.2.2's
# direct "less" (E: 0.6827 vs R 0.6682; F: 0.0283 vs R 0.0273).
R_CASES = {
    # x <- c(1,2,2,3,5,6); y <- c(2,3,4,4,7,8,9)  (the example of issue 12)
    "A": ([1, 2, 2, 3, 5, 6], [2, 3, 4, 4, 7, 8, 9],
          {"two-sided": 0.30769230769230593, "greater": 0.14160839160838945, "less": 1.0}),
    # x <- c(0,0,1,1,1,2,2,2,2); y <- c(0,1,1,2,2,2,2,2,2,2,2)
    "B": ([0, 0, 1, 1, 1, 2, 2, 2, 2], [0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2],
          {"two-sided": 0.39092641105024672, "greater": 0.23400809716598769, "less": 1.0}),
    # x <- rep(0:2, c(5, 3, 12)); y <- rep(0:2, c(11, 4, 10))
    "C": ([0] * 5 + [1] * 3 + [2] * 12, [0] * 11 + [1] * 4 + [2] * 10,
          {"two-sided": 0.27994029668483877, "greater": 1.0, "less": 0.16311406402151429}),
    # x <- c(1,1,1,1,1,1); y <- c(1,1,1,2)
    "D": ([1] * 6, [1, 1, 1, 2], {"two-sided": 0.40000000000000246}),
    # x <- c(3,1,4,1,5,9,2,6,5,3,5); y <- c(2,7,1,8,2,8,1,8,2,8,4,5,9)
    "E": ([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], [2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9],
          {"two-sided": 0.24487369318435726, "greater": 0.12720419975769437,
           "less": 0.68352947586356771}),
    # x <- c(0:4, 0:4, 0:4, 0:4, 0:2, 4); y <- c(rep(0:2, 10), 3, 3, 4)
    "F": (list(range(5)) * 4 + [0, 1, 2, 4], list(range(3)) * 10 + [3, 3, 4],
          {"two-sided": 0.055903679295119302, "greater": 1.0, "less": 0.028650323889894413}),
}
R_STATISTICS = {"A": 0.42857142857142855, "B": 0.28282828282828276, "C": 0.19999999999999998,
                "D": 0.24999999999999994, "E": 0.37062937062937062, "F": 0.28409090909090917}


@pytest.mark.parametrize("case", sorted(R_CASES))
def test_matches_r_ks_test_exact_with_ties(case):
    x, y, pvalues = R_CASES[case]
    for alternative, p_r in pvalues.items():
        res = ks_2samp_exact(x, y, alternative=alternative)
        assert res.method == "exact" and res.has_ties
        # R forms 1 - P(D < d) from double counts: absolute error ~1e-15
        np.testing.assert_allclose(res.pvalue, p_r, rtol=1e-10, atol=1e-13)
        if alternative == "two-sided":
            np.testing.assert_allclose(res.statistic, R_STATISTICS[case], rtol=1e-12)
        # the distribution function alone, given the pooled sample
        np.testing.assert_allclose(smirnov_sf(res.statistic, len(x), len(y), np.r_[x, y],
                                              alternative), p_r, rtol=1e-10, atol=1e-13)


def _enumerate_pvalue(x, y, alternative):
    """Reference: all C(N, n_x) equally likely labellings of the sorted pooled sample."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    pooled = np.sort(np.r_[x, y])
    n_x, n_y, n = x.size, y.size, x.size + y.size
    values = np.unique(pooled)

    def stat(xs, ys):
        fx = np.searchsorted(np.sort(xs), values, side="right") / n_x
        fy = np.searchsorted(np.sort(ys), values, side="right") / n_y
        d = {"greater": (fx - fy).max(), "less": (fy - fx).max(),
             "two-sided": np.abs(fx - fy).max()}[alternative]
        return round(max(d, 0.0) * n_x * n_y)

    d_obs = stat(x, y)
    hits = total = 0
    for subset in itertools.combinations(range(n), n_x):
        mask = np.zeros(n, bool)
        mask[list(subset)] = True
        hits += stat(pooled[mask], pooled[~mask]) >= d_obs
        total += 1
    assert total == math.comb(n, n_x)
    return hits / total


ENUM_CASES = [([1, 2, 2, 3, 5, 6], [2, 3, 4, 4, 7, 8, 9]),
              ([0, 0, 1, 1, 1, 2], [0, 1, 1, 2, 2, 2, 2, 2]),
              ([5, 5, 5, 1], [1, 1, 2, 2, 3, 5, 5]),
              ([0.3, 1.7, 2.2, 0.9, 4.0], [1.1, 2.5, 3.3, 0.2, 5.1, 6.0, 0.4, 2.9])]


@pytest.mark.parametrize("x,y", ENUM_CASES)
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_matches_complete_enumeration(x, y, alternative):
    ref = _enumerate_pvalue(x, y, alternative)
    np.testing.assert_allclose(ks_2samp_exact(x, y, alternative=alternative).pvalue, ref,
                               rtol=1e-12)
    # swapping the samples swaps "less" and "greater"
    swapped = {"less": "greater", "greater": "less"}.get(alternative, alternative)
    np.testing.assert_allclose(ks_2samp_exact(y, x, alternative=swapped).pvalue, ref,
                               rtol=1e-12)


@pytest.mark.parametrize("n_x,n_y", [(1, 1), (3, 4), (5, 7), (20, 30), (100, 80), (300, 1000)])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_without_ties_equals_scipy_exact(n_x, n_y, alternative):
    # reference: scipy.stats.ks_2samp(method="exact"), the classical Smirnov distribution
    rng = np.random.default_rng(n_x * 1000 + n_y)
    x, y = rng.normal(0.3, 1, n_x), rng.normal(0, 1, n_y)
    res = ks_2samp_exact(x, y, alternative=alternative)
    ref = stats.ks_2samp(x, y, alternative=alternative, method="exact")
    assert not res.has_ties and res.n_distinct == n_x + n_y
    np.testing.assert_allclose(res.statistic, ref.statistic, rtol=1e-12)
    np.testing.assert_allclose(res.pvalue, ref.pvalue, rtol=1e-9, atol=1e-15)


def test_statistic_location_and_sign_match_ks_2samp():
    rng = np.random.default_rng(3)
    for _ in range(30):
        x = rng.integers(0, 6, rng.integers(1, 25)).astype(float)
        y = rng.integers(0, 4, rng.integers(1, 25)).astype(float)
        for alternative in ("two-sided", "less", "greater"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = ks_2samp(x, y, alternative=alternative)
            res = ks_2samp_exact(x, y, alternative=alternative)
            np.testing.assert_allclose(res.statistic, ref.statistic, rtol=1e-12, atol=1e-15)
            if res.statistic > 0:
                assert res.statistic_sign == ref.statistic_sign
            # the tie-aware p-value is never larger than the continuous (conservative) one
            if alternative == "two-sided":
                assert res.pvalue <= ref.pvalue + 1e-12


@pytest.mark.parametrize("m", [3, 10, 30, 200])
def test_small_pvalues_closed_form(m):
    # complete separation into two tie blocks: D = 1 iff the first block is all x or all
    # y, so P(D >= 1) = 2 / C(2m, m) (one-sided: 1 / C(2m, m)); relative accuracy holds
    # far below 1e-16, where 1 - P(D < d) would cancel to 0
    x, y = np.zeros(m), np.ones(m)
    ref = 1 / math.comb(2 * m, m)
    np.testing.assert_allclose(ks_2samp_exact(x, y).pvalue, 2 * ref, rtol=1e-11)
    np.testing.assert_allclose(ks_2samp_exact(x, y, alternative="greater").pvalue, ref, rtol=1e-11)
    assert ks_2samp_exact(x, y, alternative="less").pvalue == 1.0


def test_all_tied_gives_one():
    res = ks_2samp_exact([2.0] * 5, [2.0] * 9)
    assert res.statistic == 0 and res.pvalue == 1.0 and res.n_distinct == 1


def test_permutation_fallback(monkeypatch):
    x, y, pvalues = R_CASES["F"]
    res = ks_2samp_exact(x, y, method="permutation", n_resamples=20000, seed=1)
    assert res.method == "permutation" and res.n_resamples == 20000
    se = math.sqrt(pvalues["two-sided"] * (1 - pvalues["two-sided"]) / 20000)
    assert abs(res.pvalue - pvalues["two-sided"]) < 4 * se
    # reproducible with the same seed
    assert ks_2samp_exact(x, y, method="permutation", n_resamples=2000, seed=1).pvalue == \
        ks_2samp_exact(x, y, method="permutation", n_resamples=2000, seed=1).pvalue
    # "auto" switches to Monte Carlo beyond the work limit
    monkeypatch.setattr(ks_exact, "_EXACT_WORK_LIMIT", 10)
    auto = ks_2samp_exact(x, y, n_resamples=999, seed=2)
    assert auto.method == "permutation" and auto.n_resamples == 999
    assert (auto.pvalue * 1000) == pytest.approx(round(auto.pvalue * 1000))
    # the switch is "exact unless (n_x + n_y)(min(n_x, n_y) + 1) > limit": case A costs 13 * 7
    a, b, _ = R_CASES["A"]
    monkeypatch.setattr(ks_exact, "_EXACT_WORK_LIMIT", 91)
    assert ks_2samp_exact(a, b).method == "exact"
    monkeypatch.setattr(ks_exact, "_EXACT_WORK_LIMIT", 90)
    assert ks_2samp_exact(a, b).method == "permutation"


@pytest.mark.parametrize("case", ["A", "B", "C"])
def test_permutation_pvalue_counts_ties_with_the_observed_d(case):
    # reference: R's exact p-values above. On tied data P(D = d) is a large atom (case A
    # two-sided: P(D >= d) = 0.308, P(D > d) = 0.240), so counting D* > d instead of
    # D* >= d lands many standard errors away from R.
    x, y, pvalues = R_CASES[case]
    for alternative, p_r in pvalues.items():
        res = ks_2samp_exact(x, y, alternative=alternative, method="permutation",
                             n_resamples=20000, seed=4)
        se = math.sqrt(max(p_r * (1 - p_r), 1e-4) / 20000)
        assert abs(res.pvalue - p_r) < 4 * se, (alternative, res.pvalue, p_r)


def test_location_and_sign_when_d_plus_equals_d_minus():
    # by hand: F_x - F_y is +1/2 and -1/2 (at 1 and 3, or 3 and 1) in each case, so the gap
    # has no direction (sign 0) and the location is the first pooled value where |gap| = D.
    # (scipy reports +1 here, at the first D+ maximiser; it decides by float rounding.)
    for x, y, loc in (([1, 4], [2, 3], 1.0), ([2, 3], [1, 4], 1.0),
                      ([1, 1, 4, 4], [2, 3, 2, 3], 1.0)):
        res = ks_2samp_exact(x, y)
        assert (res.statistic, res.statistic_location, res.statistic_sign) == (0.5, loc, 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # the third case is tied: TiesWarning
            ref = ks_2samp(x, y)
        assert (ref.statistic, ref.statistic_location, ref.statistic_sign) == (0.5, loc, 0)


def test_calibration_three_level_data(calib):
    # Both samples from {0, 1, 2} with equal probabilities, n = m = 30. R 4.2.2's exact
    # ks.test rejects at alpha = 0.05 in 0.0315 of 20,000 replicates (set.seed(20261201);
    # replicate(20000, ks.test(sample(0:2, 30, TRUE), sample(0:2, 30, TRUE),
    # exact = TRUE)$p.value)); ours measured 0.0310 over 20,000 (seed 20261201). The
    # continuous Smirnov p-value (ks_2samp) rejects in 0.005.
    reps = calib.replicates(4000, 20000)
    rng = np.random.default_rng(20261201)
    p = np.array([ks_2samp_exact(rng.integers(0, 3, 30), rng.integers(0, 3, 30)).pvalue
                  for _ in range(reps)])
    lo, hi = calib.binom_interval(reps, 0.0315, 0.99)
    rate = float(np.mean(p <= 0.05))
    assert lo <= rate <= hi, f"type-I error {rate:.4f} outside [{lo:.4f}, {hi:.4f}] around R's 0.0315"
    calib.rejection_rate(p, alpha=0.05, upper_only=True)   # valid at the nominal level
    calib.discrete_validity(p)


def test_result_frame_and_validation():
    res = ks_2samp_exact([1, 2, 3], [2, 3, 4, 4])
    assert isinstance(res, KSExactResult)
    frame = res.to_frame()
    assert list(frame.columns) == ["test", "statistic", "pvalue", "statistic_location",
                                   "statistic_sign", "alternative", "method", "n_x", "n_y",
                                   "n_distinct", "has_ties", "n_resamples"]
    assert frame["test"].iloc[0] == "ks_2samp_exact"
    with pytest.raises(ValueError, match="alternative"):
        ks_2samp_exact([1, 2], [3, 4], alternative="both")
    with pytest.raises(ValueError, match="method"):
        ks_2samp_exact([1, 2], [3, 4], method="asymp")
    with pytest.raises(ValueError, match="n_resamples"):
        ks_2samp_exact([1, 2], [3, 4], n_resamples=0)
    with pytest.raises(ValueError, match="x must not contain NaN"):
        ks_2samp_exact([1, np.nan], [3, 4])
    with pytest.raises(ValueError, match="y must not be empty"):
        ks_2samp_exact([1, 2], [])
    with pytest.raises(ValueError, match="z must be the pooled sample"):
        smirnov_sf(0.5, 2, 3, z=[1, 2, 3])
    with pytest.raises(ValueError, match="statistic"):
        smirnov_sf(1.5, 2, 3)
    with pytest.raises(ValueError, match="n_x"):
        smirnov_sf(0.5, 0, 3)
