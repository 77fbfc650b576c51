"""Tests of kvstats.quant.uniform: asymmetric min/max quantization and KIVI.

The error bound |x - x̂| <= scale/2 is exact by construction (zero rounded down and
scale rounded up to float16, so every element lies in [zero, zero + (2^b - 1) scale]);
the accounting references are hand counts from the KIVI layout (Liu et al. 2024):
per-channel key groups of tokens, per-token value groups of channels, fp16 scale and
zero per group, an fp16 window of the most recent tokens.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvstats.quant.packing import pack_codes, unpack_codes
from kvstats.quant.coder import Coder
from kvstats.quant.uniform import (KIVIKeyCoder, KIVIQuantizer, KIVIValueCoder, UniformCodes,
                                    UniformTokenCoder, uniform_dequantize, uniform_quantize)

EPS = np.finfo(np.float64).eps


def per_element_scale(codes: UniformCodes) -> np.ndarray:
    """Each element's group scale, in the original layout."""
    moved = np.moveaxis(np.empty(codes.shape), codes.axis, -1).shape
    s = np.repeat(codes.scale.astype(np.float64), codes.group_size, axis=-1)[..., :moved[-1]]
    return np.moveaxis(s, -1, codes.axis)


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("axis,group_size", [(-1, 8), (-2, 5), (0, 3), (1, 64)])
def test_round_trip_error_at_most_half_a_step(bits, axis, group_size):
    rng = np.random.default_rng(bits)
    x = rng.standard_t(3, size=(3, 23, 20)) * 7 + 2.5
    codes = uniform_quantize(x, bits, axis=axis, group_size=group_size)
    x_hat = uniform_dequantize(codes)
    assert x_hat.shape == x.shape and x_hat.dtype == x.dtype
    half = per_element_scale(codes) / 2
    # exact bound up to float64 rounding of zero + scale * code
    assert np.all(np.abs(x_hat - x) <= half + 8 * EPS * (np.abs(x) + 1))
    # and the bound is essentially attained (rounding really is to the nearest level)
    assert np.max(np.abs(x_hat - x) / half) > 0.9


def test_float32_round_trip_adds_only_the_final_rounding():
    """float32 input decodes to float32: the float64 decode, within scale/2, rounded once,
    so |x - x̂| <= scale/2 + ulp(x̂)/2. Groups of large values with a fine step (values near
    3000 spanning 1e-3 at 8 bits: a float16 step below a float32 ulp there) do exceed
    scale/2 alone, so the half-ulp term is needed (checked by mutation: a zero rounded to
    the nearest float16 instead of down fails it). A decode in float32 arithmetic would
    give the same numbers: scale·code is exact there and the sum is rounded once."""
    rng = np.random.default_rng(0)
    base = rng.uniform(-3000, 3000, size=(200, 1, 1))
    span = 10 ** rng.uniform(-3, 1, size=(200, 1, 1))
    x = (base + span * rng.random((200, 8, 32))).astype(np.float32)
    for bits in (2, 4, 8):
        codes = uniform_quantize(x, bits, axis=-1, group_size=32)
        x_hat = uniform_dequantize(codes)
        assert x_hat.dtype == np.float32
        err = np.abs(x.astype(np.float64) - x_hat)
        half = per_element_scale(codes) / 2
        assert np.all(err <= half + np.spacing(np.abs(x_hat)).astype(np.float64) / 2)
        if bits == 8:
            assert np.any(err > half)  # the float32 rounding is not covered by scale/2


def test_grid_covers_the_group_despite_the_rounding_of_the_division():
    """zero + (2^b − 1)·scale ≥ max for every group, as the module states. Groups found by
    search where (max − zero)/(2^b − 1), rounded in float64, is exactly a float16 value s
    although zero + (2^b − 1)·s < max by one float64 step: rounding the quotient up to
    float16 keeps s, and only the guard on the product moves the scale one float16 step up."""
    cases = [(7, -46.03125, 0.487060546875), (3, -54.5625, 6.82421875),
             (5, -9.9296875, 0.54443359375), (5, -60.3125, 4.38671875)]
    for bits, z, s in cases:
        levels = 2 ** bits - 1
        top = np.nextafter(z + levels * s, np.inf)
        assert (top - z) / levels == s and z + levels * s < top    # the case the guard is for
        codes = uniform_quantize(np.array([[z, top]]), bits, group_size=2)
        zero, scale = float(codes.zero[0, 0]), float(codes.scale[0, 0])
        assert zero == z and scale == float(np.nextafter(np.float16(s), np.float16(np.inf)))
        assert zero + levels * scale >= top


def test_scale_zero_float16_and_codes_consistent():
    x = np.random.default_rng(0).uniform(-3, 5, size=(4, 33))
    codes = uniform_quantize(x, 3, axis=-1, group_size=16)
    assert codes.scale.dtype == np.float16 and codes.zero.dtype == np.float16
    assert codes.scale.shape == (4, 3) and codes.zero.shape == (4, 3)
    g = np.pad(x, [(0, 0), (0, 15)], mode="edge").reshape(4, 3, 16)
    zero, scale = codes.zero.astype(float), codes.scale.astype(float)
    assert np.all(zero <= g.min(-1)) and np.all(zero + 7 * scale >= g.max(-1))
    # codes are those of the stored (float16) scale and zero, packed with pack_codes
    ints = unpack_codes(codes.codes, 3, 33)
    expected = np.clip(np.rint((g - zero[..., None]) / scale[..., None]), 0, 7)
    np.testing.assert_array_equal(ints, expected.reshape(4, 48)[:, :33])
    assert codes.codes.shape == (4, 13)  # ceil(33 * 3 / 8) bytes per row
    np.testing.assert_array_equal(codes.codes, pack_codes(ints, 3))
    np.testing.assert_array_equal(uniform_dequantize(codes),
                                  (zero[..., None] + scale[..., None] * expected).reshape(4, 48)[:, :33])


def test_constant_groups_decode_exactly_without_nan():
    x = np.array([[0.0] * 6, [1.5] * 6, [-3.0] * 6, [0.1] * 6, [1e-9] * 6])
    for bits in (1, 4, 8):
        # the 1e-9 row lies below float16's normal range: coded, with a warning
        with pytest.warns(UserWarning, match="x: 2 of 10 groups"):
            codes = uniform_quantize(x, bits, axis=-1, group_size=4)
        x_hat = uniform_dequantize(codes)
        assert np.isfinite(x_hat).all()
        np.testing.assert_array_equal(x_hat[:3], x[:3])  # float16-representable: exact
        assert np.all(np.abs(x_hat[3:] - x[3:]) <= per_element_scale(codes)[3:] / 2 + 1e-18)
        assert np.all(codes.scale[:3] == 0)


def test_float32_kept_and_extremes():
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    codes = uniform_quantize(x, 4, axis=0, group_size=8)
    assert uniform_dequantize(codes).dtype == np.float32
    big = np.array([[-60000.0, 60000.0]])
    with pytest.raises(ValueError, match="float16"):
        uniform_quantize(big, 1, axis=-1, group_size=2)  # range/1 = 120000 overflows
    ok = uniform_dequantize(uniform_quantize(big, 8, axis=-1, group_size=2))
    np.testing.assert_allclose(ok, big, atol=300)


def test_uniform_errors():
    with pytest.raises(ValueError, match="bits"):
        uniform_quantize(np.ones(4), 9)
    with pytest.raises(ValueError, match="axis"):
        uniform_quantize(np.ones((2, 4)), 2, axis=2)
    with pytest.raises(ValueError, match="group_size"):
        uniform_quantize(np.ones(4), 2, group_size=0)
    with pytest.raises(ValueError, match="finite"):
        uniform_quantize(np.array([1.0, np.inf]), 2)
    with pytest.raises(ValueError, match="float16 range"):
        uniform_quantize(np.array([1e6, 0.0]), 2)
    with pytest.raises(TypeError, match="UniformCodes"):
        uniform_dequantize(np.ones(3))


# --------------------------------------------------------------------------- KIVI
def test_kivi_groups_and_window():
    rng = np.random.default_rng(2)
    K = rng.standard_normal((2, 75, 24))
    V = rng.standard_normal((2, 75, 24))
    kivi = KIVIQuantizer(2, group_size=16, residual=11)
    codes = kivi.encode(K, V)
    # keys: per channel over groups of 16 tokens (64 quantized tokens -> 4 groups)
    assert codes.keys.scale.shape == (2, 24, 4)
    # values: per token over groups of 16 channels (24 channels -> 2 groups)
    assert codes.values.scale.shape == (2, 64, 2)
    K_hat, V_hat = kivi.decode(codes)
    assert K_hat.shape == K.shape and V_hat.shape == V.shape
    np.testing.assert_array_equal(K_hat[:, -11:], K[:, -11:].astype(np.float16))
    np.testing.assert_array_equal(V_hat[:, -11:], V[:, -11:].astype(np.float16))
    ks = per_element_scale(codes.keys)
    vs = per_element_scale(codes.values)
    assert np.all(np.abs(K_hat[:, :64] - K[:, :64]) <= ks / 2 + 1e-12)
    assert np.all(np.abs(V_hat[:, :64] - V[:, :64]) <= vs / 2 + 1e-12)
    # per-channel keys really group along tokens: a channel scaled by 100 has a 100x step
    K2 = K.copy()
    K2[..., 3] *= 100
    s2 = kivi.encode(K2, V).keys.scale.astype(float)
    np.testing.assert_allclose(s2[:, 3] / codes.keys.scale[:, 3].astype(float), 100, rtol=2e-3)


def test_kivi_short_context_is_all_window():
    K = np.random.default_rng(3).standard_normal((10, 8))
    kivi = KIVIQuantizer(4, group_size=4, residual=32)
    codes = kivi.encode(K, K)
    assert codes.keys is None and codes.values is None
    K_hat, V_hat = kivi.decode(codes)
    np.testing.assert_array_equal(K_hat, K.astype(np.float16).astype(np.float64))
    keys, values = kivi.stored_bits(10, 8)
    assert keys == {"codes": 0, "scales": 0, "zeros": 0, "window": 16 * 10 * 8}


@pytest.mark.parametrize("n_tokens,dim,group,residual,bits", [
    (100, 64, 32, 32, 2), (75, 24, 16, 11, 3), (33, 128, 32, 0, 4), (20, 10, 7, 32, 2),
    (257, 48, 64, 128, 1)])
def test_kivi_accounting_exact(n_tokens, dim, group, residual, bits):
    kivi = KIVIQuantizer(bits, group_size=group, residual=residual)
    keys, values = kivi.stored_bits(n_tokens, dim)
    nq = max(n_tokens - residual, 0)
    # hand count
    assert keys["codes"] == values["codes"] == bits * nq * dim
    assert keys["scales"] == keys["zeros"] == 16 * dim * -(-nq // group)
    assert values["scales"] == values["zeros"] == 16 * nq * -(-dim // group)
    assert keys["window"] == values["window"] == 16 * (n_tokens - nq) * dim
    per_coord = kivi.bits_per_coord(n_tokens, dim)
    assert per_coord["key_total"] == pytest.approx(sum(keys.values()) / (n_tokens * dim), rel=1e-12)
    assert per_coord["value_window"] == pytest.approx(16 * (n_tokens - nq) / n_tokens, rel=1e-12)
    # and the count of what encode actually stores
    rng = np.random.default_rng(n_tokens)
    codes = kivi.encode(rng.standard_normal((n_tokens, dim)), rng.standard_normal((n_tokens, dim)))
    for side, window, parts in ((codes.keys, codes.key_window, keys),
                                (codes.values, codes.value_window, values)):
        assert 16 * window.size == parts["window"] and window.dtype == np.float16
        if side is None:
            assert parts["codes"] == parts["scales"] == 0
            continue
        assert side.stored_bits() == {k: parts[k] for k in ("codes", "scales", "zeros")}
        rows = int(np.prod(side.codes.shape[:-1]))  # packed rows, each padded to whole bytes
        assert side.codes.nbytes == rows * -(-(nq * dim // rows) * bits // 8)


def test_kivi_errors_and_describe():
    with pytest.raises(ValueError, match="bits"):
        KIVIQuantizer(0)
    with pytest.raises(ValueError, match="residual"):
        KIVIQuantizer(2, residual=-1)
    kivi = KIVIQuantizer(2)
    with pytest.raises(ValueError, match="same shape"):
        kivi.encode(np.ones((4, 8)), np.ones((5, 8)))
    with pytest.raises(ValueError, match="float16"):
        kivi.encode(np.full((4, 8), 1e6), np.ones((4, 8)))
    with pytest.raises(TypeError, match="KIVICodes"):
        kivi.decode((np.ones(2), np.ones(2)))
    d = kivi.describe()
    assert d["bits"] == 2 and d["group_size"] == 32 and d["residual"] == 32


# --------------------------------------------------------------------------- coders
def test_kivi_side_coders_split_the_joint_quantizer():
    rng = np.random.default_rng(4)
    K, V = rng.standard_normal((2, 2, 75, 24))
    kivi = KIVIQuantizer(3, group_size=16, residual=11)
    joint = kivi.encode(K, V)
    key_coder, value_coder = kivi.coders(24)
    assert isinstance(key_coder, Coder) and isinstance(value_coder, Coder)
    k, v = key_coder.encode(K), value_coder.encode(V)
    assert k.nbytes + v.nbytes == joint.nbytes
    K_ref, V_ref = kivi.decode(joint)
    assert np.array_equal(key_coder.decode(k), K_ref) and np.array_equal(value_coder.roundtrip(V), V_ref)
    assert (key_coder.stored_bits(75), value_coder.stored_bits(75)) == kivi.stored_bits(75, 24)
    assert key_coder.describe()["coder"] == "kivi_per_channel"
    assert value_coder.describe()["coder"] == "kivi_per_token"
    assert key_coder.nominal_bits == value_coder.nominal_bits == 3


def test_kivi_side_coder_errors():
    coder = KIVIKeyCoder(2, 8)
    with pytest.raises(ValueError, match="last dimension dim=8"):
        coder.encode(np.ones((4, 6)))
    with pytest.raises(ValueError, match="K window tokens must lie within float16"):
        coder.encode(np.full((4, 8), 1e6))
    with pytest.raises(TypeError, match="KIVISideCodes"):
        coder.decode(np.ones((4, 8)))
    with pytest.raises(ValueError, match="group_size"):
        KIVIValueCoder(2, 8, group_size=0)


def test_uniform_token_coder():
    x = np.random.default_rng(5).standard_normal((3, 10, 40))
    coder = UniformTokenCoder(3, 40, group_size=16)
    assert isinstance(coder, Coder)
    codes = coder.encode(x)
    assert codes.scale.shape == (3, 10, 3)  # ceil(40 / 16) groups of channels per token
    assert np.array_equal(coder.roundtrip(x), uniform_dequantize(codes))
    assert coder.stored_bits(10) == {"codes": 3 * 40 * 10, "scale_zero": 2 * 16 * 3 * 10}
    assert 8 * codes.nbytes == 30 * (-(-40 * 3 // 8) * 8) + 2 * 16 * 3 * 30
    assert coder.describe() == {"coder": "uniform_per_token", "bits": 3, "group_size": 16}
    with pytest.raises(ValueError, match="bits"):
        UniformTokenCoder(9, 40, 16)
    # another head dimension was coded silently (and accounted with dim = 40)
    with pytest.raises(ValueError, match=r"V must have last dimension dim=40; received shape \(3, 10, 8\)"):
        coder.encode(x[..., :8])


# --------------------------------------------------------------------------- loop reference
def _fp16_at_or_below(v: float) -> float:
    h = np.float16(v)
    return float(h if float(h) <= v else np.nextafter(h, np.float16(-np.inf)))


def _fp16_at_or_above(v: float) -> float:
    h = np.float16(v)
    return float(h if float(h) >= v else np.nextafter(h, np.float16(np.inf)))


def loop_group(values: list[float], bits: int) -> list[float]:
    """One group coded by the module docstring's rule, one Python float at a time."""
    levels = 2 ** bits - 1
    lo, hi = min(values), max(values)
    flushed = -2.0 ** -25 <= lo < 0  # float16 rounds lo to -0: the grid starts at 0
    zero = _fp16_at_or_below(0.0 if flushed else lo)
    step = (hi - zero) / levels
    scale = _fp16_at_or_above(max(step, 2.0 ** -24) if flushed else step)
    while zero + levels * scale < hi:  # the grid must reach the group's maximum
        scale = float(np.nextafter(np.float16(scale), np.float16(np.inf)))
    out = []
    for v in values:
        code = 0 if scale == 0 else min(max(round((v - zero) / scale), 0), levels)  # half to even
        out.append(zero + scale * code)
    return out


def loop_kivi(X: np.ndarray, bits: int, group: int, residual: int, keys: bool) -> np.ndarray:
    """KIVI by loops over (batch, channel, token group) for keys and (batch, token, channel
    group) for values; the last ``residual`` tokens kept in float16."""
    n, d = X.shape[-2:]
    n_q = max(n - residual, 0)
    out = np.empty_like(X)
    for b in np.ndindex(X.shape[:-2]):
        for t in range(n_q, n):
            for j in range(d):
                out[b + (t, j)] = float(np.float16(X[b + (t, j)]))
        lines = range(d) if keys else range(n_q)   # a channel of keys, a token of values
        length = n_q if keys else d
        for line in lines:
            for start in range(0, length, group):
                idx = [(b + (t, line)) if keys else (b + (line, t))
                       for t in range(start, min(start + group, length))]
                for i, v in zip(idx, loop_group([float(X[i]) for i in idx], bits)):
                    out[i] = v
    return out


@pytest.mark.filterwarnings("ignore:.*below float16's smallest normal:UserWarning")
@pytest.mark.parametrize("n_tokens,dim,group,residual,bits", [
    (45, 24, 16, 11, 2), (37, 10, 7, 0, 3), (20, 12, 5, 32, 4), (50, 20, 8, 3, 1)])
def test_kivi_equals_a_loop_reference(n_tokens, dim, group, residual, bits):
    """Decoded keys and values equal a per-group Python loop bit for bit: keys grouped per
    channel over consecutive tokens from the first (a partial last group), values per token
    over consecutive channels, the last ``residual`` tokens in float16; channel 3 of the
    keys scaled by 50 and some tiny groups so that a swapped axis or a misplaced window
    changes the result."""
    rng = np.random.default_rng(n_tokens)
    K, V = rng.standard_t(4, size=(2, 2, n_tokens, dim))
    K[..., 3] *= 50
    V[0, : min(3, n_tokens)] *= 1e-9  # groups flushed to a zero of 0 (minimum in [-2^-25, 0))
    kivi = KIVIQuantizer(bits, group_size=group, residual=residual)
    K_hat, V_hat = kivi.decode(kivi.encode(K, V))
    np.testing.assert_array_equal(K_hat, loop_kivi(K, bits, group, residual, keys=True))
    np.testing.assert_array_equal(V_hat, loop_kivi(V, bits, group, residual, keys=False))
