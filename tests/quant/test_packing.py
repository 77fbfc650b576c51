"""Tests for kvstats.quant.packing: exact round trips and the little bit order."""

import numpy as np
import pytest

from kvstats.quant.packing import pack_bits, pack_codes, packed_size, unpack_bits, unpack_codes

SHAPES = [(1,), (7,), (8,), (9,), (3, 13), (2, 3, 17), (4, 128), (2, 0)]


def reference_pack(codes, bits):
    """Plain reference: write each code's bits LSB first into a bit list, then bytes."""
    flat = codes.reshape(int(np.prod(codes.shape[:-1])), codes.shape[-1])
    n_bytes = -(-codes.shape[-1] * bits // 8)
    out = np.zeros((flat.shape[0], n_bytes), np.uint8)
    for r, row in enumerate(flat):
        pos = 0
        for c in row.tolist():
            for k in range(bits):
                if (c >> k) & 1:
                    out[r, pos // 8] |= 1 << (pos % 8)
                pos += 1
    return out.reshape(codes.shape[:-1] + (n_bytes,))


@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("shape", SHAPES)
def test_codes_round_trip_and_match_reference(bits, shape):
    rng = np.random.default_rng(bits * 100 + len(shape))
    codes = rng.integers(0, 2 ** bits, size=shape, dtype=np.uint8)
    packed = pack_codes(codes, bits)
    assert packed.dtype == np.uint8
    assert packed.shape == shape[:-1] + (packed_size(shape[-1], bits),)
    np.testing.assert_array_equal(packed, reference_pack(codes, bits))
    out = unpack_codes(packed, bits, shape[-1])
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, codes)


def test_known_bytes():
    # little bit order: element 8i + j is bit j of byte i
    np.testing.assert_array_equal(pack_bits([1, 0, 0, 0, 0, 0, 0, 0, 1]), [1, 1])
    np.testing.assert_array_equal(pack_bits([0, 1, 0, 0, 0, 0, 0, 1]), [0b10000010])
    # 2-bit codes 1, 2, 3, 0 -> bits 10 01 11 00 (LSB first) -> 0b00111001 = 57
    np.testing.assert_array_equal(pack_codes(np.array([1, 2, 3, 0], np.uint8), 2), [57])
    # 3-bit codes 7, 0, 1 -> stream bits 0-2 set, bit 6 set -> 0b01000111 = 71, then 0
    np.testing.assert_array_equal(pack_codes(np.array([7, 0, 1], np.uint8), 3), [71, 0])
    np.testing.assert_array_equal(pack_codes(np.array([0, 0, 4], np.uint8), 3), [0, 1])
    # 4-bit: low nibble first
    np.testing.assert_array_equal(pack_codes(np.array([0xA, 0x5], np.uint8), 4), [0x5A])
    # 5-bit code 31 then 1: stream 11111 10000 -> 0b00111111, 0b00000000
    np.testing.assert_array_equal(pack_codes(np.array([31, 1], np.uint8), 5), [0b00111111, 0])
    np.testing.assert_array_equal(pack_codes(np.array([200, 3], np.uint8), 8), [200, 3])


@pytest.mark.parametrize("m", [1, 5, 8, 9, 64, 100])
def test_bits_round_trip(m):
    b = np.random.default_rng(m).integers(0, 2, size=(3, 2, m)).astype(bool)
    packed = pack_bits(b)
    assert packed.shape == (3, 2, -(-m // 8)) and packed.dtype == np.uint8
    out = unpack_bits(packed, m)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, b)
    np.testing.assert_array_equal(pack_bits(b.astype(np.uint8)), packed)
    np.testing.assert_array_equal(packed, pack_codes(b.astype(np.uint8), 1))


def test_packed_size():
    assert [packed_size(128, b) for b in range(1, 9)] == [16, 32, 48, 64, 80, 96, 112, 128]
    assert packed_size(3, 3) == 2 and packed_size(0, 5) == 0


def test_bad_input():
    with pytest.raises(ValueError, match=r"codes values must be in \[0, 3\]"):
        pack_codes(np.array([4], np.uint8), 2)
    with pytest.raises(TypeError, match="codes must be a bool or unsigned integer"):
        pack_codes(np.array([0.5]), 2)
    with pytest.raises(ValueError, match=r"bits must be an integer in \[1, 8\]"):
        pack_codes(np.array([1], np.uint8), 9)
    with pytest.raises(ValueError, match=r"bits values must be in \[0, 1\]"):
        pack_bits([0, 2])
    with pytest.raises(ValueError, match="last axis of length 3"):
        unpack_codes(np.zeros(2, np.uint8), 3, 7)
    with pytest.raises(TypeError, match="packed must be a uint8 array"):
        unpack_bits(np.zeros(2, np.int64), 9)
    with pytest.raises(ValueError, match="at least 1 dimension"):
        pack_codes(np.uint8(1), 2)
