"""theory.flat_vector_gain against the coder: a one-hot key through TurboQuant-mse comes
back as g·key, its direction exact, for every bit width, rotation draw and channel."""
import numpy as np
import pytest

import kvstats
from kvstats.theory import flat_vector_gain


@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("bits", range(1, 9))
def test_a_one_hot_key_is_scaled_by_the_flat_vector_gain(bits, dim):
    x = (3.0 * np.eye(dim))[None]                     # (1, dim keys, dim): every channel, norm 3
    s = kvstats.make_scheme("turboquant_mse", bits, dim, seed=bits, draws=4, norm_dtype="float64")
    xh, _ = s.roundtrip(np.broadcast_to(x, (4, dim, dim)).copy(), np.broadcast_to(x, (4, dim, dim)).copy())
    g = flat_vector_gain(bits, dim)
    np.testing.assert_allclose(xh, g * np.broadcast_to(x, xh.shape), rtol=0, atol=1e-9)


def test_the_gain_is_not_monotone_in_the_bits():
    # 2 bits' outer centroid (1.5/sqrt(d)) is the nearest to 1/sqrt(d): the worst of 1..3
    err = [abs(flat_vector_gain(b, 128) - 1) for b in (1, 2, 3, 4, 8)]
    assert err[1] > err[2] > err[0] > err[3] > err[4]   # 0.505, 0.247, 0.201, 0.063, 0.001
    assert round(err[1], 3) == 0.505


@pytest.mark.parametrize("bad", [0, 9, 2.5])
def test_bits_out_of_range_is_named(bad):
    with pytest.raises((ValueError, TypeError), match="bits"):
        flat_vector_gain(bad, 128)
