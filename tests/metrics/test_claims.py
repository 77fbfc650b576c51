"""The issue's claims about the schemes, measured with the error profile.

Each test measures distributions of trials (one independent (K, V, q) and one
independent draw of the scheme's randomness per trial) and tests direction and
significance with Mann–Whitney U (scipy.stats.mannwhitneyu), not a tuned number.
Sizes: "ci" runs the sizes the claims name at the minimum trial count the issue allows
(50); KVSTATS_TEST_SCALE=full runs 4x more trials.
"""

import math

import numpy as np
import pytest
from scipy import stats

import kvstats
from kvstats._checks import replicate_scale

FULL = replicate_scale() == "full"


def _profile(scheme: str, n: int, trials, seed: int, **params):
    s = kvstats.make_scheme(scheme, n, trials.dim, seed=seed, draws=trials.n_trials, **params)
    K_hat, V_hat = s.dequantize(s.quantize(trials.K, trials.V))
    return kvstats.error_profile(trials, K_hat, V_hat)


def _beta_mse(bits: int, dim: int) -> float:
    return float(kvstats.lloyd_max_codebook(bits, "beta", dim=dim).mse)


def predicted_ip_var_ratio(n: int, d: int) -> float:
    """Var of the q·k error, QKQV's keys over KQV's keys at budget n (closed form).

    KQV codes the rotated unit key with n bits: error variance ‖q‖²‖k‖² D_n, with D_n
    the Lloyd–Max distortion per coordinate of the sphere-coordinate density of
    dimension d. QKQV spends n − 1 bits (residual r, E‖r‖² = d D_{n−1}) and estimates
    q·r with a 1-bit Gaussian QJL sketch of m = d rows, variance
    ((π/2)‖q‖²‖r‖² − (q·r)²)/m, i.e. ‖q‖²‖k‖² D_{n−1} (π/2 − 1/d). docs/theory.md §6 (the ≈ 2π
    bit-trade inflation); the π/2 is the QJL paper's, the ≈ 4 per bit is Lloyd–Max's, so the ratio
    tends to 2π.
    """
    return (math.pi / 2 - 1 / d) * _beta_mse(n - 1, d) / _beta_mse(n, d)


@pytest.fixture(scope="module")
def gaussian_profiles():
    # d = 128 as the claim states. Each scheme gets its own independent trials
    # (Mann–Whitney assumes independent samples) and independent scheme randomness.
    # CI uses N = 256 keys to stay bounded (the direction of the claim does not depend on
    # N; docs/measurement.md reports N = 1024); full scale runs N = 1024.
    T, N = (200, 1024) if FULL else (50, 256)
    data = {s: kvstats.sample("gaussian", T, N, 128, seed=seed)
            for s, seed in (("KQV", 2026), ("QKQV", 2027))}
    out = {}
    for n in range(2, 7):
        for scheme in ("KQV", "QKQV"):
            out[scheme, n] = _profile(scheme, n, data[scheme], seed=100 * n + (scheme == "QKQV"))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("n", range(2, 7))
def test_kqv_has_lower_kl_than_qkqv_at_every_budget(gaussian_profiles, n):
    kqv = gaussian_profiles["KQV", n]["kl"].to_numpy()
    qkqv = gaussian_profiles["QKQV", n]["kl"].to_numpy()
    assert kqv.mean() < qkqv.mean()
    res = stats.mannwhitneyu(kqv, qkqv, alternative="less")
    # Holm-free Bonferroni over the 5 budgets at family-wise 1e-3.
    assert res.pvalue < 1e-3 / 5
    # rank-biserial r = 2U/(n m) − 1 (negative: KQV smaller); a clear majority of pairs
    r = 2 * res.statistic / (len(kqv) * len(qkqv)) - 1
    assert r < -0.5


@pytest.mark.slow
@pytest.mark.parametrize("n", range(2, 7))
def test_ip_var_ratio_matches_theory(gaussian_profiles, n):
    # Tolerance 10%: the closed form treats the scalar-quantization errors of the
    # rotated coordinates as uncorrelated and ignores the float16 norms (both O(1/d)
    # effects, d = 128); the mean-of-ip_var ratio has a sampling SD of ~2% at 50 trials.
    kqv = gaussian_profiles["KQV", n]["ip_var"].to_numpy()
    qkqv = gaussian_profiles["QKQV", n]["ip_var"].to_numpy()
    measured = qkqv.mean() / kqv.mean()
    predicted = kvstats.theory.bit_trade_inflation(n, dim=128)
    assert predicted == pytest.approx(predicted_ip_var_ratio(n, 128), rel=1e-12)
    assert measured == pytest.approx(predicted, rel=0.10)
    # QJL's residual estimate is unbiased: mean q·k error ≈ 0 within 5 SE (across trials).
    b = gaussian_profiles["QKQV", n]["ip_bias"].to_numpy()
    assert abs(b.mean()) < 5 * b.std(ddof=1) / math.sqrt(len(b))


@pytest.mark.slow
def test_rotation_protects_direction_against_heavy_tails():
    # Student-t keys with ν = 1.5 (infinite variance). Without rotation (KV) the few huge
    # coordinates of each key swamp the per-coordinate codebook; after the Hadamard
    # rotation (KQV) they are spread out. "Far worse": median φ_k at least twice as large
    # and the two distributions separated (rank-biserial r > 0.9).
    T = 200 if FULL else 50
    a = kvstats.sample("heavy_tailed", T, 256, 128, seed=7, nu=1.5)
    b = kvstats.sample("heavy_tailed", T, 256, 128, seed=8, nu=1.5)
    # Norms reach 1e5 at ν = 1.5, beyond float16: both schemes store float32 norms.
    for n in (3, 4):
        kv = _profile("KV", n, a, seed=n, norm_dtype=np.float32)["phi_k"].to_numpy()
        kqv = _profile("KQV", n, b, seed=10 + n, norm_dtype=np.float32)["phi_k"].to_numpy()
        res = stats.mannwhitneyu(kv, kqv, alternative="greater")
        assert res.pvalue < 1e-6
        assert 2 * res.statistic / (T * T) - 1 > 0.9
        assert np.median(kv) > 2 * np.median(kqv)
