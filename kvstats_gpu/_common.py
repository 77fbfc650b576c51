"""Shared machinery of kvstats_gpu: dispatch, backends, validation, in-kernel helpers, constants.

Dispatch rule (every public op takes ``impl`` and ``interpret``):

- ``impl="auto"``: the Pallas kernel (default backend) when JAX's default backend is a
  GPU, else the plain ``jnp`` reference (XLA on the CPU is faster than the interpreter).
- ``impl="pallas"``: the kernel through the default Pallas GPU backend,
  :data:`DEFAULT_BACKEND` (``"mosaic"``), or through Triton for the few shapes Mosaic's
  block copies cannot move (:func:`kernel_backend`: rows of fewer than 16 bytes, i.e.
  d = 64 bit planes or m = 64 sign rows).
- ``impl="mosaic"`` / ``impl="triton"``: the kernel through that Pallas backend.
- ``impl="reference"``: the ``jnp`` reference.

``interpret=None`` means "interpret unless on a GPU"; ``interpret=True`` runs the kernel
body through the Pallas interpreter (CPU tests); ``interpret=False`` off a GPU is only
useful to *lower* for CUDA (``jax.jit(f).trace(...).lower(lowering_platforms=("cuda",))``).

Backends. Pallas has two GPU lowerings. **Mosaic GPU** (``plgpu.CompilerParams``; needs
``absl-py``) is the supported one; the **Triton** lowering (``triton.CompilerParams``) is
deprecated in newer JAX and kept as an option while it exists. Each kernel has one body
per backend, because the two accept different programs:

- Triton: 2-D blocks, ``dot`` on the tensor cores (every dimension >= 16).
- Mosaic GPU (jax 0.10.2, Lane semantics): no ``dot_general`` (matmuls only through
  ``plgpu.wgmma`` on SMEM tiles) and no ``sqrt``; register arrays carry layouts, so
  loads name them (:class:`KernelOps`); 2-D arrays are (rows multiple of 64) x (columns
  multiple of 8); GMEM<->SMEM block copies move a multiple of 128 bytes. The Mosaic
  bodies therefore compute products on the CUDA cores in IEEE float32: row reductions
  ``sum(x * broadcast(v), axis=1)`` for small query groups (decode attention, QJL
  scores) and outer-product accumulation ``acc += x[:, k] ⊗ W[k, :]`` for the
  sketch and the rotation.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from kvstats._checks import check_choice

IMPLS = ("auto", "pallas", "mosaic", "triton", "reference")
BACKENDS = ("mosaic", "triton")
# Every kernel lowers through Mosaic GPU (tests/gpu lower each one for CUDA through both).
DEFAULT_BACKEND = "mosaic"

# Masked attention logits: finite so that exp(NEG - NEG) is 1, not NaN, and fully masked
# blocks are handled by an explicit select instead.
NEG = -1e30

# Triton's tl.dot needs every matmul dimension >= 16.
MIN_DOT = 16
# SMEM bytes a program's blocks may take (encode kernels of both backends): under the
# 232,448 an sm_90 block has (227 KiB), with room for small blocks and barriers. An H200
# compile of a float32 (64, 256) tile beside a 256 x 256 matrix asked for 327,680 and failed.
SMEM_BUDGET = 200 * 1024
# Mosaic GPU's WGMMA register layout tiles rows by 64.
MOSAIC_ROWS = 64


def on_gpu() -> bool:
    """True when JAX's default backend is a GPU."""
    return jax.default_backend() == "gpu"


def resolve_impl(impl: str, interpret: bool | None) -> tuple[str, bool]:
    """Apply the dispatch rule; returns ``(impl, interpret)``, impl one of ``("pallas", "mosaic",
    "triton", "reference")`` (each kernel resolves ``"pallas"`` with :func:`kernel_backend`).

    Examples
    --------
    >>> resolve_impl("pallas", True)
    ('pallas', True)
    >>> resolve_impl("triton", False)
    ('triton', False)
    """
    check_choice(impl, "impl", IMPLS)
    if interpret is not None and not isinstance(interpret, bool):
        raise TypeError(f"interpret must be True, False or None; received {interpret!r}")
    if impl == "auto":
        impl = "pallas" if on_gpu() else "reference"
    if interpret is None:
        interpret = not on_gpu()
    return impl, interpret


def kernel_backend(impl: str, mosaic_ok: bool = True, why: str = "", triton_ok: bool = True,
                   triton_why: str = "") -> str:
    """The Pallas backend of one kernel call: ``"mosaic"`` or ``"triton"``.

    ``impl`` is a resolved impl other than "reference". ``mosaic_ok`` / ``triton_ok`` say
    whether this call's shapes fit Mosaic GPU / Triton (``why`` / ``triton_why`` say what
    does not, for the error). ``"pallas"`` gives :data:`DEFAULT_BACKEND` when the shapes
    fit it, else Triton; a backend asked for (or left as the only one) whose shapes do not
    fit is a ValueError naming the backends that can run the call (``impl="reference"``
    always can). The check holds in the interpreter too, which would run shapes that no
    GPU compiles.

    Examples
    --------
    >>> kernel_backend("pallas"), kernel_backend("pallas", False), kernel_backend("triton")
    ('mosaic', 'triton', 'triton')
    >>> kernel_backend("pallas", False, "rows of 12 bytes", False, "12-byte rows")
    Traceback (most recent call last):
    ...
    ValueError: impl='pallas' cannot run this call: neither Pallas backend takes its shapes (Mosaic GPU: rows of 12 bytes; Triton: 12-byte rows); use impl='reference'
    """
    check_choice(impl, "impl", ("pallas",) + BACKENDS)
    if impl == "pallas":
        if mosaic_ok or triton_ok:
            return DEFAULT_BACKEND if mosaic_ok else "triton"
        raise ValueError(f"impl='pallas' cannot run this call: neither Pallas backend takes its shapes "
                         f"(Mosaic GPU: {why}; Triton: {triton_why}); use impl='reference'")
    if impl == "mosaic" and not mosaic_ok:
        other = ("impl='triton' (or 'pallas', which falls back to Triton for such shapes)" if triton_ok
                 else f"impl='reference' (Triton cannot either: {triton_why})")
        raise ValueError(f"impl='mosaic' cannot run this call: {why}; use {other}")
    if impl == "triton" and not triton_ok:
        other = "impl='mosaic' (or 'pallas')" if mosaic_ok else f"impl='reference' (Mosaic GPU cannot either: {why})"
        raise ValueError(f"impl='triton' cannot run this call: {triton_why}; use {other}")
    return impl


def triton_sizes_ok(*sizes: int) -> bool:
    """Whether block dimensions of these sizes fit the Pallas Triton lowering, which takes
    only arrays whose dimensions are powers of two (a d = 96 key without a Hadamard
    rotation has bit-plane rows of 12 bytes: the interpreter runs it, Triton does not)."""
    return all(is_pow2(n) for n in sizes)


def mosaic_rows_ok(*row_bytes: int) -> bool:
    """Whether arrays whose rows (last axis) take these many bytes can be moved by Mosaic
    GPU's TMA block copies (every GMEM stride but the last a multiple of 16 bytes)."""
    return all(b % 16 == 0 for b in row_bytes)


def compiler_params(backend: str = "triton", num_warps: int = 4, num_stages: int = 2,
                    dimension_semantics: tuple[str, ...] | None = None):
    """Compiler parameters that select the backend's lowering explicitly.

    Triton: ``num_warps``/``num_stages``. Mosaic GPU: ``dimension_semantics`` (grid axes
    ``"parallel"`` or ``"sequential"``; a sequential axis runs inside one program and
    keeps its output blocks resident, which the decode kernel uses to carry its softmax
    state) and Lane lowering semantics (:func:`kvstats_gpu.mosaic_call.lane_params`). These
    are the interpreter's parameters: compiled Mosaic kernels run through
    :func:`kvstats_gpu.mosaic_call.grid_call`. The Mosaic import is deferred: it needs
    ``absl-py`` (the ``gpu`` extra).
    """
    check_choice(backend, "backend", BACKENDS)
    if backend == "triton":
        # imported here: a JAX that has dropped the deprecated Triton lowering still runs Mosaic
        from jax.experimental.pallas import triton as pl_triton
        return pl_triton.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    from kvstats_gpu.mosaic_call import lane_params
    return lane_params(dimension_semantics)


class KernelOps:
    """Loads, iotas and broadcasts of a Mosaic GPU kernel body, or their plain forms.

    Mosaic GPU register arrays carry layouts: a 2-D tile is ``WGMMA`` (rows multiple of
    64, columns multiple of 8), a vector along the columns is ``WGMMA.reduce(0)`` (it
    broadcasts over rows), a vector along the rows is ``WGMMA.reduce(1)`` (the result of
    a row reduction). ``plgpu.load`` names the layout. The Pallas interpreter does not
    know ``plgpu.load``, so with ``mosaic=False`` (interpreting) the same body uses plain
    ``ref[...]`` loads: the arithmetic checked in the interpreter is the arithmetic
    lowered for the GPU, only the load instructions differ.
    """

    def __init__(self, mosaic: bool):
        self.mosaic = mosaic

    def _load(self, ref, reduced_axis):
        if not self.mosaic:
            return ref[...]
        from jax.experimental.pallas import mosaic_gpu as plgpu
        layout = plgpu.Layout.WGMMA if reduced_axis is None else plgpu.Layout.WGMMA.reduce(reduced_axis)
        return mosaic_load(plgpu.load, ref, layout)

    def tile(self, ref) -> jax.Array:
        """A 2-D ``(rows, cols)`` block."""
        return self._load(ref, None)

    def cols(self, ref) -> jax.Array:
        """A 1-D vector indexed by column (broadcast along rows with :meth:`over_rows`)."""
        return self._load(ref, 0)

    def rows(self, ref) -> jax.Array:
        """A 1-D vector indexed by row (a row reduction's layout)."""
        return self._load(ref, 1)

    def iota_rows(self, n: int) -> jax.Array:
        """``arange(n)`` int32 in the row-vector layout."""
        if not self.mosaic:
            return jax.lax.broadcasted_iota(jnp.int32, (n,), 0)
        from jax.experimental.pallas import mosaic_gpu as plgpu
        return plgpu.broadcasted_iota(jnp.int32, (n,), 0, layout=plgpu.Layout.WGMMA.reduce(1))

    def zeros(self, shape: tuple[int, int]) -> jax.Array:
        """A float32 zero tile (a loop carry must start in the tile layout)."""
        z = jnp.zeros(shape, jnp.float32)
        if not self.mosaic:
            return z
        from jax.experimental.pallas import mosaic_gpu as plgpu
        return plgpu.layout_cast(z, plgpu.Layout.WGMMA)

    @staticmethod
    def over_rows(v: jax.Array, n_rows: int) -> jax.Array:
        """Column vector ``(n,)`` -> ``(n_rows, n)`` (one ``broadcast_in_dim``; Mosaic
        rejects the ``v[None, :]`` reshape)."""
        return jax.lax.broadcast_in_dim(v, (n_rows, v.shape[0]), (1,))

    @staticmethod
    def over_cols(v: jax.Array, n_cols: int) -> jax.Array:
        """Row vector ``(n,)`` -> ``(n, n_cols)``."""
        return jax.lax.broadcast_in_dim(v, (v.shape[0], n_cols), (0,))

    def rowdot(self, x: jax.Array, v: jax.Array) -> jax.Array:
        """``x @ v`` for a tile ``x`` and a column vector ``v``: float32 FMAs, a row vector."""
        return jnp.sum(x * self.over_rows(v, x.shape[0]), axis=1)

    def colsum(self, x: jax.Array, w: jax.Array) -> jax.Array:
        """``w @ x`` for a tile ``x`` and a row vector ``w``: a column vector."""
        return jnp.sum(x * self.over_cols(w, x.shape[1]), axis=0)

    def outer_matmul(self, x_ref, w_ref, n_rows: int, n_cols: int, row_scale=None) -> jax.Array:
        """``x @ w`` (float32, IEEE FMAs) as ``sum_k x[:, k] ⊗ w[k, :]``, one loop step per k.

        ``row_scale(k)``, when given, multiplies column ``k`` of ``x`` (a scalar).
        """
        def body(k, acc):
            xc = self.rows(x_ref.at[:, k]).astype(jnp.float32)
            if row_scale is not None:
                xc = xc * row_scale(k)
            wr = self.cols(w_ref.at[k]).astype(jnp.float32)
            return acc + self.over_cols(xc, n_cols) * self.over_rows(wr, n_rows)
        return jax.lax.fori_loop(0, x_ref.shape[1], body, self.zeros((n_rows, n_cols)))


def mosaic_load(load: Callable, ref, layout):
    """``plgpu.load`` of a whole ref in ``layout``, for the signatures of several jax versions.

    jax 0.10 takes a required index (``load(ref, (), layout=...)`` for the whole ref);
    later versions make the index optional (``idx=NotSpecified``) and then drop it
    (``load(src, *, layout, optimized)``), where passing ``()`` positionally would be a
    TypeError. ``optimized=False`` is passed where the version has it: the SMEM blocks carry
    no swizzle/tiling transforms, so Mosaic has no bank-conflict-free transfer plan for
    them; the plain path is correct, just slower.

    Examples
    --------
    >>> def load_010(src, idx, *, layout=None, optimized=True): return ("0.10", idx, optimized)
    >>> def load_new(src, *, layout=None, optimized=True): return ("new", optimized)
    >>> mosaic_load(load_010, "ref", "L"), mosaic_load(load_new, "ref", "L")
    (('0.10', (), False), ('new', False))
    """
    index_required, has_optimized = _load_signature(load)
    kwargs = {"layout": layout}
    if has_optimized:
        kwargs["optimized"] = False
    return load(ref, (), **kwargs) if index_required else load(ref, **kwargs)


@functools.lru_cache(maxsize=8)
def _load_signature(load: Callable) -> tuple[bool, bool]:
    """(whether ``load`` needs an index argument, whether it takes ``optimized``)."""
    params = inspect.signature(load).parameters
    idx = params.get("idx")
    required = idx is not None and idx.default is inspect.Parameter.empty
    return required, "optimized" in params


def batch_folded(fn, in_fold: tuple[int | None, ...], out_fold: tuple[int, ...]):
    """``fn`` (a Mosaic ``pallas_call``) with a ``vmap`` rule that folds the batch into an axis.

    Mosaic GPU's lowering has no batched grids (``vmap`` of a Mosaic ``pallas_call``
    fails in ``lower_pipelined_jaxpr_to_module`` with ``assert not
    grid_mapping.vmapped_dims``). Under ``vmap``, argument ``i`` has its batch merged into
    its axis ``in_fold[i]`` (rows, or KV heads), batch-major, ``fn`` runs once on the
    folded arrays, and output ``j`` is split back along ``out_fold[j]``. Arguments with
    ``in_fold[i] = None`` are shared constants (signs, Hadamard blocks, sketches); if one
    of them is batched, the rule runs ``fn`` once per batch element (``lax.map``).
    ``fn`` returns a tuple.

    Examples
    --------
    >>> f = batch_folded(lambda x, c: (x * c,), (0, None), (0,))
    >>> jax.vmap(f, in_axes=(0, None))(jnp.ones((2, 3, 4)), 2.0)[0].shape
    (2, 3, 4)
    """
    @jax.custom_batching.custom_vmap
    def call(*args):
        return fn(*args)

    @call.def_vmap
    def _rule(axis_size, in_batched, *args):
        B = axis_size
        if any(bt and ax is None for bt, ax in zip(in_batched, in_fold)):
            full = tuple(a if bt else jnp.broadcast_to(a, (B,) + jnp.shape(a)) for a, bt in zip(args, in_batched))
            out = jax.lax.map(lambda xs: call(*xs), full)
            return out, tuple(True for _ in out)
        folded = []
        for a, bt, ax in zip(args, in_batched, in_fold):
            if ax is not None:
                a = jnp.moveaxis(a if bt else jnp.broadcast_to(a, (B,) + a.shape), 0, ax)
                a = a.reshape(a.shape[:ax] + (B * a.shape[ax + 1],) + a.shape[ax + 2:])
            folded.append(a)
        out = call(*folded)
        out = tuple(jnp.moveaxis(o.reshape(o.shape[:k] + (B, o.shape[k] // B) + o.shape[k + 1:]), k, 0)
                    for o, k in zip(out, out_fold))
        return out, tuple(True for _ in out)

    return call


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


def as_jax_float(x: ArrayLike, name: str, *, min_ndim: int = 1, allow_empty: bool = False) -> jax.Array:
    """Validate a float array (float32, bfloat16, float16 or float64→float32) for the GPU path
    (non-empty unless ``allow_empty``)."""
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
    if 0 in arr.shape and not allow_empty:
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


def check_length(length: int | ArrayLike, name: str, *, low: int | None = None,
                 high: int | None = None) -> jax.Array:
    """A token count as an int32 scalar: a Python or numpy integer, or a 0-d integer array
    (a traced one passes unchecked). A concrete value must lie in ``[low, high]``; a float
    (``2.5`` would mask as 3 tokens) or a bool is a TypeError.

    Examples
    --------
    >>> int(check_length(np.int64(3), "length", low=1, high=10))
    3
    >>> check_length(2.5, "length", low=1)
    Traceback (most recent call last):
    ...
    TypeError: length must be an integer (an int or a 0-d integer array) in [1, inf]; received 2.5 (float)
    """
    bounded = "" if low is None and high is None else (
        f" in [{'-inf' if low is None else low}, {'inf' if high is None else high}]")
    arr = length if isinstance(length, jax.Array) else np.asarray(length)
    if arr.ndim != 0 or not jnp.issubdtype(arr.dtype, jnp.integer):
        shown = f"{length!r} ({type(length).__name__})" if arr.ndim == 0 else f"shape {arr.shape}, dtype {arr.dtype}"
        raise TypeError(f"{name} must be an integer (an int or a 0-d integer array){bounded}; received {shown}")
    if not isinstance(arr, jax.core.Tracer):
        value = int(arr)
        if (low is not None and value < low) or (high is not None and value > high):
            side = f">= {low}" if low is not None and value < low else f"<= {high}"
            raise ValueError(f"{name} must be {side}, an integer{bounded}; received {value}")
    return jnp.asarray(arr, jnp.int32)


def pad_rows(x: jax.Array, multiple: int) -> tuple[jax.Array, int]:
    """Flatten to 2-D ``(rows, last)`` and zero-pad rows to a multiple; returns (x2, rows)."""
    x2 = x.reshape(-1, x.shape[-1])
    n = x2.shape[0]
    n_pad = -(-n // multiple) * multiple
    if n_pad != n:
        x2 = jnp.pad(x2, ((0, n_pad - n), (0, 0)))
    return x2, n


def row_block(n_rows: int, block_rows: int | None, backend: str = "triton", name: str = "block_rows") -> int:
    """Power-of-two row block, >= 16 (Triton dot minimum; 64 for Mosaic's WGMMA layout)
    and not far beyond n_rows; ``name`` is the caller's argument, for the error."""
    low = MOSAIC_ROWS if backend == "mosaic" else MIN_DOT
    if block_rows is None:
        return max(low, min(64, next_pow2(n_rows)))
    if not isinstance(block_rows, int) or isinstance(block_rows, bool) or not is_pow2(block_rows) \
            or block_rows < low:
        raise ValueError(f"{name} must be a power of two >= {low} (backend {backend!r}); "
                         f"received {block_rows!r}")
    return block_rows
