"""QJL sketch matrices: Gaussian, orthogonalised or randomized Hadamard, batched over ``draws``.

A sketch ``S`` (``m × d``) maps a vector ``k`` to the ``m`` signs of ``S k``
(:mod:`kvstats.quant.qjl`); :attr:`Sketch.scale` is the constant ``c`` that makes
``c · ‖k‖ · ⟨S q, sign(S k)⟩`` unbiased for ``⟨q, k⟩``. docs/qjl.md derives it.

The randomized-Hadamard sketch (``"srht"``) is drawn from O(d) random numbers (signs and
sampled rows) and applied by :meth:`Sketch.project` in O(d log d) per vector (a fast
Walsh–Hadamard transform), and its transpose by :meth:`Sketch.project_t`; the coders of
:mod:`kvstats.quant.qjl` use both, so ``matrix`` is materialised only when it is read
(export, scores of the QJL key quantizer's outlier channels; docs/qjl.md, "Cost").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from jaxtyping import Float, Int

from kvstats._checks import SeedLike, as_float_array, as_generator, check_choice, check_int
from kvstats.quant.rotation import _fwht, _hadamard_cached, next_pow2
from kvstats.qjl_theory import sphere_abs_moment

__all__ = ["SKETCHES", "Sketch", "make_sketch"]

SKETCHES = ("gaussian", "orthogonal", "srht")


def _as_draws(draws: object) -> tuple[int, ...]:
    """``draws`` as a tuple of positive ints (an int n means ``(n,)``)."""
    if isinstance(draws, (int, np.integer)) and not isinstance(draws, bool):
        draws = (draws,)
    if not isinstance(draws, (tuple, list)):
        raise TypeError(f"draws must be an int or a tuple of positive ints; received {draws!r}")
    return tuple(check_int(n, "draws", low=1) for n in draws)


@dataclass(frozen=True, eq=False, init=False)
class Sketch:
    """A QJL sketch: the matrix ``S`` of shape ``(*draws, m, dim)`` (float64) and its constant.

    ``scale`` is the constant ``c`` such that ``c·‖k‖·⟨S q, sign(S k)⟩`` estimates
    ``⟨q, k⟩``: unbiased for every ``q, k`` (expectation over the sketch) for the
    Gaussian and orthogonal kinds; for ``"srht"`` unbiased on average over the
    orientation of the pair (docs/qjl.md, "SRHT"). ``signs`` (``(*draws, blocks, dim)``,
    ±1, float64; int8 after :meth:`held_as`) and ``rows`` (``(*draws, m mod d_pad)``
    Hadamard rows of a partial last block, or None) are the randomness of an ``"srht"``
    sketch (None for the other kinds).
    ``dense`` holds the matrix of the Gaussian and orthogonal kinds; an ``"srht"``
    sketch leaves it None, applies itself by the fast transform (:meth:`project`,
    :meth:`project_t`) and builds :attr:`matrix` only when it is read. The keyword
    ``matrix=`` of the constructor (and of ``dataclasses.replace``) sets ``dense``, as
    in earlier versions; a sketch with ``dense`` set multiplies by it.
    """

    kind: str
    m: int
    dim: int
    draws: tuple[int, ...]
    dense: Float[np.ndarray, "*draws m d"] | None
    scale: float
    signs: Float[np.ndarray, "*draws blocks d"] | None = None
    rows: Int[np.ndarray, "*draws m_last"] | None = None

    def __init__(self, kind: str, m: int, dim: int, draws: tuple[int, ...],
                 dense: np.ndarray | None = None, scale: float | None = None,
                 signs: np.ndarray | None = None, rows: np.ndarray | None = None, *,
                 matrix: np.ndarray | None = None):
        # ``matrix=`` is the name of ``dense`` in earlier versions (e.g. callers of
        # ``dataclasses.replace(sketch, matrix=S)``); a given matrix is always used
        if matrix is not None:
            dense = matrix
        if scale is None:
            raise TypeError("Sketch needs its estimator constant scale; received none")
        for name, value in (("kind", kind), ("m", m), ("dim", dim), ("draws", draws),
                            ("dense", dense), ("scale", scale), ("signs", signs), ("rows", rows)):
            object.__setattr__(self, name, value)

    @cached_property
    def matrix(self) -> Float[np.ndarray, "*draws m d"]:
        """``S``, float64 ``(*draws, m, dim)`` (built from the signs for ``"srht"``, read-only)."""
        if self.dense is not None:
            return self.dense
        if self.signs is None:
            raise ValueError(f"a {self.kind!r} sketch needs its matrix (dense) or its signs; "
                             "received neither")
        matrix = _srht_matrix(self.signs, self.rows, self.m, self.dim)
        matrix.setflags(write=False)
        return matrix

    def _fast(self) -> bool:
        """Whether the fast transform applies: an srht sketch with signs for its draws
        and no matrix given in their place."""
        return self.dense is None and self.signs is not None and self.signs.shape[:-2] == self.draws

    def held_as(self, dtype: Any) -> "Sketch":
        """This sketch with its dense matrix held in ``dtype`` (float32 or float64) and
        the ±1 signs of an ``"srht"`` sketch in int8 (its sampled rows in the smallest
        unsigned type that indexes ``d_pad`` rows).

        For a caller that projects arrays of that dtype only (the quantized cache codes
        float32 keys): every product casts the matrix to its input's dtype, so float32
        inputs give the same numbers bit for bit from a float32 matrix, at half the
        memory; float64 inputs would multiply by the rounded matrix. The srht signs are
        ±1, exact in int8, and every use casts them to the input's dtype (or multiplies
        them into the float64 Hadamard rows, :attr:`matrix`): the same numbers bit for
        bit for either dtype, at 1/8 of the float64 bytes (the row indices select the
        same rows).

        Parameters
        ----------
        dtype : numpy.float32 or numpy.float64

        Returns
        -------
        Sketch
            ``self`` when nothing changes, else a new sketch (``self`` is not modified).

        Examples
        --------
        >>> s = make_sketch("srht", 200, 96, seed=0)
        >>> x = np.random.default_rng(1).standard_normal((5, 96)).astype(np.float32)
        >>> s8 = s.held_as(np.float32)
        >>> s8.signs.dtype, bool(np.array_equal(s8.project(x), s.project(x)))
        (dtype('int8'), True)
        """
        dtype = check_choice(np.dtype(dtype), "dtype", [np.dtype(np.float32), np.dtype(np.float64)])
        changes = {}
        if self.dense is not None and self.dense.dtype != dtype:
            changes["dense"] = self.dense.astype(dtype)
        if self.signs is not None and self.signs.dtype != np.int8:
            changes["signs"] = self.signs.astype(np.int8)
        index = np.min_scalar_type(next_pow2(self.dim) - 1)  # row indices < d_pad
        if self.rows is not None and self.rows.dtype != index:
            changes["rows"] = self.rows.astype(index)
        for a in changes.values():
            a.setflags(write=False)  # as make_sketch leaves its arrays
        return dataclasses.replace(self, **changes) if changes else self

    def describe(self) -> dict[str, Any]:
        """Settings of the sketch (kind, rows, dimension, draws, constant)."""
        return {"sketch": self.kind, "m": self.m, "dim": self.dim, "draws": list(self.draws),
                "scale": self.scale}

    def project(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n m"]:
        """``S x`` for every vector: ``x @ matrix.T``, by the fast transform for ``"srht"``.

        For ``"srht"`` the cost is O(blocks · d_pad log d_pad) per vector (signs, a fast
        Walsh–Hadamard transform per block, row selection) and no matrix product; the
        other kinds (and an srht sketch whose ``draws`` were re-sliced without its
        signs) multiply by ``matrix``. The two ways agree to float rounding (the sums
        are taken in another order).

        Parameters
        ----------
        x : array_like, shape ``(*batch, n, dim)``
            float32 stays float32; ``batch`` broadcasts against ``draws``.

        Returns
        -------
        ndarray, shape ``(*broadcast, n, m)``

        Examples
        --------
        >>> s = make_sketch("srht", 200, 96, seed=0, draws=3)
        >>> x = np.random.default_rng(1).standard_normal((3, 5, 96))
        >>> bool(np.allclose(s.project(x), x @ np.swapaxes(s.matrix, -1, -2)))
        True
        """
        x = as_float_array(x, "x", min_ndim=2)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last dimension {self.dim} (the sketch's dim); "
                             f"received shape {x.shape}")
        return self._project(x)

    def _project(self, x: np.ndarray) -> np.ndarray:
        """`project` without validation."""
        if not self._fast():
            return np.matmul(x, np.swapaxes(self.matrix, -1, -2).astype(x.dtype, copy=False))
        return _srht_project(self.signs, self.rows, self.m, self.dim, x)

    def project_t(self, y: Float[np.ndarray, "*batch n m"]) -> Float[np.ndarray, "*batch n d"]:
        """``Sᵀ y`` for every row ``y`` (length m): ``y @ matrix``, fast for ``"srht"``.

        For ``"srht"``, ``Sᵀ y = Σ_b D_b (H y_b)[:dim]`` (``y_b`` the block's entries, a
        partial block's scattered to its sampled rows; H is symmetric), O(blocks ·
        d_pad log d_pad) per row. For ±1 ``y`` (QJL signs) with m < 2^24 every partial
        sum is an integer, so the result is exact and equals the matrix product's bit
        for bit.

        Parameters
        ----------
        y : array_like, shape ``(*batch, n, m)``

        Returns
        -------
        ndarray, shape ``(*broadcast, n, dim)``, float32 for float32 ``y``

        Examples
        --------
        >>> s = make_sketch("srht", 200, 96, seed=0, draws=3)
        >>> y = np.sign(np.random.default_rng(1).standard_normal((3, 5, 200)))
        >>> bool(np.array_equal(s.project_t(y), y @ s.matrix))
        True
        """
        y = as_float_array(y, "y", min_ndim=2)
        if y.shape[-1] != self.m:
            raise ValueError(f"y must have last dimension {self.m} (the sketch's m); "
                             f"received shape {y.shape}")
        return self._project_t(y)

    def _project_t(self, y: np.ndarray) -> np.ndarray:
        """`project_t` without validation."""
        if not self._fast():
            return np.matmul(y, self.matrix.astype(y.dtype, copy=False))
        return _srht_project_t(self.signs, self.rows, self.m, self.dim, y)


#: Width of the dense stage of an SRHT sketch's fwht (`kvstats.quant.rotation._fwht`):
#: the sketch's sums need not round as the rotation's, and at d = 1024 a width of 64
#: is ~1.2x faster than 128 (one thread).
_SRHT_BLOCK = 64


def _srht_project(signs: np.ndarray, rows: np.ndarray | None, m: int, dim: int,
                  x: np.ndarray) -> np.ndarray:
    """``S x`` of an SRHT sketch from its signs ``(*draws, blocks, dim)`` and rows."""
    d_pad = next_pow2(dim)
    signs = signs.astype(x.dtype, copy=False)
    if signs.shape[-2] == 1 and d_pad == dim:
        y = x[..., None, :] * signs[..., None, :, :]              # one block: (*, n, 1, dim)
    else:
        y = np.zeros(np.broadcast_shapes(x.shape[:-1], signs.shape[:-2] + (1,))
                     + (signs.shape[-2], d_pad), x.dtype)
        np.multiply(x[..., None, :], signs[..., None, :, :], out=y[..., :dim])
    y = _fwht(y, _SRHT_BLOCK)                                     # (H D x) per block
    n_full = m // d_pad
    full = y[..., :n_full, :].reshape(y.shape[:-2] + (n_full * d_pad,))
    if rows is None:
        return full
    idx = np.broadcast_to(rows[..., None, :], y.shape[:-2] + rows.shape[-1:])
    return np.concatenate([full, np.take_along_axis(y[..., -1, :], idx, axis=-1)], -1)


def _srht_project_t(signs: np.ndarray, rows: np.ndarray | None, m: int, dim: int,
                    y: np.ndarray) -> np.ndarray:
    """``Sᵀ y`` of an SRHT sketch from its signs ``(*draws, blocks, dim)`` and rows."""
    d_pad = next_pow2(dim)
    n_full = m // d_pad
    blocks = y[..., : n_full * d_pad].reshape(y.shape[:-1] + (n_full, d_pad))
    if rows is not None:
        lead = np.broadcast_shapes(y.shape[:-1], rows.shape[:-1] + (1,))
        last = np.zeros(lead + (1, d_pad), y.dtype)
        idx = np.broadcast_to(rows[..., None, :], lead + rows.shape[-1:])
        np.put_along_axis(last[..., 0, :], idx, np.broadcast_to(y[..., n_full * d_pad:],
                                                                lead + idx.shape[-1:]), axis=-1)
        blocks = np.concatenate([np.broadcast_to(blocks, lead + blocks.shape[-2:]), last], -2)
    z = _fwht(np.ascontiguousarray(blocks), _SRHT_BLOCK)[..., :dim]  # H y_b per block
    signs = signs.astype(y.dtype, copy=False)[..., None, :, :]
    if np.broadcast_shapes(z.shape, signs.shape) == z.shape:
        np.multiply(z, signs, out=z)  # z is a new array: in place
    else:
        z = z * signs
    return z[..., 0, :] if z.shape[-2] == 1 else z.sum(axis=-2)


def make_sketch(kind: str, m: int, dim: int, seed: SeedLike = 0,
                draws: int | tuple[int, ...] = ()) -> Sketch:
    """Draw a QJL sketch matrix.

    Parameters
    ----------
    kind : {"gaussian", "orthogonal", "srht"}
        ``"gaussian"``: i.i.d. N(0, 1) entries. ``"orthogonal"``: rows of a Haar-random
        orthogonal matrix (QR of a Gaussian matrix with the signs of R's diagonal
        fixed) scaled to norm √dim; for ``m > dim`` independent orthogonal blocks are
        stacked (rows within a block are orthogonal, rows of different blocks
        independent). ``"srht"``: randomized Hadamard, rows ``H[r, :dim]·diag(ε)`` of the
        Sylvester matrix of order d_pad = next_pow2(dim) with random signs ε; blocks of
        d_pad rows with independent signs, a partial last block sampling its rows
        without replacement (rows of norm √dim, orthogonal within a block when dim is a
        power of two).
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
        ``"srht"`` uses the orthogonal constant: its rows are Rademacher vectors, not
        uniform on the sphere, so the estimate is unbiased on average over the pair's
        orientation (exactly), not for every fixed pair (docs/qjl.md, "SRHT": a key
        with |k_j| > Σ_{i≠j}|k_i| gets c·m·‖k‖·sign(k_j)·q_j from every sketch when m is
        a multiple of d_pad, a bias with no variance). Its closed forms
        (`kvstats.theory.qjl_variance`) hold for dim a power of two only.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats import make_sketch
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
    elif kind == "srht":
        signs, rows = _draw_srht(rng, m, dim, draws)
        scale = 1.0 / (m * math.sqrt(dim) * sphere_abs_moment(dim))
        for a in (signs,) + (() if rows is None else (rows,)):
            a.setflags(write=False)
        return Sketch(kind=kind, m=m, dim=dim, draws=draws, dense=None, scale=scale,
                      signs=signs, rows=rows)
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
    return Sketch(kind=kind, m=m, dim=dim, draws=draws, dense=matrix, scale=scale)


def _draw_srht(rng: np.random.Generator, m: int, dim: int, draws: tuple[int, ...]
               ) -> tuple[np.ndarray, np.ndarray | None]:
    """Signs ``(*draws, blocks, dim)`` and partial-block rows of an SRHT sketch.

    Block b's rows are ``H[r, :dim] * signs[b]`` (Sylvester ``H`` of order
    d_pad = next_pow2(dim)); full blocks take every row, a partial last block ``m mod
    d_pad`` rows sampled without replacement. Draw order: all signs, then the rows.
    """
    d_pad = next_pow2(dim)
    n_blocks = -(-m // d_pad)
    signs = np.where(rng.random((*draws, n_blocks, dim)) < 0.5, -1.0, 1.0)
    m_last = m - (n_blocks - 1) * d_pad
    rows = None
    if m_last < d_pad:
        rows = np.argsort(rng.random((*draws, d_pad)), axis=-1)[..., :m_last]
    return signs, rows


def _srht_matrix(signs: np.ndarray, rows: np.ndarray | None, m: int, dim: int) -> np.ndarray:
    """The materialised ``(*draws, m, dim)`` float64 matrix of an SRHT sketch."""
    d_pad = next_pow2(dim)
    draws = signs.shape[:-2]
    h = _hadamard_cached(d_pad, "float64")[:, :dim]
    n_full = m // d_pad
    parts = [(h * signs[..., :n_full, None, :]).reshape(*draws, n_full * d_pad, dim)]
    if rows is not None:
        parts.append(h[rows] * signs[..., -1, None, :])
    matrix = np.concatenate(parts, axis=-2) if len(parts) > 1 else parts[0]
    return np.ascontiguousarray(matrix)


def _check_sketch(sketch: object) -> Sketch:
    if not isinstance(sketch, Sketch):
        raise TypeError(f"sketch must be a Sketch from make_sketch; received {type(sketch).__name__}")
    return sketch
