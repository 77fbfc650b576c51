"""What the compiled kernels' bodies hold, read from their traced jaxprs at the runbook's
shapes (8 KV heads x 32k and 128k tokens, 32 query heads, d = 128; the device tests' small
kernels at 4,096 rows), through both backends: no gather or scatter (every kernel reads its
blocks by slices: docs/gpu.md), and every float32 dot in a Triton body at IEEE precision
(HIGHEST: Triton's default for float32 is TF32, whose 10-bit mantissa the interpreter never
shows and which the 1e-4 agreement bound of the device runs would not survive). The Mosaic
bodies have no dot at all (Mosaic GPU's Pallas lowering has none). No 64-bit type is
checked for: with jax's default ``jax_enable_x64=False`` none can arise, and under
``jax_enable_x64=True`` the bodies do hold int64 and float64 values (a documented limit)."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kvstats
from jax.extend.core import ClosedJaxpr, Jaxpr
from kvstats_gpu.bridge import make_cache_spec
from kvstats_gpu.cache import quantize_kv
from kvstats_gpu.codebook import StaticCodebook, decode_packed, encode_packed
from kvstats_gpu.decode import decode_attention
from kvstats_gpu.qjl import qjl_scores, qjl_sketch
from kvstats_gpu.rotation import rotate

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
    x = jnp.zeros((4096, 128))
    s = jnp.ones(128)
    cb = StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(4, "beta", dim=128))
    S = jnp.asarray(np.random.default_rng(0).normal(size=(128, 128)), jnp.float32)
    yield "rotate", lambda x: rotate(x, s, impl=backend, interpret=False), (x,)
    yield "rotate inverse", lambda x: rotate(x, s, inverse=True, impl=backend, interpret=False), (x,)
    yield "encode", lambda x: encode_packed(x, cb, impl=backend, interpret=False), (x,)
    yield "decode", lambda p: decode_packed(p, cb, impl=backend, interpret=False), (jnp.zeros((4096, 4, 16), jnp.uint8),)
    yield "qjl_sketch", lambda x: qjl_sketch(x, S, impl=backend, interpret=False), (x,)
    yield ("qjl_scores", lambda q, k, n: qjl_scores(q, k, n, S, impl=backend, interpret=False),
           (jnp.zeros((8, 4, 128)), jnp.zeros((8, 512, 16), jnp.uint8), jnp.ones((8, 512))))
    for name, bits in (("KQV", 4), ("QKQV", 3)):
        spec, params = make_cache_spec(name, bits, 128, seed=0)
        K = jnp.zeros((8, 32768, 128), jnp.bfloat16)
        yield f"quantize_kv {name}@{bits}", lambda K: quantize_kv(K, K, spec, params, impl=backend, interpret=False), (K,)
        for n in (32768, 131072):
            cache = quantize_kv(K[:, :8], K[:, :8], spec, params, impl="reference", capacity=n)
            yield (f"decode_attention {name}@{bits} {n}",
                   lambda q, c, spec=spec, params=params: decode_attention(q, c, spec, params, impl=backend,
                                                                           interpret=False),
                   (jnp.zeros((32, 128), jnp.bfloat16), cache))


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
        if label in ("rotate", "qjl_sketch") or label.startswith("decode_attention"):
            assert kernel_contents(fn, *args)["dot f32"] >= 1, label
