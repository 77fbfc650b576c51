"""Shared helpers of the tests/gpu attention tests."""

import jax.numpy as jnp
import numpy as np

import kvstats
from kvstats.quant.sketch import make_sketch
from kvstats.quant.rotation import make_rotation
from kvstats_gpu.cache import CacheParams, CacheSpec
from kvstats_gpu.codebook import StaticCodebook


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
