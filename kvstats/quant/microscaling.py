"""Microscaling FP4 block formats: ``mxfp4`` (OCP MX) and ``nvfp4`` (NVIDIA).

Both store FP4 E2M1 elements — magnitudes {0, ½, 1, 1½, 2, 3, 4, 6}, code = sign bit ·
8 + index of the magnitude (which is the E2M1 bit pattern) — in blocks along the head
dimension, two per byte (low nibble coordinate j, high nibble j + block/2), with one
scale per block:

``mxfp4`` (OCP Microscaling Formats v1.0, §5–6; gguf ``MXFP4``)
    blocks of 32, an E8M0 scale ``2^(e−127)`` with ``e = ⌊log₂ amax⌋ − 2 + 127`` (the
    largest element exponent of E2M1 is 2), elements the nearest E2M1 value of
    ``x/2^(e−127)``. 1 + 16 bytes per 32 coordinates: 4.25 bits. The rule follows
    ``gguf.quants.MXFP4`` bit for bit (tests/quant/test_formats.py): ``⌊log₂ amax⌋`` is
    evaluated in float32 (for amax below a power of two 2^k by a relative amount under
    ln 2·ulp(k)/2, i.e. (2–4)·10⁻⁸·|k|, it gives k: a scale twice the OCP one), and an
    element half-way between two E2M1 values takes the smaller magnitude
    (gguf's ``argmin``; the OCP text rounds ties to even — exact ties only). Where gguf's
    exponent would wrap below 0 (amax < 2^-125 ≈ 2.4e-38) it is clamped to 0 here (the
    smallest E8M0 scale, 2^-127): such a block keeps fewer E2M1 levels, and one with
    amax ≤ 2^-129 decodes to zeros; :meth:`MXCoder.encode` warns (``UserWarning``) with
    how many, as the block types warn for their fp16 scales.
``nvfp4`` (NVIDIA Blackwell; TensorRT Model Optimizer's recipe)
    blocks of 16, an unsigned E4M3 block scale and one float32 scale ``g = amax/(448·6)``
    per head (``scale="head"``) or per call (``"tensor"``, as in :mod:`kvstats.quant.fp8`):
    block scale ``s = E4M3((amax_block/6)/g)`` (round to nearest even, at most 448),
    elements ``E2M1(x/(s·g))`` (round to nearest even, saturating at 6), decoded
    ``(e2m1·s)·g``. 1 + 8 bytes per 16 coordinates plus 32 bits per head: 4.5 + 32/(n·d)
    bits. gguf implements only the decoding of its own NVFP4 layout (super-blocks of 64,
    no fp32 scale): the test holds the decoded values to it (times ``g``) and the codes
    to an independent reference of the definition above. ``g`` comes from
    :func:`kvstats.quant.fp8.amax_scale`: a UserWarning when a nonzero head's ``g`` is a
    float32 subnormal or 0 (amax below 3.2e-35; below ~2e-42 the head decodes to zeros).

Arithmetic is float32 (the input is rounded to float32 first). The head dimension must
be a multiple of the block (a ValueError otherwise; no padding).
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe, as_float_array, check_choice, check_int
from kvstats.quant.blockfmt import check_block_dim
from kvstats.quant.coder import float32_limits
from kvstats.quant.fp8 import SCALES, amax_scale

__all__ = ["MX_FORMATS", "E2M1_VALUES", "MXCodes", "MXCoder", "e2m1_encode", "e2m1_decode"]

#: The eight E2M1 magnitudes, indexed by their 3-bit pattern.
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
_MIDS = (E2M1_VALUES[1:] + E2M1_VALUES[:-1]) / 2
MX_FORMATS = {"mxfp4": 32, "nvfp4": 16}  # block sizes
_NV_GLOBAL = np.float32(448.0 * 6.0)
_E4M3 = ml_dtypes.float8_e4m3fn


def e2m1_encode(y: np.ndarray, ties: str = "even") -> np.ndarray:
    """E2M1 codes (uint8, 0..15) of float32 values ``y``, saturating at ±6.

    ``ties="even"``: half-way values go to the even code (IEEE round to nearest even);
    ``"down"``: to the smaller magnitude (gguf's MXFP4). Zero and values that round to
    zero get code 0 (no negative zero).

    Examples
    --------
    >>> e2m1_encode(np.array([0.25, 0.75, -1.25, 5.0, 100.0], dtype=np.float32))
    array([ 0,  2, 10,  6,  7], dtype=uint8)
    >>> e2m1_encode(np.array([0.75], dtype=np.float32), ties="down")
    array([1], dtype=uint8)
    """
    ties = check_choice(ties, "ties", _TIES)
    y = as_float_array(y, "y", allow_nonfinite=True, allow_empty=True)
    if np.isnan(y).any():
        raise ValueError(f"y must not contain NaN (±inf saturate to ±6); received "
                         f"{int(np.isnan(y).sum())} NaN value(s) in {_describe(y)}")
    return _e2m1_encode(y, ties)


_TIES = ("even", "down")


def _e2m1_encode(y: np.ndarray, ties: str) -> np.ndarray:
    """`e2m1_encode` without validation."""
    a = np.abs(y)
    lo = np.searchsorted(_MIDS, a, side="left").astype(np.uint8)
    if ties == "down":
        idx = lo
    else:
        hi = np.searchsorted(_MIDS, a, side="right").astype(np.uint8)
        idx = np.where(lo == hi, lo, np.where(lo % 2 == 0, lo, hi)).astype(np.uint8)
    return idx | (((y < 0) & (idx > 0)).astype(np.uint8) << np.uint8(3))


def e2m1_decode(codes: np.ndarray) -> np.ndarray:
    """float32 values of E2M1 codes 0..15.

    Examples
    --------
    >>> e2m1_decode(np.array([3, 15], dtype=np.uint8))
    array([ 1.5, -6. ], dtype=float32)
    """
    codes = np.asarray(codes)
    if codes.dtype.kind not in "ui":
        raise TypeError(f"codes must be an integer array of E2M1 codes 0..15; received {_describe(codes)}")
    if codes.size and (codes.min() < 0 or codes.max() > 15):
        raise ValueError(f"codes must be E2M1 codes in [0, 15]; received values in "
                         f"[{codes.min()}, {codes.max()}]")
    return _e2m1_decode(codes.astype(np.uint8, copy=False))


def _e2m1_decode(codes: np.ndarray) -> np.ndarray:
    """`e2m1_decode` of uint8 codes 0..15, without validation."""
    mag = E2M1_VALUES[codes & np.uint8(7)]
    return np.where(codes & np.uint8(8), -mag, mag).astype(np.float32)


def _pack(q: np.ndarray) -> np.ndarray:
    half = q.shape[-1] // 2
    return q[..., :half] | (q[..., half:] << np.uint8(4))


def _unpack(b: np.ndarray) -> np.ndarray:
    return np.concatenate([b & np.uint8(0x0F), b >> np.uint8(4)], axis=-1)


def _e8m0(e: np.ndarray) -> np.ndarray:
    """``2^(e−127)`` as float32 (e = 0: 2^-127, a subnormal; gguf's e8m0 × 2)."""
    e = e.astype(np.uint32)
    return np.where(e == 0, np.uint32(0x00400000), e << np.uint32(23)).astype(np.uint32).view(np.float32)


def _mx_exponent(amax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E8M0 exponents of the blocks, and where a nonzero block's was clamped up to 0."""
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(amax)) - 2 + 127, 0)
    return np.clip(e, 0, 254).astype(np.uint8), e < 0


def _warn_clamped(clamped: np.ndarray, q: np.ndarray) -> None:
    """Warn when nonzero mxfp4 blocks had their exponent clamped to E8M0's smallest scale
    (``clamped (..., 1)`` per block, ``q (..., 32)`` their E2M1 codes)."""
    if not clamped.any():
        return
    lost = int((~(q[clamped[..., 0]] & np.uint8(7)).any(axis=-1)).sum())
    n = int(clamped.sum())
    what = [f"{lost} decode as exact zeros (max |x| ≤ 2^-129)"] if lost else []
    if n > lost:
        what.append(f"{n - lost} keep fewer E2M1 levels (their largest element codes below 6)")
    warnings.warn(
        f"x: {n} of {clamped.size} mxfp4 blocks have max |x| below 2^-125 ({2.0 ** -125:.3g}), "
        f"where the scale 2^(⌊log₂ amax⌋ − 2) is below E8M0's smallest, 2^-127, and is clamped "
        f"to it: {'; '.join(what)}; rescale x if these values matter", UserWarning, stacklevel=3)


@dataclass(frozen=True, eq=False)
class MXCodes:
    """Block bytes ``data (*batch, n, d/block·(1 + block/2))`` (scale byte, then nibbles)
    and, for nvfp4, the float32 per-head scale (batch shape, or ``()``)."""

    data: np.ndarray
    scale: np.ndarray | None
    fmt: str
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored: block scales, packed elements, the float32 scale."""
        return int(self.data.nbytes + (0 if self.scale is None else self.scale.nbytes))


class MXCoder:
    """One side of an ``mxfp4`` or ``nvfp4`` scheme (a :class:`~kvstats.quant.coder.Coder`).

    Parameters
    ----------
    fmt : {"mxfp4", "nvfp4"}
    dim : int
        Head dimension, a multiple of the block (32, 16).
    scale : {"head", "tensor"}
        nvfp4 only: what its float32 scale covers (as in :class:`kvstats.quant.fp8.FP8Coder`);
        mxfp4 accepts only the default "head" (a ValueError otherwise).

    Examples
    --------
    >>> coder = MXCoder("mxfp4", 32)
    >>> x = np.arange(32.0).reshape(1, 32) - 16
    >>> coder.roundtrip(x)[0, :4]      # scale 2^(⌊log₂16⌋−2) = 4; -14/4 = 3.5 is a tie: down
    array([-16., -16., -12., -12.])
    >>> coder.stored_bits(10), MXCoder("nvfp4", 32).stored_bits(10)
    ({'codes': 1280.0, 'scales': 80.0}, {'codes': 1280.0, 'scales': 160.0, 'scale': 32.0})
    """

    def __init__(self, fmt: str, dim: int, scale: str = "head"):
        self.fmt = check_choice(fmt, "fmt", list(MX_FORMATS))
        self.block = MX_FORMATS[self.fmt]
        self.dim = check_block_dim(dim, self.block, self.fmt)
        self.scale = check_choice(scale, "scale", SCALES)
        if self.fmt == "mxfp4" and self.scale != "head":
            raise ValueError(f"scale applies to nvfp4 only (mxfp4 has no float32 scale); "
                             f"received fmt='mxfp4' with scale={scale!r}")
        self.nominal_bits = 4.0

    def _blocks(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(*x.shape[:-1], self.dim // self.block, self.block)

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> MXCodes:
        """Block scales and E2M1 codes (and the nvfp4 float32 scale); a UserWarning for
        nonzero blocks that lose precision to a scale at its smallest (module docstring)."""
        x = as_float_array(x, "x", min_ndim=2)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last axis of length {self.dim}; received {_describe(x)}")
        with np.errstate(over="ignore"):
            x32 = x.astype(np.float32)
        g = None
        if self.fmt == "nvfp4":
            g = amax_scale(x32, self.scale, float(_NV_GLOBAL))
        elif not np.isfinite(x32).all():
            raise ValueError(f"x must be finite in float32 (|x| < 3.4e38); received {_describe(x)}")
        b = self._blocks(x32)
        amax = np.abs(b).max(axis=-1, keepdims=True)
        if self.fmt == "mxfp4":
            e, clamped = _mx_exponent(amax)
            q = _e2m1_encode(b / _e8m0(e), "down")
            _warn_clamped(clamped, q)
            head = e
        else:
            gb = g[..., None]  # (..., 1, 1) against blocks (..., n, d/16, 16)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                want = np.where(gb == 0, np.float32(0), (amax / np.float32(6)) / np.where(gb == 0, 1, gb))
            s = np.minimum(want, np.float32(448)).astype(np.float32).astype(_E4M3)
            den = s.astype(np.float32) * gb
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                y = np.where(den == 0, np.float32(0), b / np.where(den == 0, 1, den)).astype(np.float32)
            q = _e2m1_encode(y, "even")
            head = s.view(np.uint8)
        data = np.concatenate([head, _pack(q)], axis=-1).reshape(*x.shape[:-1], -1)
        scale = None if g is None else g.reshape(x.shape[:-2] if self.scale == "head" else ())
        return MXCodes(data, scale, self.fmt, x.dtype)

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32 only: the block scales cover every float32 magnitude
        (:func:`kvstats.quant.coder.float32_limits`).

        Examples
        --------
        >>> MXCoder("mxfp4", 32).storable_limits(np.full((1, 32), -2.0))
        [('values of magnitude', 3.4028234663852886e+38, 2.0)]
        """
        return float32_limits(x)

    def decode(self, codes: MXCodes) -> Float[np.ndarray, "*batch n d"]:
        """Decoded vectors in the dtype that was encoded."""
        if not isinstance(codes, MXCodes) or codes.fmt != self.fmt:
            raise TypeError(f"codes must be MXCodes of {self.fmt} from MXCoder.encode; "
                            f"received {_describe(codes)}")
        data = codes.data.reshape(*codes.data.shape[:-1], self.dim // self.block, 1 + self.block // 2)
        v = _e2m1_decode(_unpack(data[..., 1:]))
        if self.fmt == "mxfp4":
            out = v * _e8m0(data[..., :1])
        else:
            g = codes.scale.reshape(codes.scale.shape + (1, 1, 1))
            out = (v * data[..., :1].view(_E4M3).astype(np.float32)) * g
        return out.reshape(*codes.data.shape[:-1], self.dim).astype(codes.dtype)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """4 bits per coordinate, 8 per block scale, and 32 per head for nvfp4's scale."""
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        out = {"codes": 4.0 * self.dim * n_tokens,
               "scales": 8.0 * n_tokens * (self.dim // self.block)}
        if self.fmt == "nvfp4":
            out["scale"] = 32.0
        return out

    def describe(self) -> dict[str, Any]:
        """Format, block size and (nvfp4) the float32 scale's extent."""
        info: dict[str, Any] = {"coder": self.fmt, "block": self.block}
        if self.fmt == "nvfp4":
            info["scale"] = self.scale
        return info
