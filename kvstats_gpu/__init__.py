"""kvstats_gpu: JAX + Pallas kernels for KV-cache sketching, coding and scoring at model scale.

Never imported by :mod:`kvstats` (which stays numpy-only); importing this package
imports jax. Public names are loaded lazily from their modules.

Every op takes ``impl`` (``"auto"``: Pallas on a GPU, plain ``jnp`` reference elsewhere;
``"pallas"``: the kernel through Mosaic GPU, or Triton for shapes Mosaic cannot take;
``"mosaic"``; ``"triton"``; ``"reference"``) and ``interpret`` (``None``: interpret
unless on a GPU). See ``docs/gpu.md``.
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
    "CacheSpec": "kvstats_gpu.cache",
    "CacheParams": "kvstats_gpu.cache",
    "QuantizedKVCache": "kvstats_gpu.cache",
    "quantize_kv": "kvstats_gpu.cache",
    "append_kv": "kvstats_gpu.cache",
    "dequantize_kv": "kvstats_gpu.cache",
    "cache_bytes_per_token": "kvstats_gpu.cache",
    "make_cache_spec": "kvstats_gpu.bridge",
    "spec_from_scheme": "kvstats_gpu.bridge",
    "spec_from_export": "kvstats_gpu.bridge",
    "gpu_schemes": "kvstats_gpu.bridge",
    "decode_attention": "kvstats_gpu.decode",
    "dense_decode_attention": "kvstats_gpu.decode",
    "decode_partials": "kvstats_gpu.decode",
    "combine_partials": "kvstats_gpu.decode",
    "finalize_partials": "kvstats_gpu.decode",
    "Partials": "kvstats_gpu.decode",
    "sharded_decode_attention": "kvstats_gpu.sharding",
    "shard_cache": "kvstats_gpu.sharding",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
