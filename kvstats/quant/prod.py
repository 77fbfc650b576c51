"""TurboQuant-prod: a (b−1)-bit MSE quantizer plus a 1-bit QJL sketch of its residual.

Zandieh et al. (2025). The residual's signs and norm are stored as by
:func:`kvstats.quant.qjl.qjl_encode` (same sign convention and norm storage);
docs/qjl.md derives the variance of the inner products.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxtyping import Float
from numpy.typing import DTypeLike

from kvstats._checks import SeedLike, as_float_array, as_generator, check_choice, check_int
from kvstats.quant.coder import _finite_decode, as_norm_dtype
from kvstats.quant.export import SideExport
from kvstats.quant.mse import MSECodes, MSEQuantizer, _check_out
from kvstats.quant.packing import packed_size
from kvstats.quant.qjl import (QJLCodes, _add_reconstruction, _add_residual_reconstruction,
                               _check_codes, _in_dtype, _pm_signs, _reconstruct, _sign_bits, _store_norms,
                               qjl_scores)
from kvstats.quant.rotation import _BLAS_ROWS, Rotation
from kvstats.quant.sketch import SKETCHES, Sketch, _as_draws, make_sketch

__all__ = ["ProdCodes", "ProdQuantizer"]

#: A group of `ProdQuantizer._groups`: rows, the MSE part's chunks in them, their sketch.
_Group = tuple[slice, list[tuple[slice, Rotation]], Sketch]


@dataclass(frozen=True, eq=False)
class ProdCodes:
    """TurboQuant-prod codes: the (b−1)-bit MSE codes and the QJL codes of the residual."""

    mse: MSECodes
    residual: QJLCodes
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored (MSE codes and norms, residual signs and norms)."""
        return int(self.mse.nbytes + self.residual.nbytes)


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
        Budget, 2..9: ``bits − 1`` bits per coded coordinate for the MSE codes, and the
        sketch's ``m`` sign bits per vector (one per coded coordinate at the default
        ``m = d_pad``). 1 bit would be the sketch alone: use :class:`QJLKeyQuantizer`.
    rotation : {"hadamard", "haar", "identity"}
        Rotation of the MSE quantizer.
    sketch : {"gaussian", "orthogonal", "srht"}
        Kind of the residual's sketch (`kvstats.quant.sketch.make_sketch`); ``"srht"``
        is applied by the fast Walsh–Hadamard transform.
    m : int, optional
        Sketch rows, i.e. residual sign bits per vector (default: the rotation's
        ``out_dim``, d_pad); another ``m`` moves :attr:`nominal_bits` off ``bits``.
    seed, draws
        Randomness and batch of independent draws (MSE rotation and sketch are drawn
        from independent child streams).
    norm_dtype : float16 (default), float32 or float64
        Dtype of the stored norms (of x by the MSE part, and of r).

    Attributes
    ----------
    nominal_bits : float
        Code bits per coded coordinate actually stored (the Coder protocol of
        :mod:`kvstats.quant.coder`): ``((bits − 1)·d_pad + m)/d_pad``, the MSE codes of the
        ``d_pad`` rotated coordinates plus the ``m`` sign bits, per rotated coordinate as
        :class:`MSEQuantizer`'s ``bits`` (norms are overheads). ``bits`` exactly at the
        default ``m = d_pad``, for every d; e.g. 2.25 for bits 3, m = 32 at d = 128.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats import ProdQuantizer
    >>> pq = ProdQuantizer(64, 3, seed=0)
    >>> x = np.random.default_rng(1).standard_normal((10, 64))
    >>> pq.decode(pq.encode(x)).shape, pq.stored_bits(1)["residual_signs"]
    ((10, 64), 64)
    >>> pq.nominal_bits, ProdQuantizer(64, 3, m=32).nominal_bits   # 2·64 + 32 code bits over 64
    (3.0, 2.5)
    """

    #: ``roundtrip(x, out=...)`` writes into ``out`` (the sweep reuses its arrays; an
    #: optional capability of the coder protocol, False where absent).
    roundtrip_writes_out = True

    def __init__(self, dim: int, bits: int, rotation: str = "hadamard", sketch: str = "gaussian",
                 m: int | None = None, seed: SeedLike = 0, draws: int | tuple[int, ...] = (),
                 norm_dtype: DTypeLike = np.float16, name: str = "x"):
        self.dim = check_int(dim, "dim", low=1)
        bits = check_int(bits, "bits", low=1, high=9)
        if bits == 1:
            raise ValueError("bits must be >= 2 for ProdQuantizer ((bits-1)-bit MSE + 1-bit QJL); "
                             "received 1 — a 1-bit code is the QJL sketch alone: use "
                             "QJLKeyQuantizer(dim, m=dim)")
        self.bits = bits
        check_choice(sketch, "sketch", SKETCHES)
        self.draws = _as_draws(draws)
        self.norm_dtype = as_norm_dtype(norm_dtype)
        mse_rng, sketch_rng = as_generator(seed).spawn(2)
        self.name = name  # what the vectors are ("K", "V"), named in norm warnings and errors
        self.mse = MSEQuantizer(self.dim, bits - 1, rotation=rotation, seed=mse_rng,
                                draws=self.draws, norm_dtype=self.norm_dtype, name=name)
        self.rotation = rotation
        out_dim = self.mse.rotation.out_dim
        self.m = out_dim if m is None else check_int(m, "m", low=1)
        # per coded (rotated) coordinate, the unit of MSEQuantizer's bits: a Hadamard
        # rotation codes d_pad coordinates, so the default m = d_pad gives exactly `bits`
        self.nominal_bits = ((bits - 1) * out_dim + self.m) / out_dim
        self.sketch = make_sketch(sketch, self.m, self.dim, seed=sketch_rng, draws=self.draws)

    def hold_matrices_as(self, dtype: DTypeLike) -> None:
        """Hold the dense matrices (the residual's Gaussian or orthogonal sketch, a Haar
        rotation of the MSE part) in ``dtype`` from now on.

        For a caller that codes and decodes arrays of that dtype only (the quantized
        cache: float32). Every product casts a matrix to its input's dtype (`_groups`,
        `kvstats.quant.rotation.Rotation.held_as`), to the same values and layout as a
        matrix held in that dtype, so float32 inputs give the same codes and decodes bit
        for bit, at half the memory of float64. Float64 inputs would then multiply by the
        rounded matrices, and :meth:`export` gives the sketch in ``dtype``. An
        ``"srht"`` sketch holds only its signs: unchanged; a Hadamard rotation's ±1 signs are
        held in int8 (exact: the same numbers for either dtype, `Rotation.held_as`).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import ProdQuantizer
        >>> pq = ProdQuantizer(64, 3, rotation="haar", seed=0)
        >>> x = np.random.default_rng(0).standard_normal((40, 64)).astype(np.float32)
        >>> before = pq.encode(x)
        >>> pq.hold_matrices_as(np.float32)
        >>> after = pq.encode(x)
        >>> pq.sketch.matrix.dtype, bool(np.array_equal(after.residual.signs, before.residual.signs))
        (dtype('float32'), True)
        """
        dtype = check_choice(np.dtype(dtype), "dtype", [np.dtype(np.float32), np.dtype(np.float64)])
        self.mse.hold_matrices_as(dtype)
        self.sketch = _in_dtype(self.sketch, dtype)

    def _check_x(self, x: object) -> np.ndarray:
        """``x`` as a float array ``(..., n, dim)``; finiteness is checked by the MSE part's
        norms (`MSEQuantizer._check_x`), not by an extra pass here."""
        x = as_float_array(x, "x", min_ndim=2, allow_nonfinite=True)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last dimension dim={self.dim}; received shape {x.shape}")
        return self.mse._check_x(x)

    def _groups(self, shape: tuple[int, ...], dtype: np.dtype | None = None
                ) -> tuple[tuple[int, ...], list[_Group]]:
        """Chunks of an output of batch shape ``shape``: ``(flat, [(rows, parts, sketch)])``.

        The MSE part runs in its own chunks (`MSEQuantizer._plan`), given as ``parts``
        (slices relative to ``rows`` with their rotations); the sketch products of a
        group run once on all its rows. With draws a group is one MSE chunk (whole
        draws; the batched products are per draw) with its draws' sketches; with one
        sketch a group spans MSE chunks up to a multiple of ``_BLAS_ROWS`` rows, so the
        products round as one product over every row (see
        `kvstats.quant.rotation._fwht_rows`). With ``dtype`` the sketches' dense matrices
        come cast to it (once, where the sign product and the reconstruction would
        each cast them).
        """
        flat, chunks = self.mse._plan(shape)
        # the products run in dtype: a dense matrix is cast once, not per product
        sketch = self.sketch if dtype is None else _in_dtype(self.sketch, dtype)
        if self.draws:
            # every array of the sketch with leading draws axes (matrix, and the signs
            # and rows of a structured sketch), broadcast to the batch and flattened
            nd = len(self.draws)
            arrays = {f.name: np.broadcast_to(v, shape[:-1] + v.shape[nd:]).reshape((-1,) + v.shape[nd:])
                      for f in dataclasses.fields(sketch)
                      if isinstance(v := getattr(sketch, f.name), np.ndarray)
                      and v.shape[:nd] == self.draws}
            return flat, [(rows, [(slice(None), rot)],
                           dataclasses.replace(sketch, draws=(len(range(*rows.indices(flat[0]))),),
                                               **{k: a[rows] for k, a in arrays.items()}))
                          for rows, rot in chunks]
        step = chunks[0][0].stop - chunks[0][0].start
        big = step * _BLAS_ROWS // math.gcd(step, _BLAS_ROWS)
        return flat, [(slice(a, a + big),
                       [(slice(r.start - a, r.stop - a), rot) for r, rot in chunks[a // step:(a + big) // step]],
                       sketch) for a in range(0, flat[0], big)]

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> ProdCodes:
        """Encode ``x`` ``(*batch, n, d)``: MSE codes, then signs and norm of the residual.

        The MSE reconstruction the residual needs comes from the codes before packing
        (as `roundtrip`), in the same cache-sized chunks as the rest of the work."""
        x = self._check_x(x)
        mse = self.mse
        shape = mse._shape(x.shape[:-1])
        flat, groups = self._groups(shape, x.dtype)
        xf = mse._flat(x, shape, flat)
        m_codes = np.empty(flat + (packed_size(mse.n_coords, mse.bits),), np.uint8)
        m_norms = np.empty(flat, mse.norm_dtype)
        signs = np.empty(flat + (-(-self.m // 8),), np.uint8)
        r_norms = np.empty(flat, self.norm_dtype)
        for rows, parts, sketch in groups:
            xs = xf[rows]
            base = np.empty(xs.shape, x.dtype)
            mc, mn = m_codes[rows], m_norms[rows]
            for sub, rot in parts:
                mse._roundtrip_chunk(xs[sub], x, rot, base[sub], packed=mc[sub], norms_out=mn[sub])
            residual = np.subtract(xs, base, out=base)
            r_norms[rows] = _store_norms(residual, self.norm_dtype, f"{self.name} (residual)")
            signs[rows] = np.packbits(_sign_bits(sketch, residual), axis=-1, bitorder="little")
        return ProdCodes(mse=MSECodes(m_codes.reshape(shape + m_codes.shape[-1:]),
                                      m_norms.reshape(shape), mse.bits, mse.n_coords, x.dtype),
                         residual=QJLCodes(signs.reshape(shape + signs.shape[-1:]),
                                           r_norms.reshape(shape), self.m),
                         dtype=x.dtype)

    def _check(self, codes: object) -> ProdCodes:
        if not isinstance(codes, ProdCodes):
            raise TypeError(f"codes must be ProdCodes from ProdQuantizer.encode; "
                            f"received {type(codes).__name__}")
        self.mse._check_codes(codes.mse)
        _check_codes(codes.residual, self.sketch)
        return codes

    def decode(self, codes: ProdCodes) -> Float[np.ndarray, "*batch n d"]:
        """``x̂_mse + c·‖r‖·Sᵀ sign(S r)`` in the dtype that was encoded.

        The sketch term can reach a few times ``‖r‖``: a result past that dtype's range
        (float32 or float64 norms only) raises NormOverflowError, never an inf."""
        codes = self._check(codes)
        mse, dtype = self.mse, np.dtype(codes.dtype)
        shape = mse._shape(codes.mse.codes.shape[:-1])
        flat, groups = self._groups(shape, dtype)
        mc = mse._flat(codes.mse.codes, shape, flat)
        mn = mse._flat(codes.mse.norms.astype(dtype)[..., None], shape, flat)[..., 0]
        sg = mse._flat(codes.residual.signs, shape, flat)
        rn = mse._flat(codes.residual.norms[..., None], shape, flat)[..., 0]
        out = np.empty(flat + (self.dim,), dtype)
        for rows, parts, sketch in groups:
            base, mcr, mnr = out[rows], mc[rows], mn[rows]
            for sub, rot in parts:
                mse._unrotate(mse._centroids(mcr[sub], dtype), mnr[sub], out=base[sub], rotation=rot)
            base += _reconstruct(sketch, _pm_signs(sg[rows], self.m, dtype), rn[rows], dtype)
        return _finite_decode(out.reshape(shape + (self.dim,)), f"codes of {self.name}", self.name,
                              f"encode {self.name} as float64")

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"],
                  out: Float[np.ndarray, "*batch n d"] | None = None) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))`` without storing codes: what an analysis of ``x_hat`` needs.

        The MSE part is reconstructed once (its codes go straight to centroids, as
        `MSEQuantizer.roundtrip`) and the residual's signs go to ±1 without packing, in
        cache-sized chunks. Same sign convention, norm storage and casts as
        encode/decode, so the result equals ``decode(encode(x))`` bit for bit; same
        validation and errors (a result past x's dtype raises NormOverflowError, as
        `decode`; ``out`` then holds it).

        Parameters
        ----------
        x : array_like, shape (*batch, n, dim)
        out : numpy.ndarray, optional
            Where to write the result, as for `MSEQuantizer.roundtrip`.

        Returns
        -------
        ndarray, shape ``(*shape, n, dim)``, dtype of ``x`` (float32 or float64; ``out``
        when given)

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import ProdQuantizer
        >>> pq = ProdQuantizer(96, 3, seed=0)
        >>> x = np.random.default_rng(1).standard_normal((10, 96)).astype(np.float32)
        >>> x_hat = pq.roundtrip(x)
        >>> x_hat.dtype, bool(np.array_equal(x_hat, pq.decode(pq.encode(x))))
        (dtype('float32'), True)
        """
        x = self._check_x(x)
        mse = self.mse
        shape = mse._shape(x.shape[:-1])
        result = _check_out(out, x, shape + (self.dim,))
        flat, groups = self._groups(shape, x.dtype)
        xf = mse._flat(x, shape, flat)
        out = result.reshape(flat + (self.dim,))
        for rows, parts, sketch in groups:
            xs, base = xf[rows], out[rows]
            for sub, rot in parts:
                mse._roundtrip_chunk(xs[sub], x, rot, base[sub])
            if sketch._fast():  # srht: residual, norms and both transforms piece by piece
                _add_residual_reconstruction(sketch, xs, base, self.norm_dtype, f"{self.name} (residual)")
                continue
            residual = xs - base
            norms = _store_norms(residual, self.norm_dtype, f"{self.name} (residual)")
            _add_reconstruction(sketch, residual, norms, base)  # base is ours: add in place
        return _finite_decode(result, self.name, self.name)

    def scores(self, q: Float[np.ndarray, "*batch n_q d"],
               codes: ProdCodes) -> Float[np.ndarray, "*batch n_q n"]:
        """Inner products ``q @ x̂.T`` ``(*batch, n_q, n)`` (equal to those with :meth:`decode`).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats import ProdQuantizer
        >>> pq = ProdQuantizer(64, 3, seed=0)
        >>> rng = np.random.default_rng(1)
        >>> x, q = rng.standard_normal((10, 64)), rng.standard_normal((2, 64))
        >>> codes = pq.encode(x)
        >>> bool(np.allclose(pq.scores(q, codes), q @ pq.decode(codes).T))
        True
        """
        codes = self._check(codes)
        q = as_float_array(q, "q", min_ndim=2)
        if q.shape[-1] != self.dim:
            raise ValueError(f"q must have last dimension dim={self.dim}; received shape {q.shape}")
        base = np.asarray(self.mse.decode(codes.mse), dtype=q.dtype)
        return np.matmul(q, np.swapaxes(base, -1, -2)) + qjl_scores(self.sketch, q, codes.residual)

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """Bits stored for ``n_tokens`` vectors, by part.

        Per vector: the MSE part's codes and norm (``mse_codes``, ``mse_norm``), ``m``
        residual sign bits and the residual's norm; nothing is shared between vectors.

        Examples
        --------
        >>> from kvstats import ProdQuantizer
        >>> ProdQuantizer(96, 3).stored_bits(10)  # 2-bit codes of 128 padded coordinates
        {'mse_codes': 2560, 'mse_norm': 160, 'residual_signs': 1280, 'residual_norm': 160}
        """
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        parts = {f"mse_{k}": v for k, v in self.mse.stored_bits(n_tokens).items()}
        parts["residual_signs"] = self.m * n_tokens
        parts["residual_norm"] = 8 * self.norm_dtype.itemsize * n_tokens
        return parts

    def export(self) -> SideExport:
        """The MSE part's rotation signs and codebook plus the residual sketch, for the GPU path.

        ``bits`` of the export is the MSE part's (``self.bits − 1``); ``sketch`` the
        ``(m, d)`` float64 matrix (in the dtype of :meth:`hold_matrices_as`, if called) and
        ``sketch_scale`` its estimator constant. Raises a
        ValueError, as :meth:`MSEQuantizer.export`, for independent draws (``draws != ()``)
        or a Haar rotation.

        Examples
        --------
        >>> from kvstats import ProdQuantizer
        >>> ex = ProdQuantizer(96, 3, seed=0).export()
        >>> ex.coder, ex.bits, ex.dim_padded, ex.sketch.shape, ex.m
        ('prod', 2, 128, (128, 96), 128)
        """
        return dataclasses.replace(self.mse.export(), coder="prod", sketch=self.sketch.matrix,
                                   sketch_scale=self.sketch.scale)

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """Its MSE stage's (float32, the norms' ``norm_dtype``, ``x``'s dtype); the residual's
        norm, at most the vector's plus its (n−1)-bit reconstruction's, is left to `encode`.

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.quant.prod import ProdQuantizer
        >>> ProdQuantizer(4, 2).storable_limits(np.array([[3.0, 4.0, 0.0, 0.0]]))[1]
        ('vector norms (stored as float16)', 65504.0, 5.0)
        """
        return self.mse.storable_limits(x)

    def describe(self) -> dict[str, Any]:
        """Every setting: coder kind, bits, rotation, sketch kind and rows, norm dtype, draws."""
        return {"coder": "prod", "quantizer": "turboquant_prod", "dim": self.dim, "bits": self.bits,
                "mse_bits": self.bits - 1, "rotation": self.rotation, "sketch": self.sketch.kind,
                "m": self.m, "norm_dtype": str(self.norm_dtype), "draws": list(self.draws)}
