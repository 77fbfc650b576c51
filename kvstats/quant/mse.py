"""TurboQuant-mse vector quantizer (Zandieh et al., 2025, Algorithm 1).

A vector ``x`` in R^d is stored as its norm ``||x||`` (float16 by default) and the
``b``-bit Lloyd--Max codes of the coordinates of the rotated unit vector
``y = R (x / ||x||)`` in R^{d_pad}; each coordinate of ``y`` follows (exactly for a Haar
rotation, approximately for the randomized Hadamard transform) the law of one
coordinate of a uniform point on S^{d_pad - 1}, for which the codebook
``lloyd_max_codebook(b, "beta", dim=d_pad)`` is optimal. Decoding maps codes to
centroids, applies ``R^T`` and multiplies by the stored norm:
``x_hat = ||x|| R^T c(codes)``. The expected squared error of a unit vector is then
``d_pad * mse_beta(b, d_pad)`` (= the codebook's per-coordinate MSE times the number of
coded coordinates; exact for Haar, checked statistically for Hadamard in the tests) when
``d = d_pad``; a padded Hadamard rotation (``d < d_pad``) has about ``d/d_pad`` of it,
because ``R^T`` keeps only the part of the coded error in the image of R (docs/theory.md).

Stored bits per vector: ``b * d_pad`` for the codes (``d_pad`` is the next power of two
for a Hadamard rotation of a ``d`` that is not one) plus 16 (or 32) for the norm.

Every path works in cache-sized chunks (``MSEQuantizer._plan``), bit-identical to one
pass over the whole batch (docs/internals.md, mse.py). The chunk plan stays with the
quantizer: `ProdQuantizer` runs its residual in the same chunks through the private
helpers here. What a chunk computes (centroid gathers, the fused piece pipeline) is in
`kvstats.quant.mse_kernels`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from jaxtyping import Float
from numpy.typing import ArrayLike, DTypeLike

from kvstats._checks import SeedLike, _describe, as_float_array, check_int
from kvstats.quant.coder import (_check_norms_fit, as_norm_dtype, check_norm_range, float32_limits,
                                 norm_limits)
from kvstats.quant.codebook import Codebook, lloyd_max_codebook
from kvstats.quant.mse_kernels import _centroids_of, _centroids_of_packed, _roundtrip_pieces
from kvstats.quant.packing import pack_codes, packed_size
from kvstats.quant.rotation import _BLAS_ROWS, ROTATIONS, Rotation, _fwht_rows, make_rotation, normalize_draws

if TYPE_CHECKING:
    from kvstats.quant.export import SideExport

__all__ = ["MSECodes", "MSEQuantizer", "NORM_DTYPES"]

NORM_DTYPES = (np.float16, np.float32, np.float64)
_CHUNK_VALUES = 1 << 16  # coded values per cache-sized chunk (about; see _plan)


@dataclass(frozen=True, eq=False)
class MSECodes:
    """Codes of `MSEQuantizer.encode`.

    Attributes
    ----------
    codes : numpy.ndarray
        uint8 ``(*shape, ceil(n_coords * bits / 8))``: the packed ``bits``-bit codes of
        the ``n_coords`` rotated coordinates of each vector (see `pack_codes`).
    norms : numpy.ndarray
        ``(*shape,)`` in the quantizer's ``norm_dtype``.
    bits : int
    n_coords : int
        Coded coordinates per vector (``d_pad``).
    dtype : numpy.dtype
        Float dtype of the encoded input; `MSEQuantizer.decode` returns it.
    """

    codes: np.ndarray
    norms: np.ndarray
    bits: int
    n_coords: int
    dtype: np.dtype = np.dtype(np.float64)

    @property
    def nbytes(self) -> int:
        """Bytes actually stored (packed codes plus norms)."""
        return int(self.codes.nbytes + self.norms.nbytes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the batch of encoded vectors (without the feature axis)."""
        return self.norms.shape


def _check_out(out: object, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``out`` for a result of ``shape`` in ``x.dtype`` (a new array when None)."""
    if out is None:
        return np.empty(shape, dtype=x.dtype)
    if (not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != x.dtype
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError(f"out must be a writeable C-contiguous array of shape {shape} and "
                         f"dtype {x.dtype}; received {_describe(out)}")
    if np.may_share_memory(out, x):
        raise ValueError("out must not overlap x (x is read while out is written); received "
                         "an out that may share memory with x")
    return out


def _row_norms(x: np.ndarray) -> np.ndarray:
    """float64 norms of the rows of ``x`` as the coder stores them: squares that overflowed
    or underflowed ``x``'s dtype are recomputed from the row scaled by its largest magnitude
    (NaN or inf where ``x`` is not finite)."""
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.einsum("...i,...i->...", x, x)).astype(np.float64)
    bad = ~np.isfinite(norms)
    tiny = norms == 0  # a zero vector, or squares that underflowed (e.g. float32 below 1e-23)
    if tiny.any():
        bad[tiny] = np.any(x[tiny] != 0, axis=-1)
    if bad.any():  # squares overflowed or underflowed (rescale those rows), or x is not finite
        big = x[bad].astype(np.float64)
        scale = np.max(np.abs(big), axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            norms[bad] = scale * np.sqrt(np.sum((big / scale[:, None]) ** 2, axis=-1))
    return norms


class MSEQuantizer:
    """TurboQuant-mse: norm + Lloyd--Max codes of the rotated unit vector.

    Parameters
    ----------
    dim : int
        Vector dimension ``d >= 2``.
    bits : int
        Bits per coded coordinate, 1..8.
    rotation : {"hadamard", "haar", "identity"} or Rotation
        Rotation kind (drawn from ``seed`` with ``draws``), or a ready `Rotation` of
        input dimension ``dim`` (its own ``draws`` are used).
    seed : int, SeedSequence, Generator or None
        Randomness of the rotation; same seed and draws give bit-identical codes.
    draws : int or tuple of int
        Batch shape of independent rotations (see docs/internals.md): inputs
        ``(*batch, n, dim)`` broadcast ``batch`` against ``draws``.
    norm_dtype : {numpy.float16, numpy.float32, numpy.float64}
        Storage type of the norms. float16 (the default, 16 bits) overflows above 65504:
        such inputs raise a ValueError that suggests float32; norms below 6.1e-5 are float16
        subnormals (less relative precision) and below ~3e-8 round to 0 (the vector then
        decodes to 0). Vectors decode in their own dtype, so a float32 vector's norm must
        also stay below float32's largest value (else a ValueError: pass float64).

    Attributes
    ----------
    rotation : Rotation
    codebook : Codebook
        ``lloyd_max_codebook(bits, "beta", dim=rotation.out_dim)``.
    dim, bits, draws, norm_dtype

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats import MSEQuantizer
    >>> q = MSEQuantizer(128, 4, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((1000, 128))
    >>> c = q.encode(x)
    >>> c.codes.shape, c.codes.dtype, c.norms.dtype
    ((1000, 64), dtype('uint8'), dtype('float16'))
    >>> x_hat = q.decode(c)
    >>> err = np.sum((x - x_hat) ** 2, -1) / np.sum(x ** 2, -1)
    >>> bool(abs(err.mean() / (128 * q.codebook.mse) - 1) < 0.05)
    True
    >>> q.bits_per_vector()
    {'codes': 512, 'norm': 16}
    """

    #: ``roundtrip(x, out=...)`` writes into ``out`` (the sweep reuses its arrays; an
    #: optional capability of the coder protocol, False where absent).
    roundtrip_writes_out = True

    def __init__(self, dim: int, bits: int, rotation: str | Rotation = "hadamard",
                 seed: SeedLike = 0, draws: int | tuple[int, ...] = (),
                 norm_dtype: DTypeLike = np.float16, name: str = "x"):
        self.dim = check_int(dim, "dim", low=2)
        self.name = name  # what the vectors are ("K", "V"), named in norm warnings and errors
        self.bits = check_int(bits, "bits", low=1, high=8)
        if isinstance(rotation, Rotation):
            if normalize_draws(draws) != ():
                raise ValueError(f"draws must be () when rotation is a Rotation (its own draws "
                                 f"{rotation.draws} are used); received {draws!r}")
            if rotation.dim != self.dim:
                raise ValueError(f"rotation must have dim {self.dim}; received a Rotation with "
                                 f"dim {rotation.dim}")
            self.rotation = rotation
        else:
            if not isinstance(rotation, str) or rotation not in ROTATIONS:
                raise ValueError(f"rotation must be one of {list(ROTATIONS)} or a Rotation; "
                                 f"received {_describe(rotation)}")
            kind = rotation
            self.rotation = make_rotation(kind, self.dim, seed=seed, draws=normalize_draws(draws))
        self.draws = self.rotation.draws
        self.norm_dtype = as_norm_dtype(norm_dtype)
        self.codebook: Codebook = lloyd_max_codebook(self.bits, "beta", dim=self.rotation.out_dim)

    def hold_matrices_as(self, dtype: DTypeLike) -> None:
        """Hold the rotation's dense matrices (Haar) in ``dtype`` from now on (`Rotation.held_as`).

        For a caller that codes and decodes arrays of that dtype only (the quantized
        cache: float32): every product casts the matrix to its input's dtype, so float32
        inputs give the same codes and decodes bit for bit, at half the memory of
        float64. Float64 inputs would then multiply by the rounded matrix. A Hadamard
        rotation's +-1 signs are held in int8 (exact: the same codes and decodes for
        either dtype, at 1/8 the memory); the identity holds nothing.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import MSEQuantizer
        >>> q = MSEQuantizer(64, 3, rotation="haar", seed=0)
        >>> x = np.random.default_rng(0).standard_normal((40, 64)).astype(np.float32)
        >>> before = q.encode(x)
        >>> q.hold_matrices_as(np.float32)
        >>> q.rotation.orthogonal.dtype, bool(np.array_equal(q.encode(x).codes, before.codes))
        (dtype('float32'), True)
        """
        self.rotation = self.rotation.held_as(dtype)

    @property
    def n_coords(self) -> int:
        """Coded coordinates per vector (``rotation.out_dim``)."""
        return self.rotation.out_dim

    def _check_x(self, x: ArrayLike) -> np.ndarray:
        """``x`` as a float array with last axis ``dim`` (and a token axis for draws).

        Finiteness is not checked here: `_norms` sees every value anyway and reports
        NaN/inf as `as_float_array` would, which saves a pass over ``x``."""
        x = as_float_array(x, "x", min_ndim=1, allow_nonfinite=True)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last axis of length {self.dim}; received {_describe(x)}")
        if self.draws:
            if x.ndim < 2:
                raise ValueError(f"x must have shape (*batch, n, {self.dim}) when draws="
                                 f"{self.draws}; received {_describe(x)}")
            try:
                np.broadcast_shapes(x.shape[:-2], self.draws)
            except ValueError as exc:
                batch = x.shape[:-2]
                fit = batch[0] if len(batch) == 1 else batch
                raise ValueError(f"x's batch axes {batch} must broadcast against the "
                                 f"draws {self.draws}; received {_describe(x)}; build the scheme "
                                 f"(or quantizer) with draws={fit} (one draw per trial), or "
                                 "draws=() for one draw shared by all") from exc
        return x

    def _norms(self, x: np.ndarray, whole: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """float64 norms of the rows of a chunk ``x`` of ``whole``, their inverses in
        ``x.dtype`` (0 for 0) and ``x`` itself, so that ``x * inv[..., None]`` are the unit
        vectors. NaN/inf in ``x``, a norm past ``x.dtype``'s range (x decodes in it) and
        float16 overflow raise ValueErrors.

        A row of norm below ``2 / finfo(x.dtype).max`` (subnormal entries) has an inverse
        that may overflow ``x.dtype``: that row comes back times ``2**64`` and its inverse
        over ``2**64`` (powers of two: exact), in a copy of ``x``."""
        norms = _row_norms(x)
        if not np.isfinite(norms).all():
            as_float_array(whole, "x")  # raises its "x must be finite" error
        _check_norms_fit(norms, x.dtype, self.name, "norm times direction")
        top = float(np.finfo(x.dtype).max)
        if self.norm_dtype != np.float64:  # overflow: an error; underflow: a warning
            check_norm_range(norms, self.norm_dtype, self.name)
        tiny = (norms > 0) & (norms < 2.0 / top)  # 1 / norm may overflow x.dtype
        inv = np.zeros_like(norms)
        np.divide(1.0, norms, out=inv, where=(norms > 0) & ~tiny)  # zero vectors stay zero
        if tiny.any():
            x = x.copy()
            x[tiny] = np.ldexp(x[tiny], 64)
            inv[tiny] = np.ldexp(1.0, -64) / norms[tiny]
        return norms, inv.astype(x.dtype), x

    def storable_limits(self, x: Float[np.ndarray, "*batch d"]) -> list[tuple[str, float, float]]:
        """float32, the norms' ``norm_dtype`` and ``x``'s dtype, which decoding multiplies
        the norms in (the coder protocol's ranges, :mod:`kvstats.quant.coder`; the norms
        as `encode` computes them).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.quant.mse import MSEQuantizer
        >>> MSEQuantizer(4, 2).storable_limits(np.array([[3.0, 4.0, 0.0, 0.0]], dtype=np.float32))[1:]
        [('vector norms (stored as float16)', 65504.0, 5.0), ('vector norms (decoded in float32)', 3.4028234663852886e+38, 5.0)]
        """
        x = self._check_x(x)
        if not x.size:
            return []
        norms = _row_norms(x)
        return (float32_limits(x) + norm_limits(norms, self.norm_dtype)
                + [(f"vector norms (decoded in {x.dtype})", float(np.finfo(x.dtype).max), float(norms.max()))])

    def _shape(self, lead: tuple[int, ...]) -> tuple[int, ...]:
        """Batch shape of the output (feature axis excluded) for inputs ``(*lead, dim)``."""
        if not self.draws:
            return lead
        return np.broadcast_shapes(lead[:-1], self.draws) + lead[-1:]

    def _plan(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], list[tuple[slice, Rotation]]]:
        """Cache-sized chunks of an output of batch shape ``shape`` (see `_shape`).

        Returns ``(flat, [(rows, rotation), ...])``: arrays are processed as ``(*flat,
        ...)``, ``(M,)`` rows for one rotation or, with draws, ``(G, n)`` (the batch
        broadcast against the draws and flattened, see `_flat`); each chunk is a slice
        of the first axis with the rotation of its rows. With draws a chunk holds whole
        draws (a draw's rows share its rotation), about ``_CHUNK_VALUES`` coded values,
        and for the Hadamard rotation a multiple of ``_BLAS_ROWS`` rows of the fwht's
        dense stage, so the results equal one pass over the whole batch bit for bit
        (`kvstats.quant.rotation._fwht_rows`). encode, decode and roundtrip use the same
        chunks.
        """
        if not self.draws:
            m = int(np.prod(shape))
            rows = max(1, _CHUNK_VALUES // self.n_coords)
            return (m,), [(slice(a, a + rows), self.rotation) for a in range(0, m, rows)]
        n = shape[-1]
        flat = (int(np.prod(shape[:-1])), n)
        g = 1
        if self.rotation.kind == "hadamard":
            g = _BLAS_ROWS // math.gcd(n * _fwht_rows(self.n_coords), _BLAS_ROWS)
        g *= max(1, _CHUNK_VALUES // (g * n * self.n_coords))
        rot = self.rotation._flat(shape[:-1])
        return flat, [(sl, rot._take(sl)) for sl in
                      (slice(a, a + g) for a in range(0, flat[0], g))]

    @staticmethod
    def _flat(a: np.ndarray, shape: tuple[int, ...], flat: tuple[int, ...]) -> np.ndarray:
        """``a`` ``(*lead, k)`` broadcast to ``(*shape, k)`` and reshaped to ``(*flat, k)``
        (a view unless a broadcast batch must be copied)."""
        return np.broadcast_to(a, shape + a.shape[-1:]).reshape(flat + a.shape[-1:])

    def _codes(self, u: np.ndarray, rotation: Rotation | None = None) -> np.ndarray:
        """Unpacked uint8 codes ``(..., n_coords)`` of unit vectors ``u`` ``(..., dim)``
        (``u`` already broadcast against ``rotation``'s draws, as `_plan` gives them)."""
        rotation = self.rotation if rotation is None else rotation
        if rotation.kind == "identity":
            return self.codebook._encode(u)  # the rotation would only copy u
        return self.codebook._encode(rotation._apply(u))

    def _unrotate(self, y: np.ndarray, norms: np.ndarray, out: np.ndarray | None = None,
                  rotation: Rotation | None = None) -> np.ndarray:
        """``norms * R^T y`` for centroids ``y`` and stored norms already in ``y.dtype``.

        ``y`` must be a new array of the output's full batch shape: it may be scaled in
        place."""
        rotation = self.rotation if rotation is None else rotation
        x = y if rotation.kind == "identity" else rotation._inverse(y)
        if out is None:
            x *= norms[..., None]
            return x
        return np.multiply(x, norms[..., None], out=out)

    def encode(self, x: Float[np.ndarray, "*batch d"]) -> MSECodes:
        """Quantize vectors.

        Parameters
        ----------
        x : array_like, shape (*batch, n, dim)
            (or ``(..., dim)`` when ``draws == ()``); finite. float32 is kept as float32.

        Returns
        -------
        MSECodes
            Codes and norms with the broadcast batch shape of ``x`` and ``draws``.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import MSEQuantizer
        >>> q = MSEQuantizer(6, 2, seed=1)
        >>> c = q.encode(np.ones((3, 6)))
        >>> c.codes.shape, c.n_coords, c.norms.tolist()
        ((3, 2), 8, [2.44921875, 2.44921875, 2.44921875])
        """
        x = self._check_x(x)
        shape = self._shape(x.shape[:-1])
        flat, chunks = self._plan(shape)
        xf = self._flat(x, shape, flat)
        packed = np.empty(flat + (packed_size(self.n_coords, self.bits),), np.uint8)
        norms = np.empty(flat, self.norm_dtype)
        for rows, rot in chunks:  # every pass of a chunk stays in cache
            xs = xf[rows]
            nrm, inv, xs = self._norms(xs, x)
            packed[rows] = pack_codes(self._codes(xs * inv[..., None], rot), self.bits)
            norms[rows] = nrm
        packed, norms = packed.reshape(shape + packed.shape[-1:]), norms.reshape(shape)
        return MSECodes(packed, norms, self.bits, self.n_coords, x.dtype)

    def decode(self, codes: MSECodes) -> np.ndarray:
        """Reconstruct ``x_hat = ||x|| R^T c(codes)`` in the dtype that was encoded.

        Zero vectors decode to exactly zero.

        Parameters
        ----------
        codes : MSECodes
            From `encode` of this quantizer (same bits and rotation).

        Returns
        -------
        numpy.ndarray
            ``(*shape, dim)``, float32 or float64 as the encoded input.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import MSEQuantizer
        >>> q = MSEQuantizer(4, 3, seed=0)
        >>> x_hat = q.decode(q.encode(np.zeros((2, 4))))
        >>> bool(np.all(x_hat == 0)), x_hat.shape
        (True, (2, 4))
        """
        packed = self._check_codes(codes).codes
        dtype = np.dtype(codes.dtype)
        shape = self._shape(packed.shape[:-1])
        flat, chunks = self._plan(shape)
        pf = self._flat(packed, shape, flat)
        norms = self._flat(codes.norms.astype(dtype)[..., None], shape, flat)[..., 0]
        out = np.empty(flat + (self.dim,), dtype=dtype)
        for rows, rot in chunks:
            self._unrotate(self._centroids(pf[rows], dtype), norms[rows], out=out[rows],
                           rotation=rot)
        return out.reshape(shape + (self.dim,))

    def _check_codes(self, codes: object) -> MSECodes:
        """``codes`` if they are `MSECodes` this quantizer can decode, else an error."""
        if not isinstance(codes, MSECodes):
            raise TypeError(f"codes must be MSECodes from MSEQuantizer.encode; received "
                            f"{_describe(codes)}")
        if codes.bits != self.bits or codes.n_coords != self.n_coords:
            raise ValueError(f"codes must have bits={self.bits} and n_coords={self.n_coords} "
                             f"(this quantizer); received bits={codes.bits}, "
                             f"n_coords={codes.n_coords}")
        if codes.codes.shape[-1] != packed_size(self.n_coords, self.bits):
            raise ValueError(f"codes.codes must have last axis of length "
                             f"{packed_size(self.n_coords, self.bits)}; received "
                             f"{_describe(codes.codes)}")
        if self.draws and codes.codes.ndim < 2:
            raise ValueError(f"codes.codes must have shape (*batch, n, bytes) when draws="
                             f"{self.draws}; received {_describe(codes.codes)}")
        if codes.norms.shape != codes.codes.shape[:-1]:
            raise ValueError(f"codes.norms must have shape {codes.codes.shape[:-1]} (codes.codes' "
                             f"batch); received {_describe(codes.norms)}")
        if np.dtype(codes.dtype) not in (np.float32, np.float64):
            raise ValueError(f"codes.dtype must be float32 or float64; received {np.dtype(codes.dtype)}")
        if self.draws:
            try:
                np.broadcast_shapes(codes.codes.shape[:-2], self.draws)
            except ValueError as exc:
                raise ValueError(f"codes' batch axes {codes.codes.shape[:-2]} must broadcast against "
                                 f"the draws {self.draws}; received {_describe(codes.codes)}") from exc
        return codes

    def roundtrip(self, x: Float[np.ndarray, "*batch d"],
                  out: Float[np.ndarray, "*batch d"] | None = None) -> Float[np.ndarray, "*batch d"]:
        """``decode(encode(x))`` without packing the codes: what an analysis of ``x_hat`` needs.

        The codes go straight from the codebook to their centroids, and the norms are
        rounded through ``norm_dtype`` as `encode` stores them, so the result equals
        ``decode(encode(x))`` bit for bit (tests/quant/test_roundtrip.py); validation and
        errors (e.g. a float16 norm overflow) are those of `encode`.

        Parameters
        ----------
        x : array_like, shape (*batch, n, dim)
            As for `encode`.
        out : numpy.ndarray, optional
            Where to write the result: C-contiguous, of the result's shape and ``x``'s
            dtype, not overlapping ``x``. Reusing one array across calls saves the
            first-touch cost of fresh memory (the sweep runner does, per task).

        Returns
        -------
        numpy.ndarray
            ``(*shape, dim)``, float32 or float64 as ``x`` (``out`` when given).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import MSEQuantizer
        >>> q = MSEQuantizer(96, 3, seed=0)
        >>> x = np.random.default_rng(0).standard_normal((5, 96))
        >>> bool(np.array_equal(q.roundtrip(x), q.decode(q.encode(x))))
        True
        >>> buf = np.empty_like(x)
        >>> q.roundtrip(x, out=buf) is buf
        True
        """
        x = self._check_x(x)
        shape = self._shape(x.shape[:-1])
        out = _check_out(out, x, shape + (self.dim,))
        flat, chunks = self._plan(shape)
        xf = self._flat(x, shape, flat)
        out_f = out.reshape(flat + (self.dim,))
        for rows, rot in chunks:
            self._roundtrip_chunk(xf[rows], x, rot, out_f[rows])
        return out

    def _roundtrip_chunk(self, xs: np.ndarray, whole: np.ndarray, rotation: Rotation,
                         out: np.ndarray, packed: np.ndarray | None = None,
                         norms_out: np.ndarray | None = None) -> np.ndarray:
        """Reconstruction of one chunk ``xs`` of ``whole`` into ``out``; also stores its
        packed codes and norms when ``packed``/``norms_out`` are given (what
        `ProdQuantizer.encode` needs, without unpacking the codes again)."""
        norms, inv, xs = self._norms(xs, whole)
        stored = norms.astype(self.norm_dtype).astype(xs.dtype)
        if norms_out is not None:
            norms_out[...] = norms
        if rotation.kind == "haar":
            codes = self._codes(xs * inv[..., None], rotation)
            if packed is not None:
                packed[...] = pack_codes(codes, self.bits)
            return self._unrotate(self._lookup(codes, xs.dtype), stored, out=out, rotation=rotation)
        _roundtrip_pieces(self.codebook, rotation, xs, inv, stored, out, packed,
                          piece_rows=max(1, _CHUNK_VALUES // self.n_coords))
        return out

    def _lookup(self, codes: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Centroids of unpacked uint8 codes ``(..., n_coords)``, in ``dtype``."""
        return _centroids_of(self.codebook, codes, dtype)

    def _centroids(self, packed: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Centroid of every packed code, ``(..., n_coords)`` in ``dtype``."""
        return _centroids_of_packed(self.codebook, packed, self.n_coords, dtype)

    def bits_per_vector(self) -> dict[str, int]:
        """Stored bits per vector by part: ``{"codes": bits * d_pad, "norm": 16 | 32 | 64}``.

        Examples
        --------
        >>> from kvstats import MSEQuantizer
        >>> MSEQuantizer(96, 3).bits_per_vector()  # padded to 128 coordinates
        {'codes': 384, 'norm': 16}
        """
        return {"codes": self.bits * self.n_coords, "norm": 8 * self.norm_dtype.itemsize}

    @property
    def nominal_bits(self) -> float:
        """Bits per coordinate the coder is named for (``bits``; the norm is overhead)."""
        return float(self.bits)

    def stored_bits(self, n_tokens: int) -> dict[str, int]:
        """Bits stored for ``n_tokens`` vectors by part (:meth:`bits_per_vector` times n).

        Examples
        --------
        >>> from kvstats import MSEQuantizer
        >>> MSEQuantizer(96, 3).stored_bits(10)
        {'codes': 3840, 'norm': 160}
        """
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        return {part: bits * n_tokens for part, bits in self.bits_per_vector().items()}

    def export(self) -> SideExport:
        """Rotation signs and codebook as plain arrays, for the GPU path.

        Raises a ValueError for independent draws (``draws != ()``) or a Haar rotation
        (the GPU path runs the randomized Hadamard transform or no rotation).

        Examples
        --------
        >>> from kvstats import MSEQuantizer
        >>> ex = MSEQuantizer(96, 3, seed=0).export()
        >>> ex.coder, ex.bits, ex.dim_padded, ex.signs.shape, ex.centroids.shape, ex.sketch
        ('mse', 3, 128, (128,), (8,), None)
        """
        from kvstats.quant.export import SideExport

        if self.draws:
            raise ValueError(f"draws must be () to export (one shared rotation); received "
                             f"draws={self.draws}")
        kind = self.rotation.kind
        if kind not in ("hadamard", "identity"):
            raise ValueError(f"rotation must be 'hadamard' or 'identity' to export; received {kind!r}")
        return SideExport(coder="mse", bits=self.bits, dim=self.dim, dim_padded=self.n_coords,
                          # float64 as SideExport documents (held_as keeps them in int8)
                          signs=(self.rotation.signs.astype(np.float64, copy=False)
                                 if kind == "hadamard" else None),
                          centroids=self.codebook.centroids, boundaries=self.codebook.boundaries,
                          sketch=None, sketch_scale=0.0, norm_dtype=self.norm_dtype)

    def describe(self) -> dict[str, Any]:
        """Every setting of the quantizer (``"coder": "mse"`` first).

        Examples
        --------
        >>> from kvstats import MSEQuantizer
        >>> MSEQuantizer(64, 2).describe()["codebook"]
        'lloyd_max beta dim=64'
        """
        return {"coder": "mse", "bits": self.bits, "dim": self.dim, "rotation": self.rotation.kind,
                "n_coords": self.n_coords, "draws": self.draws,
                "norm_dtype": self.norm_dtype.name,
                "codebook": f"lloyd_max beta dim={self.rotation.out_dim}"}

    def __repr__(self) -> str:
        return (f"MSEQuantizer(dim={self.dim}, bits={self.bits}, rotation={self.rotation.kind!r}, "
                f"draws={self.draws}, norm_dtype={self.norm_dtype.name})")

