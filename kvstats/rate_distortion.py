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
known mean costs no bits). It is not the mean over vectors of per-vector SNRs in dB
(the profile's ``snr_k``): for vectors of equal norm a spread of errors puts that mean
*above* the pooled SNR (Jensen: the mean of ``−log‖e‖²`` exceeds ``−log`` of the mean
``‖e‖²``), so it can lie above this bound without contradicting it; with the norms spread
too it can fall on either side (docs/measurement.md).
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
_MAX_DB = float(np.finfo(np.float64).max)


def gaussian_snr_db(rate: ArrayLike) -> np.ndarray:
    """SNR bound ``20·log10(2)·R`` dB of an i.i.d. Gaussian source at ``R`` bits per coordinate.

    Parameters
    ----------
    rate : array_like
        R ≥ 0 bits per coordinate (any shape), at most ``MAX/6.0206 ≈ 2.986e307`` (MAX the
        largest float64) so that the dB are finite.

    Returns
    -------
    numpy.ndarray
        The SNR bound in dB, float64, ``rate``'s shape.

    Examples
    --------
    >>> float(gaussian_snr_db(1.0)).__round__(4), float(gaussian_snr_db(4)).__round__(3)
    (6.0206, 24.082)
    """
    r = as_float_array(rate, "rate")
    if np.any(r < 0):
        raise ValueError(f"rate must be >= 0 bits per coordinate; received minimum {float(r.min())}")
    if np.any(r > _MAX_DB / DB_PER_BIT):
        raise ValueError(f"rate must be at most {_MAX_DB / DB_PER_BIT:.4g} bits per coordinate (its "
                         f"bound, {DB_PER_BIT:.4f} dB per bit, a finite float64); received maximum "
                         f"{float(r.max())!r}")
    return DB_PER_BIT * r


@dataclass(frozen=True)
class WaterFilling:
    """Reverse water-filling of eigenvalues at a rate.

    Attributes
    ----------
    level : ndarray ``(*batch,)``
        The water level θ (may underflow to 0, see :func:`water_fill`).
    distortion : ndarray ``(*batch,)``
        ``D = Σ min(λᵢ, θ)`` per vector (divide by d for per coordinate; may underflow to 0).
    bits : ndarray ``(*batch, d)``
        ``max(0, ½·log₂(λᵢ/θ))`` per eigenvalue (real, summing to ``d·R``).
    snr_db : ndarray ``(*batch,)``
        ``10·log10(signal / D)``.

    Examples
    --------
    λ = (4, 1, 0) at R = 1 (3 bits per vector): θ = 1/4, the zero axis gets no bits and
    no distortion, D = 1/4 + 1/4 and the SNR is 10·log10(5/0.5) = 10 dB:

    >>> wf = water_fill(np.array([4.0, 1.0, 0.0]), 1.0)
    >>> wf.bits.tolist(), float(wf.level), float(wf.distortion), float(wf.snr_db)
    ([2.0, 1.0, 0.0], 0.25, 0.5, 10.0)
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
        R ≥ 0 bits per coordinate (``d·R`` per vector), with ``6.0206·d·R`` below the
        largest float64 (``R ≤ 2.986e307/d``; a ValueError above).
    signal_power : array_like or None
        Numerator of the SNR (> 0), broadcast against the batch (default ``Σ λᵢ``).

    Returns
    -------
    WaterFilling

    Notes
    -----
    Zero eigenvalues are exact: those axes get no bits and no distortion, so ``D`` is the
    water level summed over the active positive axes (plus the inactive ones). For a
    rank-deficient spectrum at a high rate θ is astronomically small: a noiseless rank-1
    source at d = 128, R = 4 puts all 512 bits on its one axis, θ = λ₁·2^(−1024) and the
    SNR is 1024·10·log10(2) = 3082.5 dB. ``bits`` and ``snr_db`` are then computed in the
    log domain (``log₂ θ`` and a shifted sum for ``log₂ D``), exact and finite for every
    allowed rate, while the float fields ``level`` and ``distortion`` may underflow to 0
    (``level`` from about 537 bits on one axis, θ = λ·2^(−2b) below float64's smallest
    subnormal). Eigenvalues whose sum overflows float64 (~1e308)
    are filled on a copy scaled by a power of two: same bits and SNR, ``level`` and
    ``distortion`` then possibly inf. ``D`` is never truly 0 at a finite rate, and the
    rate is capped so that the dB are finite (``rate·d ≤ MAX/6.0206``, MAX the largest
    float64: all ``d·R`` bits on one axis give ``6.0206·d·R`` dB), so the bound is never
    +inf or NaN; the analysis and the report show such bounds as computed (thousands of
    dB: "no rate limit in practice").

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
    d = lam.shape[-1]
    # The bound is at most about DB_PER_BIT·d·R dB (all d·R bits on one axis), and 2·d·R
    # enters log₂ θ: past the float range these overflow and the SNR came out NaN or inf.
    if rate > _MAX_DB / (DB_PER_BIT * d):
        raise ValueError(f"rate must be at most {_MAX_DB / (DB_PER_BIT * d):.4g} bits per coordinate "
                         f"at d = {d} (the bound, up to {DB_PER_BIT:.4f}·d·rate dB, a finite "
                         f"float64); received {rate!r}")
    if np.any(lam < 0):
        raise ValueError(f"eigenvalues must be non-negative; received minimum {float(lam.min())}")
    with np.errstate(over="ignore"):
        total = lam.sum(axis=-1)
    if np.any(total <= 0):
        raise ValueError("eigenvalues must not be all zero (no signal to code); received a row of zeros")
    if not np.all(np.isfinite(total)):
        return _water_fill_scaled(lam, rate, signal_power)
    srt = -np.sort(-lam, axis=-1)                                   # descending
    with np.errstate(divide="ignore"):
        logs = np.log2(srt)
    k = np.arange(1, d + 1)
    # level if the k largest axes are active: log2 θ_k = (Σ_{i≤k} log2 λ_i − 2dR)/k
    cum = np.cumsum(np.where(np.isfinite(logs), logs, 0.0), axis=-1)
    log_theta = (cum - 2.0 * d * rate) / k
    # λ_k > θ_k holds exactly for the active axes k ≤ k* (λ_k > θ_k ⟺ λ_k > θ_{k−1}, and θ
    # falls while axes above it join), so k* is the last k where it holds (k = 1 always
    # does at R > 0, set here for rates too small to move log₂ θ₁ off log₂ λ₁; a zero
    # eigenvalue never: −inf). Asking also λ_{k+1} ≤ θ_k, as before, found no k at all
    # when the level lands on an eigenvalue (the two tests disagree by rounding there)
    # and fell back to k = 1: a bound off by hundreds of dB.
    active = logs > log_theta
    active[..., 0] = True
    kstar = d - 1 - np.argmax(active[..., ::-1], axis=-1)
    log_level = np.take_along_axis(log_theta, kstar[..., None], axis=-1)[..., 0]
    level = np.exp2(log_level)                  # may underflow to 0: see the Notes
    if rate == 0:
        log_level, level = logs[..., 0], srt[..., 0]
    dist = np.minimum(lam, level[..., None]).sum(axis=-1)
    positive = lam > 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        bits = np.where(positive, np.maximum(0.0, 0.5 * np.log2(lam / level[..., None])), 0.0)
    # a level far below the axes (rank-deficient spectra at a high rate) overflows λ/θ:
    # ½·(log₂ λ − log₂ θ) in the log domain there, exact
    bad = ~np.isfinite(bits)
    if np.any(bad):
        with np.errstate(divide="ignore"):
            bits = np.where(bad, 0.5 * (np.log2(np.where(positive, lam, 1.0)) - log_level[..., None]), bits)
    signal = total if signal_power is None else _check_signal(signal_power, total.shape)
    with np.errstate(divide="ignore", over="ignore"):
        ratio = signal / dist
    snr = np.empty(total.shape)
    # the plain quotient where D is a normal float and Σλ/D does not overflow (bit-identical
    # to the formula); else log₂ D = log₂(Σᵢ min(λᵢ, θ)) by a shifted sum in the log domain
    plain = (dist >= np.finfo(np.float64).tiny) & np.isfinite(ratio)
    snr[plain] = 10.0 * np.log10(ratio[plain])
    if not np.all(plain):
        snr[~plain] = 10.0 * (np.log10(signal[~plain])
                              - np.log10(2.0) * _log2_distortion(lam[~plain], log_level[~plain]))
    return WaterFilling(level, dist, bits, snr)


def _water_fill_scaled(lam: np.ndarray, rate: float, signal_power: ArrayLike | None) -> WaterFilling:
    """`water_fill` of eigenvalues whose sum overflows float64: each row is scaled by the
    power of two of its largest eigenvalue (exact), filled, and scaled back (bits and the
    SNR with the default signal do not depend on the scale; ``level`` and ``distortion``
    may overflow to inf)."""
    e = np.frexp(lam.max(axis=-1))[1]
    wf = water_fill(np.ldexp(lam, -e[..., None]), rate)
    snr = wf.snr_db
    if signal_power is not None:
        # 10·log10(signal/D) = 10·log10(Σλ/D) + 10·log10(signal) − 10·log10(Σλ), the last
        # from the scaled sum and the exponent
        signal = _check_signal(signal_power, e.shape)
        total_s = np.ldexp(lam, -e[..., None]).sum(axis=-1)
        snr = snr + 10.0 * (np.log10(signal) - np.log10(total_s) - e * np.log10(2.0))
    with np.errstate(over="ignore"):
        return WaterFilling(np.ldexp(wf.level, e), np.ldexp(wf.distortion, e), wf.bits, snr)


def _check_signal(signal_power: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """``signal_power`` (positive, finite) broadcast to the batch ``shape`` of the eigenvalues."""
    s = as_float_array(signal_power, "signal_power")
    if np.any(s <= 0):
        raise ValueError(f"signal_power must be > 0 (the numerator of the SNR); received minimum "
                         f"{float(s.min())}")
    try:
        return np.broadcast_to(s, shape)
    except ValueError as exc:
        raise ValueError(f"signal_power must broadcast against the batch shape {shape} of the "
                         f"eigenvalues; received shape {s.shape}") from exc


def _log2_distortion(lam: np.ndarray, log_level: np.ndarray) -> np.ndarray:
    """``log₂ Σᵢ min(λᵢ, θ)`` over the positive λᵢ from ``log₂ θ``, without underflow."""
    with np.errstate(divide="ignore"):
        terms = np.minimum(np.log2(lam), log_level[..., None])    # log₂ min(λᵢ, θ); −inf for λ = 0
    top = terms.max(axis=-1)
    return top + np.log2(np.exp2(terms - top[..., None]).sum(axis=-1))


def bound_snr_db(eigenvalues: Float[np.ndarray, "*batch d"], rate: float,
                 signal_power: ArrayLike | None = None) -> np.ndarray:
    """The water-filling SNR bound (dB) of a Gaussian vector with these eigenvalues at ``rate``.

    ``water_fill(eigenvalues, rate, signal_power).snr_db``.

    Parameters
    ----------
    eigenvalues : array ``(*batch, d)``
        Non-negative variances of the principal axes (any order), not all zero.
    rate : float
        R ≥ 0 bits per coordinate (``d·R`` per vector), with ``6.0206·d·R`` below the
        largest float64 (``R ≤ 2.986e307/d``; a ValueError above).
    signal_power : array_like or None
        Numerator of the SNR (> 0), broadcast against the batch (default ``Σ λᵢ``).

    Returns
    -------
    numpy.ndarray ``(*batch,)``
        ``10·log10(signal / D)`` in dB: finite at every allowed rate (see :func:`water_fill`).

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

    :func:`bound_snr_db` of the covariance's eigenvalues (rounding negatives clipped to 0).

    Parameters
    ----------
    covariance : array ``(*batch, d, d)``
        Symmetric (to ``1e-10·max|C|``) and positive semi-definite (to ``1e-10`` of the
        largest eigenvalue's magnitude), not zero.
    rate : float
        R ≥ 0 bits per coordinate (``d·R`` per vector), with ``6.0206·d·R`` below the
        largest float64 (``R ≤ 2.986e307/d``; a ValueError above).
    signal_power : array_like or None
        Numerator of the SNR (> 0), broadcast against the batch (default ``tr Σ``).

    Returns
    -------
    numpy.ndarray ``(*batch,)``
        The SNR bound in dB.

    Examples
    --------
    >>> round(float(covariance_snr_db(np.diag([4.0, 1.0]), 0.5)), 4)
    3.9794
    """
    cov = as_float_array(covariance, "covariance", min_ndim=2)
    if cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"covariance must be square (..., d, d); received shape {cov.shape}")
    # symmetric to rounding relative to the matrix's largest entry, not entry by entry: a
    # near-isotropic covariance on rotated axes has off-diagonal entries ~1e-17 whose two
    # sides round differently (the lower triangle is what eigvalsh reads)
    asym = np.max(np.abs(cov - np.swapaxes(cov, -1, -2)), axis=(-1, -2))
    size = np.max(np.abs(cov), axis=(-1, -2))
    if np.any(asym > 1e-10 * size):
        worst = int(np.argmax(asym / np.where(size > 0, size, 1.0)))
        raise ValueError(f"covariance must be symmetric (|C − Cᵀ| ≤ 1e-10·max|C|); received a "
                         f"matrix with max|C − Cᵀ| = {asym.flat[worst]:.3g} against max|C| = "
                         f"{size.flat[worst]:.3g}")
    lam = np.linalg.eigvalsh(cov)
    scale = np.max(np.abs(lam), axis=-1, keepdims=True)
    if np.any(lam < -1e-10 * scale):
        raise ValueError(f"covariance must be positive semi-definite; received an eigenvalue "
                         f"{float(lam.min()):.3g}")
    return bound_snr_db(np.clip(lam, 0.0, None), rate, signal_power)
