"""QJL sketch matrices: Gaussian or orthogonalised, batched over ``draws``.

A sketch ``S`` (``m × d``) maps a vector ``k`` to the ``m`` signs of ``S k``
(:mod:`kvstats.quant.qjl`); :attr:`Sketch.scale` is the constant ``c`` that makes
``c · ‖k‖ · ⟨S q, sign(S k)⟩`` unbiased for ``⟨q, k⟩``. docs/qjl.md derives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxtyping import Float

from kvstats._checks import SeedLike, as_generator, check_choice, check_int
from kvstats.theory import sphere_abs_moment

__all__ = ["SKETCHES", "Sketch", "make_sketch"]

SKETCHES = ("gaussian", "orthogonal")


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

    ``scale`` is the exact constant ``c`` such that ``c·‖k‖·⟨S q, sign(S k)⟩`` is an
    unbiased estimator of ``⟨q, k⟩`` for every ``q, k`` (expectation over the sketch).
    """

    kind: str
    m: int
    dim: int
    draws: tuple[int, ...]
    matrix: Float[np.ndarray, "*draws m d"]
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


def _check_sketch(sketch: object) -> Sketch:
    if not isinstance(sketch, Sketch):
        raise TypeError(f"sketch must be a Sketch from make_sketch; received {type(sketch).__name__}")
    return sketch
