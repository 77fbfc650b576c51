import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _gpu_helpers import SM90_SMEM, pallas_input_block_bytes
from kvstats.quant.rotation import make_rotation
from kvstats_gpu.rotation import rotate, rotate_reference


# dense, zero-padded (d_pad 128), Kronecker (Triton 2 x 256; Mosaic 4 column blocks of 128)
@pytest.mark.parametrize("dim", [64, 100, 512])
def test_kernel_equals_reference_and_numpy_core(dim, backend):
    rot = make_rotation("hadamard", dim, seed=3)
    x = np.random.default_rng(dim).normal(size=(3, 7, dim))
    want = rot.apply(x)  # numpy core: fwht butterfly in float64
    x32 = x.astype(np.float32)
    ref = np.asarray(rotate_reference(x32, rot.signs))
    ker = np.asarray(rotate(x32, rot.signs, impl=backend, interpret=True,
                            block_rows=16 if backend == "triton" else 64))
    # float32 with O(d) accumulation of O(1) terms: a few ulps of |y| ~ 1 (1e-5 is ~80 ulps)
    np.testing.assert_allclose(ref, want, atol=1e-5)
    np.testing.assert_allclose(ker, want, atol=1e-5)
    back = np.asarray(rotate(ker, rot.signs, inverse=True, dim=dim, impl=backend, interpret=True))
    np.testing.assert_allclose(back, rot.inverse(want), atol=1e-5)
    np.testing.assert_allclose(back, x, atol=1e-5)
    # the reference's inverse too (the cache's dequantization and the decode output use it)
    back_ref = np.asarray(rotate_reference(ker, rot.signs, inverse=True, dim=dim))
    np.testing.assert_allclose(back_ref, rot.inverse(want), atol=1e-5)


def test_bf16_within_stated_tolerance(backend):
    rot = make_rotation("hadamard", 128, seed=0)
    x = np.random.default_rng(0).normal(size=(40, 128)).astype(np.float32)
    xb = jnp.asarray(x, jnp.bfloat16)
    y = rotate(xb, rot.signs, impl=backend, interpret=True)
    assert y.dtype == jnp.bfloat16
    exact = rot.apply(np.asarray(xb.astype(jnp.float32), np.float64))  # same bf16-rounded input
    # products with ±1 are exact and accumulate in float32; only the bf16 output rounding
    # remains: |err| <= 2^-8 |y| (round to nearest, 8-bit significand)
    err = np.abs(np.asarray(y.astype(jnp.float32)) - exact)
    assert np.all(err <= 2.0 ** -8 * np.abs(exact) + 1e-30)
    assert err.max() > 0  # bf16 output really is rounded (the test can see an error)


def test_orthogonal_norm_preserved_and_random_signs_matter():
    r1, r2 = make_rotation("hadamard", 64, seed=1), make_rotation("hadamard", 64, seed=2)
    x = np.random.default_rng(1).normal(size=(5, 64)).astype(np.float32)
    y1 = np.asarray(rotate(x, r1.signs, impl="reference"))
    np.testing.assert_allclose(np.linalg.norm(y1, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    assert not np.allclose(y1, np.asarray(rotate(x, r2.signs, impl="reference")))


@pytest.mark.parametrize("dim,dtype", [(128, jnp.float32), (128, jnp.bfloat16), (1024, jnp.float32)])
def test_lowers_for_cuda(dim, dtype, backend, lower_cuda, lowers_through):
    signs = make_rotation("hadamard", dim, seed=0).signs
    for inverse in (False, True):
        text = lower_cuda(lambda z: rotate(z, signs, inverse=inverse, impl=backend, interpret=False),
                          jnp.zeros((4096, dim), dtype))
        assert lowers_through(text, backend) and "kvstats_rotate" in text


def test_default_backend_is_mosaic_except_tiny_dims(lower_cuda, lowers_through):
    for dim, want in ((128, "mosaic"), (16, "triton")):  # d_pad 16: a 64-byte signs block
        signs = make_rotation("hadamard", dim, seed=0).signs
        text = lower_cuda(lambda z: rotate(z, signs, impl="pallas", interpret=False), jnp.zeros((256, dim)))
        assert lowers_through(text, want)
    with pytest.raises(ValueError, match="impl='mosaic' cannot run this call: d_pad = 16 < 32"):
        rotate(np.ones((2, 16)), np.ones(16), impl="mosaic", interpret=True)


def test_bad_input_messages():
    s = np.ones(64)
    with pytest.raises(ValueError, match="signs"):
        rotate(np.ones((2, 64)), np.ones(48))
    with pytest.raises(ValueError, match=r"\+1 and -1"):
        rotate(np.ones((2, 64)), 2 * s)
    with pytest.raises(ValueError, match="len\\(signs\\) = 64"):
        rotate(np.ones((2, 65)), s)
    with pytest.raises(ValueError, match="impl"):
        rotate(np.ones((2, 64)), s, impl="cuda")
    with pytest.raises(ValueError, match="finite"):
        rotate(np.full((2, 64), np.nan), s)
    with pytest.raises(ValueError, match="block_rows"):
        rotate(np.ones((2, 64)), s, impl="pallas", block_rows=24)
    assert math.isclose(float(rotate(np.ones((1, 64)), s)[0, 0]), 8.0, rel_tol=1e-6)  # H·1/√64 = 64/8


# Seen on an H200 (2026-12-04, jax 0.11.2): Triton's rotation of float32 rows at d = 256 held
# a (64, 256) tile and the dense H_256 and asked for 327,680 bytes of SMEM, over an sm_90
# block's 232,448 (the CPU lowering does not check Triton's SMEM; these input blocks add up to
# that request). It now factors H_d = H_a ⊗ H_b with b and the row block sized to fit.
@pytest.mark.parametrize("d", [128, 256, 512, 1024])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_triton_rotation_blocks_fit_sm90_shared_memory(d, dtype):
    s = np.where(np.arange(d) % 3 == 0, -1.0, 1.0)
    for inverse in (False, True):
        sizes = pallas_input_block_bytes(lambda x: rotate(x, s, inverse=inverse, impl="triton", interpret=False),
                                         jax.ShapeDtypeStruct((4096, d), dtype))
        assert sizes and max(sizes) <= SM90_SMEM, (inverse, sizes)


@pytest.mark.parametrize("d", [256, 1024])
def test_triton_rotation_with_smaller_blocks_equals_reference(d):
    # the blocks chosen to fit (b = 128; at d = 1024 also 32 rows) compute the same rotation
    s = make_rotation("hadamard", d, seed=3).signs
    x = np.random.default_rng(d).normal(size=(70, d)).astype(np.float32)
    for inverse in (False, True):
        got = np.asarray(rotate(x, s, inverse=inverse, impl="triton", interpret=True))
        np.testing.assert_allclose(got, np.asarray(rotate_reference(x, s, inverse=inverse)), rtol=0, atol=2e-5)
