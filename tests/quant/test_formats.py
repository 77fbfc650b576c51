"""llama.cpp block types and the microscaling FP4 formats against independent implementations.

References: ``gguf.quants.quantize``/``dequantize`` (gguf-py, the numpy port of ggml's
C reference; 0.19.0 in the project's .venv) for q8_0, q4_0, q4_1, q5_0, q5_1 and MXFP4 —
stored bytes and decoded values equal bit for bit; for nvfp4, gguf only decodes (its own
super-block layout, no float32 scale): decoded values are held to it, codes to the definition of
NVFP4 written out here by brute force (E4M3 and E2M1 value tables from their bit
fields, nearest value, ties to the even code); for mxfp4 also the OCP MX v1.0 rule (shared
exponent from the exact ⌊log₂ amax⌋) with ml_dtypes.float4_e2m1fn as the element cast.
gguf is imported here only; the coders never import it.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant.blockfmt import BLOCK_TYPES, BlockTypeCoder, block_decode, block_encode
from kvstats.quant.microscaling import MXCoder, e2m1_decode, e2m1_encode
from kvstats.quant.registry import scheme_def

gguf_quants = pytest.importorskip("gguf.quants")
from gguf.constants import GGMLQuantizationType as QT  # noqa: E402

GGUF = {"q8_0": QT.Q8_0, "q4_0": QT.Q4_0, "q4_1": QT.Q4_1, "q5_0": QT.Q5_0, "q5_1": QT.Q5_1}
# largest |x| whose fp16 scale (and minimum) fit: δ = amax/127, amax/8, (max−min)/15 with
# |min| ≤ 65504, amax/16, (max−min)/31
IN_RANGE = {"q8_0": 8.0e6, "q4_0": 5.0e5, "q4_1": 6.5e4, "q5_0": 1.0e6, "q5_1": 6.5e4}


def bits_of(a):
    """Bit patterns, so that −0.0 ≠ +0.0 and equality is bit for bit."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    return a.view(np.uint32)


def adversarial(amax, d=128, seed=0):
    """Rows (tokens) of blocks built to hit the coders' corners."""
    rng = np.random.default_rng(seed)
    rows = [np.zeros(d), np.full(d, 3.3), np.full(d, -0.7), np.full(d, amax), np.full(d, -amax)]
    alt = np.tile([amax, -amax], d // 2)                           # ±max: argmax takes the first
    rows += [alt, -alt, np.r_[np.full(d // 2, amax), np.zeros(d // 2)]]
    for scale in (1e-3, 1e-6, 1e-20, 1e-30):                        # tiny (1/δ still finite)
        rows.append(scale * rng.standard_normal(d))
    spike = 1e-3 * rng.standard_normal(d)
    spike[5] = amax                                                 # one outlier per block
    rows.append(spike)
    rows.append(np.abs(rng.standard_normal(d)))                     # one sign only
    grid = np.arange(d) % 32 - 16.0                                 # integer grid: exact ties
    rows += [grid, grid + 0.5, grid / 16, (grid + 0.5) * 7.5 / 16.5]
    rows.append(np.tile(np.r_[127.0, np.arange(31) * 2 - 29.5], d // 32))  # q8_0: δ = 1, x.5 ties
    rows.append(2.0 ** rng.integers(-20, 10, d) * rng.choice([-1, 1], d))  # powers of two
    return np.array(rows)


def random_rows(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * rng.lognormal(0, 1.5, shape[:-1] + (1,))
    return x


# ------------------------------------------------------------------ llama.cpp types
@pytest.mark.parametrize("fmt", list(GGUF))
def test_llama_cpp_types_equal_gguf_bit_for_bit(fmt):
    cases = [random_rows((3, 40, 128), seed=1).astype(np.float32),
             random_rows((64, 96), seed=2),                       # float64 input, d = 96
             adversarial(IN_RANGE[fmt]).astype(np.float32), adversarial(IN_RANGE[fmt])]
    for x in cases:
        ref = gguf_quants.quantize(x.astype(np.float32), GGUF[fmt])
        codes = BlockTypeCoder(fmt, x.shape[-1]).encode(x)
        assert codes.data.dtype == np.uint8 and codes.data.shape == ref.shape
        np.testing.assert_array_equal(codes.data, ref)
        mine = block_decode(codes.data, fmt, x.shape[-1])
        np.testing.assert_array_equal(bits_of(mine), bits_of(gguf_quants.dequantize(ref, GGUF[fmt])))
        # through the scheme (keys and values): the coder's output in the input's dtype
        K_hat, _ = kvstats.make_scheme(fmt, None, x.shape[-1]).roundtrip(x, x)
        assert K_hat.dtype == x.dtype
        np.testing.assert_array_equal(K_hat, mine.astype(x.dtype))


@pytest.mark.parametrize("fmt", list(GGUF))
def test_llama_cpp_types_bytes_and_bits(fmt):
    # block sizes of ggml-common.h: 34, 18, 20, 22, 24 bytes per 32 coordinates
    expected = {"q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24}[fmt]
    assert BLOCK_TYPES[fmt].block_bytes == expected
    assert block_encode(np.ones(64), fmt).shape == (2 * expected,)
    total = kvstats.make_scheme(fmt, None, 128).bits_per_coord(1000).total
    assert total == expected * 8 / 32 == scheme_def(fmt).expected_bits(None, 128, 1000)
    assert kvstats.make_scheme(fmt, BLOCK_TYPES[fmt].code_bits, 64).bits == BLOCK_TYPES[fmt].code_bits


@pytest.mark.parametrize("fmt", list(GGUF))
def test_llama_cpp_types_error_is_within_half_a_step(fmt):
    x = random_rows((200, 128), seed=3)
    xb = x.astype(np.float32).reshape(200, 4, 32)
    err = np.abs(block_decode(block_encode(x, fmt), fmt, 128).reshape(200, 4, 32) - xb)
    spec = BLOCK_TYPES[fmt]
    if spec.has_min:
        step = (xb.max(-1) - xb.min(-1)) / spec.levels
    else:
        step = np.abs(xb).max(-1) / spec.levels
    # half a step, plus the fp16 rounding of the scale (and minimum) times the code range;
    # q4_0/q5_0 reach −8δ but only +7δ (−16δ, +15δ): opposite the block's largest
    # coordinate, values beyond 7|δ| are clipped, up to a whole step
    slack = step * 2 ** -10 * 2 ** spec.code_bits + 2 ** -10 * np.abs(xb).max(-1)
    half = step if fmt in ("q4_0", "q5_0") else step / 2
    assert np.all(err.max(-1) <= half + slack)
    assert np.any(err.max(-1) > 0.9 * half)                       # and the bound is tight


def test_tiny_blocks_whose_inverse_scale_overflows_are_coded_as_zero():
    # max |x| = 1e-39 (subnormal in float32): δ is subnormal and 1/δ overflows; gguf
    # multiplies by inf and casts NaN to an integer (its codes are undefined there),
    # here the block gets the codes of a zero block. Both decode to zeros: the fp16
    # scale is 0.
    x = np.zeros((2, 64), dtype=np.float32)
    x[0, :32] = np.linspace(-1e-39, 1e-39, 32)
    for fmt in GGUF:
        data = block_encode(x, fmt)
        np.testing.assert_array_equal(block_decode(data, fmt, 64), 0.0)
        with np.errstate(all="ignore"):
            ref = gguf_quants.dequantize(gguf_quants.quantize(x, GGUF[fmt]), GGUF[fmt])
        np.testing.assert_array_equal(ref, 0.0)
        head = 2 + 2 * BLOCK_TYPES[fmt].has_min                   # scale (and minimum) bytes
        np.testing.assert_array_equal(data[0, head:BLOCK_TYPES[fmt].block_bytes],
                                      data[1, head:BLOCK_TYPES[fmt].block_bytes])


@pytest.mark.parametrize("fmt", list(GGUF))
def test_llama_cpp_types_refuse_out_of_range_and_bad_dims(fmt):
    with pytest.raises(ValueError, match=f"beyond the range of {fmt}"):
        block_encode(np.full(32, 2 * IN_RANGE[fmt]) * np.r_[1, -np.ones(31)], fmt)
    with pytest.raises(ValueError, match=f"dim must be a multiple of 32 for {fmt}"):
        kvstats.make_scheme(fmt, None, 80)
    with pytest.raises(ValueError, match=f"bits for {fmt} must be None or"):
        kvstats.make_scheme(fmt, 3, 64)
    with pytest.raises(ValueError, match="data must be uint8 with last axis"):
        block_decode(np.zeros(5, dtype=np.uint8), fmt, 32)
    with pytest.raises(TypeError, match="codes must be BlockCodes"):
        BlockTypeCoder(fmt, 32).decode(np.zeros(3))


# ------------------------------------------------------------------ MXFP4
def test_mxfp4_equals_gguf_bit_for_bit():
    rng = np.random.default_rng(4)
    ties = np.array([4.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 6.5] * 3 + [0.0, -4.0])
    ties[10:20] *= -1                                                    # negative ties too
    pow2 = np.float32(2.0 ** 10)
    below = np.nextafter(pow2, np.float32(0))                            # float32 log2 rounds up
    cases = [random_rows((3, 40, 128), seed=5).astype(np.float32),
             adversarial(1e30).astype(np.float32),
             np.stack([ties, ties * 2.0 ** -60, ties * 2.0 ** 100, ties * 3.0]).astype(np.float32),
             np.stack([np.r_[below, rng.standard_normal(31)], np.r_[pow2, rng.standard_normal(31)],
                       np.full(32, 1e-37), np.full(32, 3e38)]).astype(np.float32)]
    coder = {}
    for x in cases:
        d = x.shape[-1]
        coder.setdefault(d, MXCoder("mxfp4", d))
        with np.errstate(over="ignore"):                        # gguf: d·(−12) − 3e38
            ref = gguf_quants.quantize(x, QT.MXFP4)
        codes = coder[d].encode(x)
        np.testing.assert_array_equal(codes.data, ref)
        np.testing.assert_array_equal(bits_of(coder[d].decode(codes)),
                                      bits_of(gguf_quants.dequantize(ref, QT.MXFP4)))


def test_mxfp4_exponent_below_gguf_range_is_clamped():
    # amax < 2^-125: gguf's ⌊log₂ amax⌋ − 2 + 127 < 0 wraps in uint8; here E8M0 = 0 (2^-127)
    x = np.full((1, 32), 1e-39, dtype=np.float32)
    codes = MXCoder("mxfp4", 32).encode(x)
    assert codes.data[0, 0] == 0
    out = MXCoder("mxfp4", 32).decode(codes)
    assert np.all(np.abs(out - x) <= 2.0 ** -128)


def test_e2m1_tables():
    # E2M1 (OCP MX v1.0 Table 5): sign, 2 exponent bits (bias 1), 1 mantissa bit
    ref = []
    for code in range(16):
        s, e, m = code >> 3, (code >> 1) & 3, code & 1
        v = (m / 2) if e == 0 else (1 + m / 2) * 2.0 ** (e - 1)
        ref.append(-v if s else v)
    np.testing.assert_array_equal(e2m1_decode(np.arange(16, dtype=np.uint8)), np.float32(ref))
    grid = np.linspace(-7, 7, 2801).astype(np.float32)            # steps of 1/200: every tie
    for ties in ("even", "down"):
        got = e2m1_decode(e2m1_encode(grid, ties))
        err = np.abs(np.float32(ref)[None, :8] - np.abs(grid)[:, None])
        best = err.min(axis=1)
        assert np.all(np.abs(np.abs(got) - np.abs(grid)) == best)       # always a nearest value
        tie = np.sum(err == best[:, None], axis=1) == 2
        codes = e2m1_encode(grid[tie], ties) & 7
        if ties == "even":
            assert np.all(codes % 2 == 0)
        else:
            lower = np.argmax(err[tie] == best[tie, None], axis=1)
            np.testing.assert_array_equal(codes, lower)


# ------------------------------------------------------------------ NVFP4
def _e4m3_table():
    """Non-negative finite E4M3 ("fn") values by code 0..126 from the bit fields (bias 7)."""
    codes = np.arange(127)
    e, m = codes >> 3, codes & 7
    return np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7)).astype(np.float32)


def _nearest_even(values, table):
    """Index of the nearest table entry (increasing table), ties to the even index."""
    err = np.abs(table[None, :].astype(np.float64) - values[:, None].astype(np.float64))
    best = err.min(axis=1, keepdims=True)
    hit = err == best
    first = np.argmax(hit, axis=1)
    two = hit.sum(axis=1) == 2
    return np.where(two & (first % 2 == 1), first + 1, first)


def nvfp4_reference(x):
    """NVFP4 of one head (n, d) by its definition, brute force: (block scale codes, element codes, g)."""
    x = x.astype(np.float32)
    g = np.float32(np.abs(x).max()) / np.float32(448.0 * 6.0)
    b = x.reshape(-1, 16)
    want = np.minimum((np.abs(b).max(axis=1) / np.float32(6)) / g, np.float32(448))
    table = _e4m3_table()
    s_code = _nearest_even(want, table)
    s = table[s_code]
    den = (s * g).astype(np.float32)
    y = np.where(den[:, None] == 0, 0, b / np.where(den == 0, 1, den)[:, None]).astype(np.float32)
    mags = np.float32([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    idx = _nearest_even(np.minimum(np.abs(y), 6).ravel(), mags).reshape(y.shape)
    codes = idx + 8 * ((y < 0) & (idx > 0))
    return s_code.astype(np.uint8), codes.astype(np.uint8), g


def test_nvfp4_codes_equal_the_definition_and_values_equal_gguf():
    rng = np.random.default_rng(6)
    heads = [random_rows((40, 128), seed=7), adversarial(1e3, d=128)[:, :128],
             np.r_[rng.standard_normal((3, 64)), 1e-6 * rng.standard_normal((3, 64))]]
    for x in heads:
        n, d = x.shape
        coder = MXCoder("nvfp4", d)
        codes = coder.encode(x)
        s_code, e_code, g = nvfp4_reference(x)
        blocks = codes.data.reshape(n * d // 16, 9)
        np.testing.assert_array_equal(blocks[:, 0], s_code)
        nib = np.concatenate([blocks[:, 1:] & 15, blocks[:, 1:] >> 4], axis=1)
        np.testing.assert_array_equal(nib, e_code)
        assert codes.scale.dtype == np.float32 and codes.scale == g
        # gguf's NVFP4 super-block: 4 UE4M3 scales then 4 × 8 bytes of nibbles
        sup = blocks.reshape(-1, 4, 9)
        gg = np.concatenate([sup[:, :, 0], sup[:, :, 1:].reshape(-1, 32)], axis=1)
        ref = gguf_quants.dequantize(gg.reshape(n, -1), QT.NVFP4) * g
        np.testing.assert_array_equal(bits_of(coder.decode(codes)), bits_of(ref))


def test_mx_bits_and_errors():
    assert kvstats.make_scheme("mxfp4", None, 128).bits_per_coord(100).total == 4.25
    assert kvstats.make_scheme("nvfp4", None, 128).bits_per_coord(100).total == 4.5 + 32 / 12800
    with pytest.raises(ValueError, match="dim must be a multiple of 32 for mxfp4"):
        kvstats.make_scheme("mxfp4", None, 48)
    with pytest.raises(ValueError, match="dim must be a multiple of 16 for nvfp4"):
        kvstats.make_scheme("nvfp4", None, 40)
    with pytest.raises(ValueError, match="x must be finite in float32"):
        MXCoder("mxfp4", 32).encode(np.full((1, 32), 1e39))
    with pytest.raises(ValueError, match="x must be finite in float32"):
        MXCoder("nvfp4", 32).encode(np.full((1, 32), 1e39))
    with pytest.raises(TypeError, match="codes must be MXCodes of nvfp4"):
        MXCoder("nvfp4", 32).decode(MXCoder("mxfp4", 32).encode(np.ones((1, 32))))
    # mxfp4 has no float32 scale: a scale setting is refused, not ignored
    with pytest.raises(ValueError, match="scale applies to nvfp4 only"):
        MXCoder("mxfp4", 32, scale="tensor")


def test_mxfp4_scale_exponent_clamps_at_the_smallest_e8m0():
    """amax < 2^-125 would need a scale below 2^-127 (gguf's exponent wraps there, so it is
    no reference): the scale byte is 0, i.e. 2^-127 (the smallest E8M0 value), and the
    elements are the E2M1 codes of x/2^-127, worked by hand: 3 → 5, −1 → 8|2, ½ → 1,
    1½ → 3, −2 → 8|4 (byte j: low nibble coordinate j, high nibble j + 16)."""
    t = np.float32(2.0 ** -127)                                    # a float32 subnormal
    x = np.zeros((1, 32), np.float32)
    x[0, :4] = [3 * t, -t, t / 2, 1.5 * t]
    x[0, 16] = -2 * t
    coder = MXCoder("mxfp4", 32)
    codes = coder.encode(x)
    assert codes.data[0, :5].tolist() == [0, 5 | (12 << 4), 10, 1, 3]
    assert not codes.data[0, 5:].any()
    np.testing.assert_array_equal(coder.decode(codes), x)          # exact on this grid


def test_e2m1_bad_input():
    """An unknown tie rule was taken as "even", NaN coded as 6, a code of 16 decoded as 0
    and float codes failed inside numpy: each is now an error naming the argument."""
    with pytest.raises(ValueError, match=r"ties must be one of \['even', 'down'\]; received 'up'"):
        e2m1_encode(np.array([0.75], dtype=np.float32), ties="up")
    with pytest.raises(ValueError, match="y must not contain NaN"):
        e2m1_encode(np.array([1.0, np.nan], dtype=np.float32))
    assert e2m1_encode(np.array([np.inf, -np.inf], dtype=np.float32)).tolist() == [7, 15]
    assert e2m1_encode(np.zeros(0, dtype=np.float32)).shape == (0,)
    with pytest.raises(ValueError, match=r"codes must be E2M1 codes in \[0, 15\]; received values in \[0, 16\]"):
        e2m1_decode(np.array([0, 16], dtype=np.uint8))
    with pytest.raises(TypeError, match="codes must be an integer array"):
        e2m1_decode(np.array([1.5]))


def test_nvfp4_scale_per_head_or_per_call():
    x = random_rows((3, 20, 32), seed=8)
    head, tensor = MXCoder("nvfp4", 32, "head"), MXCoder("nvfp4", 32, "tensor")
    assert head.encode(x).scale.shape == (3,) and tensor.encode(x).scale.shape == ()
    y = x.copy()
    y[0] *= 100                                                   # another head changes
    assert np.array_equal(head.roundtrip(y)[1:], head.roundtrip(x)[1:])
    assert not np.array_equal(tensor.roundtrip(y)[1:], tensor.roundtrip(x)[1:])


# ------------------------------------------------------------------ OCP MX spec, ml_dtypes
def test_mxfp4_follows_the_ocp_rule_and_ml_dtypes_e2m1():
    """OCP Microscaling Formats v1.0 §6.3: shared exponent ⌊log₂ amax⌋ − emax(E2M1) with
    emax = 2, taken here exactly from the float32 bit pattern (np.frexp), and each element
    the E2M1 cast of x / 2^shared — ml_dtypes.float4_e2m1fn (round to nearest even,
    saturating at ±6). The documented departures, both gguf's: amax within a float32 log2
    rounding of the next power of two takes that power (exponent + 1), and exact ties go to
    the smaller magnitude; ml_dtypes's −0 is stored as +0."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(9)
    n = 4000
    x = (rng.standard_normal((n, 32)) * 2.0 ** rng.integers(-60, 60, (n, 1))).astype(np.float32)
    below = np.nextafter(np.float32(2.0 ** 7), np.float32(0))     # float32 log2 gives 7.0
    x[:2] = rng.standard_normal((2, 32)).astype(np.float32)       # |x| < 127 ...
    x[0, 0], x[1, 5] = below, -below                              # ... but one just below 2^7
    x[2] = np.resize([4.0, 0.25, -0.75, 1.25, -1.75, 2.5, -3.5, 5.0, 0.1], 32)  # scale 1: ties
    coder = MXCoder("mxfp4", 32)
    blocks = coder.encode(x).data.reshape(n, 17)
    amax = np.abs(x).max(axis=1)
    exact = np.frexp(amax)[1] - 1 - 2                              # ⌊log₂ amax⌋ − emax, exactly
    got = blocks[:, 0].astype(int) - 127
    rounded_up = np.floor(np.log2(amax)) > exact + 2               # float32 log2 reached 2^k
    assert rounded_up[:2].all() and rounded_up.sum() < 10
    np.testing.assert_array_equal(got[~rounded_up], exact[~rounded_up])
    np.testing.assert_array_equal(got[rounded_up], exact[rounded_up] + 1)
    y = (x / np.float32(2.0) ** got[:, None].astype(np.float32)).astype(np.float32)
    ref = y.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & np.uint8(15)
    ref[ref == 8] = 0                                              # −0 → +0
    codes = np.concatenate([blocks[:, 1:] & 15, blocks[:, 1:] >> 4], axis=1)
    mags = np.float32([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    tie = np.isin(np.abs(y), (mags[1:] + mags[:-1]) / 2)
    assert tie[2].sum() == 25 and tie.sum() < 0.001 * y.size
    np.testing.assert_array_equal(codes[~tie], ref[~tie])
    lower = np.searchsorted(mags, np.abs(y[tie])) - 1              # the smaller magnitude
    np.testing.assert_array_equal(codes[tie] & 7, lower)
