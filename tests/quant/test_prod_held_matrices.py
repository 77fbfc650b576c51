"""ProdQuantizer/MSEQuantizer.hold_matrices_as: the dense matrices (Haar rotation, Gaussian or
orthogonal sketch) held in float32 for a caller that codes float32 only (the quantized cache's
numpy-coded schemes), with the codes and decodes of float64-held matrices bit for bit."""

import dataclasses

import numpy as np
import pytest

from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.schemes import make_scheme


def _arrays(codes):
    """Every array of a (nested) codes dataclass, in field order."""
    out = []
    for f in dataclasses.fields(codes):
        v = getattr(codes, f.name)
        if dataclasses.is_dataclass(v):
            out += _arrays(v)
        elif isinstance(v, np.ndarray):
            out.append(v)
    return out


def _assert_same(a, b):
    xa, xb = _arrays(a), _arrays(b)
    assert len(xa) == len(xb) > 0
    for u, v in zip(xa, xb):
        assert u.dtype == v.dtype
        np.testing.assert_array_equal(u, v)


# The cache's numpy path: make_scheme with SeedSequence([seed, layer]) and one draw per KV
# head, float32 blocks (batch, 3 heads, tokens, 64): a prefill, one token, a batch of two.
@pytest.mark.parametrize("name,bits,params", [
    ("KQV", 4, {"rotation": "haar"}), ("QKQV", 3, {"rotation": "haar"}),
    ("turboquant_prod", 2, {"rotation": "haar", "sketch": "orthogonal", "m": 96}),
    ("turboquant_mse", 4, {"rotation": "haar"}), ("QKQV", 4, {"sketch": "srht", "rotation": "haar"}),
])
def test_schemes_with_matrices_held_in_float32_code_float32_bit_for_bit(name, bits, params):
    ref = make_scheme(name, bits, 64, seed=np.random.SeedSequence([5, 0]), draws=(3,), **params)
    held = make_scheme(name, bits, 64, seed=np.random.SeedSequence([5, 0]), draws=(3,), **params)
    full = 0
    for coder in (held.key_coder, held.value_coder):
        before = sum(a.nbytes for a in _matrices(coder))
        full += before
        coder.hold_matrices_as(np.float32)
        assert all(a.dtype == np.float32 for a in _matrices(coder))
        assert 2 * sum(a.nbytes for a in _matrices(coder)) == before
    assert full >= 3 * 64 * 64 * 8 * 2  # a Haar matrix per side (and sketches) were float64
    rng = np.random.default_rng(1)
    for shape in [(1, 3, 40, 64), (1, 3, 1, 64), (2, 3, 5, 64)]:
        K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        a, b = ref.quantize(K, V), held.quantize(K, V)
        _assert_same(a.key, b.key)
        _assert_same(a.value, b.value)
        for x, y in zip(ref.dequantize(a), held.dequantize(b)):
            assert x.dtype == y.dtype == np.float32
            np.testing.assert_array_equal(x, y)


def _matrices(coder):
    mse = getattr(coder, "mse", coder)
    out = [] if mse.rotation.orthogonal is None else [mse.rotation.orthogonal]
    sketch = getattr(coder, "sketch", None)
    return out + ([sketch.dense] if sketch is not None and sketch.dense is not None else [])


@pytest.mark.parametrize("rotation", ["haar", "hadamard"])
@pytest.mark.parametrize("sketch", ["gaussian", "srht"])
def test_prod_held_in_float32_roundtrip_and_scores_bit_for_bit(rotation, sketch):
    # no draws, more rows than one chunk of the sketch products (_groups' BLAS-row groups)
    ref = ProdQuantizer(96, 3, rotation=rotation, sketch=sketch, seed=2)
    held = ProdQuantizer(96, 3, rotation=rotation, sketch=sketch, seed=2)
    held.hold_matrices_as(np.float32)
    rng = np.random.default_rng(3)
    x, q = (rng.standard_normal((n, 96)).astype(np.float32) for n in (300, 4))
    _assert_same(ref.encode(x), held.encode(x))
    np.testing.assert_array_equal(held.roundtrip(x), ref.roundtrip(x))
    np.testing.assert_array_equal(held.decode(held.encode(x)), ref.decode(ref.encode(x)))
    np.testing.assert_array_equal(held.scores(q, held.encode(x)), ref.scores(q, ref.encode(x)))
    if sketch == "srht":
        assert held.sketch.dense is None and "matrix" not in vars(held.sketch)  # nothing materialised


def test_hold_matrices_as_checks_dtype_and_keeps_float64_coders_apart():
    pq = ProdQuantizer(64, 3, rotation="haar", seed=0)
    with pytest.raises(ValueError, match="dtype must be one of .*float16"):
        pq.hold_matrices_as(np.float16)
    mq = MSEQuantizer(64, 3, rotation="haar", seed=0)
    with pytest.raises(ValueError, match="dtype must be one of .*float16"):
        mq.hold_matrices_as(np.float16)
    # a coder that is never told (the sweep, which may code float64) keeps float64
    assert pq.sketch.dense.dtype == pq.mse.rotation.orthogonal.dtype == np.float64
    pq.hold_matrices_as(np.float32)
    mq.hold_matrices_as(np.float32)
    assert pq.sketch.dense.dtype == pq.mse.rotation.orthogonal.dtype == mq.rotation.orthogonal.dtype == np.float32
