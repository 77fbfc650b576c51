"""K and V with the rows every coder must survive (shared by the registry contract suite
and the roundtrip tests)."""

import numpy as np


def kv(shape, dtype, seed):
    """K, V with the awkward rows: exact zeros, and norms that round to 0 in float16."""
    rng = np.random.default_rng(seed)
    K, V = (rng.standard_normal(shape) for _ in range(2))
    K[..., 7, :] = 0.0
    V[..., 11, :] = 0.0
    K[..., 8, :] *= 1e-10
    V[..., 3, :] *= 1e-10
    return K.astype(dtype), V.astype(dtype)
