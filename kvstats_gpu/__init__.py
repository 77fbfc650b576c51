"""kvstats_gpu: JAX + Pallas kernels for KV-cache sketching, coding and scoring at model scale.

Never imported by :mod:`kvstats` (which stays numpy-only); importing this package
imports jax. Public names are loaded lazily from their modules.

Every op takes ``impl`` (``"auto"``: Pallas on a GPU, plain ``jnp`` reference elsewhere;
``"pallas"``; ``"reference"``) and ``interpret`` (``None``: interpret unless on a GPU).
See ``docs/gpu.md``.
"""

from __future__ import annotations

from kvstats._lazy import lazy_exports

_EXPORTS = {
    "rotate": "kvstats_gpu.rotation",
    "rotate_reference": "kvstats_gpu.rotation",
    "StaticCodebook": "kvstats_gpu.codebook",
    "encode_reference": "kvstats_gpu.codebook",
    "decode_reference": "kvstats_gpu.codebook",
    "encode_packed": "kvstats_gpu.codebook",
    "decode_packed": "kvstats_gpu.codebook",
    "pack_planes_reference": "kvstats_gpu.codebook",
    "unpack_planes_reference": "kvstats_gpu.codebook",
    "qjl_sketch": "kvstats_gpu.qjl",
    "qjl_sketch_reference": "kvstats_gpu.qjl",
    "qjl_scores": "kvstats_gpu.qjl",
    "qjl_scores_reference": "kvstats_gpu.qjl",
    "CacheSpec": "kvstats_gpu.attention",
    "CacheParams": "kvstats_gpu.attention",
    "QuantizedKVCache": "kvstats_gpu.attention",
    "make_cache_spec": "kvstats_gpu.attention",
    "quantize_kv": "kvstats_gpu.attention",
    "append_kv": "kvstats_gpu.attention",
    "dequantize_kv": "kvstats_gpu.attention",
    "decode_attention": "kvstats_gpu.attention",
    "dense_decode_attention": "kvstats_gpu.attention",
    "cache_bytes_per_token": "kvstats_gpu.attention",
    "spec_from_scheme": "kvstats_gpu.attention",
    "decode_partials": "kvstats_gpu.attention",
    "combine_partials": "kvstats_gpu.attention",
    "finalize_partials": "kvstats_gpu.attention",
    "Partials": "kvstats_gpu.attention",
    "sharded_decode_attention": "kvstats_gpu.sharding",
    "shard_cache": "kvstats_gpu.sharding",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
