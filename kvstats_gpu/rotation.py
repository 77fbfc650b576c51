"""Randomized Hadamard rotation ``R x = H D pad(x) / sqrt(d_pad)`` as blocked matmuls.

The numpy core computes this with an O(d log d) butterfly; on a GPU the butterfly's
strided shuffles are slower than a tensor-core matmul against the dense ±1 matrix for the
head dimensions that matter (d ≤ 256: a (rows × d) @ (d × d) product). For larger d, and
wherever the x tile and a dense ``H_d`` would overrun the SMEM of a block (float32 at
d = 256: 327,680 bytes, over sm_90's 232,448, seen on an H200), the kernel uses the
Sylvester factorisation ``H_d = H_a ⊗ H_b`` (b = 256, or less to fit): ``a`` dense
products with ``H_b`` on contiguous column blocks, then ±1 combinations of the blocks, so
the work is O(d·(b + a)) instead of O(d²). Row vectors are rotated: ``y = (x ⊙ s) H / √d``
(H is symmetric), and the inverse is ``x = (y H / √d) ⊙ s``, truncated to ``dim``.

The ±1 matrix is exact in any float format, so bf16 inputs go through the tensor cores
with float32 accumulation and the 1/√d scale is applied after accumulation (1/√128 is not
representable in bf16, so it is not folded into H).

Two kernel bodies (see :mod:`kvstats_gpu._common`). Triton: the above, on tensor cores.
Mosaic GPU (no ``dot`` in its Pallas lowering): one program per (row block, 128-column
block) accumulates ``sum_k (x_k s_k) ⊗ H_128[k, :]`` with float32 FMAs on the CUDA
cores (products with ±1 are exact, so this is the float32 result up to summation
order); for d > 128 the ±1 combination of the column blocks (``H_a ⊗ I``), the scale
and the inverse's signs are applied by XLA after the kernel. Blocks are sized for SMEM
(x, H and the output block of one program: 64 × 128 and 128 × 128 float32).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.typing import ArrayLike
from jaxtyping import Float

from kvstats._checks import check_int
from kvstats_gpu._common import (MIN_DOT, SMEM_BUDGET, KernelOps, as_jax_float, batch_folded,
                                 check_finite_concrete, compiler_params, dot_nn, hadamard_np, is_pow2, kernel_backend,
                                 pad_rows, resolve_impl, row_block)
from kvstats_gpu.mosaic_call import grid_call

# Above this the kernel uses the two-level Kronecker factorisation (Triton body).
DENSE_MAX = 256
# Column block of the Mosaic body (its H block and the x block of a program fit in SMEM).
MOSAIC_COLS = 128


def check_signs(signs: Float[ArrayLike, "d_pad"], name: str = "signs") -> Float[jax.Array, "d_pad"]:
    """Validate a 1-D ±1 sign vector whose length is a power of two >= 8; float32.

    Examples
    --------
    >>> check_signs([1, -1, 1, 1, -1, 1, 1, 1]).tolist()
    [1.0, -1.0, 1.0, 1.0, -1.0, 1.0, 1.0, 1.0]
    >>> check_signs(np.ones(12))
    Traceback (most recent call last):
    ...
    ValueError: signs must be 1-D with a power-of-two length >= 8 (one shared rotation; d_pad = next power of two of the head dim); received shape (12,)
    """
    s = as_jax_float(signs, name, min_ndim=1)
    if s.ndim != 1 or not is_pow2(s.shape[0]) or s.shape[0] < 8:
        raise ValueError(f"{name} must be 1-D with a power-of-two length >= 8 (one shared rotation; "
                         f"d_pad = next power of two of the head dim); received shape {s.shape}")
    if not isinstance(s, jax.core.Tracer) and not np.all(np.abs(np.asarray(s)) == 1):
        raise ValueError(f"{name} must contain only +1 and -1 values")
    return s.astype(jnp.float32)


def rotate_reference(x: Float[ArrayLike, "*batch d"], signs: Float[ArrayLike, "d_pad"], *, inverse: bool = False,
                     dim: int | None = None) -> Float[jax.Array, "*batch d_out"]:
    """Plain ``jnp`` randomized Hadamard rotation (dense ±1 matrix, float32 HIGHEST precision).

    Parameters
    ----------
    x : array, shape ``(..., d)``
        Row vectors. Forward: ``d <= d_pad`` (zero-padded to ``d_pad``). Inverse:
        ``d == d_pad``.
    signs : array, shape ``(d_pad,)``
        The ±1 diagonal D (``Rotation.signs`` of the numpy core).
    inverse : bool
        Apply ``R^T`` instead of ``R``.
    dim : int, optional
        Inverse only: keep the first ``dim`` coordinates (the unpadded head dim).

    Returns
    -------
    jax.Array
        float32 for float32 input, else the input dtype; shape ``(..., d_pad)`` forward,
        ``(..., dim)`` inverse.

    Raises
    ------
    ValueError
        For a concrete ``x`` with a row whose norm exceeds the input dtype's max (float16:
        65504; float32: its max / √d_pad, the float32 accumulation of the unscaled
        product): a rotated coordinate can reach the row's norm, so the output could
        overflow to inf. Under ``jit`` the check cannot run and such a row gives inf.

    Examples
    --------
    >>> import numpy as np
    >>> s = np.ones(8); x = np.eye(8, dtype=np.float32)[:1]
    >>> y = rotate_reference(x, s)
    >>> bool(np.allclose(rotate_reference(y, s, inverse=True), x, atol=1e-6))
    True
    """
    x, s, d_pad, dim = _check(x, signs, inverse, dim)
    h = jnp.asarray(hadamard_np(d_pad))
    xf = x.astype(jnp.float32)
    hp = jax.lax.Precision.HIGHEST
    if not inverse:
        xf = jnp.pad(xf, [(0, 0)] * (x.ndim - 1) + [(0, d_pad - x.shape[-1])])
        y = jnp.matmul(xf * s, h, precision=hp) * (1.0 / math.sqrt(d_pad))
    else:
        y = (jnp.matmul(xf, h, precision=hp) * (1.0 / math.sqrt(d_pad)) * s)[..., :dim]
    return y.astype(x.dtype)


def _check(x, signs, inverse, dim):
    x = as_jax_float(x, "x", min_ndim=1)
    check_finite_concrete(x, "x")
    s = check_signs(signs)
    d_pad = s.shape[0]
    _check_range(x, d_pad)
    if not isinstance(inverse, bool):
        raise TypeError(f"inverse must be a bool; received {inverse!r}")
    if not inverse:
        if x.shape[-1] > d_pad:
            raise ValueError(f"x's last axis must be <= len(signs) = {d_pad}; received {x.shape[-1]}")
        if dim is not None:
            raise ValueError("dim is only used with inverse=True; received dim for the forward rotation")
    else:
        if x.shape[-1] != d_pad:
            raise ValueError(f"for the inverse, x's last axis must equal len(signs) = {d_pad}; "
                             f"received {x.shape[-1]}")
        dim = d_pad if dim is None else check_int(dim, "dim", low=1, high=d_pad)
    return x, s, d_pad, dim


def _check_range(x: jax.Array, d_pad: int) -> None:
    """Refuse a concrete ``x`` whose rotation may not be representable (skipped under tracing).

    A rotated coordinate can reach its row's norm (a row whose mass the rotation moves to one
    axis), so a row norm above the dtype's max could turn finite float16 into inf; every
    path accumulates the unscaled ``x H`` in float32, up to √d_pad times the norm.
    """
    if isinstance(x, jax.core.Tracer):
        return
    dt_max = float(jnp.finfo(x.dtype).max)
    limit = min(dt_max, float(np.finfo(np.float32).max) / math.sqrt(d_pad))
    if not x.size:
        return
    # reduced where x lives (a scalar to the host, not the array); the cheap bound first
    # (norm <= max|x|·√d), the norms only for rows near the limit, scaled by that max
    # (the float32 square of a large row would overflow)
    big = float(jnp.max(jnp.abs(x.astype(jnp.float32))))
    if big * math.sqrt(x.shape[-1]) <= limit:
        return
    top = big * float(jnp.max(jnp.sqrt(jnp.sum(jnp.square(x.astype(jnp.float32) / big), -1))))
    if top > limit:
        why = "" if limit == dt_max else f", / √{d_pad} for the float32 accumulation"
        raise ValueError(f"x's rows must have norm <= {limit:.6g} ({x.dtype} max {dt_max:.6g}{why}: a rotated "
                         f"coordinate can reach its row's norm); received a row of norm {top:.6g}")


def _triton_blocks(d_pad: int, T: int, itemsize: int, shrink_rows: bool) -> tuple[int, int]:
    """Row block ``T`` and Hadamard order ``b`` of the Triton body: ``b = min(d_pad,
    DENSE_MAX)`` and the given ``T``, while the x tile ``(T, d_pad)`` and ``H_b`` fit
    ``SMEM_BUDGET``; else ``b`` is halved to 128, then ``T`` (only when ``shrink_rows``: the
    caller left ``block_rows`` to its default) to 16, then ``b`` to 16.

    Examples
    --------
    >>> _triton_blocks(128, 64, 4, True), _triton_blocks(256, 64, 2, True), _triton_blocks(256, 64, 4, True)
    ((64, 128), (64, 256), (64, 128))
    >>> _triton_blocks(1024, 64, 4, True), _triton_blocks(1024, 64, 4, False)
    ((32, 128), (64, 16))
    """
    b = min(d_pad, DENSE_MAX)

    def over() -> bool:
        return (T * d_pad + b * b) * itemsize > SMEM_BUDGET

    while over() and b > 128:
        b //= 2
    while over() and shrink_rows and T > MIN_DOT:
        T //= 2
    while over() and b > 16:
        b //= 2
    return T, b


def _rotate_kernel(x_ref, s_ref, h_ref, o_ref, *, inverse: bool, b: int, a: int, scale: float):
    # x_ref (T, d_pad); s_ref (1, d_pad) float32; h_ref (b, b) ±1 in the compute dtype.
    h = h_ref[...]
    ha = hadamard_np(a)
    z = []
    for k in range(a):  # stage 1: (I_a ⊗ H_b) on contiguous column blocks
        xk = x_ref[:, pl.ds(k * b, b)]
        if not inverse:
            # sign flips are exact in every float format
            xk = (xk.astype(jnp.float32) * s_ref[:, pl.ds(k * b, b)]).astype(xk.dtype)
        z.append(dot_nn(xk, h))
    for i in range(a):  # stage 2: (H_a ⊗ I_b), a ±1 combination of the blocks
        yi = z[0] if ha[0, i] > 0 else -z[0]
        for k in range(1, a):
            yi = yi + z[k] if ha[k, i] > 0 else yi - z[k]
        yi = yi * scale
        if inverse:
            yi = yi * s_ref[:, pl.ds(i * b, b)]
        o_ref[:, pl.ds(i * b, b)] = yi.astype(o_ref.dtype)


def _rotate_kernel_mosaic(x_ref, s_ref, h_ref, o_ref, *, inverse: bool, final: bool, scale: float,
                          ops: KernelOps):
    # x_ref (T, b) one column block; s_ref (b,) its signs; h_ref (b, b) ±1 float32.
    # o_ref (T, b): the finished rotation when final (a single block), else z = x_blk H_b.
    T, b = x_ref.shape
    acc = ops.outer_matmul(x_ref, h_ref, T, b, row_scale=None if inverse else (lambda k: s_ref[k]))
    if final:
        acc = acc * scale
        if inverse:
            acc = acc * ops.over_rows(ops.cols(s_ref), T)
    o_ref[...] = acc.astype(o_ref.dtype)


def _rotate_mosaic(x2, s, d_pad, T, inverse, interpret):
    b = min(d_pad, MOSAIC_COLS)
    a = d_pad // b
    final = a == 1
    def call(xx, ss, hh):  # shapes from the arguments: under vmap the rows are B·rows
        return (grid_call(
            functools.partial(_rotate_kernel_mosaic, inverse=inverse, final=final, scale=1.0 / math.sqrt(d_pad),
                              ops=KernelOps(not interpret)), "mosaic",
            out_shape=jax.ShapeDtypeStruct(xx.shape, xx.dtype if final else jnp.float32),
            grid=(xx.shape[0] // T, a),
            in_specs=[pl.BlockSpec((T, b), lambda i, k: (i, k)),
                      pl.BlockSpec((b,), lambda i, k: (k,)),
                      pl.BlockSpec((b, b), lambda i, k: (0, 0))],
            out_specs=pl.BlockSpec((T, b), lambda i, k: (i, k)),
            interpret=interpret,
            name="kvstats_rotate",
        )(xx, ss, hh),)

    (z,) = batch_folded(call, (0, None, None), (0,))(x2, s, jnp.asarray(hadamard_np(b)))
    if final:
        return z
    # (H_a ⊗ I_b): a ±1 combination of the a column blocks, then scale (and signs)
    zb = z.reshape(z.shape[0], a, b)
    y = jnp.einsum("ik,rkb->rib", jnp.asarray(hadamard_np(a)), zb,
                   precision=jax.lax.Precision.HIGHEST).reshape(z.shape) * (1.0 / math.sqrt(d_pad))
    if inverse:
        y = y * s
    return y.astype(x2.dtype)


def rotate(x: Float[ArrayLike, "*batch d"], signs: Float[ArrayLike, "d_pad"], *, inverse: bool = False,
           dim: int | None = None, impl: str = "auto", interpret: bool | None = None,
           block_rows: int | None = None) -> Float[jax.Array, "*batch d_out"]:
    """Randomized Hadamard rotation (or its inverse) of row vectors; Pallas kernel or reference.

    Same arguments and result as :func:`rotate_reference`, plus the dispatch arguments
    (see :mod:`kvstats_gpu`): ``impl`` in ``("auto", "pallas", "mosaic", "triton",
    "reference")``, ``interpret``, and ``block_rows`` (power of two, >= 16 for Triton,
    >= 64 for Mosaic; rows per program).

    Rows whose rotation could overflow the input dtype are refused as there (a ValueError).

    Agreement with the reference: float32 to ~1e-6 relative (both float32 accumulation
    with IEEE products); bf16 inputs to bf16 output rounding (2^-8 relative).

    Examples
    --------
    >>> import numpy as np
    >>> s = np.where(np.arange(128) % 3 == 0, -1.0, 1.0)
    >>> x = np.random.default_rng(0).normal(size=(4, 128)).astype(np.float32)
    >>> y = rotate(x, s, impl="pallas", interpret=True)
    >>> bool(np.allclose(y, rotate_reference(x, s), atol=1e-5))
    True
    """
    impl, interpret = resolve_impl(impl, interpret)
    x, s, d_pad, dim = _check(x, signs, inverse, dim)
    if impl == "reference":
        return rotate_reference(x, s, inverse=inverse, dim=dim)
    if not inverse and x.shape[-1] != d_pad:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, d_pad - x.shape[-1])])
    # Mosaic block copies move multiples of 128 bytes: the signs block is 4·min(d_pad, 128)
    impl = kernel_backend(impl, d_pad >= 32, f"d_pad = {d_pad} < 32 (signs block under 128 bytes)")
    lead = x.shape[:-1]
    T = row_block(math.prod(lead), block_rows, impl)
    cdt = jnp.float32 if x.dtype == jnp.float32 else x.dtype
    if impl == "triton":
        T, b = _triton_blocks(d_pad, T, jnp.dtype(cdt).itemsize, shrink_rows=block_rows is None)
    x2, n = pad_rows(x, T)
    if impl == "mosaic":
        y = _rotate_mosaic(x2, s, d_pad, T, inverse, interpret)
        y = y[:n].reshape(*lead, d_pad)
        return y[..., :dim] if inverse else y
    a = d_pad // b
    h = jnp.asarray(hadamard_np(b), cdt)
    kernel = functools.partial(_rotate_kernel, inverse=inverse, b=b, a=a, scale=1.0 / math.sqrt(d_pad))
    y = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x2.shape, x.dtype),
        grid=(x2.shape[0] // T,),
        in_specs=[pl.BlockSpec((T, d_pad), lambda i: (i, 0)),
                  pl.BlockSpec((1, d_pad), lambda i: (0, 0)),
                  pl.BlockSpec((b, b), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((T, d_pad), lambda i: (i, 0)),
        compiler_params=compiler_params("triton"),
        interpret=interpret,
        name="kvstats_rotate",
    )(x2, s[None, :], h)
    y = y[:n].reshape(*lead, d_pad)
    return y[..., :dim] if inverse else y


def rotate_optional(x: jax.Array, signs: jax.Array | None, impl: str, interpret: bool | None) -> jax.Array:
    """:func:`rotate` by ``signs``, or ``x`` unchanged when ``signs`` is None (no rotation).

    Examples
    --------
    >>> x = jnp.ones((1, 8))
    >>> rotate_optional(x, None, "reference", None) is x
    True
    >>> rotate_optional(x, jnp.ones(8), "reference", None)[0, :2].tolist()  # H·1/√8: (√8, 0, ...)
    [2.8284270763397217, 0.0]
    """
    return x if signs is None else rotate(x, signs, impl=impl, interpret=interpret)


def unrotate_optional(y: jax.Array, signs: jax.Array | None, dim: int, impl: str,
                      interpret: bool | None) -> jax.Array:
    """The inverse of :func:`rotate_optional`, truncated to the first ``dim`` coordinates.

    Examples
    --------
    >>> s = jnp.asarray(np.where(np.arange(8) % 3 == 0, -1.0, 1.0))
    >>> x = jnp.arange(6.0)[None]  # d = 6, rotated in 8 coordinates
    >>> y = rotate_optional(x, s, "reference", None)
    >>> np.round(unrotate_optional(y, s, 6, "reference", None), 5).tolist()
    [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]
    """
    return y[..., :dim] if signs is None else rotate(y, signs, inverse=True, dim=dim, impl=impl,
                                                     interpret=interpret)
