"""Inputs an analysis script feeds the quantizers, beyond the usual: values past float32's
range are refused with the format's message and no RuntimeWarning on the way.

Every scheme codes the same values alike whatever their memory layout: before, klt coded
a transposed view of K (a Fortran-ordered batch of tokens) into other codes altogether
(reconstructions up to 0.93 apart, of equal error), as its calibration's products rounded
by layout and a last-bit change in a half's statistics recodes the other half.

Before, fwht returned inf (with a RuntimeWarning) for x whose unnormalised transform
leaves the float range, and block_encode's symmetric formats (q8_0, q4_0, q5_0) multiplied inf by a zero
inverse scale first and numpy warned "invalid value encountered in multiply" before the
ValueError ("x is beyond the range of q8_0 ...") that says what was wrong.
"""

import warnings

import numpy as np
import pytest

import kvstats
from kvstats.quant import block_encode, fwht
from kvstats.quant.blockfmt import BLOCK_TYPES


@pytest.mark.parametrize("fmt", list(BLOCK_TYPES))
@pytest.mark.parametrize("magnitude", [1e39, 1e300])
def test_block_formats_refuse_values_beyond_float32_without_warnings(fmt, magnitude):
    x = np.random.default_rng(0).standard_normal((2, 64)) * magnitude
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=f"beyond the range of {fmt}"):
            block_encode(x, fmt)
        with pytest.raises(ValueError, match=f"beyond the range of {fmt}"):
            kvstats.make_scheme(fmt, None, 64).roundtrip(x[None], x[None])


@pytest.mark.parametrize("dtype,top", [(np.float64, 1e308), (np.float32, 3e38)])
def test_fwht_refuses_a_transform_beyond_the_float_range(dtype, top):
    x = np.full((2, 8), top / 4, dtype=dtype)        # first entry 8 · top/4 = 2·top: overflow
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"x must be small enough .* received max \|x\| = "):
            fwht(x)
        # just inside: every entry finite, as the dense product gives it
        y = fwht(np.full((2, 8), top / 16, dtype=dtype))
    assert y.dtype == dtype and np.isfinite(y).all()
    np.testing.assert_allclose(y[:, 0], top / 2, rtol=1e-6)


def _scheme_at_3_bits(name):
    sdef = kvstats.quant.scheme_def(name) if name in kvstats.quant.SCHEMES else None
    bits = None if sdef is None or sdef.fixed_budget or name == "identity" else max(3, sdef.min_bits)
    return kvstats.make_scheme(name, bits, 64, seed=0, **({"key_bits": 4, "value_bits": 2}
                                                            if name == "mixed" else {}))


@pytest.mark.parametrize("name", [*kvstats.quant.SCHEMES, "K4V2"])
def test_every_scheme_codes_alike_whatever_the_memory_layout(name):
    scheme = _scheme_at_3_bits(name)
    rng = np.random.default_rng(1)
    K, V = rng.standard_normal((2, 2, 32, 64)), rng.standard_normal((2, 2, 32, 64))
    ref = scheme.roundtrip(K, V)
    layouts = {"Fortran": np.asfortranarray,
               "tokens-last memory": lambda x: np.swapaxes(np.swapaxes(x, -1, -2).copy(), -1, -2),
               "strided": lambda x: np.repeat(x, 2, axis=-2)[..., ::2, :]}
    for label, layout in layouts.items():
        got = scheme.roundtrip(layout(K), layout(V))
        for side, a, b in zip("KV", got, ref):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} {side}, {label}")
