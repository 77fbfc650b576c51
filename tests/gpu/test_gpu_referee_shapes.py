"""Shapes and arguments at the edges of kvstats_gpu's public API (a referee's pass,
2026-12-03): head dims whose blocks a Pallas backend cannot take, token counts that are
not integers or lie outside the cache, empty inputs, and the arguments each error names.

What each backend takes (read from the lowering errors, jax 0.10.2): Triton only blocks
whose sizes are powers of two; Mosaic GPU rows of a multiple of 16 bytes (block copies)
and register tiles of a multiple of 8 columns. The interpreter takes anything, so a shape
neither backend compiles must be refused there too, or the CPU tests pass on it while
the GPU fails with a Pallas error that names no argument.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from kvstats_gpu.bridge import make_cache_spec
from kvstats_gpu.cache import cache_bytes_per_token, quantize_kv
from kvstats_gpu.codebook import StaticCodebook, decode_packed, encode_packed
from kvstats_gpu.decode import decode_attention, decode_partials, dense_decode_attention
from kvstats_gpu.qjl import qjl_scores, qjl_sketch, qjl_sketch_reference

import kvstats


@pytest.mark.parametrize("name,dim,impl,lowered", [
    ("KQV", 96, "triton", ["triton"]),             # the sketch's (rows, 96) key block: not a power of two
    ("KQV", 100, "mosaic", ["mosaic"]),            # (64, 100) register tile: not a multiple of 8 columns
    ("KV", 96, "pallas", ["triton"]),              # unrotated 12-byte plane rows: Mosaic cannot, Triton pads
])
def test_encode_lowers_at_head_dims_that_are_not_powers_of_two(name, dim, impl, lowered, lower_cuda, lowers_through):
    # Phi-3's head dim is 96. Before: Pallas lowering errors ("requires that all operations
    # have array arguments and results whose size is a power of 2", "Tiling ... does not apply").
    spec, params = make_cache_spec(name, 4, dim, seed=0)
    text = lower_cuda(lambda K: quantize_kv(K, K, spec, params, impl=impl, interpret=False),
                      jnp.zeros((2, 256, dim), jnp.float32))
    assert lowers_through(text, lowered[0])


@pytest.mark.parametrize("name,dim", [("KV", 96), ("KQV", 100)])
def test_padded_encode_equals_the_reference(name, dim, backend):
    # the zero padding that makes these shapes compile changes no code, sign or norm
    spec, params = make_cache_spec(name, 4, dim, seed=0)
    K, V = np.random.default_rng(dim).normal(size=(2, 2, 70, dim)).astype(np.float32)
    ref = quantize_kv(K, V, spec, params, impl="reference")
    if backend == "mosaic" and name == "KV":
        with pytest.raises(ValueError, match="12 bytes per row"):
            quantize_kv(K, V, spec, params, impl=backend, interpret=True)
        return
    got = quantize_kv(K, V, spec, params, impl=backend, interpret=True)
    for part, a, b in zip(got._fields, got, ref):
        if a is not None:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=part)


def test_sketch_pads_columns_for_both_backends(backend):
    rng = np.random.default_rng(3)
    S = rng.integers(-2, 3, size=(128, 36)).astype(np.float32)
    k = rng.integers(-2, 3, size=(70, 36)).astype(np.float32)  # small integers: exact projections
    bits, norms = qjl_sketch(k, S, impl=backend, interpret=True)
    bits_r, norms_r = qjl_sketch_reference(k, S)
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(bits_r))
    np.testing.assert_array_equal(np.asarray(norms), np.asarray(norms_r))


def test_codebook_kernels_pad_plane_rows_for_triton():
    cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(3, "beta", dim=96))
    x = (np.random.default_rng(4).normal(size=(5, 96)) / np.sqrt(96)).astype(np.float32)  # d/8 = 12
    planes = encode_packed(x, cb, impl="triton", interpret=True)
    np.testing.assert_array_equal(np.asarray(planes), np.asarray(encode_packed(x, cb, impl="reference")))
    np.testing.assert_array_equal(np.asarray(decode_packed(planes, cb, impl="triton", interpret=True)),
                                  np.asarray(decode_packed(planes, cb, impl="reference")))


def test_decode_refuses_a_cache_no_backend_compiles():
    # unrotated d = 96: 12-byte plane rows, neither a 16-byte multiple (Mosaic) nor a power
    # of two (Triton). Before: the interpreter ran it, the GPU failed inside Pallas.
    spec, params = make_cache_spec("KV", 4, 96, seed=0)
    K = np.random.default_rng(5).normal(size=(2, 10, 96)).astype(np.float32)
    cache = quantize_kv(K, K, spec, params, impl="reference")
    q = np.ones((4, 96), np.float32)
    with pytest.raises(ValueError, match=r"impl='pallas' cannot run this call: neither Pallas backend.*"
                                         r"rows of \[12\] bytes.*use impl='reference'"):
        decode_attention(q, cache, spec, params, impl="pallas", interpret=True)
    for impl in ("mosaic", "triton"):
        with pytest.raises(ValueError, match=rf"impl='{impl}' cannot run this call.*use impl='reference'"):
            decode_attention(q, cache, spec, params, impl=impl, interpret=True)
    assert decode_attention(q, cache, spec, params, impl="reference").shape == (4, 96)


def test_mosaic_message_gives_the_row_bytes():
    # 24-byte rows (unrotated d = 192) are not "under 16 bytes", as the message said
    spec, params = make_cache_spec("KV", 2, 192, seed=0)
    cache = quantize_kv(np.ones((1, 4, 192)), np.ones((1, 4, 192)), spec, params, impl="reference")
    with pytest.raises(ValueError, match=r"rows of \[24\] bytes .*multiples of 16 bytes"):
        decode_attention(np.ones((1, 192)), cache, spec, params, impl="mosaic", interpret=True)


def test_lengths_must_be_integers_within_the_cache():
    rng = np.random.default_rng(6)
    K = rng.normal(size=(2, 10, 64)).astype(np.float32)
    q = rng.normal(size=(4, 64)).astype(np.float32)
    # 2.5 passed the old check as int(2.5) = 2 and then masked as 3 tokens
    with pytest.raises(TypeError, match=r"length must be an integer .* in \[1, 10\]; received 2.5"):
        dense_decode_attention(q, K, K, length=2.5)
    with pytest.raises(TypeError, match="received True"):
        dense_decode_attention(q, K, K, length=True)
    with pytest.raises(ValueError, match=r"length must be <= 10, an integer in \[1, 10\]; received 11"):
        dense_decode_attention(q, K, K, length=11)
    np.testing.assert_array_equal(np.asarray(dense_decode_attention(q, K, K, length=np.int64(3))),
                                  np.asarray(dense_decode_attention(q, K[:, :3], K[:, :3])))
    spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    cache = quantize_kv(K, K, spec, params, impl="reference")
    with pytest.raises(TypeError, match="length must be an integer"):
        decode_partials(q, cache, spec, params, length=2.5)
    # a length beyond the capacity attended every slot, the zero-coded ones included
    with pytest.raises(ValueError, match=r"cache.length must be <= 256, an integer in \[0, 256\]; received 300"):
        decode_attention(q, cache._replace(length=jnp.asarray(300, jnp.int32)), spec, params)
    with pytest.raises(TypeError, match="cache.length must be an integer"):
        decode_attention(q, cache._replace(length=jnp.asarray(3.5)), spec, params)


def test_argument_names_in_errors():
    scb = StaticCodebook.from_arrays([-1.0, 1.0], [0.0])
    for planes in (np.zeros((0, 1, 2), np.uint8), np.zeros((3, 1, 0), np.uint8)):  # a JAX trace, a ZeroDivisionError
        with pytest.raises(ValueError, match="planes must be uint8 .* no axis empty"):
            decode_packed(planes, scb, impl="triton", interpret=True)
    rng = np.random.default_rng(7)
    S = rng.normal(size=(128, 64))
    bits, norms = qjl_sketch_reference(rng.normal(size=(2, 40, 64)), S)
    with pytest.raises(ValueError, match="block_tokens must be a power of two"):  # it said block_rows
        qjl_scores(rng.normal(size=(2, 4, 64)), bits, norms, S, impl="triton", interpret=True, block_tokens=100)
    spec, params = make_cache_spec("KQV", 4, 64, seed=0)
    with pytest.raises(TypeError, match="spec must be a CacheSpec"):  # an AttributeError
        cache_bytes_per_token(params, 8)
    with pytest.raises(ValueError, match=r"dim = 100 is not supported on the GPU path.*code 100 coordinates "
                                         r"\(unrotated\)"):  # it named k_dpad, which no caller passes
        make_cache_spec("KV", 4, 100)
