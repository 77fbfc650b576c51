"""The coders' `roundtrip` fast paths against their plain reference, ``decode(encode(x))``.

`MSEQuantizer.roundtrip` and `ProdQuantizer.roundtrip` (and through them
`Scheme.roundtrip`) skip the storage work (packing codes and sign bits, the second MSE
decode of TurboQuant-prod) but round norms through the storage dtype and run the same
arithmetic in the same order and chunks, so they must agree with the reference bit for
bit: every comparison here is `np.array_equal`, no tolerance. Every scheme's round trip
is checked by the registry contract (test_registry_contract.py); here: the coders on
their own, non-default settings, and that the fast path really skips the storage work.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvstats
from kvstats.quant import mse as mse_module
from kvstats.quant import mse_kernels as mse_kernels_module
from kvstats.quant import prod as prod_module
from kvstats.quant import qjl as qjl_module
from kvstats.quant.contract import awkward_kv as kv
from kvstats.quant.mse import MSEQuantizer
from kvstats.quant.coder import NormOverflowError
from kvstats.quant.prod import ProdQuantizer
from kvstats.quant.registry import REGISTRY

# the awkward rows' norms (~1e-10) underflow float16 on purpose: the warning is expected
pytestmark = pytest.mark.filterwarnings("ignore:.*vector norms are below float16:UserWarning")

TOKENS = 200  # 3 x 200 rows > 512, so draws=() coders run more than one row chunk


def build(name, bits, dim, draws, **params):
    return kvstats.make_scheme(name, bits, dim, seed=7, draws=draws, **params)


def assert_same(scheme, K, V):
    K_ref, V_ref = scheme.dequantize(scheme.quantize(K, V))
    K_hat, V_hat = scheme.roundtrip(K, V)
    for got, ref in ((K_hat, K_ref), (V_hat, V_ref)):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        assert np.array_equal(got, ref)


@pytest.mark.parametrize("name,params", [("KQV", {"sketch": "orthogonal", "m": 200}),
                                         ("QKQV", {"rotation": "haar", "norm_dtype": np.float32}),
                                         ("turboquant_prod", {"rotation": "identity", "m": 64}),
                                         ("turboquant_mse", {"norm_dtype": np.float64})])
def test_scheme_roundtrip_with_settings(name, params):
    scheme = build(name, 3, 96, (), **params)
    assert_same(scheme, *kv((TOKENS, 96), np.float64, seed=2))


def _vector_scheme(name, draws=()):
    d = REGISTRY[name]
    return build(name, None if d.fixed_budget else 3, 64, draws, **d.example_params)


# the registry's schemes whose two sides are MSE/Prod coders (those with a fast path)
VECTOR_SCHEMES = [name for name in REGISTRY
                  if all(isinstance(c, (MSEQuantizer, ProdQuantizer))
                         for c in (_vector_scheme(name).key_coder, _vector_scheme(name).value_coder))]


def test_vector_schemes_found():
    assert len(VECTOR_SCHEMES) >= 5


@pytest.mark.parametrize("name", VECTOR_SCHEMES)
def test_vector_sides_skip_the_storage_work(name, monkeypatch):
    """The fast path packs nothing and never calls the coders' encode/decode."""
    scheme = _vector_scheme(name, (2,))
    K, V = kv((2, 50, 64), np.float32, seed=4)
    reference = scheme.dequantize(scheme.quantize(K, V))

    def forbidden(*args, **kwargs):
        raise AssertionError("storage work in roundtrip")

    for target in (mse_module, mse_kernels_module, qjl_module, prod_module):
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
        assert err[0] is NormOverflowError and "norm_dtype=np.float32" in err[1]   # a ValueError
    scheme = kvstats.make_scheme("KQV", 3, 64)
    err = raised(lambda: scheme.roundtrip(x, x))
    assert err == raised(lambda: scheme.quantize(x, x)) and "float16" in err[1]
    # float32 norms hold it, and the fast path still agrees
    q = MSEQuantizer(64, 3, norm_dtype=np.float32)
    assert np.array_equal(q.roundtrip(x), q.decode(q.encode(x)))


@pytest.mark.parametrize("coder", [MSEQuantizer(64, 3), ProdQuantizer(64, 3)],
                         ids=["mse", "prod"])
def test_coder_bad_input_errors_match_encode(coder):
    x = kv((20, 64), np.float64, seed=6)[0]
    nan = x.copy()
    nan[1, 1] = np.nan
    for bad in (x[:, :32], nan, x.astype(str), x[:0], np.ones(3), [[1.0], [1.0, 2.0]]):
        assert raised(lambda: coder.roundtrip(bad)) == raised(lambda: coder.encode(bad))
