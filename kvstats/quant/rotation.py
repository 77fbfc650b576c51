"""Random orthogonal rotations applied before scalar quantization.

A rotation spreads a vector's energy over all coordinates so that, after it, each
coordinate of a unit vector is distributed (approximately for the randomized Hadamard
transform, exactly for a Haar rotation) like one coordinate of a uniform point on the
sphere. Three kinds are offered (``ROTATIONS``):

``"hadamard"``
    Randomized Walsh--Hadamard transform ``R x = H D pad(x) / sqrt(d_pad)``: ``D`` is a
    diagonal of independent random signs, ``H`` the Sylvester Hadamard matrix of order
    ``d_pad``, the next power of two ``>= d``; ``pad`` appends ``d_pad - d`` zeros. The
    map is an isometry from R^d into R^{d_pad} computed in O(d log d)
    (:mod:`kvstats.quant.walsh_hadamard`); a scheme that codes the rotated vector stores
    ``d_pad`` coordinates (bit accounting counts ``d_pad / d`` per input coordinate). For
    a uniform unit ``u`` in R^d, a coordinate of ``R u`` is exactly ``sqrt(d/d_pad)``
    times a sphere coordinate of dimension ``d``
    (variance ``1/d_pad``, like the sphere law of dimension ``d_pad`` it is coded with).
    A single round is not a uniform rotation: a one-hot input gives coordinates exactly
    ``+-1/sqrt(d_pad)``, and inputs dominated by a few coordinates (heavy tails) give
    lighter-than-sphere tails; the mean 0 and variance ``1/d_pad`` hold for every input.
``"haar"``
    A Haar-distributed orthogonal matrix (QR of a Gaussian matrix with the sign fix of
    Mezzadri, 2007), O(d^2) per vector. ``d_pad = d``.
``"identity"``
    No rotation. ``d_pad = d``.

Every rotation takes ``draws``, the batch shape of independent draws of its randomness
(see docs/internals.md): its parameters carry ``draws`` as leading axes and inputs of
shape ``(*batch, n, d)`` broadcast ``batch`` against ``draws``.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np

from kvstats._checks import (SeedLike, _describe, as_float_array, as_generator, check_choice,
                             check_int)
# the transform has its own module; its names are read from here too (sketch, qjl, mse, prod)
from kvstats.quant.walsh_hadamard import (_BLAS_ROWS, _BUTTERFLY_CONTIGUOUS, _FWHT_BLOCK,  # noqa: F401
                                          _FWHT_PIECE, _butterfly_rows, _fwht, _fwht_piece,
                                          _fwht_rows, _hadamard_cached, fwht, hadamard, next_pow2)

__all__ = ["ROTATIONS", "Rotation", "fwht", "hadamard", "make_rotation", "normalize_draws",
           "next_pow2"]

ROTATIONS = ("hadamard", "haar", "identity")


def normalize_draws(draws: Any, name: str = "draws") -> tuple[int, ...]:
    """Return ``draws`` (an int or a tuple of ints, each >= 1) as a tuple.

    Parameters
    ----------
    draws : int or tuple of int
        Batch shape of independent draws of a random component; ``()`` means one draw
        shared by every input.
    name : str
        Argument name used in error messages.

    Returns
    -------
    tuple of int

    Examples
    --------
    >>> normalize_draws(3), normalize_draws(()), normalize_draws((2, 4))
    ((3,), (), (2, 4))
    """
    if isinstance(draws, Integral) and not isinstance(draws, bool):
        draws = (draws,)
    if not isinstance(draws, tuple | list):
        raise TypeError(f"{name} must be an int or a tuple of ints; received {_describe(draws)}")
    return tuple(check_int(n, f"{name}[{i}]", low=1) for i, n in enumerate(draws))


def _representable(out: np.ndarray, x: np.ndarray, name: str) -> np.ndarray:
    """``out`` (the rotation of finite ``x``) if finite, else the ValueError `fwht` gives.

    A rotation keeps norms, so its image overflows only where ``x``'s norm nears the
    dtype's largest value; min and max find an inf or NaN without a pass over ``x``."""
    if out.size and not (np.isfinite(out.min()) and np.isfinite(out.max())):
        top = np.finfo(out.dtype).max
        fix = "pass float64 values" if out.dtype == np.float32 else f"rescale {name}"
        raise ValueError(f"{name} must have vector norms within the {out.dtype} range ({top:.4g}) "
                         f"for its rotation to be representable (rotated coordinates reach the "
                         f"norm); received max |{name}| = {float(np.abs(x).max()):.4g} at d = "
                         f"{x.shape[-1]}, whose rotation overflows; {fix}")
    return out


@dataclass(frozen=True, eq=False)
class Rotation:
    """A (batch of independent) random orthogonal rotation(s); build with `make_rotation`.

    Attributes
    ----------
    kind : str
        One of ``ROTATIONS``.
    dim : int
        Input dimension ``d``.
    out_dim : int
        Output dimension ``d_pad`` (next power of two for ``"hadamard"``, else ``d``).
    draws : tuple of int
        Batch shape of independent draws; the parameters carry it as leading axes.
    signs : numpy.ndarray or None
        ``(*draws, out_dim)`` +-1 signs (``"hadamard"`` only): float64, int8 in a rotation
        from `held_as` (the same values, every use converts them to float).
    orthogonal : numpy.ndarray or None
        ``(*draws, d, d)`` float64 orthogonal matrices (``"haar"`` only; float32 in a
        rotation from ``held_as(np.float32)``).
    """

    kind: str
    dim: int
    out_dim: int
    draws: tuple[int, ...] = ()
    signs: np.ndarray | None = field(default=None, repr=False)
    orthogonal: np.ndarray | None = field(default=None, repr=False)

    # -- helpers -------------------------------------------------------------------
    def _param(self, p: np.ndarray, x: np.ndarray, trailing: int) -> np.ndarray:
        """Cast a parameter to x's dtype; for elementwise parameters (``trailing`` = 1 axis
        after ``draws``) insert the token axis so that ``(*batch, n, d)`` broadcasts."""
        p = p.astype(x.dtype, copy=False)
        if self.draws:
            if x.ndim < 2:
                raise ValueError(f"x must have shape (*batch, n, {self.dim}) when draws="
                                 f"{self.draws}; received {_describe(x)}")
            if trailing:
                p = np.expand_dims(p, axis=p.ndim - trailing)
        return p

    def _check_input(self, x: Any, name: str, width: int) -> np.ndarray:
        x = as_float_array(x, name, min_ndim=1)
        if x.shape[-1] != width:
            raise ValueError(f"{name} must have last axis of length {width}; received {_describe(x)}")
        return x

    # -- public --------------------------------------------------------------------
    def apply(self, x: Any) -> np.ndarray:
        """Rotate ``x``: ``(..., dim)`` -> ``(..., out_dim)``.

        Parameters
        ----------
        x : array_like, shape (*batch, n, dim) (or (..., dim) when ``draws == ()``)
            ``batch`` broadcasts against ``draws``.

        Returns
        -------
        numpy.ndarray
            float32 for float32 input, else float64.

        Raises
        ------
        ValueError
            If a rotated vector overflows the dtype (its norm near or beyond the largest
            float32/float64), as `fwht` does; rotate float32 data as float64 then.

        Examples
        --------
        >>> r = make_rotation("hadamard", 3, seed=0)
        >>> y = r.apply([1.0, 2.0, 2.0])
        >>> y.shape, round(float(np.linalg.norm(y)), 12)
        ((4,), 3.0)
        """
        x = self._check_input(x, "x", self.dim)
        with np.errstate(over="ignore", invalid="ignore"):      # refused just below
            return _representable(self._apply(x), x, "x")

    def _apply(self, x: np.ndarray) -> np.ndarray:
        """`apply` without validation (``x`` float32/float64 with last axis ``dim``)."""
        if self.kind == "identity":
            if self.draws:
                if x.ndim < 2:
                    raise ValueError(f"x must have shape (*batch, n, {self.dim}) when draws="
                                     f"{self.draws}; received {_describe(x)}")
                shape = np.broadcast_shapes(x.shape, self.draws + (1, x.shape[-1]))
                return np.broadcast_to(x, shape).copy()
            return x.copy()
        if self.kind == "haar":
            q = self._param(self.orthogonal, x, 0)  # (*draws, d, d); matmul broadcasts
            return np.matmul(x, np.swapaxes(q, -1, -2))
        # the 1/sqrt(d_pad) normalisation is folded into the signs (one pass less)
        s = self._param(self.signs / np.sqrt(self.out_dim), x, 1)
        if self.out_dim != self.dim:
            pad = np.zeros(x.shape[:-1] + (self.out_dim,), dtype=x.dtype)
            pad[..., : self.dim] = x
            x = pad
        return _fwht(x * s)

    def inverse(self, y: Any) -> np.ndarray:
        """Undo `apply`: ``(..., out_dim)`` -> ``(..., dim)`` (the transpose map).

        For a padded Hadamard rotation this is ``R^T``: it drops the padded coordinates
        after the inverse transform, so ``inverse(apply(x)) == x`` up to rounding.

        Parameters
        ----------
        y : array_like, shape (*batch, n, out_dim)

        Returns
        -------
        numpy.ndarray
            float32 for float32 input, else float64.

        Raises
        ------
        ValueError
            If the result overflows the dtype, as in `apply`.

        Examples
        --------
        >>> r = make_rotation("hadamard", 6, seed=1)
        >>> x = np.arange(6.0)
        >>> bool(np.allclose(r.inverse(r.apply(x)), x))
        True
        """
        y = self._check_input(y, "y", self.out_dim)
        with np.errstate(over="ignore", invalid="ignore"):      # refused just below
            return _representable(self._inverse(y), y, "y")

    def _inverse(self, y: np.ndarray) -> np.ndarray:
        """`inverse` without validation (``y`` float32/float64 with last axis ``out_dim``)."""
        if self.kind == "identity":
            return self._apply(y)
        if self.kind == "haar":
            return np.matmul(y, self._param(self.orthogonal, y, 0))
        s = self._param(self.signs[..., : self.dim] / np.sqrt(self.out_dim), y, 1)
        x = _fwht(y)
        if self.out_dim != self.dim:
            x = x[..., : self.dim]
        if x.shape == np.broadcast_shapes(x.shape, s.shape) and x.flags.c_contiguous:
            x *= s  # in place: no new array
            return x
        return x * s  # y shared by all draws (broadcast), or a padded slice

    def held_as(self, dtype: Any) -> Rotation:
        """This rotation with its Haar matrices held in ``dtype`` (float32 or float64) and
        its Hadamard signs in int8.

        For a caller that rotates arrays of that dtype only (the quantized cache codes
        float32): `apply` and `inverse` cast the matrix to their input's dtype, which
        gives the values and layout of a matrix held in that dtype, so float32 inputs
        rotate to the same numbers bit for bit at half the memory of float64. Float64
        inputs would then multiply by the rounded matrix. The Hadamard signs are +-1,
        exact in int8, and every use divides them by the float64 ``sqrt(d_pad)`` first
        (the normalisation folded into them), which gives the float64 values of float64
        signs: the same numbers bit for bit for inputs of either dtype, at 1/8 the
        memory. The identity holds nothing.

        Parameters
        ----------
        dtype : numpy.float32 or numpy.float64

        Returns
        -------
        Rotation
            ``self`` when nothing changes, else a new rotation (``self`` is not modified).

        Examples
        --------
        >>> r = make_rotation("haar", 8, seed=0, draws=2)
        >>> x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
        >>> r32 = r.held_as(np.float32)
        >>> r32.orthogonal.dtype, bool(np.array_equal(r32.apply(x), r.apply(x)))
        (dtype('float32'), True)
        >>> h = make_rotation("hadamard", 96, seed=0)
        >>> h8, y = h.held_as(np.float32), np.linspace(-1, 1, 96, dtype=np.float32)
        >>> h8.signs.dtype, bool(np.array_equal(h8.apply(y), h.apply(y)))
        (dtype('int8'), True)
        """
        dtype = check_choice(np.dtype(dtype), "dtype", [np.dtype(np.float32), np.dtype(np.float64)])
        changes = {}
        if self.orthogonal is not None and self.orthogonal.dtype != dtype:
            changes["orthogonal"] = self.orthogonal.astype(dtype)
        if self.signs is not None and self.signs.dtype != np.int8:
            changes["signs"] = self.signs.astype(np.int8)
        return dataclasses.replace(self, **changes) if changes else self

    def matrix(self) -> np.ndarray:
        """Dense matrix of the map, ``(*draws, out_dim, dim)``, float64 (a Haar rotation's
        in the dtype it is held in, see `held_as`): ``apply(x) == M @ x``.

        Examples
        --------
        >>> m = make_rotation("hadamard", 4, seed=0).matrix()
        >>> bool(np.allclose(m @ m.T, np.eye(4)))
        True
        """
        if self.kind == "identity":
            return np.broadcast_to(np.eye(self.dim), self.draws + (self.dim, self.dim)).copy()
        if self.kind == "haar":
            return self.orthogonal.copy()
        h = hadamard(self.out_dim)[:, : self.dim]
        return h * self.signs[..., None, : self.dim] / np.sqrt(self.out_dim)

    def _flat(self, batch: tuple[int, ...]) -> Rotation:
        """This rotation with its draws broadcast to ``batch`` and flattened to one axis
        (``(prod(batch),)``): draw ``i`` rotates row ``i`` of an input flattened the same
        way. ``batch`` must be the broadcast of some input batch with ``draws``."""
        size = (int(np.prod(batch)),)

        def flat(p: np.ndarray | None, trailing: int) -> np.ndarray | None:
            if p is None:
                return None
            tail = p.shape[p.ndim - trailing:]
            return np.broadcast_to(p, batch + tail).reshape(size + tail)

        return Rotation(self.kind, self.dim, self.out_dim, size, flat(self.signs, 1),
                        flat(self.orthogonal, 2))

    def _take(self, rows: slice) -> Rotation:
        """Draws ``rows`` of a rotation with one draw axis (views of the parameters)."""
        signs = None if self.signs is None else self.signs[rows]
        orth = None if self.orthogonal is None else self.orthogonal[rows]
        n = len(range(*rows.indices(self.draws[0])))
        return Rotation(self.kind, self.dim, self.out_dim, (n,), signs, orth)

    def draw(self, index: Any) -> "Rotation":
        """The rotation of one draw (``index`` into ``draws``), with ``draws=()``.

        Used as the plain reference for the batched path.

        Examples
        --------
        >>> r = make_rotation("hadamard", 8, seed=0, draws=3)
        >>> bool(np.array_equal(r.draw(1).signs, r.signs[1]))
        True
        """
        if not self.draws:
            raise ValueError("draw() needs a rotation with draws != (); received draws=()")
        if isinstance(index, Integral) and not isinstance(index, bool):
            index = np.unravel_index(check_int(index, "index", low=0,
                                               high=int(np.prod(self.draws)) - 1), self.draws)
        if not isinstance(index, tuple) or len(index) != len(self.draws):
            raise ValueError(f"index must be an int or a tuple of {len(self.draws)} ints; "
                             f"received {_describe(index)}")
        index = tuple(check_int(i, f"index[{k}]", low=0, high=n - 1)
                      for k, (i, n) in enumerate(zip(index, self.draws)))
        return Rotation(self.kind, self.dim, self.out_dim, (),
                        None if self.signs is None else self.signs[index].copy(),
                        None if self.orthogonal is None else self.orthogonal[index].copy())


def make_rotation(kind: str, dim: int, seed: SeedLike = 0, draws: Any = ()) -> Rotation:
    """Draw a random rotation.

    Parameters
    ----------
    kind : {"hadamard", "haar", "identity"}
        See the module docstring.
    dim : int
        Input dimension ``d >= 1``.
    seed : int, SeedSequence, Generator or None
        Source of randomness; same seed and draws give bit-identical parameters.
    draws : int or tuple of int
        Batch shape of independent draws (default ``()``: one rotation for everything).

    Returns
    -------
    Rotation

    Examples
    --------
    >>> from kvstats import make_rotation
    >>> r = make_rotation("hadamard", 96, seed=0, draws=5)
    >>> r.out_dim, r.signs.shape
    (128, (5, 128))
    >>> make_rotation("haar", 4, seed=0).matrix().shape
    (4, 4)
    """
    kind = check_choice(kind, "kind", ROTATIONS)
    dim = check_int(dim, "dim", low=1)
    draws = normalize_draws(draws)
    rng = as_generator(seed)
    if kind == "identity":
        return Rotation(kind, dim, dim, draws)
    if kind == "hadamard":
        d_pad = next_pow2(dim)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=draws + (d_pad,))
        return Rotation(kind, dim, d_pad, draws, signs=signs)
    g = rng.standard_normal(draws + (dim, dim))
    q, r = np.linalg.qr(g)
    # Mezzadri (2007): multiply column j by sign(R_jj) so the distribution is Haar
    diag = np.diagonal(r, axis1=-2, axis2=-1)
    q = q * np.where(diag < 0, -1.0, 1.0)[..., None, :]
    return Rotation(kind, dim, dim, draws, orthogonal=q)
