"""llama.cpp's KV-cache block types ``q8_0``, ``q4_0``, ``q4_1``, ``q5_0``, ``q5_1``.

Each vector (one token of one head) is cut into blocks of 32 consecutive coordinates
along the head dimension; each block stores its codes and an fp16 scale ``δ`` (and, for
the ``_1`` types, an fp16 minimum ``m``), in llama.cpp's byte layout (ggml-quants.c,
``block_q4_0`` and friends):

======  =======================================  ==============================  =====
type    codes                                    block bytes                     bits
======  =======================================  ==============================  =====
q8_0    ``q = round(x/δ)``, δ = amax/127         δ, 32 int8                      8.5
q4_0    ``q = ⌊x/δ + 8.5⌋``, δ = xₘ/−8           δ, 16 bytes of nibbles          4.5
q4_1    ``q = ⌊(x−m)/δ + 0.5⌋``, δ = (max−m)/15  δ, m, 16 bytes of nibbles       5.0
q5_0    ``q = ⌊x/δ + 16.5⌋``, δ = xₘ/−16         δ, 4 bytes of 5th bits, 16      5.5
q5_1    ``q = ⌊(x−m)/δ + 0.5⌋``, δ = (max−m)/31  δ, m, 4, 16                     6.0
======  =======================================  ==============================  =====

(xₘ is the block's coordinate of largest magnitude, with its sign; ``round`` rounds half
away from zero; codes are clipped to their range.) Arithmetic is float32, as in
llama.cpp: the input is rounded to float32, the codes are computed with the float32
scale, the scale is then stored as fp16 and decoding multiplies the fp16 scale by the
code. Stored bytes and decoded values equal ``gguf.quants.quantize``/``dequantize`` (the
gguf package's reference of ggml's C code) bit for bit; tests/quant/test_formats.py holds
them against it. Two documented differences, both outside what gguf defines:

- a block whose float32 scale is so small that ``1/δ`` overflows (δ below 1/FLT_MAX ≈
  2.9e-39: max |x| below ≈ 3.7e-37 for q8_0, 2.3e-38 for q4_0) is coded as zero (gguf computes ``x·inf`` and casts NaN to an integer); its
  fp16 scale is 0, so both decode it to zeros;
- a block whose fp16 scale or minimum overflows (|x| beyond ~65504 times the code range,
  e.g. 8.3e6 for q8_0) is refused with a ValueError instead of storing ``inf``.

Tiny blocks. A nonzero block whose fp16 scale (or minimum) is below float16's smallest
normal 2^-14 ≈ 6.1e-5 gets it rounded to a multiple of 2^-24 ≈ 6e-8, so the whole block
is decoded with a wrong factor (q8_0 at max |x| ~ 3e-4: twice the error of a normal
block; from δ < 3e-8, max |x| < 3.8e-6 for q8_0, the scale is 0 and the block decodes to
zeros). llama.cpp stores the same bytes (kept: they equal gguf's), and
:func:`block_encode` warns (``UserWarning``) with how many blocks' fp16 side values put
their decoded values off by more than float16's normal rounding 2^-11 of the block's
max |x|, and how many decode to zeros, as :mod:`kvstats.quant.uniform` does for its
float16 scales. Only blocks with max |x| below levels·2^-14 (levels + 1 for the ``_1``
types) can be: 7.8e-3 for q8_0, 4.9e-4 for q4_0, 9.8e-4 for q5_0 and q4_1, 2.0e-3 for q5_1.

The head dimension must be a multiple of 32 (a ValueError otherwise; no padding). The
coders implement :class:`kvstats.quant.coder.Coder`; every coordinate is coded, so a
block type codes ``d`` coordinates (``SchemeDef.coded_dim``).
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from kvstats._checks import _describe, as_float_array, check_choice, check_int
from kvstats.quant.coder import float32_limits

__all__ = ["BLOCK_TYPES", "BLOCK", "BlockCodes", "BlockTypeCoder", "block_encode", "block_decode",
           "check_block_dim"]

BLOCK = 32
_FP16_BITS = 16
_F16INFO = np.finfo(np.float16)
_F16_MAX = float(_F16INFO.max)
_FP16_NORMAL = float(_F16INFO.smallest_normal)     # 2^-14
_FP16_STEP = float(_F16INFO.smallest_subnormal)    # 2^-24: float16's resolution below 2^-14
_FP16_HALF_ULP = float(_F16INFO.eps) / 2           # 2^-11: a normal fp16's relative rounding


@dataclass(frozen=True)
class _Type:
    code_bits: int
    has_min: bool      # the "_1" types store a minimum; the "_0" types are symmetric
    levels: int        # divisor of the scale: 127, 8, 15, 16, 31

    @property
    def block_bytes(self) -> int:
        return 2 + 2 * self.has_min + BLOCK * self.code_bits // 8


BLOCK_TYPES: dict[str, _Type] = {
    "q8_0": _Type(8, False, 127), "q4_0": _Type(4, False, 8), "q4_1": _Type(4, True, 15),
    "q5_0": _Type(5, False, 16), "q5_1": _Type(5, True, 31),
}


def check_block_dim(dim: int, block: int, fmt: str) -> int:
    """``dim`` if it is a positive multiple of ``block``, else a ValueError naming the format.

    Examples
    --------
    >>> check_block_dim(128, 32, "q4_0")
    128
    """
    dim = check_int(dim, "dim", low=1)
    if dim % block:
        raise ValueError(f"dim must be a multiple of {block} for {fmt} (blocks of {block} "
                         f"coordinates along the head dimension; no padding); received {dim}")
    return dim


def _as_blocks(x: np.ndarray, block: int) -> np.ndarray:
    """``x (..., d)`` as float32 blocks ``(..., d/block, block)``."""
    with np.errstate(over="ignore"):     # beyond float32: inf, refused with the scales
        x32 = x.astype(np.float32)
    return x32.reshape(*x.shape[:-1], x.shape[-1] // block, block)


def _inverse(scale: np.ndarray) -> np.ndarray:
    """``1/δ``, 0 where δ = 0 or where ``1/δ`` overflows (the block is coded as zero)."""
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.where(scale == 0, np.float32(0), np.float32(1) / scale)
    return np.where(np.isfinite(inv), inv, np.float32(0)).astype(np.float32)


def _fp16(v: np.ndarray, what: str, fmt: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = v.astype(np.float16)
    if not np.isfinite(h).all():
        worst = float(np.max(np.abs(v)))
        raise ValueError(f"x is beyond the range of {fmt}: a block's fp16 {what} would be "
                         f"{worst:.4g} (fp16 holds at most 65504); received x with such a block")
    return h


def _warn_tiny_blocks(fmt: str, top: np.ndarray, scale: np.ndarray, scale16: np.ndarray,
                      lo: np.ndarray | None = None, lo16: np.ndarray | None = None) -> None:
    """Warn when nonzero blocks lose precision to an fp16 scale (or minimum) below float16's
    normal range; ``top`` is each block's max |x| (float32 arrays, one value per block)."""
    sub = np.abs(scale) < _FP16_NORMAL
    cand = (top > 0) & (sub if lo is None else sub | (np.abs(lo) < _FP16_NORMAL))
    if not cand.any():
        return                                       # the usual case: one cheap pass over the scales
    levels = BLOCK_TYPES[fmt].levels
    top64 = top[cand].astype(np.float64)
    # a decoded value moves by |code|·|δ16 − δ| + |m16 − m| ≤ levels·|δ16 − δ| + |m16 − m|
    off_s = levels * np.abs(scale16[cand].astype(np.float64) - scale[cand].astype(np.float64))
    off = off_s
    lost = scale16[cand] == 0
    # only the subnormal side values' share counts: a normal one rounds by 2^-11 relative
    own = np.where(sub[cand], off_s, 0.0)
    if lo is not None:
        off_m = np.abs(lo16[cand].astype(np.float64) - lo[cand].astype(np.float64))
        off = off_s + off_m
        lost &= lo16[cand] == 0
        own = own + np.where(np.abs(lo[cand]) < _FP16_NORMAL, off_m, 0.0)
    hit = lost | (own > _FP16_HALF_ULP * top64)
    if not hit.any():
        return
    n_lost, kept = int(lost.sum()), hit & ~lost
    what = [f"{n_lost} decode as exact zeros"] if n_lost else []
    if kept.any():
        what.append(f"{int(kept.sum())} decode with values off by up to "
                    f"{float((off[kept] / top64[kept]).max()):.2g} of the block's max |x| (a normal "
                    f"float16 rounds by at most {_FP16_HALF_ULP:.2g} relative)")
    side = "scale or minimum" if lo is not None else "scale"
    warnings.warn(
        f"x: {int(hit.sum())} of {top.size} {fmt} blocks have an fp16 {side} below float16's "
        f"smallest normal ({_FP16_NORMAL:.3g}; float16's step there is {_FP16_STEP:.3g}): "
        f"{'; '.join(what)}; llama.cpp stores the same bytes; rescale x if these values matter",
        UserWarning, stacklevel=3)


def _round_away(v: np.ndarray) -> np.ndarray:
    """Round half away from zero in float32 (ggml's ``roundf``; gguf's ``np_roundf``)."""
    a = np.abs(v)
    floored = np.floor(a)
    return np.sign(v) * (floored + np.floor(np.float32(2) * (a - floored)))


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """Codes ``(..., 32)`` → 16 bytes: low nibble coordinate j, high nibble j + 16."""
    return (q[..., :BLOCK // 2] & np.uint8(0x0F)) | (q[..., BLOCK // 2:] << np.uint8(4))


def _unpack_nibbles(b: np.ndarray) -> np.ndarray:
    return np.concatenate([b & np.uint8(0x0F), b >> np.uint8(4)], axis=-1)


def _side_values(b: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Each float32 block's scale δ, minimum m (None for the ``_0`` types) and max |x|, as
    llama.cpp computes them (before the fp16 rounding), for ``b (..., blocks, 32)``."""
    spec = BLOCK_TYPES[fmt]
    with np.errstate(over="ignore", invalid="ignore"):
        if spec.has_min:
            lo, hi = b.min(axis=-1, keepdims=True), b.max(axis=-1, keepdims=True)
            return (hi - lo) / np.float32(spec.levels), lo, np.maximum(np.abs(lo), np.abs(hi))
        if fmt == "q8_0":
            top = np.abs(b).max(axis=-1, keepdims=True)
            return top / np.float32(spec.levels), None, top
        xm = np.take_along_axis(b, np.abs(b).argmax(axis=-1)[..., None], axis=-1)
        return xm / np.float32(-spec.levels), None, np.abs(xm)


def block_encode(x: Float[np.ndarray, "*batch d"], fmt: str) -> np.ndarray:
    """The bytes llama.cpp stores for ``x`` in block type ``fmt``: ``(*batch, d/32·bytes)`` uint8.

    Parameters
    ----------
    x : array ``(*batch, d)``
        Finite floats; ``d`` a multiple of 32. Rounded to float32 first.
    fmt : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}

    Warns
    -----
    UserWarning
        When nonzero blocks get an fp16 scale (or minimum) below float16's smallest normal
        that puts their decoded values off by more than 2^-11 of the block's max |x|, or
        decode to zeros (see the module docstring); the bytes are llama.cpp's all the same.

    Examples
    --------
    >>> x = np.linspace(-1, 1, 32)
    >>> b = block_encode(x, "q4_0")
    >>> b.shape, b.dtype                  # 2 bytes of fp16 scale + 16 bytes of nibbles
    ((18,), dtype('uint8'))
    >>> float(np.abs(block_decode(b, "q4_0", 32) - x).max()) <= 1 / 8
    True
    """
    fmt = check_choice(fmt, "fmt", list(BLOCK_TYPES))
    spec = BLOCK_TYPES[fmt]
    x = as_float_array(x, "x", min_ndim=1)
    check_block_dim(x.shape[-1], BLOCK, fmt)
    b = _as_blocks(x, BLOCK)
    scale, lo, top = _side_values(b, fmt)
    inv = _inverse(scale)
    # x beyond float32 is inf here (inf * 0 = NaN): the scale check below refuses it
    with np.errstate(over="ignore", invalid="ignore"):
        if spec.has_min:
            q = np.trunc((b - lo) * inv + np.float32(0.5))
        elif fmt == "q8_0":
            q = _round_away(b * inv)
        else:
            q = np.trunc(b * inv + np.float32(spec.levels + 0.5))
    scale16 = _fp16(scale, "scale", fmt)
    lo16 = None if lo is None else _fp16(lo, "minimum", fmt)
    parts = [scale16.view(np.uint8)] + ([] if lo16 is None else [lo16.view(np.uint8)])
    _warn_tiny_blocks(fmt, top, scale, scale16, lo, lo16)   # after the overflow refusals
    if fmt == "q8_0":
        parts.append(q.astype(np.int8).view(np.uint8))
    else:
        q = np.clip(q, 0, 2 ** spec.code_bits - 1).astype(np.uint8)
        if spec.code_bits == 5:
            parts.append(np.packbits(q >> np.uint8(4), axis=-1, bitorder="little"))
        parts.append(_pack_nibbles(q))
    out = np.concatenate(parts, axis=-1)
    return out.reshape(*x.shape[:-1], -1)


def block_decode(data: np.ndarray, fmt: str, dim: int) -> Float[np.ndarray, "*batch d"]:
    """float32 values of llama.cpp block bytes ``(*batch, d/32·bytes)`` (inverse of :func:`block_encode`).

    Examples
    --------
    >>> block_decode(block_encode(np.ones(32), "q8_0"), "q8_0", 32)[:3]  # δ = 1/127 in fp16
    array([0.99993896, 0.99993896, 0.99993896], dtype=float32)
    """
    fmt = check_choice(fmt, "fmt", list(BLOCK_TYPES))
    spec = BLOCK_TYPES[fmt]
    dim = check_block_dim(dim, BLOCK, fmt)
    data = np.asarray(data)
    n_blocks = dim // BLOCK
    if data.dtype != np.uint8 or data.ndim < 1 or data.shape[-1] != n_blocks * spec.block_bytes:
        raise ValueError(f"data must be uint8 with last axis {n_blocks * spec.block_bytes} "
                         f"({fmt}, dim={dim}); received {_describe(data)}")
    b = np.ascontiguousarray(data).reshape(*data.shape[:-1], n_blocks, spec.block_bytes)
    scale = b[..., 0:2].copy().view(np.float16).astype(np.float32)
    at = 2
    if spec.has_min:
        lo = b[..., 2:4].copy().view(np.float16).astype(np.float32)
        at = 4
    if fmt == "q8_0":
        q = b[..., at:].view(np.int8).astype(np.float32)
        out = q * scale
    else:
        q = _unpack_nibbles(b[..., -BLOCK // 2:])
        if spec.code_bits == 5:
            q = q | (np.unpackbits(b[..., at:at + 4], axis=-1, bitorder="little") << np.uint8(4))
        if spec.has_min:
            out = scale * q.astype(np.float32) + lo
        else:
            out = scale * (q.astype(np.int8) - np.int8(spec.levels)).astype(np.float32)
    return out.reshape(*data.shape[:-1], dim)


# --------------------------------------------------------------------------- the coder
@dataclass(frozen=True, eq=False)
class BlockCodes:
    """llama.cpp block bytes of ``(*batch, n, d)`` vectors: ``data (*batch, n, d/32·bytes)``."""

    data: np.ndarray
    fmt: str
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored: scales, minima and codes, exactly as llama.cpp lays them out."""
        return int(self.data.nbytes)


class BlockTypeCoder:
    """One side of a llama.cpp block-type scheme (a :class:`~kvstats.quant.coder.Coder`).

    Parameters
    ----------
    fmt : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}
    dim : int
        Head dimension, a multiple of 32.

    Examples
    --------
    >>> coder = BlockTypeCoder("q4_0", 64)
    >>> coder.stored_bits(10)               # 4 bits per coordinate + one fp16 scale per 32
    {'codes': 2560.0, 'scales': 320.0}
    >>> x = np.random.default_rng(0).standard_normal((10, 64))
    >>> bool(np.array_equal(coder.roundtrip(x), coder.decode(coder.encode(x))))
    True
    """

    def __init__(self, fmt: str, dim: int):
        self.fmt = check_choice(fmt, "fmt", list(BLOCK_TYPES))
        self.dim = check_block_dim(dim, BLOCK, self.fmt)
        self.spec = BLOCK_TYPES[self.fmt]
        self.nominal_bits = float(self.spec.code_bits)

    def _check(self, x: np.ndarray) -> np.ndarray:
        x = as_float_array(x, "x", min_ndim=1)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have last axis of length {self.dim}; received {_describe(x)}")
        return x

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> BlockCodes:
        """The block bytes of every vector."""
        x = self._check(x)
        return BlockCodes(block_encode(x, self.fmt), self.fmt, x.dtype)

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32, the blocks' fp16 minimum (``_1`` types) and fp16 scale as `encode`
        computes them (the scale rounded to fp16: it overflows from halfway past 65504).

        Examples
        --------
        >>> x = np.zeros((1, 32))
        >>> x[0, 0] = 1e7
        >>> BlockTypeCoder("q8_0", 32).storable_limits(x)[1]      # δ = max |x| / 127
        ("block scales (q8_0's float16 scale)", 65504.0, inf)
        """
        x = self._check(x)
        if not x.size:
            return []
        scale, lo, _ = _side_values(_as_blocks(x, BLOCK), self.fmt)
        with np.errstate(over="ignore"):
            scale16 = float(np.abs(scale).max().astype(np.float16))
        out = float32_limits(x)
        if lo is not None:
            out.append((f"block minima of magnitude ({self.fmt}'s float16 minimum)", _F16_MAX,
                        float(np.abs(lo).max())))
        return out + [(f"block scales ({self.fmt}'s float16 scale)", _F16_MAX, scale16)]

    def decode(self, codes: BlockCodes) -> Float[np.ndarray, "*batch n d"]:
        """Decoded vectors in the dtype that was encoded."""
        if not isinstance(codes, BlockCodes) or codes.fmt != self.fmt:
            raise TypeError(f"codes must be BlockCodes of {self.fmt} from BlockTypeCoder.encode; "
                            f"received {_describe(codes)}")
        return block_decode(codes.data, self.fmt, self.dim).astype(codes.dtype)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))`` (the packing is a few byte operations: no faster path)."""
        return self.decode(self.encode(x))

    def stored_bits(self, n_tokens: int) -> dict[str, float]:
        """Code bits, fp16 scales (and fp16 minima) for ``n_tokens`` vectors."""
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        blocks = n_tokens * self.dim // BLOCK
        out = {"codes": float(self.spec.code_bits * self.dim * n_tokens),
               "scales": float(_FP16_BITS * blocks)}
        if self.spec.has_min:
            out["minima"] = float(_FP16_BITS * blocks)
        return out

    def describe(self) -> dict[str, Any]:
        """Format, block size and code bits."""
        return {"coder": self.fmt, "block": BLOCK, "code_bits": self.spec.code_bits,
                "minimum": self.spec.has_min}
