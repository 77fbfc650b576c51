"""FP8 KV cache as vLLM stores it: ``fp8_e4m3`` and ``fp8_e5m2`` with an fp32 scale.

Each value is divided by a float32 scale ``s``, clamped to the format's largest finite
value ``M`` (448 for E4M3 "fn", 57344 for E5M2) and rounded to FP8 (round to nearest,
ties to even; :mod:`ml_dtypes` does the rounding); decoding multiplies the FP8 value by
``s`` in float32 — vLLM's ``scaled_fp8_conversion``. The scale is ``s = amax/M`` with
``amax`` the largest magnitude it covers, stored as float32:

``scale="head"`` (the default)
    one scale per leading index: each ``(n, d)`` slice — one head's cache, or one trial
    of a sweep — gets its own;
``scale="tensor"``
    one scale for everything one ``encode`` call receives (vLLM's per-layer
    ``k_scale``/``v_scale`` when a call holds a layer's heads). In a sweep the leading
    axis is independent trials, which a shared scale would couple: use ``"head"`` there.
``scale=<float>``
    a static scale, as vLLM keeps one calibrated once (from a prefill or a checkpoint;
    its default is 1.0): values beyond ``±max·s`` are clamped.

With ``"head"``/``"tensor"`` the scale is the oracle one of the data each call codes, the
best case for a per-tensor scale; a cache that codes token by token then gets a scale
per token, which vLLM's static scale does not have — use a float there. Bits: 8 per coordinate plus 32 per head (the scale), counted by
``stored_bits``; with ``scale="tensor"`` the heads of a call share one scale, so the
32 bits per head counted are an upper bound. Zero codes decode to zero; an all-zero
head has scale 0.

Tiny heads. A nonzero head whose scale ``amax/M`` is below float32's smallest normal
(1.2e-38: ``amax`` below 5.3e-36 for E4M3, 6.7e-34 for E5M2, 3.2e-35 for nvfp4's
``amax/2688``) gets a subnormal scale, rounded by more than float32's usual 2^-24; one
below half the smallest subnormal (``amax`` below ~3e-43, 4e-41, 2e-42) gets scale 0
and decodes to zeros. :func:`amax_scale` warns (``UserWarning``) with how many, as
:mod:`kvstats.quant.uniform` does for float16 scales.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import warnings

import ml_dtypes
import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe, as_float_array, check_choice, check_int, check_real
from kvstats.quant.coder import float32_limits

__all__ = ["FP8_FORMATS", "SCALES", "FP8Codes", "FP8Coder", "amax_scale"]

FP8_FORMATS = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}
SCALES = ("head", "tensor")
_FP32_BITS = 32
_FP32 = np.finfo(np.float32)


def amax_scale(x: np.ndarray, scale: str, fmax: float) -> np.ndarray:
    """float32 ``amax/fmax`` over each head (``scale="head"``: the last two axes) or the
    whole array (``"tensor"``), keeping dimensions; a ValueError if ``x`` overflows float32,
    a UserWarning if a nonzero head's scale is a float32 subnormal or 0 (module docstring).

    Examples
    --------
    >>> amax_scale(np.array([[1.0, -896.0]], dtype=np.float32), "head", 448.0)
    array([[2.]], dtype=float32)
    """
    scale = check_choice(scale, "scale", SCALES)
    if scale == "head" and np.ndim(x) < 2:
        raise ValueError(f"x must have shape (..., n, d) for scale='head' (one scale per "
                         f"(n, d) slice); received {_describe(x)}")
    axes = (-2, -1) if scale == "head" else tuple(range(x.ndim))
    amax = np.max(np.abs(x), axis=axes, keepdims=True)
    if not np.isfinite(amax).all():
        raise ValueError(f"x must be finite in float32 (|x| < 3.4e38); received {_describe(x)} "
                         f"with max |x| = {float(np.max(amax)):.4g} after rounding to float32")
    s = (amax / np.float32(fmax)).astype(np.float32)
    low = (amax > 0) & (s < _FP32.smallest_normal)
    if low.any():
        lost, kept = int(np.sum(low & (s == 0))), s[low & (s > 0)]
        what = [f"{lost} are 0: their data decode as exact zeros"] if lost else []
        if kept.size:
            # float32 rounds a subnormal to a multiple of its smallest subnormal
            rel = float(_FP32.smallest_subnormal) / 2 / float(kept.min())
            what.append(f"{kept.size} are subnormal, rounded by up to {rel:.2g} relative (the "
                        f"largest values they cover clipped by as much)")
        warnings.warn(
            f"x: {int(low.sum())} of {low.size} scales amax/{fmax:g} are below float32's smallest "
            f"normal {float(_FP32.smallest_normal):.3g} (nonzero data with amax below "
            f"{float(_FP32.smallest_normal) * fmax:.3g}): {'; '.join(what)}; rescale x if these "
            f"values matter", UserWarning, stacklevel=3)
    return s


def _divide(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``x / s`` in float32, 0 where ``s`` = 0 (an all-zero head)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        y = np.where(s == 0, np.float32(0), x / np.where(s == 0, np.float32(1), s))
    return y.astype(np.float32)


@dataclass(frozen=True, eq=False)
class FP8Codes:
    """FP8 bytes ``codes (*batch, n, d)`` and float32 ``scale`` (batch shape, or ``()``)."""

    codes: np.ndarray
    scale: np.ndarray
    fmt: str
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored: one per coordinate, four per scale."""
        return int(self.codes.nbytes + self.scale.nbytes)


class FP8Coder:
    """One side of an FP8 KV cache (a :class:`~kvstats.quant.coder.Coder`).

    Parameters
    ----------
    fmt : {"fp8_e4m3", "fp8_e5m2"}
    dim : int
        Head dimension.
    scale : {"head", "tensor"} or float
        What one float32 scale covers, or a static scale > 0 (module docstring) that is
        a positive finite float32 once rounded (1.4e-45 to 3.4e38).

    Examples
    --------
    >>> coder = FP8Coder("fp8_e4m3", 8)
    >>> x = np.array([[1.0, -2.0, 0.3, 0, 0, 0, 0, 448.0]])
    >>> coder.roundtrip(x)[0, :3]               # 0.3 rounds to E4M3's 0.3125
    array([ 1.    , -2.    ,  0.3125])
    >>> coder.stored_bits(10)
    {'codes': 640.0, 'scale': 32.0}
    """

    def __init__(self, fmt: str, dim: int, scale: str = "head"):
        self.fmt = check_choice(fmt, "fmt", list(FP8_FORMATS))
        self.dim = check_int(dim, "dim", low=1)
        if isinstance(scale, str):
            self.scale: str | float = check_choice(scale, "scale", SCALES)
        else:
            try:
                self.scale = check_real(scale, "scale", low=0.0, low_open=True)
            except TypeError as exc:
                raise TypeError(f"scale must be one of {list(SCALES)} or a positive float; "
                                f"received {_describe(scale)}") from exc
            # it is stored and applied as float32: one that rounds to 0 or inf there would
            # code everything as 0 (as an all-zero head) or decode 0·inf = NaN
            with np.errstate(over="ignore"):
                s32 = np.float32(self.scale)
            if not (np.isfinite(s32) and s32 > 0):
                raise ValueError(f"scale must be a positive float32 (it is stored as one), in "
                                 f"[{float(np.finfo(np.float32).smallest_subnormal):.3g}, "
                                 f"{float(np.finfo(np.float32).max):.5g}]; received {self.scale!r}")
        self.dtype = np.dtype(FP8_FORMATS[self.fmt])
        self.fmax = float(ml_dtypes.finfo(self.dtype).max)
        self.nominal_bits = 8.0

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> FP8Codes:
        """FP8 codes of ``x / s`` and the scale ``s``."""
        x = as_float_array(x, "x", min_ndim=2)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last axis of length {self.dim}; received {_describe(x)}")
        with np.errstate(over="ignore"):       # beyond float32: inf, refused by amax_scale
            x32 = x.astype(np.float32)
        if isinstance(self.scale, float):
            if not np.isfinite(x32).all():
                raise ValueError(f"x must be finite in float32 (|x| < 3.4e38); received {_describe(x)}")
            s = np.full((1,) * x.ndim, self.scale, dtype=np.float32)
        else:
            s = amax_scale(x32, self.scale, self.fmax)
        y = np.clip(_divide(x32, s), -self.fmax, self.fmax)
        scale = s.reshape(x.shape[:-2] if self.scale == "head" else ())
        return FP8Codes(y.astype(self.dtype).view(np.uint8), scale, self.fmt, x.dtype)

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32 only: the scale is float32 and values beyond the format's range are
        clamped (:func:`kvstats.quant.coder.float32_limits`).

        Examples
        --------
        >>> FP8Coder("fp8_e4m3", 2).storable_limits(np.array([[1.0, -1e6]]))
        [('values of magnitude', 3.4028234663852886e+38, 1000000.0)]
        """
        return float32_limits(x)

    def decode(self, codes: FP8Codes) -> Float[np.ndarray, "*batch n d"]:
        """``fp8 · s`` in float32, returned in the dtype that was encoded."""
        if not isinstance(codes, FP8Codes) or codes.fmt != self.fmt:
            raise TypeError(f"codes must be FP8Codes of {self.fmt} from FP8Coder.encode; "
                            f"received {_describe(codes)}")
        values = codes.codes.view(self.dtype).astype(np.float32)
        s = codes.scale.reshape(codes.scale.shape + (1, 1))
        return (values * s).astype(codes.dtype)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """8 bits per coordinate and one float32 scale per head."""
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        return {"codes": 8.0 * self.dim * n_tokens, "scale": float(_FP32_BITS)}

    def describe(self) -> dict[str, Any]:
        """Format, its largest value and the scale's extent."""
        return {"coder": self.fmt, "max": self.fmax, "scale": self.scale}
