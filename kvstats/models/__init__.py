"""Real model: SmolLM2-135M-Instruct, KV/query capture, a quantized transformers Cache.

Needs the ``models`` extra (torch, transformers, gguf, accelerate). Names are imported
lazily, so ``import kvstats.models`` does not import torch until one is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_model": "kvstats.models.loader",
    "ensure_gguf": "kvstats.models.loader",
    "default_cache_dir": "kvstats.models.loader",
    "capture": "kvstats.models.capture",
    "Capture": "kvstats.models.capture",
    "tokenize_texts": "kvstats.models.capture",
    "stdlib_texts": "kvstats.models.texts",
    "STDLIB_SOURCES": "kvstats.models.texts",
    "QuantizedCache": "kvstats.models.cache",
    "kl_quality": "kvstats.models.quality",
    "summarize_quality": "kvstats.models.quality",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kvstats.models' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
