"""Edge shapes of the device runs that the other interpreter tests leave out, for both
backends' bodies: several row blocks ending in a partial one (the runbook's encode at 32k
tokens x 8 heads is 4,096 blocks of 64 rows; elsewhere the Mosaic encode tests fit in one
block, where a wrong block index cannot show), token counts that are not a multiple of the
block over several blocks, one and eight query heads per KV head, and the sequential depth
of the bench's 128k configuration (64 blocks of 64 tokens per split, the running max moving
in every block)."""

import jax.numpy as jnp
import numpy as np
import pytest

import kvstats
from _gpu_helpers import manual_spec
from kvstats_gpu.cache import dequantize_kv, quantize_kv
from kvstats_gpu.codebook import StaticCodebook, decode_packed, encode_packed
from kvstats_gpu.decode import decode_attention, dense_decode_attention
from kvstats_gpu.qjl import qjl_scores, qjl_scores_reference, qjl_sketch, qjl_sketch_reference
from kvstats_gpu.rotation import rotate, rotate_reference

ROWS = 150  # three blocks of 64 rows, the last holding 22


@pytest.mark.parametrize("d", [128, 256])  # one column block; two (Mosaic's (H_2 x I) combine)
def test_rotation_over_several_row_blocks(d, backend):
    rng = np.random.default_rng(d)
    x = rng.normal(size=(ROWS, d)).astype(np.float32)
    s = np.where(rng.random(d) < 0.5, -1.0, 1.0)
    for inverse in (False, True):
        got = rotate(x, s, inverse=inverse, impl=backend, interpret=True, block_rows=64)
        want = rotate_reference(x, s, inverse=inverse)
        # float32, d-long sums of O(1) terms (as tests/gpu/test_gpu_rotation.py)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5, err_msg=f"inverse={inverse}")


def test_codebook_over_several_row_blocks(backend):
    cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(4, "beta", dim=128))
    x = (np.random.default_rng(5).normal(size=(ROWS, 128)) / np.sqrt(128)).astype(np.float32)
    planes = encode_packed(x, cb, impl=backend, interpret=True, block_rows=64)
    # the same float32 comparisons on the same inputs: bit-exact
    np.testing.assert_array_equal(np.asarray(planes), np.asarray(encode_packed(x, cb, impl="reference")))
    np.testing.assert_array_equal(np.asarray(decode_packed(planes, cb, impl=backend, interpret=True, block_rows=64)),
                                  np.asarray(decode_packed(planes, cb, impl="reference")))


def test_qjl_sketch_over_several_row_blocks(backend):
    rng = np.random.default_rng(6)
    S = rng.integers(-2, 3, size=(128, 128)).astype(np.float32)
    k = rng.integers(-2, 3, size=(ROWS, 128)).astype(np.float32)  # small integers: exact projections
    bits, norms = qjl_sketch(k, S, impl=backend, interpret=True, block_rows=64)
    bits_r, norms_r = qjl_sketch_reference(k, S)
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(bits_r))
    np.testing.assert_allclose(np.asarray(norms), np.asarray(norms_r), rtol=1e-6)


@pytest.mark.parametrize("G", [1, 8])
def test_qjl_scores_partial_last_block_and_group_sizes(G, backend):
    rng = np.random.default_rng(G)
    S = rng.normal(size=(128, 128)).astype(np.float32)
    k = rng.normal(size=(2, ROWS, 128)).astype(np.float32)
    q = rng.normal(size=(2, G, 128)).astype(np.float32)
    bits, norms = qjl_sketch_reference(k, S)
    got = qjl_scores(q, bits, norms, S, impl=backend, interpret=True, block_tokens=64)
    want = qjl_scores_reference(q, bits, norms, S)
    # float32 sums of 128 terms of O(10): 1e-5 of the largest score (as test_gpu_qjl.py)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5 * float(np.abs(want).max()))


@pytest.mark.parametrize("G", [1, 8])
def test_decode_group_sizes(G, backend):
    spec, params = manual_spec(128, 4, 3, 0, 128)  # KQV-like: scalar keys, prod values
    rng = np.random.default_rng(10 + G)
    K, V = rng.normal(size=(2, 2, ROWS, 128)).astype(np.float32)
    q = rng.normal(size=(2 * G, 128)).astype(np.float32)
    cache = quantize_kv(K, V, spec, params, impl="reference")
    got = decode_attention(q, cache, spec, params, impl=backend, interpret=True, block_tokens=64, n_splits=2)
    dense = dense_decode_attention(q, *dequantize_kv(cache, spec, params), length=ROWS)
    # float32 end to end, O(1) outputs (as test_gpu_attention_kernel.py)
    np.testing.assert_allclose(np.asarray(got), np.asarray(dense), atol=2e-5)


def test_decode_at_the_sequential_depth_of_128k_tokens(backend):
    # The bench at 131,072 tokens: block_tokens 64 and 32 splits, so each program (Mosaic:
    # each pipeline) carries its softmax state through 64 blocks. Here one split of 64 blocks
    # (4,096 tokens of capacity, 4,000 valid: the 63rd block partial, the 64th empty), with
    # logits rising along the sequence (from about -20 to +20) so that the running max moves
    # in every block and each block rescales the accumulators: 62 rescalings in float32.
    spec, params = manual_spec(128, 4, 3, 0, 128)
    rng = np.random.default_rng(7)
    N = 4000
    u = rng.normal(size=128)
    u /= np.linalg.norm(u)
    ramp = np.linspace(-1.0, 1.0, N)[:, None]
    K = (ramp * u + 0.01 * rng.normal(size=(N, 128)))[None].astype(np.float32)
    V = rng.normal(size=(1, N, 128)).astype(np.float32)
    q = np.tile(20.0 * np.sqrt(128) * u, (4, 1)).astype(np.float32)  # G = 4, as the bench
    cache = quantize_kv(K, V, spec, params, capacity=4096, impl="reference")
    Kh, Vh = dequantize_kv(cache, spec, params)
    got = decode_attention(q, cache, spec, params, impl=backend, interpret=True, block_tokens=64, n_splits=1)
    # float64 softmax on the same dequantized cache: the kernel's float32 rounding alone
    kh, vh = np.asarray(Kh, np.float64)[0, :N], np.asarray(Vh, np.float64)[0, :N]
    s = q.astype(np.float64) @ kh.T / np.sqrt(128)
    moves = np.diff(s[:, :62 * 64].reshape(4, 62, 64).max(axis=2), axis=1) > 0
    assert moves.mean() > 0.9  # the running max moves in (nearly) every block
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p @ vh) / p.sum(axis=1, keepdims=True)
    # logits of size ~20 carry absolute rounding ~20·2^-24·√d; outputs O(0.1..1): 2e-5 is wide
    np.testing.assert_allclose(np.asarray(got), want, atol=2e-5)
    np.testing.assert_allclose(np.asarray(dense_decode_attention(q, Kh, Vh, length=N)), want, atol=2e-5)
