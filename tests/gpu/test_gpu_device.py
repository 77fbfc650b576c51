"""Real-GPU checks (compiled kernels, no interpreter), through each Pallas backend (Mosaic
GPU, the default, and Triton); skipped without a GPU. None of these has run yet (no GPU
was lent to the sessions that wrote them): see docs/gpu.md. A backend's compile failure
fails its own parametrisation only."""

import jax.numpy as jnp
import numpy as np
import pytest

import kvstats
from _gpu_helpers import cache_disagreement
from kvstats_gpu.bench import AGREE_RTOL, rel_err
from kvstats_gpu.bridge import make_cache_spec
from kvstats_gpu.cache import quantize_kv
from kvstats_gpu.decode import decode_attention
from kvstats_gpu.codebook import StaticCodebook, decode_packed, encode_packed
from kvstats_gpu.qjl import qjl_scores, qjl_sketch
from kvstats_gpu.rotation import rotate

pytestmark = pytest.mark.gpu


def test_compiled_small_kernels_equal_references(backend):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 128)).astype(np.float32)
    signs = np.where(rng.random(128) < 0.5, -1.0, 1.0)
    np.testing.assert_allclose(np.asarray(rotate(x, signs, impl=backend)),
                               np.asarray(rotate(x, signs, impl="reference")), atol=1e-5)
    np.testing.assert_allclose(np.asarray(rotate(x, signs, inverse=True, impl=backend)),
                               np.asarray(rotate(x, signs, inverse=True, impl="reference")), atol=1e-5)
    cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(4, "beta", dim=128))
    y = np.asarray(rotate(x / np.linalg.norm(x, axis=-1, keepdims=True), signs, impl="reference"))
    planes = np.asarray(encode_packed(y, cb, impl=backend))
    np.testing.assert_array_equal(planes, np.asarray(encode_packed(y, cb, impl="reference")))
    np.testing.assert_array_equal(np.asarray(decode_packed(planes, cb, impl=backend)),
                                  np.asarray(decode_packed(planes, cb, impl="reference")))
    S = rng.normal(size=(128, 128)).astype(np.float32)
    b1, n1 = qjl_sketch(x, S, impl=backend)
    b2, n2 = qjl_sketch(x, S, impl="reference")
    assert np.mean(np.asarray(b1) != np.asarray(b2)) < 1e-4  # only near-zero projections may differ
    np.testing.assert_allclose(np.asarray(n1), np.asarray(n2), rtol=1e-6)
    q = rng.normal(size=(8, 4, 128)).astype(np.float32)
    bits = np.asarray(b2).reshape(8, 512, 16)
    norms = np.asarray(n2).reshape(8, 512)
    np.testing.assert_allclose(np.asarray(qjl_scores(q, bits, norms, S, impl=backend)),
                               np.asarray(qjl_scores(q, bits, norms, S, impl="reference")), rtol=1e-4, atol=1e-3)


N_TOKENS = 32768


@pytest.fixture(scope="module")
def kv_32k():
    """K, V (8 KV heads x 32k tokens x 128, bf16), 32 query heads, and a dict for the jnp
    reference caches: drawn and built once for all four backend x scheme cases (the
    runbook gives this step two minutes of device time)."""
    rng = np.random.default_rng(1)
    K = jnp.asarray(rng.normal(size=(8, N_TOKENS, 128)), jnp.bfloat16)
    V = jnp.asarray(rng.normal(size=(8, N_TOKENS, 128)), jnp.bfloat16)
    q = jnp.asarray(rng.normal(size=(32, 128)), jnp.bfloat16)
    return K, V, q, {}


@pytest.mark.parametrize("name,bits", [("KQV", 4), ("QKQV", 3)])
def test_compiled_decode_attention_at_32k_tokens(name, bits, backend, kv_32k):
    spec, params = make_cache_spec(name, bits, 128, seed=0)
    K, V, q, ref_caches = kv_32k
    cache = quantize_kv(K, V, spec, params, impl=backend)
    if (name, bits) not in ref_caches:
        ref_caches[name, bits] = quantize_kv(K, V, spec, params, impl="reference")
    ref_cache = ref_caches[name, bits]
    # every part of the cache, not only the key planes (the decode check below runs on the
    # backend's own cache, so a wrong value plane, sign or norm would pass it); codes may move
    # only where a rotated coordinate is within float32 rounding of a boundary, and then that
    # token's residual signs with them (_gpu_helpers.cache_disagreement says how each part is
    # counted, and what summation order alone gives)
    for part, x, y in zip(cache._fields, cache, ref_cache):
        assert (x is None) == (y is None), part
    disagreement = cache_disagreement(cache, ref_cache)
    assert max(disagreement.values()) < 1e-4, disagreement
    assert int(cache.length) == int(ref_cache.length) == N_TOKENS
    got = np.asarray(decode_attention(q, cache, spec, params, impl=backend))
    want = np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
    # relative (the bench's bound): outputs at 32k tokens are means of ~1e4 values, ~1e-2 in
    # size, where an absolute 5e-5 would pass a 0.5% error; float32 gives ~1e-6 (interpreter)
    assert rel_err(got, want) <= AGREE_RTOL, rel_err(got, want)
