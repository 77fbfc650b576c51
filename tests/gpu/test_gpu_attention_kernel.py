"""Decode attention and cache encoding through the Pallas kernels (interpreter on the CPU)
and their CUDA lowering at model-scale shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _gpu_helpers import _kv, manual_spec
from kvstats_gpu.cache import QuantizedKVCache, dequantize_kv, quantize_kv
from kvstats_gpu.decode import decode_attention, dense_decode_attention


# Each case: (d, k_bits, v_bits, k_m, v_m, N, G, block_tokens, n_splits, q_scale, q dtype).
# Together they cover d=64 (below Triton's 16-wide dot: broadcast products) and d=128
# (tensor-core dots), scalar keys, prod keys (scalar + QJL residual), pure QJL keys, values
# with and without the QJL residual, a GQA group that is not a power of two, several splits
# with empty trailing splits and a partial last block, near-one-hot attention (q_scale 40:
# logits spread over hundreds, so the running max and the split rescaling carry the
# result), and bf16 queries.
KERNEL_CASES = [
    (64, 4, 3, 0, 64, 90, 3, 16, 4, 1.0, jnp.float32),       # KQV at 4 bits
    (128, 2, 2, 128, 128, 200, 4, 64, 2, 40.0, jnp.float32),  # QKQV at 3 bits, peaked
    (64, 0, 2, 128, 0, 40, 2, 32, 1, 1.0, jnp.bfloat16),     # pure QJL keys (m = 2d), 2-bit values
]


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_kernel_matches_reference_and_dense_on_dequantized_cache(case):
    d, kb, vb, km, vm, N, G, T, S, q_scale, dtype = case
    spec, params = manual_spec(d, kb, vb, km, vm)
    K, V, q = _kv(2, N, d, G, seed=d + N, q_scale=q_scale)
    q = jnp.asarray(q, dtype)  # every path computes in float32 from the same (rounded) query
    cache = quantize_kv(K, V, spec, params, impl="reference")
    got = np.asarray(decode_attention(q, cache, spec, params, impl="pallas", interpret=True,
                                      block_tokens=T, n_splits=S))
    ref = np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
    Kh, Vh = dequantize_kv(cache, spec, params)
    dense = np.asarray(dense_decode_attention(q, Kh, Vh, length=N))
    # float32 end to end; outputs are O(1): 2e-5 is ~100x the rounding of d-long sums
    np.testing.assert_allclose(got, dense, atol=2e-5)
    np.testing.assert_allclose(ref, dense, atol=2e-5)


def test_quantize_kernels_match_reference_codes():
    spec, params = manual_spec(128, 3, 2, 0, 128)
    K, V, _ = _kv(2, 24, 128, 1, seed=3)
    a = quantize_kv(K, V, spec, params, impl="pallas", interpret=True)
    b = quantize_kv(K, V, spec, params, impl="reference")
    for name, x, y in zip(a._fields, a, b):
        if x is None:
            assert y is None
            continue
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype == np.uint8:
            # identical kernels on identical inputs are bit-exact (tests above); here the
            # rotations differ in float32 summation order, so a code may flip when a rotated
            # coordinate is within an ulp of a boundary (never seen; allowed at <= 1e-3)
            assert np.mean(x != y) <= 1e-3, name
        else:
            np.testing.assert_allclose(x.astype(np.float32), y.astype(np.float32), rtol=1e-3, err_msg=name)


@pytest.mark.parametrize("d,kb,vb,km,vm", [(128, 4, 3, 0, 128), (128, 2, 2, 128, 128), (128, 0, 3, 256, 0),
                                          (64, 4, 3, 0, 64)])  # d = 64 (SmolLM2): sub-16 products
def test_decode_lowers_for_cuda(d, kb, vb, km, vm, lower_cuda):
    # model-scale shape: 32k tokens, 8 KV heads, 4 query heads each (lowering only)
    spec, params = manual_spec(d, kb, vb, km, vm)
    H, C, d8 = 8, 32768, d // 8
    z = lambda *s: jnp.zeros(s, jnp.uint8)  # noqa: E731
    h = lambda: jnp.zeros((H, C), jnp.float16)  # noqa: E731
    cache = QuantizedKVCache(
        z(H, kb, C, d8) if kb else None, h() if kb else None, z(H, C, km // 8) if km else None,
        h() if km else None, z(H, vb, C, d8), h(), z(H, C, vm // 8) if vm else None, h() if vm else None,
        jnp.asarray(C, jnp.int32))
    text = lower_cuda(lambda qq, c: decode_attention(qq, c, spec, params, impl="pallas", interpret=False),
                      jnp.zeros((32, d), jnp.bfloat16), cache)
    assert "kvstats_quantized_decode_attention" in text and "triton" in text


def test_vmap_over_a_batch_of_sequences(lower_cuda):
    # Batched decoding: jax.vmap over caches of different lengths (pallas_call's batching
    # rule adds a grid axis); each sequence equals its own unbatched result.
    spec, params = manual_spec(64, 3, 2, 0, 64)
    caches, qs, singles = [], [], []
    for b, n in enumerate((50, 200)):
        K, V, q = _kv(2, n, 64, 2, seed=b)
        cache = quantize_kv(K, V, spec, params, capacity=256, impl="reference")
        caches.append(cache)
        qs.append(q)
        singles.append(np.asarray(decode_attention(q, cache, spec, params, impl="reference")))
    batch = jax.tree.map(lambda *a: jnp.stack(a), *caches)
    qb = jnp.stack(qs)
    step = jax.vmap(lambda q, c: decode_attention(q, c, spec, params, impl="pallas", interpret=True,
                                                  block_tokens=32))
    out = np.asarray(step(qb, batch))
    for i in range(2):
        np.testing.assert_allclose(out[i], singles[i], atol=2e-5)
    assert "triton" in lower_cuda(jax.vmap(lambda q, c: decode_attention(q, c, spec, params, impl="pallas",
                                                                         interpret=False)), qb, batch)
