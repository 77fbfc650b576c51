"""A referee's findings on the CPU (critic_gpu20): float16 norm overflow, append past the
capacity under jit, empty caches under jit, appending zero tokens."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

import kvstats
from kvstats.quant.coder import NormOverflowError
from kvstats_gpu.bridge import make_cache_spec
from kvstats_gpu.cache import PAGE, append_kv, check_cache, quantize_kv
from kvstats_gpu.decode import decode_attention
from kvstats_gpu.sharding import sharded_decode_attention


def _kv(H=1, N=20, d=128, seed=0):
    K, V = np.random.default_rng(seed).normal(size=(2, H, N, d)).astype(np.float32)
    return K, V


@pytest.mark.parametrize("side", ["K", "V"])
def test_a_norm_above_float16_is_refused_not_decoded_as_nan(side):
    # 65504 is float16's largest finite value (np.finfo(np.float16).max); the norm was stored as
    # inf and decode gave NaN without an error (the numpy core raises NormOverflowError)
    spec, params = make_cache_spec("KQV", 4, 128, seed=0)
    K, V = _kv()
    X = K if side == "K" else V
    X[0, 3] *= 65600 / np.linalg.norm(X[0, 3])
    with pytest.raises(NormOverflowError, match=f"{side} has a vector norm of 6.56e\\+04, above the largest "
                                                f"float16 \\(65504\\).*rescale {side}"):
        quantize_kv(K, V, spec, params, impl="reference")
    scheme = kvstats.make_scheme("KQV", 4, 128, seed=0)
    with pytest.raises(NormOverflowError):  # the same rule as the numpy core's
        scheme.quantize(K.astype(np.float64), V.astype(np.float64))
    small = _kv(N=5, seed=1)
    cache = quantize_kv(*small, spec, params, capacity=PAGE, impl="reference")
    with pytest.raises(NormOverflowError, match=f"rescale {side}"):
        append_kv(cache, K, V, spec, params, impl="reference")
    # just below the limit: stored finite, attention finite
    X[0, 3] *= 65400 / np.linalg.norm(X[0, 3])
    cache = quantize_kv(K, V, spec, params, impl="reference")
    q = np.ones((2, 128), np.float32) * 1e-3
    assert np.isfinite(np.asarray(decode_attention(q, cache, spec, params, impl="reference"))).all()


def test_a_qjl_residual_norm_above_float16_is_refused():
    # unrotated 1-bit codes of a spike: the residual (every zero coordinate coded as +-c0) is
    # ~1.2x longer than the key, 60000 -> above 65504 although the key's own norm is not
    spec, params = make_cache_spec("turboquant_prod", 2, 128, seed=0, rotation="identity")
    K = np.zeros((1, 1, 128), np.float32)
    K[0, 0, 0] = 60000.0
    V = np.ones((1, 1, 128), np.float32)
    with pytest.raises(NormOverflowError, match="the QJL residual of K has a norm above the largest float16"):
        quantize_kv(K, V, spec, params, impl="reference")
    cache = quantize_kv(V, V, spec, params, capacity=PAGE, impl="reference")
    with pytest.raises(NormOverflowError, match="residual of K"):
        append_kv(cache, K, V, spec, params, impl="reference")


def test_append_past_the_capacity_under_jit_spoils_the_cache_visibly():
    # dynamic_update_slice clamps: a jitted append past the capacity overwrote the last tokens
    # and set length 260 > 256, which decode under jit attended in full, silently
    spec, params = make_cache_spec("KQV", 4, 128, seed=0)
    K, V = _kv(N=250)
    cache = quantize_kv(K, V, spec, params, capacity=PAGE, impl="reference")
    step = jax.jit(lambda c, k, v: append_kv(c, k, v, spec, params, impl="reference"))
    decode = jax.jit(lambda q, c: decode_attention(q, c, spec, params, impl="reference"))
    q = np.random.default_rng(2).normal(size=(2, 128)).astype(np.float32)
    full = step(cache, K[:, :6], V[:, :6])
    assert int(full.length) == PAGE and np.isfinite(np.asarray(decode(q, full))).all()
    over = step(cache, K[:, :10], V[:, :10])
    assert int(over.length) == PAGE + 1
    assert int(step(over, K[:, :1], V[:, :1]).length) == PAGE + 1  # it stays spoiled
    assert np.isnan(np.asarray(decode(q, over))).all()
    with pytest.raises(ValueError, match="received 257, the length append_kv sets under jit"):
        check_cache(over, spec)
    with pytest.raises(ValueError, match="append_kv sets under jit"):
        decode_attention(q, over, spec, params, impl="reference")
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("heads", "seq"))
    sharded = jax.jit(lambda c: sharded_decode_attention(q, c, spec, params, mesh, seq_axis="seq",
                                                         impl="reference"))
    assert np.isnan(np.asarray(sharded(over))).all()
    assert np.isfinite(np.asarray(sharded(full))).all()


def test_an_empty_cache_attends_to_nan_under_jit_by_design():
    # the softmax over no tokens is undefined: a ValueError eagerly (tested elsewhere), NaN under jit
    spec, params = make_cache_spec("KQV", 4, 128, seed=0)
    cache = quantize_kv(*_kv(N=3), spec, params, impl="reference")
    empty = cache._replace(length=jnp.int32(0))
    q = np.ones((2, 128), np.float32)
    decode = jax.jit(lambda c: decode_attention(q, c, spec, params, impl="reference"))
    assert np.isnan(np.asarray(decode(empty))).all()
    assert np.isfinite(np.asarray(decode(cache))).all()


def test_appending_zero_tokens_returns_the_cache_unchanged():
    spec, params = make_cache_spec("QKQV", 3, 128, seed=0)
    K, V = _kv(H=2, N=7)
    cache = quantize_kv(K, V, spec, params, capacity=PAGE, impl="reference")
    none = np.zeros((2, 0, 128), np.float32)
    assert append_kv(cache, none, none, spec, params) is cache
    out = jax.jit(lambda c: append_kv(c, none, none, spec, params, impl="reference"))(cache)
    for name, a, b in zip(cache._fields, cache, out):
        if a is not None:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    with pytest.raises(ValueError, match=r"K must have 2 heads"):
        append_kv(cache, none[:1], none[:1], spec, params)
    with pytest.raises(ValueError, match=r"shape \(H, N, 128\)"):
        append_kv(cache, none[..., :64], none[..., :64], spec, params)
