"""Closed forms of the QJL sketches (re-exported by :mod:`kvstats.theory`; derivations in docs/qjl.md).

- `qjl_inner_product_variance`: variance of the QJL inner-product estimator with a
  Gaussian sketch (Zandieh, Daliri & Han 2024, QJL; exact form derived here).
- `sphere_abs_moment`, `qjl_variance`, `qjl_reconstruction_mse`: E|u_1| on the sphere
  (the orthogonal sketch's constant), and the exact variance of the QJL inner-product
  estimate and relative MSE of its reconstruction for Gaussian and orthogonal sketches.
- `residual_inflation`: the pi/2 cost of a 1-bit QJL residual (TurboQuant-prod;
  docs/theory.md section 6), for each sketch kind and padded shapes (m != dim).
- `SRHTApproximationWarning`: emitted with every ``kind="srht"`` value at m > d, which
  omits a between-block term (+6% at d = 8; docs/qjl.md, "SRHT").

Needs only numpy: `kvstats.quant.sketch` takes its constant from here,
and the scalar-code side of :mod:`kvstats.theory` (Lloyd--Max, which imports the
codebooks) builds on `residual_inflation`.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
from jaxtyping import Float
from numpy.typing import ArrayLike

from kvstats._checks import as_float_array, check_choice, check_int
from kvstats._scaling import max_exponent, scale_rows

__all__ = ["qjl_inner_product_variance", "sphere_abs_moment", "qjl_variance",
           "qjl_reconstruction_mse", "residual_inflation", "SRHTApproximationWarning"]

# The sketch kinds of kvstats.quant.sketch.SKETCHES, each with a closed form below (not
# imported from there: sketch.py takes sphere_abs_moment from here, via kvstats.theory).
_SKETCH_KINDS = ("gaussian", "orthogonal", "srht")
_COS_ROUNDING = 1e-12   # how far past +-1 a computed cosine may lie and still be read as +-1
# Largest m of `qjl_reconstruction_mse` and `residual_inflation`: every count up to it is a
# float64 (far past any sketch; 10**400 rows overflowed float(m) with an OverflowError).
_MAX_ROWS = 2 ** 53

# ln Γ(x + ½) − ln Γ(x) = ½·ln x + Σ_k (2^(1−2k) − 2)·B_2k / (2k(2k−1)·x^(2k−1)) as x → ∞
# (Stirling's series of ln Γ(x + a) with the Bernoulli polynomials B_n(½) = (2^(1−n) − 1)·B_n;
# DLMF 5.11.8): −1/(8x) + 1/(192x³) − 1/(640x⁵) + …; B_2 … B_12 exact, the next term is
# below 1e-17 at x ≥ 16.
_BERNOULLI = (Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
              Fraction(-691, 2730))
_HALF_SERIES = tuple(float((Fraction(2) ** (1 - 2 * k) - 2) * b / (2 * k * (2 * k - 1)))
                     for k, b in enumerate(_BERNOULLI, 1))


def _gamma_half_ratio(x: float) -> float:
    """``Γ(x + ½)/Γ(x)`` for ``x > 0``, to ~1e-15 relative at every x.

    The difference of two ``gammaln`` loses the digits as x grows (2e-2 relative at
    x = 5e13; ``scipy.special.poch`` and ``beta`` lose up to 5e-12 and 3e-10 at
    x ≈ 4e3 and 2.6e5): the recurrence ``g(x) = g(x + 1)·x/(x + ½)`` up to x ≥ 16, then
    the series of its log above."""
    scale = 1.0
    while x < 16:
        scale *= x / (x + 0.5)
        x += 1.0
    return scale * math.sqrt(x) * math.exp(sum(c * x ** (1 - 2 * k) for k, c in enumerate(_HALF_SERIES, 1)))


def _check_srht_dim(kind: str, d: int) -> None:
    """Refuse ``kind="srht"`` at a ``d`` that is not a power of two: there the rows of the
    truncated Hadamard matrix are correlated, and the orthogonal closed form, which the
    srht kind shares at powers of two, is off by a factor of 0.76 to 2.3 (measured at
    d = 65, 80, 96; docs/qjl.md, "SRHT")."""
    if kind == "srht" and d & (d - 1):
        raise ValueError(f"kind='srht' has no closed form at d={d}, which is not a power of two "
                         f"(the rows of a truncated Hadamard matrix are correlated; docs/qjl.md, "
                         f"'SRHT'); kind='orthogonal' gives the orthogonal sketch's value, which "
                         f"is what 'srht' returned before and is not the srht variance here")


class SRHTApproximationWarning(UserWarning):
    """A ``kind="srht"`` closed form at m > d rows: the orthogonal value, approximate.

    The blocks of an SRHT sketch share one orientation, which adds a between-block term
    the orthogonal closed form lacks: measured +6.0% to +6.3% at m = 2d, d = 8, +0.7% at
    d = 16, +0.1% at d = 32, not detected at d = 64 (docs/qjl.md, "SRHT"). `qjl_variance`,
    `qjl_reconstruction_mse`, `residual_inflation` and `kvstats.theory.bit_trade_inflation`
    return the value with this warning; at m <= d it is exact and none is emitted. Filter
    it with ``warnings.simplefilter("ignore", SRHTApproximationWarning)``.

    Examples
    --------
    >>> import warnings
    >>> from kvstats.qjl_theory import SRHTApproximationWarning, residual_inflation
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     value = residual_inflation(8, 16, "srht")
    >>> w[0].category is SRHTApproximationWarning, round(value, 4)
    (True, 0.2379)
    """


def _warn_srht_blocks(kind: str, m: int, d: int, stacklevel: int = 3) -> None:
    """`SRHTApproximationWarning` when ``kind="srht"`` and the m rows span several blocks."""
    if kind == "srht" and m > d:
        warnings.warn(f"kind='srht' at m={m} > d={d}: the orthogonal closed form, approximate "
                      f"(the blocks share one orientation; measured +6% at d = 8, +0.7% at "
                      f"d = 16, +0.1% at d = 32 for m = 2d; docs/qjl.md, 'SRHT')",
                      SRHTApproximationWarning, stacklevel=stacklevel)


def qjl_inner_product_variance(q_norm: ArrayLike, k_norm: ArrayLike, cos_qk: ArrayLike,
                               m: int) -> Float[np.ndarray, "*shape"]:
    """Variance of the Gaussian-sketch QJL estimator of ``<q, k>``.

    The estimator ``sqrt(pi/2)/m * ||k|| * sum_i <s_i, q> sign(<s_i, k>)``, rows
    ``s_i ~ N(0, I)`` i.i.d., is an average of m i.i.d. terms
    ``X_i = sqrt(pi/2) ||k|| <s_i, q> sign(<s_i, k>)`` with ``E X_i = <q, k>`` (QJL, Zandieh
    et al. 2024, Lemma 3.2) and ``E X_i^2 = (pi/2) ||k||^2 E<s_i, q>^2 = (pi/2) ||q||^2 ||k||^2``
    (the sign squares to 1). Hence, exactly,

        Var = ((pi/2) ||q||^2 ||k||^2 - <q, k>^2) / m   <=   (pi/2) ||q||^2 ||k||^2 / m,

    with equality at ``q`` orthogonal to ``k``: the bound TurboQuant states for a unit key
    and m = dim (Zandieh et al. 2025, Lemma 4). The exact form is derived here (QJL proves
    the estimator unbiased and bounds its tail).

    Parameters
    ----------
    q_norm, k_norm : array_like
        Non-negative norms (broadcast together).
    cos_qk : array_like
        Cosine of the angle between q and k, in [-1, 1] (values up to 1e-12 beyond, from
        rounding, are read as +-1).
    m : int
        Sketch rows, >= 1.

    Returns
    -------
    numpy.ndarray
        float64, broadcast shape.

    Examples
    --------
    >>> round(float(qjl_inner_product_variance(1.0, 1.0, 0.0, 1)), 6)  # pi/2
    1.570796
    """
    qn = as_float_array(q_norm, "q_norm").astype(np.float64)
    kn = as_float_array(k_norm, "k_norm").astype(np.float64)
    cos = as_float_array(cos_qk, "cos_qk").astype(np.float64)
    m = check_int(m, "m", low=1)
    try:
        np.broadcast_shapes(qn.shape, kn.shape, cos.shape)
    except ValueError:
        raise ValueError(f"q_norm, k_norm and cos_qk must broadcast together; received shapes "
                         f"{qn.shape}, {kn.shape} and {cos.shape}") from None
    if np.any(qn < 0) or np.any(kn < 0):
        raise ValueError(f"q_norm and k_norm must be >= 0; received minima {qn.min()}, {kn.min()}")
    # a cosine computed as <q, k>/(||q|| ||k||) can pass 1 by an ulp (q = k: a quarter of
    # the time): tolerate rounding, then clip
    if np.any(np.abs(cos) > 1 + _COS_ROUNDING):
        raise ValueError(f"cos_qk must be in [-1, 1] (up to rounding, {_COS_ROUNDING:g}); received "
                         f"values in [{cos.min()}, {cos.max()}]")
    cos = np.clip(cos, -1.0, 1.0)
    eq, ek = _unsafe_exponent(qn), _unsafe_exponent(kn)
    qn, kn = np.ldexp(qn, -eq), np.ldexp(kn, -ek)
    return _scaled_back(_gaussian_qjl_variance(qn * qn, kn * kn, cos * qn * kn, m), eq + ek,
                        "q_norm and k_norm")


# Norms (or largest entries) in [2**-201, 2**200) are used as given: ||q||^2 ||k||^2 of
# such vectors (d up to 2**100) stays within float64's normal range, so ordinary inputs
# keep their bits. Others are scaled by powers of two (exact),
# since ||q||^2 ||k||^2 overflowed to inf (inf - inf: NaN) or underflowed to 0 while the
# variance itself was a float.
_SAFE_EXPONENT = 200


def _unsafe_exponent(a: np.ndarray, axis: int | tuple[int, ...] = ()) -> np.ndarray:
    """:func:`~kvstats._scaling.max_exponent` of ``a`` (elementwise by default, or along
    ``axis``) where it lies outside the safe range, else 0 (no scaling)."""
    e = max_exponent(a, axis=axis)
    return np.where(np.abs(e) > _SAFE_EXPONENT, e, 0)


def _scaled_back(var: np.ndarray, e_sum: np.ndarray, names: str = "q and k") -> np.ndarray:
    """``var * 4**e_sum`` (the variance is of degree 2 in q and in k); a ValueError naming
    ``names`` when it exceeds the float64 range."""
    with np.errstate(over="ignore"):
        out = np.ldexp(var, 2 * e_sum)
    if not np.isfinite(out).all():
        raise ValueError(f"{names}: the variance (of the order of ||q||^2 ||k||^2) exceeds the "
                         f"float64 range; rescale {names.replace(' and ', ' or ')}")
    return out


def _gaussian_qjl_variance(qq: np.ndarray, kk: np.ndarray, qk: np.ndarray, m: int) -> np.ndarray:
    """((pi/2) ||q||^2 ||k||^2 - <q, k>^2) / m from ||q||^2, ||k||^2 and <q, k>: the one
    place the Gaussian QJL variance is written (`qjl_inner_product_variance`,
    `qjl_variance`)."""
    return ((math.pi / 2) * qq * kk - qk ** 2) / m


def sphere_abs_moment(d: int) -> float:
    """E|u₁| for ``u`` uniform on the unit sphere of R^d: Γ(d/2) / (√π Γ((d+1)/2)).

    Parameters
    ----------
    d : int
        Dimension (≥ 1).

    Returns
    -------
    float

    Examples
    --------
    >>> round(sphere_abs_moment(2), 6)  # E|cos θ| = 2/π
    0.63662
    """
    d = check_int(d, "d", low=1)
    return 1.0 / (math.sqrt(math.pi) * _gamma_half_ratio(d / 2))


def qjl_variance(kind: str, m: int, q: Float[np.ndarray, "*batch d"],
                 k: Float[np.ndarray, "*batch d"]) -> Float[np.ndarray, "*batch"]:
    """Exact variance (over the sketch) of the QJL estimate of ``⟨q, k⟩`` (exact norm).

    Gaussian: ((π/2)‖q‖²‖k‖² − ⟨q,k⟩²)/m, as `qjl_inner_product_variance` (one formula
    for both; derived there from the estimator that Zandieh, Daliri, Han 2024, Lemma 3.2
    prove unbiased).
    Orthogonal (rows of norm √d in blocks of d orthogonal rows, the last block with
    m' = m mod d rows): with a = ⟨q, k/‖k‖⟩, b² = ‖q‖² − a², μ = E|u₁| and, per block
    of m' rows, E S² = m'/d + m'(m'−1)·(2/π)/d, Var S = E S² − (m'μ)²,
    E T² = (m' − E S²)/(d − 1),

        Var = c²‖k‖²·d · Σ_blocks (a²·Var S + b²·E T²),   c = 1/(m·√d·μ).

    (S = Σ|u_i| over the block's coordinates of a uniform unit vector u, T the
    component of the query orthogonal to k; docs/qjl.md derives it.) For m = d and
    large d the b² term is (1 − 2/π) ≈ 0.36 times the Gaussian one.
    SRHT (``"srht"``): the orthogonal value, which is its variance averaged over a
    uniformly random orientation of the pair (q, k) — exact for d a power of two and
    m ≤ d (then S·R is √d times m rows of a Haar matrix for a Haar R); for m > d the
    blocks share the orientation, which adds a between-block term (docs/qjl.md, "SRHT":
    at m = 2d +6% at d = 8, +0.7% at d = 16, +0.1% at d = 32, not detected at d = 64).
    Those values come with an `SRHTApproximationWarning`.
    For a fixed pair the SRHT estimate is not exactly unbiased, so this is not its
    conditional variance. For d not a power of two there is no closed form (a
    ValueError): the truncated Hadamard rows are correlated and the orthogonal value is
    off by 0.76–2.3×.

    Parameters
    ----------
    kind : {"gaussian", "orthogonal", "srht"}
        Sketch family (rows i.i.d. Gaussian, blocks of orthogonal rows, or the
        subsampled randomized Hadamard transform).
    m : int
        Sketch rows, >= 1 (more than d: several orthogonal blocks).
    q, k : array_like, shape ``(..., d)``
        Finite; the batch axes broadcast against each other, d equal.

    Returns
    -------
    ndarray, shape of the broadcast batch, float64
        The variance, in the units of ``⟨q, k⟩²``.

    Raises
    ------
    ValueError
        Bad input, or ``kind="srht"`` with d not a power of two (no closed form).

    Warns
    -----
    SRHTApproximationWarning
        ``kind="srht"`` and m > d: the value is approximate.

    Examples
    --------
    >>> q, k = np.eye(4)[0], np.eye(4)[1]
    >>> float(qjl_variance("gaussian", 8, q, k)) == np.pi / 2 / 8
    True
    """
    kind = check_choice(kind, "kind", _SKETCH_KINDS)
    m = check_int(m, "m", low=1)
    q = as_float_array(q, "q", min_ndim=1).astype(np.float64)
    k = as_float_array(k, "k", min_ndim=1).astype(np.float64)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension; received {q.shape} and {k.shape}")
    try:
        np.broadcast_shapes(q.shape[:-1], k.shape[:-1])
    except ValueError:
        raise ValueError(f"q and k's batch shapes must broadcast; received {q.shape} and {k.shape}") from None
    d = q.shape[-1]
    _check_srht_dim(kind, d)
    _warn_srht_blocks(kind, m, d)
    eq, ek = _unsafe_exponent(q, axis=-1), _unsafe_exponent(k, axis=-1)
    q, k = scale_rows(q, eq), scale_rows(k, ek)
    qq, kk, qk = (q * q).sum(-1), (k * k).sum(-1), (q * k).sum(-1)
    if kind == "gaussian":
        return _scaled_back(_gaussian_qjl_variance(qq, kk, qk, m), eq + ek)
    a2 = np.divide(qk ** 2, kk, out=np.zeros_like(qk), where=kk > 0)
    b2 = np.maximum(qq - a2, 0.0)
    return _scaled_back(_orthogonal_qjl_variance(m, d, a2, b2, kk), eq + ek)


def _orthogonal_qjl_variance(m: int, d: int, a2: np.ndarray | float, b2: np.ndarray | float,
                             kk: np.ndarray | float) -> np.ndarray | float:
    """The orthogonal-sketch variance of `qjl_variance` from a², b², ‖k‖² (blocks of d rows)."""
    mu = sphere_abs_moment(d)
    total_s = total_t = 0.0
    for rows, count in ((d, m // d), (m % d, 1)):
        if rows == 0 or count == 0:
            continue
        es2 = rows / d + rows * (rows - 1) * (2 / math.pi) / d
        total_s += count * (es2 - (rows * mu) ** 2)
        total_t += count * ((rows - es2) / (d - 1) if d > 1 else 0.0)
    c = 1.0 / (m * math.sqrt(d) * mu)
    return c ** 2 * kk * d * (a2 * total_s + b2 * total_t)


def qjl_reconstruction_mse(kind: str, m: int, dim: int) -> float:
    """Relative MSE of the reconstruction: ``E‖x̃ − x‖² / ‖x‖²`` for x̃ = c‖x‖Sᵀsign(Sx).

    Gaussian: π·d/(2m) − 1/m (the same quantity as `residual_inflation(d, m)`: the QJL
    error of a vector of uniform direction relative to its own projection). Orthogonal: 1/(m·μ²) + P/m² − 1 with μ = E|u₁| and P the
    number of ordered row pairs in different orthogonal blocks (rows of one block are
    orthogonal, so only those pairs add a cross term): with m = n·d + r,
    P = m² − n·d² − r², so the value is 1/(m·μ²) − (n·d² + r²)/m², computed so (two
    terms of one sign ratio, ≈ π/2 : 1; no cancellation), in constant time; it equals
    `residual_inflation(dim, m, kind)` to 1e-12 relative (tests/test_theory_j2.py).
    At m = d this is π/2 − 1/d
    (Gaussian) against 1/(d μ²) − 1 ≈ π/2 − 1 (orthogonal). docs/qjl.md derives both.

    Parameters
    ----------
    kind : {"gaussian", "orthogonal", "srht"}
        ``"srht"``: the orthogonal value (its average over the vector's orientation, exact
        for dim a power of two and m ≤ dim, approximate with an `SRHTApproximationWarning`
        at m > dim; see `qjl_variance`); a ValueError for dim not a power of two (no
        closed form).
    m, dim : int
        Sketch rows (1 ≤ m ≤ 2**53) and vector dimension (>= 1).

    Returns
    -------
    float
        Unitless: the error energy relative to ``‖x‖²`` (above 1 when it exceeds x's).

    Warns
    -----
    SRHTApproximationWarning
        ``kind="srht"`` and m > dim: the value is approximate.

    Examples
    --------
    >>> round(qjl_reconstruction_mse("gaussian", 128, 128), 4)  # pi/2 - 1/128
    1.563
    >>> round(qjl_reconstruction_mse("orthogonal", 128, 128), 4)
    0.5647
    """
    kind = check_choice(kind, "kind", _SKETCH_KINDS)
    m = check_int(m, "m", low=1, high=_MAX_ROWS)
    d = check_int(dim, "dim", low=1)
    _check_srht_dim(kind, d)
    _warn_srht_blocks(kind, m, d)
    if kind == "gaussian":
        return math.pi * d / (2 * m) - 1 / m
    mu = sphere_abs_moment(d)
    # same-block ordered pairs n·d² + r² (exact ints; m² − that is P), over m²: P/m² − 1
    # without the cancellation of forming P/m² ≈ 1 first
    n, r = divmod(m, d)
    return 1 / (m * mu ** 2) - (n * d * d + r * r) / (m * m)


def residual_inflation(dim: int | None = None, m: int | None = None,
                       kind: str = "gaussian") -> float:
    """Variance cost of estimating ``<q, r>`` with a 1-bit QJL of the residual r.

    Ratio of ``E[(<q, r_hat> - <q, r>)^2]`` (the QJL estimate's error, from
    `qjl_inner_product_variance`) to ``E[<q, r>^2] = ||q||^2 ||r||^2 / dim`` (the error of
    dropping r: the residual's own projection), for r of isotropic direction in R^dim:

        ((pi/2) - 1/dim) * dim / m   ->   pi/2  (m = dim, dim -> infinity)

    for a Gaussian sketch; for ``"orthogonal"`` and ``"srht"`` the orthogonal closed form
    of `qjl_variance` with a² = ‖q‖²/dim (the isotropic average), ≈ π/2 − 1 at m = dim
    (0.5647 at dim = 128) and about half that at m = 2·dim. The same quantity as
    `qjl_reconstruction_mse(kind, m, dim)` (equal to 1e-12 relative). ``"srht"`` at
    m > dim is approximate (+6% at dim = 8, m = 16; `SRHTApproximationWarning`).

    Parameters
    ----------
    dim : int or None
        Dimension of r (``d_pad``), >= 2; None gives the Gaussian limit pi/2 (then ``m``
        must be None and ``kind`` "gaussian").
    m : int or None
        Sketch rows, 1 ≤ m ≤ 2**53 (default ``dim``).
    kind : {"gaussian", "orthogonal", "srht"}
        Sketch family (``"srht"``: its orientation-averaged variance, see `qjl_variance`;
        a ValueError for dim not a power of two, where it has no closed form).

    Returns
    -------
    float

    Warns
    -----
    SRHTApproximationWarning
        ``kind="srht"`` and m > dim: the value is approximate (the example's 0.2823 too).

    Examples
    --------
    >>> round(residual_inflation(), 4), round(residual_inflation(128), 4)
    (1.5708, 1.563)
    >>> import warnings
    >>> round(residual_inflation(128, kind="orthogonal"), 4)
    0.5647
    >>> with warnings.catch_warnings():  # srht at m > dim: approximate, with a warning
    ...     warnings.simplefilter("ignore", SRHTApproximationWarning)
    ...     round(residual_inflation(128, 256, "srht"), 4)  # ≈
    0.2823
    """
    kind = check_choice(kind, "kind", _SKETCH_KINDS)
    if dim is None:
        if m is not None or kind != "gaussian":
            raise ValueError(f"m needs dim, and so does a kind other than 'gaussian'; received "
                             f"dim=None, m={m!r}, kind={kind!r}")
        return math.pi / 2
    dim = check_int(dim, "dim", low=2)
    m = dim if m is None else check_int(m, "m", low=1, high=_MAX_ROWS)
    _check_srht_dim(kind, dim)
    _warn_srht_blocks(kind, m, dim)
    if kind == "gaussian":
        return (math.pi / 2 - 1 / dim) * dim / m
    # ‖q‖ = ‖r‖ = 1, isotropic direction: E a² = 1/dim; divide by E⟨q, r⟩² = 1/dim
    return float(_orthogonal_qjl_variance(m, dim, 1 / dim, 1 - 1 / dim, 1.0)) * dim
