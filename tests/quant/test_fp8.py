"""FP8 KV cache coders against an independent definition of the formats.

Reference: the E4M3 ("fn": no infinities, 0x7F/0xFF NaN, max 448) and E5M2 (IEEE-like,
max 57344) value tables written from their bit fields (OCP 8-bit floating point
specification, OFP8 rev. 1.0, Table 1), rounding to the nearest finite value with ties
to the even code after vLLM's clamp to ±max — not ml_dtypes, which the coder uses.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant.fp8 import FP8Coder, amax_scale


def table(fmt):
    """Non-negative finite values by code (0..127 minus NaN/inf codes), from the bit fields."""
    exp_bits, man_bits, bias = (4, 3, 7) if fmt == "fp8_e4m3" else (5, 2, 15)
    codes = np.arange(128)
    e, m = codes >> man_bits, codes & ((1 << man_bits) - 1)
    v = np.where(e == 0, m * 2.0 ** (1 - bias - man_bits),
                 (1 + m / 2 ** man_bits) * 2.0 ** (e - bias))
    finite = codes < 127 if fmt == "fp8_e4m3" else e < (1 << exp_bits) - 1
    return codes[finite], v[finite]


def reference_codes(y, fmt):
    """FP8 codes of float32 ``y`` (already divided by the scale): clamp, nearest, ties even;
    the sign bit is y's (a negative value that rounds to zero is −0, as IEEE rounding and
    the hardware conversions give)."""
    codes, values = table(fmt)
    a = np.minimum(np.abs(y.astype(np.float64)), values[-1]).ravel()
    err = np.abs(values[None, :] - a[:, None])
    best = err.min(axis=1, keepdims=True)
    hit = err == best
    first = np.argmax(hit, axis=1)
    pick = np.where((hit.sum(axis=1) == 2) & (codes[first] % 2 == 1), first + 1, first)
    out = codes[pick] | (128 * np.signbit(y.ravel()))
    return out.reshape(y.shape).astype(np.uint8)


def inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 50, 64)) * rng.lognormal(0, 2, (3, 1, 1))
    x[0, 0] = 0.0
    x[1, :, :8] = 1e-3 * x[1, :, :8]                                # subnormals after scaling
    x[2, 0, :] = np.linspace(-1, 1, 64) * np.abs(x[2]).max()        # ±amax itself
    return x


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("scale", ["head", "tensor"])
def test_codes_equal_the_independent_definition(fmt, scale):
    x = inputs(0)
    coder = FP8Coder(fmt, 64, scale)
    codes = coder.encode(x)
    x32 = x.astype(np.float32)
    axes = (1, 2) if scale == "head" else (0, 1, 2)
    s = (np.abs(x32).max(axis=axes, keepdims=True) / np.float32(table(fmt)[1][-1])).astype(np.float32)
    np.testing.assert_array_equal(codes.scale, s.reshape(codes.scale.shape))
    np.testing.assert_array_equal(codes.codes, reference_codes((x32 / s).astype(np.float32), fmt))
    # decoding: the table's value times the scale, in float32
    _, values = table(fmt)
    mag = values[codes.codes & 127].astype(np.float32)
    expected = (np.where(codes.codes & 128, -mag, mag).astype(np.float32) * s).astype(x.dtype)
    np.testing.assert_array_equal(coder.decode(codes), expected)


def test_ties_and_clamp_of_the_rounding():
    # scale 1 (amax = 448): 1.0625 is half-way between 1 (code 0x38, even) and 1.125
    # (0x39): even → 1; 1.1875 between 1.125 and 1.25 (0x3A) → 1.25; 17 between 16 and 18
    x = np.array([[448.0, 1.0625, 1.1875, -17.0, 2.0 ** -10, 3 * 2.0 ** -10, 0.0, -0.0]])
    out = FP8Coder("fp8_e4m3", 8).roundtrip(x)
    np.testing.assert_array_equal(out, [[448.0, 1.0, 1.25, -16.0, 0.0, 2.0 ** -8, 0.0, 0.0]])


def test_scale_per_head_or_per_call():
    x = inputs(1)
    head, tensor = FP8Coder("fp8_e4m3", 64, "head"), FP8Coder("fp8_e4m3", 64, "tensor")
    assert head.encode(x).scale.shape == (3,) and tensor.encode(x).scale.shape == ()
    y = x.copy()
    y[0] *= 1e4                                     # another head changes: only "tensor" feels it
    assert np.array_equal(head.roundtrip(y)[1:], head.roundtrip(x)[1:])
    assert not np.array_equal(tensor.roundtrip(y)[1:], tensor.roundtrip(x)[1:])
    # e4m3 keeps 3 mantissa bits: relative error at most 2^-4 above the subnormal range
    big = np.abs(x) > np.abs(x).max(axis=(1, 2), keepdims=True) * 2.0 ** -6
    rel = np.abs(head.roundtrip(x) - x)[big] / np.abs(x)[big]
    assert rel.max() <= 2.0 ** -4 * (1 + 1e-6)


def test_static_scale_clamps_like_vllm():
    # vLLM keeps a calibrated scale: x/s beyond ±448 is clamped, not rescaled
    x = np.array([[1.0, -3.0, 1000.0, -2000.0]])
    static = FP8Coder("fp8_e4m3", 4, scale=2.0)
    codes = static.encode(x)
    assert codes.scale.shape == () and codes.scale == np.float32(2.0)
    np.testing.assert_array_equal(static.decode(codes), [[1.0, -3.0, 896.0, -896.0]])
    assert kvstats.make_scheme("fp8_e4m3", None, 4, scale=2.0).roundtrip(x, x)[0][0, 2] == 896.0
    with pytest.raises(ValueError, match=r"scale must be in \(0.0, inf\)"):
        FP8Coder("fp8_e4m3", 4, scale=0.0)
    with pytest.raises(TypeError, match="scale must be one of"):
        FP8Coder("fp8_e4m3", 4, scale=[1.0])


@pytest.mark.parametrize("scale", [1e39, 1e-50])
def test_static_scale_must_be_a_positive_float32(scale):
    # stored as float32: 1e39 would be inf (decoding 0·inf = NaN), 1e-50 would be 0 (every
    # value coded as 0, as an all-zero head): both are refused, naming scale
    with pytest.raises(ValueError, match=r"scale must be a positive float32 .*received 1e"):
        FP8Coder("fp8_e4m3", 4, scale=scale)
    tiny = FP8Coder("fp8_e4m3", 4, scale=1e-45)  # the smallest float32: everything clamps
    np.testing.assert_array_equal(tiny.roundtrip(np.array([[1.0, -1.0, 0.0, 2.0]])),
                                  np.float32(448) * np.float32(1e-45) * np.array([[1, -1, 0, 1]]))


def test_zero_bits_and_errors():
    coder = FP8Coder("fp8_e5m2", 16)
    codes = coder.encode(np.zeros((2, 5, 16)))
    assert np.all(codes.scale == 0) and np.all(coder.decode(codes) == 0)
    assert codes.nbytes == 2 * 5 * 16 + 2 * 4
    b = kvstats.make_scheme("fp8_e4m3", None, 128).bits_per_coord(1024)
    assert (b.nominal, b.total) == (8.0, 8 + 32 / (1024 * 128))
    with pytest.raises(ValueError, match="x must be finite in float32"):
        coder.encode(np.full((2, 16), 1e39))
    with pytest.raises(ValueError, match="scale must be one of"):
        kvstats.make_scheme("fp8_e4m3", None, 64, scale="channel")
    with pytest.raises(ValueError, match="bits for fp8_e5m2 must be None or 8"):
        kvstats.make_scheme("fp8_e5m2", 4, 64)
    with pytest.raises(TypeError, match="codes must be FP8Codes of fp8_e5m2"):
        coder.decode(FP8Coder("fp8_e4m3", 16).encode(np.ones((2, 16))))
    # one scale per (n, d) slice needs those two axes (was numpy's AxisError)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., n, d\) for scale='head'"):
        amax_scale(np.ones(4, dtype=np.float32), "head", 448.0)
    assert amax_scale(np.ones(4, dtype=np.float32), "tensor", 448.0).shape == (1,)
