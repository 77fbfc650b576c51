"""The distortion–rate bounds against closed forms (Cover & Thomas, 2nd ed., §10.3)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kvstats import theory
from kvstats.rate_distortion import (DB_PER_BIT, bound_snr_db, covariance_snr_db, gaussian_snr_db,
                                     water_fill)


def test_white_gaussian_is_exactly_6_02_db_per_bit():
    # D(R) = σ²·2^(−2R): SNR = 20·log10(2)·R, for any d and any common variance
    assert DB_PER_BIT == pytest.approx(6.020599913279624, rel=1e-15)
    rates = np.array([0.0, 0.5, 1.0, 2.0, 4.5, 8.0])
    np.testing.assert_allclose(gaussian_snr_db(rates), 20 * np.log10(2) * rates, rtol=1e-15)
    for d in (1, 7, 128):
        for r in rates:
            assert float(bound_snr_db(np.full(d, 3.7), r)) == pytest.approx(DB_PER_BIT * r, abs=1e-10)


# Worked by hand: Σ with eigenvalues λ = (4, 1), d = 2, so d·R bits per vector.
#   R = 1/4 (½ bit): only axis 1 is active, θ = 4·2^(−2·½) = 2 ≥ λ₂ = 1,
#                    D = θ + λ₂ = 3, SNR = 10·log10(5/3) = 2.2185 dB
#   R = 1/2 (1 bit): θ = 4·2^(−2) = 1 = λ₂ (the second axis is about to enter),
#                    D = 1 + 1 = 2, SNR = 10·log10(5/2) = 3.9794 dB
#   R = 2 (4 bits):  both active, θ = √(4·1)·2^(−2·4/2) = 1/8, D = 2θ = 1/4,
#                    SNR = 10·log10(20) = 13.0103 dB; bits ½·log₂(λᵢ/θ) = (2.5, 1.5)
@pytest.mark.parametrize("rate,level,dist,bits", [
    (0.25, 2.0, 3.0, (0.5, 0.0)), (0.5, 1.0, 2.0, (1.0, 0.0)), (2.0, 0.125, 0.25, (2.5, 1.5))])
def test_two_eigenvalue_covariance_worked_by_hand(rate, level, dist, bits):
    wf = water_fill(np.array([1.0, 4.0]), rate)       # order of the eigenvalues is free
    assert float(wf.level) == pytest.approx(level, rel=1e-12)
    assert float(wf.distortion) == pytest.approx(dist, rel=1e-12)
    np.testing.assert_allclose(wf.bits, bits[::-1], rtol=1e-12, atol=1e-12)
    assert float(wf.snr_db) == pytest.approx(10 * np.log10(5 / dist), rel=1e-12)
    # the same from a covariance matrix with those eigenvalues on rotated axes
    c, s = np.cos(0.3), np.sin(0.3)
    rot = np.array([[c, -s], [s, c]])
    cov = rot @ np.diag([4.0, 1.0]) @ rot.T
    assert float(covariance_snr_db((cov + cov.T) / 2, rate)) == pytest.approx(float(wf.snr_db), rel=1e-9)


def _bisect(lam, rate):
    """Reference: the water level by bisection on Σ max(0, ½log₂(λ/θ)) = d·R."""
    lo, hi = 1e-300, lam.max()
    for _ in range(3000):
        mid = np.sqrt(lo * hi)
        with np.errstate(divide="ignore"):                # λ = 0 axes: log₂ 0 = −inf
            spent = np.sum(np.maximum(0.0, 0.5 * np.log2(lam / mid)))
        lo, hi = (mid, hi) if spent > lam.size * rate else (lo, mid)
    return np.sqrt(lo * hi)


def test_water_level_matches_bisection_and_spends_the_rate():
    rng = np.random.default_rng(0)
    lam = rng.gamma(0.5, size=(6, 40))
    lam[2, 10:] = 0.0                                  # a low-rank row
    for rate in (0.1, 1.0, 3.0):
        wf = water_fill(lam, rate)
        for row, level in zip(lam, wf.level):
            assert level == pytest.approx(_bisect(row, rate), rel=1e-9)
        np.testing.assert_allclose(wf.bits.sum(axis=-1), 40 * rate, rtol=1e-9)
        assert np.all(wf.distortion <= lam.sum(axis=-1))
    # more rate, less distortion; and never worse than the white bound of the same power
    snr = np.array([bound_snr_db(lam, r) for r in (0.5, 1.0, 2.0)])
    assert np.all(np.diff(snr, axis=0) > 0)
    assert np.all(snr[1] >= DB_PER_BIT * 1.0 - 1e-9)


def test_signal_power_and_reexport():
    assert float(bound_snr_db(np.ones(4), 1.0, signal_power=8.0)) == pytest.approx(
        DB_PER_BIT + 10 * np.log10(2), rel=1e-12)
    assert theory.bound_snr_db is bound_snr_db and theory.water_fill is water_fill


@pytest.mark.parametrize("call,match", [
    (lambda: gaussian_snr_db(-1.0), "rate must be >= 0"),
    (lambda: water_fill(np.ones(3), -0.5), r"rate must be in \[0.0, inf\)"),
    (lambda: water_fill(np.array([1.0, -1.0]), 1.0), "eigenvalues must be non-negative"),
    (lambda: water_fill(np.zeros(3), 1.0), "must not be all zero"),
    (lambda: water_fill(np.array([1.0, np.nan]), 1.0), "eigenvalues must be finite"),
    (lambda: covariance_snr_db(np.ones((2, 3)), 1.0), "covariance must be square"),
    (lambda: covariance_snr_db(np.array([[1.0, 0.5], [0.0, 1.0]]), 1.0), "must be symmetric"),
    (lambda: covariance_snr_db(np.array([[1.0, 2.0], [2.0, 1.0]]), 1.0), "positive semi-definite"),
    # a non-positive signal gave a NaN or -inf SNR, a wrong shape numpy's broadcast error
    (lambda: water_fill(np.ones(3), 1.0, signal_power=-1.0), r"signal_power must be > 0 \(the numerator of the SNR\); received minimum -1.0"),
    (lambda: bound_snr_db(np.ones(3), 1.0, signal_power=0.0), r"signal_power must be > 0"),
    (lambda: water_fill(np.ones((2, 3)), 1.0, signal_power=np.ones(3)),
     r"signal_power must broadcast against the batch shape \(2,\) of the eigenvalues; received shape \(3,\)"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# Rank-deficient spectra at high rates: θ = λ₁·2^(−2dR) for a noiseless rank-1 source (all
# d·R bits on its one axis), SNR = 2dR·10·log10(2) dB exactly; λ/θ overflows a float from
# 2dR > 1024 and θ itself underflows from 2dR > 1074 + log₂ λ₁.
@pytest.mark.parametrize("d,rate", [(128, 2.25), (128, 4.0), (128, 4.25), (1024, 4.0)])
def test_rank_one_noiseless_is_exact_without_warnings(d, rate):
    from kvstats.data.spectrum import synthetic_spectrum
    spec = synthetic_spectrum("low_rank", d, rank=1, noise=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wf = water_fill(spec.eigenvalues, rate, spec.mean_square)
        via_spectrum = spec.bound_snr_db(rate)
    expected = 2 * d * rate * 10 * np.log10(2.0)
    assert float(wf.snr_db) == pytest.approx(expected, rel=1e-12)
    assert float(via_spectrum) == float(wf.snr_db)
    np.testing.assert_allclose(wf.bits, np.r_[d * rate, np.zeros(d - 1)], rtol=1e-12)
    assert np.isfinite(wf.bits).all() and float(wf.distortion) >= 0.0


def test_underflowing_level_row_by_row():
    # rows: rank 2, white, rank 1 at 1200 bits per vector; θ underflows in rows 1 and 3.
    # Reference: the closed forms in the log domain.
    lam = np.array([[4.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [2.0, 0.0, 0.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wf = water_fill(lam, 300.0)                  # 1200 bits per vector
    # rank 2: log₂θ = (log₂4 + log₂1 − 2400)/2 = −1199, D = 2θ = 2^(−1198),
    #         SNR = 10·log10(5) + 1198·10·log10(2), bits ½(2 + 1199), ½(0 + 1199);
    # white: 6.02 dB per bit, 300 bits per axis; rank 1: SNR = 2400·10·log10(2)
    np.testing.assert_allclose(wf.snr_db, [10 * np.log10(5) + 1198 * 10 * np.log10(2),
                                           DB_PER_BIT * 300, 2400 * 10 * np.log10(2)], rtol=1e-12)
    np.testing.assert_allclose(wf.bits, [[600.5, 599.5, 0, 0], [300] * 4, [1200, 0, 0, 0]],
                               rtol=1e-12)
    assert wf.level[0] == 0.0 and wf.distortion[2] == 0.0      # documented underflow


def test_psd_tolerance_is_rounding_not_a_real_negative_eigenvalue():
    """An eigenvalue of -1e-12 × the largest is rounding of a PSD matrix (clipped to 0:
    the bound of the rank-3 spectrum), one of -1e-6 × the largest is a real negative
    variance (refused)."""
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))

    def cov(last):
        c = q @ np.diag([1.0, 0.5, 0.2, last]) @ q.T
        return (c + c.T) / 2

    assert float(covariance_snr_db(cov(-1e-12), 1.0)) == pytest.approx(
        float(bound_snr_db(np.array([1.0, 0.5, 0.2, 0.0]), 1.0)), rel=1e-9)
    with pytest.raises(ValueError, match="positive semi-definite; received an eigenvalue -1e-06"):
        covariance_snr_db(cov(-1e-6), 1.0)


def test_rate_zero_codes_nothing_exactly():
    """R = 0: the level is the largest eigenvalue itself (not exp2(log2 λ), which is not λ
    for λ = 3 or 5.3), D = Σλ and the SNR is exactly 0 dB, with no bits anywhere."""
    lam = np.array([[3.0, 1.0, 0.5], [5.3, 5.3, 0.0], [123.456, 2.0, 1.0]])
    wf = water_fill(lam, 0.0)
    np.testing.assert_array_equal(wf.level, lam.max(axis=-1))
    np.testing.assert_array_equal(wf.distortion, lam.sum(axis=-1))
    np.testing.assert_array_equal(wf.snr_db, 0.0)
    np.testing.assert_array_equal(wf.bits, 0.0)


@pytest.mark.parametrize("rate", [0.05, 0.2, 1.0])
def test_slope_of_the_bound_converts_a_gap_in_db_to_bits(rate):
    """d(SNR dB)/dR = 10·log10(e)·2d·ln2·θ/D = 6.02·d·θ/D dB per bit per coordinate (D = kθ
    + Σ inactive λ with θ ∝ 2^(−2dR/k)), 6.02 when every axis is active (R = 1 here) and
    steeper with few active axes (8 of 128 at R = 0.05, 0.2); reference: a central
    finite difference of the bound."""
    lam = np.r_[np.full(8, 16.01), np.full(120, 0.01)]
    h = 1e-7
    slope = (float(bound_snr_db(lam, rate + h)) - float(bound_snr_db(lam, rate - h))) / (2 * h)
    wf = water_fill(lam, rate)
    assert slope == pytest.approx(DB_PER_BIT * lam.size * float(wf.level) / float(wf.distortion), rel=1e-6)
    assert (slope > 50) == (rate < 0.5)


def test_eigenvalues_whose_sum_overflows_give_the_bound_of_the_scaled_spectrum():
    # The bound is scale invariant: λ·2^1021 has the bits and SNR of λ (its sum overflowed
    # float64 and gave SNR +inf with a warning before); level and distortion scale with it,
    # and the distortion of rate 0 (Σλ itself) is documented to overflow to inf.
    lam = np.array([[4.0, 4.0, 1.0], [3.0, 3.0, 3.0]])           # sums 9·2^1021, 9·2^1021
    ref = water_fill(lam, 2.0, signal_power=[5.0, 7.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = water_fill(np.ldexp(lam, 1021), 2.0)
        sig = water_fill(np.ldexp(lam, 1021), 2.0, signal_power=np.ldexp([5.0, 7.0], 1021))
        zero = water_fill(np.ldexp(lam, 1021), 0.0)
    np.testing.assert_allclose(big.bits, ref.bits, rtol=1e-14)
    np.testing.assert_allclose(big.snr_db, [10 * np.log10(9 / ref.distortion[0]), DB_PER_BIT * 2],
                               rtol=1e-14)
    np.testing.assert_allclose(sig.snr_db, ref.snr_db, rtol=1e-12)
    np.testing.assert_allclose(big.level, np.ldexp(ref.level, 1021), rtol=1e-14)
    np.testing.assert_allclose(big.distortion, np.ldexp(ref.distortion, 1021), rtol=1e-14)
    np.testing.assert_array_equal(zero.snr_db, [0.0, 0.0])
    assert np.isinf(zero.distortion).all()


def test_rounding_asymmetry_of_a_near_isotropic_covariance_is_accepted():
    # C = R diag(λ) Rᵀ with λ = (1 + 1e-12, 1, ..., 1): its off-diagonal entries are
    # ~1e-13 and their two sides round apart by ~1e-17, relative to the entry far above
    # an entrywise rtol of 1e-10 (every one of these 20 draws was refused as "not
    # symmetric"). Symmetry is judged against the matrix's largest entry: the bound is
    # the water-filling of λ. A real asymmetry of 1e-6·max|C| is still refused, in a
    # batch too, with the magnitudes in the message.
    from scipy.stats import special_ortho_group

    lam = np.ones(16)
    lam[0] += 1e-12
    want = float(bound_snr_db(lam, 2.0))
    for seed in range(20):
        R = special_ortho_group.rvs(16, random_state=seed)
        cov = (R * lam) @ R.T
        assert np.any(cov != cov.T)                       # the rounding asymmetry is there
        assert float(covariance_snr_db(cov, 2.0)) == pytest.approx(want, rel=1e-12)
    bad = np.stack([cov, cov])
    bad[1, 0, 1] += 1e-6
    with pytest.raises(ValueError, match=r"covariance must be symmetric .*max\|C − Cᵀ\| = 1e-06 "
                                         r"against max\|C\| = 1"):
        covariance_snr_db(bad, 2.0)


def test_a_water_level_on_an_eigenvalue_is_found():
    # R = Σ_{i≤k} ½·log₂(λ_i/λ_{k+1})/d puts the level exactly on λ_{k+1}: k and k + 1 active
    # axes are then the same solution, and the old rule (λ_k > θ_k and λ_{k+1} ≤ θ_k) was
    # met by neither on ~6% of such draws (the two sides disagree by rounding), falling
    # back to one active axis: θ = λ₁·2^(−2dR), ~10⁴ bits for 254, a bound hundreds of dB
    # high. Reference: the level by bisection on the definition Σ max(0, ½·log₂(λ/θ)) = dR
    # (scipy's brentq in log₂ θ).
    from scipy.optimize import brentq

    rng = np.random.default_rng(0)
    for _ in range(400):
        d = int(rng.integers(2, 40))
        lam = np.sort(rng.exponential(size=d) ** rng.uniform(0.2, 3))[::-1]
        if rng.random() < 0.5:                       # dyadic values with exact ties
            lam = np.sort(np.round(lam * 8) / 8 + 1 / 8)[::-1]
        k = int(rng.integers(1, d))
        rate = float(np.sum(0.5 * np.log2(lam[:k] / lam[k])) / d)
        if rate <= 0:
            continue
        wf = water_fill(lam, rate)
        assert wf.bits.sum() == pytest.approx(d * rate, rel=1e-9)
        log_theta = brentq(lambda t: np.sum(np.maximum(0.0, 0.5 * (np.log2(lam) - t))) - d * rate,
                           np.log2(lam[-1]) - 2 * d * rate - 1, np.log2(lam[0]) + 1, xtol=1e-13)
        want = 10 * np.log10(lam.sum() / np.minimum(lam, 2.0 ** log_theta).sum())
        assert float(wf.snr_db) == pytest.approx(want, abs=1e-9)


def test_a_rate_too_small_to_move_the_level_codes_nothing():
    # 2dR below the rounding of log₂ λ₁: no axis is active by the float test, yet the
    # first one always is at R > 0; the level is λ₁ (to rounding) and no bit is spent.
    wf = water_fill(np.array([1e300, 1.0, 0.5]), 1e-20)
    assert wf.bits.tolist() == [0.0, 0.0, 0.0] and float(wf.snr_db) == 0.0
    assert float(wf.level) == pytest.approx(1e300, rel=1e-12)
