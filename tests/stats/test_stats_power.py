"""Simulated Mann–Whitney power and sample size: against closed forms and each other."""

import functools
import math

import pytest
from scipy import stats

from kvstats.stats import power_mann_whitney, trials_for_power


def test_null_power_is_alpha():
    # effect 0: the power is the size of the asymptotic test (alpha within MC error)
    res = power_mann_whitney(0.0, n_x=40, n_sim=4000, seed=1)
    lo, hi = stats.binom.ppf(0.005, 4000, 0.05) / 4000, stats.binom.isf(0.005, 4000, 0.05) / 4000
    assert lo <= res.power <= hi


@pytest.mark.parametrize("n_x,n_y,alternative", [(8, 8, "two-sided"), (5, 12, "greater"),
                                                 (3, 40, "less"), (9, 9, "two-sided")])
def test_power_is_that_of_the_test_mann_whitney_runs(n_x, n_y, alternative):
    # The same simulated experiments (the function's draw order: x then y per chunk) put
    # through mann_whitney(method="auto") one by one: exact U distribution when
    # min(n) <= 8, asymptotic above. The asymptotic test simulated at every n gave
    # 0.711 instead of 0.754 at r = 0.7, n = 8 (the exact test is less conservative;
    # power_mann_whitney(0.7, 8, n_sim=20000, seed=1), docs/statistics.md).
    import numpy as np

    from kvstats.stats import mann_whitney

    r, n_sim = 0.7 if alternative != "less" else -0.7, 400
    res = power_mann_whitney(r, n_x=n_x, n_y=n_y, alternative=alternative, n_sim=n_sim, seed=5)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n_sim, n_x)) + res.shift
    y = rng.standard_normal((n_sim, n_y))
    p = np.array([mann_whitney(a, b, alternative=alternative).pvalue for a, b in zip(x, y)])
    assert res.power == np.count_nonzero(p <= 0.05) / n_sim


def test_power_against_noether_normal_approximation():
    # reference: Noether (1987) large-sample power
    # Phi(sqrt(12 n_x n_y / (N+1)) |theta - 1/2| - z_{1-alpha/2}), at a moderate effect
    r, n = 0.3, 60
    res = power_mann_whitney(r, n_x=n, n_sim=4000, seed=2)
    theta = (1 + r) / 2
    approx = stats.norm.cdf(math.sqrt(12 * n * n / (2 * n + 1)) * (theta - 0.5)
                            - stats.norm.ppf(0.975))
    assert abs(res.power - approx) < 4 * res.standard_error + 0.02
    assert res.standard_error == math.sqrt(res.power * (1 - res.power) / 4000)   # binomial SE
    # r and the equivalent shift give the same simulated experiment
    same = power_mann_whitney(res.shift, n_x=n, effect_type="shift", n_sim=4000, seed=2)
    assert same.power == res.power and same.rank_biserial == pytest.approx(r)


def test_power_increases_with_n_and_one_sided_beats_two_sided():
    small = power_mann_whitney(0.3, n_x=20, n_sim=2000, seed=3).power
    large = power_mann_whitney(0.3, n_x=80, n_sim=2000, seed=3).power
    greater = power_mann_whitney(0.3, n_x=20, n_sim=2000, seed=3, alternative="greater").power
    assert small < large and small < greater


def test_trials_for_power_is_minimal():
    res = trials_for_power(0.5, power=0.8, n_sim=2000, seed=4)
    assert res.achieved_power >= 0.8
    below = power_mann_whitney(0.5, n_x=res.n_x - 1, n_sim=2000, seed=4).power
    assert below < 0.8
    assert abs(res.n_x - res.noether_n_x) <= max(3, 0.2 * res.noether_n_x)
    unequal = trials_for_power(-0.4, power=0.9, ratio=2.0, n_sim=1000, seed=5)
    assert unequal.n_y == round(2 * unequal.n_x) and unequal.achieved_power >= 0.9


@pytest.mark.parametrize("alternative,expected", [("two-sided", 16), ("greater", 13)])
def test_noether_sample_size_closed_form_with_unequal_groups(alternative, expected):
    # reference: Noether (1987), N = (z_{1-a/s} + z_{power})^2 / (12 c (1 - c) (theta - 1/2)^2),
    # n_x = ceil(c N) with c = n_x/N = 1/(1 + ratio). r = 0.5 (theta = 0.75), ratio = 2
    # (c = 1/3), alpha = 0.05, power 0.8: two-sided z = 1.959964 + 0.841621, N = 47.09,
    # n_x = ceil(15.70) = 16; one-sided z = 1.644854 + 0.841621, N = 37.10, n_x = 13
    res = trials_for_power(0.5, power=0.8, ratio=2.0, alternative=alternative, n_sim=200, seed=0)
    c = 1 / 3
    z = stats.norm.ppf(1 - 0.05 / (2 if alternative == "two-sided" else 1)) + stats.norm.ppf(0.8)
    assert res.noether_n_x == math.ceil(c * z**2 / (12 * c * (1 - c) * 0.25**2)) == expected
    assert res.n_y == round(2.0 * res.n_x)
    # the search simulates (n_x, round(ratio n_x)) with the same seed as power_mann_whitney
    at = power_mann_whitney(0.5, n_x=res.n_x, n_y=res.n_y, alternative=alternative, n_sim=200,
                            seed=0)
    below = power_mann_whitney(0.5, n_x=res.n_x - 1, n_y=round(2.0 * (res.n_x - 1)),
                               alternative=alternative, n_sim=200, seed=0)
    assert res.achieved_power == at.power >= 0.8 > below.power


def test_bad_input():
    with pytest.raises(ValueError, match=r"effect must be in \(-1.0, 1.0\)"):
        power_mann_whitney(1.0, n_x=10)
    with pytest.raises(ValueError, match="effect_type must be one of"):
        power_mann_whitney(0.2, n_x=10, effect_type="d")
    with pytest.raises(ValueError, match="n_x must be an integer in"):
        power_mann_whitney(0.2, n_x=0)
    with pytest.raises(ValueError, match="n_sim must be an integer in"):
        power_mann_whitney(0.2, n_x=5, n_sim=0)
    with pytest.raises(ValueError, match="effect must be nonzero"):
        trials_for_power(0.0)
    with pytest.raises(ValueError, match="effect must point the way"):
        trials_for_power(-0.3, alternative="greater")
    with pytest.raises(ValueError, match="target power 0.99 not reached"):
        trials_for_power(0.01, power=0.99, n_sim=50, max_n=64)


def test_trials_for_power_fails_at_once_beyond_max_n(monkeypatch):
    # r = 0.01 needs n_x ≈ 5.2e4 at power 0.8 (Noether: 2 (z_.975 + z_.8)^2 / (3 r^2)); with
    # max_n = 1000 no simulation may run (before: one simulated power at n = max_n, which
    # takes minutes for a large max_n)
    from kvstats.stats import power as power_mod

    def no_simulation(*args, **kwargs):
        raise AssertionError("simulated although Noether's n already exceeds max_n")

    monkeypatch.setattr(power_mod, "_simulated_power", no_simulation)
    expected = math.ceil(2 * (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) ** 2 / (3 * 0.01**2))
    with pytest.raises(ValueError, match=rf"max_n=1000: Noether's approximation needs "
                                         rf"n_x ≈ {expected:,} "):
        trials_for_power(0.01, power=0.8, max_n=1000)


# --- the paired sign test's exact power (power_sign_test, pairs_for_power) ----------------

@functools.lru_cache(maxsize=None)
def _sign_rejections(n, alpha, alternative):
    """The outcomes (k nonzero pairs, j of them positive) where kvstats.stats.sign_test
    itself returns p <= alpha."""
    import numpy as np

    from kvstats.stats import sign_test

    out = []
    for k in range(1, n + 1):
        for j in range(k + 1):
            x = np.r_[np.ones(j), -np.ones(k - j), np.zeros(n - k)]
            if sign_test(x, np.zeros(n), alternative=alternative).pvalue <= alpha:
                out.append((k, j))
    return tuple(out)


def _sign_power_by_enumeration(dominance, n, alpha, alternative, p_zero):
    """Reference: the probability of the outcomes where sign_test rejects."""
    theta = (1 + dominance) / 2
    return sum(stats.binom.pmf(k, n, 1 - p_zero) * stats.binom.pmf(j, k, theta)
               for k, j in _sign_rejections(n, alpha, alternative))


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize("n, p_zero, alpha", [(1, 0.0, 0.6), (5, 0.0, 0.0625), (12, 0.0, 0.05),
                                              (13, 0.3, 0.01), (24, 0.5, 0.05)])
def test_sign_power_is_the_probability_that_sign_test_rejects(alternative, n, p_zero, alpha):
    from kvstats.stats.power import power_sign_test

    for dominance in (-0.6, 0.0, 0.35, 1.0):
        res = power_sign_test(dominance, n, alpha=alpha, alternative=alternative, p_zero=p_zero)
        ref = _sign_power_by_enumeration(dominance, n, alpha, alternative, p_zero)
        assert res.power == pytest.approx(ref, rel=1e-9, abs=1e-15), dominance
        assert res.size == pytest.approx(
            _sign_power_by_enumeration(0.0, n, alpha, alternative, p_zero), rel=1e-9, abs=1e-15)
        assert res.size <= alpha


def test_sign_power_closed_forms():
    from kvstats.stats.power import power_sign_test

    # n = 5, no zeros, two-sided: only 5 of one sign rejects at alpha = 2/32, nothing at 0.05
    theta = 0.8
    assert power_sign_test(0.6, 5, alpha=0.0625).power == pytest.approx(theta**5 + (1 - theta)**5)
    assert power_sign_test(0.6, 5, alpha=0.05).power == 0.0
    # one-sided at alpha = 1/32: only all five positive
    assert power_sign_test(0.6, 5, alpha=1 / 32, alternative="greater").power == pytest.approx(
        theta**5)
    # every nonzero pair positive, each pair tied with probability 1/2: two-sided p = 2^(1-k)
    # rejects at 0.05 only when all k = 6 pairs differ, probability 2^-6
    assert power_sign_test(1.0, 6, alpha=0.05, p_zero=0.5).power == pytest.approx(2.0**-6)


def test_sign_power_against_simulated_rounded_pairs():
    # d = round(N(0.3, 1)): P(d > 0) = P(N >= 0.5), P(d < 0) = P(N < -0.5), the rest zero
    # (~37%): the exact power vs 2,000 simulated sign tests on such pairs, within 3.5 sd
    import numpy as np

    from kvstats.stats import sign_test
    from kvstats.stats.power import power_sign_test

    pos, neg = stats.norm.sf(0.5, loc=0.3), stats.norm.cdf(-0.5, loc=0.3)
    exact = power_sign_test((pos - neg) / (pos + neg), 60, p_zero=1 - pos - neg).power
    rng = np.random.default_rng(5)
    reps = 2000
    hits = sum(sign_test(np.round(rng.normal(0.3, 1, 60)), np.zeros(60)).pvalue <= 0.05
               for _ in range(reps))
    assert 0.4 < exact < 0.8
    assert abs(hits / reps - exact) <= 3.5 * math.sqrt(exact * (1 - exact) / reps)


@pytest.mark.parametrize("dominance, alternative, p_zero, alpha", [
    (0.5, "two-sided", 0.0, 0.05), (0.3, "greater", 0.2, 0.05), (-0.4, "less", 0.0, 0.01),
    (0.5, "two-sided", 0.0, 0.05 / 1140), (0.4, "two-sided", 0.6, 0.05)])
def test_pairs_for_power_is_the_smallest_n_and_names_the_saw_tooth(dominance, alternative,
                                                                  p_zero, alpha):
    from kvstats.stats.power import pairs_for_power, power_sign_test

    res = pairs_for_power(dominance, power=0.8, alpha=alpha, alternative=alternative,
                          p_zero=p_zero)

    def pw(n):
        return power_sign_test(dominance, n, alpha=alpha, alternative=alternative,
                               p_zero=p_zero).power

    assert res.achieved_power == pytest.approx(pw(res.n_pairs), rel=1e-12)
    assert res.achieved_power >= 0.8
    assert all(pw(n) < 0.8 for n in range(max(1, res.n_pairs - 40), res.n_pairs))
    assert res.n_pairs_all_above >= res.n_pairs
    stable = res.n_pairs_all_above
    assert all(pw(n) >= 0.8 for n in range(stable, 2 * stable + 1))
    if stable > res.n_pairs:        # the n just below it falls short
        assert pw(stable - 1) < 0.8


def test_pairs_for_power_saw_tooth_example():
    # dominance 0.5, two-sided, no zeros: 30 pairs reach 0.80 but 31 do not (a discrete
    # test's power is not monotone in n), and only from 35 on does every n up to 70
    from kvstats.stats.power import pairs_for_power, power_sign_test

    res = pairs_for_power(0.5, power=0.8)
    assert (res.n_pairs, res.n_pairs_all_above) == (30, 35)
    assert power_sign_test(0.5, 31).power < 0.8


def test_sign_power_bad_input():
    from kvstats.stats.power import pairs_for_power, power_sign_test

    with pytest.raises(ValueError, match=r"dominance must be in \[-1.0, 1.0\]"):
        power_sign_test(1.5, 10)
    with pytest.raises(ValueError, match=r"p_zero must be in \[0.0, 1.0\)"):
        power_sign_test(0.5, 10, p_zero=1.0)
    with pytest.raises(ValueError, match="n_pairs must be an integer in"):
        power_sign_test(0.5, 0)
    with pytest.raises(ValueError, match="alternative must be one of"):
        power_sign_test(0.5, 10, alternative="two.sided")
    with pytest.raises(ValueError, match="dominance must be nonzero"):
        pairs_for_power(0.0)
    with pytest.raises(ValueError, match="dominance must point the way"):
        pairs_for_power(-0.3, alternative="greater")
    with pytest.raises(ValueError, match="max_n=50: the normal approximation needs about"):
        pairs_for_power(0.1, max_n=50)


@pytest.mark.parametrize("alternative", ["two-sided", "greater"])
def test_mann_whitney_power_equals_quadrature_with_one_x(alternative):
    # Exact reference for n_x = 1 (the exact-test branch): U = #{y_j < x} ~ Bin(n_y, Φ(x))
    # given x ~ N(δ, 1), and under the null U is uniform on 0..n_y, so the exact test's
    # p-values are (n_y + 1 - u)/(n_y + 1) ("greater") and min(1, 2 min(u + 1, n_y + 1 - u)
    # /(n_y + 1)) (two-sided). Power = Σ_{u: p <= α} ∫ Bin(u; n_y, Φ(t)) φ(t − δ) dt
    # (scipy.integrate.quad). n_y = 39, r = 0.6: the simulated power within 4 Monte Carlo
    # SEs (n_sim = 20,000, SE ~0.0035).
    import numpy as np
    from scipy import integrate

    n_y, r = 39, 0.6
    res = power_mann_whitney(r, n_x=1, n_y=n_y, alternative=alternative, n_sim=20000, seed=7)
    u = np.arange(n_y + 1)
    if alternative == "greater":
        p = (n_y + 1 - u) / (n_y + 1)
    else:
        p = np.minimum(1.0, 2 * np.minimum(u + 1, n_y + 1 - u) / (n_y + 1))
    region = u[p <= 0.05]
    delta = math.sqrt(2) * stats.norm.ppf((1 + r) / 2)      # r = 2 Φ(δ/√2) − 1
    assert res.shift == pytest.approx(delta, rel=1e-12)
    assert region.tolist() == ([38, 39] if alternative == "greater" else [0, 39])
    exact = integrate.quad(lambda t: stats.binom.pmf(region, n_y, stats.norm.cdf(t)).sum()
                           * stats.norm.pdf(t - delta), -12, 15, limit=200)[0]
    assert 0.1 < exact < 0.9
    assert abs(res.power - exact) <= 4 * math.sqrt(exact * (1 - exact) / 20000), (res.power, exact)
