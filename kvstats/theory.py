"""Closed-form predictions to set beside measurements (derivations in docs/theory.md).

Every closed form lives in one place, so that no constant is written twice: the scalar
code's (sphere-coordinate law, Lloyd--Max, bounds) here, the QJL sketches' in
:mod:`kvstats.qjl_theory`, re-exported here with the Shannon bounds of
:mod:`kvstats.rate_distortion`, so that ``kvstats.theory.<name>`` reaches all of them.

Each function names the paper its formula comes from:

- `sphere_coordinate_pdf`: the law of one coordinate of a uniform point on S^{d-1}
  (classical; used by TurboQuant, Zandieh et al. 2025, Lemma 1).
- `lloyd_max_distortion`, `unit_vector_mse`: the Lloyd--Max MSE (Lloyd 1957/1982, Max
  1960) per coordinate, and the resulting TurboQuant-mse error of a unit vector;
  `high_rate_distortion`, its Panter--Dite (1951) high-resolution limit.
- `qjl_inner_product_variance`: variance of the QJL inner-product estimator with a
  Gaussian sketch (Zandieh, Daliri & Han 2024, QJL; exact form derived here).
- `sphere_abs_moment`, `qjl_variance`, `qjl_reconstruction_mse`: E|u_1| on the sphere
  (the orthogonal sketch's constant), and the exact variance of the QJL inner-product
  estimate and relative MSE of its reconstruction for Gaussian and orthogonal sketches
  (derived in docs/qjl.md).
- `residual_inflation`, `bit_trade_inflation`: the pi/2 cost of a 1-bit QJL residual and
  the ~2 pi cost of trading one scalar bit for it (TurboQuant-prod; docs/theory.md section 6).
- `turboquant_mse_bounds`, `turboquant_prod_bounds`, `turboquant_prod_distortion`: the
  TurboQuant upper and lower distortion bounds (Zandieh et al. 2025, Theorems 1-3) and
  the prediction for TurboQuant-prod they bracket.
- `direction_error`: the angle between a vector and its reconstruction that an SNR
  implies, for an error orthogonal to the reconstruction (Lloyd--Max) or to the signal
  (unbiased QJL).

From :mod:`kvstats.qjl_theory`: `qjl_inner_product_variance`, `sphere_abs_moment`,
`qjl_variance`, `qjl_reconstruction_mse`, `residual_inflation`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral
from typing import TYPE_CHECKING

import numpy as np
from jaxtyping import Float
from numpy.typing import ArrayLike

from kvstats._checks import as_float_array, check_choice, check_int, check_real
from kvstats.qjl_theory import (_SKETCH_KINDS, _gamma_half_ratio,  # noqa: F401  re-export
                                qjl_inner_product_variance, qjl_reconstruction_mse, qjl_variance,
                                residual_inflation, sphere_abs_moment)
from kvstats.quant.codebook import lloyd_max_codebook
from kvstats.rate_distortion import bound_snr_db, covariance_snr_db, gaussian_snr_db, water_fill  # noqa: F401  re-export

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["sphere_coordinate_pdf", "lloyd_max_distortion", "high_rate_distortion", "unit_vector_mse",
           "qjl_inner_product_variance", "sphere_abs_moment", "qjl_variance",
           "qjl_reconstruction_mse", "residual_inflation", "bit_trade_inflation",
           "turboquant_mse_bounds", "turboquant_prod_bounds", "turboquant_prod_distortion",
           "direction_error", "distortion_table", "flat_vector_gain"]

SQRT3_PI_2 = math.sqrt(3.0) * math.pi / 2  # TurboQuant-mse constant, ~2.72 (Gaussian Panter--Dite)
# TurboQuant-prod constant, sqrt(3) pi^2 ~ 17.1: Theorem 2's proof bounds the residual sketch's
# variance by pi/(2d) ||y||^2 ||r||^2 (Lemma 4) and ||r||^2 by Theorem 1 at b - 1 bits (4 x 4^-b)
SQRT3_PI2 = 4 * (math.pi / 2) * SQRT3_PI_2
# Largest bits of the closed forms in 4^-bits: 4^-511 = 2^-1022 is float64's smallest normal
# number. Beyond, the value loses digits in the subnormals and is 0 from 538 bits on; past
# 2^1024 ≈ 1.8e308 bits 4.0 ** -bits raised OverflowError, not a ValueError naming bits.
_MAX_BITS = 511
# Least value a closed form returns: 2^-1050, a subnormal with 24 significant bits (float32's)
_LEAST_KEPT = 2.0 ** -1050


def sphere_coordinate_pdf(x: ArrayLike, dim: int) -> Float[np.ndarray, "*shape"]:
    """Density of one coordinate of a uniform point on S^{dim-1}.

    ``f(x) = Gamma(dim/2) / (sqrt(pi) Gamma((dim-1)/2)) (1 - x^2)^((dim-3)/2)`` on
    [-1, 1] (0 outside): ``(X + 1)/2 ~ Beta((dim-1)/2, (dim-1)/2)``, variance ``1/dim``,
    and ``sqrt(dim) X -> N(0, 1)``.

    Parameters
    ----------
    x : array_like
        Points at which to evaluate (finite).
    dim : int
        ``>= 2`` (``dim = 2`` is the arcsine density, infinite at +-1).

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``x``.

    Examples
    --------
    >>> from kvstats.theory import sphere_coordinate_pdf
    >>> sphere_coordinate_pdf([-0.5, 0.0, 0.5], 3).round(12)  # d = 3: uniform on [-1, 1]
    array([0.5, 0.5, 0.5])
    """
    x = as_float_array(x, "x").astype(np.float64)
    dim = check_int(dim, "dim", low=2)
    logc = math.log(_sphere_constant(dim))
    inside = np.abs(x) < 1
    out = np.zeros_like(x)
    out[inside] = np.exp(logc + (dim - 3) / 2 * np.log1p(-x[inside] ** 2))
    if dim == 2:
        out[np.abs(x) == 1] = np.inf
    elif dim == 3:
        out[np.abs(x) == 1] = np.exp(logc)
    return out


def _sphere_constant(dim: int) -> float:
    """The constant of :func:`sphere_coordinate_pdf`, ``Γ(dim/2)/(√π Γ((dim−1)/2))``."""
    return _gamma_half_ratio((dim - 1) / 2) / math.sqrt(math.pi)


def lloyd_max_distortion(bits: int, distribution: str = "gaussian", dim: int | None = None) -> float:
    """Lloyd--Max MSE per coordinate, ``E[(X - Q(X))^2]``, for the density as given.

    Delegates to `kvstats.lloyd_max_codebook` (exact integrals, cached). ``bits = 0`` is
    allowed and gives the variance (the 0-bit quantizer outputs the mean, 0): 1 for the
    Gaussian, ``1/dim`` for the sphere coordinate.

    Parameters
    ----------
    bits : int
        0..8.
    distribution : {"gaussian", "beta"}
        N(0, 1), or one coordinate of a uniform point on the sphere S^(dim-1).
    dim : int or None
        Sphere dimension, >= 2, for "beta" (required there); None for "gaussian".

    Returns
    -------
    float
        The MSE per coordinate, in the units of the variance (1 for the Gaussian).

    Examples
    --------
    >>> from kvstats.theory import lloyd_max_distortion
    >>> round(lloyd_max_distortion(1), 4)  # Max (1960): 1 - 2/pi
    0.3634
    >>> round(128 * lloyd_max_distortion(4, "beta", 128), 5)
    0.00931
    """
    bits = check_int(bits, "bits", low=0, high=8)
    if bits == 0:
        cb = lloyd_max_codebook(1, distribution, dim)  # validates distribution and dim
        return 1.0 if cb.distribution == "gaussian" else 1.0 / cb.dim
    return float(lloyd_max_codebook(bits, distribution, dim).mse)


def high_rate_distortion(bits: int, distribution: str = "gaussian", dim: int | None = None) -> float:
    """Panter--Dite high-resolution MSE per coordinate, ``(1/12)(∫ f^{1/3})³ · 4^-bits``.

    The limit of the Lloyd--Max ``D_b`` as ``b`` grows (Panter & Dite 1951):
    ``4^b D_b → (1/12)(∫ f^{1/3})³``. Gaussian: ``√3π/2`` (the TurboQuant-mse constant).
    Sphere coordinate of dimension ``dim``: ``∫ f^{1/3} = C^{1/3} √π Γ(a+1)/Γ(a+3/2)``
    with ``C`` the density's constant and ``a = (dim−3)/6``; times ``dim`` this is the
    unit-vector constant, 2.658 at dim = 128 (not √3π/2 = 2.721, its dim → ∞ limit),
    so the Lloyd--Max gap to Shannon's bound at dim = 128 tends to
    ``10·log10(2.658) = 4.24`` dB, not 4.35 dB.

    Parameters
    ----------
    bits : int
        0 to 511 (``4^-511`` is float64's smallest normal number); for "beta", a value so
        far below it that fewer than 24 significant bits are left (bits near 511 with a
        huge dim) is a ValueError.
    distribution : {"gaussian", "beta"}
    dim : int or None
        Sphere dimension for "beta" (>= 2).

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.theory import high_rate_distortion
    >>> round(high_rate_distortion(0), 4)                 # sqrt(3) pi / 2
    2.7207
    >>> round(128 * high_rate_distortion(0, "beta", 128), 4)
    2.6576
    >>> high_rate_distortion(3, "beta", 3) == 4.0 ** -3 / 3   # uniform: exact at every b
    True
    """
    bits = check_int(bits, "bits", low=0, high=_MAX_BITS)
    distribution = check_choice(distribution, "distribution", ("gaussian", "beta"))
    if distribution == "gaussian":
        if dim is not None:
            raise ValueError(f"dim is only for distribution='beta'; received dim={dim!r}")
        return SQRT3_PI_2 * 4.0 ** -bits
    if dim is None:
        raise ValueError("dim is required for distribution='beta' (the sphere dimension); received None")
    dim = check_int(dim, "dim", low=2)
    if dim == 3:  # f = 1/2 on [-1, 1]: (1/12)·(2^(2/3))³ = 1/3, kept exact
        return _normal(4.0 ** -bits / 3, "high_rate_distortion", bits=bits, dim=dim)
    # (∫ f^{1/3})³ = C·π^{3/2}·(Γ(a+1)/Γ(a+3/2))³, C = Γ(a'+½)/(√π Γ(a')) with a' = (dim−1)/2:
    # gamma ratios, not differences of gammaln (which lose the digits at large dim)
    value = _sphere_constant(dim) * math.pi ** 1.5 / _gamma_half_ratio((dim + 3) / 6) ** 3 / 12 * 4.0 ** -bits
    return _normal(value, "high_rate_distortion", bits=bits, dim=dim)


def unit_vector_mse(bits: int, dim: int) -> float:
    """TurboQuant-mse error ``E||u - u_hat||^2`` of a unit vector: ``dim * D_beta(bits, dim)``.

    Exact for a Haar rotation (every coordinate of the rotated vector has the sphere law
    the codebook is optimal for), and for a Hadamard one of a power-of-two ``dim`` when
    the input direction is uniform. ``dim`` is the number of coded coordinates: with
    padding (d < d_pad) ``unit_vector_mse(bits, d_pad)`` is the codebook's design error
    in R^d_pad, not the decoded error of the d-dimensional vector, which keeps about
    d/d_pad of it and has no closed form (docs/theory.md section 2). This is the paper's
    ``D_mse`` (Zandieh et al. 2025, Theorem 1), which it quotes as 0.36, 0.117, 0.03,
    0.009 for b = 1..4: the large-d values 0.3634, 0.1175, 0.0345, 0.0095 cut to those
    digits (docs/theory.md, "Checked against the papers").

    Parameters
    ----------
    bits : int
        0..8 (0 gives 1: the 0-bit code outputs 0).
    dim : int
        Coded coordinates, >= 2.

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.theory import unit_vector_mse
    >>> [round(unit_vector_mse(b, 128), 4) for b in (1, 2, 3, 4)]
    [0.3609, 0.116, 0.034, 0.0093]
    """
    dim = check_int(dim, "dim", low=2)
    return dim * lloyd_max_distortion(bits, "beta", dim)


def flat_vector_gain(bits: int, dim: int) -> float:
    """The factor TurboQuant-mse multiplies a *flat* vector by: ``x_hat = g·x``, g this value.

    A vector whose rotated coordinates all have magnitude ``1/sqrt(dim)`` (a one-hot key
    under the randomized Hadamard rotation, whose columns are flat; approximately a key
    dominated by one channel, as Student-t keys with small ν are) has every coordinate in
    one cell of the sphere-law Lloyd–Max codebook, so each is replaced by that cell's
    centroid: the direction is kept exactly and the norm is multiplied by
    ``g = sqrt(dim)·c``, ``c`` the centroid of the cell holding ``1/sqrt(dim)``. The
    relative error ``|g - 1|`` is the codebook's mismatch to such vectors, not its design
    error (:func:`unit_vector_mse`), and is not monotone in the bits: at dim = 128 it is
    0.20, 0.51, 0.25 at 1, 2, 3 bits, since 2 bits' outer centroid (1.5/sqrt(dim)) is the
    nearest to ``1/sqrt(dim)``. A 1-bit QJL residual sketch on top (TurboQuant-prod at
    ``bits + 1``) then has an inner-product variance proportional to ``(g - 1)^2``
    (docs/results.md, Claim 1).

    Parameters
    ----------
    bits : int
        1..8.
    dim : int
        Coded coordinates (a power of two for the Hadamard rotation), >= 2.

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.theory import flat_vector_gain
    >>> [round(flat_vector_gain(b, 128), 3) for b in (1, 2, 3, 4)]
    [0.799, 1.505, 0.753, 0.937]
    """
    bits = check_int(bits, "bits", low=1, high=8)
    dim = check_int(dim, "dim", low=2)
    book = lloyd_max_codebook(bits, "beta", dim)
    cell = book.encode(np.array([1.0 / math.sqrt(dim)]))[0]   # the coder's own cell choice
    return float(math.sqrt(dim) * book.centroids[cell])


def bit_trade_inflation(bits: int, dim: int | None = None, m: int | None = None,
                        kind: str = "gaussian") -> float:
    """Inner-product variance of ``(bits-1)``-bit MSE + 1-bit QJL residual over ``bits``-bit MSE.

    Same budget, one scalar bit traded for the 1-bit residual sketch (QKQV vs KQV keys):
    the b-bit error projection has variance ``||q||^2 D_b`` per unit ``||x||^2``, the
    traded one ``residual_inflation(dim) * ||q||^2 D_{b-1}``, so the ratio is

        residual_inflation(dim, m, kind) * D_{b-1} / D_b

    with the exact Lloyd--Max distortions (sphere coordinate of dimension ``dim``, or the
    Gaussian when ``dim`` is None, with the limit pi/2). As ``D_{b-1}/D_b -> 4`` (high
    resolution) it tends to ``4 * pi/2 = 2 pi``; for the Gaussian it is 4.86, 5.34, 5.71,
    5.96, 6.11, 6.19, 6.24 at b = 2..8.

    Parameters
    ----------
    bits : int
        Total bits per coordinate, 1..8 (b = 1 compares a bare 1-bit sketch with the
        1-bit scalar code).
    dim : int or None
        Dimension, >= 2 (sphere-coordinate codebooks); None: the Gaussian and pi/2.
    m : int or None
        Rows of the residual sketch (default ``dim``: m = 2·dim spends 2 bits on it).
    kind : {"gaussian", "orthogonal", "srht"}
        Sketch family (`residual_inflation`; ``"srht"`` with m > dim is approximate and
        warns ``SRHTApproximationWarning``, from `residual_inflation`).

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.theory import bit_trade_inflation
    >>> round(bit_trade_inflation(4), 3)
    5.712
    >>> round(bit_trade_inflation(4, 128, kind="orthogonal"), 3)
    2.059
    """
    bits = check_int(bits, "bits", low=1, high=8)
    dist = "gaussian" if dim is None else "beta"
    d_prev = lloyd_max_distortion(bits - 1, dist, dim)
    d_cur = lloyd_max_distortion(bits, dist, dim)
    return residual_inflation(dim, m, kind) * d_prev / d_cur


def turboquant_mse_bounds(bits: int) -> tuple[float, float]:
    """TurboQuant bounds on the MSE of a unit vector at ``bits`` bits per coordinate.

    Upper (TurboQuant-mse, Zandieh et al. 2025, Theorem 1): ``(sqrt(3) pi / 2) 4^-b``;
    lower (any quantizer, Theorem 3, via Shannon's lower bound, a large-dimension
    statement): ``4^-b``. Not a bound at small dimension: at d = 3 the scalar Lloyd--Max
    code meets it exactly (``3 D_b(3) = 4^-b``) and a Lloyd-trained 8-point code on S^2
    (b = 1) reaches 0.242 < 1/4; at d = 2, b = 1 the scalar code is at 0.189 (tested).

    Parameters
    ----------
    bits : int
        Bits per coordinate, 1 to 511 (``4^-511`` is float64's smallest normal number).

    Returns
    -------
    (lower, upper) : tuple of float

    Examples
    --------
    >>> from kvstats.theory import turboquant_mse_bounds
    >>> lo, hi = turboquant_mse_bounds(2)
    >>> lo, round(hi, 4)
    (0.0625, 0.17)
    """
    bits = check_int(bits, "bits", low=1, high=_MAX_BITS)
    return 4.0 ** -bits, SQRT3_PI_2 * 4.0 ** -bits


def turboquant_prod_bounds(bits: int, dim: int, y_norm: float = 1.0) -> tuple[float, float]:
    """TurboQuant bounds on the inner-product distortion ``E|<y, x> - <y, x_hat>|^2``.

    For unit x in R^dim at ``bits`` bits per coordinate: upper (TurboQuant-prod, Zandieh
    et al. 2025, Theorem 2) ``sqrt(3) pi^2 ||y||^2 / dim * 4^-b``; lower (Theorem 3)
    ``||y||^2 / dim * 4^-b``. The upper constant is ``4 * (pi/2) * (sqrt(3) pi / 2)``: the
    residual sketch's variance is at most ``pi/(2 dim) ||y||^2 ||r||^2`` (Lemma 4) and
    ``||r||^2`` at most Theorem 1's bound at ``bits - 1``; `turboquant_prod_distortion` is
    the exact value on that route.

    Parameters
    ----------
    bits : int
        Bits per coordinate, 1 to 511 (``4^-511`` is float64's smallest normal number);
        where ``4^-bits / dim`` keeps fewer than 24 significant bits (below 2^-1050), a
        ValueError.
    dim : int
        Dimension of x, >= 1.
    y_norm : float
        ``||y||``, >= 0.

    Returns
    -------
    (lower, upper) : tuple of float

    Examples
    --------
    >>> from kvstats.theory import turboquant_prod_bounds
    >>> lo, hi = turboquant_prod_bounds(1, 128)
    >>> round(lo * 128, 4), round(hi * 128, 3)
    (0.25, 4.274)
    """
    bits = check_int(bits, "bits", low=1, high=_MAX_BITS)
    dim = check_int(dim, "dim", low=1)
    # the part without y checked: a tiny ||y|| scales the bounds down, as it should
    base = _y_norm_squared(y_norm) * _normal(4.0 ** -bits / dim, "turboquant_prod_bounds", bits=bits, dim=dim)
    return base, SQRT3_PI2 * base


def turboquant_prod_distortion(bits: int, dim: int, y_norm: float = 1.0) -> float:
    """Predicted ``E|<y, x> - <y, x_hat>|^2`` of TurboQuant-prod for a unit x.

    ``(bits-1)``-bit MSE code (residual energy ``E||r||^2 = dim * D_{b-1}``, exact for a
    Haar rotation) plus a Gaussian QJL of the residual with m = dim rows: by
    `qjl_inner_product_variance` with an isotropic residual direction,

        (pi/2 - 1/dim) * ||y||^2 * D_{b-1},

    with ``D_0 = 1/dim`` (no scalar bits: a bare QJL of x). It lies within
    `turboquant_prod_bounds`, approaching the upper bound as b grows: then
    ``dim D_{b-1} 4^b -> 4 dim high_rate_distortion(0, "beta", dim)``, which tends to
    ``4 sqrt(3) pi / 2`` as dim grows (the ratio to the upper bound tends to
    ``(1 - 2/(pi dim)) dim high_rate_distortion(0, "beta", dim) / (sqrt(3) pi / 2)``,
    0.972 at dim = 128, and to 1 only as dim -> infinity). The paper quotes 1.57/d, 0.56/d,
    0.18/d, 0.047/d for b = 1..4: ``pi/2`` times its rounded ``D_mse`` (1, 0.36, 0.117,
    0.03); this gives 1.563/d, 0.564/d, 0.181/d, 0.0531/d at dim = 128, the last 13% above
    the quoted value (docs/theory.md, "Checked against the papers").

    Parameters
    ----------
    bits : int
        Total bits per coordinate, 1..9 (``bits - 1`` scalar bits and the 1-bit sketch).
    dim : int
        Dimension of x and rows of the sketch, >= 2.
    y_norm : float
        ``||y||``, >= 0.

    Returns
    -------
    float

    Examples
    --------
    >>> from kvstats.theory import turboquant_prod_bounds, turboquant_prod_distortion
    >>> d = turboquant_prod_distortion(3, 128)
    >>> lo, hi = turboquant_prod_bounds(3, 128)
    >>> bool(lo < d < hi)
    True
    """
    bits = check_int(bits, "bits", low=1, high=9)
    dim = check_int(dim, "dim", low=2)
    return (math.pi / 2 - 1 / dim) * _y_norm_squared(y_norm) * lloyd_max_distortion(bits - 1, "beta", dim)


def _normal(value: float, what: str, **inputs: int) -> float:
    """``value``, a closed form that is positive for these ``inputs``, or a ValueError naming
    them when it fell below ``_LEAST_KEPT``: deep in float64's subnormals, with fewer than 24
    significant bits left, or 0 (returned silently before). Above it a subnormal keeps its
    digits to float32's precision or better (4^-511/8 keeps 49 bits)."""
    if value < _LEAST_KEPT:
        given = ", ".join(f"{k}={v!r}" for k, v in inputs.items())
        raise ValueError(f"{what} at {given} is {value:.3g}, below 2^-1050 ({_LEAST_KEPT:.3g}), where float64 "
                         f"keeps fewer than 24 significant bits: not representable; use fewer bits or a smaller dim")
    return value


def _y_norm_squared(y_norm: float) -> float:
    """``y_norm ** 2`` of a checked ``y_norm`` (>= 0); a ValueError naming it when the square
    leaves the float range (Python's ``**`` raises OverflowError there)."""
    y_norm = check_real(y_norm, "y_norm", low=0.0)
    try:
        return y_norm ** 2
    except OverflowError:
        raise ValueError(f"y_norm must be below about 1.3e154 (its square a float64); received "
                         f"{y_norm!r}") from None


def direction_error(snr_db: ArrayLike, error: str = "orthogonal_to_reconstruction") -> Float[np.ndarray, "*shape"]:
    """Angle φ (radians) between a vector and its reconstruction at a given SNR, ``‖x‖²/‖x̂ − x‖²``.

    Which angle an SNR implies depends on the direction of the error, so there are two
    forms (both ``φ ≈ 1/√SNR`` at high SNR):

    - ``"orthogonal_to_reconstruction"``: an MSE-optimal (Lloyd--Max) code, whose centroid
      condition makes ``E⟨x̂, x − x̂⟩ = 0`` (per vector in high dimension):
      ``‖x‖² = ‖x̂‖² + ‖e‖²``, so ``cos φ = ‖x̂‖/‖x‖ = √(1 − 1/SNR)`` (such an error is
      never larger than x: an SNR below 0 dB is refused; 0 dB, x̂ = 0, gives π/2);
    - ``"orthogonal_to_signal"``: an unbiased estimate (QJL) with ``E⟨x, e⟩ = 0``:
      ``‖x̂‖² = ‖x‖² + ‖e‖²``, so ``cos φ = ‖x‖/‖x̂‖ = 1/√(1 + 1/SNR)``.

    Per vector these hold up to the spread of ``⟨x̂, e⟩`` (or ``⟨x, e⟩``), which shrinks as
    ``1/√d``; the mean over vectors of φ is not φ of the mean SNR (Jensen).

    Parameters
    ----------
    snr_db : array_like
        SNR in dB (``>= 0`` for ``"orthogonal_to_reconstruction"``); ``+inf``, an exact
        reconstruction (as :func:`kvstats.metrics.snr_db` gives), is angle 0. NaN and
        ``-inf`` are refused.
    error : {"orthogonal_to_reconstruction", "orthogonal_to_signal"}

    Returns
    -------
    numpy.ndarray
        float64 angles in radians, in ``[0, π/2]``, the shape of ``snr_db``.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.theory import direction_error
    >>> direction_error([10 * np.log10(4.0)]).round(6)        # cos φ = √(3/4): 30°
    array([0.523599])
    >>> direction_error([10 * np.log10(3.0)], "orthogonal_to_signal").round(6)   # cos φ = √(3/4)
    array([0.523599])
    >>> direction_error([np.inf, 0.0]).round(6)      # exact, and the 0-bit code x̂ = 0
    array([0.      , 1.570796])
    """
    # +inf dB (‖e‖ = 0) is angle 0: 10^(−inf/10) = 0 below; NaN and −inf are not SNRs of a code
    snr_db = as_float_array(snr_db, "snr_db", allow_nonfinite=True).astype(np.float64)
    bad = np.isnan(snr_db) | np.isneginf(snr_db)
    if bad.any():
        raise ValueError(f"snr_db must be finite or +inf (an exact reconstruction); received "
                         f"{int(bad.sum())} NaN/-inf value(s) in an array of shape {snr_db.shape}")
    error = check_choice(error, "error", ("orthogonal_to_reconstruction", "orthogonal_to_signal"))
    inv = 10.0 ** (-snr_db / 10)             # 1/SNR
    if error == "orthogonal_to_signal":
        return np.arctan(np.sqrt(inv))       # tan φ = ‖e‖/‖x‖: exact and accurate at small φ
    if np.any(inv > 1):
        raise ValueError(f"snr_db must be >= 0 for error='orthogonal_to_reconstruction' (an error "
                         f"orthogonal to x̂ is never larger than x); received minimum {float(snr_db.min())}")
    return np.arcsin(np.sqrt(inv))           # sin φ = ‖e‖/‖x‖


def distortion_table(bits: Iterable[int] = range(1, 9),
                     dims: Iterable[int] = (64, 128, 1024)) -> pd.DataFrame:
    """Tidy table of Lloyd--Max distortions: Gaussian and ``dim * D_beta(dim)`` per bits.

    Columns: ``bits, distribution, dim, mse, dim_times_mse, ratio_to_gaussian,
    tq_lower, tq_upper`` (``dim`` is NaN for the Gaussian row, whose ``dim_times_mse``
    is its own MSE).

    Parameters
    ----------
    bits : int or iterable of int
        Bit widths, each 1..8 (one iterator is fine: read once; an int is one width).
    dims : int or iterable of int
        Sphere dimensions, each >= 2 (an int is one dimension).

    Returns
    -------
    pandas.DataFrame
        One Gaussian row and one row per dim for each bit width, in that order.

    Examples
    --------
    >>> from kvstats.theory import distortion_table
    >>> t = distortion_table(bits=[1, 2], dims=[128])
    >>> list(t.distribution)
    ['gaussian', 'beta', 'gaussian', 'beta']
    >>> distortion_table(4, 128).dim_times_mse.round(4).tolist()
    [0.0095, 0.0093]
    """
    import pandas as pd

    # read each iterable once, up front: dims is used for every bit width
    bits = [check_int(b, "bits", low=1, high=8) for b in _one_or_many(bits, "bits")]
    dims = [check_int(d, "dims", low=2) for d in _one_or_many(dims, "dims")]
    rows = []
    for b in bits:
        g = lloyd_max_distortion(b)
        lo, hi = turboquant_mse_bounds(b)
        rows.append(dict(bits=b, distribution="gaussian", dim=np.nan, mse=g, dim_times_mse=g,
                         ratio_to_gaussian=1.0, tq_lower=lo, tq_upper=hi))
        for d in dims:
            mse = lloyd_max_distortion(b, "beta", d)
            rows.append(dict(bits=b, distribution="beta", dim=d, mse=mse, dim_times_mse=d * mse,
                             ratio_to_gaussian=d * mse / g, tq_lower=lo, tq_upper=hi))
    return pd.DataFrame(rows, columns=["bits", "distribution", "dim", "mse", "dim_times_mse",
                                       "ratio_to_gaussian", "tq_lower", "tq_upper"])


def _one_or_many(values: int | Iterable[int], name: str) -> Iterable[int]:
    """``values`` as an iterable: an int alone is one value; neither is a TypeError naming ``name``."""
    if isinstance(values, Integral):
        return (values,)
    if not isinstance(values, Iterable):
        raise TypeError(f"{name} must be an integer or an iterable of integers; received {values!r}")
    return values
