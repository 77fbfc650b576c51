import jax.numpy as jnp
import numpy as np
import pytest

import kvstats
from kvstats.quant.packing import pack_bits
from kvstats_gpu.codebook import (StaticCodebook, decode_packed, decode_reference, encode_packed,
                                  encode_reference, pack_planes_reference, unpack_planes_reference)


def _codebook(bits, dim=128):
    return kvstats.lloyd_max_codebook(bits, "beta", dim=dim)


@pytest.mark.parametrize("bits", [1, 3])  # one plane; several planes, odd count
def test_codes_equal_numpy_core_exactly(bits, backend):
    cb = _codebook(bits)
    x = (np.random.default_rng(bits).normal(size=(6, 9, 128)) / np.sqrt(128)).astype(np.float32)
    want = cb.encode(x)  # numpy core: searchsorted in float64
    scb = StaticCodebook.from_codebook(cb)
    np.testing.assert_array_equal(np.asarray(encode_reference(x, scb)), want)
    planes_k = np.asarray(encode_packed(x, scb, impl=backend, interpret=True))
    planes_r = np.asarray(encode_packed(x, scb, impl="reference"))
    np.testing.assert_array_equal(planes_k, planes_r)
    np.testing.assert_array_equal(np.asarray(unpack_planes_reference(planes_k)), want)
    dec_k = np.asarray(decode_packed(planes_k, scb, impl=backend, interpret=True))
    # decode selects centroids by comparisons: exactly the float32 centroids
    np.testing.assert_array_equal(dec_k, cb.decode(want).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(decode_reference(want, scb)), dec_k)


def test_values_at_float32_rounded_boundaries():
    # The hard case for float32 vs float64 comparisons: x equal to fl32(b) and its float32
    # neighbours. Rounding boundaries down keeps x > b  <=>  x > fl_down(b) exact.
    cb = _codebook(4, dim=64)
    b32 = cb.boundaries.astype(np.float32)
    x = np.concatenate([b32, np.nextafter(b32, np.float32(np.inf)), np.nextafter(b32, np.float32(-np.inf))])
    # XLA flushes subnormals to zero (as GPUs do), so the neighbours of a zero boundary are
    # left out: codes are exact for every normal float32 (documented in the module)
    x = x[(x == 0) | (np.abs(x) >= np.finfo(np.float32).tiny)]
    x = np.resize(x, 8 * (-(-x.size // 8))).reshape(1, -1).astype(np.float32)
    want = np.searchsorted(cb.boundaries, x.astype(np.float64))
    scb = StaticCodebook.from_codebook(cb)
    np.testing.assert_array_equal(np.asarray(encode_reference(x, scb)), want)
    np.testing.assert_array_equal(
        np.asarray(unpack_planes_reference(encode_packed(x, scb, impl="pallas", interpret=True))), want)
    # and rounding to nearest instead would have been wrong on this input (the test can fail)
    nearest = np.sum(x[..., None] > b32, axis=-1)
    assert np.any(nearest != want)


def test_one_bit_planes_are_the_numpy_packed_bits():
    bits = np.random.default_rng(0).integers(0, 2, size=(5, 64)).astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(pack_planes_reference(bits, 1))[..., 0, :], pack_bits(bits))


@pytest.mark.parametrize("bits", [2, 3, 8])
def test_plane_roundtrip(bits):
    codes = np.random.default_rng(bits).integers(0, 2 ** bits, size=(3, 4, 32)).astype(np.uint8)
    planes = pack_planes_reference(codes, bits)
    assert planes.shape == (3, 4, bits, 4)  # exactly bits*d/8 bytes
    np.testing.assert_array_equal(np.asarray(unpack_planes_reference(planes)), codes)


def test_lowers_for_cuda(backend, lower_cuda, lowers_through):
    scb = StaticCodebook.from_codebook(_codebook(3))
    assert lowers_through(lower_cuda(lambda z: encode_packed(z, scb, impl=backend, interpret=False),
                                     jnp.zeros((8192, 128), jnp.bfloat16)), backend)
    assert lowers_through(lower_cuda(lambda z: decode_packed(z, scb, impl=backend, interpret=False),
                                     jnp.zeros((8192, 3, 16), jnp.uint8)), backend)


def test_pallas_default_is_mosaic_and_d64_falls_back_to_triton(lower_cuda, lowers_through):
    # d = 64 planes are 8-byte rows: Mosaic's TMA block copies need 16-byte strides
    scb = StaticCodebook.from_codebook(_codebook(3, dim=64))
    for d, want in ((128, "mosaic"), (64, "triton")):
        assert lowers_through(lower_cuda(lambda z: encode_packed(z, scb, impl="pallas", interpret=False),
                                         jnp.zeros((256, d))), want)
        assert lowers_through(lower_cuda(lambda z: decode_packed(z, scb, impl="pallas", interpret=False),
                                         jnp.zeros((256, 3, d // 8), jnp.uint8)), want)
    with pytest.raises(ValueError, match="impl='mosaic' cannot run this call: planes of d/8 = 8 bytes"):
        encode_packed(np.zeros((2, 64), np.float32), scb, impl="mosaic", interpret=True)


def test_bad_input_messages():
    with pytest.raises(ValueError, match="strictly increasing"):
        StaticCodebook.from_arrays([1.0, 0.0], [0.5])
    with pytest.raises(ValueError, match="boundaries must have shape"):
        StaticCodebook.from_arrays([0.0, 1.0], [0.2, 0.5])
    with pytest.raises(ValueError, match=r"2\*\*bits = 4 entries for bits = 2"):
        StaticCodebook.from_arrays([0.0, 1.0], [0.5], bits=2)
    assert StaticCodebook.from_arrays([0.0, 1.0], [0.5], bits=1).bits == 1
    with pytest.raises(TypeError, match="kvstats Codebook"):
        StaticCodebook.from_codebook(StaticCodebook.from_arrays([0.0, 1.0], [0.5]))
    with pytest.raises(TypeError, match="codebook"):
        encode_reference(np.ones((1, 8)), object())
    scb = StaticCodebook.from_arrays([-1.0, 1.0], [0.0])
    with pytest.raises(ValueError, match="multiple of 8"):
        encode_packed(np.ones((1, 12)), scb)
    with pytest.raises(ValueError, match=r"< 2\*\*bits = 2"):
        pack_planes_reference(np.full((1, 8), 2, np.uint8), 1)
    with pytest.raises(TypeError, match="uint8"):
        decode_reference(np.zeros((1, 8), np.int32), scb)
    with pytest.raises(ValueError, match="planes must be uint8"):
        decode_packed(np.zeros((1, 2, 1), np.uint8), scb)


def test_boundaries_exact_in_float32_are_kept():
    # Rounding down applies only to boundaries float32 cannot hold: an exact one (here
    # -1, 0, 1) is kept, and x equal to it gets the code np.searchsorted(side="left") gives
    # (the boundary is not strictly below x). Nudging exact boundaries down too would
    # code x = 1.0 as 3.
    cb = StaticCodebook.from_arrays([-1.5, -0.5, 0.5, 1.5], [-1.0, 0.0, 1.0])
    assert cb.boundaries == (-1.0, 0.0, 1.0)
    x = np.array([[-1.0, 0.0, 1.0, 0.5, -1.5, 1.5, 1.0, -1.0]], np.float32)
    want = np.searchsorted(np.array([-1.0, 0.0, 1.0]), x, side="left")
    np.testing.assert_array_equal(np.asarray(encode_reference(x, cb)), want)
    np.testing.assert_array_equal(
        np.asarray(unpack_planes_reference(encode_packed(x, cb, impl="triton", interpret=True))), want)
