"""Rotation.apply/inverse refuse an image beyond the float range (referee R3, F2).

An orthogonal map keeps norms, so float32 vectors of norm > 3.4e38 have no float32
image: apply/inverse returned ±inf (numpy's RuntimeWarning only) where the public fwht
raises a ValueError. They now raise one too, naming the array.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kvstats.quant.rotation import Rotation, make_rotation

BIG32 = np.array([3e38, 3e38], np.float32)      # norm 4.2e38 > float32 max


@pytest.mark.parametrize("kind", ["hadamard", "haar"])
def test_apply_and_inverse_refuse_an_overflowing_image(kind):
    r = make_rotation(kind, 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # a ValueError, not a RuntimeWarning
        with pytest.raises(ValueError, match=r"x must have vector norms within the float32 range "
                                             r".* received max \|x\| = 3e\+38 .*; pass float64 values"):
            r.apply(BIG32)
        with pytest.raises(ValueError, match=r"y must have vector norms within the float32 range"):
            r.inverse(BIG32)
        y = r.apply(BIG32.astype(np.float64))           # float64 holds it
    assert np.isfinite(y).all()
    np.testing.assert_allclose(np.linalg.norm(y), np.linalg.norm(BIG32.astype(np.float64)), rtol=1e-12)


def test_an_image_with_only_minus_inf_is_refused():
    # signs (−1, −1): apply gives (−4.2e38, 0), i.e. (−inf, 0) in float32: max alone is finite
    r = Rotation("hadamard", 2, 2, (), signs=np.array([-1.0, -1.0]))
    with np.errstate(over="ignore"):
        assert np.isneginf(r._apply(BIG32)[0]) and r._apply(BIG32)[1] == 0
    with pytest.raises(ValueError, match="x must have vector norms within the float32 range"):
        r.apply(BIG32)


def test_padded_batched_and_float64_overflow_are_refused():
    r = make_rotation("hadamard", 3, seed=1, draws=2)   # d_pad = 4
    x = np.zeros((2, 5, 3), np.float32)
    x[1, 4] = 3e38                                      # one row of one draw
    x[1, 4, 1] = 3e38
    with pytest.raises(ValueError, match="x must have vector norms within the float32 range"):
        r.apply(x)
    with pytest.raises(ValueError, match=r"x must have vector norms within the float64 range .*; rescale x"):
        make_rotation("haar", 4, seed=2).apply(np.full(4, 1.5e308))


@pytest.mark.parametrize("kind", ["hadamard", "haar", "identity"])
def test_norms_just_inside_the_range_pass(kind):
    r = make_rotation(kind, 2, seed=0)
    x = np.array([2e38, 2e38], np.float32)              # norm 2.83e38 < 3.40e38
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = r.apply(x)
        back = r.inverse(y)
    assert y.dtype == np.float32 and np.isfinite(y).all()
    np.testing.assert_allclose(np.linalg.norm(y.astype(np.float64)), 2e38 * np.sqrt(2), rtol=1e-6)
    np.testing.assert_allclose(back, x, rtol=1e-6)
