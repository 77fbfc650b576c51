"""A cache remembers the spec and params that quantized it (kvstats_gpu.cache_checks): calls
given another draw's params refuse it instead of decoding garbage; and norms float16 stores
as subnormals or 0 warn, as the numpy core's check_norm_range does."""

import dataclasses
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax.sharding import Mesh  # noqa: E402

from kvstats.quant.coder import check_norm_range  # noqa: E402
from kvstats_gpu import (append_kv, decode_attention, decode_partials, dense_decode_attention,  # noqa: E402
                         dequantize_kv, make_cache_spec, quantize_kv, sharded_decode_attention)
from kvstats_gpu.cache import CacheParams, check_cache  # noqa: E402
from kvstats_gpu.cache_checks import params_fingerprint  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _data(H=2, N=40, d=64, G=2, seed=0):
    rng = np.random.default_rng(seed)
    K, V = rng.normal(size=(2, H, N, d)).astype(np.float32)
    return K, V, rng.normal(size=(H * G, d)).astype(np.float32)


def _every_call(cache, spec, params, q, K):
    mesh = Mesh(np.array(jax.devices()[:1]), ("heads",))
    return {"decode_attention": lambda: decode_attention(q, cache, spec, params, impl="reference"),
            "decode_partials": lambda: decode_partials(q, cache, spec, params, impl="reference"),
            "dequantize_kv": lambda: dequantize_kv(cache, spec, params),
            "append_kv": lambda: append_kv(cache, K[:, :1], K[:, :1], spec, params, impl="reference"),
            "append_kv of 0 tokens": lambda: append_kv(cache, K[:, :0], K[:, :0], spec, params),
            "check_cache": lambda: check_cache(cache, spec, params),
            "sharded_decode_attention": lambda: sharded_decode_attention(q, cache, spec, params, mesh,
                                                                         impl="reference")}


def test_another_seed_s_params_are_refused_by_every_call():
    spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    other = make_cache_spec("KQV", 4, 64, seed=1)[1]
    K, V, q = _data()
    cache = quantize_kv(K, V, spec, params, capacity=300, impl="reference")
    # the failure this guards against: the other seed's params decode garbage, no error
    ref = np.asarray(dense_decode_attention(q, K, V))
    err = lambda o: np.linalg.norm(np.asarray(o) - ref) / np.linalg.norm(ref)  # noqa: E731
    right = decode_attention(q, cache, spec, params, impl="reference")
    wrong = decode_attention(q, cache._replace(fingerprint=None), spec, other, impl="reference")
    assert err(right) < 0.4 < 1.0 < err(wrong)
    for name, call in _every_call(cache, spec, other, q, K).items():
        with pytest.raises(ValueError, match=r"quantized with params fingerprint [0-9a-f-]+; received spec and "
                           r"params with fingerprint [0-9a-f-]+, which differ in params\.k_signs, "
                           r"params\.v_signs, params\.v_sketch: pass the CacheSpec and CacheParams"):
            call()
    for name, call in _every_call(cache, spec, params, q, K).items():
        call()  # its own params pass everywhere


def test_another_scheme_with_the_same_shapes_is_refused():
    # KV@3 and turboquant_mse@3 at one seed: same spec (codebooks, shapes), other rotations
    spec, params = make_cache_spec("KV", 3, 64, seed=0)
    spec2, other = make_cache_spec("turboquant_mse", 3, 64, seed=0)
    assert spec2.bytes_per_token_head() == spec.bytes_per_token_head()
    K, V, q = _data()
    cache = quantize_kv(K, V, spec, params, impl="reference")
    with pytest.raises(ValueError, match=r"differ in params\.k_signs, params\.v_signs:"):
        decode_attention(q, cache, spec2, other, impl="reference")
    # a spec of the same shapes that decodes differently (another QJL constant) is named as such
    spec3, params3 = make_cache_spec("KQV", 4, 64, seed=0)
    cache3 = quantize_kv(K, V, spec3, params3, impl="reference")
    with pytest.raises(ValueError, match=r"differ in spec \(dims, codebooks, QJL scales\):"):
        decode_attention(q, cache3, dataclasses.replace(spec3, v_scale=2 * spec3.v_scale), params3,
                         impl="reference")
    # the name alone decodes nothing differently: accepted
    decode_attention(q, cache3, dataclasses.replace(spec3, name="renamed"), params3, impl="reference")


def test_the_same_params_in_another_dtype_or_array_type_pass():
    spec, params = make_cache_spec("QKQV", 3, 64, seed=2)
    K, V, q = _data()
    cache = quantize_kv(K, V, spec, params, impl="reference")
    as64 = CacheParams(*[None if a is None else np.asarray(a, np.float64) for a in params])
    np.testing.assert_array_equal(decode_attention(q, cache, spec, as64, impl="reference"),
                                  decode_attention(q, cache, spec, params, impl="reference"))
    np.testing.assert_array_equal(params_fingerprint(spec, as64), np.asarray(cache.fingerprint))


def test_the_fingerprint_survives_jit_and_is_checked_after_it():
    spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    other = make_cache_spec("KQV", 4, 64, seed=1)[1]
    K, V, q = _data(N=60)
    cache = quantize_kv(K[:, :40], V[:, :40], spec, params, capacity=300, impl="reference")
    step = jax.jit(lambda c, k, v: append_kv(c, k, v, spec, params, impl="reference"))
    for t in range(40, 60, 5):
        cache = step(cache, K[:, t:t + 5], V[:, t:t + 5])
    assert int(cache.length) == 60
    np.testing.assert_array_equal(np.asarray(cache.fingerprint), params_fingerprint(spec, params))
    with pytest.raises(ValueError, match="fingerprint"):
        decode_attention(q, cache, spec, other, impl="reference")
    # quantized inside jit with concrete params: fingerprinted all the same
    enc = jax.jit(lambda k, v: quantize_kv(k, v, spec, params, impl="reference"))(K, V)
    np.testing.assert_array_equal(np.asarray(enc.fingerprint), params_fingerprint(spec, params))


def test_a_cache_without_a_fingerprint_is_not_checked_and_a_malformed_one_is_refused():
    spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    other = make_cache_spec("KQV", 4, 64, seed=1)[1]
    K, V, q = _data()
    cache = quantize_kv(K, V, spec, params, impl="reference")
    decode_attention(q, cache._replace(fingerprint=None), spec, other, impl="reference")  # built by hand
    with pytest.raises(ValueError, match=r"cache\.fingerprint must be None or an integer array of shape \(5,\)"):
        decode_attention(q, cache._replace(fingerprint=np.zeros(3, np.uint32)), spec, params, impl="reference")


def test_fingerprints_are_the_same_in_another_process():
    # a hash of bytes, not Python's per-process salted hash(): a cache saved and reloaded
    # (or built on another host) is checked against the same value
    spec, params = make_cache_spec("KQV", 4, 64, seed=3)
    code = ("from kvstats_gpu import make_cache_spec; from kvstats_gpu.cache_checks import params_fingerprint; "
            "print(params_fingerprint(*make_cache_spec('KQV', 4, 64, seed=3)).tolist())")
    env = dict(os.environ, PYTHONHASHSEED="12345", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                         check=True).stdout
    assert out.strip() == str(params_fingerprint(spec, params).tolist())


def _tiny(norm, d=64):
    x = np.zeros((1, 1, d), np.float32)
    x[..., :2] = np.float32(norm) * np.array([0.6, 0.8], np.float32)
    return x


@pytest.mark.parametrize("norm,what", [(1e-6, "are float16 subnormals"),
                                       (1e-8, "are below float16's smallest subnormal")])
def test_subnormal_norms_warn_as_the_numpy_core_does(norm, what):
    spec, params = make_cache_spec("turboquant_mse", 3, 64, seed=0)
    x = _tiny(norm)
    with pytest.warns(UserWarning) as caught:
        cache = quantize_kv(x, x, spec, params, impl="reference")
    assert [str(w.message).startswith(f"{side}'s vectors: 1 of 1 norms {what}")
            for w, side in zip(caught, "KV")] == [True, True] and len(caught) == 2
    # the numpy core's rule (kvstats.quant.coder.check_norm_range) warns for the same norm
    with pytest.warns(UserWarning, match=f"K: 1 of 1 vector norms {what}"):
        check_norm_range(np.linalg.norm(x, axis=-1), np.float16, "K")
    # and what is stored is float16's rounding of the norm, as the numpy scheme stores it
    assert np.asarray(cache.k_norms)[0, 0] == np.float16(np.linalg.norm(x))
    with pytest.warns(UserWarning) as caught:
        append_kv(cache, x, x, spec, params, impl="reference")
    assert len(caught) == 2 and f"V's vectors: 1 of 1 norms {what}" in str(caught[1].message)


def test_normal_norms_do_not_warn_and_a_subnormal_residual_does():
    spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    K, V, _ = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quantize_kv(K, V, spec, params, impl="reference")
        quantize_kv(_tiny(1e-2), _tiny(1e-2), spec, params, impl="reference")  # residual 6e-4
    # V's norm is normal (1e-4 > 6.1e-5), the residual of its 3-bit code is not
    x = np.random.default_rng(0).normal(size=(1, 1, 64)).astype(np.float32)
    x *= 1e-4 / np.linalg.norm(x)
    with pytest.warns(UserWarning) as caught:
        quantize_kv(x, x, spec, params, impl="reference")
    assert [str(w.message)[:58] for w in caught] == ["the QJL residual of V: 1 of 1 norms are float16 subnormals"]
