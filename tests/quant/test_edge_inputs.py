"""Inputs an analysis script feeds the quantizers, beyond the usual: values past float32's
range are refused with the format's message and no RuntimeWarning on the way.

Before, block_encode's symmetric formats (q8_0, q4_0, q5_0) multiplied inf by a zero
inverse scale first and numpy warned "invalid value encountered in multiply" before the
ValueError ("x is beyond the range of q8_0 ...") that says what was wrong.
"""

import warnings

import numpy as np
import pytest

import kvstats
from kvstats.quant import block_encode
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
