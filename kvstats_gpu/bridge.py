"""The typed bridge from the numpy core: a scheme's export → GPU cache spec and parameters.

A :func:`kvstats.make_scheme` scheme exports its parameters as plain arrays
(:meth:`Scheme.export() <kvstats.quant.schemes.Scheme.export>` →
:class:`~kvstats.quant.export.SchemeExport`: per side the randomized-Hadamard signs, the
Lloyd–Max centroids and boundaries, the QJL sketch and its constant); this module turns
them into a :class:`~kvstats_gpu.cache.CacheSpec` and :class:`~kvstats_gpu.cache.CacheParams`
and reads nothing else of the numpy coders. Which names the GPU path supports is the
registry's ``SchemeDef.gpu`` (:func:`kvstats.quant.registry.scheme_def`).

Same rotation signs, codebooks and sketch matrices as the numpy scheme, so the GPU cache
holds the numpy scheme's codes, QJL signs and float16 norms for the same inputs, up to
float32 (GPU) vs float64 (numpy) rounding: a rotated coordinate within float32 rounding
of a codebook boundary takes the neighbouring code (and with it the residual's signs
change), and a norm within float32 rounding of a float16 rounding midpoint is stored as
the neighbouring float16 (one float16 step, about 0.1%, and a different residual). Such
tokens are rare but not absent (QKQV@3, d = 96, 4000 random keys: 3 dequantize
differently, by up to 14% of the key's norm). See :mod:`kvstats_gpu.codebook`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from kvstats._checks import SeedLike
from kvstats.quant.export import SchemeExport, SideExport
from kvstats.quant.registry import REGISTRY, scheme_def
from kvstats.quant.schemes import Scheme, make_scheme
from kvstats_gpu.cache import CacheParams, CacheSpec
from kvstats_gpu.codebook import StaticCodebook

# The cache stores every norm in float16 (cache.py's layout).
_NORM_DTYPE = np.dtype(np.float16)


def gpu_schemes() -> list[str]:
    """Registry names the GPU path runs (``SchemeDef.gpu``); ``mixed`` is spelled ``K{a}V{b}``.

    Examples
    --------
    >>> gpu_schemes()
    ['KV', 'KQV', 'QKQV', 'turboquant_mse', 'turboquant_prod', 'mixed']
    """
    return [name for name, d in REGISTRY.items() if d.gpu]


def _side(ex: SideExport, side: str) -> tuple[StaticCodebook, int]:
    """Codebook and sketch rows of one side, checked against the cache's layout."""
    if ex.coder not in ("mse", "prod"):
        raise ValueError(f"the {side} coder must be 'mse' or 'prod' on the GPU path; received {ex.coder!r}")
    if np.dtype(ex.norm_dtype) != _NORM_DTYPE:
        raise ValueError(f"the {side} norm_dtype must be float16 (the GPU cache stores float16 norms); "
                         f"received {np.dtype(ex.norm_dtype).name}")
    if ex.dim_padded % 8:
        how = "unrotated" if ex.signs is None else "the Hadamard rotation's power of two"
        raise ValueError(f"dim = {ex.dim} is not supported on the GPU path: the {side}s code {ex.dim_padded} "
                         f"coordinates ({how}), and codes are stored 8 to a byte (a multiple of 8 is needed)")
    if ex.m % 8:
        raise ValueError(f"the {side} sketch rows m must be a multiple of 8 on the GPU path; received m = {ex.m}")
    return StaticCodebook.from_arrays(ex.centroids, ex.boundaries, bits=ex.bits), ex.m


def spec_from_export(ex: SchemeExport) -> tuple[CacheSpec, CacheParams]:
    """The GPU cache spec and parameters of a :class:`~kvstats.quant.export.SchemeExport`.

    Examples
    --------
    >>> import kvstats
    >>> spec, params = spec_from_export(kvstats.make_scheme("QKQV", 3, 96, seed=0).export())
    >>> spec.k_dpad, spec.k_bits, spec.k_m, params.k_sketch.shape
    (128, 2, 128, (128, 96))
    """
    if not isinstance(ex, SchemeExport):
        raise TypeError(f"ex must be a SchemeExport (Scheme.export()); received {type(ex).__name__}")
    k_cb, k_m = _side(ex.key, "key")
    v_cb, v_m = _side(ex.value, "value")
    spec = CacheSpec(dim=int(ex.dim), k_dpad=int(ex.key.dim_padded), v_dpad=int(ex.value.dim_padded),
                     k_codebook=k_cb, v_codebook=v_cb, k_m=k_m, v_m=v_m,
                     k_scale=float(ex.key.sketch_scale), v_scale=float(ex.value.sketch_scale), name=str(ex.name))
    f32 = lambda a: None if a is None else jnp.asarray(a, jnp.float32)  # noqa: E731
    return spec, CacheParams(f32(ex.key.signs), f32(ex.value.signs), f32(ex.key.sketch), f32(ex.value.sketch))


def spec_from_scheme(scheme: Scheme) -> tuple[CacheSpec, CacheParams]:
    """The GPU cache spec and parameters of a numpy :func:`kvstats.make_scheme` scheme.

    ``spec_from_export(scheme.export())``: same rotation signs, codebooks and sketch
    matrices, so the GPU codes, QJL signs and float16 norms equal the numpy scheme's for
    the same inputs, up to float32 vs float64 rounding (a code at a boundary, a norm at a
    float16 rounding midpoint; see the module docstring). Raises a ValueError for a scheme without a
    GPU export (registry ``SchemeDef.gpu``), independent draws or a Haar rotation.

    Examples
    --------
    >>> import kvstats
    >>> spec, params = spec_from_scheme(kvstats.make_scheme("KQV", 4, 64, seed=0))
    >>> spec.k_bits, spec.v_bits, spec.v_m
    (4, 3, 64)
    """
    if not isinstance(scheme, Scheme):
        raise TypeError(f"scheme must be a kvstats Scheme (make_scheme); received {type(scheme).__name__}")
    return spec_from_export(scheme.export())


def make_cache_spec(name: str, bits: float | None, dim: int, seed: SeedLike = 0,
                    **params: object) -> tuple[CacheSpec, CacheParams]:
    """Spec and parameters for a registered scheme: ``spec_from_scheme(make_scheme(...))``.

    Supported names: the registry's schemes with a GPU export (:func:`gpu_schemes`:
    ``"KV"``, ``"KQV"``, ``"QKQV"``, ``"turboquant_mse"``, ``"turboquant_prod"``, and
    ``mixed`` as ``"K{a}V{b}"``); ``params`` as in :func:`kvstats.make_scheme` (rotation
    "hadamard" or "identity"; sketch; m a multiple of 8; float16 norms). Keep the pair
    together: a cache quantized with them refuses other params, e.g. another seed's
    (:func:`~kvstats_gpu.cache_checks.params_fingerprint`).

    Examples
    --------
    >>> from kvstats_gpu.bridge import make_cache_spec
    >>> spec, params = make_cache_spec("QKQV", 3, 128, seed=1)
    >>> sum(spec.bytes_per_token_head().values())
    104
    """
    supported = f"{gpu_schemes()} (mixed as 'K{{a}}V{{b}}', a, b in 1..8)"
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, one of {supported}; received {type(name).__name__}")
    try:
        gpu = scheme_def(name).gpu
    except ValueError as exc:
        raise ValueError(f"name must be a scheme the GPU path supports, one of {supported}; "
                         f"received {name!r}") from exc
    if not gpu:
        raise ValueError(f"name must be a scheme the GPU path supports, one of {supported}; "
                         f"received {name!r} (no GPU export)")
    return spec_from_scheme(make_scheme(name, bits, dim, seed=seed, **params))
