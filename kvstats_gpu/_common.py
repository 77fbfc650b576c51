"""Shared machinery of kvstats_gpu: dispatch, validation, in-kernel matmuls, constants.

Dispatch rule (every public op takes ``impl`` and ``interpret``):

- ``impl="auto"``: the Pallas kernel when JAX's default backend is a GPU, else the plain
  ``jnp`` reference (XLA on the CPU is faster than the Pallas interpreter).
- ``impl="pallas"``: the kernel. ``interpret=None`` means "interpret unless on a GPU";
  ``interpret=True`` runs the kernel body through the Pallas interpreter (CPU tests);
  ``interpret=False`` off a GPU is only useful to *lower* for CUDA (the tests do
  ``jax.jit(f).trace(...).lower(lowering_platforms=("cuda",))``).
- ``impl="reference"``: the ``jnp`` reference.

GPU kernels use the Pallas Triton backend with explicit ``triton.CompilerParams``: in
jax 0.10.2 Mosaic GPU needs extra packages that are not installed here, and an explicit
Triton ``CompilerParams`` selects Triton regardless of ``jax_pallas_use_mosaic_gpu``.
Kernels only use contiguous 2-D block loads, static slices, shifts, compares and dots,
so a port to Mosaic GPU is mechanical.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import triton as pl_triton
from jax.typing import ArrayLike

from kvstats._checks import check_choice

IMPLS = ("auto", "pallas", "reference")

# Masked attention logits: finite so that exp(NEG - NEG) is 1, not NaN, and fully masked
# blocks are handled by an explicit select instead.
NEG = -1e30

# Triton's tl.dot needs every matmul dimension >= 16.
MIN_DOT = 16


def on_gpu() -> bool:
    """True when JAX's default backend is a GPU."""
    return jax.default_backend() == "gpu"


def resolve_impl(impl: str, interpret: bool | None) -> tuple[str, bool]:
    """Apply the dispatch rule; returns ``(impl, interpret)`` with impl "pallas" or "reference"."""
    check_choice(impl, "impl", IMPLS)
    if interpret is not None and not isinstance(interpret, bool):
        raise TypeError(f"interpret must be True, False or None; received {interpret!r}")
    if impl == "auto":
        impl = "pallas" if on_gpu() else "reference"
    if interpret is None:
        interpret = not on_gpu()
    return impl, interpret


def compiler_params(num_warps: int = 4, num_stages: int = 2) -> pl_triton.CompilerParams:
    """Triton compiler parameters (selects the Triton lowering explicitly)."""
    return pl_triton.CompilerParams(num_warps=num_warps, num_stages=num_stages)


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def hadamard_np(d: int) -> np.ndarray:
    """Sylvester Hadamard matrix of order d (a power of two), float32 +-1 entries."""
    h = np.ones((1, 1), dtype=np.float32)
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def dot_nt(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b.T`` inside a kernel, float32 accumulation.

    float32 operands use IEEE precision (HIGHEST): Triton's default for float32 is TF32,
    whose 10-bit mantissa would make scores depend on the GPU generation. bf16 operands
    use the tensor cores directly. Below Triton's 16-wide minimum the product is a
    broadcast multiply-sum (same result, no tensor cores).
    """
    if min(a.shape[0], b.shape[0], a.shape[1]) >= MIN_DOT:
        prec = jax.lax.Precision.HIGHEST if a.dtype == jnp.float32 else None
        return jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())), precision=prec,
                                   preferred_element_type=jnp.float32)
    return jnp.sum(a[:, None, :].astype(jnp.float32) * b[None, :, :].astype(jnp.float32), axis=-1)


def dot_nn(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` inside a kernel, float32 accumulation (see :func:`dot_nt`)."""
    if min(a.shape[0], b.shape[1], a.shape[1]) >= MIN_DOT:
        prec = jax.lax.Precision.HIGHEST if a.dtype == jnp.float32 else None
        return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), precision=prec,
                                   preferred_element_type=jnp.float32)
    return jnp.sum(a[:, :, None].astype(jnp.float32) * b[None, :, :].astype(jnp.float32), axis=1)


def as_jax_float(x: ArrayLike, name: str, *, min_ndim: int = 1) -> jax.Array:
    """Validate a float array (float32, bfloat16, float16 or float64→float32) for the GPU path."""
    if isinstance(x, jax.Array):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:
            raise TypeError(f"{name} must be a numeric array; received {type(x).__name__}") from exc
    dtype = np.dtype(arr.dtype) if not isinstance(arr, jax.Array) else arr.dtype
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise TypeError(f"{name} must be a real numeric array; received dtype {dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s); received shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"{name} must not be empty; received shape {arr.shape}")
    if dtype not in (jnp.float32, jnp.bfloat16, jnp.float16):
        arr = jnp.asarray(arr, jnp.float32)
    return jnp.asarray(arr)


def check_finite_concrete(x: jax.Array, name: str) -> None:
    """Raise for NaN/inf when ``x`` is concrete (skipped under tracing)."""
    if isinstance(x, jax.core.Tracer):
        return
    # numpy on the host: jnp ops would be staged (and un-testable) under jit
    if not np.isfinite(np.asarray(x, dtype=np.float32)).all():
        raise ValueError(f"{name} must be finite; received NaN/inf values in an array of shape {x.shape}")


def pad_rows(x: jax.Array, multiple: int) -> tuple[jax.Array, int]:
    """Flatten to 2-D ``(rows, last)`` and zero-pad rows to a multiple; returns (x2, rows)."""
    x2 = x.reshape(-1, x.shape[-1])
    n = x2.shape[0]
    n_pad = -(-n // multiple) * multiple
    if n_pad != n:
        x2 = jnp.pad(x2, ((0, n_pad - n), (0, 0)))
    return x2, n


def row_block(n_rows: int, block_rows: int | None) -> int:
    """Power-of-two row block, >= 16 (Triton dot minimum) and not far beyond n_rows."""
    if block_rows is None:
        return max(MIN_DOT, min(64, next_pow2(n_rows)))
    if not isinstance(block_rows, int) or isinstance(block_rows, bool) or not is_pow2(block_rows) \
            or block_rows < MIN_DOT:
        raise ValueError(f"block_rows must be a power of two >= {MIN_DOT}; received {block_rows!r}")
    return block_rows
