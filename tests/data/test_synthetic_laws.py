"""The synthetic distributions draw the laws their docstrings state (kvstats.data.synthetic):
the Student-t tail index by the Hill estimator, per-coordinate (not multivariate) heavy
tails, uniformly random outlier channels and low-rank subspaces, the subspace queries'
logit variance with noise, and independence across trials and between keys and values.
Each check says its reference and tolerance; each is shown to reject a wrong law.
"""

import numpy as np
import pytest
from scipy import integrate, stats

from kvstats import sample


# --- heavy_tailed: the tail index -----------------------------------------------------

def _hill(x: np.ndarray, k: int) -> float:
    """Hill's estimator of the tail index 1/γ of |x| from its k largest values."""
    a = np.sort(np.abs(x))[::-1]
    return 1.0 / float(np.mean(np.log(a[:k] / a[k])))


def _hill_target(nu: float, frac: float) -> float:
    """What Hill's estimator converges to at a fixed fraction ``frac`` of the sample in the
    tail (large n): 1/γ(u) with γ(u) = E[log(|X|/u) | |X| > u] = ∫_u^∞ S(x)/x dx / S(u),
    S the survival of |X| for X ~ t_ν (scipy.stats.t), u its (1 − frac) quantile. This is
    ν up to the t's second-order tail term (ν = 3: 2.975, ν = 5: 4.70 at frac = 1e-3)."""
    dist = stats.t(nu)
    u = dist.isf(frac / 2)
    val, _ = integrate.quad(lambda x: 2 * dist.sf(x) / x, u, np.inf, limit=200)
    return 1.0 / (val / (2 * dist.sf(u)))


@pytest.mark.parametrize("nu", [1.05, 1.5, 3.0, 5.0])
def test_heavy_tailed_tail_index_by_hill(nu):
    # 2e6 coordinates, k = 2,000 upper order statistics: γ̂ = 1/ν̂ is asymptotically
    # normal with relative SD 1/√k = 2.2%; tolerance 4 SD around the target. A law with a
    # 25% larger ν (target 20-25% away, ~10 SD) is rejected with the same rule.
    x = sample("heavy_tailed", 20, 1000, 100, seed=3, nu=nu).K.ravel()
    k = 2000
    est, frac = _hill(x, k), k / x.size
    tol = 4 / np.sqrt(k)
    assert abs(_hill_target(nu, frac) / est - 1) < tol, (est, _hill_target(nu, frac))
    assert abs(_hill_target(1.25 * nu, frac) / est - 1) > tol


def test_heavy_tails_are_per_coordinate_not_per_vector():
    # i.i.d. t coordinates: |x_i| and |x_j| of one key are independent (Kendall's τ ≈ 0,
    # SD ≈ √(2(2n+5)/(9n(n−1))) ≈ 0.0047 at n = 20,000 keys). A multivariate t (one χ²
    # per key: the same marginals, which the KS test of test_synthetic.py cannot tell
    # apart) makes them dependent: τ ≈ 0.1 at ν = 3, rejected by the same 5-SD rule.
    t = sample("heavy_tailed", 20, 1000, 8, seed=4, nu=3.0)
    K = t.K.reshape(-1, 8)
    sd = np.sqrt(2 * (2 * len(K) + 5) / (9 * len(K) * (len(K) - 1)))
    assert abs(stats.kendalltau(np.abs(K[:, 0]), np.abs(K[:, 1])).statistic) < 5 * sd
    rng = np.random.default_rng(0)
    mvt = rng.standard_normal(K.shape) / np.sqrt(rng.chisquare(3.0, (len(K), 1)) / 3.0)
    assert stats.kendalltau(np.abs(mvt[:, 0]), np.abs(mvt[:, 1])).statistic > 5 * sd


# --- outlier_channels and low_rank: where the structure lies --------------------------

def test_outlier_channels_are_uniformly_random_per_trial():
    # 4 of 16 channels per trial, 2,000 trials: each channel is chosen with probability
    # 1/4, counts multinomial-like; chi-square goodness of fit of the 16 counts (the counts
    # of one trial are dependent, a sum of 4 without replacement: the statistic is then
    # (16 − 4)/(16 − 1) times a χ²₁₅, which only makes the test conservative).
    T, d, c = 2000, 16, 4
    t = sample("outlier_channels", T, 8, d, seed=5, n_channels=c, magnitude=50.0)
    chosen = np.argsort((t.K ** 2).mean(axis=1), axis=1)[:, -c:]          # (T, c)
    counts = np.bincount(chosen.ravel(), minlength=d)
    assert stats.chisquare(counts).pvalue > 1e-3
    # the same statistic rejects channels biased to the first half (probability ×1.2)
    biased = np.bincount(np.concatenate([chosen.ravel(), np.arange(d // 2).repeat(T // 20)]),
                         minlength=d)
    assert stats.chisquare(biased).pvalue < 1e-6


@pytest.mark.parametrize("energy", ["total", "per_direction"])
def test_low_rank_subspace_is_uniformly_random(energy):
    # For a uniformly random r-dimensional subspace of R^d (Grassmannian), the projector's
    # diagonal entry P₁₁ = ‖Bᵀe₁‖² ~ Beta(r/2, (d − r)/2). The subspace of a noiseless
    # trial is the row space of its keys. KS over 1,000 trials; a subspace drawn with a
    # preferred first axis (e₁ weighted ×2 before orthonormalising) is rejected.
    d, r, T = 12, 3, 1000
    t = sample("low_rank", T, 16, d, seed=6, rank=r, noise=0.0, energy=energy)
    vt = np.linalg.svd(t.K, full_matrices=False)[2][:, :r, :]           # (T, r, d)
    p11 = (vt[:, :, 0] ** 2).sum(-1)
    law = stats.beta(r / 2, (d - r) / 2)
    assert stats.kstest(p11, law.cdf).pvalue > 1e-3
    g = np.random.default_rng(1).standard_normal((T, d, r))
    g[:, 0] *= 2.0
    q = np.linalg.qr(g)[0]
    assert stats.kstest((q[:, 0, :] ** 2).sum(-1), law.cdf).pvalue < 1e-6


@pytest.mark.parametrize("energy,v,noise", [("total", 8.0, 2.0), ("per_direction", 1.0, 0.5)])
def test_subspace_query_logit_variance_includes_the_noise(energy, v, noise):
    # q = √(d/r)·BBᵀz and k = B c + noise·n give q·k/√d = (1/√r) w·(c + noise·Bᵀn), w = Bᵀz
    # ~ N(0, I_r) and c + noise·Bᵀn ~ N(0, (v + noise²) I_r): variance v + noise² (scale 1;
    # the docstring said v). The logits share a trial's query: SE (v + noise²)·
    # √((r + 2)/(r·T·n_q) + 2/#logits) as in test_lowrank_family.py.
    d, r, N, T, nq = 32, 4, 64, 500, 4
    t = sample("low_rank", T, N, d, seed=8, rank=r, noise=noise, n_queries=nq, energy=energy,
               query="subspace")
    logits = (t.q @ np.swapaxes(t.K, -1, -2)).ravel() / np.sqrt(d)
    want = v + noise ** 2
    se = want * np.sqrt((r + 2) / r / (T * nq) + 2 / logits.size)
    assert abs(logits.var() - want) < 5 * se
    assert abs(logits.var() - v) > 5 * se                # the noise term is resolved


# --- independence ---------------------------------------------------------------------

@pytest.mark.parametrize("dist,params", [("gaussian", {}), ("heavy_tailed", {"nu": 3.0}),
                                         ("low_rank", {"rank": 4}), ("outlier_channels", {})])
def test_trials_keys_values_and_queries_are_independent(dist, params):
    # Kendall's τ between |·| of matching entries of (a) trial t and t + 1, (b) K and V
    # with values of the same family and parameters (their own streams), (c) the queries
    # and the first key of each trial: each ≈ 0 with SD ≈ √(2(2n+5)/(9n(n−1))); 5 SD.
    # (A stream shared by mistake gives τ = 1 in (b); the check's power is shown on a copy.)
    t = sample(dist, 200, 32, 16, seed=9, value_distribution=dist, value_params=params, **params)

    def tau(a, b):
        a, b = np.abs(a).ravel(), np.abs(b).ravel()
        sd = np.sqrt(2 * (2 * a.size + 5) / (9 * a.size * (a.size - 1)))
        return stats.kendalltau(a, b).statistic / sd

    assert abs(tau(t.K[:-1], t.K[1:])) < 5
    assert abs(tau(t.K, t.V)) < 5
    assert abs(tau(t.q[:, 0], t.K[:, 0])) < 5
    assert tau(t.K, t.K * 1.5) > 5


def test_structure_changes_from_trial_to_trial():
    # Outlier channels and low-rank bases are drawn per trial: two consecutive trials'
    # subspaces overlap as two independent uniform ones, E tr(P_t P_{t+1}) = r²/d
    # (= 0.5 here; a repeated basis gives r = 2), and their channel sets differ.
    d, r, T = 32, 4, 400
    t = sample("low_rank", T, 16, d, seed=10, rank=r, noise=0.0)
    vt = np.linalg.svd(t.K, full_matrices=False)[2][:, :r, :]
    overlap = (np.einsum("tid,tjd->tij", vt[:-1], vt[1:]) ** 2).sum((-1, -2))
    # tr(P P') for independent uniform subspaces: mean r²/d, SD below r/√d·… ≲ 0.6 here
    assert abs(overlap.mean() - r * r / d) < 5 * overlap.std(ddof=1) / np.sqrt(T - 1)
    o = sample("outlier_channels", 50, 64, d, seed=11, n_channels=4, magnitude=30.0)
    sets = [frozenset(np.argsort((k ** 2).mean(0))[-4:]) for k in o.K]
    assert len(set(sets)) > 45          # C(32, 4) = 35,960 sets: repeats are rare
