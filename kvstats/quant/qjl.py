"""QJL: the 1-bit sign codec of Johnson–Lindenstrauss sketches of keys and residuals.

A sketch ``S`` (``m × d``, :mod:`kvstats.quant.sketch`) maps a vector ``k`` to the ``m``
signs of ``S k``; with the norm ``‖k‖`` stored beside them, the inner product with any
query is estimated by

    ⟨q, k⟩ ≈ c · ‖k‖ · ⟨S q, sign(S k)⟩,

which is unbiased for the right constant ``c`` (:attr:`Sketch.scale`; for every pair with
the Gaussian and orthogonal sketches, on average over the pair's orientation with the
randomized-Hadamard one). This module has
:func:`qjl_encode`, :func:`qjl_scores`, :func:`qjl_reconstruct`: the codes (packed sign
bits, little bit order as in the QJL CUDA kernels, and a float16 norm), the
inner-product estimator for every query/key pair, and the unbiased reconstruction
``c·‖k‖·Sᵀ sign(S k)``, with the private sign and norm helpers that TurboQuant-prod
(:mod:`kvstats.quant.prod`) and the QJL key quantizer (:mod:`kvstats.quant.qjl_keys`)
share with them.

Conventions: ``sign(0) = +1`` (a zero projection is stored as bit 1), so every stored bit
is a valid sign; a zero vector has norm 0 and estimates/reconstructs to exactly 0.
docs/qjl.md derives the constants and variances (closed forms in :mod:`kvstats.theory`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from jaxtyping import Float, UInt8
from numpy.typing import DTypeLike

from kvstats._checks import as_float_array, check_choice
from kvstats.quant.coder import as_norm_dtype, check_norm_range
from kvstats.quant.packing import pack_bits, unpack_bits
from kvstats.quant.rotation import _fwht
from kvstats.quant.sketch import (_SRHT_BLOCK, Sketch, _check_sketch, _srht_project,  # noqa: F401
                                  _srht_project_t, make_sketch)  # make_sketch: examples

__all__ = ["QJLCodes", "qjl_encode", "qjl_scores", "qjl_reconstruct"]



# --------------------------------------------------------------------------- helpers

def _store_norms(x: np.ndarray, norm_dtype: np.dtype, name: str) -> np.ndarray:
    """``‖x‖`` over the last axis in ``norm_dtype``; an overflow is an error, not an inf, and
    norms lost to underflow warn (:func:`kvstats.quant.coder.check_norm_range`).

    ``x`` is finite (its callers validate it): a norm that is 0 for a nonzero row or inf
    comes from squares that under- or overflowed in x's dtype (float32 from |x| ~ 1e19),
    and is recomputed from the row scaled by its largest magnitude, in float64."""
    norms = _row_norms(x)
    check_norm_range(norms, norm_dtype, name)  # overflow: an error; underflow: a warning
    return norms.astype(norm_dtype)


def _row_norms(x: np.ndarray) -> np.ndarray:
    """The norms `_store_norms` stores, before the range check and the cast: in x's dtype,
    or float64 when a row's squares overflowed it (row by row: a piece of the rows gets
    each row's norm bit for bit as the whole array)."""
    with np.errstate(over="ignore"):  # recomputed below; a true overflow is reported by check_norm_range
        norms = np.linalg.norm(x, axis=-1)
    lost = ((norms == 0) & np.any(x != 0, axis=-1)) | np.isinf(norms)  # squares that under/overflowed
    if lost.any():
        small = x[lost].astype(np.float64)
        scale = np.max(np.abs(small), axis=-1)
        if np.isinf(norms).any():  # a norm beyond x's dtype must not overflow again when stored back
            norms = norms.astype(np.float64)
        norms[lost] = scale * np.sqrt(np.sum((small / scale[:, None]) ** 2, axis=-1))
    return norms


def _broadcast_batch(x_batch: tuple[int, ...], draws: tuple[int, ...], name: str) -> None:
    try:
        np.broadcast_shapes(x_batch, draws)
    except ValueError as exc:
        raise ValueError(f"the batch axes of {name} {x_batch} must broadcast against the "
                         f"draws {draws} of the sketch") from exc


def _for_signs(x: np.ndarray) -> np.ndarray:
    """``x`` with every row whose largest entry exceeds 2^(max exponent − 32) scaled by a
    power of two to a largest entry in [0.5, 1); other rows untouched, bit for bit. Signs
    are scale-free and a power-of-two scale is exact, so ``sign(S x)`` is unchanged while
    its sums (d products, a Hadamard transform's partial sums) no longer overflow."""
    info = np.finfo(x.dtype)
    peak = np.max(np.abs(x), axis=-1, keepdims=True)
    huge = peak > np.ldexp(1.0, info.maxexp - 32)
    exponent = np.frexp(np.where(huge, peak, 1.0))[1]
    return np.where(huge, np.ldexp(x, -exponent), x).astype(x.dtype, copy=False)


def _nonnegative(project: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """``project(x) >= 0``, the stored sign bits. An overflow in the projection (inf, or
    ``inf − inf``: a NaN that would be stored as bit 0) is redone on `_for_signs` rows;
    one sum over the result detects it, so data of ordinary size pay no extra pass."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = project(x)
        if not np.isfinite(y.sum()):
            y = project(_for_signs(x))
    return y >= 0


def _sign_bits(sketch: Sketch, x: np.ndarray) -> np.ndarray:
    """The stored bits of ``sign(S x)``, bool ``(..., m)``: True where ``S x >= 0``
    (``S x`` by the fast transform for an srht sketch, `Sketch.project`)."""
    return _nonnegative(sketch._project, x)


def _in_dtype(sketch: Sketch, dtype: DTypeLike) -> Sketch:
    """``sketch`` with its dense matrix cast to ``dtype`` once, for a sign product and a
    reconstruction in that dtype (each would cast it again; same numbers)."""
    if sketch.dense is None or sketch.dense.dtype == dtype:
        return sketch
    return dataclasses.replace(sketch, dense=sketch.dense.astype(dtype))


def _pm_from_bits(bits: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """Sign bits (bool or 0/1) to ±1 of ``dtype`` (bit 1 ↦ +1)."""
    pm = bits.astype(dtype)
    pm *= 2  # in place: under half the time of ``* 2 - 1`` on new arrays
    pm -= 1
    return pm


def _pm_signs(packed: np.ndarray, m: int, dtype: DTypeLike) -> np.ndarray:
    """Unpack stored sign bits to ±1 of ``dtype`` (bit 1 ↦ +1)."""
    return _pm_from_bits(unpack_bits(packed, m), dtype)


def _reconstruct(sketch: Sketch, pm: np.ndarray, norms: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``scale · ‖x‖ · Sᵀ pm`` from ±1 signs ``pm`` (in ``dtype``) and stored norms."""
    rec = sketch._project_t(pm)  # exact for ±1 signs, also by the fast transform
    rec *= (sketch.scale * norms.astype(dtype))[..., None]
    return rec


def _add_reconstruction(sketch: Sketch, x: np.ndarray, norms: np.ndarray, out: np.ndarray) -> None:
    """``out += scale · ‖x‖ · Sᵀ sign(S x)`` (``norms`` as stored), in ``out``'s dtype.

    An srht sketch runs on cache-sized pieces of each draw's rows (both transforms and
    the steps between them on data still in the core's cache); a dense sketch in one
    product per draw, as `_sign_bits` and `_reconstruct`.
    """
    if not sketch._fast():
        out += _reconstruct(sketch, _pm_from_bits(_sign_bits(sketch, x), out.dtype), norms, out.dtype)
        return
    nd = len(sketch.draws)
    lead = np.broadcast_shapes(x.shape[:-2], sketch.draws)
    x = np.broadcast_to(x, lead + x.shape[-2:])
    norms = np.broadcast_to(norms, lead + norms.shape[-1:])
    step = max(1, _PIECE_VALUES // sketch.dim)
    scale = (sketch.scale * norms.astype(out.dtype))
    for i in np.ndindex(*lead):
        j = i[len(i) - nd:]  # the draw of this batch entry
        signs, rows = sketch.signs[j], None if sketch.rows is None else sketch.rows[j]
        xi, oi, si = x[i], out[i], scale[i]
        project = partial(_srht_project, signs, rows, sketch.m, sketch.dim)
        for a in range(0, xi.shape[0], step):
            pm = _pm_from_bits(_nonnegative(project, xi[a:a + step]), out.dtype)
            rec = _srht_project_t(signs, rows, sketch.m, sketch.dim, pm)
            rec *= si[a:a + step, None]
            oi[a:a + step] += rec


def _block_project(s1: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``S x`` for the srht sketch of one block of ``m = d_pad = dim`` rows and signs ``s1``."""
    return _fwht(x * s1, _SRHT_BLOCK)


#: Values per piece of `_add_reconstruction` (256 KB of float32).
_PIECE_VALUES = 1 << 16


def _add_residual_reconstruction(sketch: Sketch, x: np.ndarray, out: np.ndarray,
                                 norm_dtype: np.dtype, name: str) -> None:
    """``out += scale · ‖r‖ · Sᵀ sign(S r)`` for the residual ``r = x − out`` of a fast
    (srht) sketch, ``‖r‖`` stored in ``norm_dtype``: what ``r = x - out``, `_store_norms`
    and `_add_reconstruction` compute, on cache-sized pieces of each draw's rows (the
    residual is never formed whole). The norms of all rows are range-checked once at
    the end (same error and warnings as `_store_norms`; on an error ``out`` holds
    partial results, as it would have before). Same numbers bit for bit.

    The common sketch -- one block of ``m = d_pad = dim`` rows -- takes the transforms'
    steps directly (`_srht_project` and `_srht_project_t` on a single block, with the
    signs cast once per draw instead of once per piece).
    """
    nd = len(sketch.draws)
    lead = np.broadcast_shapes(x.shape[:-2], sketch.draws)
    if out.shape[:-2] != lead or x.shape != out.shape:
        raise ValueError(f"x and out must have the batch shape {lead} of the sketch's draws; "
                         f"received x {x.shape}, out {out.shape}")
    dim, dtype = sketch.dim, out.dtype
    step = max(1, _PIECE_VALUES // dim)
    one_block = sketch.rows is None and sketch.signs.shape[-2] == 1 and sketch.m == dim
    norms = []
    for i in np.ndindex(*lead):
        j = i[len(i) - nd:]  # the draw of this batch entry
        signs, rows = sketch.signs[j], None if sketch.rows is None else sketch.rows[j]
        s1 = signs.astype(dtype, copy=False)[0] if one_block else None
        project = (partial(_block_project, s1) if one_block
                   else partial(_srht_project, signs, rows, sketch.m, dim))
        xi, oi = x[i], out[i]
        for a in range(0, xi.shape[0], step):
            r = xi[a:a + step] - oi[a:a + step]
            rn = _row_norms(r)
            norms.append(rn)
            with np.errstate(over="ignore"):
                stored = rn.astype(norm_dtype)
            if not np.isfinite(stored).all():
                continue  # a norm beyond norm_dtype: the range check below raises
            si = sketch.scale * stored.astype(dtype)
            if one_block:
                # _srht_project / _srht_project_t of one block: the same products, fwht
                # calls and sign steps
                pm = _pm_from_bits(_nonnegative(project, r), dtype)
                rec = _fwht(pm, _SRHT_BLOCK)
                rec *= s1
            else:
                pm = _pm_from_bits(_nonnegative(project, r), dtype)
                rec = _srht_project_t(signs, rows, sketch.m, dim, pm)
            rec *= si[:, None]
            oi[a:a + step] += rec
    if norms:
        check_norm_range(np.concatenate(norms), norm_dtype, name)


# --------------------------------------------------------------------------- codes
@dataclass(frozen=True, eq=False)
class QJLCodes:
    """Stored QJL codes of ``n`` vectors.

    ``signs``: uint8 ``(*shape, n, ceil(m/8))``, bit j of byte i = sign of sketch row
    8i+j (1 for ≥ 0); ``shape`` is the broadcast of the input batch and the sketch
    draws. ``norms``: ``‖x‖`` in ``norm_dtype`` (float16 by default), shape
    ``(*batch, n)`` of the input.
    """

    signs: UInt8[np.ndarray, "*batch n m_bytes"]
    norms: Float[np.ndarray, "*batch n"]
    m: int

    @property
    def nbytes(self) -> int:
        """Bytes stored."""
        return int(self.signs.nbytes + self.norms.nbytes)


def qjl_encode(sketch: Sketch, x: Float[np.ndarray, "*batch n d"],
               norm_dtype: DTypeLike = np.float16, name: str = "x") -> QJLCodes:
    """Encode vectors as packed signs of their sketch and their norm.

    Parameters
    ----------
    sketch : Sketch
        From :func:`make_sketch`, ``matrix`` ``(*draws, m, d)``.
    x : array_like, shape ``(*batch, n, d)``
        Vectors (float32/float64; finite). ``batch`` broadcasts against ``draws``.
    norm_dtype : {float16, float32, float64}
        Dtype of the stored norm; float16 (default) raises on norms above 65504.
    name : str
        What the vectors are (e.g. ``"K"``), named in norm errors and warnings.

    Returns
    -------
    QJLCodes

    Examples
    --------
    >>> s = make_sketch("gaussian", 16, 8, seed=0)
    >>> c = qjl_encode(s, np.ones((3, 8)))
    >>> c.signs.shape, c.signs.dtype, c.norms.dtype
    ((3, 2), dtype('uint8'), dtype('float16'))
    """
    sketch = _check_sketch(sketch)
    x = as_float_array(x, "x", min_ndim=2)
    if x.shape[-1] != sketch.dim:
        raise ValueError(f"x must have last dimension {sketch.dim} (the sketch's dim); "
                         f"received shape {x.shape}")
    _broadcast_batch(x.shape[:-2], sketch.draws, "x")
    norm_dtype = as_norm_dtype(norm_dtype)
    return QJLCodes(signs=pack_bits(_sign_bits(sketch, x)),
                    norms=_store_norms(x, norm_dtype, name), m=sketch.m)


def _check_codes(codes: object, sketch: Sketch) -> QJLCodes:
    if not isinstance(codes, QJLCodes):
        raise TypeError(f"codes must be QJLCodes from qjl_encode; received {type(codes).__name__}")
    if codes.m != sketch.m:
        raise ValueError(f"codes were made with m={codes.m} sketch rows but the sketch has "
                         f"m={sketch.m}")
    return codes


def qjl_scores(sketch: Sketch, q: Float[np.ndarray, "*batch n_q d"],
               codes: QJLCodes) -> Float[np.ndarray, "*batch n_q n_k"]:
    """Estimate ``q @ k.T`` for every query/key pair from the keys' QJL codes.

    ``scale · ‖k‖ · ⟨S q, sign(S k)⟩``: one matmul of the sketched queries against the
    ±1 signs, so the cost is that of the exact scores with d replaced by m.

    Parameters
    ----------
    sketch : Sketch
        The sketch the keys were encoded with.
    q : array_like, shape ``(*batch, n_q, d)``
    codes : QJLCodes
        Keys' codes, ``(*batch', n_k, ...)``; the batches and draws broadcast.

    Returns
    -------
    ndarray, shape ``(*broadcast batch, n_q, n_k)``, dtype of ``q``
        Unbiased estimates of ``⟨q_i, k_j⟩``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> k, q = rng.standard_normal((5, 32)), rng.standard_normal((2, 32))
    >>> s = make_sketch("gaussian", 4096, 32, seed=0)
    >>> est = qjl_scores(s, q, qjl_encode(s, k))
    >>> est.shape, bool(np.abs(est - q @ k.T).max() < 3.0)
    ((2, 5), True)
    """
    sketch = _check_sketch(sketch)
    codes = _check_codes(codes, sketch)
    q = as_float_array(q, "q", min_ndim=2)
    if q.shape[-1] != sketch.dim:
        raise ValueError(f"q must have last dimension {sketch.dim} (the sketch's dim); "
                         f"received shape {q.shape}")
    _broadcast_batch(q.shape[:-2], sketch.draws, "q")
    sq = sketch._project(q)
    signs = _pm_signs(codes.signs, sketch.m, q.dtype)
    raw = np.matmul(sq, np.swapaxes(signs, -1, -2))
    return (raw * (sketch.scale * codes.norms.astype(q.dtype))[..., None, :]).astype(q.dtype, copy=False)


def qjl_reconstruct(sketch: Sketch, codes: QJLCodes,
                    dtype: DTypeLike = np.float64) -> Float[np.ndarray, "*batch n d"]:
    """Unbiased reconstruction ``scale · ‖x‖ · Sᵀ sign(S x)`` of the encoded vectors.

    ``⟨q, qjl_reconstruct(...)⟩`` equals :func:`qjl_scores` for every ``q`` (up to
    rounding), and ``E[x̂] = x`` over a Gaussian or orthogonal sketch; over an ``"srht"``
    sketch only on average over the orientation of ``x`` (``x = e₁`` is scaled by about
    1.25 at d ≥ 64; docs/qjl.md, "SRHT").

    Parameters
    ----------
    sketch : Sketch
    codes : QJLCodes
    dtype : float32 or float64
        Output dtype.

    Returns
    -------
    ndarray, shape ``(*shape, n, d)``

    Examples
    --------
    >>> s = make_sketch("gaussian", 8, 4, seed=0)
    >>> rec = qjl_reconstruct(s, qjl_encode(s, np.zeros((2, 4))))
    >>> rec.shape, float(np.abs(rec).max())  # a zero vector reconstructs to zero
    ((2, 4), 0.0)
    """
    sketch = _check_sketch(sketch)
    codes = _check_codes(codes, sketch)
    dtype = check_choice(np.dtype(dtype), "dtype", [np.dtype(np.float32), np.dtype(np.float64)])
    return _reconstruct(sketch, _pm_signs(codes.signs, sketch.m, dtype), codes.norms, dtype)
