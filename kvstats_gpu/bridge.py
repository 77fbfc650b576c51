"""The bridge from the numpy core: a :func:`kvstats.make_scheme` scheme → GPU cache spec and parameters.

Same rotation signs, codebooks and sketch matrices as the numpy scheme, so the GPU codes
equal the numpy codes for the same inputs (up to float32 vs float64 rounding at
boundaries; see :mod:`kvstats_gpu.codebook`).
"""

from __future__ import annotations

import re
from typing import Any

import jax.numpy as jnp

from kvstats_gpu.cache import CacheParams, CacheSpec
from kvstats_gpu.codebook import StaticCodebook


def _quantizer_parts(q: Any, side: str) -> dict:
    """Rotation signs, codebook and sketch of a numpy MSEQuantizer / ProdQuantizer."""
    mse = getattr(q, "mse", None)
    sketch = getattr(q, "sketch", None)
    base = mse if mse is not None else q
    rot = getattr(base, "rotation", None)
    if rot is None or not hasattr(rot, "kind"):
        raise TypeError(f"the {side} quantizer {type(q).__name__} is not an MSE/prod quantizer "
                        "(the GPU path supports KV, KQV, QKQV, turboquant_mse, turboquant_prod, K{a}V{b})")
    if getattr(base, "draws", ()) not in ((), None) or (rot.signs is not None and rot.signs.ndim != 1):
        raise ValueError(f"the {side} quantizer must have one shared draw (draws=()) for a real cache")
    if rot.kind == "hadamard":
        signs = rot.signs
    elif rot.kind == "identity":
        signs = None
    else:
        raise ValueError(f"the GPU path supports rotation 'hadamard' or 'identity'; received {rot.kind!r}")
    cb = getattr(base, "codebook", None)
    if cb is None:
        from kvstats.quant.codebook import lloyd_max_codebook
        cb = lloyd_max_codebook(base.bits, "beta", dim=rot.out_dim)
    return {"signs": signs, "dpad": int(rot.out_dim), "codebook": StaticCodebook.from_codebook(cb),
            "sketch": None if sketch is None else sketch.matrix,
            "m": 0 if sketch is None else int(sketch.m),
            "scale": 0.0 if sketch is None else float(sketch.scale)}


def spec_from_scheme(scheme: Any) -> tuple[CacheSpec, CacheParams]:
    """The GPU cache spec and parameters of a numpy :func:`kvstats.make_scheme` scheme.

    Same rotation signs, codebooks and sketch matrices, so the GPU codes equal the numpy
    scheme's codes for the same inputs (up to float32 vs float64 rounding at boundaries).

    Examples
    --------
    >>> import kvstats
    >>> spec, params = spec_from_scheme(kvstats.make_scheme("KQV", 4, 64, seed=0))
    >>> spec.k_bits, spec.v_bits, spec.v_m
    (4, 3, 64)
    """
    k = _quantizer_parts(scheme.key_quantizer, "key")
    v = _quantizer_parts(scheme.value_quantizer, "value")
    if k["m"] % 8 or v["m"] % 8:
        raise ValueError(f"sketch rows must be multiples of 8 on the GPU path; received m = {k['m']}, {v['m']}")
    spec = CacheSpec(dim=int(scheme.dim), k_dpad=k["dpad"], v_dpad=v["dpad"], k_codebook=k["codebook"],
                     v_codebook=v["codebook"], k_m=k["m"], v_m=v["m"], k_scale=k["scale"],
                     v_scale=v["scale"], name=str(scheme.name))
    f32 = lambda a: None if a is None else jnp.asarray(a, jnp.float32)  # noqa: E731
    return spec, CacheParams(f32(k["signs"]), f32(v["signs"]), f32(k["sketch"]), f32(v["sketch"]))


def make_cache_spec(name: str, bits: Any, dim: int, seed: Any = 0, **params: Any) -> tuple[CacheSpec, CacheParams]:
    """Spec and parameters for a registered scheme: ``spec_from_scheme(make_scheme(...))``.

    Supported names: ``"KV"``, ``"KQV"``, ``"QKQV"``, ``"turboquant_mse"``,
    ``"turboquant_prod"`` and ``"K{a}V{b}"``; ``params`` as in :func:`kvstats.make_scheme`
    (rotation "hadamard" or "identity"; sketch; m a multiple of 8).

    Examples
    --------
    >>> spec, params = make_cache_spec("QKQV", 3, 128, seed=1)
    >>> sum(spec.bytes_per_token_head().values())
    104
    """
    supported = ("KV", "KQV", "QKQV", "turboquant_mse", "turboquant_prod")
    if not (isinstance(name, str) and (name in supported or re.fullmatch(r"K\d+V\d+", name))):
        raise ValueError(f"name must be one of {list(supported)} or 'K{{a}}V{{b}}'; received {name!r}")
    from kvstats.quant.schemes import make_scheme
    return spec_from_scheme(make_scheme(name, bits, dim, seed=seed, **params))

