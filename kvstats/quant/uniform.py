"""KIVI-style asymmetric uniform quantization (Liu et al., 2024).

(Over ~450 lines as one idea: uniform asymmetric group coding and its two users, the
per-token value coder and KIVI's key/value coders, which share the grouping and the
float16 scale/zero handling.)

Each group of ``group_size`` consecutive elements along an axis is coded with ``bits``
bits against its own minimum and range:

    zero = min(group),  scale = (max(group) − zero) / (2^bits − 1),
    code = round((x − zero) / scale) ∈ {0, …, 2^bits − 1},   x̂ = zero + scale · code.

``zero`` and ``scale`` are stored as float16 and the codes are computed against the
stored (rounded) values, so decoding uses exactly what is stored. ``zero`` is rounded
*down* and ``scale`` *up* to float16, so every element stays inside
[zero, zero + (2^bits − 1)·scale] and the round-trip error is at most ``scale/2`` per
element — an exact bound, not an approximate one, for the float64 decode; float32 input
decodes to float32, that value rounded once, which adds up to half a float32 ulp of x̂
(more than ``scale/2`` itself where a fine step meets large values, e.g. a group near
3000 spanning 1e-3 at 8 bits). A constant group (max = min) whose
value is a float16 number gets scale 0 and decodes exactly; any other constant group
decodes within the same ``scale/2`` bound (scale is then at most one float16 spacing of
the value). Never NaN.

Small values. float16 has an absolute resolution of ``2^-24`` ≈ 6e-8 near zero (its
smallest subnormal) and loses relative precision below ``2^-14`` ≈ 6.1e-5 (its smallest
normal). Two rules keep tiny inputs sensible:

- A group minimum in ``[-2^-25, 0)`` (a value float16 itself rounds to −0) gives
  ``zero = 0``, not the float16 below it (−2^-24): rounding *down* there would start the
  grid a whole subnormal step below the data, and with 1 bit a value of 1e-30 decoded to
  −6e-8. Such a group's scale is at least ``2^-24``, so the few elements left below the
  grid (by at most ``2^-25``) decode to 0 within the same ``scale/2`` bound.
- A nonzero group whose values all lie below ``2^-14`` in magnitude (its zero and scale
  are float16 subnormals or zero) is still coded, within ``scale/2``, but ``scale`` is
  then no finer than ``2^-24``, so its relative precision is lost (a group of 1e-30s
  decodes to zeros): :func:`uniform_quantize` warns (``UserWarning``, naming the side:
  ``K``, ``V`` or ``x``) with the number of such groups.

Groups whose minimum is not in ``[-2^-25, 0)`` are coded exactly as before these rules.

Coders (the :class:`kvstats.quant.coder.Coder` protocol, one side of a scheme):
:class:`UniformTokenCoder` (per token, the QJL paper's values), and KIVI's
:class:`KIVIKeyCoder` (keys per channel, groups of tokens) and :class:`KIVIValueCoder`
(values per token, groups of channels), each keeping the most recent ``residual`` tokens
in float16. :class:`KIVIQuantizer` runs both sides together.
"""
# ~600 lines: the uniform codec and the three coders built on it belong together.

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import warnings

import numpy as np
from jaxtyping import Float

from kvstats._checks import as_float_array, check_int
from kvstats.quant.coder import float32_limits
from kvstats.quant.packing import pack_codes, unpack_codes

__all__ = ["UniformCodes", "uniform_quantize", "uniform_dequantize", "UniformTokenCoder",
           "KIVISideCodes", "KIVIKeyCoder", "KIVIValueCoder", "KIVICodes", "KIVIQuantizer"]

_FP16_BITS = 16
_FP16_MAX = float(np.finfo(np.float16).max)
_FP16_TINY = float(np.finfo(np.float16).smallest_subnormal)  # 2**-24: the grid step near 0
_FP16_NORMAL = float(np.finfo(np.float16).smallest_normal)   # 2**-14: below, precision is lost


def _fp16_down(v: np.ndarray) -> np.ndarray:
    """Largest float16 ≤ v (elementwise, v float64); overflow gives ±inf, checked by the caller."""
    with np.errstate(over="ignore"):  # also the unselected nextafter past ±65504
        h = v.astype(np.float16)
        return np.where(h.astype(np.float64) > v, np.nextafter(h, np.float16(-np.inf)), h)


def _fp16_up(v: np.ndarray) -> np.ndarray:
    """Smallest float16 ≥ v (elementwise, v float64); overflow gives ±inf, checked by the caller."""
    with np.errstate(over="ignore"):  # also the unselected nextafter past ±65504
        h = v.astype(np.float16)
        return np.where(h.astype(np.float64) < v, np.nextafter(h, np.float16(np.inf)), h)


@dataclass(frozen=True, eq=False)
class UniformCodes:
    """Stored uniform codes.

    With ``x`` moved so that the quantized ``axis`` is last (shape ``(*rest, L)``):
    ``codes``: uint8 bitstream ``(*rest, ceil(L·bits/8))`` from
    :func:`kvstats.quant.packing.pack_codes` (code i at stream bits [i·bits, (i+1)·bits));
    ``scale``, ``zero``: float16 ``(*rest, ceil(L/group_size))``.
    ``shape``/``dtype``/``axis`` describe the original array.
    """

    codes: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    bits: int
    axis: int
    group_size: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored (packed codes, scales, zeros)."""
        return int(self.codes.nbytes + self.scale.nbytes + self.zero.nbytes)

    def stored_bits(self) -> dict[str, int]:
        """Bits of information stored, by part (codes count ``bits`` each, fp16 16 each).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.quant.uniform import uniform_quantize
        >>> uniform_quantize(np.ones((4, 64)), 2, group_size=32).stored_bits()
        {'codes': 512, 'scales': 128, 'zeros': 128}
        """
        n_elem = int(np.prod(self.shape))
        return {"codes": self.bits * n_elem, "scales": _FP16_BITS * self.scale.size,
                "zeros": _FP16_BITS * self.zero.size}


def _grouped(x: np.ndarray, group_size: int) -> np.ndarray:
    """``(*rest, L)`` → ``(*rest, G, group_size)``, the last group padded by repeating its last element."""
    length = x.shape[-1]
    n_groups = -(-length // group_size)
    pad = n_groups * group_size - length
    if pad:
        # Edge padding leaves each group's min and max unchanged.
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)], mode="edge")
    return x.reshape(*x.shape[:-1], n_groups, group_size)


def uniform_quantize(x: Float[np.ndarray, "..."], bits: int, axis: int = -1,
                     group_size: int = 32, *, name: str = "x") -> UniformCodes:
    """Asymmetric min/max uniform quantization in groups along ``axis``.

    Parameters
    ----------
    x : array_like
        Finite values (float32/float64); each group's values must lie within float16
        range (|x| ≤ 65504), since zero and scale are stored as float16.
    bits : int
        1..8 bits per element.
    axis : int
        Axis along which consecutive elements are grouped (e.g. ``-2``: groups of tokens
        per channel, KIVI keys; ``-1``: groups of channels per token, KIVI values).
    group_size : int
        Elements per group (≥ 1); a final partial group is its own group.
    name : str
        What ``x`` is (``"K"``, ``"V"``), for error messages and warnings.

    Returns
    -------
    UniformCodes

    Warns
    -----
    UserWarning
        Some nonzero group lies entirely below float16's smallest normal (6.1e-5) in
        magnitude: its zero and scale are subnormal, so it decodes with absolute error up
        to ``scale/2`` (at least 3e-8 unless the group is constant), however small its
        values (see the module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.uniform import uniform_quantize, uniform_dequantize
    >>> x = np.array([[0.0, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0]])
    >>> c = uniform_quantize(x, 2, axis=-1, group_size=4)
    >>> uniform_dequantize(c).tolist()
    [[0.0, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0]]
    >>> c.scale.tolist(), c.zero.tolist()
    ([[1.0], [0.0]], [[0.0], [5.0]])
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (e.g. 'K' or 'V'); received {name!r}")
    x = as_float_array(x, name, min_ndim=1)
    bits = check_int(bits, "bits", low=1, high=8)
    axis = check_int(axis, "axis", low=-x.ndim, high=x.ndim - 1) % x.ndim
    group_size = check_int(group_size, "group_size", low=1)
    if np.abs(x).max() > _FP16_MAX:
        raise ValueError(f"{name} must lie within float16 range [-{_FP16_MAX}, {_FP16_MAX}] because "
                         f"zero and scale are stored as float16; received max |{name}| = "
                         f"{float(np.abs(x).max()):.6g}")
    levels = 2 ** bits - 1
    xm = np.moveaxis(x, axis, -1).astype(np.float64)
    length = xm.shape[-1]
    g = _grouped(xm, group_size)
    g_min, g_max = g.min(axis=-1), g.max(axis=-1)
    # A minimum that float16 rounds to -0 starts the grid at 0, not at -2**-24 (a whole
    # subnormal step below the data; see the module docstring).
    flushed = (g_min < 0) & (g_min >= -_FP16_TINY / 2)
    zero16 = _fp16_down(np.where(flushed, 0.0, g_min))
    zero = zero16.astype(np.float64)
    ideal = (g_max - zero) / levels
    # flushed groups: a step of at least 2**-24 keeps the elements below the grid (by at
    # most 2**-25, decoded to 0) within scale/2
    scale16 = _fp16_up(np.where(flushed, np.maximum(ideal, _FP16_TINY), ideal))
    for _ in range(3):  # guard the float64 rounding of the division: zero + L·scale ≥ max
        short = zero + levels * scale16.astype(np.float64) < g_max
        if not short.any():
            break
        scale16 = np.where(short, np.nextafter(scale16, np.float16(np.inf)), scale16)
    if not (np.isfinite(scale16).all() and np.isfinite(zero16).all()):
        raise ValueError(f"{name} has a group whose range (max - min) / (2**bits - 1) exceeds float16 "
                         f"range ({_FP16_MAX}); received bits={bits}, max range "
                         f"{float((g_max - g_min).max()):.6g}")
    _warn_subnormal_groups(np.maximum(np.abs(g_min), np.abs(g_max)), scale16, name)
    scale = scale16.astype(np.float64)
    safe = np.where(scale > 0, scale, 1.0)  # scale 0 only for constant groups: code 0, x̂ = zero
    codes = np.clip(np.rint((g - zero[..., None]) / safe[..., None]), 0, levels)
    codes = codes.astype(np.uint8).reshape(*xm.shape[:-1], -1)[..., :length]
    return UniformCodes(codes=pack_codes(codes, bits), scale=scale16, zero=zero16, bits=bits,
                        axis=axis, group_size=group_size, shape=x.shape, dtype=x.dtype)


def _zero_scale_limits(x: np.ndarray, bits: int) -> list[tuple[str, float, float]]:
    """float32 and :func:`uniform_quantize`'s float16 zero and scale, per value (a group's other values may come later):
    |x| ≤ 65504 (its check), at 1 bit (scale = max − min) |x| ≤ 32752; from 2 bits (max − min)/3 fits."""
    x, tag = np.asarray(x), ", 1 bit: a bound sufficient for any group" if bits == 1 else ""
    return float32_limits(x) + [(f"values of magnitude (float16 zero and scale{tag})", _FP16_MAX / (2 if tag else 1),
                                 float(np.max(np.abs(x), initial=0.0)))]


def _warn_subnormal_groups(magnitude: np.ndarray, scale16: np.ndarray, name: str) -> None:
    """Warn when nonzero groups lie entirely below float16's smallest normal (precision lost)."""
    low = (magnitude > 0) & (magnitude < _FP16_NORMAL)
    if low.any():
        worst = float(scale16[low].astype(np.float64).max()) / 2
        warnings.warn(
            f"{name}: {int(low.sum())} of {low.size} groups have all values below float16's smallest "
            f"normal ({_FP16_NORMAL:.3g}) in magnitude (smallest group max {float(magnitude[low].min()):.3g}): "
            f"their float16 zero and scale are subnormal (float16's resolution there is "
            f"{_FP16_TINY:.3g}), so they decode with absolute error up to {worst:.3g} and lose "
            f"their relative precision; "
            f"rescale {name} if these values matter", UserWarning, stacklevel=3)


def uniform_dequantize(codes: UniformCodes) -> Float[np.ndarray, "..."]:
    """Decode :class:`UniformCodes` to an array of the original shape and dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.uniform import uniform_quantize, uniform_dequantize
    >>> x = np.linspace(-1, 1, 64).reshape(8, 8)
    >>> c = uniform_quantize(x, 4, axis=0, group_size=8)
    >>> bool(np.all(np.abs(uniform_dequantize(c) - x) <= c.scale.max() / 2))
    True
    """
    if not isinstance(codes, UniformCodes):
        raise TypeError(f"codes must be UniformCodes from uniform_quantize; "
                        f"received {type(codes).__name__}")
    moved = codes.shape[:codes.axis] + codes.shape[codes.axis + 1:] + (codes.shape[codes.axis],)
    length = moved[-1]
    ints = unpack_codes(codes.codes, codes.bits, length).astype(np.float64)
    g = _grouped(ints, codes.group_size)
    x_hat = codes.zero.astype(np.float64)[..., None] + codes.scale.astype(np.float64)[..., None] * g
    x_hat = x_hat.reshape(*moved[:-1], -1)[..., :length]
    return np.moveaxis(x_hat, -1, codes.axis).astype(codes.dtype)


# --------------------------------------------------------------------------- coders
class UniformTokenCoder:
    """Per-token asymmetric uniform coder (the QJL paper's value quantizer); a :class:`Coder`.

    Each token's ``dim`` channels are coded in groups of ``group_size`` with
    :func:`uniform_quantize` along the last axis: ``bits`` per element and an fp16 scale
    and zero per group.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.uniform import UniformTokenCoder
    >>> coder = UniformTokenCoder(2, 64, group_size=32)
    >>> x = np.random.default_rng(0).standard_normal((10, 64))
    >>> bool(np.array_equal(coder.roundtrip(x), coder.decode(coder.encode(x))))
    True
    >>> coder.stored_bits(10)
    {'codes': 1280, 'scale_zero': 640}
    """

    def __init__(self, bits: int, dim: int, group_size: int, *, name: str = "V"):
        self.bits = check_int(bits, "bits", low=1, high=8)
        self.dim = check_int(dim, "dim", low=1)
        self.group_size = check_int(group_size, "group_size", low=1)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str (e.g. 'K' or 'V'); received {name!r}")
        self.name = name  # the side, in messages (the qjl scheme codes its values with it)
        self.nominal_bits = self.bits

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> UniformCodes:
        """:func:`uniform_quantize` along the channels (last axis of length ``dim``)."""
        shape = np.shape(x)  # the values themselves are checked by uniform_quantize
        if shape and shape[-1] != self.dim:
            raise ValueError(f"{self.name} must have last dimension dim={self.dim}; "
                             f"received shape {shape}")
        return uniform_quantize(x, self.bits, axis=-1, group_size=self.group_size, name=self.name)

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32 and the float16 zero and scale (the coder protocol's ranges).

        Examples
        --------
        >>> from kvstats.quant.uniform import UniformTokenCoder
        >>> UniformTokenCoder(1, 4, 4).storable_limits([[1.0, -4e4, 0.0, 0.0]])[1]
        ('values of magnitude (float16 zero and scale, 1 bit: a bound sufficient for any group)', 32752.0, 40000.0)
        """
        return _zero_scale_limits(x, self.bits)

    def decode(self, codes: UniformCodes) -> Float[np.ndarray, "*batch n d"]:
        """:func:`uniform_dequantize`."""
        return uniform_dequantize(codes)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def stored_bits(self, n_tokens: int) -> dict[str, int]:
        """``bits·d`` code bits and ``2·16·ceil(d/group_size)`` scale/zero bits per token."""
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        groups_per_token = -(-self.dim // self.group_size)
        return {"codes": self.bits * self.dim * n_tokens,
                "scale_zero": 2 * _FP16_BITS * groups_per_token * n_tokens}

    def describe(self) -> dict[str, Any]:
        """Bits and group size."""
        return {"coder": "uniform_per_token", "bits": self.bits, "group_size": self.group_size}


# --------------------------------------------------------------------------- KIVI
@dataclass(frozen=True, eq=False)
class KIVISideCodes:
    """One KIVI side: uniform codes of the first ``N − R`` tokens (None when none) and the
    float16 window of the last ``R = min(residual, N)`` tokens."""

    quantized: UniformCodes | None
    window: np.ndarray
    n_tokens: int
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored (codes, scales, zeros, window)."""
        q = 0 if self.quantized is None else self.quantized.nbytes
        return int(q + self.window.nbytes)


class _KIVICoder:
    """A KIVI side: uniform codes along ``_axis`` and a float16 window of recent tokens."""

    _axis: int      # -2: groups of tokens per channel (keys); -1: groups of channels (values)
    _kind: str      # the "coder" of describe()
    _name: str      # "K" or "V", for error messages

    def __init__(self, bits: int, dim: int, group_size: int = 32, residual: int = 32):
        self.bits = check_int(bits, "bits", low=1, high=8)
        self.dim = check_int(dim, "dim", low=1)
        self.group_size = check_int(group_size, "group_size", low=1)
        self.residual = check_int(residual, "residual", low=0)
        self.nominal_bits = self.bits

    def _window(self, x: np.ndarray) -> np.ndarray:
        if x.size and np.abs(x).max() > _FP16_MAX:
            raise ValueError(f"{self._name} window tokens must lie within float16 range; "
                             f"received max |{self._name}| = {float(np.abs(x).max()):.6g}")
        return x.astype(np.float16)

    def encode(self, x: Float[np.ndarray, "*batch n d"]) -> KIVISideCodes:
        """Quantize all but the last ``residual`` tokens; keep those in float16."""
        x = as_float_array(x, self._name, min_ndim=2)
        if x.shape[-1] != self.dim:
            raise ValueError(f"{self._name} must have last dimension dim={self.dim}; "
                             f"received shape {x.shape}")
        n_tokens = x.shape[-2]
        n_q = max(n_tokens - self.residual, 0)
        quantized = None
        if n_q:
            quantized = uniform_quantize(x[..., :n_q, :], self.bits, axis=self._axis,
                                         group_size=self.group_size, name=self._name)
        return KIVISideCodes(quantized, self._window(x[..., n_q:, :]), n_tokens, x.dtype)

    def storable_limits(self, x: Float[np.ndarray, "*batch n d"]) -> list[tuple[str, float, float]]:
        """float32 and the float16 zero, scale and window (the coder protocol's ranges).

        Examples
        --------
        >>> from kvstats.quant.uniform import KIVIKeyCoder
        >>> KIVIKeyCoder(2, 4).storable_limits([[1.0, -4e4, 0.0, 0.0]])[1]
        ('values of magnitude (float16 zero and scale)', 65504.0, 40000.0)
        """
        return _zero_scale_limits(x, self.bits)

    def decode(self, codes: KIVISideCodes) -> Float[np.ndarray, "*batch n d"]:
        """Decoded tokens, then the window, in the encoded dtype."""
        if not isinstance(codes, KIVISideCodes):
            raise TypeError(f"codes must be KIVISideCodes from {type(self).__name__}.encode; "
                            f"received {type(codes).__name__}")
        w = codes.window.astype(codes.dtype)
        if codes.quantized is None:
            return w
        return np.concatenate([uniform_dequantize(codes.quantized), w], axis=-2)

    def roundtrip(self, x: Float[np.ndarray, "*batch n d"]) -> Float[np.ndarray, "*batch n d"]:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def _groups(self, n_q: int) -> int:
        raise NotImplementedError

    def stored_bits(self, n_tokens: int) -> dict[str, int]:
        """Bits stored for ``n_tokens`` tokens: codes, fp16 scales and zeros, fp16 window.

        Codes count ``bits`` each, not the padding of packing them into whole bytes (the
        rule of every coder): the keys pack each channel's codes along the tokens, so the
        bytes held carry up to 7 more bits per channel (2-bit keys at d = 128, N = 37 with
        the default 32-token window: 6 per channel, +1.1 % of the keys' bits).
        """
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        n_q = max(n_tokens - self.residual, 0)
        groups = self._groups(n_q)
        return {"codes": self.bits * n_q * self.dim, "scales": _FP16_BITS * groups,
                "zeros": _FP16_BITS * groups, "window": _FP16_BITS * (n_tokens - n_q) * self.dim}

    def describe(self) -> dict[str, Any]:
        """Every setting (bits, group size, window, the grouping of each KIVI side)."""
        return {"coder": self._kind, "quantizer": "kivi", "bits": self.bits,
                "group_size": self.group_size, "residual": self.residual,
                "keys": "per_channel (groups of tokens)",
                "values": "per_token (groups of channels)", "scale_zero_dtype": "float16"}


class KIVIKeyCoder(_KIVICoder):
    """KIVI keys: per channel (min/max over groups of ``group_size`` tokens), the last
    ``residual`` tokens in float16; a :class:`Coder`.

    Stored bits for N tokens, R = min(residual, N), n = N − R: codes ``bits·n·d``, scales
    and zeros ``16·ceil(n/group_size)·d`` each, window ``16·R·d``.

    Examples
    --------
    >>> from kvstats.quant.uniform import KIVIKeyCoder
    >>> coder = KIVIKeyCoder(2, 64, group_size=32, residual=32)
    >>> sum(coder.stored_bits(100).values()) / (100 * 64)  # 2-bit codes + scale/zero + window
    7.44
    """

    _axis, _kind, _name = -2, "kivi_per_channel", "K"

    def _groups(self, n_q: int) -> int:
        return -(-n_q // self.group_size) * self.dim


class KIVIValueCoder(_KIVICoder):
    """KIVI values: per token (min/max over groups of ``group_size`` channels), the last
    ``residual`` tokens in float16; a :class:`Coder`.

    Stored bits: codes ``bits·n·d``, scales and zeros ``16·n·ceil(d/group_size)`` each,
    window ``16·R·d`` (n, R as for :class:`KIVIKeyCoder`).

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats.quant.uniform import KIVIValueCoder
    >>> coder = KIVIValueCoder(2, 64, group_size=32, residual=32)
    >>> x = np.random.default_rng(0).standard_normal((40, 64))
    >>> bool(np.array_equal(coder.roundtrip(x)[-32:], x[-32:].astype(np.float16)))
    True
    """

    _axis, _kind, _name = -1, "kivi_per_token", "V"

    def _groups(self, n_q: int) -> int:
        return n_q * -(-self.dim // self.group_size)


@dataclass(frozen=True, eq=False)
class KIVICodes:
    """KIVI codes: quantized keys/values of the first ``N − R`` tokens (None when none)
    and the float16 window of the last ``R = min(residual, N)`` tokens."""

    keys: UniformCodes | None
    values: UniformCodes | None
    key_window: np.ndarray
    value_window: np.ndarray
    n_tokens: int
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes stored."""
        q = sum(c.nbytes for c in (self.keys, self.values) if c is not None)
        return int(q + self.key_window.nbytes + self.value_window.nbytes)


class KIVIQuantizer:
    """KIVI (Liu et al., 2024): per-channel keys, per-token values, a float16 window.

    Keys are quantized per channel: each channel's min/max over a group of
    ``group_size`` tokens. Values are quantized per token: min/max over groups of
    ``group_size`` channels. The last ``residual`` tokens (the most recent ones) are kept
    in float16; with ``N ≤ residual`` nothing is quantized. Both sides together, through
    :class:`KIVIKeyCoder` and :class:`KIVIValueCoder` (what the ``kivi`` scheme uses).

    Parameters
    ----------
    bits : int
        1..8 bits per quantized element.
    group_size : int
        Group length (tokens for keys, channels for values).
    residual : int
        Full-precision (float16) window of recent tokens, ≥ 0.

    Examples
    --------
    >>> import numpy as np
    >>> from kvstats import KIVIQuantizer
    >>> kivi = KIVIQuantizer(2, group_size=32, residual=32)
    >>> K = np.random.default_rng(0).standard_normal((100, 64))
    >>> K_hat, V_hat = kivi.decode(kivi.encode(K, K))
    >>> bool(np.array_equal(K_hat[-32:], K[-32:].astype(np.float16)))
    True
    >>> key_bits, value_bits = kivi.stored_bits(100, 64)
    >>> sum(key_bits.values()) / (100 * 64)  # 2-bit codes + scale/zero + window
    7.44
    """

    def __init__(self, bits: int, group_size: int = 32, residual: int = 32):
        self.bits = check_int(bits, "bits", low=1, high=8)
        self.group_size = check_int(group_size, "group_size", low=1)
        self.residual = check_int(residual, "residual", low=0)

    def coders(self, dim: int) -> tuple[KIVIKeyCoder, KIVIValueCoder]:
        """The key and value coders of this setting for head dimension ``dim``."""
        return (KIVIKeyCoder(self.bits, dim, self.group_size, self.residual),
                KIVIValueCoder(self.bits, dim, self.group_size, self.residual))

    def encode(self, K: Float[np.ndarray, "*batch n d"], V: Float[np.ndarray, "*batch n d"]
               ) -> KIVICodes:
        """Quantize keys and values ``(*batch, N, d)`` (same shape)."""
        K = as_float_array(K, "K", min_ndim=2)
        V = as_float_array(V, "V", min_ndim=2)
        if K.shape != V.shape:
            raise ValueError(f"K and V must have the same shape (*batch, N, d); "
                             f"received K {K.shape} and V {V.shape}")
        key_coder, value_coder = self.coders(K.shape[-1])
        k, v = key_coder.encode(K), value_coder.encode(V)
        return KIVICodes(keys=k.quantized, values=v.quantized, key_window=k.window,
                         value_window=v.window, n_tokens=k.n_tokens, dtype=K.dtype)

    def decode(self, codes: KIVICodes) -> tuple[np.ndarray, np.ndarray]:
        """``(K̂, V̂)`` of shape ``(*batch, N, d)`` in the encoded dtype."""
        if not isinstance(codes, KIVICodes):
            raise TypeError(f"codes must be KIVICodes from KIVIQuantizer.encode; "
                            f"received {type(codes).__name__}")
        key_coder, value_coder = self.coders(codes.key_window.shape[-1])
        return (key_coder.decode(KIVISideCodes(codes.keys, codes.key_window, codes.n_tokens,
                                               codes.dtype)),
                value_coder.decode(KIVISideCodes(codes.values, codes.value_window,
                                                 codes.n_tokens, codes.dtype)))

    def stored_bits(self, n_tokens: int, dim: int) -> tuple[dict[str, int], dict[str, int]]:
        """Bits stored for one head of ``n_tokens`` tokens of dimension ``dim``: (keys, values) by part.

        Keys: ``bits·(N−R)·d`` codes, one fp16 scale and zero per channel per group of
        tokens (``ceil((N−R)/g)·d`` each), ``16·R·d`` window. Values: ``bits·(N−R)·d``
        codes, ``(N−R)·ceil(d/g)`` scales and zeros, ``16·R·d`` window; R = min(residual, N).
        """
        n_tokens = check_int(n_tokens, "n_tokens", low=1)
        key_coder, value_coder = self.coders(check_int(dim, "dim", low=1))
        return key_coder.stored_bits(n_tokens), value_coder.stored_bits(n_tokens)

    def bits_per_coord(self, n_tokens: int, dim: int) -> dict[str, float]:
        """Stored bits per coordinate (÷ N·d) by part, ``key_<part>``/``value_<part>``, and
        the totals ``key_total``/``value_total`` (multiply by d for bits per token).

        Examples
        --------
        >>> from kvstats import KIVIQuantizer
        >>> KIVIQuantizer(2, group_size=32, residual=32).bits_per_coord(100, 64)["key_total"]
        7.44
        """
        keys, values = self.stored_bits(n_tokens, dim)
        coords = n_tokens * dim
        out = {f"key_{p}": b / coords for p, b in keys.items()}
        out.update({f"value_{p}": b / coords for p, b in values.items()})
        out["key_total"] = sum(keys.values()) / coords
        out["value_total"] = sum(values.values()) / coords
        return out

    def describe(self) -> dict[str, Any]:
        """Every setting (bits, group size, window, the grouping of each side)."""
        return {"quantizer": "kivi", "bits": self.bits, "group_size": self.group_size,
                "residual": self.residual, "keys": "per_channel (groups of tokens)",
                "values": "per_token (groups of channels)", "scale_zero_dtype": "float16"}
