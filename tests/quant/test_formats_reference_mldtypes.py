"""nvfp4 and mxfp4 against references built from ml_dtypes' casts alone.

tests/quant/test_formats.py holds the llama.cpp types and mxfp4 to ``gguf.quants`` bit for
bit, nvfp4's codes to a brute-force table written there and its values to gguf's decoder,
and mxfp4's elements to ``ml_dtypes.float4_e2m1fn``. What no test did: build nvfp4 whole
(block-scale bytes, element nibbles, decoded values) from ml_dtypes' casts —
``float8_e4m3fn`` for the block scale, ``float4_e2m1fn`` for the elements, both round to
nearest even (the coder has its own E2M1 table and rounding) — and decode mxfp4 with
ml_dtypes' ``float8_e8m0fnu`` for the scale byte (the coder builds 2^(e−127) from bits,
e = 0 a float32 subnormal). Layout (ggml's): per block the scale byte, then byte j holds
element j in its low nibble and element j + block/2 in its high one.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant.microscaling import MXCoder

ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3, E2M1, E8M0 = ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu
TIES = np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])      # half-way between E2M1 values


def bits_of(a):
    """float32 bit patterns, so that −0.0 ≠ +0.0 and equality is bit for bit."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def e2m1_nibbles(y):
    """ml_dtypes' E2M1 codes of float32 ``y`` (nearest even, saturating at ±6), −0 as +0."""
    code = y.astype(E2M1).view(np.uint8) & np.uint8(15)
    return np.where(code == 8, np.uint8(0), code)


def pack(nibbles):
    """ggml's nibble order: byte j = element j | element j + half << 4."""
    half = nibbles.shape[-1] // 2
    return nibbles[..., :half] | (nibbles[..., half:] << np.uint8(4))


def nvfp4_reference(x, per_head=True):
    """NVFP4 of ``x (heads, n, d)`` from its recipe with ml_dtypes' casts: (block bytes, g, decoded)."""
    x = x.astype(np.float32)
    axes = (1, 2) if per_head else (0, 1, 2)
    g = (np.abs(x).max(axis=axes, keepdims=True) / np.float32(448 * 6)).astype(np.float32)
    b = x.reshape(x.shape[0], -1, 16)                             # g broadcasts over blocks
    amax_b = np.abs(b).max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(g == 0, np.float32(0), (amax_b / np.float32(6)) / g)
    s = np.minimum(want, np.float32(448)).astype(np.float32).astype(E4M3)  # ml_dtypes: > 464 is NaN
    den = (s.astype(np.float32) * g).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(den == 0, np.float32(0), b / den).astype(np.float32)
    nib = e2m1_nibbles(y)
    data = np.concatenate([s.view(np.uint8), pack(nib)], axis=-1).reshape(x.shape[0], x.shape[1], -1)
    value = (nib.view(E2M1).astype(np.float32) * s.astype(np.float32)) * g
    return data, g.reshape(-1 if per_head else ()), value.reshape(x.shape)


def nvfp4_heads(seed):
    """Heads that reach the corners: lognormal magnitudes, exact E2M1 ties, saturated and
    clamped block scales, E4M3-subnormal and underflowing block scales, zeros."""
    rng = np.random.default_rng(seed)
    heads = rng.standard_normal((4, 24, 64)) * rng.lognormal(0, 2, (4, 1, 1))
    heads[0, 0] = 0.0                                             # zero blocks
    heads[1, :, :16] *= 1e-5                                      # E4M3-subnormal block scales
    heads[1, 1, 16:32] *= 1e-9                                    # ... and ones that underflow to 0
    # head 2: amax 2688, so g = 1 exactly; a block with amax 6 has scale 1 and one with
    # amax 2688 scale 448: their elements sit on exact E2M1 ties (round to the even code)
    heads[2] = rng.uniform(-6, 6, (24, 64))
    heads[2, 0, :16] = np.r_[6.0, TIES, -TIES, 0.1]
    heads[2, 0, 16:32] = 448 * np.r_[6.0, TIES, -TIES, -6.0]
    heads[2, 1, :16] = np.r_[2688.0, rng.uniform(-2688, 2688, 15)]
    heads[3, 2, :16] = np.r_[np.abs(heads[3]).max() * 1.5, np.zeros(15)]  # the head's own max
    return heads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("per_head", [True, False])
def test_nvfp4_equals_its_recipe_with_ml_dtypes_casts(dtype, per_head):
    x = nvfp4_heads(11).astype(dtype)
    ref_data, ref_g, ref_value = nvfp4_reference(x, per_head)
    scale_bytes = ref_data.reshape(-1, 9)[:, 0]                   # the corners are reached:
    assert np.any(scale_bytes == 0) and np.any(scale_bytes == 0x7E)   # zero and 448,
    assert np.any(((scale_bytes & 0x78) == 0) & (scale_bytes > 0))    # E4M3 subnormals
    coder = MXCoder("nvfp4", 64, "head" if per_head else "tensor")
    codes = coder.encode(x)
    np.testing.assert_array_equal(codes.data, ref_data)
    np.testing.assert_array_equal(bits_of(codes.scale), bits_of(ref_g))
    out = coder.decode(codes)
    assert out.dtype == dtype
    np.testing.assert_array_equal(bits_of(out), bits_of(ref_value.astype(dtype)))


def test_nvfp4_ties_go_to_the_even_code():
    """On the tie block (g = 1, block scale 1) the nibbles follow IEEE's rule, written out
    (E2M1 magnitudes by code 0..7: 0, ½, 1, 1½, 2, 3, 4, 6): 0.25 → 0, 0.75 → 2, 1.25 → 2,
    1.75 → 4, 2.5 → 4, 3.5 → 6, 5 → 6; negatives add 8, and −0.25 is +0. A coder rounding
    ties another way fails here whatever ml_dtypes does."""
    x = nvfp4_heads(11)[2:3]
    block = MXCoder("nvfp4", 64).encode(x).data[0, 0, :9]
    assert block[0] == 0x38                                       # E4M3 1.0
    nib = np.r_[block[1:] & 15, block[1:] >> 4]
    np.testing.assert_array_equal(nib, [7, 0, 2, 2, 4, 4, 6, 6, 0, 10, 10, 12, 12, 14, 14, 0])


def test_mxfp4_decodes_as_ml_dtypes_e8m0_times_e2m1():
    """Each value is float32(E2M1 nibble) × float32(E8M0 scale byte), both read by ml_dtypes,
    over scale bytes from 0 (2^-127, a float32 subnormal) to 252 (amax near 3.4e38)."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((300, 64)) * 2.0 ** rng.integers(-126, 126, (300, 1))
    x[0], x[1], x[2] = 1e-39, 3e38, 0.0                           # smallest/largest scales, zero
    x[3, :32] = 2.0 ** -127 * np.r_[3.0, -1.0, 0.5, 1.5, np.zeros(28)]
    x = x.astype(np.float32)
    coder = MXCoder("mxfp4", 64)
    codes = coder.encode(x)
    blocks = codes.data.reshape(300, 2, 17)
    scale_byte = blocks[..., :1]
    assert scale_byte.min() == 0 and scale_byte.max() >= 250
    nib = np.concatenate([blocks[..., 1:] & 15, blocks[..., 1:] >> 4], axis=-1)
    ref = nib.view(E2M1).astype(np.float32) * scale_byte.view(E8M0).astype(np.float32)
    np.testing.assert_array_equal(bits_of(coder.decode(codes)), bits_of(ref.reshape(300, 64)))


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_stored_bits_are_the_bytes_the_codes_hold(fmt):
    """The scheme's bit count per coordinate is what the coder's bytes hold: per block of
    32 (16) one scale byte and 16 (8) bytes of nibbles, and nvfp4's float32 per head."""
    x = nvfp4_heads(13)                                           # 4 heads × 24 tokens × 64
    codes = MXCoder(fmt, 64).encode(x)
    block = 32 if fmt == "mxfp4" else 16
    assert codes.data.nbytes == x.size // block * (1 + block // 2)
    assert codes.nbytes == codes.data.nbytes + (4 * x.shape[0] if fmt == "nvfp4" else 0)
    per_coord = kvstats.make_scheme(fmt, None, 64).bits_per_coord(x.shape[1]).total
    assert per_coord == 8 * codes.nbytes / x.size
