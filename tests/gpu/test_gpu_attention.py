"""Decode attention over a quantized cache: kernel (interpret mode) vs jnp reference vs the
float32 dense reference on the dequantized cache; numpy-core parity; memory accounting."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kvstats
from kvstats.quant.packing import unpack_codes
from kvstats.quant.qjl import make_sketch
from kvstats.quant.rotation import make_rotation
from kvstats_gpu.attention import (PAGE, CacheParams, CacheSpec, QuantizedKVCache, append_kv, cache_bytes_per_token,
                                   decode_attention, decode_partials, dense_decode_attention,
                                   dequantize_kv, make_cache_spec, quantize_kv)
from kvstats_gpu.codebook import StaticCodebook, unpack_planes_reference


def manual_spec(d, k_bits, v_bits, k_m, v_m, seed=0):
    """A spec from the numpy core's primitives (codebook, rotation, sketch), any combination."""
    cb = (lambda b: StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(b, "beta", dim=d))
          if b else None)
    ks = make_sketch("gaussian", k_m, d, seed=seed + 3) if k_m else None
    vs = make_sketch("orthogonal", v_m, d, seed=seed + 4) if v_m else None
    spec = CacheSpec(dim=d, k_dpad=d, v_dpad=d, k_codebook=cb(k_bits), v_codebook=cb(v_bits), k_m=k_m,
                     v_m=v_m, k_scale=ks.scale if ks else 0.0, v_scale=vs.scale if vs else 0.0)
    f = lambda a: None if a is None else jnp.asarray(a, jnp.float32)  # noqa: E731
    return spec, CacheParams(f(make_rotation("hadamard", d, seed=seed + 1).signs),
                             f(make_rotation("hadamard", d, seed=seed + 2).signs),
                             f(None if ks is None else ks.matrix), f(None if vs is None else vs.matrix))


def _kv(H, N, d, G, seed=0, q_scale=1.0):
    rng = np.random.default_rng(seed)
    K, V = rng.normal(size=(2, H, N, d)).astype(np.float32)
    return K, V, (q_scale * rng.normal(size=(H * G, d))).astype(np.float32)


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


@pytest.mark.parametrize("kb,vb,km,vm", [(4, 3, 0, 64), (2, 2, 64, 64), (3, 2, 0, 0), (0, 3, 64, 0)])
def test_reference_partials_match_dense_softmax(kb, vb, km, vm):
    d, N, G = 64, 333, 3
    spec, params = manual_spec(d, kb, vb, km, vm, seed=kb)
    K, V, q = _kv(3, N, d, G, seed=7, q_scale=3.0)  # peaked attention: the max-subtraction matters
    cache = quantize_kv(K, V, spec, params, capacity=700, impl="reference")
    assert cache.capacity == 768 and int(cache.length) == N
    Kh, Vh = dequantize_kv(cache, spec, params)
    dense = np.asarray(dense_decode_attention(q, Kh, Vh, length=N))
    got = np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
    np.testing.assert_allclose(got, dense, atol=2e-5)
    parts = decode_partials(q, cache, spec, params, impl="reference")
    assert parts.m.shape == (3, G) and np.all(np.asarray(parts.l) >= 1.0)  # the max term is exp(0)


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


def test_append_equals_quantizing_everything():
    spec, params = manual_spec(64, 3, 2, 0, 64)
    K, V, q = _kv(2, 50, 64, 2, seed=5)
    full = quantize_kv(K, V, spec, params, impl="reference")
    cache = quantize_kv(K[:, :30], V[:, :30], spec, params, capacity=50, impl="reference")
    step = jax.jit(lambda c, k, v: append_kv(c, k, v, spec, params, impl="reference"))
    for t in range(30, 50, 4):
        cache = step(cache, K[:, t:t + 4], V[:, t:t + 4])
    assert int(cache.length) == 50
    for name, x, y in zip(full._fields, full, cache):
        if x is not None:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=name)
    with pytest.raises(ValueError, match="capacity"):
        append_kv(quantize_kv(K, V, spec, params, capacity=PAGE, impl="reference"),
                  np.zeros((2, PAGE, 64)), np.zeros((2, PAGE, 64)), spec, params)


@pytest.mark.parametrize("name,bits,d", [("KQV", 4, 64), ("QKQV", 3, 64), ("K4V2", None, 64), ("KV", 3, 64),
                                         ("QKQV", 4, 96)])  # d = 96: zero-padded to 128 coordinates
def test_parity_with_numpy_scheme(name, bits, d):
    N, G = 40, 3
    scheme = kvstats.make_scheme(name, bits, d, seed=11)
    spec, params = make_cache_spec(name, bits, d, seed=11)
    K, V, q = _kv(2, N, d, G, seed=13)
    Kn, Vn = scheme.dequantize(scheme.quantize(K.astype(np.float64), V.astype(np.float64)))
    cache = quantize_kv(K, V, spec, params, impl="reference")
    Kh, Vh = (np.asarray(a)[:, :N] for a in dequantize_kv(cache, spec, params))
    # Same signs, codebooks and sketches: codes agree except where float32 and float64
    # land on different sides of a boundary (a near-zero fraction); then the dequantized
    # caches agree to float16-norm rounding (2^-11 relative) on almost every vector.
    close_k = np.all(np.abs(Kh - Kn) <= 2e-3 * np.linalg.norm(K, axis=-1, keepdims=True), axis=-1)
    close_v = np.all(np.abs(Vh - Vn) <= 2e-3 * np.linalg.norm(V, axis=-1, keepdims=True), axis=-1)
    assert close_k.mean() >= 0.97 and close_v.mean() >= 0.97
    got = np.asarray(decode_attention(q, cache, spec, params, impl="reference"))
    want = np.asarray(dense_decode_attention(q, Kn, Vn))
    np.testing.assert_allclose(got, want, atol=0.05 * np.abs(want).max())


def test_error_vs_original_cache_is_the_schemes_own_error():
    # Against the dense fp32 attention on the original cache, the GPU path's output error is
    # the scheme's own error: the same as the numpy core's scheme with the same randomness
    # (within 2%: only float32-vs-float64 boundary flips differ), and it shrinks with the budget.
    d, N, G = 128, 128, 4
    K, V, q = _kv(4, N, d, G, seed=17)
    dense = np.asarray(dense_decode_attention(q, K, V))
    errs = {}
    for bits in (2, 4):
        spec, params = make_cache_spec("KQV", bits, d, seed=bits)
        out = np.asarray(decode_attention(q, quantize_kv(K, V, spec, params, impl="reference"), spec, params,
                                          impl="reference"))
        scheme = kvstats.make_scheme("KQV", bits, d, seed=bits)
        Kn, Vn = scheme.dequantize(scheme.quantize(K.astype(np.float64), V.astype(np.float64)))
        own = np.asarray(dense_decode_attention(q, Kn, Vn))
        errs[bits] = np.linalg.norm(out - dense) / np.linalg.norm(dense)
        own_err = np.linalg.norm(own - dense) / np.linalg.norm(dense)
        assert errs[bits] == pytest.approx(own_err, rel=0.02)
    assert errs[4] < errs[2]


def test_memory_is_proportional_to_code_bits():
    spec, params = manual_spec(128, 4, 3, 0, 128)  # the layout of KQV at n = 4 bits
    per_head = spec.bytes_per_token_head()
    # K: 4-bit codes 64 B + fp16 norm; V: 3-bit codes 48 B + fp16 norm + 128 sign bits + fp16 norm
    assert per_head == {"k_codes": 64, "k_norm": 2, "v_codes": 48, "v_norm": 2, "v_signs": 16,
                        "v_sketch_norm": 2}
    acc = cache_bytes_per_token(spec, 8)
    assert acc == {"bytes": 1072, "fp16_bytes": 4096, "ratio_to_fp16": 1072 / 4096}
    # 128k tokens x 8 KV heads x d = 128: 140.5 MB per layer instead of 537 MB in fp16
    assert 131072 * acc["bytes"] == 140_509_184
    # a real (smaller) allocation stores exactly the analytic bytes
    rng = np.random.default_rng(0)
    K = rng.normal(size=(8, 4096, 128)).astype(np.float32)
    cache = quantize_kv(K, K, spec, params, impl="reference")
    assert cache.nbytes == 4096 * acc["bytes"]
    assert cache.nbytes / (2 * K.size * 2) == pytest.approx(acc["ratio_to_fp16"])


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


def test_bad_input_messages():
    spec, params = manual_spec(64, 3, 2, 0, 64)
    K, V, q = _kv(2, 10, 64, 2)
    cache = quantize_kv(K, V, spec, params, impl="reference")
    with pytest.raises(ValueError, match=r"K and V must both have shape \(H, N, 64\)"):
        quantize_kv(K[..., :32], V, spec, params)
    with pytest.raises(ValueError, match=r"q must be \(H\*G, 64\) with H = 2"):
        decode_attention(q[:3], cache, spec, params)
    with pytest.raises(ValueError, match="n_splits must be a power of two"):
        decode_attention(q, cache, spec, params, impl="pallas", n_splits=3)
    with pytest.raises(ValueError, match="block_tokens"):
        decode_attention(q, cache, spec, params, impl="pallas", block_tokens=48)
    with pytest.raises(ValueError, match="params.v_sketch is required"):
        decode_attention(q, cache, spec, params._replace(v_sketch=None))
    with pytest.raises(ValueError, match="name must be one of"):
        make_cache_spec("kivi", 4, 64)
    with pytest.raises(ValueError, match="keys need scalar codes"):
        CacheSpec(dim=64, k_dpad=64, v_dpad=64, k_codebook=None, v_codebook=spec.v_codebook)
    with pytest.raises(ValueError, match="length must be >= 1"):
        decode_attention(q, cache._replace(length=jnp.asarray(0, jnp.int32)), spec, params)
    with pytest.raises(TypeError, match="QuantizedKVCache"):
        decode_attention(q, tuple(cache), spec, params)
    with pytest.raises(ValueError, match="length must be >= 1"):
        dense_decode_attention(q, K, V, length=0)


def test_stored_codes_signs_and_norms_equal_numpy_core():
    # The bytes themselves: the numpy core's TurboQuant-prod keys (rotation, Lloyd–Max codes,
    # residual sketch signs, float16 norms) vs the GPU cache for the same scheme and seed.
    d, N = 64, 200
    scheme = kvstats.make_scheme("QKQV", 4, d, seed=21)
    spec, params = make_cache_spec("QKQV", 4, d, seed=21)
    K, V, _ = _kv(2, N, d, 1, seed=23)
    want = scheme.key_quantizer.encode(K.astype(np.float64))
    cache = quantize_kv(K, V, spec, params, impl="reference")
    got_codes = np.asarray(unpack_planes_reference(jnp.swapaxes(cache.k_planes, 1, 2)))[:, :N]
    want_codes = unpack_codes(want.mse.codes, 3, d)
    # float32 vs float64 rotation: a code differs only when a coordinate is within rounding
    # of a boundary; with 25,600 codes we allow a handful
    assert np.mean(got_codes != want_codes) <= 1e-3
    np.testing.assert_array_equal(np.asarray(cache.k_norms)[:, :N], want.mse.norms)
    same_vec = np.all(got_codes == want_codes, axis=-1)
    # where the codes agree the residuals agree to float32 rounding, so the sign bits do too
    # except for near-zero projections
    got_bits = np.unpackbits(np.asarray(cache.k_signs)[:, :N], axis=-1, bitorder="little")
    want_bits = np.unpackbits(want.residual.signs, axis=-1, bitorder="little")
    assert np.mean(got_bits[same_vec] != want_bits[same_vec]) <= 1e-3
    np.testing.assert_allclose(np.asarray(cache.k_snorms, np.float32)[:, :N][same_vec],
                               want.residual.norms.astype(np.float32)[same_vec], rtol=2e-3)


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


@pytest.mark.slow
def test_prod_inner_products_are_unbiased_over_draws():
    # TurboQuant-prod is unbiased for inner products (the 1-bit QJL residual corrects the
    # MSE codes' shrinkage; Zandieh et al. 2025, Thm. 2). Through the GPU cache: over R
    # independent seeds (rotation + sketch), mean of <q, k̂> − <q, k> must be 0 within a
    # 4.5-sigma t bound (false alarm ~1e-5). The same mean for the MSE-only scheme at the
    # same bits is biased (shrinkage), which the test also checks: it could fail.
    from kvstats._checks import replicate_scale
    R = 150 if replicate_scale() == "ci" else 2000
    d = 64
    rng = np.random.default_rng(31)
    K = rng.normal(size=(1, 8, d)).astype(np.float32)
    q = rng.normal(size=(d,)).astype(np.float32)
    true = K[0] @ q
    diffs = {"QKQV": [], "K2V2": []}
    for name in diffs:
        for r in range(R):
            bits = 3 if name == "QKQV" else None
            spec, params = make_cache_spec(name, bits, d, seed=1000 + r)
            Kh, _ = dequantize_kv(quantize_kv(K, K, spec, params, impl="reference"), spec, params)
            diffs[name].append(np.asarray(Kh)[0, :8] @ q - true)
    for name, want_unbiased in (("QKQV", True), ("K2V2", False)):
        x = np.asarray(diffs[name])  # (R, 8 keys)
        t = x.mean(axis=0) / (x.std(axis=0, ddof=1) / np.sqrt(R))
        if want_unbiased:
            assert np.all(np.abs(t) < 4.5), t
        else:
            assert np.any(np.abs(t) > 4.5), t
