import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kvstats.quant.qjl import qjl_encode
from kvstats.quant.sketch import make_sketch
from kvstats.quant.qjl import qjl_scores as np_qjl_scores
from _gpu_helpers import SM90_SMEM, pallas_input_block_bytes
from kvstats_gpu.qjl import qjl_scores, qjl_scores_reference, qjl_sketch, qjl_sketch_reference


# m = 64 sign rows are 8 bytes: Triton only (Mosaic block copies need 16-byte rows)
# (256, 256): two column blocks of the sketch per row block (an SMEM budget, below)
@pytest.mark.parametrize("m,d,backend", [(64, 64, "triton"), (128, 64, "mosaic"), (256, 128, "mosaic"),
                                         (256, 128, "triton"), (256, 256, "mosaic"), (256, 256, "triton")])
def test_bits_equal_numpy_core_exactly_on_dyadic_inputs(m, d, backend):
    # Small integers: every product and sum is exact in float32 and float64, so the bits
    # must agree exactly, including exact zero projections (sign(0) = +1 -> bit 1).
    rng = np.random.default_rng(m)
    S = rng.integers(-2, 3, size=(m, d)).astype(np.float64)
    k = rng.integers(-1, 2, size=(2, 24, d)).astype(np.float32)
    k[0, 0] = 0.0  # zero vector: all projections 0, all bits 1, norm 0
    assert np.any(k.astype(np.float64) @ S.T == 0)  # the sign-of-zero convention is exercised
    sk = dataclasses.replace(make_sketch("gaussian", m, d, seed=0), matrix=S)
    want = qjl_encode(sk, k)
    bits_k, norms_k = qjl_sketch(k, S, impl=backend, interpret=True)
    bits_r, norms_r = qjl_sketch_reference(k, S)
    np.testing.assert_array_equal(np.asarray(bits_k), want.signs)
    np.testing.assert_array_equal(np.asarray(bits_r), want.signs)
    assert np.all(np.asarray(bits_k)[0, 0] == 255)
    np.testing.assert_array_equal(np.asarray(norms_k).astype(np.float16), want.norms)
    np.testing.assert_allclose(np.asarray(norms_k), np.asarray(norms_r), rtol=1e-6)


@pytest.mark.parametrize("kind,dtype", [("gaussian", jnp.float32), ("orthogonal", jnp.bfloat16)])
def test_bits_on_gaussian_inputs_differ_only_at_near_zero_projections(kind, dtype, backend):
    sk = make_sketch(kind, 128, 128, seed=1)
    k = np.asarray(jnp.asarray(np.random.default_rng(2).normal(size=(64, 128)), dtype).astype(jnp.float32))
    want = np.unpackbits(qjl_encode(sk, k).signs, axis=-1, bitorder="little")
    got = np.unpackbits(np.asarray(qjl_sketch(jnp.asarray(k, dtype), sk, impl=backend, interpret=True)[0]),
                        axis=-1, bitorder="little")
    proj = k.astype(np.float64) @ sk.matrix.T
    scale = np.linalg.norm(k, axis=-1, keepdims=True) * np.linalg.norm(sk.matrix, axis=-1)
    near_zero = np.abs(proj) <= 1e-5 * scale  # float32 rounding bound with a wide margin
    assert np.all((got == want) | near_zero)
    assert near_zero.mean() < 1e-3


def test_scores_equal_numpy_core(backend):
    sk = make_sketch("orthogonal", 128, 64, seed=4)
    rng = np.random.default_rng(3)
    k = rng.normal(size=(2, 70, 64)).astype(np.float32)
    q = rng.normal(size=(2, 3, 64)).astype(np.float32)
    codes = qjl_encode(sk, k)
    want = np_qjl_scores(sk, q, codes)
    norms = codes.norms.astype(np.float32)
    got_k = qjl_scores(q, codes.signs, norms, sk, sk.scale, impl=backend, interpret=True,
                       block_tokens=32 if backend == "triton" else 64)  # 70 keys: a partial last block
    got_r = qjl_scores_reference(q, codes.signs, norms, sk, sk.scale)
    # float32 dot products of length m=128 with O(10) terms: ~1e-5 relative to the largest score
    tol = 1e-5 * np.abs(want).max()
    np.testing.assert_allclose(np.asarray(got_r), want, atol=tol)
    np.testing.assert_allclose(np.asarray(got_k), want, atol=tol)


@pytest.mark.slow
def test_gpu_estimator_is_unbiased_over_sketch_draws():
    # Unbiasedness of c·‖k‖·<Sq, sign(Sk)> over Gaussian sketches (Zandieh et al., Lemma 3.2),
    # with the GPU reference path vmapped over independent sketch draws. The exact variance
    # per draw is ((π/2)‖q‖²‖k‖² − <q,k>²)/m (kvstats.quant.qjl), so the mean over R draws
    # is tested with a 4.5-sigma bound (false alarm ~7e-6).
    from kvstats._checks import replicate_scale
    R = 400 if replicate_scale() == "ci" else 20000
    m, d = 32, 16
    rng = np.random.default_rng(5)
    q = rng.normal(size=(1, 1, d)).astype(np.float32)
    k = rng.normal(size=(1, 1, d)).astype(np.float32)
    S = rng.normal(size=(R, m, d)).astype(np.float32)
    est = jax.vmap(lambda s: qjl_scores_reference(q, *qjl_sketch_reference(k, s), s)[0, 0, 0])(S)
    true = float(q.ravel() @ k.ravel())
    var = (math.pi / 2 * np.sum(q ** 2) * np.sum(k ** 2) - true ** 2) / m
    z = (float(np.mean(est)) - true) / math.sqrt(var / R)
    assert abs(z) < 4.5
    assert np.var(np.asarray(est)) == pytest.approx(var, rel=0.35)  # and the variance is the stated one


def test_lowers_for_cuda(backend, lower_cuda, lowers_through):
    S = make_sketch("gaussian", 128, 128, seed=0).matrix
    for dtype in (jnp.float32, jnp.bfloat16):
        assert lowers_through(lower_cuda(lambda z: qjl_sketch(z, S, impl=backend, interpret=False),
                                         jnp.zeros((8192, 128), dtype)), backend)
    assert lowers_through(lower_cuda(
        lambda a, b, c: qjl_scores(a, b, c, S, impl=backend, interpret=False),
        jnp.zeros((8, 4, 128)), jnp.zeros((8, 32768, 16), jnp.uint8), jnp.zeros((8, 32768), jnp.float16)), backend)
    S256 = make_sketch("gaussian", 256, 64, seed=0).matrix  # d = 64 keys, m = 256
    assert lowers_through(lower_cuda(lambda z: qjl_sketch(z, S256, impl=backend, interpret=False),
                                     jnp.zeros((8192, 64), jnp.float32)), backend)


# Seen on an H200 (2026-12-04, jax 0.11.2): Triton's sketch at d = 256, m = 256 held the
# whole sketch (256 KiB) and a 64-row key tile and asked for 327,680 bytes of SMEM, over
# the 232,448 an sm_90 block has (the CPU lowering does not check Triton's SMEM; its input
# blocks add up to exactly that request). Both backends now take the sketch in column blocks.
@pytest.mark.parametrize("m,d", [(128, 128), (256, 128), (256, 256), (512, 256)])
def test_triton_sketch_blocks_fit_sm90_shared_memory(m, d):
    S = make_sketch("gaussian", m, d, seed=0).matrix
    sizes = pallas_input_block_bytes(lambda z: qjl_sketch(z, S, impl="triton", interpret=False),
                                      jax.ShapeDtypeStruct((4096, d), jnp.float32))
    assert sizes and max(sizes) <= SM90_SMEM, sizes


def test_sketch_no_block_fits_is_refused():
    # d = 512: a 16-row tile and 128 sketch rows are 294,912 bytes, for either backend
    S = make_sketch("gaussian", 128, 512, seed=0).matrix
    for backend in ("triton", "mosaic"):
        with pytest.raises(ValueError, match=r"keeps a \((16|64), 512\) key tile .* impl='reference'"):
            qjl_sketch(np.ones((3, 512), np.float32), S, impl=backend, interpret=True)


def test_small_sketch_lowers_through_triton_only(lower_cuda, lowers_through):
    S64 = make_sketch("gaussian", 64, 64, seed=0).matrix  # m/8 = 8 < 16: broadcast products
    assert lowers_through(lower_cuda(lambda z: qjl_sketch(z, S64, impl="pallas", interpret=False),
                                     jnp.zeros((8192, 64), jnp.float32)), "triton")
    assert lowers_through(lower_cuda(
        lambda a, b, c: qjl_scores(a, b, c, S64, impl="pallas", interpret=False),
        jnp.zeros((3, 3, 64)), jnp.zeros((3, 4096, 8), jnp.uint8), jnp.zeros((3, 4096), jnp.float16)), "triton")
    with pytest.raises(ValueError, match="impl='mosaic' cannot run this call: sign rows of m/8 = 8 bytes"):
        qjl_sketch(np.ones((2, 64), np.float32), S64, impl="mosaic", interpret=True)


def test_bad_input_messages():
    S = np.ones((16, 8))
    with pytest.raises(ValueError, match="multiple of 8"):
        qjl_sketch(np.ones((2, 8)), np.ones((12, 8)))
    with pytest.raises(ValueError, match="9 columns"):
        qjl_sketch(np.ones((2, 9)), S)
    with pytest.raises(ValueError, match=r"bits must be uint8 \(H, N, m/8\)"):
        qjl_scores(np.ones((1, 2, 8)), np.zeros((1, 5, 3), np.uint8), np.ones((1, 5)), S)
    with pytest.raises(ValueError, match="norms must have shape"):
        qjl_scores(np.ones((1, 2, 8)), np.zeros((1, 5, 2), np.uint8), np.ones((1, 4)), S)
    with pytest.raises(ValueError, match="scale"):
        qjl_scores(np.ones((1, 2, 8)), np.zeros((1, 5, 2), np.uint8), np.ones((1, 5)), S, scale=-1.0)


def test_default_scale_is_the_sketch_own_constant():
    # scale=None: a numpy Sketch brings its own estimator constant (orthogonal rows: the
    # exact finite-d constant 1/(m·√d·E|u_1|), not √(π/2)/m); a bare matrix gets the
    # Gaussian constant √(π/2)/m (Zandieh et al., Lemma 3.2; kvstats.quant.sketch).
    rng = np.random.default_rng(8)
    k, q = rng.normal(size=(1, 30, 16)).astype(np.float32), rng.normal(size=(1, 2, 16)).astype(np.float32)
    for kind in ("orthogonal", "gaussian"):
        sk = make_sketch(kind, 64, 16, seed=2)
        codes = qjl_encode(sk, k)
        want = np_qjl_scores(sk, q, codes)  # the numpy core, which uses sk.scale
        norms = codes.norms.astype(np.float32)
        for impl in ("reference", "triton"):
            got = np.asarray(qjl_scores(q, codes.signs, norms, sk, impl=impl, interpret=True, block_tokens=16))
            np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max(), err_msg=f"{kind} {impl}")
    matrix = make_sketch("orthogonal", 64, 16, seed=2).matrix  # a bare matrix: the Gaussian constant
    codes = qjl_encode(make_sketch("orthogonal", 64, 16, seed=2), k)
    a = qjl_scores_reference(q, codes.signs, codes.norms.astype(np.float32), matrix)
    b = qjl_scores_reference(q, codes.signs, codes.norms.astype(np.float32), matrix, scale=math.sqrt(math.pi / 2) / 64)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
