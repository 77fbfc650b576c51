"""Decode attention and cache encoding through the Pallas kernels (interpreter on the CPU)
and their CUDA lowering at model-scale shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _gpu_helpers import _kv, manual_spec
from kvstats_gpu.cache import QuantizedKVCache, dequantize_kv, quantize_kv
from kvstats_gpu.decode import decode_attention, decode_partials, dense_decode_attention, finalize_partials


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
# The Mosaic body (d = 128: 16-byte plane rows; blocks of >= 64 tokens): the same kinds
# of cache, G = 3 (no padding in this body), splits that are empty (N = 40 < 64 with 4
# splits) or end in a partial block (N = 150 with 2 splits of 2 blocks: the second split
# holds 22 valid tokens then an empty block, so a grid step that fetched one block but
# masked as another fails), peaked attention, bf16 queries, 128-token blocks.
MOSAIC_CASES = [
    (128, 4, 3, 0, 128, 90, 3, 128, 1, 1.0, jnp.float32),     # KQV at 4 bits
    (128, 2, 2, 128, 128, 150, 4, 64, 2, 40.0, jnp.float32),  # QKQV at 3 bits, peaked
    (128, 0, 2, 256, 0, 40, 2, 64, 4, 1.0, jnp.bfloat16),     # pure QJL keys, empty splits
]


@pytest.mark.parametrize("case,backend", [(c, "triton") for c in KERNEL_CASES]
                         + [(c, "mosaic") for c in MOSAIC_CASES])
def test_kernel_matches_reference_and_dense_on_dequantized_cache(case, backend):
    d, kb, vb, km, vm, N, G, T, S, q_scale, dtype = case
    spec, params = manual_spec(d, kb, vb, km, vm)
    K, V, q = _kv(2, N, d, G, seed=d + N, q_scale=q_scale)
    q = jnp.asarray(q, dtype)  # every path computes in float32 from the same (rounded) query
    cache = quantize_kv(K, V, spec, params, impl="reference")
    got = np.asarray(decode_attention(q, cache, spec, params, impl=backend, interpret=True,
                                      block_tokens=T, n_splits=S))
    ref = np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
    Kh, Vh = dequantize_kv(cache, spec, params)
    dense = np.asarray(dense_decode_attention(q, Kh, Vh, length=N))
    # float32 end to end; outputs are O(1): 2e-5 is ~100x the rounding of d-long sums
    np.testing.assert_allclose(got, dense, atol=2e-5)
    np.testing.assert_allclose(ref, dense, atol=2e-5)


@pytest.mark.parametrize("backend,d,T", [("triton", 64, 32), ("mosaic", 128, 64)])
def test_all_scores_far_below_zero(backend, d, T):
    # Every logit near -300 (queries anti-aligned with keys that share one direction):
    # softmax is shift-invariant, so the output is a plain weighted mean of the values, but
    # exp(s) underflows in float32. The running max must start at -inf (NEG), not at 0:
    # from 0, every exp(s - m) would be 0, l = 0 and the output 0/0. A zero key and a zero
    # value (norm 0: codes of the zero vector, dequantized to exactly 0) sit among the tokens.
    spec, params = manual_spec(d, 3, 2, 0, d)
    rng = np.random.default_rng(9)
    u = rng.normal(size=d).astype(np.float32)
    K = (1.0 + 0.1 * np.abs(rng.normal(size=(2, 150, 1)))) * u + 0.05 * rng.normal(size=(2, 150, d))
    V = rng.normal(size=(2, 150, d)).astype(np.float32)
    K[0, 7], V[1, 11] = 0.0, 0.0
    q = np.tile(-300.0 * np.sqrt(d) / np.dot(u, u) * u, (4, 1)).astype(np.float32)  # logits ~ -300 to -400
    cache = quantize_kv(K.astype(np.float32), V, spec, params, impl=backend, interpret=True)
    Kh, Vh = dequantize_kv(cache, spec, params)
    assert np.all(np.asarray(Kh)[0, 7] == 0) and np.all(np.asarray(Vh)[1, 11] == 0)
    dense = np.asarray(dense_decode_attention(q, Kh, Vh, length=150))
    assert np.all(np.isfinite(dense))
    for impl in (backend, "reference"):
        got = np.asarray(decode_attention(q, cache, spec, params, impl=impl, interpret=True, block_tokens=T,
                                          n_splits=2))
        # float32 logits of size ~350 carry absolute rounding ~350·2^-24·√d ~ 1e-4 (the
        # O(1) cases above hold 2e-5); a start at m = 0 gives NaN
        np.testing.assert_allclose(got, dense, atol=2e-4, err_msg=impl)


def test_an_empty_shard_contributes_nothing_and_one_token_is_its_value(backend):
    # decode_partials with length <= 0 (a sequence shard past the cache's length, as the
    # sharded path passes it): l = 0 and zero accumulators, so the combine ignores it
    # (documented in kvstats_gpu.sharding); every path, not only after the combine.
    spec, params = manual_spec(128, 2, 2, 0, 128)
    K, V, q = _kv(2, 40, 128, 2, seed=2)
    cache = quantize_kv(K, V, spec, params, impl="reference")
    # length traced, as inside the sharded path: one compiled program per impl serves both lengths
    partials = {impl: jax.jit(lambda n, impl=impl: decode_partials(q, cache, spec, params, length=n, impl=impl,
                                                                   interpret=True, block_tokens=64,
                                                                   n_splits=2))
                for impl in (backend, "reference")}
    for length in (0, -64):
        for impl in (backend, "reference"):
            parts = partials[impl](length)
            assert np.all(np.asarray(parts.l) == 0) and np.all(np.asarray(parts.a) == 0), (impl, length)
            assert np.all(np.asarray(parts.b) == 0), (impl, length)
    # a single token (the first decode step; one valid row in the first block of the first
    # split, its second block and the other split empty): its softmax weight is exactly 1, so each query head's output is that
    # token's dequantized value (float32 rounding of the rotation and sketch products apart)
    Vh = np.asarray(dequantize_kv(cache, spec, params)[1])[:, 0]  # (H, d)
    for impl in (backend, "reference"):
        parts = partials[impl](1)
        assert np.all(np.asarray(parts.l) == 1.0), impl
        out = np.asarray(finalize_partials(parts, spec, params, impl="reference")).reshape(2, 2, 128)
        np.testing.assert_allclose(out, np.broadcast_to(Vh[:, None], out.shape), atol=1e-5 * np.abs(Vh).max(),
                                   err_msg=impl)


def test_quantize_kernels_match_reference_codes(backend):
    spec, params = manual_spec(128, 3, 2, 0, 128)
    K, V, _ = _kv(2, 24, 128, 1, seed=3)
    a = quantize_kv(K, V, spec, params, impl=backend, interpret=True)
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


def _zero_cache(d, kb, vb, km, vm, H=8, C=32768):
    z = lambda *s: jnp.zeros(s, jnp.uint8)  # noqa: E731
    h = lambda: jnp.zeros((H, C), jnp.float16)  # noqa: E731
    return QuantizedKVCache(
        z(H, kb, C, d // 8) if kb else None, h() if kb else None, z(H, C, km // 8) if km else None,
        h() if km else None, z(H, vb, C, d // 8), h(), z(H, C, vm // 8) if vm else None, h() if vm else None,
        jnp.asarray(C, jnp.int32))


@pytest.mark.parametrize("d,kb,vb,km,vm", [(128, 4, 3, 0, 128), (128, 2, 2, 128, 128), (128, 0, 3, 256, 0)])
def test_decode_lowers_for_cuda(d, kb, vb, km, vm, backend, lower_cuda, lowers_through):
    # model-scale shape: 32k tokens, 8 KV heads, 4 query heads each (lowering only), and the
    # whole decode step (query rotation, kernel, combine, inverse rotation) lowered
    spec, params = manual_spec(d, kb, vb, km, vm)
    text = lower_cuda(lambda qq, c: decode_attention(qq, c, spec, params, impl=backend, interpret=False),
                      jnp.zeros((32, d), jnp.bfloat16), _zero_cache(d, kb, vb, km, vm))
    assert "kvstats_quantized_decode_attention" in text and lowers_through(text, backend)


def test_d64_decode_lowers_through_triton(lower_cuda, lowers_through):
    # d = 64 (SmolLM2): 8-byte plane rows, which Mosaic's block copies cannot move, so
    # impl="pallas" takes Triton for the attention kernel (sub-16 products become
    # broadcast multiply-sums there); the step's inverse rotation (64-float rows) stays Mosaic
    spec, params = manual_spec(64, 4, 3, 0, 64)
    step = lambda qq, c: decode_partials(qq, c, spec, params, impl="pallas", interpret=False)  # noqa: E731
    text = lower_cuda(step, jnp.zeros((32, 64), jnp.bfloat16), _zero_cache(64, 4, 3, 0, 64))
    assert lowers_through(text, "triton")
    with pytest.raises(ValueError, match="impl='mosaic' cannot run this call: the cache has per-token rows"):
        decode_attention(jnp.zeros((32, 64)), _zero_cache(64, 4, 3, 0, 64, C=256), spec, params, impl="mosaic",
                         interpret=True)


@pytest.mark.parametrize("backend,d,T", [("triton", 64, 32), ("mosaic", 128, 64)])
def test_vmap_over_a_batch_of_sequences(backend, d, T, lower_cuda, lowers_through):
    # Batched decoding: jax.vmap over caches of different lengths, each sequence equal to
    # its own unbatched result. Triton: pallas_call's batching rule adds a grid axis.
    # Mosaic (no batched grids): the batch is folded into rows (encode, rotation) or KV
    # heads (decode attention, each head with its own length) by kvstats_gpu's vmap rule.
    spec, params = manual_spec(d, 3, 2, 0, d)
    Ks, Vs, qs, singles = [], [], [], []
    for b, n in enumerate((50, 200)):
        K, V, q = _kv(2, n, d, 2, seed=b)
        cache = quantize_kv(K, V, spec, params, capacity=256, impl="reference")
        Ks.append(np.pad(K, ((0, 0), (0, 200 - n), (0, 0))))
        Vs.append(np.pad(V, ((0, 0), (0, 200 - n), (0, 0))))
        qs.append(q)
        singles.append((cache, np.asarray(decode_attention(q, cache, spec, params, impl="reference"))))
    batch = jax.tree.map(lambda *a: jnp.stack(a), *[c for c, _ in singles])
    qb = jnp.stack(qs)
    step = jax.vmap(lambda q, c: decode_attention(q, c, spec, params, impl=backend, interpret=True,
                                                  block_tokens=T))
    out = np.asarray(step(qb, batch))
    for i in range(2):
        np.testing.assert_allclose(out[i], singles[i][1], atol=2e-5)
    text = lower_cuda(jax.vmap(lambda q, c: decode_attention(q, c, spec, params, impl=backend, interpret=False)),
                      qb, batch)
    assert lowers_through(text, backend)
    if backend == "triton":  # Triton batches grids itself; Mosaic's fold rule is tested below
        return
    # the encode kernels under vmap give each sequence its own codes (the reference's, up
    # to the rare float32-rounding flips at a boundary allowed above)
    enc = jax.vmap(lambda K, V: quantize_kv(K, V, spec, params, capacity=256, impl=backend, interpret=True))
    cb = enc(jnp.stack(Ks), jnp.stack(Vs))
    for i, n in enumerate((50, 200)):
        ref = singles[i][0]
        assert np.mean(np.asarray(cb.k_planes[i])[:, :, :n] != np.asarray(ref.k_planes)[:, :, :n]) <= 1e-3
        assert np.mean(np.asarray(cb.v_signs[i])[:, :n] != np.asarray(ref.v_signs)[:, :n]) <= 1e-3
        np.testing.assert_allclose(np.asarray(cb.v_norms[i])[:, :n].astype(np.float32),
                                   np.asarray(ref.v_norms)[:, :n].astype(np.float32), rtol=1e-3)
