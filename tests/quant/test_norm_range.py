"""check_norm_range: norms that overflow the norm dtype raise, norms that underflow warn.

References: IEEE 754 limits as numpy's finfo reports them (float16: max 65504, smallest
normal 2^-14, smallest subnormal 2^-24; a value at most 2^-25 rounds to 0, ties to even),
and, for the warnings, numpy's own cast of the norms to the dtype.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kvstats.quant.coder import check_norm_range

DTYPES = [np.float16, np.float32, np.float64]


def caught(norms, dtype, name="K"):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        check_norm_range(norms, dtype, name)
    return [str(w.message) for w in rec if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordinary_norms_and_zero_vectors_pass_silently(dtype):
    info = np.finfo(dtype)
    norms = np.array([0.0, 1e-3, 1.0, 300.0, float(info.smallest_normal), float(info.max)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_norm_range(norms, dtype, "K") is None
        check_norm_range(np.zeros((3, 0)), dtype, "K")  # nothing to check


@pytest.mark.parametrize("dtype,wider", [(np.float16, "float32"), (np.float32, "float64")])
def test_overflow_raises_naming_the_side_and_a_wider_dtype(dtype, wider):
    big = float(np.finfo(dtype).max) * 1.001
    for name in ("K", "V"):
        with pytest.raises(ValueError, match=rf"^{name} has a vector norm of .*above the largest "
                                             rf"{np.dtype(dtype).name}.*{wider}.*rescale {name}$"):
            check_norm_range(np.array([1.0, big]), dtype, name)
    with pytest.raises(ValueError, match="above the largest"):
        check_norm_range(np.array([np.inf]), dtype, "V")


def test_float16_boundaries_follow_the_cast():
    half_tiny, tiny, normal = 2.0 ** -25, 2.0 ** -24, 2.0 ** -14
    # 2^-25 is a tie and rounds to 0 (even); just above it rounds up to 2^-24, a subnormal
    (msg,) = caught(np.array([1.0, half_tiny]), np.float16)
    assert msg.startswith("K: 1 of 2 vector norms are below float16's smallest subnormal")
    assert "stored as 0" in msg and "decode as exact zeros" in msg
    (msg,) = caught(np.array([np.nextafter(half_tiny, 1.0)]), np.float16)
    assert "float16 subnormals" in msg
    (msg,) = caught(np.array([tiny, normal / 2, 1.0, 0.0]), np.float16, "V")
    assert msg.startswith("V: 2 of 4 vector norms are float16 subnormals") and "smallest 5.96e-08" in msg
    # a norm just below 2^-14 that rounds up to it is stored as a normal number: no warning
    assert caught(np.array([normal * (1 - 2.0 ** -13)]), np.float16) == []
    assert len(caught(np.array([normal * (1 - 2.0 ** -10)]), np.float16)) == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_warnings_fire_exactly_when_the_cast_loses_the_norm(dtype):
    """Random norms over the whole range below 1: warnings iff the cast gives 0 or a subnormal."""
    info = np.finfo(dtype)
    rng = np.random.default_rng(0)
    low_exp = np.log10(float(info.smallest_subnormal)) - 3
    for _ in range(60):
        norms = 10.0 ** rng.uniform(low_exp, 0, size=int(rng.integers(1, 6)))
        stored = norms.astype(dtype)
        to_zero = int(((norms > 0) & (stored == 0)).sum())
        subnormal = int(((stored > 0) & (stored < info.smallest_normal)).sum())
        msgs = caught(norms, dtype)
        assert len(msgs) == (to_zero > 0) + (subnormal > 0)
        if to_zero:
            assert f"{to_zero} of {norms.size} vector norms are below" in msgs[0]
        if subnormal:
            assert f"{subnormal} of {norms.size} vector norms are {np.dtype(dtype).name} subnormals" in msgs[-1]


def test_relative_error_reported_for_subnormals():
    (msg,) = caught(np.array([1e-6]), np.float16)
    # half a subnormal step, 2^-25, over the norm: 2.98e-8 / 1e-6
    assert "relative error up to 0.03" in msg
    stored = np.float16(1e-6).astype(np.float64)
    assert abs(stored - 1e-6) / 1e-6 <= 0.03


def test_bad_arguments():
    with pytest.raises(ValueError, match="norm_dtype must be one of float16, float32, float64; received int8"):
        check_norm_range(np.ones(2), np.int8, "K")
    with pytest.raises(TypeError, match="norm_dtype must be one of"):
        check_norm_range(np.ones(2), "float8", "K")
    with pytest.raises(TypeError, match="name must be a str"):
        check_norm_range(np.ones(2), np.float16, 0)
    with pytest.raises(TypeError, match="norms must be an array of real numbers"):
        check_norm_range(np.array(["a"]), np.float16, "K")
    with pytest.raises(ValueError, match="norms of K must be non-negative numbers; received 1 NaN"):
        check_norm_range(np.array([1.0, np.nan]), np.float16, "K")
    with pytest.raises(ValueError, match="0 NaN and 1 negative"):
        check_norm_range(np.array([-1.0]), np.float32, "K")


def test_schemes_warn_naming_the_side_whose_norms_underflow():
    # wired into the coders: a key vector whose norm float16 cannot hold warns naming K
    # (and its residual), never silently decoding as zeros; an overflow names K too
    import warnings

    import kvstats

    K = np.random.default_rng(0).standard_normal((2, 16, 64))
    V = K.copy()
    K[0, 3] *= 1e-9
    for name in ("KQV", "QKQV", "turboquant_mse"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kvstats.make_scheme(name, 4, 64, seed=0).roundtrip(K, V)
        texts = [str(w.message) for w in caught]
        assert texts and all(t.startswith("K") for t in texts), (name, texts)
    with pytest.raises(ValueError, match="^V has a vector norm"):
        kvstats.make_scheme("KQV", 4, 64, seed=0).roundtrip(V, V * 1e5)
    # float32 entries of 1e-24 square to 0: the norm is recomputed scaled, so the vector
    # is not mistaken for a zero vector and its loss is reported
    K32 = V.astype(np.float32)
    K32[1, 5] *= 1e-24
    for name in ("KQV", "qjl"):
        with pytest.warns(UserWarning, match="^K: 1 of"):
            kvstats.make_scheme(name, 4, 64, seed=0).roundtrip(K32, V.astype(np.float32))


def test_float32_norms_whose_squares_overflow_are_recomputed():
    """float32 entries of 1e20 square past float32's range: the QJL codecs (keys, and the
    residual of TurboQuant-prod) took the inf as the norm and refused it (even with
    norm_dtype=float64, "store the norms as float64"); the norm is recomputed scaled, as
    MSEQuantizer does, and refused only where the stored dtype cannot hold it."""
    from kvstats.quant.mse import MSEQuantizer
    from kvstats.quant.qjl import make_sketch, qjl_encode

    x = np.full((2, 8), 1e20, dtype=np.float32)
    true = np.sqrt(8.0) * 1e20
    sketch = make_sketch("gaussian", 16, 8, seed=0)
    for dtype in (np.float32, np.float64):
        norms = qjl_encode(sketch, x, norm_dtype=dtype).norms
        assert norms.dtype == dtype
        np.testing.assert_allclose(norms, true, rtol=1e-6)
        np.testing.assert_allclose(MSEQuantizer(8, 2, norm_dtype=dtype).encode(x).norms, true, rtol=1e-6)
    with pytest.raises(ValueError, match=r"^x has a vector norm of 2.828e\+20, above the largest float16"):
        qjl_encode(sketch, x)
    # beyond float32 itself (8.5e38): float64 holds it, float32 refuses it by its value
    big = np.full((1, 8), 3e38, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the sketch product overflows float32
        np.testing.assert_allclose(qjl_encode(sketch, big, norm_dtype=np.float64).norms,
                                   np.sqrt(8.0) * 3e38, rtol=1e-6)
        with pytest.raises(ValueError, match=r"vector norm of 8.485e\+38, above the largest float32"):
            qjl_encode(sketch, big, norm_dtype=np.float32)


def test_float32_norms_whose_squares_underflow_are_the_true_norms():
    """float32 entries of 1e-24 square to 0: the norm is recomputed from the row scaled by
    its largest magnitude, and is the true norm (not that magnitude alone) — stored in
    float64, which holds it, it equals the float64 norm of the row."""
    from kvstats.quant.mse import MSEQuantizer
    from kvstats.quant.qjl import make_sketch, qjl_encode

    x = (np.random.default_rng(0).standard_normal((3, 8)) * 1e-24).astype(np.float32)
    true = np.linalg.norm(x.astype(np.float64), axis=-1)
    assert np.all(np.linalg.norm(x, axis=-1) == 0)                 # the float32 squares underflow
    sketch = make_sketch("gaussian", 16, 8, seed=0)
    np.testing.assert_allclose(qjl_encode(sketch, x, norm_dtype=np.float64).norms, true, rtol=1e-6)
    np.testing.assert_allclose(MSEQuantizer(8, 2, norm_dtype=np.float64).encode(x).norms, true, rtol=1e-12)
