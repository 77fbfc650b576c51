"""One entry point for a gridded Pallas kernel on either GPU backend, across jax versions.

Why this exists (read from the jax 0.11.2 wheel's source, 2026-12-01): jax 0.11 no longer
lowers ``pl.pallas_call`` through Mosaic GPU. Its CUDA lowering looks up a rule for the
type of ``compiler_params`` and only Triton (``pltriton.CompilerParams``) still registers
one; a ``plgpu.CompilerParams`` fails there (``assert rule is not None`` in
``jax/_src/pallas/pallas_call.py``). Mosaic GPU kernels are written with ``plgpu.kernel``
(the CUDA grid, parallel axes) around ``plgpu.emit_pipeline`` (the GMEM↔SMEM block copies
over the sequential axes), which is what jax's own test shim for ``pl.pallas_call``
(``jax/_src/pallas/mosaic_gpu/pallas_call.py``) does. Both functions exist, with the
arguments used here, in jax 0.10.2, so the compiled path below is the same on 0.10.2
(where tests/gpu lowers it for CUDA from a CPU) and on 0.11.2.

jax 0.11 also changed ``plgpu.CompilerParams``' default ``lowering_semantics`` from Lane to
Warpgroup; the bodies are written for Lane semantics (explicit register layouts), so it is
always passed.

:func:`grid_call` keeps ``pl.pallas_call``'s arguments: ``grid``, ``in_specs``,
``out_specs`` (``pl.BlockSpec``, ``None`` for squeezed dimensions), and for Mosaic
``dimension_semantics`` (``"parallel"`` axes become the CUDA grid, ``"sequential"`` ones
the pipeline). A sequential axis keeps its output blocks resident in SMEM while their
index does not change (one pipeline slot: ``max_concurrent_steps=1``, so an output block
that accumulates over the axis is the same buffer at every step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
from jax.experimental import pallas as pl

from kvstats._checks import check_choice

SEMANTICS = ("parallel", "sequential")


def lane_params(dimension_semantics: tuple[str, ...] | None = None):
    """``plgpu.CompilerParams`` with Lane lowering semantics (explicit in every jax version:
    0.10 defaults to Lane, 0.11 to Warpgroup). Deferred import: Mosaic needs ``absl-py``."""
    from jax.experimental.pallas import mosaic_gpu as plgpu
    return plgpu.CompilerParams(dimension_semantics=dimension_semantics,
                                lowering_semantics=plgpu.LoweringSemantics.Lane)


def grid_call(kernel: Callable[..., None], backend: str, *, out_shape, grid: tuple[int, ...],
              in_specs: Sequence[pl.BlockSpec], out_specs, interpret: bool, name: str,
              dimension_semantics: tuple[str, ...] | None = None, program_ids: bool = False,
              num_warps: int = 4, num_stages: int = 2) -> Callable[..., object]:
    """``pl.pallas_call(kernel, ...)`` for ``backend`` ``"triton"`` or ``"mosaic"``.

    Triton, and either backend interpreted (``interpret=True``), go through
    ``pl.pallas_call`` with the backend's compiler parameters. Compiled Mosaic goes through
    ``plgpu.kernel`` + ``plgpu.emit_pipeline`` (see the module docstring).
    ``program_ids=True`` calls ``kernel(ids, *refs)`` with ``ids`` the grid position
    (one int32 scalar per axis) instead of ``pl.program_id`` (which jax 0.11 deprecates
    inside Mosaic kernels); ``dimension_semantics`` applies to Mosaic only. Returns the
    callable of the arrays, like ``pl.pallas_call``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> def add_one(x_ref, o_ref):
    ...     o_ref[...] = x_ref[...] + 1.0
    >>> f = grid_call(add_one, "mosaic", out_shape=jax.ShapeDtypeStruct((128, 32), jnp.float32), grid=(2,),
    ...               in_specs=[pl.BlockSpec((64, 32), lambda i: (i, 0))],
    ...               out_specs=pl.BlockSpec((64, 32), lambda i: (i, 0)), interpret=True, name="add_one")
    >>> float(f(jnp.zeros((128, 32)))[127, 31])
    1.0
    """
    check_choice(backend, "backend", ("mosaic", "triton"))
    grid = tuple(grid)
    if dimension_semantics is not None:
        dimension_semantics = tuple(dimension_semantics)
        for s in dimension_semantics:
            check_choice(s, "dimension_semantics", SEMANTICS)
        if len(dimension_semantics) != len(grid):
            raise ValueError(f"dimension_semantics must have one entry per grid axis ({len(grid)}); "
                             f"received {dimension_semantics}")
    body = kernel
    if program_ids:
        def body(*refs):  # the interpreter and Triton know pl.program_id
            return kernel(tuple(pl.program_id(i) for i in range(len(grid))), *refs)
    if backend == "triton":
        from jax.experimental.pallas import triton as pl_triton  # deferred: deprecated, may be gone
        params = pl_triton.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    elif interpret:
        params = lane_params(dimension_semantics)
    else:
        return _mosaic_kernel_call(kernel, out_shape=out_shape, grid=grid, in_specs=tuple(in_specs),
                                   out_specs=out_specs, name=name, program_ids=program_ids,
                                   dimension_semantics=dimension_semantics)
    return pl.pallas_call(body, out_shape=out_shape, grid=grid, in_specs=list(in_specs), out_specs=out_specs,
                          compiler_params=params, interpret=interpret, name=name)


def _mosaic_kernel_call(kernel, *, out_shape, grid, in_specs, out_specs, name, program_ids,
                        dimension_semantics):
    """The compiled Mosaic path: parallel axes -> ``plgpu.kernel``'s grid (named axes read
    with ``lax.axis_index``), sequential axes -> ``plgpu.emit_pipeline``'s grid."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    sem = dimension_semantics or ("parallel",) * len(grid)
    par = [i for i, s in enumerate(sem) if s == "parallel"]
    seq = [i for i, s in enumerate(sem) if s != "parallel"]
    names = tuple(f"kvstats_{name}_{i}" for i in par)
    outs_tuple = isinstance(out_shape, (tuple, list))
    out_spec_list = list(out_specs) if outs_tuple else [out_specs]

    def full_index(seq_idx):
        """The position on the whole grid from the pipeline's indices."""
        pos = [None] * len(grid)
        for i, n in zip(par, names):
            pos[i] = jax.lax.axis_index(n)
        for i, v in zip(seq, seq_idx):
            pos[i] = v
        return tuple(pos)

    def on_pipeline(spec):
        # the pipeline's index maps see only the sequential indices
        return pl.BlockSpec(spec.block_shape, lambda *s, f=spec.index_map: f(*full_index(s)))

    def step(seq_idx, *refs):
        if program_ids:
            kernel(full_index(seq_idx), *refs)
        else:
            kernel(*refs)

    def body(*gmem_refs):
        plgpu.emit_pipeline(step, grid=tuple(grid[i] for i in seq), in_specs=[on_pipeline(s) for s in in_specs],
                            out_specs=[on_pipeline(s) for s in out_spec_list],
                            max_concurrent_steps=1)(*gmem_refs)

    body.__name__ = name  # plgpu.kernel names the kernel after its body
    return plgpu.kernel(body, out_type=tuple(out_shape) if outs_tuple else out_shape, compiler_params=lane_params(),
                        grid=tuple(grid[i] for i in par), grid_names=names)
