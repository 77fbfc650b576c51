"""TurboQuant-prod: a (b−1)-bit MSE quantizer plus a 1-bit QJL sketch of its residual.

Zandieh et al. (2025). The residual's signs and norm are stored as by
:func:`kvstats.quant.qjl.qjl_encode` (same sign convention and norm storage);
docs/qjl.md derives the variance of the inner products.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxtyping import Float
from numpy.typing import DTypeLike

from kvstats._checks import SeedLike, as_float_array, as_generator, check_choice, check_int
from kvstats.quant.export import SideExport
from kvstats.quant.mse import MSECodes, MSEQuantizer
from kvstats.quant.qjl import (QJLCodes, _as_norm_dtype, _pm_from_bits, _reconstruct, _sign_bits,
                               _store_norms, qjl_encode, qjl_reconstruct, qjl_scores)
from kvstats.quant.sketch import SKETCHES, _as_draws, make_sketch

__all__ = ["ProdCodes", "ProdQuantizer"]


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

    Attributes
    ----------
    nominal_bits : float
        ``bits``, the budget per coordinate the coder is named for (the Coder protocol of
        :mod:`kvstats.quant.coder`).

    Examples
    --------
    >>> pq = ProdQuantizer(64, 3, seed=0)
    >>> x = np.random.default_rng(1).standard_normal((10, 64))
    >>> pq.decode(pq.encode(x)).shape, pq.stored_bits(1)["residual_signs"]
    ((10, 64), 64)
    """

    def __init__(self, dim: int, bits: int, rotation: str = "hadamard", sketch: str = "gaussian",
                 m: int | None = None, seed: SeedLike = 0, draws: int | tuple[int, ...] = (),
                 norm_dtype: DTypeLike = np.float16):
        self.dim = check_int(dim, "dim", low=1)
        bits = check_int(bits, "bits", low=1, high=9)
        if bits == 1:
            raise ValueError("bits must be >= 2 for ProdQuantizer ((bits-1)-bit MSE + 1-bit QJL); "
                             "received 1 — a 1-bit code is the QJL sketch alone: use "
                             "QJLKeyQuantizer(dim, m=dim)")
        self.bits = bits
        self.nominal_bits = float(bits)
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

    def _check_x(self, x: object) -> np.ndarray:
        x = as_float_array(x, "x", min_ndim=2)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last dimension dim={self.dim}; received shape {x.shape}")
        return x

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> ProdCodes:
        """Encode ``x`` ``(*batch, n, d)``: MSE codes, then signs and norm of the residual."""
        x = self._check_x(x)
        mse_codes = self.mse.encode(x)
        residual = x - np.asarray(self.mse.decode(mse_codes), dtype=x.dtype)
        return ProdCodes(mse=mse_codes,
                         residual=qjl_encode(self.sketch, residual, self.norm_dtype),
                         dtype=x.dtype)

    def _check(self, codes: object) -> ProdCodes:
        if not isinstance(codes, ProdCodes):
            raise TypeError(f"codes must be ProdCodes from ProdQuantizer.encode; "
                            f"received {type(codes).__name__}")
        return codes

    def decode(self, codes: ProdCodes) -> Float[np.ndarray, "*batch n d"]:
        """``x̂_mse + c·‖r‖·Sᵀ sign(S r)`` in the dtype that was encoded."""
        codes = self._check(codes)
        base = np.asarray(self.mse.decode(codes.mse), dtype=codes.dtype)
        return base + qjl_reconstruct(self.sketch, codes.residual, dtype=codes.dtype)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
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

    def scores(self, q: Float[np.ndarray, "*batch n_q d"],
               codes: ProdCodes) -> Float[np.ndarray, "*batch n_q n"]:
        """Inner products ``q @ x̂.T`` ``(*batch, n_q, n)`` (equal to those with :meth:`decode`)."""
        codes = self._check(codes)
        q = as_float_array(q, "q", min_ndim=2)
        base = np.asarray(self.mse.decode(codes.mse), dtype=q.dtype)
        return np.matmul(q, np.swapaxes(base, -1, -2)) + qjl_scores(self.sketch, q, codes.residual)

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """Bits stored for ``n_tokens`` vectors, by part.

        Per vector: the MSE part's codes and norm (``mse_codes``, ``mse_norm``), ``m``
        residual sign bits and the residual's norm; nothing is shared between vectors.

        Examples
        --------
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
        ``(m, d)`` float64 matrix and ``sketch_scale`` its estimator constant. Raises a
        ValueError, as :meth:`MSEQuantizer.export`, for independent draws (``draws != ()``)
        or a Haar rotation.

        Examples
        --------
        >>> ex = ProdQuantizer(96, 3, seed=0).export()
        >>> ex.coder, ex.bits, ex.dim_padded, ex.sketch.shape, ex.m
        ('prod', 2, 128, (128, 96), 128)
        """
        return dataclasses.replace(self.mse.export(), coder="prod", sketch=self.sketch.matrix,
                                   sketch_scale=self.sketch.scale)

    def describe(self) -> dict[str, Any]:
        """Every setting: coder kind, bits, rotation, sketch kind and rows, norm dtype, draws."""
        return {"coder": "prod", "quantizer": "turboquant_prod", "dim": self.dim, "bits": self.bits,
                "mse_bits": self.bits - 1, "rotation": self.rotation, "sketch": self.sketch.kind,
                "m": self.m, "norm_dtype": str(self.norm_dtype), "draws": list(self.draws)}
