"""QJL: 1-bit Johnson–Lindenstrauss sketches of keys and residuals.

A sketch ``S`` (``m × d``) maps a vector ``k`` to the ``m`` signs of ``S k``; with the
norm ``‖k‖`` stored beside them, the inner product with any query is estimated by

    ⟨q, k⟩ ≈ c · ‖k‖ · ⟨S q, sign(S k)⟩,

which is unbiased for the right constant ``c`` (:attr:`Sketch.scale`). This module has

- :func:`make_sketch`: Gaussian or orthogonalised sketches, batched over ``draws``;
- :func:`qjl_encode`, :func:`qjl_scores`, :func:`qjl_reconstruct`: the codes (packed
  sign bits, little bit order as in the QJL CUDA kernels, and a float16 norm), the
  inner-product estimator for every query/key pair, and the unbiased reconstruction
  ``c·‖k‖·Sᵀ sign(S k)``;
- :class:`ProdQuantizer`: TurboQuant-prod, a (b−1)-bit MSE quantizer plus a 1-bit QJL
  sketch of its residual (Zandieh et al., 2025);
- :class:`QJLKeyQuantizer`: the key quantizer of the QJL paper (Zandieh, Daliri, Han,
  2024), which sketches a few high-magnitude channels per group of tokens separately.

Conventions: ``sign(0) = +1`` (a zero projection is stored as bit 1), so every stored bit
is a valid sign; a zero vector has norm 0 and estimates/reconstructs to exactly 0.
docs/qjl.md derives the constants and variances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import gammaln

from kvstats._checks import SeedLike, as_float_array, as_generator, check_choice, check_int
from kvstats.quant.packing import pack_bits, unpack_bits

__all__ = ["SKETCHES", "Sketch", "make_sketch", "QJLCodes", "qjl_encode", "qjl_scores",
           "qjl_reconstruct", "ProdCodes", "ProdQuantizer", "QJLKeyCodes", "QJLKeyQuantizer",
           "sphere_abs_moment", "qjl_variance", "qjl_reconstruction_mse"]

SKETCHES = ("gaussian", "orthogonal")
_NORM_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


# --------------------------------------------------------------------------- helpers
def _as_draws(draws: Any) -> tuple[int, ...]:
    """``draws`` as a tuple of positive ints (an int n means ``(n,)``)."""
    if isinstance(draws, (int, np.integer)) and not isinstance(draws, bool):
        draws = (draws,)
    if not isinstance(draws, (tuple, list)):
        raise TypeError(f"draws must be an int or a tuple of positive ints; received {draws!r}")
    return tuple(check_int(n, "draws", low=1) for n in draws)


def _as_norm_dtype(norm_dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(norm_dtype)
    except TypeError as exc:
        raise TypeError(f"norm_dtype must be one of {[str(d) for d in _NORM_DTYPES]}; "
                        f"received {norm_dtype!r}") from exc
    check_choice(dt, "norm_dtype", _NORM_DTYPES)
    return dt


def _store_norms(x: np.ndarray, norm_dtype: np.dtype, name: str) -> np.ndarray:
    """``‖x‖`` over the last axis in ``norm_dtype``; an overflow is an error, not an inf."""
    with np.errstate(over="ignore"):  # reported below as a ValueError
        norms = np.linalg.norm(x, axis=-1).astype(norm_dtype)
    if not np.isfinite(norms).all():
        raise ValueError(f"{name} has vector norms beyond the range of norm_dtype={norm_dtype} "
                         f"(max {np.finfo(norm_dtype).max}); received max norm "
                         f"{float(np.linalg.norm(x, axis=-1).max()):.6g}")
    return norms


def _broadcast_batch(x_batch: tuple[int, ...], draws: tuple[int, ...], name: str) -> None:
    try:
        np.broadcast_shapes(x_batch, draws)
    except ValueError as exc:
        raise ValueError(f"the batch axes of {name} {x_batch} must broadcast against the "
                         f"draws {draws} of the sketch") from exc


def _lead(a: np.ndarray, ndim: int) -> np.ndarray:
    """View of ``a`` with new leading axes up to ``ndim`` dimensions (explicit broadcasting)."""
    return a.reshape((1,) * (ndim - a.ndim) + a.shape)


def _sign_bits(sketch: Sketch, x: np.ndarray) -> np.ndarray:
    """The stored bits of ``sign(S x)``, bool ``(..., m)``: True where ``S x >= 0``."""
    return np.matmul(x, np.swapaxes(sketch.matrix, -1, -2).astype(x.dtype, copy=False)) >= 0


def _pm_from_bits(bits: np.ndarray, dtype: Any) -> np.ndarray:
    """Sign bits (bool or 0/1) to ±1 of ``dtype`` (bit 1 ↦ +1)."""
    pm = bits.astype(dtype)
    pm *= 2  # in place: under half the time of ``* 2 - 1`` on new arrays
    pm -= 1
    return pm


def _pm_signs(packed: np.ndarray, m: int, dtype: Any) -> np.ndarray:
    """Unpack stored sign bits to ±1 of ``dtype`` (bit 1 ↦ +1)."""
    return _pm_from_bits(unpack_bits(packed, m), dtype)


def _reconstruct(sketch: Sketch, pm: np.ndarray, norms: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``scale · ‖x‖ · Sᵀ pm`` from ±1 signs ``pm`` (in ``dtype``) and stored norms."""
    rec = np.matmul(pm, sketch.matrix.astype(dtype, copy=False))
    rec *= (sketch.scale * norms.astype(dtype))[..., None]
    return rec


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
    return float(np.exp(gammaln(d / 2) - gammaln((d + 1) / 2) - 0.5 * math.log(math.pi)))


def qjl_variance(kind: str, m: int, q: Any, k: Any) -> np.ndarray:
    """Exact variance (over the sketch) of the QJL estimate of ``⟨q, k⟩`` (exact norm).

    Gaussian: ((π/2)‖q‖²‖k‖² − ⟨q,k⟩²)/m (Zandieh, Daliri, Han 2024, Lemma 3.2).
    Orthogonal (rows of norm √d in blocks of d orthogonal rows, the last block with
    m' = m mod d rows): with a = ⟨q, k/‖k‖⟩, b² = ‖q‖² − a², μ = E|u₁| and, per block
    of m' rows, E S² = m'/d + m'(m'−1)·(2/π)/d, Var S = E S² − (m'μ)²,
    E T² = (m' − E S²)/(d − 1),

        Var = c²‖k‖²·d · Σ_blocks (a²·Var S + b²·E T²),   c = 1/(m·√d·μ).

    (S = Σ|u_i| over the block's coordinates of a uniform unit vector u, T the
    component of the query orthogonal to k; docs/qjl.md derives it.) For m = d and
    large d the b² term is (1 − 2/π) ≈ 0.36 times the Gaussian one.

    Parameters
    ----------
    kind : {"gaussian", "orthogonal"}
    m : int
        Sketch rows.
    q, k : array_like, shape ``(..., d)``
        Broadcast against each other.

    Returns
    -------
    ndarray, shape of the broadcast batch, float64

    Examples
    --------
    >>> q, k = np.eye(4)[0], np.eye(4)[1]
    >>> float(qjl_variance("gaussian", 8, q, k)) == np.pi / 2 / 8
    True
    """
    kind = check_choice(kind, "kind", SKETCHES)
    m = check_int(m, "m", low=1)
    q = as_float_array(q, "q", min_ndim=1).astype(np.float64)
    k = as_float_array(k, "k", min_ndim=1).astype(np.float64)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension; received {q.shape} and {k.shape}")
    d = q.shape[-1]
    qq, kk, qk = (q * q).sum(-1), (k * k).sum(-1), (q * k).sum(-1)
    if kind == "gaussian":
        return ((math.pi / 2) * qq * kk - qk ** 2) / m
    a2 = np.divide(qk ** 2, kk, out=np.zeros_like(qk), where=kk > 0)
    b2 = np.maximum(qq - a2, 0.0)
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

    Gaussian: π·d/(2m) − 1/m. Orthogonal: 1/(m·μ²) + P/m² − 1 with μ = E|u₁| and P the
    number of ordered row pairs in different orthogonal blocks (rows of one block are
    orthogonal, so only those pairs add a cross term). At m = d this is π/2 − 1/d
    (Gaussian) against 1/(d μ²) − 1 ≈ π/2 − 1 (orthogonal). docs/qjl.md derives both.

    Parameters
    ----------
    kind : {"gaussian", "orthogonal"}
    m, dim : int
        Sketch rows and vector dimension.

    Returns
    -------
    float

    Examples
    --------
    >>> round(qjl_reconstruction_mse("gaussian", 128, 128), 4)  # pi/2 - 1/128
    1.563
    >>> round(qjl_reconstruction_mse("orthogonal", 128, 128), 4)
    0.5647
    """
    kind = check_choice(kind, "kind", SKETCHES)
    m = check_int(m, "m", low=1)
    d = check_int(dim, "dim", low=1)
    if kind == "gaussian":
        return math.pi * d / (2 * m) - 1 / m
    mu = sphere_abs_moment(d)
    sizes = [d] * (m // d) + ([m % d] if m % d else [])
    pairs = m * m - sum(s * s for s in sizes)
    return 1 / (m * mu ** 2) + pairs / m ** 2 - 1


# --------------------------------------------------------------------------- sketch
@dataclass(frozen=True, eq=False)
class Sketch:
    """A QJL sketch: ``matrix`` of shape ``(*draws, m, dim)`` (float64) and its constant.

    ``scale`` is the exact constant ``c`` such that ``c·‖k‖·⟨S q, sign(S k)⟩`` is an
    unbiased estimator of ``⟨q, k⟩`` for every ``q, k`` (expectation over the sketch).
    """

    kind: str
    m: int
    dim: int
    draws: tuple[int, ...]
    matrix: np.ndarray
    scale: float

    def describe(self) -> dict[str, Any]:
        """Settings of the sketch (kind, rows, dimension, draws, constant)."""
        return {"sketch": self.kind, "m": self.m, "dim": self.dim, "draws": list(self.draws),
                "scale": self.scale}


def make_sketch(kind: str, m: int, dim: int, seed: SeedLike = 0,
                draws: int | tuple[int, ...] = ()) -> Sketch:
    """Draw a QJL sketch matrix.

    Parameters
    ----------
    kind : {"gaussian", "orthogonal"}
        ``"gaussian"``: i.i.d. N(0, 1) entries. ``"orthogonal"``: rows of a Haar-random
        orthogonal matrix (QR of a Gaussian matrix with the signs of R's diagonal
        fixed) scaled to norm √dim; for ``m > dim`` independent orthogonal blocks are
        stacked (rows within a block are orthogonal, rows of different blocks
        independent).
    m : int
        Number of rows (sign bits per vector), ≥ 1.
    dim : int
        Vector dimension d, ≥ 1.
    seed : int, SeedSequence, Generator or None
        Randomness; same seed, bit-identical matrix.
    draws : int or tuple of int
        Batch shape of independent sketches (leading axes of ``matrix``).

    Returns
    -------
    Sketch
        ``.matrix`` float64 ``(*draws, m, dim)``; ``.scale`` = √(π/2)/m for Gaussian and
        1/(m·√d·E|u₁|), E|u₁| = Γ(d/2)/(√π·Γ((d+1)/2)), for orthogonal (exact for every
        finite d, because each row is marginally uniform on the sphere of radius √d).

    Examples
    --------
    >>> s = make_sketch("orthogonal", 64, 64, seed=0)
    >>> s.matrix.shape, bool(np.allclose(s.matrix @ s.matrix.T, 64 * np.eye(64)))
    ((64, 64), True)
    >>> make_sketch("gaussian", 128, 64, seed=1, draws=10).matrix.shape
    (10, 128, 64)
    """
    kind = check_choice(kind, "kind", SKETCHES)
    m = check_int(m, "m", low=1)
    dim = check_int(dim, "dim", low=1)
    draws = _as_draws(draws)
    rng = as_generator(seed)
    if kind == "gaussian":
        matrix = rng.standard_normal((*draws, m, dim))
        scale = math.sqrt(math.pi / 2) / m
    else:
        n_blocks = -(-m // dim)
        g = rng.standard_normal((*draws, n_blocks, dim, dim))
        q, r = np.linalg.qr(g)
        # Multiplying Q's columns by sign(diag R) makes Q exactly Haar (Mezzadri 2007);
        # the rows of a Haar matrix are then each uniform on the sphere.
        diag = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
        diag[diag == 0] = 1.0
        q = q * diag[..., None, :]
        matrix = (q * math.sqrt(dim)).reshape(*draws, n_blocks * dim, dim)[..., :m, :]
        matrix = np.ascontiguousarray(matrix)
        scale = 1.0 / (m * math.sqrt(dim) * sphere_abs_moment(dim))
    matrix.setflags(write=False)
    return Sketch(kind=kind, m=m, dim=dim, draws=draws, matrix=matrix, scale=scale)


def _check_sketch(sketch: Any) -> Sketch:
    if not isinstance(sketch, Sketch):
        raise TypeError(f"sketch must be a Sketch from make_sketch; received {type(sketch).__name__}")
    return sketch


# --------------------------------------------------------------------------- codes
@dataclass(frozen=True, eq=False)
class QJLCodes:
    """Stored QJL codes of ``n`` vectors.

    ``signs``: uint8 ``(*shape, n, ceil(m/8))``, bit j of byte i = sign of sketch row
    8i+j (1 for ≥ 0); ``shape`` is the broadcast of the input batch and the sketch
    draws. ``norms``: ``‖x‖`` in ``norm_dtype`` (float16 by default), shape
    ``(*batch, n)`` of the input.
    """

    signs: np.ndarray
    norms: np.ndarray
    m: int

    @property
    def nbytes(self) -> int:
        """Bytes stored."""
        return int(self.signs.nbytes + self.norms.nbytes)


def qjl_encode(sketch: Sketch, x: Any, norm_dtype: Any = np.float16) -> QJLCodes:
    """Encode vectors as packed signs of their sketch and their norm.

    Parameters
    ----------
    sketch : Sketch
        From :func:`make_sketch`, ``matrix`` ``(*draws, m, d)``.
    x : array_like, shape ``(*batch, n, d)``
        Vectors (float32/float64; finite). ``batch`` broadcasts against ``draws``.
    norm_dtype : {float16, float32, float64}
        Dtype of the stored norm; float16 (default) raises on norms above 65504.

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
    norm_dtype = _as_norm_dtype(norm_dtype)
    return QJLCodes(signs=pack_bits(_sign_bits(sketch, x)),
                    norms=_store_norms(x, norm_dtype, "x"), m=sketch.m)


def _check_codes(codes: Any, sketch: Sketch) -> QJLCodes:
    if not isinstance(codes, QJLCodes):
        raise TypeError(f"codes must be QJLCodes from qjl_encode; received {type(codes).__name__}")
    if codes.m != sketch.m:
        raise ValueError(f"codes were made with m={codes.m} sketch rows but the sketch has "
                         f"m={sketch.m}")
    return codes


def qjl_scores(sketch: Sketch, q: Any, codes: QJLCodes) -> np.ndarray:
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
    sq = np.matmul(q, np.swapaxes(sketch.matrix, -1, -2).astype(q.dtype, copy=False))
    signs = _pm_signs(codes.signs, sketch.m, q.dtype)
    raw = np.matmul(sq, np.swapaxes(signs, -1, -2))
    return (raw * (sketch.scale * codes.norms.astype(q.dtype))[..., None, :]).astype(q.dtype, copy=False)


def qjl_reconstruct(sketch: Sketch, codes: QJLCodes, dtype: Any = np.float64) -> np.ndarray:
    """Unbiased reconstruction ``scale · ‖x‖ · Sᵀ sign(S x)`` of the encoded vectors.

    ``⟨q, qjl_reconstruct(...)⟩`` equals :func:`qjl_scores` for every ``q`` (up to
    rounding), and ``E[x̂] = x`` over the sketch.

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


# --------------------------------------------------------------------------- TurboQuant-prod
@dataclass(frozen=True, eq=False)
class ProdCodes:
    """TurboQuant-prod codes: the (b−1)-bit MSE codes and the QJL codes of the residual."""

    mse: Any
    residual: QJLCodes
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored (MSE codes and norms, residual signs and norms)."""
        mse_bytes = getattr(self.mse, "nbytes", None)
        if mse_bytes is None:
            mse_bytes = self.mse.codes.nbytes + self.mse.norms.nbytes
        return int(mse_bytes + self.residual.nbytes)


class ProdQuantizer:
    """TurboQuant-prod: (bits−1)-bit MSE quantizer + 1-bit QJL sketch of the residual.

    ``x̂ = x̂_mse + c·‖r‖·Sᵀ sign(S r)`` with ``r = x − x̂_mse`` in the original space,
    ``S`` an ``m × d`` sketch (``m = d_pad`` of the rotation by default) and ``‖r‖``
    stored in ``norm_dtype``. ``⟨q, x̂⟩`` is unbiased for ``⟨q, x⟩`` (over the sketch);
    its variance is ((π/2)‖q‖²‖r‖² − ⟨q, r⟩²)/m for a Gaussian sketch.

    Parameters
    ----------
    dim : int
        Vector dimension d.
    bits : int
        Total bits per coordinate, 2..9: ``bits − 1`` for the MSE codes and one for the
        sketch (with m = d_pad). 1 bit would be the sketch alone: use
        :class:`QJLKeyQuantizer`.
    rotation : {"hadamard", "haar", "identity"}
        Rotation of the MSE quantizer.
    sketch : {"gaussian", "orthogonal"}
    m : int, optional
        Sketch rows (default: the rotation's ``out_dim``).
    seed, draws
        Randomness and batch of independent draws (MSE rotation and sketch are drawn
        from independent child streams).
    norm_dtype : float16 (default), float32 or float64
        Dtype of the stored norms (of x by the MSE part, and of r).

    Examples
    --------
    >>> pq = ProdQuantizer(64, 3, seed=0)
    >>> x = np.random.default_rng(1).standard_normal((10, 64))
    >>> pq.decode(pq.encode(x)).shape, pq.bits_per_vector()["residual_signs"]
    ((10, 64), 64)
    """

    def __init__(self, dim: int, bits: int, rotation: str = "hadamard", sketch: str = "gaussian",
                 m: int | None = None, seed: SeedLike = 0, draws: int | tuple[int, ...] = (),
                 norm_dtype: Any = np.float16):
        from kvstats.quant.mse import MSEQuantizer  # Q1's module; imported here to keep qjl light

        self.dim = check_int(dim, "dim", low=1)
        bits = check_int(bits, "bits", low=1, high=9)
        if bits == 1:
            raise ValueError("bits must be >= 2 for ProdQuantizer ((bits-1)-bit MSE + 1-bit QJL); "
                             "received 1 — a 1-bit code is the QJL sketch alone: use "
                             "QJLKeyQuantizer(dim, m=dim)")
        self.bits = bits
        check_choice(sketch, "sketch", SKETCHES)
        self.draws = _as_draws(draws)
        self.norm_dtype = _as_norm_dtype(norm_dtype)
        mse_rng, sketch_rng = as_generator(seed).spawn(2)
        self.mse = MSEQuantizer(self.dim, bits - 1, rotation=rotation, seed=mse_rng,
                                draws=self.draws, norm_dtype=self.norm_dtype)
        self.rotation = rotation
        out_dim = self.mse.rotation.out_dim
        self.m = out_dim if m is None else check_int(m, "m", low=1)
        self.sketch = make_sketch(sketch, self.m, self.dim, seed=sketch_rng, draws=self.draws)

    def _check_x(self, x: Any) -> np.ndarray:
        x = as_float_array(x, "x", min_ndim=2)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last dimension dim={self.dim}; received shape {x.shape}")
        return x

    def encode(self, x: Any) -> ProdCodes:
        """Encode ``x`` ``(*batch, n, d)``: MSE codes, then signs and norm of the residual."""
        x = self._check_x(x)
        mse_codes = self.mse.encode(x)
        residual = x - np.asarray(self.mse.decode(mse_codes), dtype=x.dtype)
        return ProdCodes(mse=mse_codes,
                         residual=qjl_encode(self.sketch, residual, self.norm_dtype),
                         dtype=x.dtype)

    def _check(self, codes: Any) -> ProdCodes:
        if not isinstance(codes, ProdCodes):
            raise TypeError(f"codes must be ProdCodes from ProdQuantizer.encode; "
                            f"received {type(codes).__name__}")
        return codes

    def decode(self, codes: ProdCodes) -> np.ndarray:
        """``x̂_mse + c·‖r‖·Sᵀ sign(S r)`` in the dtype that was encoded."""
        codes = self._check(codes)
        base = np.asarray(self.mse.decode(codes.mse), dtype=codes.dtype)
        return base + qjl_reconstruct(self.sketch, codes.residual, dtype=codes.dtype)

    def roundtrip(self, x: Any) -> np.ndarray:
        """``decode(encode(x))`` without storing codes: what an analysis of ``x_hat`` needs.

        The MSE part is reconstructed once (`MSEQuantizer.roundtrip`; encode needs it for
        the residual and decode again for the output) and the residual's signs go to ±1
        without packing. Same sign convention, norm storage and casts as encode/decode,
        so the result equals ``decode(encode(x))`` bit for bit; same validation and errors.

        Parameters
        ----------
        x : array_like, shape (*batch, n, dim)

        Returns
        -------
        ndarray, shape ``(*shape, n, dim)``, dtype of ``x`` (float32 or float64)

        Examples
        --------
        >>> pq = ProdQuantizer(96, 3, seed=0)
        >>> x = np.random.default_rng(1).standard_normal((10, 96)).astype(np.float32)
        >>> x_hat = pq.roundtrip(x)
        >>> x_hat.dtype, bool(np.array_equal(x_hat, pq.decode(pq.encode(x))))
        (dtype('float32'), True)
        """
        x = self._check_x(x)
        base = np.asarray(self.mse.roundtrip(x), dtype=x.dtype)
        residual = x - base
        norms = _store_norms(residual, self.norm_dtype, "x")
        pm = _pm_from_bits(_sign_bits(self.sketch, residual), x.dtype)
        base += _reconstruct(self.sketch, pm, norms, x.dtype)  # base is ours: add in place
        return base

    def scores(self, q: Any, codes: ProdCodes) -> np.ndarray:
        """Inner products ``q @ x̂.T`` ``(*batch, n_q, n)`` (equal to those with :meth:`decode`)."""
        codes = self._check(codes)
        q = as_float_array(q, "q", min_ndim=2)
        base = np.asarray(self.mse.decode(codes.mse), dtype=q.dtype)
        return np.matmul(q, np.swapaxes(base, -1, -2)) + qjl_scores(self.sketch, q, codes.residual)

    def bits_per_vector(self, n_tokens: int | None = None) -> dict[str, float]:
        """Stored bits per vector by part (independent of ``n_tokens``, accepted for uniformity)."""
        parts = {f"mse_{k}": v for k, v in self.mse.bits_per_vector().items()}
        parts["residual_signs"] = self.m
        parts["residual_norm"] = 8 * self.norm_dtype.itemsize
        return parts

    def describe(self) -> dict[str, Any]:
        """Every setting: bits, rotation, sketch kind and rows, norm dtype, draws."""
        return {"quantizer": "turboquant_prod", "dim": self.dim, "bits": self.bits,
                "mse_bits": self.bits - 1, "rotation": self.rotation, "sketch": self.sketch.kind,
                "m": self.m, "norm_dtype": str(self.norm_dtype), "draws": list(self.draws)}


# --------------------------------------------------------------------------- QJL keys
@dataclass(frozen=True, eq=False)
class QJLKeyCodes:
    """Codes of :class:`QJLKeyQuantizer`.

    ``inlier``: QJL codes of the keys with their outlier channels zeroed. ``outlier``:
    QJL codes of the outlier channels alone (None when ``n_outliers = 0``).
    ``outlier_idx``: ``(*batch, n_groups, n_outliers)`` channel indices (ascending;
    uint8 for d ≤ 256, else uint16). ``n_tokens``, ``group_size``: the grouping;
    ``dtype``: the encoded keys' dtype (what :meth:`QJLKeyQuantizer.decode` returns).
    """

    inlier: QJLCodes
    outlier: QJLCodes | None
    outlier_idx: np.ndarray
    n_tokens: int
    group_size: int
    dtype: np.dtype = np.dtype(np.float64)

    @property
    def nbytes(self) -> int:
        """Bytes stored (signs, norms, outlier indices)."""
        out = 0 if self.outlier is None else self.outlier.nbytes
        return int(self.inlier.nbytes + out + self.outlier_idx.nbytes)


class QJLKeyQuantizer:
    """The QJL paper's key quantizer, with outlier channels sketched separately.

    Tokens are grouped in runs of ``group_size`` along the token axis (a final partial
    run is its own group). In each group, the ``n_outliers`` channels of largest L2
    norm over the group's tokens are split off. The inlier part ``k_in`` (outlier
    channels zeroed) is sketched with ``m`` rows and the outlier part ``k_out`` with an
    independent sketch of ``outlier_m`` rows, each with its own stored norm. The score is
    the sum of two unbiased estimators, each applied to the query restricted to the
    same channels:

        ĉ(q, k) = c·‖k_in‖·⟨S q_in, sign(S k_in)⟩ + c'·‖k_out‖·⟨S' q_out, sign(S' k_out)⟩,

    so the variance is ((π/2)‖q_in‖²‖k_in‖² − ⟨q,k_in⟩²)/m + ((π/2)‖q_out‖²‖k_out‖² −
    ⟨q,k_out⟩²)/outlier_m (Gaussian): the large outlier energy is multiplied only by the
    query's energy in a few channels.

    Parameters
    ----------
    dim : int
        Head dimension d.
    m : int
        Sketch rows for the inliers (sign bits per token).
    sketch : {"gaussian", "orthogonal"}
        Kind of both sketches.
    n_outliers : int
        Outlier channels per group, 0..dim (0: plain QJL, no second sketch).
    outlier_m : int, optional
        Sketch rows for the outlier part; default ``m`` (the outlier part carries most
        of the energy of such keys, so it gets as many sign bits as the rest).
    group_size : int
        Tokens per group for the outlier selection.
    seed, draws
        Randomness and batch of independent draws.
    norm_dtype : float16 (default), float32 or float64

    Examples
    --------
    >>> qk = QJLKeyQuantizer(64, 128, n_outliers=4, group_size=16, seed=0)
    >>> K = np.random.default_rng(0).standard_normal((40, 64)); K[:, 3] *= 20
    >>> codes = qk.encode(K)
    >>> codes.outlier_idx.shape, bool((codes.outlier_idx == 3).any(axis=-1).all())
    ((3, 4), True)
    >>> qk.scores(K[:2], codes).shape
    (2, 40)
    """

    def __init__(self, dim: int, m: int, sketch: str = "gaussian", n_outliers: int = 0,
                 outlier_m: int | None = None, group_size: int = 32, seed: SeedLike = 0,
                 draws: int | tuple[int, ...] = (), norm_dtype: Any = np.float16):
        self.dim = check_int(dim, "dim", low=1)
        self.m = check_int(m, "m", low=1)
        self.sketch_kind = check_choice(sketch, "sketch", SKETCHES)
        self.n_outliers = check_int(n_outliers, "n_outliers", low=0, high=self.dim)
        self.outlier_m = self.m if outlier_m is None else check_int(outlier_m, "outlier_m", low=1)
        self.group_size = check_int(group_size, "group_size", low=1)
        self.draws = _as_draws(draws)
        self.norm_dtype = _as_norm_dtype(norm_dtype)
        self.idx_dtype = np.dtype(np.uint8 if self.dim <= 256 else np.uint16)
        in_rng, out_rng = as_generator(seed).spawn(2)
        self.sketch = make_sketch(sketch, self.m, self.dim, seed=in_rng, draws=self.draws)
        self.outlier_sketch = (make_sketch(sketch, self.outlier_m, self.dim, seed=out_rng,
                                           draws=self.draws) if self.n_outliers else None)

    # -- grouping
    def n_groups(self, n_tokens: int) -> int:
        """Number of token groups (the last may be partial)."""
        return -(-check_int(n_tokens, "n_tokens", low=1) // self.group_size)

    def _token_mask(self, idx: np.ndarray, n_tokens: int) -> np.ndarray:
        """Boolean ``(*batch, n_tokens, d)``: True on each token's group's outlier channels."""
        mask = np.zeros((*idx.shape[:-1], self.dim), dtype=bool)
        np.put_along_axis(mask, idx.astype(np.intp), True, axis=-1)
        return np.repeat(mask, self.group_size, axis=-2)[..., :n_tokens, :]

    def _pad_tokens(self, x: np.ndarray, axis: int = -2) -> np.ndarray:
        n = x.shape[axis]
        pad = self.n_groups(n) * self.group_size - n
        if pad == 0:
            return x
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, pad)
        return np.pad(x, widths)

    def encode(self, K: Any) -> QJLKeyCodes:
        """Encode keys ``(*batch, N, d)``."""
        K = as_float_array(K, "K", min_ndim=2)
        if K.shape[-1] != self.dim:
            raise ValueError(f"K must have last dimension dim={self.dim}; received shape {K.shape}")
        n_tokens = K.shape[-2]
        g = self.n_groups(n_tokens)
        if self.n_outliers == 0:
            idx = np.zeros((*K.shape[:-2], g, 0), dtype=self.idx_dtype)
            return QJLKeyCodes(qjl_encode(self.sketch, K, self.norm_dtype), None, idx,
                               n_tokens, self.group_size, K.dtype)
        # Zero padding of the last partial group leaves its channel norms unchanged.
        padded = self._pad_tokens(K)
        energy = np.square(padded).reshape(*K.shape[:-2], g, self.group_size, self.dim).sum(axis=-2)
        top = np.argsort(-energy, axis=-1, kind="stable")[..., :self.n_outliers]
        idx = np.sort(top, axis=-1).astype(self.idx_dtype)
        mask = self._token_mask(idx, n_tokens)
        k_out = np.where(mask, K, 0).astype(K.dtype, copy=False)
        k_in = np.where(mask, 0, K).astype(K.dtype, copy=False)
        return QJLKeyCodes(qjl_encode(self.sketch, k_in, self.norm_dtype),
                           qjl_encode(self.outlier_sketch, k_out, self.norm_dtype),
                           idx, n_tokens, self.group_size, K.dtype)

    def _check(self, codes: Any) -> QJLKeyCodes:
        if not isinstance(codes, QJLKeyCodes):
            raise TypeError(f"codes must be QJLKeyCodes from QJLKeyQuantizer.encode; "
                            f"received {type(codes).__name__}")
        if codes.group_size != self.group_size or codes.outlier_idx.shape[-1] != self.n_outliers:
            raise ValueError(f"codes were made with group_size={codes.group_size}, "
                             f"n_outliers={codes.outlier_idx.shape[-1]}; this quantizer has "
                             f"group_size={self.group_size}, n_outliers={self.n_outliers}")
        return codes

    def _grouped_scores(self, sketch: Sketch, sq: np.ndarray, part: QJLCodes,
                        n_tokens: int) -> np.ndarray:
        """Scores when the sketched query depends on the key's group.

        ``sq``: ``(..., n_q, G, m)`` sketched (restricted) queries per group; returns
        ``(..., n_q, N)`` = c·‖k‖·⟨sq[group(k)], sign(S k)⟩ via one batched matmul per group.
        """
        signs = self._pad_tokens(_pm_signs(part.signs, sketch.m, sq.dtype))  # (..., G*gs, m)
        g = sq.shape[-2]
        signs = signs.reshape(*signs.shape[:-2], g, self.group_size, sketch.m)
        raw = np.matmul(np.moveaxis(sq, -3, -2), np.swapaxes(signs, -1, -2))  # (..., G, n_q, gs)
        raw = np.moveaxis(raw, -2, -3)  # (..., n_q, G, gs)
        raw = raw.reshape(*raw.shape[:-2], g * self.group_size)[..., :n_tokens]
        return raw * (sketch.scale * part.norms.astype(sq.dtype))[..., None, :]

    def scores(self, q: Any, codes: QJLKeyCodes) -> np.ndarray:
        """Unbiased estimates of ``q @ K.T``, shape ``(*batch, n_q, N)``, dtype of ``q``.

        Equal (to rounding) to ``q @ decode(codes).T``.
        """
        codes = self._check(codes)
        q = as_float_array(q, "q", min_ndim=2)
        if q.shape[-1] != self.dim:
            raise ValueError(f"q must have last dimension dim={self.dim}; received shape {q.shape}")
        if self.n_outliers == 0:
            return qjl_scores(self.sketch, q, codes.inlier)
        try:
            np.broadcast_shapes(q.shape[:-2], codes.inlier.signs.shape[:-2])
        except ValueError as exc:
            raise ValueError(f"the batch axes of q {q.shape[:-2]} must broadcast against those "
                             f"of the codes {codes.inlier.signs.shape[:-2]}") from exc
        idx = codes.outlier_idx.astype(np.intp)  # (*b, G, n_out)
        # Query values on each group's outlier channels: (..., n_q, G, n_out).
        qx, ix = q[..., :, None, :], idx[..., None, :, :]
        nd = max(qx.ndim, ix.ndim)
        q_out = np.take_along_axis(_lead(qx, nd), _lead(ix, nd), axis=-1)

        def restricted(sketch: Sketch) -> np.ndarray:
            # S q_out for each group: Σ_j∈idx S[:, j] q_j, (..., n_q, G, m).
            st = np.swapaxes(sketch.matrix, -1, -2)[..., None, :, :].astype(q.dtype)
            ix = idx[..., None]
            nd = max(st.ndim, ix.ndim)
            cols = np.take_along_axis(_lead(st, nd), _lead(ix, nd), axis=-2)  # (..., G, n_out, m)
            return np.matmul(q_out[..., :, :, None, :], cols[..., None, :, :, :])[..., 0, :]

        sq_full = np.matmul(q, np.swapaxes(self.sketch.matrix, -1, -2).astype(q.dtype))
        sq_in = sq_full[..., :, None, :] - restricted(self.sketch)
        n = codes.n_tokens
        return (self._grouped_scores(self.sketch, sq_in, codes.inlier, n)
                + self._grouped_scores(self.outlier_sketch, restricted(self.outlier_sketch),
                                       codes.outlier, n)).astype(q.dtype, copy=False)

    def decode(self, codes: QJLKeyCodes, dtype: Any = None) -> np.ndarray:
        """Unbiased reconstruction ``(*batch, N, d)``: each part's ``c‖k‖Sᵀsign(Sk)`` on its channels.

        In the dtype that was encoded unless ``dtype`` is given.
        """
        codes = self._check(codes)
        dtype = codes.dtype if dtype is None else dtype
        rec = qjl_reconstruct(self.sketch, codes.inlier, dtype)
        if self.n_outliers == 0:
            return rec
        mask = self._token_mask(codes.outlier_idx, codes.n_tokens)
        out = qjl_reconstruct(self.outlier_sketch, codes.outlier, dtype)
        return np.where(mask, out, rec)

    def stored_bits(self, n_tokens: int) -> dict[str, int]:
        """Total bits stored for ``n_tokens`` keys, by part.

        Per token: ``m`` (+ ``outlier_m``) sign bits and one (two) norms; per group:
        ``n_outliers · ceil(log2 d)`` index bits (the information in the indices; they
        are held in uint8/uint16 in memory).
        """
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        norm_bits = 8 * self.norm_dtype.itemsize
        parts = {"signs": self.m * n_tokens, "norm": norm_bits * n_tokens}
        if self.n_outliers:
            parts["outlier_signs"] = self.outlier_m * n_tokens
            parts["outlier_norm"] = norm_bits * n_tokens
            parts["outlier_indices"] = (self.n_groups(n_tokens) * self.n_outliers
                                        * (self.dim - 1).bit_length())
        return parts

    def bits_per_vector(self, n_tokens: int) -> dict[str, float]:
        """Stored bits per key by part for a context of ``n_tokens`` keys (indices amortised)."""
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        return {k: v / n_tokens for k, v in self.stored_bits(n_tokens).items()}

    def describe(self) -> dict[str, Any]:
        """Every setting: sketch kind, rows, outliers, group size, norm dtype, draws."""
        return {"quantizer": "qjl_key", "dim": self.dim, "sketch": self.sketch_kind, "m": self.m,
                "n_outliers": self.n_outliers,
                "outlier_m": self.outlier_m if self.n_outliers else 0,
                "group_size": self.group_size, "norm_dtype": str(self.norm_dtype),
                "draws": list(self.draws)}
