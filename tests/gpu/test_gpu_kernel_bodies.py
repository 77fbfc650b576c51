"""What the compiled kernels' bodies hold, read from their traced jaxprs at the runbook's
calls (tests/gpu/_runbook_calls.py: 8 KV heads x 32k and 128k tokens, 32 query heads,
d = 128; the bench's float32 check at 2 x 300; the device tests' small kernels at 4,096
rows), through both backends: no gather or scatter (every kernel reads its
blocks by slices: docs/gpu.md), and every float32 dot in a Triton body at IEEE precision
(HIGHEST: Triton's default for float32 is TF32, whose 10-bit mantissa the interpreter never
shows and which the 1e-4 agreement bound of the device runs would not survive). The Mosaic
bodies have no dot at all (Mosaic GPU's Pallas lowering has none). No 64-bit type is
checked for: with jax's default ``jax_enable_x64=False`` none can arise, and under
``jax_enable_x64=True`` the bodies do hold int64 and float64 values (a documented limit)."""

import collections

import jax
import jax.numpy as jnp
import pytest

from _runbook_calls import runbook_calls
from jax.extend.core import ClosedJaxpr, Jaxpr

KERNEL_CALLS = ("pallas_call", "mpmd_map")  # a Triton (or interpreted) kernel; a compiled Mosaic one


def _subjaxprs(eqn):
    for p in eqn.params.values():
        for sub in p if isinstance(p, (list, tuple)) else [p]:
            if isinstance(sub, ClosedJaxpr):
                yield sub.jaxpr
            elif isinstance(sub, Jaxpr):
                yield sub


def kernel_contents(fn, *args):
    """Counts over the bodies of every kernel ``fn(*args)`` launches: primitives by name,
    ``"dot f32"`` (float32 dots) and ``"dot f32 below HIGHEST"`` (those of them at another
    precision, TF32 on a GPU), and ``"kernels"``."""
    found = collections.Counter()

    def walk(jaxpr, inside):
        for e in jaxpr.eqns:
            if inside:
                found[e.primitive.name] += 1
                if e.primitive.name == "dot_general" and e.invars[0].aval.dtype == jnp.float32:
                    found["dot f32"] += 1
                    prec = e.params["precision"]
                    prec = prec if isinstance(prec, tuple) else (prec, prec)
                    if any(p != jax.lax.Precision.HIGHEST for p in prec):
                        found["dot f32 below HIGHEST"] += 1
            if e.primitive.name in KERNEL_CALLS:
                found["kernels"] += 1
            for sub in _subjaxprs(e):
                walk(sub, inside or e.primitive.name in KERNEL_CALLS)

    walk(jax.make_jaxpr(fn)(*args).jaxpr, False)
    return found


def _cases(backend):
    for label, (fn, args) in runbook_calls().items():
        yield label, lambda *a, fn=fn: fn(backend, *a), args


def test_kernel_bodies_have_no_gather_and_no_tf32(backend):
    for label, fn, args in _cases(backend):
        found = kernel_contents(fn, *args)
        assert found["kernels"] >= 1 and found["get"] + found["load"] >= 1, (label, found)  # a body was read
        assert not [k for k in found if "gather" in k or "scatter" in k], (label, found)
        if backend == "mosaic":
            assert found["dot_general"] == 0, (label, found)
        assert found["dot f32 below HIGHEST"] == 0, (label, found)
        if label.startswith("decode_attention"):
            assert found["exp"] >= 1 and found["select_n"] >= 1, (label, found)  # the softmax's body


@pytest.mark.parametrize("backend", ["triton"])
def test_the_triton_bodies_do_dot(backend):
    # the precision check above is not empty: the Triton rotation, sketch and decode dot
    for label, fn, args in _cases(backend):
        if label.startswith(("rotate (", "qjl_sketch", "decode_attention")):
            assert kernel_contents(fn, *args)["dot f32"] >= 1, label
