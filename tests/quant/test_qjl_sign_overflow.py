"""QJL sign bits of vectors near their dtype's limit.

``sign(S x)`` is stored as one bit per row of S, with ``sign(0) = +1``. For a finite
float32 vector of norm ~3e38 (float32's limit is numpy.finfo(float32).max = 3.40e38)
the sums in ``S x`` -- d products for a dense sketch, a Hadamard transform's partial
sums for srht -- overflowed, and ``inf - inf`` became a NaN stored as bit 0: about one
sign in eight came out wrong, silently. Signs are scale-free, so the bits of ``2^k x``
must equal those of ``x`` exactly (a power-of-two scale is exact in floating point).
"""

import warnings

import numpy as np
import pytest

from kvstats.quant.qjl import qjl_encode
from kvstats.quant.sketch import make_sketch


def _unit_rows(n, d, dtype, seed=1):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(dtype)


@pytest.mark.parametrize("kind", ["gaussian", "orthogonal", "srht"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signs_of_a_power_of_two_multiple_equal_the_signs_of_the_vector(kind, dtype):
    sketch = make_sketch(kind, 256, 128, seed=0)
    x = 1.75 * _unit_rows(64, 128, dtype)
    plain = qjl_encode(sketch, x, norm_dtype=dtype)
    # norm 1.75 * 2^(maxexp - 1): 2.98e38 in float32 (its max 3.40e38), finite, and past
    # where the sums of S x overflow (at 2^127 alone they stay inf of the right sign)
    huge = x * dtype(2.0) ** (np.finfo(dtype).maxexp - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning escapes either
        scaled = qjl_encode(sketch, huge, norm_dtype=dtype)
    assert np.array_equal(scaled.signs, plain.signs)
    # a batch mixing ordinary and huge rows: each row's bits as if alone
    mixed = x.copy()
    mixed[::2] = huge[::2]
    assert np.array_equal(qjl_encode(sketch, mixed, norm_dtype=dtype).signs, plain.signs)
