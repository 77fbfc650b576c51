"""``ip_slope``: the q·k slope of the error profile, its edge cases and its statistics.

The statistical tests check the closed forms at d = 128 on Gaussian keys:

- TurboQuant-mse (n-bit Lloyd–Max on the rotated unit key, norm stored): the centroid
  condition gives E[ŷᵢyᵢ] = E[ŷᵢ²] per coordinate, so E[q·k̂] = β q·k with
  β = E‖ŷ‖² = 1 − D(n), D(n) = ``kvstats.theory.unit_vector_mse(n, 128)`` (docs/theory.md);
- TurboQuant-prod ((n−1)-bit MSE + 1-bit QJL residual, Gaussian sketch): unbiased, β = 1.

Each mean over T trials is compared with its value by a one-sample t statistic
(standard error from the trials' SD); the family of 9 such tests is held at a
family-wise 10⁻³ (Bonferroni). Each test also shows power: the mean is far from the
value a wrong formula would give (1 for the MSE code, 1 − D(n−1) for the prod code,
i.e. its MSE stage without the residual).
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import kvstats
import kvstats.metrics.profile as profile
from kvstats.metrics.table import METRIC_TABLE, PROFILE_6D, REPORT_METRICS
from kvstats.theory import unit_vector_mse

D = 128
T, N, NQ = 200, 128, 4
FAMILY = 9
T_CRIT = float(stats.t.ppf(1 - 1e-3 / (2 * FAMILY), T - 1))  # ≈ 4.1


def _slopes(scheme: str, n: int, seed: int, **params) -> np.ndarray:
    t = kvstats.sample("gaussian", T, N, D, seed=seed, n_queries=NQ)
    s = kvstats.make_scheme(scheme, n, D, seed=seed + 1, draws=T, **params)
    K_hat, V_hat = s.dequantize(s.quantize(t.K, t.V))
    return kvstats.error_profile(t, K_hat, V_hat)["ip_slope"].to_numpy()


def _t(x: np.ndarray, value: float) -> float:
    return float((x.mean() - value) / (x.std(ddof=1) / np.sqrt(x.size)))


def _direct(t, K_hat) -> np.ndarray:
    ip = np.einsum("tqd,tnd->tqn", t.q, t.K)
    ip_hat = np.einsum("tqd,tnd->tqn", t.q, K_hat)
    return (ip * ip_hat).sum(axis=(1, 2)) / (ip * ip).sum(axis=(1, 2))


# ---------------------------------------------------------------- definition
def test_table_entry_is_not_reported():
    m = METRIC_TABLE["ip_slope"]
    assert (m.worst, m.unit, m.reported, m.profile_6d) == ("one", "", False, False)
    assert "ip_slope" not in REPORT_METRICS and "ip_slope" not in PROFILE_6D


def test_matches_the_direct_formula_and_is_exact_on_scalings():
    rng = np.random.default_rng(0)
    t = kvstats.sample("gaussian", 6, 32, 16, seed=1, n_queries=3)
    K_hat = t.K + 0.3 * rng.standard_normal(t.K.shape)
    df = kvstats.error_profile(t, K_hat, t.V)
    np.testing.assert_allclose(df["ip_slope"], _direct(t, K_hat), rtol=1e-12)
    # k̂ = c·k with c a power of two: every step is exact, the slope is c to the bit
    for c in (0.5, 2.0, 0.0):
        assert (kvstats.error_profile(t, c * t.K, t.V)["ip_slope"] == c).all()
    assert (kvstats.error_profile(t, t.K, t.V)["ip_slope"] == 1.0).all()
    # a sign flip: slope −1, and summarize_profile's worst case for "one" is the
    # non-positive value (|log| is undefined there; it is the farthest from 1)
    flipped = kvstats.error_profile(t, -t.K, t.V)
    assert (flipped["ip_slope"] == -1.0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no log of a negative number on the way
        s = kvstats.summarize_profile(pd.DataFrame({"ip_slope": [0.9, -0.5, 1.3, 1.0]}))
    assert s.set_index("metric").loc["ip_slope", "worst"] == -0.5


def test_chunks_do_not_change_the_values(monkeypatch):
    t = kvstats.sample("gaussian", 7, 16, 8, seed=3, n_queries=2)
    K_hat = t.K + 0.1 * np.random.default_rng(1).standard_normal(t.K.shape)
    whole = kvstats.error_profile(t, K_hat, t.V)["ip_slope"].to_numpy()
    monkeypatch.setattr(profile, "_CHUNK_ELEMENTS", 16 * 8 * 2)   # two trials per chunk
    chunked = kvstats.error_profile(t, K_hat, t.V)["ip_slope"].to_numpy()
    np.testing.assert_array_equal(whole, chunked)


def test_magnitudes_across_the_float_range():
    # q·k near 2**515: its square overflows float64 unless scaled (the error, 2**-10 of
    # it, keeps ip_var finite); near 2**-600 it underflows to 0. Scaling by a power of
    # two is exact, so the slope is the same bits.
    t = kvstats.sample("gaussian", 4, 16, 8, seed=4, n_queries=2)
    K_hat = t.K + 2.0**-10 * np.random.default_rng(2).standard_normal(t.K.shape)
    ref = kvstats.error_profile(t, K_hat, t.V)["ip_slope"].to_numpy()
    for e in (515, -600):
        big = kvstats.Trials(np.ldexp(t.K, e), t.V, t.q)
        got = kvstats.error_profile(big, np.ldexp(K_hat, e), t.V)["ip_slope"].to_numpy()
        np.testing.assert_array_equal(got, ref)
    # the error ~2**1060 times q·k: a slope beyond float64 is refused, not inf
    small = kvstats.Trials(np.ldexp(t.K, -1040), t.V, t.q)
    with pytest.raises(ValueError, match=r"q·k slope \(ip_slope\) exceeds the float64"):
        kvstats.error_profile(small, np.ldexp(t.K, -1040) + 2.0**20, t.V)


def test_a_trial_without_inner_products():
    t = kvstats.sample("gaussian", 3, 16, 8, seed=5, n_queries=2)
    q = t.q.copy()
    q[0] = 0.0                                  # trial 0: zero queries
    K = t.K.copy()
    K[1] = 0.0                                  # trial 1: zero keys, coded as non-zero
    K_hat = t.K + 0.1
    K_hat[1] = 0.25
    z = kvstats.Trials(K, t.V, q)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = kvstats.error_profile(z, K_hat, t.V)["ip_slope"].to_numpy()
        zero_keys = kvstats.error_profile(z, K, t.V)["ip_slope"].to_numpy()
    # q·k = q·k̂ = 0: the inner products are reproduced, 1; q·k = 0 ≠ q·k̂: +inf;
    # the third trial is unaffected by its neighbours
    assert got[0] == 1.0 and got[1] == np.inf
    assert got[2] == pytest.approx(_direct(t, K_hat)[2], rel=1e-12)
    assert zero_keys[1] == 1.0 and not np.isnan(got).any()


# ---------------------------------------------------------------- statistics
@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("rotation", ["hadamard", "haar"])
def test_turboquant_mse_slope_is_one_minus_d(n, rotation):
    x = _slopes("turboquant_mse", n, seed=10 * n + (rotation == "haar"), rotation=rotation)
    beta = 1 - unit_vector_mse(n, D)
    assert abs(_t(x, beta)) < T_CRIT, (x.mean(), beta)
    assert _t(x, 1.0) < -T_CRIT                 # power: the shrinkage is resolved


@pytest.mark.parametrize("n", [2, 3, 4])
def test_turboquant_prod_slope_is_one(n):
    x = _slopes("turboquant_prod", n, seed=100 + n)
    assert abs(_t(x, 1.0)) < T_CRIT, x.mean()
    # power: its (n−1)-bit MSE stage alone would shrink by 1 − D(n−1)
    assert _t(x, 1 - unit_vector_mse(n - 1, D)) > T_CRIT


def test_identity_is_exactly_one():
    x = _slopes("identity", None, seed=7)
    assert (x == 1.0).all()
