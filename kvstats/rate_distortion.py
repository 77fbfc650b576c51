"""Shannon's distortion–rate bound for the Gaussian sources the toolkit generates.

No code of ``R`` bits per coordinate (``d·R`` bits per vector, any block length) has a
mean squared error below the distortion–rate function ``D(R)`` of its source (Shannon
1959; Cover & Thomas, *Elements of Information Theory*, 2nd ed., Thm 10.3.2–10.3.3):

i.i.d. Gaussian, variance σ²
    ``D(R) = σ²·2^(−2R)``, so the SNR ``10·log10(σ²/D) = 20·log10(2)·R ≈ 6.0206·R`` dB;
Gaussian vector with covariance Σ (eigenvalues λ₁ … λ_d)
    reverse water-filling: a level θ with ``Σᵢ max(0, ½·log₂(λᵢ/θ)) = d·R``; axes above
    the water get ``½·log₂(λᵢ/θ)`` bits and distortion θ, the others none and distortion
    λᵢ: ``D = Σᵢ min(λᵢ, θ)``, SNR ``10·log10(Σᵢ λᵢ / D)``.

Among sources of a given covariance the Gaussian is the hardest to code, so for any
source these are the SNRs a code could reach if the data were Gaussian with the
measured covariance — the reference the analysis puts beside measured SNRs (for low-rank
and real keys the water-filling bound, from the covariance measured per layer and
head). The SNR here is ``E‖x‖²/E‖x − x̂‖²`` pooled over vectors (``signal_power``
can replace ``Σλᵢ`` when the mean ``E‖x‖² = tr Σ + ‖μ‖²`` is to count as signal: a
known mean costs no bits). It is not the mean over vectors of per-vector SNRs in dB,
which is lower by Jensen's inequality for a spread of errors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float
from numpy.typing import ArrayLike

from kvstats._checks import as_float_array, check_real

__all__ = ["DB_PER_BIT", "gaussian_snr_db", "WaterFilling", "water_fill", "bound_snr_db",
           "covariance_snr_db"]

#: ``20·log10(2)``: dB of SNR per bit per coordinate for a Gaussian source (≈ 6.0206).
DB_PER_BIT = 20.0 * np.log10(2.0)


def gaussian_snr_db(rate: ArrayLike) -> np.ndarray:
    """SNR bound ``20·log10(2)·R`` dB of an i.i.d. Gaussian source at ``R`` bits per coordinate.

    Examples
    --------
    >>> float(gaussian_snr_db(1.0)).__round__(4), float(gaussian_snr_db(4)).__round__(3)
    (6.0206, 24.082)
    """
    r = as_float_array(rate, "rate")
    if np.any(r < 0):
        raise ValueError(f"rate must be >= 0 bits per coordinate; received minimum {float(r.min())}")
    return DB_PER_BIT * r


@dataclass(frozen=True)
class WaterFilling:
    """Reverse water-filling of eigenvalues at a rate.

    Attributes
    ----------
    level : ndarray ``(*batch,)``
        The water level θ.
    distortion : ndarray ``(*batch,)``
        ``D = Σ min(λᵢ, θ)`` per vector (divide by d for per coordinate).
    bits : ndarray ``(*batch, d)``
        ``max(0, ½·log₂(λᵢ/θ))`` per eigenvalue (real, summing to ``d·R``).
    snr_db : ndarray ``(*batch,)``
        ``10·log10(signal / D)``.
    """

    level: np.ndarray
    distortion: np.ndarray
    bits: np.ndarray
    snr_db: np.ndarray


def water_fill(eigenvalues: Float[np.ndarray, "*batch d"], rate: float,
               signal_power: ArrayLike | None = None) -> WaterFilling:
    """Reverse water-filling of a Gaussian vector's eigenvalues at ``rate`` bits per coordinate.

    Parameters
    ----------
    eigenvalues : array ``(*batch, d)``
        Non-negative variances of the principal axes (any order), not all zero.
    rate : float
        R ≥ 0 bits per coordinate (``d·R`` per vector).
    signal_power : array_like or None
        Numerator of the SNR, broadcast against the batch (default ``Σ λᵢ``).

    Returns
    -------
    WaterFilling

    Examples
    --------
    Two axes, λ = (4, 1), R = 1/2 (one bit per vector): only the strong axis is coded,
    θ = 4·2^(−2) = 1, D = 1 + 1 = 2, SNR = 10·log10(5/2):

    >>> wf = water_fill(np.array([4.0, 1.0]), 0.5)
    >>> float(wf.level), float(wf.distortion), round(float(wf.snr_db), 4)
    (1.0, 2.0, 3.9794)
    """
    lam = as_float_array(eigenvalues, "eigenvalues", min_ndim=1)
    rate = check_real(rate, "rate", low=0.0)
    if np.any(lam < 0):
        raise ValueError(f"eigenvalues must be non-negative; received minimum {float(lam.min())}")
    total = lam.sum(axis=-1)
    if np.any(total <= 0):
        raise ValueError("eigenvalues must not be all zero (no signal to code); received a row of zeros")
    d = lam.shape[-1]
    srt = -np.sort(-lam, axis=-1)                                   # descending
    with np.errstate(divide="ignore"):
        logs = np.log2(srt)
    k = np.arange(1, d + 1)
    # level if the k largest axes are active: log2 θ_k = (Σ_{i≤k} log2 λ_i − 2dR)/k
    cum = np.cumsum(np.where(np.isfinite(logs), logs, 0.0), axis=-1)
    log_theta = (cum - 2.0 * d * rate) / k
    next_log = np.concatenate([logs[..., 1:], np.full(logs.shape[:-1] + (1,), -np.inf)], axis=-1)
    # k is the solution when the k-th axis lies above its level and the (k+1)-th not;
    # with zero eigenvalues only the positive ones can be active
    ok = (logs > log_theta) & (next_log <= log_theta) & np.isfinite(logs)
    kstar = np.argmax(ok, axis=-1)
    level = np.exp2(np.take_along_axis(log_theta, kstar[..., None], axis=-1)[..., 0])
    if rate == 0:
        level = srt[..., 0]
    dist = np.minimum(lam, level[..., None]).sum(axis=-1)
    with np.errstate(divide="ignore"):
        bits = np.maximum(0.0, 0.5 * np.log2(lam / level[..., None]))
    signal = total if signal_power is None else np.broadcast_to(
        as_float_array(signal_power, "signal_power"), total.shape)
    return WaterFilling(level, dist, bits, 10.0 * np.log10(signal / dist))


def bound_snr_db(eigenvalues: Float[np.ndarray, "*batch d"], rate: float,
                 signal_power: ArrayLike | None = None) -> np.ndarray:
    """The water-filling SNR bound (dB) of a Gaussian vector with these eigenvalues at ``rate``.

    Examples
    --------
    >>> round(float(bound_snr_db(np.ones(128), 4.0)), 3)        # white: 6.02 dB per bit
    24.082
    >>> round(float(bound_snr_db(np.r_[np.ones(8), np.zeros(120)], 1.0)), 2)   # rank 8
    96.33
    """
    return water_fill(eigenvalues, rate, signal_power).snr_db


def covariance_snr_db(covariance: Float[np.ndarray, "*batch d d"], rate: float,
                      signal_power: ArrayLike | None = None) -> np.ndarray:
    """The SNR bound (dB) of a Gaussian vector with covariance ``covariance`` at ``rate``.

    Examples
    --------
    >>> round(float(covariance_snr_db(np.diag([4.0, 1.0]), 0.5)), 4)
    3.9794
    """
    cov = as_float_array(covariance, "covariance", min_ndim=2)
    if cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"covariance must be square (..., d, d); received shape {cov.shape}")
    if not np.allclose(cov, np.swapaxes(cov, -1, -2), rtol=1e-10, atol=0.0):
        raise ValueError("covariance must be symmetric; received a non-symmetric matrix")
    lam = np.linalg.eigvalsh(cov)
    scale = np.max(np.abs(lam), axis=-1, keepdims=True)
    if np.any(lam < -1e-10 * scale):
        raise ValueError(f"covariance must be positive semi-definite; received an eigenvalue "
                         f"{float(lam.min()):.3g}")
    return bound_snr_db(np.clip(lam, 0.0, None), rate, signal_power)
