"""tost_ratio's difference test (``pvalue_difference``, method "fieller") is what its docs
now say (R5 finding 1): twice the smaller one-sided p-value at ratio 1, each the larger of
Welch's (or the paired) t-test and the score-type test, so it never contradicts the
reported interval and holds its size on skewed paired trials where the plain paired
t-test does not. References: scipy's t-tests for the plug-in half; the empirical-likelihood
weights solved here by scipy root finders (Owen 2001, ch. 3), not by kvstats' solver, for
the score half; size by simulation (docs/statistics.md, "Ratio of means";
experiments/calibrate_ratio_difference.py gives the full tables).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats

from kvstats.stats._equivalence_ratio import _FiellerT
from kvstats.stats.equivalence import equivalence_verdict, tost_ratio

# a paired, skewed sample; ttest_rel gives p = 0.0364
PX = np.array([2.5, 1.52, 0.29, 0.04, 1.56, 0.24, 0.7, 0.08, 0.4, 0.48, 0.23, 3.65])
PY = np.array([0.01, 3.49, 0.45, 1.44, 1.27, 3.96, 1.87, 3.89, 1.47, 1.69, 0.68, 5.47])
# unpaired, skewed (default_rng(342), rounded): Welch p = 0.062 <= 2α = 0.1, yet 1 lies
# inside the reported 90% interval [0.133, 1.021]
UX = np.array([5.21, 0.86, 0.08, 0.22, 0.43, 2.7, 0.76, 0.13, 0.36, 0.51, 0.23, 1.66])
UY = np.array([0.14, 1.9, 0.65, 2.88, 5.95, 3.51, 1.86, 1.24, 1.47, 4.1, 2.36, 2.03])


def _two_sided(t_plug, df_plug, t_score, df_score):
    up = max(stats.t.cdf(t_plug, df_plug), stats.t.cdf(t_score, df_score))
    down = max(stats.t.sf(t_plug, df_plug), stats.t.sf(t_score, df_score))
    return min(1.0, 2 * min(up, down))


def _score_t_paired(x, y):
    """t of d = x − y with var(d) under the EL weights with mean 0: w_i = 1/(n (1 + λ d_i))."""
    d, n = x - y, x.size
    lam = optimize.brentq(lambda v: np.sum(d / (1 + v * d)), -1 / d.max() + 1e-12,
                          -1 / d.min() - 1e-12, xtol=1e-15)
    w = 1 / (n * (1 + lam * d))
    var = np.sum(w * d**2) * n / (n - 1)
    return d.mean() / np.sqrt(var / n), n - 1


def _score_t_unpaired(x, y):
    """Welch's t with each variance under the EL weights of x and y whose means agree:
    w_xi = 1/(a_x + η x_i), w_yj = 1/(a_y − η y_j) (the Lagrange conditions), a_x, a_y, η
    solving sum(w_x) = sum(w_y) = 1 and sum(w_x x) = sum(w_y y)."""
    nx, ny = x.size, y.size

    def eqs(v):
        ax, ay, eta = v
        wx, wy = 1 / (ax + eta * x), 1 / (ay - eta * y)
        return [wx.sum() - 1, wy.sum() - 1, wx @ x - wy @ y]

    ax, ay, eta = optimize.fsolve(eqs, [nx, ny, 0.0], xtol=1e-14)
    wx, wy = 1 / (ax + eta * x), 1 / (ay - eta * y)
    np.testing.assert_allclose(eqs([ax, ay, eta]), 0, atol=1e-10)
    assert (wx > 0).all() and (wy > 0).all()
    mu = wx @ x
    a = np.sum(wx * (x - mu) ** 2) * nx / (nx - 1) / nx
    b = np.sum(wy * (y - mu) ** 2) * ny / (ny - 1) / ny
    df = (a + b) ** 2 / (a**2 / (nx - 1) + b**2 / (ny - 1))
    return (x.mean() - y.mean()) / np.sqrt(a + b), df


def test_paired_difference_pvalue_is_the_larger_of_the_paired_t_and_the_score_test():
    res = tost_ratio(PX, PY, paired=True)
    t_rel = stats.ttest_rel(PX, PY)
    ref = _two_sided(t_rel.statistic, PX.size - 1, *_score_t_paired(PX, PY))
    np.testing.assert_allclose(res.pvalue_difference, ref, rtol=1e-9)
    # the score half binds here: the reported p is not ttest_rel's, and not "different"
    assert round(res.pvalue_difference, 4) == 0.0760 and round(t_rel.pvalue, 4) == 0.0364
    assert equivalence_verdict(res) == "inconclusive"


def test_unpaired_difference_pvalue_is_the_larger_of_welch_and_the_score_test():
    res = tost_ratio(UX, UY, margin=0.2)
    welch = stats.ttest_ind(UX, UY, equal_var=False)
    df_w = _FiellerT(UX, UY, False).t_df(1.0)[1]
    ref = _two_sided(welch.statistic, df_w, *_score_t_unpaired(UX, UY))
    np.testing.assert_allclose(res.pvalue_difference, ref, rtol=1e-8)
    assert res.pvalue_difference > 0.1 > welch.pvalue


def test_difference_test_agrees_with_the_interval():
    # p_difference <= 2α iff 1 lies outside the (1 − 2α) interval: the same one-sided
    # p-values at ratio 1 decide both. Welch's p alone breaks it on UX, UY (0.062, 1 inside).
    res = tost_ratio(UX, UY, margin=0.2, alpha=0.05)
    assert res.low < 1 < res.high and res.pvalue_difference > 0.1
    assert stats.ttest_ind(UX, UY, equal_var=False).pvalue <= 0.1
    rng = np.random.default_rng(21)
    for i in range(40):
        n, paired = int(rng.integers(4, 40)), bool(i % 2)
        y = rng.lognormal(0, 1, n)
        x = y * rng.lognormal(rng.normal(0, 0.3), 0.8, n) if paired else rng.lognormal(
            rng.normal(0, 0.5), 1, n)
        for alpha in (0.05, 0.01):
            r = tost_ratio(x, y, margin=0.2, alpha=alpha, paired=paired)
            assert (r.pvalue_difference <= 2 * alpha) == (r.low > 1 or r.high < 1), (i, alpha)


def test_difference_test_size_on_skewed_pairs_and_normal_data():
    # Size at ratio 1, 20,000 samples each, bound α + 3 SE. Paired log-normal σ 1 trials
    # times log-normal noise σ 0.5 (the skewed design of docs/statistics.md), n = 100: the
    # plain paired t-test rejects 0.054 / 0.014 (calibrate_ratio_difference.py, 40,000
    # samples), above the bound at 0.01; the shipped test 0.046 / 0.010. On paired normal
    # data (n = 30) the shipped test is conservative, the documented cost (0.039 / 0.007
    # there, paired t 0.049 / 0.010).
    rng = np.random.default_rng(2026)
    reps = 20_000
    y = rng.lognormal(-0.5, 1, (reps, 100))
    x = y * rng.lognormal(-0.125, 0.5, (reps, 100))
    skewed = _FiellerT(x, y, True).p_difference()
    c = rng.normal(size=(reps, 30))
    xn, yn = (1 + 0.2 * c + 0.2 * rng.normal(size=(reps, 30)) for _ in range(2))
    normal = _FiellerT(xn, yn, True).p_difference()
    for alpha in (0.05, 0.01):
        bound = alpha + 3 * np.sqrt(alpha * (1 - alpha) / reps)
        assert np.mean(skewed <= alpha) <= bound, alpha
        assert np.mean(normal <= alpha) <= bound, alpha
        assert np.mean(normal <= alpha) >= 0.4 * alpha, alpha   # conservative, not void
    # the public function reports the core's p-value
    for i in range(3):
        assert tost_ratio(x[i], y[i], paired=True).pvalue_difference == skewed[i]
