"""Shared helpers of the tests/gpu attention tests."""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr

import kvstats
from kvstats.quant.sketch import make_sketch
from kvstats.quant.rotation import make_rotation
from kvstats_gpu.cache import CacheParams, CacheSpec
from kvstats_gpu.codebook import StaticCodebook

# Shared memory of one sm_90 block (H100/H200), in bytes: what a compile there refuses past
SM90_SMEM = 232_448


def pallas_input_block_bytes(fn, *args):
    """The bytes of the input blocks of every ``pallas_call`` in ``fn``'s trace (nested
    jaxprs included): what one program keeps in SMEM for its dots, as Triton does."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                gm = eqn.params["grid_mapping"]
                blocks = gm.block_mappings[:gm.num_inputs]
                found.append(sum(math.prod(b.block_aval.shape) * b.block_aval.dtype.itemsize for b in blocks))
            for v in eqn.params.values():
                for sub in v if isinstance(v, (tuple, list)) else (v,):
                    if isinstance(sub, (ClosedJaxpr, Jaxpr)):
                        walk(getattr(sub, "jaxpr", sub))

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


def manual_spec(d, k_bits, v_bits, k_m, v_m, seed=0):
    """A spec from the numpy core's primitives (codebook, rotation, sketch), any combination."""
    cb = (lambda b: StaticCodebook.from_codebook(kvstats.lloyd_max_codebook(b, "beta", dim=d))
          if b else None)
    ks = make_sketch("gaussian", k_m, d, seed=seed + 3) if k_m else None
    vs = make_sketch("orthogonal", v_m, d, seed=seed + 4) if v_m else None
    spec = CacheSpec(dim=d, k_dpad=d, v_dpad=d, k_codebook=cb(k_bits), v_codebook=cb(v_bits), k_m=k_m,
                     v_m=v_m, k_scale=ks.scale if ks else 0.0, v_scale=vs.scale if vs else 0.0)
    f = lambda a: None if a is None else jnp.asarray(a, jnp.float32)  # noqa: E731
    return spec, CacheParams(f(make_rotation("hadamard", d, seed=seed + 1).signs),
                             f(make_rotation("hadamard", d, seed=seed + 2).signs),
                             f(None if ks is None else ks.matrix), f(None if vs is None else vs.matrix))


def _kv(H, N, d, G, seed=0, q_scale=1.0):
    rng = np.random.default_rng(seed)
    K, V = rng.normal(size=(2, H, N, d)).astype(np.float32)
    return K, V, (q_scale * rng.normal(size=(H * G, d))).astype(np.float32)


def cache_disagreement(cache, ref):
    """How far a backend's encode of a cache is from the reference encode of the same K, V:
    the fraction of mismatches per part (``{part: fraction}``), each to be compared with a
    small bound (the device test: 1e-4).

    Two float32 encodes that differ in summation order only (a kernel's FMAs against XLA's
    matmul) round a rotated coordinate differently by ~1e-7, which moves its code where it
    lies that close to a boundary, and a moved code moves the residual, hence about half the
    QJL sign bits of that token. So: bit planes, the fraction of bytes that differ; signs,
    the fraction of sign bytes that differ *in tokens whose codes agree* (a token whose code
    moved is counted once, under its planes); norms, the fraction off by more than 1e-3
    relative (one float16 step is at most 2^-10, about 9.8e-4, of the value).

    Measured on the CPU (2026-12-02) for the device test's data (8 heads x 32k tokens,
    KQV@4 and QKQV@3), one encode against the same arithmetic with its matmuls summed in
    reverse order: plane bytes 5.3e-6 to 6.7e-6, sign bytes of code-equal tokens 1.9e-6 to
    2.9e-6, norms 0; counting every sign byte instead gave 4.6e-5 to 6.1e-5 (a 1.6x margin
    under 1e-4), because ~1.1e-4 of the tokens have a moved code.
    """
    out = {}
    for side in ("k", "v"):
        planes, rplanes = getattr(cache, f"{side}_planes"), getattr(ref, f"{side}_planes")
        signs, rsigns = getattr(cache, f"{side}_signs"), getattr(ref, f"{side}_signs")
        moved = None
        if planes is not None:
            planes, rplanes = np.asarray(planes), np.asarray(rplanes)
            out[f"{side}_planes"] = float(np.mean(planes != rplanes))
            moved = np.any(planes != rplanes, axis=(1, 3))  # (H, C): a code of this token moved
        if signs is not None:
            signs, rsigns = np.asarray(signs), np.asarray(rsigns)
            kept = np.ones(signs.shape[:2], bool) if moved is None else ~moved
            out[f"{side}_signs"] = float(np.mean(signs[kept] != rsigns[kept]))
        for part in (f"{side}_norms", f"{side}_snorms"):
            x, y = getattr(cache, part), getattr(ref, part)
            if x is not None:
                x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
                out[part] = float(np.mean(np.abs(x - y) > 1e-3 * np.abs(y)))
    return out
