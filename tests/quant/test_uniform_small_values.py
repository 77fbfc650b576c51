"""Small inputs through the uniform coders (issue #16: 1-bit coding turned 1e-30 into −6e-8).

References: float16's smallest subnormal 2^-24 and smallest normal 2^-14 (IEEE 754
binary16); the exact bound |x̂ − x| ≤ scale/2 of kvstats.quant.uniform; the golden digest
below was computed with uniform.py as it was before the small-value rules (commit
18f7253), so ordinary inputs are coded bit for bit as before.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest

from kvstats.quant.uniform import (KIVIKeyCoder, KIVIValueCoder, UniformTokenCoder,
                                    uniform_dequantize, uniform_quantize)

TINY = 2.0 ** -24    # float16's smallest subnormal: its grid step near 0
NORMAL = 2.0 ** -14  # float16's smallest normal


def quiet_quantize(x, bits, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return uniform_quantize(x, bits, **kw)


def per_element_scale(codes) -> np.ndarray:
    moved = np.moveaxis(np.empty(codes.shape), codes.axis, -1).shape
    s = np.repeat(codes.scale.astype(np.float64), codes.group_size, axis=-1)[..., :moved[-1]]
    return np.moveaxis(s, -1, codes.axis)


def test_issue_example_one_bit_tiny_values_decode_to_zero():
    for x in ([1e-30, -1e-30], [1e-23, 2e-23, -5e-23, 3e-22], [-1e-30, -1e-30], [5e-324, -5e-324]):
        for bits in range(1, 9):
            with pytest.warns(UserWarning, match=r"^x: 1 of 1 groups"):
                codes = uniform_quantize(np.array(x), bits, group_size=len(x))
            # every value is below 2^-25, which float16 itself rounds to zero
            np.testing.assert_array_equal(uniform_dequantize(codes), 0.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tiny_groups_never_grow_or_flip_sign(dtype):
    """Values below 2^-25 (denormals of both dtypes included) decode to exactly 0."""
    rng = np.random.default_rng(0)
    low = -44 if dtype == np.float32 else -320
    mags = 10.0 ** rng.uniform(low, np.log10(TINY / 2), size=(50, 16))
    x = (mags * rng.choice([-1.0, 1.0], size=mags.shape)).astype(dtype)
    assert (np.abs(x) <= TINY / 2).all() and (x != 0).any()
    for bits in (1, 2, 4, 8):
        with pytest.warns(UserWarning, match="below float16's smallest normal"):
            x_hat = uniform_dequantize(uniform_quantize(x, bits, group_size=8))
        assert x_hat.dtype == dtype
        np.testing.assert_array_equal(x_hat, 0.0)


def test_groups_with_a_minimum_float16_rounds_to_zero_keep_the_exact_bound():
    """A minimum in [-2^-25, 0) starts the grid at 0; the bound |x̂ − x| ≤ scale/2 holds."""
    rng = np.random.default_rng(1)
    for scale_of_rest in (1e-7, 1e-5, 1e-2, 1.0, 100.0):
        x = np.abs(rng.standard_normal((200, 8))) * scale_of_rest
        x[:, 0] = -rng.uniform(0, TINY / 2, size=200)  # the group minimum, in [-2^-25, 0)
        for bits in (1, 2, 3, 4, 8):
            codes = quiet_quantize(x, bits, group_size=8)
            x_hat = uniform_dequantize(codes)
            np.testing.assert_array_equal(codes.zero, 0.0)
            assert np.all(np.abs(x_hat - x) <= per_element_scale(codes) / 2 + 1e-15 * np.abs(x))
            # the tiny negative values decode to 0, never to −2^-24
            np.testing.assert_array_equal(x_hat[:, 0], 0.0)
    # the interval is closed at -2^-25 (float16 rounds it to -0, ties to even); just below
    # it float16 rounds to -2^-24, a representable minimum the grid starts at
    edge = np.array([[-TINY / 2, 1.0], [np.nextafter(-TINY / 2, -1.0), 1.0]])
    for bits in (1, 4):
        assert quiet_quantize(edge, bits, group_size=2).zero.ravel().tolist() == [0.0, -TINY]
    # whole groups in [-2^-25, 0): the step is 2^-24, not 0, so the bound still holds
    x = -rng.uniform(0, TINY / 2, size=(50, 8))
    for bits in (1, 4):
        codes = quiet_quantize(x, bits, group_size=8)
        np.testing.assert_array_equal(codes.scale, np.float16(TINY))
        assert np.all(np.abs(uniform_dequantize(codes) - x) <= per_element_scale(codes) / 2)


def test_constant_groups_decode_to_their_value():
    """A zero-range group decodes to its value when float16 holds it, and otherwise within
    half of float16's gap around it (subnormal values, and values float16 rounds to 0,
    included; the step is then finer than the gap, so often much closer)."""
    rng = np.random.default_rng(2)
    values = np.concatenate([10.0 ** rng.uniform(-12, 4.5, 400), TINY * np.arange(1, 40),
                             [0.1, 1 / 3, 65504.0, NORMAL, NORMAL - TINY]])
    values = np.concatenate([values, -values, [0.0]])
    x = np.repeat(values[:, None], 6, axis=1)
    h = values.astype(np.float16)
    with np.errstate(over="ignore"):  # nextafter past ±65504, never selected
        below = np.where(h > values, np.nextafter(h, np.float16(-np.inf)), h).astype(np.float64)
        above = np.where(h < values, np.nextafter(h, np.float16(np.inf)), h).astype(np.float64)
    exact = below == above
    assert exact.sum() > 80 and (~exact).sum() > 700
    for bits in (1, 3, 8):
        x_hat = uniform_dequantize(quiet_quantize(x, bits, group_size=4))
        np.testing.assert_array_equal(x_hat[exact], x[exact])
        err = np.abs(x_hat - x).max(axis=1)
        assert np.all(err <= (above - below) / 2 + 1e-15 * np.abs(values))


def test_warning_names_the_side_and_counts_groups():
    x = np.random.default_rng(3).standard_normal((2, 40, 64))
    x[0, :, 5] *= 1e-9    # one key channel below float16's normal range
    x[1, 7, :32] *= 1e-9  # one value group (token 7, channels 0..31)
    # keys: 32 coded tokens (8 in the window) = one group per (batch, channel)
    with pytest.warns(UserWarning, match=r"^K: 1 of 128 groups .*rescale K") as rec:
        KIVIKeyCoder(2, 64, group_size=32, residual=8).encode(x)
    assert len(rec) == 1
    with pytest.warns(UserWarning, match=r"^V: 1 of 160 groups") as rec:
        KIVIValueCoder(2, 64, group_size=32, residual=0).encode(x)
    assert len(rec) == 1
    with pytest.warns(UserWarning, match=r"^V: 1 of 160 groups"):
        UniformTokenCoder(2, 64, 32).encode(x)
    with pytest.warns(UserWarning, match=r"^K: 1 of 160 groups"):
        UniformTokenCoder(2, 64, 32, name="K").encode(x)
    with pytest.raises(TypeError, match="name must be a str"):
        UniformTokenCoder(2, 64, 32, name=0)
    with pytest.raises(TypeError, match="name must be a str"):
        uniform_quantize(x, 2, name=None)
    with pytest.raises(ValueError, match=r"V must lie within float16 range"):
        uniform_quantize(x * 1e5, 2, name="V")


def test_no_warning_for_ordinary_inputs():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 64, 64))
    x[:, :, 3] = 0.0    # exact zeros are not a loss
    x[:, 10, :] = 2.5   # nor are constant groups of normal values
    x[:, 11, :] = 1e-4  # nor groups of small normal values
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for bits in (1, 2, 4, 8):
            KIVIKeyCoder(bits, 64, 32, 16).encode(x)
            KIVIValueCoder(bits, 64, 32, 16).encode(x)
            uniform_quantize(x.astype(np.float32), bits, axis=-2, group_size=5)


def test_warning_threshold_is_float16s_smallest_normal():
    just_below, at = np.full((1, 4), np.nextafter(NORMAL, 0)), np.full((1, 4), NORMAL)
    with pytest.warns(UserWarning):
        uniform_quantize(just_below, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        uniform_quantize(at, 4)


def test_ordinary_inputs_bit_identical_to_before():
    rng = np.random.default_rng(2024)
    x = rng.standard_t(3, size=(4, 37, 24)) * 5
    x[0, :, 3] = 0.0
    x[1, 5, :] = 0.75
    h = hashlib.sha256()
    for arr in (x, x.astype(np.float32), np.abs(x)):
        for bits in range(1, 9):
            for axis, group in ((-1, 8), (-2, 5), (-2, 32)):
                c = uniform_quantize(arr, bits, axis=axis, group_size=group)
                for part in (c.codes, c.scale, c.zero, uniform_dequantize(c)):
                    h.update(np.ascontiguousarray(part).tobytes())
    # uniform.py at commit 18f7253 (before the small-value rules) gives this digest
    assert h.hexdigest() == "e11715683a4515ef716a00e7ba991841052ed6cb8055f3aaa6acd559e48d3316"
