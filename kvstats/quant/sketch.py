"""QJL sketch matrices: Gaussian, orthogonalised or randomized Hadamard, batched over ``draws``.

A sketch ``S`` (``m × d``) maps a vector ``k`` to the ``m`` signs of ``S k``
(:mod:`kvstats.quant.qjl`); :attr:`Sketch.scale` is the constant ``c`` that makes
``c · ‖k‖ · ⟨S q, sign(S k)⟩`` unbiased for ``⟨q, k⟩``. docs/qjl.md derives it.

The randomized-Hadamard sketch (``"srht"``) is drawn from O(d) random numbers (signs and
sampled rows) and applied by :meth:`Sketch.project` in O(d log d) per vector (a fast
Walsh–Hadamard transform); ``matrix`` is still materialised (O(m·d) memory, no random
d × d draw, no QR) because the coders multiply by it (docs/qjl.md, "Cost").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxtyping import Float, Int

from kvstats._checks import SeedLike, as_float_array, as_generator, check_choice, check_int
from kvstats.quant.rotation import _fwht, _hadamard_cached, next_pow2
from kvstats.theory import sphere_abs_moment

__all__ = ["SKETCHES", "Sketch", "make_sketch"]

SKETCHES = ("gaussian", "orthogonal", "srht")


def _as_draws(draws: object) -> tuple[int, ...]:
    """``draws`` as a tuple of positive ints (an int n means ``(n,)``)."""
    if isinstance(draws, (int, np.integer)) and not isinstance(draws, bool):
        draws = (draws,)
    if not isinstance(draws, (tuple, list)):
        raise TypeError(f"draws must be an int or a tuple of positive ints; received {draws!r}")
    return tuple(check_int(n, "draws", low=1) for n in draws)


@dataclass(frozen=True, eq=False)
class Sketch:
    """A QJL sketch: ``matrix`` of shape ``(*draws, m, dim)`` (float64) and its constant.

    ``scale`` is the constant ``c`` such that ``c·‖k‖·⟨S q, sign(S k)⟩`` estimates
    ``⟨q, k⟩``: unbiased for every ``q, k`` (expectation over the sketch) for the
    Gaussian and orthogonal kinds; for ``"srht"`` unbiased on average over the
    orientation of the pair (docs/qjl.md, "SRHT"). ``signs`` (``(*draws, blocks, dim)``,
    ±1) and ``rows`` (``(*draws, m mod d_pad)`` Hadamard rows of a partial last block, or
    None) are the randomness of an ``"srht"`` sketch (None for the other kinds).
    """

    kind: str
    m: int
    dim: int
    draws: tuple[int, ...]
    matrix: Float[np.ndarray, "*draws m d"]
    scale: float
    signs: Float[np.ndarray, "*draws blocks d"] | None = None
    rows: Int[np.ndarray, "*draws m_last"] | None = None

    def describe(self) -> dict[str, Any]:
        """Settings of the sketch (kind, rows, dimension, draws, constant)."""
        return {"sketch": self.kind, "m": self.m, "dim": self.dim, "draws": list(self.draws),
                "scale": self.scale}

    def project(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n m"]:
        """``S x`` for every vector: ``x @ matrix.T``, by the fast transform for ``"srht"``.

        For ``"srht"`` the cost is O(blocks · d_pad log d_pad) per vector (signs, a fast
        Walsh–Hadamard transform per block, row selection) and no matrix product; the
        other kinds (and an srht sketch whose ``draws`` were re-sliced without its
        signs) multiply by ``matrix``.

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
        if self.signs is None or self.signs.shape[:-2] != self.draws:
            return np.matmul(x, np.swapaxes(self.matrix, -1, -2).astype(x.dtype, copy=False))
        d_pad = next_pow2(self.dim)
        signs = self.signs.astype(x.dtype, copy=False)
        y = x[..., None, :] * signs[..., None, :, :]              # (*, n, blocks, dim)
        if d_pad > self.dim:
            y = np.concatenate([y, np.zeros(y.shape[:-1] + (d_pad - self.dim,), y.dtype)], -1)
        y = _fwht(np.ascontiguousarray(y))                        # (H D x) per block
        n_full = self.m // d_pad
        out = [y[..., :n_full, :].reshape(y.shape[:-2] + (n_full * d_pad,))]
        if self.rows is not None:
            idx = np.broadcast_to(self.rows[..., None, :], y.shape[:-2] + self.rows.shape[-1:])
            out.append(np.take_along_axis(y[..., -1, :], idx, axis=-1))
        return np.concatenate(out, -1) if len(out) > 1 else out[0]


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
        orientation (exactly), not for every fixed pair (docs/qjl.md, "SRHT").

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
    elif kind == "srht":
        matrix, signs, rows = _draw_srht(rng, m, dim, draws)
        scale = 1.0 / (m * math.sqrt(dim) * sphere_abs_moment(dim))
        for a in (matrix, signs) + (() if rows is None else (rows,)):
            a.setflags(write=False)
        return Sketch(kind=kind, m=m, dim=dim, draws=draws, matrix=matrix, scale=scale,
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
    return Sketch(kind=kind, m=m, dim=dim, draws=draws, matrix=matrix, scale=scale)


def _draw_srht(rng: np.random.Generator, m: int, dim: int, draws: tuple[int, ...]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Signs, partial-block rows and the materialised matrix of an SRHT sketch.

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
    h = _hadamard_cached(d_pad, "float64")[:, :dim]
    n_full = m // d_pad
    parts = [(h * signs[..., :n_full, None, :]).reshape(*draws, n_full * d_pad, dim)]
    if rows is not None:
        parts.append(h[rows] * signs[..., -1, None, :])
    matrix = np.concatenate(parts, axis=-2) if len(parts) > 1 else parts[0]
    return np.ascontiguousarray(matrix), signs, rows


def _check_sketch(sketch: object) -> Sketch:
    if not isinstance(sketch, Sketch):
        raise TypeError(f"sketch must be a Sketch from make_sketch; received {type(sketch).__name__}")
    return sketch
