"""QJL sketching (keys → packed sign bits + norms) and scoring, as Pallas kernels.

Bits are exactly the numpy core's (:func:`kvstats.quant.qjl.qjl_encode`): bit ``j`` of
byte ``i`` is ``S[8i + j] · k >= 0`` (``sign(0) = +1``), little bit order as in the QJL
CUDA kernels. The kernel never gathers: the sketch rows are permuted class-major on the
host (row ``j·m/8 + i`` holds ``S[8i + j]``), so the projections of bit class ``j`` of
every byte are one contiguous ``(T, m/8)`` product, and a byte is ``sum_j bit_j << j``.
Scoring reverses this: ``<S q, sign(S k)> = sum_j <(S q)_class j, 2·((byte >> j) & 1) − 1>``,
eight small matmuls per token block, with the ±1 signs made by shifts and ands.

float32 projections decide the sign; the numpy core decides in float64, so a projection
within float32 rounding of 0 (relative ~1e-7 of ‖S_i‖‖k‖) may get the other bit. The tests
check exact equality on dyadic inputs (exact in both precisions, including exact zeros)
and bound the mismatches on Gaussian inputs to those near-zero projections.

Two kernel bodies per op (see :mod:`kvstats_gpu._common`). Triton: ``dot`` (float32 at IEEE
precision: FMAs on the CUDA cores).
Mosaic GPU (no ``dot``, no ``sqrt`` in its Pallas lowering): the sketch accumulates the
``(T, m)`` projections as ``sum_k k[:, k] ⊗ Sᵀ[k, :]`` with float32 FMAs and returns
squared norms whose square root XLA takes. Both keep the sketch block next to the key tile
in SMEM (``d·(m + T)·4`` bytes): the whole sketch while that is at most ``SMEM_BUDGET``
(d = 128, m <= 256), else blocks of ``m_b`` of its rows (a multiple of 128; at d = 256,
m = 256: two of 128, 128 KiB each, where the whole 256 KiB sketch was over sm_90's
227 KiB: Mosaic's lowering refused it, Triton's compile on an H200 asked for 327,680
bytes), each block class-major within itself so a block's projections make whole bytes
(bytes ``i0 … i0 + m_b/8``), one program per (row block, column block); every projection
is the same sum in the same order, so the bits do not change. The scores are row
reductions ``sum(signs_j * (S q)_j, axis=1)`` per query head (no padding of the group to
16).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.typing import ArrayLike
from jaxtyping import Float, UInt8

from kvstats._checks import check_real
from kvstats.quant.sketch import Sketch
from kvstats_gpu._common import (MIN_DOT, SMEM_BUDGET, KernelOps, as_jax_float, batch_folded,
                                 check_finite_concrete, compiler_params, dot_nt, kernel_backend, mosaic_rows_ok,
                                 next_pow2, pad_rows, resolve_impl, row_block, triton_sizes_ok)
from kvstats_gpu.codebook import to_class_major
from kvstats_gpu.mosaic_call import grid_call


_SIGN_ROWS = "sign rows of m/8 = {m8} bytes (Mosaic's block copies need rows of a multiple of 16 bytes)"
_SIGN_ROWS_TRITON = "sign rows of m/8 = {m8} bytes (Triton takes only power-of-two block sizes)"


def _backend(impl: str, m: int) -> str:
    """The backend of a kernel over sign rows of m/8 bytes (:func:`kernel_backend`)."""
    return kernel_backend(impl, mosaic_rows_ok(m // 8), _SIGN_ROWS.format(m8=m // 8),
                          triton_sizes_ok(m // 8), _SIGN_ROWS_TRITON.format(m8=m // 8))


def check_sketch(sketch: Float[ArrayLike, "m d"] | Sketch, dim: int | None = None,
                 name: str = "sketch") -> Float[jax.Array, "m d"]:
    """Validate a sketch matrix ``(m, d)`` (or a numpy ``Sketch``'s) with m a multiple of 8; float32.

    Examples
    --------
    >>> check_sketch(np.ones((16, 4)), dim=4).dtype
    dtype('float32')
    >>> check_sketch(np.ones((12, 4)))
    Traceback (most recent call last):
    ...
    ValueError: sketch must be a 2-D (m, d) matrix with m a multiple of 8 (one shared draw); received shape (12, 4)
    """
    s = as_jax_float(sketch.matrix if isinstance(sketch, Sketch) else sketch, name, min_ndim=2)
    check_finite_concrete(s, name)
    if s.ndim != 2 or s.shape[0] % 8:
        raise ValueError(f"{name} must be a 2-D (m, d) matrix with m a multiple of 8 (one shared draw); "
                         f"received shape {s.shape}")
    if dim is not None and s.shape[1] != dim:
        raise ValueError(f"{name} must have {dim} columns (the vectors' dimension); received shape {s.shape}")
    return s.astype(jnp.float32)


def qjl_sketch_reference(k: Float[ArrayLike, "*batch d"], sketch: Float[ArrayLike, "m d"] | Sketch
                         ) -> tuple[UInt8[jax.Array, "*batch m/8"], Float[jax.Array, "*batch"]]:
    """Packed signs ``(..., m/8)`` uint8 of ``S k`` and float32 norms ``(...)`` (plain jnp).

    Parameters
    ----------
    k : array ``(..., d)``
    sketch : array ``(m, d)`` or a :class:`kvstats.quant.sketch.Sketch` (its ``.matrix``)

    Examples
    --------
    >>> S = np.eye(8); k = np.array([[1.0, -1, 0, 2, -3, 0, 0, -1]], np.float32)
    >>> bits, norms = qjl_sketch_reference(k, S)
    >>> int(bits[0, 0]) == 0b01101101, float(norms[0]) == 4.0
    (True, True)
    """
    k = as_jax_float(k, "k")
    check_finite_concrete(k, "k")
    s = check_sketch(sketch, k.shape[-1])
    kf = k.astype(jnp.float32)
    proj = jnp.matmul(kf, s.T, precision=jax.lax.Precision.HIGHEST)
    bits = (proj >= 0).astype(jnp.uint32).reshape(*proj.shape[:-1], -1, 8)
    packed = jnp.sum(bits << jnp.arange(8, dtype=jnp.uint32), axis=-1).astype(jnp.uint8)
    return packed, jnp.sqrt(jnp.sum(kf * kf, axis=-1))


def _sketch_col_block(m: int, d: int, rows: int) -> int:
    """Columns of ``Sᵀ`` (rows of S) per sketch program: all ``m`` while the key tile ``(rows, d)``
    and ``Sᵀ`` fit ``SMEM_BUDGET`` in float32, else the largest multiple of 128 that
    divides ``m`` and fits (128 at least: sign rows of 16 bytes, Mosaic's block copies).

    Examples
    --------
    >>> _sketch_col_block(128, 128, 64), _sketch_col_block(256, 128, 64), _sketch_col_block(256, 256, 64)
    (128, 256, 128)
    >>> _sketch_col_block(384, 256, 64)
    128
    """
    fits = [b for b in range(128, m + 1, 128) if m % b == 0 and 4 * d * (b + rows) <= SMEM_BUDGET]
    return m if 4 * d * (m + rows) <= SMEM_BUDGET else max(fits, default=min(m, 128))


def _sketch_kernel(k_ref, s_ref, bits_ref, norm_ref, *, m8: int):
    k = k_ref[...].astype(jnp.float32)
    packed = None
    for j in range(8):
        proj = dot_nt(k, s_ref[pl.ds(j * m8, m8), :])  # projections on rows 8i + j
        bit = (proj >= 0).astype(jnp.int32) << j
        packed = bit if packed is None else packed | bit
    bits_ref[...] = packed.astype(jnp.uint8)
    norm_ref[...] = jnp.sqrt(jnp.sum(k * k, axis=1))


def _sketch_kernel_mosaic(k_ref, st_ref, bits_ref, sq_ref, *, m8: int, ops: KernelOps):
    # k_ref (T, d); st_ref (d, m) = Sᵀ with class-major columns; bits_ref (T, m8) uint8;
    # sq_ref (T,) squared norms (Mosaic GPU lowers no sqrt)
    T, m = k_ref.shape[0], st_ref.shape[1]
    proj = ops.outer_matmul(k_ref, st_ref, T, m)
    packed = None
    for j in range(8):
        bit = (proj[:, j * m8:(j + 1) * m8] >= 0).astype(jnp.int32) << j
        packed = bit if packed is None else packed | bit
    bits_ref[...] = packed.astype(jnp.uint8)
    k = ops.tile(k_ref).astype(jnp.float32)
    sq_ref[...] = jnp.sum(k * k, axis=1)


def qjl_sketch(k: Float[ArrayLike, "*batch d"], sketch: Float[ArrayLike, "m d"] | Sketch, *, impl: str = "auto",
               interpret: bool | None = None, block_rows: int | None = None
               ) -> tuple[UInt8[jax.Array, "*batch m/8"], Float[jax.Array, "*batch"]]:
    """QJL-encode keys: packed sign bits ``(..., m/8)`` uint8 and float32 norms ``(...)``.

    Same result as :func:`qjl_sketch_reference` (bit-exact for the same float32
    projections); ``impl``/``interpret``/``block_rows`` as in :mod:`kvstats_gpu`.
    Keys of any float dtype are projected in float32 at IEEE precision (not TF32), so
    bf16 keys get the bits of their exact float32 values, as in the reference.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> S = rng.normal(size=(128, 64)); k = rng.normal(size=(3, 64)).astype(np.float32)
    >>> b1, n1 = qjl_sketch(k, S, impl="pallas", interpret=True)
    >>> b2, n2 = qjl_sketch_reference(k, S)
    >>> bool((b1 == b2).all()), b1.shape
    (True, (3, 16))
    """
    impl, interpret = resolve_impl(impl, interpret)
    if impl == "reference":
        return qjl_sketch_reference(k, sketch)
    k = as_jax_float(k, "k")
    check_finite_concrete(k, "k")
    s = check_sketch(sketch, k.shape[-1])
    m, d = s.shape
    impl = _backend(impl, m)
    # zero columns change no projection and no norm: pad d to what the backend's blocks take
    # (Triton: a power of two; Mosaic's register tiles: a multiple of 8 columns)
    d_k = next_pow2(d) if impl == "triton" else -(-d // 8) * 8
    if d_k != d:
        k = jnp.pad(k, [(0, 0)] * (k.ndim - 1) + [(0, d_k - d)])
        s, d = jnp.pad(s, ((0, 0), (0, d_k - d))), d_k
    lead = k.shape[:-1]
    T = row_block(math.prod(lead), block_rows, impl)
    k2, n = pad_rows(k, T)
    mb = _sketch_col_block(m, d, T)
    if 4 * d * (mb + T) > SMEM_BUDGET:  # a launch no sm_90 block takes: refused here, not at compile
        raise ValueError(f"qjl_sketch with impl={impl!r} keeps a ({T}, {d}) key tile and {mb} sketch rows in "
                         f"float32 in SMEM, {4 * d * (mb + T)} bytes, over its budget of {SMEM_BUDGET} (an sm_90 "
                         f"block has 232,448); use a smaller block_rows (>= 16 for Triton, >= 64 for Mosaic) "
                         f"if that fits, else impl='reference'")
    nb = m // mb
    # class-major within each block of mb columns: block c's projections are bytes c·mb/8 …
    st = to_class_major(s.T.reshape(d, nb, mb)).reshape(d, m)
    # each column block writes its own copy of the row norms (row c of the norm output): no
    # two programs write one block; the first copy is kept
    def out_shape(rows):
        return jax.ShapeDtypeStruct((rows, m // 8), jnp.uint8), jax.ShapeDtypeStruct((nb, rows), jnp.float32)

    out_specs = (pl.BlockSpec((T, mb // 8), lambda i, c: (i, c)), pl.BlockSpec((None, T), lambda i, c: (c, i)))
    if impl == "mosaic":
        def call(kk, st):  # shapes from the arguments: under vmap the rows are B·rows
            return grid_call(
                functools.partial(_sketch_kernel_mosaic, m8=mb // 8, ops=KernelOps(not interpret)), "mosaic",
                out_shape=out_shape(kk.shape[0]), grid=(kk.shape[0] // T, nb),
                in_specs=[pl.BlockSpec((T, d), lambda i, c: (i, 0)), pl.BlockSpec((d, mb), lambda i, c: (0, c))],
                out_specs=out_specs, interpret=interpret, name="kvstats_qjl_sketch",
            )(kk, st)

        bits, sqn = batch_folded(call, (0, None), (0, 1))(k2, st)
        return bits[:n].reshape(*lead, m // 8), jnp.sqrt(sqn[0, :n]).reshape(lead)
    bits, norms = pl.pallas_call(  # float32 sketch: the encode path is not bandwidth-bound
        functools.partial(_sketch_kernel, m8=mb // 8),
        out_shape=out_shape(k2.shape[0]), grid=(k2.shape[0] // T, nb),
        in_specs=[pl.BlockSpec((T, d), lambda i, c: (i, 0)), pl.BlockSpec((mb, d), lambda i, c: (c, 0))],
        out_specs=out_specs, compiler_params=compiler_params("triton"), interpret=interpret,
        name="kvstats_qjl_sketch",
    )(k2, st.T)
    return bits[:n].reshape(*lead, m // 8), norms[0, :n].reshape(lead)


def unpack_signs_reference(bits: jax.Array, m: int) -> jax.Array:
    """Packed bits ``(..., m/8)`` → float32 ±1 ``(..., m)`` (bit 1 ↦ +1; bit ``j`` of byte
    ``i`` is sign ``8i + j``: little bit order, as the numpy core's ``pack_bits``).

    Examples
    --------
    >>> unpack_signs_reference(jnp.array([[0b00000101]], jnp.uint8), 8).tolist()
    [[1.0, -1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0]]
    """
    b = (bits.astype(jnp.uint32)[..., None] >> jnp.arange(8, dtype=jnp.uint32)) & 1
    return (2.0 * b.reshape(*bits.shape[:-1], m).astype(jnp.float32) - 1.0)


def _check_scores_args(q, bits, norms, sketch, scale):
    q = as_jax_float(q, "q", min_ndim=3)
    check_finite_concrete(q, "q")
    s = check_sketch(sketch, q.shape[-1])
    bits = jnp.asarray(bits)
    norms = as_jax_float(norms, "norms", min_ndim=2)
    if bits.dtype != jnp.uint8 or bits.ndim != 3 or bits.shape[-1] != s.shape[0] // 8:
        raise ValueError(f"bits must be uint8 (H, N, m/8) with m/8 = {s.shape[0] // 8}; "
                         f"received {bits.dtype} {bits.shape}")
    if q.ndim != 3 or q.shape[0] != bits.shape[0]:
        raise ValueError(f"q must be (H, G, d) with H = {bits.shape[0]} (bits' heads); received {q.shape}")
    if norms.shape != bits.shape[:2]:
        raise ValueError(f"norms must have shape {bits.shape[:2]} (H, N); received {norms.shape}")
    if scale is None:  # a numpy Sketch carries its own constant (orthogonal rows differ from √(π/2)/m)
        scale = sketch.scale if isinstance(sketch, Sketch) else math.sqrt(math.pi / 2) / s.shape[0]
    scale = float(check_real(scale, "scale", low=0.0, low_open=True))
    return q, bits, norms.astype(jnp.float32), s, scale


def qjl_scores_reference(q: Float[ArrayLike, "H G d"], bits: UInt8[ArrayLike, "H N m/8"],
                         norms: Float[ArrayLike, "H N"], sketch: Float[ArrayLike, "m d"] | Sketch,
                         scale: float | None = None) -> Float[jax.Array, "H G N"]:
    """Estimated scores ``scale · ‖k‖ · <S q, sign(S k)>``, ``(H, G, N)`` float32 (plain jnp).

    Parameters
    ----------
    q : array ``(H, G, d)``
        The G query heads of each of H KV heads (grouped-query attention).
    bits : uint8 ``(H, N, m/8)``; norms : ``(H, N)``
        From :func:`qjl_sketch` (or the numpy core's ``QJLCodes``).
    sketch : ``(m, d)`` matrix or numpy ``Sketch``
    scale : float, optional
        The estimator's constant: ``Sketch.scale`` (√(π/2)/m for Gaussian rows, the
        exact finite-d constant for orthogonal rows). Default: ``sketch.scale`` when
        ``sketch`` is a numpy ``Sketch``, else √(π/2)/m (Gaussian rows).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> S = rng.normal(size=(64, 16)); k = rng.normal(size=(1, 5, 16)); q = rng.normal(size=(1, 2, 16))
    >>> bits, norms = qjl_sketch_reference(k, S)
    >>> qjl_scores_reference(q, bits, norms, S).shape
    (1, 2, 5)
    """
    q, bits, norms, s, scale = _check_scores_args(q, bits, norms, sketch, scale)
    hp = jax.lax.Precision.HIGHEST
    sq = jnp.matmul(q.astype(jnp.float32), s.T, precision=hp)
    signs = unpack_signs_reference(bits, s.shape[0])
    return scale * norms[:, None, :] * jnp.matmul(sq, jnp.swapaxes(signs, -1, -2), precision=hp)


def _scores_kernel(sq_ref, bits_ref, norm_ref, o_ref, *, m8: int, scale: float):
    # sq_ref (Gp, m) class-major sketched queries; bits_ref (T, m8); norm_ref (T,)
    byte = bits_ref[...].astype(jnp.int32)
    acc = None
    for j in range(8):
        sign = (((byte >> j) & 1) * 2 - 1).astype(jnp.float32)
        part = dot_nt(sq_ref[:, pl.ds(j * m8, m8)], sign)
        acc = part if acc is None else acc + part
    o_ref[...] = acc * (scale * norm_ref[...].astype(jnp.float32))[None, :]


def _scores_kernel_mosaic(sq_ref, bits_ref, norm_ref, o_ref, *, m8: int, scale: float, ops: KernelOps):
    # sq_ref (G, m) class-major sketched queries; bits_ref (T, m8); norm_ref (T,); o_ref (G, T)
    byte = ops.tile(bits_ref).astype(jnp.int32)
    signs = [(((byte >> j) & 1) * 2 - 1).astype(jnp.float32) for j in range(8)]
    nrm = ops.rows(norm_ref).astype(jnp.float32) * scale
    for g in range(sq_ref.shape[0]):
        acc = None
        for j in range(8):
            part = ops.rowdot(signs[j], ops.cols(sq_ref.at[g, pl.ds(j * m8, m8)]))
            acc = part if acc is None else acc + part
        o_ref[g, :] = acc * nrm


def qjl_scores(q: Float[ArrayLike, "H G d"], bits: UInt8[ArrayLike, "H N m/8"], norms: Float[ArrayLike, "H N"],
               sketch: Float[ArrayLike, "m d"] | Sketch, scale: float | None = None, *, impl: str = "auto",
               interpret: bool | None = None, block_tokens: int = 128) -> Float[jax.Array, "H G N"]:
    """QJL score estimates of all query heads against all packed keys, ``(H, G, N)`` float32.

    One program per (KV head, block of ``block_tokens`` keys); the G query heads of the
    KV head share every unpacked sign block (Triton pads them to >= 16 rows for the tensor
    cores; Mosaic reduces each row on the CUDA cores). ``block_tokens``: a power of two,
    >= 16 for Triton, >= 64 for Mosaic.
    Arguments as in :func:`qjl_scores_reference`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> S = rng.normal(size=(128, 64)); k = rng.normal(size=(2, 40, 64)); q = rng.normal(size=(2, 4, 64))
    >>> bits, norms = qjl_sketch_reference(k, S)
    >>> a = qjl_scores(q, bits, norms, S, impl="pallas", interpret=True, block_tokens=64)
    >>> bool(np.allclose(a, qjl_scores_reference(q, bits, norms, S), rtol=1e-5, atol=1e-4))
    True
    """
    impl, interpret = resolve_impl(impl, interpret)
    q, bits, norms, s, scale = _check_scores_args(q, bits, norms, sketch, scale)
    if impl == "reference":
        return qjl_scores_reference(q, bits, norms, s, scale)
    H, G, _ = q.shape
    N, m = bits.shape[1], s.shape[0]
    impl = _backend(impl, m)
    T = row_block(0, block_tokens, impl, "block_tokens")
    Gp = G if impl == "mosaic" else max(MIN_DOT, next_pow2(G))
    sq = jnp.matmul(q.astype(jnp.float32), s.T, precision=jax.lax.Precision.HIGHEST)
    sq = to_class_major(jnp.pad(sq, ((0, 0), (0, Gp - G), (0, 0))))
    Np = -(-N // T) * T
    bits_p = jnp.pad(bits, ((0, 0), (0, Np - N), (0, 0)))
    norms_p = jnp.pad(norms, ((0, 0), (0, Np - N)))
    kernel = (functools.partial(_scores_kernel_mosaic, m8=m // 8, scale=scale, ops=KernelOps(not interpret))
              if impl == "mosaic" else functools.partial(_scores_kernel, m8=m // 8, scale=scale))

    def call(sq_, bits_, norms_):  # shapes from the arguments: under vmap (Mosaic) H is B·H
        return grid_call(
            kernel, impl,
            out_shape=jax.ShapeDtypeStruct((bits_.shape[0], Gp, Np), jnp.float32),
            grid=(bits_.shape[0], Np // T),
            in_specs=[pl.BlockSpec((None, Gp, m), lambda h, t: (h, 0, 0)),
                      pl.BlockSpec((None, T, m // 8), lambda h, t: (h, t, 0)),
                      pl.BlockSpec((None, T), lambda h, t: (h, t))],
            out_specs=pl.BlockSpec((None, Gp, T), lambda h, t: (h, 0, t)),
            interpret=interpret,
            name="kvstats_qjl_scores",
        )(sq_, bits_, norms_)

    if impl == "mosaic":  # under vmap the batch joins the KV heads (see batch_folded)
        (out,) = batch_folded(lambda *a: (call(*a),), (0, 0, 0), (0,))(sq, bits_p, norms_p)
    else:
        out = call(sq, bits_p, norms_p)
    return out[:, :G, :N]
