"""Real model: SmolLM2-135M-Instruct, KV/query capture, a quantized transformers Cache.

Needs the ``models`` extra (torch, transformers, gguf, accelerate). Names are imported
lazily, so ``import kvstats.models`` does not import torch until one is used.
"""

from __future__ import annotations

from kvstats._lazy import lazy_exports

_EXPORTS = {
    "load_model": "kvstats.models.loader",
    "ensure_gguf": "kvstats.models.loader",
    "default_cache_dir": "kvstats.models.loader",
    "capture": "kvstats.models.kv_capture",
    "Capture": "kvstats.models.kv_capture",
    "tokenize_texts": "kvstats.models.kv_capture",
    "stdlib_texts": "kvstats.models.texts",
    "STDLIB_SOURCES": "kvstats.models.texts",
    "QuantizedCache": "kvstats.models.cache",
    "kl_quality": "kvstats.models.quality",
    "summarize_quality": "kvstats.models.quality",
    "pinned_threads": "kvstats.models.quality",
    "PEERS": "kvstats.models.peers",
    "make_peer_cache": "kvstats.models.peers",
    "held_bytes": "kvstats.models.peers",
    "memory_held": "kvstats.models.peers",
    "make_prompts": "kvstats.models.retrieval",
    "run_retrieval": "kvstats.models.retrieval",
    "summarize_retrieval": "kvstats.models.retrieval",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
