"""Bit packing of sign bits and small unsigned codes into uint8 streams.

Little bit order throughout, as in the QJL CUDA kernels: bit ``j`` of byte ``i`` is
stream bit ``8 i + j``. A ``bits``-bit code ``i`` occupies stream bits
``[i*bits, (i+1)*bits)`` with its least significant bit first, so the packed size of
``n`` codes is ``ceil(n * bits / 8)`` bytes. Bit accounting counts ``n * bits`` per
vector (docs/usage.md): the stored bytes add up to 7 padding bits per vector to that.
All functions are vectorised over leading axes (no Python loop over codes).
"""

from __future__ import annotations


import numpy as np
from jaxtyping import Bool, UInt8
from numpy.typing import ArrayLike

from kvstats._checks import _describe, check_int

__all__ = ["pack_bits", "unpack_bits", "pack_codes", "unpack_codes", "packed_size"]


def packed_size(n: int, bits: int) -> int:
    """Bytes used by ``n`` codes of ``bits`` bits: ``ceil(n * bits / 8)``.

    Examples
    --------
    >>> packed_size(128, 3), packed_size(9, 1)
    (48, 2)
    """
    n = check_int(n, "n", low=0)
    bits = check_int(bits, "bits", low=1, high=8)
    return -(-n * bits // 8)


def _as_uint_array(x: ArrayLike, name: str, high: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype != np.bool_ and arr.dtype.kind not in "ui":
        raise TypeError(f"{name} must be a bool or unsigned integer array; received {_describe(arr)}")
    if arr.ndim < 1:  # before the bool return: a bool scalar too
        raise ValueError(f"{name} must have at least 1 dimension; received {_describe(arr)}")
    if arr.dtype == np.bool_:
        return arr.view(np.uint8)
    if arr.size and (arr.min() < 0 or arr.max() > high):
        raise ValueError(f"{name} values must be in [0, {high}]; received values in "
                         f"[{arr.min()}, {arr.max()}]")
    return arr.astype(np.uint8, copy=False)


def _check_packed(packed: ArrayLike, name: str, n_bytes: int) -> np.ndarray:
    arr = np.asarray(packed)
    if arr.dtype != np.uint8:
        raise TypeError(f"{name} must be a uint8 array; received {_describe(arr)}")
    if arr.ndim < 1 or arr.shape[-1] != n_bytes:
        raise ValueError(f"{name} must have last axis of length {n_bytes}; received {_describe(arr)}")
    return arr


def pack_bits(bits: Bool[ArrayLike, "*batch m"]) -> UInt8[np.ndarray, "*batch m_bytes"]:
    """Pack a 0/1 (or bool) array ``(..., m)`` into uint8 ``(..., ceil(m/8))``, little bit order.

    Examples
    --------
    >>> pack_bits([1, 0, 0, 0, 0, 0, 0, 0, 1])
    array([1, 1], dtype=uint8)
    """
    arr = _as_uint_array(bits, "bits", 1)
    return np.packbits(arr, axis=-1, bitorder="little")


def unpack_bits(packed: UInt8[ArrayLike, "*batch m_bytes"], m: int) -> Bool[np.ndarray, "*batch m"]:
    """Inverse of `pack_bits`: uint8 ``(..., ceil(m/8))`` -> bool ``(..., m)``.

    Examples
    --------
    >>> unpack_bits(np.array([1, 1], dtype=np.uint8), 9).astype(int)
    array([1, 0, 0, 0, 0, 0, 0, 0, 1])
    """
    m = check_int(m, "m", low=0)
    arr = _check_packed(packed, "packed", -(-m // 8))
    return np.unpackbits(arr, axis=-1, count=m, bitorder="little").view(np.bool_)


def pack_codes(codes: UInt8[ArrayLike, "*batch n"], bits: int) -> UInt8[np.ndarray, "*batch n_bytes"]:
    """Pack codes ``< 2**bits`` ``(..., n)`` into a uint8 bitstream ``(..., ceil(n*bits/8))``.

    For 2 and 4 bits whole codes share a byte; for 3, 5, 6 and 7 bits eight codes are
    combined into one little-endian 64-bit word (code ``j`` shifted by ``j*bits``) whose
    first ``bits`` bytes are kept. 1 bit is `numpy.packbits`, 8 bits a copy.

    Parameters
    ----------
    codes : array_like of unsigned int (or bool), shape (..., n)
    bits : int
        1..8.

    Returns
    -------
    numpy.ndarray
        uint8, shape ``(..., ceil(n * bits / 8))``.

    Examples
    --------
    >>> pack_codes(np.array([1, 2, 3], dtype=np.uint8), 2)  # 01 10 11 -> 0b00111001
    array([57], dtype=uint8)
    >>> pack_codes(np.array([5, 6], dtype=np.uint8), 3)  # 101 110 -> 0b110101
    array([53], dtype=uint8)
    """
    bits = check_int(bits, "bits", low=1, high=8)
    c = _as_uint_array(codes, "codes", 2 ** bits - 1)
    lead, n = c.shape[:-1], c.shape[-1]
    if bits == 8:
        return c.copy()
    if bits == 1:
        return np.packbits(c, axis=-1, bitorder="little")
    if bits in (2, 4):  # 8 // bits whole codes per byte
        k = 8 // bits
        c = _pad_last(c, -(-n // k) * k).reshape(lead + (-1, k))
        out = c[..., 0].copy()
        for j in range(1, k):  # loop over the k slots of a byte, not over codes
            out |= c[..., j] << np.uint8(j * bits)
        return out
    # 3, 5, 6, 7 bits: eight codes fill exactly `bits` bytes of one little-endian word
    groups = -(-n // 8)
    c = _pad_last(c, groups * 8).reshape(lead + (groups, 8))
    word = c[..., 0].astype("<u8")
    for j in range(1, 8):
        word |= c[..., j].astype("<u8") << np.uint64(j * bits)
    out = word[..., None].view(np.uint8)[..., :bits].reshape(lead + (groups * bits,))
    return np.ascontiguousarray(out[..., : packed_size(n, bits)])


def _pad_last(a: np.ndarray, length: int) -> np.ndarray:
    """Zero-pad the last axis of a uint8 array to ``length``."""
    if a.shape[-1] == length:
        return a
    out = np.zeros(a.shape[:-1] + (length,), dtype=np.uint8)
    out[..., : a.shape[-1]] = a
    return out


def unpack_codes(packed: UInt8[ArrayLike, "*batch n_bytes"], bits: int, n: int) -> UInt8[np.ndarray, "*batch n"]:
    """Inverse of `pack_codes`: uint8 ``(..., ceil(n*bits/8))`` -> uint8 codes ``(..., n)``.

    Examples
    --------
    >>> unpack_codes(np.array([53], dtype=np.uint8), 3, 2)
    array([5, 6], dtype=uint8)
    """
    bits = check_int(bits, "bits", low=1, high=8)
    n = check_int(n, "n", low=0)
    arr = _check_packed(packed, "packed", packed_size(n, bits))
    lead = arr.shape[:-1]
    if bits == 8:
        return arr.copy()
    if bits == 1:
        return np.unpackbits(arr, axis=-1, count=n, bitorder="little")
    mask = np.uint8(2 ** bits - 1)
    if bits in (2, 4):
        k = 8 // bits
        out = np.empty(lead + (arr.shape[-1], k), dtype=np.uint8)
        for j in range(k):
            np.bitwise_and(arr >> np.uint8(j * bits), mask, out=out[..., j])
        return np.ascontiguousarray(out.reshape(lead + (-1,))[..., :n])
    groups = -(-n // 8)
    a = _pad_last(arr, groups * bits).reshape(lead + (groups, bits))
    word = a[..., 0].astype("<u8")
    for i in range(1, bits):
        word |= a[..., i].astype("<u8") << np.uint64(8 * i)
    out = np.empty(lead + (groups, 8), dtype=np.uint8)
    for j in range(8):
        out[..., j] = (word >> np.uint64(j * bits)) & np.uint64(mask)
    return np.ascontiguousarray(out.reshape(lead + (groups * 8,))[..., :n])
