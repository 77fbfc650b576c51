"""float32 input is coded as its exact value against the float64 boundaries.

`Codebook.encode` defines the code of x as ``#{k : boundaries[k] < x}``. For float32 x
it compares with the boundaries cast to float32; a cast that rounds a boundary b *up*
(fl(b) > b) gave x = fl(b) the lower code although b < x, so float32 and float64 input
of the same value coded differently, and the GPU path (which rounds boundaries down,
kvstats_gpu/codebook.py) disagreed with the numpy core there. The reference here is
``np.searchsorted`` on the float64 boundaries of the float64 value, the definition
itself; the values are the float32 boundaries and their float32 neighbours, every path
of the encoder (comparison count up to 15 boundaries, the float32 bucket table, the
grid, and `encode_reference`).
"""

import numpy as np
import pytest

from kvstats.quant.codebook import Codebook, lloyd_max_codebook


def _hard_values(cb: Codebook) -> np.ndarray:
    b32 = cb.boundaries.astype(np.float32)
    return np.concatenate([b32, np.nextafter(b32, np.float32(np.inf)),
                           np.nextafter(b32, np.float32(-np.inf)), np.float32([0.0, -0.0])])


def _definition(cb: Codebook, x: np.ndarray) -> np.ndarray:
    return np.searchsorted(cb.boundaries, x.astype(np.float64), side="left").astype(np.uint8)


@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("distribution, dim", [("beta", 128), ("beta", 64), ("gaussian", None)])
def test_float32_codes_are_the_definition_at_rounded_boundaries(bits, distribution, dim):
    cb = lloyd_max_codebook(bits, distribution, dim=dim)
    x = _hard_values(cb)
    want = _definition(cb, x)
    np.testing.assert_array_equal(cb.encode(x), want)
    np.testing.assert_array_equal(cb.encode_reference(x), want)
    np.testing.assert_array_equal(cb.encode(x.astype(np.float64)), want)  # float64: unchanged


def test_the_hard_values_exist():
    # the test above can fail: some float32 boundaries round up (half of them, about)
    cb = lloyd_max_codebook(4, "beta", dim=128)
    assert np.any(cb.boundaries.astype(np.float32).astype(np.float64) > cb.boundaries)


def test_grid_path_float32_codes_are_the_definition():
    # boundaries too close for the float32 bucket table: the grid codes float32 input
    cb = lloyd_max_codebook(5)
    bnd = np.sort(np.concatenate([cb.boundaries[:-1], [cb.boundaries[-2] * (1 + 2.0 ** -12)]]))
    close = Codebook(cb.bits, cb.centroids, bnd, cb.mse, cb.distribution, cb.dim, cb.scale,
                     cb.iterations)
    assert close._buckets32 is None and close._grid is not None
    x = _hard_values(close)
    np.testing.assert_array_equal(close.encode(x), _definition(close, x))
