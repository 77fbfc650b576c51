"""Lloyd–Max scalar encode/decode and the bit-plane code layout, without gathers.

Encode is the count of boundaries below ``x`` (a sum of comparisons, the same as
``np.searchsorted(boundaries, x)`` with ``side="left"``, which the numpy core uses).
Decode selects the centroid with a multiplexer tree over the code's bits (``2**bits − 1``
selects between constants, no comparisons): the result is exactly the float32 centroid
(a telescoping sum of steps would round). Codebooks are static (compile-time constants baked into the kernels); they
are fixed per (bits, dim) and small (at most 256 levels).

Exactness against the numpy core, which compares in float64: boundaries are rounded
*down* to float32. For a float32 ``x`` and a float64 boundary ``b``, ``x > b`` holds iff
``x > fl_down(b)`` (fl_down(b) is the largest float32 <= b), so float32 codes equal the
float64 ``searchsorted`` codes exactly, for every normal float32 (XLA and GPUs flush
subnormals, |x| < 1.2e-38, to zero).

Bit-plane layout (the cache layout of :mod:`kvstats_gpu.cache`): ``b``-bit codes of
``d`` coordinates are stored as ``b`` planes of ``d/8`` bytes; bit ``j`` of byte ``i`` of
plane ``p`` is bit ``p`` of the code of coordinate ``8i + j``. For ``b = 1`` this is the
numpy core's ``pack_bits`` (little bit order); for every ``b`` it takes exactly
``b·d/8`` bytes, it packs and unpacks with shifts (no gathers, no cross-byte codes), and
coordinate ``8i + j`` of all bytes is one contiguous ``d/8`` slice per ``j``, which is
how the kernels consume it: they work on the 8 coordinate classes ``j = 0..7`` with the
query permuted the same way, so nothing is ever interleaved inside a kernel.

Both kernels (encode, decode) are elementwise with shifts, compares and selects, so one
body serves both Pallas backends (Mosaic GPU and Triton; ``impl`` picks the compiler
parameters); Mosaic blocks have >= 64 rows.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.typing import ArrayLike
from jaxtyping import Float, UInt8

from kvstats._checks import check_int
from kvstats.quant.codebook import Codebook
from kvstats_gpu._common import (as_jax_float, batch_folded, check_finite_concrete, kernel_backend, mosaic_rows_ok,
                                 next_pow2, pad_rows, resolve_impl, row_block)
from kvstats_gpu.mosaic_call import grid_call


# Why Mosaic GPU cannot take a call's bit planes (kernel_backend's message). Triton takes
# every d: its blocks must be powers of two, so rows of d/8 bytes are zero-padded to one.
_MOSAIC_PLANES = "planes of d/8 = {d8} bytes per row (Mosaic's block copies need rows of a multiple of 16 bytes)"


@dataclass(frozen=True)
class StaticCodebook:
    """A Lloyd–Max codebook as hashable float32 constants for the kernels.

    Attributes
    ----------
    bits : int
    centroids : tuple of float
        ``2**bits`` float32 centroids (increasing).
    boundaries : tuple of float
        ``2**bits - 1`` boundaries rounded down to float32 (see module docstring).

    Examples
    --------
    >>> cb = StaticCodebook.from_arrays([-0.3, 0.3], [0.1])  # 0.1 is not a float32
    >>> cb.boundaries[0] < 0.1 < float(np.nextafter(np.float32(cb.boundaries[0]), np.float32(1)))
    True
    """

    bits: int
    centroids: tuple
    boundaries: tuple

    @classmethod
    def from_arrays(cls, centroids: Float[ArrayLike, "levels"], boundaries: Float[ArrayLike, "levels_minus_1"],
                    *, bits: int | None = None) -> "StaticCodebook":
        """Build from float64 arrays (a :class:`~kvstats.quant.export.SideExport`'s, a ``Codebook``'s).

        ``bits``, when given, is checked against the number of centroids (``2**bits``).

        Examples
        --------
        >>> cb = StaticCodebook.from_arrays([-1.0, 1.0], [0.0])
        >>> cb.bits, cb.boundaries
        (1, (0.0,))
        """
        c = np.asarray(centroids, dtype=np.float64)
        bnd = np.asarray(boundaries, dtype=np.float64)
        if c.ndim != 1 or c.size < 2 or c.size & (c.size - 1) or c.size > 256:
            raise ValueError(f"centroids must be 1-D with 2**bits entries, bits in [1, 8]; received shape {c.shape}")
        if bits is not None and c.size != 2 ** check_int(bits, "bits", low=1, high=8):
            raise ValueError(f"centroids must have 2**bits = {2 ** bits} entries for bits = {bits}; "
                             f"received {c.size}")
        if bnd.shape != (c.size - 1,):
            raise ValueError(f"boundaries must have shape ({c.size - 1},) for {c.size} centroids; "
                             f"received shape {bnd.shape}")
        if not (np.isfinite(c).all() and np.isfinite(bnd).all()):
            raise ValueError("centroids and boundaries must be finite")
        if np.any(np.diff(c) <= 0) or np.any(np.diff(bnd) <= 0):
            raise ValueError("centroids and boundaries must be strictly increasing")
        # cell i is (boundaries[i-1], boundaries[i]] and decodes to centroids[i]: boundary i
        # must lie in [centroids[i], centroids[i + 1]), or a value decodes outside its cell
        outside = (bnd < c[:-1]) | (bnd >= c[1:])
        if outside.any():
            i = int(np.argmax(outside))
            raise ValueError(f"boundaries[i] must lie in [centroids[i], centroids[i + 1]) (cell i is "
                             f"(boundaries[i-1], boundaries[i]]); received boundaries[{i}] = "
                             f"{float(bnd[i])!r} with centroids[{i}] = {float(c[i])!r} and "
                             f"centroids[{i + 1}] = {float(c[i + 1])!r}")
        b32 = bnd.astype(np.float32)
        too_big = b32.astype(np.float64) > bnd
        b32[too_big] = np.nextafter(b32[too_big], np.float32(-np.inf))
        return cls(int(c.size).bit_length() - 1, tuple(float(v) for v in c.astype(np.float32)),
                   tuple(float(v) for v in b32))

    @classmethod
    def from_codebook(cls, codebook: Codebook) -> "StaticCodebook":
        """Build from a :class:`kvstats.Codebook`.

        Examples
        --------
        >>> import kvstats
        >>> cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(3, "beta", dim=128))
        >>> cb.bits, len(cb.centroids), len(cb.boundaries)
        (3, 8, 7)
        """
        if not isinstance(codebook, Codebook):
            raise TypeError(f"codebook must be a kvstats Codebook; received {type(codebook).__name__}")
        return cls.from_arrays(codebook.centroids, codebook.boundaries)


def _as_static(codebook: StaticCodebook | Codebook) -> StaticCodebook:
    if isinstance(codebook, StaticCodebook):
        return codebook
    if isinstance(codebook, Codebook):
        return StaticCodebook.from_codebook(codebook)
    raise TypeError(f"codebook must be a StaticCodebook or a kvstats Codebook; received {type(codebook).__name__}")


def encode_reference(x: Float[ArrayLike, "*batch d"],
                     codebook: StaticCodebook | Codebook) -> UInt8[jax.Array, "*batch d"]:
    """Lloyd–Max codes ``(..., d)`` uint8: the number of boundaries strictly below ``x``.

    Examples
    --------
    >>> cb = StaticCodebook.from_arrays([-1.5, -0.5, 0.5, 1.5], [-1.0, 0.0, 1.0])
    >>> encode_reference([[-2.0, -0.2, 0.0, 3.0]], cb).tolist()
    [[0, 1, 1, 3]]
    """
    cb = _as_static(codebook)
    x = as_jax_float(x, "x")
    check_finite_concrete(x, "x")
    bnd = jnp.asarray(cb.boundaries, jnp.float32)
    return jnp.sum(x.astype(jnp.float32)[..., None] > bnd, axis=-1).astype(jnp.uint8)


def decode_reference(codes: UInt8[ArrayLike, "*batch d"],
                     codebook: StaticCodebook | Codebook) -> Float[jax.Array, "*batch d"]:
    """Centroids of uint8 codes, float32 (an indexed lookup: the reference, not the kernel).

    Examples
    --------
    >>> cb = StaticCodebook.from_arrays([-1.5, -0.5, 0.5, 1.5], [-1.0, 0.0, 1.0])
    >>> decode_reference(np.array([[0, 3]], np.uint8), cb).tolist()
    [[-1.5, 1.5]]
    """
    cb = _as_static(codebook)
    codes = _check_codes(codes, cb.bits)
    return jnp.asarray(cb.centroids, jnp.float32)[codes.astype(jnp.int32)]


def _check_codes(codes: ArrayLike, bits: int) -> jax.Array:
    codes = jnp.asarray(codes)
    if codes.dtype != jnp.uint8:
        raise TypeError(f"codes must be uint8; received dtype {codes.dtype}")
    if not isinstance(codes, jax.core.Tracer) and codes.size and int(np.max(np.asarray(codes))) >= 2 ** bits:
        raise ValueError(f"codes must be < 2**bits = {2 ** bits}; received max {int(codes.max())}")
    return codes


def pack_planes_reference(codes: UInt8[ArrayLike, "*batch d"], bits: int) -> UInt8[jax.Array, "*batch bits d/8"]:
    """Pack uint8 codes ``(..., d)`` (d a multiple of 8) into bit planes ``(..., bits, d/8)``.

    Examples
    --------
    >>> pack_planes_reference(np.array([[1, 0, 0, 0, 0, 0, 0, 3]], np.uint8), 2).tolist()
    [[[129], [128]]]
    """
    bits = check_int(bits, "bits", low=1, high=8)
    codes = _check_codes(codes, bits)
    d = codes.shape[-1]
    if d % 8:
        raise ValueError(f"codes' last axis must be a multiple of 8; received {d}")
    c = codes.astype(jnp.uint32).reshape(*codes.shape[:-1], d // 8, 8)
    p = jnp.arange(bits, dtype=jnp.uint32)[:, None, None]
    bit = (c[..., None, :, :] >> p) & 1  # (..., bits, d/8, 8)
    return jnp.sum(bit << jnp.arange(8, dtype=jnp.uint32), axis=-1).astype(jnp.uint8)


def unpack_planes_reference(planes: UInt8[ArrayLike, "*batch bits d8"]) -> UInt8[jax.Array, "*batch d8*8"]:
    """Inverse of :func:`pack_planes_reference`: ``(..., bits, d/8)`` → uint8 ``(..., d)``.

    Examples
    --------
    >>> unpack_planes_reference(np.array([[[129], [128]]], np.uint8)).tolist()
    [[1, 0, 0, 0, 0, 0, 0, 3]]
    """
    planes = jnp.asarray(planes)
    if planes.dtype != jnp.uint8 or planes.ndim < 2:
        raise TypeError(f"planes must be a uint8 array (..., bits, d/8); received {planes.dtype} {planes.shape}")
    bits, d8 = planes.shape[-2:]
    bit = (planes.astype(jnp.uint32)[..., None] >> jnp.arange(8, dtype=jnp.uint32)) & 1  # (..., bits, d8, 8)
    code = jnp.sum(bit << jnp.arange(bits, dtype=jnp.uint32)[:, None, None], axis=-3)
    return code.reshape(*planes.shape[:-2], d8 * 8).astype(jnp.uint8)


def centroid_of_class(plane_vals: list, j: int, centroids: tuple) -> jax.Array:
    """Centroids of coordinates ``8i + j`` straight from the loaded int32 bit planes.

    A multiplexer tree over the code bits: level p selects, by bit p, between the pairs of
    values left by level p−1 (code order puts the two codes that differ only in bit 0 next
    to each other, then bit 1, ...). ``2**bits − 1`` selects, no comparisons, no code
    assembly, no gather; the result is exactly a float32 centroid.

    Examples
    --------
    >>> planes = pack_planes_reference(np.array([[3, 0, 0, 0, 0, 0, 2, 1]], np.uint8), 2)[0]  # (bits, d/8)
    >>> vals = [jnp.asarray(p, jnp.int32) for p in planes]  # plane p holds bit p of every code
    >>> [float(centroid_of_class(vals, j, (-1.5, -0.5, 0.5, 1.5))[0]) for j in (0, 1, 6, 7)]
    [1.5, -1.5, 0.5, -0.5]
    """
    vals = list(centroids)
    for p, plane in enumerate(plane_vals):
        bit = ((plane >> j) & 1) == 1
        vals = [jnp.where(bit, jnp.float32(vals[2 * i + 1]), jnp.float32(vals[2 * i]))
                for i in range(len(vals) // 2)]
    return vals[0]


def _encode_kernel(x_ref, o_ref, *, boundaries: tuple, bits: int, d8: int):
    # x_ref (T, d) with coordinates class-major (column j*d8 + i holds coordinate 8i+j);
    # o_ref (bits, T, d8) uint8.
    planes = [None] * bits
    for j in range(8):
        xj = x_ref[:, pl.ds(j * d8, d8)].astype(jnp.float32)
        code = jnp.zeros(xj.shape, jnp.int32)
        for bnd in boundaries:
            code = code + (xj > bnd).astype(jnp.int32)
        for p in range(bits):
            bit = ((code >> p) & 1) << j
            planes[p] = bit if planes[p] is None else planes[p] | bit
    for p in range(bits):
        o_ref[p] = planes[p].astype(jnp.uint8)


def _decode_kernel(*refs, centroids: tuple, bits: int, d8: int):
    # refs: bits plane refs (T, d8) uint8, then o_ref (T, d) class-major float32.
    plane_refs, o_ref = refs[:bits], refs[bits]
    vals = [r[...].astype(jnp.int32) for r in plane_refs]
    for j in range(8):
        o_ref[:, pl.ds(j * d8, d8)] = centroid_of_class(vals, j, centroids)


def _batchable(kernel, impl: str, in_fold: tuple, out_fold: tuple):
    """Mosaic calls get a vmap rule folding the batch into rows (see ``batch_folded``);
    Triton batches its grid itself."""
    if impl != "mosaic":
        return kernel
    return lambda *a: batch_folded(lambda *b: (kernel(*b),), in_fold, out_fold)(*a)[0]


def to_class_major(x: jax.Array) -> jax.Array:
    """Permute the last axis so coordinate ``8i + j`` moves to ``j·d/8 + i`` (an XLA transpose).

    Examples
    --------
    >>> to_class_major(jnp.arange(16)).tolist()
    [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]
    """
    d = x.shape[-1]
    return jnp.swapaxes(x.reshape(*x.shape[:-1], d // 8, 8), -1, -2).reshape(x.shape)


def from_class_major(x: jax.Array) -> jax.Array:
    """Inverse of :func:`to_class_major`.

    Examples
    --------
    >>> bool((from_class_major(to_class_major(jnp.arange(16))) == jnp.arange(16)).all())
    True
    """
    d = x.shape[-1]
    return jnp.swapaxes(x.reshape(*x.shape[:-1], 8, d // 8), -1, -2).reshape(x.shape)


def encode_packed(x: Float[ArrayLike, "*batch d"], codebook: StaticCodebook | Codebook, *, impl: str = "auto",
                  interpret: bool | None = None,
                  block_rows: int | None = None) -> UInt8[jax.Array, "*batch bits d/8"]:
    """Encode ``x`` ``(..., d)`` with a Lloyd–Max codebook into bit planes ``(..., bits, d/8)``.

    The kernel fuses comparison-count encoding with bit-plane packing; the reference is
    ``pack_planes_reference(encode_reference(x))``. Both give identical bytes.

    Examples
    --------
    >>> cb = StaticCodebook.from_arrays([-1.5, -0.5, 0.5, 1.5], [-1.0, 0.0, 1.0])
    >>> x = np.linspace(-2, 2, 32, dtype=np.float32)[None]
    >>> k = encode_packed(x, cb, impl="pallas", interpret=True)
    >>> bool((k == encode_packed(x, cb, impl="reference")).all()), k.shape
    (True, (1, 2, 4))
    """
    impl, interpret = resolve_impl(impl, interpret)
    cb = _as_static(codebook)
    x = as_jax_float(x, "x")
    check_finite_concrete(x, "x")
    d = x.shape[-1]
    if d % 8:
        raise ValueError(f"x's last axis must be a multiple of 8; received {d}")
    if impl == "reference":
        return pack_planes_reference(encode_reference(x, cb), cb.bits)
    impl = kernel_backend(impl, mosaic_rows_ok(d // 8), _MOSAIC_PLANES.format(d8=d // 8))
    d8_out = d // 8
    if impl == "triton" and next_pow2(d8_out) != d8_out:  # zero coordinates, their bytes cut below
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, 8 * next_pow2(d8_out) - d)])
        d = x.shape[-1]
    lead = x.shape[:-1]
    T = row_block(math.prod(lead), block_rows, impl)
    x2, n = pad_rows(to_class_major(x), T)
    d8 = d // 8
    def call(xx):  # shapes from the argument: under vmap (Mosaic) the rows are B·rows
        return grid_call(
            functools.partial(_encode_kernel, boundaries=cb.boundaries, bits=cb.bits, d8=d8), impl,
            out_shape=jax.ShapeDtypeStruct((cb.bits, xx.shape[0], d8), jnp.uint8),
            grid=(xx.shape[0] // T,),
            in_specs=[pl.BlockSpec((T, d), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((cb.bits, T, d8), lambda i: (0, i, 0)),
            interpret=interpret,
            name="kvstats_lloyd_max_encode",
        )(xx)

    out = _batchable(call, impl, (0,), (1,))(x2)
    return jnp.moveaxis(out[:, :n], 0, 1).reshape(*lead, cb.bits, d8)[..., :d8_out]


def decode_packed(planes: UInt8[ArrayLike, "*batch bits d8"], codebook: StaticCodebook | Codebook, *,
                  impl: str = "auto", interpret: bool | None = None,
                  block_rows: int | None = None) -> Float[jax.Array, "*batch d8*8"]:
    """Decode bit planes ``(..., bits, d/8)`` to float32 centroids ``(..., d)``.

    Examples
    --------
    >>> cb = StaticCodebook.from_arrays([-1.5, -0.5, 0.5, 1.5], [-1.0, 0.0, 1.0])
    >>> x = np.linspace(-2, 2, 32, dtype=np.float32)[None]
    >>> xh = decode_packed(encode_packed(x, cb), cb, impl="pallas", interpret=True)
    >>> sorted(set(np.asarray(xh).ravel().tolist()))
    [-1.5, -0.5, 0.5, 1.5]
    """
    impl, interpret = resolve_impl(impl, interpret)
    cb = _as_static(codebook)
    planes = jnp.asarray(planes)
    if planes.dtype != jnp.uint8 or planes.ndim < 2 or planes.shape[-2] != cb.bits or 0 in planes.shape:
        raise ValueError(f"planes must be uint8 (..., {cb.bits}, d/8) for a {cb.bits}-bit codebook, no axis empty; "
                         f"received {planes.dtype} {planes.shape}")
    if impl == "reference":
        return decode_reference(unpack_planes_reference(planes), cb)
    lead, d8_out = planes.shape[:-2], planes.shape[-1]
    impl = kernel_backend(impl, mosaic_rows_ok(d8_out), _MOSAIC_PLANES.format(d8=d8_out))
    if impl == "triton" and next_pow2(d8_out) != d8_out:  # zero bytes: coordinates cut below
        planes = jnp.pad(planes, [(0, 0)] * (planes.ndim - 1) + [(0, next_pow2(d8_out) - d8_out)])
    d8 = planes.shape[-1]
    T = row_block(math.prod(lead), block_rows, impl)
    p2 = [pad_rows(planes[..., p, :], T)[0] for p in range(cb.bits)]
    n = math.prod(lead)
    def call(*pp):  # shapes from the arguments (see encode_packed)
        return grid_call(
            functools.partial(_decode_kernel, centroids=cb.centroids, bits=cb.bits, d8=d8), impl,
            out_shape=jax.ShapeDtypeStruct((pp[0].shape[0], 8 * d8), jnp.float32),
            grid=(pp[0].shape[0] // T,),
            in_specs=[pl.BlockSpec((T, d8), lambda i: (i, 0)) for _ in range(cb.bits)],
            out_specs=pl.BlockSpec((T, 8 * d8), lambda i: (i, 0)),
            interpret=interpret,
            name="kvstats_lloyd_max_decode",
        )(*pp)

    out = _batchable(call, impl, (0,) * cb.bits, (0,))(*p2)
    return from_class_major(out[:n])[:, :8 * d8_out].reshape(*lead, 8 * d8_out)
