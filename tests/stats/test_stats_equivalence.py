"""Equivalence and non-inferiority: worked values against scipy / statsmodels / closed
forms, type-I error at the margin boundary, power at no difference, agreement of every
test with its interval, the verdict helper, validation."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

import kvstats.stats._equivalence_rank as RK
import kvstats.stats._equivalence_ratio as RT
import kvstats.stats.equivalence as E
from kvstats.stats import mann_whitney
from kvstats.stats._equivalence_ratio import _BootRef
from kvstats.stats.equivalence import (
    RATIO_METHODS,
    VERDICTS,
    EquivalenceResult,
    equivalence_verdict,
    tost_rank,
    tost_ratio,
)

ALTS = ("equivalence", "less", "greater")


@pytest.fixture
def plugin(monkeypatch):
    """The plug-in (Wald-type) tests alone, as before 2026-12-02: the reference checks
    against scipy / statsmodels / closed forms are of that half of each test (the score-
    type half is checked against the binomial score test below)."""
    monkeypatch.setattr(E, "_NULL_RESTRICTED", False)


# ---------------------------------------------------------------- worked values


def test_import_paths_and_the_score_switch_reach_both_tests(monkeypatch):
    # each test's machinery is a module of its own (_equivalence_ratio, _equivalence_rank);
    # every import path of its names still holds, and _NULL_RESTRICTED set on
    # kvstats.stats.equivalence (as tests/stats/calibrate_sparse_and_few_clusters.py sets
    # it) switches both tests: sparse binary data, where the score-type half binds
    import kvstats.stats as S

    assert S.tost_ratio is E.tost_ratio is RT.tost_ratio and S.tost_rank is E.tost_rank is RK.tost_rank
    assert S.EquivalenceResult is EquivalenceResult and S.equivalence_verdict is equivalence_verdict
    assert E._FiellerT is RT._FiellerT and E.RATIO_METHODS is RT.RATIO_METHODS
    with pytest.raises(AttributeError, match="no_such_name"):
        E.no_such_name  # noqa: B018
    x1, y1 = np.ones(40), (np.arange(40) >= 3).astype(float)
    x0, y0 = np.zeros(30), (np.arange(30) < 6).astype(float)

    def both():
        return (tost_ratio(x1, y1, margin=0.1, alternative="less").pvalue,
                tost_rank(x0, y0, delta=0.1, alternative="greater").method)

    score = both()
    monkeypatch.setattr(E, "_NULL_RESTRICTED", False)
    plug = both()
    assert score[0] > plug[0] and (score[1], plug[1]) == ("brunner-munzel-score", "brunner-munzel")


def test_fieller_welch_equals_scipy_welch_t_tests(plugin):
    # Reference: scipy.stats.ttest_ind(equal_var=False). H0: mean(x) = r mean(y) is the
    # Welch test of x against r*y, so each one-sided TOST p-value, the difference test
    # (r = 1) and the interval ends (where the one-sided p equals alpha) are scipy's.
    rng = np.random.default_rng(1)
    x, y = rng.exponential(1.0, 50), rng.exponential(1.1, 60)
    res = tost_ratio(x, y, margin=0.3)
    assert res.method == "fieller-welch"
    lo, hi = 1 / 1.3, 1.3
    np.testing.assert_allclose(res.pvalue_low, stats.ttest_ind(
        x, lo * y, equal_var=False, alternative="greater").pvalue, rtol=1e-12)
    np.testing.assert_allclose(res.pvalue_high, stats.ttest_ind(
        x, hi * y, equal_var=False, alternative="less").pvalue, rtol=1e-12)
    np.testing.assert_allclose(res.pvalue, max(res.pvalue_low, res.pvalue_high), rtol=0)
    np.testing.assert_allclose(res.pvalue_difference,
                               stats.ttest_ind(x, y, equal_var=False).pvalue, rtol=1e-12)
    np.testing.assert_allclose(stats.ttest_ind(x, res.low * y, equal_var=False,
                                               alternative="greater").pvalue, 0.05, rtol=1e-9)
    np.testing.assert_allclose(stats.ttest_ind(x, res.high * y, equal_var=False,
                                               alternative="less").pvalue, 0.05, rtol=1e-9)
    np.testing.assert_allclose(res.estimate, x.mean() / y.mean(), rtol=1e-14)


def test_fieller_paired_equals_scipy_paired_t_tests(plugin):
    # Reference: scipy.stats.ttest_rel: H0: mean(x) = r mean(y) is E[x_i - r y_i] = 0.
    rng = np.random.default_rng(2)
    y = rng.gamma(2.0, 1.0, 40)
    x = 1.05 * y * rng.lognormal(-0.02, 0.2, 40)
    res = tost_ratio(x, y, margin=(0.9, 1.2), paired=True)
    assert res.method == "fieller-paired" and res.df == 39
    np.testing.assert_allclose(res.pvalue_low, stats.ttest_rel(
        x, 0.9 * y, alternative="greater").pvalue, rtol=1e-12)
    np.testing.assert_allclose(res.pvalue_high, stats.ttest_rel(
        x, 1.2 * y, alternative="less").pvalue, rtol=1e-12)
    np.testing.assert_allclose(res.pvalue_difference, stats.ttest_rel(x, y).pvalue, rtol=1e-12)
    np.testing.assert_allclose(stats.ttest_rel(x, res.low * y, alternative="greater").pvalue,
                               0.05, rtol=1e-9)
    np.testing.assert_allclose(stats.ttest_rel(x, res.high * y, alternative="less").pvalue,
                               0.05, rtol=1e-9)


def test_fieller_paired_interval_closed_form(plugin):
    # Closed form (Fieller 1954): with constant df the limits are the roots of
    # (x̄ - r ȳ)² = q² (S_xx - 2 r S_xy + r² S_yy)/n, q = t_{1-alpha, n-1}.
    x = np.array([2.1, 3.4, 1.9, 5.0, 4.2, 3.3, 2.8, 3.9])
    y = np.array([2.0, 3.0, 2.2, 4.1, 4.0, 3.5, 2.5, 3.1])
    n, alpha = x.size, 0.05
    q = stats.t.ppf(1 - alpha, n - 1)
    c = np.cov(x, y, ddof=1) / n
    mx, my = x.mean(), y.mean()
    # (my² - q² Syy) r² - 2 (mx my - q² Sxy) r + (mx² - q² Sxx) = 0
    a, b, cc = my**2 - q**2 * c[1, 1], -2 * (mx * my - q**2 * c[0, 1]), mx**2 - q**2 * c[0, 0]
    disc = math.sqrt(b * b - 4 * a * cc)
    roots = sorted([(-b - disc) / (2 * a), (-b + disc) / (2 * a)])
    res = tost_ratio(x, y, margin=0.5, paired=True, alpha=alpha)
    np.testing.assert_allclose([res.low, res.high], roots, rtol=1e-10)


def test_delta_method_equals_statsmodels_ttost_on_the_linearisation():
    # Reference: statsmodels.stats.weightstats.ttost_ind / ttost_paired. The delta method
    # is the Welch (paired) TOST of the linearised variables x_i/x̄ + log(x̄/ȳ) and
    # y_i/ȳ against (log low, log high): same mean difference, standard error and df.
    rng = np.random.default_rng(3)
    x, y = rng.exponential(1.0, 300), rng.exponential(1.02, 250)
    lo, hi = np.log(1 / 1.1), np.log(1.1)
    res = tost_ratio(x, y, margin=0.1, method="delta")
    est = np.log(x.mean() / y.mean())
    p, low, high = ttost_ind(x / x.mean() + est, y / y.mean(), lo, hi, usevar="unequal")
    np.testing.assert_allclose([res.pvalue, res.pvalue_low, res.pvalue_high],
                               [p, low[1], high[1]], rtol=1e-10)
    np.testing.assert_allclose(res.df, low[2], rtol=1e-12)
    np.testing.assert_allclose(res.statistic, min(low[0], -high[0]), rtol=1e-12)
    yp = x * rng.lognormal(0, 0.3, 300)
    res = tost_ratio(x, yp, margin=0.1, method="delta", paired=True)
    est = np.log(x.mean() / yp.mean())
    p, low, high = ttost_paired(x / x.mean() + est, yp / yp.mean(), lo, hi)
    np.testing.assert_allclose([res.pvalue, res.pvalue_low, res.pvalue_high],
                               [p, low[1], high[1]], rtol=1e-10)


def test_delta_method_closed_form():
    # Hand computation: log(x̄/ȳ) ± t_{0.95, df} se, se² = s_x²/(n_x x̄²) + s_y²/(n_y ȳ²)
    x, y = np.array([1.0, 2.0, 3.0, 6.0]), np.array([2.0, 2.0, 3.0, 5.0, 3.0])
    a = np.var(x, ddof=1) / (4 * x.mean() ** 2)
    b = np.var(y, ddof=1) / (5 * y.mean() ** 2)
    df = (a + b) ** 2 / (a**2 / 3 + b**2 / 4)
    se = math.sqrt(a + b)
    est = math.log(x.mean() / y.mean())
    q = stats.t.ppf(0.95, df)
    res = tost_ratio(x, y, margin=0.5, method="delta")
    np.testing.assert_allclose([res.estimate, res.low, res.high, res.df, res.standard_error],
                               [math.exp(est), math.exp(est - q * se), math.exp(est + q * se), df, se],
                               rtol=1e-12)
    np.testing.assert_allclose(res.pvalue_high, stats.t.cdf((est - math.log(1.5)) / se, df),
                               rtol=1e-12)


def test_lognormal_cross_check_against_ttost_on_log_data():
    # Reference: statsmodels ttost_ind on log-data tests the ratio of *geometric* means.
    # For two log-normal samples with the same sigma that equals the ratio of means, so
    # both tests target the same parameter: with a small sigma (0.1, where the two
    # estimators nearly coincide) their TOST p-values and decisions must agree closely.
    rng = np.random.default_rng(4)
    diffs, agree = [], []
    lo, hi = np.log(1 / 1.05), np.log(1.05)
    for _ in range(100):
        x, y = rng.lognormal(0.03, 0.1, 200), rng.lognormal(0.0, 0.1, 200)
        ours = tost_ratio(x, y, margin=0.05)
        ref = ttost_ind(np.log(x), np.log(y), lo, hi, usevar="unequal")[0]
        diffs.append(abs(ours.pvalue - ref))
        agree.append((ours.pvalue <= 0.05) == (ref <= 0.05))
    assert np.median(diffs) < 0.01 and np.max(diffs) < 0.06
    assert np.mean(agree) >= 0.93


def test_rank_matches_brunner_munzel_and_mann_whitney(plugin):
    # Reference: scipy.stats.brunnermunzel (the point null theta = 1/2 with the same
    # variance and df) and the common-language effect size of mann_whitney.
    rng = np.random.default_rng(5)
    for x, y in [(rng.normal(0.2, 1, 40), rng.normal(0, 2, 55)),
                 (rng.integers(0, 4, 30).astype(float), rng.integers(0, 3, 45).astype(float))]:
        res = tost_rank(x, y, delta=0.1)
        bm = stats.brunnermunzel(x, y)
        np.testing.assert_allclose(res.pvalue_difference, bm.pvalue, rtol=1e-10)
        np.testing.assert_allclose((res.estimate - 0.5) / res.standard_error, -bm.statistic,
                                   rtol=1e-10)
        np.testing.assert_allclose(res.estimate, mann_whitney(x, y).common_language, rtol=1e-14)
        t_lo = (res.estimate - 0.4) / res.standard_error
        np.testing.assert_allclose(res.pvalue_low, stats.t.sf(t_lo, res.df), rtol=1e-12)


def test_rank_paired_closed_form(plugin):
    # Munzel (1999): var(θ̂) = var(F̂_y(x_i) - F̂_x(y_i)) / n with mid-rank placements
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    y = np.array([2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0])
    px = np.array([(np.sum(y < v) + 0.5 * np.sum(y == v)) / y.size for v in x])
    py = np.array([(np.sum(x < v) + 0.5 * np.sum(x == v)) / x.size for v in y])
    se = math.sqrt(np.var(px - py, ddof=1) / x.size)
    res = tost_rank(x, y, delta=0.2, paired=True)
    np.testing.assert_allclose([res.estimate, res.standard_error, res.df], [px.mean(), se, 7],
                               rtol=1e-12)
    q = stats.t.ppf(0.95, 7)
    np.testing.assert_allclose([res.low, res.high], [px.mean() - q * se, px.mean() + q * se],
                               rtol=1e-12)


# ---------------------------------------------------------------- calibration and power


def _rates(pvalues, alpha=0.05):
    return float(np.mean(np.asarray(pvalues) <= alpha))


def _batched(core, xs, ys, chunk=400, **kw):
    """p-values of many replicate samples (lists of equal-length arrays) from the batched
    core that tost_ratio / tost_rank run (RT._tost_ratio_pvalues, RK._tost_rank_pvalues), in
    chunks of bounded memory; test_batched_cores_equal_the_public_functions ties them."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    return np.concatenate([core(xs[i:i + chunk], ys[i:i + chunk], **kw)
                           for i in range(0, len(xs), chunk)])


def test_batched_cores_equal_the_public_functions():
    # the calibration tests below draw thousands of replicates and take their p-values
    # from the vectorised cores; each must give the public function's p-value exactly
    # (same code, one Newton path per row), on continuous, tied, sparse binary, all-tied
    # and degenerate rows alike, every alternative, paired or not
    rng = np.random.default_rng(19)
    n = 30
    xs = [rng.exponential(1.0, n), np.ones(n), rng.integers(0, 3, n).astype(float), np.full(n, 2.0),
          rng.gamma(2.0, 1.0, n), (rng.random(n) < 0.9).astype(float) + 0.5]
    ys = [rng.exponential(1.1, n), (rng.random(n) < 1 / 1.1).astype(float), rng.integers(0, 3, n) + 0.0,
          np.full(n, 2.0), xs[4] * rng.lognormal(0, 0.1, n), np.ones(n)]
    ys[1][0] = 1.0
    for alternative in ALTS:
        for paired in (False, True):
            for margin in (0.1, (0.8, 1.05)):
                p = RT._tost_ratio_pvalues(np.array(xs), np.array(ys), margin=margin,
                                          alternative=alternative, paired=paired)
                ref = [tost_ratio(x, y, margin=margin, alternative=alternative, paired=paired).pvalue
                       for x, y in zip(xs, ys)]
                np.testing.assert_allclose(p, ref, rtol=1e-13, atol=0)
            for delta in (0.1, (0.3, 0.55)):
                p = RK._tost_rank_pvalues(np.array(xs), np.array(ys), delta=delta,
                                         alternative=alternative, paired=paired)
                ref = [tost_rank(x, y, delta=delta, alternative=alternative, paired=paired).pvalue
                       for x, y in zip(xs, ys)]
                np.testing.assert_allclose(p, ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("paired", [False, True])
def test_tost_ratio_type_one_error_at_the_margin(calib, paired):
    # True ratio exactly at the upper margin (1.1), then at the lower one (1/1.1); n is
    # large enough that the far side never binds, so the TOST's size is the one-sided
    # size, which must be alpha within the binomial band. Paired: the same trial seen
    # by both (multiplicative noise with mean 1); unpaired: independent exponentials.
    reps = calib.replicates(600, 4000)
    rng = np.random.default_rng(6 + paired)
    n = 1500
    for ratio in (1.1, 1 / 1.1):
        xs, ys = [], []
        for _ in range(reps):
            y = rng.gamma(4.0, 0.25, n) if paired else rng.exponential(1.0, n)
            xs.append(ratio * (y * rng.lognormal(-0.02, 0.2, n) if paired else rng.exponential(1.0, n)))
            ys.append(y)
        calib.rejection_rate(_batched(RT._tost_ratio_pvalues, xs, ys, margin=0.1, paired=paired),
                             alpha=0.05)


def test_noninferiority_type_one_error_small_samples(calib):
    # One-sided (non-inferiority) tests at their boundary with n = 50 exponential
    # trials: the Fieller test (default) stays within the binomial band.
    reps = calib.replicates(1500, 6000)
    rng = np.random.default_rng(8)
    for alternative, ratio in (("less", 1.1), ("greater", 1 / 1.1)):
        xs, ys = zip(*[(rng.exponential(ratio, 50), rng.exponential(1.0, 50)) for _ in range(reps)])
        p = _batched(RT._tost_ratio_pvalues, xs, ys, margin=0.1, alternative=alternative)
        calib.rejection_rate(p, alpha=0.05)


def test_tost_ratio_power_at_ratio_one(calib):
    # Exponential data (CV = 1), n = 2000 each: se(log ratio) ~ sqrt(2/n), so the TOST
    # power at ratio 1 is about 2 Phi(log(1.1)/se - z_0.95) - 1 (normal approximation).
    reps = calib.replicates(300, 2000)
    rng = np.random.default_rng(9)
    n = 2000
    xs, ys = zip(*[(rng.exponential(1.0, n), rng.exponential(1.0, n)) for _ in range(reps)])
    p = _batched(RT._tost_ratio_pvalues, xs, ys, margin=0.1)
    approx = 2 * stats.norm.cdf(math.log(1.1) / math.sqrt(2 / n) - stats.norm.ppf(0.95)) - 1
    lo, hi = calib.binom_interval(reps, approx, 0.99)
    assert lo - 0.02 <= _rates(p) <= hi + 0.02, (_rates(p), approx)
    # paired trials with correlated values gain a lot: the same margin at n = 200
    ys = [rng.gamma(4.0, 0.25, 200) for _ in range(reps)]
    xs = [y * rng.lognormal(-0.005, 0.1, 200) for y in ys]
    assert _rates(_batched(RT._tost_ratio_pvalues, xs, ys, margin=0.1, paired=True)) > 0.99


@pytest.mark.parametrize("paired", [False, True])
def test_tost_rank_type_one_error_at_the_margin(calib, paired):
    # theta exactly 0.6: X ~ N(mu, 1), Y ~ N(0, 1) with mu = sqrt(2) Phi^-1(0.6)
    # (paired: correlation 0.8 inside a trial; theta is about independent draws).
    # Brunner-Munzel is slightly conservative at n = 100 (measured 0.046-0.048 at
    # n = 200), hence the small slack on the lower limit.
    reps = calib.replicates(1500, 6000)
    rng = np.random.default_rng(10 + paired)
    mu, n = math.sqrt(2) * stats.norm.ppf(0.6), 100
    xs, zs = [], []
    for _ in range(reps):
        zs.append(rng.normal(size=n))
        xs.append(mu + (0.8 * zs[-1] + 0.6 * rng.normal(size=n) if paired else rng.normal(size=n)))
    p = _batched(RK._tost_rank_pvalues, xs, zs, delta=0.1, alternative="less", paired=paired)
    calib.rejection_rate(p, alpha=0.05, slack_low=0.01)


def test_tost_rank_type_one_error_tied_data(calib):
    # 3-level data with theta exactly 0.6: P(X = 0, 1, 2) = (0.2, 0.3, 0.5) against the
    # uniform Y: theta = (0.3 + 2 * 0.5)/3 + 1/6 = 0.6. TOST with n = 400 (far side
    # negligible) at that boundary.
    reps = calib.replicates(1000, 4000)
    rng = np.random.default_rng(12)
    xs, ys = zip(*[(rng.choice(3, 400, p=[0.2, 0.3, 0.5]), rng.choice(3, 400)) for _ in range(reps)])
    p = _batched(RK._tost_rank_pvalues, xs, ys, delta=0.1)
    calib.rejection_rate(p, alpha=0.05, slack_low=0.01)


def test_tost_rank_power_at_one_half(calib):
    # se(theta) ~ sqrt((1/12)(2/n)) at theta = 1/2 for continuous data
    reps = calib.replicates(300, 2000)
    rng = np.random.default_rng(13)
    n = 150
    xs, ys = zip(*[(rng.normal(size=n), rng.normal(size=n)) for _ in range(reps)])
    p = _batched(RK._tost_rank_pvalues, xs, ys, delta=0.1)
    approx = 2 * stats.norm.cdf(0.1 / math.sqrt(2 / (12 * n)) - stats.norm.ppf(0.95)) - 1
    lo, hi = calib.binom_interval(reps, approx, 0.99)
    assert lo - 0.03 <= _rates(p) <= hi + 0.03, (_rates(p), approx)


# ---------------------------------------------------------------- test/interval agreement


def _agrees(res: EquivalenceResult) -> None:
    inside_low = res.low >= res.margin_low
    inside_high = res.high <= res.margin_high
    assert res.within_margin == (res.pvalue <= res.alpha) == (inside_low and inside_high), res
    if res.alternative != "less":
        assert (res.pvalue_low <= res.alpha) == inside_low, res
    if res.alternative != "greater":
        assert (res.pvalue_high <= res.alpha) == inside_high, res
    assert res.low <= res.estimate <= res.high


def test_paired_bootstrap_t_equals_hand_written_resampling_of_trials():
    # reference: the paired bootstrap-t written out with the same draws: whole trials
    # resampled (one index per trial for x and y), t* = (log r* - log r)/se*, se² the
    # linearisation var(x_i/x̄ - y_i/ȳ)/n, limits r exp(-t*_(B-K+1) se), r exp(-t*_(K) se)
    # with K = floor(alpha (B + 1)) (the reference's exact-agreement quantiles)
    rng = np.random.default_rng(3)
    y = rng.lognormal(0.0, 1.0, 40)
    x = y * rng.lognormal(0.0, 0.05, 40)
    res = tost_ratio(x, y, margin=0.1, paired=True, method="bootstrap-t", n_resamples=999,
                     seed=1)

    def log_ratio_se(a, b):
        ma, mb = a.mean(-1), b.mean(-1)
        lin = a / ma[..., None] - b / mb[..., None]
        return np.log(ma / mb), np.sqrt(lin.var(-1, ddof=1) / a.shape[-1])

    est, se = log_ratio_se(x, y)
    idx = np.random.default_rng(1).integers(0, 40, (999, 40))
    e_b, se_b = log_ratio_se(x[idx], y[idx])
    tstar = np.sort((e_b - est) / se_b)
    k = int(np.floor(0.05 * (999 + 1)))
    assert res.method == "bootstrap-t-paired"
    np.testing.assert_allclose([res.low, res.high], np.exp([est - tstar[999 - k] * se,
                                                             est - tstar[k - 1] * se]), rtol=1e-12)


@pytest.mark.parametrize("method", RATIO_METHODS)
def test_ratio_interval_agrees_with_test(method):
    rng = np.random.default_rng(14)
    n_cases = 60 if method == "bootstrap-t" else 300
    decisions = set()
    for _ in range(n_cases):
        paired = bool(rng.integers(2))
        n = int(rng.integers(5, 80))
        y = rng.gamma(rng.uniform(0.5, 4), 1.0, n)
        x = (y * rng.lognormal(0, 0.3, n) if paired else
             rng.gamma(rng.uniform(0.5, 4), 1.0, int(rng.integers(5, 80))))
        # margins near the estimate so that every outcome occurs
        r = x.mean() / y.mean()
        margin = (r * rng.uniform(0.5, 1.0), r * rng.uniform(1.0, 2.0))
        margin = (min(margin[0], 0.999), max(margin[1], 1.001))
        alternative = ALTS[int(rng.integers(3))]
        res = tost_ratio(x, y, margin=margin, alternative=alternative, paired=paired,
                         method=method, n_resamples=199, seed=rng)
        _agrees(res)
        decisions.add(res.within_margin)
    assert decisions == {True, False}


def test_rank_interval_agrees_with_test():
    rng = np.random.default_rng(15)
    decisions = set()
    for _ in range(300):
        paired = bool(rng.integers(2))
        n = int(rng.integers(3, 60))
        if rng.integers(2):
            y = rng.integers(0, 4, n).astype(float)
            x = (y + rng.integers(-1, 2, n) if paired else
                 rng.integers(0, 4, int(rng.integers(3, 60))).astype(float))
        else:
            y = rng.normal(size=n)
            x = y + rng.normal(0.2, 1, n) if paired else rng.normal(0.3, 1.5, int(rng.integers(3, 60)))
        alternative = ALTS[int(rng.integers(3))]
        res = tost_rank(x, y, delta=float(rng.uniform(0.05, 0.45)), alternative=alternative,
                        paired=paired)
        _agrees(res)
        decisions.add(res.within_margin)
    assert decisions == {True, False}


# ---------------------------------------------------------------- margins, edge cases, verdict


def test_bootstrap_reference_tails_and_quantiles_agree_under_ties():
    # _BootRef's contract: sf(t) = (1 + #{t* >= t})/(B + 1) <= alpha iff t > t*_(B-K+1),
    # and cdf(t) = (1 + #{t* <= t})/(B + 1) <= alpha iff t < t*_(K), K = floor(alpha (B + 1)),
    # whatever the ties (the studentized resamples of tied data tie too); this is what makes
    # the bootstrap-t test and its interval agree. Counting t* > t in sf breaks it at
    # t = t*_(B-K+1).
    rng = np.random.default_rng(18)
    for b in (20, 37, 999):
        ref = _BootRef(rng.integers(-3, 4, b).astype(float))
        for alpha in (0.05, 0.1, 0.25):
            q_lo, q_hi = ref.quantiles(alpha)
            for t in np.arange(-4.0, 4.5, 0.5):
                assert (ref.sf(t) <= alpha) == (t > q_hi), (b, alpha, t)
                assert (ref.cdf(t) <= alpha) == (t < q_lo), (b, alpha, t)


def test_bootstrap_t_pvalues_count_the_observed_statistic():
    # Monte Carlo p-values (1 + #{t* beyond t})/(1 + B) (Davison & Hinkley 1997, eq. 4.11):
    # never 0, even where t lies beyond every resample. #{t* >= t}/B gave p = 0 for both
    # one-sided tests here, and a two-sided p of 0 for a threefold ratio: a claim of
    # certainty that no Holm adjustment can raise.
    ref = _BootRef(np.arange(1.0, 20.0))                       # B = 19
    assert ref.sf(100.0) == ref.cdf(-100.0) == 1 / 20
    assert ref.sf(19.0) == ref.cdf(1.0) == 2 / 20 and ref.sf(-100.0) == 1.0
    assert ref.quantiles(0.05) == (1.0, 19.0)                  # K = 1: B = 19 suffices
    rng = np.random.default_rng(0)
    x, y = rng.exponential(1.0, 500), rng.exponential(1.0, 500)
    res = tost_ratio(x, y, margin=0.5, method="bootstrap-t", n_resamples=999, seed=0)
    assert res.pvalue == res.pvalue_low == res.pvalue_high == 1 / 1000
    assert res.within_margin
    far = tost_ratio(3.0 * x, y, margin=0.1, method="bootstrap-t", n_resamples=999, seed=0)
    assert far.pvalue_difference == 2 / 1000 and far.pvalue == 1.0


def test_margins_and_one_sided_conventions():
    rng = np.random.default_rng(16)
    x, y = rng.exponential(1.0, 100), rng.exponential(1.0, 100)
    res = tost_ratio(x, y, margin=0.02)
    assert (res.margin_low, res.margin_high) == pytest.approx((1 / 1.02, 1.02))
    res = tost_ratio(x, y, margin=(0.98, 1.05), alternative="less")
    assert res.margin_low == 0 and res.margin_high == pytest.approx(1.05)
    assert res.low == 0 and np.isnan(res.pvalue_low) and res.pvalue == res.pvalue_high
    res = tost_ratio(x, y, margin=(0.98, 1.05), alternative="greater")
    assert res.margin_high == np.inf and res.high == np.inf and np.isnan(res.pvalue_high)
    res = tost_rank(x, y, delta=(0.3, 0.6), alternative="greater")
    assert (res.margin_low, res.margin_high, res.high) == (0.3, 1.0, 1.0)
    # the TOST p-value is the larger of its two one-sided p-values
    res = tost_rank(x, y, delta=0.1)
    assert res.pvalue == max(res.pvalue_low, res.pvalue_high)
    assert (res.margin_low, res.margin_high) == (0.5 - 0.1, 0.5 + 0.1)   # [0.5 - δ, 0.5 + δ]
    # ... and each one-sided p-value is Brunner-Munzel's t at its margin (se, df as reported)
    assert res.pvalue_high == pytest.approx(
        stats.t.cdf((res.estimate - 0.6) / res.standard_error, res.df), rel=1e-12)


def test_degenerate_and_unbounded():
    # constant samples: no spread, no variance estimate, nothing bounds one -> the ratio
    # test shows neither equivalence nor a difference (a zero standard error used to read
    # as equivalence at n = 5)
    for x, y in ((np.full(5, 2.0), np.full(6, 2.0)), (np.full(5, 3.0), np.full(6, 2.0))):
        for method in RATIO_METHODS:
            res = tost_ratio(x, y, margin=0.1, method=method)
            assert (res.method, res.within_margin, res.pvalue, res.pvalue_difference) == (
                "degenerate", False, 1.0, 1.0)
            assert (res.low, res.high, res.estimate) == (0.0, np.inf, pytest.approx(x[0] / y[0]))
    # complete separation in ranks: theta = 1, never equivalent; the rank variance
    # estimate is 0, so the bound 1/(4 min(n_x, n_y)) is used (Birnbaum & Klose 1957)
    res = tost_rank([5.0, 6.0, 7.0], [1.0, 2.0], delta=0.2)
    assert res.estimate == 1.0 and not res.within_margin and res.method == "brunner-munzel-bound"
    assert res.standard_error == pytest.approx(0.5 / np.sqrt(2)) and res.df == np.inf
    assert res.pvalue_difference == pytest.approx(2 * stats.norm.sf(0.5 / (0.5 / np.sqrt(2))))
    # the rank interval is clipped to theta's range [0, 1]: Brunner-Munzel's se = 0.25 and
    # df = 3 here put the t limit at 0.25 - t_{0.95, 3} 0.25 = -0.338 (closed form)
    res = tost_rank([1.0, 2.0, 3.0, 10.0], [4.0, 5.0, 6.0, 7.0, 8.0], delta=0.3)
    assert (res.estimate, res.standard_error, res.df) == (0.25, 0.25, 3.0)
    assert res.low == 0.0 and res.high == pytest.approx(0.25 + stats.t.ppf(0.95, 3) * 0.25)
    # mean(y) not significantly positive: Fieller's interval is unbounded above
    res = tost_ratio([1.0, 1.2, 0.9], [0.01, 3.0, 0.02], margin=0.2)
    assert res.high == np.inf and not res.within_margin
    # ... decided with y's own df, n_y - 1 (the Welch df of x - r y as r -> inf): here y's
    # one-sample t-test (scipy.stats.ttest_1samp(y, 0, alternative="greater")) gives
    # p = 0.078 > 0.05 with df 4, while the pooled df n_x + n_y - 2 = 53 would give 0.044
    x, y = np.random.default_rng(0).exponential(0.5, 50), np.array([0.1, 3.0, 0.2, 0.05, 4.0])
    assert stats.ttest_1samp(y, 0.0, alternative="greater").pvalue > 0.05
    res = tost_ratio(x, y, margin=(0.5, 2.0))
    assert res.high == np.inf and 0 < res.low < res.estimate and not res.within_margin


def test_unbounded_bootstrap_limit_and_scalar_margins_are_said_plainly():
    # sparse proportional trials: resamples of the proportional trials alone have a se* at
    # rounding level, so t* is huge and the upper limit is inf, without an overflow warning
    x = np.r_[np.full(22, 1.01), 1.0, np.zeros(77)]
    y = np.r_[np.ones(22), np.zeros(78)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = tost_ratio(x, y, margin=0.1, paired=True, method="bootstrap-t", n_resamples=199, seed=5)
    assert res.high == np.inf and not res.within_margin
    # a 0-d array margin is a scalar: refused by the scalar check, which names it (it was
    # taken for a pair and failed in len())
    for f, name in ((tost_ratio, "margin"), (tost_rank, "delta")):
        with pytest.raises(TypeError, match=f"^{name} must be a finite real number"):
            f([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], **{name: np.array(0.1)})


def test_fieller_paired_composite_null(plugin):
    # With paired data t(r) = mean(x - r y)/se need not be monotone in r. Here t(r) >= q
    # only for r in about (0.1, 0.78) and t(0) < q, so the point-null test at r = 0.466
    # would reject although Fieller's lower limit is 0. The composite null ratio <= r
    # takes the supremum of the p-values over [0, r] (here at r = 0: 0.0514), so the
    # test and the interval agree: not non-inferior.
    x = np.array([2.45592556, 0.18056051, 1.72998946, 0.25460939, 5.3675285])
    y = np.array([2.95533372, 0.16622248, 1.36124894, 0.249627, 6.35823591])
    pointwise = stats.ttest_rel(x, 0.466 * y, alternative="greater").pvalue
    res = tost_ratio(x, y, margin=(0.466, 2.0), paired=True, alternative="greater")
    assert pointwise < 0.05 and res.low == 0.0 and not res.within_margin
    np.testing.assert_allclose(res.pvalue, stats.ttest_rel(x, 0 * y, alternative="greater").pvalue,
                               rtol=1e-12)
    # the mirror image (y/x <= 1/0.466, "less"): t(r) of y - r x is -t(1/r) of x - y/r, so
    # the far end r -> inf (t -> -mean(x)/se) carries the supremum, and high is inf
    mirror = tost_ratio(y, x, margin=(0.5, 1 / 0.466), paired=True, alternative="less")
    assert stats.ttest_rel(y, x / 0.466, alternative="less").pvalue < 0.05
    assert mirror.high == np.inf and not mirror.within_margin
    np.testing.assert_allclose(mirror.pvalue, res.pvalue, rtol=1e-12)


def test_fieller_paired_composite_null_at_the_critical_ratio(plugin):
    # The composite null ratio <= 0.95 takes the supremum of the paired t-tests' p-values
    # over r in [0, 0.95]. Here t(r) has its minimum inside, at r* = 0.546 (the estimate is
    # 0.484), so neither end carries the supremum (p = 0.894 at 0.95). Reference: the
    # largest scipy.stats.ttest_rel(x, r y, alternative="greater") p-value on a grid of
    # 19,001 ratios in [0, 0.95] (grid error ~1e-8).
    x, y = np.array([0.04, 0.89, 0.14, 0.0]), np.array([0.17, 1.72, 0.27, 0.05])
    grid = np.linspace(0.0, 0.95, 19001)
    p_grid = stats.ttest_rel(np.broadcast_to(x, (grid.size, 4)), grid[:, None] * y,
                             axis=1, alternative="greater").pvalue
    res = tost_ratio(x, y, margin=(0.95, 2.0), paired=True, alternative="greater")
    assert 0.5 < grid[np.argmax(p_grid)] < 0.6 and p_grid[-1] < p_grid.max() - 0.05
    np.testing.assert_allclose(res.pvalue_low, p_grid.max(), rtol=0, atol=1e-7)
    assert res.pvalue == res.pvalue_low


def test_verdict():
    assert equivalence_verdict(0.01, 0.7) == VERDICTS[0] == "equivalent within δ"
    assert equivalence_verdict(0.01, 0.001) == "equivalent within δ"   # real but within δ
    assert equivalence_verdict(0.3, 0.001) == "different"
    assert equivalence_verdict(0.3, 0.2) == "inconclusive"
    # p = alpha rejects, for both tests (p <= alpha, as within_margin)
    assert equivalence_verdict(0.05, 0.7) == "equivalent within δ"
    assert equivalence_verdict(0.3, 0.05) == "different"
    rng = np.random.default_rng(17)
    same = tost_ratio(rng.exponential(1.0, 3000), rng.exponential(1.0, 3000), margin=0.1)
    far = tost_ratio(rng.exponential(2.0, 300), rng.exponential(1.0, 300), margin=0.1)
    few = tost_ratio(rng.exponential(1.0, 10), rng.exponential(1.0, 10), margin=0.1)
    assert equivalence_verdict(same) == "equivalent within δ"
    assert equivalence_verdict(far) == "different"
    assert equivalence_verdict(few) == "inconclusive"
    assert equivalence_verdict(few, mann_whitney([1, 2, 3], [4, 5, 6, 7])) == "inconclusive"
    # a one-sided (non-inferiority) result bounds one side only: x at half of y is shown
    # non-inferior within 1.1 ("less"), which "equivalent within δ" would misstate
    half = tost_ratio(rng.exponential(1.0, 500), rng.exponential(2.0, 500), margin=0.1,
                      alternative="less")
    assert half.within_margin and half.estimate < 0.6
    for difference in (None, 0.5):
        with pytest.raises(ValueError, match="alternative='less'"):
            equivalence_verdict(half, difference)
    with pytest.raises(TypeError, match="difference may be omitted"):
        equivalence_verdict(0.01)
    with pytest.raises(ValueError, match="equivalence"):
        equivalence_verdict(1.5, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        equivalence_verdict(0.1, 0.1, alpha=1.0)


def test_frame_and_validation():
    x, y = [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]
    frame = tost_ratio(x, y).to_frame()
    assert list(frame.columns) == [
        "test", "statistic", "pvalue", "estimate", "low", "high", "margin_low", "margin_high",
        "pvalue_low", "pvalue_high", "pvalue_difference", "within_margin", "standard_error",
        "df", "alpha", "alternative", "method", "n_x", "n_y", "identical_pairs"]
    assert frame["test"].iloc[0] == "tost_ratio"
    assert tost_rank(x, y).to_frame()["test"].iloc[0] == "tost_rank"
    with pytest.raises(ValueError, match="x must be nonnegative"):
        tost_ratio([-1.0, 2.0], y)
    with pytest.raises(ValueError, match="y must have a positive mean"):
        tost_ratio(x, [0.0, 0.0])
    with pytest.raises(ValueError, match="margin"):
        tost_ratio(x, y, margin=0.0)
    with pytest.raises(ValueError, match=r"margin\[1\]"):
        tost_ratio(x, y, margin=(0.9, 0.95))
    with pytest.raises(ValueError, match="margin must be"):
        tost_ratio(x, y, margin=(0.9, 1.1, 1.2))
    with pytest.raises(ValueError, match="paired=True needs"):
        tost_ratio(x, [1.0, 2.0], paired=True)
    with pytest.raises(ValueError, match="at least 2 observations"):
        tost_rank([1.0], y)
    with pytest.raises(ValueError, match="alpha"):
        tost_ratio(x, y, alpha=0.5)
    with pytest.raises(ValueError, match="alternative"):
        tost_rank(x, y, alternative="two-sided")
    with pytest.raises(ValueError, match="method"):
        tost_ratio(x, y, method="log-t")
    with pytest.raises(ValueError, match="delta"):
        tost_rank(x, y, delta=0.5)
    with pytest.raises(TypeError, match="paired"):
        tost_rank(x, y, paired=1)
    with pytest.raises(ValueError, match="n_resamples must be at least"):
        tost_ratio(x, y, method="bootstrap-t", n_resamples=10)


def test_tost_rank_all_tied_samples_use_the_variance_bound():
    # closed forms with the normal reference: unpaired se = 1/(2 sqrt(min n)), paired 1/sqrt(n)
    res = tost_rank([0.0, 0.0], [0.0, 0.0], delta=0.1)
    assert res.method == "brunner-munzel-bound" and not res.within_margin
    assert res.pvalue == pytest.approx(stats.norm.sf(0.1 / (0.5 / np.sqrt(2))), rel=1e-12)   # 0.389
    res = tost_rank(np.zeros(200), np.zeros(300), delta=0.1)
    assert res.within_margin and res.pvalue == pytest.approx(stats.norm.sf(0.1 / (0.5 / np.sqrt(200))))
    assert (res.low, res.high) == pytest.approx((0.5 - stats.norm.ppf(0.95) * 0.5 / np.sqrt(200),
                                                 0.5 + stats.norm.ppf(0.95) * 0.5 / np.sqrt(200)))
    res = tost_rank(np.ones(50), np.ones(50), delta=0.1, paired=True)
    assert res.method == "brunner-munzel-paired-bound" and not res.within_margin
    assert res.pvalue == pytest.approx(stats.norm.sf(0.1 / (1 / np.sqrt(50))), rel=1e-12)   # 0.240


def test_tost_rank_type_one_error_when_samples_can_be_all_tied():
    # x = 0 always, y ~ Bernoulli(0.2): theta = 0.5 + (0 - 0.2)/2 = 0.4, on the margin of
    # H0: theta <= 0.4. With n = 8, y is all zero (every placement tied) with probability
    # 0.8^8 = 0.17: a zero standard error rejected every one of those (size >= 0.17).
    rng = np.random.default_rng(11)
    reps, n = 1000, 8
    ys = np.array([(rng.random(n) < 0.2).astype(float) for _ in range(reps)])
    p = RK._tost_rank_pvalues(np.zeros((reps, n)), ys, delta=0.1, alternative="greater")
    tied = ys.max(axis=1) == 0               # every placement tied: the variance bound
    assert tost_rank(np.zeros(n), ys[np.argmax(tied)], delta=0.1).method == "brunner-munzel-bound"
    rejected = np.mean(p <= 0.05)
    assert tied.mean() > 0.12                            # the degenerate case is frequent here
    assert rejected <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


# ------------------------------------------------- sparse binary data (was a known defect)
# With plug-in (Wald-type) standard errors alone, the rank and ratio TOSTs were liberal on
# sparse binary data with one arm constant: exact size 0.12 (rank) and 0.17 (ratio) at
# n = 30 on the margin, 0.06 / 0.08 at n = 300. A margin is now rejected only where the
# score-type test (variance under the null-restricted weights) rejects too. With x
# constant the tests depend on y only through k = #{y = 1}, so the size is an exact sum
# over k of binomial probabilities (no Monte Carlo error).


def _exact_size(n, p_event, reject):
    """P(reject) when the test depends on the data only through k ~ Bin(n, p_event);
    ``reject(k)`` takes the array of k and returns one decision per k."""
    k = np.arange(n + 1)
    return float(stats.binom.pmf(k, n, p_event)[reject(k)].sum())


def _binary(n, k):
    """Rows of n binary values, the first k[j] of row j ones (k an int or array of ints)."""
    return (np.arange(n) < np.asarray(k)[..., None]).astype(float)


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("n", [30, 100, 300])
def test_tost_rank_size_on_sparse_binary_data_with_one_arm_constant(n, paired):
    # x = 0 always, y ~ Bernoulli(0.2): theta = 0.5 + (0 - 0.2)/2 = 0.4, on the margin of
    # H0: theta <= 0.4. Plug-in alone: 0.122 / 0.080 / 0.062 at n = 30 / 100 / 300.
    size = _exact_size(n, 0.2, lambda k: RK._tost_rank_pvalues(
        np.zeros((k.size, n)), _binary(n, k), delta=0.1, alternative="greater", paired=paired) <= 0.05)
    assert size <= 0.05, size


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("n", [30, 100, 300])
def test_tost_ratio_size_on_sparse_binary_data_with_one_arm_constant(n, paired):
    # x = 1 always, y ~ Bernoulli(1/1.1): ratio of means 1.1, on the margin of H0: ratio >=
    # 1.1 (y all ones is "degenerate": never rejects). Plug-in alone: 0.172 / 0.099 / 0.083.
    # The score-type half is the binomial score test of the miss rate, whose exact size
    # oscillates around alpha with n (discreteness): 0.0539 at n = 300, as for Wilson's
    # score z-test there (closed form below); the bound is that test's size + 0.001.
    p0 = 1 / 1.1
    size = _exact_size(n, p0, lambda k: np.concatenate([[False], RT._tost_ratio_pvalues(
        np.ones((k.size - 1, n)), _binary(n, k[1:]), margin=0.1, alternative="less",
        paired=paired) <= 0.05]))                 # k = 0: y has mean 0, no ratio
    k = np.arange(n + 1)
    wilson = stats.binom.pmf(k, n, p0)[(k / n - p0) / np.sqrt(p0 * (1 - p0) / n)
                                      >= stats.norm.ppf(0.95)].sum()
    assert size <= max(0.05, wilson) + 0.001, (size, wilson)


def test_score_half_is_the_binomial_score_test():
    # Closed form: x = 1, y binary with k misses out of n, margin r: the null-restricted
    # weights give y the event rate p0 = 1/r, and t = (p0 - p_hat)/sqrt(p0 (1 - p0)/(n - 1))
    # on n - 1 df (the score statistic with the n/(n - 1) variance factor); the rank test
    # with x = 0 gives the same statistic for p0 = 1 - 2 theta0 (Welch df of one component).
    n, k = 40, 3
    y = np.zeros(n)
    y[k:] = 1.0
    p_hat, p0 = 1 - k / n, 1 / 1.1
    t_ref = (p0 - p_hat) / math.sqrt(p0 * (1 - p0) / (n - 1))
    ft = RT._FiellerT(np.ones(n), y, paired=False)
    np.testing.assert_allclose(ft._t_df_restricted(1.1), [t_ref, n - 1], rtol=1e-7)
    res = tost_ratio(np.ones(n), y, margin=0.1, alternative="less")
    t_plug, df_plug = ft.t_df(1.1)
    np.testing.assert_allclose(res.pvalue, max(stats.t.cdf(t_ref, n - 1),
                                               stats.t.cdf(t_plug, df_plug)), rtol=1e-7)
    yb = 1.0 - y                                 # Bernoulli events, rate k/n
    px, py = RK._placements(np.zeros(n), yb)
    rs = RK._RankScore(px, 1 - py, float(px.mean()), paired=False)
    theta0, q0 = 0.45, 1 - 2 * 0.45
    t_rank = ((1 - k / n) / 2 - theta0) / math.sqrt(q0 * (1 - q0) / 4 / (n - 1))
    np.testing.assert_allclose(rs.t_df(theta0), [t_rank, n - 1], rtol=1e-7)


# ------------------------------------------------ identical paired trials (was "degenerate")
# Trials identical in every pair (or with one constant ratio) were "degenerate": p = 1
# whatever n, while Fieller's t is defined there. They now get the score-type bound of
# the unseen discordant trial: the null fitted to the trials plus one trial from the
# observed ranges (max x, min y) / (min x, max y), as the rank test's all-tied bound.


def test_identical_binary_trials_give_the_binomial_score_test_with_the_unseen_pair():
    # Closed form: x = y with k events (value 1) in n trials, margin 1.1. The null fit adds
    # the pair (max x, min y) = (1, 0), d = 1; the null-restricted weights of d in
    # {-0.1 (k), 0 (n - k), 1 (1)} are the multinomial fit p(-0.1) = (k + 1)/(1.1 (n + 1)),
    # p(1) = p(-0.1)/10, so var(d) = 0.1 (k + 1)/n (with the n/(n - 1) factor on n + 1
    # points) and t = -sqrt(0.1) k/sqrt(k + 1) on n - 1 df; the lower margin mirrors it.
    # 29 events are needed at n = 100 and alpha = 0.05, as for the binomial score test of
    # "no discordant pair among k events" (z = -sqrt(0.1 k)); Fieller's t alone: k = 3.
    n = 100
    for k in (3, 27, 30):
        x = _binary(n, k)
        ref = stats.t.cdf(-math.sqrt(0.1) * k / math.sqrt(k + 1), n - 1)
        res = tost_ratio(x, x, margin=0.1, paired=True)
        assert res.method == "fieller-paired" and res.pvalue_difference == 1.0
        np.testing.assert_allclose([res.pvalue_low, res.pvalue_high], [ref, ref], rtol=1e-6)
        assert res.within_margin == (ref <= 0.05) == (k >= 30)
        _agrees(res)


def test_identical_trials_need_enough_trials():
    # uniform values identical in every pair, margin ±10%: not shown with 30 trials, shown
    # with 300 (p = 0.11, 4e-5); a constant ratio 1.05 likewise is tested, not "degenerate"
    rng = np.random.default_rng(20)
    for n, shown in ((30, False), (300, True)):
        x = rng.random(n)
        res = tost_ratio(x, x, margin=0.1, paired=True)
        assert res.within_margin == shown and 1e-8 < res.pvalue < 1 and res.low < 1 < res.high
        _agrees(res)
    y = rng.random(100)
    res = tost_ratio(1.05 * y, y, margin=0.1, paired=True)
    assert res.method == "fieller-paired" and res.low <= 1.05 <= res.high
    _agrees(res)
    # both samples constant: still nothing to estimate a variance from
    assert tost_ratio(np.ones(50), np.ones(50), paired=True).method == "degenerate"


@pytest.mark.parametrize(("n", "p_event"), [(100, 0.1), (200, 0.15)])
def test_tost_ratio_size_when_paired_trials_nearly_always_agree(n, p_event):
    # Trials (x, y) = (1, 1) with probability p, (1, 0) with q = 0.1 p, else (0, 0):
    # mean(x)/mean(y) = (p + q)/p = 1.1, on the margin of H0: ratio >= 1.1. The test
    # depends on the data only through the counts (k, j) of the first two kinds, so its
    # size is an exact multinomial sum. With no discordant pair (j = 0, probability 0.37 /
    # 0.05) the trials are identical; Fieller's t alone would reject them from k = 3
    # events (size 0.37 at n = 100), the bound from k = 29 (size 4e-8 / 0.032).
    q = p_event * 0.1
    k, j = (v.ravel() for v in np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij"))
    keep = (k + j <= n) & (k >= 1)
    k, j = k[keep], j[keep]
    prob = np.exp(stats.multinomial.logpmf(np.stack([k, j, n - k - j], -1), n,
                                           [p_event, q, 1 - p_event - q]))
    k, j, prob = k[prob > 1e-12], j[prob > 1e-12], prob[prob > 1e-12]
    i = np.arange(n)
    x = (i < (k + j)[:, None]).astype(float)
    y = (i < k[:, None]).astype(float)
    p = RT._tost_ratio_pvalues(x, y, margin=0.1, alternative="less", paired=True)
    size = float(prob[p <= 0.05].sum())
    assert size <= 0.05, size


def test_interval_search_on_proportional_sparse_trials():
    # x_i = 1.01 y_i on k event trials (plus j trials (1, 0)), else 0: t(r) jumps at the
    # estimate (0/0 up to rounding there), and the interval search raised ValueError
    # (Brent without a sign change); the plug-in limit is then the estimate itself
    for k, j, eps in ((10, 0, 0.01), (50, 0, 1e-9), (22, 1, 0.01), (43, 3, 0.0)):
        x, y = np.zeros(100), np.zeros(100)
        x[:k], y[:k], x[k:k + j] = 1 + eps, 1.0, 1.0
        for alternative in ALTS:
            _agrees(tost_ratio(x, y, margin=0.1, paired=True, alternative=alternative))
