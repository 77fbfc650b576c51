"""The `roundtrip` fast paths against their plain reference, ``decode(encode(x))``.

`Scheme.roundtrip`, `MSEQuantizer.roundtrip` and `ProdQuantizer.roundtrip` skip the
storage work (packing codes and sign bits, the second MSE decode of TurboQuant-prod) but
round norms through the storage dtype and run the same arithmetic in the same order and
chunks, so they must agree with the reference bit for bit: every comparison here is
`np.array_equal`, no tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant import mse as mse_module
from kvstats.quant import qjl as qjl_module
from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.schemes import SCHEMES

# every registry name; "mixed" is built by its parameters and also by name, twice
CASES = [(name, {}) for name in SCHEMES if name != "mixed"] + [
    ("mixed", {"key_bits": 3, "value_bits": 1}), ("K4V2", {}), ("K2V4", {})]
FIXED_BITS = {"identity", "mixed", "K4V2", "K2V4"}  # bits=None: the name or params fix them
TOKENS = 200  # 3 x 200 rows > 512, so draws=() coders run more than one row chunk


def build(name, bits, dim, draws, **params):
    return kvstats.make_scheme(name, None if name in FIXED_BITS else bits, dim, seed=7,
                               draws=draws, **params)


def kv(shape, dtype, seed):
    """K, V with the awkward rows: exact zeros, and norms that round to 0 in float16."""
    rng = np.random.default_rng(seed)
    K, V = (rng.standard_normal(shape) for _ in range(2))
    K[..., 7, :] = 0.0
    V[..., 11, :] = 0.0
    K[..., 8, :] *= 1e-10
    V[..., 3, :] *= 1e-10
    return K.astype(dtype), V.astype(dtype)


def assert_same(scheme, K, V):
    K_ref, V_ref = scheme.dequantize(scheme.quantize(K, V))
    K_hat, V_hat = scheme.roundtrip(K, V)
    for got, ref in ((K_hat, K_ref), (V_hat, V_ref)):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        assert np.array_equal(got, ref)


# budgets 2, 3, 4, 8 where the scheme takes one; the name or parameters fix the others'
GRID = [pytest.param(name, params, bits, id=f"{name}{params or ''}-{bits}")
        for name, params in CASES for bits in ([None] if name in FIXED_BITS else [2, 3, 4, 8])]
CASE_IDS = [name + str(params or "") for name, params in CASES]


@pytest.mark.parametrize("name,params,bits", GRID)
@pytest.mark.parametrize("dim", [128, 96])  # 96: Hadamard pads to 128
@pytest.mark.parametrize("draws", [(), (3,)])
def test_scheme_roundtrip_equals_dequantize_quantize(name, params, bits, dim, draws):
    scheme = build(name, bits, dim, draws, **params)
    for dtype in (np.float32, np.float64):
        K, V = kv((3, TOKENS, dim), dtype, seed=(bits or 0) + dim)
        assert_same(scheme, K, V)


@pytest.mark.parametrize("name", ["KQV", "QKQV", "K4V2", "qjl"])
def test_scheme_roundtrip_broadcasts_batch_against_draws(name):
    scheme = build(name, 3, 96, (2, 3))
    K, V = kv((3, 40, 96), np.float32, seed=1)  # batch (3,) against draws (2, 3)
    assert_same(scheme, K, V)
    assert scheme.roundtrip(K, V)[0].shape == (2, 3, 40, 96)


@pytest.mark.parametrize("name,params", [("KQV", {"sketch": "orthogonal", "m": 200}),
                                         ("QKQV", {"rotation": "haar", "norm_dtype": np.float32}),
                                         ("turboquant_prod", {"rotation": "identity", "m": 64}),
                                         ("turboquant_mse", {"norm_dtype": np.float64})])
def test_scheme_roundtrip_with_settings(name, params):
    scheme = build(name, 3, 96, (), **params)
    assert_same(scheme, *kv((TOKENS, 96), np.float64, seed=2))


def test_roundtrip_reconstructs_not_copies():
    # guards the comparisons above against a roundtrip (and dequantize) that return the input
    K, V = kv((TOKENS, 64), np.float64, seed=3)
    for name in ("KV", "KQV", "QKQV"):
        K_hat, V_hat = build(name, 3, 64, ()).roundtrip(K, V)
        assert not np.array_equal(K_hat, K) and not np.array_equal(V_hat, V)
        assert np.sum((K_hat - K) ** 2) < 0.2 * np.sum(K ** 2)
    K_hat, V_hat = build("identity", 3, 64, ()).roundtrip(K, V)
    assert np.array_equal(K_hat, K) and np.array_equal(V_hat, V)


@pytest.mark.parametrize("name", ["KV", "KQV", "QKQV", "turboquant_mse", "turboquant_prod",
                                  "K4V2"])
def test_vector_sides_skip_the_storage_work(name, monkeypatch):
    """The fast path packs nothing and never calls the coders' encode/decode."""
    scheme = build(name, 3, 64, (2,))
    K, V = kv((2, 50, 64), np.float32, seed=4)
    reference = scheme.dequantize(scheme.quantize(K, V))

    def forbidden(*args, **kwargs):
        raise AssertionError("storage work in roundtrip")

    for target in (mse_module, qjl_module):
        for attr in ("pack_codes", "unpack_codes", "pack_bits", "unpack_bits"):
            if hasattr(target, attr):
                monkeypatch.setattr(target, attr, forbidden)
    for cls in (MSEQuantizer, ProdQuantizer):
        monkeypatch.setattr(cls, "encode", forbidden)
        monkeypatch.setattr(cls, "decode", forbidden)
    K_hat, V_hat = scheme.roundtrip(K, V)
    assert np.array_equal(K_hat, reference[0]) and np.array_equal(V_hat, reference[1])


@pytest.mark.parametrize("rotation", ["hadamard", "haar", "identity"])
@pytest.mark.parametrize("dim", [128, 96, 5])  # 5: a code stream that ends mid-byte
@pytest.mark.parametrize("draws", [(), (3,)])
def test_mse_roundtrip_equals_decode_encode(rotation, dim, draws):
    for bits in range(1, 9):  # 1, 2, 4, 8 use the byte-table decode; 3, 5, 6, 7 unpack
        q = MSEQuantizer(dim, bits, rotation=rotation, seed=bits, draws=draws)
        for dtype in (np.float32, np.float64):
            x = kv((3, TOKENS, dim), dtype, seed=bits)[0]
            ref = q.decode(q.encode(x))
            got = q.roundtrip(x)
            assert got.dtype == ref.dtype == dtype and np.array_equal(got, ref)
    q = MSEQuantizer(dim, 3, rotation=rotation, draws=draws)
    vec = np.linspace(-1, 1, dim)  # a single vector: (dim,) for draws=(), (1, dim) otherwise
    vec = vec if not draws else vec[None]
    assert np.array_equal(q.roundtrip(vec), q.decode(q.encode(vec)))


@pytest.mark.parametrize("sketch", ["gaussian", "orthogonal"])
@pytest.mark.parametrize("dim,m", [(128, None), (96, None), (96, 40)])
@pytest.mark.parametrize("draws", [(), (3,)])
@pytest.mark.parametrize("norm_dtype", [np.float16, np.float32])
def test_prod_roundtrip_equals_decode_encode(sketch, dim, m, draws, norm_dtype):
    for bits in (2, 3, 5, 9):
        q = ProdQuantizer(dim, bits, sketch=sketch, m=m, seed=bits, draws=draws,
                          norm_dtype=norm_dtype)
        for dtype in (np.float32, np.float64):
            x = kv((3, TOKENS, dim), dtype, seed=bits)[1]
            ref = q.decode(q.encode(x))
            got = q.roundtrip(x)
            assert got.dtype == ref.dtype == dtype and np.array_equal(got, ref)


def raised(fn):
    """(type, message) of the error ``fn()`` raises."""
    with pytest.raises((ValueError, TypeError)) as info:
        fn()
    return type(info.value), str(info.value)


def test_float16_norm_overflow_is_raised_by_roundtrip_too():
    x = np.full((4, 64), 1e4)  # norm 8e4 > 65504, the largest float16
    for q in (MSEQuantizer(64, 3), ProdQuantizer(64, 3)):
        err = raised(lambda: q.roundtrip(x))
        assert err == raised(lambda: q.encode(x))
        assert err[0] is ValueError and "norm_dtype=np.float32" in err[1]
    scheme = kvstats.make_scheme("KQV", 3, 64)
    err = raised(lambda: scheme.roundtrip(x, x))
    assert err == raised(lambda: scheme.quantize(x, x)) and "float16" in err[1]
    # float32 norms hold it, and the fast path still agrees
    q = MSEQuantizer(64, 3, norm_dtype=np.float32)
    assert np.array_equal(q.roundtrip(x), q.decode(q.encode(x)))


def _bad_inputs(dim):
    K, V = kv((20, dim), np.float64, seed=5)
    nan, inf = K.copy(), V.copy()
    nan[3, 5], inf[2, 1] = np.nan, np.inf
    return {"short V": (K, V[:19]), "wrong dim": (K[:, :32], V[:, :32]), "nan K": (nan, V),
            "inf V": (K, inf), "1-D": (K[0], V[0]), "strings": (K.astype(str), V),
            "empty": (K[:0], V[:0]), "ragged": ([[1.0], [1.0, 2.0]], V)}


@pytest.mark.parametrize("name,params", CASES, ids=CASE_IDS)
def test_bad_input_errors_match_quantize(name, params):
    scheme = build(name, 3, 64, (), **params)
    for label, (K, V) in _bad_inputs(64).items():
        expected = raised(lambda: scheme.quantize(K, V))
        assert raised(lambda: scheme.roundtrip(K, V)) == expected, label


@pytest.mark.parametrize("coder", [MSEQuantizer(64, 3), ProdQuantizer(64, 3)],
                         ids=["mse", "prod"])
def test_coder_bad_input_errors_match_encode(coder):
    x = kv((20, 64), np.float64, seed=6)[0]
    nan = x.copy()
    nan[1, 1] = np.nan
    for bad in (x[:, :32], nan, x.astype(str), x[:0], np.ones(3), [[1.0], [1.0, 2.0]]):
        assert raised(lambda: coder.roundtrip(bad)) == raised(lambda: coder.encode(bad))
