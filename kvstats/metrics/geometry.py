"""Scale and direction errors of reconstructed vectors (the axes of the 6D framework).

All functions work on the last axis (the feature axis) and are vectorised over the
leading axes. Conventions for exact and zero vectors (no NaN, no warnings):

========================  ============  ===========  ============
case                      ``snr_db``    ``angle``    ``norm_ratio``
========================  ============  ===========  ============
``x̂ == x`` (incl. 0, 0)   ``+inf``      ``0``        ``1``
``x == 0``, ``x̂ != 0``    ``-inf``      ``π/2``      ``+inf``
``x != 0``, ``x̂ == 0``    ``0``         ``π/2``      ``0``
========================  ============  ===========  ============

A zero vector has no direction; it is treated as orthogonal to everything else (cosine
0), and as parallel to another zero vector.

Magnitudes: the squared norms of vectors beyond ~1e154 overflow and those below ~1e-154
underflow in float64 (beyond ~1e19 / below ~1e-19 in float32; a float32 row whose sums
overflow is first summed in float64, that row alone). Rows whose squared norms
came out non-finite, or nonzero-but-tiny, are redone on copies scaled by powers of two
(exact; :mod:`kvstats._scaling`), the reference, the reconstruction and the error
each by its own exponent, so every finite input gets the right SNR and ratio and an
angle accurate to rounding (absolute). Other rows are computed by the plain formulas,
bit for bit as before. A ratio beyond the float range is ``inf``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvstats._checks import as_data_array, check_int
from kvstats._scaling import max_exponent, scale_rows

__all__ = ["snr_db", "angle", "norm_ratio", "pooled_snr_db"]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Row-wise dot product through matmul (BLAS): faster than einsum or (a*b).sum(-1).
    return (a[..., None, :] @ b[..., :, None])[..., 0, 0]


def _sumsq(a: np.ndarray) -> np.ndarray:
    return _dot(a, a)


def _error(x: np.ndarray, xh: np.ndarray) -> np.ndarray:
    """e = x̂ − x; where it overflows the float range the row is suspect and redone scaled."""
    with np.errstate(over="ignore"):
        return xh - x


def _reductions(x: np.ndarray, xh: np.ndarray, e: np.ndarray,
                nx2: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """float64 ‖x‖², ‖x̂‖², ‖e‖², ⟨x, e⟩ (e = x̂ − x).

    ``nx2`` is ``_sumsq(x)`` (in x's dtype, as computed here) when the caller has it: the
    profile computes it once per chunk of trials for all the reconstructions of a sweep's
    case. Same bits either way.
    """
    with np.errstate(over="ignore", invalid="ignore"):   # detected and redone below
        out = (_sumsq(x) if nx2 is None else nx2, _sumsq(xh), _sumsq(e), _dot(x, e))
    if x.dtype == np.float32 and not all(np.isfinite(o).all() for o in out):
        # float32 squares overflow beyond ~1.8e19: redo those rows' four sums in float64
        # (nx2 too: it may come from the caller). Only those rows: the others keep their
        # float32 sums, whatever rows share the call (a profile chunk's other trials).
        bad = ~np.logical_and.reduce([np.isfinite(o) for o in out])
        x64, xh64, e64 = (a[bad].astype(np.float64) for a in (x, xh, e))
        out = tuple(np.array(o, dtype=np.float64) for o in out)
        for o, r in zip(out, (_sumsq(x64), _sumsq(xh64), _sumsq(e64), _dot(x64, e64))):
            o[bad] = r
        return out
    return tuple(o.astype(np.float64, copy=False) for o in out)


# Squared norms below these are suspected of underflow (or of lost digits) when the vector
# is not zero: such rows are redone scaled. Normal minimum: 2**-1022 (f64), 2**-126 (f32).
_TINY_SUMSQ = {np.dtype(np.float32): 2.0**-100, np.dtype(np.float64): 2.0**-900}
_DB_PER_OCTAVE = 20.0 * np.log10(2.0)        # dB of a factor 2 in norm (4 in energy)
_NO_EXPONENT = -(1 << 20)                     # exponent of a zero vector in a group max


def _suspect_rows(vectors: tuple[np.ndarray, ...], sumsqs: tuple[np.ndarray, ...],
                  dtype: np.dtype) -> np.ndarray:
    """Rows where a squared norm is non-finite, or tiny while its vector is not zero.

    ``dtype`` is the vectors' (the squared norms are float64 whatever it is): float32
    squares lose digits below 2**-126 even when their sum is returned in float64.
    """
    bad = np.zeros(np.shape(sumsqs[0]), dtype=bool)
    for v, n2 in zip(vectors, sumsqs):
        bad |= ~np.isfinite(n2)
        small = n2 < _TINY_SUMSQ[dtype]
        if small.any():                  # usually only exact (zero-error) rows: few
            bad[small] |= np.any(v[small] != 0, axis=-1)
    return bad


def _scaled_parts(x: np.ndarray, xh: np.ndarray):
    """Each of x, x̂, e = x̂ − x as (squared norm of the scaled copy, binary exponent).

    float64; e is formed from x and x̂ scaled by their common exponent, so it neither
    overflows (x̂ − x beyond the float range) nor loses anything exact scaling keeps.
    """
    x, xh = x.astype(np.float64), xh.astype(np.float64)
    ex, eh = max_exponent(x, axis=-1), max_exponent(xh, axis=-1)
    ec = np.maximum(ex, eh)
    e_c = scale_rows(xh, ec) - scale_rows(x, ec)        # e · 2**-ec
    ee = max_exponent(e_c, axis=-1)
    parts = []
    for v, k, shift in ((x, ex, 0), (xh, eh, 0), (e_c, ee, ec)):
        n2 = _sumsq(scale_rows(v, k))
        parts.append((n2, np.where(n2 > 0, k + shift, _NO_EXPONENT)))
    return parts


def _snr_scaled(nx2: np.ndarray, ex: np.ndarray, ne2: np.ndarray, ee: np.ndarray) -> np.ndarray:
    # ‖x‖² = nx2·4**ex, ‖e‖² = ne2·4**ee; a zero side has nx2 (ne2) = 0: ±inf as usual
    shift = np.where((nx2 > 0) & (ne2 > 0), ex - ee, 0) * _DB_PER_OCTAVE
    return _snr_from(nx2, ne2) + shift


def _robust_rows(x: np.ndarray, xh: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(snr_db, angle, norm_ratio) of rows of any finite magnitude (the slow path)."""
    (nx2, ex), (nh2, eh), (ne2, ee) = _scaled_parts(x, xh)
    snr = _snr_scaled(nx2, ex, ne2, ee)
    with np.errstate(over="ignore"):         # a ratio beyond the float range is inf
        ratio = np.ldexp(_ratio_from(nx2, nh2), np.where((nx2 > 0) & (nh2 > 0), eh - ex, 0))
    # the angle from x, x̂ scaled alike (its accurate formula needs e in the same units);
    # the direct formula on unit vectors where their magnitudes are too far apart for that.
    # The common exponent is over the non-zero vectors only (a zero one has _NO_EXPONENT):
    # max_exponent's 0 for a zero row left a tiny partner unscaled, its ‖x̂‖² underflowed
    # to 0 and zero-vs-tiny read as "both zero" (angle 0, not π/2).
    x64, xh64 = x.astype(np.float64), xh.astype(np.float64)
    ec = np.maximum(ex, eh)
    ec = np.where(ec == _NO_EXPONENT, 0, ec)            # both zero: nothing to scale
    xs, hs = scale_rows(x64, ec), scale_rows(xh64, ec)
    es = hs - xs
    phi = _angle(xs, hs, *(o.astype(np.float64) for o in
                           (_sumsq(xs), _sumsq(hs), _sumsq(es), _dot(xs, es))))
    far = (nx2 > 0) & (nh2 > 0) & (np.abs(ex - eh) > 400)
    if far.any():
        phi[far] = _angle_direct(scale_rows(x64[far], ex[far]), scale_rows(xh64[far], eh[far]))
    return snr, phi, ratio


def _snr_from(nx2: np.ndarray, ne2: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = 10.0 * np.log10(nx2 / ne2)
    # 0/0 (both zero vectors) is an exact reconstruction.
    return np.where(ne2 == 0, np.inf, snr)


def _ratio_from(nx2: np.ndarray, nh2: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(nh2 / nx2)
    return np.where((nx2 == 0) & (nh2 == 0), 1.0, r)


def _angle_direct(x: np.ndarray, xh: np.ndarray) -> np.ndarray:
    # φ = 2·atan2(‖u − v‖, ‖u + v‖) with u, v the unit vectors: accurate to rounding,
    # unlike arccos(cos φ), whose error is ~√eps near 0 and π. A zero vector gets
    # u = 0, which yields π/2 against a non-zero vector and 0 against a zero one.
    # Only the few rows the fast path rejects come here: float64 costs little. Each row is
    # first scaled by its own power of two (exact; the same bits where nothing under- or
    # overflows), so no squared norm of a finite non-zero vector comes out 0 or inf.
    x, xh = x.astype(np.float64), xh.astype(np.float64)
    x, xh = scale_rows(x, max_exponent(x, axis=-1)), scale_rows(xh, max_exponent(xh, axis=-1))
    nx2, nh2 = _sumsq(x), _sumsq(xh)
    with np.errstate(divide="ignore"):
        ix = np.where(nx2 > 0, 1.0 / np.sqrt(nx2), 0.0)
        ih = np.where(nh2 > 0, 1.0 / np.sqrt(nh2), 0.0)
    u = x * ix[..., None]
    v = xh * ih[..., None]
    a = np.sqrt(_sumsq(u - v))
    b = np.sqrt(_sumsq(u + v))
    return 2.0 * np.arctan2(a, b)


# Fast path accepted when ‖e⊥‖² > tau ‖e‖²: its relative error is then ≲ √d·eps/tau.
_ANGLE_TAU = {np.dtype(np.float32): 0.1, np.dtype(np.float64): 1e-6}


def _angle(x: np.ndarray, xh: np.ndarray, nx2: np.ndarray, nh2: np.ndarray, ne2: np.ndarray,
           xe: np.ndarray) -> np.ndarray:
    """Angle from the four reductions, with :func:`_angle_direct` for the rows it can't do.

    With a = ‖x‖, b = ‖x̂‖, c = ⟨x, e⟩/a (the error along x) and ‖e⊥‖² = ‖e‖² − c²,
    b²‖u − v‖² = (b − a − c)² + ‖e⊥‖², where b − a = (2⟨x, e⟩ + ‖e‖²)/(a + b) has no
    cancellation; and ‖u + v‖² = 4 − ‖u − v‖². Tiny angles come out with full relative
    accuracy (better than forming u − v). Only an error nearly parallel to x (‖e⊥‖²
    lost to cancellation, including φ ≈ π), a zero vector or an exact row goes the
    direct way, on just those rows.
    """
    a, b = np.sqrt(nx2), np.sqrt(nh2)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = xe / a
        eperp2 = ne2 - c * c
        ok = (a > 0) & (b > 0) & (eperp2 > _ANGLE_TAU[x.dtype] * ne2)
        bma = (2.0 * xe + ne2) / (a + b)
        s2 = ((bma - c) ** 2 + eperp2) / nh2
        phi = 2.0 * np.arctan2(np.sqrt(s2), np.sqrt(np.maximum(4.0 - s2, 0.0)))
    bad = ~ok
    if bad.any():
        phi[bad] = _angle_direct(x[bad], xh[bad])
    return phi


def _geometry(x: np.ndarray, xh: np.ndarray,
              e: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(snr_db, angle, norm_ratio) of same-shape, same-dtype, finite arrays (unchecked).

    ``e`` is ``xh - x`` when the caller has it already.
    """
    return _geometry_pooled(x, xh, e)[:3]


def _geometry_pooled(x: np.ndarray, xh: np.ndarray, e: np.ndarray | None = None,
                     axis: int | None = None,
                     nx2: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """`_geometry` and, with ``axis``, ``pooled_snr_db(x, xh, axis)`` from the same
    squared norms (no second pass over the arrays; the same numbers bit for bit).
    ``nx2``: ``_sumsq(x)`` if the caller has it (see :func:`_reductions`)."""
    if e is None:
        e = _error(x, xh)
    nx2, nh2, ne2, xe = _reductions(x, xh, e, nx2)
    with np.errstate(invalid="ignore", over="ignore"):    # suspect rows are redone below
        snr, phi, ratio = (_snr_from(nx2, ne2), _angle(x, xh, nx2, nh2, ne2, xe),
                           _ratio_from(nx2, nh2))
    suspect = _suspect_rows((x, xh, e), (nx2, nh2, ne2), x.dtype)
    bad = suspect | ~np.isfinite(xe)
    if bad.any():
        snr[bad], phi[bad], ratio[bad] = _robust_rows(x[bad], xh[bad])
    if axis is None:
        return snr, phi, ratio
    with np.errstate(over="ignore"):   # a sum past the float range takes the scaled path below
        sx, se = np.sum(nx2, axis=axis), np.sum(ne2, axis=axis)
    if suspect.any() or not (np.isfinite(sx).all() and np.isfinite(se).all()):
        pooled = pooled_snr_db(x, xh, axis=axis)  # the scaled path, as pooled_snr_db takes it
    else:
        pooled = _snr_from(sx, se)
    return snr, phi, ratio, pooled


def _pair(x: Any, x_hat: Any) -> tuple[np.ndarray, np.ndarray]:
    a = as_data_array(x, "x", min_ndim=1)
    b = as_data_array(x_hat, "x_hat", min_ndim=1)
    if a.shape != b.shape:
        raise ValueError(f"x_hat must have the shape of x {a.shape}; received x_hat of "
                         f"shape {b.shape}")
    dt = np.result_type(a, b)
    # C order: the row products round by memory layout (a Fortran-ordered or transposed
    # input gave other last bits); C-ordered input is used as is
    return np.ascontiguousarray(a, dtype=dt), np.ascontiguousarray(b, dtype=dt)


def _rows(a: np.ndarray) -> np.ndarray:
    # (..., d) -> (m, d): per-row masks then index arrays, never numpy scalars (1-D input)
    return a.reshape(-1, a.shape[-1])


def _per_vector(x: Any, x_hat: Any, which: int) -> np.ndarray:
    """snr_db (``which`` = 0) or norm_ratio (2) of checked input, alone: its formula from the
    row reductions, and the slow path (`_robust_rows`) only for the rows whose squared
    norms it reads are suspect (the error's, for the SNR; not for the ratio)."""
    a, b = _pair(x, x_hat)
    shape = a.shape[:-1]
    a, b = _rows(a), _rows(b)
    e = _error(a, b)
    nx2, nh2, ne2, _ = _reductions(a, b, e)
    if which == 0:
        out = _snr_from(nx2, ne2)
        bad = _suspect_rows((a, b, e), (nx2, nh2, ne2), a.dtype)
    else:
        out = _ratio_from(nx2, nh2)
        bad = _suspect_rows((a, b), (nx2, nh2), a.dtype)
    if bad.any():
        out[bad] = _robust_rows(a[bad], b[bad])[which]
    return out.reshape(shape)


def snr_db(x: Any, x_hat: Any) -> np.ndarray:
    """Signal-to-noise ratio ``10·log10(‖x‖² / ‖x − x̂‖²)`` in dB, per vector.

    ``+inf`` for an exact reconstruction (see the module table for zero vectors).

    Parameters
    ----------
    x, x_hat : array_like, shape (..., d)
        Reference and reconstruction (finite).

    Returns
    -------
    numpy.ndarray, shape (...)
        float64 dB.

    Examples
    --------
    >>> from kvstats.metrics import snr_db
    >>> snr_db([[3.0, 4.0], [1.0, 0.0]], [[3.0, 4.5], [1.0, 0.0]]).round(3).tolist()
    [20.0, inf]
    """
    return _per_vector(x, x_hat, 0)


def _check_vector_axes(axis: Any, n_vector_axes: int) -> None:
    """ValueError/TypeError unless ``axis`` is None or distinct vector axes (not the feature axis)."""
    if axis is None:
        return
    axes = axis if isinstance(axis, tuple) else (axis,)
    lo, hi = -n_vector_axes, n_vector_axes - 1
    ints = [check_int(ax, "axis") for ax in axes]
    if any(not lo <= ax <= hi for ax in ints) or len({ax % n_vector_axes for ax in ints}) != len(ints):
        raise ValueError(f"axis must be None or distinct vector axes of x.shape[:-1] (integers in "
                         f"[{lo}, {hi}]; the last axis of x is the feature axis); received {axis!r}")


def pooled_snr_db(x: Any, x_hat: Any, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Energy-pooled SNR ``10·log10(Σ‖x‖² / Σ‖x − x̂‖²)`` over vectors, in dB.

    The alternative to the mean of per-vector dB used by :func:`error_profile`: pooling
    weights each vector by its energy, so large-norm vectors dominate.

    Parameters
    ----------
    x, x_hat : array_like, shape (..., d)
    axis : int or tuple of int, optional
        Vector axes (of ``x.shape[:-1]``) to pool over; all by default.

    Returns
    -------
    numpy.ndarray or float
        float64 dB; ``+inf`` when every vector is exact.

    Examples
    --------
    >>> from kvstats.metrics import pooled_snr_db
    >>> float(pooled_snr_db([[3.0, 4.0], [0.0, 0.0]], [[3.0, 4.5], [0.0, 0.5]]).round(3))
    16.99
    """
    a, b = _pair(x, x_hat)
    if a.ndim == 1:                         # one vector: pooled over itself
        a, b = a[None], b[None]
    _check_vector_axes(axis, a.ndim - 1)
    e = _error(a, b)
    nx2, nh2, ne2, _ = _reductions(a, b, e)
    with np.errstate(over="ignore"):   # a sum past the float range takes the scaled path below
        sx, se = np.sum(nx2, axis=axis), np.sum(ne2, axis=axis)
    suspect = _suspect_rows((a, b, e), (nx2, nh2, ne2), a.dtype)
    if suspect.any() or not (np.isfinite(sx).all() and np.isfinite(se).all()):
        # sums of squared norms in scaled form: each row's scaled sum times 4**(its
        # exponent − the group's largest), summed, then the groups' exponents in dB
        (px, ex), _, (pe, ee) = _scaled_parts(a, b)
        gx, ge = np.max(ex, axis=axis, keepdims=True), np.max(ee, axis=axis, keepdims=True)
        tx = np.sum(np.ldexp(px, 2 * (ex - gx)), axis=axis)
        te = np.sum(np.ldexp(pe, 2 * (ee - ge)), axis=axis)
        shape = np.shape(tx)
        scaled = _snr_scaled(tx, np.reshape(gx, shape), te, np.reshape(ge, shape))
        # only the groups that need it: the others keep the plain sums' bits, whatever
        # else shares the call (a profile chunk, a batch)
        bad = np.any(suspect, axis=axis) | ~np.isfinite(sx) | ~np.isfinite(se)
        with np.errstate(invalid="ignore"):               # inf/inf in the replaced groups
            return np.where(bad, scaled, _snr_from(sx, se))
    return _snr_from(sx, se)


def angle(x: Any, x_hat: Any) -> np.ndarray:
    """Direction error ``φ = arccos(⟨x, x̂⟩ / (‖x‖‖x̂‖))`` in radians, per vector.

    Evaluated as ``2·atan2(‖u − v‖, ‖u + v‖)`` with ``u = x/‖x‖``, ``v = x̂/‖x̂‖``, which
    is accurate near 0 and π where ``arccos`` loses half the digits; ``‖u − v‖`` comes
    from the error ``x̂ − x`` without cancellation (see ``_angle``). Zero vectors: see
    the module table.

    Parameters
    ----------
    x, x_hat : array_like, shape (..., d)

    Returns
    -------
    numpy.ndarray, shape (...)
        float64 angles in ``[0, π]``.

    Examples
    --------
    >>> from kvstats.metrics import angle
    >>> angle([[1.0, 0.0], [1.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]).round(4).tolist()
    [0.7854, 1.5708]
    """
    a, b = _pair(x, x_hat)
    return _geometry(_rows(a), _rows(b))[1].reshape(a.shape[:-1])


def norm_ratio(x: Any, x_hat: Any) -> np.ndarray:
    """Pure scale error ``‖x̂‖ / ‖x‖``, per vector (1 for exact; zero vectors: module table).

    Parameters
    ----------
    x, x_hat : array_like, shape (..., d)

    Returns
    -------
    numpy.ndarray, shape (...)
        float64 ratios.

    Examples
    --------
    >>> from kvstats.metrics import norm_ratio
    >>> norm_ratio([[3.0, 4.0]], [[6.0, 8.0]]).tolist()
    [2.0]
    """
    return _per_vector(x, x_hat, 2)
